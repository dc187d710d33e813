/* SPDX-License-Identifier: MIT */
/* Ends the FUSE session loop on SIGTERM, SIGINT or SIGHUP whenever the
 * signal comes (stop_signal.c says why libfuse's handlers alone do not). */
#ifndef RFS_STOP_SIGNAL_H
#define RFS_STOP_SIGNAL_H

struct fuse_session;

/* Takes SIGTERM, SIGINT and SIGHUP over from libfuse's handlers (call
 * after fuse_set_signal_handlers()) until rfs_stop_signal_end(). Call on
 * the thread that then runs the loop. @return 0 or a negative errno, and
 * then libfuse's handlers stay. */
int rfs_stop_signal_start(struct fuse_session *se);

/* After the loop returned: stops the helper thread and puts the handlers
 * found by rfs_stop_signal_start() back. @return the signal that ended the
 * loop, or 0 when none did. */
int rfs_stop_signal_end(void);

#endif
