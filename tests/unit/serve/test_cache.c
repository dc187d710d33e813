/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/serve/cache.c: shared generation, LRU, references. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/bigbuf.h"
#include "serve/cache.h"

/* Fills key k with `size` bytes of (epoch + batch) and counts calls. */
struct filler {
	atomic_int calls;
	size_t size;
	int fail_next; /* errno to return once (buffer taken), then succeed */
	int sleep_ms;
	struct rfs_cache_key last;
	/* Buffers taken and not yet given up by their getters, the most
	 * seen at once, and how many to wait for (at most 200 ms) before
	 * a fill returns, so that fills overlap. */
	atomic_int live, most_live;
	int overlap;
	size_t big_size; /* of keys with batch >= BIG, when set */
	size_t scratch; /* temporaries each fill declares */
};

#define BIG 1000

static void wait_for_overlap(struct filler *f)
{
	int now = atomic_fetch_add(&f->live, 1) + 1;
	int most = atomic_load(&f->most_live);
	while (now > most &&
	       !atomic_compare_exchange_weak(&f->most_live, &most, now))
		;
	for (int i = 0; i < 200 && atomic_load(&f->live) < f->overlap; i++) {
		struct timespec ts = { 0, 1000000L };
		nanosleep(&ts, NULL);
	}
}

static int fill(void *ctx, const struct rfs_cache_key *key,
		struct rfs_cache_fill *fl)
{
	struct filler *f = ctx;
	static pthread_mutex_t last_lock = PTHREAD_MUTEX_INITIALIZER;
	atomic_fetch_add(&f->calls, 1);
	pthread_mutex_lock(&last_lock);
	f->last = *key; /* read only by single-threaded tests */
	pthread_mutex_unlock(&last_lock);
	if (f->sleep_ms) {
		struct timespec ts = { 0, (long)f->sleep_ms * 1000000L };
		nanosleep(&ts, NULL);
	}
	size_t size = f->big_size && key->batch >= BIG ? f->big_size : f->size;
	unsigned char *p = rfs_cache_fill_buffer(fl, size, f->scratch);
	if (!p)
		return -ENOMEM;
	if (rfs_cache_fill_buffer(fl, size, 0)) /* once only */
		return -EPROTO;
	if (f->fail_next) {
		int rc = f->fail_next;
		f->fail_next = 0;
		return -rc;
	}
	uint64_t sum = key->epoch + key->batch + key->rank + key->kind;
	memset(p, (int)(sum & 0xff), size);
	if (f->overlap)
		wait_for_overlap(f);
	return 0;
}

static struct rfs_cache_key key_of(uint64_t batch)
{
	return (struct rfs_cache_key){
		.epoch = 1, .rank = 0, .batch = batch, .kind = 0
	};
}

static struct rfs_cache_counters counters(struct rfs_cache *c)
{
	struct rfs_cache_counters k;
	memset(&k, 0xff, sizeof(k));
	rfs_cache_counters(c, &k);
	return k;
}

/* Gets key, checks its bytes, puts it back. @return fill calls since. */
static int get_put(struct rfs_cache *c, struct filler *f, uint64_t batch)
{
	int before = atomic_load(&f->calls);
	struct rfs_cache_key k = key_of(batch);
	struct rfs_cache_entry *e = NULL;
	assert_int_equal(rfs_cache_get(c, &k, &e, NULL), 0);
	assert_non_null(e);
	assert_int_equal(rfs_cache_entry_size(e), f->size);
	const unsigned char *d = rfs_cache_entry_data(e);
	assert_int_equal(d[0], (1 + batch) & 0xff);
	assert_int_equal(d[f->size - 1], (1 + batch) & 0xff);
	rfs_cache_put(c, e);
	return atomic_load(&f->calls) - before;
}

static void retire(struct rfs_cache *c, uint64_t batch)
{
	struct rfs_cache_key k = key_of(batch);
	rfs_cache_retire(c, &k);
}

static void warm(struct rfs_cache *c, uint64_t batch)
{
	struct rfs_cache_key k = key_of(batch);
	rfs_cache_warm(c, &k);
}

static void test_get_put_and_counters(void **state)
{
	(void)state;
	struct filler f = { .size = 100 };
	struct rfs_cache *c;
	assert_int_equal(rfs_cache_create(1 << 20, fill, &f, NULL, &c), 0);
	struct rfs_cache_counters k = counters(c);
	assert_true(k.hits == 0 && k.misses == 0 && k.bytes == 0 &&
		    k.entries == 0);

	struct rfs_cache_key key = {
		.epoch = 3, .rank = 2, .batch = 9, .kind = 1
	};
	struct rfs_cache_entry *e;
	assert_int_equal(rfs_cache_get(c, &key, &e, NULL), 0);
	assert_int_equal(atomic_load(&f.calls), 1);
	assert_memory_equal(&f.last, &key, sizeof(key));
	const unsigned char *d = rfs_cache_entry_data(e);
	assert_int_equal(d[50], 3 + 2 + 9 + 1);
	k = counters(c);
	assert_true(k.misses == 1 && k.hits == 0 && k.bytes == 100 &&
		    k.entries == 1);
	rfs_cache_put(c, e);
	rfs_cache_put(c, NULL); /* accepted */

	/* Same key again: one fill in all. */
	assert_int_equal(rfs_cache_get(c, &key, &e, NULL), 0);
	assert_int_equal(atomic_load(&f.calls), 1);
	assert_int_equal(((const unsigned char *)rfs_cache_entry_data(e))[0],
			 15);
	k = counters(c);
	assert_true(k.misses == 1 && k.hits == 1 && k.bytes == 100 &&
		    k.entries == 1);
	rfs_cache_put(c, e);

	/* Keys differing in any one field are different entries. */
	struct rfs_cache_key other[4] = { key, key, key, key };
	other[0].epoch++;
	other[1].rank++;
	other[2].batch++;
	other[3].kind--;
	for (int i = 0; i < 4; i++) {
		assert_int_equal(rfs_cache_get(c, &other[i], &e, NULL), 0);
		assert_int_equal(atomic_load(&f.calls), 2 + i);
		rfs_cache_put(c, e);
	}
	k = counters(c);
	assert_true(k.misses == 5 && k.hits == 1 && k.bytes == 500 &&
		    k.entries == 5 && k.prefetched == 0);

	/* A warm fills ahead of the gets: prefetched, neither a hit nor a
	 * miss, and the get that finds it is a hit. */
	struct rfs_cache_key ahead = key;
	ahead.batch += 100;
	rfs_cache_warm(c, &ahead);
	rfs_cache_warm(c, &ahead); /* there: nothing */
	rfs_cache_warm(c, &key);
	k = counters(c);
	assert_true(k.misses == 5 && k.hits == 1 && k.prefetched == 1 &&
		    k.entries == 6);
	assert_int_equal(rfs_cache_get(c, &ahead, &e, NULL), 0);
	rfs_cache_put(c, e);
	k = counters(c);
	assert_true(k.misses == 5 && k.hits == 2 && k.prefetched == 1);
	assert_int_equal(atomic_load(&f.calls), 6);
	rfs_cache_destroy(c);
	rfs_cache_destroy(NULL);
}

static void test_same_key_held_twice(void **state)
{
	(void)state;
	struct filler f = { .size = 64 };
	struct rfs_cache *c;
	assert_int_equal(rfs_cache_create(1 << 20, fill, &f, NULL, &c), 0);
	struct rfs_cache_key k = key_of(7);
	struct rfs_cache_entry *a, *b;
	assert_int_equal(rfs_cache_get(c, &k, &a, NULL), 0);
	assert_int_equal(rfs_cache_get(c, &k, &b, NULL), 0);
	assert_true(a == b);
	assert_int_equal(atomic_load(&f.calls), 1);
	rfs_cache_put(c, a);
	/* Still referenced once: data valid. */
	assert_int_equal(((const unsigned char *)rfs_cache_entry_data(b))[63],
			 8);
	rfs_cache_put(c, b);
	rfs_cache_destroy(c);
}

static void test_lru_eviction(void **state)
{
	(void)state;
	/* Room for three 100-byte entries. */
	struct filler f = { .size = 100 };
	struct rfs_cache *c;
	assert_int_equal(rfs_cache_create(300, fill, &f, NULL, &c), 0);
	assert_int_equal(get_put(c, &f, 1), 1);
	assert_int_equal(get_put(c, &f, 2), 1);
	assert_int_equal(get_put(c, &f, 3), 1);
	assert_true(counters(c).bytes == 300);
	/* Touch 1: now 2 is the least recently used. */
	assert_int_equal(get_put(c, &f, 1), 0);
	assert_int_equal(get_put(c, &f, 4), 1); /* evicts 2 */
	struct rfs_cache_counters k = counters(c);
	assert_true(k.entries == 3 && k.bytes == 300);
	assert_int_equal(get_put(c, &f, 1), 0);
	assert_int_equal(get_put(c, &f, 3), 0);
	assert_int_equal(get_put(c, &f, 4), 0);
	/* Order now (recent first): 4 3 1. 2 comes back, evicting 1. */
	assert_int_equal(get_put(c, &f, 2), 1);
	assert_int_equal(get_put(c, &f, 3), 0);
	assert_int_equal(get_put(c, &f, 4), 0);
	assert_int_equal(get_put(c, &f, 2), 0);
	assert_int_equal(get_put(c, &f, 1), 1); /* was evicted */
	k = counters(c);
	assert_true(k.entries == 3 && k.bytes == 300);
	rfs_cache_destroy(c);
}

/* Closed files leave first: oldest retired first, within an eighth of
 * the capacity; a get makes a retired entry ordinary again; one retired
 * while held waits for its put. */
static void test_retired_entries_leave_first(void **state)
{
	(void)state;
	struct filler f = { .size = 100 };
	struct rfs_cache *c;
	/* 1000 bytes: ten entries; retired ones keep at most 125. */
	assert_int_equal(rfs_cache_create(1000, fill, &f, NULL, &c), 0);
	for (uint64_t b = 1; b <= 10; b++)
		assert_int_equal(get_put(c, &f, b), 1);
	retire(c, 9);
	assert_true(counters(c).bytes == 1000); /* 100 retired: kept */
	/* Over capacity: the retired 9 goes, not the least recent 1. */
	assert_int_equal(get_put(c, &f, 11), 1);
	assert_int_equal(get_put(c, &f, 1), 0);
	assert_int_equal(get_put(c, &f, 9), 1);
	/* Two retired are over 125 bytes: the older of them goes. */
	retire(c, 3);
	retire(c, 4);
	assert_true(counters(c).bytes == 900);
	assert_int_equal(get_put(c, &f, 4), 0); /* read again: ordinary */
	assert_int_equal(get_put(c, &f, 3), 1);
	/* Retired while held: kept until put, then first to go; while
	 * held it does not count against the retired share. */
	struct rfs_cache_entry *held;
	struct rfs_cache_key k = key_of(5);
	assert_int_equal(rfs_cache_get(c, &k, &held, NULL), 0);
	retire(c, 5);
	retire(c, 5); /* twice is once */
	retire(c, 6); /* 100 retired and parked: 6 stays */
	assert_int_equal(get_put(c, &f, 6), 0);
	retire(c, 6);
	rfs_cache_put(c, held); /* 5 parks: 200 over 125, 6 (older) goes */
	assert_true(counters(c).bytes == 900);
	assert_int_equal(get_put(c, &f, 6), 1);
	assert_int_equal(get_put(c, &f, 12), 1); /* evicts the retired 5 */
	assert_int_equal(get_put(c, &f, 5), 1);
	/* A prefetch behind the reader leaves a retired entry retired. */
	retire(c, 6);
	warm(c, 6);
	retire(c, 12); /* 200 retired: 6, the older, goes */
	assert_int_equal(get_put(c, &f, 6), 1);
	warm(c, 13); /* absent: generated */
	assert_int_equal(get_put(c, &f, 13), 0);
	retire(c, 99); /* not cached: nothing happens */
	assert_true(counters(c).bytes == 1000);
	rfs_cache_destroy(c);
}

static void test_entry_bigger_than_capacity(void **state)
{
	(void)state;
	struct filler f = { .size = 500 };
	struct rfs_cache *c;
	assert_int_equal(rfs_cache_create(300, fill, &f, NULL, &c), 0);
	struct rfs_cache_key k = key_of(1);
	struct rfs_cache_entry *e;
	assert_int_equal(rfs_cache_get(c, &k, &e, NULL), 0);
	/* Held: kept and valid although over capacity. */
	assert_true(counters(c).bytes == 500);
	assert_int_equal(((const unsigned char *)rfs_cache_entry_data(e))[499],
			 2);
	rfs_cache_put(c, e);
	/* Released: kept while it is all the cache holds, so the next
	 * read of the same file is no new fill. */
	struct rfs_cache_counters n = counters(c);
	assert_true(n.bytes == 500 && n.entries == 1);
	assert_int_equal(get_put(c, &f, 1), 0);
	/* Another key's fill evicts it first. */
	assert_int_equal(get_put(c, &f, 2), 1);
	n = counters(c);
	assert_true(n.bytes == 500 && n.entries == 1);
	assert_int_equal(get_put(c, &f, 2), 0);
	/* Its file closed: dropped. */
	retire(c, 2);
	n = counters(c);
	assert_true(n.bytes == 0 && n.entries == 0);
	assert_int_equal(get_put(c, &f, 1), 1);
	rfs_cache_destroy(c);
}

static void test_held_entries_not_evicted(void **state)
{
	(void)state;
	struct filler f = { .size = 100 };
	struct rfs_cache *c;
	assert_int_equal(rfs_cache_create(200, fill, &f, NULL, &c), 0);
	struct rfs_cache_key k1 = key_of(1);
	struct rfs_cache_entry *held;
	assert_int_equal(rfs_cache_get(c, &k1, &held, NULL), 0);
	/* Many other keys come and go while 1 is held. */
	for (uint64_t b = 10; b < 30; b++)
		assert_int_equal(get_put(c, &f, b), 1);
	const unsigned char *d = rfs_cache_entry_data(held);
	assert_int_equal(d[0], 2);
	assert_int_equal(d[99], 2);
	int calls = atomic_load(&f.calls);
	struct rfs_cache_entry *again;
	assert_int_equal(rfs_cache_get(c, &k1, &again, NULL), 0);
	assert_true(again == held);
	assert_int_equal(atomic_load(&f.calls), calls);
	/* Memory stays at capacity plus what is held. */
	assert_true(counters(c).bytes <= 200 + 100);
	rfs_cache_put(c, again);
	rfs_cache_put(c, held);
	assert_true(counters(c).bytes <= 200);
	rfs_cache_destroy(c);
}

static void test_failed_fill_is_retried(void **state)
{
	(void)state;
	struct filler f = { .size = 10, .fail_next = EIO };
	struct rfs_cache *c;
	assert_int_equal(rfs_cache_create(1000, fill, &f, NULL, &c), 0);
	struct rfs_cache_key k = key_of(5);
	struct rfs_cache_entry *e = (struct rfs_cache_entry *)&f;
	assert_int_equal(rfs_cache_get(c, &k, &e, NULL), -EIO);
	assert_null(e);
	struct rfs_cache_counters n = counters(c);
	assert_true(n.entries == 0 && n.bytes == 0 && n.misses == 1);
	/* Not cached: the next get fills again, and succeeds. */
	assert_int_equal(rfs_cache_get(c, &k, &e, NULL), 0);
	assert_int_equal(atomic_load(&f.calls), 2);
	assert_int_equal(((const unsigned char *)rfs_cache_entry_data(e))[0],
			 6);
	rfs_cache_put(c, e);
	n = counters(c);
	assert_true(n.entries == 1 && n.bytes == 10 && n.misses == 2);
	/* Other errors pass through as they are. */
	f.fail_next = ENOMEM;
	struct rfs_cache_key k2 = key_of(6);
	assert_int_equal(rfs_cache_get(c, &k2, &e, NULL), -ENOMEM);
	assert_null(e);
	rfs_cache_destroy(c);
}

struct getter {
	struct rfs_cache *cache;
	struct rfs_cache_key key;
	pthread_barrier_t *start;
	struct filler *filler;
	atomic_int done;
	atomic_int *stop; /* set: the threads of a test stop */
	struct getter *peers; /* the other threads of a test */
	int npeers;
	int rc;
	unsigned char first;
	const void *data;
};

static void *get_thread(void *arg)
{
	struct getter *g = arg;
	struct rfs_cache_entry *e = NULL;
	pthread_barrier_wait(g->start);
	g->rc = rfs_cache_get(g->cache, &g->key, &e, NULL);
	if (g->rc == 0) {
		g->data = rfs_cache_entry_data(e);
		g->first = *(const unsigned char *)g->data;
		rfs_cache_put(g->cache, e);
	}
	return NULL;
}

/* Runs fn on g[0..n) (n <= 8), in threads that start together. */
static void run_threads(struct getter *g, int n, void *(*fn)(void *))
{
	pthread_t t[8];
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, (unsigned)n);
	for (int i = 0; i < n; i++) {
		g[i].start = &start;
		assert_int_equal(pthread_create(&t[i], NULL, fn, &g[i]), 0);
	}
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&start);
}

/* Gets of key in n threads at once. */
static void run_getters(struct rfs_cache *c, struct getter *g, int n,
			struct rfs_cache_key key)
{
	for (int i = 0; i < n; i++)
		g[i] = (struct getter){ .cache = c, .key = key };
	run_threads(g, n, get_thread);
}

/* Threads each with a key of its own: key_of(i), i from 0. */
static void run_distinct(struct rfs_cache *c, struct filler *f,
			 struct getter *g, int n, void *(*fn)(void *))
{
	for (int i = 0; i < n; i++)
		g[i] = (struct getter){ .cache = c,
					.filler = f,
					.key = key_of((uint64_t)i) };
	run_threads(g, n, fn);
}

static void test_concurrent_gets_fill_once(void **state)
{
	(void)state;
	struct filler f = { .size = 4096, .sleep_ms = 30 };
	struct rfs_cache *c;
	assert_int_equal(rfs_cache_create(1 << 20, fill, &f, NULL, &c), 0);
	struct getter g[8];
	run_getters(c, g, 8, key_of(41));
	assert_int_equal(atomic_load(&f.calls), 1);
	for (int i = 0; i < 8; i++) {
		assert_int_equal(g[i].rc, 0);
		assert_int_equal(g[i].first, 42);
		assert_true(g[i].data == g[0].data);
	}
	struct rfs_cache_counters n = counters(c);
	assert_true(n.misses == 1 && n.hits == 7 && n.entries == 1 &&
		    n.bytes == 4096);
	rfs_cache_destroy(c);
}

static void test_concurrent_gets_share_failure(void **state)
{
	(void)state;
	/* Waiters on a failing fill see its error; nothing is cached. */
	struct filler f = { .size = 16, .sleep_ms = 30, .fail_next = EIO };
	struct rfs_cache *c;
	assert_int_equal(rfs_cache_create(1 << 20, fill, &f, NULL, &c), 0);
	struct getter g[8];
	run_getters(c, g, 8, key_of(3));
	int failed = 0, calls = atomic_load(&f.calls);
	for (int i = 0; i < 8; i++) {
		assert_true(g[i].rc == 0 || g[i].rc == -EIO);
		failed += g[i].rc == -EIO;
	}
	/* The one failing fill was seen by at least its caller; any get that
	 * came after it failed filled again, successfully. */
	assert_true(failed >= 1);
	assert_true(calls >= 1 && calls <= 2);
	assert_int_equal(failed == 8, calls == 1);
	struct rfs_cache_counters n = counters(c);
	assert_true(n.entries == (uint64_t)(calls - 1));
	assert_int_equal(get_put(c, &f, 3), calls == 1);
	rfs_cache_destroy(c);
}

static void *churn_thread(void *arg)
{
	struct getter *g = arg;
	pthread_barrier_wait(g->start);
	for (uint64_t i = 0; i < 2000 && g->rc == 0; i++) {
		struct rfs_cache_key k = key_of((i * 7 + g->key.batch) % 23);
		struct rfs_cache_entry *e;
		g->rc = rfs_cache_get(g->cache, &k, &e, NULL);
		if (g->rc != 0)
			break;
		const unsigned char *d = rfs_cache_entry_data(e);
		if (d[0] != (unsigned char)(1 + k.batch) ||
		    d[rfs_cache_entry_size(e) - 1] != d[0])
			g->rc = -EBADMSG;
		rfs_cache_put(g->cache, e);
	}
	return NULL;
}

/* Gets its key and gives the buffer up (live) before putting it back. */
static void *room_thread(void *arg)
{
	struct getter *g = arg;
	struct filler *f = g->filler;
	struct rfs_cache_entry *e = NULL;
	pthread_barrier_wait(g->start);
	g->rc = rfs_cache_get(g->cache, &g->key, &e, NULL);
	if (g->rc == 0) {
		g->first = *(const unsigned char *)rfs_cache_entry_data(e);
		atomic_fetch_sub(&f->live, 1);
		rfs_cache_put(g->cache, e);
	}
	return NULL;
}

/* 8 gets of different keys at once into a cache with room for 3 of f's
 * entries; each gets its own entry, filled once. */
static struct rfs_cache *get_eight_in_room_for_three(struct filler *f)
{
	struct rfs_cache *c;
	assert_int_equal(rfs_cache_create(3 * f->size, fill, f, NULL, &c), 0);
	struct getter g[8];
	run_distinct(c, f, g, 8, room_thread);
	for (int i = 0; i < 8; i++) {
		assert_int_equal(g[i].rc, 0);
		assert_int_equal(g[i].first, 1 + i);
	}
	assert_int_equal(atomic_load(&f->calls), 8);
	return c;
}

static void test_fills_wait_for_room(void **state)
{
	(void)state;
	/* 8 gets of different keys at once, with room for 3 entries: each
	 * fill waits up to 200 ms for the others, but no more than 3
	 * buffers are ever taken at once. */
	struct filler f = { .size = 4096, .overlap = 8 };
	struct rfs_cache *c = get_eight_in_room_for_three(&f);
	assert_true(atomic_load(&f.most_live) >= 2); /* not one at a time */
	assert_true(atomic_load(&f.most_live) <= 3);
	struct rfs_cache_counters n = counters(c);
	assert_true(n.bytes <= 3 * 4096 && n.bytes == n.entries * 4096);
	/* At least the five that found no room; each counted once. */
	assert_true(n.room_waits >= 5 && n.room_waits <= 8);
	rfs_cache_destroy(c);
}

static void test_fill_scratch_counts_while_filling(void **state)
{
	(void)state;
	/* As above, but each fill declares twice its buffer in temporaries:
	 * a fill's buffer and scratch take all the room, so one fill runs at
	 * a time, and the scratch leaves the count when the fill returns. */
	struct filler f = { .size = 4096, .scratch = 8192, .overlap = 8 };
	struct rfs_cache *c = get_eight_in_room_for_three(&f);
	assert_int_equal(atomic_load(&f.most_live), 1);
	struct rfs_cache_counters n = counters(c);
	assert_true(n.bytes <= 3 * 4096 && n.bytes == n.entries * 4096);
	assert_true(n.room_waits >= 7);

	/* A failed fill gives its scratch back too. */
	f.fail_next = EIO;
	f.overlap = 0;
	struct rfs_cache_key k = key_of(100);
	struct rfs_cache_entry *e;
	assert_int_equal(rfs_cache_get(c, &k, &e, NULL), -EIO);
	struct rfs_cache_counters after = counters(c);
	assert_true(after.bytes == after.entries * 4096); /* no scratch left */
	rfs_cache_destroy(c);
}

static void *get_one(void *arg)
{
	struct getter *g = arg;
	struct rfs_cache_entry *e = NULL;
	g->rc = rfs_cache_get(g->cache, &g->key, &e, NULL);
	if (g->rc == 0) {
		g->first = *(const unsigned char *)rfs_cache_entry_data(e);
		rfs_cache_put(g->cache, e);
	}
	atomic_store(&g->done, 1);
	return NULL;
}

static void test_fill_waits_for_held_entry(void **state)
{
	(void)state;
	/* Room for one entry, held by this thread: another thread's fill
	 * waits until it is put back, then evicts it. */
	struct filler f = { .size = 200 };
	struct rfs_cache *c;
	assert_int_equal(rfs_cache_create(300, fill, &f, NULL, &c), 0);
	struct rfs_cache_key k1 = key_of(1);
	struct rfs_cache_entry *held;
	assert_int_equal(rfs_cache_get(c, &k1, &held, NULL), 0);
	struct getter g = { .cache = c, .key = key_of(2) };
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, get_one, &g), 0);
	/* Until the fill waits (however slowly its thread starts), and a
	 * while after: it must still be waiting. */
	for (int ms = 0;
	     counters(c).room_waits == 0 && !atomic_load(&g.done) && ms < 20000;
	     ms++) {
		struct timespec ts = { 0, 1000000L };
		nanosleep(&ts, NULL);
	}
	struct timespec settle = { 0, 50 * 1000000L };
	nanosleep(&settle, NULL);
	assert_int_equal(counters(c).room_waits, 1);
	assert_int_equal(atomic_load(&g.done), 0);
	assert_true(counters(c).bytes == 200);
	rfs_cache_put(c, held);
	pthread_join(t, NULL);
	assert_int_equal(g.rc, 0);
	assert_int_equal(g.first, 3);
	struct rfs_cache_counters n = counters(c);
	assert_true(n.bytes == 200 && n.entries == 1 && n.room_waits == 1);
	rfs_cache_destroy(c);
}

/* The small keys' threads get and put keys of their own, holding each
 * for a millisecond, until stopped (or for 5 s). The big key's thread
 * gets it once the trickle flows, then says how many of the others were
 * still going (in first) and stops them. */
static void *starve_thread(void *arg)
{
	struct getter *g = arg;
	pthread_barrier_wait(g->start);
	struct timespec t0, now, hold = { 0, 1000000L };
	if (g->key.batch >= BIG) {
		struct timespec settle = { 0, 50 * 1000000L };
		nanosleep(&settle, NULL);
		struct rfs_cache_entry *e;
		g->rc = rfs_cache_get(g->cache, &g->key, &e, NULL);
		rfs_cache_put(g->cache, e);
		int going = 0;
		for (int i = 0; i < g->npeers; i++)
			going += !atomic_load(&g->peers[i].done);
		g->first = (unsigned char)going;
		atomic_store(g->stop, 1);
		return NULL;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (uint64_t i = 0; !atomic_load(g->stop); i++) {
		struct rfs_cache_key k = key_of(g->key.batch * 100 + i % 50);
		struct rfs_cache_entry *e;
		if ((g->rc = rfs_cache_get(g->cache, &k, &e, NULL)) != 0)
			break;
		nanosleep(&hold, NULL);
		rfs_cache_put(g->cache, e);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - t0.tv_sec >= 5)
			break;
	}
	atomic_store(&g->done, 1);
	return NULL;
}

static void test_big_fill_not_starved_by_small_ones(void **state)
{
	(void)state;
	/* A 900-byte fill among six threads getting and holding 100-byte
	 * entries in a 1000-byte cache: it needs nearly all of it, and
	 * before fills took turns it waited until they stopped. */
	struct filler f = { .size = 100, .big_size = 900 };
	struct rfs_cache *c;
	assert_int_equal(rfs_cache_create(1000, fill, &f, NULL, &c), 0);
	atomic_int stop = 0;
	struct getter g[7];
	for (int i = 0; i < 7; i++)
		g[i] = (struct getter){ .cache = c,
					.stop = &stop,
					.key = key_of(i ? (uint64_t)i : BIG),
					.peers = g + 1,
					.npeers = 6 };
	run_threads(g, 7, starve_thread);
	for (int i = 0; i < 7; i++)
		assert_int_equal(g[i].rc, 0);
	assert_int_equal(g[0].first, 6);
	rfs_cache_destroy(c);
}

static void test_concurrent_churn(void **state)
{
	(void)state;
	/* Many threads over more keys than fit: entries must never be freed
	 * while held (ASan) and bytes must be right. */
	struct filler f = { .size = 256 };
	struct rfs_cache *c;
	assert_int_equal(rfs_cache_create(256 * 8, fill, &f, NULL, &c), 0);
	struct getter g[8];
	run_distinct(c, &f, g, 8, churn_thread);
	for (int i = 0; i < 8; i++)
		assert_int_equal(g[i].rc, 0);
	struct rfs_cache_counters n = counters(c);
	assert_true(n.hits + n.misses == 8 * 2000);
	assert_true(n.bytes <= 256 * 8);
	assert_true(n.bytes == n.entries * 256);
	assert_true(n.misses == (uint64_t)atomic_load(&f.calls));
	rfs_cache_destroy(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_get_put_and_counters),
		cmocka_unit_test(test_same_key_held_twice),
		cmocka_unit_test(test_lru_eviction),
		cmocka_unit_test(test_entry_bigger_than_capacity),
		cmocka_unit_test(test_retired_entries_leave_first),
		cmocka_unit_test(test_held_entries_not_evicted),
		cmocka_unit_test(test_failed_fill_is_retried),
		cmocka_unit_test(test_concurrent_gets_fill_once),
		cmocka_unit_test(test_concurrent_gets_share_failure),
		cmocka_unit_test(test_concurrent_churn),
		cmocka_unit_test(test_fills_wait_for_room),
		cmocka_unit_test(test_fill_scratch_counts_while_filling),
		cmocka_unit_test(test_fill_waits_for_held_entry),
		cmocka_unit_test(test_big_fill_not_starved_by_small_ones),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
