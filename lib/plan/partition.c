/* SPDX-License-Identifier: MIT */
#include "plan/partition.h"

#include <errno.h>

uint64_t rfs_partition_sequences(const struct rfs_config *c)
{
	return c->partition == RFS_PARTITION_FILE ? c->world_size : 1;
}

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
	return a / b + (a % b != 0);
}

int rfs_partition_layout(const struct rfs_config *c, const uint64_t *lengths,
			 struct rfs_layout *out)
{
	/* Options are bounded (config.c) so these products fit in 64 bits. */
	uint64_t w = c->world_size, b = c->batch_size, g = w * b;
	uint64_t seqs = rfs_partition_sequences(c);
	*out = (struct rfs_layout){ .sequences = seqs,
				    .global_batch = g,
				    .batch_size = b };

	if (c->partition == RFS_PARTITION_FILE) {
		uint64_t shortest = lengths[0], longest = lengths[0];
		for (uint64_t r = 1; r < seqs; r++) {
			shortest = lengths[r] < shortest ? lengths[r] :
							   shortest;
			longest = lengths[r] > longest ? lengths[r] : longest;
		}
		out->window = c->fetch_factor * b;
		out->per_rank = c->drop_last ? shortest / b * b : longest;
		if (shortest < b)
			return -EINVAL;
	} else {
		out->window = c->fetch_factor * g;
		out->per_rank = c->drop_last ? lengths[0] / g * b :
					       ceil_div(lengths[0], w);
		if (lengths[0] < g)
			return -EINVAL;
	}
	out->batches_per_rank = ceil_div(out->per_rank, b);
	out->last_batch = out->per_rank - (out->batches_per_rank - 1) * b;
	return 0;
}

uint64_t rfs_partition_batch_rows(const struct rfs_layout *l, uint64_t batch)
{
	return batch + 1 < l->batches_per_rank ? l->batch_size : l->last_batch;
}

void rfs_partition_locate(const struct rfs_config *c,
			  const struct rfs_layout *l, uint64_t rank,
			  uint64_t batch, uint64_t j, uint64_t *seq,
			  uint64_t *pos)
{
	uint64_t b = c->batch_size, w = c->world_size;
	uint64_t i = batch * b + j; /* the rank's own row number */
	*seq = 0;
	switch (c->partition) {
	case RFS_PARTITION_ROUND_ROBIN:
		*pos = i * w + rank;
		break;
	case RFS_PARTITION_CONTIGUOUS:
		*pos = rank * l->per_rank + i;
		break;
	case RFS_PARTITION_FILE:
		*seq = rank;
		*pos = i;
		break;
	default: /* batch: the global batch, then the rank's slice of it */
		*pos = batch * l->global_batch +
		       rank * rfs_partition_batch_rows(l, batch) + j;
	}
}
