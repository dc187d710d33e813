/* SPDX-License-Identifier: MIT */
/* Live counters behind stats.json: per rank, what its reader did and how
 * long it waited; for the mount, how long generating a batch takes.
 * Thread-safe; the hot counters are relaxed atomics. */
#ifndef RFS_STATS_H
#define RFS_STATS_H

#include <stdint.h>

#include "core/buf.h"
#include "serve/cache.h"

struct rfs_stats;

int rfs_stats_create(uint64_t ranks, struct rfs_stats **out);
void rfs_stats_destroy(struct rfs_stats *s); /* accepts NULL */

/* A batch file (.npy or .npz) of rank was opened: batch of epoch, rows
 * of it, at now_ns, a time of rfs_stats_now_ns()'s clock (the latest yet
 * for rank: opens are counted in time order). */
void rfs_stats_batch_opened(struct rfs_stats *s, uint64_t rank, uint64_t epoch,
			    uint64_t batch, uint64_t rows, uint64_t now_ns);

/* bytes of a file of rank were returned by read(). */
void rfs_stats_bytes_served(struct rfs_stats *s, uint64_t rank, uint64_t bytes);

/* The first read of a batch file of rank found it so in the batch cache
 * (ready: generated before, by prefetch or a read; waited: being
 * generated; filled: generated for this read), after waiting wait_ns. */
void rfs_stats_first_read(struct rfs_stats *s, uint64_t rank,
			  enum rfs_cache_found found, uint64_t wait_ns);

/* The monotonic clock, in nanoseconds, that the durations given to these
 * counters (and prefetch's reader idle times) are measured on. */
uint64_t rfs_stats_now_ns(void);

/* Generating a file of rank failed: path, as under the mount, and why
 * (copied): stats.json shows the last, the reason for a reader's EIO. */
void rfs_stats_failed(struct rfs_stats *s, uint64_t rank, const char *path,
		      const char *why);

/* A batch was generated in ns nanoseconds (plan, read, encode). */
void rfs_stats_generated(struct rfs_stats *s, uint64_t ns);

/* Appends the JSON members (no braces) for the counters. */
void rfs_stats_render_json(struct rfs_stats *s, struct rfs_buf *b);

#endif
