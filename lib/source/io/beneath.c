/* SPDX-License-Identifier: MIT */
/*
 * openat2(2) with RESOLVE_BENEATH (Linux 5.6) resolves every component of
 * a path, links included, within a directory, so a check by name and a
 * later open can never disagree (a link swapped in between). glibc 2.36
 * has no wrapper: the system call is made directly.
 */
#include "source/io/beneath.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int rfs_open_beneath(int root_fd, const char *root, const char *path)
{
	size_t n = strlen(root);
	if (strncmp(path, root, n) != 0 || path[n] != '/')
		return -EXDEV;
	struct open_how how = {
		.flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
	};
	long fd;
	/* EAGAIN: a rename elsewhere raced the lookup; the kernel asks for
	 * a retry. */
	int tries = 0;
	do
		fd = syscall(SYS_openat2, root_fd, path + n + 1, &how,
			     sizeof(how));
	while (fd < 0 && errno == EAGAIN && ++tries < 100);
	return fd < 0 ? -errno : (int)fd;
}

const char *rfs_beneath_strerror(int err)
{
	return err == EXDEV ? "a link that leads out of the source" :
			      strerror(err);
}
