/* SPDX-License-Identifier: MIT */
/*
 * Where the HDF5 backend's rows may come from besides the source file, and
 * whether the files are still as opened. A dataset reached through an
 * external link, a virtual dataset's source files and external raw data
 * files are checked at open (rankfs refuses what HDF5 would serve as
 * zeros or from an unexpected place) and watched like the source itself.
 */
#include "source/hdf5/hdf5_source.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "os/watch.h"

/* Whether the dataset's bytes are in the source file itself, not in a
 * file an external link leads to (whose offsets mean nothing in ours). */
int rfs_hdf5_in_source_file(const struct hdf5_source *s, hid_t dset)
{
	H5O_info_t file, data;
	return H5Oget_info(s->file, &file) >= 0 &&
	       H5Oget_info(dset, &data) >= 0 && file.fileno == data.fileno;
}

/* Watches path (resolved) from now on, once per file, through a
 * descriptor of its own. @return 0, -errno of a failed open, or -ENOMEM. */
static int add_linked(struct hdf5_source *s, const char *path)
{
	struct linked_file l = { .path = realpath(path, NULL),
				 .fd = -1,
				 .watch = -1 };
	int rc = -errno;
	if (l.path)
		l.fd = open(l.path, O_RDONLY | O_CLOEXEC);
	if (l.fd < 0 || fstat(l.fd, &l.opened) != 0) {
		rc = -errno;
		goto fail;
	}
	for (size_t i = 0; i < s->nlinked; i++) {
		if (s->linked[i].opened.st_dev == l.opened.st_dev &&
		    s->linked[i].opened.st_ino == l.opened.st_ino) {
			rc = 0;
			goto fail;
		}
	}
	if (s->nlinked == s->linked_cap) {
		size_t cap = s->linked_cap ? 2 * s->linked_cap : 4;
		struct linked_file *more =
			realloc(s->linked, cap * sizeof(*more));
		rc = -ENOMEM;
		if (!more)
			goto fail;
		s->linked = more;
		s->linked_cap = cap;
	}
	l.watch = rfs_watch_add(s->base.env.watch, l.fd);
	s->linked[s->nlinked++] = l;
	return 0;
fail:
	if (l.fd >= 0)
		close(l.fd);
	free(l.path);
	return rc;
}

/* Adds the file an external link led a's dataset to (if it did) to the
 * files watched for changes. */
void rfs_hdf5_watch_linked(struct hdf5_source *s, const struct array *a)
{
	if (rfs_hdf5_in_source_file(s, a->dset))
		return;
	char name[PATH_MAX] = "";
	hid_t file = H5Iget_file_id(a->dset);
	if (file >= 0) {
		H5Fget_name(file, name, sizeof(name));
		H5Fclose(file);
	}
	/* HDF5 opened it by this name, absolute or relative to the working
	 * directory of now: resolved before the daemon leaves it. */
	int rc = add_linked(s, name);
	if (rc != 0)
		rfs_log("source %s dataset %s: the file its external link "
			"leads to (%s) cannot be watched for changes: %s",
			s->path, a->name, name, strerror(-rc));
}

/* The length of the source's directory in its (absolute) path: what
 * HDF5's ${ORIGIN} stands for. */
static size_t source_dir_len(const struct hdf5_source *s)
{
	return (size_t)(strrchr(s->path, '/') - s->path);
}

/* Whether dir/name (or name alone, with dir NULL) is an existing file;
 * its path in out. */
static int exists_at(const char *dir, size_t dir_len, const char *name,
		     char *out, size_t len)
{
	struct stat st;
	if (dir)
		snprintf(out, len, "%.*s/%s", (int)dir_len, dir, name);
	else
		snprintf(out, len, "%s", name);
	return stat(out, &st) == 0 && S_ISREG(st.st_mode);
}

/* Whether base is under one of the prefixes HDF5_VDS_PREFIX lists
 * (':' between them; a leading ${ORIGIN} is the directory dir_len bytes
 * of dir name, as HDF5 expands it: once, at the start of the whole
 * list). Its path in out. */
static int under_vds_prefix(const char *dir, size_t dir_len, const char *base,
			    char *out, size_t len)
{
	const char *env = getenv("HDF5_VDS_PREFIX");
	if (!env || !*env)
		return 0;
	const char *origin = "${ORIGIN}";
	int expand = strncmp(env, origin, strlen(origin)) == 0;
	char *list = NULL;
	if (asprintf(&list, "%.*s%s%s", expand ? (int)dir_len : 0, dir,
		     expand ? "/" : "",
		     env + (expand ? strlen(origin) : 0)) < 0)
		return 0;
	int found = 0;
	for (char *p = list; !found && *p;) {
		size_t n = strcspn(p, ":");
		found = n > 0 && exists_at(p, n, base, out, len);
		p += n + (p[n] == ':');
	}
	free(list);
	return found;
}

/* Where HDF5 finds a virtual dataset's source file name: as given when
 * absolute, then (its last component when absolute) under the
 * HDF5_VDS_PREFIX entries, beside the source, and as given.
 * @return whether one exists, its path in out. */
static int find_vds_file(const struct hdf5_source *s, const char *name,
			 char *out, size_t len)
{
	if (name[0] == '/' && exists_at(NULL, 0, name, out, len))
		return 1;
	const char *base = name[0] == '/' ? strrchr(name, '/') + 1 : name;
	const char *dir = s->path;
	size_t dir_len = source_dir_len(s);
	return under_vds_prefix(dir, dir_len, base, out, len) ||
	       exists_at(dir, dir_len, base, out, len) ||
	       exists_at(NULL, 0, base, out, len);
}

/* HDF5 opens a virtual dataset's source at the first read of its rows, by
 * a name it resolves then, possibly from the working directory, which the
 * daemon leaves for "/"; what it cannot open it serves as fill values.
 * One element of mapping i read now opens it where it was checked, and
 * HDF5 keeps it open. */
static void open_vds_source(hid_t dset, hid_t dcpl, size_t i)
{
	hid_t vspace = H5Pget_virtual_vspace(dcpl, i);
	hid_t space = H5Dget_space(dset);
	hid_t type = H5Dget_type(dset);
	hsize_t at[2 * H5S_MAX_RANK] = { 0 }, one[H5S_MAX_RANK];
	unsigned char value[64];
	int ndims = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
	H5S_sel_type sel = vspace >= 0 ? H5Sget_select_type(vspace) :
					 H5S_SEL_ERROR;
	int first = sel == H5S_SEL_ALL ||
		    (sel == H5S_SEL_HYPERSLABS &&
		     H5Sget_select_hyper_blocklist(vspace, 0, 1, at) >= 0) ||
		    (sel == H5S_SEL_POINTS &&
		     H5Sget_select_elem_pointlist(vspace, 0, 1, at) >= 0);
	for (int d = 0; d < H5S_MAX_RANK; d++)
		one[d] = 1;
	if (first && ndims > 0 && type >= 0 &&
	    H5Tget_size(type) <= sizeof(value) &&
	    H5Sselect_hyperslab(space, H5S_SELECT_SET, at, NULL, one, NULL) >=
		    0) {
		hid_t mem = H5Screate_simple(1, one, NULL);
		if (mem >= 0) {
			H5Dread(dset, type, mem, space, H5P_DEFAULT, value);
			H5Sclose(mem);
		}
	}
	if (type >= 0)
		H5Tclose(type);
	if (space >= 0)
		H5Sclose(space);
	if (vspace >= 0)
		H5Sclose(vspace);
}

/* A virtual dataset reads its rows from other files, and HDF5 serves a
 * missing one's rows as fill values: each must exist at mount. Those of
 * the served rows are opened (open_vds_source) and watched for changes
 * from then on (watch); what is read whole at mount (indptr, columns)
 * need not be. Names with printf-style patterns (unlimited mappings) are
 * not checked. */
static int check_vds_files(struct hdf5_source *s, hid_t dset, const char *what,
			   int watch, char *err, size_t errlen)
{
	size_t count = 0;
	int rc = 0;
	hid_t dcpl = H5Dget_create_plist(dset);
	if (dcpl < 0 || H5Pget_layout(dcpl) != H5D_VIRTUAL ||
	    H5Pget_virtual_count(dcpl, &count) < 0)
		count = 0;
	for (size_t i = 0; i < count && rc == 0; i++) {
		char name[PATH_MAX] = "", found[2 * PATH_MAX];
		if (H5Pget_virtual_filename(dcpl, i, name, sizeof(name)) < 0 ||
		    strcmp(name, ".") == 0 || strchr(name, '%'))
			continue;
		if (!find_vds_file(s, name, found, sizeof(found))) {
			snprintf(err, errlen,
				 "%s: dataset %s is a virtual dataset whose "
				 "source file %s does not exist where HDF5 "
				 "looks (HDF5 would serve its rows as fill "
				 "values)",
				 s->path, what, name);
			rc = -ENOENT;
		} else if (watch && (rc = add_linked(s, found)) != 0) {
			snprintf(err, errlen, "%s: %s", found, strerror(-rc));
		} else if (watch) {
			open_vds_source(dset, dcpl, i);
		}
	}
	if (dcpl >= 0)
		H5Pclose(dcpl);
	return rc;
}

/* Where HDF5 1.10 opens the external raw data file name of a dataset: as
 * named when absolute, else under HDF5_EXTFILE_PREFIX when that is set
 * (a leading ${ORIGIN} is the source's directory), else in the working
 * directory (H5Pset_efile_prefix's documentation says the file's
 * directory; the library's code does not). A relative prefix, "." too,
 * would name other files once the daemon has left the working directory
 * (the variable outranks the mount's access property): refused.
 * @return 0, -EINVAL (the prefix is relative) or -errno of getcwd. */
static int external_file_path(const struct hdf5_source *s, const char *name,
			      char *out, size_t len)
{
	const char *env = getenv("HDF5_EXTFILE_PREFIX");
	const char *origin = "${ORIGIN}";
	char cwd[PATH_MAX];
	if (name[0] == '/') {
		snprintf(out, len, "%s", name);
	} else if (env && *env) {
		if (strncmp(env, origin, strlen(origin)) == 0)
			snprintf(out, len, "%.*s/%s/%s", (int)source_dir_len(s),
				 s->path, env + strlen(origin), name);
		else if (env[0] == '/')
			snprintf(out, len, "%s%s%s", env,
				 rfs_hdf5_ends_with(env, "/") ? "" : "/", name);
		else
			return -EINVAL;
	} else if (getcwd(cwd, sizeof(cwd))) {
		snprintf(out, len, "%s%s%s", cwd,
			 rfs_hdf5_ends_with(cwd, "/") ? "" : "/", name);
	} else {
		return -errno;
	}
	return 0;
}

/* The bytes of dataset dset's raw data (at most UINT64_MAX). */
static uint64_t raw_bytes(hid_t dset)
{
	hid_t space = H5Dget_space(dset), type = H5Dget_type(dset);
	hssize_t n = space >= 0 ? H5Sget_simple_extent_npoints(space) : 0;
	size_t elem = type >= 0 ? H5Tget_size(type) : 0;
	uint64_t bytes;
	if (n <= 0 || __builtin_mul_overflow((uint64_t)n, elem, &bytes))
		bytes = n <= 0 ? 0 : UINT64_MAX;
	if (type >= 0)
		H5Tclose(type);
	if (space >= 0)
		H5Sclose(space);
	return bytes;
}

/* A dataset in external raw data files (H5Pset_external): HDF5 opens
 * them at every read and serves what a short one lacks as zeros. Each
 * must hold the bytes the dataset takes from it; those of the served rows
 * are watched for changes like the source (watch). */
static int check_external_files(struct hdf5_source *s, hid_t dset,
				const char *what, int watch, char *err,
				size_t errlen)
{
	hid_t dcpl = H5Dget_create_plist(dset);
	int count = dcpl >= 0 ? H5Pget_external_count(dcpl) : 0;
	uint64_t left = count > 0 ? raw_bytes(dset) : 0;
	int rc = 0;
	for (int i = 0; i < count && left > 0 && rc == 0; i++) {
		char name[PATH_MAX] = "", path[2 * PATH_MAX] = "";
		off_t offset = 0;
		hsize_t size = 0;
		struct stat st;
		/* HDF5 1.10 copies with strncpy: room left for the NUL. */
		if (H5Pget_external(dcpl, (unsigned)i, sizeof(name) - 1, name,
				    &offset, &size) < 0) {
			snprintf(err, errlen,
				 "%s: dataset %s: cannot read "
				 "its list of external files",
				 s->path, what);
			rc = -EINVAL;
			break;
		}
		uint64_t take = size < left ? size : left; /* or UNLIMITED */
		left -= take;
		rc = external_file_path(s, name, path, sizeof(path));
		int fd = rc == 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
		if (rc == -EINVAL) {
			snprintf(err, errlen,
				 "%s: dataset %s is stored in external file "
				 "%s, and HDF5_EXTFILE_PREFIX (%s) is a "
				 "relative directory: rankfs reads from / "
				 "once mounted; give an absolute one, or one "
				 "that starts with ${ORIGIN}",
				 s->path, what, name,
				 getenv("HDF5_EXTFILE_PREFIX"));
		} else if (rc != 0 || fd < 0 || fstat(fd, &st) != 0) {
			rc = rc ? rc : -errno;
			snprintf(err, errlen,
				 "%s: dataset %s is stored in external file "
				 "%s, which cannot be read at %s: %s",
				 s->path, what, name, path, strerror(-rc));
		} else if ((uint64_t)st.st_size < take ||
			   (uint64_t)st.st_size - take < (uint64_t)offset) {
			rc = -EINVAL;
			snprintf(err, errlen,
				 "%s: dataset %s reads %llu bytes at offset "
				 "%lld of its external file %s, which has "
				 "%lld (HDF5 would serve the rest as zeros)",
				 s->path, what, (unsigned long long)take,
				 (long long)offset, path,
				 (long long)st.st_size);
		} else if (watch && (rc = add_linked(s, path)) != 0) {
			snprintf(err, errlen, "%s: %s", path, strerror(-rc));
		}
		if (fd >= 0)
			close(fd);
	}
	if (dcpl >= 0)
		H5Pclose(dcpl);
	return rc;
}

/* Checks the files other than the source that dataset dset's raw data
 * is read from (check_vds_files, check_external_files). */
int rfs_hdf5_check_linked_storage(struct hdf5_source *s, hid_t dset,
				  const char *what, int watch, char *err,
				  size_t errlen)
{
	int rc = check_vds_files(s, dset, what, watch, err, errlen);
	return rc ? rc :
		    check_external_files(s, dset, what, watch, err, errlen);
}

/* Why a file may no longer be as opened, for the log. */
enum change { UNCHANGED, UNREACHABLE, MOVED, RENAMED };

/* Whether an open file's bytes may differ from when it was opened: its
 * size or mtime moved (fstat first), or inotify saw a write (watch.c says
 * why in that order, and why not ctime). */
static enum change written(struct rfs_watch *w, int fd, int watch,
			   const struct stat *was, struct stat *now)
{
	if (fstat(fd, now) != 0)
		return UNREACHABLE;
	return now->st_size != was->st_size ||
			       now->st_mtim.tv_sec != was->st_mtim.tv_sec ||
			       now->st_mtim.tv_nsec != was->st_mtim.tv_nsec ||
			       (watch >= 0 &&
				rfs_watch_any_written(w, &watch, 1)) ?
		       MOVED :
		       UNCHANGED;
}

static int same_inode(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

static void log_written(const struct hdf5_source *s, const char *path,
			enum change why, const struct stat *was,
			const struct stat *now)
{
	char what[2 * PATH_MAX + 32];
	if (path == s->path)
		snprintf(what, sizeof(what), "source %s", path);
	else
		snprintf(what, sizeof(what), "%s (linked from source %s)", path,
			 s->path);
	char how[128];
	if (why == UNREACHABLE)
		snprintf(how, sizeof(how),
			 "its descriptor cannot be looked at");
	else if (why == RENAMED)
		snprintf(how, sizeof(how),
			 "another file or none by its name, which HDF5 opens");
	else if (now->st_size != was->st_size)
		snprintf(how, sizeof(how), "size %lld -> %lld",
			 (long long)was->st_size, (long long)now->st_size);
	else if (now->st_mtim.tv_sec != was->st_mtim.tv_sec ||
		 now->st_mtim.tv_nsec != was->st_mtim.tv_nsec)
		snprintf(how, sizeof(how), "mtime %lld.%09ld -> %lld.%09ld",
			 (long long)was->st_mtim.tv_sec, was->st_mtim.tv_nsec,
			 (long long)now->st_mtim.tv_sec, now->st_mtim.tv_nsec);
	else /* utime put mtime back */
		snprintf(how, sizeof(how),
			 "written, as inotify saw; size and mtime as before");
	rfs_log("%s changed in place (%s): new batches fail with EIO for "
		"the life of the mount (remount to serve the new bytes)",
		what, how);
}

/*
 * The mount serves the files it opened. A path renamed over or unlinked
 * changes nothing: the descriptors still reach the old, intact files. But
 * the opened file itself may be written (or truncated: HDF5 reads missing
 * bytes as zeros), and a batch read meanwhile would mix old and new rows.
 * So this runs before and after every read (source.c): once a file's
 * size or mtime differ from what was opened, or inotify saw a write to
 * it, every later read fails with EIO for the life of the mount, even if
 * mtime is put back. Linked
 * files are also checked by name: HDF5 opens a virtual dataset's sources
 * and external raw data files by name when it reads them. One fstat per
 * file per read is cheap next to the read.
 */
int rfs_hdf5_check_unchanged(struct rfs_source *base)
{
	struct hdf5_source *s = (struct hdf5_source *)base;
	struct stat now = { 0 };
	if (atomic_load(&s->changed))
		return -EIO;
	const char *path = s->path;
	const struct stat *was = &s->opened;
	enum change why =
		written(s->base.env.watch, s->fd, s->watch, was, &now);
	for (size_t i = 0; why == UNCHANGED && i < s->nlinked; i++) {
		const struct linked_file *l = &s->linked[i];
		struct stat named;
		path = l->path;
		was = &l->opened;
		why = written(s->base.env.watch, l->fd, l->watch, was, &now);
		if (why == UNCHANGED &&
		    (stat(path, &named) != 0 || !same_inode(was, &named)))
			why = RENAMED;
	}
	if (why == UNCHANGED)
		return 0;
	if (atomic_exchange(&s->changed, 1) == 0)
		log_written(s, path, why, was, &now);
	return -EIO;
}

int rfs_hdf5_reads_file(const struct rfs_source *base, dev_t dev, ino_t ino)
{
	const struct hdf5_source *s = (const struct hdf5_source *)base;
	if (s->opened.st_dev == dev && s->opened.st_ino == ino)
		return 1;
	for (size_t i = 0; i < s->nlinked; i++)
		if (s->linked[i].opened.st_dev == dev &&
		    s->linked[i].opened.st_ino == ino)
			return 1;
	return 0;
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
