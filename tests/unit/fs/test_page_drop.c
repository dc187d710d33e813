/* SPDX-License-Identifier: MIT */
/* Unit tests for fs/page_drop.c: released files' page drops run in order
 * on their own thread, a file queued twice is dropped once, cancel waits
 * for a drop in flight, and destroy answers requests while a drop waits.
 * The libfuse calls it makes are defined here: the kernel's side. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "page_drop.h"

enum { MAX_DROPS = 4096 };

/* What the fake kernel saw. A drop of `held` waits until the gate opens,
 * as an invalidation waits for a read that only a handler would answer. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t changed;
	uint64_t dropped[MAX_DROPS];
	size_t count;
	uint64_t held;
	int at_gate, gate_open, answered, wrong_calls;
	int requests[2]; /* a pipe: bytes written are requests pending */
} kernel = { .lock = PTHREAD_MUTEX_INITIALIZER,
	     .changed = PTHREAD_COND_INITIALIZER };

static struct fuse_session *const session = (struct fuse_session *)&kernel;

int fuse_lowlevel_notify_inval_inode(struct fuse_session *se, fuse_ino_t ino,
				     off_t off, off_t len)
{
	pthread_mutex_lock(&kernel.lock);
	/* On the drop thread: cmocka's asserts belong to the test's. */
	if (se != session || off != 0 || len != 0 || kernel.count == MAX_DROPS)
		kernel.wrong_calls++;
	else
		kernel.dropped[kernel.count++] = ino;
	if (ino == kernel.held) {
		kernel.at_gate = 1;
		pthread_cond_broadcast(&kernel.changed);
		while (!kernel.gate_open)
			pthread_cond_wait(&kernel.changed, &kernel.lock);
		kernel.at_gate = 0;
	}
	pthread_cond_broadcast(&kernel.changed);
	pthread_mutex_unlock(&kernel.lock);
	return 0;
}

int fuse_session_fd(struct fuse_session *se)
{
	assert_ptr_equal(se, session);
	return kernel.requests[0];
}

void fuse_session_reset(struct fuse_session *se)
{
	assert_ptr_equal(se, session);
}

int fuse_session_receive_buf(struct fuse_session *se, struct fuse_buf *buf)
{
	(void)buf;
	assert_ptr_equal(se, session);
	char request;
	return (int)read(kernel.requests[0], &request, 1);
}

/* Answering the request is what the held drop waited for. */
void fuse_session_process_buf(struct fuse_session *se,
			      const struct fuse_buf *buf)
{
	(void)buf;
	assert_ptr_equal(se, session);
	pthread_mutex_lock(&kernel.lock);
	kernel.answered++;
	kernel.gate_open = 1;
	pthread_cond_broadcast(&kernel.changed);
	pthread_mutex_unlock(&kernel.lock);
}

static int reset_kernel(void **state)
{
	*state = NULL; /* the test's rfs_page_drop, once started */
	kernel.count = 0;
	kernel.held = 0;
	kernel.at_gate = kernel.gate_open = kernel.answered = 0;
	kernel.wrong_calls = 0;
	return pipe(kernel.requests);
}

static void open_gate(void)
{
	pthread_mutex_lock(&kernel.lock);
	kernel.gate_open = 1;
	pthread_cond_broadcast(&kernel.changed);
	pthread_mutex_unlock(&kernel.lock);
}

/* Also after a failed test: its thread must not drop into the next. */
static int stop_and_close(void **state)
{
	if (*state) {
		open_gate();
		rfs_page_drop_destroy(*state);
	}
	close(kernel.requests[0]);
	close(kernel.requests[1]);
	return 0;
}

/* A drop of ino starts and waits at the gate. */
static struct rfs_page_drop *start_holding(void **state, uint64_t ino)
{
	struct rfs_page_drop *d;
	assert_int_equal(rfs_page_drop_create(session, &d), 0);
	*state = d;
	kernel.held = ino;
	rfs_page_drop_push(d, ino);
	pthread_mutex_lock(&kernel.lock);
	while (!kernel.at_gate)
		pthread_cond_wait(&kernel.changed, &kernel.lock);
	pthread_mutex_unlock(&kernel.lock);
	return d;
}

/* Pushes a file no test uses otherwise and waits for its drop: the queue
 * is first in, first out, so every drop queued before it has run. */
static void drain(struct rfs_page_drop *d)
{
	const uint64_t last = 999999;
	rfs_page_drop_push(d, last);
	pthread_mutex_lock(&kernel.lock);
	while (kernel.count == 0 || kernel.dropped[kernel.count - 1] != last)
		pthread_cond_wait(&kernel.changed, &kernel.lock);
	kernel.count--; /* not the test's own */
	pthread_mutex_unlock(&kernel.lock);
}

static void assert_dropped(const uint64_t *want, size_t n)
{
	assert_int_equal(kernel.wrong_calls, 0);
	assert_int_equal(kernel.count, n);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(kernel.dropped[i], want[i]);
}

static void test_drops_in_order_each_queued_file_once(void **state)
{
	struct rfs_page_drop *d = start_holding(state, 1);
	const uint64_t pushed[] = { 2, 3, 2, 1, 3, 4, 4 };
	for (size_t i = 0; i < sizeof(pushed) / sizeof(pushed[0]); i++)
		rfs_page_drop_push(d, pushed[i]);
	open_gate();
	drain(d);
	/* 1 again: its drop was under way, and its pages may be back. */
	const uint64_t want[] = { 1, 2, 3, 1, 4 };
	assert_dropped(want, sizeof(want) / sizeof(want[0]));
}

static size_t lines_with(const char *path, const char *text)
{
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	char line[512];
	size_t n = 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, text) != NULL;
	fclose(f);
	return n;
}

static void test_full_queue_keeps_what_it_has_and_says_so_once(void **state)
{
	const char *tmp = getenv("TMPDIR");
	char log_path[4096];
	snprintf(log_path, sizeof(log_path), "%s/rankfs-test-page-drop-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	int fd = mkstemp(log_path);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(rfs_log_set_fd(open(log_path,
					     O_WRONLY | O_APPEND | O_CREAT,
					     0666)),
			 0);
	struct rfs_page_drop *d = start_holding(state, 1);
	enum { SLOTS = RFS_PAGE_DROP_SLOTS };
	for (uint64_t ino = 2; ino < 2 + SLOTS; ino++)
		rfs_page_drop_push(d, ino);
	assert_int_equal(lines_with(log_path, "page drops fall behind"), 0);
	rfs_page_drop_push(d, 5000);
	rfs_page_drop_push(d, 5001);
	assert_int_equal(lines_with(log_path, "page drops fall behind"), 1);
	open_gate();
	pthread_mutex_lock(&kernel.lock); /* room again for drain()'s push */
	while (kernel.count < 1 + SLOTS)
		pthread_cond_wait(&kernel.changed, &kernel.lock);
	pthread_mutex_unlock(&kernel.lock);
	drain(d);
	assert_int_equal(kernel.wrong_calls, 0);
	assert_int_equal(kernel.count, 1 + SLOTS);
	for (size_t i = 0; i < kernel.count; i++)
		assert_int_equal(kernel.dropped[i], i + 1);
	unlink(log_path);
}

struct canceller {
	struct rfs_page_drop *d;
	uint64_t ino;
	int returned;
};

static void *cancel_one(void *arg)
{
	struct canceller *c = arg;
	rfs_page_drop_cancel(c->d, c->ino);
	pthread_mutex_lock(&kernel.lock);
	c->returned = 1;
	pthread_mutex_unlock(&kernel.lock);
	return NULL;
}

static void test_cancel_forgets_queued_and_waits_for_one_under_way(void **state)
{
	struct rfs_page_drop *d = start_holding(state, 1);
	rfs_page_drop_push(d, 2);
	rfs_page_drop_push(d, 3);
	rfs_page_drop_cancel(d, 3); /* queued only: returns at once */
	struct canceller c = { d, 1, 0 };
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, cancel_one, &c), 0);
	usleep(50000); /* a cancel that did not wait has returned by now */
	pthread_mutex_lock(&kernel.lock);
	assert_int_equal(c.returned, 0); /* 1's drop is still under way */
	pthread_mutex_unlock(&kernel.lock);
	open_gate();
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(c.returned, 1);
	drain(d);
	const uint64_t want[] = { 1, 2 };
	assert_dropped(want, 2);
}

static void test_destroy_answers_requests_while_a_drop_waits(void **state)
{
	struct rfs_page_drop *d = start_holding(state, 1);
	rfs_page_drop_push(d, 2); /* forgotten */
	char request = 'r';
	assert_int_equal(write(kernel.requests[1], &request, 1), 1);
	/* Returns only once the request is answered. */
	rfs_page_drop_destroy(d);
	*state = NULL;
	assert_int_equal(kernel.answered, 1);
	const uint64_t want[] = { 1 };
	assert_dropped(want, 1);
	rfs_page_drop_destroy(NULL);
}

int main(void)
{
	alarm(60); /* a drop or wait that never ends fails, not hangs */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_drops_in_order_each_queued_file_once, reset_kernel,
			stop_and_close),
		cmocka_unit_test_setup_teardown(
			test_full_queue_keeps_what_it_has_and_says_so_once,
			reset_kernel, stop_and_close),
		cmocka_unit_test_setup_teardown(
			test_cancel_forgets_queued_and_waits_for_one_under_way,
			reset_kernel, stop_and_close),
		cmocka_unit_test_setup_teardown(
			test_destroy_answers_requests_while_a_drop_waits,
			reset_kernel, stop_and_close),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
