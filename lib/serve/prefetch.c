/* SPDX-License-Identifier: MIT */
#include "serve/prefetch.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "os/quiet_thread.h"

struct rfs_prefetch {
	rfs_prefetch_fn fn;
	void *ctx;
	unsigned nthreads;
	pthread_t *threads;
	pthread_mutex_t lock;
	pthread_cond_t work;
	/* All below protected by lock. */
	struct rfs_cache_key *ring;
	size_t cap, head, count;
	struct rfs_cache_key *running; /* one slot per thread */
	unsigned char *busy;
	int stopping;
	uint64_t queued, done, dropped;
};

static int same(const struct rfs_cache_key *a, const struct rfs_cache_key *b)
{
	return memcmp(a, b, sizeof(*a)) == 0;
}

static void *worker(void *arg)
{
	struct rfs_prefetch *p = arg;
	pthread_mutex_lock(&p->lock);
	unsigned me = 0;
	while (me < p->nthreads &&
	       !pthread_equal(p->threads[me], pthread_self()))
		me++;
	for (;;) {
		while (!p->stopping && p->count == 0)
			pthread_cond_wait(&p->work, &p->lock);
		if (p->stopping)
			break;
		p->running[me] = p->ring[p->head];
		p->busy[me] = 1;
		p->head = (p->head + 1) % p->cap;
		p->count--;
		struct rfs_cache_key key = p->running[me];
		pthread_mutex_unlock(&p->lock);
		p->fn(p->ctx, &key);
		pthread_mutex_lock(&p->lock);
		p->busy[me] = 0;
		p->done++;
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int rfs_prefetch_create(unsigned threads, size_t queue_cap, rfs_prefetch_fn fn,
			void *ctx, struct rfs_prefetch **out)
{
	struct rfs_prefetch *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->fn = fn;
	p->ctx = ctx;
	p->cap = queue_cap ? queue_cap : 1;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->work, NULL);
	p->ring = calloc(p->cap, sizeof(*p->ring));
	p->threads = calloc(threads, sizeof(*p->threads));
	p->running = calloc(threads, sizeof(*p->running));
	p->busy = calloc(threads, 1);
	if (!p->ring || !p->threads || !p->running || !p->busy) {
		rfs_prefetch_destroy(p);
		return -ENOMEM;
	}
	/* Workers look up their slot under the lock, after all exist. */
	pthread_mutex_lock(&p->lock);
	int rc = 0;
	for (; p->nthreads < threads; p->nthreads++) {
		rc = rfs_quiet_thread_create(&p->threads[p->nthreads],
					     "rankfs-prefetch", worker, p);
		if (rc != 0)
			break;
	}
	pthread_mutex_unlock(&p->lock);
	if (rc != 0) {
		rfs_prefetch_destroy(p);
		return rc;
	}
	*out = p;
	return 0;
}

void rfs_prefetch_destroy(struct rfs_prefetch *p)
{
	if (!p)
		return;
	if (p->nthreads) {
		pthread_mutex_lock(&p->lock);
		p->stopping = 1;
		pthread_cond_broadcast(&p->work);
		pthread_mutex_unlock(&p->lock);
		for (unsigned i = 0; i < p->nthreads; i++)
			pthread_join(p->threads[i], NULL);
	}
	pthread_cond_destroy(&p->work);
	pthread_mutex_destroy(&p->lock);
	free(p->ring);
	free(p->threads);
	free(p->running);
	free(p->busy);
	free(p);
}

int rfs_prefetch_push(struct rfs_prefetch *p, const struct rfs_cache_key *key)
{
	int rc = 1;
	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < p->count && rc == 1; i++)
		if (same(&p->ring[(p->head + i) % p->cap], key))
			rc = 0;
	for (unsigned t = 0; t < p->nthreads && rc == 1; t++)
		if (p->busy[t] && same(&p->running[t], key))
			rc = 0;
	if (rc == 1 && p->count == p->cap)
		rc = -1;
	if (rc == 1) {
		p->ring[(p->head + p->count) % p->cap] = *key;
		p->count++;
		p->queued++;
		pthread_cond_signal(&p->work);
	} else if (rc == -1) {
		p->dropped++;
	}
	pthread_mutex_unlock(&p->lock);
	return rc;
}

void rfs_prefetch_counters(struct rfs_prefetch *p,
			   struct rfs_prefetch_counters *out)
{
	pthread_mutex_lock(&p->lock);
	*out = (struct rfs_prefetch_counters){ .queued = p->queued,
					       .done = p->done,
					       .dropped = p->dropped };
	pthread_mutex_unlock(&p->lock);
}
