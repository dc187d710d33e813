/* SPDX-License-Identifier: MIT */
/* The epoch sequence S_e: which row stands at each position of an epoch,
 * before fetch windows and ranks. A pure function of (config, rowset,
 * epoch, sequence number); a plain value, cheap to build (O(1)). */
#ifndef RFS_SAMPLER_H
#define RFS_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "plan/permute.h"
#include "plan/rowset.h"

struct rfs_sampler {
	uint64_t strategy;
	/* Positions in S_e: the rowset's rows, or total_size draws for
	 * weighted strategies. */
	uint64_t length;
	uint64_t seed, epoch; /* keys of weighted draws */
	const struct rfs_rowset *rows; /* borrowed */
	struct rfs_blocked order; /* shuffle (block 1) and block_shuffle */
};

/* seq tells apart the independent sequences of partition=file (the rank);
 * 0 otherwise. rows must outlive the sampler. */
void rfs_sampler_init(struct rfs_sampler *s, const struct rfs_config *c,
		      const struct rfs_rowset *rows, uint64_t epoch,
		      uint64_t seq);

/* @return S_e[pos], a global row id; pos < s->length. */
uint64_t rfs_sampler_row(const struct rfs_sampler *s, uint64_t pos);

/* out[k] = rfs_sampler_row(s, first + k) for k < count: the same rows,
 * the permutation's rounds run for many positions at once. */
void rfs_sampler_rows(const struct rfs_sampler *s, uint64_t first, size_t count,
		      uint64_t *out);

/* 1 for strategies that draw with replacement (weighted, class_balanced). */
int rfs_sampler_draws(uint64_t strategy);

#endif
