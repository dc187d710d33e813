/* SPDX-License-Identifier: MIT */
/* Element casts between the dtypes rankfs serves (dtype= option). */
#ifndef RFS_CONVERT_H
#define RFS_CONVERT_H

#include <stddef.h>

#include "core/dtype.h"

/* Converts n little-endian elements of type from at src into type to at
 * dst (which must not overlap src unless the types are equal). Casts
 * follow C's conversions, made total: floats to integers truncate toward
 * zero, saturate at the integer's range, and NaN becomes 0; float16 is
 * IEEE binary16 with round-to-nearest-even. */
void rfs_convert(enum rfs_dtype to, void *dst, enum rfs_dtype from,
		 const void *src, size_t n);

#endif
