/* SPDX-License-Identifier: MIT */
/* Command line: rankfs [options] SOURCE... MOUNTPOINT. */
#ifndef RFS_OPTS_H
#define RFS_OPTS_H

#include <fuse_lowlevel.h>

#include "core/config.h"

struct rfs_cli {
	struct rfs_config config;
	char **sources; /* files or directories, in order */
	size_t nsources;
	char *mountpoint;
	struct fuse_args args; /* what is left for fuse_session_new() */
	struct fuse_cmdline_opts fuse; /* -f, -d, -s, max_threads, ... */
	int max_threads_given; /* -o max_threads= was on the command line */
	unsigned max_read; /* -o max_read=N's N (the last one), 0: not given */
};

/* Parses argv. Prints errors (one line naming the culprit) to stderr and
 * --help/--version to stdout.
 * @return 0: mount; 1: done, exit 0 (help, version); -1: exit 1.
 * Call rfs_opts_free() in every case. */
int rfs_opts_parse(int argc, char *argv[], struct rfs_cli *cli);

void rfs_opts_free(struct rfs_cli *cli);

#endif
