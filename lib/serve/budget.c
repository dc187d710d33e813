/* SPDX-License-Identifier: MIT */
#include "serve/budget.h"

#include <errno.h>

#include "core/bigbuf.h"
#include "os/memlimit.h"

int rfs_budget_split(uint64_t cache_mb, size_t plan, struct rfs_budget *out)
{
	if (cache_mb > SIZE_MAX >> 20)
		return -EINVAL;
	struct rfs_budget b = { .total = (size_t)cache_mb << 20 };
	b.chunks = b.total / 2;
	b.plan_limit = (b.total - b.chunks) / 2;
	if (plan > b.plan_limit)
		return -EINVAL;
	b.plan = plan;
	b.batches = b.total - b.chunks - plan;
	b.prefetch = b.batches / 2;
	b.pool = b.total / 8 < RFS_BIGBUF_POOL_MAX ? b.total / 8 :
						     RFS_BIGBUF_POOL_MAX;
	*out = b;
	return 0;
}

/* Whether cache_mb's split holds the planner's least and a batch in the
 * prefetch room, the planner taking all its limit. */
static int holds(uint64_t cache_mb, const struct rfs_budget_claims *c)
{
	struct rfs_budget b;
	if (rfs_budget_split(cache_mb, 0, &b) != 0)
		return 0;
	size_t prefetch = (b.total - b.chunks - b.plan_limit) / 2;
	return b.plan_limit >= c->plan_least && prefetch >= c->batch_cost;
}

int rfs_budget_default(const struct rfs_budget_claims *c, uint64_t *cache_mb,
		       uint64_t *least_mb)
{
	/* The least that holds: the shares grow with cache_mb. */
	uint64_t lo = 1, hi = SIZE_MAX >> 20;
	if (!holds(hi, c))
		lo = hi = UINT64_MAX;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (holds(mid, c))
			hi = mid;
		else
			lo = mid + 1;
	}
	*least_mb = lo;
	*cache_mb = c->default_mb;
	if (c->limit == UINT64_MAX)
		return 0;
	uint64_t mb = c->limit >> 20;
	uint64_t claimed_mb = (c->claimed >> 20) + !!(c->claimed & 0xfffff);
	uint64_t used = RFS_MEMLIMIT_OVERHEAD_MB + claimed_mb;
	uint64_t left = mb > used ? mb - used : 0;
	if (left >= c->default_mb)
		return 0;
	*cache_mb = left;
	return left >= *least_mb ? 0 : -ENOSPC;
}
