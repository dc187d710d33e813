/* SPDX-License-Identifier: MIT */
/*
 * Strategies as per-position functions (docs/sampling.md has the maths).
 *
 * shuffle and block_shuffle are blocked permutations of the rowset's
 * virtual rows (block 1 and block_size). weighted and class_balanced draw
 * position d independently: a keyed 53-bit uniform from (seed, epoch, d)
 * through the rowset's inverse CDF, so any draw costs O(log N) and needs
 * no state from the draws before it.
 */
#include "plan/sampler.h"

int rfs_sampler_draws(uint64_t strategy)
{
	return strategy == RFS_WEIGHTED || strategy == RFS_CLASS_BALANCED;
}

void rfs_sampler_init(struct rfs_sampler *s, const struct rfs_config *c,
		      const struct rfs_rowset *rows, uint64_t epoch,
		      uint64_t seq)
{
	*s = (struct rfs_sampler){ .strategy = c->strategy,
				   .length = rows->length,
				   .seed = c->seed,
				   .epoch = epoch,
				   .rows = rows };
	if (c->strategy == RFS_SHUFFLE)
		rfs_permute_blocked_init(
			&s->order, rows->length, 1,
			rfs_permute_key(c->seed, epoch, RFS_PURPOSE_ROWS, seq));
	else if (c->strategy == RFS_BLOCK_SHUFFLE)
		rfs_permute_blocked_init(&s->order, rows->length, c->block_size,
					 rfs_permute_key(c->seed, epoch,
							 RFS_PURPOSE_BLOCKS,
							 seq));
	else if (rfs_sampler_draws(c->strategy) && c->total_size)
		s->length = c->total_size;
}

void rfs_sampler_rows(const struct rfs_sampler *s, uint64_t first, size_t count,
		      uint64_t *out)
{
	if (s->strategy != RFS_SHUFFLE && s->strategy != RFS_BLOCK_SHUFFLE) {
		for (size_t k = 0; k < count; k++)
			out[k] = rfs_sampler_row(s, first + k);
		return;
	}
	rfs_permute_blocked_apply_range(&s->order, first, count, out);
	for (size_t k = 0; k < count; k++)
		out[k] = rfs_rowset_row(s->rows, out[k]);
}

uint64_t rfs_sampler_row(const struct rfs_sampler *s, uint64_t pos)
{
	uint64_t v;
	switch (s->strategy) {
	case RFS_SHUFFLE:
	case RFS_BLOCK_SHUFFLE:
		v = rfs_permute_blocked_apply(&s->order, pos);
		break;
	case RFS_WEIGHTED:
	case RFS_CLASS_BALANCED:
		v = rfs_rowset_draw(s->rows,
				    rfs_permute_key(s->seed, s->epoch,
						    RFS_PURPOSE_DRAWS, pos) >>
					    11);
		break;
	default:
		v = pos;
	}
	return rfs_rowset_row(s->rows, v);
}
