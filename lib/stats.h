/* Live counters behind stats.json. Lock-free: relaxed atomics per rank. */
#ifndef RFS_STATS_H
#define RFS_STATS_H

#include <stdint.h>

#include "buf.h"

struct rfs_stats;

int rfs_stats_create(uint64_t ranks, struct rfs_stats **out);
void rfs_stats_destroy(struct rfs_stats *s); /* accepts NULL */

/* A batch file of rank was opened. */
void rfs_stats_batch_opened(struct rfs_stats *s, uint64_t rank);
/* bytes of a batch or index file of rank were returned by read(). */
void rfs_stats_bytes_served(struct rfs_stats *s, uint64_t rank, uint64_t bytes);

/* Appends the JSON members (no braces) for the counters. */
void rfs_stats_render_json(struct rfs_stats *s, struct rfs_buf *b);

#endif
