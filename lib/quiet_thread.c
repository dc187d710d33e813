#include "quiet_thread.h"

#include <signal.h>

int rfs_quiet_thread_create(pthread_t *thread, const char *name,
			    void *(*fn)(void *), void *arg)
{
	sigset_t quiet, old;
	sigemptyset(&quiet);
	sigaddset(&quiet, SIGTERM);
	sigaddset(&quiet, SIGINT);
	sigaddset(&quiet, SIGHUP);
	sigaddset(&quiet, SIGQUIT);
	/* The new thread inherits the mask it is created with. */
	pthread_sigmask(SIG_BLOCK, &quiet, &old);
	int rc = -pthread_create(thread, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	/* A name only helps whoever looks: not having one is no error. */
	if (rc == 0)
		pthread_setname_np(*thread, name);
	return rc;
}
