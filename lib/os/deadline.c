/* SPDX-License-Identifier: MIT */
/*
 * HDF5 can spin forever on a damaged file: a few flipped bytes in a global
 * heap keep H5Aread converting the same variable-length string, holding
 * HDF5's global lock, and nothing can interrupt it (h5py hangs the same
 * way). A mount must not hang, so every mount-time step that reads a
 * source runs under a watchdog thread; when the step overruns, the
 * watchdog names it and ends the process. At mount time nothing is
 * mounted yet, and a daemonising mount's parent passes the exit status on
 * (fs/daemon.c), so the mount command returns with the message.
 */
#include "os/deadline.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"

static unsigned limit_s = 120;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ended = PTHREAD_COND_INITIALIZER;
static int running; /* protected by lock */
static pthread_t watchdog;
static char step[1024]; /* protected by lock */

void rfs_deadline_set_limit(unsigned seconds)
{
	limit_s = seconds;
}

unsigned rfs_deadline_limit(void)
{
	return limit_s;
}

static void *watch(void *arg)
{
	struct timespec at;
	(void)arg;
	clock_gettime(CLOCK_MONOTONIC, &at);
	at.tv_sec += limit_s;
	pthread_mutex_lock(&lock);
	while (running)
		if (pthread_cond_timedwait(&ended, &lock, &at) == ETIMEDOUT &&
		    running) {
			fprintf(stderr,
				"rankfs: %s: no answer after %u s (a damaged "
				"file the HDF5 library loops on, or a source "
				"on storage that does not answer); giving up\n",
				step, limit_s);
			rfs_log("%s: no answer after %u s; giving up", step,
				limit_s);
			_exit(1);
		}
	pthread_mutex_unlock(&lock);
	return NULL;
}

int rfs_deadline_begin(const char *what)
{
	if (!limit_s)
		return 0;
	pthread_condattr_t attr;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_destroy(&ended);
	pthread_cond_init(&ended, &attr);
	pthread_condattr_destroy(&attr);
	snprintf(step, sizeof(step), "%s", what);
	running = 1;
	int rc = pthread_create(&watchdog, NULL, watch, NULL);
	if (rc != 0)
		running = 0;
	return -rc;
}

void rfs_deadline_end(void)
{
	pthread_mutex_lock(&lock);
	int was = running;
	running = 0;
	pthread_cond_signal(&ended);
	pthread_mutex_unlock(&lock);
	if (was)
		pthread_join(watchdog, NULL);
}
