/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/os/deadline.c: a step that overruns ends the process. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "os/deadline.h"

static void test_steps_within_the_limit(void **state)
{
	(void)state;
	struct rfs_deadline *d;
	assert_int_equal(rfs_deadline_create(5, &d), 0);
	for (int i = 0; i < 100; i++) {
		assert_int_equal(rfs_deadline_begin(d, "a quick step"), 0);
		rfs_deadline_end(d);
	}
	rfs_deadline_end(d); /* nothing begun: fine */
	assert_int_equal(rfs_deadline_begin(NULL, "no deadline"), 0);
	rfs_deadline_end(NULL);
	rfs_deadline_destroy(d);
	rfs_deadline_destroy(NULL);
}

/* Two deadlines (two mounts in one process) are independent: each has
 * its own limit and step, one ended leaves the other running, and the
 * one that overruns names its own step. */
static void test_deadlines_are_independent(void **state)
{
	(void)state;
	int out[2];
	assert_int_equal(pipe(out), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(out[1], 2);
		struct rfs_deadline *slow, *quick;
		if (rfs_deadline_create(1, &quick) != 0 ||
		    rfs_deadline_create(60, &slow) != 0)
			_exit(2);
		rfs_deadline_begin(quick, "source /quick.h5: opening it");
		rfs_deadline_begin(slow, "source /slow.h5: opening it");
		rfs_deadline_end(slow); /* leaves quick's step running */
		sleep(30);
		_exit(0);
	}
	close(out[1]);
	char text[512] = "";
	ssize_t n = read(out[0], text, sizeof(text) - 1);
	close(out[0]);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 1);
	assert_true(n > 0);
	assert_non_null(strstr(text, "rankfs: source /quick.h5: opening it: "
				     "no answer after 1 s"));
}

static void test_overrun_exits_naming_the_step(void **state)
{
	(void)state;
	int out[2];
	assert_int_equal(pipe(out), 0);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(out[1], 2);
		struct rfs_deadline *d;
		if (rfs_deadline_create(1, &d) != 0)
			_exit(2);
		rfs_deadline_begin(d, "source /x.h5: opening it");
		sleep(30); /* a step that never ends */
		_exit(0);
	}
	close(out[1]);
	char text[512] = "";
	ssize_t n = read(out[0], text, sizeof(text) - 1);
	close(out[0]);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 1);
	assert_true(t1.tv_sec - t0.tv_sec < 10);
	assert_true(n > 0);
	assert_non_null(strstr(text, "rankfs: source /x.h5: opening it: no "
				     "answer after 1 s"));
}

/* The seconds another process's work of a step may take (HDF5's string
 * reader) are its deadline's own, not the last one created. */
static void test_seconds_are_each_deadlines(void **state)
{
	(void)state;
	struct rfs_deadline *a, *b;
	assert_int_equal(rfs_deadline_create(7, &a), 0);
	assert_int_equal(rfs_deadline_create(0, &b), 0);
	assert_int_equal(rfs_deadline_seconds(a), 7);
	assert_int_equal(rfs_deadline_seconds(b), 0);
	assert_int_equal(rfs_deadline_seconds(NULL), 120);
	rfs_deadline_destroy(a);
	rfs_deadline_destroy(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_steps_within_the_limit),
		cmocka_unit_test(test_overrun_exits_naming_the_step),
		cmocka_unit_test(test_deadlines_are_independent),
		cmocka_unit_test(test_seconds_are_each_deadlines),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
