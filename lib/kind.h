/* The kinds of per-batch files, and their directory names. */
#ifndef RFS_KIND_H
#define RFS_KIND_H

#include <stdint.h>

enum rfs_kind { RFS_KIND_BATCH, RFS_KIND_INDEX, RFS_KIND_COUNT };

/* "batch", "index"; NULL for kind >= RFS_KIND_COUNT. */
const char *rfs_kind_name(uint64_t kind);

#endif
