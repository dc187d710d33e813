/* SPDX-License-Identifier: MIT */
/* Whether an opened file was written since: inotify's IN_MODIFY on its
 * inode (watch.c says why not timestamps alone). A watch table is one
 * inotify instance, made on its first watch; a mount has one (the view's).
 * Thread-safe. HDF5-free. */
#ifndef RFS_WATCH_H
#define RFS_WATCH_H

#include <stddef.h>

struct rfs_watch;

/* @return 0, or -ENOMEM. */
int rfs_watch_create(struct rfs_watch **out);
/* Closes the table's inotify instance: its ids mean nothing after.
 * Accepts NULL. */
void rfs_watch_destroy(struct rfs_watch *w);

/* Watches the file open at fd (its inode, whatever it is named later)
 * in w. @return a watch id >= 0, or a negative errno (no inotify, or w
 * NULL: -ENOSPC; the caller goes by size and mtime alone). */
int rfs_watch_add(struct rfs_watch *w, int fd);

/* 1 when a name in a watched directory is one whose changes count. */
typedef int (*rfs_watch_name_filter)(const char *name);

/* Watches the directory path: a file in it written, its attributes
 * (mtime) set, a name created, removed or renamed in or out, or the
 * directory itself removed or renamed all count as written, except
 * events on a name filter passes over (filter NULL: none is). Watching
 * a directory twice in w gives the same id (and the last filter).
 * @return a watch id >= 0, or a negative errno (ENOSPC:
 * fs.inotify.max_user_watches reached). */
int rfs_watch_add_dir(struct rfs_watch *w, const char *path,
		      rfs_watch_name_filter filter);

/* 1 when a file of ids[0..n) was written or truncated since it was
 * watched (a directory: see rfs_watch_add_dir()), else 0; once 1, always
 * 1 (until forgotten). Also 1 when events were lost (the queue
 * overflowed): nothing can tell then. */
int rfs_watch_any_written(struct rfs_watch *w, const int *ids, size_t n);

/* Stops watching id (a negative id is ignored). */
void rfs_watch_forget(struct rfs_watch *w, int id);

#endif
