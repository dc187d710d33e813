/* SPDX-License-Identifier: MIT */
/* Background generation of files a reader is about to ask for.
 *
 * A fixed pool of threads takes keys from a bounded FIFO and calls fn for
 * each (lookahead.c's generates the file into the batch cache). A key
 * already queued or being worked on is not queued again; when the queue is
 * full new keys are dropped, never waited for: prefetch only ever saves
 * time. */
#ifndef RFS_PREFETCH_H
#define RFS_PREFETCH_H

#include <stddef.h>
#include <stdint.h>

#include "serve/cache.h"

typedef void (*rfs_prefetch_fn)(void *ctx, const struct rfs_cache_key *key);

struct rfs_prefetch;

/* Starts threads workers. @return 0 or a negative errno. */
int rfs_prefetch_create(unsigned threads, size_t queue_cap, rfs_prefetch_fn fn,
			void *ctx, struct rfs_prefetch **out);

/* Drops what is queued, waits for the keys being worked on, joins the
 * threads. Accepts NULL. */
void rfs_prefetch_destroy(struct rfs_prefetch *p);

/* Queues key. Thread-safe, never blocks on the work. @return 1 queued,
 * 0 already queued or running, -1 dropped (queue full). */
int rfs_prefetch_push(struct rfs_prefetch *p, const struct rfs_cache_key *key);

struct rfs_prefetch_counters {
	uint64_t queued, done, dropped;
};

void rfs_prefetch_counters(struct rfs_prefetch *p,
			   struct rfs_prefetch_counters *out);

#endif
