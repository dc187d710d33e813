/* SPDX-License-Identifier: MIT */
/* Going to the background without losing mount errors.
 *
 * fuse_daemonize() lets the parent exit 0 as soon as it forks, before the
 * source is opened or the mount exists. rankfs forks first instead: the
 * child opens the source and mounts while the parent waits, and the parent
 * exits 0 only when the child reports the mount is up, or with the child's
 * failure status (its error line already on the shared stderr). HDF5 is
 * opened and threads start only in the child, after the fork.
 *
 * "Up" means the mount answered a request, not only that mount(2)
 * returned: the kernel sends FUSE INIT after the mount exists, and a
 * session can still fail at it (libfuse 3.14 ended it with EPROTO when
 * init() disagreed with the max_read option, and the parent had exited 0
 * with nothing mounted). A thread of the child looks up a name in the
 * mount: the kernel holds the lookup until INIT is answered, and fails it
 * if INIT failed or the session ended. */
#ifndef RFS_DAEMON_H
#define RFS_DAEMON_H

#include <sys/types.h>

/* Opens /dev/null on any of fds 0-2 that is closed, so the FUSE device
 * or a source file never lands there and gets clobbered later. */
void rfs_daemon_keep_std_fds(void);

/* Forks. Returns 0 in the child; the parent never returns. -1 on error. */
int rfs_daemon_start(void);

/* In the child, once mounted and before the session loop runs: starts a
 * thread that stat()s mountpoint/config.json and releases the parent with
 * exit 0 (detached from the terminal, fds 0-2 on /dev/null) if the answer
 * comes from a file system other than under_dev (the device of the
 * directory under the mount: a stat that reaches it means the mount is
 * gone). @return 0 or a negative errno (no thread started). */
int rfs_daemon_ready_when_answered(const char *mountpoint, dev_t under_dev);

/* Waits for that thread, if one was started. Call once the session is
 * unmounted (libfuse closes the FUSE device, which fails a lookup still
 * waiting for INIT). @return 1 if the parent was released (or there is no
 * parent: -f), else 0. */
int rfs_daemon_end(void);

#endif
