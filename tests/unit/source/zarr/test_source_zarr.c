/* SPDX-License-Identifier: MIT */
/* Unit tests for the zarr backend (lib/source_zarr*.c, zarr_meta.c,
 * zarr_array.c), on stores written here from JSON text and chunks encoded
 * with the libraries: v2 dense with an absent chunk (fill_value), CSR,
 * obs columns and var names; v3 sharded (index at the end with crc32c,
 * at the start, an absent inner chunk), consolidated, sharded along rows
 * and columns with big-endian raw inner chunks; an unknown codec,
 * a bad indptr, a shard index past its file and a chunk file replaced
 * under an open source; an annbatch collection's members; dense chunks
 * read in blosc parts, and cut from the whole chunk where they cannot;
 * shapes claimed in metadata alone refused over the memory limit, and
 * absent chunks of a column not opened; chunk directories that are
 * links. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <blosc.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zlib.h>
#include <zstd.h>

#include "source/io/chunks.h"
#include "source/column.h"
#include "os/memlimit.h"
#include "os/watch.h"
#include "source/source.h"
#include "source/zarr/zarr.h"

#define R 10
#define C 6

/* What the sources borrow: a watch table, as a mount's. */
static struct rfs_source_env env;

/* Ledgers set aside: what was opened in them may still be open. */
static struct rfs_claims *retired[64];
static size_t nretired;

static void use_limit(const struct rfs_memlimit *l)
{
	assert_true(nretired < sizeof(retired) / sizeof(*retired));
	retired[nretired++] = env.claims;
	assert_int_equal(rfs_claims_create(l, &env.claims), 0);
}

static char root[64];

static float value(int r, int c)
{
	return (float)(r * 10 + c) + 0.25f;
}

static void mkdirs(const char *path)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s", path);
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = '\0';
			mkdir(p, 0755);
			*s = '/';
		}
}

static void put(const char *store, const char *rel, const void *b, size_t n)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s/%s", root, store, rel);
	mkdirs(path);
	char tmp[PATH_MAX + 8];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(b, 1, n, f), n);
	fclose(f);
	assert_int_equal(rename(tmp, path), 0); /* a new inode each time */
}

static void text(const char *store, const char *rel, const char *t)
{
	put(store, rel, t, strlen(t));
}

static size_t blosc_enc(const void *v, size_t n, size_t typesize, void *out)
{
	return (size_t)blosc_compress_ctx(5, BLOSC_SHUFFLE, typesize, n, v, out,
					  n + BLOSC_MAX_OVERHEAD, "lz4", 0, 1);
}

static size_t gzip_enc(const void *v, size_t n, void *out, size_t cap)
{
	z_stream z = { 0 };
	deflateInit2(&z, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY);
	z.next_in = (Bytef *)v;
	z.avail_in = (uInt)n;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
	deflateEnd(&z);
	return cap - z.avail_out;
}

static int open_store(const char *store, const char *dataset,
		      struct rfs_source **s, char *err)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", root, store);
	return rfs_source_open(path, dataset, &env, s, err, 512);
}

/* Chunk (i, j) of 4 x 4 of the R x C float32 matrix, full-size. */
static void chunk_values(int i, int j, float *out, int cr, int cc)
{
	for (int r = 0; r < cr; r++)
		for (int c = 0; c < cc; c++) {
			int gr = i * cr + r, gc = j * cc + c;
			out[r * cc + c] = gr < R && gc < C ? value(gr, gc) : 0;
		}
}

static void check_all_rows(struct rfs_source *s, float fill_r4_to_7_c0_to_3)
{
	int64_t rows[R];
	float got[R][C];
	for (int i = 0; i < R; i++)
		rows[i] = (i * 7) % R; /* any order */
	assert_int_equal(rfs_source_read_rows(s, rows, R, got), 0);
	for (int i = 0; i < R; i++)
		for (int c = 0; c < C; c++) {
			int r = (int)rows[i];
			float want = r >= 4 && r < 8 && c < 4 ?
					     fill_r4_to_7_c0_to_3 :
					     value(r, c);
			assert_true(got[i][c] == want);
		}
}

static const char *root_v2 = "{\"zarr_format\": 2}";
static const char *anndata_attrs =
	"{\"encoding-type\": \"anndata\", \"encoding-version\": \"0.1.0\"}";

static void write_v2_dense(const char *store)
{
	char meta[512];
	text(store, ".zgroup", root_v2);
	text(store, ".zattrs", anndata_attrs);
	snprintf(meta, sizeof(meta),
		 "{\"zarr_format\": 2, \"shape\": [%d, %d], \"chunks\": [4, 4],"
		 " \"dtype\": \"<f4\", \"compressor\": {\"id\": \"blosc\", "
		 "\"cname\": \"lz4\", \"clevel\": 5, \"shuffle\": 1}, "
		 "\"fill_value\": 7.5, \"filters\": null, \"order\": \"C\"}",
		 R, C);
	text(store, "X/.zarray", meta);
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 2; j++) {
			float v[16];
			unsigned char enc[16 * 4 + BLOSC_MAX_OVERHEAD];
			char key[16];
			if (i == 1 && j == 0)
				continue; /* absent: fill_value */
			chunk_values(i, j, v, 4, 4);
			snprintf(key, sizeof(key), "X/%d.%d", i, j);
			put(store, key, enc, blosc_enc(v, sizeof(v), 4, enc));
		}
}

static void test_v2_dense_with_fill(void **state)
{
	(void)state;
	struct rfs_source *s;
	char err[512];
	write_v2_dense("dense.zarr");
	assert_int_equal(open_store("dense.zarr", NULL, &s, err), 0);
	const struct rfs_source_info *info = rfs_source_info(s);
	assert_int_equal(info->rows, R);
	assert_int_equal(info->cols, C);
	assert_int_equal(info->dtype, RFS_FLOAT32);
	assert_int_equal(info->read_path, RFS_READ_CHUNKS);
	assert_int_equal(info->has_var, 0);
	check_all_rows(s, 7.5f);
	/* Every file of the store is one rankfs must not write. */
	char path[PATH_MAX];
	struct stat st;
	snprintf(path, sizeof(path), "%s/dense.zarr/X/0.1", root);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(rfs_source_reads_file(s, st.st_dev, st.st_ino), 1);
	assert_int_equal(stat(root, &st), 0);
	assert_int_equal(rfs_source_reads_file(s, st.st_dev, st.st_ino), 0);
	assert_int_equal(rfs_source_state(s), RFS_SOURCE_OK);
	rfs_source_destroy(s);
}

/* A dense store of 8-row chunks compressed by blosc lz4 in blocks of
 * blocksize bytes (typesize 4, the second chunk's typesize1), opened. */
static struct rfs_source *open_blocked_store(const char *name, int blocksize,
					     int typesize1)
{
	struct rfs_source *s;
	char err[512], meta[512];
	text(name, ".zgroup", root_v2);
	text(name, ".zattrs", anndata_attrs);
	snprintf(meta, sizeof(meta),
		 "{\"zarr_format\": 2, \"shape\": [%d, %d], \"chunks\": [8, "
		 "%d], \"dtype\": \"<f4\", \"compressor\": {\"id\": "
		 "\"blosc\", \"cname\": \"lz4\", \"clevel\": 5, "
		 "\"shuffle\": 1, \"blocksize\": %d}, \"fill_value\": 0, "
		 "\"filters\": null, \"order\": \"C\"}",
		 R, C, C, blocksize);
	text(name, "X/.zarray", meta);
	for (int i = 0; i < 2; i++) {
		float v[8 * C];
		unsigned char enc[sizeof(v) + BLOSC_MAX_OVERHEAD];
		char key[16];
		int typesize = i ? typesize1 : 4;
		chunk_values(i, 0, v, 8, C);
		int n = blosc_compress_ctx(5, BLOSC_SHUFFLE, (size_t)typesize,
					   sizeof(v), v, enc, sizeof(enc),
					   "lz4", (size_t)blocksize, 1);
		assert_true(n > 0);
		uint32_t block;
		memcpy(&block, enc + 8, 4); /* blosc's header, little-endian */
		if (typesize == 4) /* the block size asked */
			assert_int_equal(block, blocksize);
		snprintf(key, sizeof(key), "X/%d.0", i);
		put(name, key, enc, (size_t)n);
	}
	assert_int_equal(open_store(name, NULL, &s, err), 0);
	return s;
}

/* Every row read, in an order across parts and chunks. */
static void check_scrambled_rows(struct rfs_source *s)
{
	int64_t rows[R];
	float got[R][C];
	for (int i = 0; i < R; i++)
		rows[i] = (i * 7) % R;
	assert_int_equal(rfs_source_read_rows(s, rows, R, got), 0);
	for (int i = 0; i < R; i++)
		for (int c = 0; c < C; c++)
			assert_true(got[i][c] == value((int)rows[i], c));
}

/* Chunks of 8 full rows in blosc blocks of 6 rows (144 bytes; blosc's
 * blocks are 128 bytes at least): cached in parts of 6 rows and 2. The
 * second chunk's blosc typesize (32) is not the element's, nor does it
 * divide a part: its parts read right all the same. A chunk replaced
 * under the source is EIO through a part too. */
static void test_v2_dense_in_parts(void **state)
{
	(void)state;
	struct rfs_source *s = open_blocked_store("parts.zarr", 144, 32);
	check_scrambled_rows(s);
	float v[8 * C], got[C];
	unsigned char enc[sizeof(v) + BLOSC_MAX_OVERHEAD];
	chunk_values(0, 0, v, 8, C);
	put("parts.zarr", "X/0.0", enc, blosc_enc(v, sizeof(v), 4, enc));
	int64_t row = 1; /* cached: the source changed all the same */
	assert_int_equal(rfs_source_read_rows(s, &row, 1, got), -EIO);
	rfs_source_destroy(s);
}

/* Blosc blocks of 160 bytes, six and two thirds rows: parts of 6 rows,
 * the second of a chunk decoded from the two blocks it lies in (the last
 * one short), and cut from them. */
static void test_v2_dense_parts_across_blocks(void **state)
{
	(void)state;
	struct rfs_source *s = open_blocked_store("across.zarr", 160, 4);
	check_scrambled_rows(s);
	rfs_source_destroy(s);
}

static void test_chunk_replaced_is_eio_for_good(void **state)
{
	(void)state;
	struct rfs_source *s;
	char err[512];
	int64_t row = 9;
	float got[C];
	write_v2_dense("changed.zarr");
	assert_int_equal(open_store("changed.zarr", NULL, &s, err), 0);
	/* Same bytes, new file: still a change. */
	float v[16];
	unsigned char enc[16 * 4 + BLOSC_MAX_OVERHEAD];
	chunk_values(2, 0, v, 4, 4);
	put("changed.zarr", "X/2.0", enc, blosc_enc(v, sizeof(v), 4, enc));
	assert_int_equal(rfs_source_read_rows(s, &row, 1, got), -EIO);
	row = 0; /* a chunk that did not change: the source did */
	assert_int_equal(rfs_source_read_rows(s, &row, 1, got), -EIO);
	assert_int_equal(rfs_source_state(s), RFS_SOURCE_CHANGED);
	rfs_source_destroy(s);
	/* An absent chunk appearing is a change too. */
	write_v2_dense("appeared.zarr");
	assert_int_equal(open_store("appeared.zarr", NULL, &s, err), 0);
	chunk_values(1, 0, v, 4, 4);
	put("appeared.zarr", "X/1.0", enc, blosc_enc(v, sizeof(v), 4, enc));
	row = 5;
	assert_int_equal(rfs_source_read_rows(s, &row, 1, got), -EIO);
	rfs_source_destroy(s);
}

static void put_strings(const char *store, const char *array,
			const char *const *s, int n)
{
	char meta[512], key[256];
	unsigned char buf[1024];
	size_t at = 4;
	uint32_t count = (uint32_t)n;
	memcpy(buf, &count, 4);
	for (int i = 0; i < n; i++) {
		uint32_t len = (uint32_t)strlen(s[i]);
		memcpy(buf + at, &len, 4);
		memcpy(buf + at + 4, s[i], len);
		at += 4 + len;
	}
	snprintf(meta, sizeof(meta),
		 "{\"zarr_format\": 2, \"shape\": [%d], \"chunks\": [%d], "
		 "\"dtype\": \"|O\", \"compressor\": null, \"fill_value\": 0,"
		 " \"filters\": [{\"id\": \"vlen-utf8\"}], \"order\": \"C\"}",
		 n, n);
	snprintf(key, sizeof(key), "%s/.zarray", array);
	text(store, key, meta);
	snprintf(key, sizeof(key), "%s/0", array);
	put(store, key, buf, at);
}

/* A 1-D v2 array of n elements in one chunk, stored raw. */
static void put_raw(const char *store, const char *array, const char *dtype,
		    const void *v, size_t elem, int n)
{
	char meta[512], key[256];
	snprintf(meta, sizeof(meta),
		 "{\"zarr_format\": 2, \"shape\": [%d], \"chunks\": [%d], "
		 "\"dtype\": \"%s\", \"compressor\": null, \"fill_value\": 0,"
		 " \"filters\": null, \"order\": \"C\"}",
		 n, n, dtype);
	snprintf(key, sizeof(key), "%s/.zarray", array);
	text(store, key, meta);
	snprintf(key, sizeof(key), "%s/0", array);
	put(store, key, v, elem * (size_t)n);
}

/* CSR of the R x C matrix keeping values whose (r + c) % 3 == 0; data
 * float64 zstd in chunks of 5, indices int32 gzip in chunks of 7. */
static void write_v2_csr(const char *store, int bad_indptr)
{
	double data[R * C];
	int32_t idx[R * C];
	int64_t indptr[R + 1] = { 0 };
	int nnz = 0;
	char meta[512], key[64];
	for (int r = 0; r < R; r++) {
		for (int c = 0; c < C; c++)
			if ((r + c) % 3 == 0) {
				data[nnz] = value(r, c);
				idx[nnz++] = c;
			}
		indptr[r + 1] = nnz;
	}
	if (bad_indptr)
		indptr[4] = indptr[6] + 1;
	text(store, ".zgroup", root_v2);
	text(store, ".zattrs", anndata_attrs);
	text(store, "X/.zgroup", root_v2);
	snprintf(meta, sizeof(meta),
		 "{\"encoding-type\": \"csr_matrix\", \"shape\": [%d, %d]}", R,
		 C);
	text(store, "X/.zattrs", meta);
	snprintf(meta, sizeof(meta),
		 "{\"zarr_format\": 2, \"shape\": [%d], \"chunks\": [5], "
		 "\"dtype\": \"<f8\", \"compressor\": {\"id\": \"zstd\", "
		 "\"level\": 1}, \"fill_value\": 0.0, \"filters\": null, "
		 "\"order\": \"C\"}",
		 nnz);
	text(store, "X/data/.zarray", meta);
	for (int k = 0; k * 5 < nnz; k++) {
		double v[5] = { 0 };
		unsigned char enc[256];
		memcpy(v, data + k * 5,
		       (size_t)(nnz - k * 5 < 5 ? nnz - k * 5 : 5) * 8);
		snprintf(key, sizeof(key), "X/data/%d", k);
		put(store, key, enc, ZSTD_compress(enc, sizeof(enc), v, 40, 1));
	}
	snprintf(meta, sizeof(meta),
		 "{\"zarr_format\": 2, \"shape\": [%d], \"chunks\": [7], "
		 "\"dtype\": \"<i4\", \"compressor\": {\"id\": \"gzip\", "
		 "\"level\": 1}, \"fill_value\": 0, \"filters\": null, "
		 "\"order\": \"C\"}",
		 nnz);
	text(store, "X/indices/.zarray", meta);
	for (int k = 0; k * 7 < nnz; k++) {
		int32_t v[7] = { 0 };
		unsigned char enc[256];
		memcpy(v, idx + k * 7,
		       (size_t)(nnz - k * 7 < 7 ? nnz - k * 7 : 7) * 4);
		snprintf(key, sizeof(key), "X/indices/%d", k);
		put(store, key, enc, gzip_enc(v, 28, enc, sizeof(enc)));
	}
	put_raw(store, "X/indptr", "<i8", indptr, 8, R + 1);
	/* obs: categorical, float, bool; var: names */
	text(store, "obs/.zgroup", root_v2);
	text(store, "obs/.zattrs", "{\"_index\": \"_index\"}");
	text(store, "obs/ct/.zgroup", root_v2);
	text(store, "obs/ct/.zattrs", "{\"encoding-type\": \"categorical\"}");
	int8_t codes[R] = { 0, 1, 2, 0, 1, 2, 0, 1, -1, 0 };
	put_raw(store, "obs/ct/codes", "|i1", codes, 1, R);
	const char *cats[] = { "B", "NK", "T" };
	put_strings(store, "obs/ct/categories", cats, 3);
	/* anndata 0.7: codes whose attribute names the categories */
	put_raw(store, "obs/old", "|i1", codes, 1, R);
	text(store, "obs/old/.zattrs",
	     "{\"categories\": \"/obs/__categories/old\"}");
	put_strings(store, "obs/__categories/old", cats, 3);
	double w[R];
	uint8_t flag[R];
	for (int r = 0; r < R; r++) {
		w[r] = r * 0.5;
		flag[r] = r % 2;
	}
	put_raw(store, "obs/w", "<f8", w, 8, R);
	put_raw(store, "obs/flag", "|b1", flag, 1, R);
	text(store, "var/.zgroup", root_v2);
	text(store, "var/.zattrs", "{\"_index\": \"names\"}");
	const char *genes[C] = { "g0", "g1", "g2", "g3", "g4", "g5" };
	put_strings(store, "var/names", genes, C);
}

static void test_v2_csr_columns_var(void **state)
{
	(void)state;
	struct rfs_source *s;
	char err[512];
	write_v2_csr("csr.zarr", 0);
	assert_int_equal(open_store("csr.zarr", NULL, &s, err), 0);
	const struct rfs_source_info *info = rfs_source_info(s);
	assert_int_equal(info->sparse, 1);
	assert_int_equal(info->dtype, RFS_FLOAT64);
	assert_int_equal(info->index_dtype, RFS_INT32);
	int64_t rows[3] = { 9, 0, 4 };
	struct rfs_csr csr;
	assert_int_equal(rfs_source_read_csr(s, rows, 3, NULL, &csr), 0);
	for (int i = 0; i < 3; i++) {
		uint64_t k = csr.start[i];
		for (int c = 0; c < C; c++)
			if ((rows[i] + c) % 3 == 0) {
				assert_int_equal(csr.cols[k], c);
				assert_true(((double *)csr.values)[k] ==
					    value((int)rows[i], c));
				k++;
			}
		assert_int_equal(k, csr.start[i + 1]);
	}
	rfs_source_csr_free(&csr);

	struct rfs_column col;
	assert_int_equal(rfs_source_read_column(s, "ct", &col, err, 512), 0);
	assert_int_equal(col.kind, RFS_COLUMN_CODES);
	assert_int_equal(col.ncategories, 3);
	assert_string_equal(col.categories[1], "NK");
	assert_int_equal(col.codes[8], -1);
	rfs_column_free(&col);
	assert_int_equal(rfs_source_read_column(s, "old", &col, err, 512), 0);
	assert_int_equal(col.kind, RFS_COLUMN_CODES);
	assert_string_equal(col.categories[2], "T");
	assert_int_equal(col.codes[2], 2);
	rfs_column_free(&col);
	assert_int_equal(rfs_source_read_column(s, "w", &col, err, 512), 0);
	assert_int_equal(col.kind, RFS_COLUMN_REAL);
	assert_true(col.reals[3] == 1.5);
	rfs_column_free(&col);
	assert_int_equal(rfs_source_read_column(s, "flag", &col, err, 512), 0);
	assert_int_equal(col.boolean, 1);
	assert_int_equal(col.codes[3], 1);
	rfs_column_free(&col);
	assert_int_equal(rfs_source_read_column(s, "/obs/w", &col, err, 512),
			 0);
	rfs_column_free(&col);
	assert_int_equal(rfs_source_read_column(s, "nope", &col, err, 512),
			 -EINVAL);
	assert_non_null(strstr(err, "nope"));

	char **names;
	uint64_t n;
	assert_int_equal(rfs_source_read_var_names(s, &names, &n, err, 512), 0);
	assert_int_equal(n, C);
	XXH3_state_t *st = XXH3_createState();
	XXH3_64bits_reset(st);
	for (uint64_t i = 0; i < n; i++) {
		char want[8];
		snprintf(want, sizeof(want), "g%d", (int)i);
		assert_string_equal(names[i], want);
		XXH3_64bits_update(st, names[i], strlen(names[i]) + 1);
		free(names[i]);
	}
	free(names);
	/* As the HDF5 backend hashes the same names. */
	assert_int_equal(info->has_var, 1);
	assert_true(info->var_fingerprint == XXH3_64bits_digest(st));
	XXH3_freeState(st);
	rfs_source_destroy(s);
}

static void test_bad_indptr_and_codec(void **state)
{
	(void)state;
	struct rfs_source *s;
	char err[512];
	write_v2_csr("badptr.zarr", 1);
	assert_int_equal(open_store("badptr.zarr", NULL, &s, err), -EINVAL);
	assert_non_null(strstr(err, "X/indptr"));
	write_v2_dense("codec.zarr");
	text("codec.zarr", "X/.zarray",
	     "{\"zarr_format\": 2, \"shape\": [10, 6], \"chunks\": [4, 4], "
	     "\"dtype\": \"<f4\", \"compressor\": {\"id\": \"lzma\"}, "
	     "\"fill_value\": 0, \"filters\": null, \"order\": \"C\"}");
	assert_int_equal(open_store("codec.zarr", NULL, &s, err), -ENOTSUP);
	assert_non_null(strstr(err, "lzma"));
	assert_non_null(strstr(err, "array X"));
	text("codec.zarr", "X/.zarray",
	     "{\"zarr_format\": 2, \"shape\": [10, 6], \"chunks\": [4, 4], "
	     "\"dtype\": \"<f4\", \"compressor\": null, "
	     "\"fill_value\": 0, \"filters\": null, \"order\": \"F\"}");
	assert_int_equal(open_store("codec.zarr", NULL, &s, err), -ENOTSUP);
	assert_non_null(strstr(err, "order"));
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/codec.zarr/X/.zarray", root);
	unlink(path);
	assert_int_equal(open_store("codec.zarr", NULL, &s, err), -EINVAL);
	assert_non_null(strstr(err, ".zarray"));
}

/* A 1-D v2 array's metadata alone: n elements claimed in chunks of
 * chunk, none written, stored raw. */
/* Claims are checked against a limit of mb MiB, from a clean slate. */
static void claims_limit(unsigned mb)
{
	struct rfs_memlimit l = { .bytes = (uint64_t)mb << 20 };
	snprintf(l.where, sizeof(l.where), "the test's limit");
	use_limit(&l);
}

/* An AnnData store of 2^20 x 1 float32 rows, no chunk written, and an
 * obs group for the arrays claim_array() adds. */
static void claims_store(const char *store)
{
	text(store, ".zgroup", root_v2);
	text(store, ".zattrs", anndata_attrs);
	text(store, "X/.zarray",
	     "{\"zarr_format\": 2, \"shape\": [1048576, 1], \"chunks\": "
	     "[65536, 1], \"dtype\": \"<f4\", \"compressor\": null, "
	     "\"fill_value\": 0, \"filters\": null, \"order\": \"C\"}");
	text(store, "obs/.zgroup", root_v2);
}

static void claim_array(const char *store, const char *array, uint64_t n,
			int chunk, const char *dtype)
{
	char meta[512], key[256];
	int strings = strcmp(dtype, "|O") == 0;
	snprintf(meta, sizeof(meta),
		 "{\"zarr_format\": 2, \"shape\": [%llu], \"chunks\": "
		 "[%d], \"dtype\": \"%s\", \"compressor\": null, "
		 "\"fill_value\": %s, \"filters\": %s, \"order\": \"C\"}",
		 (unsigned long long)n, chunk, dtype, strings ? "null" : "0",
		 strings ? "[{\"id\": \"vlen-utf8\"}]" : "null");
	snprintf(key, sizeof(key), "%s/.zarray", array);
	text(store, key, meta);
}

/* Chunk files opened in the directory count_under (names not starting
 * with '.', the metadata's): zarr_array.c opens one per chunk read (a
 * link-time wrap of rfs_open_beneath, tests/CMakeLists.txt). */
static const char *count_under;
static int opened;
int __real_rfs_open_beneath(int dir_fd, const char *dir, const char *path);
int __wrap_rfs_open_beneath(int dir_fd, const char *dir, const char *path);
int __wrap_rfs_open_beneath(int dir_fd, const char *dir, const char *path)
{
	size_t n = count_under ? strlen(count_under) : 0;
	if (n && strncmp(path, count_under, n) == 0 && path[n] != '.')
		opened++;
	return __real_rfs_open_beneath(dir_fd, dir, path);
}

/* Columns read whole at mount open only the chunk files present, found
 * by listing the array's directory: a shape can claim 2^24 chunk files
 * with none written (an open each took 9 s). The rest are fill. */
static void test_absent_chunks_of_a_column_unopened(void **state)
{
	(void)state;
	struct rfs_source *s;
	struct rfs_column col;
	char err[512], under[PATH_MAX];
	write_v2_dense("sparse.zarr");
	text("sparse.zarr", "obs/.zgroup", root_v2);
	claim_array("sparse.zarr", "obs/w", R, 1, "<f8");
	double w[2] = { 1.5, 2.5 };
	put("sparse.zarr", "obs/w/3", &w[0], 8);
	put("sparse.zarr", "obs/w/7", &w[1], 8);
	claim_array("sparse.zarr", "obs/s", R, 1, "|O");
	const unsigned char one[] = { 1, 0, 0, 0, 1, 0, 0, 0, 'x' };
	put("sparse.zarr", "obs/s/4", one, sizeof(one));
	assert_int_equal(open_store("sparse.zarr", NULL, &s, err), 0);
	snprintf(under, sizeof(under), "%s/sparse.zarr/obs/w/", root);
	count_under = under;
	opened = 0;
	assert_int_equal(rfs_source_read_column(s, "w", &col, err, 512), 0);
	assert_int_equal(opened, 2); /* not R */
	for (int r = 0; r < R; r++)
		assert_true(col.reals[r] == (r == 3 ? 1.5 : r == 7 ? 2.5 : 0));
	rfs_column_free(&col);
	snprintf(under, sizeof(under), "%s/sparse.zarr/obs/s/", root);
	opened = 0;
	assert_int_equal(rfs_source_read_column(s, "s", &col, err, 512), 0);
	assert_int_equal(opened, 1);
	assert_int_equal(col.ncategories, 2);
	assert_string_equal(col.categories[col.codes[4]], "x");
	assert_string_equal(col.categories[col.codes[5]], "");
	rfs_column_free(&col);
	count_under = NULL;
	rfs_source_destroy(s);
}

/* An AnnData store whose X is a CSR of 2^20 rows and nnz values, none
 * stored, its indptr of indptr_dtype claimed in metadata alone (read as
 * zeros: nnz 0 or it fails the open). */
static void claims_csr(const char *store, const char *indptr_dtype,
		       uint64_t nnz)
{
	text(store, ".zgroup", root_v2);
	text(store, ".zattrs", anndata_attrs);
	text(store, "X/.zgroup", root_v2);
	text(store, "X/.zattrs",
	     "{\"encoding-type\": \"csr_matrix\", \"shape\": [1048576, "
	     "2]}");
	claim_array(store, "X/data", nnz, 65536, "<f4");
	claim_array(store, "X/indices", nnz, 65536, "<i4");
	claim_array(store, "X/indptr", (UINT64_C(1) << 20) + 1, 65536,
		    indptr_dtype);
}

/* Shapes claimed in metadata alone are checked against the memory the
 * daemon may use (memlimit.c) before they are read: categories, a column
 * and a CSR indptr of 2^20 entries, none stored, over a limit of 14 MiB
 * (they were read, the categories one strdup each). */
static void test_claims_refused_unread(void **state)
{
	(void)state;
	struct rfs_source *s;
	struct rfs_column col;
	char err[512];
	uint64_t n = UINT64_C(1) << 20;
	claims_limit(14);
	claims_store("claims.zarr");
	text("claims.zarr", "obs/ct/.zgroup", root_v2);
	text("claims.zarr", "obs/ct/.zattrs",
	     "{\"encoding-type\": \"categorical\"}");
	claim_array("claims.zarr", "obs/ct/codes", n, 65536,
		    "<i4"); /* 12 MiB */
	claim_array("claims.zarr", "obs/ct/categories", n, 65536, "|O");
	claim_array("claims.zarr", "obs/w", n, 65536,
		    "<f8"); /* and its doubles */
	assert_int_equal(open_store("claims.zarr", NULL, &s, err), 0);
	assert_int_equal(rfs_source_read_column(s, "ct", &col, err, 512),
			 -ENOMEM);
	assert_non_null(strstr(err, "claims.zarr: obs/ct/categories claims "
				    "1048576 entries: at least 40 MiB at "
				    "mount, more than the 14 MiB of the "
				    "test's limit"));
	assert_null(col.codes);
	assert_int_equal(rfs_source_read_column(s, "w", &col, err, 512),
			 -ENOMEM);
	assert_non_null(strstr(err, "obs/w claims 1048576 entries"));
	rfs_source_destroy(s);

	claims_csr("claimptr.zarr", "<i8", 0);
	assert_int_equal(open_store("claimptr.zarr", NULL, &s, err), -ENOMEM);
	assert_non_null(strstr(err, "claimptr.zarr: X/indptr claims 1048577 "
				    "entries"));
	struct rfs_memlimit none = { .bytes = UINT64_MAX };
	use_limit(&none);
}

/* A string column is made codes: its claim counts, beside each heap
 * string, the sort's index, the code and the category's slot held at once
 * (64 bytes a row measured, RFS_MEMLIMIT_CODED_STRING_BYTES): 2^20 rows
 * claim 64 MiB, over a 48 MiB limit (claimed as 40 MiB, they were read,
 * and building the codes took 64). Var names, only strings, claim 40. */
static void test_string_column_claims_its_codes(void **state)
{
	(void)state;
	struct rfs_source *s;
	struct rfs_column col = { 0 };
	char err[512];
	uint64_t n = UINT64_C(1) << 20;
	claims_limit(48);
	claims_store("strings.zarr");
	claim_array("strings.zarr", "obs/s", n, 65536, "|O");
	assert_int_equal(open_store("strings.zarr", NULL, &s, err), 0);
	assert_int_equal(rfs_source_read_column(s, "s", &col, err, 512),
			 -ENOMEM);
	assert_non_null(strstr(err, "strings.zarr: obs/s claims 1048576 "
				    "entries: at least 64 MiB at mount"));
	assert_null(col.codes);
	assert_int_equal(rfs_memlimit_claimed(env.claims), 0);
	rfs_source_destroy(s);
	struct rfs_memlimit none = { .bytes = UINT64_MAX };
	use_limit(&none);
}

/* Claims add up (memlimit.c): columns each within the limit fail once
 * they, held together, are not; a column holds its claim until freed
 * (moved with its rows by an append), the values as stored given back
 * once read, and an indptr its own until the source is destroyed. */
static void test_claims_add_up_and_are_released(void **state)
{
	(void)state;
	struct rfs_source *s;
	struct rfs_column w[4] = { 0 }, v = { 0 };
	char err[512];
	uint64_t n = UINT64_C(1) << 20;
	claims_limit(56);
	claims_csr("adds.zarr", "<i4", 0);
	text("adds.zarr", "obs/.zgroup", root_v2);
	claim_array("adds.zarr", "obs/w", n, 65536, "<f8"); /* 16 MiB */
	claim_array("adds.zarr", "obs/v", n, 65536, "<i4"); /* 12 MiB */
	assert_int_equal(open_store("adds.zarr", NULL, &s, err), 0);
	uint64_t indptr = (n + 1) * 8; /* its int32 offsets given back */
	assert_int_equal(rfs_memlimit_claimed(env.claims), indptr);
	assert_int_equal(rfs_source_read_column(s, "v", &v, err, 512), 0);
	assert_int_equal(v.claimed, n * 8);
	for (int i = 0; i < 3; i++)
		assert_int_equal(
			rfs_source_read_column(s, "w", &w[i], err, 512), 0);
	assert_int_equal(rfs_memlimit_claimed(env.claims), indptr + 4 * n * 8);
	/* 8 + 32 MiB held (and 8 bytes): not the 16 MiB a read of w needs
	 * at once. */
	assert_int_equal(rfs_source_read_column(s, "w", &w[3], err, 512),
			 -ENOMEM);
	assert_non_null(strstr(err, "adds.zarr: obs/w claims 1048576 "
				    "entries: at least 16 MiB at mount, more "
				    "than the 56 MiB of the test's limit "
				    "leaves beside the 41 MiB claimed before "
				    "it"));
	assert_int_equal(w[3].claimed, 0);
	/* An append moves the claim with the rows. */
	assert_int_equal(rfs_column_append(&w[0], &w[1], "adds.zarr",
					   "column 'w'", err, 512),
			 0);
	assert_int_equal(w[0].claimed, 2 * n * 8);
	assert_int_equal(rfs_memlimit_claimed(env.claims), indptr + 4 * n * 8);
	rfs_column_free(&v);
	rfs_column_free(&w[2]);
	assert_int_equal(rfs_memlimit_claimed(env.claims), indptr + 2 * n * 8);
	assert_int_equal(rfs_source_read_column(s, "w", &w[3], err, 512), 0);
	rfs_column_free(&w[0]);
	rfs_column_free(&w[3]);
	rfs_source_destroy(s);
	assert_int_equal(rfs_memlimit_claimed(env.claims), 0);
	/* An open that fails once its indptr is read gives it back: every
	 * offset its fill value, 1, past the 0 stored values. */
	claims_csr("ends.zarr", "<i4", 0);
	text("ends.zarr", "X/indptr/.zarray",
	     "{\"zarr_format\": 2, \"shape\": [1048577], \"chunks\": "
	     "[65536], \"dtype\": \"<i4\", \"compressor\": null, "
	     "\"fill_value\": 1, \"filters\": null, \"order\": \"C\"}");
	assert_int_equal(open_store("ends.zarr", NULL, &s, err), -EINVAL);
	assert_non_null(strstr(err, "X/indptr must be non-decreasing offsets "
				    "from 0 to at most the 0 stored values: "
				    "entry 0 is 1"));
	assert_int_equal(rfs_memlimit_claimed(env.claims), 0);
	struct rfs_memlimit none = { .bytes = UINT64_MAX };
	use_limit(&none);
}

/* A v3 shard of 4 x C rows (2 inner chunks of 2 x C), blosc inside;
 * inner chunk absent_k left out; the index at the start or the end. */
static size_t shard(int shard_i, int at_start, int absent_k, unsigned char *out)
{
	unsigned char chunks[2][2 * C * 4 + BLOSC_MAX_OVERHEAD];
	size_t len[2];
	uint64_t index[4];
	size_t index_len = sizeof(index) + 4;
	size_t at = at_start ? index_len : 0;
	for (int k = 0; k < 2; k++) {
		float v[2 * C];
		chunk_values(shard_i * 2 + k, 0, v, 2, C);
		len[k] = blosc_enc(v, sizeof(v), 4, chunks[k]);
		if (k == absent_k) {
			index[2 * k] = index[2 * k + 1] = UINT64_MAX;
			continue;
		}
		memcpy(out + at, chunks[k], len[k]);
		index[2 * k] = at;
		index[2 * k + 1] = len[k];
		at += len[k];
	}
	uint32_t crc = rfs_zarr_crc32c(index, sizeof(index));
	size_t where = at_start ? 0 : at;
	memcpy(out + where, index, sizeof(index));
	memcpy(out + where + sizeof(index), &crc, 4);
	return at_start ? at : at + index_len;
}

static void write_v3(const char *store, int at_start, int consolidated)
{
	char meta[2048], x[1536];
	snprintf(x, sizeof(x),
		 "{\"zarr_format\": 3, \"node_type\": \"array\", "
		 "\"shape\": [%d, %d], \"data_type\": \"float32\", "
		 "\"chunk_grid\": {\"name\": \"regular\", \"configuration\": "
		 "{\"chunk_shape\": [4, %d]}}, \"chunk_key_encoding\": "
		 "{\"name\": \"default\", \"configuration\": {\"separator\": "
		 "\"/\"}}, \"fill_value\": -1.0, \"codecs\": [{\"name\": "
		 "\"sharding_indexed\", \"configuration\": {\"chunk_shape\": "
		 "[2, %d], \"codecs\": [{\"name\": \"bytes\", "
		 "\"configuration\": {\"endian\": \"little\"}}, {\"name\": "
		 "\"blosc\", \"configuration\": {\"cname\": \"lz4\", "
		 "\"clevel\": 5, \"shuffle\": \"shuffle\", \"typesize\": 4, "
		 "\"blocksize\": 0}}], \"index_codecs\": [{\"name\": "
		 "\"bytes\", \"configuration\": {\"endian\": \"little\"}}, "
		 "{\"name\": \"crc32c\"}], \"index_location\": \"%s\"}}], "
		 "\"attributes\": {}}",
		 R, C, C, C, at_start ? "start" : "end");
	if (consolidated)
		snprintf(meta, sizeof(meta),
			 "{\"zarr_format\": 3, \"node_type\": \"group\", "
			 "\"attributes\": {\"encoding-type\": \"anndata\"}, "
			 "\"consolidated_metadata\": {\"kind\": \"inline\", "
			 "\"metadata\": {\"X\": %s}}}",
			 x);
	else
		snprintf(meta, sizeof(meta),
			 "{\"zarr_format\": 3, \"node_type\": \"group\", "
			 "\"attributes\": {\"encoding-type\": \"anndata\"}}");
	text(store, "zarr.json", meta);
	if (!consolidated)
		text(store, "X/zarr.json", x);
	for (int i = 0; i < 3; i++) {
		unsigned char buf[4096];
		char key[32];
		snprintf(key, sizeof(key), "X/c/%d/0", i);
		put(store, key, buf, shard(i, at_start, i == 1 ? 0 : -1, buf));
	}
}

/* Every row of a write_v3() store, in reverse. */
static void check_v3_rows(struct rfs_source *s)
{
	int64_t rows[R];
	float got[R][C];
	for (int i = 0; i < R; i++)
		rows[i] = R - 1 - i;
	assert_int_equal(rfs_source_read_rows(s, rows, R, got), 0);
	for (int i = 0; i < R; i++)
		for (int c = 0; c < C; c++) {
			int r = (int)rows[i];
			/* shard 1's first inner chunk: rows 4, 5 */
			float want = r == 4 || r == 5 ? -1.0f : value(r, c);
			assert_true(got[i][c] == want);
		}
}

static void test_v3_sharded(void **state)
{
	(void)state;
	struct rfs_source *s;
	char err[512];
	static const char *const stores[] = { "end.zarr", "start.zarr",
					      "consolidated.zarr" };
	for (int k = 0; k < 3; k++) {
		write_v3(stores[k], k == 1, k == 2);
		assert_int_equal(open_store(stores[k], NULL, &s, err), 0);
		check_v3_rows(s);
		rfs_source_destroy(s);
	}
}

/* Shards of 4 x 4 holding inner chunks of 2 x 2 (C order inside the
 * shard), raw big-endian floats, keys "i.j" (the v2 key encoding). */
/* An array's directory, or one of its chunk directories, a link to
 * another: chunk files the walk at open cannot list (it does not follow
 * links) are looked up by name, not taken for absent (their reads were
 * EIO, a change since the mount). */
static void test_linked_chunk_directories(void **state)
{
	(void)state;
	struct rfs_source *s;
	char err[512], from[PATH_MAX], to[PATH_MAX];
	write_v2_dense("linked.zarr");
	snprintf(from, sizeof(from), "%s/linked.zarr/X", root);
	snprintf(to, sizeof(to), "%s/linked.zarr/X.real", root);
	assert_int_equal(rename(from, to), 0);
	assert_int_equal(symlink("X.real", from), 0);
	assert_int_equal(open_store("linked.zarr", NULL, &s, err), 0);
	check_all_rows(s, 7.5f);
	assert_int_equal(rfs_source_state(s), RFS_SOURCE_OK);
	rfs_source_destroy(s);
	write_v3("linkedc.zarr", 0, 0);
	snprintf(from, sizeof(from), "%s/linkedc.zarr/X/c", root);
	snprintf(to, sizeof(to), "%s/linkedc.zarr/X/c.real", root);
	assert_int_equal(rename(from, to), 0);
	assert_int_equal(symlink("c.real", from), 0);
	assert_int_equal(open_store("linkedc.zarr", NULL, &s, err), 0);
	check_v3_rows(s);
	assert_int_equal(rfs_source_state(s), RFS_SOURCE_OK);
	rfs_source_destroy(s);
}

static void test_v3_sharded_2d(void **state)
{
	(void)state;
	struct rfs_source *s;
	char err[512], x[1536];
	snprintf(x, sizeof(x),
		 "{\"zarr_format\": 3, \"node_type\": \"array\", "
		 "\"shape\": [%d, %d], \"data_type\": \"float32\", "
		 "\"chunk_grid\": {\"name\": \"regular\", \"configuration\": "
		 "{\"chunk_shape\": [4, 4]}}, \"chunk_key_encoding\": "
		 "{\"name\": \"v2\"}, \"fill_value\": 0, \"codecs\": "
		 "[{\"name\": \"sharding_indexed\", \"configuration\": "
		 "{\"chunk_shape\": [2, 2], \"codecs\": [{\"name\": "
		 "\"bytes\", \"configuration\": {\"endian\": \"big\"}}], "
		 "\"index_codecs\": [{\"name\": \"bytes\"}]}}], "
		 "\"attributes\": {}}",
		 R, C);
	text("s2d.zarr", "zarr.json",
	     "{\"zarr_format\": 3, \"node_type\": \"group\", "
	     "\"attributes\": {}}");
	text("s2d.zarr", "X/zarr.json", x);
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 2; j++) {
			unsigned char buf[4 * 16 + 4 * 16];
			uint64_t index[8];
			size_t at = 0;
			for (int k = 0; k < 4; k++) { /* inner (k / 2, k % 2) */
				for (int e = 0; e < 4; e++) {
					int r = i * 4 + k / 2 * 2 + e / 2;
					int c = j * 4 + k % 2 * 2 + e % 2;
					float v = r < R && c < C ? value(r, c) :
								   0;
					uint32_t u;
					memcpy(&u, &v, 4);
					u = __builtin_bswap32(u);
					memcpy(buf + at + 4 * e, &u, 4);
				}
				index[2 * k] = at;
				index[2 * k + 1] = 16;
				at += 16;
			}
			memcpy(buf + at, index, sizeof(index));
			char key[32];
			snprintf(key, sizeof(key), "X/%d.%d", i, j);
			put("s2d.zarr", key, buf, at + sizeof(index));
		}
	assert_int_equal(open_store("s2d.zarr", "/X", &s, err), 0);
	int64_t rows[R];
	float got[R][C];
	for (int i = 0; i < R; i++)
		rows[i] = (i * 3) % R;
	assert_int_equal(rfs_source_read_rows(s, rows, R, got), 0);
	for (int i = 0; i < R; i++)
		for (int c = 0; c < C; c++)
			assert_true(got[i][c] == value((int)rows[i], c));
	rfs_source_destroy(s);
}

/* Shard indexes are kept only out of the chunks' share, handed out after
 * the open (rfs_source_take_share): until then, and with a share that has
 * no room for them, each read reads its shard's index. */
static void test_indexes_kept_from_the_share(void **state)
{
	(void)state;
	struct rfs_source *s;
	struct rfs_chunk_cache *cc;
	char path[PATH_MAX], err[512];
	write_v3("share.zarr", 0, 0);
	snprintf(path, sizeof(path), "%s/share.zarr", root);
	for (size_t share = 0; share <= 1 << 20; share += 1 << 20) {
		assert_int_equal(rfs_chunks_create(1 << 20, NULL, &cc), 0);
		struct rfs_source_env lent = { .chunks = cc,
					       .watch = env.watch };
		assert_int_equal(
			rfs_source_open(path, NULL, &lent, &s, err, 512), 0);
		check_v3_rows(s);
		rfs_chunks_limit(cc, share);
		rfs_source_take_share(s);
		check_v3_rows(s);
		check_v3_rows(s);
		rfs_source_destroy(s);
		rfs_chunks_destroy(cc);
	}
}

static void test_shard_index_past_end(void **state)
{
	(void)state;
	struct rfs_source *s;
	char err[512];
	int64_t row = 6;
	float got[C];
	write_v3("pastend.zarr", 0, 0);
	/* Shard 1 (its inner chunk 0 absent) with inner chunk 1's entry
	 * pointing past the file. */
	unsigned char buf[4096];
	size_t n = shard(1, 0, 0, buf);
	uint64_t index[4];
	memcpy(index, buf + n - 36, 32);
	index[2] = n + 100;
	memcpy(buf + n - 36, index, 32);
	uint32_t crc = rfs_zarr_crc32c(index, 32);
	memcpy(buf + n - 4, &crc, 4);
	put("pastend.zarr", "X/c/1/0", buf, n);
	assert_int_equal(open_store("pastend.zarr", NULL, &s, err), 0);
	assert_int_equal(rfs_source_read_rows(s, &row, 1, got), -EIO);
	row = 0; /* other shards still serve */
	assert_int_equal(rfs_source_read_rows(s, &row, 1, got), 0);
	rfs_source_destroy(s);
	/* The crc of the index must hold. */
	buf[n - 1] ^= 1;
	put("pastend.zarr", "X/c/1/0", buf, n);
	assert_int_equal(open_store("pastend.zarr", NULL, &s, err), 0);
	row = 7;
	assert_int_equal(rfs_source_read_rows(s, &row, 1, got), -EIO);
	rfs_source_destroy(s);
	/* A shard shorter than its index. */
	put("pastend.zarr", "X/c/1/0", buf, 10);
	assert_int_equal(open_store("pastend.zarr", NULL, &s, err), 0);
	assert_int_equal(rfs_source_read_rows(s, &row, 1, got), -EIO);
	rfs_source_destroy(s);
}

static void test_collection_members(void **state)
{
	(void)state;
	char path[PATH_MAX], **m;
	size_t n;
	char err[512];
	text("coll", "zarr.json",
	     "{\"zarr_format\": 3, \"node_type\": \"group\", "
	     "\"attributes\": {\"encoding-type\": "
	     "\"annbatch-preshuffled\"}}");
	static const char *const names[] = { "dataset_10", "dataset_2",
					     "dataset_0", "dataset_01",
					     "other" };
	for (int i = 0; i < 5; i++) {
		char rel[64];
		snprintf(rel, sizeof(rel), "%s/.zgroup", names[i]);
		text("coll", rel, root_v2);
	}
	snprintf(path, sizeof(path), "%s/coll", root);
	assert_int_equal(rfs_source_is_store(path), 1);
	assert_int_equal(rfs_source_members(path, &m, &n, err, 512), 1);
	assert_int_equal(n, 3); /* numeric order; dataset_01 is no member */
	assert_non_null(strstr(m[0], "/dataset_0"));
	assert_non_null(strstr(m[1], "/dataset_2"));
	assert_non_null(strstr(m[2], "/dataset_10"));
	for (size_t i = 0; i < n; i++)
		free(m[i]);
	free(m);
	/* A store that is no collection stands for itself. */
	write_v2_dense("single.zarr");
	snprintf(path, sizeof(path), "%s/single.zarr", root);
	assert_int_equal(rfs_source_members(path, &m, &n, err, 512), 0);
	assert_int_equal(rfs_source_is_store(root), 0);
}

/* A root metadata file that is not JSON, or a .zmetadata without its
 * "metadata": refused, naming the file, and nothing kept (the store's
 * root was leaked when the collection check refused it). */
static void test_bad_root_metadata_refused(void **state)
{
	(void)state;
	char path[PATH_MAX], **m = NULL, err[512];
	size_t n;
	text("badjson.zarr", "zarr.json", "{\"zarr_format\": 3,");
	snprintf(path, sizeof(path), "%s/badjson.zarr", root);
	assert_int_equal(rfs_source_members(path, &m, &n, err, 512), -EINVAL);
	assert_non_null(strstr(err, "zarr.json: not valid JSON"));
	text("badzm.zarr", ".zgroup", root_v2);
	text("badzm.zarr", ".zmetadata", "{\"zarr_consolidated_format\": 1}");
	snprintf(path, sizeof(path), "%s/badzm.zarr", root);
	assert_int_equal(rfs_source_members(path, &m, &n, err, 512), -EINVAL);
	assert_non_null(strstr(err, "no \"metadata\" object"));
}

static int setup(void **state)
{
	(void)state;
	snprintf(root, sizeof(root), "/tmp/rankfs-zarr-XXXXXX");
	return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd) == 0 ? 0 : -1;
}

/* fill_value an integer dtype cannot hold (NaN, infinities, reals past
 * int64): refused, as zarr-python refuses the metadata, never cast
 * (undefined behaviour) and served. */
static void test_int_fill_value_out_of_range(void **state)
{
	(void)state;
	static const char *const bad[] = { "\"NaN\"", "\"Infinity\"",
					   "\"-Infinity\"", "1e300", "-1e19" };
	static const char *const good[] = { "7", "-3", "2.0", "0.0", "null" };
	char text[512], err[256];
	struct rfs_zarr_meta m;
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < 5; i++) {
			const char *fill = pass ? good[i] : bad[i];
			snprintf(text, sizeof(text),
				 "{\"zarr_format\": 2, \"shape\": [4], "
				 "\"chunks\": [4], \"dtype\": \"<i4\", "
				 "\"compressor\": null, \"fill_value\": %s, "
				 "\"filters\": null, \"order\": \"C\"}",
				 fill);
			json_t *j = json_loads(text, 0, NULL);
			assert_non_null(j);
			int rc = rfs_zarr_meta_parse(j, 0, "a", &m, err,
						     sizeof(err));
			json_decref(j);
			if (pass) {
				assert_int_equal(rc, 0);
			} else {
				assert_int_equal(rc, -ENOTSUP);
				assert_non_null(strstr(err, "fill_value"));
			}
		}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_v2_dense_with_fill),
		cmocka_unit_test(test_chunk_replaced_is_eio_for_good),
		cmocka_unit_test(test_v2_dense_in_parts),
		cmocka_unit_test(test_v2_dense_parts_across_blocks),
		cmocka_unit_test(test_v2_csr_columns_var),
		cmocka_unit_test(test_bad_indptr_and_codec),
		cmocka_unit_test(test_claims_refused_unread),
		cmocka_unit_test(test_string_column_claims_its_codes),
		cmocka_unit_test(test_claims_add_up_and_are_released),
		cmocka_unit_test(test_absent_chunks_of_a_column_unopened),
		cmocka_unit_test(test_v3_sharded),
		cmocka_unit_test(test_linked_chunk_directories),
		cmocka_unit_test(test_v3_sharded_2d),
		cmocka_unit_test(test_indexes_kept_from_the_share),
		cmocka_unit_test(test_shard_index_past_end),
		cmocka_unit_test(test_collection_members),
		cmocka_unit_test(test_int_fill_value_out_of_range),
		cmocka_unit_test(test_bad_root_metadata_refused),
	};
	if (rfs_watch_create(&env.watch) != 0 ||
	    rfs_claims_create(NULL, &env.claims) != 0)
		return 1;
	int rc = cmocka_run_group_tests(tests, setup, teardown);
	rfs_watch_destroy(env.watch);
	while (nretired)
		rfs_claims_destroy(retired[--nretired]);
	rfs_claims_destroy(env.claims);
	return rc;
}
