/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/core/convert.c: dtype casts, float16, saturation. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "core/convert.h"

static uint16_t to_half(float f)
{
	uint16_t h;
	rfs_convert(RFS_FLOAT16, &h, RFS_FLOAT32, &f, 1);
	return h;
}

static float from_half(uint16_t h)
{
	float f;
	rfs_convert(RFS_FLOAT32, &f, RFS_FLOAT16, &h, 1);
	return f;
}

static void test_float16(void **state)
{
	(void)state;
	assert_int_equal(to_half(1.0f), 0x3c00);
	assert_int_equal(to_half(-2.0f), 0xc000);
	assert_int_equal(to_half(65504.0f), 0x7bff); /* largest finite */
	assert_int_equal(to_half(65520.0f), 0x7c00); /* rounds to inf */
	assert_int_equal(to_half(0x1p-24f), 0x0001); /* smallest subnormal */
	assert_int_equal(to_half(0x1p-26f), 0x0000); /* underflows */
	assert_int_equal(to_half(1.0f + 0x1p-11f), 0x3c00); /* tie: even */
	assert_int_equal(to_half(1.0f + 3 * 0x1p-11f), 0x3c02);
	assert_int_equal(to_half(INFINITY), 0x7c00);
	assert_true((to_half(NAN) & 0x7c00) == 0x7c00 &&
		    (to_half(NAN) & 0x3ff) != 0);
	assert_true(from_half(0x3c00) == 1.0f);
	assert_true(from_half(0x0001) == 0x1p-24f);
	assert_true(from_half(0x8000) == 0.0f && signbit(from_half(0x8000)));
	assert_true(isinf(from_half(0xfc00)) && from_half(0xfc00) < 0);
	assert_true(isnan(from_half(0x7e00)));
	/* Every finite half survives a round trip through float. */
	for (uint32_t h = 0; h < 0x10000; h++) {
		if ((h & 0x7c00) == 0x7c00)
			continue;
		assert_int_equal(to_half(from_half((uint16_t)h)), h);
	}
}

/* Each cast rounds once, from the source value, as numpy's astype does
 * (the expected values are numpy's). Through an intermediate type, these
 * would round twice and come out one unit off. */
static void test_casts_round_once(void **state)
{
	(void)state;
	const double f64[] = { 1.0 + 0x1p-11 + 0x1p-30,
			       0x1p-25,
			       0x1p-25 + 0x1p-60,
			       3 * 0x1p-26,
			       1.5 * 0x1p-24 + 0x1p-70,
			       65519.99,
			       65520.0,
			       -(1.0 + 0x1p-11) };
	const uint16_t want16[] = { 0x3c01, 0x0000, 0x0001, 0x0001,
				    0x0002, 0x7bff, 0x7c00, 0xbc00 };
	uint16_t h[8];
	rfs_convert(RFS_FLOAT16, h, RFS_FLOAT64, f64, 8);
	for (int k = 0; k < 8; k++)
		assert_int_equal(h[k], want16[k]);

	const int64_t i64[] = { (INT64_C(1) << 60) + (INT64_C(1) << 36) + 1,
				2049, 65519, 65520, -(INT64_C(1) << 62) };
	float f[5];
	rfs_convert(RFS_FLOAT32, f, RFS_INT64, i64, 1);
	assert_true(f[0] == 1152921642045800448.0f);
	rfs_convert(RFS_FLOAT16, h, RFS_INT64, i64 + 1, 4);
	const uint16_t want_i16[] = { 0x6800, 0x7bff, 0x7c00, 0xfc00 };
	for (int k = 0; k < 4; k++)
		assert_int_equal(h[k], want_i16[k]);

	const uint64_t u64 = (UINT64_C(1) << 63) + (UINT64_C(1) << 39) + 1;
	rfs_convert(RFS_FLOAT32, f, RFS_UINT64, &u64, 1);
	assert_true(f[0] == 9223373136366403584.0f);
}

static void test_integers_and_saturation(void **state)
{
	(void)state;
	const double in[] = { 1e10, -1e10, NAN, 2.9, -2.9, 127.5 };
	int8_t i8[6];
	rfs_convert(RFS_INT8, i8, RFS_FLOAT64, in, 6);
	const int8_t want8[] = { 127, -128, 0, 2, -2, 127 };
	assert_memory_equal(i8, want8, sizeof(want8));
	uint16_t u16[6];
	rfs_convert(RFS_UINT16, u16, RFS_FLOAT64, in, 6);
	const uint16_t want16[] = { 65535, 0, 0, 2, 0, 127 };
	assert_memory_equal(u16, want16, sizeof(want16));
	int64_t i64[2];
	const float big[] = { 1e30f, -1e30f };
	rfs_convert(RFS_INT64, i64, RFS_FLOAT32, big, 2);
	assert_true(i64[0] == INT64_MAX && i64[1] == INT64_MIN);
	uint64_t u64;
	rfs_convert(RFS_UINT64, &u64, RFS_FLOAT32, big, 1);
	assert_true(u64 == UINT64_MAX);
	/* Integer to integer wraps like C (and numpy's astype). */
	const int32_t wide[] = { 300, -1 };
	uint8_t u8[2];
	rfs_convert(RFS_UINT8, u8, RFS_INT32, wide, 2);
	assert_true(u8[0] == 44 && u8[1] == 255);
	/* 64-bit ids to int32 and between the 64-bit types (the .npz
	 * members' loops): wrapped like C too. */
	const int64_t ids[] = { 0, 7, -1, (int64_t)1 << 33 | 5, INT32_MAX };
	int32_t i32[5];
	rfs_convert(RFS_INT32, i32, RFS_INT64, ids, 5);
	const int32_t want32[] = { 0, 7, -1, 5, INT32_MAX };
	assert_memory_equal(i32, want32, sizeof(want32));
	const uint64_t uids[] = { 3, UINT64_MAX, UINT64_C(1) << 32 | 9 };
	rfs_convert(RFS_INT32, i32, RFS_UINT64, uids, 3);
	assert_true(i32[0] == 3 && i32[1] == -1 && i32[2] == 9);
	int64_t same[3];
	rfs_convert(RFS_INT64, same, RFS_UINT64, uids, 3);
	assert_true(same[0] == 3 && same[1] == -1 &&
		    same[2] == (int64_t)(UINT64_C(1) << 32 | 9));
	const uint64_t huge = UINT64_MAX;
	double d;
	rfs_convert(RFS_FLOAT64, &d, RFS_UINT64, &huge, 1);
	assert_true(d == 18446744073709551616.0);
}

static void test_images_to_float32(void **state)
{
	(void)state;
	uint8_t px[256];
	float f[256];
	for (int i = 0; i < 256; i++)
		px[i] = (uint8_t)i;
	rfs_convert(RFS_FLOAT32, f, RFS_UINT8, px, 256);
	for (int i = 0; i < 256; i++)
		assert_true(f[i] == (float)i);
	/* Same type: a copy. */
	uint8_t copy[256];
	rfs_convert(RFS_UINT8, copy, RFS_UINT8, px, 256);
	assert_memory_equal(copy, px, 256);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_float16),
		cmocka_unit_test(test_casts_round_once),
		cmocka_unit_test(test_integers_and_saturation),
		cmocka_unit_test(test_images_to_float32),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
