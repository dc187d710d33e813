/* Whether an opened file was written since: inotify's IN_MODIFY on its
 * inode (watch.c says why not timestamps alone). One inotify instance per
 * process, made on first use. Thread-safe. HDF5-free. */
#ifndef RFS_WATCH_H
#define RFS_WATCH_H

/* Watches the file open at fd (its inode, whatever it is named later).
 * @return a watch id >= 0, or a negative errno (no inotify: the caller
 * goes by size and mtime alone). */
int rfs_watch_add(int fd);

/* 1 when the file of id was written or truncated since rfs_watch_add(),
 * else 0; once 1, always 1 (until forgotten). Also 1 when events were
 * lost (the queue overflowed): nothing can tell then. */
int rfs_watch_written(int id);

/* Stops watching id (a negative id is ignored). */
void rfs_watch_forget(int id);

#endif
