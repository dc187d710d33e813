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
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"

struct rfs_deadline {
	unsigned limit_s; /* 0: none */
	pthread_mutex_t lock;
	pthread_cond_t ended; /* on CLOCK_MONOTONIC */
	int running; /* protected by lock */
	pthread_t watchdog; /* the step's, while running */
	char step[1024]; /* protected by lock */
};

unsigned rfs_deadline_seconds(const struct rfs_deadline *d)
{
	return d ? d->limit_s : 120;
}

int rfs_deadline_create(unsigned seconds, struct rfs_deadline **out)
{
	struct rfs_deadline *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->limit_s = seconds;
	pthread_condattr_t attr;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&d->ended, &attr);
	pthread_condattr_destroy(&attr);
	pthread_mutex_init(&d->lock, NULL);
	*out = d;
	return 0;
}

void rfs_deadline_destroy(struct rfs_deadline *d)
{
	if (!d)
		return;
	rfs_deadline_end(d);
	pthread_cond_destroy(&d->ended);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

static void *watch(void *arg)
{
	struct rfs_deadline *d = arg;
	struct timespec at;
	clock_gettime(CLOCK_MONOTONIC, &at);
	at.tv_sec += d->limit_s;
	pthread_mutex_lock(&d->lock);
	while (d->running)
		if (pthread_cond_timedwait(&d->ended, &d->lock, &at) ==
			    ETIMEDOUT &&
		    d->running) {
			fprintf(stderr,
				"rankfs: %s: no answer after %u s (a damaged "
				"file the HDF5 library loops on, or a source "
				"on storage that does not answer); giving up\n",
				d->step, d->limit_s);
			rfs_log("%s: no answer after %u s; giving up", d->step,
				d->limit_s);
			_exit(1);
		}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

int rfs_deadline_begin(struct rfs_deadline *d, const char *what)
{
	if (!d || !d->limit_s)
		return 0;
	snprintf(d->step, sizeof(d->step), "%s", what);
	d->running = 1;
	int rc = pthread_create(&d->watchdog, NULL, watch, d);
	if (rc != 0)
		d->running = 0;
	return -rc;
}

void rfs_deadline_end(struct rfs_deadline *d)
{
	if (!d)
		return;
	pthread_mutex_lock(&d->lock);
	int was = d->running;
	d->running = 0;
	pthread_cond_signal(&d->ended);
	pthread_mutex_unlock(&d->lock);
	if (was)
		pthread_join(d->watchdog, NULL);
}
