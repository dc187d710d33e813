/* SPDX-License-Identifier: MIT */
/*
 * The benchmark's upper bound: a trivial in-memory FUSE server serving
 * RANKS x FILES read-only files of SIZE bytes (one shared buffer: a .npy
 * header for a float32 ROWS x COLS array, then zeros) as R/NNNNNN.npy. It
 * answers like rankfs (long timeouts, keep_cache, 1 MiB readahead asked,
 * a file's pages dropped when it is released) and does nothing else, so
 * reading it measures FUSE alone.
 *
 * The shared buffer is never written past the header, so its pages are
 * the kernel's zero page: every reply copies the same 4 KiB, always in
 * the CPU's cache. With "distinct", each of a rank's first 256 files
 * (then again in turn) has its own bytes (ones) in memory, as a server
 * of real data would: what that costs is bench/daemon_cpu.py --distinct.
 *
 *   trivialfs MOUNT RANKS FILES ROWS COLS [direct_io] [distinct]
 *
 * It stays in the foreground; unmount with fusermount3 -u.
 */
#define FUSE_USE_VERSION 314
#include <errno.h>
#include <fuse_lowlevel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static unsigned long ranks, files, size;
static char *content;
static unsigned long slots; /* distinct: files per rank with own bytes */
static int direct_io;
static struct fuse_session *se;

/* Inodes: 1 root, 2 + r rank dirs, 2 + ranks + r * files + i files. */
static void attr_of(fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = ino < 2 + ranks ? S_IFDIR | 0555 : S_IFREG | 0444;
	st->st_nlink = 1;
	st->st_size = ino < 2 + ranks ? 0 : (off_t)size;
}

static void op_init(void *data, struct fuse_conn_info *conn)
{
	(void)data;
	conn->max_readahead = 1 << 20;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e = { .attr_timeout = 86400,
				      .entry_timeout = 86400 };
	char *end;
	unsigned long n = strtoul(name, &end, 10);
	if (parent == 1 && *end == '\0' && n < ranks)
		e.ino = 2 + n;
	else if (parent >= 2 && parent < 2 + ranks && strcmp(end, ".npy") == 0 &&
		 n < files)
		e.ino = 2 + ranks + (parent - 2) * files + n;
	else {
		fuse_reply_err(req, ENOENT);
		return;
	}
	attr_of(e.ino, &e.attr);
	fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	(void)fi;
	struct stat st;
	attr_of(ino, &st);
	fuse_reply_attr(req, &st, 86400);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	fi->keep_cache = 1;
	fi->direct_io = direct_io;
	fuse_reply_open(req, fi);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t n, off_t off,
		    struct fuse_file_info *fi)
{
	(void)fi;
	if ((unsigned long)off >= size) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (n > size - (unsigned long)off)
		n = size - (unsigned long)off;
	const char *file = content;
	if (slots) {
		unsigned long k = ino - 2 - ranks; /* rank * files + index */
		file += ((k / files) * slots + k % files % slots) * size;
	}
	fuse_reply_buf(req, file + off, n);
}

static void op_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	(void)fi;
	fuse_reply_err(req, 0);
	if (!direct_io)
		fuse_lowlevel_notify_inval_inode(se, ino, 0, 0);
}

static const struct fuse_lowlevel_ops ops = {
	.init = op_init, .lookup = op_lookup, .getattr = op_getattr,
	.open = op_open, .read = op_read, .release = op_release,
};

int main(int argc, char *argv[])
{
	if (argc < 6) {
		fprintf(stderr, "usage: trivialfs MOUNT RANKS FILES ROWS COLS "
				"[direct_io] [distinct]\n");
		return 2;
	}
	unsigned long rows = strtoul(argv[4], NULL, 10);
	unsigned long cols = strtoul(argv[5], NULL, 10);
	ranks = strtoul(argv[2], NULL, 10);
	files = strtoul(argv[3], NULL, 10);
	size = 128 + rows * cols * 4;
	content = calloc(1, size);
	/* .npy 1.0: magic, version, header length 118, then the dict. */
	memcpy(content, "\x93NUMPY\x01\x00\x76\x00", 10);
	int len = snprintf(content + 10, 118,
			   "{'descr': '<f4', 'fortran_order': False, "
			   "'shape': (%lu, %lu), }",
			   rows, cols);
	memset(content + 10 + len, ' ', 117 - (size_t)len);
	content[127] = '\n';

	for (int i = 6; i < argc; i++) {
		direct_io |= strcmp(argv[i], "direct_io") == 0;
		if (strcmp(argv[i], "distinct") == 0)
			slots = files < 256 ? files : 256;
	}
	if (slots) {
		char *all = malloc(ranks * slots * size);
		if (!all)
			return 1;
		for (unsigned long f = 0; f < ranks * slots; f++) {
			memcpy(all + f * size, content, 128);
			memset(all + f * size + 128, 1, size - 128);
		}
		free(content);
		content = all;
	}
	char *fargv[] = { argv[0], "-o", "ro,fsname=trivialfs" };
	struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
	se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
	if (!se || fuse_set_signal_handlers(se) != 0 ||
	    fuse_session_mount(se, argv[1]) != 0)
		return 1;
	struct fuse_loop_config *lc = fuse_loop_cfg_create();
	fuse_session_loop_mt(se, lc);
	fuse_session_unmount(se);
	return 0;
}
