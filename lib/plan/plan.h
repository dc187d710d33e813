/* SPDX-License-Identifier: MIT */
/* Plans batches: (epoch, rank, batch) -> global row ids, in served order.
 *
 * Thread-safe. Holds a small cache of recently sorted fetch windows so the
 * ranks and batches of one window share one sort. */
#ifndef RFS_PLAN_H
#define RFS_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "plan/partition.h"
#include "plan/rowset.h"

struct rfs_planner;

/* seqs: one rowset per sequence (rfs_partition_sequences(c) of them),
 * borrowed: they must outlive the planner. c is copied (its strings are
 * not used). @return 0, -EINVAL (a rank would get no batch), -ENOMEM. */
int rfs_plan_create(const struct rfs_config *c, const struct rfs_rowset *seqs,
		    struct rfs_planner **out);

/* Accepts NULL. */
void rfs_plan_destroy(struct rfs_planner *p);

/* Valid until rfs_plan_destroy(). */
const struct rfs_layout *rfs_plan_layout(const struct rfs_planner *p);

/* Length of sequence seq's S_e (the same in every epoch). */
uint64_t rfs_plan_sequence_length(const struct rfs_planner *p, uint64_t seq);

/* Writes the row ids of a batch (rfs_partition_batch_rows() of them) to
 * out. epoch < 2^31, rank < world_size, batch < batches_per_rank.
 * @return 0 or -ENOMEM. */
int rfs_plan_batch(struct rfs_planner *p, uint64_t epoch, uint64_t rank,
		   uint64_t batch, int64_t *out);

/* The most bytes of row ids the planner holds at once, whatever the load
 * (none for streaming, which builds no windows). */
size_t rfs_plan_memory_bound(const struct rfs_planner *p);

/* The smallest budget rfs_plan_limit() takes: the cached windows and
 * one build (0 for streaming). */
size_t rfs_plan_least(const struct rfs_planner *p);

/* Lowers how many windows may be built at once (8 at most) until the
 * bound fits in budget bytes; *least is the smallest budget that would
 * do (rfs_plan_least()). Call before planning any batch. @return 0, or -ENOSPC when even the
 * cached windows and one build do not fit (the planner left as it was). */
int rfs_plan_limit(struct rfs_planner *p, size_t budget, size_t *least);

/* Windows sorted and permuted since creation (streaming builds none):
 * threads that want a window being built wait for it, so each window is
 * built once while it stays cached. */
uint64_t rfs_plan_windows_built(struct rfs_planner *p);

#endif
