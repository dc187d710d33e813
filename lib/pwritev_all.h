/* pwritev() until everything is written. */
#ifndef RFS_PWRITEV_ALL_H
#define RFS_PWRITEV_ALL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* Writes all of iov[0..count) (any count, empty pieces allowed) to fd at
 * off, resuming after short writes and EINTR.
 * @return 0 or a negative errno (-EIO: the file took no more bytes). */
int rfs_pwritev_all(int fd, const struct iovec *iov, size_t count,
		    uint64_t off);

#endif
