/* SPDX-License-Identifier: MIT */
/*
 * fuse_lowlevel_notify_inval_inode() takes the lock of every cached page
 * of the file, and a page stays locked while a read of it waits for the
 * daemon's answer. Called from the release handler, it could wait for a
 * read that only the handlers waiting with it would answer: once all of
 * them were in it, the mount hung (a dozen processes re-reading one batch
 * file; one, with max_threads=1). On a thread of its own it waits while
 * the handlers answer. libfuse's documentation asks for as much: no
 * notification from the path of a related request.
 */
#include "page_drop.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>

#include "core/log.h"
#include "os/quiet_thread.h"

#define POLL_MS 50

struct rfs_page_drop {
	struct fuse_session *se;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t work;
	uint64_t queue[RFS_PAGE_DROP_SLOTS]; /* protected by lock */
	size_t head, count; /* protected by lock */
	int dropping; /* a notification in flight, protected by lock */
	uint64_t dropping_ino; /* its inode, protected by lock */
	pthread_cond_t dropped; /* a notification returned */
	int stopping; /* protected by lock */
	/* A full queue: logged once a minute, not once per mount (a mount
	 * lives for days, and falls behind again). */
	struct rfs_log_limit full_log;
};

static void *run(void *arg)
{
	struct rfs_page_drop *d = arg;
	pthread_mutex_lock(&d->lock);
	for (;;) {
		while (!d->stopping && d->count == 0)
			pthread_cond_wait(&d->work, &d->lock);
		if (d->stopping)
			break;
		uint64_t ino = d->queue[d->head];
		d->head = (d->head + 1) % RFS_PAGE_DROP_SLOTS;
		d->count--;
		d->dropping = 1;
		d->dropping_ino = ino;
		pthread_mutex_unlock(&d->lock);
		/* Fails only when the mount is gone: nothing left to drop. */
		fuse_lowlevel_notify_inval_inode(d->se, (fuse_ino_t)ino, 0, 0);
		pthread_mutex_lock(&d->lock);
		d->dropping = 0;
		pthread_cond_broadcast(&d->dropped);
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

int rfs_page_drop_create(struct fuse_session *se, struct rfs_page_drop **out)
{
	struct rfs_page_drop *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->se = se;
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->work, NULL);
	pthread_cond_init(&d->dropped, NULL);
	rfs_log_limit_init(&d->full_log);
	/* libfuse keeps termination signals from its workers the same way. */
	int rc = rfs_quiet_thread_create(&d->thread, "rankfs-drop", run, d);
	if (rc != 0) {
		rfs_log_limit_destroy(&d->full_log);
		pthread_cond_destroy(&d->dropped);
		pthread_cond_destroy(&d->work);
		pthread_mutex_destroy(&d->lock);
		free(d);
		return rc;
	}
	*out = d;
	return 0;
}

static int queued(const struct rfs_page_drop *d, uint64_t ino)
{
	for (size_t i = 0; i < d->count; i++)
		if (d->queue[(d->head + i) % RFS_PAGE_DROP_SLOTS] == ino)
			return 1;
	return 0;
}

void rfs_page_drop_push(struct rfs_page_drop *d, uint64_t ino)
{
	pthread_mutex_lock(&d->lock);
	/* A queued drop takes every page the file has when it runs. */
	int wanted = !d->stopping && !queued(d, ino), tell_full = 0;
	if (wanted && d->count < RFS_PAGE_DROP_SLOTS) {
		d->queue[(d->head + d->count) % RFS_PAGE_DROP_SLOTS] = ino;
		d->count++;
		pthread_cond_signal(&d->work);
	} else {
		tell_full = wanted;
	}
	pthread_mutex_unlock(&d->lock);
	/* Not under the lock: releases wait for it. */
	if (tell_full)
		rfs_log_limited(&d->full_log,
				"page drops fall behind (%d files queued): "
				"closed files' pages stay in the page cache "
				"until the kernel reclaims them",
				RFS_PAGE_DROP_SLOTS);
}

void rfs_page_drop_cancel(struct rfs_page_drop *d, uint64_t ino)
{
	pthread_mutex_lock(&d->lock);
	const size_t slots = RFS_PAGE_DROP_SLOTS;
	size_t kept = 0;
	for (size_t i = 0; i < d->count; i++) {
		uint64_t next = d->queue[(d->head + i) % slots];
		if (next != ino)
			d->queue[(d->head + kept++) % slots] = next;
	}
	d->count = kept;
	while (d->dropping && d->dropping_ino == ino)
		pthread_cond_wait(&d->dropped, &d->lock);
	pthread_mutex_unlock(&d->lock);
}

/* Answers one request if one arrives within POLL_MS. An ended session
 * drops what it receives (libfuse 3.14), and a signal may end it again
 * at any time: un-ended before every receive. */
static void serve_one(struct fuse_session *se, struct fuse_buf *buf)
{
	struct pollfd p = { .fd = fuse_session_fd(se), .events = POLLIN };
	int got = 0;
	if (poll(&p, 1, POLL_MS) == 1 && (p.revents & POLLIN)) {
		fuse_session_reset(se);
		got = fuse_session_receive_buf(se, buf);
	}
	if (got > 0)
		fuse_session_process_buf(se, buf);
	else if (p.revents & (POLLERR | POLLHUP))
		poll(NULL, 0, POLL_MS); /* gone: the notification ends soon */
}

void rfs_page_drop_destroy(struct rfs_page_drop *d)
{
	if (!d)
		return;
	struct fuse_buf buf = { 0 };
	pthread_mutex_lock(&d->lock);
	d->stopping = 1;
	d->count = 0;
	pthread_cond_signal(&d->work);
	while (d->dropping) {
		pthread_mutex_unlock(&d->lock);
		serve_one(d->se, &buf);
		pthread_mutex_lock(&d->lock);
	}
	pthread_mutex_unlock(&d->lock);
	pthread_join(d->thread, NULL);
	free(buf.mem);
	rfs_log_limit_destroy(&d->full_log);
	pthread_cond_destroy(&d->dropped);
	pthread_cond_destroy(&d->work);
	pthread_mutex_destroy(&d->lock);
	free(d);
}
