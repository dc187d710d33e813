/* SPDX-License-Identifier: MIT */
/* The .npy encoder: format 1.0 headers byte-identical to numpy's np.save. */
#ifndef RFS_NPY_H
#define RFS_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"

/* Longest header rfs_npy_header() writes (2 dims of up to 20 digits). */
#define RFS_NPY_HEADER_MAX 256

/* Writes the header for a C-order array of the given shape (ndims 1 or 2)
 * into out (RFS_NPY_HEADER_MAX bytes). @return its length, a multiple of 64;
 * the array's bytes follow it directly. */
size_t rfs_npy_header(enum rfs_dtype t, int ndims, const uint64_t *shape,
		      char *out);

/* The same for any numpy descr (e.g. "|S3") and ndims 0 (a scalar) to 2. */
size_t rfs_npy_header_descr(const char *descr, int ndims, const uint64_t *shape,
			    char *out);

/* @return header length plus data length, without building anything. */
uint64_t rfs_npy_file_size(enum rfs_dtype t, int ndims, const uint64_t *shape);

#endif
