/* SPDX-License-Identifier: MIT */
/*
 * Keyed permutation of [0, n) computed one element at a time.
 *
 * Shuffling 10^9 rows by materialising a permutation costs 8 GB and a pass
 * over all of them before the first batch; and every node would have to do
 * it. Instead S_e[i] is computed on demand from (key, i) alone.
 *
 * The construction is a balanced Feistel network over the smallest even
 * number of bits 2h with 2^(2h) >= n. Each round maps (L, R) to
 * (R, L ^ F_k(R)) on h-bit halves, where F_k is XXH3 of R keyed by a round
 * key; any such network is a bijection on [0, 2^(2h)) whatever F is, and six
 * rounds of a good hash make it indistinguishable from a random permutation
 * for our purposes. To restrict it to [0, n) we "cycle walk": apply the
 * network again while the result is >= n. Because the network is a bijection,
 * the walk stays on the cycle of the start point and must come back below n;
 * since 2^(2h) < 4n the expected number of steps is under 4.
 *
 * The inverse runs the rounds backwards and walks the same way. Round keys
 * depend only on the key, so init is O(1) too. The output depends on XXH3's
 * output, which xxHash guarantees stable across versions.
 *
 * A blocked permutation applies the same network to block numbers. When the
 * last block is short it lands at a random slot like any other block, and
 * positions after that slot shift by the missing items; the slot is found
 * with the inverse, so a position still maps to its item in O(1).
 */
#include "plan/permute.h"

#include <endian.h>
#include <string.h>

/* Inlined: the round function runs ~16 times per shuffled row, and the
 * library call cost more than the hash of 8 bytes. */
#define XXH_INLINE_ALL
#include <xxhash.h>

/* One 8-byte store: stored byte by byte, XXH3's 4-byte loads of the same
 * bytes could not be forwarded from the stores and stalled, which was
 * most of a round's cost. */
static void put_le64(unsigned char *p, uint64_t v)
{
	uint64_t le = htole64(v);
	memcpy(p, &le, sizeof(le));
}

static uint64_t hash_u64(uint64_t v, uint64_t key)
{
	unsigned char b[8];
	put_le64(b, v);
	return XXH3_64bits_withSeed(b, sizeof(b), key);
}

uint64_t rfs_permute_key(uint64_t seed, uint64_t epoch, uint64_t purpose,
			 uint64_t index)
{
	unsigned char b[24];
	put_le64(b, epoch);
	put_le64(b + 8, purpose);
	put_le64(b + 16, index);
	return XXH3_64bits_withSeed(b, sizeof(b), seed);
}

void rfs_permute_init(struct rfs_permute *p, uint64_t n, uint64_t key)
{
	unsigned bits = 0;
	while (bits < 64 && n > 1 && ((n - 1) >> bits) != 0)
		bits++;
	p->n = n;
	p->half_bits = bits < 2 ? 1 : (bits + 1) / 2;
	p->half_mask = (UINT64_C(1) << p->half_bits) - 1;
	for (unsigned r = 0; r < RFS_PERMUTE_ROUNDS; r++)
		p->round_keys[r] = hash_u64(r, key);
}

static uint64_t decrypt(const struct rfs_permute *p, uint64_t x)
{
	uint64_t l = x >> p->half_bits, r = x & p->half_mask;
	for (unsigned i = RFS_PERMUTE_ROUNDS; i-- > 0;) {
		uint64_t t = r ^ (hash_u64(l, p->round_keys[i]) & p->half_mask);
		r = l;
		l = t;
	}
	return (l << p->half_bits) | r;
}

/* Lanes encrypted together: a round of every lane before the next round,
 * so their hash chains, independent, overlap in the CPU where one
 * element's six rounds depend on each other. */
#define LANES 64

static void encrypt_lanes(const struct rfs_permute *p, uint64_t *v, size_t m)
{
	uint64_t l[LANES], r[LANES];
	for (size_t k = 0; k < m; k++) {
		l[k] = v[k] >> p->half_bits;
		r[k] = v[k] & p->half_mask;
	}
	for (unsigned i = 0; i < RFS_PERMUTE_ROUNDS; i++) {
		uint64_t key = p->round_keys[i];
		for (size_t k = 0; k < m; k++) {
			uint64_t t = l[k] ^
				     (hash_u64(r[k], key) & p->half_mask);
			l[k] = r[k];
			r[k] = t;
		}
	}
	for (size_t k = 0; k < m; k++)
		v[k] = (l[k] << p->half_bits) | r[k];
}

void rfs_permute_apply_range(const struct rfs_permute *p, uint64_t first,
			     size_t count, uint64_t *out)
{
	for (size_t base = 0; base < count; base += LANES) {
		size_t m = count - base < LANES ? count - base : LANES;
		uint64_t v[LANES];
		size_t slot[LANES], pending = m;
		for (size_t k = 0; k < m; k++) {
			v[k] = first + base + k;
			slot[k] = base + k;
			out[base + k] = 0; /* n <= 1 */
		}
		if (p->n <= 1)
			continue;
		while (pending) { /* cycle walks, the unfinished lanes packed */
			encrypt_lanes(p, v, pending);
			size_t left = 0;
			for (size_t k = 0; k < pending; k++) {
				if (v[k] < p->n) {
					out[slot[k]] = v[k];
				} else {
					v[left] = v[k];
					slot[left++] = slot[k];
				}
			}
			pending = left;
		}
	}
}

/* A range of one: the rounds forward are written once. */
uint64_t rfs_permute_apply(const struct rfs_permute *p, uint64_t i)
{
	uint64_t y;
	rfs_permute_apply_range(p, i, 1, &y);
	return y;
}

uint64_t rfs_permute_invert(const struct rfs_permute *p, uint64_t y)
{
	if (p->n <= 1)
		return 0;
	uint64_t x = decrypt(p, y);
	while (x >= p->n)
		x = decrypt(p, x);
	return x;
}

void rfs_permute_blocked_init(struct rfs_blocked *b, uint64_t n, uint64_t block,
			      uint64_t key)
{
	uint64_t blocks = n / block + (n % block != 0);
	b->block = block;
	b->last_block_items = n - (blocks ? blocks - 1 : 0) * block;
	rfs_permute_init(&b->blocks, blocks, key);
	b->short_slot = b->last_block_items < block ?
				rfs_permute_invert(&b->blocks, blocks - 1) :
				blocks;
}

/* The slot of position pos and its offset in the block there. */
static uint64_t locate(const struct rfs_blocked *b, uint64_t pos, uint64_t *off)
{
	uint64_t bs = b->block;
	uint64_t short_start = b->short_slot * bs;

	if (pos < short_start) {
		*off = pos % bs;
		return pos / bs;
	}
	if (pos < short_start + b->last_block_items) {
		*off = pos - short_start;
		return b->short_slot;
	}
	uint64_t q = pos + (bs - b->last_block_items);
	*off = q % bs;
	return q / bs;
}

uint64_t rfs_permute_blocked_apply(const struct rfs_blocked *b, uint64_t pos)
{
	uint64_t off, slot = locate(b, pos, &off);
	return rfs_permute_apply(&b->blocks, slot) * b->block + off;
}

/* Positions per piece: their slots (consecutive, since slots grow with
 * positions and every slot between two holds a position) fit on the
 * stack. */
#define PIECE 1024

void rfs_permute_blocked_apply_range(const struct rfs_blocked *b,
				     uint64_t first, size_t count,
				     uint64_t *out)
{
	uint64_t images[PIECE], off;
	for (size_t base = 0; base < count; base += PIECE) {
		size_t m = count - base < PIECE ? count - base : PIECE;
		uint64_t first_slot = locate(b, first + base, &off);
		uint64_t last_slot = locate(b, first + base + m - 1, &off);
		rfs_permute_apply_range(&b->blocks, first_slot,
					(size_t)(last_slot - first_slot + 1),
					images);
		for (size_t k = 0; k < m; k++) {
			uint64_t slot = locate(b, first + base + k, &off);
			out[base + k] =
				images[slot - first_slot] * b->block + off;
		}
	}
}
