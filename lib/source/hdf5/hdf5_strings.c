/* SPDX-License-Identifier: MIT */
/*
 * Variable-length strings (var names, obs string columns, most attributes
 * anndata writes) live in HDF5's global heap, and HDF5 1.10 trusts it: a
 * few flipped bytes there make H5Dread or H5Aread copy from a wild
 * address (a crash) or loop forever (byte-flipped files, fuzzed:
 * tests/integration/test_fuzz_sources.py; h5py dies the same way). So
 * they are read by another process, rankfs-h5strings (h5strings_main.c):
 * a crash there, or a loop its alarm (open_timeout) ends, is a failed
 * read here, named in the log, never a dead or hung mount. One process
 * serves a dataset's reads in turn (os/helper.h), opening the file
 * through the daemon's descriptor (passed over its socket) and the
 * object by its address. A fork per read cost a copy of the forking
 * process's page tables: HDF5 holds about 0.5 MiB per open file, so
 * forking the daemon made opening N files cost N^2 (1,000 files: 12 s).
 */
#include "core/buf.h"
#include "source/hdf5/hdf5_source.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/log.h"
#include "os/deadline.h"
#include "os/helper.h"

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

/* One string as the helper sends it. */
static int read_string(int fd, char **out)
{
	uint64_t len;
	int rc = read_all(fd, &len, sizeof(len));
	if (rc == 0 && len >= (UINT64_C(1) << 30))
		rc = -EIO;
	if (rc == 0 && !(*out = malloc(len + 1)))
		rc = -ENOMEM;
	if (rc == 0 && (rc = read_all(fd, *out, len)) == 0)
		(*out)[len] = '\0';
	return rc;
}

/* The request on sock, with the descriptor file_fd. */
static int send_request(int sock, struct h5strings_request *rq, int file_fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} control = { 0 };
	struct iovec iov = { rq, sizeof(*rq) };
	struct msghdr msg = { .msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = control.buf,
			      .msg_controllen = sizeof(control.buf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &file_fd, sizeof(int));
	ssize_t sent;
	do
		sent = sendmsg(sock, &msg, MSG_NOSIGNAL);
	while (sent < 0 && errno == EINTR);
	return sent == (ssize_t)sizeof(*rq) ? 0 : -EIO;
}

/* Asks s's helper for the strings; *status: its wait status if it
 * died. */
static int ask(const struct hdf5_source *s, struct h5strings_request *rq,
	       int file_fd, char **strings, int *status)
{
	int sock = rfs_helper_begin(s->strings, "rankfs-h5strings"), no = 1;
	int rc = sock < 0 ? -EIO : send_request(sock, rq, file_fd);
	if (rc == 0)
		rc = read_all(sock, &no, sizeof(no));
	for (uint64_t i = 0; i < rq->n && rc == 0 && !no; i++)
		rc = read_string(sock, &strings[i]);
	/* Not read to its end, the answer would begin the next one. */
	rfs_helper_end(s->strings, sock >= 0 && rc != 0, status);
	return rc ? rc : no ? -EIO : 0;
}

/* Started as rankfs-h5strings (os/helper.c, where that is not found). */
__attribute__((constructor)) static void serve_if_asked(int argc, char **argv)
{
	if (argc == 1 && strcmp(argv[0], "rankfs-h5strings") == 0)
		_exit(rfs_hdf5_strings_serve());
}

int rfs_hdf5_read_vlen(const struct hdf5_source *s, hid_t obj, const char *attr,
		       H5T_cset_t cset, uint64_t n, char ***out)
{
	struct h5strings_request rq = { .n = n,
					.cset = cset,
					.attr = attr != NULL,
					.limit = rfs_deadline_seconds(
						s->base.env.deadline) };
	char **strings = calloc(n ? n : 1, sizeof(*strings));
	H5O_info_t info;
	hid_t file = H5Iget_file_id(obj);
	int *file_fd = NULL, status = 0, rc = strings ? -EIO : -ENOMEM;
	*out = NULL;
	if (strings && file >= 0 &&
	    H5Fget_vfd_handle(file, H5P_DEFAULT, (void **)&file_fd) >= 0 &&
	    file_fd && H5Oget_info2(obj, &info, H5O_INFO_BASIC) >= 0 &&
	    (!attr || strlen(attr) < sizeof(rq.name)) && s->strings) {
		rq.addr = info.addr;
		snprintf(rq.name, sizeof(rq.name), "%s", attr ? attr : "");
		rc = ask(s, &rq, *file_fd, strings, &status);
	}
	if (file >= 0)
		H5Fclose(file); /* the id; the source's stays open */
	int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
	if (sig && sig != SIGKILL && sig != SIGPIPE) {
		char name[512] = "?";
		H5Iget_name(obj, name, sizeof(name));
		rfs_log("%s: %s%s%s: reading its strings %s the HDF5 library "
			"(a damaged file?)",
			s->path, name, attr ? " attribute " : "",
			attr ? attr : "", sig == SIGALRM ? "hung" : "crashed");
	}
	if (rc != 0)
		rfs_buf_free_strings(strings, n);
	else
		*out = strings;
	return rc;
}
