/* Plans batches: (epoch, rank, batch) -> global row ids, in served order.
 *
 * Thread-safe. Holds a small cache of recently sorted fetch windows so the
 * ranks and batches of one window share one sort. */
#ifndef RFS_PLAN_H
#define RFS_PLAN_H

#include <stdint.h>

#include "config.h"
#include "partition.h"

struct rfs_planner;

/* c is copied (its strings are not used). @return 0, -EINVAL (fewer rows
 * than one global batch), -ENOMEM. */
int rfs_planner_create(const struct rfs_config *c, uint64_t rows,
		       struct rfs_planner **out);

/* Accepts NULL. */
void rfs_planner_destroy(struct rfs_planner *p);

/* Valid until rfs_planner_destroy(). */
const struct rfs_layout *rfs_planner_layout(const struct rfs_planner *p);

/* Writes batch_size row ids to out. epoch < 2^31, rank < world_size,
 * batch < batches_per_rank. @return 0 or -ENOMEM. */
int rfs_planner_batch(struct rfs_planner *p, uint64_t epoch, uint64_t rank,
		      uint64_t batch, int64_t *out);

#endif
