/* SPDX-License-Identifier: MIT */
/* Many positioned reads in few system calls.
 *
 * A batch of random rows is hundreds of small reads; under
 * virtualisation each system call costs as much as the copy it does. The
 * reads of a batch are therefore submitted together through io_uring (one
 * ring per thread, made on first use) and waited for together. Where
 * io_uring is not available (old kernel, seccomp, io_uring_disabled) the
 * same reads are done with preadv, one per run; the first fallback is
 * logged. RANKFS_NO_URING=1 in the environment forces the fallback.
 * HDF5-free, thread-safe. */
#ifndef RFS_FETCH_H
#define RFS_FETCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* One run: len bytes at file offset off, scattered over iov (which stays
 * valid until rfs_fetch returns). */
struct rfs_fetch_run {
	uint64_t off;
	size_t len;
	const struct iovec *iov;
	int iovcnt;
};

/* Reads every run from fd. @return 0, -ENODATA when the file ends before
 * a run does, or the negative errno of a failed read; *failed is then the
 * index of a failed run. */
int rfs_fetch(int fd, const struct rfs_fetch_run *runs, size_t n,
	      size_t *failed);

/* len bytes at offset at of fd into dst, retried through signals and
 * short reads; *got (may be NULL) the bytes read. @return 0, -ENODATA
 * when the file ends first, or the negative errno of a failed read. */
int rfs_fetch_pread_all(int fd, void *dst, size_t len, uint64_t at,
			size_t *got);

/* 1 when this thread's reads go through io_uring (for dataset.json). */
int rfs_fetch_uses_uring(void);

#endif
