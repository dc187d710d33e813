/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the path/name parser (lib/serve/inode.c).
 *
 * Input: 4 bytes choosing the namespace shape, then a path. Each component
 * is looked up from the root; whatever resolves must round-trip through its
 * inode number, and a directory's listed names must resolve to the listed
 * nodes. Any violation aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve/inode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int same(const struct rfs_node *a, const struct rfs_node *b)
{
	return a->type == b->type && a->epoch == b->epoch &&
	       a->rank == b->rank && a->kind == b->kind && a->batch == b->batch;
}

static void check_node(const struct rfs_inode_space *s,
		       const struct rfs_node *n)
{
	struct rfs_node back;
	if (rfs_inode_node(s, rfs_inode_of(s, n), &back) != 0 ||
	    !same(n, &back))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 4)
		return 0;
	struct rfs_inode_space s;
	uint64_t world = 1 + data[0] % 8;
	uint64_t batches = 1 + ((uint64_t)data[1] << 16 | data[2] << 8) %
				       3000000;
	uint64_t kinds = 2 + (data[0] >> 7); /* with or without label/ */
	int npz = (data[0] >> 6) & 1; /* a CSR source's .npz files */
	if (rfs_inode_space_init(&s, world, kinds, npz, batches,
				 1 + data[3] % 12) != 0)
		return 0;
	char *path = malloc(size - 4 + 1);
	if (!path)
		return 0;
	memcpy(path, data + 4, size - 4);
	path[size - 4] = '\0';

	struct rfs_node node = { .type = RFS_NODE_ROOT }, child;
	char *save = NULL;
	for (char *name = strtok_r(path, "/", &save); name;
	     name = strtok_r(NULL, "/", &save)) {
		if (rfs_inode_lookup(&s, &node, name, &child) != 0)
			break;
		check_node(&s, &child);
		node = child;
	}
	/* The listing of where we stopped must agree with lookup. */
	uint64_t count = rfs_inode_count(&s, &node);
	for (uint64_t i = 0; i < count && i < 4; i++) {
		char name[64];
		struct rfs_node listed, found;
		uint64_t at = i < 2 ? i : count - 1 - (i - 2);
		rfs_inode_entry(&s, &node, at, &listed, name, sizeof(name));
		if (rfs_inode_lookup(&s, &node, name, &found) != 0 ||
		    !same(&listed, &found))
			abort();
	}
	free(path);
	return 0;
}
