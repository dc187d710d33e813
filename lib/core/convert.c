/* SPDX-License-Identifier: MIT */
/*
 * Casts go through one of three carriers: int64 for signed, uint64 for
 * unsigned and double for floating types. Integer-to-integer keeps C's
 * modular conversion (as numpy's astype does); anything from a float
 * saturates, since C leaves out-of-range float-to-int undefined.
 */
#include "core/convert.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static float half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
	if (exp == 0x1f) {
		bits = sign | 0x7f800000 | (man << 13); /* inf, nan */
	} else if (exp != 0) {
		bits = sign | ((exp + 112) << 23) | (man << 13);
	} else if (man == 0) {
		bits = sign;
	} else { /* subnormal: normalise */
		int shift = 0;
		while (!(man & 0x400)) {
			man <<= 1;
			shift++;
		}
		bits = sign | ((uint32_t)(113 - shift) << 23) |
		       ((man & 0x3ff) << 13);
	}
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

/* Rounds once, from the double: through float first would round twice
 * (1 + 2^-11 + 2^-30 must become 1 + 2^-10, not 1). Every float and
 * every integer a half can hold finitely is exact in a double. */
static uint16_t double_to_half(double f)
{
	uint64_t bits;
	memcpy(&bits, &f, 8);
	uint16_t sign = (uint16_t)((bits >> 48) & 0x8000);
	uint64_t exp = (bits >> 52) & 0x7ff, man = bits & 0xfffffffffffffULL;
	if (exp == 0x7ff) /* inf, nan (keep it a nan) */
		return sign | 0x7c00 |
		       (man ? 0x200 | (uint16_t)(man >> 42) : 0);
	int e = (int)exp - 1023 + 15;
	if (e >= 0x1f)
		return sign | 0x7c00; /* overflow: inf */
	if (e <= 0) { /* subnormal or zero */
		if (e < -10)
			return sign;
		man |= 1ULL << 52;
		int shift = 43 - e;
		uint64_t half = man >> shift,
			 rest = man & ((1ULL << shift) - 1);
		uint64_t mid = 1ULL << (shift - 1);
		if (rest > mid || (rest == mid && (half & 1)))
			half++;
		return sign | (uint16_t)half;
	}
	uint64_t half = ((uint64_t)e << 10) | (man >> 42);
	uint64_t rest = man & ((1ULL << 42) - 1), mid = 1ULL << 41;
	if (rest > mid || (rest == mid && (half & 1)))
		half++; /* may carry into the exponent, up to inf: right */
	return sign | (uint16_t)half;
}

enum carrier { SIGNED, UNSIGNED, REAL };

static enum carrier carrier_of(enum rfs_dtype t)
{
	if (t >= RFS_FLOAT16)
		return REAL;
	return t >= RFS_UINT8 ? UNSIGNED : SIGNED;
}

struct value {
	int64_t i;
	uint64_t u;
	double d;
};

/* One element of any served dtype, for memcpy in and out. */
union scalar {
	int8_t i8;
	int16_t i16;
	int32_t i32;
	int64_t i64;
	uint8_t u8;
	uint16_t u16;
	uint32_t u32;
	uint64_t u64;
	float f32;
	double f64;
};

static struct value load(enum rfs_dtype t, const unsigned char *p)
{
	struct value v = { 0 };
	union scalar x;
	memcpy(&x, p, rfs_dtype_size(t));
	switch (t) {
	case RFS_INT8:
		v.i = x.i8;
		break;
	case RFS_INT16:
		v.i = x.i16;
		break;
	case RFS_INT32:
		v.i = x.i32;
		break;
	case RFS_INT64:
		v.i = x.i64;
		break;
	case RFS_UINT8:
		v.u = x.u8;
		break;
	case RFS_UINT16:
		v.u = x.u16;
		break;
	case RFS_UINT32:
		v.u = x.u32;
		break;
	case RFS_UINT64:
		v.u = x.u64;
		break;
	case RFS_FLOAT16:
		v.d = half_to_float(x.u16);
		break;
	case RFS_FLOAT32:
		v.d = x.f32;
		break;
	default:
		v.d = x.f64;
		break;
	}
	return v;
}

/* A double made into an integer of [lo, hi] without undefined behaviour. */
static double clamp(double d, double lo, double hi)
{
	if (isnan(d))
		return 0;
	d = trunc(d);
	return d < lo ? lo : d > hi ? hi : d;
}

static void store(enum rfs_dtype t, unsigned char *p, struct value v,
		  enum carrier from)
{
	/* Everything as the widest carrier of the destination's kind. */
	int64_t i = from == SIGNED ? v.i : (int64_t)v.u;
	uint64_t u = from == SIGNED ? (uint64_t)v.i : v.u;
	double d = from == SIGNED   ? (double)v.i :
		   from == UNSIGNED ? (double)v.u :
				      v.d;
	union scalar x;
	if (from == REAL && carrier_of(t) != REAL) {
		/* Saturate in double, then the integer paths below. */
		static const double lo[] = { -128.0, -32768.0, -2147483648.0,
					     -9223372036854775808.0 };
		static const double hi[] = { 127.0, 32767.0, 2147483647.0,
					     9223372036854775807.0 };
		static const double uhi[] = { 255.0, 65535.0, 4294967295.0,
					      18446744073709551615.0 };
		if (t <= RFS_INT64) {
			double c = clamp(d, lo[t - RFS_INT8], hi[t - RFS_INT8]);
			/* 2^63 rounds up in double: keep it in range. */
			i = c >= 9223372036854775807.0 ? INT64_MAX : (int64_t)c;
			u = (uint64_t)i;
		} else {
			double c = clamp(d, 0, uhi[t - RFS_UINT8]);
			u = c >= 18446744073709551615.0 ? UINT64_MAX :
							  (uint64_t)c;
			i = (int64_t)u;
		}
	}
	switch (t) {
	case RFS_INT8:
		x.i8 = (int8_t)i;
		break;
	case RFS_INT16:
		x.i16 = (int16_t)i;
		break;
	case RFS_INT32:
		x.i32 = (int32_t)i;
		break;
	case RFS_INT64:
		x.i64 = i;
		break;
	case RFS_UINT8:
		x.u8 = (uint8_t)u;
		break;
	case RFS_UINT16:
		x.u16 = (uint16_t)u;
		break;
	case RFS_UINT32:
		x.u32 = (uint32_t)u;
		break;
	case RFS_UINT64:
		x.u64 = u;
		break;
	case RFS_FLOAT16:
		x.u16 = double_to_half(d);
		break;
	/* From the integer itself: through double, 64-bit integers would
	 * round twice. */
	case RFS_FLOAT32:
		x.f32 = from == SIGNED	 ? (float)v.i :
			from == UNSIGNED ? (float)v.u :
					   (float)d;
		break;
	default:
		x.f64 = d;
		break;
	}
	memcpy(p, &x, rfs_dtype_size(t));
}

void rfs_convert(enum rfs_dtype to, void *dst, enum rfs_dtype from,
		 const void *src, size_t n)
{
	size_t ts = rfs_dtype_size(to), fs = rfs_dtype_size(from);
	const unsigned char *s = src;
	unsigned char *d = dst;
	if (n == 0) /* src and dst may then be NULL */
		return;
	if (to == from) {
		if (dst != src)
			memcpy(dst, src, n * ts);
		return;
	}
	/* The common casts, in tight loops. */
	if (from == RFS_UINT8 && to == RFS_FLOAT32) {
		for (size_t k = 0; k < n; k++) {
			float f = (float)s[k];
			memcpy(d + 4 * k, &f, 4);
		}
		return;
	}
	if (from == RFS_INT32 && to == RFS_INT64) { /* CSR column ids */
		for (size_t k = 0; k < n; k++) {
			int32_t v;
			memcpy(&v, s + 4 * k, 4);
			int64_t w = v;
			memcpy(d + 8 * k, &w, 8);
		}
		return;
	}
	int from_64 = from == RFS_INT64 || from == RFS_UINT64;
	if (from_64 && (to == RFS_INT64 || to == RFS_UINT64)) {
		memcpy(dst, src, n * 8); /* modular: the same bits */
		return;
	}
	if (from_64 && to == RFS_INT32) { /* .npz column ids and indptr */
		for (size_t k = 0; k < n; k++) {
			uint64_t v;
			memcpy(&v, s + 8 * k, 8);
			int32_t w = (int32_t)v;
			memcpy(d + 4 * k, &w, 4);
		}
		return;
	}
	if (from == RFS_FLOAT32 && to == RFS_FLOAT16) {
		for (size_t k = 0; k < n; k++) {
			float f;
			memcpy(&f, s + 4 * k, 4);
			uint16_t h = double_to_half(f);
			memcpy(d + 2 * k, &h, 2);
		}
		return;
	}
	enum carrier c = carrier_of(from);
	for (size_t k = 0; k < n; k++)
		store(to, d + k * ts, load(from, s + k * fs), c);
}
