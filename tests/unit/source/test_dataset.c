/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/source/dataset.c: several files as one row space. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "source/dataset.h"
#include "h5_fixture.h"
#include "os/memlimit.h"

#define COLS 3

struct fixture {
	char dir[PATH_MAX];
	char path[3][PATH_MAX + 32]; /* rows 5, 3, 4: global 0-4, 5-7, 8-11 */
};

/* What the sources borrow, as a mount's: a ledger of claims, made anew
 * for each limit a test sets (use_limit()). */
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

static const uint64_t file_rows[3] = { 5, 3, 4 };
static const uint64_t file_first[3] = { 0, 5, 8 };

static float value(uint64_t row, uint64_t col)
{
	return (float)row * 10.0f + (float)col;
}

/* A file of rows global ids [first, first + rows) with a categorical
 * obs column "kind" whose categories differ per file, and var names. */
static int write_part(const char *path, uint64_t first, uint64_t rows,
		      uint64_t cols, const char *gene0)
{
	float m[16 * 4];
	int8_t codes[16];
	for (uint64_t r = 0; r < rows; r++) {
		codes[r] = (int8_t)((first + r) % 2);
		for (uint64_t c = 0; c < cols; c++)
			m[r * cols + c] = value(first + r, c);
	}
	struct h5fx_dataset d = { .name = "/X",
				  .type = H5FX_F32,
				  .ndims = 2,
				  .dims = { rows, cols },
				  .data = m };
	/* File k names its two kinds "even"/"odd" plus its own extra one,
	 * sorted, as anndata does per file. */
	const char *cats[] = { "even", "odd" };
	const char *genes[] = { gene0, "g1", "g2", "g3" };
	if (h5fx_write(path, &d, 1, 1) != 0 ||
	    h5fx_add_categorical(path, "kind", codes, rows, cats, 2) != 0 ||
	    h5fx_add_var(path, genes, cols) != 0)
		return -1;
	return 0;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	if (!f || h5fx_tmpdir(f->dir, sizeof(f->dir)) != 0)
		goto fail;
	/* Named so that name order is not creation order. */
	static const char *const names[3] = { "a.h5ad", "b.h5ad", "c.h5" };
	static const int order[3] = { 2, 0, 1 };
	for (int k = 0; k < 3; k++) {
		int i = order[k];
		char path[sizeof(f->path[i])];
		snprintf(path, sizeof(path), "%s/%s", f->dir, names[i]);
		memcpy(f->path[i], path, sizeof(path));
		if (write_part(f->path[i], file_first[i], file_rows[i], COLS,
			       "g0") != 0)
			goto fail;
	}
	*state = f;
	return 0;
fail:
	if (f)
		h5fx_rmtree(f->dir);
	free(f);
	return -1;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	h5fx_rmtree(f->dir);
	free(f);
	return 0;
}

static void check_rows(struct rfs_dataset *d)
{
	const int64_t rows[] = { 11, 0, 5, 4, 5, 8, 7, 2 };
	float out[8 * COLS];
	assert_int_equal(rfs_dataset_read_rows(d, rows, 8, out), 0);
	for (int i = 0; i < 8; i++)
		for (int c = 0; c < COLS; c++)
			assert_true(out[i * COLS + c] ==
				    value((uint64_t)rows[i], (uint64_t)c));
}

static void test_files_in_order(void **state)
{
	struct fixture *f = *state;
	char err[512] = "";
	struct rfs_dataset *d;
	char *paths[] = { f->path[0], f->path[1], f->path[2] };
	int rc = rfs_dataset_open_joined(paths, 3, NULL, &env, 1 << 20, NULL,
					 &d, err, sizeof(err));
	if (rc != 0)
		fail_msg("open: %s", err);
	assert_int_equal(rfs_dataset_files(d), 3);
	assert_true(rfs_dataset_rows(d) == 12);
	for (size_t i = 0; i < 3; i++) {
		assert_true(rfs_dataset_file_start(d, i) == file_first[i]);
		assert_true(rfs_dataset_file(d, i)->rows == file_rows[i]);
	}
	assert_true(rfs_dataset_row_bytes(d) == COLS * 4);
	check_rows(d);
	/* Several files stage their rows: the bound a fill reserves holds
	 * the batch again, beside one file's own. */
	struct rfs_dataset *one;
	assert_int_equal(rfs_dataset_open_joined(paths, 1, NULL, &env, 1 << 20,
						 NULL, &one, err, sizeof(err)),
			 0);
	assert_true(rfs_dataset_read_scratch(one, 12, 0) > 0);
	assert_true(rfs_dataset_read_scratch(d, 12, 0) >=
		    rfs_dataset_read_scratch(one, 12, 0) + 12 * COLS * 4);
	rfs_dataset_destroy(one);
	rfs_dataset_destroy(d);
}

static void test_directory_in_name_order(void **state)
{
	struct fixture *f = *state;
	char err[512] = "", junk[PATH_MAX + 32];
	/* Files that are not *.h5ad / *.h5, or hidden, are not sources. */
	snprintf(junk, sizeof(junk), "%s/notes.txt", f->dir);
	FILE *t = fopen(junk, "w");
	assert_non_null(t);
	fclose(t);
	struct rfs_dataset *d;
	char *paths[] = { f->dir };
	assert_int_equal(rfs_dataset_open_joined(paths, 1, "/X", &env, 1 << 20,
						 NULL, &d, err, sizeof(err)),
			 0);
	assert_int_equal(rfs_dataset_files(d), 3);
	for (size_t i = 0; i < 3; i++)
		assert_string_equal(rfs_dataset_file(d, i)->path, f->path[i]);
	check_rows(d);
	/* The same files given one by one: the same fingerprint. */
	struct rfs_dataset *e;
	char *each[] = { f->path[0], f->path[1], f->path[2] };
	assert_int_equal(rfs_dataset_open_joined(each, 3, "/X", &env, 1 << 20,
						 NULL, &e, err, sizeof(err)),
			 0);
	assert_true(rfs_dataset_fingerprint(d) == rfs_dataset_fingerprint(e));
	rfs_dataset_destroy(e);
	rfs_dataset_destroy(d);
	remove(junk);
}

static void test_column_across_files(void **state)
{
	struct fixture *f = *state;
	char err[512] = "";
	struct rfs_dataset *d;
	char *paths[] = { f->path[0], f->path[1], f->path[2] };
	assert_int_equal(rfs_dataset_open_joined(paths, 3, NULL, &env, 1 << 20,
						 NULL, &d, err, sizeof(err)),
			 0);
	struct rfs_column c;
	assert_int_equal(
		rfs_dataset_read_column(d, "kind", &c, err, sizeof(err)), 0);
	assert_true(c.rows == 12 && c.ncategories == 2);
	for (uint64_t r = 0; r < 12; r++)
		assert_true(c.codes[r] == (int64_t)(r % 2));
	rfs_column_free(&c);
	/* Held once read: each file's codes (8 bytes a row) and its two
	 * names, variable-length strings, 80 bytes each: 40 here and 40 in
	 * the child that reads them (hdf5_strings.c). */
	uint64_t open = rfs_memlimit_claimed(env.claims);
	assert_int_equal(
		rfs_dataset_read_column(d, "kind", &c, err, sizeof(err)), 0);
	assert_int_equal(rfs_memlimit_claimed(env.claims),
			 open + 12 * 8 + 3 * 2 * 80);
	rfs_column_free(&c);
	assert_int_equal(rfs_memlimit_claimed(env.claims), open);
	assert_int_equal(rfs_dataset_read_column(d, "nope", &c, err,
						 sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "obs column 'nope' not found"));
	assert_non_null(strstr(err, "kind")); /* lists what there is */
	rfs_dataset_destroy(d);
}

static void test_mismatches_name_the_file(void **state)
{
	struct fixture *f = *state;
	char err[512] = "", other[PATH_MAX + 32];
	struct rfs_dataset *d = NULL;
	snprintf(other, sizeof(other), "%s/wide.h5ad", f->dir);
	assert_int_equal(write_part(other, 0, 2, COLS + 1, "g0"), 0);
	char *paths[] = { f->path[0], other };
	assert_int_equal(rfs_dataset_open_joined(paths, 2, NULL, &env, 1 << 20,
						 NULL, &d, err, sizeof(err)),
			 -EINVAL);
	assert_null(d);
	assert_non_null(strstr(err, "wide.h5ad"));
	assert_non_null(strstr(err, "4 columns"));
	/* Same width, other genes. */
	assert_int_equal(write_part(other, 0, 2, COLS, "CD19"), 0);
	assert_int_equal(rfs_dataset_open_joined(paths, 2, NULL, &env, 1 << 20,
						 NULL, &d, err, sizeof(err)),
			 -EINVAL);
	/* The first name that differs, not the names' hashes. */
	assert_non_null(strstr(err, "wide.h5ad: var name 0 (counting from 0) "
				    "is 'CD19' where "));
	assert_non_null(strstr(err, " has 'g0': var names differ"));
	remove(other);
	/* An empty directory, and a missing file. */
	char empty[PATH_MAX + 32];
	snprintf(empty, sizeof(empty), "%s/empty", f->dir);
	assert_int_equal(mkdir(empty, 0700), 0);
	char *none[] = { empty };
	assert_int_equal(rfs_dataset_open_joined(none, 1, NULL, &env, 1 << 20,
						 NULL, &d, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "no *.h5ad or *.h5 files"));
	rmdir(empty);
	char *missing[] = { f->path[0], "/nonexistent/x.h5ad" };
	assert_int_equal(rfs_dataset_open_joined(missing, 2, NULL, &env,
						 1 << 20, NULL, &d, err,
						 sizeof(err)),
			 -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/x.h5ad"));
	/* A file given twice, also through its directory: its rows would
	 * be served twice. */
	char *twice[] = { f->path[1], f->path[0], f->path[1] };
	assert_int_equal(rfs_dataset_open_joined(twice, 3, NULL, &env, 1 << 20,
						 NULL, &d, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "the same file as"));
	char *through_dir[] = { f->path[2], f->dir };
	assert_int_equal(rfs_dataset_open_joined(through_dir, 2, NULL, &env,
						 1 << 20, NULL, &d, err,
						 sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, f->path[2]));
	/* A dangling link among a directory's files fails the open. */
	char link[PATH_MAX + 32];
	snprintf(link, sizeof(link), "%s/zz.h5", f->dir);
	assert_int_equal(symlink("/nonexistent/target.h5", link), 0);
	char *dir[] = { f->dir };
	assert_int_equal(rfs_dataset_open_joined(dir, 1, NULL, &env, 1 << 20,
						 NULL, &d, err, sizeof(err)),
			 -ENOENT);
	assert_non_null(strstr(err, "zz.h5"));
	remove(link);
}

static struct rfs_dataset *open_joined(char **paths, size_t n,
				       enum rfs_varjoin_mode mode,
				       const char *names_file)
{
	struct rfs_dataset_join join = { mode, names_file };
	struct rfs_dataset *d = NULL;
	char err[512] = "";
	if (rfs_dataset_open_joined(paths, n, NULL, &env, 1 << 20, &join, &d,
				    err, sizeof(err)) != 0)
		fail_msg("open: %s", err);
	return d;
}

/* Files whose first gene differs: outer serves g0, g1, g2, CD19 (absent
 * ones 0), inner g1, g2; a file that is the served columns in order is
 * read directly. */
/* The table of where each chunk of a chunked /X lies, kept for the
 * mount, is claimed (memlimit.c): 3000 rows in chunks of 3 rows are 1000
 * addresses of 24 bytes. Over the limit, the rows are read through HDF5
 * instead of failing the mount (a grid of 2^24 one-byte chunks, a file
 * of 16 MiB, made a table of 384 MiB). */
static void test_chunk_table_claimed(void **state)
{
	struct fixture *f = *state;
	enum { N = 3000 };
	static float m[N * 2];
	for (uint64_t r = 0; r < N; r++)
		for (uint64_t c = 0; c < 2; c++)
			m[r * 2 + c] = value(r, c);
	struct h5fx_dataset x = { .name = "/X",
				  .type = H5FX_F32,
				  .ndims = 2,
				  .dims = { N, 2 },
				  .layout = H5FX_CHUNKED,
				  .data = m };
	char path[PATH_MAX + 32], err[512];
	snprintf(path, sizeof(path), "%s/chunked.h5", f->dir);
	assert_int_equal(h5fx_write(path, &x, 1, 0), 0);
	char *paths[] = { path };
	const size_t table = N / 3 * 24;
	for (int fits = 1; fits >= 0; fits--) {
		struct rfs_memlimit l = { .bytes = fits ? 1 << 20 : 16 << 10 };
		use_limit(&l);
		struct rfs_dataset *d;
		assert_int_equal(rfs_dataset_open_joined(paths, 1, "/X", &env,
							 1 << 20, NULL, &d, err,
							 sizeof(err)),
				 0);
		assert_int_equal(rfs_dataset_info(d)->read_path,
				 fits ? RFS_READ_CHUNKS : RFS_READ_LIBRARY);
		assert_int_equal(rfs_memlimit_claimed(env.claims),
				 fits ? table : 0);
		const int64_t rows[] = { 2999, 0, 1500, 1501 };
		float out[4 * 2];
		assert_int_equal(rfs_dataset_read_rows(d, rows, 4, out), 0);
		for (int i = 0; i < 4; i++)
			for (int c = 0; c < 2; c++)
				assert_true(
					out[i * 2 + c] ==
					value((uint64_t)rows[i], (uint64_t)c));
		rfs_dataset_destroy(d);
		assert_int_equal(rfs_memlimit_claimed(env.claims), 0);
	}
	struct rfs_memlimit none = { .bytes = UINT64_MAX };
	use_limit(&none);
}

/* The open hands out no share of cache_mb (it settles after the open,
 * view.c): nothing is mapped until the chunks' share is, then each file
 * that fits in it, read_path saying so. */
static void test_share_maps_once(void **state)
{
	struct fixture *f = *state;
	char err[512] = "";
	struct rfs_dataset *d;
	char *paths[] = { f->path[0], f->path[1], f->path[2] };
	for (int fits = 0; fits < 2; fits++) {
		assert_int_equal(rfs_dataset_open_joined(paths, 3, NULL, &env,
							 1 << 20, NULL, &d, err,
							 sizeof(err)),
				 0);
		assert_int_equal(rfs_dataset_info(d)->read_path,
				 RFS_READ_PREAD);
		check_rows(d);
		rfs_dataset_share_chunks(d, fits ? 1 << 20 : 0);
		enum rfs_read_path want = fits ? RFS_READ_MMAP : RFS_READ_PREAD;
		assert_int_equal(rfs_dataset_info(d)->read_path, want);
		for (size_t i = 0; i < 3; i++)
			assert_int_equal(rfs_dataset_file(d, i)->read_path,
					 want);
		check_rows(d);
		rfs_dataset_destroy(d);
	}
}

static void test_joined_dense(void **state)
{
	struct fixture *f = *state;
	char other[PATH_MAX + 32];
	snprintf(other, sizeof(other), "%s/other.h5ad", f->dir);
	assert_int_equal(write_part(other, 100, 2, COLS, "CD19"), 0);
	char *paths[] = { f->path[0], other };
	struct rfs_dataset *d = open_joined(paths, 2, RFS_VARJOIN_OUTER, NULL);
	assert_int_equal(rfs_dataset_var_join(d), RFS_VARJOIN_OUTER);
	assert_true(rfs_dataset_info(d)->cols == 4);
	assert_true(rfs_dataset_row_bytes(d) == 16);
	assert_true(rfs_dataset_var_count(d) == 4);
	assert_string_equal(rfs_dataset_var_name(d, 3), "CD19");
	const int64_t rows[] = { 6, 1, 5 }; /* other's 1, f0's 1, other's 0 */
	float out[3 * 4];
	assert_int_equal(rfs_dataset_read_rows(d, rows, 3, out), 0);
	const float want[3 * 4] = {
		0,	     value(101, 1), value(101, 2), value(101, 0),
		value(1, 0), value(1, 1),   value(1, 2),   0,
		0,	     value(100, 1), value(100, 2), value(100, 0)
	};
	assert_memory_equal(out, want, sizeof(want));
	assert_true(rfs_dataset_read_scratch(d, 3, 0) >= 3 * COLS * 4);
	uint64_t outer_fp = rfs_dataset_fingerprint(d);
	rfs_dataset_destroy(d);

	d = open_joined(paths, 2, RFS_VARJOIN_INNER, NULL);
	assert_true(rfs_dataset_info(d)->cols == 2);
	float two[3 * 2];
	assert_int_equal(rfs_dataset_read_rows(d, rows, 3, two), 0);
	const float want2[3 * 2] = {
		value(101, 1), value(101, 2), value(1, 1),
		value(1, 2),   value(100, 1), value(100, 2)
	};
	assert_memory_equal(two, want2, sizeof(want2));
	assert_true(rfs_dataset_fingerprint(d) != outer_fp);
	rfs_dataset_destroy(d);

	/* One file, joined with itself: the identity, read as before,
	 * and the files' var names served in the default mode too. */
	struct rfs_dataset *plain;
	char err[512];
	d = open_joined(paths, 1, RFS_VARJOIN_OUTER, NULL);
	assert_int_equal(rfs_dataset_open_joined(paths, 1, NULL, &env, 1 << 20,
						 NULL, &plain, err,
						 sizeof(err)),
			 0);
	assert_true(rfs_dataset_read_scratch(d, 3, 0) ==
		    rfs_dataset_read_scratch(plain, 3, 0));
	assert_int_equal(rfs_dataset_var_join(plain), RFS_VARJOIN_NONE);
	assert_true(rfs_dataset_var_count(plain) == COLS);
	assert_string_equal(rfs_dataset_var_name(plain, 0), "g0");
	assert_true(rfs_dataset_var_fingerprint(plain) ==
		    rfs_dataset_var_fingerprint(d));
	rfs_dataset_destroy(plain);
	rfs_dataset_destroy(d);
	remove(other);
}

/* A 2 x 3 CSR .h5ad: row 0 holds columns 0 and 2 (values v0, v0 + 1),
 * row 1 all three (v0 + 2 ..), its var names genes. */
static void write_csr_part(const char *path, float v0, const char *const *genes)
{
	const float data[] = { v0, v0 + 1, v0 + 2, v0 + 3, v0 + 4 };
	const int32_t indices[] = { 0, 2, 0, 1, 2 };
	const int64_t indptr[] = { 0, 2, 5 };
	struct h5fx_dataset d[] = {
		{ .name = "/X/data",
		  .type = H5FX_F32,
		  .ndims = 1,
		  .dims = { 5 },
		  .data = data },
		{ .name = "/X/indices",
		  .type = H5FX_I32,
		  .ndims = 1,
		  .dims = { 5 },
		  .data = indices },
		{ .name = "/X/indptr",
		  .type = H5FX_I64,
		  .ndims = 1,
		  .dims = { 3 },
		  .data = indptr },
	};
	assert_int_equal(h5fx_write(path, d, 3, 1), 0);
	assert_int_equal(h5fx_mark_csr(path, "/X", 2, 3), 0);
	assert_int_equal(h5fx_add_var(path, genes, 3), 0);
}

/* CSR rows remapped: b's columns (c, x, a) onto inner's (a, c), x
 * dropped, sorted; served counts exact, before any read, and claimed
 * (memlimit.c) with the indptrs and the join's names and maps while the
 * dataset is open. */
static void test_joined_csr(void **state)
{
	struct fixture *f = *state;
	char a[PATH_MAX + 32], b[PATH_MAX + 32];
	snprintf(a, sizeof(a), "%s/csr_a.h5ad", f->dir);
	snprintf(b, sizeof(b), "%s/csr_b.h5ad", f->dir);
	const char *ga[] = { "a", "b", "c" }, *gb[] = { "c", "x", "a" };
	write_csr_part(a, 1, ga);
	write_csr_part(b, 10, gb);
	char *paths[] = { a, b };
	struct rfs_memlimit none = { .bytes = UINT64_MAX };
	use_limit(&none);
	struct rfs_dataset *d = open_joined(paths, 2, RFS_VARJOIN_INNER, NULL);
	/* Two files of 2 rows: 3 offsets of 8 bytes, 2 counts of 4 each;
	 * the served names a and c, and each file's map of 2 served and 3
	 * own columns, 8 bytes each. */
	assert_int_equal(rfs_memlimit_claimed(env.claims),
			 2 * (3 * 8 + 2 * 4) + 2 * RFS_MEMLIMIT_STRING_BYTES +
				 2 * (2 + 3) * 8);
	assert_true(rfs_dataset_info(d)->cols == 2);
	/* a: row 0 {a, c}, row 1 {a, c} (b dropped); b: row 0 {c, a},
	 * row 1 {c, a} (x dropped) */
	assert_true(rfs_dataset_row_nnz(d, 0) == 2);
	assert_true(rfs_dataset_row_nnz(d, 1) == 2);
	assert_true(rfs_dataset_row_nnz(d, 2) == 2);
	assert_true(rfs_dataset_row_nnz(d, 3) == 2);
	assert_true(rfs_dataset_info(d)->nnz == 8);
	assert_true(rfs_dataset_info(d)->max_row_nnz == 2);
	const int64_t rows[] = { 3, 0, 2 };
	struct rfs_csr c;
	assert_int_equal(rfs_dataset_read_csr(d, rows, 3, NULL, &c), 0);
	const uint64_t want_start[] = { 0, 2, 4, 6 };
	assert_memory_equal(c.start, want_start, sizeof(want_start));
	/* b row 1: c=12 (col 0), x=13, a=14 (col 2) -> a=14, c=12 */
	const int64_t want_cols[] = { 0, 1, 0, 1, 0, 1 };
	const float want_values[] = { 14, 12, 1, 2, 11, 10 };
	assert_memory_equal(c.cols, want_cols, sizeof(want_cols));
	assert_memory_equal(c.values, want_values, sizeof(want_values));
	rfs_source_csr_free(&c);
	/* Into the caller's buffer, sized by the served counts. */
	float values[6];
	assert_int_equal(rfs_dataset_read_csr(d, rows, 3, values, &c), 0);
	assert_memory_equal(values, want_values, sizeof(want_values));
	rfs_source_csr_free(&c);
	rfs_dataset_destroy(d);
	assert_int_equal(rfs_memlimit_claimed(env.claims), 0);

	/* outer drops nothing: the files' own counts. */
	d = open_joined(paths, 2, RFS_VARJOIN_OUTER, NULL);
	assert_true(rfs_dataset_info(d)->cols == 4); /* a, b, c, x */
	assert_true(rfs_dataset_info(d)->nnz == 10);
	assert_true(rfs_dataset_row_nnz(d, 3) == 3);
	assert_int_equal(rfs_dataset_read_csr(d, rows, 1, NULL, &c), 0);
	const int64_t outer_cols[] = { 0, 2, 3 }; /* a=14, c=12, x=13 */
	const float outer_values[] = { 14, 12, 13 };
	assert_memory_equal(c.cols, outer_cols, sizeof(outer_cols));
	assert_memory_equal(c.values, outer_values, sizeof(outer_values));
	rfs_source_csr_free(&c);
	rfs_dataset_destroy(d);
	remove(a);
	remove(b);
}

/* Joins need var names in every file, and var_names=FILE's errors. */
static void test_join_errors(void **state)
{
	struct fixture *f = *state;
	char bare[PATH_MAX + 32], names[PATH_MAX + 32], err[512] = "";
	snprintf(bare, sizeof(bare), "%s/bare.h5ad", f->dir);
	assert_int_equal(h5fx_write_f32(bare, 2, COLS, 2, 1), 0);
	char *paths[] = { f->path[0], bare };
	struct rfs_dataset *d = NULL;
	struct rfs_dataset_join join = { RFS_VARJOIN_OUTER, NULL };
	assert_int_equal(rfs_dataset_open_joined(paths, 2, NULL, &env, 1 << 20,
						 &join, &d, err, sizeof(err)),
			 -EINVAL);
	assert_null(d);
	assert_non_null(strstr(err, "bare.h5ad: /X has no var names"));
	snprintf(names, sizeof(names), "%s/names.txt", f->dir);
	FILE *t = fopen(names, "w");
	assert_non_null(t);
	fputs("g2\nnope\n", t);
	fclose(t);
	join = (struct rfs_dataset_join){ RFS_VARJOIN_NAMES, names };
	assert_int_equal(rfs_dataset_open_joined(paths, 1, NULL, &env, 1 << 20,
						 &join, &d, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "names.txt: 'nope' (line 2)"));
	remove(names);
	/* A var shorter than X is wide: no join; without one the file
	 * mounts as before, with no var names served. */
	const char *genes[] = { "g0", "g1" };
	assert_int_equal(h5fx_add_var(bare, genes, 2), 0);
	paths[0] = bare;
	join = (struct rfs_dataset_join){ RFS_VARJOIN_OUTER, NULL };
	assert_int_equal(rfs_dataset_open_joined(paths, 1, NULL, &env, 1 << 20,
						 &join, &d, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "bare.h5ad: 2 var names for 3 columns"));
	assert_int_equal(rfs_dataset_open_joined(paths, 1, NULL, &env, 1 << 20,
						 NULL, &d, err, sizeof(err)),
			 0);
	assert_true(rfs_dataset_var_count(d) == 0);
	/* The names read and refused hold no claim for the mount's life. */
	assert_int_equal(rfs_memlimit_claimed(env.claims), 0);
	rfs_dataset_destroy(d);
	remove(bare);
}

/* A join of a file whose var index is long (4096 names, which its
 * metadata alone may claim: HDF5's length, zarr's shape) claims its
 * tables before it makes them (memlimit.c): at 360 KiB its names (320
 * KiB, read at open, half of it in the child that reads them) fit, and
 * its hash index (8192 slots of 8 bytes) is refused, naming the file; at
 * 2 MiB the join is made, and what it keeps
 * (the served names, the maps) is claimed until the dataset is
 * destroyed. No claim is left after either. Before, the index, the
 * served names and the maps were made unclaimed (at 200 KiB too). */
static void test_join_claims_name_the_file(void **state)
{
	struct fixture *f = *state;
	enum { W = 4096 };
	char wide[PATH_MAX + 32], err[512] = "";
	snprintf(wide, sizeof(wide), "%s/wide_var.h5ad", f->dir);
	assert_int_equal(h5fx_write_f32(wide, 2, W, 2, 1), 0);
	char **genes = calloc(W, sizeof(*genes));
	assert_non_null(genes);
	for (int i = 0; i < W; i++) {
		char text[16];
		snprintf(text, sizeof(text), "w%d", i);
		assert_non_null(genes[i] = strdup(text));
	}
	assert_int_equal(h5fx_add_var(wide, (const char *const *)genes, W), 0);
	for (int i = 0; i < W; i++)
		free(genes[i]);
	free(genes);
	char *paths[] = { f->path[0], wide };
	struct rfs_dataset_join join = { RFS_VARJOIN_OUTER, NULL };
	struct rfs_dataset *d = NULL;
	struct rfs_memlimit l = { .bytes = 360 << 10 };
	snprintf(l.where, sizeof(l.where), "the test's limit");
	use_limit(&l);
	assert_int_equal(rfs_dataset_open_joined(paths, 2, NULL, &env, 1 << 20,
						 &join, &d, err, sizeof(err)),
			 -ENOMEM);
	assert_null(d);
	char says[PATH_MAX + 200];
	snprintf(says, sizeof(says),
		 "%s: var_join's hash index of its var names claims 8192 "
		 "entries: at least 0 MiB at mount, more than the 0 MiB of "
		 "the test's limit",
		 wide);
	if (!strstr(err, says))
		fail_msg("'%s' does not say '%s'", err, says);
	assert_int_equal(rfs_memlimit_claimed(env.claims), 0);

	l.bytes = 2 << 20;
	use_limit(&l);
	assert_int_equal(rfs_dataset_open_joined(paths, 2, NULL, &env, 1 << 20,
						 &join, &d, err, sizeof(err)),
			 0);
	assert_true(rfs_dataset_var_count(d) == COLS + W);
	/* g0..g2 and w0..; maps of the served columns and each file's. */
	assert_int_equal(rfs_memlimit_claimed(env.claims),
			 (COLS + W) * RFS_MEMLIMIT_STRING_BYTES +
				 ((COLS + W) * 2 + COLS + W) * 8);
	rfs_dataset_destroy(d);
	assert_int_equal(rfs_memlimit_claimed(env.claims), 0);
	struct rfs_memlimit none = { .bytes = UINT64_MAX };
	use_limit(&none);
	remove(wide);
}

/* A file of 2 rows whose categorical obs column "ct" has n categories
 * "<prefix>0"... */
static void write_many_categories(const char *path, const char *prefix,
				  size_t n)
{
	char **cats = calloc(n, sizeof(*cats));
	assert_non_null(cats);
	for (size_t i = 0; i < n; i++) {
		char text[32];
		snprintf(text, sizeof(text), "%s%zu", prefix, i);
		assert_non_null(cats[i] = strdup(text));
	}
	const int8_t codes[] = { 0, 1 };
	assert_int_equal(h5fx_write_f32(path, 2, COLS, 2, 1), 0);
	assert_int_equal(h5fx_add_categorical(path, "ct", codes, 2,
					      (const char *const *)cats, n),
			 0);
	for (size_t i = 0; i < n; i++)
		free(cats[i]);
	free(cats);
}

/* An obs column united over files claims the tables uniting their
 * categories (memlimit.c): two files of 4096 categories each read (320
 * KiB of names each, half of it in the child that reads them) fit 700
 * KiB, and their union's tables (160 KiB more) do not: refused, naming
 * the second file and the column; made at 1 MiB. No claim left after either. Before, the tables were made
 * unclaimed. */
static void test_column_unite_claimed(void **state)
{
	struct fixture *f = *state;
	char a[PATH_MAX + 32], b[PATH_MAX + 32], err[512] = "";
	snprintf(a, sizeof(a), "%s/cats_a.h5ad", f->dir);
	snprintf(b, sizeof(b), "%s/cats_b.h5ad", f->dir);
	write_many_categories(a, "a", 4096);
	write_many_categories(b, "b", 4096);
	char *paths[] = { a, b };
	struct rfs_memlimit l = { .bytes = 700 << 10 };
	snprintf(l.where, sizeof(l.where), "the test's limit");
	use_limit(&l);
	struct rfs_dataset *d;
	assert_int_equal(rfs_dataset_open_joined(paths, 2, NULL, &env, 1 << 20,
						 NULL, &d, err, sizeof(err)),
			 0);
	struct rfs_column c;
	assert_int_equal(rfs_dataset_read_column(d, "ct", &c, err, sizeof(err)),
			 -ENOMEM);
	char says[PATH_MAX + 200];
	snprintf(says, sizeof(says),
		 "%s: column 'ct': the tables uniting its 4096 categories "
		 "with the 4096 of the files before it claims 20480 entries",
		 b);
	if (!strstr(err, says))
		fail_msg("'%s' does not say '%s'", err, says);
	assert_int_equal(rfs_memlimit_claimed(env.claims), 0);
	rfs_dataset_destroy(d);

	l.bytes = 1 << 20;
	use_limit(&l);
	assert_int_equal(rfs_dataset_open_joined(paths, 2, NULL, &env, 1 << 20,
						 NULL, &d, err, sizeof(err)),
			 0);
	assert_int_equal(rfs_dataset_read_column(d, "ct", &c, err, sizeof(err)),
			 0);
	assert_true(c.rows == 4 && c.ncategories == 2 * 4096);
	assert_string_equal(c.categories[c.codes[3]], "b1");
	rfs_column_free(&c);
	assert_int_equal(rfs_memlimit_claimed(env.claims), 0);
	rfs_dataset_destroy(d);
	struct rfs_memlimit none = { .bytes = UINT64_MAX };
	use_limit(&none);
	remove(a);
	remove(b);
}

/* A CSR .h5ad of 3 rows over 3 columns (var names genes) whose rows hold
 * lens[r] stored values (column ids cycling 0, 1, 2, repeating). */
static void write_csr_rows(const char *path, const uint64_t lens[3],
			   const char *const *genes)
{
	uint64_t nnz = lens[0] + lens[1] + lens[2];
	float *data = calloc(nnz, sizeof(*data));
	int32_t *indices = calloc(nnz, sizeof(*indices));
	int64_t indptr[4] = { 0 };
	assert_non_null(data);
	assert_non_null(indices);
	for (uint64_t k = 0; k < nnz; k++)
		indices[k] = (int32_t)(k % 3);
	for (int r = 0; r < 3; r++)
		indptr[r + 1] = indptr[r] + (int64_t)lens[r];
	struct h5fx_dataset d[] = {
		{ .name = "/X/data",
		  .type = H5FX_F32,
		  .ndims = 1,
		  .dims = { nnz },
		  .data = data },
		{ .name = "/X/indices",
		  .type = H5FX_I32,
		  .ndims = 1,
		  .dims = { nnz },
		  .data = indices },
		{ .name = "/X/indptr",
		  .type = H5FX_I64,
		  .ndims = 1,
		  .dims = { 4 },
		  .data = indptr },
	};
	assert_int_equal(h5fx_write(path, d, 3, 1), 0);
	assert_int_equal(h5fx_mark_csr(path, "/X", 3, 3), 0);
	assert_int_equal(h5fx_add_var(path, genes, 3), 0);
	free(data);
	free(indices);
}

static int open_at(char **paths, size_t n, struct rfs_dataset_join *join,
		   uint64_t limit, struct rfs_dataset **d, char *err,
		   size_t errlen)
{
	struct rfs_memlimit l = { .bytes = limit };
	snprintf(l.where, sizeof(l.where), "the test's limit");
	use_limit(&l);
	*d = NULL;
	return rfs_dataset_open_joined(paths, n, NULL, &env, 1 << 20, join, d,
				       err, errlen);
}

/* CSR rows read at mount hold as many values as indptr says, which the
 * data's declared length alone (no storage) may back: claimed before
 * they are read (20 bytes a float32 value with int32 column ids), the
 * first and last rows read for the fingerprint, and a join's count of
 * the served values (blocks of at most 2^20 values, a row of more read
 * alone). At 1 MiB a first row of 2^16 values (1.25 MiB) fails the open
 * naming the file and the row; a middle one the join's count, naming
 * the rows; at 4 MiB both open. No claim is left after either. Before,
 * the rows were read unclaimed. */
static void test_csr_reads_at_mount_claimed(void **state)
{
	struct fixture *f = *state;
	enum { BIG = 1 << 16 };
	char a[PATH_MAX + 32], b[PATH_MAX + 32], err[512] = "";
	char says[PATH_MAX + 200];
	snprintf(a, sizeof(a), "%s/rows_a.h5ad", f->dir);
	snprintf(b, sizeof(b), "%s/rows_b.h5ad", f->dir);
	const char *ga[] = { "a", "b", "c" }, *gb[] = { "c", "x", "a" };
	struct rfs_dataset *d;
	struct rfs_dataset_join inner = { RFS_VARJOIN_INNER, NULL };

	write_csr_rows(a, (const uint64_t[]){ BIG, 1, 1 }, ga);
	char *one[] = { a };
	assert_int_equal(open_at(one, 1, NULL, 1 << 20, &d, err, sizeof(err)),
			 -ENOMEM);
	snprintf(says, sizeof(says),
		 "%s: /X row 0 (its stored values, read for its fingerprint) "
		 "claims 65536 entries: at least 1 MiB at mount, more than "
		 "the 1 MiB of the test's limit",
		 a);
	if (!strstr(err, says))
		fail_msg("'%s' does not say '%s'", err, says);
	assert_null(d);
	assert_int_equal(rfs_memlimit_claimed(env.claims), 0);
	assert_int_equal(open_at(one, 1, NULL, 4 << 20, &d, err, sizeof(err)),
			 0);
	rfs_dataset_destroy(d);
	assert_int_equal(rfs_memlimit_claimed(env.claims), 0);

	write_csr_rows(a, (const uint64_t[]){ 1, BIG, 1 }, ga);
	write_csr_rows(b, (const uint64_t[]){ 1, 1, 1 }, gb);
	char *both[] = { a, b };
	assert_int_equal(open_at(both, 2, &inner, 1 << 20, &d, err,
				 sizeof(err)),
			 -ENOMEM);
	snprintf(says, sizeof(says),
		 "%s: /X rows 0 to 2 (their stored values, read to count "
		 "those var_join serves) claims 65538 entries",
		 a);
	if (!strstr(err, says))
		fail_msg("'%s' does not say '%s'", err, says);
	assert_null(d);
	assert_int_equal(rfs_memlimit_claimed(env.claims), 0);
	assert_int_equal(
		open_at(both, 2, &inner, 4 << 20, &d, err, sizeof(err)), 0);
	/* a's row 1 (values 1 to BIG) keeps its a and c, b dropped. */
	uint64_t kept = 0;
	for (uint64_t k = 1; k <= BIG; k++)
		kept += k % 3 != 1;
	assert_true(rfs_dataset_row_nnz(d, 1) == kept);
	rfs_dataset_destroy(d);
	assert_int_equal(rfs_memlimit_claimed(env.claims), 0);
	struct rfs_memlimit none = { .bytes = UINT64_MAX };
	use_limit(&none);
	remove(a);
	remove(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_files_in_order),
		cmocka_unit_test(test_directory_in_name_order),
		cmocka_unit_test(test_column_across_files),
		cmocka_unit_test(test_chunk_table_claimed),
		cmocka_unit_test(test_share_maps_once),
		cmocka_unit_test(test_mismatches_name_the_file),
		cmocka_unit_test(test_joined_dense),
		cmocka_unit_test(test_joined_csr),
		cmocka_unit_test(test_join_errors),
		cmocka_unit_test(test_join_claims_name_the_file),
		cmocka_unit_test(test_column_unite_claimed),
		cmocka_unit_test(test_csr_reads_at_mount_claimed),
	};
	if (rfs_claims_create(NULL, &env.claims) != 0)
		return 1;
	int failed = cmocka_run_group_tests(tests, setup, teardown);
	while (nretired)
		rfs_claims_destroy(retired[--nretired]);
	rfs_claims_destroy(env.claims);
	return failed;
}
