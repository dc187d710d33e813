#include "kind.h"

#include <stddef.h>

const char *rfs_kind_name(uint64_t kind)
{
	static const char *const names[] = { "batch", "index", "label" };
	return kind < RFS_KIND_NPZ ? names[kind] : NULL;
}
