/* Unit tests for fs/passthrough_wire.c: the INIT offer and request, and
 * the open reply, byte for byte as the kernel (Linux 6.9+) reads them. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <linux/fuse.h>
#include <string.h>

#include "passthrough_wire.h"

#define PASSTHROUGH_BIT_IN_FLAGS2 (1u << 5) /* 1 << 37 */

static size_t init_request(unsigned char *buf, uint32_t flags,
			   uint32_t flags2, uint32_t opcode)
{
	struct fuse_in_header h = { .opcode = opcode, .unique = 42 };
	struct fuse_init_in in = { .major = 7, .minor = 41, .flags = flags,
				   .flags2 = flags2 };
	h.len = sizeof(h) + sizeof(in);
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), &in, sizeof(in));
	return sizeof(h) + sizeof(in);
}

static void test_init_offer_is_read_from_flags2(void **state)
{
	(void)state;
	unsigned char buf[256];
	uint64_t unique = 0;
	size_t n = init_request(buf, FUSE_INIT_EXT, PASSTHROUGH_BIT_IN_FLAGS2,
				FUSE_INIT);
	assert_int_equal(rfs_wire_init_offers(buf, n, &unique), 1);
	assert_int_equal(unique, 42);
	/* flags2 counts only with FUSE_INIT_EXT. */
	n = init_request(buf, 0, PASSTHROUGH_BIT_IN_FLAGS2, FUSE_INIT);
	assert_int_equal(rfs_wire_init_offers(buf, n, &unique), 0);
	/* An older kernel: no offer. */
	n = init_request(buf, FUSE_INIT_EXT, 0, FUSE_INIT);
	assert_int_equal(rfs_wire_init_offers(buf, n, &unique), 0);
	/* Not INIT: -1; an INIT too short for flags2: no offer. */
	n = init_request(buf, FUSE_INIT_EXT, PASSTHROUGH_BIT_IN_FLAGS2,
			 FUSE_OPEN);
	assert_int_equal(rfs_wire_init_offers(buf, n, &unique), -1);
	assert_int_equal(rfs_wire_init_offers(buf, 8, &unique), -1);
	n = init_request(buf, FUSE_INIT_EXT, PASSTHROUGH_BIT_IN_FLAGS2,
			 FUSE_INIT);
	assert_int_equal(rfs_wire_init_offers(buf, sizeof(struct
							  fuse_in_header) + 8,
					      &unique),
			 0);
}

static void test_init_reply_asks_with_depth_one(void **state)
{
	(void)state;
	struct fuse_init_out o = { .major = 7, .minor = 38,
				   .flags = FUSE_INIT_EXT | FUSE_ASYNC_READ,
				   .max_write = 4096, .flags2 = 1u };
	struct fuse_init_out before = o;
	assert_int_equal(rfs_wire_init_ask(&o, sizeof(o)), 1);
	assert_int_equal(o.flags2, 1u | PASSTHROUGH_BIT_IN_FLAGS2);
	/* max_stack_depth: the word after flags2 (offset 36). */
	uint32_t depth;
	memcpy(&depth, (unsigned char *)&o + 36, sizeof(depth));
	assert_int_equal(depth, 1);
	/* Nothing else moves. */
	assert_int_equal(o.flags, before.flags);
	assert_int_equal(o.max_write, before.max_write);
	assert_int_equal(o.minor, before.minor);
}

static void test_init_reply_without_ext_flags_is_left(void **state)
{
	(void)state;
	struct fuse_init_out o = { .major = 7, .minor = 38,
				   .flags = FUSE_ASYNC_READ };
	struct fuse_init_out before = o;
	assert_int_equal(rfs_wire_init_ask(&o, sizeof(o)), 0);
	assert_memory_equal(&o, &before, sizeof(o));
	/* A reply too short to hold the stack depth. */
	o.flags = FUSE_INIT_EXT;
	assert_int_equal(rfs_wire_init_ask(&o, 36), 0);
}

static void test_open_reply_layout(void **state)
{
	(void)state;
	struct rfs_open_out out;
	rfs_wire_open_passthrough(&out, 7, 9);
	assert_int_equal(sizeof(out), sizeof(struct fuse_open_out));
	unsigned char b[16];
	memcpy(b, &out, sizeof(b));
	uint64_t fh;
	uint32_t flags;
	int32_t id;
	memcpy(&fh, b, 8);
	memcpy(&flags, b + 8, 4);
	memcpy(&id, b + 12, 4);
	assert_int_equal(fh, 7);
	assert_int_equal(flags, 1u << 7); /* FOPEN_PASSTHROUGH only */
	assert_int_equal(id, 9);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init_offer_is_read_from_flags2),
		cmocka_unit_test(test_init_reply_asks_with_depth_one),
		cmocka_unit_test(test_init_reply_without_ext_flags_is_left),
		cmocka_unit_test(test_open_reply_layout),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
