/* SPDX-License-Identifier: MIT */
/* rankfs-h5strings: reads HDF5 variable-length strings for the daemon
 * (hdf5_strings.c says why), one request at a time from the socket on
 * descriptor 3. A crash in HDF5 ends it, and a loop its alarm. */
#include "source/hdf5/hdf5_source.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The request's object, opened afresh in the file file_fd, checked to
 * hold n strings, read and sent to out. @return fflush's. */
static int serve(const struct h5strings_request *rq, int file_fd, FILE *out)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", file_fd);
	hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
	hid_t obj = f < 0 ? -1 : H5Oopen_by_addr(f, rq->addr);
	hid_t target = obj >= 0 && rq->attr ?
			       H5Aopen(obj, rq->name, H5P_DEFAULT) :
			       obj;
	hid_t space = target < 0 ? -1 :
		      rq->attr	 ? H5Aget_space(target) :
				   H5Dget_space(target);
	hid_t mem = H5Tcopy(H5T_C_S1);
	char **raw = calloc(rq->n ? rq->n : 1, sizeof(*raw));
	int no = !(space >= 0 && mem >= 0 && raw &&
		   H5Sget_simple_extent_npoints(space) == (hssize_t)rq->n &&
		   H5Tset_size(mem, H5T_VARIABLE) >= 0 &&
		   /* HDF5 converts no strings between ASCII and UTF-8. */
		   H5Tset_cset(mem, (H5T_cset_t)rq->cset) >= 0 &&
		   (rq->attr ? H5Aread(target, mem, raw) :
			       H5Dread(target, mem, H5S_ALL, H5S_ALL,
				       H5P_DEFAULT, raw)) >= 0);
	fwrite(&no, sizeof(no), 1, out);
	for (uint64_t i = 0; i < rq->n && !no; i++) {
		uint64_t len = raw[i] ? strlen(raw[i]) : 0;
		fwrite(&len, sizeof(len), 1, out);
		fwrite(raw[i], 1, len, out);
	}
	if (!no)
		H5Dvlen_reclaim(mem, space, H5P_DEFAULT, raw);
	free(raw);
	if (mem >= 0)
		H5Tclose(mem);
	if (space >= 0)
		H5Sclose(space);
	if (target >= 0 && target != obj)
		H5Aclose(target);
	if (obj >= 0)
		H5Oclose(obj);
	if (f >= 0)
		H5Fclose(f);
	return fflush(out);
}

/* The next request and its descriptor. @return 0, or -1 when the
 * socket closed or sent something else. */
static int receive(int sock, struct h5strings_request *rq, int *fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
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
	    c->cmsg_len != CMSG_LEN(sizeof(int)))
		return -1;
	memcpy(fd, CMSG_DATA(c), sizeof(int));
	rq->name[sizeof(rq->name) - 1] = '\0';
	return 0;
}

int rfs_hdf5_strings_serve(void)
{
	struct h5strings_request rq;
	int fd, rc = 0;
	FILE *out = fdopen(3, "w");
	H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
	while (out && rc == 0 && receive(3, &rq, &fd) == 0) {
		alarm(rq.limit); /* a loop in HDF5 ends here */
		rc = serve(&rq, fd, out);
		alarm(0);
		close(fd);
	}
	return 0;
}

#ifdef RFS_H5STRINGS_MAIN
int main(void)
{
	return rfs_hdf5_strings_serve();
}
#endif
