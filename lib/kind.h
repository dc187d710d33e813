/* The kinds of per-batch files, and their directory names. */
#ifndef RFS_KIND_H
#define RFS_KIND_H

#include <stdint.h>

/* In directory order; label/ exists only when label= is set, and it comes
 * last so the kinds of a mount are always the first k of this list. */
enum rfs_kind { RFS_KIND_BATCH, RFS_KIND_INDEX, RFS_KIND_LABEL, RFS_KIND_COUNT };

/* "batch", "index", "label"; NULL for kind >= RFS_KIND_COUNT. */
const char *rfs_kind_name(uint64_t kind);

#endif
