/* Unit tests for lib/budget.c: every share of cache_mb from one split. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>

#include "bigbuf.h"
#include "budget.h"

#define MIB ((size_t)1 << 20)

static void test_default_shares(void **state)
{
	(void)state;
	struct rfs_budget b;
	assert_int_equal(rfs_budget_split(1024, 0, &b), 0);
	assert_true(b.total == 1024 * MIB);
	assert_true(b.chunks == 512 * MIB);
	assert_true(b.plan_limit == 256 * MIB);
	assert_true(b.plan == 0);
	assert_true(b.batches == 512 * MIB);
	assert_true(b.prefetch == 256 * MIB);
	assert_true(b.pool == RFS_BIGBUF_POOL_MAX); /* an eighth, capped */
	/* The planner's bound comes out of the batches' half. */
	assert_int_equal(rfs_budget_split(1024, 10 * MIB, &b), 0);
	assert_true(b.plan == 10 * MIB);
	assert_true(b.batches == 502 * MIB);
	assert_true(b.prefetch == 251 * MIB);
	assert_true(b.chunks + b.plan + b.batches == b.total);
}

static void test_small_and_odd(void **state)
{
	(void)state;
	struct rfs_budget b;
	assert_int_equal(rfs_budget_split(16, 0, &b), 0);
	assert_true(b.pool == 2 * MIB); /* an eighth, under the cap */
	assert_int_equal(rfs_budget_split(1, 3, &b), 0);
	assert_true(b.chunks == MIB / 2 && b.plan_limit == MIB / 4);
	assert_true(b.batches == MIB / 2 - 3);
	assert_true(b.prefetch == (MIB / 2 - 3) / 2);
	assert_true(b.chunks + b.plan + b.batches == b.total);
}

static void test_refused(void **state)
{
	(void)state;
	struct rfs_budget b = { .total = 7 };
	/* The planner over its limit: nothing written. */
	assert_int_equal(rfs_budget_split(4, 1 * MIB + 1, &b), -EINVAL);
	assert_true(b.total == 7);
	assert_int_equal(rfs_budget_split(4, 1 * MIB, &b), 0);
	assert_int_equal(rfs_budget_split(UINT64_MAX, 0, &b), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_default_shares),
		cmocka_unit_test(test_small_and_odd),
		cmocka_unit_test(test_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
