/* SPDX-License-Identifier: MIT */
/*
 * A reader in order at position pos (epoch x batches + batch) gets
 * pos + 1 .. pos + depth queued, continuing from what is queued already.
 * In order allows for the reordering of a loader's concurrent workers:
 * within REORDER_SLACK behind the furthest opened or past the queue. A
 * jump queues nothing (a reader in random order would have depth batches
 * made for nothing at every open); the next open in order starts afresh
 * from there. Positions count on across epochs. A push dropped because
 * the queue is full is not tried again: the workers are behind, and the
 * reader generates that batch itself when it gets there.
 *
 * The queued batches of the active readers (the ranks that read this
 * mount, not all of world_size on a multi-node job) take at most the
 * prefetch room together, counting what their generation needs beside
 * them, so that they are not evicted before they are read.
 */
#include "serve/lookahead.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "core/config.h"
#include "serve/kind.h"
#include "core/log.h"
#include "serve/stats.h"

/* Readers that opened a batch within this long share the prefetch room;
 * one idle longer (a one-off cat, a finished job) leaves it to others. */
#define READER_IDLE_NS (UINT64_C(10) * 1000000000u)
/* Positions a loader's concurrent workers open out of order by: at most
 * their number times the batches each keeps ahead. */
#define REORDER_SLACK 32

/* Where one rank's sequential reader of one kind is, in positions. */
struct reader {
	uint64_t queued_to; /* the furthest queued */
	uint64_t furthest; /* the furthest opened since the last jump */
	/* Bit d: furthest - d was opened (d < 64): concurrent loader
	 * workers open out of order, so a position behind furthest may
	 * not be opened yet. */
	uint64_t opened;
	uint64_t last_open_ns; /* 0: never opened */
};

/* Records pos as opened, pos at or past r->furthest - 63. */
static void mark_opened(struct reader *r, uint64_t pos)
{
	if (pos > r->furthest) {
		uint64_t shift = pos - r->furthest;
		r->opened = shift >= 64 ? 0 : r->opened << shift;
		r->furthest = pos;
	}
	if (r->furthest - pos < 64)
		r->opened |= UINT64_C(1) << (r->furthest - pos);
}

/* Whether the reader opened pos already, or went past it for good: more
 * than REORDER_SLACK behind the furthest it opened. */
static int passed(const struct reader *r, uint64_t pos)
{
	if (pos > r->furthest)
		return 0;
	uint64_t d = r->furthest - pos;
	return d > REORDER_SLACK || (r->opened >> d & 1);
}

struct rfs_lookahead {
	struct rfs_lookahead_params p;
	uint64_t depth_max; /* for one reader, within the room */
	struct rfs_cache *cache; /* borrowed */
	struct rfs_prefetch *pool; /* NULL: prefetch is off */
	pthread_mutex_t lock;
	struct reader *readers; /* ranks x RFS_KIND_COUNT, protected by lock */
	/* Protected by lock: readers within READER_IDLE_NS, counted then. */
	uint64_t active_readers, readers_counted_ns;
	atomic_int paused_logged;
};

static void prefetch_one(void *ctx, const struct rfs_cache_key *key)
{
	struct rfs_lookahead *l = ctx;
	uint64_t pos = key->epoch * l->p.batches_per_rank + key->batch;
	pthread_mutex_lock(&l->lock);
	/* Its reader got there first (the workers fell behind, or it
	 * jumped), and made it itself: made again now, it would be made for
	 * nobody, when the workers are short of time (one worker behind two
	 * readers of gzip chunks made 48 % more batches than were read;
	 * none now, and the epochs took 0.9 of the time). */
	int skip = passed(&l->readers[key->rank * RFS_KIND_COUNT + key->kind],
			  pos);
	pthread_mutex_unlock(&l->lock);
	/* A failure is the reader's to see, when it asks itself. */
	if (!skip)
		rfs_cache_warm(l->cache, key);
}

int rfs_lookahead_create(const struct rfs_lookahead_params *p,
			 struct rfs_cache *cache, struct rfs_lookahead **out)
{
	struct rfs_lookahead *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	pthread_mutex_init(&l->lock, NULL);
	l->p = *p;
	if (!l->p.batch_cost)
		l->p.batch_cost = 1;
	l->cache = cache;
	uint64_t fits = l->p.room / l->p.batch_cost;
	l->depth_max = p->depth < fits ? p->depth : fits;
	l->readers = calloc(p->ranks * RFS_KIND_COUNT, sizeof(*l->readers));
	if (!l->readers) {
		rfs_lookahead_destroy(l);
		return -ENOMEM;
	}
	int rc = 0;
	if (l->depth_max)
		rc = rfs_prefetch_create((unsigned)p->threads,
					 2 * p->ranks * l->depth_max + 16,
					 prefetch_one, l, &l->pool);
	if (rc != 0) {
		rfs_lookahead_destroy(l);
		return rc;
	}
	*out = l;
	return 0;
}

void rfs_lookahead_destroy(struct rfs_lookahead *l)
{
	if (!l)
		return;
	rfs_prefetch_destroy(l->pool);
	pthread_mutex_destroy(&l->lock);
	free(l->readers);
	free(l);
}

uint64_t rfs_lookahead_depth_max(const struct rfs_lookahead *l)
{
	return l->depth_max;
}

/* The depth each active reader gets. Called with lock held. */
static uint64_t depth_now(const struct rfs_lookahead *l)
{
	uint64_t readers = l->active_readers ? l->active_readers : 1;
	uint64_t fits = l->p.room / (readers * l->p.batch_cost);
	return fits < l->depth_max ? fits : l->depth_max;
}

/* Counts the readers that opened within READER_IDLE_NS of now. Called
 * with lock held. */
static void count_readers(struct rfs_lookahead *l, uint64_t now)
{
	uint64_t active = 0;
	for (uint64_t i = 0; i < l->p.ranks * RFS_KIND_COUNT; i++)
		active += l->readers[i].last_open_ns &&
			  now - l->readers[i].last_open_ns <= READER_IDLE_NS;
	l->active_readers = active;
	l->readers_counted_ns = now;
}

uint64_t rfs_lookahead_depth(struct rfs_lookahead *l)
{
	if (!l->pool)
		return 0;
	pthread_mutex_lock(&l->lock);
	uint64_t depth = depth_now(l);
	pthread_mutex_unlock(&l->lock);
	return depth;
}

void rfs_lookahead_opened(struct rfs_lookahead *l,
			  const struct rfs_cache_key *key)
{
	if (!l->pool)
		return;
	uint64_t nb = l->p.batches_per_rank;
	uint64_t pos = key->epoch * nb + key->batch;
	pthread_mutex_lock(&l->lock);
	/* Read under the lock, so no reader's last open is after it. */
	uint64_t now = rfs_stats_now_ns();
	struct reader *r = &l->readers[key->rank * RFS_KIND_COUNT + key->kind];
	int was_idle = !r->last_open_ns ||
		       now - r->last_open_ns > READER_IDLE_NS;
	if (!r->last_open_ns) {
		r->queued_to = r->furthest = pos;
		r->opened = 0;
	}
	r->last_open_ns = now;
	/* A reader starting or coming back changes the count at once;
	 * others leaving it are seen within a second. */
	if (was_idle || now - l->readers_counted_ns >= 1000000000u)
		count_readers(l, now);
	uint64_t depth = depth_now(l), from = pos + 1, to = pos + depth;
	if (!depth && atomic_exchange(&l->paused_logged, 1) == 0)
		rfs_log("prefetch paused: %llu readers (a rank's .npy and "
			".npz files are two), each batch %llu bytes with its "
			"generation's scratch, do not fit in the prefetch "
			"room of %llu bytes; raise cache_mb",
			(unsigned long long)l->active_readers,
			(unsigned long long)l->p.batch_cost,
			(unsigned long long)l->p.room);
	if (pos <= r->queued_to + 1 + REORDER_SLACK &&
	    pos + REORDER_SLACK >= r->furthest) {
		from = r->queued_to >= from ? r->queued_to + 1 : from;
		r->queued_to = to > r->queued_to ? to : r->queued_to;
	} else {
		to = pos;
		r->queued_to = r->furthest = pos;
		r->opened = 0;
	}
	mark_opened(r, pos);
	pthread_mutex_unlock(&l->lock);
	for (uint64_t p = from; p <= to && p / nb < RFS_EPOCHS; p++) {
		struct rfs_cache_key next = { .epoch = p / nb,
					      .rank = key->rank,
					      .batch = p % nb,
					      .kind = key->kind };
		rfs_prefetch_push(l->pool, &next);
	}
}

void rfs_lookahead_counters(struct rfs_lookahead *l,
			    struct rfs_prefetch_counters *out)
{
	*out = (struct rfs_prefetch_counters){ 0 };
	if (l->pool)
		rfs_prefetch_counters(l->pool, out);
}
