/* SPDX-License-Identifier: MIT */
/*
 * The AnnData layout, written once for every format and read through a
 * backend's store ops (backend.h): which array or group holds the rows
 * (X dense, or anndata's csr_matrix: a shape attribute and data, indices
 * and indptr arrays; csc_matrix refused), the var table naming their
 * columns, and the obs columns: 1-D arrays, read by the backend's
 * read_column, or groups by their encoding-type: categorical (codes into
 * categories; anndata 0.7 wrote the codes alone, their "categories"
 * attribute naming the categories array), or nullable (values and a
 * mask).
 */
#include "source/anndata.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "source/column.h"

/* Writes the mount error for a csc_matrix at dataset (an AnnData path:
 * /X, /raw/X, /layers/NAME, or any other) of path, with the anndata line
 * that rewrites it as CSR. @return -ENOTSUP. */
static int refuse_csc(const char *path, const char *dataset, char *err,
		      size_t errlen)
{
	char fix[320] = "";
	const char *layer = "/layers/";
	if (strcmp(dataset, "/X") == 0)
		snprintf(fix, sizeof(fix), " (adata.X = adata.X.tocsr())");
	else if (strcmp(dataset, "/raw/X") == 0)
		snprintf(fix, sizeof(fix),
			 " (adata.raw = anndata.AnnData(adata.raw.X.tocsr(), "
			 "var=adata.raw.var))");
	else if (strncmp(dataset, layer, strlen(layer)) == 0 &&
		 !strchr(dataset + strlen(layer), '/'))
		snprintf(fix, sizeof(fix),
			 " (adata.layers['%s'] = adata.layers['%s'].tocsr())",
			 dataset + strlen(layer), dataset + strlen(layer));
	snprintf(err, errlen,
		 "%s: %s is a csc_matrix: its rows are scattered over every "
		 "column; rewrite it as CSR%s",
		 path, dataset, fix);
	return -ENOTSUP;
}

/* Reads the 1-D array at path (what, in errors), of one value per row,
 * through the backend's read_column, as as. */
static int read_rows(struct rfs_source *s, const char *path, const char *what,
		     enum rfs_memlimit_as as, struct rfs_column *out, char *err,
		     size_t errlen)
{
	struct rfs_store_array a;
	int rc = s->store->array(s, path, &a, err, errlen);
	if (rc == 0 && a.ndims != 1)
		snprintf(err, errlen,
			 "%s: %s has %d dimensions (a column needs one value "
			 "per row, 1-D)",
			 s->info.path, what, a.ndims);
	else if (rc == 0 && a.len != s->info.rows)
		snprintf(err, errlen,
			 "%s: %s has %llu rows, the data %llu (a column needs "
			 "one value per row, 1-D)",
			 s->info.path, what, (unsigned long long)a.len,
			 (unsigned long long)s->info.rows);
	else
		return rc ? rc :
			    s->ops->read_column(s, path, what, as, out, err,
						errlen);
	return -EINVAL;
}

/* Reads the nullable column at group ("/obs/NAME", or "/PATH") of s: its
 * values and mask, each as a /PATH array, the mask applied
 * (rfs_column_apply_mask). what names the column in errors. */
static int read_nullable(struct rfs_source *s, const char *group,
			 const char *what, struct rfs_column *out, char *err,
			 size_t errlen)
{
	char path[1200], part[1300];
	struct rfs_column mask = { 0 };
	uint64_t missing;
	snprintf(path, sizeof(path), "%s/values", group);
	snprintf(part, sizeof(part), "%s %s", s->array_noun, path);
	int rc = read_rows(s, path, part, RFS_MEMLIMIT_CODES, out, err, errlen);
	snprintf(path, sizeof(path), "%s/mask", group);
	snprintf(part, sizeof(part), "%s %s", s->array_noun, path);
	if (rc == 0)
		rc = read_rows(s, path, part, RFS_MEMLIMIT_CODES, &mask, err,
			       errlen);
	if (rc == 0) {
		rc = rfs_column_apply_mask(out, &mask, &missing);
		if (rc == -EDOM)
			snprintf(err, errlen,
				 "%s: %s has %llu missing values (pd.NA), "
				 "which an %s column cannot hold: fill them "
				 "(.fillna()) or store it as categorical",
				 s->info.path, what,
				 (unsigned long long)missing,
				 rfs_column_kind_name(out));
		else if (rc == -EINVAL)
			snprintf(err, errlen,
				 "%s: %s's mask is not a bool array of its "
				 "rows",
				 s->info.path, what);
		else if (rc == -ENOMEM)
			rfs_column_error(s->info.path, what, rc, err, errlen);
	}
	rfs_column_free(&mask);
	if (rc != 0)
		rfs_column_free(out);
	return rc;
}

/* The category names in cats, as read_column read them: taken where each
 * entry is its own category (strings, in order), else each entry's
 * text (numbers, bools). */
static int take_names(struct rfs_column *cats, char ***names)
{
	int own = cats->kind == RFS_COLUMN_CODES &&
		  cats->ncategories == cats->rows;
	for (uint64_t i = 0; i < cats->rows && own; i++)
		own = cats->codes[i] == (int64_t)i;
	if (!own)
		return rfs_column_names(cats, names);
	*names = cats->categories;
	cats->categories = NULL;
	cats->ncategories = 0;
	return 0;
}

/* Reads a categorical column (what, in errors): integer codes, one per
 * row, at codes, into the 1-D categories at cats (strings, bools, or
 * numbers as text). */
static int categorical(struct rfs_source *s, const char *codes,
		       const char *cats, const char *what,
		       struct rfs_column *out, char *err, size_t errlen)
{
	struct rfs_store_array c, k;
	struct rfs_column names = { 0 };
	char val[8];
	int rc = s->store->node(s, codes, "", val, sizeof(val), err, errlen);
	if (rc == RFS_NODE_ARRAY)
		rc = s->store->node(s, cats, "", val, sizeof(val), err, errlen);
	if (rc >= 0 && rc != RFS_NODE_ARRAY) {
		snprintf(err, errlen,
			 "%s: %s is categorical but lacks codes or categories",
			 s->info.path, what);
		return -EINVAL;
	}
	if (rc < 0 || (rc = s->store->array(s, codes, &c, err, errlen)) != 0 ||
	    (rc = s->store->array(s, cats, &k, err, errlen)) != 0)
		return rc;
	if (c.ndims != 1 || c.len != s->info.rows || c.dtype > RFS_UINT64 ||
	    k.ndims != 1) {
		snprintf(err, errlen,
			 "%s: %s must have 1-D integer codes, one per row "
			 "(%llu), and 1-D categories",
			 s->info.path, what, (unsigned long long)s->info.rows);
		return -EINVAL;
	}
	/* Categories beyond what the codes can index (pandas picks the
	 * codes' type by their count: int8 under 128 ...) are refused
	 * unread: a shape alone, no chunk written, would make them all. */
	int bits = 8 * (int)rfs_dtype_size(c.dtype) - (c.dtype < RFS_UINT8);
	if (bits < 63 && k.len > (UINT64_C(1) << bits)) {
		snprintf(err, errlen,
			 "%s: %s has %llu categories, more than its codes "
			 "(%s) index",
			 s->info.path, what, (unsigned long long)k.len,
			 rfs_dtype_name(c.dtype));
		return -EINVAL;
	}
	rc = s->ops->read_column(s, codes, what, RFS_MEMLIMIT_VALUES, out, err,
				 errlen);
	if (rc == 0)
		rc = s->ops->read_column(s, cats, what, RFS_MEMLIMIT_NAMES,
					 &names, err, errlen);
	if (rc == 0 && (rc = take_names(&names, &out->categories)) != 0)
		rfs_column_error(s->info.path, what, rc, err, errlen);
	if (rc == 0) {
		out->kind = RFS_COLUMN_CODES;
		out->ncategories = names.rows;
		out->claimed += names.claimed; /* the names' claim moves */
		names.claimed = 0;
	}
	for (uint64_t i = 0; i < out->rows && rc == 0; i++)
		if (out->codes[i] < -1 ||
		    out->codes[i] >= (int64_t)out->ncategories) {
			snprintf(
				err, errlen,
				"%s: %s has code %lld at row %llu, outside its "
				"%llu categories",
				s->info.path, what, (long long)out->codes[i],
				(unsigned long long)i,
				(unsigned long long)out->ncategories);
			rc = -EINVAL;
		}
	rfs_column_free(&names);
	if (rc != 0)
		rfs_column_free(out);
	return rc;
}

/* Reads group's indptr whole, through read_column (its claim held until
 * the source is closed), and checks it as scipy's CSR check does: rows +
 * 1 integers from 0, none falling, the last at most nnz (the values
 * stored). Sets s->indptr, info.nnz and max_row_nnz. */
static int read_indptr(struct rfs_source *s, const char *group, uint64_t rows,
		       uint64_t nnz, char *err, size_t errlen)
{
	char path[1100], what[1200];
	struct rfs_store_array a;
	struct rfs_column col;
	snprintf(path, sizeof(path), "%s/indptr", group);
	snprintf(what, sizeof(what), "%s %s", s->array_noun, path);
	int rc = s->store->array(s, path, &a, err, errlen);
	if (rc == 0 &&
	    (a.ndims != 1 || a.len != rows + 1 || a.dtype > RFS_UINT64)) {
		snprintf(err, errlen,
			 "%s: %s must be %llu + 1 integer offsets (rows + 1)",
			 s->info.path, path, (unsigned long long)rows);
		rc = -EINVAL;
	}
	if (rc == 0)
		rc = s->ops->read_column(s, path, what, RFS_MEMLIMIT_VALUES,
					 &col, err, errlen);
	if (rc != 0)
		return rc;
	s->indptr = col.codes; /* the claim moves with it */
	s->claimed += col.claimed;
	const int64_t *p = s->indptr;
	for (uint64_t r = 0; r <= rows && rc == 0; r++) {
		int64_t before = r ? p[r - 1] : 0;
		if (r == 0 ? p[0] != 0 :
			     p[r] < before || (uint64_t)p[r] > nnz) {
			snprintf(err, errlen,
				 "%s: %s must be non-decreasing offsets from 0 "
				 "to at most the %llu stored values: entry "
				 "%llu is %lld, after %lld",
				 s->info.path, path, (unsigned long long)nnz,
				 (unsigned long long)r, (long long)p[r],
				 (long long)before);
			rc = -EINVAL;
		} else if (r &&
			   (uint64_t)(p[r] - before) > s->info.max_row_nnz) {
			s->info.max_row_nnz = (uint64_t)(p[r] - before);
		}
	}
	s->info.nnz = (uint64_t)p[rows];
	return rc;
}

int rfs_anndata_open_rows(struct rfs_source *s, char *err, size_t errlen)
{
	const struct rfs_store_ops *st = s->store;
	const char *d = s->info.dataset, *noun = s->array_noun;
	char enc[64];
	uint64_t shape[2], n[2];
	int rc = st->node(s, d, "encoding-type", enc, sizeof(enc), err, errlen);
	if (rc == RFS_NODE_ARRAY)
		return st->open_dense(s, d, err, errlen);
	if (rc <= 0)
		return rc ? rc : -EINVAL;
	if (strcmp(enc, "csc_matrix") == 0)
		return refuse_csc(s->info.path, d, err, errlen);
	if (strcmp(enc, "csr_matrix") != 0) {
		snprintf(err, errlen, "%s: %s is a group, not a%s %s",
			 s->info.path, d, noun[0] == 'a' ? "n" : "", noun);
		return -ENOTSUP;
	}
	if (st->shape(s, d, shape) != 0 || shape[1] == 0) {
		snprintf(err, errlen,
			 "%s: %s is csr_matrix without a valid shape "
			 "attribute",
			 s->info.path, d);
		return -EINVAL;
	}
	rc = st->open_csr(s, d, n, err, errlen);
	if (rc == 0 && (s->info.index_dtype >= RFS_FLOAT16 || n[1] != n[0])) {
		snprintf(err, errlen,
			 "%s: %s/indices must be integers, one per value",
			 s->info.path, d);
		rc = -EINVAL;
	}
	if (rc == 0)
		rc = read_indptr(s, d, shape[0], n[0], err, errlen);
	if (rc != 0)
		return rc;
	s->info.sparse = 1;
	s->info.rows = shape[0];
	s->info.cols = shape[1];
	s->info.ndims = 2;
	return 0;
}

int rfs_anndata_read_var_names(struct rfs_source *s, char ***names, uint64_t *n,
			       char *err, size_t errlen)
{
	const char *d = s->info.dataset, *table = NULL;
	char index[128], path[300], what[320], why[512];
	struct rfs_store_array a;
	struct rfs_column col;
	if (strcmp(d, "/X") == 0 || strncmp(d, "/layers/", 8) == 0)
		table = "/var";
	else if (strcmp(d, "/raw/X") == 0)
		table = "/raw/var";
	if (!s->anndata || !table)
		return -ENOENT;
	/* A table or index absent is no error: why says what is there. */
	int kind = s->store->node(s, table, "_index", index, sizeof(index), why,
				  sizeof(why));
	snprintf(path, sizeof(path), "%s/%s", table,
		 index[0] ? index : "_index");
	if (kind == RFS_NODE_GROUP)
		kind = s->store->node(s, path, "", index, sizeof(index), why,
				      sizeof(why));
	else if (kind > 0) /* an array named var: no table */
		kind = 0;
	if (kind < 0)
		snprintf(err, errlen, "%s", why);
	if (kind <= 0)
		return kind < 0 ? kind : -ENOENT;
	int rc = kind == RFS_NODE_ARRAY ?
			 s->store->array(s, path, &a, err, errlen) :
			 0;
	if (rc == 0 && (kind != RFS_NODE_ARRAY || a.ndims != 1 || !a.strings)) {
		snprintf(err, errlen,
			 "%s: the var index %s is not a 1-D string array",
			 s->info.path, path);
		return -EINVAL;
	}
	if (rc != 0)
		return rc;
	if (a.len > s->info.cols) {
		/* More names than columns are not the columns' names: not
		 * read (a shape alone, no storage, would make as many). */
		*names = NULL;
		*n = a.len;
		return -E2BIG;
	}
	snprintf(what, sizeof(what), "the var names (%s)", path);
	rc = s->ops->read_column(s, path, what, RFS_MEMLIMIT_NAMES, &col, err,
				 errlen);
	if (rc != 0)
		return rc;
	*names = col.categories; /* each its own category, in order */
	*n = col.rows;
	s->var_claimed += col.claimed; /* the claim moves */
	free(col.codes); /* the rest is taken */
	return 0;
}

/* Lists an obs column for an error line (at most 512 bytes in ctx,
 * stopping past 400): not the index, nor anndata 0.7's categories. */
static int list_column(const char *name, void *ctx)
{
	char *out = ctx;
	size_t used = strlen(out);
	if (strcmp(name, "_index") == 0 || strcmp(name, "__categories") == 0)
		return 0;
	if (used > 400)
		return 1;
	snprintf(out + used, 512 - used, "%s%s", used ? ", " : "", name);
	return 0;
}

int rfs_source_read_column(struct rfs_source *s, const char *name,
			   struct rfs_column *out, char *err, size_t errlen)
{
	char path[1000], what[300], val[512], found[512] = "";
	char codes[1100], cats[1600];
	int obs = name[0] != '/', kind = 0;
	snprintf(path, sizeof(path), "%s%s", obs ? "/obs/" : "", name);
	if (obs)
		snprintf(what, sizeof(what), "obs column '%s'", name);
	else
		snprintf(what, sizeof(what), "%s %s", s->array_noun, name);
	*out = (struct rfs_column){ 0 };
	if (obs && !s->anndata) {
		snprintf(
			err, errlen,
			"%s: not an AnnData %s, so it has no %s; name a 1-D %s "
			"as /PATH",
			s->info.path, s->store_noun, what, s->array_noun);
		return -EINVAL;
	}
	if (!obs || !strchr(name, '/'))
		kind = s->store->node(s, path, "encoding-type", val,
				      sizeof(val), err, errlen);
	if (kind == 0 && obs) {
		s->store->members(s, "/obs", list_column, found);
		snprintf(err, errlen, "%s: %s not found (obs columns: %s)",
			 s->info.path, what, found[0] ? found : "none");
	}
	if (kind <= 0)
		return kind ? kind : -EINVAL;
	if (kind == RFS_NODE_GROUP && strcmp(val, "categorical") == 0) {
		snprintf(codes, sizeof(codes), "%s/codes", path);
		snprintf(cats, sizeof(cats), "%s/categories", path);
		return categorical(s, codes, cats, what, out, err, errlen);
	}
	if (kind == RFS_NODE_GROUP &&
	    (strcmp(val, "nullable-integer") == 0 ||
	     strcmp(val, "nullable-boolean") == 0 ||
	     strcmp(val, "nullable-string-array") == 0))
		return read_nullable(s, path, what, out, err, errlen);
	if (kind == RFS_NODE_GROUP) {
		snprintf(err, errlen,
			 "%s: %s is a group with encoding '%s', not a column "
			 "rankfs reads (categorical, numeric, bool, string)",
			 s->info.path, what, val[0] ? val : "none");
		return -ENOTSUP;
	}
	/* anndata 0.7: integer codes naming their categories, relative to
	 * the codes' group (obs/x: "__categories/x") unless absolute. */
	struct rfs_store_array a;
	int rc = s->store->array(s, path, &a, err, errlen);
	if (rc == 0 && a.dtype <= RFS_UINT64 &&
	    s->store->node(s, path, "categories", val, sizeof(val), err,
			   errlen) == RFS_NODE_ARRAY &&
	    val[0]) {
		int at = val[0] == '/' ? 0 : (int)(strrchr(path, '/') - path);
		snprintf(cats, sizeof(cats), "%.*s%s%s", at, path,
			 val[0] == '/' ? "" : "/", val);
		return categorical(s, path, cats, what, out, err, errlen);
	}
	return rc ? rc :
		    read_rows(s, path, what, RFS_MEMLIMIT_CODES, out, err,
			      errlen);
}
