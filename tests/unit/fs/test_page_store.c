/* SPDX-License-Identifier: MIT */
/* Unit tests for fs/page_store.c: only an open of a file with no other
 * file of it open stores (cancelling a queued drop), other opens wait for
 * that store, and the last close drops the file's pages. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "page_store.h"

struct sent {
	uint64_t ino;
	const void *data;
	size_t len;
	int calls;
	int rc; /* what the store returns */
	uint64_t dropped_ino, cancelled_ino;
	int drops, cancels;
};

static int record(void *ctx, uint64_t ino, const void *data, size_t len)
{
	struct sent *s = ctx;
	s->ino = ino;
	s->data = data;
	s->len = len;
	s->calls++;
	return s->rc;
}

static void record_drop(void *ctx, uint64_t ino)
{
	struct sent *s = ctx;
	s->dropped_ino = ino;
	s->drops++;
}

static void record_cancel(void *ctx, uint64_t ino)
{
	struct sent *s = ctx;
	s->cancelled_ino = ino;
	s->cancels++;
}

static const struct rfs_page_store_ops recording = {
	.store = record,
	.drop = record_drop,
	.cancel_drop = record_cancel,
};

static void test_first_open_stores_later_ones_do_not(void **state)
{
	(void)state;
	struct sent sent = { 0 };
	struct rfs_page_store *s;
	assert_int_equal(rfs_page_store_create(&recording, &sent, &s), 0);
	static const char bytes[] = "batch bytes";
	assert_int_equal(rfs_page_store_open(s, 7, 7), 1);
	assert_int_equal(rfs_page_store_fill(s, 7, bytes, sizeof(bytes)), 0);
	assert_int_equal(sent.calls, 1);
	assert_int_equal(sent.ino, 7);
	assert_ptr_equal(sent.data, bytes);
	assert_int_equal(sent.len, sizeof(bytes));
	/* Open already: its pages may be read right now. */
	assert_int_equal(rfs_page_store_open(s, 7, 7), 0);
	/* Another file is first on its own. */
	assert_int_equal(rfs_page_store_open(s, 8, 8), 1);
	assert_int_equal(rfs_page_store_fill(s, 8, NULL, 0), 0);
	assert_int_equal(sent.calls, 1); /* nothing to send: not sent */
	/* One remains open. */
	assert_int_equal(rfs_page_store_close(s, 7, NULL, NULL), 0);
	assert_int_equal(rfs_page_store_open(s, 7, 7), 0); /* one still open */
	assert_int_equal(rfs_page_store_close(s, 7, NULL, NULL), 0);
	/* The last. */
	assert_int_equal(rfs_page_store_close(s, 7, NULL, NULL), 1);
	/* All closed: the next open stores again. */
	assert_int_equal(rfs_page_store_open(s, 7, 7), 1);
	sent.rc = -ENOENT;
	assert_int_equal(rfs_page_store_fill(s, 7, bytes, 3), -ENOENT);
	/* A failed send still lets the others go on. */
	assert_int_equal(rfs_page_store_open(s, 7, 7), 0);
	rfs_page_store_close(s, 7, NULL, NULL);
	rfs_page_store_close(s, 7, NULL, NULL);
	rfs_page_store_close(s, 8, NULL, NULL);
	/* Never opened: nothing to do, and nothing keeps it. */
	assert_int_equal(rfs_page_store_close(s, 9, NULL, NULL), 1);
	rfs_page_store_destroy(s);
	rfs_page_store_destroy(NULL);
}

static void count_call(void *ctx);

/* The first open cancels a drop queued by an earlier release, before its
 * store; only the last close drops, before its at_last. */
static void test_last_close_drops_first_open_cancels(void **state)
{
	(void)state;
	struct sent sent = { 0 };
	struct rfs_page_store *s;
	assert_int_equal(rfs_page_store_create(&recording, &sent, &s), 0);
	assert_int_equal(rfs_page_store_open(s, 5, 5), 1);
	assert_int_equal(sent.cancels, 1);
	assert_int_equal(sent.cancelled_ino, 5);
	assert_int_equal(rfs_page_store_fill(s, 5, "y", 1), 0);
	assert_int_equal(rfs_page_store_open(s, 5, 5), 0);
	assert_int_equal(sent.cancels, 1); /* open already: pages in use */
	int undone = 0;
	assert_int_equal(rfs_page_store_close(s, 5, count_call, &undone), 0);
	assert_int_equal(sent.drops, 0);
	assert_int_equal(undone, 0);
	assert_int_equal(rfs_page_store_close(s, 5, count_call, &undone), 1);
	assert_int_equal(sent.drops, 1);
	assert_int_equal(sent.dropped_ino, 5);
	assert_int_equal(undone, 1);
	/* Opened again: the drop just queued is cancelled. */
	assert_int_equal(rfs_page_store_open(s, 5, 5), 1);
	assert_int_equal(sent.cancels, 2);
	assert_int_equal(rfs_page_store_fill(s, 5, NULL, 0), 0);
	assert_int_equal(rfs_page_store_close(s, 5, NULL, NULL), 1);
	assert_int_equal(sent.drops, 2);
	rfs_page_store_destroy(s);
}

static void count_call(void *ctx)
{
	(*(int *)ctx)++;
}

/* Closes say which was the last, and only the last runs its callback,
 * once. */
static void test_last_close_runs_its_callback_once(void **state)
{
	(void)state;
	struct sent sent = { 0 };
	struct rfs_page_store *s;
	assert_int_equal(rfs_page_store_create(&recording, &sent, &s), 0);
	assert_int_equal(rfs_page_store_open(s, 7, 7), 1);
	assert_int_equal(rfs_page_store_fill(s, 7, "x", 1), 0);
	assert_int_equal(rfs_page_store_open(s, 7, 7), 0);
	int undone = 0;
	assert_int_equal(rfs_page_store_close(s, 7, count_call, &undone), 0);
	assert_int_equal(undone, 0); /* another open remains */
	assert_int_equal(rfs_page_store_close(s, 7, count_call, &undone), 1);
	assert_int_equal(undone, 1); /* the last: undone, once */
	assert_int_equal(rfs_page_store_open(s, 7, 7), 1);
	rfs_page_store_destroy(s); /* with an open still counted */
}

struct opener {
	struct rfs_page_store *s;
	int returned; /* read with the store's lock not held: atomics */
	int rc;
};

static void *open_seven(void *arg)
{
	struct opener *o = arg;
	o->rc = rfs_page_store_open(o->s, 7, 7);
	__atomic_store_n(&o->returned, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/* A second open waits until the first one's store has ended: until then
 * its reader must not read the pages the store is writing. */
static void test_second_open_waits_for_the_store(void **state)
{
	(void)state;
	struct sent sent = { 0 };
	struct rfs_page_store *s;
	assert_int_equal(rfs_page_store_create(&recording, &sent, &s), 0);
	assert_int_equal(rfs_page_store_open(s, 7, 7), 1);
	struct opener o = { .s = s };
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, open_seven, &o), 0);
	usleep(100 * 1000);
	assert_int_equal(__atomic_load_n(&o.returned, __ATOMIC_SEQ_CST), 0);
	assert_int_equal(rfs_page_store_fill(s, 7, "x", 1), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(o.rc, 0);
	assert_int_equal(sent.calls, 1);
	/* Forgotten at destroy (LeakSanitizer checks). */
	rfs_page_store_destroy(s);
}

/* A first open whose file fails to generate fails the opens that waited
 * for it with its error: opened, each of their reads would reach the
 * daemon and fail again. They are not counted, and the last of them to
 * leave drops the pages (the first open cancelled a queued drop). */
static void test_opens_waiting_for_a_failed_fill_fail_with_it(void **state)
{
	(void)state;
	struct sent sent = { 0 };
	struct rfs_page_store *s;
	assert_int_equal(rfs_page_store_create(&recording, &sent, &s), 0);
	assert_int_equal(rfs_page_store_open(s, 7, 7), 1);
	struct opener o[2] = { { .s = s }, { .s = s } };
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&t[i], NULL, open_seven, &o[i]),
				 0);
	/* Both counted and waiting before the fill fails (one counted
	 * after it would be a first open). */
	for (int tries = 0; rfs_page_store_count(s, 7) < 3; tries++) {
		assert_true(tries < 10000);
		usleep(1000);
	}
	rfs_page_store_fail(s, 7, -EIO);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
		assert_int_equal(o[i].rc, -EIO);
	}
	assert_int_equal(sent.calls, 0);
	assert_int_equal(sent.drops, 1);
	assert_int_equal(sent.dropped_ino, 7);
	/* None of them is counted: the next open is a first one again, and
	 * stores. */
	assert_int_equal(rfs_page_store_open(s, 7, 7), 1);
	assert_int_equal(rfs_page_store_fill(s, 7, "x", 1), 0);
	assert_int_equal(sent.calls, 1);
	assert_int_equal(rfs_page_store_close(s, 7, NULL, NULL), 1);
	rfs_page_store_destroy(s);
}

/* Two inodes of one file's bytes (a step file and its epoch file): the
 * last close of one drops its own pages, but leaves the bytes (at_last)
 * while the other is open; the last close of the group calls it. */
static void test_at_last_waits_for_the_group(void **state)
{
	(void)state;
	struct sent sent = { 0 };
	struct rfs_page_store *s;
	int undone = 0;
	assert_int_equal(rfs_page_store_create(&recording, &sent, &s), 0);
	assert_int_equal(rfs_page_store_open(s, 7, 7), 1);
	assert_int_equal(rfs_page_store_fill(s, 7, "x", 1), 0);
	assert_int_equal(rfs_page_store_open(s, 9, 7), 1);
	assert_int_equal(rfs_page_store_fill(s, 9, "x", 1), 0);
	assert_int_equal(rfs_page_store_open(s, 8, 8), 1); /* another */
	assert_int_equal(rfs_page_store_fill(s, 8, "y", 1), 0);
	assert_int_equal(rfs_page_store_close(s, 9, count_call, &undone), 1);
	assert_int_equal(sent.drops, 1);
	assert_int_equal(sent.dropped_ino, 9);
	assert_int_equal(undone, 0);
	assert_int_equal(rfs_page_store_close(s, 8, count_call, &undone), 1);
	assert_int_equal(undone, 1);
	assert_int_equal(rfs_page_store_close(s, 7, count_call, &undone), 1);
	assert_int_equal(sent.dropped_ino, 7);
	assert_int_equal(undone, 2);
	rfs_page_store_destroy(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_first_open_stores_later_ones_do_not),
		cmocka_unit_test(test_last_close_drops_first_open_cancels),
		cmocka_unit_test(test_last_close_runs_its_callback_once),
		cmocka_unit_test(test_second_open_waits_for_the_store),
		cmocka_unit_test(
			test_opens_waiting_for_a_failed_fill_fail_with_it),
		cmocka_unit_test(test_at_last_waits_for_the_group),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
