/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/source/io/inflate.c: deflate and shuffle undone. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>
#include <zlib.h>

#include "source/io/inflate.h"

#define N 1000

/* HDF5's shuffle, written independently of the code under test. */
static void shuffle(const unsigned char *in, unsigned char *out, size_t n,
		    size_t elem)
{
	for (size_t i = 0; i < n; i++)
		for (size_t b = 0; b < elem; b++)
			out[b * n + i] = in[i * elem + b];
}

static void test_pipelines(void **state)
{
	(void)state;
	uint32_t values[N];
	for (int i = 0; i < N; i++)
		values[i] = (uint32_t)(i * 2654435761u);
	unsigned char shuffled[sizeof(values)], stored[8192];
	unsigned char out[sizeof(values)], scratch[sizeof(values)];
	shuffle((unsigned char *)values, shuffled, N, 4);
	uLongf stored_len = sizeof(stored);
	assert_int_equal(compress2(stored, &stored_len, shuffled,
				   sizeof(shuffled), 6),
			 Z_OK);
	struct rfs_pipeline both = {
		2, { RFS_FILTER_SHUFFLE, RFS_FILTER_DEFLATE }
	};
	assert_true(rfs_inflate_supported(&both));
	memset(out, 0, sizeof(out));
	assert_int_equal(rfs_inflate_decode(&both, 0, stored, stored_len, out,
					    sizeof(out), 4, scratch),
			 0);
	assert_memory_equal(out, values, sizeof(values));

	/* The same chunk stored with deflate skipped (mask bit 1). */
	memset(out, 0, sizeof(out));
	assert_int_equal(rfs_inflate_decode(&both, 2, shuffled,
					    sizeof(shuffled), out, sizeof(out),
					    4, scratch),
			 0);
	assert_memory_equal(out, values, sizeof(values));

	/* No filters: a copy; deflate alone. */
	struct rfs_pipeline none = { 0 }, deflate = { 1, { 1 } };
	assert_int_equal(rfs_inflate_decode(&none, 0, values, sizeof(values),
					    out, sizeof(out), 4, scratch),
			 0);
	assert_memory_equal(out, values, sizeof(values));
	stored_len = sizeof(stored);
	compress2(stored, &stored_len, (unsigned char *)values, sizeof(values),
		  1);
	assert_int_equal(rfs_inflate_decode(&deflate, 0, stored, stored_len,
					    out, sizeof(out), 4, scratch),
			 0);
	assert_memory_equal(out, values, sizeof(values));
}

static void test_bad_chunks_are_eio(void **state)
{
	(void)state;
	unsigned char stored[64] = { 0x78, 0x9c, 1, 2, 3 }, out[4000],
		      scratch[4000];
	struct rfs_pipeline deflate = { 1, { RFS_FILTER_DEFLATE } };
	assert_int_equal(rfs_inflate_decode(&deflate, 0, stored, 5, out,
					    sizeof(out), 4, scratch),
			 -EIO);
	/* Decodes, but to fewer bytes than the chunk holds. */
	memset(out, 7, sizeof(out));
	uLongf len = sizeof(stored);
	compress2(stored, &len, out, 100, 6);
	assert_int_equal(rfs_inflate_decode(&deflate, 0, stored, len, out,
					    sizeof(out), 4, scratch),
			 -EIO);
	struct rfs_pipeline lzf = { 1, { 32000 } };
	assert_false(rfs_inflate_supported(&lzf));
}

/* Decoded here: shuffle then deflate, each at most once. Another order
 * or a repeat (valid HDF5, which reads it) would hand a stage bytes of
 * the wrong size: HDF5 reads those. */
static void test_supported_orders(void **state)
{
	(void)state;
	const int S = RFS_FILTER_SHUFFLE, D = RFS_FILTER_DEFLATE;
	const struct rfs_pipeline yes[] = { { 0, { 0 } },
					    { 1, { S } },
					    { 1, { D } },
					    { 2, { S, D } } },
				  no[] = { { 2, { D, S } },
					   { 2, { D, D } },
					   { 2, { S, S } },
					   { 3, { S, D, D } },
					   { 2, { S, 32000 } } };
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		assert_true(rfs_inflate_supported(&yes[i]));
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		assert_false(rfs_inflate_supported(&no[i]));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pipelines),
		cmocka_unit_test(test_bad_chunks_are_eio),
		cmocka_unit_test(test_supported_orders),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
