/* Going to the background without losing mount errors.
 *
 * fuse_daemonize() lets the parent exit 0 as soon as it forks, before the
 * source is opened or the mount exists. rankfs forks first instead: the
 * child opens the source and mounts while the parent waits, and the parent
 * exits 0 only when the child reports the mount is up, or with the child's
 * failure status (its error line already on the shared stderr). HDF5 is
 * opened and threads start only in the child, after the fork. */
#ifndef RFS_DAEMON_H
#define RFS_DAEMON_H

/* Opens /dev/null on any of fds 0-2 that is closed, so the FUSE device
 * or a source file never lands there and gets clobbered later. */
void rfs_daemon_keep_std_fds(void);

/* Forks. Returns 0 in the child; the parent never returns. -1 on error. */
int rfs_daemon_start(void);

/* In the child, once mounted: releases the parent with exit 0, detaches
 * from the terminal and points fds 0-2 at /dev/null. */
void rfs_daemon_ready(void);

#endif
