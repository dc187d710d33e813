/* SPDX-License-Identifier: MIT */
/*
 * Columns of a zarr AnnData store, read whole at mount: the 1-D numeric,
 * bool or string arrays anndata.c reads through read_column (it finds
 * them, checks their shapes and reads their encodings; the var names
 * too, as in the HDF5 backend, so the same genes in either format agree).
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

/* A column from one array: numeric, bool or strings (as
 * rfs_column_from_strings, in_order). */
static int array_column(struct rfs_zarr_array *a, int in_order,
			struct rfs_column *out)
{
	uint64_t n = a->m.shape[0];
	if (a->m.kind == RFS_ZARR_BOOL)
		return bool_column(a, out);
	if (a->m.kind == RFS_ZARR_STRING) {
		char **s;
		int rc = rfs_zarr_array_read_strings(a, &s);
		return rc ? rc : rfs_column_from_strings(out, s, n, in_order);
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

int rfs_zarr_read_column(struct rfs_source *base, const char *path,
			 const char *what, enum rfs_memlimit_as as,
			 struct rfs_column *out, char *err, size_t errlen)
{
	struct zarr_source *s = (struct zarr_source *)base;
	struct rfs_zarr_array a;
	*out = (struct rfs_column){ .claims = s->base.env.claims };
	int rc = rfs_zarr_array_open(&s->st, path + 1, NULL, &a, err, errlen);
	if (rc == 0)
		rc = claim(s, &a, as, &out->claimed, err, errlen);
	if (rc == 0 &&
	    (rc = array_column(&a, as == RFS_MEMLIMIT_NAMES, out)) != 0)
		rfs_column_error(s->path, what, rc, err, errlen);
	if (rc == 0)
		stored_freed(&a, out);
	else
		rfs_column_free(out);
	rfs_zarr_array_close(&a);
	return rc;
}
