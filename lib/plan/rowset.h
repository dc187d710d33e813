/* SPDX-License-Identifier: MIT */
/* A rowset: the rows one epoch sequence samples from, as a virtual range
 * [0, length) mapped to global row ids, with optional sampling weights.
 *
 * A plain value. The identity (every row of the source) is
 * { .length = N } with no ranges. A filter keeps a sorted list of global
 * ids (base); partition=file gives each rank the ranges of base (or of the
 * identity) that belong to its files. Mapping a virtual index is a binary
 * search over the ranges (a few per rank), so a rowset costs memory only
 * for what a filter keeps and for weights. */
#ifndef RFS_ROWSET_H
#define RFS_ROWSET_H

#include <stdint.h>

struct rfs_rowset {
	uint64_t length; /* virtual rows */
	const uint64_t *base; /* sorted kept ids (borrowed); NULL: identity */
	uint64_t nranges; /* 0: the whole of base (or identity) */
	uint64_t *range_start; /* owned: first base index of each range */
	uint64_t *range_prefix; /* owned: nranges + 1 cumulative lengths */
	double *cdf; /* owned: cumulative weights per virtual row; NULL: none */
	uint64_t last_weighted; /* greatest virtual row with weight > 0 */
};

/* @return the global row id of virtual row v (v < length). */
uint64_t rfs_rowset_row(const struct rfs_rowset *r, uint64_t v);

/* Builds the cumulative weights from weight(v) for every virtual row.
 * @return 0, -EINVAL (a weight is negative or NaN: *bad is that virtual
 * row; or every weight is 0: *bad is length), -ENOMEM. */
int rfs_rowset_set_weights(struct rfs_rowset *r,
			   double (*weight)(void *ctx, uint64_t row), void *ctx,
			   uint64_t *bad);

/* Inverse CDF: the virtual row whose weight interval holds u, a uniform
 * 53-bit number (u < 2^53). Rows of weight 0 are never returned.
 * O(log length). Needs weights. */
uint64_t rfs_rowset_draw(const struct rfs_rowset *r, uint64_t u);

/* Frees what the rowset owns (not base). Accepts a zeroed rowset. */
void rfs_rowset_free(struct rfs_rowset *r);

#endif
