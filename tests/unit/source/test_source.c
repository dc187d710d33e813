/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/source/source.c: opening, describing and reading one HDF5
 * dataset. Files are written at test time (tests/support/h5_fixture.c). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "h5_fixture.h"
#include "core/log.h"
#include "os/helper.h"
#include "source/column.h"
#include "core/buf.h"
#include "os/watch.h"
#include "source/source.h"
#include "source/varjoin.h"

/* What the sources borrow: a watch table, as a mount's. */
static struct rfs_source_env env;

/* rfs_log goes to a file so tests can check what failures log. */
static char log_dir[PATH_MAX];
static char log_path[PATH_MAX + 16];

static long log_size(void)
{
	struct stat st;
	return stat(log_path, &st) == 0 ? (long)st.st_size : 0;
}

/* Asserts the log written since offset `from` contains text. */
static void assert_logged_since(long from, const char *text)
{
	FILE *fp = fopen(log_path, "r");
	assert_non_null(fp);
	char buf[8192];
	assert_int_equal(fseek(fp, from, SEEK_SET), 0);
	size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
	fclose(fp);
	buf[n] = '\0';
	if (!strstr(buf, text))
		fail_msg("log lacks \"%s\":\n%s", text, buf);
}

/* Link-time mock (-Wl,--wrap=H5Dread): fails while h5dread_fail is set. */
herr_t __real_H5Dread(hid_t dset, hid_t mem_type, hid_t mem_space,
		      hid_t file_space, hid_t plist, void *buf);
herr_t __wrap_H5Dread(hid_t dset, hid_t mem_type, hid_t mem_space,
		      hid_t file_space, hid_t plist, void *buf);

static int h5dread_fail;
static int h5dread_calls;
/* Each test's reader of HDF5's strings, as a mount's dataset has one. */
static struct rfs_helper *helper;

herr_t __wrap_H5Dread(hid_t dset, hid_t mem_type, hid_t mem_space,
		      hid_t file_space, hid_t plist, void *buf)
{
	h5dread_calls++;
	if (h5dread_fail)
		return -1;
	return __real_H5Dread(dset, mem_type, mem_space, file_space, plist,
			      buf);
}

struct fixture {
	char dir[PATH_MAX];
	char path[PATH_MAX + 32];
	char cwd[PATH_MAX]; /* restored at teardown: some tests leave it */
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	if (!f || !getcwd(f->cwd, sizeof(f->cwd)) ||
	    h5fx_tmpdir(f->dir, sizeof(f->dir)) != 0) {
		free(f);
		return -1;
	}
	h5dread_fail = 0;
	h5dread_calls = 0;
	if (rfs_helper_create(&helper) != 0) {
		free(f);
		return -1;
	}
	env.strings = helper;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	if (chdir(f->cwd) != 0)
		return -1;
	h5fx_rmtree(f->dir);
	free(f);
	rfs_helper_destroy(helper);
	helper = env.strings = NULL;
	return 0;
}

static const char *file_in(struct fixture *f, const char *name)
{
	snprintf(f->path, sizeof(f->path), "%s/%s", f->dir, name);
	return f->path;
}

#define ROWS 50
#define COLS 6

static float value_f32(uint64_t r, uint64_t c)
{
	return (float)r * 1000.0f + (float)c + 0.25f;
}

static float *f32_matrix(uint64_t rows, uint64_t cols)
{
	float *m = malloc(rows * cols * sizeof(*m));
	assert_non_null(m);
	for (uint64_t r = 0; r < rows; r++)
		for (uint64_t c = 0; c < cols; c++)
			m[r * cols + c] = value_f32(r, c);
	return m;
}

static const char *write_f32(struct fixture *f, const char *name,
			     const char *dataset, enum h5fx_layout layout,
			     uint64_t rows, int anndata)
{
	float *m = f32_matrix(rows, COLS);
	struct h5fx_dataset d = { .name = dataset,
				  .type = H5FX_F32,
				  .ndims = 2,
				  .dims = { rows, COLS },
				  .layout = layout,
				  .data = m };
	const char *path = file_in(f, name);
	assert_int_equal(h5fx_write(path, &d, 1, anndata), 0);
	free(m);
	return path;
}

static struct rfs_source *open_ok(const char *path, const char *dataset)
{
	struct rfs_source *s = NULL;
	char err[512] = "";
	int rc = rfs_source_open(path, dataset, &env, &s, err, sizeof(err));
	if (rc != 0)
		fail_msg("open %s: %d %s", path, rc, err);
	assert_non_null(s);
	return s;
}

/* Reads rows (any order, repeats) and compares with value_f32. */
static void check_f32_rows(struct rfs_source *s, const int64_t *rows, size_t n)
{
	float *out = malloc(n * COLS * sizeof(*out));
	assert_non_null(out);
	memset(out, 0xff, n * COLS * sizeof(*out));
	assert_int_equal(rfs_source_read_rows(s, rows, n, out), 0);
	for (size_t i = 0; i < n; i++)
		for (uint64_t c = 0; c < COLS; c++)
			if (out[i * COLS + c] !=
			    value_f32((uint64_t)rows[i], c))
				fail_msg("slot %zu (row %lld) col %llu: %g", i,
					 (long long)rows[i],
					 (unsigned long long)c,
					 (double)out[i * COLS + c]);
	free(out);
}

static const int64_t scattered[] = { 49, 0,  7,	 7,  8, 9, 10, 3,  49,
				     0,	 25, 24, 26, 1, 2, 48, 30, 7 };
#define N_SCATTERED (sizeof(scattered) / sizeof(scattered[0]))

static void test_contiguous_f32(void **state)
{
	struct fixture *f = *state;
	const char *path =
		write_f32(f, "plain.h5", "/data/X", H5FX_CONTIGUOUS, ROWS, 0);
	struct rfs_source *s = open_ok(path, "/data/X");
	const struct rfs_source_info *i = rfs_source_info(s);
	assert_int_equal(i->ndims, 2);
	assert_true(i->rows == ROWS);
	assert_true(i->cols == COLS);
	assert_int_equal(i->dtype, RFS_FLOAT32);
	assert_string_equal(i->dataset, "/data/X");
	assert_string_equal(i->layout, "contiguous");
	assert_int_equal(i->read_path, RFS_READ_PREAD); /* plain LE */
	assert_int_equal(i->path[0], '/');
	assert_non_null(strstr(i->path, "plain.h5"));
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_true(i->mtime == st.st_mtime);
	assert_int_equal(rfs_source_row_bytes(s), COLS * 4);

	check_f32_rows(s, scattered, N_SCATTERED);
	/* Every row once, in reverse. */
	int64_t all[ROWS];
	for (int r = 0; r < ROWS; r++)
		all[r] = ROWS - 1 - r;
	check_f32_rows(s, all, ROWS);
	/* Every other row: runs are of adjacent rows only (a gap is never
	 * read into the staging buffer, which holds n rows). */
	int64_t even[ROWS / 2];
	for (int r = 0; r < ROWS / 2; r++)
		even[r] = 2 * r;
	check_f32_rows(s, even, ROWS / 2);
	/* One row, many times. */
	int64_t same[9] = { 17, 17, 17, 17, 17, 17, 17, 17, 17 };
	check_f32_rows(s, same, 9);
	/* Zero rows: nothing to do. */
	assert_int_equal(rfs_source_read_rows(s, all, 0, NULL), 0);
	assert_int_equal(h5dread_calls, 0);
	rfs_source_destroy(s);
	rfs_source_destroy(NULL);
}

static void test_relative_path_made_absolute(void **state)
{
	struct fixture *f = *state;
	write_f32(f, "rel.h5", "/X", H5FX_CONTIGUOUS, ROWS, 0);
	char cwd[PATH_MAX];
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(f->dir), 0);
	struct rfs_source *s = open_ok("./rel.h5", "/X");
	assert_int_equal(chdir(cwd), 0);
	const struct rfs_source_info *i = rfs_source_info(s);
	assert_int_equal(i->path[0], '/');
	char want[PATH_MAX + 16];
	char *real = realpath(f->dir, NULL);
	assert_non_null(real);
	snprintf(want, sizeof(want), "%s/rel.h5", real);
	free(real);
	assert_string_equal(i->path, want);
	check_f32_rows(s, scattered, N_SCATTERED);
	rfs_source_destroy(s);
}

static void test_chunked_and_deflate(void **state)
{
	struct fixture *f = *state;
	static const enum h5fx_layout layouts[] = { H5FX_CHUNKED, H5FX_DEFLATE,
						    H5FX_COMPACT };
	static const char *const names[] = { "chunked", "chunked", "compact" };
	for (int l = 0; l < 3; l++) {
		const char *path =
			write_f32(f, "chunked.h5", "/X", layouts[l], ROWS, 0);
		struct rfs_source *s = open_ok(path, "/X");
		const struct rfs_source_info *i = rfs_source_info(s);
		assert_string_equal(i->layout, names[l]);
		assert_int_equal(i->read_path, RFS_READ_LIBRARY);
		assert_true(i->rows == ROWS && i->cols == COLS);
		int before = h5dread_calls;
		check_f32_rows(s, scattered, N_SCATTERED);
		assert_true(h5dread_calls > before); /* through HDF5 */
		int64_t even[ROWS / 2];
		for (int r = 0; r < ROWS / 2; r++)
			even[r] = ROWS - 1 - 2 * r;
		check_f32_rows(s, even, ROWS / 2);
		rfs_source_destroy(s);
	}
}

static void test_same_data_same_fingerprint(void **state)
{
	struct fixture *f = *state;
	/* Stored differently, same values: same fingerprint. */
	write_f32(f, "a.h5", "/X", H5FX_CONTIGUOUS, ROWS, 0);
	struct rfs_source *a = open_ok(file_in(f, "a.h5"), "/X");
	write_f32(f, "b.h5", "/X", H5FX_DEFLATE, ROWS, 0);
	struct rfs_source *b = open_ok(file_in(f, "b.h5"), "/X");
	write_f32(f, "c.h5", "/X", H5FX_CONTIGUOUS, ROWS - 1, 0);
	struct rfs_source *c = open_ok(file_in(f, "c.h5"), "/X");
	float *m = f32_matrix(ROWS, COLS);
	m[(ROWS - 1) * COLS + 2] = -1; /* last row differs */
	struct h5fx_dataset d = { .name = "/X",
				  .type = H5FX_F32,
				  .ndims = 2,
				  .dims = { ROWS, COLS },
				  .data = m };
	assert_int_equal(h5fx_write(file_in(f, "d.h5"), &d, 1, 0), 0);
	free(m);
	struct rfs_source *e = open_ok(file_in(f, "d.h5"), "/X");
	uint64_t fa = rfs_source_info(a)->fingerprint;
	assert_true(fa == rfs_source_info(b)->fingerprint);
	assert_true(fa != rfs_source_info(c)->fingerprint);
	assert_true(fa != rfs_source_info(e)->fingerprint);
	rfs_source_destroy(a);
	rfs_source_destroy(b);
	rfs_source_destroy(c);
	rfs_source_destroy(e);
}

static void test_one_dimensional(void **state)
{
	struct fixture *f = *state;
	int64_t labels[100];
	for (int i = 0; i < 100; i++)
		labels[i] = (int64_t)i * 1000003 - 7;
	for (int chunked = 0; chunked < 2; chunked++) {
		struct h5fx_dataset d = { .name = "/obs/labels",
					  .type = H5FX_I64,
					  .ndims = 1,
					  .dims = { 100 },
					  .layout = chunked ? H5FX_CHUNKED :
							      H5FX_CONTIGUOUS,
					  .data = labels };
		const char *path = file_in(f, "labels.h5");
		assert_int_equal(h5fx_write(path, &d, 1, 0), 0);
		struct rfs_source *s = open_ok(path, "/obs/labels");
		const struct rfs_source_info *i = rfs_source_info(s);
		assert_int_equal(i->ndims, 1);
		assert_true(i->rows == 100 && i->cols == 1);
		assert_int_equal(i->dtype, RFS_INT64);
		assert_int_equal(rfs_source_row_bytes(s), 8);
		const int64_t rows[] = { 99, 0, 50, 50, 51, 3 };
		int64_t out[6];
		assert_int_equal(rfs_source_read_rows(s, rows, 6, out), 0);
		for (int k = 0; k < 6; k++)
			assert_true(out[k] == labels[rows[k]]);
		rfs_source_destroy(s);
	}
}

/* Every dtype reads back as its little-endian bytes. */
static void test_every_dtype(void **state)
{
	struct fixture *f = *state;
	static const struct {
		enum h5fx_type fx;
		enum rfs_dtype dt;
		int direct;
	} types[] = {
		{ H5FX_I8, RFS_INT8, 1 },	{ H5FX_I16, RFS_INT16, 1 },
		{ H5FX_I32, RFS_INT32, 1 },	{ H5FX_I64, RFS_INT64, 1 },
		{ H5FX_U8, RFS_UINT8, 1 },	{ H5FX_U16, RFS_UINT16, 1 },
		{ H5FX_U32, RFS_UINT32, 1 },	{ H5FX_U64, RFS_UINT64, 1 },
		{ H5FX_F16, RFS_FLOAT16, 1 },	{ H5FX_F32, RFS_FLOAT32, 1 },
		{ H5FX_F64, RFS_FLOAT64, 1 },	{ H5FX_I32BE, RFS_INT32, 0 },
		{ H5FX_F64BE, RFS_FLOAT64, 0 },
	};
	enum { R = 20, C = 3 };
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
		size_t es = h5fx_type_size(types[t].fx);
		unsigned char *data = malloc(R * C * es);
		assert_non_null(data);
		/* Distinct bytes per element; valid numbers for floats. */
		for (size_t e = 0; e < R * C; e++) {
			if (types[t].fx == H5FX_F32) {
				float v = (float)e * 1.5f;
				memcpy(data + e * es, &v, es);
			} else if (types[t].fx == H5FX_F64 ||
				   types[t].fx == H5FX_F64BE) {
				double v = (double)e * -2.25;
				memcpy(data + e * es, &v, es);
			} else if (types[t].fx == H5FX_F16) {
				/* 1.0 + e/1024: exponent 15, mantissa e. */
				uint16_t h = (uint16_t)(0x3c00 | e);
				memcpy(data + e * es, &h, es);
			} else {
				for (size_t b = 0; b < es; b++)
					data[e * es + b] =
						(unsigned char)(e * 7 + b * 31 +
								1);
			}
		}
		struct h5fx_dataset d = { .name = "/X",
					  .type = types[t].fx,
					  .ndims = 2,
					  .dims = { R, C },
					  .data = data };
		const char *path = file_in(f, "types.h5");
		assert_int_equal(h5fx_write(path, &d, 1, 0), 0);
		struct rfs_source *s = open_ok(path, "/X");
		const struct rfs_source_info *i = rfs_source_info(s);
		assert_int_equal(i->dtype, types[t].dt);
		assert_int_equal(i->read_path != RFS_READ_LIBRARY,
				 types[t].direct);
		assert_int_equal(rfs_source_row_bytes(s), C * es);
		const int64_t rows[] = { 19, 0, 5, 5, 6 };
		unsigned char out[5 * C * 8];
		assert_int_equal(rfs_source_read_rows(s, rows, 5, out), 0);
		for (int k = 0; k < 5; k++)
			if (memcmp(out + (size_t)k * C * es,
				   data + (size_t)rows[k] * C * es,
				   C * es) != 0)
				fail_msg("type %zu: row %lld differs", t,
					 (long long)rows[k]);
		rfs_source_destroy(s);
		free(data);
	}
}

static void test_anndata_automatic(void **state)
{
	struct fixture *f = *state;
	/* .h5ad: /X without naming it. */
	const char *path =
		write_f32(f, "cells.h5ad", "/X", H5FX_CONTIGUOUS, ROWS, 0);
	struct rfs_source *s = open_ok(path, NULL);
	assert_string_equal(rfs_source_info(s)->dataset, "/X");
	check_f32_rows(s, scattered, N_SCATTERED);
	rfs_source_destroy(s);
	/* Any name, with the AnnData attribute. */
	path = write_f32(f, "cells.h5", "/X", H5FX_CONTIGUOUS, ROWS, 1);
	s = open_ok(path, NULL);
	assert_string_equal(rfs_source_info(s)->dataset, "/X");
	rfs_source_destroy(s);
}

static void expect_open_error(const char *path, const char *dataset,
			      int want_rc, const char *const *want_text)
{
	struct rfs_source *s = (struct rfs_source *)&s;
	char err[512] = "";
	int rc = rfs_source_open(path, dataset, &env, &s, err, sizeof(err));
	if (rc != want_rc)
		fail_msg("open %s (%s): rc %d, want %d (%s)", path,
			 dataset ? dataset : "auto", rc, want_rc, err);
	assert_true(s == (struct rfs_source *)&s); /* untouched */
	assert_null(strchr(err, '\n'));
	for (; *want_text; want_text++)
		if (!strstr(err, *want_text))
			fail_msg("open %s: error lacks \"%s\": %s", path,
				 *want_text, err);
}

static void test_columns(void **state)
{
	struct fixture *f = *state;
	const char *path =
		write_f32(f, "obs.h5ad", "/X", H5FX_CONTIGUOUS, 4, 1);
	const int8_t flags[] = { 1, 0, 0, 1 }, codes[] = { 1, -1, 0, 1 };
	const char *words[] = { "val", "train", "val", "test" };
	const char *cats[] = { "train", "val" };
	const char *genes[] = { "a", "b", "c", "d", "e", "f" };
	assert_int_equal(h5fx_add_bools(path, "/obs/flag", flags, 4), 0);
	assert_int_equal(h5fx_add_strings(path, "/obs/split", words, 4), 0);
	assert_int_equal(h5fx_add_categorical(path, "ct", codes, 4, cats, 2),
			 0);
	assert_int_equal(h5fx_add_var(path, genes, COLS), 0);
	struct rfs_source *s = open_ok(path, NULL);
	assert_true(rfs_source_info(s)->has_var);
	struct rfs_column c;
	char err[512];

	/* The var names, in order; var_fingerprint is XXH3 of them. */
	char **names = NULL;
	uint64_t nnames = 0;
	assert_int_equal(rfs_source_read_var_names(s, &names, &nnames, err,
						   sizeof(err)),
			 0);
	assert_int_equal(nnames, COLS);
	for (uint64_t i = 0; i < nnames; i++)
		assert_string_equal(names[i], genes[i]);
	assert_true(rfs_source_info(s)->var_fingerprint ==
		    rfs_varjoin_fingerprint_of(names, nnames));
	rfs_buf_free_strings(names, nnames);
	/* A file without a var table has no names. */
	const char *bare =
		write_f32(f, "novar.h5ad", "/X", H5FX_CONTIGUOUS, 4, 1);
	struct rfs_source *b = open_ok(bare, NULL);
	assert_int_equal(rfs_source_read_var_names(b, &names, &nnames, err,
						   sizeof(err)),
			 -ENOENT);
	assert_non_null(strstr(err, "novar.h5ad: no var names"));
	rfs_source_destroy(b);

	assert_int_equal(
		rfs_source_read_column(s, "flag", &c, err, sizeof(err)), 0);
	assert_true(c.boolean && c.ncategories == 2);
	assert_string_equal(c.categories[1], "True");
	const int64_t want_flags[] = { 1, 0, 0, 1 };
	assert_memory_equal(c.codes, want_flags, sizeof(want_flags));
	rfs_column_free(&c);

	assert_int_equal(
		rfs_source_read_column(s, "split", &c, err, sizeof(err)), 0);
	assert_true(c.ncategories == 3); /* test, train, val */
	const int64_t want_split[] = { 2, 1, 2, 0 };
	assert_memory_equal(c.codes, want_split, sizeof(want_split));
	rfs_column_free(&c);

	assert_int_equal(rfs_source_read_column(s, "ct", &c, err, sizeof(err)),
			 0);
	const int64_t want_ct[] = { 1, -1, 0, 1 };
	assert_memory_equal(c.codes, want_ct, sizeof(want_ct));
	assert_string_equal(c.categories[0], "train");
	rfs_column_free(&c);

	/* The data itself is 2-D: not a column. A missing one lists obs. */
	assert_int_equal(rfs_source_read_column(s, "/X", &c, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "dataset /X has 2 dimensions"));
	assert_int_equal(rfs_source_read_column(s, "nope", &c, err,
						sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "obs.h5ad: obs column 'nope' not found"));
	assert_non_null(strstr(err, "ct, flag, split"));
	assert_null(c.codes);
	rfs_source_destroy(s);
}

static void test_missing_file(void **state)
{
	struct fixture *f = *state;
	const char *path = file_in(f, "nope.h5");
	const char *const want[] = { "nope.h5", NULL };
	expect_open_error(path, "/X", -ENOENT, want);
	const char *const want2[] = { f->dir, NULL };
	expect_open_error(path, NULL, -ENOENT, want2);
}

static void test_not_hdf5(void **state)
{
	struct fixture *f = *state;
	const char *path = file_in(f, "text.h5");
	FILE *fp = fopen(path, "w");
	assert_non_null(fp);
	fputs("this is not an HDF5 file\n", fp);
	fclose(fp);
	const char *const want[] = { "text.h5", "not an HDF5 file", NULL };
	expect_open_error(path, "/X", -EINVAL, want);
	/* Empty file. */
	path = file_in(f, "empty.h5");
	fp = fopen(path, "w");
	assert_non_null(fp);
	fclose(fp);
	const char *const want2[] = { "empty.h5", NULL };
	expect_open_error(path, "/X", -EINVAL, want2);
	/* A directory. */
	const char *const want3[] = { "not a regular file", NULL };
	expect_open_error(f->dir, "/X", -EINVAL, want3);
}

static void test_dataset_not_found(void **state)
{
	struct fixture *f = *state;
	const char *path =
		write_f32(f, "x.h5", "/layers/X", H5FX_CONTIGUOUS, ROWS, 0);
	const char *const want[] = { "x.h5", "/missing", "not found",
				     "/layers/X", NULL };
	expect_open_error(path, "/missing", -EINVAL, want);
	const char *const want2[] = { "/layers/X/deeper", NULL };
	expect_open_error(path, "/layers/X/deeper", -EINVAL, want2);
	/* A group, not a dataset. */
	const char *const want3[] = { "/layers", "group", NULL };
	expect_open_error(path, "/layers", -ENOTSUP, want3);
}

static void test_generic_file_needs_dataset(void **state)
{
	struct fixture *f = *state;
	const char *path =
		write_f32(f, "generic.h5", "/emb", H5FX_CONTIGUOUS, ROWS, 0);
	const char *const want[] = { "generic.h5", "dataset=", "/emb", NULL };
	expect_open_error(path, NULL, -EINVAL, want);
}

static void test_unsupported_datasets(void **state)
{
	struct fixture *f = *state;
	float *cube = calloc(4 * 3 * 2, sizeof(float));
	assert_non_null(cube);
	struct h5fx_dataset d3 = { .name = "/X",
				   .type = H5FX_F32,
				   .ndims = 3,
				   .dims = { 4, 3, 2 },
				   .data = cube };
	const char *path = file_in(f, "cube.h5");
	assert_int_equal(h5fx_write(path, &d3, 1, 0), 0);
	free(cube);
	const char *const want3d[] = { "cube.h5", "/X", "3 dimensions", NULL };
	expect_open_error(path, "/X", -ENOTSUP, want3d);

	char strings[5][8] = { "a", "b", "c", "d", "e" };
	struct h5fx_dataset ds = { .name = "/names",
				   .type = H5FX_STRING,
				   .ndims = 1,
				   .dims = { 5 },
				   .data = strings };
	path = file_in(f, "strings.h5");
	assert_int_equal(h5fx_write(path, &ds, 1, 0), 0);
	const char *const want_str[] = { "/names", "dtype", "string", NULL };
	expect_open_error(path, "/names", -ENOTSUP, want_str);

	struct h5fx_dataset d0 = {
		.name = "/X", .type = H5FX_F32, .ndims = 2, .dims = { 0, 4 }
	};
	path = file_in(f, "zero.h5");
	assert_int_equal(h5fx_write(path, &d0, 1, 0), 0);
	const char *const want0[] = { "zero.h5", "/X", "no rows", NULL };
	expect_open_error(path, "/X", -EINVAL, want0);

	struct h5fx_dataset dc = {
		.name = "/X", .type = H5FX_F32, .ndims = 2, .dims = { 4, 0 }
	};
	path = file_in(f, "nocols.h5");
	assert_int_equal(h5fx_write(path, &dc, 1, 0), 0);
	const char *const want_c[] = { "nocols.h5", "0 columns", NULL };
	expect_open_error(path, "/X", -EINVAL, want_c);
}

static void test_sparse_group(void **state)
{
	struct fixture *f = *state;
	const char *path = file_in(f, "sparse.h5ad");
	assert_int_equal(h5fx_write_group(path, "/X", "csr_matrix"), 0);
	const char *const want[] = { "csr_matrix without a valid shape", NULL };
	expect_open_error(path, NULL, -EINVAL, want);
	assert_int_equal(h5fx_write_group(path, "/X", "csc_matrix"), 0);
	const char *const csc[] = { "csc_matrix", "tocsr", NULL };
	expect_open_error(path, NULL, -ENOTSUP, csc);
}

/* A 5 x 6 CSR matrix; row r holds r % 3 values (row 3 none...). */
static const float csr_data[] = { 1, 2, 3, 4, 5, 6 };
static const int32_t csr_indices[] = { 0, 4, 5, 1, 0, 2 };
static const int64_t csr_indptr[] = { 0, 0, 1, 3, 3, 6 };

static const char *write_csr(struct fixture *f, const char *name,
			     const int32_t *indices)
{
	struct h5fx_dataset d[] = {
		{ .name = "/X/data",
		  .type = H5FX_F32,
		  .ndims = 1,
		  .dims = { 6 },
		  .layout = H5FX_DEFLATE,
		  .data = csr_data },
		{ .name = "/X/indices",
		  .type = H5FX_I32,
		  .ndims = 1,
		  .dims = { 6 },
		  .data = indices },
		{ .name = "/X/indptr",
		  .type = H5FX_I64,
		  .ndims = 1,
		  .dims = { 6 },
		  .data = csr_indptr },
	};
	const char *path = file_in(f, name);
	assert_int_equal(h5fx_write(path, d, 3, 1), 0);
	assert_int_equal(h5fx_mark_csr(path, "/X", 5, 6), 0);
	return path;
}

static void test_csr_rows(void **state)
{
	struct fixture *f = *state;
	const char *path = write_csr(f, "csr.h5ad", csr_indices);
	struct rfs_source *s = open_ok(path, NULL);
	const struct rfs_source_info *info = rfs_source_info(s);
	assert_true(info->sparse && info->rows == 5 && info->cols == 6);
	assert_true(info->nnz == 6 && info->dtype == RFS_FLOAT32);
	assert_true(rfs_source_row_nnz(s, 2) == 2);
	/* Repeats, empty rows and runs, in any order. */
	const int64_t rows[] = { 4, 0, 2, 1, 2, 3 };
	struct rfs_csr c;
	assert_int_equal(rfs_source_read_csr(s, rows, 6, NULL, &c), 0);
	const uint64_t want_start[] = { 0, 3, 3, 5, 6, 8, 8 };
	assert_memory_equal(c.start, want_start, sizeof(want_start));
	const float want_values[] = { 4, 5, 6, 2, 3, 1, 2, 3 };
	const int64_t want_cols[] = { 1, 0, 2, 4, 5, 0, 4, 5 };
	assert_memory_equal(c.values, want_values, sizeof(want_values));
	assert_memory_equal(c.cols, want_cols, sizeof(want_cols));
	rfs_source_csr_free(&c);
	/* The bound a fill reserves covers at least the arrays returned,
	 * and grows with the stored values. */
	size_t returned =
		7 * sizeof(uint64_t) + 8 * sizeof(float) + 8 * sizeof(int64_t);
	assert_true(rfs_source_read_scratch(s, 6, 8) >= returned);
	assert_true(rfs_source_read_scratch(s, 6, 80) >=
		    rfs_source_read_scratch(s, 6, 8) + 72 * 2 * sizeof(float));
	/* The same into the caller's buffer, which the free leaves alone
	 * (ASan would report a free of a stack array). */
	float mine[9];
	mine[8] = -1;
	assert_int_equal(rfs_source_read_csr(s, rows, 6, mine, &c), 0);
	assert_ptr_equal(c.values, mine);
	assert_memory_equal(mine, want_values, sizeof(want_values));
	assert_true(mine[8] == -1);
	assert_memory_equal(c.cols, want_cols, sizeof(want_cols));
	rfs_source_csr_free(&c);
	rfs_source_destroy(s);

	/* A column id past the width is a read error, never a write
	 * outside the row. */
	const int32_t bad[] = { 0, 4, 5, 1, 0, 6 };
	path = write_csr(f, "bad.h5ad", bad);
	struct rfs_source *b = NULL;
	char err[512];
	/* The fingerprint reads the last row: open fails already. */
	assert_int_equal(
		rfs_source_open(path, NULL, &env, &b, err, sizeof(err)), -EIO);
	assert_null(b);
	/* In a middle row (value 2 of row 2): its read fails, and the log
	 * names the id and the value. */
	const int32_t bad_middle[] = { 0, 4, 9, 1, 0, 2 };
	b = open_ok(write_csr(f, "bad_middle.h5ad", bad_middle), NULL);
	const int64_t row2[] = { 2 };
	long from = log_size();
	assert_int_equal(rfs_source_read_csr(b, row2, 1, NULL, &c), -EIO);
	assert_null(c.start);
	assert_logged_since(from, "bad_middle.h5ad dataset /X: column index "
				  "9 of value 2 is outside 0..5");
	rfs_source_destroy(b);
}

static void test_injected_read_failure(void **state)
{
	struct fixture *f = *state;
	const char *path =
		write_f32(f, "inject.h5", "/X", H5FX_CHUNKED, ROWS, 0);
	struct rfs_source *s = open_ok(path, "/X");
	float out[N_SCATTERED * COLS];
	h5dread_fail = 1;
	int calls = h5dread_calls;
	long from = log_size();
	assert_int_equal(rfs_source_read_rows(s, scattered, N_SCATTERED, out),
			 -EIO);
	assert_true(h5dread_calls > calls);
	/* Logged with file, dataset and rows (the first run, [0, 4)). */
	assert_logged_since(from, "inject.h5 dataset /X: read of rows [0, 4)");
	h5dread_fail = 0;
	/* Transient: the next read works. */
	check_f32_rows(s, scattered, N_SCATTERED);
	rfs_source_destroy(s);

	/* At open, the fingerprint's read fails: an error naming the row. */
	h5dread_fail = 1;
	const char *const want[] = { "inject.h5", "/X", "row", NULL };
	expect_open_error(path, "/X", -EIO, want);
	h5dread_fail = 0;
}

static void test_changed_file_fails(void **state)
{
	struct fixture *f = *state;
	const char *path =
		write_f32(f, "changing.h5", "/X", H5FX_CONTIGUOUS, ROWS, 0);
	struct rfs_source *s = open_ok(path, "/X");
	check_f32_rows(s, scattered, N_SCATTERED);
	assert_int_equal(rfs_source_state(s), RFS_SOURCE_OK);
	struct stat was;
	assert_int_equal(stat(path, &was), 0);
	/* A new mtime: new reads fail rather than mix old and new bytes. */
	struct timespec times[2] = { { 0, UTIME_OMIT }, { 12345, 0 } };
	assert_int_equal(utimensat(AT_FDCWD, path, times, 0), 0);
	float out[N_SCATTERED * COLS];
	long from = log_size();
	assert_int_equal(rfs_source_read_rows(s, scattered, N_SCATTERED, out),
			 -EIO);
	assert_logged_since(from, "changing.h5 changed in place");
	assert_int_equal(rfs_source_state(s), RFS_SOURCE_CHANGED);
	/* Still failing, with the old mtime back: the change is kept. */
	times[1] = was.st_mtim;
	assert_int_equal(utimensat(AT_FDCWD, path, times, 0), 0);
	assert_int_equal(rfs_source_read_rows(s, scattered, 1, out), -EIO);
	rfs_source_destroy(s);

	/* Renamed over and unlinked: the file opened is still served. */
	char *renamed = strdup(
		write_f32(f, "renamed.h5", "/X", H5FX_CONTIGUOUS, ROWS, 0));
	char *moved = strdup(file_in(f, "moved.h5"));
	assert_true(renamed && moved);
	s = open_ok(renamed, "/X");
	assert_int_equal(rename(renamed, moved), 0);
	float *zeros = calloc(ROWS * COLS, sizeof(*zeros));
	assert_non_null(zeros);
	struct h5fx_dataset d = { .name = "/X",
				  .type = H5FX_F32,
				  .ndims = 2,
				  .dims = { ROWS, COLS },
				  .layout = H5FX_CONTIGUOUS,
				  .data = zeros };
	assert_int_equal(h5fx_write(renamed, &d, 1, 0), 0);
	free(zeros);
	check_f32_rows(s, scattered, N_SCATTERED);
	assert_int_equal(rfs_source_state(s), RFS_SOURCE_REPLACED);
	assert_int_equal(unlink(moved), 0);
	assert_int_equal(unlink(renamed), 0);
	check_f32_rows(s, scattered, N_SCATTERED);
	free(moved);
	free(renamed);
	rfs_source_destroy(s);

	/* Truncated under a reader. */
	path = write_f32(f, "truncated.h5", "/X", H5FX_CONTIGUOUS, ROWS, 0);
	s = open_ok(path, "/X");
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(truncate(path, st.st_size / 2), 0);
	assert_int_equal(rfs_source_read_rows(s, scattered, N_SCATTERED, out),
			 -EIO);
	rfs_source_destroy(s);
}

/* A virtual dataset /X of ROWS x COLS in vds, all read from dataset
 * /X of file part (named as given). */
static void write_vds(const char *vds, const char *part)
{
	hsize_t dims[2] = { ROWS, COLS };
	hid_t space = H5Screate_simple(2, dims, NULL);
	hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
	assert_true(H5Pset_virtual(dcpl, space, part, "/X", space) >= 0);
	hid_t file = H5Fcreate(vds, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
	hid_t dset = H5Dcreate2(file, "/X", H5T_NATIVE_FLOAT, space,
				H5P_DEFAULT, dcpl, H5P_DEFAULT);
	assert_true(file >= 0 && dset >= 0);
	H5Dclose(dset);
	H5Fclose(file);
	H5Pclose(dcpl);
	H5Sclose(space);
}

/* Runs at the end of a test that left the working directory. */
static void back_to(const char *dir)
{
	assert_int_equal(chdir(dir), 0);
}

/* A dataset /X of ROWS x COLS float32 whose bytes are in the external
 * file raw (named as given, its bytes from offset 100, written from the
 * working directory). */
static void write_external(const char *path, const char *raw)
{
	float *m = f32_matrix(ROWS, COLS);
	hsize_t dims[2] = { ROWS, COLS };
	hid_t space = H5Screate_simple(2, dims, NULL);
	hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
	assert_true(H5Pset_external(dcpl, raw, 100, H5F_UNLIMITED) >= 0);
	hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
	hid_t dset = H5Dcreate2(file, "/X", H5T_NATIVE_FLOAT, space,
				H5P_DEFAULT, dcpl, H5P_DEFAULT);
	assert_true(file >= 0 && dset >= 0);
	assert_true(H5Dwrite(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL,
			     H5P_DEFAULT, m) >= 0);
	H5Dclose(dset);
	H5Fclose(file);
	H5Pclose(dcpl);
	H5Sclose(space);
	free(m);
}

/* Data outside the source file is refused at open, naming the dataset
 * and the h5repack that copies it in: a virtual dataset, external raw
 * data files, an external link (each to an intact file, served before). */
static void test_data_outside_the_file_refused(void **state)
{
	struct fixture *f = *state;
	char cwd[PATH_MAX];
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(f->dir), 0);
	char *target =
		strdup(write_f32(f, "part.h5", "/X", H5FX_CHUNKED, ROWS, 0));
	char *vds = strdup(file_in(f, "vds.h5"));
	char *ext = strdup(file_in(f, "ext.h5"));
	char *link = strdup(file_in(f, "link.h5"));
	assert_true(target && vds && ext && link);
	write_vds(vds, "part.h5");
	const char *const virtual[] = { vds, "dataset /X is a virtual dataset",
					"h5repack -l CONTI", NULL };
	expect_open_error(vds, "/X", -ENOTSUP, virtual);
	write_external(ext, "ext.raw");
	const char *const external[] = {
		ext, "dataset /X stores its data in external files",
		"rankfs reads only data stored inside the source file",
		"h5repack -l CONTI", NULL
	};
	expect_open_error(ext, "/X", -ENOTSUP, external);
	hid_t file = H5Fcreate(link, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
	assert_true(file >= 0);
	assert_true(H5Lcreate_external(target, "/X", file, "/X", H5P_DEFAULT,
				       H5P_DEFAULT) >= 0);
	H5Fclose(file);
	const char *const linked[] = {
		link, "dataset /X is reached through an external link",
		"h5repack --merge", NULL
	};
	expect_open_error(link, "/X", -ENOTSUP, linked);
	back_to(cwd);
	free(target);
	free(vds);
	free(ext);
	free(link);
}

/* Processes this process started and has not reaped, from every thread
 * (the reader of strings: os/helper.c). */
static int children(pid_t *pids, int max)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/task/%d/children",
		 (int)getpid());
	FILE *fp = fopen(path, "r");
	assert_non_null(fp);
	int n = 0, pid;
	while (n < max && fscanf(fp, "%d", &pid) == 1)
		pids[n++] = pid;
	fclose(fp);
	return n;
}

/* The one process this one started: the program rankfs-h5strings, not a
 * fork of this one. */
static pid_t the_reader(void)
{
	pid_t pids[8];
	char path[64], exe[PATH_MAX] = "";
	assert_int_equal(children(pids, 8), 1);
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pids[0]);
	assert_true(readlink(path, exe, sizeof(exe) - 1) > 0);
	assert_non_null(strstr(exe, "/rankfs-h5strings"));
	return pids[0];
}

static void check_var_names(struct rfs_source *s, const char *const *want)
{
	char **names = NULL, err[512];
	uint64_t n = 0;
	assert_int_equal(
		rfs_source_read_var_names(s, &names, &n, err, sizeof(err)), 0);
	assert_int_equal(n, COLS);
	for (uint64_t i = 0; i < n; i++)
		assert_string_equal(names[i], want[i]);
	rfs_buf_free_strings(names, n);
}

/* Strings are read by one process, the program rankfs-h5strings, started
 * at the first read (never a fork of this one: its page tables, with many
 * files open, cost a fork their size), reading in turn; killed, it is
 * started again at the next read; stopped or destroyed, none is left. */
static void test_strings_read_by_a_helper(void **state)
{
	struct fixture *f = *state;
	const char *path =
		write_f32(f, "strings.h5ad", "/X", H5FX_CONTIGUOUS, 4, 1);
	const char *words[] = { "val", "train", "val", "test" };
	const char *genes[] = { "a", "bb", "", "d", "e\xc3\xa9", "f" };
	assert_int_equal(h5fx_add_strings(path, "/obs/split", words, 4), 0);
	assert_int_equal(h5fx_add_var(path, genes, COLS), 0);
	pid_t pids[8];
	assert_int_equal(children(pids, 8), 0);
	struct rfs_source *s = open_ok(path, NULL); /* reads var names */
	pid_t reader = the_reader();
	check_var_names(s, genes);
	assert_int_equal(the_reader(), reader); /* the same one */
	/* Killed (and not reaped here): started again. */
	siginfo_t info;
	assert_int_equal(kill(reader, SIGKILL), 0);
	assert_int_equal(waitid(P_PID, (id_t)reader, &info, WEXITED | WNOWAIT),
			 0);
	struct rfs_column c;
	char err[512];
	assert_int_equal(
		rfs_source_read_column(s, "split", &c, err, sizeof(err)), 0);
	const int64_t want_split[] = { 2, 1, 2, 0 };
	assert_memory_equal(c.codes, want_split, sizeof(want_split));
	rfs_column_free(&c);
	assert_int_not_equal(the_reader(), reader);
	/* Stopped: none is left, and a read starts one. */
	rfs_helper_stop(helper);
	assert_int_equal(children(pids, 8), 0);
	check_var_names(s, genes);
	the_reader();
	rfs_source_destroy(s);
	rfs_helper_destroy(helper);
	helper = env.strings = NULL;
	assert_int_equal(children(pids, 8), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_contiguous_f32, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_relative_path_made_absolute, setup, teardown),
		cmocka_unit_test_setup_teardown(test_chunked_and_deflate, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_same_data_same_fingerprint,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_one_dimensional, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_every_dtype, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_anndata_automatic, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_columns, setup, teardown),
		cmocka_unit_test_setup_teardown(test_missing_file, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_not_hdf5, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dataset_not_found, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_generic_file_needs_dataset,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_unsupported_datasets,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_sparse_group, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_csr_rows, setup, teardown),
		cmocka_unit_test_setup_teardown(test_strings_read_by_a_helper,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_injected_read_failure,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_changed_file_fails, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_data_outside_the_file_refused, setup, teardown),
	};
	if (h5fx_tmpdir(log_dir, sizeof(log_dir)) != 0)
		return 1;
	snprintf(log_path, sizeof(log_path), "%s/log", log_dir);
	if (rfs_log_set_fd(
		    open(log_path, O_WRONLY | O_APPEND | O_CREAT, 0666)) != 0)
		return 1;
	if (rfs_watch_create(&env.watch) != 0)
		return 1;
	int failed = cmocka_run_group_tests(tests, NULL, NULL);
	rfs_watch_destroy(env.watch);
	h5fx_rmtree(log_dir);
	return failed;
}
