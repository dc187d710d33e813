/*
 * A write sets a file's mtime and ctime, but neither tells alone whether
 * the bytes are still those opened: utime puts mtime back after a write,
 * and rename and unlink move ctime of a file whose bytes are intact (the
 * mount keeps serving those). inotify reports the write itself: IN_MODIFY
 * for write(2) and truncation, on the inode, under any name. It is queued
 * when the write completes, after the kernel set mtime, so a caller that
 * compares mtime first and asks here second sees a write that overlapped
 * its read one way or the other (source_hdf5_checks.c).
 *
 * Events are drained under one lock, so a caller never asks between
 * another's drain and its marking of what it drained.
 */
#include "watch.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int inotify_fd = -1; /* protected by lock */
static unsigned char *written; /* by watch id; protected by lock */
static size_t written_len; /* protected by lock */
static int overflowed; /* protected by lock */

static int mark(int id)
{
	if ((size_t)id >= written_len) {
		size_t len = written_len ? 2 * written_len : 64;
		while (len <= (size_t)id)
			len *= 2;
		unsigned char *more = realloc(written, len);
		if (!more)
			return -ENOMEM;
		memset(more + written_len, 0, len - written_len);
		written = more;
		written_len = len;
	}
	written[id] = 1;
	return 0;
}

static void drain(void)
{
	char buf[4096]
		__attribute__((aligned(__alignof__(struct inotify_event))));
	for (;;) {
		ssize_t n = read(inotify_fd, buf, sizeof(buf));
		if (n <= 0)
			return; /* EAGAIN: nothing pending */
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *e = (struct inotify_event *)p;
			if (e->mask & IN_Q_OVERFLOW)
				overflowed = 1;
			else if ((e->mask & IN_MODIFY) && mark(e->wd) != 0)
				overflowed = 1; /* cannot record it: assume */
			p += sizeof(*e) + e->len;
		}
	}
}

int rfs_watch_add(int fd)
{
	char path[64];
	int rc;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	pthread_mutex_lock(&lock);
	if (inotify_fd < 0)
		inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (inotify_fd < 0) {
		rc = -errno;
		goto out;
	}
	/* Through the descriptor: the inode opened, not what the name
	 * leads to by now. */
	rc = inotify_add_watch(inotify_fd, path, IN_MODIFY);
	if (rc < 0) {
		rc = -errno;
		goto out;
	}
	drain();
	if ((size_t)rc < written_len)
		written[rc] = 0; /* a reused id starts clean */
out:
	pthread_mutex_unlock(&lock);
	return rc;
}

int rfs_watch_written(int id)
{
	pthread_mutex_lock(&lock);
	drain();
	int yes = overflowed || ((size_t)id < written_len && written[id]);
	pthread_mutex_unlock(&lock);
	return yes;
}

void rfs_watch_forget(int id)
{
	if (id < 0)
		return;
	pthread_mutex_lock(&lock);
	drain();
	inotify_rm_watch(inotify_fd, id);
	if ((size_t)id < written_len)
		written[id] = 0;
	pthread_mutex_unlock(&lock);
}
