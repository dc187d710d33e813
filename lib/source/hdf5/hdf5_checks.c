/* SPDX-License-Identifier: MIT */
/*
 * The HDF5 backend's checks of where rows come from, and of whether the
 * source file is still as opened.
 */
#include "source/hdf5/hdf5_source.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "core/log.h"
#include "os/watch.h"

int rfs_hdf5_refuse_outside(const struct hdf5_source *s, hid_t dset,
			    const char *what, char *err, size_t errlen)
{
	H5O_info_t file, data;
	hid_t dcpl = H5Dget_create_plist(dset);
	const char *why = NULL, *how = "-l CONTI";
	if (H5Oget_info(s->file, &file) < 0 || H5Oget_info(dset, &data) < 0 ||
	    file.fileno != data.fileno) {
		why = "is reached through an external link to another file";
		how = "--merge"; /* copies the link's target in */
	} else if (dcpl >= 0 && H5Pget_layout(dcpl) == H5D_VIRTUAL) {
		why = "is a virtual dataset (its data is in other files)";
	} else if (dcpl >= 0 && H5Pget_external_count(dcpl) > 0) {
		why = "stores its data in external files";
	}
	if (dcpl >= 0)
		H5Pclose(dcpl);
	if (!why)
		return 0;
	snprintf(err, errlen,
		 "%s: dataset %s %s; rankfs reads only data stored inside the "
		 "source file: mount a plain copy (h5repack %s %s COPY)",
		 s->path, what, why, how, s->path);
	return -ENOTSUP;
}

static int same_inode(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

static int64_t ns_of(struct timespec t)
{
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* A write with its mtime put back moves ctime, which no user can set
 * back. So do an unlink or a rename over the path (they change the link
 * count) and a rename of the file elsewhere, of bytes that are intact
 * (the mount keeps serving them). So a ctime that moved, the link count
 * kept, is a write while the path still names the file (chmod and chown
 * count too: EIO, never wrong bytes); once the file is elsewhere, its
 * ctime is taken as it is then. */
static int ctime_says_written(struct hdf5_source *s, const struct stat *now)
{
	int64_t seen = atomic_load(&s->ctime_seen);
	struct stat named;
	if (ns_of(now->st_ctim) == (seen ? seen : ns_of(s->opened.st_ctim)) ||
	    now->st_nlink != s->opened.st_nlink)
		return 0;
	if (stat(s->path, &named) == 0 && same_inode(&s->opened, &named))
		return 1;
	atomic_store(&s->ctime_seen, ns_of(now->st_ctim));
	return 0;
}

/* Logs how the source changed: unreachable (now NULL), or now. */
static void log_written(struct hdf5_source *s, const struct stat *now)
{
	const struct stat *was = &s->opened;
	char how[128];
	if (!now)
		snprintf(how, sizeof(how),
			 "its descriptor cannot be looked at");
	else if (now->st_size != was->st_size)
		snprintf(how, sizeof(how), "size %lld -> %lld",
			 (long long)was->st_size, (long long)now->st_size);
	else if (now->st_mtim.tv_sec != was->st_mtim.tv_sec ||
		 now->st_mtim.tv_nsec != was->st_mtim.tv_nsec)
		snprintf(how, sizeof(how), "mtime %lld.%09ld -> %lld.%09ld",
			 (long long)was->st_mtim.tv_sec, was->st_mtim.tv_nsec,
			 (long long)now->st_mtim.tv_sec, now->st_mtim.tv_nsec);
	else if (ctime_says_written(s, now))
		snprintf(how, sizeof(how),
			 "ctime %lld.%09ld -> %lld.%09ld, size and mtime as "
			 "before",
			 (long long)was->st_ctim.tv_sec, was->st_ctim.tv_nsec,
			 (long long)now->st_ctim.tv_sec, now->st_ctim.tv_nsec);
	else /* unlinked or renamed over, then written: inotify saw it */
		snprintf(how, sizeof(how),
			 "written, as inotify saw; size and mtime as before");
	rfs_log("source %s changed in place (%s): new batches fail with EIO "
		"for the life of the mount (remount to serve the new bytes)",
		s->path, how);
}

/*
 * The mount serves the file it opened. A path renamed over or unlinked
 * changes nothing: the descriptor still reaches the old, intact file. But
 * the opened file itself may be written (or truncated: HDF5 reads missing
 * bytes as zeros), and a batch read meanwhile would mix old and new rows.
 * So this runs before and after every read (source.c): once the file's
 * size or mtime differ from what was opened, its ctime moved as a write
 * moves it (ctime_says_written), or inotify saw a write to it
 * (watch.c), every later read fails with EIO for the life of the mount,
 * even if mtime is put back. ctime catches a write through a shared
 * mapping, which raises no inotify event; inotify a write to a file
 * unlinked or renamed over meanwhile. One fstat per read is cheap next
 * to the read.
 */
int rfs_hdf5_check_unchanged(struct rfs_source *base)
{
	struct hdf5_source *s = (struct hdf5_source *)base;
	const struct stat *was = &s->opened;
	struct stat now;
	if (atomic_load(&s->changed))
		return -EIO;
	int gone = fstat(s->fd, &now) != 0;
	if (!gone && now.st_size == was->st_size &&
	    now.st_mtim.tv_sec == was->st_mtim.tv_sec &&
	    now.st_mtim.tv_nsec == was->st_mtim.tv_nsec &&
	    !ctime_says_written(s, &now) &&
	    (s->watch < 0 ||
	     !rfs_watch_any_written(s->base.env.watch, &s->watch, 1)))
		return 0;
	if (atomic_exchange(&s->changed, 1) == 0)
		log_written(s, gone ? NULL : &now);
	return -EIO;
}

int rfs_hdf5_reads_file(const struct rfs_source *base, dev_t dev, ino_t ino)
{
	const struct hdf5_source *s = (const struct hdf5_source *)base;
	return s->opened.st_dev == dev && s->opened.st_ino == ino;
}

enum rfs_source_state rfs_hdf5_state(struct rfs_source *base)
{
	struct hdf5_source *s = (struct hdf5_source *)base;
	struct stat named;
	if (rfs_hdf5_check_unchanged(base) != 0)
		return RFS_SOURCE_CHANGED;
	if (stat(s->path, &named) == 0 && same_inode(&s->opened, &named))
		return RFS_SOURCE_OK;
	if (atomic_exchange(&s->replaced_logged, 1) == 0)
		rfs_log("source %s was replaced or removed: serving the file "
			"opened at mount",
			s->path);
	return RFS_SOURCE_REPLACED;
}
