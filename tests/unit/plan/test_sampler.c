/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/plan/sampler.c: the epoch sequence S_e per strategy. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
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
			const char *block_size, const char *seed)
{
	char err[128];
	rfs_config_init(c);
	assert_int_equal(
		rfs_config_set(c, "strategy", strategy, err, sizeof(err)), 0);
	if (block_size)
		assert_int_equal(rfs_config_set(c, "block_size", block_size,
						err, sizeof(err)),
				 0);
	if (seed)
		assert_int_equal(
			rfs_config_set(c, "seed", seed, err, sizeof(err)), 0);
}

/* S_e as an array; asserts it is a permutation of [0, n). */
static uint64_t *sequence(const struct rfs_config *c, uint64_t n,
			  uint64_t epoch)
{
	struct rfs_sampler s;
	rfs_sampler_init(&s, c, all(n), epoch, 0);
	assert_true(s.length == n);
	uint64_t *seq = malloc(n * sizeof(*seq));
	unsigned char *seen = calloc(n, 1);
	assert_non_null(seq);
	assert_non_null(seen);
	for (uint64_t pos = 0; pos < n; pos++) {
		seq[pos] = rfs_sampler_row(&s, pos);
		if (seq[pos] >= n)
			fail_msg("%s n=%llu: S[%llu] = %llu out of range",
				 rfs_config_strategy_name(c->strategy),
				 (unsigned long long)n, (unsigned long long)pos,
				 (unsigned long long)seq[pos]);
		if (seen[seq[pos]]++)
			fail_msg("%s n=%llu: row %llu twice",
				 rfs_config_strategy_name(c->strategy),
				 (unsigned long long)n,
				 (unsigned long long)seq[pos]);
	}
	free(seen);
	return seq;
}

static const char *const strategies[] = { "streaming", "shuffle",
					  "block_shuffle" };

static void test_every_strategy_is_a_permutation(void **state)
{
	(void)state;
	static const uint64_t ns[] = { 1,   2,	  63,	64,   65,   127,
				       128, 1000, 1024, 4096, 4097, 10000 };
	for (size_t s = 0; s < 3; s++) {
		struct rfs_config c;
		make_config(&c, strategies[s], "64", "5");
		for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
			for (uint64_t epoch = 0; epoch < 3; epoch++)
				free(sequence(&c, ns[i], epoch));
	}
}

static void test_other_block_sizes(void **state)
{
	(void)state;
	static const char *const sizes[] = { "1",    "2",    "3",
					     "7",    "100",  "999",
					     "1000", "1001", "5000" };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct rfs_config c;
		make_config(&c, "block_shuffle", sizes[i], "11");
		for (uint64_t epoch = 0; epoch < 4; epoch++)
			free(sequence(&c, 1000, epoch));
	}
}

static void test_streaming_is_identity(void **state)
{
	(void)state;
	struct rfs_config c;
	make_config(&c, "streaming", NULL, "123");
	for (uint64_t epoch = 0; epoch < 3; epoch++) {
		uint64_t *seq = sequence(&c, 1000, epoch);
		for (uint64_t i = 0; i < 1000; i++)
			assert_true(seq[i] == i);
		free(seq);
	}
	/* Huge N costs nothing. */
	struct rfs_sampler s;
	rfs_sampler_init(&s, &c, all(UINT64_C(1) << 40), 9, 0);
	assert_true(rfs_sampler_row(&s, (UINT64_C(1) << 40) - 1) ==
		    (UINT64_C(1) << 40) - 1);
}

static void test_shuffle_is_not_identity(void **state)
{
	(void)state;
	struct rfs_config c;
	make_config(&c, "shuffle", NULL, NULL);
	uint64_t *seq = sequence(&c, 1000, 0);
	int fixed = 0;
	for (uint64_t i = 0; i < 1000; i++)
		fixed += seq[i] == i;
	assert_true(fixed < 20);
	free(seq);
}

/* Checks the sequence is made of whole blocks: each block of rows
 * [b*bs, min((b+1)*bs, n)) appears as one run of consecutive rows in
 * increasing order. */
static void check_blocks(const uint64_t *seq, uint64_t n, uint64_t bs)
{
	uint64_t pos = 0, blocks = 0;
	int short_seen = 0;
	while (pos < n) {
		uint64_t first = seq[pos];
		if (first % bs != 0)
			fail_msg("position %llu starts mid-block (row %llu)",
				 (unsigned long long)pos,
				 (unsigned long long)first);
		uint64_t len = n - first < bs ? n - first : bs;
		if (len < bs)
			short_seen++;
		for (uint64_t j = 0; j < len; j++) {
			if (pos + j >= n || seq[pos + j] != first + j)
				fail_msg("block at row %llu broken at +%llu",
					 (unsigned long long)first,
					 (unsigned long long)j);
		}
		pos += len;
		blocks++;
	}
	assert_true(blocks == n / bs + (n % bs != 0));
	assert_int_equal(short_seen, n % bs != 0);
}

static void test_block_shuffle_keeps_blocks(void **state)
{
	(void)state;
	static const uint64_t ns[] = { 1000, 1024, 64, 65, 10000, 129 };
	struct rfs_config c;
	make_config(&c, "block_shuffle", "64", "3");
	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		for (uint64_t epoch = 0; epoch < 5; epoch++) {
			uint64_t *seq = sequence(&c, ns[i], epoch);
			check_blocks(seq, ns[i], 64);
			free(seq);
		}
	}
	make_config(&c, "block_shuffle", "7", "3");
	uint64_t *seq = sequence(&c, 1000, 1);
	check_blocks(seq, 1000, 7);
	free(seq);
}

static void test_block_shuffle_moves_blocks(void **state)
{
	(void)state;
	struct rfs_config c;
	make_config(&c, "block_shuffle", "64", NULL);
	uint64_t *seq = sequence(&c, 6400, 0);
	int in_place = 0;
	for (uint64_t b = 0; b < 100; b++)
		in_place += seq[b * 64] == b * 64;
	assert_true(in_place < 10);
	free(seq);
}

static void test_short_block_slot_varies(void **state)
{
	(void)state;
	/* The short block lands at a random slot, so the rows dropped at an
	 * epoch's end differ between epochs. */
	struct rfs_config c;
	make_config(&c, "block_shuffle", "64", "1");
	uint64_t distinct_slots = 0, prev = UINT64_MAX;
	for (uint64_t epoch = 0; epoch < 20; epoch++) {
		struct rfs_sampler s;
		rfs_sampler_init(&s, &c, all(1000), epoch, 0);
		assert_true(s.order.last_block_items == 1000 % 64);
		assert_true(s.order.short_slot < 16);
		/* The short slot holds the last block's first row. */
		assert_true(rfs_sampler_row(&s, s.order.short_slot * 64) ==
			    960);
		distinct_slots += s.order.short_slot != prev;
		prev = s.order.short_slot;
	}
	assert_true(distinct_slots > 5);
}

static int differing(const uint64_t *a, const uint64_t *b, uint64_t n)
{
	int d = 0;
	for (uint64_t i = 0; i < n; i++)
		d += a[i] != b[i];
	return d;
}

static void test_epochs_and_seeds_differ(void **state)
{
	(void)state;
	for (size_t s = 1; s < 3; s++) {
		struct rfs_config c, c2;
		make_config(&c, strategies[s], "64", "9");
		make_config(&c2, strategies[s], "64", "10");
		uint64_t *e0 = sequence(&c, 1000, 0);
		uint64_t *e1 = sequence(&c, 1000, 1);
		uint64_t *e0again = sequence(&c, 1000, 0);
		uint64_t *other_seed = sequence(&c2, 1000, 0);
		assert_true(differing(e0, e1, 1000) > 600);
		assert_true(differing(e0, other_seed, 1000) > 600);
		assert_int_equal(differing(e0, e0again, 1000), 0);
		free(e0);
		free(e1);
		free(e0again);
		free(other_seed);
	}
}

static void test_huge_n_is_cheap(void **state)
{
	(void)state;
	for (size_t s = 1; s < 3; s++) {
		struct rfs_config c;
		make_config(&c, strategies[s], "64", NULL);
		struct rfs_sampler sm;
		const uint64_t n = UINT64_C(1000000000) + 7;
		rfs_sampler_init(&sm, &c, all(n), 4, 0);
		assert_true(sm.length == n);
		for (uint64_t i = 0; i < 1000; i++) {
			uint64_t pos = i * (n / 1000) + i;
			assert_true(rfs_sampler_row(&sm, pos) < n);
		}
		assert_true(rfs_sampler_row(&sm, n - 1) < n);
	}
}

static double linear_weight(void *ctx, uint64_t row)
{
	(void)ctx;
	return row % 4 == 3 ? 0.0 : (double)(row % 4 + 1); /* 1, 2, 3, 0 */
}

static void test_weighted_draws(void **state)
{
	(void)state;
	struct rfs_config c;
	char err[128];
	make_config(&c, "weighted", "64", "5");
	struct rfs_rowset rows = { .length = 4000 };
	uint64_t bad;
	assert_int_equal(
		rfs_rowset_set_weights(&rows, linear_weight, NULL, &bad), 0);
	struct rfs_sampler s;
	rfs_sampler_init(&s, &c, &rows, 0, 0);
	assert_true(s.length == 4000); /* default: the rows */
	uint64_t hist[4] = { 0 };
	for (uint64_t pos = 0; pos < 4000; pos++)
		hist[rfs_sampler_row(&s, pos) % 4]++;
	/* Shares 1:2:3:0 of 4000 draws: within 5 sigma. */
	for (int k = 0; k < 3; k++) {
		double p = (k + 1) / 6.0, mean = 4000 * p;
		double sd = sqrt(4000 * p * (1 - p));
		assert_true(fabs((double)hist[k] - mean) < 5 * sd);
	}
	assert_true(hist[3] == 0);
	/* A draw depends only on (seed, epoch, position). */
	struct rfs_sampler again, other;
	rfs_sampler_init(&again, &c, &rows, 0, 0);
	rfs_sampler_init(&other, &c, &rows, 1, 0);
	uint64_t same = 0;
	for (uint64_t pos = 0; pos < 1000; pos++) {
		assert_true(rfs_sampler_row(&again, 999 - pos) ==
			    rfs_sampler_row(&s, 999 - pos));
		same += rfs_sampler_row(&other, pos) ==
			rfs_sampler_row(&s, pos);
	}
	assert_true(same < 500); /* another epoch draws anew */
	assert_int_equal(
		rfs_config_set(&c, "total_size", "123", err, sizeof(err)), 0);
	rfs_sampler_init(&s, &c, &rows, 0, 0);
	assert_true(s.length == 123);
	rfs_rowset_free(&rows);
}

/* A range of positions gives the rows one position at a time gives, for
 * every strategy (weighted through the same per-position draw). */
static void test_rows_of_a_range(void **state)
{
	(void)state;
	static const char *const all_strategies[] = { "streaming", "shuffle",
						      "block_shuffle",
						      "weighted" };
	struct rfs_rowset rows = { .length = 3001 };
	uint64_t bad;
	assert_int_equal(
		rfs_rowset_set_weights(&rows, linear_weight, NULL, &bad), 0);
	uint64_t out[2000];
	for (size_t i = 0; i < 4; i++) {
		struct rfs_config c;
		make_config(&c, all_strategies[i], "7", "11");
		struct rfs_sampler s;
		rfs_sampler_init(&s, &c, &rows, 2, 0);
		rfs_sampler_rows(&s, 1000, 2000, out);
		for (uint64_t k = 0; k < 2000; k++)
			assert_true(out[k] == rfs_sampler_row(&s, 1000 + k));
		rfs_config_free(&c);
	}
	rfs_rowset_free(&rows);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_weighted_draws),
		cmocka_unit_test(test_every_strategy_is_a_permutation),
		cmocka_unit_test(test_other_block_sizes),
		cmocka_unit_test(test_streaming_is_identity),
		cmocka_unit_test(test_shuffle_is_not_identity),
		cmocka_unit_test(test_block_shuffle_keeps_blocks),
		cmocka_unit_test(test_block_shuffle_moves_blocks),
		cmocka_unit_test(test_short_block_slot_varies),
		cmocka_unit_test(test_epochs_and_seeds_differ),
		cmocka_unit_test(test_huge_n_is_cheap),
		cmocka_unit_test(test_rows_of_a_range),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
