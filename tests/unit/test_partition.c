/* Unit tests for lib/partition.c: global batches and rank slices. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "partition.h"

static void make_config(struct rfs_config *c, const char *world,
			const char *batch, const char *fetch)
{
	char err[128];
	rfs_config_init(c);
	assert_int_equal(rfs_config_set(c, "world_size", world, err,
					sizeof(err)),
			 0);
	assert_int_equal(rfs_config_set(c, "batch_size", batch, err,
					sizeof(err)),
			 0);
	assert_int_equal(rfs_config_set(c, "fetch_factor", fetch, err,
					sizeof(err)),
			 0);
}

static void test_layout_numbers(void **state)
{
	(void)state;
	struct rfs_config c;
	struct rfs_layout l;
	make_config(&c, "4", "32", "8");
	assert_int_equal(rfs_partition_layout(&c, 1000, &l), 0);
	assert_true(l.length == 1000);
	assert_true(l.global_batch == 128);
	assert_true(l.window == 1024);
	assert_true(l.batches_per_rank == 7); /* floor(1000 / 128) */

	/* Exact multiple. */
	assert_int_equal(rfs_partition_layout(&c, 1280, &l), 0);
	assert_true(l.batches_per_rank == 10);
	/* One row short of the next batch. */
	assert_int_equal(rfs_partition_layout(&c, 1279, &l), 0);
	assert_true(l.batches_per_rank == 9);

	/* Defaults: 1 x 256, fetch_factor 16. */
	rfs_config_init(&c);
	assert_int_equal(rfs_partition_layout(&c, UINT64_C(1000000000), &l),
			 0);
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
	assert_int_equal(rfs_partition_layout(&c, UINT64_MAX, &l), 0);
	assert_true(l.global_batch == g);
	assert_true(l.window == g << 16);
	assert_true(l.batches_per_rank == UINT64_MAX / g);
	assert_int_equal(rfs_partition_layout(&c, g - 1, &l), -EINVAL);
	assert_int_equal(rfs_partition_layout(&c, g, &l), 0);
	assert_true(l.batches_per_rank == 1);
}

static void test_fewer_rows_than_global_batch(void **state)
{
	(void)state;
	struct rfs_config c;
	struct rfs_layout l;
	make_config(&c, "2", "32", "8");
	assert_int_equal(rfs_partition_layout(&c, 63, &l), -EINVAL);
	assert_true(l.batches_per_rank == 0);
	assert_int_equal(rfs_partition_layout(&c, 0, &l), -EINVAL);
	assert_int_equal(rfs_partition_layout(&c, 1, &l), -EINVAL);
	assert_int_equal(rfs_partition_layout(&c, 64, &l), 0);
	assert_true(l.batches_per_rank == 1);
	make_config(&c, "1", "1", "1");
	assert_int_equal(rfs_partition_layout(&c, 0, &l), -EINVAL);
	assert_int_equal(rfs_partition_layout(&c, 1, &l), 0);
	assert_true(l.batches_per_rank == 1);
	assert_true(l.window == 1);
}

static void test_positions_formula(void **state)
{
	(void)state;
	struct rfs_config c;
	make_config(&c, "3", "5", "2");
	/* position = batch * G + rank * B + j, with G = 15, B = 5. */
	assert_true(rfs_partition_position(&c, 0, 0, 0) == 0);
	assert_true(rfs_partition_position(&c, 0, 0, 4) == 4);
	assert_true(rfs_partition_position(&c, 1, 0, 0) == 5);
	assert_true(rfs_partition_position(&c, 2, 0, 4) == 14);
	assert_true(rfs_partition_position(&c, 0, 1, 0) == 15);
	assert_true(rfs_partition_position(&c, 2, 7, 3) == 7 * 15 + 10 + 3);
	for (uint64_t k = 0; k < 10; k++)
		for (uint64_t r = 0; r < 3; r++)
			for (uint64_t j = 0; j < 5; j++)
				assert_true(rfs_partition_position(&c, r, k, j) ==
					    k * 15 + r * 5 + j);
}

static void test_positions_tile_the_epoch(void **state)
{
	(void)state;
	/* Over all ranks and batches, positions cover [0, bpr * G) once. */
	struct rfs_config c;
	struct rfs_layout l;
	make_config(&c, "4", "8", "3");
	assert_int_equal(rfs_partition_layout(&c, 1000, &l), 0);
	uint64_t covered = l.batches_per_rank * l.global_batch;
	unsigned char *seen = calloc(covered, 1);
	assert_non_null(seen);
	for (uint64_t r = 0; r < c.world_size; r++)
		for (uint64_t k = 0; k < l.batches_per_rank; k++)
			for (uint64_t j = 0; j < c.batch_size; j++) {
				uint64_t p = rfs_partition_position(&c, r, k, j);
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
			make_config(&c, splits[s][0], splits[s][1], "1");
			uint64_t expect = k * 64;
			for (uint64_t r = 0; r < c.world_size; r++)
				for (uint64_t j = 0; j < c.batch_size; j++)
					assert_true(rfs_partition_position(
							    &c, r, k, j) ==
						    expect++);
		}
	}
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
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
