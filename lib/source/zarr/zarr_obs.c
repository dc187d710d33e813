/* SPDX-License-Identifier: MIT */
/*
 * Columns and var names of a zarr AnnData store, read whole at mount. An
 * obs column is a group with encoding-type "categorical" (codes and
 * categories arrays), a codes array whose "categories" attribute names
 * its categories array (anndata 0.7), or a numeric, bool or string array;
 * "/PATH" names any 1-D array of the store (anndata.c reads the groups of
 * other encodings). The var names are the 1-D strings anndata.c finds, as
 * in the HDF5 backend, and hash the same way, so the same genes in either
 * format agree.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/convert.h"
#include "os/memlimit.h"
#include "source/zarr/zarr.h"

/* A 1-D array of n values, whole: numbers as int64 (integers) or double
 * (floats, *is_real set), in a malloc'd buffer of n x 8 bytes; a uint64
 * over 2^63 - 1 is -ERANGE. */
static int read_numbers(struct rfs_zarr_array *a, void **out, int *is_real)
{
	uint64_t n = a->m.shape[0];
	void *raw = malloc(n * a->m.elem + 1);
	void *v = malloc(n * 8 + 1);
	int rc = raw && v ? rfs_zarr_array_read_all(a, raw) : -ENOMEM;
	*is_real = a->m.dtype >= RFS_FLOAT16;
	for (uint64_t i = 0; i < n && rc == 0 && a->m.dtype == RFS_UINT64; i++)
		if (((const uint64_t *)raw)[i] > INT64_MAX)
			rc = -ERANGE;
	if (rc == 0)
		rfs_convert(*is_real ? RFS_FLOAT64 : RFS_INT64, v, a->m.dtype,
			    raw, n);
	free(raw);
	if (rc != 0) {
		free(v);
		v = NULL;
	}
	*out = v;
	return rc;
}

static int bool_column(struct rfs_zarr_array *a, struct rfs_column *out)
{
	uint64_t n = a->m.shape[0];
	unsigned char *raw = malloc(n + 1);
	out->kind = RFS_COLUMN_CODES;
	out->rows = n;
	out->boolean = 1;
	out->codes = calloc(n + 1, sizeof(int64_t));
	out->categories = calloc(2, sizeof(char *));
	int rc = raw && out->codes && out->categories ? 0 : -ENOMEM;
	if (rc == 0 && (!(out->categories[0] = strdup("False")) ||
			!(out->categories[1] = strdup("True"))))
		rc = -ENOMEM;
	out->ncategories = 2;
	if (rc == 0)
		rc = rfs_zarr_array_read_all(a, raw);
	for (uint64_t i = 0; i < n && rc == 0; i++)
		out->codes[i] = raw[i] != 0;
	free(raw);
	return rc;
}

/* A column from one array: numeric, bool or strings. */
static int array_column(struct rfs_zarr_array *a, struct rfs_column *out)
{
	uint64_t n = a->m.shape[0];
	if (a->m.kind == RFS_ZARR_BOOL)
		return bool_column(a, out);
	if (a->m.kind == RFS_ZARR_STRING) {
		char **s;
		int rc = rfs_zarr_array_read_strings(a, &s);
		return rc ? rc : rfs_column_from_strings(out, s, n);
	}
	void *v;
	int is_real;
	int rc = read_numbers(a, &v, &is_real);
	if (rc != 0)
		return rc;
	out->rows = n;
	if (is_real) {
		out->kind = RFS_COLUMN_REAL;
		out->reals = v;
		/* As stored: filter values are rounded to it (column.c). */
		out->real_sizes = 1u << a->m.elem;
	} else {
		out->kind = RFS_COLUMN_INT;
		out->codes = v;
	}
	return 0;
}

/* Refuses, before it is read, an array whose shape claims more than the
 * daemon may hold (memlimit.c): each entry takes its stored value and
 * the int64 or double made of it, or a heap string (made codes: their
 * index, code and category too); as category names, a number's text
 * too. The claim is added to *claimed. */
static int claim(const struct zarr_source *s, const struct rfs_zarr_array *a,
		 enum rfs_memlimit_as as, uint64_t *claimed, char *err,
		 size_t errlen)
{
	int names = as == RFS_MEMLIMIT_NAMES;
	uint64_t each =
		a->m.kind != RFS_ZARR_STRING ?
			a->m.elem + 8 +
				(names ? RFS_MEMLIMIT_STRING_BYTES : 0) :
		as == RFS_MEMLIMIT_CODES ? RFS_MEMLIMIT_CODED_STRING_BYTES :
					   RFS_MEMLIMIT_STRING_BYTES;
	return rfs_memlimit_claim(s->base.env.claims, s->path, a->name,
				  a->m.shape[0], each, claimed, err, errlen);
}

/* Releases the stored values of numbers read into out (freed once made
 * int64 or double), from the claim above. */
static void stored_freed(const struct rfs_zarr_array *a, struct rfs_column *out)
{
	if (a->m.kind != RFS_ZARR_STRING)
		rfs_memlimit_release_part(out->claims, &out->claimed,
					  a->m.shape[0] * a->m.elem);
}

/* Category names: strings, bools, or numbers as text. */
static int categories(struct rfs_zarr_array *a, char ***out, uint64_t *count)
{
	struct rfs_column c = { 0 };
	*count = a->m.shape[0];
	*out = NULL;
	if (a->m.kind == RFS_ZARR_STRING)
		return rfs_zarr_array_read_strings(a, out);
	int rc = array_column(a, &c);
	if (rc == 0)
		rc = rfs_column_names(&c, out);
	rfs_column_free(&c);
	return rc;
}

/* Why a column cannot be read, in err. */
static void column_error(const struct zarr_source *s, const char *what, int rc,
			 char *err, size_t errlen)
{
	if (rc == -ERANGE)
		snprintf(err, errlen, "%s: %s " RFS_COLUMN_TOO_LARGE, s->path,
			 what);
	else
		snprintf(err, errlen, "%s: %s cannot be read (%s)", s->path,
			 what, strerror(-rc));
}

/* Codes and categories arrays: a categorical group's (anndata >= 0.8),
 * or a codes array whose "categories" attribute names them (0.7). */
static int categorical(struct zarr_source *s, const char *codes_path,
		       const char *cats_path, uint64_t n, const char *what,
		       struct rfs_column *out, char *err, size_t errlen)
{
	struct rfs_zarr_array codes, cats;
	int rc = rfs_zarr_array_open(&s->st, codes_path, NULL, &codes, err,
				     errlen);
	int rc2 = rfs_zarr_array_open(&s->st, cats_path, NULL, &cats, err,
				      errlen);
	if (rc == 0 && rc2 != 0)
		rc = rc2;
	if (rc == 0 &&
	    (codes.m.ndims != 1 || cats.m.ndims != 1 ||
	     codes.m.kind != RFS_ZARR_NUMBER || codes.m.dtype >= RFS_FLOAT16 ||
	     codes.m.shape[0] != n)) {
		snprintf(
			err, errlen,
			"%s: %s must have 1-D integer codes, one per row (%llu)",
			s->path, what, (unsigned long long)n);
		rc = -EINVAL;
	}
	/* Categories beyond what the codes can index (pandas picks the
	 * codes' type by their count: int8 under 128 ...) are refused
	 * unread: a shape alone, no chunk written, would make them all. */
	int code_bits =
		rc == 0 ? 8 * (int)codes.m.elem - (codes.m.dtype < RFS_UINT8) :
			  63;
	if (rc == 0 && code_bits < 63 &&
	    cats.m.shape[0] > (UINT64_C(1) << code_bits)) {
		snprintf(err, errlen,
			 "%s: %s has %llu categories, more than its codes "
			 "(%s) index",
			 s->path, what, (unsigned long long)cats.m.shape[0],
			 rfs_dtype_name(codes.m.dtype));
		rc = -EINVAL;
	}
	if (rc == 0 && (rc = claim(s, &codes, RFS_MEMLIMIT_VALUES,
				   &out->claimed, err, errlen)) == 0)
		rc = claim(s, &cats, RFS_MEMLIMIT_NAMES, &out->claimed, err,
			   errlen);
	int is_real;
	void *v = NULL;
	if (rc == 0) {
		out->kind = RFS_COLUMN_CODES;
		out->rows = n;
		rc = read_numbers(&codes, &v, &is_real);
		out->codes = v;
		if (rc == 0)
			stored_freed(&codes, out);
		if (rc == 0)
			rc = categories(&cats, &out->categories,
					&out->ncategories);
		if (rc != 0)
			column_error(s, what, rc, err, errlen);
	}
	for (uint64_t i = 0; i < n && rc == 0; i++)
		if (out->codes[i] < -1 ||
		    out->codes[i] >= (int64_t)out->ncategories) {
			snprintf(
				err, errlen,
				"%s: %s has code %lld at row %llu, outside its "
				"%llu categories",
				s->path, what, (long long)out->codes[i],
				(unsigned long long)i,
				(unsigned long long)out->ncategories);
			rc = -EINVAL;
		}
	rfs_zarr_array_close(&codes);
	rfs_zarr_array_close(&cats);
	return rc;
}

/* obs's columns for error lines, as the .h5ad backend lists them: from
 * anndata's "column-order" attribute. */
static void describe_obs(struct zarr_source *s, char out[512])
{
	json_t *attrs = NULL, *v;
	char e[256];
	size_t i;
	out[0] = '\0';
	if (rfs_zarr_node(&s->st, "obs", NULL, &attrs, NULL, e, sizeof(e)) ==
	    2) {
		json_array_foreach(json_object_get(attrs, "column-order"), i, v)
		{
			size_t used = strlen(out);
			if (!json_string_value(v))
				continue;
			if (used > 400)
				break;
			snprintf(out + used, 512 - used, "%s%s",
				 used ? ", " : "", json_string_value(v));
		}
	}
	json_decref(attrs);
	if (!out[0])
		snprintf(out, 512, "none");
}

int rfs_zarr_read_column(struct rfs_source *base, const char *name,
			 struct rfs_column *out, char *err, size_t errlen)
{
	struct zarr_source *s = (struct zarr_source *)base;
	char path[1100], what[300];
	json_t *attrs;
	uint64_t n = s->base.info.rows;
	*out = (struct rfs_column){ .claims = s->base.env.claims };
	/* As the .h5ad backend names them. */
	if (name[0] == '/')
		snprintf(what, sizeof(what), "array %s", name);
	else
		snprintf(what, sizeof(what), "obs column '%s'", name);
	if (name[0] != '/' && !s->base.anndata) {
		snprintf(err, errlen,
			 "%s: not an AnnData store, so it has no %s; name a "
			 "1-D array as /PATH",
			 s->path, what);
		return -EINVAL;
	}
	if (name[0] != '/' && strchr(name, '/')) {
		snprintf(err, errlen, "%s: %s not found", s->path, what);
		return -EINVAL;
	}
	snprintf(path, sizeof(path), "%s%s", name[0] == '/' ? "" : "obs/",
		 name + (name[0] == '/'));
	int kind = rfs_zarr_node(&s->st, path, NULL, &attrs, NULL, err, errlen);
	int rc = kind < 0 ? kind : 0;
	if (kind == 0 && name[0] != '/') {
		char columns[512];
		describe_obs(s, columns);
		snprintf(err, errlen, "%s: %s not found (obs columns: %s)",
			 s->path, what, columns);
		rc = -EINVAL;
	} else if (kind == 0) {
		snprintf(err, errlen, "%s: %s not found", s->path, what);
		rc = -EINVAL;
	} else if (kind == 2) { /* categorical: anndata.c reads the others */
		char codes[1200], cats[1200];
		snprintf(codes, sizeof(codes), "%s/codes", path);
		snprintf(cats, sizeof(cats), "%s/categories", path);
		rc = categorical(s, codes, cats, n, what, out, err, errlen);
	} else if (kind == 1 && rfs_zarr_attr_string(attrs, "categories")) {
		/* Relative to the codes' group, as anndata 0.7 reads it
		 * (obs/x: "__categories/x"); from the root if absolute. */
		const char *cats = rfs_zarr_attr_string(attrs, "categories");
		const char *slash = strrchr(path, '/');
		char full[1200];
		if (cats[0] == '/' || !slash)
			snprintf(full, sizeof(full), "%s",
				 cats + (cats[0] == '/'));
		else
			snprintf(full, sizeof(full), "%.*s/%s",
				 (int)(slash - path), path, cats);
		rc = categorical(s, path, full, n, what, out, err, errlen);
	} else if (kind == 1) {
		struct rfs_zarr_array a;
		rc = rfs_zarr_array_open(&s->st, path, NULL, &a, err, errlen);
		if (rc == 0 && a.m.ndims != 1) {
			snprintf(err, errlen,
				 "%s: %s has %d dimensions (a column needs "
				 "one value per row, 1-D)",
				 s->path, what, a.m.ndims);
			rc = -EINVAL;
		} else if (rc == 0 && a.m.shape[0] != n) {
			snprintf(err, errlen,
				 "%s: %s has %llu rows, the data %llu (a "
				 "column needs one value per row, 1-D)",
				 s->path, what,
				 (unsigned long long)a.m.shape[0],
				 (unsigned long long)n);
			rc = -EINVAL;
		}
		if (rc == 0)
			rc = claim(s, &a, RFS_MEMLIMIT_CODES, &out->claimed,
				   err, errlen);
		if (rc == 0 && (rc = array_column(&a, out)) != 0)
			column_error(s, what, rc, err, errlen);
		if (rc == 0)
			stored_freed(&a, out);
		rfs_zarr_array_close(&a);
	}
	json_decref(attrs);
	if (rc != 0)
		rfs_column_free(out);
	return rc;
}

int rfs_zarr_read_var_names(struct rfs_source *base, const char *var_path,
			    char ***names, uint64_t *n, char *err,
			    size_t errlen)
{
	struct zarr_source *s = (struct zarr_source *)base;
	const char *path = var_path + 1;
	struct rfs_zarr_array a;
	int rc = rfs_zarr_array_open(&s->st, path, NULL, &a, err, errlen);
	if (rc == 0 && (a.m.ndims != 1 || a.m.kind != RFS_ZARR_STRING))
		rc = -EINVAL;
	/* More names than columns are not the columns' names: not read (a
	 * shape alone, no chunk written, would make as many strings). */
	if (rc == 0 && a.m.shape[0] > s->base.info.cols) {
		*names = NULL;
		*n = a.m.shape[0];
		rfs_zarr_array_close(&a);
		return -E2BIG;
	}
	if (rc == 0 && (rc = claim(s, &a, RFS_MEMLIMIT_VALUES,
				   &s->base.var_claimed, err, errlen)) != 0) {
		rfs_zarr_array_close(&a);
		return rc;
	}
	if (rc == 0)
		rc = rfs_zarr_array_read_strings(&a, names);
	if (rc == 0)
		*n = a.m.shape[0];
	rfs_zarr_array_close(&a);
	if (rc != 0)
		snprintf(err, errlen,
			 "%s: the var names (%s) cannot be read: %s", s->path,
			 path,
			 rc == -EINVAL ? "not 1-D strings" : strerror(-rc));
	return rc;
}
