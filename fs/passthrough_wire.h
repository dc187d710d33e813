/* The bytes of FUSE passthrough (Linux 6.9+) that libfuse 3.14 does not
 * know: the INIT flag and stack depth, the open reply's backing id, and
 * the ioctls that register a backing file. Pure: no FUSE session. */
#ifndef RFS_PASSTHROUGH_WIRE_H
#define RFS_PASSTHROUGH_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>

struct rfs_backing_map {
	int32_t fd;
	uint32_t flags;
	uint64_t padding;
};

#define RFS_DEV_IOC_BACKING_OPEN _IOW(229, 1, struct rfs_backing_map)
#define RFS_DEV_IOC_BACKING_CLOSE _IOW(229, 2, uint32_t)

/* The open reply: the kernel reads the file from backing_id's file. */
struct rfs_open_out {
	uint64_t fh;
	uint32_t open_flags;
	int32_t backing_id;
};

void rfs_wire_open_passthrough(struct rfs_open_out *out, uint64_t fh,
			       int32_t backing_id);

/* buf, n bytes read from /dev/fuse: @return 1 if it is an INIT request
 * that offers passthrough (its unique id in *unique), 0 an INIT request
 * that does not, -1 anything else. */
int rfs_wire_init_offers(const void *buf, size_t n, uint64_t *unique);

/* out, the n-byte body of an INIT reply (struct fuse_init_out): asks for
 * passthrough, with files stacked one deep. @return 1, or 0 if it cannot
 * (a reply too short, or without the extended flags). */
int rfs_wire_init_ask(void *out, size_t n);

#endif
