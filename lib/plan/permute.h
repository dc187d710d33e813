/* SPDX-License-Identifier: MIT */
/* Keyed pseudo-random bijections on [0, n), evaluated per element. */
#ifndef RFS_PERMUTE_H
#define RFS_PERMUTE_H

#include <stddef.h>
#include <stdint.h>

#define RFS_PERMUTE_ROUNDS 6

/* Purposes keep the hash streams of different decisions apart. */
enum rfs_purpose {
	RFS_PURPOSE_ROWS = 1, /* shuffle: the epoch's row order */
	RFS_PURPOSE_BLOCKS = 2, /* block_shuffle: the epoch's block order */
	RFS_PURPOSE_WINDOW = 3, /* order of rows inside one fetch window */
	RFS_PURPOSE_DRAWS = 4, /* weighted: the row of each draw */
};

struct rfs_permute {
	uint64_t n;
	unsigned half_bits;
	uint64_t half_mask;
	uint64_t round_keys[RFS_PERMUTE_ROUNDS];
};

/* Derives a 64-bit key from (seed, epoch, purpose, index) with XXH3; the
 * bytes hashed are little-endian so every host derives the same key. */
uint64_t rfs_permute_key(uint64_t seed, uint64_t epoch, uint64_t purpose,
			 uint64_t index);

/* Prepares the permutation of [0, n) selected by key. n may be 0 or 1. */
void rfs_permute_init(struct rfs_permute *p, uint64_t n, uint64_t key);

/* @return the image of i (i < n): O(1) time and memory. */
uint64_t rfs_permute_apply(const struct rfs_permute *p, uint64_t i);

/* out[k] = rfs_permute_apply(p, first + k) for k < count (first + count
 * <= n): the same images, several times faster than one at a time. */
void rfs_permute_apply_range(const struct rfs_permute *p, uint64_t first,
			     size_t count, uint64_t *out);

/* @return the i with rfs_permute_apply(p, i) == y (y < n). */
uint64_t rfs_permute_invert(const struct rfs_permute *p, uint64_t y);

/* A permutation of [0, n) that moves blocks of `block` consecutive items
 * and keeps the order inside each block. The last block is short when block
 * does not divide n; it lands in a random slot like the others. With
 * block == 1 it is the plain permutation of the same key. */
struct rfs_blocked {
	uint64_t block;
	uint64_t last_block_items; /* items of the final, possibly short block */
	uint64_t short_slot; /* slot of the short block; blocks if none */
	struct rfs_permute blocks;
};

void rfs_permute_blocked_init(struct rfs_blocked *b, uint64_t n, uint64_t block,
			      uint64_t key);

/* @return the item at position pos (pos < n): O(1). */
uint64_t rfs_permute_blocked_apply(const struct rfs_blocked *b, uint64_t pos);

/* out[k] = rfs_permute_blocked_apply(b, first + k) for k < count (first + count
 * <= n), each block's slot permuted once. */
void rfs_permute_blocked_apply_range(const struct rfs_blocked *b,
				     uint64_t first, size_t count,
				     uint64_t *out);

#endif
