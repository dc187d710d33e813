/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/serve/lookahead.c: readers in order get batches queued
 * ahead, jumps get none, and the room is shared by the ranks reading. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "serve/cache.h"
#include "serve/kind.h"
#include "serve/lookahead.h"

#define BATCHES 31

static atomic_int fills;
static atomic_int gate_closed; /* fills wait while it is set */
static atomic_int entered; /* fills begun */

static int fill(void *ctx, const struct rfs_cache_key *key,
		struct rfs_cache_fill *f)
{
	(void)ctx, (void)key;
	atomic_fetch_add(&entered, 1);
	while (atomic_load(&gate_closed))
		usleep(100);
	void *buf = rfs_cache_fill_buffer(f, 100, 0);
	if (!buf)
		return -ENOMEM;
	memset(buf, 0, 100);
	atomic_fetch_add(&fills, 1);
	return 0;
}

/* Two ranks, depth 3 wanted, room for room_batches batches of 100. */
static void make(uint64_t depth, uint64_t room_batches,
		 struct rfs_cache **cache, struct rfs_lookahead **l)
{
	atomic_store(&fills, 0);
	assert_int_equal(rfs_cache_create(1 << 20, fill, NULL, NULL, cache), 0);
	struct rfs_lookahead_params p = { .ranks = 2,
					  .batches_per_rank = BATCHES,
					  .depth = depth,
					  .threads = 2,
					  .room = room_batches * 100,
					  .batch_cost = 100 };
	assert_int_equal(rfs_lookahead_create(&p, *cache, l), 0);
}

static void destroy(struct rfs_cache *cache, struct rfs_lookahead *l)
{
	rfs_lookahead_destroy(l);
	rfs_cache_destroy(cache);
}

static void open_at(struct rfs_lookahead *l, uint64_t epoch, uint64_t rank,
		    uint64_t batch)
{
	rfs_lookahead_opened(l, &(struct rfs_cache_key){ .epoch = epoch,
							 .rank = rank,
							 .batch = batch });
}

static uint64_t queued(struct rfs_lookahead *l)
{
	struct rfs_prefetch_counters pc;
	rfs_lookahead_counters(l, &pc);
	return pc.queued;
}

/* Waits (up to 30 s: a sanitized build on a busy machine is slow) until
 * n prefetched batches are done. */
static void wait_done(struct rfs_lookahead *l, uint64_t n)
{
	struct rfs_prefetch_counters pc;
	for (int i = 0; i < 30000; i++) {
		rfs_lookahead_counters(l, &pc);
		if (pc.done >= n)
			break;
		usleep(1000);
	}
	assert_true(pc.done == n);
}

static void test_opened_queues_ahead(void **state)
{
	(void)state;
	struct rfs_cache *c;
	struct rfs_lookahead *l;
	make(3, 1000, &c, &l);
	assert_true(rfs_lookahead_depth_max(l) == 3);
	open_at(l, 0, 1, 4); /* 5, 6, 7 of rank 1 */
	wait_done(l, 3);
	assert_int_equal(atomic_load(&fills), 3);
	struct rfs_cache_counters cc;
	rfs_cache_counters(c, &cc);
	assert_true(cc.entries == 3);
	/* Across the end of an epoch: positions count on. */
	open_at(l, 0, 0, BATCHES - 1); /* epoch 1's 0, 1, 2 */
	wait_done(l, 6);
	struct rfs_cache_entry *e;
	assert_int_equal(
		rfs_cache_get(c,
			      &(struct rfs_cache_key){ .epoch = 1, .batch = 2 },
			      &e, NULL),
		0);
	rfs_cache_put(c, e);
	rfs_cache_counters(c, &cc);
	assert_true(cc.hits == 1);
	destroy(c, l);
}

/* A reader that jumps gets nothing queued at the jump: only opens in
 * order (or nearly, as concurrent loader workers open) queue ahead. */
static void test_jumps_queue_nothing(void **state)
{
	(void)state;
	struct rfs_cache *c;
	struct rfs_lookahead *l;
	make(3, 1000, &c, &l);
	open_at(l, 0, 1, 0); /* first: 1, 2, 3 */
	open_at(l, 0, 1, 2); /* workers' order: 4, 5 */
	open_at(l, 0, 1, 1); /* behind, within depth: nothing new */
	assert_true(queued(l) == 5);
	open_at(l, 200, 1, 0); /* jump ahead: nothing */
	open_at(l, 100, 1, 0); /* jump back: nothing */
	assert_true(queued(l) == 5);
	open_at(l, 100, 1, 1); /* in order after the jump: 3 more */
	assert_true(queued(l) == 8);
	wait_done(l, 8);
	destroy(c, l);
}

/* Workers behind their reader skip what it opened already: made then,
 * a batch would be made for nobody. A batch behind the furthest opened
 * that is not opened yet (loader workers open out of order) is made. */
static void test_workers_behind_skip_what_was_opened(void **state)
{
	(void)state;
	struct rfs_cache *c;
	struct rfs_lookahead *l;
	make(3, 1000, &c, &l);
	atomic_store(&gate_closed, 1);
	atomic_store(&entered, 0);
	open_at(l, 0, 1, 0); /* 1, 2, 3: the two workers take 1 and 2 */
	for (int i = 0; i < 30000 && atomic_load(&entered) < 2; i++)
		usleep(1000);
	static const uint64_t order[] = { 1, 2, 4, 5 }; /* 3 not yet */
	for (size_t i = 0; i < 4; i++)
		open_at(l, 0, 1, order[i]); /* 4 .. 8 queued */
	assert_true(queued(l) == 8);
	atomic_store(&gate_closed, 0);
	wait_done(l, 8);
	/* 1 and 2 (taken before the reader passed them), 3, 6, 7 and 8;
	 * not 4 or 5. */
	assert_int_equal(atomic_load(&fills), 6);
	destroy(c, l);
}

/* The ranks that read share the room: the depth halves when a second
 * starts. */
static void test_room_shared_by_readers(void **state)
{
	(void)state;
	struct rfs_cache *c;
	struct rfs_lookahead *l;
	make(60000, 40, &c, &l);
	assert_true(rfs_lookahead_depth_max(l) == 40); /* cut to the room */
	assert_true(rfs_lookahead_depth(l) == 40);
	open_at(l, 0, 0, 0);
	assert_true(rfs_lookahead_depth(l) == 40);
	open_at(l, 0, 1, 0);
	assert_true(rfs_lookahead_depth(l) == 20);
	destroy(c, l);
}

/* No room for a batch, or no depth wanted: off, and opens do nothing. */
static void test_off(void **state)
{
	(void)state;
	for (int room = 0; room < 2; room++) {
		struct rfs_cache *c;
		struct rfs_lookahead *l;
		make(room ? 0 : 3, room ? 1000 : 0, &c, &l);
		assert_true(rfs_lookahead_depth_max(l) == 0);
		open_at(l, 0, 0, 0);
		assert_true(queued(l) == 0);
		assert_true(rfs_lookahead_depth(l) == 0);
		destroy(c, l);
	}
	rfs_lookahead_destroy(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_opened_queues_ahead),
		cmocka_unit_test(test_jumps_queue_nothing),
		cmocka_unit_test(test_workers_behind_skip_what_was_opened),
		cmocka_unit_test(test_room_shared_by_readers),
		cmocka_unit_test(test_off),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
