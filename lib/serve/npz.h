/* SPDX-License-Identifier: MIT */
/* The .npz encoder for CSR batches: what scipy.sparse.save_npz writes, a
 * stored (not deflated) zip of indices.npy, indptr.npy, format.npy
 * ('csr'), shape.npy and data.npy, with valid CRC-32s. The size follows
 * from the shape, the stored values and the dtypes, so st_size is exact
 * without building the file. */
#ifndef RFS_NPZ_H
#define RFS_NPZ_H

#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"

struct rfs_npz_csr {
	uint64_t rows, cols, nnz;
	enum rfs_dtype value_dtype;
	enum rfs_dtype index_dtype; /* RFS_INT32 or RFS_INT64 */
};

/* The index dtype scipy would choose for a matrix this wide: int32 when
 * every index and offset fits (cols and nnz below 2^31). */
enum rfs_dtype rfs_npz_index_dtype(uint64_t cols, uint64_t nnz);

/* @return the file's exact size. */
uint64_t rfs_npz_size(const struct rfs_npz_csr *m);

/* Where in the file the values go (data.npy's payload, the last member):
 * they may be read straight to out + this offset and passed to
 * rfs_npz_write() from there, which saves their copy. */
uint64_t rfs_npz_values_offset(const struct rfs_npz_csr *m);

/* Writes the file into out (rfs_npz_size() bytes). values: nnz elements of
 * value_dtype (possibly already at out + rfs_npz_values_offset()); cols:
 * nnz column ids; start: rows + 1 offsets. */
void rfs_npz_write(const struct rfs_npz_csr *m, const void *values,
		   const int64_t *cols, const uint64_t *start,
		   unsigned char *out);

#endif
