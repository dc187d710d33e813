/* SPDX-License-Identifier: MIT */
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
 *
 * The child is forked from a small process, the zygote, which lives
 * while the mount opens its sources (rfs_source_opening() to
 * rfs_source_opened()): a fork copies the page tables of the process
 * that forks, and the daemon holds about 0.5 MiB of HDF5 state per open
 * file, so forking the daemon made a mount of N files cost N^2 (1,000
 * files: 12 s). The zygote is forked before the first open, while the
 * daemon has one thread: forked beside a mount step's watchdog thread
 * (deadline.c), it could copy a lock that thread held (gcc 12's
 * AddressSanitizer takes none around fork), the likely cause of the
 * hangs CI's sanitized run met when it was. The zygote's child opens the file through the daemon's own
 * descriptor (passed over a socket) and the object by its address (a
 * dataset by its path, checked to be at that address). Where there is
 * no zygote or it cannot answer, the daemon forks the child itself.
 */
#include "core/buf.h"
#include "source/hdf5/hdf5_source.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "os/deadline.h"
#include "core/log.h"

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

/* One string as the child sends it: its length, then its bytes. */
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

/* A reading child's start: it dies with its parent and ends a loop. */
static void child_setup(void)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	alarm(rfs_deadline_limit()); /* a loop ends with the child */
	/* What dies here says so in the parent's log, once: not a
	 * sanitizer's report of HDF5's wild copy on the daemon's stderr. */
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null >= 0)
		dup2(null, 2);
}

/* Reads the strings and sends each as its length and bytes to fd. */
static void send_strings(hid_t obj, int attr, hid_t mem, uint64_t n, int fd)
{
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

/* What the daemon asks the zygote for, with the descriptors of the file
 * and of the pipe for the strings. */
struct request {
	uint64_t n;
	haddr_t addr; /* of the object's header */
	int32_t cset;
	int32_t attr; /* 1: the object's attribute named name */
	int32_t dataset; /* 1: opened by path with the efile prefix */
	char name[256];
	char path[2048]; /* of a dataset */
	char efile[4096]; /* its external-file prefix */
};

/* The zygote's child: the request's object opened afresh, checked to
 * hold n strings, and read. */
static void serve(const struct request *rq, int file_fd, int out_fd)
{
	child_setup();
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", file_fd);
	hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
	/* A dataset the daemon has open is opened again only with its
	 * external-file prefix, which H5Oopen_by_addr cannot take. */
	hid_t dapl = rq->dataset ? H5Pcreate(H5P_DATASET_ACCESS) : -1;
	if (rq->dataset &&
	    (dapl < 0 || H5Pset_efile_prefix(dapl, rq->efile) < 0))
		_exit(2);
	hid_t obj = f < 0	? -1 :
		    rq->dataset ? H5Dopen2(f, rq->path, dapl) :
				  H5Oopen_by_addr(f, rq->addr);
	H5O_info_t info;
	if (obj < 0 || H5Oget_info2(obj, &info, H5O_INFO_BASIC) < 0 ||
	    info.addr != rq->addr) /* the daemon's object, not another */
		_exit(2);
	hid_t target = obj >= 0 && rq->attr ?
			       H5Aopen(obj, rq->name, H5P_DEFAULT) :
			       obj;
	hid_t space = target < 0 ? -1 :
		      rq->attr	 ? H5Aget_space(target) :
				   H5Dget_space(target);
	hid_t mem = H5Tcopy(H5T_C_S1);
	if (space < 0 || mem < 0 ||
	    H5Sget_simple_extent_npoints(space) != (hssize_t)rq->n ||
	    H5Tset_size(mem, H5T_VARIABLE) < 0 ||
	    H5Tset_cset(mem, (H5T_cset_t)rq->cset) < 0)
		_exit(2);
	send_strings(target, rq->attr, mem, rq->n, out_fd);
}

static ssize_t receive(int sock, struct request *rq, int fds[2])
{
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} control;
	struct iovec iov = { rq, sizeof(*rq) };
	struct msghdr msg = { .msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = control.buf,
			      .msg_controllen = sizeof(control.buf) };
	ssize_t got;
	do
		got = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	while (got < 0 && errno == EINTR);
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	if (got != (ssize_t)sizeof(*rq) || !c || c->cmsg_type != SCM_RIGHTS ||
	    c->cmsg_len != CMSG_LEN(2 * sizeof(int)))
		return -1;
	memcpy(fds, CMSG_DATA(c), 2 * sizeof(int));
	return got;
}

/* Forks a child per request and answers with its wait status, until the
 * daemon closes its end (or dies: the zygote dies with it). */
static void zygote_main(int sock, pid_t daemon)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != daemon)
		_exit(0);
	for (;;) {
		struct request rq;
		int fds[2];
		if (receive(sock, &rq, fds) < 0)
			_exit(0);
		rq.name[sizeof(rq.name) - 1] = '\0';
		rq.path[sizeof(rq.path) - 1] = '\0';
		rq.efile[sizeof(rq.efile) - 1] = '\0';
		pid_t pid = fork();
		if (pid == 0) {
			close(sock);
			serve(&rq, fds[0], fds[1]);
		}
		close(fds[0]);
		close(fds[1]);
		int status = 2 << 8; /* exited 2: not forked */
		if (pid > 0)
			while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
				;
		if (send(sock, &status, sizeof(status), MSG_NOSIGNAL) !=
		    (ssize_t)sizeof(status))
			_exit(0);
	}
}

/* The daemon's end of the zygote's socket: -1 outside rfs_hdf5_opening()
 * to rfs_hdf5_opened(), and once the zygote has died. */
static struct {
	pthread_mutex_t lock;
	int sock;
	pid_t pid;
} zygote = { PTHREAD_MUTEX_INITIALIZER, -1, 0 };

static void zygote_stop(void)
{
	if (zygote.sock < 0)
		return;
	close(zygote.sock); /* its receive ends */
	zygote.sock = -1;
	while (waitpid(zygote.pid, NULL, 0) < 0 && errno == EINTR)
		;
}

static int zygote_start(void)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
		return -errno;
	pid_t daemon = getpid(), pid = fork();
	if (pid == 0) {
		close(sv[0]);
		zygote_main(sv[1], daemon);
	}
	close(sv[1]);
	if (pid < 0) {
		close(sv[0]);
		return -errno;
	}
	zygote.sock = sv[0];
	zygote.pid = pid;
	return 0;
}

/* Asks the zygote for the strings of obj (its attribute name, if given)
 * into strings, and its child's wait status. @return 0, -EIO (read, and
 * *status says why), or -EAGAIN: no zygote, it did not answer, or its
 * child failed; the daemon's own child tries. Called under zygote.lock. */
static int ask_zygote(hid_t obj, const char *name, hid_t mem, uint64_t n,
		      char **strings, int *status)
{
	struct request rq = { .n = n, .attr = name != NULL };
	H5O_info_t info;
	hid_t file = H5Iget_file_id(obj);
	int *file_fd = NULL, fds[2];
	int ok = file >= 0 &&
		 H5Fget_vfd_handle(file, H5P_DEFAULT, (void **)&file_fd) >= 0 &&
		 file_fd && H5Oget_info2(obj, &info, H5O_INFO_BASIC) >= 0 &&
		 (!name || strlen(name) < sizeof(rq.name));
	if (file >= 0)
		H5Fclose(file); /* the id; the daemon's own stays open */
	if (ok && info.type == H5O_TYPE_DATASET) {
		hid_t dapl = H5Dget_access_plist(obj);
		ssize_t len = H5Iget_name(obj, rq.path, sizeof(rq.path));
		ok = dapl >= 0 && len > 0 && len < (ssize_t)sizeof(rq.path) &&
		     H5Pget_efile_prefix(dapl, rq.efile, sizeof(rq.efile)) >= 0;
		rq.efile[sizeof(rq.efile) - 1] = '\0';
		rq.dataset = 1;
		if (dapl >= 0)
			H5Pclose(dapl);
	}
	if (!ok || zygote.sock < 0)
		return -EAGAIN;
	rq.addr = info.addr;
	rq.cset = H5Tget_cset(mem);
	if (name)
		snprintf(rq.name, sizeof(rq.name), "%s", name);
	if (pipe2(fds, O_CLOEXEC) != 0)
		return -EAGAIN;
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} control = { 0 };
	struct iovec iov = { &rq, sizeof(rq) };
	struct msghdr msg = { .msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = control.buf,
			      .msg_controllen = sizeof(control.buf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(2 * sizeof(int));
	memcpy(CMSG_DATA(c), (int[]){ *file_fd, fds[1] }, 2 * sizeof(int));
	ssize_t sent;
	do
		sent = sendmsg(zygote.sock, &msg, MSG_NOSIGNAL);
	while (sent < 0 && errno == EINTR);
	close(fds[1]);
	int rc = sent == (ssize_t)sizeof(rq) ? 0 : -EAGAIN;
	for (uint64_t i = 0; i < n && rc == 0; i++)
		rc = read_string(fds[0], &strings[i]);
	close(fds[0]); /* a child still writing ends */
	int answered = 0;
	if (sent == (ssize_t)sizeof(rq)) {
		ssize_t got;
		do
			got = recv(zygote.sock, status, sizeof(*status), 0);
		while (got < 0 && errno == EINTR);
		answered = got == (ssize_t)sizeof(*status);
		if (!answered)
			rc = -EAGAIN; /* the zygote died */
		else if (WIFEXITED(*status) && WEXITSTATUS(*status))
			rc = -EAGAIN; /* its child failed */
		else if (rc == 0 && !WIFEXITED(*status))
			rc = -EIO;
	}
	if (!answered)
		zygote_stop(); /* dead: not asked again */
	return rc;
}

void rfs_hdf5_opening(void)
{
	pthread_mutex_lock(&zygote.lock);
	if (zygote.sock < 0)
		zygote_start(); /* failed: the daemon's children read */
	pthread_mutex_unlock(&zygote.lock);
}

void rfs_hdf5_opened(void)
{
	pthread_mutex_lock(&zygote.lock);
	zygote_stop();
	pthread_mutex_unlock(&zygote.lock);
}

/* "FILE: OBJECT", for the log. */
static void name_of(hid_t obj, const char *attr, char *out, size_t size)
{
	char file[512] = "?", name[512] = "?";
	H5Fget_name(obj, file, sizeof(file));
	H5Iget_name(obj, name, sizeof(name));
	snprintf(out, size, "%s: %s%s%s", file, name, attr ? " attribute " : "",
		 attr ? attr : "");
}

/* The daemon forks the child itself. */
static int ask_child(hid_t obj, const char *attr, hid_t mem, uint64_t n,
		     char **strings, int *status)
{
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) != 0)
		return -errno;
	pid_t pid = fork();
	if (pid == 0) {
		close(fds[0]);
		child_setup();
		hid_t a = attr ? H5Aopen(obj, attr, H5P_DEFAULT) : obj;
		if (a < 0)
			_exit(2);
		send_strings(a, attr != NULL, mem, n, fds[1]);
	}
	close(fds[1]);
	int rc = pid < 0 ? -errno : 0;
	for (uint64_t i = 0; i < n && rc == 0; i++)
		rc = read_string(fds[0], &strings[i]);
	close(fds[0]);
	if (pid > 0) {
		if (rc != 0)
			kill(pid, SIGKILL);
		while (waitpid(pid, status, 0) < 0 && errno == EINTR)
			;
		if (rc == 0 && !(WIFEXITED(*status) && !WEXITSTATUS(*status)))
			rc = -EIO;
	}
	return rc;
}

int rfs_hdf5_read_vlen(hid_t obj, const char *attr, hid_t mem, uint64_t n,
		       char ***out)
{
	char **strings = calloc(n ? n : 1, sizeof(*strings));
	int rc = -ENOMEM, status = 0;
	*out = NULL;
	if (!strings)
		return rc;
	/* Where the zygote cannot answer (none, or it died), or its child
	 * failed to read (another path to the object, say), the daemon
	 * forks the child itself. */
	pthread_mutex_lock(&zygote.lock);
	rc = ask_zygote(obj, attr, mem, n, strings, &status);
	pthread_mutex_unlock(&zygote.lock);
	if (rc == -EAGAIN) {
		rfs_buf_free_strings(strings, n);
		if (!(strings = calloc(n ? n : 1, sizeof(*strings))))
			return -ENOMEM;
		status = 0;
		rc = ask_child(obj, attr, mem, n, strings, &status);
	}
	int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
	if (sig && sig != SIGKILL && sig != SIGPIPE) {
		char what[1200];
		name_of(obj, attr, what, sizeof(what));
		rfs_log("%s: reading its strings %s the HDF5 library (a "
			"damaged file?)",
			what, sig == SIGALRM ? "hung" : "crashed");
	}
	if (rc != 0) {
		rfs_buf_free_strings(strings, n);
		return rc;
	}
	*out = strings;
	return 0;
}
