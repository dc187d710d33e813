/* SPDX-License-Identifier: MIT */
/* The JSON files of a view and its id: config.json and dataset.json
 * (rendered once at mount), stats.json (a snapshot per open), and
 * view_id. Pure renderers: what they show is passed in. */
#ifndef RFS_VIEW_JSON_H
#define RFS_VIEW_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "serve/budget.h"
#include "serve/cache.h"
#include "core/config.h"
#include "source/dataset.h"
#include "core/dtype.h"
#include "serve/prefetch.h"
#include "plan/selection.h"
#include "serve/stats.h"

/* view_id: xxh64 of the dataset fingerprint, what the selection took
 * from columns, and every byte-changing option of c (and the width of
 * step names where epochs widens them), so equal ids mean equal files
 * on every node. @return 0 or -ENOMEM. */
int rfs_view_json_id(const struct rfs_config *c, const struct rfs_dataset *d,
		     const struct rfs_selection *s, uint64_t batches_per_rank,
		     uint64_t *out);

/* config.json: c's options and view_id. *out is the caller's to free.
 * @return 0 or -ENOMEM. */
int rfs_view_json_config(const struct rfs_config *c, uint64_t view_id,
			 char **out, size_t *len);

/* dataset.json: the sources, the matrix (served in out_dtype), the rows
 * filters keep and the label of s (its column named by c). *out is the
 * caller's to free. @return 0 or -ENOMEM. */
int rfs_view_json_dataset(const struct rfs_config *c,
			  const struct rfs_dataset *d,
			  const struct rfs_selection *s,
			  enum rfs_dtype out_dtype, char **out, size_t *len);

/* var_names.txt: d's served var names, one per line; *out NULL (len 0)
 * when d has none, or a name is empty or holds a line break (logged).
 * *out is the caller's, its bytes claimed in claims (memlimit.c: as
 * many names as the sources' metadata says) and added to *claimed, to be
 * released once it is freed. @return 0, or -ENOMEM with err set (out of
 * memory, or the claim refused). */
int rfs_view_json_var_names(struct rfs_claims *claims,
			    const struct rfs_dataset *d, char **out,
			    size_t *len, uint64_t *claimed, char *err,
			    size_t errlen);

/* What stats.json shows, gathered by the caller. */
struct rfs_view_json_live {
	uint64_t view_id;
	struct rfs_stats *stats; /* borrowed: rendered as it is now */
	struct rfs_cache_counters cache;
	struct rfs_prefetch_counters prefetch;
	uint64_t depth; /* prefetch depth now */
	struct rfs_budget budget; /* cache_mb's shares */
	/* What the open sources hold outside cache_mb (HDF5's metadata
	 * caches, indptr arrays): the growth of resident memory while they
	 * were opened. */
	uint64_t sources_bytes;
	struct rfs_dataset *dataset; /* borrowed, may be NULL: each
				      * source's state */
};

/* stats.json. *out is the caller's to free. @return 0 or -ENOMEM. */
int rfs_view_json_stats(const struct rfs_view_json_live *l, char **out,
			size_t *len);

#endif
