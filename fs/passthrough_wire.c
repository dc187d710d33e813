#include "passthrough_wire.h"

#include <linux/fuse.h>
#include <string.h>

#define PASSTHROUGH_FLAG (UINT64_C(1) << 37) /* FUSE_PASSTHROUGH, 7.40 */
#define FOPEN_PASSTHROUGH_FLAG (1u << 7)
/* The word after flags2, which Linux 6.9 named max_stack_depth: headers
 * older than that call it unused[0], newer ones move `unused` past it. */
#define MAX_STACK_DEPTH_AT 36
_Static_assert(offsetof(struct fuse_init_out, flags2) == 32,
	       "fuse_init_out.flags2 at 32");
_Static_assert(sizeof(struct fuse_init_out) == 64, "fuse_init_out: 64 bytes");
/* Ours, stacked on a memfd (tmpfs, depth 0); leaves room for overlayfs
 * on top (FILESYSTEM_MAX_STACK_DEPTH is 2). */
#define STACK_DEPTH 1u

void rfs_wire_open_passthrough(struct rfs_open_out *out, uint64_t fh,
			       int32_t backing_id)
{
	*out = (struct rfs_open_out){ .fh = fh,
				      .open_flags = FOPEN_PASSTHROUGH_FLAG,
				      .backing_id = backing_id };
}

int rfs_wire_init_offers(const void *buf, size_t n, uint64_t *unique)
{
	struct fuse_in_header h;
	struct fuse_init_in in;
	if (n < sizeof(h))
		return -1;
	memcpy(&h, buf, sizeof(h));
	if (h.opcode != FUSE_INIT)
		return -1;
	if (n < sizeof(h) + offsetof(struct fuse_init_in, unused))
		return 0; /* an INIT before flags2 (FUSE 7.36) */
	memset(&in, 0, sizeof(in));
	memcpy(&in, (const char *)buf + sizeof(h),
	       n - sizeof(h) < sizeof(in) ? n - sizeof(h) : sizeof(in));
	uint64_t flags = in.flags;
	if (flags & FUSE_INIT_EXT)
		flags |= (uint64_t)in.flags2 << 32;
	*unique = h.unique;
	return (flags & PASSTHROUGH_FLAG) != 0;
}

int rfs_wire_init_ask(void *out, size_t n)
{
	struct fuse_init_out o;
	if (n < MAX_STACK_DEPTH_AT + sizeof(uint32_t))
		return 0;
	memset(&o, 0, sizeof(o));
	memcpy(&o, out, n < sizeof(o) ? n : sizeof(o));
	if (!(o.flags & FUSE_INIT_EXT))
		return 0;
	o.flags2 |= (uint32_t)(PASSTHROUGH_FLAG >> 32);
	memcpy(out, &o, n < sizeof(o) ? n : sizeof(o));
	uint32_t depth = STACK_DEPTH;
	memcpy((unsigned char *)out + MAX_STACK_DEPTH_AT, &depth,
	       sizeof(depth));
	return 1;
}
