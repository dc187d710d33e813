#include "partition.h"

#include <errno.h>

int rfs_partition_layout(const struct rfs_config *c, uint64_t length,
			 struct rfs_layout *out)
{
	/* Options are bounded (config.c) so these products fit in 64 bits. */
	uint64_t g = c->world_size * c->batch_size;
	*out = (struct rfs_layout){
		.length = length,
		.global_batch = g,
		.window = c->fetch_factor * g,
		.batches_per_rank = length / g, /* drop_last=1 */
	};
	return out->batches_per_rank ? 0 : -EINVAL;
}

uint64_t rfs_partition_position(const struct rfs_config *c, uint64_t rank,
				uint64_t batch, uint64_t j)
{
	uint64_t g = c->world_size * c->batch_size;
	return batch * g + rank * c->batch_size + j;
}
