/* SPDX-License-Identifier: MIT */
/* A generated file's life in the kernel's page cache, with the one count
 * of its open files: its bytes are stored before its first open is
 * answered, so that its reads never reach the daemon, and its pages are
 * dropped at its last release (page_store.c says why, and why only
 * then). The drops themselves run on page_drop.c's thread. */
#ifndef RFS_PAGE_STORE_H
#define RFS_PAGE_STORE_H

#include <stddef.h>
#include <stdint.h>

struct rfs_page_store;

/* How pages reach and leave the kernel; FUSE's notifications in the
 * daemon (main.c), a recorder in the unit test. Each is called with the
 * ctx given to rfs_page_store_create(). */
struct rfs_page_store_ops {
	/* Hands len bytes to the kernel as inode ino's contents from
	 * offset 0 (FUSE's store notification). @return 0 or a negative
	 * errno. */
	int (*store)(void *ctx, uint64_t ino, const void *data, size_t len);
	/* Queues the drop of ino's pages; never blocks
	 * (rfs_page_drop_push()). */
	void (*drop)(void *ctx, uint64_t ino);
	/* Forgets the drops of ino queued and waits for one in progress
	 * (rfs_page_drop_cancel()). */
	void (*cancel_drop)(void *ctx, uint64_t ino);
};

/* ops and ctx are borrowed and must outlive s. @return 0 or -ENOMEM. */
int rfs_page_store_create(const struct rfs_page_store_ops *ops, void *ctx,
			  struct rfs_page_store **out);

/* Forgets the opens still counted. Accepts NULL. */
void rfs_page_store_destroy(struct rfs_page_store *s);

/* Counts an open of ino, before it is answered. ino is one of the inodes
 * in group whose bytes are one file's (a step file and its epoch file:
 * one cache entry; an inode alone is a group of its own, group = ino):
 * rfs_page_store_close() calls at_last only at the last close of the
 * group's inodes.
 * @return 1 when no file of ino was open: a drop of its pages queued by
 * an earlier release was cancelled, and the caller must call
 * rfs_page_store_fill() (or rfs_page_store_fail()) before answering the
 * open. 0 when one was: this waits until the fill of ino in progress, if
 * any, has ended. A negative errno: not counted (no fill, no close):
 * -ENOMEM, or the error of the first open of ino, still counted, whose
 * fill failed (rfs_page_store_fail()). Thread-safe. */
int rfs_page_store_open(struct rfs_page_store *s, uint64_t ino, uint64_t group);

/* Stores len bytes of data as ino's contents (data NULL: nothing to
 * store), then lets the opens of ino that wait for it go on.
 * Thread-safe. @return 0, or the store's error. */
int rfs_page_store_fill(struct rfs_page_store *s, uint64_t ino,
			const void *data, size_t len);

/* The first open of ino failed with error (a negative errno): it is no
 * longer counted (as by rfs_page_store_close() without at_last), and the
 * opens of ino counted meanwhile, waiting for its fill or not yet
 * closed, fail with error too, as the first one did: opened, each read
 * would reach the daemon and fail again. Thread-safe. */
void rfs_page_store_fail(struct rfs_page_store *s, uint64_t ino, int error);

/* The opens of ino counted now, waiting ones included (tests).
 * Thread-safe. */
unsigned rfs_page_store_count(struct rfs_page_store *s, uint64_t ino);

/* One counted open of ino less: a release, or an open whose answer was
 * not delivered. When it was the last (or ino was not counted), queues
 * the drop of ino's pages and calls at_last(ctx) if given and no other
 * inode of ino's group is open, both before another open can be counted: what they undo (the pages, the
 * cached bytes) cannot meet a new open's. at_last must not call back
 * into s. Thread-safe. @return 1 when it was the last, 0 when another
 * open of ino remains. */
int rfs_page_store_close(struct rfs_page_store *s, uint64_t ino,
			 void (*at_last)(void *ctx), void *ctx);

#endif
