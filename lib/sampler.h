/* The epoch sequence S_e: which global row stands at each position of an
 * epoch, before fetch windows and ranks. A pure function of
 * (config, rows, epoch); a plain value, cheap to build (O(1)). */
#ifndef RFS_SAMPLER_H
#define RFS_SAMPLER_H

#include <stdint.h>

#include "config.h"
#include "permute.h"

struct rfs_sampler {
	uint64_t strategy;
	uint64_t rows;
	uint64_t block_size;
	uint64_t last_block_rows; /* rows of the final, possibly short block */
	uint64_t short_slot; /* position of the short block in the epoch */
	struct rfs_permute perm; /* rows (shuffle) or blocks (block_shuffle) */
};

void rfs_sampler_init(struct rfs_sampler *s, const struct rfs_config *c,
		      uint64_t rows, uint64_t epoch);

/* Length of S_e. */
uint64_t rfs_sampler_length(const struct rfs_sampler *s);

/* @return S_e[pos], a global row id; pos < rfs_sampler_length(). */
uint64_t rfs_sampler_row(const struct rfs_sampler *s, uint64_t pos);

#endif
