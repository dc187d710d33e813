/* SPDX-License-Identifier: MIT */
/* Prefetch policy: which batches are generated ahead of each rank's
 * reader, and how deep, within the room the memory budget gives them.
 * The thread pool of prefetch.c generates them into the batch cache.
 * Thread-safe after create. */
#ifndef RFS_LOOKAHEAD_H
#define RFS_LOOKAHEAD_H

#include <stdint.h>

#include "serve/cache.h"
#include "serve/prefetch.h"

struct rfs_lookahead_params {
	uint64_t ranks; /* world_size */
	uint64_t batches_per_rank;
	uint64_t depth; /* batches ahead wanted for one reader; 0: off */
	uint64_t threads; /* generating them */
	uint64_t room; /* bytes all readers' queued batches may take */
	uint64_t batch_cost; /* bytes one queued batch takes (>= 1) */
};

struct rfs_lookahead;

/* Batches are generated into cache (rfs_cache_warm()), which is
 * borrowed and must outlive the lookahead. p is copied. Starts the pool
 * only where a batch fits the room: rfs_lookahead_depth_max() says.
 * @return 0 or a negative errno. */
int rfs_lookahead_create(const struct rfs_lookahead_params *p,
			 struct rfs_cache *cache, struct rfs_lookahead **out);

/* Stops the workers first (they use the cache). Accepts NULL and
 * half-built lookaheads. */
void rfs_lookahead_destroy(struct rfs_lookahead *l);

/* The depth for a lone reader: the depth wanted, cut to what the room
 * holds (0: prefetch is off). */
uint64_t rfs_lookahead_depth_max(const struct rfs_lookahead *l);

/* A batch or npz file of key was opened: queues the next batches of the
 * same rank and kind for a reader in order, none at a jump (see
 * lookahead.c). No-op while prefetch is off. */
void rfs_lookahead_opened(struct rfs_lookahead *l,
			  const struct rfs_cache_key *key);

/* The depth each reader gets now: the room shared by the ranks read
 * within the last 10 s. */
uint64_t rfs_lookahead_depth(struct rfs_lookahead *l);

/* The pool's counters (zeros while prefetch is off). */
void rfs_lookahead_counters(struct rfs_lookahead *l,
			    struct rfs_prefetch_counters *out);

#endif
