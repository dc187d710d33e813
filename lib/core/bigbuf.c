/* SPDX-License-Identifier: MIT */
/*
 * Large buffers are mapped with MAP_POPULATE (one call instead of a page
 * fault per 4 KiB) and, when freed, kept in a small pool for the next
 * buffer of the same size: batch files of a mount mostly share one size,
 * so a steady reader reuses a handful of mappings instead of populating,
 * zeroing and unmapping a megabyte per batch. The pool is bounded (32 MiB,
 * or less: rfs_bigbuf_limit()), so memory stays within cache_mb plus
 * that much.
 */
#include "core/bigbuf.h"

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

/* Below this, malloc's own free lists are cheaper than a mapping. */
#define MAP_MIN (256 * 1024)
/* Mappings come in whole steps: a mount's .npz files differ in size by a
 * few KiB, and would never find a pooled buffer of their exact size (each
 * then cost a fresh mapping, populated page by page, and an munmap). */
#define MAP_STEP (64 * 1024)
#define POOL_SLOTS 16

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	void *p;
	size_t size;
} pool[POOL_SLOTS]; /* protected by pool_lock */
static size_t pool_bytes; /* protected by pool_lock */
static size_t pool_limit = RFS_BIGBUF_POOL_MAX; /* protected by pool_lock */

void rfs_bigbuf_limit(size_t bytes)
{
	pthread_mutex_lock(&pool_lock);
	pool_limit = bytes < RFS_BIGBUF_POOL_MAX ? bytes : RFS_BIGBUF_POOL_MAX;
	/* A lower bound (cache_mb settled smaller) holds at once. */
	for (int i = 0; i < POOL_SLOTS && pool_bytes > pool_limit; i++) {
		if (pool[i].p) {
			munmap(pool[i].p, pool[i].size);
			pool_bytes -= pool[i].size;
			pool[i].p = NULL;
		}
	}
	pthread_mutex_unlock(&pool_lock);
}

/* Whether size is mapped (and pooled when freed) rather than malloc'd. */
static int mapped(size_t size)
{
	return size >= MAP_MIN;
}

size_t rfs_bigbuf_footprint(size_t size)
{
	if (!mapped(size))
		return size;
	return (size + MAP_STEP - 1) / MAP_STEP * MAP_STEP;
}

/* A pooled buffer of size bytes (a footprint), or NULL where the pool has
 * none. */
static void *pooled(size_t size)
{
	void *p = NULL;
	pthread_mutex_lock(&pool_lock);
	for (int i = 0; i < POOL_SLOTS && !p; i++) {
		if (pool[i].p && pool[i].size == size) {
			p = pool[i].p;
			pool[i].p = NULL;
			pool_bytes -= size;
		}
	}
	pthread_mutex_unlock(&pool_lock);
	return p;
}

void *rfs_bigbuf_alloc(size_t size)
{
	if (!mapped(size))
		return malloc(size ? size : 1);
	size = rfs_bigbuf_footprint(size);
	void *p = pooled(size);
	if (p)
		return p;
	p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void rfs_bigbuf_free(void *p, size_t size)
{
	if (!p)
		return;
	if (!mapped(size)) {
		free(p);
		return;
	}
	size = rfs_bigbuf_footprint(size);
	pthread_mutex_lock(&pool_lock);
	for (int i = 0; i < POOL_SLOTS && pool_bytes + size <= pool_limit;
	     i++) {
		if (!pool[i].p) {
			pool[i].p = p;
			pool[i].size = size;
			pool_bytes += size;
			pthread_mutex_unlock(&pool_lock);
			return;
		}
	}
	pthread_mutex_unlock(&pool_lock);
	munmap(p, size);
}

void rfs_bigbuf_drain(void)
{
	pthread_mutex_lock(&pool_lock);
	for (int i = 0; i < POOL_SLOTS; i++) {
		if (pool[i].p)
			munmap(pool[i].p, pool[i].size);
		pool[i].p = NULL;
	}
	pool_bytes = 0;
	pthread_mutex_unlock(&pool_lock);
}

void rfs_bigbuf_trim(void)
{
	static _Atomic long long last_ms;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	long long now = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	long long was = atomic_load(&last_ms);
	if (now - was >= 100 &&
	    atomic_compare_exchange_strong(&last_ms, &was, now))
		malloc_trim(0);
}
