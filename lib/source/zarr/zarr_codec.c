/* SPDX-License-Identifier: MIT */
/*
 * Decoding one stored zarr chunk. The codecs are the libraries': blosc
 * through blosc_decompress_ctx (thread-safe, no global state), zstd,
 * zlib for gzip and zlib streams. A chunk's decoded size is known from
 * its metadata, so the last stage decodes straight into the caller's
 * buffer and any other size is an error, never bytes served; a stage
 * before it (codecs stacked) may hold what an encoder could have made of
 * the next, so a crafted chunk cannot make a thread hold gigabytes.
 */
#include "source/zarr/zarr.h"

#include <blosc.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "core/buf.h"

/* Strings have no known size: they may grow to this. */
#define DECODED_MAX (UINT64_C(1) << 31)

static const char *comp_name(enum rfs_zarr_comp c)
{
	switch (c) {
	case RFS_ZARR_BLOSC:
		return "blosc";
	case RFS_ZARR_ZSTD:
		return "zstd";
	case RFS_ZARR_GZIP:
		return "gzip";
	case RFS_ZARR_ZLIB:
		return "zlib";
	case RFS_ZARR_CRC32C:
		break;
	}
	return "crc32c";
}

/* Built once: filled by each thread's first call, it was written by one
 * while another that saw it ready read it (a race ThreadSanitizer found,
 * however equal the values). */
static uint32_t crc32c_table[256];
static pthread_once_t crc32c_once = PTHREAD_ONCE_INIT;

static void make_crc32c_table(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
		crc32c_table[i] = c;
	}
}

uint32_t rfs_zarr_crc32c(const void *p, size_t n)
{
	const unsigned char *b = p;
	pthread_once(&crc32c_once, make_crc32c_table);
	uint32_t crc = 0xFFFFFFFFu;
	for (size_t i = 0; i < n; i++)
		crc = crc32c_table[(crc ^ b[i]) & 0xFF] ^ (crc >> 8);
	return crc ^ 0xFFFFFFFFu;
}

/* One stage into dst (cap bytes): *got the bytes it decoded. */
static int blosc_stage(const void *src, size_t n, void *dst, size_t cap,
		       size_t *got, char *why, size_t whylen)
{
	size_t nbytes = 0;
	if (blosc_cbuffer_validate(src, n, &nbytes) != 0) {
		snprintf(why, whylen, "is not a valid blosc buffer");
		return -EIO;
	}
	if (nbytes > cap) {
		snprintf(why, whylen, "decodes (blosc) to %zu bytes, over %zu",
			 nbytes, cap);
		return -EIO;
	}
	int r = blosc_decompress_ctx(src, dst, cap, 1);
	if (r < 0 || (size_t)r != nbytes) {
		snprintf(why, whylen, "does not decode (blosc error %d)", r);
		return -EIO;
	}
	*got = (size_t)r;
	return 0;
}

static int zstd_stage(const void *src, size_t n, void *dst, size_t cap,
		      size_t *got, char *why, size_t whylen)
{
	/* Streaming: a frame may not record its size. */
	ZSTD_DCtx *z = ZSTD_createDCtx();
	ZSTD_inBuffer in = { src, n, 0 };
	ZSTD_outBuffer out = { dst, cap, 0 };
	size_t r = 1;
	if (!z)
		return -ENOMEM;
	while (r != 0 && !ZSTD_isError(r)) {
		size_t before_in = in.pos, before_out = out.pos;
		r = ZSTD_decompressStream(z, &out, &in);
		if (r != 0 && in.pos == before_in && out.pos == before_out)
			break; /* no progress: truncated, or out of room */
	}
	ZSTD_freeDCtx(z);
	if (ZSTD_isError(r)) {
		snprintf(why, whylen, "does not decode (zstd: %s)",
			 ZSTD_getErrorName(r));
		return -EIO;
	}
	if (r != 0) {
		snprintf(why, whylen,
			 out.pos == cap ? "decodes (zstd) to over %zu bytes" :
					  "is a truncated zstd frame (%zu)",
			 cap);
		return out.pos == cap ? -ENOSPC : -EIO;
	}
	if (in.pos != n) {
		snprintf(why, whylen, "has %zu bytes after its zstd frame",
			 n - in.pos);
		return -EIO;
	}
	*got = out.pos;
	return 0;
}

static int zlib_stage(int gzip, const void *src, size_t n, void *dst,
		      size_t cap, size_t *got, char *why, size_t whylen)
{
	z_stream z = { 0 };
	if (inflateInit2(&z, gzip ? 15 + 16 : 15) != Z_OK)
		return -ENOMEM;
	z.next_in = (Bytef *)src;
	z.next_out = dst;
	int r = Z_OK;
	size_t left_in = n, left_out = cap;
	/* avail_* are 32-bit: feed in pieces. */
	while (r == Z_OK) {
		uInt in_step = left_in > UINT32_MAX ? UINT32_MAX : left_in;
		uInt out_step = left_out > UINT32_MAX ? UINT32_MAX : left_out;
		z.avail_in = in_step;
		z.avail_out = out_step;
		r = inflate(&z, Z_NO_FLUSH);
		left_in -= in_step - z.avail_in;
		left_out -= out_step - z.avail_out;
		if (r == Z_OK && in_step == z.avail_in &&
		    out_step == z.avail_out)
			r = Z_BUF_ERROR;
	}
	inflateEnd(&z);
	if (r != Z_STREAM_END) {
		snprintf(why, whylen, "does not decode (%s: %s)",
			 gzip ? "gzip" : "zlib",
			 left_out == 0	  ? "more bytes than the chunk holds" :
			 r == Z_BUF_ERROR ? "truncated" :
					    "corrupt stream");
		return left_out == 0 ? -ENOSPC : -EIO;
	}
	if (left_in != 0) {
		snprintf(why, whylen, "has %zu bytes after its %s stream",
			 left_in, gzip ? "gzip" : "zlib");
		return -EIO;
	}
	*got = cap - left_out;
	return 0;
}

static int stage(enum rfs_zarr_comp c, const void *src, size_t n, void *dst,
		 size_t cap, size_t *got, char *why, size_t whylen)
{
	switch (c) {
	case RFS_ZARR_BLOSC:
		return blosc_stage(src, n, dst, cap, got, why, whylen);
	case RFS_ZARR_ZSTD:
		return zstd_stage(src, n, dst, cap, got, why, whylen);
	case RFS_ZARR_GZIP:
	case RFS_ZARR_ZLIB:
		return zlib_stage(c == RFS_ZARR_GZIP, src, n, dst, cap, got,
				  why, whylen);
	case RFS_ZARR_CRC32C:
		break;
	}
	if (n < 4) {
		snprintf(why, whylen, "is shorter than its crc32c");
		return -EIO;
	}
	uint32_t stored;
	memcpy(&stored, (const unsigned char *)src + n - 4, 4);
	if (stored != rfs_zarr_crc32c(src, n - 4)) {
		snprintf(why, whylen, "fails its crc32c check");
		return -EIO;
	}
	if (n - 4 > cap) {
		snprintf(why, whylen, "holds %zu bytes, over %zu", n - 4, cap);
		return -EIO;
	}
	memcpy(dst, src, n - 4);
	*got = n - 4;
	return 0;
}

/* What a stage decodes to, when blosc's or zstd's header says it (or
 * crc32c's), else SIZE_MAX. */
static size_t stage_cap(enum rfs_zarr_comp c, const void *src, size_t n)
{
	size_t nbytes = 0;
	if (c == RFS_ZARR_CRC32C)
		return n;
	if (c == RFS_ZARR_BLOSC && blosc_cbuffer_validate(src, n, &nbytes) == 0)
		return nbytes;
	if (c == RFS_ZARR_ZSTD) {
		unsigned long long z = ZSTD_getFrameContentSize(src, n);
		if (z != ZSTD_CONTENTSIZE_UNKNOWN &&
		    z != ZSTD_CONTENTSIZE_ERROR && z <= SIZE_MAX)
			return (size_t)z;
	}
	return SIZE_MAX;
}

/* The most bytes a stage's encoding of n bytes may take: blosc, zstd and
 * deflate add little to incompressible bytes (blosc 16 bytes, zstd and
 * zlib well under 1 %), so twice the bytes and a megabyte passes every
 * encoder's output and stops a crafted stage from growing a chunk's
 * intermediate bytes past that. */
static size_t encoded_max(enum rfs_zarr_comp c, size_t n)
{
	if (c == RFS_ZARR_CRC32C)
		return n + 4;
	return n < DECODED_MAX ? 2 * n + (1u << 20) : DECODED_MAX;
}

/* The most bytes a stage decodes per stored byte: zstd's densest frames
 * (blocks of one repeated byte) hold about 32768, blosc's codecs and
 * deflate far fewer. A header that says more is not what an encoder
 * wrote, and is not worth its allocation. */
#define RATIO_MAX 65536

uint64_t rfs_zarr_decoded_max(const struct rfs_zarr_pipe *p, uint64_t stored)
{
	uint64_t most = stored;
	for (int i = 0; i < p->ncomp; i++)
		if (p->comp[i] != RFS_ZARR_CRC32C)
			most = most > UINT64_MAX / RATIO_MAX ? UINT64_MAX :
							       most * RATIO_MAX;
	return most;
}

/* One stage into a buffer of its own, of at most limit bytes: of the size
 * its header says, or, for a stream that does not say (zlib, gzip, some
 * zstd), grown until the stream fits. */
static int stage_alloc(enum rfs_zarr_comp c, const void *src, size_t n,
		       size_t limit, unsigned char **out, size_t *got,
		       char *why, size_t whylen)
{
	size_t cap = stage_cap(c, src, n);
	int known = cap != SIZE_MAX;
	if (known && cap > limit) {
		snprintf(why, whylen,
			 "decodes (%s) to %zu bytes, over the %zu its stage "
			 "may hold",
			 comp_name(c), cap, limit);
		return -EIO;
	}
	if (known && cap / RATIO_MAX > n) {
		snprintf(why, whylen,
			 "says it decodes (%s) to %zu bytes from %zu, more "
			 "than any encoder makes of so few",
			 comp_name(c), cap, n);
		return -EIO;
	}
	if (!known)
		cap = n < limit / 4 ? 4 * n + 4096 : limit;
	cap = cap < limit ? cap : limit;
	for (;;) {
		unsigned char *buf = malloc(cap ? cap : 1);
		if (!buf)
			return -ENOMEM;
		int rc = stage(c, src, n, buf, cap, got, why, whylen);
		if (rc == 0) {
			*out = buf;
			return 0;
		}
		free(buf);
		if (rc != -ENOSPC || known || cap >= limit)
			return rc == -ENOSPC ? -EIO : rc;
		cap = cap > limit / 2 ? limit : 2 * cap;
	}
}

static void swap_elements(unsigned char *p, size_t n, size_t elem)
{
	for (size_t i = 0; i + elem <= n; i += elem)
		for (size_t a = 0, b = elem - 1; a < b; a++, b--) {
			unsigned char t = p[i + a];
			p[i + a] = p[i + b];
			p[i + b] = t;
		}
}

int rfs_zarr_decode(const struct rfs_zarr_pipe *p, const void *src, size_t n,
		    size_t elem, size_t want, void *dst, void **out,
		    size_t *outlen, char *why, size_t whylen)
{
	const unsigned char *cur = src;
	unsigned char *held = NULL; /* cur, when a stage made it */
	size_t len = n;
	int rc = 0;
	/* What decoding stage i may give: the last exactly want, an earlier
	 * one at most the encoding of what the next gives. */
	size_t limit[RFS_ZARR_COMPS_MAX];
	for (int i = 0; i < p->ncomp; i++)
		limit[i] = !want  ? DECODED_MAX :
			   i == 0 ? want :
				    encoded_max(p->comp[i - 1], limit[i - 1]);
	for (int i = p->ncomp - 1; i >= 0 && rc == 0; i--) {
		unsigned char *next = NULL;
		size_t got = 0;
		if (i == 0 && want) { /* the last: into dst, exactly */
			next = dst;
			rc = stage(p->comp[i], cur, len, dst, want, &got, why,
				   whylen);
			rc = rc == -ENOSPC ? -EIO : rc;
		} else {
			rc = stage_alloc(p->comp[i], cur, len, limit[i], &next,
					 &got, why, whylen);
		}
		free(held);
		held = next == dst ? NULL : next;
		cur = next;
		len = got;
	}
	if (rc == 0 && want && len != want) {
		snprintf(why, whylen,
			 "decodes to %zu bytes, not the %zu of a "
			 "chunk",
			 len, want);
		rc = -EIO;
	}
	if (rc == 0 && want && cur != dst)
		memcpy(dst, cur, want);
	if (rc == 0 && want && p->big_endian && elem > 1)
		swap_elements(dst, want, elem);
	if (rc == 0 && !want) {
		if (!held) { /* no codec: a copy of src */
			held = malloc(len ? len : 1);
			if (!held)
				rc = -ENOMEM;
			else
				memcpy(held, cur, len);
		}
		if (rc == 0) {
			*out = held;
			*outlen = len;
			held = NULL;
		}
	}
	free(held);
	return rc;
}

static int32_t le32(const unsigned char *p)
{
	uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 |
		     (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
	return (int32_t)v;
}

static void put_le32(unsigned char *p, size_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* blosc's header: version, versionlz, flags, typesize, then little-endian
 * uncompressed size, block size and compressed size; then the offset of
 * each block's compressed bytes (blosc.h, "blosc format"). */
#define BLOSC_HEADER 16
#define BLOSC_FLAG_MEMCPYED 0x02
#define BLOSC_FLAG_DONT_SPLIT 0x10

/* Reads and checks a blosc header of a chunk that decodes to want bytes:
 * 1 when it is one decode_part can read in parts. */
static int blosc_head(const struct rfs_zarr_pipe *p, size_t want,
		      uint64_t stored, rfs_zarr_read_fn read, void *ctx,
		      unsigned char head[BLOSC_HEADER])
{
	size_t nbytes = 0;
	return p->ncomp == 1 && p->comp[0] == RFS_ZARR_BLOSC && !p->strings &&
	       stored >= BLOSC_HEADER &&
	       read(ctx, head, BLOSC_HEADER, 0) == 0 &&
	       blosc_cbuffer_validate(head, stored, &nbytes) == 0 &&
	       nbytes == want && head[3] != 0 && le32(head + 8) > 0;
}

size_t rfs_zarr_part_bytes(const struct rfs_zarr_pipe *p, size_t want,
			   uint64_t stored, rfs_zarr_read_fn read, void *ctx)
{
	unsigned char head[BLOSC_HEADER];
	if (!blosc_head(p, want, stored, read, ctx, head))
		return 0;
	return (uint32_t)le32(head + 8);
}

/* Where the stored bytes of block j end: where the next block stored
 * after it starts, or at the end (blosc's threads store blocks in the
 * order they finish, not always in order). */
static size_t block_end(const unsigned char *starts, size_t nblocks, size_t j,
			size_t cbytes)
{
	size_t at = (uint32_t)le32(starts + 4 * j), end = cbytes;
	for (size_t k = 0; k < nblocks; k++) {
		size_t s = (uint32_t)le32(starts + 4 * k);
		if (s > at && s < end)
			end = s;
	}
	return end;
}

int rfs_zarr_decode_part(const struct rfs_zarr_pipe *p, size_t elem,
			 size_t want, uint64_t stored, rfs_zarr_read_fn read,
			 void *ctx, size_t at, size_t n, void *out)
{
	unsigned char head[BLOSC_HEADER];
	if (n == 0 || at > want || n > want - at ||
	    !blosc_head(p, want, stored, read, ctx, head))
		return 1;
	size_t block = (uint32_t)le32(head + 8);
	size_t cbytes = (uint32_t)le32(head + 12);
	/* Stored as is, after the header. */
	if (head[2] & BLOSC_FLAG_MEMCPYED) {
		if (cbytes != want + BLOSC_HEADER ||
		    read(ctx, out, n, BLOSC_HEADER + at) != 0)
			return 1;
		if (p->big_endian && elem > 1)
			swap_elements(out, n, elem);
		return 0;
	}
	size_t nblocks = (want + block - 1) / block;
	size_t j0 = at / block, j1 = (at + n - 1) / block;
	size_t table = BLOSC_HEADER + 4 * nblocks;
	if (table > cbytes)
		return 1;
	unsigned char *starts = malloc(4 * nblocks);
	int rc = 0;
	if (!starts)
		return -ENOMEM;
	/* The stretch of stored bytes from the first wanted block's start to
	 * the last one's end: all the decoder reads. */
	if (read(ctx, starts, 4 * nblocks, BLOSC_HEADER) != 0)
		rc = 1;
	size_t first = cbytes, end = table;
	for (size_t j = j0; j <= j1 && rc == 0; j++) {
		size_t at_j = (uint32_t)le32(starts + 4 * j);
		size_t end_j = block_end(starts, nblocks, j, cbytes);
		if (at_j < table || at_j >= end_j)
			rc = 1;
		first = at_j < first ? at_j : first;
		end = end_j > end ? end_j : end;
	}
	/* A chunk of its own of the wanted blocks: the header, their offsets
	 * moved to where the stretch follows them, the stretch. Decoded whole
	 * (blosc_decompress_ctx, into out when the range is whole blocks),
	 * as blosc_getitem would decode the same blocks; but getitem's three
	 * blocks of temporaries are past malloc's mmap threshold for 512 KiB
	 * blocks, mapped and faulted in per call, where the decoder's two stay
	 * below it (fs/main.c). */
	size_t span = j1 - j0 + 1, lead = BLOSC_HEADER + 4 * span;
	size_t from = j0 * block;
	size_t decoded = (j1 + 1) * block < want ? span * block : want - from;
	unsigned char *buf = rc == 0 ? malloc(lead + (end - first)) : NULL;
	int direct = at == from && n == decoded;
	unsigned char *dst = direct || rc != 0 ? out : malloc(decoded);
	if (rc == 0 && (!buf || !dst))
		rc = -ENOMEM;
	if (rc == 0 && read(ctx, buf + lead, end - first, first) != 0)
		rc = 1;
	if (rc == 0) {
		memcpy(buf, head, BLOSC_HEADER);
		put_le32(buf + 4, decoded);
		/* The chunk's short last block alone: blosc takes no block
		 * longer than the chunk, so the block size is the block's,
		 * and unsplit, as blosc stores a short last block. */
		if (decoded < block) {
			put_le32(buf + 8, decoded);
			buf[2] |= BLOSC_FLAG_DONT_SPLIT;
		}
		put_le32(buf + 12, lead + (end - first));
		for (size_t k = 0; k < span; k++)
			put_le32(buf + BLOSC_HEADER + 4 * k,
				 (uint32_t)le32(starts + 4 * (j0 + k)) - first +
					 lead);
		int got = blosc_decompress_ctx(buf, dst, decoded, 1);
		rc = got >= 0 && (size_t)got == decoded ? 0 : 1;
	}
	if (rc == 0 && !direct)
		memcpy(out, dst + (at - from), n);
	if (dst != out)
		free(dst);
	if (rc == 0 && p->big_endian && elem > 1)
		swap_elements(out, n, elem);
	free(buf);
	free(starts);
	return rc;
}

int rfs_zarr_vlen_utf8(const void *p, size_t n, uint64_t want, char ***out)
{
	const unsigned char *b = p;
	size_t at = 4;
	if (n < 4 || le32(b) < 0 || (uint64_t)le32(b) < want)
		return -EIO;
	char **s = calloc(want ? want : 1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	int rc = 0;
	for (uint64_t i = 0; i < want && rc == 0; i++) {
		int32_t len = at + 4 <= n ? le32(b + at) : -1;
		if (len < 0 || n - at - 4 < (size_t)len) {
			rc = -EIO;
			break;
		}
		s[i] = strndup((const char *)b + at + 4, (size_t)len);
		if (!s[i])
			rc = -ENOMEM;
		at += 4 + (size_t)len;
	}
	if (rc != 0) {
		rfs_buf_free_strings(s, want);
		return rc;
	}
	*out = s;
	return 0;
}
