/*
 * Variable-length strings (var names, obs string columns, most attributes
 * anndata writes) live in HDF5's global heap, and HDF5 1.10 trusts it: a
 * few flipped bytes there make H5Dread or H5Aread copy from a wild
 * address (a crash) or loop forever (byte-flipped files, fuzzed:
 * tests/integration/test_fuzz_sources.py; h5py dies the same way). So
 * these reads run in a child process, which sends the strings back
 * through a pipe: a crash or a loop there is a failed read here, named in
 * the log, never a dead or hung mount. They happen at mount time only,
 * when no other thread uses HDF5 (a fork copies only the calling thread).
 */
#include "buf.h"
#include "source_hdf5.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "deadline.h"
#include "log.h"

static int write_all(int fd, const void *p, size_t len)
{
	for (size_t done = 0; done < len;) {
		ssize_t n = write(fd, (const char *)p + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		done += (size_t)n;
	}
	return 0;
}

static int read_all(int fd, void *p, size_t len)
{
	for (size_t done = 0; done < len;) {
		ssize_t n = read(fd, (char *)p + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -EIO;
		done += (size_t)n;
	}
	return 0;
}

static void child(hid_t obj, int attr, hid_t mem, uint64_t n, int fd)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	alarm(rfs_deadline_limit()); /* a loop ends with the child */
	/* What dies here says so in the parent's log, once: not a
	 * sanitizer's report of HDF5's wild copy on the daemon's stderr. */
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null >= 0)
		dup2(null, 2);
	char **raw = calloc(n ? n : 1, sizeof(*raw));
	if (!raw ||
	    (attr ? H5Aread(obj, mem, raw) :
		    H5Dread(obj, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw)) < 0)
		_exit(2);
	for (uint64_t i = 0; i < n; i++) {
		uint64_t len = raw[i] ? strlen(raw[i]) : 0;
		if (write_all(fd, &len, sizeof(len)) != 0 ||
		    write_all(fd, raw[i], len) != 0)
			_exit(2);
	}
	_exit(0);
}

/* "FILE: OBJECT", for the log. */
static void name_of(hid_t obj, char *out, size_t size)
{
	char file[512] = "?", name[512] = "?";
	H5Fget_name(obj, file, sizeof(file));
	if (H5Iget_name(obj, name, sizeof(name)) <= 0)
		snprintf(name, sizeof(name), "an attribute");
	snprintf(out, size, "%s: %s", file, name);
}

int rfs_hdf5_read_vlen(hid_t obj, int attr, hid_t mem, uint64_t n, char ***out)
{
	char **strings = calloc(n ? n : 1, sizeof(*strings));
	int fds[2], rc = -ENOMEM, status = 0;
	*out = NULL;
	if (!strings)
		return rc;
	if (pipe2(fds, O_CLOEXEC) != 0) {
		free(strings);
		return -errno;
	}
	pid_t pid = fork();
	if (pid == 0) {
		close(fds[0]);
		child(obj, attr, mem, n, fds[1]);
	}
	close(fds[1]);
	rc = pid < 0 ? -errno : 0;
	for (uint64_t i = 0; i < n && rc == 0; i++) {
		uint64_t len;
		rc = read_all(fds[0], &len, sizeof(len));
		if (rc == 0 && len >= (UINT64_C(1) << 30))
			rc = -EIO;
		if (rc == 0 && !(strings[i] = malloc(len + 1)))
			rc = -ENOMEM;
		if (rc == 0 && (rc = read_all(fds[0], strings[i], len)) == 0)
			strings[i][len] = '\0';
	}
	close(fds[0]);
	if (pid > 0) {
		if (rc != 0)
			kill(pid, SIGKILL);
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		if (rc == 0 && !(WIFEXITED(status) && !WEXITSTATUS(status)))
			rc = -EIO;
		char what[1100];
		if (WIFSIGNALED(status) && WTERMSIG(status) != SIGKILL) {
			name_of(obj, what, sizeof(what));
			rfs_log("%s: reading its strings %s the HDF5 library "
				"(a damaged file?)",
				what,
				WTERMSIG(status) == SIGALRM ? "hung" :
							      "crashed");
		}
	}
	if (rc != 0) {
		rfs_buf_free_strings(strings, n);
		return rc;
	}
	*out = strings;
	return 0;
}
