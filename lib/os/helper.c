/* SPDX-License-Identifier: MIT */
#include "os/helper.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/log.h"

extern char **environ;

struct rfs_helper {
	pthread_mutex_t lock; /* held from begin to end */
	int sock; /* our end, -1 when no process runs */
	pid_t pid;
};

int rfs_helper_create(struct rfs_helper **out)
{
	struct rfs_helper *h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	pthread_mutex_init(&h->lock, NULL);
	h->sock = -1;
	*out = h;
	return 0;
}

/* The first of the places helper.h lists that holds program, else this
 * program, which serves when started as it (hdf5_strings.c). */
static void find(const char *program, char *path, size_t size)
{
	static const char *const near[] = { "", "/..", "/../libexec/rankfs" };
	char exe[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[len > 0 ? len : 0] = '\0';
	char *slash = strrchr(exe, '/');
	for (size_t i = 0; slash && i < 3; i++) {
		*slash = '\0';
		snprintf(path, size, "%s%s/%s", exe, near[i], program);
		if (access(path, X_OK) == 0)
			return;
	}
	snprintf(path, size, "%s/%s", RFS_LIBEXECDIR, program);
	if (access(path, X_OK) != 0)
		snprintf(path, size, "/proc/self/exe");
}

static int start(struct rfs_helper *h, const char *program)
{
	char path[PATH_MAX + 64];
	int sv[2], rc;
	find(program, path, sizeof(path));
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return -errno;
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, deflt;
	sigemptyset(&none);
	sigfillset(&deflt); /* what the daemon ignores, its timeout too */
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, sv[1], 3);
	/* A sanitizer's report of HDF5's wild copy is not the daemon's. */
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK |
						POSIX_SPAWN_SETSIGDEF);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &deflt);
	char *argv[] = { (char *)program, NULL };
	rc = -posix_spawn(&h->pid, path, &fa, &attr, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	close(sv[1]);
	if (rc == 0) {
		h->sock = sv[0];
		return 0;
	}
	close(sv[0]);
	rfs_log("%s: not started: %s", path, strerror(-rc));
	return rc;
}

int rfs_helper_begin(struct rfs_helper *h, const char *program)
{
	pthread_mutex_lock(&h->lock);
	/* Died (or killed) since its last answer: started again. */
	if (h->sock >= 0 && waitpid(h->pid, NULL, WNOHANG) != 0) {
		close(h->sock);
		h->sock = -1;
	}
	int rc = h->sock < 0 ? start(h, program) : 0;
	return rc ? rc : h->sock;
}

void rfs_helper_end(struct rfs_helper *h, int failed, int *status)
{
	*status = 0;
	if (failed && h->sock >= 0) {
		close(h->sock); /* it exits when idle */
		h->sock = -1;
		kill(h->pid, SIGKILL);
		while (waitpid(h->pid, status, 0) < 0 && errno == EINTR)
			;
	}
	pthread_mutex_unlock(&h->lock);
}

void rfs_helper_stop(struct rfs_helper *h)
{
	int status;
	pthread_mutex_lock(&h->lock);
	rfs_helper_end(h, 1, &status);
}

void rfs_helper_destroy(struct rfs_helper *h)
{
	if (!h)
		return;
	rfs_helper_stop(h);
	pthread_mutex_destroy(&h->lock);
	free(h);
}
