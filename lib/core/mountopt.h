/* SPDX-License-Identifier: MIT */
/* The -o words of a mount that are not rankfs's own: libfuse's options,
 * which the mount hands to libfuse, and mount(8)'s, which it drops. No
 * FUSE in here, so that a tool taking a mount's option string
 * (tools/rankfs_cat.c) accepts exactly what a mount accepts. */
#ifndef RFS_MOUNTOPT_H
#define RFS_MOUNTOPT_H

#include <stddef.h>

#include "core/buf.h"
#include "core/config.h"

/* Whether list, an -o argument, holds an empty option once split at its
 * commas as libfuse splits it (a backslash escapes the next character):
 * "", ",a", "a,", "a,,b". */
int rfs_mountopt_list_has_empty(const char *list);

/* Explains an -o item that a space on the command line made, which would
 * otherwise be refused as an unknown option, '' or ' b': -o 'a=1, b=2'
 * (quoted) gives the item " b=2"; -o a=1, b=2 (not quoted) the list
 * "a=1," whose last item is empty, and an argument "b=2" of its own.
 * @param opt the item, as split at commas
 * @param list the -o argument it came from, or NULL where unknown
 * @param next the command line argument after list, or NULL
 * @return 1 with one line in err naming the item or list (no "rankfs: "
 * prefix) when opt is empty or has a space at the start or end of its
 * name, else 0 (err untouched). */
int rfs_mountopt_explain_space(const char *opt, const char *list,
			       const char *next, char *err, size_t errlen);

/* Takes one -o item arg ("key" or "key=value") as a mount takes it:
 * rankfs's option into c; libfuse's (allow_other, max_threads, ...) with
 * their values checked, which libfuse 3.14 would take unchecked or find
 * wrong only once the sources are open; mount(8)'s (rw, noauto,
 * x-systemd.*, ...) dropped. list and next as for
 * rfs_mountopt_explain_space(). key gets arg's name.
 * @return 0 (rankfs's or mount(8)'s), 1 (libfuse's: the mount hands it
 * on), or -1 with the line refusing arg, "prog: ...\n", appended to msg:
 * for an option of none of them, the option meant when it is within two
 * edits of one (batchsize, seeds), then every option taken. */
int rfs_mountopt_take(struct rfs_config *c, const char *prog, const char *arg,
		      const char *list, const char *next, char key[64],
		      struct rfs_buf *msg);

#endif
