/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/plan/permute.c: keyed bijections on [0, n). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "plan/permute.h"

/* Checks that apply is a bijection on [0, n) and invert its inverse. */
static void check_bijection(uint64_t n, uint64_t key)
{
	struct rfs_permute p;
	rfs_permute_init(&p, n, key);
	size_t words = (size_t)((n + 63) / 64);
	uint64_t *seen = calloc(words ? words : 1, sizeof(*seen));
	assert_non_null(seen);
	for (uint64_t i = 0; i < n; i++) {
		uint64_t y = rfs_permute_apply(&p, i);
		if (y >= n)
			fail_msg("n=%llu: apply(%llu) = %llu out of range",
				 (unsigned long long)n, (unsigned long long)i,
				 (unsigned long long)y);
		uint64_t bit = UINT64_C(1) << (y % 64);
		if (seen[y / 64] & bit)
			fail_msg("n=%llu: %llu hit twice",
				 (unsigned long long)n, (unsigned long long)y);
		seen[y / 64] |= bit;
		uint64_t back = rfs_permute_invert(&p, y);
		if (back != i)
			fail_msg("n=%llu: invert(apply(%llu)) = %llu",
				 (unsigned long long)n, (unsigned long long)i,
				 (unsigned long long)back);
	}
	/* n distinct values in [0, n): every value is hit. */
	for (uint64_t y = 0; y < n; y++)
		if (!(seen[y / 64] & (UINT64_C(1) << (y % 64))))
			fail_msg("n=%llu: %llu never hit",
				 (unsigned long long)n, (unsigned long long)y);
	free(seen);
}

static void test_tiny(void **state)
{
	(void)state;
	struct rfs_permute p;
	rfs_permute_init(&p, 0, 123); /* allowed; nothing to apply */
	assert_true(p.n == 0);
	rfs_permute_init(&p, 1, 123);
	assert_true(rfs_permute_apply(&p, 0) == 0);
	assert_true(rfs_permute_invert(&p, 0) == 0);
	for (uint64_t n = 1; n <= 3; n++)
		for (uint64_t key = 0; key < 64; key++)
			check_bijection(n, key);
}

static void test_n2_both_orders_occur(void **state)
{
	(void)state;
	/* A permutation of 2 elements keyed at random swaps about half the
	 * time; a broken one that never swaps would pass the bijection
	 * check. */
	int swapped = 0;
	for (uint64_t key = 0; key < 200; key++) {
		struct rfs_permute p;
		rfs_permute_init(&p, 2, rfs_permute_key(key, 0, 1, 0));
		swapped += rfs_permute_apply(&p, 0) == 1;
	}
	assert_in_range(swapped, 40, 160);
}

static void test_primes(void **state)
{
	(void)state;
	static const uint64_t primes[] = { 5, 7, 13, 101, 257, 1009, 65537 };
	for (size_t i = 0; i < sizeof(primes) / sizeof(primes[0]); i++) {
		check_bijection(primes[i], 0);
		check_bijection(primes[i], UINT64_C(0x9e3779b97f4a7c15));
	}
}

static void test_powers_of_two_and_neighbours(void **state)
{
	(void)state;
	static const unsigned ks[] = { 1, 2,  3,  4,  5,  6,  7, 8,
				       9, 10, 11, 12, 15, 16, 17 };
	for (size_t i = 0; i < sizeof(ks) / sizeof(ks[0]); i++) {
		uint64_t p2 = UINT64_C(1) << ks[i];
		check_bijection(p2 - 1, ks[i]);
		check_bijection(p2, ks[i]);
		check_bijection(p2 + 1, ks[i]);
	}
}

static void test_one_million(void **state)
{
	(void)state;
	check_bijection(1000000, rfs_permute_key(42, 7, RFS_PURPOSE_ROWS, 0));
}

static void test_huge_n_round_trip(void **state)
{
	(void)state;
	/* Too big to enumerate: sample, checking range and inverse. */
	static const uint64_t ns[] = { UINT64_C(1000000000),
				       (UINT64_C(1) << 40) + 3,
				       UINT64_C(1) << 62, UINT64_MAX };
	for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++) {
		struct rfs_permute p;
		rfs_permute_init(&p, ns[k], 77);
		for (uint64_t j = 0; j < 2000; j++) {
			uint64_t i = j * (ns[k] / 2000) + j % 7;
			uint64_t y = rfs_permute_apply(&p, i);
			assert_true(y < ns[k]);
			assert_true(rfs_permute_invert(&p, y) == i);
		}
		assert_true(rfs_permute_apply(&p, ns[k] - 1) < ns[k]);
	}
}

static int differing_positions(uint64_t n, uint64_t key_a, uint64_t key_b)
{
	struct rfs_permute a, b;
	rfs_permute_init(&a, n, key_a);
	rfs_permute_init(&b, n, key_b);
	int differ = 0;
	for (uint64_t i = 0; i < n; i++)
		differ += rfs_permute_apply(&a, i) != rfs_permute_apply(&b, i);
	return differ;
}

static void test_differs_across_seeds_and_epochs(void **state)
{
	(void)state;
	const uint64_t n = 1000;
	uint64_t base = rfs_permute_key(1, 0, RFS_PURPOSE_ROWS, 0);
	/* Two random permutations of 1000 agree in about 1 position. */
	assert_true(differing_positions(n, base,
					rfs_permute_key(2, 0, RFS_PURPOSE_ROWS,
							0)) > 950);
	assert_true(differing_positions(n, base,
					rfs_permute_key(1, 1, RFS_PURPOSE_ROWS,
							0)) > 950);
	assert_true(
		differing_positions(
			n, base, rfs_permute_key(1, 0, RFS_PURPOSE_BLOCKS, 0)) >
		950);
	assert_true(differing_positions(n, base,
					rfs_permute_key(1, 0, RFS_PURPOSE_ROWS,
							1)) > 950);
	/* Same key, same permutation. */
	assert_int_equal(differing_positions(n, base, base), 0);
	/* Not the identity either. */
	struct rfs_permute p;
	rfs_permute_init(&p, n, base);
	int fixed = 0;
	for (uint64_t i = 0; i < n; i++)
		fixed += rfs_permute_apply(&p, i) == i;
	assert_true(fixed < 20);
}

static void test_key_derivation(void **state)
{
	(void)state;
	/* Deterministic. */
	assert_true(rfs_permute_key(1, 2, 3, 4) == rfs_permute_key(1, 2, 3, 4));
	assert_true(rfs_permute_key(0, 0, 0, 0) == rfs_permute_key(0, 0, 0, 0));
	/* Every argument matters. */
	uint64_t k = rfs_permute_key(1, 2, 3, 4);
	assert_true(k != rfs_permute_key(0, 2, 3, 4));
	assert_true(k != rfs_permute_key(1, 0, 3, 4));
	assert_true(k != rfs_permute_key(1, 2, 0, 4));
	assert_true(k != rfs_permute_key(1, 2, 3, 0));
	/* Arguments are not interchangeable. */
	assert_true(rfs_permute_key(0, 1, 2, 3) != rfs_permute_key(0, 2, 1, 3));
	assert_true(rfs_permute_key(0, 1, 2, 3) != rfs_permute_key(0, 3, 2, 1));
	/* As documented: XXH3 of little-endian (epoch, purpose, index) with
	 * the seed as XXH3's seed, so every host derives the same key. */
	const uint64_t seeds[] = { 0, 1, UINT64_MAX };
	for (size_t s = 0; s < 3; s++) {
		for (uint64_t e = 0; e < 3; e++) {
			uint64_t epoch = e == 2 ? (UINT64_C(1) << 31) - 1 : e;
			unsigned char b[24];
			uint64_t words[3] = { epoch, RFS_PURPOSE_WINDOW, 77 };
			for (int w = 0; w < 3; w++)
				for (int i = 0; i < 8; i++)
					b[8 * w + i] =
						(unsigned char)(words[w] >>
								(8 * i));
			assert_true(
				rfs_permute_key(seeds[s], epoch,
						RFS_PURPOSE_WINDOW, 77) ==
				XXH3_64bits_withSeed(b, sizeof(b), seeds[s]));
		}
	}
}

static void test_init_is_deterministic(void **state)
{
	(void)state;
	struct rfs_permute a, b;
	rfs_permute_init(&a, 12345, 99);
	rfs_permute_init(&b, 12345, 99);
	assert_true(a.n == 12345);
	assert_memory_equal(a.round_keys, b.round_keys, sizeof(a.round_keys));
	/* The domain is the smallest even bit count covering n, so cycle
	 * walks stay short: 2^(2h) < 4n. */
	assert_true((UINT64_C(1) << (2 * a.half_bits)) >= 12345);
	assert_true((UINT64_C(1) << (2 * a.half_bits)) < 4 * 12345);
}

/*
 * The served order must not change between releases (two nodes running
 * different builds must agree, and a rerun must see the same epochs).
 * These values were produced by this implementation with xxHash 0.8.1; a
 * change here means every existing view_id serves different batches.
 */
static void test_output_is_pinned(void **state)
{
	(void)state;
	struct rfs_permute p;
	rfs_permute_init(&p, 10, rfs_permute_key(0, 0, RFS_PURPOSE_ROWS, 0));
	static const uint64_t want10[10] = { 5, 9, 8, 7, 0, 2, 4, 1, 6, 3 };
	for (uint64_t i = 0; i < 10; i++)
		assert_true(rfs_permute_apply(&p, i) == want10[i]);
	rfs_permute_init(&p, UINT64_C(1000000000),
			 rfs_permute_key(7, 3, RFS_PURPOSE_BLOCKS, 0));
	static const uint64_t want_big[4] = { 371267501, 869777599, 602541246,
					      242842316 };
	for (uint64_t i = 0; i < 4; i++)
		assert_true(rfs_permute_apply(&p, i * 1000) == want_big[i]);
}

/* The range forms give what one at a time gives: any n (cycle walks of
 * every length, lanes finishing in any order), any start and count,
 * blocks with and without a short last block, ranges over the short slot
 * and longer than the 1024 positions of a piece. */
static void test_ranges_match_one_at_a_time(void **state)
{
	(void)state;
	static const uint64_t ns[] = {
		0, 1, 2, 3, 5, 64, 65, 1000, 4097, 100000
	};
	static const uint64_t blocks[] = { 1, 3, 64, 1000 };
	uint64_t *out = malloc(5000 * sizeof(*out));
	assert_non_null(out);
	for (size_t a = 0; a < sizeof(ns) / sizeof(ns[0]); a++) {
		uint64_t n = ns[a];
		uint64_t key = rfs_permute_key(5, a, RFS_PURPOSE_ROWS, 0);
		uint64_t starts[] = { 0, n / 3, n > 4500 ? n - 4500 : 0 };
		struct rfs_permute p;
		rfs_permute_init(&p, n, key);
		for (size_t s = 0; s < 3; s++) {
			uint64_t first = starts[s];
			size_t count =
				(size_t)(n - first < 4500 ? n - first : 4500);
			rfs_permute_apply_range(&p, first, count, out);
			for (size_t k = 0; k < count; k++)
				assert_true(out[k] ==
					    rfs_permute_apply(&p, first + k));
			for (size_t b = 0; b < 4; b++) {
				struct rfs_blocked bl;
				rfs_permute_blocked_init(&bl, n, blocks[b],
							 key);
				rfs_permute_blocked_apply_range(&bl, first,
								count, out);
				for (size_t k = 0; k < count; k++)
					assert_true(out[k] ==
						    rfs_permute_blocked_apply(
							    &bl, first + k));
			}
		}
	}
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tiny),
		cmocka_unit_test(test_n2_both_orders_occur),
		cmocka_unit_test(test_primes),
		cmocka_unit_test(test_powers_of_two_and_neighbours),
		cmocka_unit_test(test_one_million),
		cmocka_unit_test(test_huge_n_round_trip),
		cmocka_unit_test(test_differs_across_seeds_and_epochs),
		cmocka_unit_test(test_key_derivation),
		cmocka_unit_test(test_init_is_deterministic),
		cmocka_unit_test(test_output_is_pinned),
		cmocka_unit_test(test_ranges_match_one_at_a_time),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
