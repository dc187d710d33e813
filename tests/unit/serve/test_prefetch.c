/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/serve/prefetch.c: a pool that runs each key once. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "serve/prefetch.h"

struct record {
	atomic_uint calls;
	atomic_uint per_key[64];
	pthread_mutex_t gate; /* held by the test to keep workers busy */
};

static void work(void *ctx, const struct rfs_cache_key *key)
{
	struct record *r = ctx;
	pthread_mutex_lock(&r->gate);
	pthread_mutex_unlock(&r->gate);
	atomic_fetch_add(&r->calls, 1);
	atomic_fetch_add(&r->per_key[key->batch], 1);
}

static void wait_done(struct rfs_prefetch *p, uint64_t n)
{
	struct rfs_prefetch_counters c;
	do {
		rfs_prefetch_counters(p, &c);
	} while (c.done < n);
}

static void test_each_key_once(void **state)
{
	(void)state;
	struct record r = { 0 };
	pthread_mutex_init(&r.gate, NULL);
	struct rfs_prefetch *p;
	assert_int_equal(rfs_prefetch_create(3, 64, work, &r, &p), 0);
	pthread_mutex_lock(&r.gate); /* nothing finishes yet */
	for (int round = 0; round < 3; round++)
		for (uint64_t k = 0; k < 20; k++) {
			struct rfs_cache_key key = { .batch = k };
			int rc = rfs_prefetch_push(p, &key);
			assert_true(rc == (round == 0 ? 1 : 0));
		}
	pthread_mutex_unlock(&r.gate);
	wait_done(p, 20);
	struct rfs_prefetch_counters c;
	rfs_prefetch_counters(p, &c);
	assert_true(c.queued == 20 && c.done == 20 && c.dropped == 0);
	for (int k = 0; k < 20; k++)
		assert_int_equal(r.per_key[k], 1);
	/* Done keys may be queued again (the cache decides if it is work). */
	struct rfs_cache_key again = { .batch = 3 };
	assert_int_equal(rfs_prefetch_push(p, &again), 1);
	wait_done(p, 21);
	rfs_prefetch_destroy(p);
	pthread_mutex_destroy(&r.gate);
}

static void note_mask(void *ctx, const struct rfs_cache_key *key)
{
	(void)key;
	pthread_sigmask(SIG_BLOCK, NULL, ctx);
}

static void test_workers_leave_sigterm_to_the_main_thread(void **state)
{
	(void)state;
	sigset_t seen;
	sigemptyset(&seen);
	struct rfs_prefetch *p;
	assert_int_equal(rfs_prefetch_create(1, 4, note_mask, &seen, &p), 0);
	struct rfs_cache_key key = { .batch = 1 };
	assert_int_equal(rfs_prefetch_push(p, &key), 1);
	wait_done(p, 1);
	rfs_prefetch_destroy(p);
	assert_int_equal(sigismember(&seen, SIGTERM), 1);
}

static void test_full_queue_drops(void **state)
{
	(void)state;
	struct record r = { 0 };
	pthread_mutex_init(&r.gate, NULL);
	struct rfs_prefetch *p;
	assert_int_equal(rfs_prefetch_create(1, 4, work, &r, &p), 0);
	pthread_mutex_lock(&r.gate);
	int queued = 0, dropped = 0;
	for (uint64_t k = 0; k < 20; k++) {
		struct rfs_cache_key key = { .batch = k };
		int rc = rfs_prefetch_push(p, &key);
		queued += rc == 1;
		dropped += rc == -1;
	}
	/* One taken by the worker, four waiting, the rest dropped. */
	assert_true(queued >= 4 && queued <= 5);
	assert_int_equal(queued + dropped, 20);
	pthread_mutex_unlock(&r.gate);
	/* Destroy drops what waits and joins without hanging. */
	rfs_prefetch_destroy(p);
	assert_true(r.calls <= (unsigned)queued);
	pthread_mutex_destroy(&r.gate);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_each_key_once),
		cmocka_unit_test(test_full_queue_drops),
		cmocka_unit_test(test_workers_leave_sigterm_to_the_main_thread),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
