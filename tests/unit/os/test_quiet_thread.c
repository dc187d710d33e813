/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/os/quiet_thread.c: termination signals blocked in the
 * new thread only, and the thread named. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <signal.h>
#include <string.h>

#include "os/quiet_thread.h"

struct seen {
	sigset_t mask;
	char name[16];
};

static void *read_mask(void *arg)
{
	struct seen *s = arg;
	pthread_sigmask(SIG_BLOCK, NULL, &s->mask);
	pthread_getname_np(pthread_self(), s->name, sizeof(s->name));
	return NULL;
}

static void test_blocks_termination_signals_in_the_thread(void **state)
{
	(void)state;
	sigset_t before, after, term;
	struct seen in_thread = { .name = "" };
	/* Whatever the mask ctest was started with: SIGTERM open here. */
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	pthread_sigmask(SIG_UNBLOCK, &term, NULL);
	pthread_sigmask(SIG_BLOCK, NULL, &before);
	pthread_t t;
	assert_int_equal(rfs_quiet_thread_create(&t, "rankfs-test", read_mask,
						 &in_thread),
			 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	/* Named before it ran: an instant thread has its name too. */
	assert_string_equal(in_thread.name, "rankfs-test");
	int quiet[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT };
	for (size_t i = 0; i < sizeof(quiet) / sizeof(quiet[0]); i++)
		assert_int_equal(sigismember(&in_thread.mask, quiet[i]), 1);
	/* Synchronous signals still reach it: a blocked SIGBUS would kill
	 * the process instead of reaching the mapping's handler. */
	assert_int_equal(sigismember(&in_thread.mask, SIGBUS), 0);
	assert_int_equal(sigismember(&in_thread.mask, SIGSEGV), 0);
	/* The caller's own mask is as it was. */
	pthread_sigmask(SIG_BLOCK, NULL, &after);
	for (int s = 1; s < NSIG; s++)
		assert_int_equal(sigismember(&after, s),
				 sigismember(&before, s));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_blocks_termination_signals_in_the_thread),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
