#include "kind.h"

#include <stddef.h>

const char *rfs_kind_name(uint64_t kind)
{
	static const char *const names[RFS_KIND_COUNT] = { "batch", "index",
							   "label" };
	return kind < RFS_KIND_COUNT ? names[kind] : NULL;
}
