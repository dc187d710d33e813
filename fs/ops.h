/* SPDX-License-Identifier: MIT */
/* The low-level FUSE handlers (ops.c) and the state they share, reached
 * through fuse_req_userdata(). */
#ifndef RFS_OPS_H
#define RFS_OPS_H

#include <sys/types.h>

#include "serve/inode.h"
#include "page_store.h"
#include "serve/view.h"

struct rfs_fs {
	struct rfs_view *view;
	struct rfs_inode_space space;
	uid_t uid; /* owner shown on every node */
	gid_t gid;
	/* -o max_read's value, or 0: op_init must give libfuse the same
	 * value its mount options hold, or libfuse ends the session. */
	unsigned max_read;
	/* Counts the opens of files; stores a file's bytes at its first
	 * open and drops its pages at its last release (page_store.h). */
	struct rfs_page_store *page_store;
};

struct fuse_args;
struct fuse_session;

/* Creates the low-level session serving fs (the ops table lives in ops.c).
 * @return NULL on failure (libfuse prints why). */
struct fuse_session *rfs_ops_session_new(struct fuse_args *args,
					 struct rfs_fs *fs);

#endif
