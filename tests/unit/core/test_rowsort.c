/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/core/rowsort.c: rows of a fetch in source order. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>

#include "core/rowsort.h"

static void test_sorted_with_slots(void **state)
{
	(void)state;
	const int64_t rows[] = { 40, 3, 17, 3, 0, 99 };
	struct rfs_wanted *w = rfs_rowsort(rows, 6);
	assert_non_null(w);
	for (size_t i = 1; i < 6; i++)
		assert_true(w[i - 1].row <= w[i].row);
	/* Every slot once, and each points back at its row. */
	unsigned seen = 0;
	for (size_t i = 0; i < 6; i++) {
		assert_true((uint64_t)rows[w[i].slot] == w[i].row);
		seen |= 1u << w[i].slot;
	}
	assert_int_equal(seen, 0x3f);
	free(w);
	w = rfs_rowsort(rows, 0); /* empty fetches are fine */
	assert_non_null(w);
	free(w);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* The radix sort agrees with qsort on small, duplicate-heavy and full
 * 64-bit values, and on empty and one-element arrays. */
static void test_sort_u64_matches_qsort(void **state)
{
	(void)state;
	enum { N = 5000 };
	uint64_t *v = malloc(N * sizeof(*v)), *want = malloc(N * sizeof(*v)),
		 *tmp = malloc(N * sizeof(*v));
	assert_non_null(v), assert_non_null(want), assert_non_null(tmp);
	const uint64_t masks[] = { 0x7, 0x1ffff, ~UINT64_C(0) };
	uint64_t x = 88172645463325252u; /* xorshift64 */
	for (size_t m = 0; m < 3; m++) {
		for (size_t n = 0; n <= N; n = n ? n * 5 : 1) {
			for (size_t i = 0; i < n; i++) {
				x ^= x << 13, x ^= x >> 7, x ^= x << 17;
				v[i] = want[i] = x & masks[m];
			}
			qsort(want, n, sizeof(*want), cmp_u64);
			rfs_rowsort_u64(v, tmp, n);
			for (size_t i = 0; i < n; i++)
				assert_true(v[i] == want[i]);
		}
	}
	free(v), free(want), free(tmp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sorted_with_slots),
		cmocka_unit_test(test_sort_u64_matches_qsort),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
