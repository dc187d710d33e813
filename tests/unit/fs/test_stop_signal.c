/* SPDX-License-Identifier: MIT */
/* Unit tests for fs/stop_signal.c: a stop signal that comes after a loop
 * looked at the exit flag and before it waits still ends the loop, for
 * both of libfuse's waits (a semaphore, a read); handlers are put back.
 * fuse_session_exit() is the test's own: the flag a loop looks at. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fuse_lowlevel.h>
#include <semaphore.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "stop_signal.h"

static volatile sig_atomic_t exited;
static struct fuse_session *const session = (struct fuse_session *)&exited;
static int wrong_session;

void fuse_session_exit(struct fuse_session *se)
{
	if (se != session)
		wrong_session = 1;
	exited = 1;
}

static volatile sig_atomic_t before_handler_ran;
static int started; /* so that teardown ends what a failed test began */

static void before_handler(int sig)
{
	(void)sig;
	before_handler_ran = 1;
}

/* The handler in place for sig. */
static void (*handler_of(int sig))(int)
{
	struct sigaction sa;
	assert_int_equal(sigaction(sig, NULL, &sa), 0);
	return sa.sa_handler;
}

static int setup(void **state)
{
	(void)state;
	exited = 0;
	wrong_session = 0;
	before_handler_ran = 0;
	signal(SIGTERM, before_handler);
	signal(SIGINT, before_handler);
	signal(SIGHUP, before_handler);
	alarm(30); /* a loop that never ends fails the test, loudly */
	return 0;
}

static void start(void)
{
	assert_int_equal(rfs_stop_signal_start(session), 0);
	started = 1;
}

static int end(void)
{
	started = 0;
	return rfs_stop_signal_end();
}

static int teardown(void **state)
{
	(void)state;
	if (started)
		end();
	alarm(0);
	return 0;
}

/* The multithreaded loop's shape: look at the flag, then sem_wait. */
static void test_signal_before_a_semaphore_wait(void **state)
{
	(void)state;
	start();
	assert_true(handler_of(SIGTERM) != before_handler);
	sem_t never;
	assert_int_equal(sem_init(&never, 0, 0), 0);
	int looks = 0;
	while (!exited) {
		if (looks++ == 0)
			raise(SIGTERM); /* after the look, before the wait */
		sem_wait(&never);
	}
	sem_destroy(&never);
	assert_int_equal(end(), SIGTERM);
	assert_false(wrong_session);
	assert_false(before_handler_ran); /* ours took it */
	assert_ptr_equal(handler_of(SIGTERM), before_handler);
	assert_ptr_equal(handler_of(SIGINT), before_handler);
	assert_ptr_equal(handler_of(SIGHUP), before_handler);
}

/* The single-threaded loop's shape: look, then read /dev/fuse (a pipe
 * nobody writes to). */
static void test_signal_before_a_read(void **state)
{
	(void)state;
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	start();
	int looks = 0;
	char byte;
	while (!exited) {
		if (looks++ == 0)
			raise(SIGHUP);
		assert_int_equal(read(fds[0], &byte, 1), -1);
		assert_int_equal(errno, EINTR);
	}
	assert_int_equal(end(), SIGHUP);
	assert_false(wrong_session);
	assert_false(before_handler_ran);
	close(fds[0]);
	close(fds[1]);
}

/* A loop that ends by itself: no signal, and the helper stops. */
static void test_no_signal(void **state)
{
	(void)state;
	start();
	assert_int_equal(end(), 0);
	assert_false(exited);
	assert_ptr_equal(handler_of(SIGINT), before_handler);
	raise(SIGINT); /* the handler put back takes it */
	assert_true(before_handler_ran);
	assert_false(exited);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_signal_before_a_semaphore_wait, setup, teardown),
		cmocka_unit_test_setup_teardown(test_signal_before_a_read,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_signal, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
