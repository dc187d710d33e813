/* SPDX-License-Identifier: MIT */
/*
 * A page-cache read of a 1 MB batch file reaches the daemon as five
 * requests, as the kernel's readahead grows (16 KiB, 64, 256, 512, the
 * rest), each a round trip through the daemon and a wake-up of the reader.
 * Stored in the page cache (FUSE's store notification) before the open is
 * answered, the file is read by the kernel alone.
 *
 * The store takes the lock of every page of the file, and a page stays
 * locked while a read of it waits for the daemon. From a request handler
 * it could wait for a read that only the handlers waiting with it would
 * answer (page_drop.c met that). So an inode is stored only when the
 * kernel has no open file of it (opens answered, less releases), and other
 * opens of it wait until the store ends: no read of it can be waiting. A
 * mapping holds its file, and the kernel sends a file's release only after
 * its last read was answered. An inode open already is not stored again.
 *
 * Left in the page cache, files read once each epoch would pile up and
 * crowd out the source's pages (ops.c, op_release): the last release of
 * an inode queues the drop of its pages, which page_drop.c's thread
 * carries out (a drop, like a store, waits for the page locks of reads
 * in flight). The first open after it cancels a drop still queued, so
 * that it does not undo the new store. Both hang on the one count of
 * open files kept here, under its lock.
 */
#include "page_store.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

struct open_inode {
	struct open_inode *next;
	uint64_t ino;
	uint64_t group; /* the inodes of one file's bytes share one */
	unsigned opens;
	int filling; /* its first open has not called fill yet */
	int error; /* its first open failed: the opens counted with it fail */
};

struct rfs_page_store {
	const struct rfs_page_store_ops *ops;
	void *ctx;
	pthread_mutex_t lock;
	pthread_cond_t filled; /* a fill ended */
	struct open_inode *open; /* protected by lock */
};

int rfs_page_store_create(const struct rfs_page_store_ops *ops, void *ctx,
			  struct rfs_page_store **out)
{
	struct rfs_page_store *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->ops = ops;
	s->ctx = ctx;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->filled, NULL);
	*out = s;
	return 0;
}

void rfs_page_store_destroy(struct rfs_page_store *s)
{
	if (!s)
		return;
	while (s->open) {
		struct open_inode *f = s->open;
		s->open = f->next;
		free(f);
	}
	pthread_cond_destroy(&s->filled);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* A scan: there are as many open files as readers, a few dozen. */
static struct open_inode **find(struct rfs_page_store *s, uint64_t ino)
{
	struct open_inode **at = &s->open;
	while (*at && (*at)->ino != ino)
		at = &(*at)->next;
	return at;
}

/* Whether an inode of group is open. Called with lock held. */
static int group_open(const struct rfs_page_store *s, uint64_t group)
{
	for (const struct open_inode *f = s->open; f; f = f->next)
		if (f->group == group)
			return 1;
	return 0;
}

/* One counted open of ino less; at the last (or ino not counted), the
 * drop of its pages is queued. Called with lock held. @return whether
 * it was the last. */
static int uncount(struct rfs_page_store *s, uint64_t ino)
{
	struct open_inode **at = find(s, ino), *f = *at;
	int last = !f || --f->opens == 0;
	if (f && last) {
		*at = f->next;
		free(f);
	}
	if (last)
		s->ops->drop(s->ctx, ino);
	return last;
}

int rfs_page_store_open(struct rfs_page_store *s, uint64_t ino, uint64_t group)
{
	pthread_mutex_lock(&s->lock);
	struct open_inode *f = *find(s, ino);
	int first = !f;
	if (first) {
		f = calloc(1, sizeof(*f));
		if (!f) {
			pthread_mutex_unlock(&s->lock);
			return -ENOMEM;
		}
		*f = (struct open_inode){ .next = s->open,
					  .ino = ino,
					  .group = group,
					  .filling = 1 };
		s->open = f;
	}
	f->opens++;
	while (!first && f->filling)
		pthread_cond_wait(&s->filled, &s->lock);
	/* Opened now, its reads would each reach the daemon and fail
	 * again: it fails as the open it waited for did. */
	int error = first ? 0 : f->error;
	if (error)
		uncount(s, ino);
	pthread_mutex_unlock(&s->lock);
	if (!first)
		return error;
	/* Not under the lock: it may wait for a drop in flight, which no
	 * read of ino can hold up (none is open), but other inodes' opens
	 * and releases must not wait with it. Other opens of ino wait for
	 * the fill meanwhile. */
	s->ops->cancel_drop(s->ctx, ino);
	return 1;
}

int rfs_page_store_fill(struct rfs_page_store *s, uint64_t ino,
			const void *data, size_t len)
{
	int rc = data ? s->ops->store(s->ctx, ino, data, len) : 0;
	pthread_mutex_lock(&s->lock);
	struct open_inode *f = *find(s, ino);
	if (f)
		f->filling = 0;
	pthread_cond_broadcast(&s->filled);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

void rfs_page_store_fail(struct rfs_page_store *s, uint64_t ino, int error)
{
	pthread_mutex_lock(&s->lock);
	struct open_inode *f = *find(s, ino);
	if (f) {
		f->filling = 0;
		f->error = error;
	}
	pthread_cond_broadcast(&s->filled);
	uncount(s, ino);
	pthread_mutex_unlock(&s->lock);
}

unsigned rfs_page_store_count(struct rfs_page_store *s, uint64_t ino)
{
	pthread_mutex_lock(&s->lock);
	struct open_inode *f = *find(s, ino);
	unsigned opens = f ? f->opens : 0;
	pthread_mutex_unlock(&s->lock);
	return opens;
}

int rfs_page_store_close(struct rfs_page_store *s, uint64_t ino,
			 void (*at_last)(void *ctx), void *ctx)
{
	pthread_mutex_lock(&s->lock);
	struct open_inode *f = *find(s, ino);
	uint64_t group = f ? f->group : ino;
	int last = uncount(s, ino);
	/* The bytes stay while another inode of them is open. */
	if (last && at_last && !group_open(s, group))
		at_last(ctx);
	pthread_mutex_unlock(&s->lock);
	return last;
}
