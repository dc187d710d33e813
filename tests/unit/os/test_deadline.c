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
	rfs_deadline_set_limit(5);
	for (int i = 0; i < 100; i++) {
		assert_int_equal(rfs_deadline_begin("a quick step"), 0);
		rfs_deadline_end();
	}
	rfs_deadline_end(); /* nothing begun: fine */
	rfs_deadline_set_limit(120);
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
		rfs_deadline_set_limit(1);
		rfs_deadline_begin("source /x.h5: opening it");
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_steps_within_the_limit),
		cmocka_unit_test(test_overrun_exits_naming_the_step),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
