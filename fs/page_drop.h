/* SPDX-License-Identifier: MIT */
/* Drops released files' pages from the kernel's page cache, on a thread of
 * its own (page_drop.c says why): page_store.c's helper, which decides
 * when (at a file's last release) and cancels a drop a new open would
 * meet. */
#ifndef RFS_PAGE_DROP_H
#define RFS_PAGE_DROP_H

#include <stdint.h>

struct fuse_session;
struct rfs_page_drop;

/* Files whose drops can wait in the queue at once. */
#define RFS_PAGE_DROP_SLOTS 1024

/* Starts the thread for a mounted session, which must outlive it.
 * @return 0 or a negative errno. */
int rfs_page_drop_create(struct fuse_session *se, struct rfs_page_drop **out);

/* Queues inode ino's pages to be dropped, unless ino is queued already;
 * never blocks. When the queue is full the request is not kept (the first
 * time logged): those pages then stay until the kernel needs the memory.
 * Thread-safe. */
void rfs_page_drop_push(struct rfs_page_drop *d, uint64_t ino);

/* Forgets the drops of ino queued, and waits for one in progress: the
 * file's pages are about to be stored afresh (page_store.c), and a drop
 * queued by an earlier release must not undo that. Only when no file of
 * ino is open: a drop then never waits for a read. Thread-safe. */
void rfs_page_drop_cancel(struct rfs_page_drop *d, uint64_t ino);

/* Stops the thread, forgetting what is queued. Call after the session
 * loop has ended and before the session is unmounted: a drop in progress
 * may wait for a read only a request handler would answer, so until it
 * ends this answers the session's requests itself. Accepts NULL. */
void rfs_page_drop_destroy(struct rfs_page_drop *d);

#endif
