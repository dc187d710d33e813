/* SPDX-License-Identifier: MIT */
/* The memory budget: cache_mb settled once and split into its shares, in
 * one place. docs/design.md ("Memory budget") says what each share is
 * for. */
#ifndef RFS_BUDGET_H
#define RFS_BUDGET_H

#include <stddef.h>
#include <stdint.h>

#include "os/memlimit.h"

struct rfs_budget {
	size_t total; /* cache_mb in bytes */
	/* Decoded chunks, and what sources keep out of it (a mapping, zarr
	 * shard indexes: rfs_source_take_share()): half. */
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

/* cache_mb against the memory this process may use (*limit, read here),
 * before the mount claims anything: a given one checked, one not given
 * the default from the limit alone, the most it settles to
 * (rfs_memlimit_fit). Then set aside for the mount's claims
 * (rfs_memlimit_reserve): a given one whole; a default only for claims
 * the mount can do without, since it yields to the others
 * (rfs_budget_settle()), in the ledger claims. @return 0, or -EINVAL with
 * err set. */
int rfs_budget_fit(struct rfs_claims *claims, uint64_t *cache_mb, int given,
		   struct rfs_memlimit *limit, char *err, size_t errlen);

/* Settles cache_mb once, when the mount's claims are known (the most held
 * at once since rfs_budget_fit(): rfs_memlimit_peak()) and before any
 * share of it is handed out: a given one stays; a default yields to the
 * claims (rfs_budget_default()), said in the log. Then all of it is set
 * aside for later claims. plan_least and batch_cost as in struct
 * rfs_budget_claims. @return 0, or -ENOMEM with err naming the claims,
 * the limit and the cache_mb the mount needs. */
int rfs_budget_settle(struct rfs_claims *claims, uint64_t *cache_mb, int given,
		      const struct rfs_memlimit *limit, size_t plan_least,
		      size_t batch_cost, char *err, size_t errlen);

#endif
