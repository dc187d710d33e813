/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/serve/budget.c: cache_mb settled once, every share of
 * it from one split. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/bigbuf.h"
#include "serve/budget.h"

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

/* A cache_mb not given yields to what the mount claims, down to the
 * least it needs: cache_mb + 32 MiB + the claims <= the limit. */
static void test_default_yields_to_claims(void **state)
{
	(void)state;
	uint64_t mb, least;
	struct rfs_budget_claims c = { .default_mb = 112,
				       .limit = 256 * MIB,
				       .claimed = 100 * MIB };
	assert_int_equal(rfs_budget_default(&c, &mb, &least), 0);
	assert_true(mb == 112 && least == 1); /* the default left */
	c.claimed = 128 * MIB; /* more than half the limit */
	assert_int_equal(rfs_budget_default(&c, &mb, &least), 0);
	assert_true(mb == 96);
	c.claimed = 128 * MIB + 1; /* whole MiB */
	assert_int_equal(rfs_budget_default(&c, &mb, &least), 0);
	assert_true(mb == 95);
	/* The least: the windows' 10 MiB in a quarter, a batch of 8 MiB in
	 * an eighth (the prefetch room beside the planner's limit). */
	c.plan_least = 10 * MIB;
	assert_int_equal(rfs_budget_default(&c, &mb, &least), 0);
	assert_true(mb == 95 && least == 40);
	c.batch_cost = 8 * MIB;
	assert_int_equal(rfs_budget_default(&c, &mb, &least), 0);
	assert_true(mb == 95 && least == 64);
	struct rfs_budget b;
	assert_int_equal(rfs_budget_split(least, 0, &b), 0);
	assert_true(b.plan_limit >= 10 * MIB);
	assert_int_equal(rfs_budget_split(least, b.plan_limit, &b), 0);
	assert_true(b.prefetch >= 8 * MIB);
	assert_int_equal(rfs_budget_split(least - 1, 0, &b), 0);
	assert_int_equal(rfs_budget_split(least - 1, b.plan_limit, &b), 0);
	assert_true(b.prefetch < 8 * MIB);
	c.claimed = 161 * MIB; /* leaves 63 */
	assert_int_equal(rfs_budget_default(&c, &mb, &least), -ENOSPC);
	assert_true(mb == 63 && least == 64);
	c.claimed = 300 * MIB; /* none left */
	assert_int_equal(rfs_budget_default(&c, &mb, &least), -ENOSPC);
	assert_true(mb == 0);
	/* Not lowered, not refused: a default below the least is the
	 * mount's own checks' (prefetch off, or the windows refused). */
	c.default_mb = 16;
	c.claimed = 10 * MIB;
	assert_int_equal(rfs_budget_default(&c, &mb, &least), 0);
	assert_true(mb == 16);
	/* No limit known: the default. */
	c = (struct rfs_budget_claims){ .default_mb = 1024,
					.limit = UINT64_MAX,
					.claimed = UINT64_C(1) << 40 };
	assert_int_equal(rfs_budget_default(&c, &mb, &least), 0);
	assert_true(mb == 1024);
	/* Nothing holds a batch this big. */
	c.batch_cost = SIZE_MAX;
	assert_int_equal(rfs_budget_default(&c, &mb, &least), 0);
	assert_true(least == UINT64_MAX);
}

/* Settled once the claims are known, cache_mb is set aside whole for any
 * claim after it: a default yields to the claims at their most, a given
 * one stays; a default that cannot hold what the mount needs fails it,
 * naming the claims, the limit and that least. */
static void test_settle(void **state)
{
	(void)state;
	struct rfs_memlimit l = { .bytes = 256 * MIB, .where = "the test's" };
	uint64_t held = 0, mb = 112, later = 0;
	char err[1024] = "", want[1024];
	struct rfs_claims *c;
	assert_int_equal(rfs_claims_create(&l, &c), 0);
	rfs_memlimit_reserve(c, mb, 0); /* rfs_budget_fit()'s, for a default */
	assert_int_equal(rfs_memlimit_claim(c, "f", "lab", 128 * MIB + 1, 1,
					    &held, err, sizeof(err)),
			 0);
	/* Windows of 40 MiB need a quarter of 160. */
	assert_int_equal(rfs_budget_settle(c, &mb, 0, &l, 40 * MIB, 0, err,
					   sizeof(err)),
			 -ENOMEM);
	snprintf(want, sizeof(want),
		 "the mount's claims, 129 MiB at most at once (the biggest: f: "
		 "lab, 129 MiB), leave 95 MiB of the 256 MiB of the test's "
		 "beside the daemon's own %d MiB, less than the cache_mb=160 "
		 "it needs for its fetch windows and a prefetched batch; raise "
		 "the limit, or lower batch_size or fetch_factor",
		 RFS_MEMLIMIT_OVERHEAD_MB);
	assert_string_equal(err, want);
	mb = 112;
	assert_int_equal(
		rfs_budget_settle(c, &mb, 0, &l, 0, 0, err, sizeof(err)), 0);
	assert_true(mb == 95);
	/* Set aside: what is left beside it is under a MiB. */
	assert_int_equal(rfs_memlimit_claim(c, "f", "more", MIB, 1, &later, err,
					    sizeof(err)),
			 -ENOMEM);
	assert_non_null(strstr(err, "cache_mb=95 with the daemon's own"));
	mb = 112;
	assert_int_equal(
		rfs_budget_settle(c, &mb, 1, &l, 0, 0, err, sizeof(err)), 0);
	assert_true(mb == 112);
	rfs_memlimit_release(c, &held);
	rfs_claims_destroy(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_default_shares),
		cmocka_unit_test(test_small_and_odd),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_default_yields_to_claims),
		cmocka_unit_test(test_settle),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
