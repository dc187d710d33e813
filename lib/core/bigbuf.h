/* SPDX-License-Identifier: MIT */
/* Memory for generated files. Batch buffers are large and short-lived;
 * faulting their pages in one by one on first write costs as much as
 * filling them (a page fault per 4 KiB, expensive under virtualisation).
 * Large buffers are therefore mapped with every page populated in one
 * call, and reused or unmapped when freed (bigbuf.c). */
#ifndef RFS_BIGBUF_H
#define RFS_BIGBUF_H

#include <stddef.h>

/* The most the pool of free buffers holds. */
#define RFS_BIGBUF_POOL_MAX ((size_t)32 << 20)

/* A pool of free large buffers, bounded by RFS_BIGBUF_POOL_MAX until
 * rfs_bigbuf_limit(). @return 0, or -ENOMEM. */
struct rfs_bigbuf;
int rfs_bigbuf_create(struct rfs_bigbuf **out);
/* Returns the pooled buffers to the kernel. Accepts NULL. */
void rfs_bigbuf_destroy(struct rfs_bigbuf *b);

/* @return size bytes (uninitialised), from b's free buffers where it
 * has one of the size (b NULL: none), or NULL. */
void *rfs_bigbuf_alloc(struct rfs_bigbuf *b, size_t size);

/* Frees p, which rfs_bigbuf_alloc(size) returned: large buffers go to
 * the pool b (see rfs_bigbuf_limit(); NULL: none) for reuse.
 * Accepts NULL p. Thread-safe. */
void rfs_bigbuf_free(struct rfs_bigbuf *b, void *p, size_t size);

/* Bounds the pool (at most RFS_BIGBUF_POOL_MAX), freeing pooled buffers
 * over a lower bound. */
void rfs_bigbuf_limit(struct rfs_bigbuf *b, size_t bytes);

/* The memory rfs_bigbuf_alloc(size) takes: large sizes are rounded up to
 * whole 64 KiB steps, so buffers of nearly equal sizes share the pool. */
size_t rfs_bigbuf_footprint(size_t size);

/* Gives the heap's free pages back, at most every 100 ms. A cache's
 * fills' temporaries (a chunk's stored bytes, a codec's work space) are
 * counted in its capacity while they run, then freed; but malloc keeps
 * freed memory between blocks still in use, and a zarr source's fills
 * left 60 MiB of it in a daemon of cache_mb=32 (test_reliability.py's
 * test_memory_bound_under_load). Call it holding no lock. */
void rfs_bigbuf_trim(void);

#endif
