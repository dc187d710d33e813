/* SPDX-License-Identifier: MIT */
/*
 * A write sets a file's mtime and ctime, but neither tells alone whether
 * the bytes are still those opened: utime puts mtime back after a write,
 * and rename and unlink move ctime of a file whose bytes are intact (the
 * mount keeps serving those). inotify reports the write itself: IN_MODIFY
 * for write(2) and truncation, on the inode, under any name. It is queued
 * when the write completes, after the kernel set mtime, so a caller that
 * compares mtime first and asks here second sees a write that overlapped
 * its read one way or the other (hdf5_checks.c).
 *
 * Events are drained under one lock, so a caller never asks between
 * another's drain and its marking of what it drained.
 */
#include "os/watch.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

/* What a directory watch asks for; a file watch asks for IN_MODIFY. */
#define DIR_EVENTS                                                       \
	(IN_MODIFY | IN_ATTRIB | IN_CREATE | IN_DELETE | IN_MOVED_FROM | \
	 IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF)

struct mark {
	int written;
	rfs_watch_name_filter filter;
};

struct rfs_watch {
	pthread_mutex_t lock;
	int inotify_fd; /* made on first use; protected by lock */
	struct mark *marks; /* by watch id; protected by lock */
	size_t len; /* of marks; protected by lock */
	int overflowed; /* protected by lock */
};

int rfs_watch_create(struct rfs_watch **out)
{
	struct rfs_watch *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	pthread_mutex_init(&w->lock, NULL);
	w->inotify_fd = -1;
	*out = w;
	return 0;
}

void rfs_watch_destroy(struct rfs_watch *w)
{
	if (!w)
		return;
	if (w->inotify_fd >= 0)
		close(w->inotify_fd);
	free(w->marks);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

/* Room for watch id in w->marks. */
static int grow(struct rfs_watch *w, int id)
{
	if ((size_t)id < w->len)
		return 0;
	size_t len = w->len ? 2 * w->len : 64;
	while (len <= (size_t)id)
		len *= 2;
	struct mark *more = realloc(w->marks, len * sizeof(*more));
	if (!more)
		return -ENOMEM;
	memset(more + w->len, 0, (len - w->len) * sizeof(*more));
	w->marks = more;
	w->len = len;
	return 0;
}

static int mark(struct rfs_watch *w, const struct inotify_event *e)
{
	if (grow(w, e->wd) != 0)
		return -ENOMEM;
	/* A name the watch's filter passes over (a file nobody reads);
	 * events on the directory itself have none. */
	struct mark *m = &w->marks[e->wd];
	if (e->len && m->filter && !m->filter(e->name))
		return 0;
	m->written = 1;
	return 0;
}

static void drain(struct rfs_watch *w)
{
	char buf[4096]
		__attribute__((aligned(__alignof__(struct inotify_event))));
	for (;;) {
		ssize_t n = read(w->inotify_fd, buf, sizeof(buf));
		if (n <= 0)
			return; /* EAGAIN: nothing pending */
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *e = (struct inotify_event *)p;
			if (e->mask & IN_Q_OVERFLOW)
				w->overflowed = 1;
			else if ((e->mask & DIR_EVENTS) && mark(w, e) != 0)
				w->overflowed =
					1; /* cannot record it: assume */
			p += sizeof(*e) + e->len;
		}
	}
}

static int add(struct rfs_watch *w, const char *path, uint32_t mask,
	       rfs_watch_name_filter filter)
{
	int rc;
	/* Tests: a machine without watches (fs.inotify.max_user_watches
	 * reached, say), whose checks go by size, mtime and names. */
	if (!w || getenv("RANKFS_FAULT_NO_WATCH"))
		return -ENOSPC;
	pthread_mutex_lock(&w->lock);
	if (w->inotify_fd < 0)
		w->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (w->inotify_fd < 0) {
		rc = -errno;
		goto out;
	}
	rc = inotify_add_watch(w->inotify_fd, path, mask);
	if (rc < 0) {
		rc = -errno;
		goto out;
	}
	if (grow(w, rc) != 0) {
		inotify_rm_watch(w->inotify_fd, rc);
		rc = -ENOMEM;
		goto out;
	}
	w->marks[rc].filter = filter;
	/* No reset of its written mark: forget cleared it, and a file or
	 * directory watched twice has one id, which must keep its mark. */
	drain(w);
out:
	pthread_mutex_unlock(&w->lock);
	return rc;
}

int rfs_watch_add(struct rfs_watch *w, int fd)
{
	char path[64];
	/* Through the descriptor: the inode opened, not what the name
	 * leads to by now. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return add(w, path, IN_MODIFY, NULL);
}

int rfs_watch_add_dir(struct rfs_watch *w, const char *path,
		      rfs_watch_name_filter filter)
{
	return add(w, path, DIR_EVENTS | IN_ONLYDIR, filter);
}

int rfs_watch_any_written(struct rfs_watch *w, const int *ids, size_t n)
{
	pthread_mutex_lock(&w->lock);
	drain(w);
	int yes = w->overflowed;
	for (size_t i = 0; i < n && !yes; i++)
		yes = (size_t)ids[i] < w->len && w->marks[ids[i]].written;
	pthread_mutex_unlock(&w->lock);
	return yes;
}

void rfs_watch_forget(struct rfs_watch *w, int id)
{
	if (id < 0)
		return;
	pthread_mutex_lock(&w->lock);
	drain(w);
	inotify_rm_watch(w->inotify_fd, id);
	if ((size_t)id < w->len)
		w->marks[id].written = 0;
	pthread_mutex_unlock(&w->lock);
}
