/*
 * Inode numbers are computed, never allocated.
 *
 * Every node of the tree has a number that follows from its position alone,
 * so lookups need no table, forget() needs no bookkeeping, and two mounts
 * with the same options give the same numbers. The five fixed nodes take
 * 1..5 (1 is FUSE's root). Each epoch then owns a contiguous range of
 * per_epoch numbers starting at EPOCH_BASE + E * per_epoch, laid out as
 *
 *     +0                     epoch/E/
 *     +1                     epoch/E/rank/
 *     +2 + R * per_rank      epoch/E/rank/R/
 *        + 1 + K             .../R/<kind K>/
 *        + 1 + kinds + K * batches + k   .../<kind K>/<k>.npy
 *
 * a mixed-radix number (epoch, rank, kind, batch). Because any epoch below
 * 2^31 resolves, init refuses shapes where 2^31 * per_epoch overflows 64
 * bits (about 2^32 batch files per epoch).
 */
#include "inode.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "parse.h"
#include "kind.h"

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
};
#define ROOT_ENTRIES (sizeof(root_entries) / sizeof(root_entries[0]))

int rfs_inode_space_init(struct rfs_inode_space *s, uint64_t world_size,
			 uint64_t kinds, uint64_t batches,
			 uint64_t epochs_listed)
{
	const uint64_t limit = (UINT64_MAX - EPOCH_BASE) / RFS_EPOCH_LIMIT;
	*s = (struct rfs_inode_space){ .world_size = world_size,
				       .kinds = kinds,
				       .batches = batches,
				       .epochs_listed = epochs_listed };
	if (kinds == 0 || batches > limit / kinds)
		return -EOVERFLOW;
	s->per_rank = 1 + kinds + kinds * batches;
	if (world_size == 0 || s->per_rank > (limit - 2) / world_size)
		return -EOVERFLOW;
	s->per_epoch = 2 + world_size * s->per_rank;
	s->width = rfs_decimal_digits(batches - 1);
	if (s->width < 6)
		s->width = 6;
	return 0;
}

uint64_t rfs_inode_of(const struct rfs_inode_space *s,
		      const struct rfs_node *n)
{
	uint64_t base = EPOCH_BASE + n->epoch * s->per_epoch;
	uint64_t rank = base + 2 + n->rank * s->per_rank;
	switch (n->type) {
	case RFS_NODE_ROOT:
		return 1;
	case RFS_NODE_CONFIG:
		return 2;
	case RFS_NODE_DATASET:
		return 3;
	case RFS_NODE_STATS:
		return 4;
	case RFS_NODE_EPOCHS:
		return 5;
	case RFS_NODE_EPOCH:
		return base;
	case RFS_NODE_RANKS:
		return base + 1;
	case RFS_NODE_RANK:
		return rank;
	case RFS_NODE_KIND:
		return rank + 1 + n->kind;
	case RFS_NODE_FILE:
		return rank + 1 + s->kinds + n->kind * s->batches + n->batch;
	}
	return 0;
}

int rfs_inode_node(const struct rfs_inode_space *s, uint64_t ino,
		   struct rfs_node *out)
{
	*out = (struct rfs_node){ 0 };
	if (ino >= 1 && ino <= 5) {
		static const enum rfs_node_type fixed[] = {
			RFS_NODE_ROOT, RFS_NODE_CONFIG, RFS_NODE_DATASET,
			RFS_NODE_STATS, RFS_NODE_EPOCHS
		};
		out->type = fixed[ino - 1];
		return 0;
	}
	if (ino < EPOCH_BASE)
		return -ENOENT;
	uint64_t rel = ino - EPOCH_BASE;
	out->epoch = rel / s->per_epoch;
	if (out->epoch >= RFS_EPOCH_LIMIT)
		return -ENOENT;
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
		out->kind = f / s->batches;
		out->batch = f % s->batches;
	}
	return 0;
}

int rfs_node_is_dir(const struct rfs_node *n)
{
	return n->type != RFS_NODE_CONFIG && n->type != RFS_NODE_DATASET &&
	       n->type != RFS_NODE_STATS && n->type != RFS_NODE_FILE;
}

static int lookup_number(const char *name, uint64_t limit, uint64_t *out)
{
	return rfs_parse_u64(name, strlen(name), limit - 1, 1, out) == 0 ?
		       0 :
		       -ENOENT;
}

/* "NNNNNN.npy" with exactly width digits. */
static int lookup_batch(const struct rfs_inode_space *s, const char *name,
			uint64_t *out)
{
	size_t len = strlen(name);
	if (len != s->width + 4 || strcmp(name + s->width, ".npy") != 0)
		return -ENOENT;
	if (rfs_parse_u64(name, s->width, s->batches - 1, 0, out) != 0)
		return -ENOENT;
	return 0;
}

int rfs_inode_lookup(const struct rfs_inode_space *s,
		     const struct rfs_node *parent, const char *name,
		     struct rfs_node *out)
{
	if (!rfs_node_is_dir(parent))
		return -ENOTDIR;
	if (strlen(name) > NAME_MAX_LEN)
		return -ENAMETOOLONG;
	*out = *parent;
	switch (parent->type) {
	case RFS_NODE_ROOT:
		for (size_t i = 0; i < ROOT_ENTRIES; i++) {
			if (strcmp(name, root_entries[i].name) == 0) {
				out->type = root_entries[i].type;
				return 0;
			}
		}
		return -ENOENT;
	case RFS_NODE_EPOCHS:
		out->type = RFS_NODE_EPOCH;
		return lookup_number(name, RFS_EPOCH_LIMIT, &out->epoch);
	case RFS_NODE_EPOCH:
		out->type = RFS_NODE_RANKS;
		return strcmp(name, "rank") == 0 ? 0 : -ENOENT;
	case RFS_NODE_RANKS:
		out->type = RFS_NODE_RANK;
		return lookup_number(name, s->world_size, &out->rank);
	case RFS_NODE_RANK:
		for (uint64_t k = 0; k < s->kinds; k++) {
			if (strcmp(name, rfs_kind_name(k)) == 0) {
				out->type = RFS_NODE_KIND;
				out->kind = k;
				return 0;
			}
		}
		return -ENOENT;
	case RFS_NODE_KIND:
		out->type = RFS_NODE_FILE;
		return lookup_batch(s, name, &out->batch);
	default:
		return -ENOTDIR;
	}
}

uint64_t rfs_inode_count(const struct rfs_inode_space *s,
			 const struct rfs_node *parent)
{
	switch (parent->type) {
	case RFS_NODE_ROOT:
		return ROOT_ENTRIES;
	case RFS_NODE_EPOCHS:
		return s->epochs_listed;
	case RFS_NODE_EPOCH:
		return 1;
	case RFS_NODE_RANKS:
		return s->world_size;
	case RFS_NODE_RANK:
		return s->kinds;
	case RFS_NODE_KIND:
		return s->batches;
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
		out->type = RFS_NODE_RANKS;
		snprintf(name, namelen, "rank");
		break;
	case RFS_NODE_RANKS:
		out->type = RFS_NODE_RANK;
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
		out->batch = i;
		snprintf(name, namelen, "%0*llu.npy", (int)s->width,
			 (unsigned long long)i);
		break;
	default:
		break;
	}
}
