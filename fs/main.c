/* SPDX-License-Identifier: MIT */
/* rankfs: argv -> config -> view -> session -> loop, undone in reverse. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "daemon.h"
#include "ops.h"
#include "page_drop.h"
#include "core/log.h"
#include "os/mountinfo.h"
#include "opts.h"
#include "stop_signal.h"

/* The kernel gives a FUSE mount 128 KiB of readahead whatever init asks;
 * its backing device's read_ahead_kb can be raised by root. Found through
 * mountinfo, since stat()ing our own mount before the loop runs would
 * deadlock (mountpoint is resolved already, opts.c). Best effort: logged,
 * never fatal. */
static void raise_readahead(const char *mountpoint)
{
	struct rfs_mount_entry e;
	if (rfs_mountinfo_find(NULL, mountpoint, &e) != 0)
		return;
	char path[128];
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb",
		 e.majmin);
	FILE *ra = fopen(path, "we");
	int failed = !ra || fputs("1024\n", ra) < 0;
	/* fclose flushes: its failure is the write's. */
	if ((ra && fclose(ra) != 0) || failed)
		rfs_log("readahead stays at the kernel default: cannot write %s",
			path);
}

/* libfuse, or fusermount3 for a user, said why on the line before,
 * without naming rankfs or the mount point; this line does, with the
 * usual causes. */
static void say_mount_failed(const char *mountpoint)
{
	if (access("/dev/fuse", F_OK) != 0)
		rfs_log_say(
			"cannot mount on %s: there is no /dev/fuse (load the fuse module; in a container, pass the device in)",
			mountpoint);
	else if (geteuid() != 0 && access("/dev/fuse", R_OK | W_OK) != 0)
		rfs_log_say(
			"cannot mount on %s: this user cannot open /dev/fuse (%s): mount as root, or give the user read and write access to it",
			mountpoint, strerror(errno));
	else
		rfs_log_say("cannot mount on %s (the line above says why)",
			    mountpoint);
}

/* A rankfs mount on the device (major:minor) in *arg, found in *arg. */
static int find_rankfs_on(const struct rfs_mount_entry *e, void *arg)
{
	struct rfs_mount_entry *q = arg;
	if (strcmp(e->fstype, "fuse.rankfs") || strcmp(e->majmin, q->majmin))
		return 0;
	*q = *e;
	return 1;
}

/* A mount on a mount point would hide what is mounted there (another
 * rankfs mount, a tmpfs), which goes on living unseen: refused, naming
 * it; so is one on a directory of a rankfs mount (its epoch/), found by
 * its device, which would hide that mount's files. Checked before the
 * fork, and again just before mounting, since the sources may take long
 * to open. @return 0 or -1 (said on stderr). */
static int refuse_mount_point(const char *mountpoint)
{
	struct rfs_mount_entry *e = calloc(1, sizeof(*e));
	struct stat st;
	int on = e && rfs_mountinfo_find(NULL, mountpoint, e) == 0, in = 0;
	if (on)
		rfs_log_say(
			"mountpoint %s is already a mount point (%s from %s); unmount it first or mount elsewhere",
			mountpoint, e->fstype, e->source);
	else if (e && stat(mountpoint, &st) == 0) {
		snprintf(e->majmin, sizeof(e->majmin), "%u:%u",
			 major(st.st_dev), minor(st.st_dev));
		in = rfs_mountinfo_each(NULL, find_rankfs_on, e) == 1;
	}
	if (in)
		rfs_log_say(
			"mountpoint %s is inside the rankfs mount %s (of %s), whose files it would hide; mount elsewhere",
			mountpoint, e->point, e->source);
	free(e);
	return on || in ? -1 : 0;
}

/* fuse3 mounts over a directory that holds files (fuse2 wanted -o
 * nonempty), hiding them: an fstab line may mean it, a mistyped path may
 * not. So the mount goes ahead, and one line says so. */
static void warn_not_empty(const char *mountpoint)
{
	DIR *d = opendir(mountpoint);
	struct dirent *e;
	int empty = 1;
	while (d && empty && (e = readdir(d)))
		empty = strcmp(e->d_name, ".") == 0 ||
			strcmp(e->d_name, "..") == 0;
	if (d)
		closedir(d);
	if (!empty)
		rfs_log_say(
			"mountpoint %s is not empty: what it holds is hidden while rankfs is mounted there",
			mountpoint);
}

/* Whether st, log_file's own file (not followed), may not take log lines:
 * a link (planted where the log is written, it would send root's lines
 * into any file), anything but a regular file (a FIFO, a device, a
 * directory), or a file the view reads, a link's target included.
 * @return 0, or -1 said on stderr. */
static int refuse_log_file(const char *path, const struct stat *st,
			   const struct rfs_view *view)
{
	const char *why = S_ISLNK(st->st_mode) ?
				  " is a symbolic link; give the file itself" :
			  !S_ISREG(st->st_mode) ? ": not a regular file" :
						  NULL;
	const char *src =
		why ? NULL :
		      rfs_view_source_reading(view, st->st_dev, st->st_ino);
	struct stat s;
	int whole = src && stat(src, &s) == 0 && s.st_dev == st->st_dev &&
		    s.st_ino == st->st_ino;
	if (why)
		rfs_log_say("option log_file=%s%s", path, why);
	else if (src)
		rfs_log_say("option log_file=%s is %s %s%s", path,
			    whole ? "the source" : "a file the source", src,
			    whole ? "" : " reads");
	return why || src ? -1 : 0;
}

/* A log file made in a zarr store's directory would change the store
 * (its watch sees the new file, then every write): refused as well.
 * @return 0, or -1 said on stderr. */
static int refuse_log_dir(const char *path, const struct rfs_view *view)
{
	char *copy = strdup(path);
	struct stat dir;
	const char *src =
		copy && stat(dirname(copy), &dir) == 0 ?
			rfs_view_source_reading(view, dir.st_dev, dir.st_ino) :
			NULL;
	free(copy);
	if (src)
		rfs_log_say("option log_file=%s is inside the source %s", path,
			    src);
	return src ? -1 : 0;
}

/* log_file: a regular file, or a new one, that no source reads. A source
 * is never opened for writing, so the name is looked at first; O_NOFOLLOW
 * refuses a link put there in between, O_NONBLOCK a FIFO that would hang
 * the open, and what was opened is looked at again, in case the name
 * changed in between. @return 0, or -1 said on stderr. */
static int open_log_file(const char *path, const struct rfs_view *view)
{
	struct stat st;
	if (refuse_log_dir(path, view) != 0 ||
	    (lstat(path, &st) == 0 && refuse_log_file(path, &st, view) != 0))
		return -1;
	int fd = open(path,
		      O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK |
			      O_NOCTTY | O_CLOEXEC,
		      0666);
	if (fd < 0 && errno == ELOOP)
		st.st_mode = S_IFLNK;
	else if (fd < 0 || fstat(fd, &st) != 0) {
		rfs_log_say("option log_file=%s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (refuse_log_file(path, &st, view) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	int rc = rfs_log_set_fd(fd);
	if (rc != 0)
		rfs_log_say("option log_file=%s: %s", path, strerror(-rc));
	return rc == 0 ? 0 : -1;
}

/* auto_unmount's fusermount3 unmounts once our end of its socket closes,
 * but only if opening the mount then fails with ENOTCONN: the connection
 * aborted, as the release of /dev/fuse aborts it. A killed process's
 * files are released highest descriptor first, and libfuse 3.14 leaves
 * the socket just above /dev/fuse: fusermount3 could open the mount in
 * between, have its request ended by the abort (ECONNABORTED) and leave
 * a dead mount. A copy of the device above every descriptor is released
 * first (test_lifecycle.py). @return it, or -1: the order as it was. */
static int device_above_all(struct fuse_session *se)
{
	int top = 0;
	DIR *d = opendir("/proc/self/fd");
	for (struct dirent *e; d && (e = readdir(d));)
		top = atoi(e->d_name) > top ? atoi(e->d_name) : top;
	if (d)
		closedir(d);
	return fcntl(fuse_session_fd(se), F_DUPFD_CLOEXEC, top + 1);
}

/* File buffers come from lib/core/bigbuf.c (mapped, pooled, unmapped), as do
 * the batch-sized temporaries of casts. What malloc still serves are a
 * fill's other temporaries (row lists, a CSR batch's arrays), freed within
 * the same fill and counted in cache_mb while it runs (lib/serve/cache.c), and
 * libfuse's request buffers, 1 MiB and 4 KiB per handler thread for the
 * thread's life. A fixed threshold just below them maps those buffers, and
 * any temporary as big, apart from the heap: in it, the buffers of
 * hundreds of threads pinned the fills' freed temporaries between them (a
 * daemon of 60 MiB at cache_mb=16, test_reliability.py's
 * test_memory_bound_with_many_handler_threads). Not lower: blosc's
 * temporaries for zarr's 512 KiB blocks, two blocks and a few bytes per
 * decode (zarr_codec.c), would be mapped and faulted in per call. Fixed,
 * not glibc's sliding threshold, which would let freed file-sized blocks
 * pile up.
 * One arena: with one per group of threads, each kept the free space of
 * the fills its threads had run (test_memory_bound_counts_temporaries). A
 * fill makes a few allocations, so threads hardly contend for its lock. */
#define MMAP_THRESHOLD (1024 * 1024 + 2048)
static void bound_allocator(void)
{
	mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD);
	mallopt(M_TRIM_THRESHOLD, 8 * 1024 * 1024);
	mallopt(M_ARENA_MAX, 1);
}

/* What page_store.c's ops reach, so that it stays free of FUSE and is
 * unit tested with ops of its own. */
struct pages {
	struct fuse_session *se;
	struct rfs_page_drop *drop;
};

static int notify_store(void *ctx, uint64_t ino, const void *data, size_t len)
{
	struct pages *p = ctx;
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(len);
	bv.buf[0].mem = (void *)data;
	return fuse_lowlevel_notify_store(p->se, (fuse_ino_t)ino, 0, &bv, 0);
}

static void queue_drop(void *ctx, uint64_t ino)
{
	rfs_page_drop_push(((struct pages *)ctx)->drop, ino);
}

static void cancel_drop(void *ctx, uint64_t ino)
{
	rfs_page_drop_cancel(((struct pages *)ctx)->drop, ino);
}

static const struct rfs_page_store_ops page_ops = {
	.store = notify_store,
	.drop = queue_drop,
	.cancel_drop = cancel_drop,
};

static int run_loop(struct fuse_session *se, struct rfs_cli *cli)
{
	if (cli->fuse.singlethread)
		return fuse_session_loop(se);
	struct fuse_loop_config *lc = fuse_loop_cfg_create();
	if (!lc)
		return -ENOMEM;
	fuse_loop_cfg_set_clone_fd(lc, (unsigned)cli->fuse.clone_fd);
	/* UINT_MAX: not given; keep libfuse's default (idle threads kept). */
	if (cli->fuse.max_idle_threads != UINT_MAX)
		fuse_loop_cfg_set_idle_threads(lc, cli->fuse.max_idle_threads);
	/* Enough workers for every loader process of every rank to have a
	 * read outstanding (4 per rank), libfuse's 10 at least, 64 at most. */
	unsigned threads = cli->fuse.max_threads;
	if (!cli->max_threads_given) {
		uint64_t want = 4 * cli->config.world_size + 4;
		threads = want < 10 ? 10 : want > 64 ? 64 : (unsigned)want;
	}
	fuse_loop_cfg_set_max_threads(lc, threads);
	int rc = fuse_session_loop_mt(se, lc);
	fuse_loop_cfg_destroy(lc);
	return rc;
}

int main(int argc, char *argv[])
{
	struct rfs_cli cli;
	struct rfs_fs fs = { .uid = getuid(), .gid = getgid() };
	struct pages pages = { 0 };
	struct fuse_session *se = NULL;
	char err[1024];
	int status = 1, looped = 0, device;

	rfs_daemon_keep_std_fds();
	bound_allocator();
	int rc = rfs_opts_parse(argc, argv, &cli);
	if (rc != 0) {
		status = rc > 0 ? 0 : 1;
		goto out_opts;
	}
	if (refuse_mount_point(cli.mountpoint) != 0)
		goto out_opts;
	warn_not_empty(cli.mountpoint);
	if (!cli.fuse.foreground && rfs_daemon_start() != 0)
		goto out_opts;
	if (rfs_view_create(&cli.config, cli.sources, cli.nsources, &fs.view,
			    err, sizeof(err)) != 0) {
		rfs_log_say("%s", err);
		goto out_opts;
	}
	/* Once the sources are open, to know them. */
	if (cli.config.log_file &&
	    open_log_file(cli.config.log_file, fs.view) != 0)
		goto out_view;
	fs.max_read = cli.max_read;
	if (rfs_inode_space_init(&fs.space, cli.config.world_size,
				 rfs_view_kinds(fs.view),
				 rfs_view_has_npz(fs.view),
				 rfs_view_batches_per_rank(fs.view),
				 cli.config.epochs) != 0) {
		/* world_size x batches per rank is about rows / batch_size,
		 * whatever world_size is. */
		rfs_log_say(
			"%llu batches per epoch (world_size x batches per rank) are too many to number every file of every epoch; raise batch_size",
			(unsigned long long)(cli.config.world_size *
					     rfs_view_batches_per_rank(
						     fs.view)));
		goto out_view;
	}
	size_t var_names_len;
	fs.space.var_names = rfs_view_var_names_txt(fs.view, &var_names_len) !=
			     NULL;
	se = rfs_ops_session_new(&cli.args, &fs);
	if (!se)
		goto out_view;
	if (fuse_set_signal_handlers(se) != 0)
		goto out_session;
	/* The directory under the mount: a probe that reaches it, not the
	 * mount, finds the mount gone (daemon.h). */
	struct stat under;
	if (stat(cli.mountpoint, &under) != 0) {
		rfs_log_say("mountpoint %s: %s", cli.mountpoint,
			    strerror(errno));
		goto out_signals;
	}
	if (refuse_mount_point(cli.mountpoint) != 0)
		goto out_signals;
	if (fuse_session_mount(se, cli.mountpoint) != 0) {
		say_mount_failed(cli.mountpoint);
		goto out_signals;
	}
	device = device_above_all(se);
	pages.se = se;
	if ((rc = rfs_page_drop_create(se, &pages.drop)) != 0) {
		rfs_log_say("cannot start a thread: %s", strerror(-rc));
		goto out_unmount;
	}
	if ((rc = rfs_page_store_create(&page_ops, &pages, &fs.page_store)) !=
	    0) {
		rfs_log_say("%s", strerror(-rc));
		goto out_pages;
	}
	/* In the background stderr is /dev/null: lines go to syslog, as
	 * from other daemons. And a user's mount cannot raise readahead:
	 * said in the log, not on the terminal of a mount that worked. */
	if (!cli.fuse.foreground && !cli.config.log_file)
		rfs_log_to_syslog();
	raise_readahead(cli.mountpoint);
	/* The parent is released once the mount answers, INIT done. */
	rc = rfs_daemon_ready_when_answered(cli.mountpoint, under.st_dev);
	if (rc != 0) {
		rfs_log_say("cannot start a thread: %s", strerror(-rc));
		goto out_pages;
	}

	int kicks = rfs_stop_signal_start(se);
	if (kicks != 0) /* libfuse's handlers stay: a stop may wait */
		rfs_log("cannot start the signal helper: %s", strerror(-kicks));
	rc = run_loop(se, &cli);
	looped = 1;
	int stopped = kicks == 0 ? rfs_stop_signal_end() : 0;
	/* A stop signal is a clean end, whatever the loop returned; with
	 * libfuse's own handlers (no helper) the loop returns the signal's
	 * number. */
	int clean = stopped || rc == 0 || rc == SIGTERM || rc == SIGINT ||
		    rc == SIGHUP;
	status = clean ? 0 : 1;
	if (status != 0)
		rfs_log("session loop failed: %d", rc);
out_pages:
	/* The drop's shutdown may answer opens: the store goes after it. */
	rfs_page_drop_destroy(pages.drop);
	rfs_page_store_destroy(fs.page_store);
out_unmount:
	if (device >= 0)
		close(device);
	fuse_session_unmount(se);
	/* A session that ended before it answered (INIT failed, or a stop
	 * signal came first) leaves the parent waiting for our exit. */
	if (!rfs_daemon_end()) {
		if (looped && status != 0)
			rfs_log_say(
				"%s: the FUSE session ended before the mount answered (%s)",
				cli.mountpoint, strerror(rc < 0 ? -rc : EIO));
		else if (looped)
			rfs_log_say("%s: stopped before the mount answered",
				    cli.mountpoint);
		status = 1;
	}
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out_view:
	rfs_view_destroy(fs.view);
out_opts:
	rfs_opts_free(&cli);
	return status;
}
