/* Unit tests for lib/stats.c: per-rank counters and generation times. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"

/* noinline: inlined at -O3, gcc 12 takes the returned string for a
 * pointer to the local `out` (-Wdangling-pointer). */
__attribute__((noinline)) static char *render(struct rfs_stats *s)
{
	struct rfs_buf b = { 0 };
	char *out;
	size_t len;
	rfs_buf_printf(&b, "{\n");
	rfs_stats_render_json(s, &b);
	rfs_buf_printf(&b, "\n}\n");
	assert_int_equal(rfs_buf_finish(&b, &out, &len), 0);
	return out;
}

static void test_counters_per_rank(void **state)
{
	(void)state;
	struct rfs_stats *s;
	assert_int_equal(rfs_stats_create(3, &s), 0);
	char *j = render(s);
	assert_non_null(strstr(j, "\"batches_served\": 0"));
	assert_non_null(strstr(j, "\"last_opened\": null"));
	assert_non_null(strstr(j, "\"p50_ms\": -1.000"));
	free(j);

	rfs_stats_batch_opened(s, 2, 4, 17, 256);
	rfs_stats_batch_opened(s, 2, 4, 18, 256);
	rfs_stats_bytes_served(s, 2, 1000);
	rfs_stats_first_read(s, 2, RFS_FOUND_READY, 0);
	rfs_stats_first_read(s, 2, RFS_FOUND_GENERATED, 2000000000);
	j = render(s);
	assert_non_null(strstr(j, "\"batches_served\": 2,"));
	assert_non_null(strstr(j, "\"rank\": 2, \"batches_served\": 2, "
				  "\"bytes_served\": 1000"));
	assert_non_null(strstr(j, "\"last_opened\": {\"epoch\": 4, "
				  "\"batch\": 18"));
	assert_non_null(strstr(j, "\"first_reads\": {\"ready\": 1, "
				  "\"waited\": 0, \"generated\": 1}, "
				  "\"ready_rate\": 0.500, \"wait_s\": 2.000}"));
	free(j);
	rfs_stats_destroy(s);
}

static void test_generation_quantiles(void **state)
{
	(void)state;
	struct rfs_stats *s;
	assert_int_equal(rfs_stats_create(1, &s), 0);
	/* 98 batches of 1 ms, 2 of 100 ms: p50 near 1, p99 near 100. */
	for (int i = 0; i < 98; i++)
		rfs_stats_generated(s, 1000000);
	rfs_stats_generated(s, 100000000);
	rfs_stats_generated(s, 100000000);
	char *j = render(s);
	char *g = strstr(j, "\"generation\"");
	assert_non_null(g);
	double p50, p99;
	unsigned long long n;
	assert_int_equal(sscanf(g, "\"generation\": {\"batches\": %llu, "
				   "\"p50_ms\": %lf, \"p99_ms\": %lf",
				&n, &p50, &p99),
			 3);
	assert_true(n == 100);
	assert_true(p50 >= 1.0 && p50 < 1.19 * 1.0001);
	assert_true(p99 >= 100.0 && p99 < 119.0);
	free(j);
	rfs_stats_destroy(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counters_per_rank),
		cmocka_unit_test(test_generation_quantiles),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
