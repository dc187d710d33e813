/* Keyed pseudo-random bijections on [0, n), evaluated per element. */
#ifndef RFS_PERMUTE_H
#define RFS_PERMUTE_H

#include <stdint.h>

#define RFS_PERMUTE_ROUNDS 6

/* Purposes keep the hash streams of different decisions apart. */
enum rfs_purpose {
	RFS_PURPOSE_ROWS = 1, /* shuffle: the epoch's row order */
	RFS_PURPOSE_BLOCKS = 2, /* block_shuffle: the epoch's block order */
	RFS_PURPOSE_WINDOW = 3, /* order of rows inside one fetch window */
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

/* @return the i with rfs_permute_apply(p, i) == y (y < n). */
uint64_t rfs_permute_invert(const struct rfs_permute *p, uint64_t y);

#endif
