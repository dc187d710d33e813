/* SPDX-License-Identifier: MIT */
/*
 * Inode numbers are computed, never allocated.
 *
 * Every node of the tree has a number that follows from its position alone,
 * so lookups need no table, forget() needs no bookkeeping, and two mounts
 * with the same options give the same numbers. The eight fixed nodes take
 * 1..8 (1 is FUSE's root; 8, var_names.txt, only where the sources name
 * their columns). Each epoch then owns a contiguous range of
 * per_epoch numbers starting at EPOCH_BASE + E * per_epoch, laid out as
 *
 *     +0                     epoch/E/
 *     +1                     epoch/E/rank/
 *     +2 + R * per_rank      epoch/E/rank/R/
 *        + 1 + K             .../R/<kind K>/
 *        + 1 + kinds + S * batches + k   file k of slot S
 *
 * a mixed-radix number (epoch, rank, slot, batch). Slots are the kinds of
 * files: one per directory kind, plus one for the .npz files that CSR
 * sources add to batch/. The step view follows the last epoch:
 * step/rank/R/ at step_base + R * per_step_rank, then its kind directories
 * (index/, label/: kinds - 1 of them), then slots x steps files (the batch
 * and npz files sit in step/rank/R/ itself). Because any
 * epoch below 2^31 and any step of those epochs resolve, init refuses
 * shapes whose numbers would overflow 64 bits (about 2^31 batch files per
 * epoch).
 */
#include "serve/inode.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/parse.h"
#include "serve/kind.h"

#define EPOCH_BASE 16
#define NAME_MAX_LEN 255

static const struct {
	const char *name;
	enum rfs_node_type type;
} root_entries[] = {
	{ "config.json", RFS_NODE_CONFIG },
	{ "dataset.json", RFS_NODE_DATASET },
	{ "stats.json", RFS_NODE_STATS },
	{ "epoch", RFS_NODE_EPOCHS },
	{ "step", RFS_NODE_STEPS },
	{ "var_names.txt", RFS_NODE_VAR_NAMES }, /* last: only if var_names */
};
#define ROOT_ENTRIES (sizeof(root_entries) / sizeof(root_entries[0]))

static const enum rfs_node_type fixed_nodes[] = {
	RFS_NODE_ROOT,	     RFS_NODE_CONFIG,	RFS_NODE_DATASET,
	RFS_NODE_STATS,	     RFS_NODE_EPOCHS,	RFS_NODE_STEPS,
	RFS_NODE_STEP_RANKS, RFS_NODE_VAR_NAMES
};
#define FIXED_NODES (sizeof(fixed_nodes) / sizeof(fixed_nodes[0]))

/* Root entries listed and looked up: var_names.txt where there are names. */
static size_t root_count(const struct rfs_inode_space *s)
{
	return s->var_names ? ROOT_ENTRIES : ROOT_ENTRIES - 1;
}

/* a * b + c, or -EOVERFLOW. */
static int mul_add(uint64_t a, uint64_t b, uint64_t c, uint64_t *out)
{
	if (b && a > (UINT64_MAX - c) / b)
		return -EOVERFLOW;
	*out = a * b + c;
	return 0;
}

static uint64_t pow10_u64(unsigned digits)
{
	uint64_t p = 1;
	while (digits--)
		p *= 10;
	return p;
}

/* Slot of a file kind, and back: npz takes the slot after the directory
 * kinds. */
static uint64_t slot_of(const struct rfs_inode_space *s, uint64_t kind)
{
	return kind == RFS_KIND_NPZ ? s->kinds : kind;
}

static uint64_t kind_of(const struct rfs_inode_space *s, uint64_t slot)
{
	return slot == s->kinds ? RFS_KIND_NPZ : slot;
}

int rfs_inode_space_init(struct rfs_inode_space *s, uint64_t world_size,
			 uint64_t kinds, int npz, uint64_t batches,
			 uint64_t epochs_listed)
{
	*s = (struct rfs_inode_space){ .world_size = world_size,
				       .kinds = kinds,
				       .slots = kinds + (npz != 0),
				       .batches = batches,
				       .epochs_listed = epochs_listed };
	uint64_t end;
	if (kinds == 0 || kinds > RFS_KIND_NPZ || world_size == 0 ||
	    batches == 0 ||
	    mul_add(s->slots, batches, 1 + kinds, &s->per_rank) ||
	    mul_add(world_size, s->per_rank, 2, &s->per_epoch) ||
	    mul_add(RFS_EPOCHS, s->per_epoch, EPOCH_BASE, &s->step_base))
		return -EOVERFLOW;
	s->width = rfs_parse_decimal_digits(batches - 1);
	if (s->width < 6)
		s->width = 6;

	/* Steps: every step of every resolvable epoch that the name width
	 * can spell; ls lists those of the listed epochs. */
	if (mul_add(epochs_listed, batches, 0, &s->steps_listed) ||
	    mul_add(RFS_EPOCHS, batches, 0, &s->steps))
		return -EOVERFLOW;
	s->step_width = rfs_kind_step_name_width(epochs_listed, batches);
	if (s->step_width < 20 && s->steps > pow10_u64(s->step_width))
		s->steps = pow10_u64(s->step_width);
	if (mul_add(s->slots, s->steps, kinds, &s->per_step_rank) ||
	    mul_add(world_size, s->per_step_rank, s->step_base, &end))
		return -EOVERFLOW;
	return 0;
}

uint64_t rfs_inode_of(const struct rfs_inode_space *s, const struct rfs_node *n)
{
	uint64_t base = EPOCH_BASE + n->epoch * s->per_epoch;
	uint64_t rank = base + 2 + n->rank * s->per_rank;
	uint64_t step_rank = s->step_base + n->rank * s->per_step_rank;
	for (size_t i = 0; i < FIXED_NODES; i++)
		if (fixed_nodes[i] == n->type)
			return i + 1;
	switch (n->type) {
	case RFS_NODE_EPOCH:
		return base;
	case RFS_NODE_RANKS:
		return base + 1;
	case RFS_NODE_RANK:
		return rank;
	case RFS_NODE_KIND:
		return rank + 1 + n->kind;
	case RFS_NODE_FILE:
		return rank + 1 + s->kinds + slot_of(s, n->kind) * s->batches +
		       n->batch;
	case RFS_NODE_STEP_RANK:
		return step_rank;
	case RFS_NODE_STEP_KIND: /* kinds 1.. have directories */
		return step_rank + n->kind;
	case RFS_NODE_STEP_FILE:
		return step_rank + s->kinds + slot_of(s, n->kind) * s->steps +
		       n->batch;
	default:
		return 0;
	}
}

static int step_node(const struct rfs_inode_space *s, uint64_t ino,
		     struct rfs_node *out)
{
	uint64_t rel = ino - s->step_base;
	out->rank = rel / s->per_step_rank;
	uint64_t in_rank = rel % s->per_step_rank;
	if (out->rank >= s->world_size)
		return -ENOENT;
	if (in_rank == 0) {
		out->type = RFS_NODE_STEP_RANK;
	} else if (in_rank < s->kinds) {
		out->type = RFS_NODE_STEP_KIND;
		out->kind = in_rank;
	} else {
		uint64_t f = in_rank - s->kinds;
		out->type = RFS_NODE_STEP_FILE;
		out->kind = kind_of(s, f / s->steps);
		out->batch = f % s->steps;
	}
	return 0;
}

int rfs_inode_node(const struct rfs_inode_space *s, uint64_t ino,
		   struct rfs_node *out)
{
	*out = (struct rfs_node){ 0 };
	if (ino >= 1 && ino <= FIXED_NODES) {
		out->type = fixed_nodes[ino - 1];
		return out->type != RFS_NODE_VAR_NAMES || s->var_names ?
			       0 :
			       -ENOENT;
	}
	if (ino < EPOCH_BASE)
		return -ENOENT;
	if (ino >= s->step_base)
		return step_node(s, ino, out);
	uint64_t rel = ino - EPOCH_BASE;
	out->epoch = rel / s->per_epoch;
	uint64_t local = rel % s->per_epoch;
	if (local < 2) {
		out->type = local == 0 ? RFS_NODE_EPOCH : RFS_NODE_RANKS;
		return 0;
	}
	out->rank = (local - 2) / s->per_rank;
	uint64_t in_rank = (local - 2) % s->per_rank;
	if (in_rank == 0) {
		out->type = RFS_NODE_RANK;
	} else if (in_rank <= s->kinds) {
		out->type = RFS_NODE_KIND;
		out->kind = in_rank - 1;
	} else {
		uint64_t f = in_rank - 1 - s->kinds;
		out->type = RFS_NODE_FILE;
		out->kind = kind_of(s, f / s->batches);
		out->batch = f % s->batches;
	}
	return 0;
}

int rfs_inode_is_dir(const struct rfs_node *n)
{
	return n->type != RFS_NODE_CONFIG && n->type != RFS_NODE_DATASET &&
	       n->type != RFS_NODE_STATS && n->type != RFS_NODE_VAR_NAMES &&
	       n->type != RFS_NODE_FILE && n->type != RFS_NODE_STEP_FILE;
}

void rfs_inode_batch(const struct rfs_inode_space *s, const struct rfs_node *n,
		     uint64_t *epoch, uint64_t *batch)
{
	if (n->type == RFS_NODE_STEP_FILE) {
		*epoch = n->batch / s->batches;
		*batch = n->batch % s->batches;
	} else {
		*epoch = n->epoch;
		*batch = n->batch;
	}
}

static int lookup_number(const char *name, uint64_t limit, uint64_t *out)
{
	return rfs_parse_u64(name, strlen(name), limit - 1, 1, out) == 0 ?
		       0 :
		       -ENOENT;
}

/* "NNNNNN.npy" with exactly width digits, below limit, as file kind
 * `kind`; "NNNNNN.npz" too where npz files are (kind becomes NPZ). */
static int lookup_file(const struct rfs_inode_space *s, const char *name,
		       unsigned width, uint64_t limit, int npz_here,
		       struct rfs_node *out)
{
	size_t len = strlen(name);
	if (len != width + 4)
		return -ENOENT;
	if (npz_here && s->slots > s->kinds &&
	    strcmp(name + width, ".npz") == 0)
		out->kind = RFS_KIND_NPZ;
	else if (strcmp(name + width, ".npy") != 0)
		return -ENOENT;
	if (rfs_parse_u64(name, width, limit - 1, 0, &out->batch) != 0)
		return -ENOENT;
	return 0;
}

/* Files listed in a directory of n positions (batches or steps): the
 * .npy of each, then where npz files are, the .npz of each. */
static void file_entry(uint64_t i, uint64_t n, unsigned width,
		       struct rfs_node *out, char *name, size_t namelen)
{
	int npz = i >= n;
	out->batch = npz ? i - n : i;
	if (npz)
		out->kind = RFS_KIND_NPZ;
	snprintf(name, namelen, "%0*llu.%s", (int)width,
		 (unsigned long long)out->batch, npz ? "npz" : "npy");
}

/* A kind directory's name: kinds first..kinds-1. */
static int lookup_kind(const struct rfs_inode_space *s, const char *name,
		       uint64_t first, uint64_t *out)
{
	for (uint64_t k = first; k < s->kinds; k++) {
		if (strcmp(name, rfs_kind_name(k)) == 0) {
			*out = k;
			return 0;
		}
	}
	return -ENOENT;
}

int rfs_inode_lookup(const struct rfs_inode_space *s,
		     const struct rfs_node *parent, const char *name,
		     struct rfs_node *out)
{
	if (!rfs_inode_is_dir(parent))
		return -ENOTDIR;
	if (strlen(name) > NAME_MAX_LEN)
		return -ENAMETOOLONG;
	*out = *parent;
	switch (parent->type) {
	case RFS_NODE_ROOT:
		for (size_t i = 0; i < root_count(s); i++) {
			if (strcmp(name, root_entries[i].name) == 0) {
				out->type = root_entries[i].type;
				return 0;
			}
		}
		return -ENOENT;
	case RFS_NODE_EPOCHS:
		out->type = RFS_NODE_EPOCH;
		return lookup_number(name, RFS_EPOCHS, &out->epoch);
	case RFS_NODE_EPOCH:
		out->type = RFS_NODE_RANKS;
		return strcmp(name, "rank") == 0 ? 0 : -ENOENT;
	case RFS_NODE_RANKS:
		out->type = RFS_NODE_RANK;
		return lookup_number(name, s->world_size, &out->rank);
	case RFS_NODE_RANK:
		out->type = RFS_NODE_KIND;
		return lookup_kind(s, name, 0, &out->kind);
	case RFS_NODE_KIND:
		out->type = RFS_NODE_FILE;
		return lookup_file(s, name, s->width, s->batches,
				   parent->kind == RFS_KIND_BATCH, out);
	case RFS_NODE_STEPS:
		out->type = RFS_NODE_STEP_RANKS;
		return strcmp(name, "rank") == 0 ? 0 : -ENOENT;
	case RFS_NODE_STEP_RANKS:
		out->type = RFS_NODE_STEP_RANK;
		return lookup_number(name, s->world_size, &out->rank);
	case RFS_NODE_STEP_RANK:
		if (lookup_kind(s, name, 1, &out->kind) == 0) {
			out->type = RFS_NODE_STEP_KIND;
			return 0;
		}
		out->type = RFS_NODE_STEP_FILE;
		out->kind = RFS_KIND_BATCH;
		return lookup_file(s, name, s->step_width, s->steps, 1, out);
	case RFS_NODE_STEP_KIND:
		out->type = RFS_NODE_STEP_FILE;
		return lookup_file(s, name, s->step_width, s->steps, 0, out);
	default:
		return -ENOTDIR;
	}
}

uint64_t rfs_inode_count(const struct rfs_inode_space *s,
			 const struct rfs_node *parent)
{
	switch (parent->type) {
	case RFS_NODE_ROOT:
		return root_count(s);
	case RFS_NODE_EPOCHS:
		return s->epochs_listed;
	case RFS_NODE_EPOCH:
	case RFS_NODE_STEPS:
		return 1;
	case RFS_NODE_RANKS:
	case RFS_NODE_STEP_RANKS:
		return s->world_size;
	case RFS_NODE_RANK:
		return s->kinds;
	case RFS_NODE_KIND: /* batch/ of a CSR source has .npz files too */
		return s->batches * (parent->kind == RFS_KIND_BATCH ?
					     s->slots - s->kinds + 1 :
					     1);
	case RFS_NODE_STEP_RANK:
		return s->kinds - 1 +
		       s->steps_listed * (s->slots - s->kinds + 1);
	case RFS_NODE_STEP_KIND:
		return s->steps_listed;
	default:
		return 0;
	}
}

void rfs_inode_entry(const struct rfs_inode_space *s,
		     const struct rfs_node *parent, uint64_t i,
		     struct rfs_node *out, char *name, size_t namelen)
{
	*out = *parent;
	switch (parent->type) {
	case RFS_NODE_ROOT:
		out->type = root_entries[i].type;
		snprintf(name, namelen, "%s", root_entries[i].name);
		break;
	case RFS_NODE_EPOCHS:
		out->type = RFS_NODE_EPOCH;
		out->epoch = i;
		snprintf(name, namelen, "%llu", (unsigned long long)i);
		break;
	case RFS_NODE_EPOCH:
	case RFS_NODE_STEPS:
		out->type = parent->type == RFS_NODE_EPOCH ?
				    RFS_NODE_RANKS :
				    RFS_NODE_STEP_RANKS;
		snprintf(name, namelen, "rank");
		break;
	case RFS_NODE_RANKS:
	case RFS_NODE_STEP_RANKS:
		out->type = parent->type == RFS_NODE_RANKS ? RFS_NODE_RANK :
							     RFS_NODE_STEP_RANK;
		out->rank = i;
		snprintf(name, namelen, "%llu", (unsigned long long)i);
		break;
	case RFS_NODE_RANK:
		out->type = RFS_NODE_KIND;
		out->kind = i;
		snprintf(name, namelen, "%s", rfs_kind_name(i));
		break;
	case RFS_NODE_KIND:
		out->type = RFS_NODE_FILE;
		file_entry(i, s->batches, s->width, out, name, namelen);
		break;
	case RFS_NODE_STEP_RANK:
		if (i + 1 < s->kinds) { /* index/, label/ first */
			out->type = RFS_NODE_STEP_KIND;
			out->kind = i + 1;
			snprintf(name, namelen, "%s", rfs_kind_name(i + 1));
			break;
		}
		out->type = RFS_NODE_STEP_FILE;
		out->kind = RFS_KIND_BATCH;
		file_entry(i - (s->kinds - 1), s->steps_listed, s->step_width,
			   out, name, namelen);
		break;
	case RFS_NODE_STEP_KIND:
		out->type = RFS_NODE_STEP_FILE;
		file_entry(i, s->steps_listed, s->step_width, out, name,
			   namelen);
		break;
	default:
		break;
	}
}
