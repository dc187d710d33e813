/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/serve/stats.c: per-rank counters, rates and generation
 * times. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve/stats.h"

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
	assert_non_null(strstr(j, "\"p50_ms\": null, \"p99_ms\": null"));
	free(j);

	rfs_stats_batch_opened(s, 2, 4, 17, 256, rfs_stats_now_ns());
	rfs_stats_batch_opened(s, 2, 4, 18, 256, rfs_stats_now_ns());
	rfs_stats_bytes_served(s, 2, 1000);
	rfs_stats_first_read(s, 2, RFS_CACHE_READY, 0);
	rfs_stats_first_read(s, 2, RFS_CACHE_FILLED, 2000000000);
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

struct opener {
	struct rfs_stats *stats;
	atomic_int stop;
};

/* Opens batch i of epoch i, i = 0, 1, ... */
static void *open_batches(void *arg)
{
	struct opener *o = arg;
	for (uint64_t i = 0; !atomic_load(&o->stop); i++)
		rfs_stats_batch_opened(o->stats, 0, i, i, 1,
				       rfs_stats_now_ns());
	return NULL;
}

#define LAST_OPENED                                            \
	"\"last_opened\": {\"epoch\": %llu, \"batch\": %llu, " \
	"\"seconds_ago\": %llu"

/* Rendered while a rank opens batches, across a second's turn: the last
 * open is one open (its epoch and batch agree) and never in the future
 * (seconds_ago wrapped to 2^64 - 1 for an open after the render began). */
static void test_last_open_is_one_snapshot(void **state)
{
	(void)state;
	struct opener o = { 0 };
	assert_int_equal(rfs_stats_create(1, &o.stats), 0);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, open_batches, &o), 0);
	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	int renders = 0;
	do {
		char *j = render(o.stats);
		const char *at = strstr(j, "\"last_opened\": {");
		unsigned long long epoch, batch, ago;
		if (at) {
			assert_int_equal(sscanf(at, LAST_OPENED, &epoch, &batch,
						&ago),
					 3);
			assert_true(epoch == batch);
			/* Not 2^64 - 1, nor the time since boot (an open
			 * counted before its time was set). */
			assert_true(ago < 10);
			renders++;
		}
		free(j);
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (now.tv_sec < start.tv_sec + 2); /* a turn of the second */
	atomic_store(&o.stop, 1);
	pthread_join(t, NULL);
	assert_true(renders > 0);
	rfs_stats_destroy(o.stats);
}

/* A failed generation: the rank's last one is shown, its why escaped as
 * JSON; other ranks show null. */
static void test_last_error(void **state)
{
	(void)state;
	struct rfs_stats *s;
	assert_int_equal(rfs_stats_create(2, &s), 0);
	rfs_stats_failed(s, 1, "epoch/0/rank/1/batch/000003.npy", "earlier");
	rfs_stats_failed(s, 1, "epoch/0/rank/1/batch/000004.npy",
			 "source \"a\nb.h5\" changed");
	char *j = render(s);
	assert_non_null(strstr(j, "\"rank\": 0, "));
	assert_non_null(strstr(j, "\"last_error\": null, "));
	assert_non_null(
		strstr(j, "\"last_error\": {\"path\": "
			  "\"epoch/0/rank/1/batch/000004.npy\", \"error\": "
			  "\"source \\\"a\\u000ab.h5\\\" changed\", "
			  "\"seconds_ago\": 0}, "));
	assert_null(strstr(j, "earlier"));
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
	assert_int_equal(sscanf(g,
				"\"generation\": {\"batches\": %llu, "
				"\"p50_ms\": %lf, \"p99_ms\": %lf",
				&n, &p50, &p99),
			 3);
	assert_true(n == 100);
	assert_true(p50 >= 1.0 && p50 < 1.19 * 1.0001);
	assert_true(p99 >= 100.0 && p99 < 119.0);
	free(j);
	rfs_stats_destroy(s);
}

#define S UINT64_C(1000000000)

/* rank's epoch rate members as rendered, from "epoch_rows_per_s". */
static void expect_epoch_rate(struct rfs_stats *s, int rank, const char *want)
{
	char *j = render(s), key[32];
	snprintf(key, sizeof(key), "{\"rank\": %d,", rank);
	const char *at = strstr(j, key);
	assert_non_null(at);
	at = strstr(at, "\"epoch_rows_per_s\"");
	assert_non_null(at);
	if (strncmp(at, want, strlen(want)) != 0)
		fail_msg("rank %d: %.120s, expected %s", rank, at, want);
	free(j);
}

/* The rate over the last epoch's opens: rows after the first open, over
 * the time from the first open to the last; it stays when the reader
 * stops (rows_per_s falls to 0), and a new epoch's shows from its second
 * open. */
static void test_epoch_rate(void **state)
{
	(void)state;
	struct rfs_stats *s;
	uint64_t t = 1000 * S;
	assert_int_equal(rfs_stats_create(2, &s), 0);
	expect_epoch_rate(s, 1,
			  "\"epoch_rows_per_s\": null, \"epoch_rate\": null, "
			  "\"last_opened\": null");
	rfs_stats_batch_opened(s, 1, 2, 0, 256, t);
	expect_epoch_rate(s, 1, "\"epoch_rows_per_s\": null, ");
	/* 512 rows after the first open, in 1 s. */
	rfs_stats_batch_opened(s, 1, 2, 1, 256, t + S / 2);
	rfs_stats_batch_opened(s, 1, 2, 2, 256, t + S);
	expect_epoch_rate(s, 1,
			  "\"epoch_rows_per_s\": 512.0, \"epoch_rate\": "
			  "{\"epoch\": 2, \"batches\": 3, \"seconds\": 1.000}");
	/* The next epoch's first open: epoch 2 is still shown. */
	rfs_stats_batch_opened(s, 1, 3, 0, 256, t + 2 * S);
	expect_epoch_rate(s, 1,
			  "\"epoch_rows_per_s\": 512.0, \"epoch_rate\": "
			  "{\"epoch\": 2, ");
	/* Its second: epoch 3, 100 rows in 0.25 s (a short last batch). */
	rfs_stats_batch_opened(s, 1, 3, 1, 100, t + 2 * S + S / 4);
	expect_epoch_rate(s, 1,
			  "\"epoch_rows_per_s\": 400.0, \"epoch_rate\": "
			  "{\"epoch\": 3, \"batches\": 2, \"seconds\": 0.250}");
	/* A single open of another epoch (a cat while training) shows no
	 * rate: epoch 3's stays shown, then a new span of epoch 3 starts. */
	rfs_stats_batch_opened(s, 1, 0, 7, 256, t + 3 * S);
	rfs_stats_batch_opened(s, 1, 3, 2, 256, t + 4 * S);
	expect_epoch_rate(s, 1,
			  "\"epoch_rows_per_s\": 400.0, \"epoch_rate\": "
			  "{\"epoch\": 3, \"batches\": 2, ");
	rfs_stats_batch_opened(s, 1, 3, 3, 256, t + 6 * S);
	expect_epoch_rate(s, 1,
			  "\"epoch_rows_per_s\": 128.0, \"epoch_rate\": "
			  "{\"epoch\": 3, \"batches\": 2, \"seconds\": 2.000}");
	/* Per rank. */
	expect_epoch_rate(s, 0, "\"epoch_rows_per_s\": null, ");
	rfs_stats_destroy(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counters_per_rank),
		cmocka_unit_test(test_generation_quantiles),
		cmocka_unit_test(test_last_open_is_one_snapshot),
		cmocka_unit_test(test_epoch_rate),
		cmocka_unit_test(test_last_error),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
