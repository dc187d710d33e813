/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/serve/kind.c: file kinds' directory names, step names. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "serve/kind.h"

static void test_kind_names(void **state)
{
	(void)state;
	assert_string_equal(rfs_kind_name(RFS_KIND_BATCH), "batch");
	assert_string_equal(rfs_kind_name(RFS_KIND_INDEX), "index");
	assert_string_equal(rfs_kind_name(RFS_KIND_LABEL), "label");
	assert_null(rfs_kind_name(RFS_KIND_NPZ));
	assert_null(rfs_kind_name(99));
}

/* 9 digits until the listed steps need more: 10^9 steps are 000000000
 * .. 999999999; one more takes 10 digits; an overflowing product 20. */
static void test_step_name_width(void **state)
{
	(void)state;
	assert_int_equal(rfs_kind_step_name_width(1, 1), RFS_STEP_MIN_WIDTH);
	assert_int_equal(rfs_kind_step_name_width(0, 5), RFS_STEP_MIN_WIDTH);
	assert_int_equal(rfs_kind_step_name_width(1000, 1000000), 9);
	assert_int_equal(rfs_kind_step_name_width(1000, 1000001), 10);
	assert_int_equal(rfs_kind_step_name_width(400000000, 3), 10);
	assert_int_equal(rfs_kind_step_name_width(UINT64_MAX, 2), 20);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kind_names),
		cmocka_unit_test(test_step_name_width),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
