/* SPDX-License-Identifier: MIT */
#include "serve/kind.h"

#include <stddef.h>

#include "core/parse.h"

const char *rfs_kind_name(uint64_t kind)
{
	static const char *const names[] = { "batch", "index", "label" };
	return kind < RFS_KIND_NPZ ? names[kind] : NULL;
}

unsigned rfs_kind_step_name_width(uint64_t epochs, uint64_t batches)
{
	uint64_t steps;
	if (__builtin_mul_overflow(epochs, batches, &steps))
		steps = UINT64_MAX;
	unsigned width = rfs_parse_decimal_digits(steps ? steps - 1 : 0);
	return width < RFS_STEP_MIN_WIDTH ? RFS_STEP_MIN_WIDTH : width;
}
