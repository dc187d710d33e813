/* SPDX-License-Identifier: MIT */
#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "os/quiet_thread.h"

/* The child's end of the pipe to the parent: -1 in the foreground and
 * once the parent is released. Changed by the prober thread while it
 * runs, read by rfs_daemon_end() after joining it. */
static int ready_fd = -1;

static struct {
	pthread_t thread;
	char *path;
	dev_t under_dev;
} prober; /* path set while the thread runs or awaits its join */

void rfs_daemon_keep_std_fds(void)
{
	/* open() takes the lowest free descriptor: a closed one of 0-2. */
	int fd;
	while ((fd = open("/dev/null", O_RDWR)) >= 0 && fd <= 2)
		;
	if (fd > 2)
		close(fd);
}

int rfs_daemon_start(void)
{
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) != 0) {
		fprintf(stderr, "rankfs: pipe: %s\n", strerror(errno));
		return -1;
	}
	/* Flush so buffered output is not written twice. */
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "rankfs: fork: %s\n", strerror(errno));
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (pid == 0) {
		close(fds[0]);
		ready_fd = fds[1];
		return 0;
	}
	close(fds[1]);
	char ok;
	ssize_t n;
	do
		n = read(fds[0], &ok, 1);
	while (n < 0 && errno == EINTR);
	if (n == 1)
		_exit(0);
	/* The child died or gave up before mounting: pass its status on. */
	int status;
	if (waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	    WEXITSTATUS(status) != 0)
		_exit(WEXITSTATUS(status));
	_exit(1);
}

static void ready(void)
{
	if (ready_fd < 0)
		return;
	setsid();
	if (chdir("/") != 0) {
		/* "/" always exists; nothing useful to do otherwise. */
	}
	int null = open("/dev/null", O_RDWR);
	for (int fd = 0; fd <= 2 && null >= 0; fd++)
		dup2(null, fd);
	if (null > 2)
		close(null);
	char ok = 1;
	if (write(ready_fd, &ok, 1) != 1) {
		/* The parent is gone; keep serving. */
	}
	close(ready_fd);
	ready_fd = -1;
}

static void *probe(void *arg)
{
	(void)arg;
	struct stat st;
	int rc;
	do
		rc = stat(prober.path, &st);
	while (rc != 0 && errno == EINTR);
	if (rc == 0 && st.st_dev != prober.under_dev)
		ready();
	return NULL;
}

int rfs_daemon_ready_when_answered(const char *mountpoint, dev_t under_dev)
{
	if (ready_fd < 0)
		return 0;
	if (asprintf(&prober.path, "%s/config.json", mountpoint) < 0) {
		prober.path = NULL;
		return -ENOMEM;
	}
	prober.under_dev = under_dev;
	int rc = rfs_quiet_thread_create(&prober.thread, "rankfs-ready", probe,
					 NULL);
	if (rc != 0) {
		free(prober.path);
		prober.path = NULL;
		return rc;
	}
	return 0;
}

int rfs_daemon_end(void)
{
	if (prober.path)
		pthread_join(prober.thread, NULL);
	free(prober.path);
	prober.path = NULL;
	return ready_fd < 0;
}
