/* SPDX-License-Identifier: MIT */
/* Threads that leave termination signals to the main thread.
 *
 * A process-directed SIGTERM goes to any thread that does not block it.
 * The daemon's main thread ends the FUSE loop when it gets one; taken by a
 * helper thread, the signal only sets libfuse's exit flag, and the daemon
 * would stop at the next request instead of now. */
#ifndef RFS_QUIET_THREAD_H
#define RFS_QUIET_THREAD_H

#include <pthread.h>

/* pthread_create() with SIGTERM, SIGINT, SIGHUP and SIGQUIT blocked in the
 * new thread (synchronous signals such as SIGBUS still reach it), named
 * name (at most 15 characters) for top -H, ps -L and perf: the daemon's
 * FUSE workers keep the process's name. @return 0 or a negative errno. */
int rfs_quiet_thread_create(pthread_t *thread, const char *name,
			    void *(*fn)(void *), void *arg);

#endif
