/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/serve/view_json.c: config.json, dataset.json, stats.json
 * and view_id from what they are given. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "source/dataset.h"
#include "h5_fixture.h"
#include "os/memlimit.h"
#include "plan/selection.h"
#include "serve/stats.h"
#include "serve/view_json.h"

#define COLS 5

struct fixture {
	char dir[PATH_MAX];
	char path[PATH_MAX + 32]; /* 1000 x 5 float32 at /X */
	char other[PATH_MAX + 32]; /* 1001 rows */
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

static int write_source(const char *path, uint64_t rows)
{
	return h5fx_write_f32(path, rows, COLS, 2, 1);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	if (!f || h5fx_tmpdir(f->dir, sizeof(f->dir)) != 0) {
		free(f);
		return -1;
	}
	snprintf(f->path, sizeof(f->path), "%s/cells.h5ad", f->dir);
	snprintf(f->other, sizeof(f->other), "%s/other.h5ad", f->dir);
	if (write_source(f->path, 1000) != 0 ||
	    write_source(f->other, 1001) != 0) {
		h5fx_rmtree(f->dir);
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	h5fx_rmtree(f->dir);
	free(f);
	return 0;
}

struct opened {
	struct rfs_config c;
	struct rfs_dataset *d;
	struct rfs_selection s;
};

static void set(struct rfs_config *c, const char *key, const char *value)
{
	char err[128];
	assert_int_equal(rfs_config_set(c, key, value, err, sizeof(err)), 0);
}

/* path with batch_size 16 and seed. */
static void open_source(struct opened *o, const char *path, const char *seed)
{
	char err[512] = "";
	memset(o, 0, sizeof(*o));
	rfs_config_init(&o->c);
	set(&o->c, "batch_size", "16");
	set(&o->c, "seed", seed);
	set(&o->c, "dataset", "/X");
	char *paths[] = { (char *)path };
	if (rfs_dataset_open_joined(paths, 1, "/X", &env, 1 << 20, NULL, &o->d,
				    err, sizeof(err)) != 0)
		fail_msg("open %s: %s", path, err);
	assert_int_equal(rfs_selection_build(&o->c, o->d, env.claims, &o->s,
					     err, sizeof(err)),
			 0);
}

static void close_source(struct opened *o)
{
	rfs_selection_free(&o->s);
	rfs_dataset_destroy(o->d);
	rfs_config_free(&o->c);
}

static uint64_t id_of(struct opened *o)
{
	uint64_t id = 0;
	assert_int_equal(rfs_view_json_id(&o->c, o->d, &o->s, 62, &id), 0);
	return id;
}

/* Equal for equal data and byte-changing options, whatever else. */
static void test_view_id(void **state)
{
	struct fixture *f = *state;
	struct opened a, b, c, d;
	open_source(&a, f->path, "5");
	open_source(&b, f->path, "5");
	open_source(&c, f->path, "6");
	open_source(&d, f->other, "5");
	set(&b.c, "cache_mb", "7"); /* not byte-changing */
	set(&b.c, "threads", "3");
	uint64_t ida = id_of(&a);
	assert_true(ida == id_of(&b));
	assert_true(ida != id_of(&c));
	assert_true(ida != id_of(&d));
	/* epochs changes nothing, unless it widens step names. */
	set(&b.c, "epochs", "3");
	assert_true(ida == id_of(&b));
	uint64_t wide;
	set(&b.c, "epochs", "2000000000");
	assert_int_equal(rfs_view_json_id(&b.c, b.d, &b.s, 62, &wide), 0);
	assert_true(ida != wide);
	close_source(&a);
	close_source(&b);
	close_source(&c);
	close_source(&d);
}

static void test_config_and_dataset(void **state)
{
	struct fixture *f = *state;
	struct opened o;
	open_source(&o, f->path, "77");
	char *j;
	size_t len;
	assert_int_equal(rfs_view_json_config(&o.c, 0xabcdef12345ull, &j, &len),
			 0);
	assert_int_equal(strlen(j), len);
	assert_int_equal(j[0], '{');
	assert_non_null(strstr(j, "\"seed\": 77"));
	assert_non_null(strstr(j, "\"batch_size\": 16"));
	assert_non_null(strstr(j, "\"view_id\": \"00000abcdef12345\""));
	assert_int_equal(strcmp(j + len - 2, "}\n"), 0);
	free(j);

	assert_int_equal(rfs_view_json_dataset(&o.c, o.d, &o.s, RFS_FLOAT64, &j,
					       &len),
			 0);
	assert_int_equal(strlen(j), len);
	assert_non_null(strstr(j, "\"rows\": 1000"));
	assert_non_null(strstr(j, "\"columns\": 5"));
	assert_non_null(strstr(j, "\"dtype\": \"float32\""));
	assert_non_null(strstr(j, "\"served_dtype\": \"float64\""));
	assert_non_null(strstr(j, "\"format\": \"dense\""));
	assert_non_null(strstr(j, "\"shape\": [1000, 5]"));
	assert_non_null(strstr(j, "\"dataset\": \"/X\""));
	assert_non_null(strstr(j, "\"layout\": \"contiguous\""));
	assert_non_null(strstr(j, "cells.h5ad\", \"rows\": 1000, "
				  "\"first_row\": 0"));
	assert_non_null(strstr(j, "\"filtered_rows\": 1000"));
	assert_non_null(strstr(j, "\"label\": null"));
	assert_non_null(strstr(j, "\"fingerprint\": \""));
	assert_int_equal(strcmp(j + len - 2, "}\n"), 0);
	free(j);
	close_source(&o);
}

static void test_stats(void **state)
{
	(void)state;
	struct rfs_view_json_live l = {
		.view_id = 0x1234,
		.cache = { .hits = 3,
			   .misses = 4,
			   .prefetched = 9,
			   .bytes = 500,
			   .entries = 2,
			   .room_waits = 1 },
		.prefetch = { .queued = 7, .done = 6, .dropped = 5 },
		.depth = 8,
		.budget = { .total = 100,
			    .chunks = 50,
			    .plan_limit = 25,
			    .plan = 10,
			    .batches = 40,
			    .prefetch = 20,
			    .pool = 12 },
		.sources_bytes = 7,
	};
	assert_int_equal(rfs_stats_create(2, &l.stats), 0);
	char *j;
	size_t len;
	assert_int_equal(rfs_view_json_stats(&l, &j, &len), 0);
	assert_int_equal(strlen(j), len);
	assert_non_null(strstr(j, "\"view_id\": \"0000000000001234\""));
	assert_non_null(strstr(j, "\"ranks\": ["));
	assert_non_null(strstr(j, "\"cache\": {\"hits\": 3, \"misses\": 4, "
				  "\"prefetched\": 9, "
				  "\"bytes\": 500, \"entries\": 2, "
				  "\"capacity_bytes\": 100, "
				  "\"room_waits\": 1}"));
	assert_non_null(strstr(j, "\"prefetch\": {\"depth\": 8, "
				  "\"queued\": 7, \"done\": 6, "
				  "\"dropped\": 5}"));
	assert_non_null(strstr(j, "\"budget\": {\"total_bytes\": 100, "
				  "\"chunks_bytes\": 50, "
				  "\"batches_bytes\": 40, "
				  "\"prefetch_bytes\": 20, \"plan_bytes\": 10, "
				  "\"pool_bytes\": 12, \"sources_bytes\": 7}"));
	assert_non_null(strstr(j, "\"sources\": [\n  ]"));
	assert_int_equal(strcmp(j + len - 2, "}\n"), 0);
	free(j);
	rfs_stats_destroy(l.stats);
}

/* var_names.txt, kept for the mount, is as long as the names the
 * sources' metadata gives: its bytes are claimed (memlimit.c) before it
 * is made, and released by the caller once freed. Past the limit it is
 * refused, naming it. Before, it was made unclaimed. */
static void test_var_names_claimed(void **state)
{
	struct fixture *f = *state;
	char path[PATH_MAX + 32], err[512] = "";
	snprintf(path, sizeof(path), "%s/genes.h5ad", f->dir);
	assert_int_equal(write_source(path, 1000), 0);
	const char *genes[COLS] = { "g0", "g1", "g2", "g3", "CD19" };
	assert_int_equal(h5fx_add_var(path, genes, COLS), 0);
	/* The first file's names, kept by the dataset: 5 of 40 bytes, and
	 * 40 each of the child's that read them (hdf5_strings.c). */
	const uint64_t names = COLS * 2 * RFS_MEMLIMIT_STRING_BYTES;
	const uint64_t text = 4 * 3 + 5; /* "g0\n" .. "CD19\n" */
	struct rfs_memlimit l = { .bytes = names + text };
	snprintf(l.where, sizeof(l.where), "the test's limit");
	use_limit(&l);
	struct rfs_dataset *d;
	char *paths[] = { path };
	assert_int_equal(rfs_dataset_open_joined(paths, 1, "/X", &env, 1 << 20,
						 NULL, &d, err, sizeof(err)),
			 0);
	assert_int_equal(rfs_memlimit_claimed(env.claims), names);
	char *out = (char *)1;
	size_t len = 1;
	uint64_t claimed = 0;
	assert_int_equal(rfs_view_json_var_names(env.claims, d, &out, &len,
						 &claimed, err, sizeof(err)),
			 -ENOMEM);
	assert_null(out);
	assert_int_equal(claimed, 0);
	assert_non_null(strstr(err, "var_names.txt: the served var names (a "
				    "byte per character, one a line) claims "
				    "18 entries"));
	assert_int_equal(rfs_memlimit_claimed(env.claims), names);
	rfs_dataset_destroy(d);

	l.bytes = names + text + 1;
	use_limit(&l);
	assert_int_equal(rfs_dataset_open_joined(paths, 1, "/X", &env, 1 << 20,
						 NULL, &d, err, sizeof(err)),
			 0);
	assert_int_equal(rfs_view_json_var_names(env.claims, d, &out, &len,
						 &claimed, err, sizeof(err)),
			 0);
	assert_int_equal(len, text);
	assert_memory_equal(out, "g0\ng1\ng2\ng3\nCD19\n", text);
	assert_int_equal(claimed, text + 1);
	assert_int_equal(rfs_memlimit_claimed(env.claims), names + text + 1);
	free(out);
	rfs_memlimit_release(env.claims, &claimed);
	rfs_dataset_destroy(d);
	assert_int_equal(rfs_memlimit_claimed(env.claims), 0);
	struct rfs_memlimit none = { .bytes = UINT64_MAX };
	use_limit(&none);
	remove(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_view_id),
		cmocka_unit_test(test_config_and_dataset),
		cmocka_unit_test(test_stats),
		cmocka_unit_test(test_var_names_claimed),
	};
	if (rfs_claims_create(NULL, &env.claims) != 0)
		return 1;
	int failed = cmocka_run_group_tests(tests, setup, teardown);
	while (nretired)
		rfs_claims_destroy(retired[--nretired]);
	rfs_claims_destroy(env.claims);
	return failed;
}
