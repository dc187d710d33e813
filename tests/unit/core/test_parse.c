/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/core/parse.c: strict decimal parsing. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "core/parse.h"

/* Parses a NUL-terminated string; *out is poisoned first so a success that
 * forgets to write it is caught. */
static int parse(const char *s, uint64_t max, int canonical, uint64_t *out)
{
	*out = UINT64_C(0xdeadbeef);
	return rfs_parse_u64(s, strlen(s), max, canonical, out);
}

static void test_plain_numbers(void **state)
{
	(void)state;
	uint64_t v;
	assert_int_equal(parse("0", UINT64_MAX, 1, &v), 0);
	assert_true(v == 0);
	assert_int_equal(parse("7", UINT64_MAX, 1, &v), 0);
	assert_true(v == 7);
	assert_int_equal(parse("1234567890", UINT64_MAX, 1, &v), 0);
	assert_true(v == UINT64_C(1234567890));
	assert_int_equal(parse("18446744073709551615", UINT64_MAX, 1, &v), 0);
	assert_true(v == UINT64_MAX);
}

static void test_only_len_bytes_are_read(void **state)
{
	(void)state;
	uint64_t v = 0;
	/* A name inside a longer string: "123" of "123.npy". */
	assert_int_equal(rfs_parse_u64("123.npy", 3, 1000, 1, &v), 0);
	assert_true(v == 123);
	assert_int_equal(rfs_parse_u64("4567", 2, 1000, 1, &v), 0);
	assert_true(v == 45);
}

static void test_empty_is_invalid(void **state)
{
	(void)state;
	uint64_t v;
	assert_int_equal(parse("", UINT64_MAX, 0, &v), -EINVAL);
	assert_int_equal(parse("", UINT64_MAX, 1, &v), -EINVAL);
	assert_int_equal(rfs_parse_u64("12", 0, UINT64_MAX, 0, &v), -EINVAL);
}

static void test_leading_zeros(void **state)
{
	(void)state;
	uint64_t v;
	/* Canonical: one spelling per value. */
	assert_int_equal(parse("00", UINT64_MAX, 1, &v), -EINVAL);
	assert_int_equal(parse("01", UINT64_MAX, 1, &v), -EINVAL);
	assert_int_equal(parse("000123", UINT64_MAX, 1, &v), -EINVAL);
	/* Not canonical: zeros are just digits. */
	assert_int_equal(parse("00", UINT64_MAX, 0, &v), 0);
	assert_true(v == 0);
	assert_int_equal(parse("000123", UINT64_MAX, 0, &v), 0);
	assert_true(v == 123);
	assert_int_equal(parse("000000000000000000000000000000042", UINT64_MAX,
			       0, &v),
			 0);
	assert_true(v == 42);
}

static void test_not_numbers(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"-1",	"+1",
		" 1",	"1 ",
		"1\n",	"\t1",
		"0x10", "0X1",
		"1e3",	"1E3",
		"1.0",	"1,000",
		"a",	"12a",
		"a12",	"1_0",
		"--",	".",
		"NaN",	"inf",
		"\xff", "١" /* Arabic-Indic 1 */,
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t v;
		for (int canonical = 0; canonical < 2; canonical++) {
			int rc = parse(bad[i], UINT64_MAX, canonical, &v);
			if (rc != -EINVAL)
				fail_msg("\"%s\" (canonical=%d): got %d",
					 bad[i], canonical, rc);
		}
	}
}

static void test_embedded_nul_is_invalid(void **state)
{
	(void)state;
	uint64_t v;
	assert_int_equal(rfs_parse_u64("1\0"
				       "2",
				       3, UINT64_MAX, 0, &v),
			 -EINVAL);
}

static void test_max_bound(void **state)
{
	(void)state;
	uint64_t v;
	assert_int_equal(parse("10", 10, 1, &v), 0);
	assert_true(v == 10);
	assert_int_equal(parse("11", 10, 1, &v), -ERANGE);
	assert_int_equal(parse("0", 0, 1, &v), 0);
	assert_true(v == 0);
	assert_int_equal(parse("1", 0, 1, &v), -ERANGE);
	assert_int_equal(parse("2147483647", (UINT64_C(1) << 31) - 1, 1, &v),
			 0);
	assert_true(v == 2147483647u);
	assert_int_equal(parse("2147483648", (UINT64_C(1) << 31) - 1, 1, &v),
			 -ERANGE);
	/* A failed parse leaves *out alone. */
	v = 99;
	assert_int_equal(rfs_parse_u64("11", 2, 10, 1, &v), -ERANGE);
	assert_true(v == 99);
}

static void test_overflow_past_2_64(void **state)
{
	(void)state;
	uint64_t v;
	/* 2^64 and beyond: -ERANGE, never a wrapped value. */
	assert_int_equal(parse("18446744073709551616", UINT64_MAX, 1, &v),
			 -ERANGE);
	assert_int_equal(parse("18446744073709551620", UINT64_MAX, 1, &v),
			 -ERANGE);
	assert_int_equal(parse("99999999999999999999", UINT64_MAX, 1, &v),
			 -ERANGE);
	assert_int_equal(parse("184467440737095516150", UINT64_MAX, 1, &v),
			 -ERANGE);
	assert_int_equal(parse("36893488147419103232", UINT64_MAX, 1, &v),
			 -ERANGE); /* 2^65: would wrap to 0 */
	assert_int_equal(parse("1000000000000000000000000000000000000000",
			       UINT64_MAX, 0, &v),
			 -ERANGE);
	/* Garbage after an overflow is still garbage. */
	assert_int_equal(parse("99999999999999999999x", UINT64_MAX, 0, &v),
			 -EINVAL);
}

static void test_decimal_digits(void **state)
{
	(void)state;
	assert_int_equal(rfs_parse_decimal_digits(0), 1);
	assert_int_equal(rfs_parse_decimal_digits(1), 1);
	assert_int_equal(rfs_parse_decimal_digits(9), 1);
	assert_int_equal(rfs_parse_decimal_digits(10), 2);
	assert_int_equal(rfs_parse_decimal_digits(99), 2);
	assert_int_equal(rfs_parse_decimal_digits(100), 3);
	assert_int_equal(rfs_parse_decimal_digits(999999), 6);
	assert_int_equal(rfs_parse_decimal_digits(1000000), 7);
	assert_int_equal(rfs_parse_decimal_digits(UINT64_MAX), 20);
	uint64_t p = 1;
	for (unsigned d = 1; d <= 19; d++, p *= 10) {
		assert_int_equal(rfs_parse_decimal_digits(p), d);
		assert_int_equal(rfs_parse_decimal_digits(p * 10 - 1), d);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain_numbers),
		cmocka_unit_test(test_only_len_bytes_are_read),
		cmocka_unit_test(test_empty_is_invalid),
		cmocka_unit_test(test_leading_zeros),
		cmocka_unit_test(test_not_numbers),
		cmocka_unit_test(test_embedded_nul_is_invalid),
		cmocka_unit_test(test_max_bound),
		cmocka_unit_test(test_overflow_past_2_64),
		cmocka_unit_test(test_decimal_digits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
