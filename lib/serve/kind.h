/* SPDX-License-Identifier: MIT */
/* The kinds of per-batch files, and their directory names. */
#ifndef RFS_KIND_H
#define RFS_KIND_H

#include <stdint.h>

/* In directory order; label/ exists only when label= is set, and it comes
 * last so the directories of a mount are always the first 2 or 3 kinds.
 * NPZ files (CSR sources) have no directory: they sit in batch/. */
enum rfs_kind {
	RFS_KIND_BATCH,
	RFS_KIND_INDEX,
	RFS_KIND_LABEL,
	RFS_KIND_NPZ,
	RFS_KIND_COUNT
};

/* 1 for the files of batch/ (.npy and .npz): a batch read, counted. */
static inline int rfs_kind_is_batch(uint64_t kind)
{
	return kind == RFS_KIND_BATCH || kind == RFS_KIND_NPZ;
}

/* "batch", "index", "label"; NULL for NPZ and beyond (no directory). */
const char *rfs_kind_name(uint64_t kind);

#define RFS_STEP_MIN_WIDTH 9

/* Digits in step file names: 9, or more when the steps of the listed
 * epochs (epochs x batches per rank) need them. */
unsigned rfs_kind_step_name_width(uint64_t epochs, uint64_t batches);

#endif
