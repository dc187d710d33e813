/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/plan/selection.c: filters, labels, weights and the
 * per-rank rowsets of partition=file, from real HDF5 files. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "source/dataset.h"
#include "h5_fixture.h"
#include "os/memlimit.h"
#include "plan/selection.h"

#define ROWS 20

struct fixture {
	char dir[PATH_MAX];
	char path[PATH_MAX + 32]; /* one .h5ad with obs columns */
	char part[3][PATH_MAX + 32]; /* 8 + 7 + 5 rows, same obs */
	struct rfs_dataset *one, *three;
};

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

/* split: row % 4 == 3 is "val", else "train". ct: 10 x a, 6 x b, 4 x c,
 * with rows 0 and 1 missing (-1). weight: row + 1, row 7 weight 0. */
static int8_t split_of(int r)
{
	return r % 4 == 3;
}

static int8_t ct_of(int r)
{
	if (r < 2)
		return -1;
	return r < 12 ? 0 : r < 18 ? 1 : 2;
}

static double weight_of(int r)
{
	return r == 7 ? 0.0 : r + 1.0;
}

static int write_file(const char *path, int first, int rows)
{
	float x[ROWS * 2];
	int8_t split[ROWS], ct[ROWS];
	double w[ROWS];
	int32_t age[ROWS];
	for (int i = 0; i < rows; i++) {
		int r = first + i;
		x[2 * i] = x[2 * i + 1] = (float)r;
		split[i] = split_of(r);
		ct[i] = ct_of(r);
		w[i] = weight_of(r);
		age[i] = 30 + r % 3;
	}
	struct h5fx_dataset d[] = {
		{ .name = "/X",
		  .type = H5FX_F32,
		  .ndims = 2,
		  .dims = { (uint64_t)rows, 2 },
		  .data = x },
		{ .name = "/obs/weight",
		  .type = H5FX_F64,
		  .ndims = 1,
		  .dims = { (uint64_t)rows },
		  .data = w },
		{ .name = "/obs/age",
		  .type = H5FX_I32,
		  .ndims = 1,
		  .dims = { (uint64_t)rows },
		  .data = age },
	};
	const char *splits[] = { "train", "val" }, *cts[] = { "a", "b", "c" };
	if (h5fx_write(path, d, 3, 1) != 0 ||
	    h5fx_add_categorical(path, "split", split, (size_t)rows, splits,
				 2) != 0 ||
	    h5fx_add_categorical(path, "ct", ct, (size_t)rows, cts, 3) != 0)
		return -1;
	return 0;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char err[512];
	if (!f || h5fx_tmpdir(f->dir, sizeof(f->dir)) != 0)
		goto fail;
	snprintf(f->path, sizeof(f->path), "%s/one.h5ad", f->dir);
	if (write_file(f->path, 0, ROWS) != 0)
		goto fail;
	static const int first[] = { 0, 8, 15 }, rows[] = { 8, 7, 5 };
	for (int i = 0; i < 3; i++) {
		snprintf(f->part[i], sizeof(f->part[i]), "%s/part%d.h5ad",
			 f->dir, i);
		if (write_file(f->part[i], first[i], rows[i]) != 0)
			goto fail;
	}
	char *one[] = { f->path };
	char *three[] = { f->part[0], f->part[1], f->part[2] };
	if (rfs_dataset_open_joined(one, 1, NULL, &env, 1 << 20, NULL, &f->one,
				    err, sizeof(err)) != 0 ||
	    rfs_dataset_open_joined(three, 3, NULL, &env, 1 << 20, NULL,
				    &f->three, err, sizeof(err)) != 0)
		goto fail;
	*state = f;
	return 0;
fail:
	if (f) {
		rfs_dataset_destroy(f->one);
		h5fx_rmtree(f->dir);
	}
	free(f);
	return -1;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	rfs_dataset_destroy(f->one);
	rfs_dataset_destroy(f->three);
	h5fx_rmtree(f->dir);
	free(f);
	return 0;
}

static void config(struct rfs_config *c, const char *const *kv)
{
	char err[256];
	rfs_config_init(c);
	for (; kv && kv[0]; kv += 2)
		if (rfs_config_set(c, kv[0], kv[1], err, sizeof(err)) != 0)
			fail_msg("%s=%s: %s", kv[0], kv[1], err);
}

static int build(struct rfs_dataset *d, const char *const *kv,
		 struct rfs_selection *s, char *err, size_t errlen)
{
	struct rfs_config c;
	config(&c, kv);
	int rc = rfs_selection_build(&c, d, env.claims, s, err, errlen);
	rfs_config_free(&c);
	return rc;
}

static void test_no_options_is_every_row(void **state)
{
	struct fixture *f = *state;
	struct rfs_selection s;
	char err[512];
	assert_int_equal(build(f->one, NULL, &s, err, sizeof(err)), 0);
	assert_true(s.kept_rows == ROWS && !s.kept && !s.has_label);
	assert_true(s.sequences == 1 && s.seqs[0].length == ROWS);
	assert_null(s.seqs[0].cdf);
	rfs_selection_free(&s);
}

static void test_filters_and(void **state)
{
	struct fixture *f = *state;
	struct rfs_selection s;
	char err[512];
	const char *kv[] = { "filter", "split:train", "filter", "ct:b|c",
			     NULL };
	assert_int_equal(build(f->one, kv, &s, err, sizeof(err)), 0);
	uint64_t want = 0;
	for (int r = 0; r < ROWS; r++) {
		if (split_of(r) == 0 && ct_of(r) >= 1) {
			assert_true(s.kept[want] == (uint64_t)r);
			want++;
		}
	}
	assert_true(s.kept_rows == want && s.seqs[0].length == want);
	assert_true(rfs_rowset_row(&s.seqs[0], 0) == s.kept[0]);
	rfs_selection_free(&s);

	const char *none[] = { "filter", "split:val", "filter", "ct:a", NULL };
	assert_int_equal(build(f->one, none, &s, err, sizeof(err)), 0);
	rfs_selection_free(&s);
	const char *empty[] = { "filter", "age:30", "filter", "age:31", NULL };
	assert_int_equal(build(f->one, empty, &s, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "no row matches"));
	/* A value no row has, beside ones rows have: named, with those
	 * there are. */
	const char *absent[] = { "filter", "age:31|99", NULL };
	assert_int_equal(build(f->one, absent, &s, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "filter=age:31|99"));
	assert_non_null(strstr(err, "no row has value '99' (values: 30, 31, "
				    "32)"));
	const char *typo[] = { "filter", "celltype:a", NULL };
	assert_int_equal(build(f->one, typo, &s, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "filter=celltype:a"));
	assert_non_null(strstr(err, "'celltype' not found"));
}

static void test_labels(void **state)
{
	struct fixture *f = *state;
	struct rfs_selection s;
	char err[512];
	const char *kv[] = { "label", "ct", NULL };
	assert_int_equal(build(f->three, kv, &s, err, sizeof(err)), 0);
	assert_true(s.has_label && s.label.ncategories == 3);
	for (int r = 0; r < ROWS; r++)
		assert_true(rfs_selection_label(&s, (uint64_t)r) == ct_of(r));
	rfs_selection_free(&s);
	const char *ints[] = { "label", "age", NULL };
	assert_int_equal(build(f->one, ints, &s, err, sizeof(err)), 0);
	assert_true(rfs_selection_label(&s, 4) == 31);
	rfs_selection_free(&s);
	const char *real[] = { "label", "weight", NULL };
	assert_int_equal(build(f->one, real, &s, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "label=weight"));
	const char *balanced[] = { "strategy", "class_balanced", NULL };
	assert_int_equal(build(f->one, balanced, &s, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "needs label=COLUMN"));
}

static void test_weighted(void **state)
{
	struct fixture *f = *state;
	struct rfs_selection s;
	char err[512];
	const char *kv[] = { "strategy", "weighted",	"weights", "weight",
			     "filter",	 "split:train", NULL };
	assert_int_equal(build(f->one, kv, &s, err, sizeof(err)), 0);
	const struct rfs_rowset *r = &s.seqs[0];
	double sum = 0;
	for (uint64_t v = 0; v < r->length; v++) {
		sum += weight_of((int)rfs_rowset_row(r, v));
		assert_true(fabs(r->cdf[v] - sum) < 1e-9);
	}
	rfs_selection_free(&s);
	const char *cat[] = { "strategy", "weighted", "weights", "ct", NULL };
	assert_int_equal(build(f->one, cat, &s, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "weights=ct"));
	const char *zero[] = { "strategy", "weighted", "weights", "weight",
			       "filter",   "age:31",   "filter",  "split:val",
			       "filter",   "ct:a",     NULL };
	/* Rows with age 31, val and a: 7 only (weight 0). */
	assert_int_equal(build(f->one, zero, &s, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "every weight is 0"));
}

static void test_class_balanced_weights(void **state)
{
	struct fixture *f = *state;
	struct rfs_selection s;
	char err[512];
	const char *kv[] = { "strategy", "class_balanced", "label", "ct",
			     NULL };
	assert_int_equal(build(f->one, kv, &s, err, sizeof(err)), 0);
	/* smoothing 0: every class gets the same total weight (1 each),
	 * missing labels none. */
	const struct rfs_rowset *r = &s.seqs[0];
	double per_class[3] = { 0 }, prev = 0;
	for (uint64_t v = 0; v < r->length; v++) {
		double w = r->cdf[v] - prev;
		prev = r->cdf[v];
		int64_t code = rfs_selection_label(&s, v);
		if (code < 0)
			assert_true(w == 0);
		else
			per_class[code] += w;
	}
	for (int k = 0; k < 3; k++)
		assert_true(fabs(per_class[k] - 1.0) < 1e-12);
	rfs_selection_free(&s);

	/* smoothing 1: every row weight 1, natural frequencies. */
	const char *natural[] = { "strategy", "class_balanced", "label",
				  "ct",	      "smoothing",	"1",
				  NULL };
	assert_int_equal(build(f->one, natural, &s, err, sizeof(err)), 0);
	assert_true(s.seqs[0].cdf[ROWS - 1] == ROWS - 2);
	rfs_selection_free(&s);
}

/* What the selection holds (kept ids, the label, the weights' sums) is
 * claimed (memlimit.c) until it is freed, and adds up with what building
 * it reads: the weights column, held while the sums are made. */
static void test_claims_held_until_freed(void **state)
{
	struct fixture *f = *state;
	struct rfs_selection s;
	char err[512];
	const char *kv[] = { "strategy", "weighted", "weights",
			     "weight",	 "filter",   "split:train",
			     "label",	 "ct",	     NULL };
	/* Each limit a ledger of its own, and the file opened in it: the
	 * fixture's datasets keep the ledger they were opened in. */
	struct rfs_claims *fixture_claims = env.claims;
	char *path[] = { f->path };
	struct rfs_dataset *d = NULL;
	struct rfs_memlimit l = { .bytes = UINT64_MAX };
	env.claims = NULL;
	use_limit(&l);
	assert_int_equal(rfs_dataset_open_joined(path, 1, NULL, &env, 1 << 20,
						 NULL, &d, err, sizeof(err)),
			 0);
	uint64_t open = rfs_memlimit_claimed(env.claims);
	assert_int_equal(build(d, kv, &s, err, sizeof(err)), 0);
	uint64_t kept = 15 * 8, sums = 15 * 8;
	assert_true(s.kept_rows == 15 && s.label.claimed > 0);
	assert_int_equal(s.claimed, kept + sums);
	uint64_t held = rfs_memlimit_claimed(env.claims) - open;
	assert_int_equal(held, s.claimed + s.label.claimed);
	rfs_selection_free(&s);
	assert_int_equal(rfs_memlimit_claimed(env.claims), open);
	rfs_dataset_destroy(d);
	/* The sums need room beside the 20 doubles of the weights. */
	for (int room = 0; room < 2; room++) {
		l.bytes = open + held + 20 * 8 - 1 + (uint64_t)room;
		snprintf(l.where, sizeof(l.where), "the test's limit");
		use_limit(&l);
		assert_int_equal(rfs_dataset_open_joined(path, 1, NULL, &env,
							 1 << 20, NULL, &d, err,
							 sizeof(err)),
				 0);
		assert_int_equal(build(d, kv, &s, err, sizeof(err)),
				 room ? 0 : -ENOMEM);
		if (!room)
			assert_non_null(strstr(err,
					       "option strategy=weighted: a "
					       "weight sum per sampled row "
					       "claims 15 entries"));
		assert_int_equal(rfs_memlimit_claimed(env.claims),
				 room ? open + s.claimed + s.label.claimed :
					open);
		rfs_selection_free(&s);
		rfs_dataset_destroy(d);
	}
	rfs_claims_destroy(env.claims);
	env.claims = fixture_claims;
}

static void test_file_partition(void **state)
{
	struct fixture *f = *state;
	struct rfs_selection s;
	char err[512];
	const char *kv[] = { "world_size", "2", "partition", "file", NULL };
	assert_int_equal(build(f->three, kv, &s, err, sizeof(err)), 0);
	assert_true(s.sequences == 2);
	/* Rank 0: files 0 and 2 (rows 0-7, 15-19); rank 1: file 1. */
	assert_true(s.seqs[0].length == 13 && s.seqs[1].length == 7);
	assert_true(rfs_rowset_row(&s.seqs[0], 7) == 7);
	assert_true(rfs_rowset_row(&s.seqs[0], 8) == 15);
	assert_true(rfs_rowset_row(&s.seqs[1], 0) == 8);
	rfs_selection_free(&s);

	/* With a filter the ranges are stretches of the kept rows. */
	const char *flt[] = { "world_size", "2",	 "partition", "file",
			      "filter",	    "split:val", NULL };
	assert_int_equal(build(f->three, flt, &s, err, sizeof(err)), 0);
	/* val rows: 3, 7, 11, 15, 19 -> rank 0: 3, 7, 15, 19; rank 1: 11 */
	assert_true(s.seqs[0].length == 4 && s.seqs[1].length == 1);
	assert_true(rfs_rowset_row(&s.seqs[0], 2) == 15);
	assert_true(rfs_rowset_row(&s.seqs[1], 0) == 11);
	rfs_selection_free(&s);

	const char *many[] = { "world_size", "4", "partition", "file", NULL };
	assert_int_equal(build(f->three, many, &s, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "3 source files for world_size 4"));
	const char *draws[] = { "world_size", "2",	  "partition",
				"file",	      "strategy", "weighted",
				"weights",    "weight",	  NULL };
	assert_int_equal(build(f->three, draws, &s, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "partition=file works with"));
}

static uint64_t digest_of(struct rfs_dataset *d, const char *const *kv)
{
	struct rfs_selection s;
	char err[512];
	if (build(d, kv, &s, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	uint64_t h = rfs_selection_digest(&s);
	rfs_selection_free(&s);
	return h;
}

/* The digest follows what the columns gave, not the option text or the
 * files' layout: none without columns, equal for the same rows and codes
 * from one file or three, different when the kept rows, the label codes
 * or the weights differ. */
static void test_digest(void **state)
{
	struct fixture *f = *state;
	const char *train[] = { "filter", "split:train", NULL };
	const char *val[] = { "filter", "split:val", NULL };
	const char *ct[] = { "label", "ct", NULL };
	const char *age[] = { "label", "age", NULL };
	const char *w[] = { "strategy", "weighted", "weights", "weight", NULL };
	const char *w_age[] = { "strategy", "weighted", "weights", "age",
				NULL };
	const char *w_seeded[] = { "strategy", "weighted", "weights", "weight",
				   "seed",     "9",	   NULL };
	assert_true(digest_of(f->one, NULL) == 0);
	const char *plain[] = { "strategy", "shuffle", NULL };
	assert_true(digest_of(f->one, plain) == 0);
	uint64_t h[] = { digest_of(f->one, train), digest_of(f->one, val),
			 digest_of(f->one, ct),	   digest_of(f->one, age),
			 digest_of(f->one, w),	   digest_of(f->one, w_age) };
	size_t n = sizeof(h) / sizeof(h[0]);
	for (size_t i = 0; i < n; i++) {
		assert_true(h[i] != 0);
		for (size_t j = i + 1; j < n; j++)
			assert_true(h[i] != h[j]);
	}
	assert_true(digest_of(f->one, train) == h[0]);
	assert_true(digest_of(f->three, train) == h[0]);
	assert_true(digest_of(f->three, ct) == h[2]);
	/* The seed is an option: view_id has it already. */
	assert_true(digest_of(f->one, w_seeded) == h[4]);

	/* The same codes under other category names. */
	char renamed[PATH_MAX + 32], err[512];
	snprintf(renamed, sizeof(renamed), "%s/renamed.h5ad", f->dir);
	int8_t codes[ROWS];
	for (int r = 0; r < ROWS; r++)
		codes[r] = ct_of(r);
	const char *names[] = { "x", "y", "z" };
	assert_int_equal(write_file(renamed, 0, ROWS), 0);
	assert_int_equal(
		h5fx_add_categorical(renamed, "ct2", codes, ROWS, names, 3), 0);
	char *paths[] = { renamed };
	struct rfs_dataset *d;
	assert_int_equal(rfs_dataset_open_joined(paths, 1, NULL, &env, 1 << 20,
						 NULL, &d, err, sizeof(err)),
			 0);
	const char *ct2[] = { "label", "ct2", NULL };
	assert_true(digest_of(d, ct) == h[2]);
	assert_true(digest_of(d, ct2) != h[2]);
	rfs_dataset_destroy(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_options_is_every_row),
		cmocka_unit_test(test_filters_and),
		cmocka_unit_test(test_labels),
		cmocka_unit_test(test_weighted),
		cmocka_unit_test(test_class_balanced_weights),
		cmocka_unit_test(test_claims_held_until_freed),
		cmocka_unit_test(test_file_partition),
		cmocka_unit_test(test_digest),
	};
	if (rfs_claims_create(NULL, &env.claims) != 0)
		return 1;
	int failed = cmocka_run_group_tests(tests, setup, teardown);
	while (nretired)
		rfs_claims_destroy(retired[--nretired]);
	rfs_claims_destroy(env.claims);
	return failed;
}
