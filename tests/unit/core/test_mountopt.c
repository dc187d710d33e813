/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/core/mountopt.c, through rfs_mountopt_take: which
 * of a mount's -o words are libfuse's or mount(8)'s, libfuse values
 * refused up front, and the line for an option a space made. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/mountopt.h"

/* rfs_mountopt_take's answer for arg, its refusal (if any) in *line
 * (freed by the caller; NULL: none). */
static int take(const char *arg, char **line)
{
	struct rfs_config c;
	struct rfs_buf b = { 0 };
	char key[64];
	rfs_config_init(&c);
	int rc = rfs_mountopt_take(&c, "prog", arg, NULL, NULL, key, &b);
	rfs_config_free(&c);
	assert_false(b.failed);
	*line = b.data;
	return rc;
}

/* libfuse's words are handed on, mount(8)'s dropped, rankfs's own
 * taken, and others refused. */
static void test_kinds(void **state)
{
	(void)state;
	static const struct {
		const char *arg;
		int rc;
	} kinds[] = {
		{ "allow_other", 1 },
		{ "max_threads=8", 1 },
		{ "fsname=a", 1 },
		{ "noauto", 0 },
		{ "_netdev", 0 },
		{ "x-systemd.automount", 0 },
		{ "world_size=2", 0 },
		{ "allow", -1 },
		{ "", -1 },
	};
	for (size_t i = 0; i < sizeof(kinds) / sizeof(*kinds); i++) {
		char *line;
		if (take(kinds[i].arg, &line) != kinds[i].rc)
			fail_msg("'%s': %s", kinds[i].arg, line);
		assert_true(kinds[i].rc < 0 || !line);
		free(line);
	}
}

static void expect_refused(const char *arg, const char *message)
{
	char *line;
	assert_int_equal(take(arg, &line), -1);
	assert_non_null(strstr(line, message));
	free(line);
}

static void test_values(void **state)
{
	(void)state;
	char *line;
	assert_int_equal(take("max_idle_threads=0", &line), 1);
	assert_int_equal(take("fsname=/data/a.h5", &line), 1);
	expect_refused(
		"allow_other=5",
		"prog: option allow_other=5: allow_other takes no value");
	expect_refused("max_threads=0",
		       "option max_threads=0: expected an integer from 1");
	expect_refused("max_threads", "expected an integer from 1");
	expect_refused("max_idle_threads=-1",
		       "expected an integer from 0 to 1024");
	expect_refused("max_read=0", "option max_read=0: expected an");
	expect_refused("subtype=", "option subtype=: expected a name");
}

static char *unknown(const char *key)
{
	char *line;
	assert_int_equal(take(key, &line), -1);
	return line;
}

/* The refusal lists rankfs's and libfuse's options (not mount(8)'s
 * dropped words), and names the one a typo most likely meant. */
static void test_unknown_option_line(void **state)
{
	(void)state;
	char *line = unknown("bogus");
	assert_non_null(strstr(line, "prog: unknown option 'bogus'; rankfs's "
				     "options: world_size, batch_size, "));
	assert_non_null(strstr(line, "; libfuse's: allow_other, "));
	assert_non_null(strstr(line, "max_threads"));
	assert_null(strstr(line, "noauto"));
	assert_non_null(strstr(line, " (prog --help says what each does)\n"));
	free(line);
	static const char *const typos[][2] = {
		{ "batchsize", "batch_size" },
		{ "world-size", "world_size" },
		{ "seeds", "seed" },
		{ "alow_other", "allow_other" },
		{ "max_thread", "max_threads" },
		{ "cachemb", "cache_mb" },
	};
	for (size_t i = 0; i < sizeof(typos) / sizeof(*typos); i++) {
		char want[64];
		snprintf(want, sizeof(want), "'%s' (%s?);", typos[i][0],
			 typos[i][1]);
		line = unknown(typos[i][0]);
		if (!strstr(line, want))
			fail_msg("%s: %s", typos[i][0], line);
		free(line);
	}
	/* Nothing near enough: no guess. */
	static const char *const far[] = { "ab", "bogus", "x", "zzzzzz" };
	for (size_t i = 0; i < sizeof(far) / sizeof(*far); i++) {
		line = unknown(far[i]);
		if (strstr(line, "?)"))
			fail_msg("%s: %s", far[i], line);
		free(line);
	}
}

static void test_empty_options(void **state)
{
	(void)state;
	assert_true(rfs_mountopt_list_has_empty(""));
	assert_true(rfs_mountopt_list_has_empty("a=1,"));
	assert_true(rfs_mountopt_list_has_empty(",a=1"));
	assert_true(rfs_mountopt_list_has_empty("a=1,,b=2"));
	assert_true(rfs_mountopt_list_has_empty("a=\\\\,")); /* a=\\, */
	assert_false(rfs_mountopt_list_has_empty("a=1,b=2"));
	assert_false(rfs_mountopt_list_has_empty("a=1, b=2"));
	assert_false(rfs_mountopt_list_has_empty("a=\\,")); /* escaped */
	assert_false(rfs_mountopt_list_has_empty("\\,"));
}

/* explain_space's line for opt holds message; NULL: no line. */
static void expect_space(const char *opt, const char *list, const char *next,
			 const char *message)
{
	char err[512] = "untouched";
	int said =
		rfs_mountopt_explain_space(opt, list, next, err, sizeof(err));
	if (!message) {
		assert_int_equal(said, 0);
		assert_string_equal(err, "untouched");
		return;
	}
	if (said != 1 || !strstr(err, message))
		fail_msg("'%s': %d \"%s\", expected \"%s\"", opt, said, err,
			 message);
}

static void test_spaces_explained(void **state)
{
	(void)state;
	/* -o 'world_size=2, batch_size=64', quoted. */
	expect_space(" batch_size=64", "world_size=2, batch_size=64", "x.h5",
		     "option ' batch_size=64': a space after a comma (options "
		     "are comma-separated without spaces)");
	expect_space("\tseed=1", NULL, NULL, "a space after a comma");
	/* -o world_size=2, batch_size=64, not quoted: the next argument is
	 * named, and the list it was meant to be part of. */
	expect_space("", "world_size=2,", "batch_size=64",
		     "-o world_size=2, ends with a comma, and 'batch_size=64' "
		     "after it is an argument of its own: a space after a "
		     "comma? (options are comma-separated without spaces: -o "
		     "world_size=2,batch_size=64)");
	/* A comma at the end before SOURCE, or two in a row. */
	expect_space("", "world_size=2,", "/data/a.h5",
		     "-o world_size=2,: an empty option (a comma at the start "
		     "or end, or two in a row;");
	expect_space("", "world_size=2,", "-f", "-o world_size=2,: an empty");
	expect_space("", "world_size=2,", NULL, "-o world_size=2,: an empty");
	expect_space("", "a=1,,b=2", "x.h5", "-o a=1,,b=2: an empty option");
	/* A comma escaped is no end; a backslash escaped leaves one. */
	expect_space("", "a=1\\,", "b=2", "-o a=1\\,: an empty option");
	expect_space("", "a=\\\\,", "b=2", "and 'b=2' after it");
	expect_space("", NULL, NULL, "an empty option (a comma at the start");
	/* Spaces at the end of a name. */
	expect_space("ro ", NULL, NULL, "option 'ro ': a space before a comma");
	expect_space("seed =1", NULL, NULL,
		     "option 'seed =1': a space before '='");
	/* Anything else is for the option parsers to judge. */
	expect_space("seed=1", "seed=1", NULL, NULL);
	expect_space("seed=1 ", NULL, NULL, NULL);
	expect_space("log_file=/my logs/a.log", NULL, NULL, NULL);
	expect_space("=1", NULL, NULL, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kinds),
		cmocka_unit_test(test_values),
		cmocka_unit_test(test_unknown_option_line),
		cmocka_unit_test(test_empty_options),
		cmocka_unit_test(test_spaces_explained),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
