/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/core/config.c: defaults, parsing, rendering. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/config.h"

/* strdup, failing while strdup_fails is set (tests/CMakeLists.txt). */
char *__real_strdup(const char *s);
char *__wrap_strdup(const char *s);
static int strdup_fails;
char *__wrap_strdup(const char *s)
{
	return strdup_fails ? NULL : __real_strdup(s);
}

/* noinline: inlined at -O3, gcc 12 takes the returned string for a
 * pointer to the local `out` (-Wdangling-pointer). */
__attribute__((noinline)) static char *render(const struct rfs_config *c,
					      int identity)
{
	struct rfs_buf b = { 0 };
	char *out = NULL;
	size_t len;
	if (identity)
		rfs_config_render_identity(c, &b);
	else
		rfs_config_render_json(c, &b);
	assert_int_equal(rfs_buf_finish(&b, &out, &len), 0);
	assert_int_equal(strlen(out), len);
	return out;
}

static void test_defaults(void **state)
{
	(void)state;
	struct rfs_config c;
	memset(&c, 0xa5, sizeof(c));
	rfs_config_init(&c);
	assert_int_equal(c.world_size, 1);
	assert_int_equal(c.batch_size, 256);
	assert_int_equal(c.seed, 0);
	assert_int_equal(c.strategy, RFS_BLOCK_SHUFFLE);
	assert_int_equal(c.block_size, 64);
	assert_int_equal(c.fetch_factor, 16);
	assert_int_equal(c.partition, RFS_PARTITION_BATCH);
	assert_int_equal(c.drop_last, 1);
	assert_null(c.dataset);
	assert_int_equal(c.epochs, 10);
	assert_true(c.cache_mb == RFS_UNSET); /* view.c: memlimit.c */
	assert_int_equal(c.raw, 0);
	assert_null(c.log_file);
	rfs_config_free(&c);
}

static void set_ok(struct rfs_config *c, const char *key, const char *value)
{
	char err[256] = "";
	int rc = rfs_config_set(c, key, value, err, sizeof(err));
	if (rc != 0)
		fail_msg("%s=%s: rc %d, %s", key, value ? value : "(null)", rc,
			 err);
}

static void test_every_option_sets(void **state)
{
	(void)state;
	struct rfs_config c;
	rfs_config_init(&c);
	set_ok(&c, "world_size", "8");
	set_ok(&c, "batch_size", "32");
	set_ok(&c, "seed", "18446744073709551615");
	set_ok(&c, "strategy", "shuffle");
	set_ok(&c, "block_size", "128");
	set_ok(&c, "fetch_factor", "4");
	set_ok(&c, "partition", "batch");
	set_ok(&c, "drop_last", "1");
	set_ok(&c, "dataset", "/obsm/X_pca");
	set_ok(&c, "epochs", "3");
	set_ok(&c, "cache_mb", "64");
	set_ok(&c, "raw", NULL);
	set_ok(&c, "log_file", "/tmp/rankfs.log");
	set_ok(&c, "drop_last", "0");
	set_ok(&c, "total_size", "5000");
	set_ok(&c, "weights", "w");
	set_ok(&c, "label", "cell_type");
	set_ok(&c, "smoothing", "0.25");
	set_ok(&c, "filter", "split:train");
	set_ok(&c, "filter", "batch:a|b");
	assert_int_equal(c.drop_last, 0);
	assert_true(c.total_size == 5000);
	assert_string_equal(c.weights, "w");
	assert_string_equal(c.label, "cell_type");
	assert_true(c.smoothing == 0.25);
	assert_int_equal(c.filter.count, 2);
	assert_string_equal(c.filter.items[0], "split:train");
	assert_string_equal(c.filter.items[1], "batch:a|b");
	set_ok(&c, "drop_last", "1");
	assert_int_equal(c.world_size, 8);
	assert_int_equal(c.batch_size, 32);
	assert_true(c.seed == UINT64_MAX);
	assert_int_equal(c.strategy, RFS_SHUFFLE);
	assert_int_equal(c.block_size, 128);
	assert_int_equal(c.fetch_factor, 4);
	assert_int_equal(c.partition, RFS_PARTITION_BATCH);
	assert_int_equal(c.drop_last, 1);
	assert_string_equal(c.dataset, "/obsm/X_pca");
	assert_int_equal(c.epochs, 3);
	assert_int_equal(c.cache_mb, 64);
	assert_int_equal(c.raw, 1);
	assert_string_equal(c.log_file, "/tmp/rankfs.log");

	set_ok(&c, "strategy", "streaming");
	assert_int_equal(c.strategy, RFS_STREAMING);
	set_ok(&c, "strategy", "block_shuffle");
	assert_int_equal(c.strategy, RFS_BLOCK_SHUFFLE);
	set_ok(&c, "raw", "0");
	assert_int_equal(c.raw, 0);
	set_ok(&c, "raw", "1");
	assert_int_equal(c.raw, 1);
	/* Setting a text option again replaces (and frees) the old copy. */
	set_ok(&c, "dataset", "/X");
	assert_string_equal(c.dataset, "/X");
	rfs_config_free(&c);
	assert_null(c.dataset);
	assert_null(c.log_file);
	assert_null(c.label);
	assert_null(c.filter.items);
	assert_int_equal(c.filter.count, 0);
}

static void test_copy_is_deep(void **state)
{
	(void)state;
	struct rfs_config c, d;
	rfs_config_init(&c);
	set_ok(&c, "dataset", "/X");
	set_ok(&c, "filter", "a:1");
	set_ok(&c, "filter", "b:2|3");
	set_ok(&c, "smoothing", ".5");
	assert_int_equal(rfs_config_copy(&d, &c), 0);
	assert_ptr_not_equal(d.dataset, c.dataset);
	assert_ptr_not_equal(d.filter.items, c.filter.items);
	rfs_config_free(&c);
	assert_string_equal(d.dataset, "/X");
	assert_int_equal(d.filter.count, 2);
	assert_string_equal(d.filter.items[1], "b:2|3");
	assert_true(d.smoothing == 0.5);
	rfs_config_free(&d);
}

static void test_new_options_render(void **state)
{
	(void)state;
	struct rfs_config c;
	rfs_config_init(&c);
	set_ok(&c, "strategy", "class_balanced");
	set_ok(&c, "smoothing", "0.1");
	set_ok(&c, "filter", "split:train");
	set_ok(&c, "filter", "ct:\"B\"");
	char *j = render(&c, 0);
	assert_non_null(strstr(j, "\"smoothing\": 0.1,"));
	assert_non_null(strstr(j, "\"filter\": [\"split:train\", "
				  "\"ct:\\\"B\\\"\"]"));
	assert_non_null(strstr(j, "\"weights\": null"));
	free(j);
	char *id = render(&c, 1);
	assert_non_null(strstr(id, "smoothing=0.1\n"));
	/* Sorted: the order of filters does not change the rows kept. */
	assert_non_null(strstr(id, "filter=ct:\"B\";split:train\n"));
	free(id);
	rfs_config_free(&c);
}

/* Values %g writes with an exponent render as decimals that the option
 * parser reads back to the same value (config.json mounts again). */
static void test_small_reals_render_as_decimals(void **state)
{
	(void)state;
	const char *values[] = { "0.00001", "0.000012345",
				 "0.0000000000000000000000000000001", "1" };
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		struct rfs_config c, again;
		rfs_config_init(&c);
		rfs_config_init(&again);
		set_ok(&c, "strategy", "class_balanced");
		set_ok(&c, "smoothing", values[i]);
		char *id = render(&c, 1);
		const char *at = strstr(id, "smoothing=");
		assert_non_null(at);
		char text[64];
		assert_int_equal(sscanf(at, "smoothing=%63[^\n]", text), 1);
		assert_null(strchr(text, 'e'));
		set_ok(&again, "smoothing", text);
		assert_true(again.smoothing == c.smoothing);
		free(id);
		rfs_config_free(&c);
		rfs_config_free(&again);
	}
}

static void test_text_is_copied(void **state)
{
	(void)state;
	struct rfs_config c;
	char value[] = "/layers/counts";
	rfs_config_init(&c);
	set_ok(&c, "dataset", value);
	value[1] = 'X';
	assert_string_equal(c.dataset, "/layers/counts");
	rfs_config_free(&c);
}

static void test_bounds(void **state)
{
	(void)state;
	struct rfs_config c;
	rfs_config_init(&c);
	/* Largest accepted values. */
	set_ok(&c, "world_size", "1048576");
	set_ok(&c, "batch_size", "16777216");
	set_ok(&c, "block_size", "1099511627776");
	set_ok(&c, "fetch_factor", "65536");
	set_ok(&c, "epochs", "2147483648");
	set_ok(&c, "cache_mb", "1073741824");
	assert_int_equal(c.world_size, 1u << 20);
	assert_int_equal(c.batch_size, 1u << 24);
	assert_true(c.block_size == UINT64_C(1) << 40);
	assert_int_equal(c.fetch_factor, 1u << 16);
	assert_true(c.epochs == UINT64_C(1) << 31);
	assert_true(c.cache_mb == UINT64_C(1) << 30);
	/* Leading zeros are fine in option values (not canonical). */
	set_ok(&c, "batch_size", "0064");
	assert_int_equal(c.batch_size, 64);
	rfs_config_free(&c);
}

struct bad_case {
	const char *key;
	const char *value;
};

static void test_bad_values_rejected(void **state)
{
	(void)state;
	static const struct bad_case bad[] = {
		{ "world_size", "0" },
		{ "world_size", "1048577" },
		{ "world_size", "-1" },
		{ "world_size", "" },
		{ "world_size", NULL },
		{ "world_size", "2 " },
		{ "batch_size", "0" },
		{ "batch_size", "16777217" },
		{ "batch_size", "0x10" },
		{ "seed", "18446744073709551616" },
		{ "seed", "-5" },
		{ "seed", "1e3" },
		{ "block_size", "0" },
		{ "block_size", "1099511627777" },
		{ "fetch_factor", "0" },
		{ "fetch_factor", "65537" },
		{ "drop_last", "2" },
		{ "total_size", "0" },
		{ "total_size", "1099511627777" },
		{ "smoothing", "1.5" },
		{ "smoothing", "-0.1" },
		{ "smoothing", "nan" },
		{ "smoothing", "inf" },
		{ "smoothing", "1e-3" },
		{ "smoothing", "0x1" },
		{ "smoothing", "." },
		{ "smoothing", "" },
		{ "smoothing", NULL },
		{ "smoothing", "0.5.5" },
		{ "filter", "" },
		{ "filter", NULL },
		{ "weights", "" },
		{ "label", NULL },
		{ "partition", "files" },
		{ "strategy", "weights" },
		{ "epochs", "0" },
		{ "epochs", "2147483649" },
		{ "cache_mb", "0" },
		{ "cache_mb", "1073741825" },
		{ "raw", "2" },
		{ "raw", "yes" },
		{ "strategy", "random" },
		{ "strategy", "" },
		{ "strategy", NULL },
		{ "strategy", "Shuffle" },
		{ "partition", "sample" },
		{ "dataset", "" },
		{ "dataset", NULL },
		{ "log_file", "" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct rfs_config c, before;
		char err[256] = "";
		rfs_config_init(&c);
		before = c;
		int rc = rfs_config_set(&c, bad[i].key, bad[i].value, err,
					sizeof(err));
		if (rc != -EINVAL)
			fail_msg("%s=%s: rc %d, want -EINVAL", bad[i].key,
				 bad[i].value ? bad[i].value : "(null)", rc);
		if (!strstr(err, bad[i].key))
			fail_msg("%s=%s: message does not name the option: "
				 "\"%s\"",
				 bad[i].key,
				 bad[i].value ? bad[i].value : "(null)", err);
		assert_null(strchr(err, '\n'));
		/* A rejected value leaves the config as it was. */
		assert_memory_equal(&c, &before, sizeof(c));
		rfs_config_free(&c);
	}
}

static void test_numeric_message_names_range(void **state)
{
	(void)state;
	struct rfs_config c;
	char err[256] = "";
	rfs_config_init(&c);
	assert_int_equal(rfs_config_set(&c, "world_size", "0", err,
					sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "world_size"));
	assert_non_null(strstr(err, "1"));
	assert_non_null(strstr(err, "1048576"));
	rfs_config_free(&c);
}

static void test_strategy_message_lists_choices(void **state)
{
	(void)state;
	struct rfs_config c;
	char err[256] = "";
	rfs_config_init(&c);
	assert_int_equal(rfs_config_set(&c, "strategy", "random", err,
					sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "strategy"));
	assert_non_null(strstr(err, "random"));
	assert_non_null(strstr(err, "streaming"));
	assert_non_null(strstr(err, "shuffle"));
	assert_non_null(strstr(err, "block_shuffle"));
	assert_int_equal(c.strategy, RFS_BLOCK_SHUFFLE);

	memset(err, 0, sizeof(err));
	assert_int_equal(rfs_config_set(&c, "partition", "x", err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "partition"));
	assert_non_null(strstr(err, "batch"));
	rfs_config_free(&c);
}

static void test_small_err_buffer(void **state)
{
	(void)state;
	struct rfs_config c;
	char err[8];
	memset(err, 'q', sizeof(err));
	rfs_config_init(&c);
	assert_int_equal(rfs_config_set(&c, "strategy", "nope", err,
					sizeof(err)),
			 -EINVAL);
	assert_int_equal(err[sizeof(err) - 1], '\0'); /* truncated, ended */
	rfs_config_free(&c);
}

static void test_unknown_key(void **state)
{
	(void)state;
	struct rfs_config c, before;
	char err[64] = "untouched";
	rfs_config_init(&c);
	before = c;
	assert_int_equal(rfs_config_set(&c, "allow_other", NULL, err,
					sizeof(err)),
			 -ENOENT);
	assert_int_equal(rfs_config_set(&c, "World_size", "2", err,
					sizeof(err)),
			 -ENOENT);
	assert_int_equal(rfs_config_set(&c, "world_size ", "2", err,
					sizeof(err)),
			 -ENOENT);
	assert_int_equal(rfs_config_set(&c, "", "2", err, sizeof(err)),
			 -ENOENT);
	/* FUSE passthrough was removed: its option is unknown like any. */
	assert_int_equal(rfs_config_set(&c, "passthrough", NULL, err,
					sizeof(err)),
			 -ENOENT);
	/* So was direct_io (the page cache serves every file). */
	assert_int_equal(rfs_config_set(&c, "direct_io", NULL, err,
					sizeof(err)),
			 -ENOENT);
	assert_string_equal(err, "untouched");
	assert_memory_equal(&c, &before, sizeof(c));
}

static void test_strategy_name(void **state)
{
	(void)state;
	assert_string_equal(rfs_config_strategy_name(RFS_STREAMING),
			    "streaming");
	assert_string_equal(rfs_config_strategy_name(RFS_SHUFFLE), "shuffle");
	assert_string_equal(rfs_config_strategy_name(RFS_BLOCK_SHUFFLE),
			    "block_shuffle");
	assert_string_equal(rfs_config_strategy_name(RFS_WEIGHTED), "weighted");
	assert_string_equal(rfs_config_strategy_name(RFS_CLASS_BALANCED),
			    "class_balanced");
	assert_string_equal(rfs_config_strategy_name(5), "?");
	assert_string_equal(rfs_config_strategy_name(UINT64_MAX), "?");
}

static void test_render_json_defaults(void **state)
{
	(void)state;
	struct rfs_config c;
	rfs_config_init(&c);
	char *j = render(&c, 0);
	static const char *const want[] = {
		"\"world_size\": 1",
		"\"batch_size\": 256",
		"\"seed\": 0",
		"\"strategy\": \"block_shuffle\"",
		"\"block_size\": 64",
		"\"fetch_factor\": 16",
		"\"partition\": \"batch\"",
		"\"drop_last\": 1",
		"\"dataset\": null",
		"\"epochs\": 10",
		"\"cache_mb\": null",
		"\"log_file\": null",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (!strstr(j, want[i]))
			fail_msg("missing %s in:\n%s", want[i], j);
	/* Members only: no braces, no trailing comma. */
	assert_null(strchr(j, '{'));
	assert_int_not_equal(j[strlen(j) - 1], ',');
	free(j);
	rfs_config_free(&c);
}

static void test_render_json_set_values(void **state)
{
	(void)state;
	struct rfs_config c;
	rfs_config_init(&c);
	set_ok(&c, "strategy", "streaming");
	set_ok(&c, "seed", "12345678901234567890");
	set_ok(&c, "dataset", "/a\"b\\c");
	set_ok(&c, "raw", "1");
	char *j = render(&c, 0);
	assert_non_null(strstr(j, "\"strategy\": \"streaming\""));
	assert_non_null(strstr(j, "\"seed\": 12345678901234567890"));
	assert_non_null(strstr(j, "\"dataset\": \"/a\\\"b\\\\c\""));
	assert_non_null(strstr(j, "\"raw\": true"));
	free(j);
	rfs_config_free(&c);
}

static void test_render_identity(void **state)
{
	(void)state;
	struct rfs_config c;
	rfs_config_init(&c);
	set_ok(&c, "dataset", "/X");
	set_ok(&c, "world_size", "4");
	char *id = render(&c, 1);
	static const char *const want[] = {
		"world_size=4\n",    "batch_size=256\n",
		"seed=0\n",	     "strategy=block_shuffle\n",
		"block_size=64\n",   "fetch_factor=16\n",
		"partition=batch\n", "drop_last=1\n",
		"dataset=/X\n",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (!strstr(id, want[i]))
			fail_msg("missing %s in:\n%s", want[i], id);
	/* Options that do not change the bytes served stay out. */
	assert_null(strstr(id, "epochs"));
	assert_null(strstr(id, "cache_mb"));
	assert_null(strstr(id, "threads"));
	assert_null(strstr(id, "log_file"));
	/* ... so changing them leaves the identity as it was. */
	set_ok(&c, "epochs", "99");
	set_ok(&c, "cache_mb", "1");
	set_ok(&c, "threads", "3");
	set_ok(&c, "log_file", "/tmp/x");
	char *id2 = render(&c, 1);
	assert_string_equal(id, id2);
	free(id2);
	/* Options added after view_ids were out join them only when set:
	 * mounts without them keep their view_id. */
	assert_null(strstr(id, "var_join"));
	assert_null(strstr(id, "var_names"));
	set_ok(&c, "var_join", "none");
	id2 = render(&c, 1);
	assert_string_equal(id, id2);
	free(id2);
	set_ok(&c, "var_join", "outer");
	set_ok(&c, "var_names", "/tmp/genes.txt");
	id2 = render(&c, 1);
	assert_non_null(strstr(id2, "var_join=outer\n"));
	assert_non_null(strstr(id2, "var_names=/tmp/genes.txt\n"));
	free(id2);
	set_ok(&c, "var_join", "none");
	free(c.var_names);
	c.var_names = NULL;
	/* ... and changing one that does, changes it. */
	set_ok(&c, "seed", "1");
	id2 = render(&c, 1);
	assert_string_not_equal(id, id2);
	assert_non_null(strstr(id2, "seed=1\n"));
	free(id2);
	free(id);
	rfs_config_free(&c);
}

/* An option the strategy does not use leaves the identity as at its
 * default; the same option under a strategy that uses it changes it. */
static void test_identity_of_unused_options(void **state)
{
	(void)state;
	static const struct {
		const char *strategy, *option, *value;
		int used;
	} cases[] = {
		{ "streaming", "seed", "5", 0 },
		{ "streaming", "fetch_factor", "4", 0 },
		{ "streaming", "block_size", "8", 0 },
		{ "shuffle", "block_size", "8", 0 },
		{ "shuffle", "smoothing", "0.5", 0 },
		{ "block_shuffle", "smoothing", "0.5", 0 },
		{ "weighted", "smoothing", "0.5", 0 },
		{ "shuffle", "seed", "5", 1 },
		{ "shuffle", "fetch_factor", "4", 1 },
		{ "block_shuffle", "block_size", "8", 1 },
		{ "weighted", "block_size", "8", 1 },
		{ "class_balanced", "block_size", "8", 1 },
		{ "class_balanced", "smoothing", "0.5", 1 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		struct rfs_config c;
		rfs_config_init(&c);
		set_ok(&c, "strategy", cases[i].strategy);
		char *before = render(&c, 1);
		set_ok(&c, cases[i].option, cases[i].value);
		char *after = render(&c, 1);
		if ((strcmp(before, after) != 0) != cases[i].used)
			fail_msg("%s with %s=%s: identity %s",
				 cases[i].strategy, cases[i].option,
				 cases[i].value,
				 cases[i].used ? "unchanged" : "changed");
		free(before);
		free(after);
		rfs_config_free(&c);
	}
}

/* Filters kept the same rows in any order, with their values in any
 * order and repeated: one identity; another value or column, another. */
static void test_identity_of_filter_spellings(void **state)
{
	(void)state;
	static const char *const spellings[][3] = {
		{ "split:train|val", "flag:true", NULL },
		{ "flag:true", "split:train|val", NULL },
		{ "split:val|train", "flag:true", NULL },
		{ "flag:true", "split:train|val|train", "flag:true" },
		{ "split:|train||val|", "flag:true", NULL },
		/* Not the same filters: */
		{ "split:train", "flag:true", NULL },
		{ "split:train|val", "flag:false", NULL },
		{ "split:train|val", "flag:true|false", NULL },
		{ "flag:train|val", "split:true", NULL },
	};
	char *first = NULL;
	for (size_t i = 0; i < sizeof(spellings) / sizeof(*spellings); i++) {
		struct rfs_config c;
		rfs_config_init(&c);
		for (size_t k = 0; k < 3 && spellings[i][k]; k++)
			set_ok(&c, "filter", spellings[i][k]);
		char *id = render(&c, 1);
		if (i == 0) {
			assert_non_null(strstr(
				id, "filter=flag:true;split:train|val\n"));
			first = id;
		} else {
			if ((strcmp(first, id) == 0) != (i < 5))
				fail_msg("spelling %zu: identity %s:\n%s", i,
					 i < 5 ? "changed" : "unchanged", id);
			free(id);
		}
		rfs_config_free(&c);
	}
	free(first);
}

/* A value that cannot be copied is out of memory, named as such, not a
 * value refused; the option keeps what it had. */
static void test_set_out_of_memory(void **state)
{
	(void)state;
	static const char *const names[] = { "log_file", "filter" };
	for (size_t i = 0; i < 2; i++) {
		struct rfs_config c;
		char err[128] = "";
		rfs_config_init(&c);
		strdup_fails = 1;
		int rc = rfs_config_set(&c, names[i], "a:b", err, sizeof(err));
		strdup_fails = 0;
		assert_int_equal(rc, -ENOMEM);
		char want[64];
		snprintf(want, sizeof(want), "option %s: out of memory",
			 names[i]);
		assert_string_equal(err, want);
		assert_null(c.log_file);
		assert_int_equal(c.filter.count, 0);
		rfs_config_free(&c);
	}
}

static void test_render_help(void **state)
{
	(void)state;
	struct rfs_buf b = { 0 };
	char *h;
	size_t len;
	rfs_config_render_help(&b);
	assert_int_equal(rfs_buf_finish(&b, &h, &len), 0);
	static const char *const names[] = {
		"world_size", "batch_size",   "seed",	   "strategy",
		"block_size", "fetch_factor", "partition", "drop_last",
		"dataset",    "epochs",	      "cache_mb",  "threads",
		"log_file",
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char opt[64];
		snprintf(opt, sizeof(opt), "-o %s", names[i]);
		if (!strstr(h, opt))
			fail_msg("help lacks %s", opt);
	}
	assert_non_null(strstr(h, "streaming, shuffle, block_shuffle"));
	free(h);
}

/* The list an unknown option's message gives: every option, each set by
 * rfs_config_set(), comma-separated. */
int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_copy_is_deep),
		cmocka_unit_test(test_new_options_render),
		cmocka_unit_test(test_small_reals_render_as_decimals),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_every_option_sets),
		cmocka_unit_test(test_text_is_copied),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_bad_values_rejected),
		cmocka_unit_test(test_numeric_message_names_range),
		cmocka_unit_test(test_strategy_message_lists_choices),
		cmocka_unit_test(test_small_err_buffer),
		cmocka_unit_test(test_unknown_key),
		cmocka_unit_test(test_strategy_name),
		cmocka_unit_test(test_render_json_defaults),
		cmocka_unit_test(test_render_json_set_values),
		cmocka_unit_test(test_render_identity),
		cmocka_unit_test(test_identity_of_unused_options),
		cmocka_unit_test(test_identity_of_filter_spellings),
		cmocka_unit_test(test_set_out_of_memory),
		cmocka_unit_test(test_render_help),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
