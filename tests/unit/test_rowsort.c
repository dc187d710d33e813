/* Unit tests for lib/rowsort.c: rows of a fetch in source order. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>

#include "rowsort.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sorted_with_slots),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
