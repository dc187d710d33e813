/* SPDX-License-Identifier: MIT */
#include "core/dtype.h"

static const struct {
	const char *name;
	const char *descr;
	size_t size;
} table[RFS_DTYPE_COUNT] = {
	[RFS_INT8] = { "int8", "|i1", 1 },
	[RFS_INT16] = { "int16", "<i2", 2 },
	[RFS_INT32] = { "int32", "<i4", 4 },
	[RFS_INT64] = { "int64", "<i8", 8 },
	[RFS_UINT8] = { "uint8", "|u1", 1 },
	[RFS_UINT16] = { "uint16", "<u2", 2 },
	[RFS_UINT32] = { "uint32", "<u4", 4 },
	[RFS_UINT64] = { "uint64", "<u8", 8 },
	[RFS_FLOAT16] = { "float16", "<f2", 2 },
	[RFS_FLOAT32] = { "float32", "<f4", 4 },
	[RFS_FLOAT64] = { "float64", "<f8", 8 },
};

const char *rfs_dtype_name(enum rfs_dtype t)
{
	return table[t].name;
}

const char *rfs_dtype_descr(enum rfs_dtype t)
{
	return table[t].descr;
}

size_t rfs_dtype_size(enum rfs_dtype t)
{
	return table[t].size;
}
