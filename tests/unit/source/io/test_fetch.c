/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/source/io/fetch.c (batched reads) and lib/core/bigbuf.c. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/bigbuf.h"
#include "source/io/fetch.h"
#include "h5_fixture.h"

#define SIZE 300000

static void check_runs(int uring);

/* Through io_uring, which these machines' kernels have (a kernel
 * without it fails this test rather than test preadv twice). */
static void test_runs_scatter_and_short_file(void **state)
{
	(void)state;
	check_runs(1);
}

static void *check_in_thread(void *arg)
{
	(void)arg;
	check_runs(0);
	return NULL;
}

/* A new thread makes its ring anew: with RANKFS_NO_URING it reads with
 * preadv, and must give the same bytes and errors. */
static void test_preadv_fallback(void **state)
{
	(void)state;
	pthread_t t;
	setenv("RANKFS_NO_URING", "1", 1);
	assert_int_equal(pthread_create(&t, NULL, check_in_thread, NULL), 0);
	pthread_join(t, NULL);
	unsetenv("RANKFS_NO_URING");
}

/* uring: whether the reads must have gone through io_uring. */
static void check_runs(int uring)
{
	char dir[PATH_MAX], path[PATH_MAX + 8];
	assert_int_equal(h5fx_tmpdir(dir, sizeof(dir)), 0);
	snprintf(path, sizeof(path), "%s/f", dir);
	unsigned char *data = malloc(SIZE);
	for (int i = 0; i < SIZE; i++)
		data[i] = (unsigned char)(i * 7 + i / 251);
	FILE *f = fopen(path, "wb");
	fwrite(data, 1, SIZE, f);
	fclose(f);
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);

	/* 200 runs (more than a ring holds), each scattered over 3
	 * pieces, read into one buffer in reverse order. */
	enum { RUNS = 200, PIECE = 100 };
	unsigned char out[RUNS * 3 * PIECE];
	struct iovec iov[RUNS * 3];
	struct rfs_fetch_run runs[RUNS];
	for (int r = 0; r < RUNS; r++) {
		for (int k = 0; k < 3; k++)
			iov[r * 3 + k] = (struct iovec){
				out + ((RUNS - 1 - r) * 3 + (2 - k)) * PIECE,
				PIECE
			};
		runs[r] = (struct rfs_fetch_run){ .off = (uint64_t)r * 1400,
						  .len = 3 * PIECE,
						  .iov = iov + r * 3,
						  .iovcnt = 3 };
	}
	size_t failed = 99;
	assert_int_equal(rfs_fetch(fd, runs, RUNS, &failed), 0);
	for (int r = 0; r < RUNS; r++)
		for (int k = 0; k < 3; k++)
			assert_memory_equal(iov[r * 3 + k].iov_base,
					    data + r * 1400 + k * PIECE, PIECE);
	/* A run past the end: -ENODATA, and which one. */
	runs[7].off = SIZE - 50;
	assert_int_equal(rfs_fetch(fd, runs, RUNS, &failed), -ENODATA);
	assert_true(failed == 7);
	assert_int_equal(rfs_fetch_uses_uring(), uring);
	close(fd);
	free(data);
	h5fx_rmtree(dir);
}

static void test_bigbuf_reuses(void **state)
{
	(void)state;
	struct rfs_bigbuf *pool;
	assert_int_equal(rfs_bigbuf_create(&pool), 0);
	size_t big = 1 << 20;
	unsigned char *a = rfs_bigbuf_alloc(pool, big);
	assert_non_null(a);
	memset(a, 1, big);
	rfs_bigbuf_free(pool, a, big);
	unsigned char *b = rfs_bigbuf_alloc(pool, big);
	assert_ptr_equal(a, b); /* from the pool, pages still there */
	unsigned char *c = rfs_bigbuf_alloc(pool, big);
	assert_ptr_not_equal(b, c);
	rfs_bigbuf_free(pool, b, big);
	rfs_bigbuf_free(pool, c, big);
	void *small = rfs_bigbuf_alloc(pool, 100);
	assert_non_null(small);
	rfs_bigbuf_free(pool, small, 100);
	rfs_bigbuf_free(pool, NULL, big);
	rfs_bigbuf_destroy(pool);
}

/* A lower bound (cache_mb settled smaller at mount) frees the pooled
 * buffers over it at once: a buffer pooled before is not handed out. */
static void test_bigbuf_lower_limit_frees(void **state)
{
	(void)state;
	struct rfs_bigbuf *pool;
	assert_int_equal(rfs_bigbuf_create(&pool), 0);
	size_t big = 1 << 20;
	unsigned char *a = rfs_bigbuf_alloc(pool, big),
		      *b = rfs_bigbuf_alloc(pool, big);
	assert_non_null(a);
	assert_non_null(b);
	memset(a, 1, big);
	memset(b, 1, big);
	rfs_bigbuf_free(pool, a, big);
	rfs_bigbuf_free(pool, b, big);
	/* One stays: pooled pages keep their bytes, fresh ones are 0. */
	rfs_bigbuf_limit(pool, big);
	unsigned char *c = rfs_bigbuf_alloc(pool, big),
		      *d = rfs_bigbuf_alloc(pool, big);
	assert_int_equal(c[0] + d[0], 1);
	memset(c, 1, big);
	memset(d, 1, big);
	rfs_bigbuf_free(pool, c, big);
	rfs_bigbuf_free(pool, d, big); /* over the bound: unmapped */
	rfs_bigbuf_limit(pool, 0);
	unsigned char *e = rfs_bigbuf_alloc(pool, big);
	assert_int_equal(e[0], 0);
	rfs_bigbuf_free(pool, e, big);
	rfs_bigbuf_limit(pool, RFS_BIGBUF_POOL_MAX);
	rfs_bigbuf_destroy(pool);
}

/* Sizes a few KiB apart (a mount's .npz files) share pooled buffers:
 * large buffers take whole 64 KiB steps. */
static void test_bigbuf_nearly_equal_sizes_share(void **state)
{
	(void)state;
	struct rfs_bigbuf *pool;
	assert_int_equal(rfs_bigbuf_create(&pool), 0);
	assert_true(rfs_bigbuf_footprint(100) == 100);
	assert_true(rfs_bigbuf_footprint(400000) == 7 * 65536);
	assert_true(rfs_bigbuf_footprint(7 * 65536) == 7 * 65536);
	assert_true(rfs_bigbuf_footprint(7 * 65536 + 1) == 8 * 65536);
	unsigned char *a = rfs_bigbuf_alloc(pool, 400000);
	assert_non_null(a);
	memset(a, 2, 7 * 65536); /* the whole footprint is ours */
	rfs_bigbuf_free(pool, a, 400000);
	unsigned char *b = rfs_bigbuf_alloc(pool, 410000);
	assert_ptr_equal(a, b);
	rfs_bigbuf_free(pool, b, 410000);
	unsigned char *c = rfs_bigbuf_alloc(pool, 460000); /* the next step */
	assert_ptr_not_equal(a, c);
	rfs_bigbuf_free(pool, c, 460000);
	rfs_bigbuf_destroy(pool);
}

/* Two pools (two mounts in one process) share nothing: a buffer one
 * pooled is not handed out by the other, nor without a pool. */
static void test_bigbuf_pools_are_independent(void **state)
{
	(void)state;
	size_t big = 1 << 20;
	struct rfs_bigbuf *pool, *other;
	assert_int_equal(rfs_bigbuf_create(&pool), 0);
	assert_int_equal(rfs_bigbuf_create(&other), 0);
	unsigned char *a = rfs_bigbuf_alloc(pool, big);
	assert_non_null(a);
	memset(a, 1, big);
	rfs_bigbuf_free(pool, a, big);
	unsigned char *b = rfs_bigbuf_alloc(other, big);
	unsigned char *c = rfs_bigbuf_alloc(NULL, big);
	assert_true(b && c && b[0] == 0 && c[0] == 0); /* fresh pages */
	rfs_bigbuf_free(NULL, c, big); /* unmapped */
	rfs_bigbuf_limit(other, 0); /* leaves pool's alone */
	rfs_bigbuf_destroy(other);
	unsigned char *d = rfs_bigbuf_alloc(pool, big);
	assert_ptr_equal(a, d);
	assert_int_equal(d[0], 1);
	rfs_bigbuf_free(pool, d, big);
	rfs_bigbuf_free(pool, b, big); /* a buffer moves between pools */
	rfs_bigbuf_destroy(pool);
	rfs_bigbuf_destroy(NULL); /* accepted */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_runs_scatter_and_short_file),
		cmocka_unit_test(test_preadv_fallback),
		cmocka_unit_test(test_bigbuf_reuses),
		cmocka_unit_test(test_bigbuf_lower_limit_frees),
		cmocka_unit_test(test_bigbuf_nearly_equal_sizes_share),
		cmocka_unit_test(test_bigbuf_pools_are_independent),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
