/*
 * FUSE's store notification from many buffers, without a copy in the
 * daemon. libfuse 3.14's fuse_lowlevel_notify_store() sends a bufvec of
 * more than one buffer through fuse_send_data_iov_fallback(), which
 * copies it into one bounce buffer first; a batch stored straight from
 * the source's mapping (an iovec of its header and rows) would pay that
 * copy. So the messages are written here, as libfuse writes them
 * (send_notify_iov: a fuse_out_header with unique 0 and the notify code
 * in error, then fuse_notify_store_out, then the bytes), with writev on
 * the session's device: the kernel copies the bytes into the page cache
 * from wherever they lie.
 */
#include "store_iov.h"

#include <errno.h>
#include <limits.h>
#include <linux/fuse.h>
#include <stdlib.h>
#include <sys/uio.h>

/* Two segments of each message are its headers. */
#define DATA_SEGMENTS (IOV_MAX - 2)

/* One message: n data segments, len bytes, at offset. */
static int send_one(int fd, uint64_t ino, uint64_t offset,
		    const struct iovec *data, size_t n, size_t len,
		    struct iovec *msg)
{
	struct fuse_out_header out = { 0 };
	struct fuse_notify_store_out arg = { 0 };
	size_t total = sizeof(out) + sizeof(arg) + len;
	if (len > UINT32_MAX || total > UINT32_MAX)
		return -EFBIG;
	out.len = (uint32_t)total;
	out.error = FUSE_NOTIFY_STORE;
	out.unique = 0;
	arg.nodeid = ino;
	arg.offset = offset;
	arg.size = (uint32_t)len;
	msg[0] = (struct iovec){ &out, sizeof(out) };
	msg[1] = (struct iovec){ &arg, sizeof(arg) };
	for (size_t i = 0; i < n; i++)
		msg[2 + i] = data[i];
	ssize_t w;
	do
		w = writev(fd, msg, (int)(n + 2));
	while (w < 0 && errno == EINTR);
	if (w < 0)
		return -errno;
	/* The device takes a message whole or not at all. */
	return (size_t)w == total ? 0 : -EIO;
}

int rfs_store_iov(int fd, uint64_t ino, const struct iovec *iov, size_t n)
{
	struct iovec *msg =
		malloc((n < DATA_SEGMENTS ? n : DATA_SEGMENTS) * sizeof(*msg) +
		       2 * sizeof(*msg));
	if (!msg)
		return -ENOMEM;
	uint64_t offset = 0;
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0;) {
		size_t k = 0, len = 0;
		while (i + k < n && k < DATA_SEGMENTS &&
		       len + iov[i + k].iov_len <= UINT32_MAX / 2) {
			len += iov[i + k].iov_len;
			k++;
		}
		if (k == 0) { /* one segment too big for a message */
			rc = -EFBIG;
			break;
		}
		rc = send_one(fd, ino, offset, iov + i, k, len, msg);
		offset += len;
		i += k;
	}
	free(msg);
	return rc;
}
