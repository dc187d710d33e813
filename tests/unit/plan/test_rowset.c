/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/plan/rowset.c: virtual rows, weights, inverse CDF. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "plan/rowset.h"

static void test_identity_base_and_ranges(void **state)
{
	(void)state;
	struct rfs_rowset all = { .length = 10 };
	for (uint64_t v = 0; v < 10; v++)
		assert_true(rfs_rowset_row(&all, v) == v);

	const uint64_t kept[] = { 3, 4, 9, 20, 21, 22, 40 };
	struct rfs_rowset filtered = { .length = 7, .base = kept };
	assert_true(rfs_rowset_row(&filtered, 3) == 20);

	/* Ranges [1, 3) and [5, 7) of kept: rows 4, 9, 22, 40. */
	uint64_t start[] = { 1, 5 }, prefix[] = { 0, 2, 4 };
	struct rfs_rowset mine = { .length = 4,
				   .base = kept,
				   .nranges = 2,
				   .range_start = start,
				   .range_prefix = prefix };
	const uint64_t want[] = { 4, 9, 22, 40 };
	for (uint64_t v = 0; v < 4; v++)
		assert_true(rfs_rowset_row(&mine, v) == want[v]);

	/* Ranges of the identity: files as row stretches. */
	uint64_t s2[] = { 100, 300, 500 }, p2[] = { 0, 50, 60, 61 };
	struct rfs_rowset files = { .length = 61,
				    .nranges = 3,
				    .range_start = s2,
				    .range_prefix = p2 };
	assert_true(rfs_rowset_row(&files, 0) == 100);
	assert_true(rfs_rowset_row(&files, 49) == 149);
	assert_true(rfs_rowset_row(&files, 50) == 300);
	assert_true(rfs_rowset_row(&files, 59) == 309);
	assert_true(rfs_rowset_row(&files, 60) == 500);
}

static const double weights_table[] = { 0, 2, 0, 0, 1, 1, 0 };

static double table_weight(void *ctx, uint64_t row)
{
	(void)ctx;
	return weights_table[row];
}

static double bad_weight(void *ctx, uint64_t row)
{
	return row == 3 ? *(double *)ctx : 1.0;
}

static void test_draws_follow_weights_exactly(void **state)
{
	(void)state;
	struct rfs_rowset r = { .length = 7 };
	uint64_t bad = 99;
	assert_int_equal(rfs_rowset_set_weights(&r, table_weight, NULL, &bad),
			 0);
	assert_true(r.last_weighted == 5);
	/* u spread evenly over [0, 2^53): the shares are 2:1:1 exactly. */
	uint64_t hist[7] = { 0 };
	const uint64_t steps = 4096; /* 2^12 */
	for (uint64_t i = 0; i < steps; i++)
		hist[rfs_rowset_draw(&r, i << (53 - 12))]++;
	assert_true(hist[1] == steps / 2);
	assert_true(hist[4] == steps / 4 && hist[5] == steps / 4);
	assert_true(hist[0] + hist[2] + hist[3] + hist[6] == 0);
	/* The ends: u = 0 is the first weighted row, the largest u the
	 * last. */
	assert_true(rfs_rowset_draw(&r, 0) == 1);
	assert_true(rfs_rowset_draw(&r, (UINT64_C(1) << 53) - 1) == 5);
	rfs_rowset_free(&r);
	assert_null(r.cdf);
}

static void test_weights_through_base(void **state)
{
	(void)state;
	/* Virtual rows map to ids 1, 4 and 6 of the table. */
	const uint64_t kept[] = { 1, 4, 6 };
	struct rfs_rowset r = { .length = 3, .base = kept };
	uint64_t bad;
	assert_int_equal(rfs_rowset_set_weights(&r, table_weight, NULL, &bad),
			 0);
	assert_true(r.cdf[0] == 2 && r.cdf[1] == 3 && r.cdf[2] == 3);
	assert_true(rfs_rowset_draw(&r, (UINT64_C(1) << 53) - 1) == 1);
	rfs_rowset_free(&r);
}

static double extreme_weight(void *ctx, uint64_t row)
{
	const double *w = ctx;
	return w[row];
}

/* Weights whose sum overflows a double, or that are subnormal, keep
 * their shares: equal weights split u's range evenly. */
static void test_extreme_weights_keep_their_shares(void **state)
{
	(void)state;
	const double huge = 1e308, tiny = 5e-324;
	const double equal_huge[8] = { huge, huge, huge, huge,
				       huge, huge, huge, huge },
		     equal_tiny[8] = { tiny, tiny, tiny, tiny,
				       tiny, tiny, tiny, tiny },
		     two_huge[8] = { huge, huge, 1, 1, 1, 1, 1, 1 };
	const double *cases[] = { equal_huge, equal_tiny };
	for (int c = 0; c < 2; c++) {
		struct rfs_rowset r = { .length = 8 };
		uint64_t bad;
		assert_int_equal(rfs_rowset_set_weights(&r, extreme_weight,
							(void *)cases[c], &bad),
				 0);
		/* The middle of each eighth of [0, 2^53). */
		for (uint64_t k = 0; k < 8; k++)
			assert_true(rfs_rowset_draw(&r, (2 * k + 1) << 49) ==
				    k);
		rfs_rowset_free(&r);
	}
	struct rfs_rowset r = { .length = 8 };
	uint64_t bad;
	assert_int_equal(rfs_rowset_set_weights(&r, extreme_weight,
						(void *)two_huge, &bad),
			 0);
	assert_true(rfs_rowset_draw(&r, UINT64_C(1) << 51) == 0);
	assert_true(rfs_rowset_draw(&r, UINT64_C(3) << 51) == 1);
	rfs_rowset_free(&r);
}

static void test_bad_weights(void **state)
{
	(void)state;
	struct rfs_rowset r = { .length = 5 };
	uint64_t bad = 0;
	double v = -1;
	assert_int_equal(rfs_rowset_set_weights(&r, bad_weight, &v, &bad),
			 -EINVAL);
	assert_true(bad == 3 && !r.cdf);
	v = NAN;
	assert_int_equal(rfs_rowset_set_weights(&r, bad_weight, &v, &bad),
			 -EINVAL);
	assert_true(bad == 3);
	v = INFINITY;
	assert_int_equal(rfs_rowset_set_weights(&r, bad_weight, &v, &bad),
			 -EINVAL);
	struct rfs_rowset zeros = { .length = 3,
				    .base = (uint64_t[]){ 0, 2, 3 } };
	assert_int_equal(rfs_rowset_set_weights(&zeros, table_weight, NULL,
						&bad),
			 -EINVAL);
	assert_true(bad == 3); /* length: every weight is 0 */
	rfs_rowset_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_identity_base_and_ranges),
		cmocka_unit_test(test_draws_follow_weights_exactly),
		cmocka_unit_test(test_weights_through_base),
		cmocka_unit_test(test_bad_weights),
		cmocka_unit_test(test_extreme_weights_keep_their_shares),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
