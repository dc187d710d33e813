/* Puts a generated file's bytes in the kernel's page cache before its
 * first open is answered, so that its reads never reach the daemon
 * (page_store.c says why, and why only then). */
#ifndef RFS_PAGE_STORE_H
#define RFS_PAGE_STORE_H

#include <stddef.h>
#include <stdint.h>

struct rfs_page_store;

/* Hands len bytes to the kernel as inode ino's contents from offset 0
 * (FUSE's store notification). @return 0 or a negative errno. */
typedef int rfs_page_store_send(void *ctx, uint64_t ino, const void *data,
				size_t len);

/* send NULL: nothing is stored (direct_io), opens are only counted, and
 * rfs_page_store_open() returns 0 or -ENOMEM. @return 0 or -ENOMEM. */
int rfs_page_store_create(rfs_page_store_send *send, void *ctx,
			  struct rfs_page_store **out);

/* Forgets the opens still counted. Accepts NULL. */
void rfs_page_store_destroy(struct rfs_page_store *s);

/* Counts an open of ino, before it is answered.
 * @return 1 when no file of ino was open: the caller must then call
 * rfs_page_store_fill() before answering the open. 0 when one was: this
 * waits until the fill of ino in progress, if any, has ended. -ENOMEM:
 * not counted (no fill, no close). Thread-safe. */
int rfs_page_store_open(struct rfs_page_store *s, uint64_t ino);

/* Sends len bytes of data as ino's contents (data NULL: nothing to send),
 * then lets the opens of ino that wait for it go on. Thread-safe.
 * @return 0, or the send's error. */
int rfs_page_store_fill(struct rfs_page_store *s, uint64_t ino,
			const void *data, size_t len);

/* One counted open of ino less: a release, or an open whose answer was
 * not delivered. When it was the last (or ino was not counted), calls
 * at_last(ctx) if given, before another open of ino can be counted: what
 * it undoes (the pages, the cached bytes) cannot meet a new open's. It
 * must not call back into s. Thread-safe. @return 1 when it was the last,
 * 0 when another open of ino remains. */
int rfs_page_store_close(struct rfs_page_store *s, uint64_t ino,
			 void (*at_last)(void *ctx), void *ctx);

#endif
