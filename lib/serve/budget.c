/* SPDX-License-Identifier: MIT */
#include "serve/budget.h"

#include <errno.h>
#include <stdio.h>

#include "core/bigbuf.h"
#include "core/log.h"

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
	return rfs_budget_split(cache_mb, 0, &b) == 0 &&
	       b.plan_limit >= c->plan_least &&
	       rfs_budget_split(cache_mb, b.plan_limit, &b) == 0 &&
	       b.prefetch >= c->batch_cost;
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

int rfs_budget_fit(struct rfs_claims *claims, uint64_t *cache_mb, int given,
		   struct rfs_memlimit *limit, char *err, size_t errlen)
{
	rfs_memlimit_read("", limit);
	int rc = rfs_memlimit_fit(cache_mb, limit, err, errlen);
	if (rc == 0)
		rfs_memlimit_reserve(claims, *cache_mb, given ? *cache_mb : 0);
	return rc;
}

/* What the mount's claims held at their most, for messages. */
static void describe_claims(const struct rfs_memlimit_peak *p, char *out,
			    size_t len)
{
	int n = snprintf(out, len, "%llu MiB at most at once",
			 (unsigned long long)((p->held + (1 << 20) - 1) >> 20));
	if (p->what[0] && n >= 0 && (size_t)n < len)
		snprintf(out + n, len - (size_t)n,
			 " (the biggest: %s, %llu MiB)", p->what,
			 (unsigned long long)((p->biggest + (1 << 20) - 1) >>
					      20));
}

int rfs_budget_settle(struct rfs_claims *claims, uint64_t *cache_mb, int given,
		      const struct rfs_memlimit *limit, size_t plan_least,
		      size_t batch_cost, char *err, size_t errlen)
{
	uint64_t want = *cache_mb, least;
	if (!given) {
		struct rfs_memlimit_peak peak;
		rfs_memlimit_peak(claims, &peak);
		struct rfs_budget_claims known = {
			.default_mb = want,
			.limit = limit->bytes,
			.claimed = peak.held,
			.plan_least = plan_least,
			.batch_cost = batch_cost,
		};
		int rc = rfs_budget_default(&known, cache_mb, &least);
		char held[4600];
		describe_claims(&peak, held, sizeof(held));
		if (rc != 0) {
			snprintf(
				err, errlen,
				"the mount's claims, %s, leave %llu MiB of the "
				"%llu MiB of %s beside the daemon's own %d "
				"MiB, less than the cache_mb=%llu it needs for "
				"its fetch windows and a prefetched batch; "
				"raise the limit, or lower batch_size or "
				"fetch_factor",
				held, (unsigned long long)*cache_mb,
				(unsigned long long)(limit->bytes >> 20),
				limit->where, RFS_MEMLIMIT_OVERHEAD_MB,
				(unsigned long long)least);
			return -ENOMEM;
		}
		if (*cache_mb < want)
			rfs_log("cache_mb=%llu, not %llu: the mount's claims, "
				"%s, leave that of the %llu MiB of %s beside "
				"the daemon's own %d MiB; give cache_mb to "
				"choose",
				(unsigned long long)*cache_mb,
				(unsigned long long)want, held,
				(unsigned long long)(limit->bytes >> 20),
				limit->where, RFS_MEMLIMIT_OVERHEAD_MB);
		else if (*cache_mb < RFS_MEMLIMIT_DEFAULT_MB)
			rfs_log("cache_mb=%llu, not %d: half of what %s leaves "
				"beside the daemon's own %d MiB (the readers "
				"may share it); give cache_mb to choose",
				(unsigned long long)*cache_mb,
				RFS_MEMLIMIT_DEFAULT_MB, limit->where,
				RFS_MEMLIMIT_OVERHEAD_MB);
	}
	rfs_memlimit_reserve(claims, *cache_mb, *cache_mb);
	return 0;
}
