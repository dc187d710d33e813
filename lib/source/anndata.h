/* SPDX-License-Identifier: MIT */
/* The AnnData layout, once for every format (anndata.c): for source.c. */
#ifndef RFS_SOURCE_ANNDATA_H
#define RFS_SOURCE_ANNDATA_H

#include "source/backend.h"

/* Opens the rows at s->info.dataset through s->store: a dense array, or a
 * csr_matrix group (shape attribute, data, indices, indptr); a
 * csc_matrix is refused, naming the anndata line that rewrites it as
 * CSR. info's shape and CSR fields set. @return 0 or a negative errno
 * with err set. */
int rfs_anndata_open_rows(struct rfs_source *s, char *err, size_t errlen);

/* The names of the columns of s's dataset: the index of its var table
 * ("var" for /X and /layers/NAME, "raw/var" for /raw/X), the 1-D
 * strings the table's "_index" attribute names (by default "_index"),
 * read whole through read_column, however many (rfs_source_read_var_names()
 * checks them against the width), claimed in s->var_claimed. More than
 * the width are not read: -E2BIG with *n their count and *names NULL.
 * @return 0, -ENOENT where s is no AnnData file or has no var table or
 * index, -E2BIG, or a negative errno with err set (-EINVAL: the index is
 * not a 1-D string array). */
int rfs_anndata_read_var_names(struct rfs_source *s, char ***names, uint64_t *n,
			       char *err, size_t errlen);

#endif
