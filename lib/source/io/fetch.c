/* SPDX-License-Identifier: MIT */
#include "source/io/fetch.h"

#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"

#define RING_ENTRIES 128

struct ring {
	struct io_uring uring;
	int state; /* 0: not tried, 1: ready, -1: unavailable */
};

static pthread_key_t ring_key;
static pthread_once_t ring_once = PTHREAD_ONCE_INIT;
static atomic_int fallback_logged;

static void ring_free(void *p)
{
	struct ring *r = p;
	if (r->state == 1)
		io_uring_queue_exit(&r->uring);
	free(r);
}

static void make_key(void)
{
	pthread_key_create(&ring_key, ring_free);
}

static void unavailable(struct ring *r, int err)
{
	if (r->state == 1)
		io_uring_queue_exit(&r->uring);
	r->state = -1;
	if (atomic_exchange(&fallback_logged, 1) == 0)
		rfs_log("io_uring unavailable (%s): reading with preadv",
			strerror(-err));
}

/* This thread's ring state (NULL only when out of memory). */
static struct ring *thread_state(void)
{
	pthread_once(&ring_once, make_key);
	struct ring *r = pthread_getspecific(ring_key);
	if (!r) {
		r = calloc(1, sizeof(*r));
		if (!r || pthread_setspecific(ring_key, r) != 0) {
			free(r);
			return NULL;
		}
		/* RANKFS_NO_URING=1 forces the fallback (tests, or kernels
		 * where io_uring misbehaves). */
		const char *off = getenv("RANKFS_NO_URING");
		int rc =
			off && *off && strcmp(off, "0") != 0 ?
				-ENOSYS :
				io_uring_queue_init(RING_ENTRIES, &r->uring, 0);
		r->state = rc == 0 ? 1 : 0;
		if (rc != 0)
			unavailable(r, rc);
	}
	return r;
}

int rfs_fetch_uses_uring(void)
{
	struct ring *r = thread_state();
	return r && r->state == 1;
}

/* The next completion. Every submitted read must be reaped before its
 * buffers are handed back, so waiting is retried through signals
 * (EINTR at unmount); a ring that cannot be waited on any more would
 * let reads land in freed memory, and is fatal. */
static struct io_uring_cqe *reap_one(struct io_uring *ring)
{
	struct io_uring_cqe *cqe;
	for (int tries = 0; tries < 1000; tries++) {
		int w = io_uring_wait_cqe(ring, &cqe);
		if (w == 0)
			return cqe;
		if (w != -EINTR && w != -EAGAIN && w != -ETIME)
			break;
	}
	rfs_log("io_uring: cannot wait for reads in flight; stopping");
	abort();
}

/* Completes a run that a read left short (a signal, or the file's end):
 * the rest with preadv. */
static int finish_run(int fd, const struct rfs_fetch_run *run, size_t done)
{
	while (done < run->len) {
		struct iovec iov[64];
		int n = 0;
		size_t skip = done;
		for (int i = 0; i < run->iovcnt && n < 64; i++) {
			if (skip >= run->iov[i].iov_len) {
				skip -= run->iov[i].iov_len;
				continue;
			}
			iov[n].iov_base = (char *)run->iov[i].iov_base + skip;
			iov[n++].iov_len = run->iov[i].iov_len - skip;
			skip = 0;
		}
		ssize_t got = preadv(fd, iov, n, (off_t)(run->off + done));
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return -errno;
		if (got == 0)
			return -ENODATA;
		done += (size_t)got;
	}
	return 0;
}

int rfs_fetch_pread_all(int fd, void *dst, size_t len, uint64_t at, size_t *got)
{
	size_t done = 0;
	int rc = 0;
	while (done < len && rc == 0) {
		ssize_t n = pread(fd, (char *)dst + done, len - done,
				  (off_t)(at + done));
		if (n > 0)
			done += (size_t)n;
		else if (n == 0 || errno != EINTR)
			rc = n == 0 ? -ENODATA : -errno;
	}
	if (got)
		*got = done;
	return rc;
}

static int fetch_preadv(int fd, const struct rfs_fetch_run *runs, size_t n,
			size_t *failed)
{
	for (size_t i = 0; i < n; i++) {
		int rc = finish_run(fd, &runs[i], 0);
		if (rc != 0) {
			*failed = i;
			return rc;
		}
	}
	return 0;
}

int rfs_fetch(int fd, const struct rfs_fetch_run *runs, size_t n,
	      size_t *failed)
{
	struct ring *state = thread_state();
	if (!state || state->state != 1)
		return fetch_preadv(fd, runs, n, failed);
	struct io_uring *ring = &state->uring;
	int rc = 0;
	for (size_t base = 0; base < n; base += RING_ENTRIES) {
		size_t m = n - base < RING_ENTRIES ? n - base : RING_ENTRIES;
		for (size_t i = 0; i < m; i++) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
			const struct rfs_fetch_run *r = &runs[base + i];
			io_uring_prep_readv(sqe, fd, r->iov,
					    (unsigned)r->iovcnt, r->off);
			io_uring_sqe_set_data64(sqe, base + i);
		}
		int sub = io_uring_submit_and_wait(ring, (unsigned)m);
		if (sub != (int)m) {
			/* Reap what was submitted (those reads write into the
			 * caller's buffers), then drop the ring for good: the
			 * rest of its entries were never issued. */
			for (int k = 0; k < sub; k++)
				reap_one(ring);
			unavailable(state, sub < 0 ? sub : -EIO);
			return fetch_preadv(fd, runs, n, failed);
		}
		for (size_t got = 0; got < m; got++) {
			struct io_uring_cqe *cqe = reap_one(ring);
			size_t i = (size_t)io_uring_cqe_get_data64(cqe);
			int res = cqe->res;
			io_uring_cqe_seen(ring, cqe);
			int err = res == -EINTR || res == -EAGAIN ?
					  finish_run(fd, &runs[i], 0) :
				  res < 0 ? res :
				  (size_t)res < runs[i].len ?
					    finish_run(fd, &runs[i],
						       (size_t)res) :
					    0;
			if (err != 0 && rc == 0) {
				rc = err;
				*failed = i;
			}
		}
	}
	return rc;
}
