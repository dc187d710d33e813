#include "budget.h"

#include <errno.h>

#include "bigbuf.h"

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
