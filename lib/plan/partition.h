/* SPDX-License-Identifier: MIT */
/* Arithmetic of ranks and batches: which position of which sequence row j
 * of rank R's batch k comes from.
 *
 * Positions index T_e, the epoch sequence after each fetch window has been
 * reordered (plan.c). There is one sequence, shared by all ranks, except
 * for partition=file where rank R has its own (sequence R). Every rank
 * serves per_rank rows in batches_per_rank batches, the same on every rank;
 * positions past a sequence's end wrap around to its start (drop_last=0).
 *
 *   batch        rank R's batch k is the R-th slice of global batch k
 *                (G = world_size x batch_size positions), so any world
 *                size with the same G sees the same global steps;
 *   round_robin  position i goes to rank i mod W (DistributedSampler);
 *   contiguous   rank R serves positions [R x per_rank, (R+1) x per_rank);
 *   file         rank R serves its own sequence from the start. */
#ifndef RFS_PARTITION_H
#define RFS_PARTITION_H

#include <stdint.h>

#include "core/config.h"

struct rfs_layout {
	uint64_t sequences; /* world_size for partition=file, else 1 */
	uint64_t global_batch; /* G */
	uint64_t batch_size; /* B */
	uint64_t window; /* positions read together: fetch_factor batches */
	uint64_t per_rank; /* rows each rank serves per epoch */
	uint64_t batches_per_rank; /* equal on every rank */
	uint64_t last_batch; /* rows of the last batch (batch_size unless
				drop_last=0 leaves it partial) */
};

/* lengths: the length of each sequence (layout.sequences of them, which
 * the caller knows from the partition: rfs_partition_sequences()).
 * @return 0, or -EINVAL when some rank would get no batch (drop_last=1
 * and fewer rows than a global batch, or a file-partition rank with fewer
 * rows than a batch). */
int rfs_partition_layout(const struct rfs_config *c, const uint64_t *lengths,
			 struct rfs_layout *out);

/* Number of sequences the partition uses. */
uint64_t rfs_partition_sequences(const struct rfs_config *c);

/* Rows in batch (batch < batches_per_rank). */
uint64_t rfs_partition_batch_rows(const struct rfs_layout *l, uint64_t batch);

/* The sequence and (unwrapped) position of row j of rank's batch. */
void rfs_partition_locate(const struct rfs_config *c,
			  const struct rfs_layout *l, uint64_t rank,
			  uint64_t batch, uint64_t j, uint64_t *seq,
			  uint64_t *pos);

#endif
