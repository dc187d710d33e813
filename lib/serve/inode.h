/* SPDX-License-Identifier: MIT */
/* The namespace as a pure function: names <-> nodes <-> inode numbers.
 * No FUSE and no state beyond the numbers given at init, so it is unit
 * tested on its own. */
#ifndef RFS_INODE_H
#define RFS_INODE_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"

enum rfs_node_type {
	RFS_NODE_ROOT,
	RFS_NODE_CONFIG, /* config.json */
	RFS_NODE_DATASET, /* dataset.json */
	RFS_NODE_STATS, /* stats.json */
	RFS_NODE_EPOCHS, /* epoch/ */
	RFS_NODE_EPOCH, /* epoch/E/ */
	RFS_NODE_RANKS, /* epoch/E/rank/ */
	RFS_NODE_RANK, /* epoch/E/rank/R/ */
	RFS_NODE_KIND, /* epoch/E/rank/R/batch/ (index/, label/) */
	RFS_NODE_FILE, /* epoch/E/rank/R/batch/NNNNNN.npy */
	RFS_NODE_STEPS, /* step/ */
	RFS_NODE_STEP_RANKS, /* step/rank/ */
	RFS_NODE_STEP_RANK, /* step/rank/R/: batch files, index/, label/ */
	RFS_NODE_STEP_KIND, /* step/rank/R/index/ (label/) */
	RFS_NODE_STEP_FILE, /* step/rank/R/[kind/]NNNNNNNNN.npy; batch = step */
	RFS_NODE_VAR_NAMES, /* var_names.txt */
};

struct rfs_node {
	enum rfs_node_type type;
	uint64_t epoch, rank, kind, batch; /* as far as type goes */
};

struct rfs_inode_space {
	uint64_t world_size;
	uint64_t kinds; /* directories per rank: batch, index[, label] */
	uint64_t slots; /* file kinds: kinds, plus npz files in batch/ */
	uint64_t batches; /* per rank per epoch */
	uint64_t epochs_listed;
	uint64_t per_rank; /* inodes under one rank directory, itself included */
	uint64_t per_epoch;
	unsigned width; /* digits of a batch file name */
	uint64_t steps; /* step numbers that resolve */
	uint64_t steps_listed; /* epochs_listed x batches */
	unsigned step_width; /* digits of a step file name */
	uint64_t step_base; /* inode of step/rank/0/ */
	uint64_t per_step_rank; /* inodes under step/rank/R/, itself included */
	/* var_names.txt is at the root: set after init (0 there). */
	int var_names;
};

/* kinds: directory kinds (2 or 3); npz: batch/ also holds .npz files.
 * @return 0, or -EOVERFLOW when 2^31 epochs and their steps of this shape
 * do not fit in 64 bits of inode numbers. */
int rfs_inode_space_init(struct rfs_inode_space *s, uint64_t world_size,
			 uint64_t kinds, int npz, uint64_t batches,
			 uint64_t epochs_listed);

uint64_t rfs_inode_of(const struct rfs_inode_space *s,
		      const struct rfs_node *n);

/* @return 0 or -ENOENT for numbers no node has. */
int rfs_inode_node(const struct rfs_inode_space *s, uint64_t ino,
		   struct rfs_node *out);

int rfs_inode_is_dir(const struct rfs_node *n);

/* The (epoch, batch) a file node serves: itself for epoch files, step k
 * as batch k mod batches of epoch k div batches. */
void rfs_inode_batch(const struct rfs_inode_space *s, const struct rfs_node *n,
		     uint64_t *epoch, uint64_t *batch);

/* Looks name up in directory parent. Names are canonical: one spelling per
 * node (no leading zeros, exact padding, lower-case ".npy").
 * @return 0, -ENOENT, -ENOTDIR (parent is a file), -ENAMETOOLONG. */
int rfs_inode_lookup(const struct rfs_inode_space *s,
		     const struct rfs_node *parent, const char *name,
		     struct rfs_node *out);

/* Number of entries readdir lists in parent ("." and ".." excluded). */
uint64_t rfs_inode_count(const struct rfs_inode_space *s,
			 const struct rfs_node *parent);

/* The i-th entry of parent (i < rfs_inode_count()) and its name. */
void rfs_inode_entry(const struct rfs_inode_space *s,
		     const struct rfs_node *parent, uint64_t i,
		     struct rfs_node *out, char *name, size_t namelen);

#endif
