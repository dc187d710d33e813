/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/plan/plan.c: (epoch, rank, batch) -> row ids. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/config.h"
#include "plan/plan.h"
#include "plan/sampler.h"

/* Every row of an n-row source, as a rowset that outlives its users (the
 * planner and sampler borrow it): a ring big enough for any test here. */
static const struct rfs_rowset *all(uint64_t n)
{
	static struct rfs_rowset ring[16];
	static unsigned next;
	struct rfs_rowset *r = &ring[next++ % 16];
	*r = (struct rfs_rowset){ .length = n };
	return r;
}

static void make_config(struct rfs_config *c, const char *strategy,
			const char *world, const char *batch, const char *fetch)
{
	char err[128];
	rfs_config_init(c);
	assert_int_equal(
		rfs_config_set(c, "strategy", strategy, err, sizeof(err)), 0);
	assert_int_equal(
		rfs_config_set(c, "world_size", world, err, sizeof(err)), 0);
	assert_int_equal(
		rfs_config_set(c, "batch_size", batch, err, sizeof(err)), 0);
	assert_int_equal(
		rfs_config_set(c, "fetch_factor", fetch, err, sizeof(err)), 0);
	assert_int_equal(rfs_config_set(c, "seed", "17", err, sizeof(err)), 0);
}

static const char *const strategies[] = { "streaming", "shuffle",
					  "block_shuffle" };

/* Every row of every rank's batches of one epoch, in (batch, rank, j)
 * order: bpr * G of them. */
static int64_t *plan_epoch(struct rfs_planner *p, const struct rfs_config *c,
			   uint64_t epoch)
{
	const struct rfs_layout *l = rfs_plan_layout(p);
	uint64_t g = c->world_size * c->batch_size;
	int64_t *rows = malloc(l->batches_per_rank * g * sizeof(*rows));
	assert_non_null(rows);
	for (uint64_t k = 0; k < l->batches_per_rank; k++)
		for (uint64_t r = 0; r < c->world_size; r++)
			assert_int_equal(
				rfs_plan_batch(p, epoch, r, k,
					       rows + k * g +
						       r * c->batch_size),
				0);
	return rows;
}

static void test_create_and_layout(void **state)
{
	(void)state;
	struct rfs_config c;
	struct rfs_planner *p = NULL;
	make_config(&c, "shuffle", "2", "32", "8");
	assert_int_equal(rfs_plan_create(&c, all(63), &p), -EINVAL);
	assert_null(p);
	assert_int_equal(rfs_plan_create(&c, all(1000), &p), 0);
	const struct rfs_layout *l = rfs_plan_layout(p);
	assert_true(rfs_plan_sequence_length(p, 0) == 1000);
	assert_true(l->global_batch == 64);
	assert_true(l->window == 512);
	assert_true(l->batches_per_rank == 15);
	rfs_plan_destroy(p);
	rfs_plan_destroy(NULL);
}

static void test_config_is_copied(void **state)
{
	(void)state;
	struct rfs_config c;
	char err[64];
	struct rfs_planner *p;
	make_config(&c, "shuffle", "1", "8", "2");
	assert_int_equal(rfs_config_set(&c, "dataset", "/X", err, sizeof(err)),
			 0);
	assert_int_equal(rfs_plan_create(&c, all(100), &p), 0);
	int64_t a[8], b[8];
	assert_int_equal(rfs_plan_batch(p, 0, 0, 3, a), 0);
	/* Changing or freeing the caller's config does not matter. */
	c.seed = 999;
	c.batch_size = 1;
	rfs_config_free(&c);
	struct rfs_planner *q;
	make_config(&c, "shuffle", "1", "8", "2");
	assert_int_equal(rfs_plan_create(&c, all(100), &q), 0);
	assert_int_equal(rfs_plan_batch(q, 0, 0, 3, b), 0);
	assert_memory_equal(a, b, sizeof(a));
	rfs_plan_destroy(p);
	rfs_plan_destroy(q);
}

static void check_epoch_rows(const char *strategy, const char *world,
			     const char *batch, const char *fetch, uint64_t n)
{
	struct rfs_config c;
	struct rfs_planner *p;
	make_config(&c, strategy, world, batch, fetch);
	assert_int_equal(rfs_plan_create(&c, all(n), &p), 0);
	const struct rfs_layout *l = rfs_plan_layout(p);
	uint64_t g = c.world_size * c.batch_size;
	uint64_t total = l->batches_per_rank * g;
	assert_true(l->batches_per_rank == n / g);
	for (uint64_t epoch = 0; epoch < 3; epoch++) {
		int64_t *rows = plan_epoch(p, &c, epoch);
		unsigned char *seen = calloc(n, 1);
		assert_non_null(seen);
		for (uint64_t i = 0; i < total; i++) {
			if (rows[i] < 0 || (uint64_t)rows[i] >= n)
				fail_msg("%s n=%llu: row %lld out of range",
					 strategy, (unsigned long long)n,
					 (long long)rows[i]);
			if (seen[rows[i]]++)
				fail_msg("%s n=%llu epoch %llu: row %lld "
					 "served twice",
					 strategy, (unsigned long long)n,
					 (unsigned long long)epoch,
					 (long long)rows[i]);
		}
		uint64_t distinct = 0;
		for (uint64_t i = 0; i < n; i++)
			distinct += seen[i];
		assert_true(distinct == total);
		free(seen);
		free(rows);
	}
	rfs_plan_destroy(p);
}

static void test_rows_disjoint_and_complete(void **state)
{
	(void)state;
	for (size_t s = 0; s < 3; s++) {
		check_epoch_rows(strategies[s], "2", "32", "8", 1000);
		check_epoch_rows(strategies[s], "2", "32", "8", 1024);
		check_epoch_rows(strategies[s], "3", "7", "4", 5000);
		check_epoch_rows(strategies[s], "1", "1", "1", 10);
		check_epoch_rows(strategies[s], "5", "13", "100", 777);
		check_epoch_rows(strategies[s], "4", "16", "1", 64);
	}
}

static void test_streaming_positions(void **state)
{
	(void)state;
	struct rfs_config c;
	struct rfs_planner *p;
	make_config(&c, "streaming", "3", "5", "2");
	assert_int_equal(rfs_plan_create(&c, all(1000), &p), 0);
	int64_t rows[5];
	for (uint64_t epoch = 0; epoch < 2; epoch++)
		for (uint64_t k = 0; k < rfs_plan_layout(p)->batches_per_rank;
		     k++)
			for (uint64_t r = 0; r < 3; r++) {
				assert_int_equal(rfs_plan_batch(p, epoch, r, k,
								rows),
						 0);
				for (uint64_t j = 0; j < 5; j++)
					assert_true(
						rows[j] ==
						(int64_t)(k * 15 + r * 5 + j));
			}
	/* Any epoch up to the limit. */
	assert_int_equal(
		rfs_plan_batch(p, (UINT64_C(1) << 31) - 1, 2, 65, rows), 0);
	assert_true(rows[4] == 65 * 15 + 10 + 4);
	rfs_plan_destroy(p);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* A full fetch window's batches hold exactly the rows of S_e over the
 * window's positions, and the window is reordered. */
static void test_windows_hold_their_rows(void **state)
{
	(void)state;
	for (size_t s = 1; s < 3; s++) {
		struct rfs_config c;
		struct rfs_planner *p;
		struct rfs_sampler sm;
		make_config(&c, strategies[s], "2", "32", "4");
		const uint64_t n = 1000, w = 256;
		assert_int_equal(rfs_plan_create(&c, all(n), &p), 0);
		int64_t *rows = plan_epoch(p, &c, 5);
		rfs_sampler_init(&sm, &c, all(n), 5, 0);
		int64_t expect[256], got[256];
		for (uint64_t win = 0; win < 3; win++) {
			int in_order = 0;
			for (uint64_t i = 0; i < w; i++) {
				expect[i] = (int64_t)rfs_sampler_row(
					&sm, win * w + i);
				got[i] = rows[win * w + i];
				in_order += expect[i] == got[i];
			}
			assert_true(in_order < 64);
			qsort(expect, w, sizeof(expect[0]), cmp_i64);
			qsort(got, w, sizeof(got[0]), cmp_i64);
			assert_memory_equal(expect, got, sizeof(got));
		}
		free(rows);
		rfs_plan_destroy(p);
	}
}

static void test_block_shuffle_batches_mix_blocks(void **state)
{
	(void)state;
	struct rfs_config c;
	struct rfs_planner *p;
	make_config(&c, "block_shuffle", "2", "32", "8");
	assert_int_equal(rfs_plan_create(&c, all(100000), &p), 0);
	int64_t rows[32];
	assert_int_equal(rfs_plan_batch(p, 0, 1, 20, rows), 0);
	int64_t blocks[32];
	for (int j = 0; j < 32; j++)
		blocks[j] = rows[j] / 64;
	qsort(blocks, 32, sizeof(blocks[0]), cmp_i64);
	int distinct = 1;
	for (int j = 1; j < 32; j++)
		distinct += blocks[j] != blocks[j - 1];
	/* A window of 512 rows holds 8 blocks; a batch draws from most. */
	assert_true(distinct >= 4);
	rfs_plan_destroy(p);
}

static void test_deterministic_across_planners(void **state)
{
	(void)state;
	for (size_t s = 0; s < 3; s++) {
		struct rfs_config c;
		struct rfs_planner *a, *b;
		make_config(&c, strategies[s], "2", "32", "8");
		assert_int_equal(rfs_plan_create(&c, all(3000), &a), 0);
		assert_int_equal(rfs_plan_create(&c, all(3000), &b), 0);
		for (uint64_t epoch = 0; epoch < 2; epoch++) {
			int64_t *x = plan_epoch(a, &c, epoch);
			/* b asks in reverse order, so its window cache is in
			 * a different state. */
			const struct rfs_layout *l = rfs_plan_layout(b);
			int64_t *y = malloc(l->batches_per_rank * 64 * 8);
			assert_non_null(y);
			for (uint64_t k = l->batches_per_rank; k-- > 0;)
				for (uint64_t r = 2; r-- > 0;)
					assert_int_equal(
						rfs_plan_batch(b, epoch, r, k,
							       y + k * 64 +
								       r * 32),
						0);
			assert_memory_equal(x, y, l->batches_per_rank * 64 * 8);
			free(x);
			free(y);
		}
		rfs_plan_destroy(a);
		rfs_plan_destroy(b);
	}
}

static void test_epochs_and_seeds_differ(void **state)
{
	(void)state;
	for (size_t s = 1; s < 3; s++) {
		struct rfs_config c, c2;
		struct rfs_planner *p, *q;
		char err[64];
		make_config(&c, strategies[s], "2", "32", "8");
		c2 = c;
		assert_int_equal(
			rfs_config_set(&c2, "seed", "18", err, sizeof(err)), 0);
		assert_int_equal(rfs_plan_create(&c, all(2048), &p), 0);
		assert_int_equal(rfs_plan_create(&c2, all(2048), &q), 0);
		int64_t *e0 = plan_epoch(p, &c, 0);
		int64_t *e1 = plan_epoch(p, &c, 1);
		int64_t *s18 = plan_epoch(q, &c2, 0);
		int same_epoch = 0, same_seed = 0;
		for (int i = 0; i < 2048; i++) {
			same_epoch += e0[i] == e1[i];
			same_seed += e0[i] == s18[i];
		}
		assert_true(same_epoch < 100);
		assert_true(same_seed < 100);
		free(e0);
		free(e1);
		free(s18);
		rfs_plan_destroy(p);
		rfs_plan_destroy(q);
	}
}

/* partition=batch: for the same G, rank R's batch k is the R-th slice of
 * the same global batch k, whatever world_size is. */
static void test_elastic_same_global_batches(void **state)
{
	(void)state;
	static const char *const splits[][2] = {
		{ "1", "64" }, { "2", "32" }, { "4", "16" }, { "8", "8" }
	};
	for (size_t s = 0; s < 3; s++) {
		int64_t *ref = NULL;
		uint64_t bpr = 0;
		for (size_t k = 0; k < 4; k++) {
			struct rfs_config c;
			struct rfs_planner *p;
			make_config(&c, strategies[s], splits[k][0],
				    splits[k][1], "4");
			assert_int_equal(rfs_plan_create(&c, all(5000), &p), 0);
			/* plan_epoch concatenates ranks within each k. */
			int64_t *rows = plan_epoch(p, &c, 3);
			if (!ref) {
				ref = rows;
				bpr = rfs_plan_layout(p)->batches_per_rank;
			} else {
				assert_true(
					rfs_plan_layout(p)->batches_per_rank ==
					bpr);
				assert_memory_equal(ref, rows,
						    bpr * 64 * sizeof(*rows));
				free(rows);
			}
			rfs_plan_destroy(p);
		}
		free(ref);
	}
}

struct thread_arg {
	struct rfs_planner *p;
	const struct rfs_config *c;
	const int64_t *expect[4];
	uint64_t bpr;
	unsigned seed;
	int mismatches;
};

static void *plan_thread(void *arg)
{
	struct thread_arg *t = arg;
	int64_t rows[32];
	for (int i = 0; i < 400; i++) {
		t->seed = t->seed * 1103515245u + 12345u;
		uint64_t epoch = (t->seed >> 8) % 4;
		uint64_t k = (t->seed >> 12) % t->bpr;
		uint64_t r = (t->seed >> 20) % 2;
		if (rfs_plan_batch(t->p, epoch, r, k, rows) != 0 ||
		    memcmp(rows, t->expect[epoch] + k * 64 + r * 32,
			   sizeof(rows)) != 0)
			t->mismatches++;
	}
	return NULL;
}

static void test_threads_agree(void **state)
{
	(void)state;
	struct rfs_config c;
	struct rfs_planner *p;
	make_config(&c, "shuffle", "2", "32", "2");
	assert_int_equal(rfs_plan_create(&c, all(4000), &p), 0);
	int64_t *expect[4];
	for (uint64_t e = 0; e < 4; e++)
		expect[e] = plan_epoch(p, &c, e);
	struct thread_arg args[6];
	pthread_t threads[6];
	for (int i = 0; i < 6; i++) {
		args[i] = (struct thread_arg){
			.p = p,
			.c = &c,
			.bpr = rfs_plan_layout(p)->batches_per_rank,
			.seed = (unsigned)i * 7919u + 1,
		};
		memcpy(args[i].expect, expect, sizeof(expect));
		assert_int_equal(pthread_create(&threads[i], NULL, plan_thread,
						&args[i]),
				 0);
	}
	for (int i = 0; i < 6; i++) {
		pthread_join(threads[i], NULL);
		assert_int_equal(args[i].mismatches, 0);
	}
	for (int e = 0; e < 4; e++)
		free(expect[e]);
	rfs_plan_destroy(p);
}

struct same_window_arg {
	struct rfs_planner *p;
	pthread_barrier_t *start;
	uint64_t rank, batch, rows;
	int failed;
};

static void *plan_in_window(void *arg)
{
	struct same_window_arg *t = arg;
	int64_t *rows = malloc(t->rows * sizeof(*rows));
	pthread_barrier_wait(t->start);
	t->failed = !rows ||
		    rfs_plan_batch(t->p, 0, t->rank, t->batch, rows) != 0;
	free(rows);
	return NULL;
}

/* Runs plan_in_window for each of args[0..n) on a thread of its own,
 * released together; n <= 16. */
static void plan_at_once(struct same_window_arg *args, int n)
{
	pthread_barrier_t start;
	pthread_t threads[16];
	assert_true(n <= 16);
	pthread_barrier_init(&start, NULL, (unsigned)n);
	for (int i = 0; i < n; i++) {
		args[i].start = &start;
		assert_int_equal(pthread_create(&threads[i], NULL,
						plan_in_window, &args[i]),
				 0);
	}
	for (int i = 0; i < n; i++) {
		pthread_join(threads[i], NULL);
		assert_false(args[i].failed);
	}
	pthread_barrier_destroy(&start);
}

/* Every rank and prefetch thread reaches a new window at about the same
 * time: one of them sorts it, the others wait for that sort instead of
 * doing their own. The window is made large (2^20 rows, some 0.1 s to
 * build here) so that the threads, released together, all ask while it
 * is being built. */
static void test_threads_build_a_window_once(void **state)
{
	(void)state;
	enum { THREADS = 8 };
	struct rfs_config c;
	struct rfs_planner *p;
	make_config(&c, "shuffle", "2", "16384", "32");
	assert_int_equal(rfs_plan_create(&c, all(UINT64_C(1) << 21), &p), 0);
	assert_int_equal(rfs_plan_windows_built(p), 0);
	struct same_window_arg args[THREADS];
	for (int i = 0; i < THREADS; i++) /* all in window 0 */
		args[i] = (struct same_window_arg){
			.p = p, .rank = i % 2, .batch = i / 2, .rows = 16384
		};
	plan_at_once(args, THREADS);
	assert_int_equal(rfs_plan_windows_built(p), 1);
	/* The next window is a build of its own. */
	int64_t *rows = malloc(16384 * sizeof(*rows));
	assert_non_null(rows);
	assert_int_equal(rfs_plan_batch(p, 0, 0, 32, rows), 0);
	assert_int_equal(rfs_plan_windows_built(p), 2);
	free(rows);
	rfs_plan_destroy(p);
}

/* More windows wanted at once than may be built at once (8): the rest
 * wait for a build to end, and each window is still built once. */
static void test_many_windows_at_once(void **state)
{
	(void)state;
	enum { THREADS = 16 };
	struct rfs_config c;
	struct rfs_planner *p;
	make_config(&c, "shuffle", "2", "1024", "4"); /* windows of 8192 */
	assert_int_equal(rfs_plan_create(&c, all(THREADS * 8192), &p), 0);
	struct same_window_arg args[THREADS];
	for (int i = 0; i < THREADS; i++) /* the first batch of window i */
		args[i] = (struct same_window_arg){ .p = p,
						    .batch = 4 * (uint64_t)i,
						    .rows = 1024 };
	plan_at_once(args, THREADS);
	assert_int_equal(rfs_plan_windows_built(p), THREADS);
	rfs_plan_destroy(p);
}

/* What the view reserves from cache_mb: the cached windows (2 + 2 per
 * sequence) and two arrays per build (8 at most), each of a window's rows
 * or of the whole sequence when that is shorter; streaming has none. */
static void test_memory_bound(void **state)
{
	(void)state;
	struct rfs_config c;
	struct rfs_planner *p;
	size_t least;
	make_config(&c, "shuffle", "2", "32", "8"); /* windows of 512 */
	assert_int_equal(rfs_plan_create(&c, all(100000), &p), 0);
	assert_int_equal(rfs_plan_memory_bound(p), (4 + 16) * 512 * 8);
	/* The least, before any limit (what a default cache_mb must hold). */
	assert_int_equal(rfs_plan_least(p), (4 + 2) * 512 * 8);
	/* A budget of 9 windows: 4 cached, 2 builds (of 2 arrays) at once. */
	assert_int_equal(rfs_plan_limit(p, 9 * 512 * 8, &least), 0);
	assert_int_equal(least, (4 + 2) * 512 * 8);
	assert_int_equal(rfs_plan_memory_bound(p), (4 + 4) * 512 * 8);
	/* Less than 4 cached windows and one build: refused, unchanged. */
	assert_int_equal(rfs_plan_limit(p, 6 * 512 * 8 - 1, &least), -ENOSPC);
	assert_int_equal(rfs_plan_memory_bound(p), (4 + 4) * 512 * 8);
	/* With one build at a time, every batch still plans. */
	assert_int_equal(rfs_plan_limit(p, 6 * 512 * 8, &least), 0);
	int64_t *expect = plan_epoch(p, &c, 3);
	free(expect);
	rfs_plan_destroy(p);
	assert_int_equal(rfs_plan_create(&c, all(300), &p), 0);
	assert_int_equal(rfs_plan_memory_bound(p), (4 + 16) * 300 * 8);
	rfs_plan_destroy(p);
	make_config(&c, "streaming", "2", "32", "8");
	assert_int_equal(rfs_plan_create(&c, all(100000), &p), 0);
	assert_int_equal(rfs_plan_memory_bound(p), 0);
	assert_int_equal(rfs_plan_least(p), 0);
	rfs_plan_destroy(p);
}

/* The thread's CPU time: a VM's stolen time or a preemption would
 * count as the planner's on a wall clock. */
static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Average cost of planning a batch whose window is not cached: every call
 * is a new (epoch, window). */
static double plan_cost_us(const char *strategy, uint64_t n)
{
	struct rfs_config c;
	struct rfs_planner *p;
	make_config(&c, strategy, "2", "32", "8");
	assert_int_equal(rfs_plan_create(&c, all(n), &p), 0);
	const struct rfs_layout *l = rfs_plan_layout(p);
	assert_true(l->window == 512);
	const uint64_t windows = (l->batches_per_rank * 64 + 511) / 512;
	const int calls = 200;
	int64_t rows[32];
	double best = 1e300;
	for (int rep = 0; rep < 7; rep++) {
		double t0 = now_us();
		for (int i = 0; i < calls; i++) {
			uint64_t epoch = (uint64_t)(rep * calls + i);
			uint64_t window = ((uint64_t)i * 2654435761u) % windows;
			uint64_t k = window * 8 + (uint64_t)i % 8;
			if (k >= l->batches_per_rank)
				k = l->batches_per_rank - 1;
			assert_int_equal(rfs_plan_batch(p, epoch,
							(uint64_t)i % 2, k,
							rows),
					 0);
			assert_true(rows[0] >= 0 && (uint64_t)rows[0] < n);
		}
		double per = (now_us() - t0) / calls;
		if (per < best)
			best = per;
	}
	rfs_plan_destroy(p);
	return best;
}

static void test_cost_independent_of_n(void **state)
{
	(void)state;
	for (size_t s = 1; s < 3; s++) {
		double small = plan_cost_us(strategies[s], 1000);
		double big = plan_cost_us(strategies[s], UINT64_C(1000000000));
		printf("%s: plan N=1000: %.1f us/batch; N=1000000000: %.1f "
		       "us/batch\n",
		       strategies[s], small, big);
		/* Generous: planning touches one window, never all rows. */
		assert_true(big < 10 * small);
	}
}

static void set(struct rfs_config *c, const char *key, const char *value)
{
	char err[128];
	assert_int_equal(rfs_config_set(c, key, value, err, sizeof(err)), 0);
}

/* Every partition, drop_last 0 and 1: disjoint ranks with equal counts;
 * drop_last=0 serves every row. Counted from the planner's ids. */
static void test_partitions_and_drop_last(void **state)
{
	(void)state;
	static const char *const parts[] = { "batch", "round_robin",
					     "contiguous" };
	const uint64_t n = 1003;
	for (size_t p = 0; p < 3; p++) {
		for (int drop = 0; drop < 2; drop++) {
			struct rfs_config c;
			struct rfs_planner *pl;
			make_config(&c, "block_shuffle", "3", "16", "2");
			set(&c, "partition", parts[p]);
			set(&c, "drop_last", drop ? "1" : "0");
			assert_int_equal(rfs_plan_create(&c, all(n), &pl), 0);
			const struct rfs_layout *l = rfs_plan_layout(pl);
			unsigned *seen = calloc(n, sizeof(*seen));
			int64_t rows[16];
			uint64_t total = 0;
			for (uint64_t r = 0; r < 3; r++) {
				uint64_t mine = 0;
				for (uint64_t k = 0; k < l->batches_per_rank;
				     k++) {
					uint64_t b =
						rfs_partition_batch_rows(l, k);
					assert_int_equal(rfs_plan_batch(pl, 4,
									r, k,
									rows),
							 0);
					for (uint64_t j = 0; j < b; j++)
						seen[rows[j]]++;
					mine += b;
				}
				assert_true(mine == l->per_rank);
				total += mine;
			}
			uint64_t distinct = 0, repeats = 0;
			for (uint64_t i = 0; i < n; i++) {
				distinct += seen[i] > 0;
				repeats += seen[i] > 1 ? seen[i] - 1 : 0;
			}
			if (drop) {
				assert_true(repeats == 0);
				assert_true(total == n / 48 * 48);
			} else {
				assert_true(distinct == n);
				assert_true(total == 3 * ((n + 2) / 3));
				assert_true(repeats == total - n);
			}
			free(seen);
			rfs_plan_destroy(pl);
		}
	}
}

static double one(void *ctx, uint64_t row)
{
	(void)ctx, (void)row;
	return 1.0;
}

/* weighted: window draws sorted, moved in blocks of block_size. */
static void test_weighted_windows_move_sorted_blocks(void **state)
{
	(void)state;
	struct rfs_config c;
	struct rfs_planner *p;
	struct rfs_rowset rows = { .length = 100000 };
	uint64_t bad;
	assert_int_equal(rfs_rowset_set_weights(&rows, one, NULL, &bad), 0);
	make_config(&c, "weighted", "2", "64", "4");
	set(&c, "block_size", "16");
	assert_int_equal(rfs_plan_create(&c, &rows, &p), 0);
	int64_t batch[64];
	uint64_t ascending_blocks = 0, ascending_batches = 0;
	for (uint64_t k = 0; k < 96; k++) {
		assert_int_equal(rfs_plan_batch(p, 0, k % 2, k, batch), 0);
		int sorted = 1;
		for (int b = 0; b < 4; b++) {
			int up = 1;
			for (int j = 1; j < 16; j++)
				up &= batch[b * 16 + j] >=
				      batch[b * 16 + j - 1];
			ascending_blocks += up;
		}
		for (int j = 1; j < 64; j++)
			sorted &= batch[j] >= batch[j - 1];
		ascending_batches += sorted;
	}
	/* Each block of 16 is a run of sorted draws; the blocks are in
	 * random order, so a batch's 4 blocks ascend 1 time in 24. */
	assert_true(ascending_blocks == 4 * 96);
	assert_true(ascending_batches < 16);
	rfs_plan_destroy(p);
	rfs_rowset_free(&rows);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_partitions_and_drop_last),
		cmocka_unit_test(test_weighted_windows_move_sorted_blocks),
		cmocka_unit_test(test_create_and_layout),
		cmocka_unit_test(test_config_is_copied),
		cmocka_unit_test(test_rows_disjoint_and_complete),
		cmocka_unit_test(test_streaming_positions),
		cmocka_unit_test(test_windows_hold_their_rows),
		cmocka_unit_test(test_block_shuffle_batches_mix_blocks),
		cmocka_unit_test(test_deterministic_across_planners),
		cmocka_unit_test(test_epochs_and_seeds_differ),
		cmocka_unit_test(test_elastic_same_global_batches),
		cmocka_unit_test(test_threads_agree),
		cmocka_unit_test(test_threads_build_a_window_once),
		cmocka_unit_test(test_many_windows_at_once),
		cmocka_unit_test(test_memory_bound),
		cmocka_unit_test(test_cost_independent_of_n),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
