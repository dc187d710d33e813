/*
 * Strategies as per-position functions (docs/sampling.md has the maths).
 *
 * block_shuffle permutes the ceil(N / block_size) blocks. When N is not a
 * multiple of block_size the last block is short, and it lands at a random
 * slot like any other block (so the rows dropped at the end of an epoch
 * differ between epochs). Positions after that slot are shifted by the
 * missing rows. The slot is found with the permutation's inverse, so a
 * position still maps to its row in O(1).
 */
#include "sampler.h"

void rfs_sampler_init(struct rfs_sampler *s, const struct rfs_config *c,
		      uint64_t rows, uint64_t epoch)
{
	*s = (struct rfs_sampler){ .strategy = c->strategy, .rows = rows };
	if (c->strategy == RFS_SHUFFLE) {
		rfs_permute_init(&s->perm, rows,
				 rfs_permute_key(c->seed, epoch,
						 RFS_PURPOSE_ROWS, 0));
	} else if (c->strategy == RFS_BLOCK_SHUFFLE) {
		uint64_t bs = c->block_size;
		uint64_t blocks = rows / bs + (rows % bs != 0);
		s->block_size = bs;
		s->last_block_rows = rows - (blocks - 1) * bs;
		rfs_permute_init(&s->perm, blocks,
				 rfs_permute_key(c->seed, epoch,
						 RFS_PURPOSE_BLOCKS, 0));
		s->short_slot = s->last_block_rows < bs ?
					rfs_permute_invert(&s->perm, blocks - 1) :
					blocks;
	}
}

uint64_t rfs_sampler_length(const struct rfs_sampler *s)
{
	return s->rows;
}

static uint64_t block_row(const struct rfs_sampler *s, uint64_t pos)
{
	uint64_t bs = s->block_size, slot, off;
	uint64_t short_start = s->short_slot * bs;

	if (pos < short_start) {
		slot = pos / bs;
		off = pos % bs;
	} else if (pos < short_start + s->last_block_rows) {
		slot = s->short_slot;
		off = pos - short_start;
	} else {
		uint64_t q = pos + (bs - s->last_block_rows);
		slot = q / bs;
		off = q % bs;
	}
	return rfs_permute_apply(&s->perm, slot) * bs + off;
}

uint64_t rfs_sampler_row(const struct rfs_sampler *s, uint64_t pos)
{
	switch (s->strategy) {
	case RFS_SHUFFLE:
		return rfs_permute_apply(&s->perm, pos);
	case RFS_BLOCK_SHUFFLE:
		return block_row(s, pos);
	default:
		return pos;
	}
}
