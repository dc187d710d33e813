/* The -o words of a mount that are not rankfs's own: libfuse's options,
 * which the mount hands to libfuse, and mount(8)'s, which it drops. No
 * FUSE in here, so that a tool taking a mount's option string
 * (tools/rankfs_cat.c) accepts exactly what a mount accepts. */
#ifndef RFS_MOUNTOPT_H
#define RFS_MOUNTOPT_H

#include <stddef.h>

#include "buf.h"

enum rfs_mountopt_kind {
	RFS_MOUNTOPT_OTHER, /* neither: rankfs's own, or unknown */
	RFS_MOUNTOPT_FUSE, /* libfuse's: allow_other, max_threads, ... */
	RFS_MOUNTOPT_IGNORED, /* mount(8)'s: rw, noauto, x-systemd.*, ... */
};

/* @param key an option's name, without "=value". */
enum rfs_mountopt_kind rfs_mountopt_kind(const char *key);

/* Checks the value of libfuse's option key (NULL: none given), which
 * libfuse 3.14 would take unchecked or find wrong only once the sources
 * are open. @return 0, or -EINVAL with one line in err naming the option
 * (no "rankfs: " prefix). */
int rfs_mountopt_check_fuse(const char *key, const char *value, char *err,
			    size_t errlen);

/* Appends libfuse's option names, comma-separated. */
void rfs_mountopt_render_fuse_names(struct rfs_buf *b);

#endif
