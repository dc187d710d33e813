/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/source/column.c: uniting categories, filters, strings. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "source/source.h"
#include "source/column.h"
#include "os/memlimit.h"

/* What the sources borrow, as a mount's: a ledger of claims, made anew
 * for each limit a test sets (use_limit()). */
static struct rfs_source_env env;

/* Ledgers set aside: what was opened in them may still be open. */
static struct rfs_claims *retired[64];
static size_t nretired;

static void use_limit(const struct rfs_memlimit *l)
{
	assert_true(nretired < sizeof(retired) / sizeof(*retired));
	retired[nretired++] = env.claims;
	assert_int_equal(rfs_claims_create(l, &env.claims), 0);
}

/* A categorical column of heap copies. */
static struct rfs_column cat(const char *const *names, uint64_t ncat,
			     const int64_t *codes, uint64_t rows)
{
	struct rfs_column c = { .kind = RFS_COLUMN_CODES,
				.rows = rows,
				.ncategories = ncat,
				.claims = env.claims };
	c.categories = calloc(ncat ? ncat : 1, sizeof(char *));
	c.codes = malloc(rows * sizeof(int64_t));
	assert_non_null(c.categories);
	assert_non_null(c.codes);
	for (uint64_t i = 0; i < ncat; i++)
		c.categories[i] = strdup(names[i]);
	memcpy(c.codes, codes, rows * sizeof(int64_t));
	return c;
}

static struct rfs_column ints(const int64_t *v, uint64_t rows)
{
	struct rfs_column c = { .kind = RFS_COLUMN_INT,
				.rows = rows,
				.claims = env.claims };
	c.codes = malloc(rows * sizeof(int64_t));
	memcpy(c.codes, v, rows * sizeof(int64_t));
	return c;
}

static struct rfs_column reals(const double *v, uint64_t rows)
{
	struct rfs_column c = { .kind = RFS_COLUMN_REAL,
				.rows = rows,
				.claims = env.claims };
	c.reals = malloc(rows * sizeof(double));
	memcpy(c.reals, v, rows * sizeof(double));
	return c;
}

static char append_err[512];

static int append(struct rfs_column *dst, struct rfs_column *src)
{
	append_err[0] = '\0';
	return rfs_column_append(dst, src, "b.h5ad", "column 'c'", append_err,
				 sizeof(append_err));
}

/* The name of row r's category, or "-" when missing. */
static const char *name_of(const struct rfs_column *c, uint64_t r)
{
	return c->codes[r] < 0 ? "-" : c->categories[c->codes[r]];
}

static void test_append_sorted_parts_stay_sorted(void **state)
{
	(void)state;
	/* anndata drops unused categories per file: the sorted union gives
	 * back the whole file's categories and codes. */
	const char *a[] = { "B", "T" }, *b[] = { "NK", "T", "mono" };
	int64_t ca[] = { 1, 0, -1, 1 }, cb[] = { 2, 0, 1 };
	struct rfs_column d = { 0 }, x = cat(a, 2, ca, 4), y = cat(b, 3, cb, 3);
	assert_int_equal(append(&d, &x), 0);
	assert_int_equal(append(&d, &y), 0);
	assert_true(d.rows == 7 && d.ncategories == 4);
	const char *want_cats[] = { "B", "NK", "T", "mono" };
	for (int i = 0; i < 4; i++)
		assert_string_equal(d.categories[i], want_cats[i]);
	const char *want[] = { "T", "B", "-", "T", "mono", "NK", "T" };
	for (uint64_t r = 0; r < 7; r++)
		assert_string_equal(name_of(&d, r), want[r]);
	rfs_column_free(&d);
	assert_null(d.codes);
}

static void test_append_unsorted_keeps_first_appearance(void **state)
{
	(void)state;
	const char *a[] = { "zeta", "alpha" }, *b[] = { "beta", "alpha" };
	int64_t ca[] = { 0, 1 }, cb[] = { 0, 1, 0 };
	struct rfs_column d = cat(a, 2, ca, 2), y = cat(b, 2, cb, 3);
	assert_int_equal(append(&d, &y), 0);
	assert_true(d.ncategories == 3);
	assert_string_equal(d.categories[0], "zeta");
	assert_string_equal(d.categories[1], "alpha");
	assert_string_equal(d.categories[2], "beta");
	const int64_t want[] = { 0, 1, 2, 1, 2 };
	assert_memory_equal(d.codes, want, sizeof(want));
	rfs_column_free(&d);
}

static void test_append_numeric(void **state)
{
	(void)state;
	int64_t i1[] = { 1, 2 }, i2[] = { 3 };
	double r1[] = { 0.5 };
	struct rfs_column d = ints(i1, 2), y = ints(i2, 1), z = reals(r1, 1);
	assert_int_equal(append(&d, &y), 0);
	assert_int_equal(d.kind, RFS_COLUMN_INT);
	assert_true(d.rows == 3 && d.codes[2] == 3);
	/* Integers then floats: a float column. */
	assert_int_equal(append(&d, &z), 0);
	assert_int_equal(d.kind, RFS_COLUMN_REAL);
	assert_true(d.reals[0] == 1.0 && d.reals[3] == 0.5);
	/* Categorical after numeric is refused; both survive. */
	const char *names[] = { "a" };
	int64_t c[] = { 0 };
	struct rfs_column k = cat(names, 1, c, 1);
	assert_int_equal(append(&d, &k), -EINVAL);
	assert_string_equal(append_err, "b.h5ad: column 'c' is categorical "
					"here but not in the files before it");
	assert_true(d.rows == 4);
	rfs_column_free(&k);
	rfs_column_free(&d);
}

static void set_limit(uint64_t bytes)
{
	struct rfs_memlimit l = { .bytes = bytes };
	snprintf(l.where, sizeof(l.where), "the test's limit");
	use_limit(&l);
}

/* A categorical column of n categories "<prefix>0".. and 4 rows, its
 * categories claimed as a backend's read claims them (40 bytes each). */
static struct rfs_column many(const char *prefix, uint64_t n)
{
	struct rfs_column c = { .kind = RFS_COLUMN_CODES,
				.rows = 4,
				.ncategories = n,
				.claims = env.claims };
	char err[512];
	assert_int_equal(rfs_memlimit_claim(env.claims, "a.h5ad", "categories",
					    n, RFS_MEMLIMIT_STRING_BYTES,
					    &c.claimed, err, sizeof(err)),
			 0);
	c.categories = calloc(n, sizeof(char *));
	c.codes = calloc(4, sizeof(int64_t));
	assert_non_null(c.categories);
	assert_non_null(c.codes);
	for (uint64_t i = 0; i < n; i++) {
		char text[32];
		snprintf(text, sizeof(text), "%s%llu", prefix,
			 (unsigned long long)i);
		assert_non_null(c.categories[i] = strdup(text));
	}
	return c;
}

static void expect_refused(struct rfs_column *d, struct rfs_column *y,
			   const char *says)
{
	assert_int_equal(append(d, y), -ENOMEM);
	if (!strstr(append_err, says))
		fail_msg("'%s' does not say '%s'", append_err, says);
	rfs_column_free(d);
	rfs_column_free(y);
	assert_int_equal(rfs_memlimit_claimed(env.claims), 0);
}

/* What uniting parts allocates beside them is claimed (memlimit.c), for
 * the file and the column, and released before the append returns: the
 * tables uniting categories (24 bytes a category before, 16 of the
 * part's: 160 KiB for 4096 and 4096, beside the parts' 320 KiB), the
 * rows dst grows by while the part holds them (8 bytes a row), an
 * integer part's doubles when a float one joins it. Past the limit the
 * append fails, naming file and column, no claim left once the parts
 * are freed. Before, none was claimed: each append was made. */
static void test_append_claims(void **state)
{
	(void)state;
	enum { N = 4096, ROWS = 16384 };
	set_limit(400 << 10);
	struct rfs_column d = many("a", N), y = many("b", N);
	expect_refused(&d, &y,
		       "b.h5ad: column 'c': the tables uniting its 4096 "
		       "categories with the 4096 of the files before it "
		       "claims 20480 entries: at least 0 MiB at mount, more "
		       "than the 0 MiB of the test's limit leaves beside the 1 "
		       "MiB claimed before it");
	set_limit(480 << 10);
	d = many("a", N);
	y = many("b", N);
	assert_int_equal(append(&d, &y), 0);
	assert_true(d.rows == 8 && d.ncategories == 2 * N);
	/* The parts' claims, moved to d; the tables' released. */
	assert_int_equal(d.claimed, 2 * N * RFS_MEMLIMIT_STRING_BYTES);
	assert_int_equal(rfs_memlimit_claimed(env.claims), d.claimed);
	rfs_column_free(&d);
	assert_int_equal(rfs_memlimit_claimed(env.claims), 0);

	static int64_t v[ROWS];
	set_limit(64 << 10);
	d = ints(v, 2);
	y = ints(v, ROWS);
	expect_refused(&d, &y,
		       "b.h5ad: column 'c': its rows appended to the files "
		       "before it claims 16384 entries");
	d = ints(v, ROWS);
	y = reals((const double[]){ 0.5 }, 1);
	expect_refused(&d, &y,
		       "b.h5ad: column 'c' of the files before it made float "
		       "(a double per row) claims 16384 entries");
	d = reals((const double[]){ 0.5 }, 1);
	y = ints(v, ROWS);
	expect_refused(&d, &y,
		       "b.h5ad: column 'c' made float (a double per row) "
		       "claims 16384 entries");
	set_limit(256 << 10);
	d = ints(v, ROWS);
	y = ints(v, ROWS);
	assert_int_equal(append(&d, &y), 0);
	assert_true(d.rows == 2 * ROWS);
	assert_int_equal(rfs_memlimit_claimed(env.claims), 0);
	rfs_column_free(&d);
	set_limit(UINT64_MAX);
}

static void test_keep_categories(void **state)
{
	(void)state;
	const char *names[] = { "train", "val", "test" };
	int64_t codes[] = { 0, 1, 2, -1, 0, 2 };
	struct rfs_column c = cat(names, 3, codes, 6);
	uint8_t keep[6];
	char err[256];
	memset(keep, 1, sizeof(keep));
	assert_int_equal(
		rfs_column_keep(&c, "train|test", keep, err, sizeof(err)), 0);
	const uint8_t want[] = { 1, 0, 1, 0, 1, 1 };
	assert_memory_equal(keep, want, 6);
	/* Keeps only narrow: a second filter ANDs. */
	assert_int_equal(rfs_column_keep(&c, "test", keep, err, sizeof(err)),
			 0);
	const uint8_t want2[] = { 0, 0, 1, 0, 0, 1 };
	assert_memory_equal(keep, want2, 6);
	/* An unknown value names itself and the values there are. */
	assert_int_equal(rfs_column_keep(&c, "train|training", keep, err,
					 sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "'training'"));
	assert_non_null(strstr(err, "train, val, test"));
	rfs_column_free(&c);
}

static void test_keep_bool_int_real(void **state)
{
	(void)state;
	const char *names[] = { "False", "True" };
	int64_t codes[] = { 1, 0, 1 };
	struct rfs_column b = cat(names, 2, codes, 3);
	b.boolean = 1;
	uint8_t keep[3];
	char err[256];
	static const char *const spellings[] = { "true", "True", "1" };
	for (int i = 0; i < 3; i++) {
		memset(keep, 1, 3);
		assert_int_equal(rfs_column_keep(&b, spellings[i], keep, err,
						 sizeof(err)),
				 0);
		assert_true(keep[0] && !keep[1] && keep[2]);
	}
	rfs_column_free(&b);

	int64_t v[] = { -5, 7, 12 };
	struct rfs_column i = ints(v, 3);
	memset(keep, 1, 3);
	assert_int_equal(rfs_column_keep(&i, "-5|12", keep, err, sizeof(err)),
			 0);
	assert_true(keep[0] && !keep[1] && keep[2]);
	assert_int_equal(rfs_column_keep(&i, "7.5", keep, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "'7.5' is not a number"));
	rfs_column_free(&i);

	double r[] = { 0.5, 1.0, 0.25 };
	struct rfs_column f = reals(r, 3);
	memset(keep, 1, 3);
	assert_int_equal(rfs_column_keep(&f, "0.25|1", keep, err, sizeof(err)),
			 0);
	assert_true(!keep[0] && keep[1] && keep[2]);
	assert_true(rfs_column_real(&f, 2) == 0.25);
	rfs_column_free(&f);
}

/* Filter values are rounded to the width the column's file stored:
 * "0.1" is 0.100000001490116 in float32 and 0.0999755859375 in float16,
 * and matches only there. A value no row has is named, with values
 * rows have. */
static void test_keep_reals_as_stored(void **state)
{
	(void)state;
	uint8_t keep[3];
	char err[256];
	double as32[] = { (double)0.1f, 0.5, 0.1 };
	struct rfs_column f32 = reals(as32, 3);
	f32.real_sizes = 1u << 4;
	memset(keep, 1, 3);
	assert_int_equal(rfs_column_keep(&f32, "0.1", keep, err, sizeof(err)),
			 0);
	assert_true(keep[0] && !keep[1] && !keep[2]);
	rfs_column_free(&f32);

	double as16[] = { 0.0999755859375, 0.1 };
	struct rfs_column f16 = reals(as16, 2);
	f16.real_sizes = 1u << 2;
	memset(keep, 1, 2);
	assert_int_equal(rfs_column_keep(&f16, "0.1", keep, err, sizeof(err)),
			 0);
	assert_true(keep[0] && !keep[1]);
	rfs_column_free(&f16);

	/* float64 (or unknown): exact only. */
	double as64[] = { (double)0.1f, 0.1 };
	struct rfs_column f64 = reals(as64, 2);
	memset(keep, 1, 2);
	assert_int_equal(rfs_column_keep(&f64, "0.1", keep, err, sizeof(err)),
			 0);
	assert_true(!keep[0] && keep[1]);
	/* nan equals nothing, 7 is no row's: both named. */
	assert_int_equal(rfs_column_keep(&f64, "0.1|nan", keep, err,
					 sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "no row has value 'nan'"));
	assert_int_equal(rfs_column_keep(&f64, "7", keep, err, sizeof(err)),
			 -EINVAL);
	/* Listed as they would be typed: the float64 of float32's 0.1
	 * needs 17 digits here. */
	assert_non_null(strstr(err, "no row has value '7' (values: "
				    "0.10000000149011612, 0.1)"));
	rfs_column_free(&f64);
	/* In a float32 column it is typed 0.1; 1e-05 without exponent. */
	double tiny32[] = { (double)0.1f, (double)1e-05f };
	struct rfs_column t32 = reals(tiny32, 2);
	t32.real_sizes = 1u << 4;
	memset(keep, 1, 2);
	assert_int_equal(rfs_column_keep(&t32, "7", keep, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "(values: 0.1, 0.00001)"));
	rfs_column_free(&t32);
	/* Integers in full, never 1.23456789e+09. */
	int64_t big[] = { 1234567890, -5 };
	struct rfs_column ib = ints(big, 2);
	memset(keep, 1, 2);
	assert_int_equal(rfs_column_keep(&ib, "7", keep, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "(values: 1234567890, -5)"));
	rfs_column_free(&ib);

	/* Duplicates in the list are one value, found. */
	int64_t v[] = { 3, 4 };
	struct rfs_column i = ints(v, 2);
	memset(keep, 1, 2);
	assert_int_equal(rfs_column_keep(&i, "3|3", keep, err, sizeof(err)), 0);
	assert_true(keep[0] && !keep[1]);
	rfs_column_free(&i);
}

static void test_from_strings_sorted_categories(void **state)
{
	(void)state;
	const char *in[] = { "val", "train", "val", "test", "train" };
	char **strings = malloc(5 * sizeof(char *));
	for (int i = 0; i < 5; i++)
		strings[i] = strdup(in[i]);
	struct rfs_column c;
	assert_int_equal(rfs_column_from_strings(&c, strings, 5, 0), 0);
	assert_int_equal(c.kind, RFS_COLUMN_CODES);
	assert_true(c.ncategories == 3);
	assert_string_equal(c.categories[0], "test");
	assert_string_equal(c.categories[1], "train");
	assert_string_equal(c.categories[2], "val");
	const int64_t want[] = { 2, 1, 2, 0, 1 };
	assert_memory_equal(c.codes, want, sizeof(want));
	assert_string_equal(rfs_column_kind_name(&c), "categorical");
	rfs_column_free(&c);
	/* In order (category names): each string its own category. */
	strings = malloc(5 * sizeof(char *));
	for (int i = 0; i < 5; i++)
		strings[i] = strdup(in[i]);
	assert_int_equal(rfs_column_from_strings(&c, strings, 5, 1), 0);
	assert_true(c.ncategories == 5);
	for (int i = 0; i < 5; i++) {
		assert_string_equal(c.categories[i], in[i]);
		assert_int_equal(c.codes[i], i);
	}
	rfs_column_free(&c);
	/* A half-read column (count known, names not) frees cleanly. */
	struct rfs_column half = { .kind = RFS_COLUMN_CODES, .ncategories = 3 };
	rfs_column_free(&half);
}

static void test_bool_categories_take_bool_spellings(void **state)
{
	(void)state;
	const char *names[] = { "False", "True" };
	int64_t codes[] = { 1, 0, 1 };
	struct rfs_column c = cat(names, 2, codes, 3); /* boolean not set */
	uint8_t keep[3] = { 1, 1, 1 };
	char err[128];
	assert_int_equal(rfs_column_keep(&c, "true", keep, err, sizeof(err)),
			 0);
	assert_true(keep[0] && !keep[1] && keep[2]);
	rfs_column_free(&c);
}

/* A nullable column's mask: categorical-like rows become missing and
 * the categories only they had go; numeric ones are refused (-EDOM)
 * when some row is masked; a mask must be bool and as long. */
static void test_apply_mask(void **state)
{
	(void)state;
	const char *bools[] = { "False", "True" };
	const int64_t m[] = { 1, 0, 0, 1, 0 };
	struct rfs_column mask = cat(bools, 2, m, 5);
	mask.boolean = 1;
	uint64_t missing;

	const char *names[] = { "", "a", "b" }; /* "" under the mask */
	const int64_t codes[] = { 0, 2, 1, 0, 2 };
	struct rfs_column c = cat(names, 3, codes, 5);
	assert_int_equal(rfs_column_apply_mask(&c, &mask, &missing), 0);
	assert_true(missing == 2 && c.ncategories == 2);
	assert_string_equal(c.categories[0], "a");
	assert_string_equal(c.categories[1], "b");
	const int64_t want[] = { -1, 1, 0, -1, 1 };
	assert_memory_equal(c.codes, want, sizeof(want));
	rfs_column_free(&c);

	const int64_t flags[] = { 1, 1, 0, 0, 1 };
	struct rfs_column b = cat(bools, 2, flags, 5);
	b.boolean = 1; /* both categories stay */
	assert_int_equal(rfs_column_apply_mask(&b, &mask, &missing), 0);
	const int64_t bwant[] = { -1, 1, 0, -1, 1 };
	assert_memory_equal(b.codes, bwant, sizeof(bwant));
	assert_true(b.ncategories == 2);
	rfs_column_free(&b);

	const int64_t v[] = { 7, 8, 9, 10, 11 };
	struct rfs_column i = ints(v, 5);
	assert_int_equal(rfs_column_apply_mask(&i, &mask, &missing), -EDOM);
	assert_true(missing == 2);
	const int64_t none[] = { 0, 0, 0, 0, 0 };
	struct rfs_column clear = cat(bools, 2, none, 5);
	clear.boolean = 1;
	assert_int_equal(rfs_column_apply_mask(&i, &clear, &missing), 0);
	assert_true(missing == 0);
	assert_memory_equal(i.codes, v, sizeof(v));
	struct rfs_column short_mask = cat(bools, 2, m, 4);
	short_mask.boolean = 1;
	assert_int_equal(rfs_column_apply_mask(&i, &short_mask, &missing),
			 -EINVAL);
	assert_int_equal(rfs_column_apply_mask(&i, &i, &missing), -EINVAL);
	rfs_column_free(&i);
	rfs_column_free(&clear);
	rfs_column_free(&short_mask);
	rfs_column_free(&mask);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_append_sorted_parts_stay_sorted),
		cmocka_unit_test(test_append_unsorted_keeps_first_appearance),
		cmocka_unit_test(test_append_numeric),
		cmocka_unit_test(test_append_claims),
		cmocka_unit_test(test_keep_categories),
		cmocka_unit_test(test_keep_bool_int_real),
		cmocka_unit_test(test_keep_reals_as_stored),
		cmocka_unit_test(test_from_strings_sorted_categories),
		cmocka_unit_test(test_bool_categories_take_bool_spellings),
		cmocka_unit_test(test_apply_mask),
	};
	if (rfs_claims_create(NULL, &env.claims) != 0)
		return 1;
	int failed = cmocka_run_group_tests(tests, NULL, NULL);
	while (nretired)
		rfs_claims_destroy(retired[--nretired]);
	rfs_claims_destroy(env.claims);
	return failed;
}
