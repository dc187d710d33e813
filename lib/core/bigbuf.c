/* SPDX-License-Identifier: MIT */
/*
 * Large buffers are mapped with MAP_POPULATE (one call instead of a page
 * fault per 4 KiB) and, when freed, kept in a small pool for the next
 * buffer of the same size: batch files of a mount mostly share one size,
 * so a steady reader reuses a handful of mappings instead of populating,
 * zeroing and unmapping a megabyte per batch. The pool is the mount's
 * (the view's) and bounded (32 MiB, or less: rfs_bigbuf_limit()), so
 * memory stays within cache_mb plus that much.
 */
#include "core/bigbuf.h"

#include <malloc.h>
#include <errno.h>
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

struct rfs_bigbuf {
	pthread_mutex_t lock;
	struct {
		void *p;
		size_t size;
	} slot[POOL_SLOTS]; /* protected by lock */
	size_t bytes; /* pooled; protected by lock */
	size_t limit; /* protected by lock */
};

int rfs_bigbuf_create(struct rfs_bigbuf **out)
{
	struct rfs_bigbuf *b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	pthread_mutex_init(&b->lock, NULL);
	b->limit = RFS_BIGBUF_POOL_MAX;
	*out = b;
	return 0;
}

void rfs_bigbuf_destroy(struct rfs_bigbuf *b)
{
	if (!b)
		return;
	for (int i = 0; i < POOL_SLOTS; i++)
		if (b->slot[i].p)
			munmap(b->slot[i].p, b->slot[i].size);
	pthread_mutex_destroy(&b->lock);
	free(b);
}

void rfs_bigbuf_limit(struct rfs_bigbuf *b, size_t bytes)
{
	pthread_mutex_lock(&b->lock);
	b->limit = bytes < RFS_BIGBUF_POOL_MAX ? bytes : RFS_BIGBUF_POOL_MAX;
	/* A lower bound (cache_mb settled smaller) holds at once. */
	for (int i = 0; i < POOL_SLOTS && b->bytes > b->limit; i++) {
		if (b->slot[i].p) {
			munmap(b->slot[i].p, b->slot[i].size);
			b->bytes -= b->slot[i].size;
			b->slot[i].p = NULL;
		}
	}
	pthread_mutex_unlock(&b->lock);
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
static void *pooled(struct rfs_bigbuf *b, size_t size)
{
	void *p = NULL;
	if (!b)
		return NULL;
	pthread_mutex_lock(&b->lock);
	for (int i = 0; i < POOL_SLOTS && !p; i++) {
		if (b->slot[i].p && b->slot[i].size == size) {
			p = b->slot[i].p;
			b->slot[i].p = NULL;
			b->bytes -= size;
		}
	}
	pthread_mutex_unlock(&b->lock);
	return p;
}

void *rfs_bigbuf_alloc(struct rfs_bigbuf *b, size_t size)
{
	if (!mapped(size))
		return malloc(size ? size : 1);
	size = rfs_bigbuf_footprint(size);
	void *p = pooled(b, size);
	if (p)
		return p;
	p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void rfs_bigbuf_free(struct rfs_bigbuf *b, void *p, size_t size)
{
	if (!p)
		return;
	if (!mapped(size)) {
		free(p);
		return;
	}
	size = rfs_bigbuf_footprint(size);
	int kept = 0;
	if (b) {
		pthread_mutex_lock(&b->lock);
		for (int i = 0;
		     i < POOL_SLOTS && !kept && b->bytes + size <= b->limit;
		     i++) {
			if (!b->slot[i].p) {
				b->slot[i].p = p;
				b->slot[i].size = size;
				b->bytes += size;
				kept = 1;
			}
		}
		pthread_mutex_unlock(&b->lock);
	}
	if (!kept)
		munmap(p, size);
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
