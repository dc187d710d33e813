/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/source/varjoin.c: served var names and each source's
 * column mapping (inner, outer, var_names=FILE), duplicates, identity,
 * the dense gather and the CSR remap. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "source/source.h"
#include "core/buf.h"
#include "os/memlimit.h"
#include "source/varjoin.h"

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

static char *a_names[] = { "g1", "g2", "g3", "g4" };
static char *b_names[] = { "g4", "g5", "g2", "g1" };
static char *c_names[] = { "g2", "g6", "g4" };
static char *const *three[] = { a_names, b_names, c_names };
static const uint64_t three_counts[] = { 4, 4, 3 };
static const char *const three_paths[] = { "a.h5ad", "b.h5ad", "c.h5ad" };

static struct rfs_varjoin *make(enum rfs_varjoin_mode mode, size_t n,
				char *const *wanted, uint64_t nwanted)
{
	struct rfs_varjoin *j = NULL;
	char err[512] = "";
	int rc = rfs_varjoin_create(env.claims, mode, three, three_counts,
				    three_paths, n, wanted, nwanted,
				    "names.txt", &j, err, sizeof(err));
	if (rc != 0)
		fail_msg("create: %s", err);
	return j;
}

static void assert_names(const struct rfs_varjoin *j, const char *const *want,
			 uint64_t n)
{
	assert_int_equal(rfs_varjoin_cols(j), n);
	for (uint64_t i = 0; i < n; i++)
		assert_string_equal(rfs_varjoin_name(j, i), want[i]);
}

static void test_inner(void **state)
{
	(void)state;
	struct rfs_varjoin *j = make(RFS_VARJOIN_INNER, 3, NULL, 0);
	const char *want[] = { "g2", "g4" }; /* in a's order */
	assert_names(j, want, 2);
	/* b: g4 at 0 -> served 1, g2 at 2 -> 0, g5 and g1 dropped */
	assert_int_equal(rfs_varjoin_served(j, 1, 0), 1);
	assert_int_equal(rfs_varjoin_served(j, 1, 1), -1);
	assert_int_equal(rfs_varjoin_served(j, 1, 2), 0);
	assert_int_equal(rfs_varjoin_served(j, 1, 3), -1);
	assert_int_equal(rfs_varjoin_served(j, 1, 99), -1);
	for (size_t f = 0; f < 3; f++) { /* each has a name not served */
		assert_false(rfs_varjoin_identity(j, f));
		assert_true(rfs_varjoin_drops(j, f));
	}
	char *served[] = { "g2", "g4" };
	assert_true(rfs_varjoin_fingerprint(j) ==
		    rfs_varjoin_fingerprint_of(served, 2));
	rfs_varjoin_destroy(j);
}

static void test_outer(void **state)
{
	(void)state;
	struct rfs_varjoin *j = make(RFS_VARJOIN_OUTER, 3, NULL, 0);
	const char *want[] = { "g1", "g2", "g3", "g4", "g5", "g6" };
	assert_names(j, want, 6);
	for (size_t f = 0; f < 3; f++)
		assert_false(rfs_varjoin_drops(j, f));
	assert_false(rfs_varjoin_identity(j, 0)); /* narrower than served */
	/* c: g2 -> 1, g6 -> 5, g4 -> 3 */
	assert_int_equal(rfs_varjoin_served(j, 2, 0), 1);
	assert_int_equal(rfs_varjoin_served(j, 2, 1), 5);
	assert_int_equal(rfs_varjoin_served(j, 2, 2), 3);
	rfs_varjoin_destroy(j);
}

static void test_identity(void **state)
{
	(void)state;
	/* One file: inner and outer serve its own columns, in its order. */
	struct rfs_varjoin *j = make(RFS_VARJOIN_OUTER, 1, NULL, 0);
	assert_true(rfs_varjoin_identity(j, 0));
	assert_false(rfs_varjoin_drops(j, 0));
	rfs_varjoin_destroy(j);
	j = make(RFS_VARJOIN_INNER, 1, NULL, 0);
	assert_true(rfs_varjoin_identity(j, 0));
	rfs_varjoin_destroy(j);
	/* The same names, reordered: no identity. */
	char *wanted[] = { "g2", "g1", "g3", "g4" };
	j = make(RFS_VARJOIN_NAMES, 1, wanted, 4);
	assert_false(rfs_varjoin_identity(j, 0));
	assert_false(rfs_varjoin_drops(j, 0));
	rfs_varjoin_destroy(j);
}

static void test_names(void **state)
{
	(void)state;
	char *wanted[] = { "g6", "g1", "g5" };
	struct rfs_varjoin *j = make(RFS_VARJOIN_NAMES, 3, wanted, 3);
	const char *want[] = { "g6", "g1", "g5" };
	assert_names(j, want, 3);
	/* a has only g1 (its column 0 -> served 1) */
	assert_int_equal(rfs_varjoin_served(j, 0, 0), 1);
	assert_int_equal(rfs_varjoin_served(j, 0, 1), -1);
	assert_true(rfs_varjoin_drops(j, 0));
	rfs_varjoin_destroy(j);
}

static void expect_error(enum rfs_varjoin_mode mode, char *const *const *names,
			 const uint64_t *counts, size_t n, char *const *wanted,
			 uint64_t nwanted, const char *needle)
{
	struct rfs_varjoin *j = (struct rfs_varjoin *)1;
	char err[512] = "";
	assert_int_equal(rfs_varjoin_create(env.claims, mode, names, counts,
					    three_paths, n, wanted, nwanted,
					    "names.txt", &j, err, sizeof(err)),
			 -EINVAL);
	assert_null(j);
	if (!strstr(err, needle))
		fail_msg("'%s' does not say '%s'", err, needle);
}

static void test_errors(void **state)
{
	(void)state;
	/* A name twice in a file's var, named with the file. */
	char *dup[] = { "g1", "g2", "g1" };
	char *const *with_dup[] = { a_names, dup };
	const uint64_t dup_counts[] = { 4, 3 };
	expect_error(RFS_VARJOIN_OUTER, with_dup, dup_counts, 2, NULL, 0,
		     "b.h5ad: var name 'g1' is given twice");
	/* A wanted name no file has. */
	char *wanted_none[] = { "g2", "nope" };
	expect_error(RFS_VARJOIN_NAMES, three, three_counts, 3, wanted_none, 2,
		     "var_names=names.txt: 'nope' (line 2) is in no source");
	/* inner with nothing shared */
	char *x[] = { "x" }, *y[] = { "y" };
	char *const *disjoint[] = { x, y };
	const uint64_t ones[] = { 1, 1 };
	expect_error(RFS_VARJOIN_INNER, disjoint, ones, 2, NULL, 0,
		     "no var name is in every file");
}

static void set_limit(uint64_t bytes)
{
	struct rfs_memlimit l = { .bytes = bytes };
	snprintf(l.where, sizeof(l.where), "the test's limit");
	use_limit(&l);
}

/* n distinct heap names "<prefix>0".. */
static char **numbered(const char *prefix, uint64_t n)
{
	char **names = calloc(n, sizeof(*names));
	assert_non_null(names);
	for (uint64_t i = 0; i < n; i++) {
		char text[32];
		snprintf(text, sizeof(text), "%s%llu", prefix,
			 (unsigned long long)i);
		assert_non_null(names[i] = strdup(text));
	}
	return names;
}

/* What the served names and maps hold is claimed for the join's life;
 * the indexes and the list of picks until it is made. */
static void test_claims_held(void **state)
{
	(void)state;
	set_limit(UINT64_MAX);
	struct rfs_varjoin *j = make(RFS_VARJOIN_INNER, 3, NULL, 0);
	/* g2, g4; maps of 2 served columns and 4, 4 and 3 of their own. */
	assert_int_equal(rfs_memlimit_claimed(env.claims),
			 2 * RFS_MEMLIMIT_STRING_BYTES + (3 * 2 + 11) * 8);
	rfs_varjoin_destroy(j);
	assert_int_equal(rfs_memlimit_claimed(env.claims), 0);
	j = make(RFS_VARJOIN_OUTER, 3, NULL, 0);
	assert_int_equal(rfs_memlimit_claimed(env.claims),
			 6 * RFS_MEMLIMIT_STRING_BYTES + (3 * 6 + 11) * 8);
	rfs_varjoin_destroy(j);
	char *wanted[] = { "g6", "g1", "g5" };
	j = make(RFS_VARJOIN_NAMES, 3, wanted, 3);
	assert_int_equal(rfs_memlimit_claimed(env.claims),
			 3 * RFS_MEMLIMIT_STRING_BYTES + (3 * 3 + 11) * 8);
	rfs_varjoin_destroy(j);
	assert_int_equal(rfs_memlimit_claimed(env.claims), 0);
}

/* Two files of N names each, none shared, outer: every table is claimed
 * before it is made, and a limit each one passes the one before and
 * not it fails the join there, naming the file (or the option) and the
 * table, nothing left claimed. In KiB, N = 4096: each index 64 (8192
 * slots), the list of picks 64 (8192 names), outer's index of every name
 * 128 (released once the picks are made), the served names 320 (40
 * each; the picks released then), each map 96 (8192 served and 4096
 * own columns): held at most 640, and 512 after. Before, nothing was
 * claimed: every limit made the join. */
static void test_claims_refused_in_order(void **state)
{
	(void)state;
	enum { N = 4096 };
	char **a = numbered("a", N), **b = numbered("b", N);
	char *const *both[] = { a, b };
	const uint64_t counts[] = { N, N };
	static const struct {
		uint64_t limit_kib;
		const char *says;
	} cases[] = {
		{ 32, "a.h5ad: var_join's hash index of its var names claims "
		      "8192 entries: at least 0 MiB at mount, more than the 0 "
		      "MiB of the test's limit" },
		{ 100, "b.h5ad: var_join's hash index of its var names claims "
		       "8192 entries" },
		{ 160, "option var_join=outer: a list of the served var names, "
		       "before they are copied claims 8192 entries" },
		{ 250, "option var_join=outer: a hash index of every file's "
		       "var names claims 16384 entries" },
		{ 400, "option var_join=outer: the served var names claims "
		       "8192 entries" },
		{ 520, "a.h5ad: var_join's map of its columns onto the served "
		       "ones claims 12288 entries" },
		{ 600, "b.h5ad: var_join's map of its columns onto the served "
		       "ones claims 12288 entries" },
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		set_limit(cases[k].limit_kib << 10);
		struct rfs_varjoin *j = (struct rfs_varjoin *)1;
		char err[512] = "";
		assert_int_equal(
			rfs_varjoin_create(env.claims, RFS_VARJOIN_OUTER, both,
					   counts, three_paths, 2, NULL, 0,
					   NULL, &j, err, sizeof(err)),
			-ENOMEM);
		assert_null(j);
		if (!strstr(err, cases[k].says))
			fail_msg("at %llu KiB: '%s' does not say '%s'",
				 (unsigned long long)cases[k].limit_kib, err,
				 cases[k].says);
		assert_int_equal(rfs_memlimit_claimed(env.claims), 0);
	}
	/* 640 KiB: the maps with the indexes; 512 held after. */
	set_limit(640 << 10);
	struct rfs_varjoin *j = NULL;
	char err[512] = "";
	assert_int_equal(rfs_varjoin_create(env.claims, RFS_VARJOIN_OUTER, both,
					    counts, three_paths, 2, NULL, 0,
					    NULL, &j, err, sizeof(err)),
			 0);
	assert_int_equal(rfs_varjoin_cols(j), 2 * N);
	assert_int_equal(rfs_memlimit_claimed(env.claims), 512 << 10);
	rfs_varjoin_destroy(j);
	assert_int_equal(rfs_memlimit_claimed(env.claims), 0);
	set_limit(UINT64_MAX);
	rfs_buf_free_strings(a, N);
	rfs_buf_free_strings(b, N);
}

static void test_gather(void **state)
{
	(void)state;
	struct rfs_varjoin *j = make(RFS_VARJOIN_OUTER, 3, NULL, 0);
	/* c's row [g2=1, g6=2, g4=3] -> [g1..g6] = [0, 1, 0, 3, 0, 2] */
	float src[3] = { 1, 2, 3 }, dst[6];
	memset(dst, 0xff, sizeof(dst));
	rfs_varjoin_gather(j, 2, src, dst, sizeof(float));
	const float want[6] = { 0, 1, 0, 3, 0, 2 };
	assert_memory_equal(dst, want, sizeof(want));
	uint8_t s8[3] = { 7, 8, 9 }, d8[6];
	rfs_varjoin_gather(j, 2, s8, d8, 1);
	const uint8_t w8[6] = { 0, 7, 0, 9, 0, 8 };
	assert_memory_equal(d8, w8, sizeof(w8));
	double s64[3] = { 1.5, 2.5, 3.5 }, d64[6];
	rfs_varjoin_gather(j, 2, s64, d64, 8);
	assert_true(d64[1] == 1.5 && d64[5] == 2.5 && d64[3] == 3.5 &&
		    d64[0] == 0 && d64[2] == 0 && d64[4] == 0);
	rfs_varjoin_destroy(j);
}

static void test_remap_csr(void **state)
{
	(void)state;
	struct rfs_varjoin *j = make(RFS_VARJOIN_INNER, 3, NULL, 0);
	/* b's row: g4=10 (col 0), g5=20 (1), g2=30 (2), g1=40 (3): served
	 * [g2, g4]: g2=30 at 0, g4=10 at 1, sorted by column. */
	int64_t cols[] = { 0, 1, 2, 3 };
	float values[] = { 10, 20, 30, 40 };
	unsigned char *scratch = malloc(rfs_varjoin_row_scratch(4, 4));
	uint64_t n = rfs_varjoin_remap_row(j, 1, cols, values, 4, 4, scratch);
	assert_int_equal(n, 2);
	assert_int_equal(cols[0], 0);
	assert_int_equal(cols[1], 1);
	assert_true(values[0] == 30 && values[1] == 10);
	/* Already in served order: kept, unserved dropped. */
	int64_t c2[] = { 1, 3 }; /* a's g2, g4 */
	float v2[] = { 5, 6 };
	assert_int_equal(rfs_varjoin_remap_row(j, 0, c2, v2, 4, 2, scratch), 2);
	assert_true(c2[0] == 0 && c2[1] == 1 && v2[0] == 5 && v2[1] == 6);
	/* Repeated column ids keep their order (stable). */
	int64_t c3[] = { 2, 0, 2 };
	float v3[] = { 1, 2, 3 };
	assert_int_equal(rfs_varjoin_remap_row(j, 1, c3, v3, 4, 3, scratch), 3);
	assert_true(c3[0] == 0 && c3[1] == 0 && c3[2] == 1);
	assert_true(v3[0] == 1 && v3[1] == 3 && v3[2] == 2);
	/* Everything dropped, and an empty row. */
	int64_t c4[] = { 1, 3 };
	assert_int_equal(rfs_varjoin_remap_row(j, 1, c4, v2, 4, 2, scratch), 0);
	assert_int_equal(rfs_varjoin_remap_row(j, 1, c4, v2, 4, 0, scratch), 0);
	free(scratch);
	rfs_varjoin_destroy(j);
}

static char *write_file(const char *text)
{
	char *path = strdup("/tmp/rfs_varjoin_XXXXXX");
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	size_t len = strlen(text);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	close(fd);
	return path;
}

static void read_expect(const char *text, int want_rc, const char *needle)
{
	char *path = write_file(text);
	char **names = NULL, err[512] = "";
	uint64_t n = 0, claimed = 0;
	int rc = rfs_varjoin_read_file(env.claims, path, &names, &n, &claimed,
				       err, sizeof(err));
	assert_int_equal(rc, want_rc);
	if (want_rc != 0) {
		assert_null(names);
		assert_int_equal(claimed, 0);
		if (!strstr(err, needle) || !strstr(err, path))
			fail_msg("'%s' does not say '%s' and the path", err,
				 needle);
	}
	rfs_buf_free_strings(names, n);
	rfs_memlimit_release(env.claims, &claimed);
	assert_int_equal(rfs_memlimit_claimed(env.claims), 0);
	unlink(path);
	free(path);
}

/* text reads as the names g3 and g1. */
static void read_g3_g1(const char *text)
{
	char *path = write_file(text);
	char **names = NULL, err[512] = "";
	uint64_t n = 0, claimed = 0;
	assert_int_equal(rfs_varjoin_read_file(env.claims, path, &names, &n,
					       &claimed, err, sizeof(err)),
			 0);
	assert_int_equal(n, 2);
	assert_string_equal(names[0], "g3");
	assert_string_equal(names[1], "g1");
	rfs_buf_free_strings(names, n);
	rfs_memlimit_release(env.claims, &claimed);
	unlink(path);
	free(path);
}

static void test_read_file(void **state)
{
	(void)state;
	char *path = write_file("g3\ng1\nCD4 antigen\n");
	char **names = NULL, err[512];
	uint64_t n = 0, claimed = 0;
	assert_int_equal(rfs_varjoin_read_file(env.claims, path, &names, &n,
					       &claimed, err, sizeof(err)),
			 0);
	assert_int_equal(n, 3);
	assert_string_equal(names[0], "g3");
	assert_string_equal(names[2], "CD4 antigen");
	/* Claimed, a heap string each, until freed (none of the slots
	 * the list grew by and left empty). */
	assert_int_equal(claimed, 3 * RFS_MEMLIMIT_STRING_BYTES);
	assert_int_equal(rfs_memlimit_claimed(env.claims), claimed);
	rfs_buf_free_strings(names, n);
	rfs_memlimit_release(env.claims, &claimed);
	unlink(path);
	free(path);
	read_expect("g1\ng2", 0, NULL); /* no final newline */
	/* Written on Windows: the names without their CR (var_names.txt
	 * never holds one), else no name matched and the error printed a
	 * bare CR over itself. */
	read_g3_g1("g3\r\ng1\r\n");
	/* A UTF-8 byte order mark before the first name (Notepad, Excel)
	 * is not part of it: the name matched nothing, and the error showed
	 * it as it was given, the mark invisible. */
	read_g3_g1("\xef\xbb\xbfg3\r\ng1\n");
	read_expect("\xef\xbb\xbf\n", -EINVAL, "line 1 is empty");
	read_expect("g1\n\xef\xbb\xbfg2\n", 0, NULL); /* only the first */
	read_expect("g1\r\n\r\ng2\r\n", -EINVAL, "line 2 is empty");
	read_expect("", -EINVAL, "names no var");
	read_expect("g1\n\ng2\n", -EINVAL, "line 2 is empty");
	read_expect("g1\ng2\ng1\n", -EINVAL, "'g1' is given twice");
	/* Over the limit as the list grows: refused, naming the file. */
	set_limit(3 << 10);
	read_expect("g1\ng2\n", 0, NULL); /* 64 slots of 40 bytes */
	char text[65 * 4] = "";
	for (int i = 0; i < 65; i++)
		snprintf(text + strlen(text), sizeof(text) - strlen(text),
			 "g%d\n", i);
	read_expect(text, -ENOMEM,
		    "its var names claims 64 entries: at least 0 MiB at "
		    "mount, more than the 0 MiB of the test's limit leaves "
		    "beside the 1 MiB claimed before it");
	set_limit(UINT64_MAX);
	assert_int_equal(rfs_varjoin_read_file(env.claims,
					       "/nonexistent/names.txt", &names,
					       &n, &claimed, err, sizeof(err)),
			 -ENOENT);
	assert_non_null(strstr(err, "var_names=/nonexistent/names.txt"));
	/* A directory opens, but is not read: why, not 'read error'. */
	assert_int_equal(rfs_varjoin_read_file(env.claims, "/tmp", &names, &n,
					       &claimed, err, sizeof(err)),
			 -EISDIR);
	assert_non_null(strstr(err, "var_names=/tmp: Is a directory"));
	assert_int_equal(claimed, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_inner),
		cmocka_unit_test(test_outer),
		cmocka_unit_test(test_identity),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_claims_held),
		cmocka_unit_test(test_claims_refused_in_order),
		cmocka_unit_test(test_gather),
		cmocka_unit_test(test_remap_csr),
		cmocka_unit_test(test_read_file),
	};
	if (rfs_claims_create(NULL, &env.claims) != 0)
		return 1;
	int failed = cmocka_run_group_tests(tests, NULL, NULL);
	while (nretired)
		rfs_claims_destroy(retired[--nretired]);
	rfs_claims_destroy(env.claims);
	return failed;
}
