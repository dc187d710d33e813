/* SPDX-License-Identifier: MIT */
#include "os/quiet_thread.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

struct start {
	void *(*fn)(void *);
	void *arg;
	char name[16];
};

/* Named by itself, first: named by its creator, a thread that had already
 * ended would keep no name, and the naming would fail. */
static void *named(void *p)
{
	struct start s = *(struct start *)p;
	free(p);
	/* A name only helps whoever looks: not having one is no error. */
	pthread_setname_np(pthread_self(), s.name);
	return s.fn(s.arg);
}

int rfs_quiet_thread_create(pthread_t *thread, const char *name,
			    void *(*fn)(void *), void *arg)
{
	struct start *s = malloc(sizeof(*s));
	if (!s)
		return -ENOMEM;
	*s = (struct start){ .fn = fn, .arg = arg };
	strncpy(s->name, name, sizeof(s->name) - 1);
	sigset_t quiet, old;
	sigemptyset(&quiet);
	sigaddset(&quiet, SIGTERM);
	sigaddset(&quiet, SIGINT);
	sigaddset(&quiet, SIGHUP);
	sigaddset(&quiet, SIGQUIT);
	/* The new thread inherits the mask it is created with. */
	pthread_sigmask(SIG_BLOCK, &quiet, &old);
	int rc = -pthread_create(thread, NULL, named, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0)
		free(s);
	return rc;
}
