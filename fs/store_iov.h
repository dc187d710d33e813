/* FUSE's store notification written from an iovec (store_iov.c says
 * why not libfuse's). FUSE-free but for the kernel's message layout. */
#ifndef RFS_STORE_IOV_H
#define RFS_STORE_IOV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* Stores the n segments of iov, in order, as inode ino's contents from
 * offset 0: FUSE_NOTIFY_STORE messages written to the FUSE device fd,
 * each of at most IOV_MAX - 2 segments and under 2 GiB. A segment of
 * 2 GiB or more is refused (-EFBIG). @return 0, or the negative errno of
 * the first message that failed (the ones before it were stored; ENOENT:
 * the kernel has no such inode). */
int rfs_store_iov(int fd, uint64_t ino, const struct iovec *iov, size_t n);

#endif
