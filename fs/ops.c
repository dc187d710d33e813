/* SPDX-License-Identifier: MIT */
/*
 * Low-level FUSE handlers: decode the inode, ask lib/, reply exactly once.
 *
 * Everything except stats.json is immutable for the life of the mount, so
 * entries and attributes carry long timeouts and open() keeps the page
 * cache, into which a generated file's bytes are stored before its first
 * open is answered (page_store.c); its last close then drops its pages
 * (see op_release). Listings carry attributes (readdirplus). stats.json
 * changes on every read; it reports size 0 like a /proc file and is
 * opened direct_io with a snapshot taken at open.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <fuse_lowlevel.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ops.h"

#define IMMUTABLE_TIMEOUT 86400.0

/* The stats.json of one open. Reads and the release hold references: the
 * release can be handled on another thread while a read's reply is still
 * leaving (the kernel completes the read when it has the bytes, and the
 * reader may close at once). */
struct snapshot {
	char *data;
	size_t len;
	atomic_int refs;
};

static void snapshot_put(struct snapshot *snap)
{
	if (atomic_fetch_sub(&snap->refs, 1) == 1) {
		free(snap->data);
		free(snap);
	}
}

static struct rfs_fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* The cache key of a file node: a step file is its epoch file. */
static struct rfs_cache_key file_key(struct rfs_fs *fs,
				     const struct rfs_node *n)
{
	struct rfs_cache_key key = { .rank = n->rank, .kind = n->kind };
	rfs_inode_batch(&fs->space, n, &key.epoch, &key.batch);
	return key;
}

/* A generated file: a batch, index or label file of an epoch or step. */
static int is_file(const struct rfs_node *n)
{
	return n->type == RFS_NODE_FILE || n->type == RFS_NODE_STEP_FILE;
}

/* The bytes of config.json, dataset.json or var_names.txt; NULL (len 0)
 * for other nodes. */
static const char *node_text(struct rfs_fs *fs, const struct rfs_node *n,
			     size_t *len)
{
	*len = 0;
	switch (n->type) {
	case RFS_NODE_CONFIG:
		return rfs_view_config_json(fs->view, len);
	case RFS_NODE_DATASET:
		return rfs_view_dataset_json(fs->view, len);
	case RFS_NODE_VAR_NAMES:
		return rfs_view_var_names_txt(fs->view, len);
	default:
		return NULL;
	}
}

/* st_blksize, which readers size their buffers by. numpy reads a .npy's
 * header through Python's buffer, then the array with a read of its own:
 * a 1 MiB buffer read the whole file twice. zipfile's many small reads
 * of an .npz want a large buffer. */
static blksize_t preferred_io_size(const struct rfs_node *n)
{
	return is_file(n) && n->kind != RFS_KIND_NPZ ? 4096 : 1 << 20;
}

static int fill_attr(struct rfs_fs *fs, const struct rfs_node *n,
		     struct stat *st)
{
	int rc = 0;
	memset(st, 0, sizeof(*st));
	st->st_ino = rfs_inode_of(&fs->space, n);
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_mtime = st->st_ctime = st->st_atime = rfs_view_mtime(fs->view);
	if (rfs_inode_is_dir(n)) {
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
	} else {
		uint64_t size = 0;
		size_t len;
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		if (is_file(n)) {
			struct rfs_cache_key key = file_key(fs, n);
			rc = rfs_view_file_size(fs->view, &key, &size);
		} else if (node_text(fs, n, &len)) {
			size = len;
		}
		st->st_size = (off_t)size;
		st->st_blocks = (st->st_size + 511) / 512;
	}
	st->st_blksize = preferred_io_size(n);
	return rc;
}

static double attr_timeout(const struct rfs_node *n)
{
	return n->type == RFS_NODE_STATS ? 0.0 : IMMUTABLE_TIMEOUT;
}

static int decode(fuse_req_t req, fuse_ino_t ino, struct rfs_node *n)
{
	int rc = rfs_inode_node(&fs_of(req)->space, ino, n);
	if (rc != 0)
		fuse_reply_err(req, -rc);
	return rc;
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct rfs_fs *fs = userdata;
	/* libfuse 3.14 fails INIT (EPROTO) unless this equals its
	 * max_read mount option (0 when none): the kernel takes that
	 * option, at least 4096, as the largest read it sends. */
	conn->max_read = fs->max_read;
	/* Fault injection for the tests (test_lifecycle.py): the session
	 * fails at INIT, as it did when this was left 0. */
	if (getenv("RANKFS_FAULT_INIT"))
		conn->max_read = fs->max_read + 1;
	/* The kernel caps this at its own offer; main.c raises the bdi. */
	conn->max_readahead = 1 << 20;
	/* Readahead and page-cache reads are background requests: the
	 * kernel's 12 would queue a few ranks' readers behind each other. */
	conn->max_background = 64;
	conn->congestion_threshold = 48;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct rfs_fs *fs = fs_of(req);
	struct rfs_node p, n;
	if (decode(req, parent, &p) != 0)
		return;
	int rc = rfs_inode_lookup(&fs->space, &p, name, &n);
	if (rc != 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	struct fuse_entry_param e = { .ino = rfs_inode_of(&fs->space, &n),
				      .attr_timeout = attr_timeout(&n),
				      .entry_timeout = IMMUTABLE_TIMEOUT };
	rc = fill_attr(fs, &n, &e.attr);
	if (rc != 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	(void)fi;
	struct rfs_node n;
	struct stat st;
	if (decode(req, ino, &n) != 0)
		return;
	int rc = fill_attr(fs_of(req), &n, &st);
	if (rc != 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, attr_timeout(&n));
}

/* A listing's entry with its attributes, as a lookup would answer (plus),
 * so that opening the files of a listed directory needs no lookup each.
 * The kernel asks for them on a listing's first request (and after
 * lookups in the directory): its default, which keeps a huge step/ rank
 * directory from becoming as many cached inodes.
 * Not for "." and "..", nor .npz files, whose size may read indptr: the
 * kernel looks those up when they are used.
 * @return the bytes it took, which may exceed size (then not added). */
static size_t add_entry(fuse_req_t req, char *buf, size_t size,
			const char *name, const struct rfs_node *child,
			const struct stat *st, off_t next, int plus)
{
	struct rfs_fs *fs = fs_of(req);
	if (!plus)
		return fuse_add_direntry(req, buf, size, name, st, next);
	struct fuse_entry_param e = { .attr = *st };
	if (child && child->kind != RFS_KIND_NPZ &&
	    fill_attr(fs, child, &e.attr) == 0) {
		e.ino = e.attr.st_ino;
		e.attr_timeout = attr_timeout(child);
		e.entry_timeout = IMMUTABLE_TIMEOUT;
	}
	return fuse_add_direntry_plus(req, buf, size, name, &e, next);
}

static void list_dir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     int plus)
{
	struct rfs_fs *fs = fs_of(req);
	struct rfs_node dir, child;
	if (decode(req, ino, &dir) != 0)
		return;
	if (!rfs_inode_is_dir(&dir)) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	char *buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* Offsets: 0 ".", 1 "..", 2 + i the i-th child. */
	uint64_t count = rfs_inode_count(&fs->space, &dir);
	size_t used = 0;
	for (uint64_t i = (uint64_t)off; i < count + 2; i++) {
		char name[64];
		struct stat st = { .st_mode = S_IFDIR };
		int dot = i < 2;
		if (dot) {
			strcpy(name, i == 0 ? "." : "..");
			st.st_ino = i == 0 ? ino : FUSE_ROOT_ID;
		} else {
			rfs_inode_entry(&fs->space, &dir, i - 2, &child, name,
					sizeof(name));
			st.st_ino = rfs_inode_of(&fs->space, &child);
			st.st_mode = rfs_inode_is_dir(&child) ? S_IFDIR :
								S_IFREG;
		}
		size_t need = add_entry(req, buf + used, size - used, name,
					dot ? NULL : &child, &st,
					(off_t)(i + 1), plus);
		if (need > size - used)
			break;
		used += need;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)fi;
	list_dir(req, ino, size, off, 0);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	(void)fi;
	list_dir(req, ino, size, off, 1);
}

/* The inode of the epoch file of key: a step file's bytes are its epoch
 * file's, one cache entry, which the last release of either retires
 * only while the other is not open (page_store.c's groups). */
static uint64_t bytes_inode(struct rfs_fs *fs, const struct rfs_cache_key *key)
{
	struct rfs_node n = { .type = RFS_NODE_FILE,
			      .epoch = key->epoch,
			      .rank = key->rank,
			      .kind = key->kind,
			      .batch = key->batch };
	return rfs_inode_of(&fs->space, &n);
}

/* Counts the open of a generated file, and stores the file's bytes in
 * the page cache before its first open is answered (page_store.c): its
 * reads are then the kernel's alone. A file that fails to generate fails
 * its open with that error: opened, each read() of it would reach the
 * daemon two or three times (the kernel's readahead, then its retry of
 * the page), each a failed generation, logged and counted again. An
 * O_DIRECT open's reads bypass the page cache and reach the daemon, which
 * generates and counts them (read_file): nothing is stored for it.
 * @return 0, or a negative errno: not counted. */
static int store_at_open(struct rfs_fs *fs, fuse_ino_t ino,
			 const struct rfs_cache_key *key, int direct)
{
	int rc = rfs_page_store_open(fs->page_store, ino, bytes_inode(fs, key));
	if (rc != 1)
		return rc;
	struct rfs_cache_entry *e;
	if (direct) {
		rfs_page_store_fill(fs->page_store, ino, NULL, 0);
		return 0;
	}
	rc = rfs_view_read(fs->view, key, 0, &e);
	if (rc != 0) {
		/* The opens that waited for this one fail with it. */
		rfs_page_store_fail(fs->page_store, ino, rc);
		return rc;
	}
	size_t len = rfs_cache_entry_size(e);
	/* Counted when handed over: the daemon sees no reads of it. */
	if (rfs_page_store_fill(fs->page_store, ino, rfs_cache_entry_data(e),
				len) == 0)
		rfs_view_count_bytes(fs->view, key->rank, len);
	rfs_view_put(fs->view, e);
	return 0;
}

/* The last release of a file retires its bytes from the batch cache
 * (its pages are page_store.c's to drop): run under the open count's
 * lock (rfs_page_store_close), so that a new open of the file cannot be
 * counted in between and then lose its bytes. */
struct last_release {
	struct rfs_fs *fs;
	struct rfs_cache_key key;
};

static void retire_file(void *arg)
{
	struct last_release *l = arg;
	rfs_view_released(l->fs->view, &l->key);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct rfs_fs *fs = fs_of(req);
	struct rfs_node n;
	if (decode(req, ino, &n) != 0)
		return;
	if (rfs_inode_is_dir(&n)) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (n.type == RFS_NODE_STATS) {
		struct snapshot *snap = calloc(1, sizeof(*snap));
		if (snap)
			atomic_init(&snap->refs, 1);
		if (!snap || rfs_view_stats_json(fs->view, &snap->data,
						 &snap->len) != 0) {
			free(snap);
			fuse_reply_err(req, ENOMEM);
			return;
		}
		fi->fh = (uintptr_t)snap;
		fi->direct_io = 1;
	} else {
		fi->keep_cache = 1;
		if (is_file(&n)) {
			struct rfs_cache_key key = file_key(fs, &n);
			rfs_view_opened(fs->view, &key);
			int rc = store_at_open(fs, ino, &key,
					       (fi->flags & O_DIRECT) != 0);
			if (rc != 0) {
				fuse_reply_err(req, -rc);
				return;
			}
		}
	}
	/* Not delivered (the connection was aborted): no release will come,
	 * and nothing else would drop what was stored. */
	if (fuse_reply_open(req, fi) == 0)
		return;
	if (n.type == RFS_NODE_STATS)
		snapshot_put((struct snapshot *)(uintptr_t)fi->fh);
	else if (is_file(&n))
		rfs_page_store_close(fs->page_store, ino, NULL, NULL);
}

static void reply_slice(fuse_req_t req, const char *data, size_t len,
			size_t size, off_t off)
{
	if ((uint64_t)off >= len) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	size_t n = len - (size_t)off < size ? len - (size_t)off : size;
	fuse_reply_buf(req, data + off, n);
}

static void read_file(fuse_req_t req, const struct rfs_node *n, size_t size,
		      off_t off)
{
	struct rfs_fs *fs = fs_of(req);
	struct rfs_cache_key key = file_key(fs, n);
	struct rfs_cache_entry *e;
	int rc = rfs_view_read(fs->view, &key, (uint64_t)off, &e);
	if (rc != 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	size_t len = rfs_cache_entry_size(e);
	/* Counted before the reply: a reader that looks at stats.json right
	 * after its read must find it there. */
	if ((uint64_t)off < len)
		rfs_view_count_bytes(
			fs->view, n->rank,
			len - (size_t)off < size ? len - (size_t)off : size);
	reply_slice(req, rfs_cache_entry_data(e), len, size, off);
	rfs_view_put(fs->view, e);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct rfs_fs *fs = fs_of(req);
	struct rfs_node n;
	const char *text;
	size_t len;
	if (decode(req, ino, &n) != 0)
		return;
	switch (n.type) {
	case RFS_NODE_FILE:
	case RFS_NODE_STEP_FILE:
		read_file(req, &n, size, off);
		return;
	case RFS_NODE_STATS: {
		struct snapshot *snap = (struct snapshot *)(uintptr_t)fi->fh;
		atomic_fetch_add(&snap->refs, 1);
		reply_slice(req, snap->data, snap->len, size, off);
		snapshot_put(snap);
		return;
	}
	default:
		text = node_text(fs, &n, &len);
		if (rfs_inode_is_dir(&n))
			fuse_reply_err(req, EISDIR);
		else
			reply_slice(req, text, len, size, off);
	}
}

/* A loader reads each generated file once: every epoch has new ones. Left
 * in the page cache they would pile up, one dataset's worth per epoch,
 * crowding out the source's own pages, and on this project's VM page-cache
 * epochs took twice as long once a few GB of them had accumulated. So when
 * a file's last open is released its pages are dropped, and its bytes are
 * retired from the batch cache (evicted first, within an eighth of it); a
 * later read of it is served from there while they last, else generated
 * again. While another process has it open (or mapped: a mapping holds
 * its open), its pages and bytes stay: dropped at each release, a file
 * bigger than the retired eighth was generated again for each reader
 * still reading it. */
static void op_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct rfs_fs *fs = fs_of(req);
	struct rfs_node n;
	int file = rfs_inode_node(&fs->space, ino, &n) == 0 && is_file(&n);
	if (!file && fi->fh)
		snapshot_put((struct snapshot *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
	if (!file)
		return;
	struct last_release last = { .fs = fs, .key = file_key(fs, &n) };
	rfs_page_store_close(fs->page_store, ino, retire_file, &last);
}

#define XATTR_HASH "user.rankfs.xxh3"

/* Batch files (and index/label files) carry the hash of their bytes, so
 * runs on different machines compare without reading the data twice. */
static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	struct rfs_fs *fs = fs_of(req);
	struct rfs_node n;
	char hash[17];
	if (decode(req, ino, &n) != 0)
		return;
	if (!is_file(&n) || strcmp(name, XATTR_HASH) != 0) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	struct rfs_cache_key key = file_key(fs, &n);
	int rc = rfs_view_xxh3(fs->view, &key, hash);
	if (rc != 0)
		fuse_reply_err(req, -rc);
	else if (size == 0)
		fuse_reply_xattr(req, 16);
	else if (size < 16)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, hash, 16);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct rfs_node n;
	if (decode(req, ino, &n) != 0)
		return;
	/* Names end in NUL. */
	size_t len = is_file(&n) ? sizeof(XATTR_HASH) : 0;
	if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, XATTR_HASH, len);
}

/* No write-type ops: every mount is "ro" (opts.c), so the kernel answers
 * EROFS before they reach us (test_core.py's test_writes_are_erofs). */
static const struct fuse_lowlevel_ops ops = {
	.init = op_init,
	.lookup = op_lookup,
	.getattr = op_getattr,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.open = op_open,
	.read = op_read,
	.release = op_release,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
};

struct fuse_session *rfs_ops_session_new(struct fuse_args *args,
					 struct rfs_fs *fs)
{
	return fuse_session_new(args, &ops, sizeof(ops), fs);
}
