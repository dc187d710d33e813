#include "pwritev_all.h"

#include <errno.h>

/* Pieces per call: well under IOV_MAX, and a small copy on the stack. */
#define GROUP 64

int rfs_pwritev_all(int fd, const struct iovec *iov, size_t count,
		    uint64_t off)
{
	struct iovec rest[GROUP];
	size_t i = 0, skip = 0; /* bytes of iov[i] written already */
	while (i < count) {
		size_t n = 0;
		for (; n < GROUP && i + n < count; n++)
			rest[n] = iov[i + n];
		rest[0].iov_base = (char *)rest[0].iov_base + skip;
		rest[0].iov_len -= skip;
		ssize_t got = pwritev(fd, rest, (int)n, (off_t)off);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return -errno;
		if (got == 0 && rest[0].iov_len)
			return -EIO;
		off += (uint64_t)got;
		/* Past the pieces written whole; into the first that is not. */
		for (size_t left = (size_t)got; i < count;) {
			size_t piece = iov[i].iov_len - skip;
			if (left < piece) {
				skip += left;
				break;
			}
			left -= piece;
			skip = 0;
			i++;
		}
	}
	return 0;
}
