/* SPDX-License-Identifier: MIT */
/* The memory budget: cache_mb split into its shares, in one place.
 * docs/design.md ("Memory budget") says what each share is for. */
#ifndef RFS_BUDGET_H
#define RFS_BUDGET_H

#include <stddef.h>
#include <stdint.h>

struct rfs_budget {
	size_t total; /* cache_mb in bytes */
	/* Decoded chunks and the mapped rows of contiguous sources (a
	 * mapping is reserved out of it, source.c): half. */
	size_t chunks;
	/* The most the planner's row ids may take: half of the rest. */
	size_t plan_limit;
	/* What the planner holds at most once limited (given back to
	 * rfs_budget_split() by the caller; at most plan_limit). */
	size_t plan;
	/* Generated files and their generations' scratch (the batch
	 * cache): total - chunks - plan. */
	size_t batches;
	/* Of batches, what prefetched batches may take: half. */
	size_t prefetch;
	/* Free file buffers kept for reuse (bigbuf.c), beside the batch
	 * cache's count: an eighth of total, at most RFS_BIGBUF_POOL_MAX. */
	size_t pool;
};

/* Splits cache_mb. plan is what the planner holds at most
 * (rfs_plan_memory_bound()), known only once it is limited to
 * out->plan_limit: call with plan 0 first for chunks, pool and
 * plan_limit, then again with the planner's bound. Pure.
 * @return 0, or -EINVAL (cache_mb too large for a size_t, or plan over
 * plan_limit). */
int rfs_budget_split(uint64_t cache_mb, size_t plan, struct rfs_budget *out);

/* What settles a cache_mb not given, once the mount's claims are known. */
struct rfs_budget_claims {
	uint64_t default_mb; /* rfs_memlimit_fit()'s, from the limit alone */
	uint64_t limit; /* bytes this process may use (UINT64_MAX: none known) */
	uint64_t claimed; /* the most claims held at once (rfs_memlimit_peak) */
	size_t plan_least; /* the planner's least (rfs_plan_least()) */
	size_t batch_cost; /* a batch and its scratch (rfs_batch_cost()) */
};

/* cache_mb not given: default_mb where the claims leave that much of the
 * limit beside the daemon's own RFS_MEMLIMIT_OVERHEAD_MB (the rule:
 * cache_mb + that + the claims <= the limit), else what they leave, as
 * long as that is at least *least_mb, the least this mount needs: its
 * split holds plan_least in plan_limit and batch_cost in the prefetch
 * room with the planner at its limit (a lowered default never turns
 * prefetch off). Pure.
 * @return 0 with *cache_mb set, or -ENOSPC (*cache_mb what the claims
 * leave, less than *least_mb). */
int rfs_budget_default(const struct rfs_budget_claims *c, uint64_t *cache_mb,
		       uint64_t *least_mb);

#endif
