/* SPDX-License-Identifier: MIT */
/* Rows of a fetch in source order: each wanted row with the slot of the
 * batch it goes to. Sorting turns a random batch into runs of adjacent
 * rows, per file. */
#ifndef RFS_ROWSORT_H
#define RFS_ROWSORT_H

#include <stddef.h>
#include <stdint.h>

struct rfs_wanted {
	uint64_t row;
	size_t slot; /* index in the batch */
};

/* @return a malloc'ed array of rows[0..n) with their slots, sorted by row
 * (the caller frees it), or NULL when out of memory. */
struct rfs_wanted *rfs_rowsort(const int64_t *rows, size_t n);

/* Sorts v[0..n) ascending by radix: each fetch window's rows are sorted
 * once per epoch, and qsort was over a quarter of planning's CPU. tmp
 * holds n values of scratch. */
void rfs_rowsort_u64(uint64_t *v, uint64_t *tmp, size_t n);

#endif
