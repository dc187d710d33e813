/* SPDX-License-Identifier: MIT */
/*
 * The AnnData layout, written once for every format and read through a
 * backend's store ops (backend.h): which array or group holds the rows
 * (X dense, or anndata's csr_matrix: a shape attribute and data, indices
 * and indptr arrays; csc_matrix refused), the var table naming their
 * columns, and the nullable obs encodings (values and a mask).
 */
#include "source/anndata.h"

#include <errno.h>
#include <stdio.h>
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

/* Reads the nullable column at group ("/obs/NAME", or "/PATH") of s: its
 * values and mask, each through the backend's read_column as a /PATH
 * array, the mask applied (rfs_column_apply_mask). what names the column
 * in errors. @return as read_column. */
static int read_nullable(struct rfs_source *s, const char *group,
			 const char *what, struct rfs_column *out, char *err,
			 size_t errlen)
{
	char path[1200];
	struct rfs_column mask = { 0 };
	uint64_t missing;
	snprintf(path, sizeof(path), "%s/values", group);
	int rc = s->ops->read_column(s, path, out, err, errlen);
	snprintf(path, sizeof(path), "%s/mask", group);
	if (rc == 0)
		rc = s->ops->read_column(s, path, &mask, err, errlen);
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
			snprintf(err, errlen,
				 "%s: %s cannot be read: no memory",
				 s->info.path, what);
	}
	rfs_column_free(&mask);
	if (rc != 0)
		rfs_column_free(out);
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
		rc = st->read_indptr(s, d, shape[0], err, errlen);
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
	char index[128], path[300], why[512];
	if (strcmp(d, "/X") == 0 || strncmp(d, "/layers/", 8) == 0)
		table = "/var";
	else if (strcmp(d, "/raw/X") == 0)
		table = "/raw/var";
	if (!s->anndata || !table)
		return -ENOENT;
	/* Its absence is no error: why says what is there instead. */
	int kind = s->store->node(s, table, "_index", index, sizeof(index), why,
				  sizeof(why));
	if (kind < 0)
		snprintf(err, errlen, "%s", why);
	if (kind != RFS_NODE_GROUP)
		return kind < 0 ? kind : -ENOENT;
	snprintf(path, sizeof(path), "%s/%s", table,
		 index[0] ? index : "_index");
	return s->ops->read_var_names(s, path, names, n, err, errlen);
}

int rfs_source_read_column(struct rfs_source *s, const char *name,
			   struct rfs_column *out, char *err, size_t errlen)
{
	char path[1000], what[300], enc[64], why[512];
	int kind = 0;
	snprintf(path, sizeof(path), "%s%s", name[0] == '/' ? "" : "/obs/",
		 name);
	if (name[0] == '/')
		snprintf(what, sizeof(what), "%s %s", s->array_noun, name);
	else
		snprintf(what, sizeof(what), "obs column '%s'", name);
	/* A group's encoding says what it holds; the backend reads, and
	 * names what is wrong with, anything else. */
	if (name[0] == '/' || (s->anndata && !strchr(name, '/')))
		kind = s->store->node(s, path, "encoding-type", enc,
				      sizeof(enc), why, sizeof(why));
	if (kind != RFS_NODE_GROUP || strcmp(enc, "categorical") == 0)
		return s->ops->read_column(s, name, out, err, errlen);
	*out = (struct rfs_column){ 0 };
	if (strcmp(enc, "nullable-integer") == 0 ||
	    strcmp(enc, "nullable-boolean") == 0 ||
	    strcmp(enc, "nullable-string-array") == 0)
		return read_nullable(s, path, what, out, err, errlen);
	snprintf(err, errlen,
		 "%s: %s is a group with encoding '%s', not a column rankfs "
		 "reads (categorical, numeric, bool, string)",
		 s->info.path, what, enc[0] ? enc : "none");
	return -ENOTSUP;
}
