/* SPDX-License-Identifier: MIT */
/* log.c: lines with a timestamp and "rankfs: ", and the limit on lines
 * that repeat (one per cause a minute, then counted). */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/log.h"

static char log_path[64];
static long read_from; /* what earlier tests left in the file */

/* The lines logged since the last call, each ended by "\n". */
static char *new_lines(void)
{
	FILE *f = fopen(log_path, "r");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	long end = ftell(f);
	fseek(f, read_from, SEEK_SET);
	char *text = calloc((size_t)(end - read_from) + 1, 1);
	assert_non_null(text);
	assert_int_equal(fread(text, 1, (size_t)(end - read_from), f),
			 end - read_from);
	fclose(f);
	read_from = end;
	return text;
}

static int count(const char *text, const char *what)
{
	int n = 0;
	for (const char *p = text; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

static int setup(void **state)
{
	(void)state;
	snprintf(log_path, sizeof(log_path), "/tmp/rankfs-test-log-XXXXXX");
	int fd = mkstemp(log_path);
	assert_true(fd >= 0);
	return rfs_log_set_fd(fd);
}

static int teardown(void **state)
{
	(void)state;
	unlink(log_path);
	return 0;
}

static void test_line_format(void **state)
{
	(void)state;
	rfs_log("source %s: %d rows", "a.h5", 7);
	char *text = new_lines();
	/* 2026-11-27T17:40:00Z rankfs: ... */
	assert_int_equal(strlen(text), 20 + 1 + 28);
	assert_int_equal(text[4], '-');
	assert_int_equal(text[19], 'Z');
	assert_string_equal(text + 20, " rankfs: source a.h5: 7 rows\n");
	free(text);
}

/* What a thread logged last since it forgot, for saying why a task
 * failed: its own lines only, a limited line's too when dropped, and
 * without the count a limited line is logged with. */
static void *log_elsewhere(void *arg)
{
	(void)arg;
	rfs_log("another thread's line");
	return NULL;
}

static void test_thread_last_line(void **state)
{
	(void)state;
	struct rfs_log_limit l;
	pthread_t t;
	rfs_log_limit_init(&l);
	rfs_log_limited(&l, "rows refused");
	rfs_log_thread_forget();
	assert_string_equal(rfs_log_thread_last(), "");
	assert_int_equal(pthread_create(&t, NULL, log_elsewhere, NULL), 0);
	pthread_join(t, NULL);
	assert_string_equal(rfs_log_thread_last(), "");
	rfs_log("source %s", "a\nb");
	assert_string_equal(rfs_log_thread_last(), "source a\nb");
	rfs_log_limited(&l, "rows refused"); /* dropped: a repeat */
	assert_string_equal(rfs_log_thread_last(), "rows refused");
	rfs_log_thread_forget();
	l.minute_start -= 61; /* logged, with the count of the one dropped */
	rfs_log_limited(&l, "rows refused");
	assert_string_equal(rfs_log_thread_last(), "rows refused");
	char *text = new_lines();
	assert_non_null(strstr(text, "rows refused (and 1 more like these"));
	free(text);
	rfs_log_limit_destroy(&l);
}

/* A name holding control characters (a source's) cannot forge a line:
 * escaped as \\n, \\t, \\xHH, the line still one. */
static void test_control_characters_escaped(void **state)
{
	(void)state;
	rfs_log("source %s", "a\n2026 rankfs: forged\tb\x1b\x7f\xc3\xa9");
	char *text = new_lines();
	assert_string_equal(text + 20, " rankfs: source a\\n2026 rankfs: "
				       "forged\\tb\\x1b\\x7f\xc3\xa9\n");
	free(text);
}

static void test_limit_logs_each_cause_once_a_minute(void **state)
{
	(void)state;
	struct rfs_log_limit l;
	rfs_log_limit_init(&l);
	for (int i = 0; i < 5; i++) {
		rfs_log_limited(&l, "chunk %d damaged", 3);
		rfs_log_limited(&l, "chunk %d damaged", 7);
	}
	char *text = new_lines();
	/* Two causes, each named once; their repeats counted. */
	assert_int_equal(count(text, "\n"), 2);
	assert_int_equal(count(text, "chunk 3 damaged\n"), 1);
	assert_int_equal(count(text, "chunk 7 damaged\n"), 1);
	free(text);
	/* At most RFS_LOG_CAUSES causes a minute: a flood stays bounded. */
	for (int i = 0; i < 3 * RFS_LOG_CAUSES; i++)
		rfs_log_limited(&l, "rows [%d, %d) failed", i, i + 1);
	text = new_lines();
	assert_int_equal(count(text, "\n"), RFS_LOG_CAUSES - 2);
	free(text);
	/* The first line after the minute says how many it stood for:
	 * 8 repeats and 2 RFS_LOG_CAUSES + 2 further causes. */
	l.minute_start -= 61;
	rfs_log_limited(&l, "chunk %d damaged", 3);
	text = new_lines();
	char want[128];
	snprintf(want, sizeof(want),
		 "chunk 3 damaged (and %d more like these, not logged)\n",
		 8 + 2 * RFS_LOG_CAUSES + 2);
	assert_int_equal(count(text, "\n"), 1);
	assert_non_null(strstr(text, want));
	free(text);
	/* A new minute: causes are named again, the count starts over. */
	rfs_log_limited(&l, "chunk %d damaged", 7);
	rfs_log_limited(&l, "chunk %d damaged", 3);
	text = new_lines();
	assert_int_equal(count(text, "\n"), 1);
	assert_non_null(strstr(text, "chunk 7 damaged\n"));
	free(text);
	rfs_log_limit_destroy(&l);
	text = new_lines();
	assert_int_equal(count(text, "\n"), 1);
	assert_non_null(strstr(text,
			       "at exit: chunk 7 damaged (and 1 more like "
			       "these, not logged)\n"));
	free(text);
}

/* A cause given: lines that differ (each batch's rows) are one cause. */
static void test_limited_by_cause(void **state)
{
	(void)state;
	struct rfs_log_limit l;
	rfs_log_limit_init(&l);
	for (int i = 0; i < 5; i++)
		rfs_log_limited_by(&l, "changed", "rows %d..%d refused", i,
				   i + 9);
	rfs_log_limited_by(&l, "other", "rows %d refused", 3);
	char *text = new_lines();
	assert_int_equal(count(text, "\n"), 2);
	assert_non_null(strstr(text, "rows 0..9 refused\n"));
	assert_non_null(strstr(text, "rows 3 refused\n"));
	free(text);
	rfs_log_limit_destroy(&l);
	text = new_lines();
	assert_non_null(strstr(text, "at exit: rows 3 refused (and 4 more like "
				     "these, not logged)\n"));
	free(text);
}

/* Two limits (two sources) do not share their causes. */
static void test_limits_are_separate(void **state)
{
	(void)state;
	static struct rfs_log_limit a = RFS_LOG_LIMIT_INIT,
				    b = RFS_LOG_LIMIT_INIT;
	rfs_log_limited(&a, "same cause");
	rfs_log_limited(&b, "same cause");
	rfs_log_limited(&a, "same cause");
	char *text = new_lines();
	assert_int_equal(count(text, "same cause\n"), 2);
	free(text);
}

/* The lines left uncounted when a limit ends (the unmount) are said
 * then: no later minute's line would count them. */
static void test_destroy_counts_what_was_not_logged(void **state)
{
	(void)state;
	struct rfs_log_limit l;
	rfs_log_limit_init(&l);
	for (int i = 0; i < 4; i++)
		rfs_log_limited(&l, "rows %d..%d refused", 0, 9);
	rfs_log_limited(&l, "chunk %d damaged", 5);
	rfs_log_limited(&l, "chunk %d damaged", 5);
	char *text = new_lines();
	assert_int_equal(count(text, "\n"), 2);
	free(text);
	rfs_log_limit_destroy(&l);
	text = new_lines();
	assert_int_equal(count(text, "\n"), 1);
	assert_non_null(strstr(text, " rankfs: at exit: chunk 5 damaged (and 4 "
				     "more like these, not logged)\n"));
	free(text);
	/* Nothing left over: nothing said. */
	rfs_log_limit_init(&l);
	rfs_log_limited(&l, "chunk %d damaged", 5);
	free(new_lines());
	rfs_log_limit_destroy(&l);
	text = new_lines();
	assert_string_equal(text, "");
	free(text);
}

struct repeater {
	struct rfs_log_limit *limit;
	atomic_int returned;
};

static void *log_repeat(void *arg)
{
	struct repeater *r = arg;
	rfs_log_limited_by(r->limit, "changed", "rows refused");
	atomic_store(&r->returned, 1);
	return NULL;
}

/* A repeat dropped by the limit returns only once the line shown for its
 * cause is written: the caller's reader is told EIO next, and the log
 * must already say why. The log is a full pipe, so the line's write
 * blocks until the test reads: until then neither caller may return.
 * Runs last: the log is the pipe from here on. */
static void test_dropped_repeat_waits_for_the_line(void **state)
{
	(void)state;
	int p[2];
	assert_int_equal(pipe(p), 0);
	assert_int_equal(fcntl(p[1], F_SETFL, O_NONBLOCK), 0);
	static char filler[4096];
	memset(filler, 'x', sizeof(filler));
	while (write(p[1], filler, sizeof(filler)) > 0)
		;
	assert_int_equal(fcntl(p[1], F_SETFL, 0), 0);
	assert_int_equal(rfs_log_set_fd(p[1]), 0);

	struct rfs_log_limit l;
	rfs_log_limit_init(&l);
	struct repeater a = { .limit = &l }, b = { .limit = &l };
	pthread_t ta, tb;
	assert_int_equal(pthread_create(&ta, NULL, log_repeat, &a), 0);
	assert_int_equal(pthread_create(&tb, NULL, log_repeat, &b), 0);
	nanosleep(&(struct timespec){ .tv_nsec = 300 * 1000 * 1000 }, NULL);
	int returned_early =
		atomic_load(&a.returned) + atomic_load(&b.returned);

	/* Drained (also when one returned early: a write left blocked would
	 * hang the exit): the line reaches the pipe, and both return. */
	assert_int_equal(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
	static char seen[1 << 20];
	size_t got = 0;
	while (!atomic_load(&a.returned) || !atomic_load(&b.returned)) {
		ssize_t n = read(p[0], seen + got, sizeof(seen) - 1 - got);
		if (n > 0)
			got += (size_t)n;
	}
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	ssize_t n;
	while ((n = read(p[0], seen + got, sizeof(seen) - 1 - got)) > 0)
		got += (size_t)n;
	seen[got] = '\0';
	assert_int_equal(returned_early, 0);
	assert_int_equal(count(seen, "rows refused\n"), 1);
	rfs_log_limit_destroy(&l);
	close(p[0]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_line_format),
		cmocka_unit_test(test_control_characters_escaped),
		cmocka_unit_test(test_thread_last_line),
		cmocka_unit_test(test_limit_logs_each_cause_once_a_minute),
		cmocka_unit_test(test_limited_by_cause),
		cmocka_unit_test(test_limits_are_separate),
		cmocka_unit_test(test_destroy_counts_what_was_not_logged),
		cmocka_unit_test(test_dropped_repeat_waits_for_the_line),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
