/* Arithmetic of global batches and rank slices (partition=batch).
 *
 * Positions here index T_e, the epoch sequence after each fetch window has
 * been reordered (plan.c). Global batch k is T_e[k*G, (k+1)*G) with
 * G = world_size * batch_size, and rank R's batch k is its R-th slice of
 * batch_size rows. G does not depend on how it is split, so any world size
 * with the same G sees the same global steps. */
#ifndef RFS_PARTITION_H
#define RFS_PARTITION_H

#include <stdint.h>

#include "config.h"

struct rfs_layout {
	uint64_t length; /* positions in the epoch sequence */
	uint64_t global_batch; /* G */
	uint64_t window; /* fetch_factor * G: rows read together */
	uint64_t batches_per_rank; /* equal on every rank */
};

/* @return 0, or -EINVAL when the epoch holds less than one global batch. */
int rfs_partition_layout(const struct rfs_config *c, uint64_t length,
			 struct rfs_layout *out);

/* @return the T_e position of row j of rank's batch. */
uint64_t rfs_partition_position(const struct rfs_config *c, uint64_t rank,
				uint64_t batch, uint64_t j);

#endif
