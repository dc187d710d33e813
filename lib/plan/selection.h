/* SPDX-License-Identifier: MIT */
/* What a mount samples from, built once at mount time from the options:
 * the rows filters keep, the label column, and one rowset per sequence
 * (with weights for weighted and class_balanced). Read-only afterwards.
 *
 * Memory: 8 bytes per kept row when filter= is given, 8 per row for a
 * label, 8 per sampled row for weights; nothing per row otherwise. Each
 * is claimed (memlimit.c) before it is allocated, with what building it
 * needs for a while (a mark per row for the filters, the columns read,
 * the sorted labels of class_balanced); those are released once freed,
 * the rest when the selection is. */
#ifndef RFS_SELECTION_H
#define RFS_SELECTION_H

#include <stddef.h>
#include <stdint.h>

#include "source/column.h"
#include "core/config.h"
#include "source/dataset.h"
#include "plan/rowset.h"

struct rfs_selection {
	uint64_t kept_rows; /* rows left by the filters (all rows without) */
	uint64_t *kept; /* sorted ids; NULL without filters */
	int has_label;
	struct rfs_column label; /* CODES or INT; when has_label */
	uint64_t sequences;
	struct rfs_rowset *seqs; /* one per sequence (partition.h) */
	uint64_t claimed; /* kept and the weights (memlimit.c), in claims */
	struct rfs_claims *claims; /* borrowed: the mount's ledger */
};

/* What the selection allocates is claimed in claims (memlimit.h; the
 * mount's), which must outlive it. On failure writes one line naming the
 * option and the culprit to err. @return 0 or a negative errno; *out is
 * then empty but safe to free. */
int rfs_selection_build(const struct rfs_config *c, struct rfs_dataset *d,
			struct rfs_claims *claims, struct rfs_selection *out,
			char *err, size_t errlen);

/* Accepts a zeroed or half-built selection. */
void rfs_selection_free(struct rfs_selection *s);

/* What the selection took from the sources' columns (the rows filters
 * keep, the label codes and category names, the weights' cumulative
 * sums), hashed: view_id includes it, so mounts of files that differ only
 * in those columns get different ids. 0 when it took nothing from
 * columns (the ids of such mounts are as before the columns were
 * hashed). */
uint64_t rfs_selection_digest(const struct rfs_selection *s);

/* The label code of a global row (int64 codes, -1 missing; the value for
 * integer labels). Needs has_label. */
int64_t rfs_selection_label(const struct rfs_selection *s, uint64_t row);

#endif
