#include "stats.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

struct rank_counters {
	_Atomic uint64_t batches;
	_Atomic uint64_t bytes;
};

struct rfs_stats {
	uint64_t ranks;
	struct rank_counters per_rank[];
};

int rfs_stats_create(uint64_t ranks, struct rfs_stats **out)
{
	struct rfs_stats *s =
		calloc(1, sizeof(*s) + ranks * sizeof(s->per_rank[0]));
	if (!s)
		return -ENOMEM;
	s->ranks = ranks;
	*out = s;
	return 0;
}

void rfs_stats_destroy(struct rfs_stats *s)
{
	free(s);
}

void rfs_stats_batch_opened(struct rfs_stats *s, uint64_t rank)
{
	atomic_fetch_add_explicit(&s->per_rank[rank].batches, 1,
				  memory_order_relaxed);
}

void rfs_stats_bytes_served(struct rfs_stats *s, uint64_t rank, uint64_t bytes)
{
	atomic_fetch_add_explicit(&s->per_rank[rank].bytes, bytes,
				  memory_order_relaxed);
}

void rfs_stats_render_json(struct rfs_stats *s, struct rfs_buf *b)
{
	uint64_t batches = 0, bytes = 0;
	struct rfs_buf ranks = { 0 };
	for (uint64_t r = 0; r < s->ranks; r++) {
		uint64_t nb = atomic_load_explicit(&s->per_rank[r].batches,
						   memory_order_relaxed);
		uint64_t by = atomic_load_explicit(&s->per_rank[r].bytes,
						   memory_order_relaxed);
		batches += nb;
		bytes += by;
		rfs_buf_printf(&ranks,
			       "%s\n    {\"rank\": %llu, \"batches_served\": "
			       "%llu, \"bytes_served\": %llu}",
			       r ? "," : "", (unsigned long long)r,
			       (unsigned long long)nb, (unsigned long long)by);
	}
	rfs_buf_printf(b,
		       "  \"batches_served\": %llu,\n  \"bytes_served\": %llu,\n"
		       "  \"ranks\": [%s\n  ]",
		       (unsigned long long)batches, (unsigned long long)bytes,
		       ranks.failed || !ranks.data ? "" : ranks.data);
	if (ranks.failed)
		b->failed = 1;
	rfs_buf_free(&ranks);
}
