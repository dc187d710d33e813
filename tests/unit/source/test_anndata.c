/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/source/anndata.c: the same AnnData layout written as
 * an .h5ad file and as a zarr store is read alike, with the same errors
 * but for how each format names an array. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <hdf5.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "h5_fixture.h"
#include "os/helper.h"
#include "source/column.h"
#include "source/source.h"

static char dir[PATH_MAX];
/* HDF5's strings are read by a helper process of the test's own. */
static struct rfs_source_env env;

/* One AnnData being written: an .h5ad file or a zarr v2 store. */
struct writer {
	int zarr;
	char path[PATH_MAX + 32];
	hid_t file, lcpl;
};

static void put(struct writer *w, const char *rel, const void *b, size_t n)
{
	char path[PATH_MAX + 300];
	snprintf(path, sizeof(path), "%s/%s", w->path, rel);
	for (char *s = path + strlen(w->path) + 1; *s; s++)
		if (*s == '/') {
			*s = '\0';
			mkdir(path, 0755);
			*s = '/';
		}
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(b, 1, n, f), n);
	fclose(f);
}

static void text(struct writer *w, const char *rel, const char *t)
{
	put(w, rel, t, strlen(t));
}

static void begin(struct writer *w, int zarr, const char *name)
{
	*w = (struct writer){ .zarr = zarr };
	snprintf(w->path, sizeof(w->path), "%s/%s.%s", dir, name,
		 zarr ? "zarr" : "h5ad");
	if (zarr) {
		assert_int_equal(mkdir(w->path, 0755), 0);
		text(w, ".zgroup", "{\"zarr_format\": 2}");
		text(w, ".zattrs", "{\"encoding-type\": \"anndata\"}");
		return;
	}
	w->file = H5Fcreate(w->path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
	w->lcpl = H5Pcreate(H5P_LINK_CREATE);
	H5Pset_create_intermediate_group(w->lcpl, 1);
	assert_true(w->file >= 0);
}

static void end(struct writer *w)
{
	if (!w->zarr) {
		H5Pclose(w->lcpl);
		H5Fclose(w->file);
	}
}

/* A group with one string attribute key (none if NULL). */
static void group(struct writer *w, const char *path, const char *key,
		  const char *value)
{
	char rel[300], attrs[300];
	if (w->zarr) {
		snprintf(rel, sizeof(rel), "%s/.zgroup", path);
		text(w, rel, "{\"zarr_format\": 2}");
		snprintf(rel, sizeof(rel), "%s/.zattrs", path);
		snprintf(attrs, sizeof(attrs), "{\"%s\": \"%s\"}",
			 key ? key : "x", value ? value : "");
		text(w, rel, attrs);
		return;
	}
	hid_t g = H5Gcreate2(w->file, path, w->lcpl, H5P_DEFAULT, H5P_DEFAULT);
	assert_true(g >= 0);
	if (key) {
		hid_t t = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR);
		H5Tset_size(t, strlen(value));
		hid_t a = H5Acreate2(g, key, t, sp, H5P_DEFAULT, H5P_DEFAULT);
		H5Awrite(a, t, value);
		H5Aclose(a);
		H5Sclose(sp);
		H5Tclose(t);
	}
	H5Gclose(g);
}

/* A 1-D (cols 0) or 2-D array of n elements of zarr dtype zt, HDF5 type
 * ht, in one raw chunk. */
static void array(struct writer *w, const char *path, const char *zt, hid_t ht,
		  const void *v, size_t elem, int rows, int cols)
{
	size_t n = (size_t)rows * (size_t)(cols ? cols : 1);
	if (w->zarr) {
		char meta[512], rel[300], shape[64];
		snprintf(shape, sizeof(shape), cols ? "[%d, %d]" : "[%d]", rows,
			 cols);
		snprintf(meta, sizeof(meta),
			 "{\"zarr_format\": 2, \"shape\": %s, \"chunks\": %s, "
			 "\"dtype\": \"%s\", \"compressor\": null, "
			 "\"fill_value\": 0, \"filters\": null, "
			 "\"order\": \"C\"}",
			 shape, shape, zt);
		snprintf(rel, sizeof(rel), "%s/.zarray", path);
		text(w, rel, meta);
		snprintf(rel, sizeof(rel), "%s/%s", path, cols ? "0.0" : "0");
		put(w, rel, v, elem * n);
		return;
	}
	hsize_t dims[2] = { (hsize_t)rows, (hsize_t)cols };
	hid_t sp = H5Screate_simple(cols ? 2 : 1, dims, NULL);
	hid_t d = H5Dcreate2(w->file, path, ht, sp, w->lcpl, H5P_DEFAULT,
			     H5P_DEFAULT);
	assert_true(H5Dwrite(d, ht, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
	H5Dclose(d);
	H5Sclose(sp);
}

/* h5py's bool: an enum over int8. */
static void bools(struct writer *w, const char *path, const uint8_t *v, int n)
{
	hid_t t = H5Tenum_create(H5T_NATIVE_INT8);
	int8_t no = 0, yes = 1;
	H5Tenum_insert(t, "FALSE", &no);
	H5Tenum_insert(t, "TRUE", &yes);
	array(w, path, "|b1", t, v, 1, n, 0);
	H5Tclose(t);
}

static void strings(struct writer *w, const char *path, const char *const *s,
		    int n)
{
	if (!w->zarr) {
		hid_t t = H5Tcopy(H5T_C_S1);
		H5Tset_size(t, H5T_VARIABLE);
		array(w, path, NULL, t, s, 0, n, 0);
		H5Tclose(t);
		return;
	}
	unsigned char buf[2048];
	uint32_t count = (uint32_t)n;
	size_t at = 4;
	memcpy(buf, &count, 4);
	for (int i = 0; i < n; i++) {
		uint32_t len = (uint32_t)strlen(s[i]);
		memcpy(buf + at, &len, 4);
		memcpy(buf + at + 4, s[i], len);
		at += 4 + len;
	}
	char meta[512], rel[300];
	snprintf(meta, sizeof(meta),
		 "{\"zarr_format\": 2, \"shape\": [%d], \"chunks\": [%d], "
		 "\"dtype\": \"|O\", \"compressor\": null, \"fill_value\": 0,"
		 " \"filters\": [{\"id\": \"vlen-utf8\"}], \"order\": \"C\"}",
		 n, n);
	snprintf(rel, sizeof(rel), "%s/.zarray", path);
	text(w, rel, meta);
	snprintf(rel, sizeof(rel), "%s/0", path);
	put(w, rel, buf, at);
}

static void dense_x(struct writer *w, const char *path)
{
	float x[4][3] = { { 1, 2, 3 }, { 4, 5, 6 }, { 7, 8, 9 }, { 1, 1, 1 } };
	array(w, path, "<f4", H5T_IEEE_F32LE, x, 4, 4, 3);
}

/* Opens w's file, expecting rc and, unless NULL, the error "PATH: tail". */
static struct rfs_source *open_as(struct writer *w, const char *dataset,
				  int want, const char *tail)
{
	struct rfs_source *s = NULL;
	char err[512] = "", full[PATH_MAX + 600];
	assert_int_equal(rfs_source_open(w->path, dataset, &env, &s, err, 512),
			 want);
	if (tail) {
		snprintf(full, sizeof(full), "%s: %s", w->path, tail);
		assert_string_equal(err, full);
	}
	return s;
}

static void test_matrix_groups(void **state)
{
	(void)state;
	for (int z = 0; z < 2; z++) {
		struct writer w;
		begin(&w, z, "csc");
		group(&w, "X", "encoding-type", "csc_matrix");
		group(&w, "layers/counts", "encoding-type", "csc_matrix");
		group(&w, "raw/X", "encoding-type", "dataframe");
		group(&w, "layers/noshape", "encoding-type", "csr_matrix");
		end(&w);
		open_as(&w, NULL, -ENOTSUP,
			"/X is a csc_matrix: its rows are scattered over every "
			"column; rewrite it as CSR (adata.X = adata.X.tocsr())");
		open_as(&w, "/layers/counts", -ENOTSUP,
			"/layers/counts is a csc_matrix: its rows are scattered "
			"over every column; rewrite it as CSR "
			"(adata.layers['counts'] = "
			"adata.layers['counts'].tocsr())");
		open_as(&w, "/raw/X", -ENOTSUP,
			z ? "/raw/X is a group, not an array" :
			    "/raw/X is a group, not a dataset");
		open_as(&w, "/layers/noshape", -EINVAL,
			"/layers/noshape is csr_matrix without a valid shape "
			"attribute");
	}
}

/* The group X, a csr_matrix of shape rows x 3. */
static void csr_group(struct writer *w, int rows)
{
	group(w, "X", "encoding-type", "csr_matrix");
	if (w->zarr) {
		char attrs[128];
		snprintf(attrs, sizeof(attrs),
			 "{\"encoding-type\": \"csr_matrix\", "
			 "\"shape\": [%d, 3]}",
			 rows);
		text(w, "X/.zattrs", attrs);
		return;
	}
	hid_t g = H5Gopen2(w->file, "X", H5P_DEFAULT);
	hsize_t two = 2;
	int64_t shape[2] = { rows, 3 };
	hid_t sp = H5Screate_simple(1, &two, NULL);
	hid_t a = H5Acreate2(g, "shape", H5T_STD_I64LE, sp, H5P_DEFAULT,
			     H5P_DEFAULT);
	H5Awrite(a, H5T_NATIVE_INT64, shape);
	H5Aclose(a);
	H5Sclose(sp);
	H5Gclose(g);
}

static void test_csr_indices(void **state)
{
	(void)state;
	for (int z = 0; z < 2; z++) {
		struct writer w;
		begin(&w, z, "csr");
		csr_group(&w, 2);
		float data[3] = { 1, 2, 3 };
		float idx[3] = { 0, 1, 2 }; /* floats: refused */
		array(&w, "X/data", "<f4", H5T_IEEE_F32LE, data, 4, 3, 0);
		array(&w, "X/indices", "<f4", H5T_IEEE_F32LE, idx, 4, 3, 0);
		end(&w);
		open_as(&w, NULL, -EINVAL,
			"/X/indices must be integers, one per value");
	}
}

/* A CSR of 2 rows over 3 stored values, its indptr ptr (of 3 entries,
 * int64 or, with real, float64), opened: rc and, unless NULL, the error's
 * tail. */
static struct rfs_source *csr_with(int z, const void *ptr, int real, int want,
				   const char *tail)
{
	struct writer w;
	static int k;
	char name[32];
	snprintf(name, sizeof(name), "ptr%d", k++);
	begin(&w, z, name);
	csr_group(&w, 2);
	float data[3] = { 1, 2, 3 };
	int32_t idx[3] = { 0, 1, 2 };
	array(&w, "X/data", "<f4", H5T_IEEE_F32LE, data, 4, 3, 0);
	array(&w, "X/indices", "<i4", H5T_STD_I32LE, idx, 4, 3, 0);
	array(&w, "X/indptr", real ? "<f8" : "<i8",
	      real ? H5T_IEEE_F64LE : H5T_STD_I64LE, ptr, 8, 3, 0);
	end(&w);
	return open_as(&w, NULL, want, tail);
}

/* indptr is checked as scipy's csr check_format does, alike for both
 * formats: from 0, none falling, the last at most the values stored. */
static void test_csr_indptr(void **state)
{
	(void)state;
	for (int z = 0; z < 2; z++) {
		/* Ending before the stored values is allowed: row 1 empty,
		 * the third value unused. */
		const int64_t short_end[3] = { 0, 2, 2 };
		struct rfs_source *s = csr_with(z, short_end, 0, 0, NULL);
		assert_int_equal(rfs_source_info(s)->nnz, 2);
		assert_int_equal(rfs_source_info(s)->max_row_nnz, 2);
		rfs_source_destroy(s);
		const int64_t from1[3] = { 1, 2, 3 }, falls[3] = { 0, 2, 1 },
			      past[3] = { 0, 2, 4 };
		csr_with(z, from1, 0, -EINVAL,
			 "/X/indptr must be non-decreasing offsets from 0 to "
			 "at most the 3 stored values: entry 0 is 1, after 0");
		csr_with(z, falls, 0, -EINVAL,
			 "/X/indptr must be non-decreasing offsets from 0 to "
			 "at most the 3 stored values: entry 2 is 1, after 2");
		csr_with(z, past, 0, -EINVAL,
			 "/X/indptr must be non-decreasing offsets from 0 to "
			 "at most the 3 stored values: entry 2 is 4, after 2");
		const double real[3] = { 0, 1, 3 };
		csr_with(z, real, 1, -EINVAL,
			 "/X/indptr must be 2 + 1 integer offsets (rows + 1)");
	}
}

static void test_obs_and_var(void **state)
{
	(void)state;
	for (int z = 0; z < 2; z++) {
		struct writer w;
		begin(&w, z, "obs");
		dense_x(&w, "X");
		group(&w, "obs", NULL, NULL);
		group(&w, "obs/odd", "encoding-type", "awkward-array");
		group(&w, "obs/n", "encoding-type", "nullable-integer");
		int64_t values[4] = { 5, 6, 7, 8 };
		uint8_t mask[4] = { 0, 1, 0, 0 };
		array(&w, "obs/n/values", "<i8", H5T_STD_I64LE, values, 8, 4,
		      0);
		bools(&w, "obs/n/mask", mask, 4);
		group(&w, "obs/b", "encoding-type", "nullable-boolean");
		uint8_t none[4] = { 0 };
		bools(&w, "obs/b/values", mask, 4);
		bools(&w, "obs/b/mask", none, 4);
		/* The var index is the array _index names. */
		group(&w, "var", "_index", "gene_ids");
		const char *genes[3] = { "g0", "g1", "g2" };
		strings(&w, "var/gene_ids", genes, 3);
		end(&w);
		struct rfs_source *s = open_as(&w, NULL, 0, NULL);
		char err[512] = "", want[PATH_MAX + 600];
		struct rfs_column c;
		assert_int_equal(rfs_source_read_column(s, "odd", &c, err, 512),
				 -ENOTSUP);
		snprintf(want, sizeof(want),
			 "%s: obs column 'odd' is a group with encoding "
			 "'awkward-array', not a column rankfs reads "
			 "(categorical, numeric, bool, string)",
			 w.path);
		assert_string_equal(err, want);
		assert_int_equal(rfs_source_read_column(s, "n", &c, err, 512),
				 -EDOM);
		snprintf(want, sizeof(want),
			 "%s: obs column 'n' has 1 missing values (pd.NA), "
			 "which an integer column cannot hold: fill them "
			 "(.fillna()) or store it as categorical",
			 w.path);
		assert_string_equal(err, want);
		assert_int_equal(rfs_source_read_column(s, "b", &c, err, 512),
				 0);
		assert_int_equal(c.rows, 4);
		assert_int_equal(c.codes[1], 1);
		rfs_column_free(&c);
		char **names;
		uint64_t n;
		assert_int_equal(
			rfs_source_read_var_names(s, &names, &n, err, 512), 0);
		assert_int_equal(n, 3);
		assert_string_equal(names[2], "g2");
		rfs_source_free_var_names(s, names, n);
		rfs_source_destroy(s);
	}
}

/* A var table or index absent: no var names, in either format; an index
 * there but not a 1-D string array: a mount error naming the path. */
static void test_var_index(void **state)
{
	(void)state;
	const char *genes[3] = { "g0", "g1", "g2" };
	int64_t numbers[3] = { 0, 1, 2 };
	char err[512];
	char **names;
	uint64_t n;
	for (int z = 0; z < 2; z++) {
		struct writer w;
		begin(&w, z, "novar");
		dense_x(&w, "X");
		group(&w, "var", "_index", "genes"); /* no var/genes */
		end(&w);
		struct rfs_source *s = open_as(&w, NULL, 0, NULL);
		assert_int_equal(rfs_source_read_var_names(s, &names, &n, err,
							   sizeof(err)),
				 -ENOENT);
		rfs_source_destroy(s);
		begin(&w, z, "numvar");
		dense_x(&w, "X");
		group(&w, "var", "_index", "_index");
		array(&w, "var/_index", "<i8", H5T_STD_I64LE, numbers, 8, 3, 0);
		end(&w);
		open_as(&w, NULL, -EINVAL,
			"the var index /var/_index is not a 1-D string array");
		begin(&w, z, "flatvar");
		dense_x(&w, "X");
		group(&w, "var", "_index", "_index");
		group(&w, "var/_index", NULL, NULL);
		strings(&w, "var/_index/x", genes, 3);
		end(&w);
		open_as(&w, NULL, -EINVAL,
			"the var index /var/_index is not a 1-D string array");
	}
}

/* anndata 0.7's categorical: codes at obs/NAME whose "categories"
 * attribute names the categories array obs/__categories/NAME (zarr: a
 * path relative to obs; HDF5: an object reference). */
static void old_categorical(struct writer *w, const char *name,
			    const int8_t *codes, const char *const *cats,
			    int ncats)
{
	char codes_path[128], cats_path[128], rel[160], attrs[160];
	snprintf(codes_path, sizeof(codes_path), "obs/%s", name);
	snprintf(cats_path, sizeof(cats_path), "obs/__categories/%s", name);
	array(w, codes_path, "|i1", H5T_STD_I8LE, codes, 1, 4, 0);
	strings(w, cats_path, cats, ncats);
	if (w->zarr) {
		snprintf(rel, sizeof(rel), "%s/.zattrs", codes_path);
		snprintf(attrs, sizeof(attrs),
			 "{\"categories\": \"__categories/%s\"}", name);
		text(w, rel, attrs);
		return;
	}
	hobj_ref_t ref;
	assert_true(H5Rcreate(&ref, w->file, cats_path, H5R_OBJECT, -1) >= 0);
	hid_t d = H5Dopen2(w->file, codes_path, H5P_DEFAULT);
	hid_t sp = H5Screate(H5S_SCALAR);
	hid_t a = H5Acreate2(d, "categories", H5T_STD_REF_OBJ, sp, H5P_DEFAULT,
			     H5P_DEFAULT);
	assert_true(H5Awrite(a, H5T_STD_REF_OBJ, &ref) >= 0);
	H5Aclose(a);
	H5Sclose(sp);
	H5Dclose(d);
}

/* A categorical group obs/NAME: codes (int8, or float when float_codes)
 * and string categories. */
static void new_categorical(struct writer *w, const char *name,
			    const int8_t *codes, int float_codes,
			    const char *const *cats, int ncats)
{
	char path[128];
	float f[4];
	snprintf(path, sizeof(path), "obs/%s", name);
	group(w, path, "encoding-type", "categorical");
	snprintf(path, sizeof(path), "obs/%s/codes", name);
	for (int i = 0; i < 4; i++)
		f[i] = codes[i];
	if (float_codes)
		array(w, path, "<f4", H5T_IEEE_F32LE, f, 4, 4, 0);
	else
		array(w, path, "|i1", H5T_STD_I8LE, codes, 1, 4, 0);
	snprintf(path, sizeof(path), "obs/%s/categories", name);
	strings(w, path, cats, ncats);
}

/* Reads column name of s, expecting rc and, unless NULL, the error
 * "PATH: tail". */
static void read_as(struct rfs_source *s, const struct writer *w,
		    const char *name, struct rfs_column *c, int want,
		    const char *tail)
{
	char err[512] = "", full[PATH_MAX + 600];
	assert_int_equal(rfs_source_read_column(s, name, c, err, 512), want);
	if (tail) {
		snprintf(full, sizeof(full), "%s: %s", w->path, tail);
		assert_string_equal(err, full);
	}
}

static void test_categorical(void **state)
{
	(void)state;
	const char *abc[3] = { "B", "A", "C" }; /* kept in their order */
	const int8_t codes[4] = { 0, 2, -1, 1 }, bad[4] = { 0, 3, 0, 0 };
	const int64_t numbers[3] = { 10, 20, 30 };
	for (int z = 0; z < 2; z++) {
		struct writer w;
		begin(&w, z, "cat");
		dense_x(&w, "X");
		group(&w, "obs", NULL, NULL);
		if (z) /* anndata's order of the columns, as HDF5 lists them */
			text(&w, "obs/.zattrs",
			     "{\"column-order\": [\"bad\", \"ct\", "
			     "\"floaty\", \"lacking\", \"num\", \"old\", "
			     "\"wide\"]}");
		new_categorical(&w, "ct", codes, 0, abc, 3);
		new_categorical(&w, "bad", bad, 0, abc, 3);
		new_categorical(&w, "floaty", codes, 1, abc, 3);
		group(&w, "obs/lacking", "encoding-type", "categorical");
		array(&w, "obs/lacking/codes", "|i1", H5T_STD_I8LE, codes, 1, 4,
		      0);
		group(&w, "obs/num", "encoding-type", "categorical");
		array(&w, "obs/num/codes", "|i1", H5T_STD_I8LE, codes, 1, 4, 0);
		array(&w, "obs/num/categories", "<i8", H5T_STD_I64LE, numbers,
		      8, 3, 0);
		old_categorical(&w, "old", codes, abc, 3);
		/* int8 codes index 128 categories at most. */
		const char *many[129];
		char names[129][8];
		for (int i = 0; i < 129; i++) {
			snprintf(names[i], sizeof(names[i]), "c%d", i);
			many[i] = names[i];
		}
		new_categorical(&w, "wide", codes, 0, many, 129);
		end(&w);
		struct rfs_source *s = open_as(&w, NULL, 0, NULL);
		struct rfs_column c;
		const char *cols[] = { "ct", "old", "/obs/ct" };
		for (int k = 0; k < 3; k++) {
			read_as(s, &w, cols[k], &c, 0, NULL);
			assert_int_equal(c.kind, RFS_COLUMN_CODES);
			assert_int_equal(c.ncategories, 3);
			for (int i = 0; i < 3; i++)
				assert_string_equal(c.categories[i], abc[i]);
			for (int i = 0; i < 4; i++)
				assert_int_equal(c.codes[i], codes[i]);
			rfs_column_free(&c);
		}
		read_as(s, &w, "num", &c, 0, NULL);
		assert_int_equal(c.ncategories, 3);
		assert_string_equal(c.categories[2], "30");
		rfs_column_free(&c);
		read_as(s, &w, "bad", &c, -EINVAL,
			"obs column 'bad' has code 3 at row 1, outside its 3 "
			"categories");
		read_as(s, &w, "floaty", &c, -EINVAL,
			"obs column 'floaty' must have 1-D integer codes, one "
			"per row (4), and 1-D categories");
		read_as(s, &w, "lacking", &c, -EINVAL,
			"obs column 'lacking' is categorical but lacks codes "
			"or categories");
		read_as(s, &w, "wide", &c, -EINVAL,
			"obs column 'wide' has 129 categories, more than its "
			"codes (int8) index");
		read_as(s, &w, "nope", &c, -EINVAL,
			"obs column 'nope' not found (obs columns: bad, ct, "
			"floaty, lacking, num, old, wide)");
		assert_null(c.codes);
		rfs_source_destroy(s);
	}
}

static int setup(void **state)
{
	(void)state;
	if (rfs_helper_create(&env.strings) != 0)
		return -1;
	return h5fx_tmpdir(dir, sizeof(dir));
}

static int teardown(void **state)
{
	(void)state;
	h5fx_rmtree(dir);
	rfs_helper_destroy(env.strings);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_matrix_groups),
		cmocka_unit_test(test_csr_indices),
		cmocka_unit_test(test_csr_indptr),
		cmocka_unit_test(test_obs_and_var),
		cmocka_unit_test(test_var_index),
		cmocka_unit_test(test_categorical),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
