/* SPDX-License-Identifier: MIT */
/* Element types rankfs serves, with their numpy names and descriptors. */
#ifndef RFS_DTYPE_H
#define RFS_DTYPE_H

#include <stddef.h>

enum rfs_dtype {
	RFS_INT8,
	RFS_INT16,
	RFS_INT32,
	RFS_INT64,
	RFS_UINT8,
	RFS_UINT16,
	RFS_UINT32,
	RFS_UINT64,
	RFS_FLOAT16,
	RFS_FLOAT32,
	RFS_FLOAT64,
	RFS_DTYPE_COUNT
};

/* numpy's name: "int8" ... "float64". */
const char *rfs_dtype_name(enum rfs_dtype t);
/* numpy's little-endian descr: "|i1", "<i2", ... "<f8". */
const char *rfs_dtype_descr(enum rfs_dtype t);
size_t rfs_dtype_size(enum rfs_dtype t);

#endif
