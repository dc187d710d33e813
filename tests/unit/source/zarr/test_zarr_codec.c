/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/source/zarr/zarr_codec.c: chunks encoded here with the libraries
 * (blosc with each shuffle and compressor, zstd, gzip, zlib, crc32c,
 * stacked) decode to the elements; big-endian elements are swapped; a
 * chunk of the wrong size, truncated or corrupt is -EIO with a reason;
 * vlen-utf8 framing; blosc chunks decoded in parts; stacked stages
 * bounded. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <blosc.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "source/zarr/zarr.h"

#define N 1000

static void values(int32_t *v)
{
	for (int i = 0; i < N; i++)
		v[i] = i * 7 - 300;
}

static size_t deflate_to(int gzip, const void *src, size_t n, void *dst,
			 size_t cap)
{
	z_stream z = { 0 };
	assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, gzip ? 31 : 15, 8,
				      Z_DEFAULT_STRATEGY),
			 Z_OK);
	z.next_in = (Bytef *)src;
	z.avail_in = (uInt)n;
	z.next_out = dst;
	z.avail_out = (uInt)cap;
	assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
	size_t out = cap - z.avail_out;
	deflateEnd(&z);
	return out;
}

/* Encodes v with comp into out; @return stored bytes. */
static size_t encode(enum rfs_zarr_comp comp, int shuffle, const void *v,
		     size_t n, unsigned char *out, size_t cap)
{
	switch (comp) {
	case RFS_ZARR_BLOSC:
		return (size_t)blosc_compress_ctx(5, shuffle, 4, n, v, out, cap,
						  "lz4", 0, 1);
	case RFS_ZARR_ZSTD:
		return ZSTD_compress(out, cap, v, n, 3);
	case RFS_ZARR_GZIP:
	case RFS_ZARR_ZLIB:
		return deflate_to(comp == RFS_ZARR_GZIP, v, n, out, cap);
	case RFS_ZARR_CRC32C:
		break;
	}
	memcpy(out, v, n);
	uint32_t crc = rfs_zarr_crc32c(v, n);
	memcpy(out + n, &crc, 4);
	return n + 4;
}

static void test_each_codec(void **state)
{
	(void)state;
	static int32_t v[N], got[N];
	static unsigned char stored[N * 4 + 1024];
	char why[128];
	values(v);
	const struct {
		enum rfs_zarr_comp comp;
		int shuffle;
	} cases[] = { { RFS_ZARR_BLOSC, BLOSC_NOSHUFFLE },
		      { RFS_ZARR_BLOSC, BLOSC_SHUFFLE },
		      { RFS_ZARR_BLOSC, BLOSC_BITSHUFFLE },
		      { RFS_ZARR_ZSTD, 0 },
		      { RFS_ZARR_GZIP, 0 },
		      { RFS_ZARR_ZLIB, 0 },
		      { RFS_ZARR_CRC32C, 0 } };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t n = encode(cases[i].comp, cases[i].shuffle, v, sizeof(v),
				  stored, sizeof(stored));
		struct rfs_zarr_pipe p = { .ncomp = 1,
					   .comp = { cases[i].comp } };
		memset(got, 0, sizeof(got));
		assert_int_equal(rfs_zarr_decode(&p, stored, n, 4, sizeof(got),
						 got, NULL, NULL, why,
						 sizeof(why)),
				 0);
		assert_memory_equal(got, v, sizeof(v));
		/* A byte short: never served. */
		assert_int_equal(rfs_zarr_decode(&p, stored, n - 1, 4,
						 sizeof(got), got, NULL, NULL,
						 why, sizeof(why)),
				 -EIO);
		/* The chunk holds more than the metadata says. */
		assert_int_equal(rfs_zarr_decode(&p, stored, n, 4,
						 sizeof(got) - 4, got, NULL,
						 NULL, why, sizeof(why)),
				 -EIO);
		assert_non_null(strstr(why, "bytes"));
	}
}

static void test_blosc_compressors(void **state)
{
	(void)state;
	static int32_t v[N], got[N];
	static unsigned char stored[N * 4 + BLOSC_MAX_OVERHEAD];
	static const char *const cnames[] = { "blosclz", "lz4", "zlib",
					      "zstd" };
	struct rfs_zarr_pipe p = { .ncomp = 1, .comp = { RFS_ZARR_BLOSC } };
	char why[128];
	values(v);
	for (int i = 0; i < 4; i++) {
		int n = blosc_compress_ctx(5, BLOSC_SHUFFLE, 4, sizeof(v), v,
					   stored, sizeof(stored), cnames[i], 0,
					   1);
		assert_true(n > 0);
		memset(got, 0, sizeof(got));
		assert_int_equal(rfs_zarr_decode(&p, stored, (size_t)n, 4,
						 sizeof(got), got, NULL, NULL,
						 why, sizeof(why)),
				 0);
		assert_memory_equal(got, v, sizeof(v));
	}
}

static void test_stacked_and_big_endian(void **state)
{
	(void)state;
	static int32_t v[N], be[N], got[N];
	static unsigned char a[N * 4 + 1024], b[N * 4 + 1024];
	char why[128];
	values(v);
	for (int i = 0; i < N; i++)
		be[i] = (int32_t)__builtin_bswap32((uint32_t)v[i]);
	/* Encode order: zstd, then crc32c over the zstd frame. */
	size_t n = encode(RFS_ZARR_ZSTD, 0, be, sizeof(be), a, sizeof(a));
	n = encode(RFS_ZARR_CRC32C, 0, a, n, b, sizeof(b));
	struct rfs_zarr_pipe p = { .big_endian = 1,
				   .ncomp = 2,
				   .comp = { RFS_ZARR_ZSTD, RFS_ZARR_CRC32C } };
	assert_int_equal(rfs_zarr_decode(&p, b, n, 4, sizeof(got), got, NULL,
					 NULL, why, sizeof(why)),
			 0);
	assert_memory_equal(got, v, sizeof(v));
	b[3] ^= 1;
	assert_int_equal(rfs_zarr_decode(&p, b, n, 4, sizeof(got), got, NULL,
					 NULL, why, sizeof(why)),
			 -EIO);
	assert_non_null(strstr(why, "crc32c"));
	/* No codec: the stored bytes must be exactly the chunk. */
	struct rfs_zarr_pipe none = { 0 };
	assert_int_equal(rfs_zarr_decode(&none, v, sizeof(v), 4, sizeof(got),
					 got, NULL, NULL, why, sizeof(why)),
			 0);
	assert_int_equal(rfs_zarr_decode(&none, v, sizeof(v) - 4, 4,
					 sizeof(got), got, NULL, NULL, why,
					 sizeof(why)),
			 -EIO);
}

/* A stored chunk in memory, read by offset; counts the bytes read. */
struct stored {
	const unsigned char *p;
	size_t n, read;
};

static int read_mem(void *ctx, void *dst, size_t n, uint64_t off)
{
	struct stored *s = ctx;
	if (off > s->n || n > s->n - off)
		return -1;
	memcpy(dst, s->p + off, n);
	s->read += n;
	return 0;
}

/* Each range of int32 elements (first, count) of the chunk in st, which
 * decodes to the want bytes of v, decodes in part to v's elements; with
 * block given, a range within a block reads less than half the chunk. */
static void check_ranges(const struct rfs_zarr_pipe *p, struct stored *st,
			 const int32_t *v, size_t want,
			 const size_t (*ranges)[2], size_t nranges,
			 int32_t *got, size_t block)
{
	for (size_t i = 0; i < nranges; i++) {
		size_t at = ranges[i][0] * 4, len = ranges[i][1] * 4;
		memset(got, 0, want);
		st->read = 0;
		assert_int_equal(rfs_zarr_decode_part(p, 4, want, st->n,
						      read_mem, st, at, len,
						      got),
				 0);
		assert_memory_equal(got, v + ranges[i][0], len);
		if (block && len < block)
			assert_true(st->read < st->n / 2);
	}
}

/* A blosc chunk of 1,000 int32 in blocks of 64 elements: every range of
 * elements decodes alone to the chunk's bytes, reading only its blocks'
 * stored bytes (and the header), with blocks stored in order or not, or
 * stored uncompressed; big-endian elements are swapped. */
static void test_parts(void **state)
{
	(void)state;
	static int32_t v[N], be[N], got[N];
	static unsigned char c[N * 4 + 1024];
	values(v);
	for (int i = 0; i < N; i++)
		be[i] = (int32_t)__builtin_bswap32((uint32_t)v[i]);
	int n = blosc_compress_ctx(5, BLOSC_SHUFFLE, 4, sizeof(v), v, c,
				   sizeof(c), "lz4", 256, 1);
	assert_true(n > 0);
	struct rfs_zarr_pipe p = { .ncomp = 1, .comp = { RFS_ZARR_BLOSC } };
	struct stored st = { c, (size_t)n, 0 };
	assert_int_equal(
		rfs_zarr_part_bytes(&p, sizeof(v), st.n, read_mem, &st), 256);
	static const size_t ranges[][2] = { { 0, 1 },	 { 0, 64 },
					    { 63, 2 },	 { 100, 300 },
					    { 960, 40 }, { 999, 1 },
					    { 0, N },	 { 500, 64 } };
	/* Within two blocks: little of the chunk read. */
	check_ranges(&p, &st, v, sizeof(v), ranges,
		     sizeof(ranges) / sizeof(ranges[0]), got, 256);
	/* Big-endian elements. */
	n = blosc_compress_ctx(5, BLOSC_SHUFFLE, 4, sizeof(be), be, c,
			       sizeof(c), "lz4", 256, 1);
	st = (struct stored){ c, (size_t)n, 0 };
	p.big_endian = 1;
	assert_int_equal(rfs_zarr_decode_part(&p, 4, sizeof(v), st.n, read_mem,
					      &st, 400, 800, got),
			 0);
	assert_memory_equal(got, v + 100, 800);
	p.big_endian = 0;
	/* Not in parts (1): another codec, a size other than the chunk's,
	 * a range past it, stored bytes cut short; never bytes. */
	struct rfs_zarr_pipe zstd = { .ncomp = 1, .comp = { RFS_ZARR_ZSTD } };
	assert_int_equal(rfs_zarr_decode_part(&zstd, 4, sizeof(v), st.n,
					      read_mem, &st, 0, 4, got),
			 1);
	assert_int_equal(rfs_zarr_decode_part(&p, 4, sizeof(v) - 4, st.n,
					      read_mem, &st, 0, 4, got),
			 1);
	assert_int_equal(rfs_zarr_decode_part(&p, 4, sizeof(v), st.n, read_mem,
					      &st, sizeof(v) - 4, 8, got),
			 1);
	assert_int_equal(rfs_zarr_decode_part(&p, 4, sizeof(v), st.n - 1,
					      read_mem, &st, 0, 4, got),
			 1);
	/* Blocks 2 and 3 stored the other way round (as blosc's threads
	 * may store them), their offsets to match: read as stored. */
	n = blosc_compress_ctx(5, BLOSC_SHUFFLE, 4, sizeof(v), v, c, sizeof(c),
			       "lz4", 256, 1);
	static unsigned char r[N * 4 + 1024];
	uint32_t s2, s3, s4;
	memcpy(&s2, c + 16 + 4 * 2, 4);
	memcpy(&s3, c + 16 + 4 * 3, 4);
	memcpy(&s4, c + 16 + 4 * 4, 4);
	memcpy(r, c, (size_t)n);
	memcpy(r + s2, c + s3, s4 - s3);
	memcpy(r + s2 + (s4 - s3), c + s2, s3 - s2);
	uint32_t n3 = s2, n2 = s2 + (s4 - s3);
	memcpy(r + 16 + 4 * 2, &n2, 4);
	memcpy(r + 16 + 4 * 3, &n3, 4);
	st = (struct stored){ r, (size_t)n, 0 };
	check_ranges(&p, &st, v, sizeof(v), ranges,
		     sizeof(ranges) / sizeof(ranges[0]), got, 0);
	/* A block whose offset lies inside the table, or past the end:
	 * not in parts. */
	uint32_t bad = 20;
	memcpy(r + 16 + 4 * 2, &bad, 4);
	assert_int_equal(rfs_zarr_decode_part(&p, 4, sizeof(v), st.n, read_mem,
					      &st, 2 * 256, 4, got),
			 1);
	bad = (uint32_t)n;
	memcpy(r + 16 + 4 * 2, &bad, 4);
	assert_int_equal(rfs_zarr_decode_part(&p, 4, sizeof(v), st.n, read_mem,
					      &st, 2 * 256, 4, got),
			 1);
	/* Stored without compression (blosc's memcpy flag): read at the
	 * offset, big-endian too. */
	n = blosc_compress_ctx(0, BLOSC_NOSHUFFLE, 4, sizeof(be), be, c,
			       sizeof(c), "lz4", 256, 1);
	assert_int_equal(n, sizeof(v) + 16);
	st = (struct stored){ c, (size_t)n, 0 };
	p.big_endian = 1;
	assert_int_equal(
		rfs_zarr_part_bytes(&p, sizeof(v), st.n, read_mem, &st), 256);
	st.read = 0;
	assert_int_equal(rfs_zarr_decode_part(&p, 4, sizeof(v), st.n, read_mem,
					      &st, 12, 400, got),
			 0);
	assert_memory_equal(got, v + 3, 400);
	assert_int_equal(st.read, 16 + 400);
}

/* Blocks that blosc splits into one stream per byte of the element
 * (blosclz, 64 KiB blocks of int32), and the chunk's short last block,
 * which it stores unsplit: alone, within it, with the block before it. */
static void test_parts_split_blocks(void **state)
{
	(void)state;
	enum { M = 40000 }; /* two 64 KiB blocks and 28,928 bytes */
	static int32_t v[M], got[M];
	static unsigned char c[M * 4 + 1024];
	for (int i = 0; i < M; i++)
		v[i] = (int32_t)(((uint32_t)i * 2654435761u) >> 20);
	int n = blosc_compress_ctx(5, BLOSC_SHUFFLE, 4, sizeof(v), v, c,
				   sizeof(c), "blosclz", 16384, 1);
	assert_true(n > 0);
	assert_int_equal(c[2] & 0x10, 0); /* split */
	struct rfs_zarr_pipe p = { .ncomp = 1, .comp = { RFS_ZARR_BLOSC } };
	struct stored st = { c, (size_t)n, 0 };
	assert_int_equal(
		rfs_zarr_part_bytes(&p, sizeof(v), st.n, read_mem, &st), 65536);
	static const size_t ranges[][2] = { { 32768, 7232 },
					    { 33000, 10 },
					    { 16384, 23616 },
					    { 100, 50 },
					    { 0, M } };
	check_ranges(&p, &st, v, sizeof(v), ranges,
		     sizeof(ranges) / sizeof(ranges[0]), got, 0);
}

/* Stacked codecs: a stage before the last may hold at most what the
 * next one's encoding of the chunk may take (twice and a megabyte), so a
 * crafted chunk whose outer codec inflates to far more is -EIO without
 * allocating it, whether the outer stream says its size (zstd) or not
 * (gzip); an honest stack decodes. */
static void test_stacked_stage_bound(void **state)
{
	(void)state;
	static int32_t v[N], got[N];
	static unsigned char inner[N * 4 + 1024], stored[N * 4 + 4096];
	size_t big = (size_t)8 << 20; /* 8 MiB of zeros: no chunk's stage */
	unsigned char *zeros = calloc(1, big);
	unsigned char *bomb = malloc(big);
	char why[160];
	assert_non_null(zeros);
	assert_non_null(bomb);
	values(v);
	size_t n = encode(RFS_ZARR_BLOSC, BLOSC_SHUFFLE, v, sizeof(v), inner,
			  sizeof(inner));
	n = encode(RFS_ZARR_GZIP, 0, inner, n, stored, sizeof(stored));
	struct rfs_zarr_pipe gz = { .ncomp = 2,
				    .comp = { RFS_ZARR_BLOSC, RFS_ZARR_GZIP } };
	assert_int_equal(rfs_zarr_decode(&gz, stored, n, 4, sizeof(got), got,
					 NULL, NULL, why, sizeof(why)),
			 0);
	assert_memory_equal(got, v, sizeof(v));
	/* gzip of 8 MiB for a 4,000-byte chunk: stops at 2 x 4,000 + 1 MiB */
	n = deflate_to(1, zeros, big, bomb, big);
	assert_int_equal(rfs_zarr_decode(&gz, bomb, n, 4, sizeof(got), got,
					 NULL, NULL, why, sizeof(why)),
			 -EIO);
	assert_non_null(strstr(why, "more bytes than the chunk holds"));
	/* zstd saying 8 MiB: refused before the stage is allocated. */
	struct rfs_zarr_pipe zs = { .ncomp = 2,
				    .comp = { RFS_ZARR_BLOSC, RFS_ZARR_ZSTD } };
	n = ZSTD_compress(bomb, big, zeros, big, 1);
	assert_false(ZSTD_isError(n));
	assert_int_equal(rfs_zarr_decode(&zs, bomb, n, 4, sizeof(got), got,
					 NULL, NULL, why, sizeof(why)),
			 -EIO);
	assert_non_null(strstr(why, "over the"));
	free(zeros);
	free(bomb);
}

/* Strings' chunks have no known size: the buffer grows to fit. */
static void test_unknown_size_grows(void **state)
{
	(void)state;
	static unsigned char zeros[1 << 20], stored[1 << 16];
	char why[128];
	for (int c = RFS_ZARR_GZIP; c <= RFS_ZARR_ZLIB; c++) {
		size_t n = encode((enum rfs_zarr_comp)c, 0, zeros,
				  sizeof(zeros), stored, sizeof(stored));
		assert_true(n * 4 + 4096 < sizeof(zeros));
		struct rfs_zarr_pipe p = { .ncomp = 1,
					   .comp = { (enum rfs_zarr_comp)c } };
		void *out = NULL;
		size_t len = 0;
		assert_int_equal(rfs_zarr_decode(&p, stored, n, 0, 0, NULL,
						 &out, &len, why, sizeof(why)),
				 0);
		assert_int_equal(len, sizeof(zeros));
		assert_memory_equal(out, zeros, len);
		free(out);
	}
}

static void test_garbage_is_eio(void **state)
{
	(void)state;
	unsigned char junk[64];
	int32_t got[16];
	char why[128];
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (unsigned char)(i * 37 + 11);
	for (int c = RFS_ZARR_BLOSC; c <= RFS_ZARR_ZLIB; c++) {
		struct rfs_zarr_pipe p = { .ncomp = 1,
					   .comp = { (enum rfs_zarr_comp)c } };
		why[0] = '\0';
		assert_int_equal(rfs_zarr_decode(&p, junk, sizeof(junk), 4,
						 sizeof(got), got, NULL, NULL,
						 why, sizeof(why)),
				 -EIO);
		assert_true(why[0] != '\0');
	}
}

static void test_crc32c_known_value(void **state)
{
	(void)state;
	/* The check value of CRC-32C (RFC 3720). */
	assert_int_equal(rfs_zarr_crc32c("123456789", 9), 0xE3069283u);
}

static void put32(unsigned char *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static void test_vlen_utf8(void **state)
{
	(void)state;
	unsigned char b[64];
	char **s;
	put32(b, 3);
	put32(b + 4, 2);
	memcpy(b + 8, "ab", 2);
	put32(b + 10, 0);
	put32(b + 14, 3);
	memcpy(b + 18, "\xc3\xa9z", 3);
	assert_int_equal(rfs_zarr_vlen_utf8(b, 21, 3, &s), 0);
	assert_string_equal(s[0], "ab");
	assert_string_equal(s[1], "");
	assert_string_equal(s[2], "\xc3\xa9z");
	for (int i = 0; i < 3; i++)
		free(s[i]);
	free(s);
	/* The first two of three (an edge chunk's padding dropped). */
	assert_int_equal(rfs_zarr_vlen_utf8(b, 21, 2, &s), 0);
	free(s[0]);
	free(s[1]);
	free(s);
	assert_int_equal(rfs_zarr_vlen_utf8(b, 20, 3, &s), -EIO);
	assert_int_equal(rfs_zarr_vlen_utf8(b, 21, 4, &s), -EIO);
	put32(b + 14, 0x7fffffff);
	assert_int_equal(rfs_zarr_vlen_utf8(b, 21, 3, &s), -EIO);
}

/* A header saying more than any encoder makes of the stored bytes (a
 * strings chunk's stage, whose size is the header's) is refused before
 * the stage is allocated; zstd's densest frame, of zeros, still decodes. */
static void test_claimed_size_bound(void **state)
{
	(void)state;
	char why[160];
	void *out = NULL;
	size_t len = 0;
	/* 16 bytes of blosc header saying 1.5 GiB */
	unsigned char head[16] = { 2, 1, 1, 1 };
	put32(head + 4, 0x60000000u);
	put32(head + 8, 0x10000u);
	put32(head + 12, sizeof(head));
	struct rfs_zarr_pipe bl = { .ncomp = 1, .comp = { RFS_ZARR_BLOSC } };
	assert_int_equal(rfs_zarr_decode(&bl, head, sizeof(head), 0, 0, NULL,
					 &out, &len, why, sizeof(why)),
			 -EIO);
	assert_non_null(strstr(why, "more than any encoder"));
	/* a zstd frame saying 1.5 GiB, with an empty last block */
	unsigned char frame[18] = { 0x28, 0xb5, 0x2f, 0xfd, 0xe0 };
	put32(frame + 5, 0x60000000u);
	frame[13] = 1; /* a last raw block of 0 bytes */
	struct rfs_zarr_pipe zs = { .ncomp = 1, .comp = { RFS_ZARR_ZSTD } };
	assert_int_equal(rfs_zarr_decode(&zs, frame, sizeof(frame), 0, 0, NULL,
					 &out, &len, why, sizeof(why)),
			 -EIO);
	assert_non_null(strstr(why, "more than any encoder"));
	/* What stored bytes may decode to: raw bytes as they are, each
	 * compressing stage 65536 times more, crc32c nothing. */
	struct rfs_zarr_pipe raw = { .ncomp = 1, .comp = { RFS_ZARR_CRC32C } };
	assert_true(rfs_zarr_decoded_max(&raw, 64) == 64);
	assert_true(rfs_zarr_decoded_max(&zs, 64) == 64 * 65536);
	struct rfs_zarr_pipe two = {
		.ncomp = 2, .comp = { RFS_ZARR_BLOSC, RFS_ZARR_ZSTD }
	};
	assert_true(rfs_zarr_decoded_max(&two, UINT64_C(1) << 40) ==
		    UINT64_MAX);
	/* 8 MiB of zeros, as zstd stores them */
	size_t big = (size_t)8 << 20;
	unsigned char *zeros = calloc(1, big), *stored = malloc(1 << 16);
	assert_non_null(zeros);
	assert_non_null(stored);
	size_t n = ZSTD_compress(stored, 1 << 16, zeros, big, 19);
	assert_false(ZSTD_isError(n));
	assert_int_equal(rfs_zarr_decode(&zs, stored, n, 0, 0, NULL, &out, &len,
					 why, sizeof(why)),
			 0);
	assert_int_equal(len, big);
	assert_memory_equal(out, zeros, big);
	free(out);
	free(zeros);
	free(stored);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_each_codec),
		cmocka_unit_test(test_blosc_compressors),
		cmocka_unit_test(test_stacked_and_big_endian),
		cmocka_unit_test(test_parts),
		cmocka_unit_test(test_parts_split_blocks),
		cmocka_unit_test(test_stacked_stage_bound),
		cmocka_unit_test(test_unknown_size_grows),
		cmocka_unit_test(test_garbage_is_eio),
		cmocka_unit_test(test_crc32c_known_value),
		cmocka_unit_test(test_vlen_utf8),
		cmocka_unit_test(test_claimed_size_bound),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
