/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/plan/partition.c: global batches and rank slices. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "plan/partition.h"

static void set(struct rfs_config *c, const char *key, const char *value)
{
	char err[128];
	assert_int_equal(rfs_config_set(c, key, value, err, sizeof(err)), 0);
}

static void make_config(struct rfs_config *c, const char *world,
			const char *batch, const char *fetch)
{
	char err[128];
	rfs_config_init(c);
	assert_int_equal(
		rfs_config_set(c, "world_size", world, err, sizeof(err)), 0);
	assert_int_equal(
		rfs_config_set(c, "batch_size", batch, err, sizeof(err)), 0);
	assert_int_equal(
		rfs_config_set(c, "fetch_factor", fetch, err, sizeof(err)), 0);
}

/* Layout of a single sequence of length n. */
static int layout1(const struct rfs_config *c, uint64_t n, struct rfs_layout *l)
{
	return rfs_partition_layout(c, &n, l);
}

static uint64_t position(const struct rfs_config *c, const struct rfs_layout *l,
			 uint64_t rank, uint64_t batch, uint64_t j)
{
	uint64_t seq, pos;
	rfs_partition_locate(c, l, rank, batch, j, &seq, &pos);
	assert_true(seq == (c->partition == RFS_PARTITION_FILE ? rank : 0));
	return pos;
}

static void test_layout_numbers(void **state)
{
	(void)state;
	struct rfs_config c;
	struct rfs_layout l;
	make_config(&c, "4", "32", "8");
	assert_int_equal(layout1(&c, 1000, &l), 0);
	assert_true(l.sequences == 1 && l.batch_size == 32);
	assert_true(l.global_batch == 128);
	assert_true(l.per_rank == 7 * 32 && l.last_batch == 32);
	assert_true(l.window == 1024);
	assert_true(l.batches_per_rank == 7); /* floor(1000 / 128) */

	/* Exact multiple. */
	assert_int_equal(layout1(&c, 1280, &l), 0);
	assert_true(l.batches_per_rank == 10);
	/* One row short of the next batch. */
	assert_int_equal(layout1(&c, 1279, &l), 0);
	assert_true(l.batches_per_rank == 9);

	/* Defaults: 1 x 256, fetch_factor 16. */
	rfs_config_init(&c);
	assert_int_equal(layout1(&c, UINT64_C(1000000000), &l), 0);
	assert_true(l.global_batch == 256);
	assert_true(l.window == 4096);
	assert_true(l.batches_per_rank == UINT64_C(1000000000) / 256);
}

static void test_layout_extremes(void **state)
{
	(void)state;
	/* The largest options: products still fit 64 bits. */
	struct rfs_config c;
	struct rfs_layout l;
	make_config(&c, "1048576", "16777216", "65536");
	uint64_t g = UINT64_C(1) << 44;
	assert_int_equal(layout1(&c, UINT64_MAX, &l), 0);
	assert_true(l.global_batch == g);
	assert_true(l.window == g << 16);
	assert_true(l.batches_per_rank == UINT64_MAX / g);
	assert_int_equal(layout1(&c, g - 1, &l), -EINVAL);
	assert_int_equal(layout1(&c, g, &l), 0);
	assert_true(l.batches_per_rank == 1);
}

static void test_fewer_rows_than_global_batch(void **state)
{
	(void)state;
	struct rfs_config c;
	struct rfs_layout l;
	make_config(&c, "2", "32", "8");
	assert_int_equal(layout1(&c, 63, &l), -EINVAL);
	assert_true(l.batches_per_rank == 0);
	assert_int_equal(layout1(&c, 0, &l), -EINVAL);
	assert_int_equal(layout1(&c, 1, &l), -EINVAL);
	assert_int_equal(layout1(&c, 64, &l), 0);
	assert_true(l.batches_per_rank == 1);
	make_config(&c, "1", "1", "1");
	assert_int_equal(layout1(&c, 0, &l), -EINVAL);
	assert_int_equal(layout1(&c, 1, &l), 0);
	assert_true(l.batches_per_rank == 1);
	assert_true(l.window == 1);
}

static void test_positions_formula(void **state)
{
	(void)state;
	struct rfs_config c;
	make_config(&c, "3", "5", "2");
	/* position = batch * G + rank * B + j, with G = 15, B = 5. */
	struct rfs_layout l;
	assert_int_equal(layout1(&c, 150, &l), 0);
	assert_true(position(&c, &l, 0, 0, 0) == 0);
	assert_true(position(&c, &l, 0, 0, 4) == 4);
	assert_true(position(&c, &l, 1, 0, 0) == 5);
	assert_true(position(&c, &l, 2, 0, 4) == 14);
	assert_true(position(&c, &l, 0, 1, 0) == 15);
	assert_true(position(&c, &l, 2, 7, 3) == 7 * 15 + 10 + 3);
	for (uint64_t k = 0; k < 10; k++)
		for (uint64_t r = 0; r < 3; r++)
			for (uint64_t j = 0; j < 5; j++)
				assert_true(position(&c, &l, r, k, j) ==
					    k * 15 + r * 5 + j);
	/* round_robin: the rank's i-th row is position i * W + R. */
	set(&c, "partition", "round_robin");
	assert_int_equal(layout1(&c, 150, &l), 0);
	for (uint64_t k = 0; k < 10; k++)
		for (uint64_t r = 0; r < 3; r++)
			for (uint64_t j = 0; j < 5; j++)
				assert_true(position(&c, &l, r, k, j) ==
					    (k * 5 + j) * 3 + r);
	/* contiguous: rank R starts at R * per_rank. */
	set(&c, "partition", "contiguous");
	assert_int_equal(layout1(&c, 152, &l), 0);
	assert_true(l.per_rank == 50);
	assert_true(position(&c, &l, 2, 3, 1) == 100 + 16);
}

static void test_positions_tile_the_epoch(void **state)
{
	(void)state;
	/* Over all ranks and batches, positions cover [0, bpr * G) once. */
	struct rfs_config c;
	struct rfs_layout l;
	make_config(&c, "4", "8", "3");
	assert_int_equal(layout1(&c, 1000, &l), 0);
	uint64_t covered = l.batches_per_rank * l.global_batch;
	unsigned char *seen = calloc(covered, 1);
	assert_non_null(seen);
	for (uint64_t r = 0; r < c.world_size; r++)
		for (uint64_t k = 0; k < l.batches_per_rank; k++)
			for (uint64_t j = 0; j < c.batch_size; j++) {
				uint64_t p = position(&c, &l, r, k, j);
				assert_true(p < covered);
				assert_int_equal(seen[p]++, 0);
			}
	free(seen);
}

static void test_same_global_batch_for_same_g(void **state)
{
	(void)state;
	/* Global batch k covers the same positions whatever the split. */
	static const char *const splits[][2] = {
		{ "1", "64" }, { "2", "32" }, { "4", "16" }, { "64", "1" }
	};
	for (uint64_t k = 0; k < 5; k++) {
		for (size_t s = 0; s < 4; s++) {
			struct rfs_config c;
			struct rfs_layout l;
			make_config(&c, splits[s][0], splits[s][1], "1");
			assert_int_equal(layout1(&c, 640, &l), 0);
			uint64_t expect = k * 64;
			for (uint64_t r = 0; r < c.world_size; r++)
				for (uint64_t j = 0; j < c.batch_size; j++)
					assert_true(position(&c, &l, r, k, j) ==
						    expect++);
		}
	}
}

static const char *const partitions[] = { "batch", "round_robin",
					  "contiguous" };

/* drop_last=1: every partition serves distinct positions below n, the
 * same count on every rank. */
static void test_every_partition_tiles(void **state)
{
	(void)state;
	static const uint64_t ns[] = { 24, 25, 47, 1000 };
	for (size_t p = 0; p < 3; p++) {
		for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
			struct rfs_config c;
			struct rfs_layout l;
			make_config(&c, "3", "4", "2");
			set(&c, "partition", partitions[p]);
			assert_int_equal(layout1(&c, ns[i], &l), 0);
			assert_true(l.batches_per_rank == ns[i] / 12);
			assert_true(l.last_batch == 4);
			unsigned char *seen = calloc(ns[i], 1);
			for (uint64_t r = 0; r < 3; r++)
				for (uint64_t k = 0; k < l.batches_per_rank;
				     k++)
					for (uint64_t j = 0; j < 4; j++) {
						uint64_t pos = position(
							&c, &l, r, k, j);
						assert_true(pos < ns[i]);
						assert_int_equal(seen[pos]++,
								 0);
					}
			free(seen);
		}
	}
}

/* drop_last=0: ceil(n / W) rows per rank, ceil(n / (W B)) batches, the
 * last one partial and equal on every rank; wrapped positions cover every
 * one of the n at least once and repeat fewer than W. */
static void test_drop_last_0_covers_everything(void **state)
{
	(void)state;
	static const uint64_t ns[] = { 12, 13, 23, 24, 25, 100, 1001 };
	for (size_t p = 0; p < 3; p++) {
		for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
			struct rfs_config c;
			struct rfs_layout l;
			uint64_t n = ns[i];
			make_config(&c, "3", "4", "2");
			set(&c, "partition", partitions[p]);
			set(&c, "drop_last", "0");
			assert_int_equal(layout1(&c, n, &l), 0);
			uint64_t per_rank = (n + 2) / 3;
			assert_true(l.per_rank == per_rank);
			assert_true(l.batches_per_rank == (n + 11) / 12);
			assert_true(l.last_batch ==
				    per_rank - (l.batches_per_rank - 1) * 4);
			assert_true(l.last_batch >= 1 && l.last_batch <= 4);
			unsigned *seen = calloc(n, sizeof(*seen));
			uint64_t total = 0;
			for (uint64_t r = 0; r < 3; r++)
				for (uint64_t k = 0; k < l.batches_per_rank;
				     k++) {
					uint64_t rows =
						rfs_partition_batch_rows(&l, k);
					for (uint64_t j = 0; j < rows; j++) {
						seen[position(&c, &l, r, k, j) %
						     n]++;
						total++;
					}
				}
			assert_true(total == 3 * per_rank);
			for (uint64_t x = 0; x < n; x++)
				assert_true(seen[x] >= 1 && seen[x] <= 2);
			assert_true(total - n < 3);
			free(seen);
		}
	}
}

static void test_file_partition_layout(void **state)
{
	(void)state;
	struct rfs_config c;
	struct rfs_layout l;
	const uint64_t lengths[] = { 100, 37, 64 };
	make_config(&c, "3", "10", "2");
	set(&c, "partition", "file");
	assert_true(rfs_partition_sequences(&c) == 3);
	assert_int_equal(rfs_partition_layout(&c, lengths, &l), 0);
	/* The shortest rank decides: floor(37 / 10) batches. */
	assert_true(l.sequences == 3 && l.batches_per_rank == 3);
	assert_true(l.window == 20 && l.per_rank == 30);
	assert_true(position(&c, &l, 2, 1, 3) == 13);
	set(&c, "drop_last", "0");
	assert_int_equal(rfs_partition_layout(&c, lengths, &l), 0);
	/* The longest rank decides; shorter ones wrap around. */
	assert_true(l.per_rank == 100 && l.batches_per_rank == 10);
	assert_true(l.last_batch == 10);
	const uint64_t short_rank[] = { 100, 9, 64 };
	assert_int_equal(rfs_partition_layout(&c, short_rank, &l), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layout_numbers),
		cmocka_unit_test(test_layout_extremes),
		cmocka_unit_test(test_fewer_rows_than_global_batch),
		cmocka_unit_test(test_positions_formula),
		cmocka_unit_test(test_positions_tile_the_epoch),
		cmocka_unit_test(test_same_global_batch_for_same_g),
		cmocka_unit_test(test_every_partition_tiles),
		cmocka_unit_test(test_drop_last_0_covers_everything),
		cmocka_unit_test(test_file_partition_layout),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
