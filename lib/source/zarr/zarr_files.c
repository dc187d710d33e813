/* SPDX-License-Identifier: MIT */
/*
 * The chunk files of a zarr array: their keys, the walk at mount that
 * lists those present (and watches their directories), each one's
 * identity at mount, and the checks that a file read is still as at
 * mount. A served array records the identity (stat) of each chunk file
 * its directories hold, listed, not of each one its shape claims: 2^24
 * claimed and a few written were 2^24 stats. Any difference, or a file
 * appearing or vanishing, is a change: the source's sticky flag is set
 * and every later read is EIO, as for a written HDF5 file
 * (docs/reliability.md).
 */
#include "source/zarr/zarr.h"

#include <errno.h>
#include <fts.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "os/watch.h"

void rfs_zarr_id_of(const struct stat *st, struct rfs_zarr_id *id)
{
	*id = (struct rfs_zarr_id){ .present = 1,
				    .dev = st->st_dev,
				    .ino = st->st_ino,
				    .size = st->st_size,
				    .mtime = st->st_mtim,
				    .ctime = st->st_ctim };
}

/* 1 when present and st match id. */
static int id_same(const struct rfs_zarr_id *id, const struct stat *st)
{
	return id->present && id->dev == st->st_dev && id->ino == st->st_ino &&
	       id->size == st->st_size &&
	       id->mtime.tv_sec == st->st_mtim.tv_sec &&
	       id->mtime.tv_nsec == st->st_mtim.tv_nsec &&
	       id->ctime.tv_sec == st->st_ctim.tv_sec &&
	       id->ctime.tv_nsec == st->st_ctim.tv_nsec;
}

/* The chunk (shard) file at file grid position f. */
static void chunk_key(const struct rfs_zarr_array *a, uint64_t f, char *out,
		      size_t n)
{
	uint64_t i = f / a->grid[1], j = f % a->grid[1];
	char sep = a->m.sep;
	int w = a->m.prefix_c ? snprintf(out, n, "c%c", sep) : 0;
	if (a->m.ndims == 1)
		snprintf(out + w, n - (size_t)w, "%llu", (unsigned long long)i);
	else
		snprintf(out + w, n - (size_t)w, "%llu%c%llu",
			 (unsigned long long)i, sep, (unsigned long long)j);
}

void rfs_zarr_chunk_path(const struct rfs_zarr_array *a, uint64_t f, char *out,
			 size_t n)
{
	char k[64];
	chunk_key(a, f, k, sizeof(k));
	snprintf(out, n, "%s/%s", a->dir, k);
}

/* The grid position of the chunk file at rel (a path below the array's
 * directory), or -1 when it is not one: the key chunk_key() writes for a
 * position in the grid, no other spelling. */
static int64_t key_position(const struct rfs_zarr_array *a, const char *rel)
{
	const char *p = rel;
	uint64_t at[2] = { 0, 0 };
	char key[64];
	if (a->m.prefix_c && (*p++ != 'c' || *p++ != a->m.sep))
		return -1;
	for (int d = 0; d < a->m.ndims; d++) {
		if ((d && *p++ != a->m.sep) || *p < '0' || *p > '9')
			return -1;
		char *end;
		errno = 0;
		at[d] = strtoull(p, &end, 10);
		if (errno || at[d] >= a->grid[d])
			return -1;
		p = end;
	}
	uint64_t f = at[0] * a->grid[1] + at[1];
	chunk_key(a, f, key, sizeof(key));
	return *p == '\0' && strcmp(key, rel) == 0 ? (int64_t)f : -1;
}

static int cmp_file(const void *x, const void *y)
{
	const struct rfs_zarr_file *a = x, *b = y;
	return (a->f > b->f) - (a->f < b->f);
}

/* The identity at mount of chunk file f: not present when not listed. */
const struct rfs_zarr_id *rfs_zarr_file_id(const struct rfs_zarr_array *a,
					   uint64_t f)
{
	static const struct rfs_zarr_id absent;
	struct rfs_zarr_file key = { .f = f };
	const struct rfs_zarr_file *found =
		a->nfiles ? bsearch(&key, a->files, a->nfiles, sizeof(key),
				    cmp_file) :
			    NULL;
	return found ? &found->id : &absent;
}

/* Records chunk file f's identity, looked up by name (a link followed,
 * as a read opens it); absent, nothing. @return 0, -ENOMEM, -EIO (err
 * set). */
static int add_file(struct rfs_zarr_array *a, uint64_t f, const char *path,
		    size_t *room, char *err, size_t errlen)
{
	struct stat st;
	if (stat(path, &st) != 0) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -EIO;
	}
	if (a->nfiles >= *room) {
		size_t more = a->nfiles ? 2 * a->nfiles : 16;
		void *p = realloc(a->files, more * sizeof(*a->files));
		if (!p)
			return -ENOMEM;
		a->files = p;
		*room = more;
	}
	a->files[a->nfiles].f = f;
	rfs_zarr_id_of(&st, &a->files[a->nfiles++].id);
	return 0;
}

/* Whether zarr reads name in an array's directories: a chunk key part
 * (digits, '.' between them; v3's "c", or "c." before them with the '.'
 * separator), or metadata. A lock file or a note beside the chunks is no
 * change to the array. */
static int read_by_zarr(const char *name)
{
	static const char *const meta[] = { ".zarray",	 ".zattrs",
					    ".zgroup",	 ".zmetadata",
					    "zarr.json", "c" };
	for (size_t i = 0; i < sizeof(meta) / sizeof(*meta); i++)
		if (strcmp(name, meta[i]) == 0)
			return 1;
	if (name[0] == 'c' && name[1] == '.')
		name += 2;
	return name[0] && strspn(name, "0123456789.") == strlen(name);
}

/* Adds a watch on the directory at path, unless one could not be added
 * before (*unwatched): reads then look every file up. */
static int watch_dir(struct rfs_zarr_array *a, const char *path, size_t *room,
		     int *unwatched)
{
	if (*unwatched)
		return 0;
	if (a->ndir_watches >= *room) {
		size_t more = a->ndir_watches ? 2 * a->ndir_watches : 16;
		int *p = realloc(a->dir_watches, more * sizeof(*p));
		if (!p)
			return -ENOMEM;
		a->dir_watches = p;
		*room = more;
	}
	int wd = rfs_watch_add_dir(a->watch, path, read_by_zarr);
	if (wd < 0)
		*unwatched = 1;
	else
		a->dir_watches[a->ndir_watches++] = wd;
	return wd >= 0;
}

/* Lists the chunk files present under the array's directory into
 * a->files; where the walk cannot see them all (a directory it cannot
 * read, a link to one, the array's own directory a link), each file the
 * shape claims is looked up instead. watch: also watches every directory
 * (the chunk files' and those where absent ones would appear), so that a
 * read need not look every chunk file up by name to tell it is as at
 * mount: a stat by name per row was a third of the daemon's CPU for a
 * CSR store. Without inotify (or past fs.inotify.max_user_watches) the
 * reads look files up. fts, not nftw: its state is the walk's own. */
static int walk_dirs(struct rfs_zarr_array *a, int watch, char *err,
		     size_t errlen)
{
	free(a->files); /* a walk before: listed again */
	a->files = NULL;
	a->nfiles = 0;
	size_t room = 0, watch_room = 0;
	int unwatched = 0, unlisted = 0, rc = 0, failed;
	/* Trailing slashes stripped ("obs/x/" from a column named
	 * "/obs/x/"): the keys are what follows the directory's spelling. */
	char root[4200];
	size_t len = strlen(a->dir);
	while (len > 1 && a->dir[len - 1] == '/')
		len--;
	snprintf(root, sizeof(root), "%.*s", (int)len, a->dir);
	char *roots[] = { root, NULL };
	FTS *fts = fts_open(roots, FTS_PHYSICAL | FTS_NOCHDIR, NULL);
	FTSENT *e = NULL;
	for (failed = !fts; !failed && rc == 0;) {
		errno = 0;
		if (!(e = fts_read(fts))) {
			failed = errno != 0;
			break;
		}
		struct stat target;
		const char *path = e->fts_path;
		int info = e->fts_info, top = e->fts_level == 0;
		if (info == FTS_D && watch) {
			rc = watch_dir(a, path, &watch_room, &unwatched);
			e->fts_number = rc > 0; /* its watch is the last one */
			rc = rc < 0 ? rc : 0;
		} else if (info == FTS_ERR || (info == FTS_NS && top) ||
			   (info == FTS_DNR && e->fts_errno != EACCES)) {
			errno = e->fts_errno; /* as nftw's: the walk fails */
			failed = 1;
		} else if (info == FTS_DNR || info == FTS_NS ||
			   ((info == FTS_SL || info == FTS_SLNONE) &&
			    stat(path, &target) == 0 &&
			    S_ISDIR(target.st_mode))) {
			if (info == FTS_DNR && e->fts_number) /* not read */
				rfs_watch_forget(
					a->watch,
					a->dir_watches[--a->ndir_watches]);
			unlisted = 1; /* a linked directory is not entered */
		} else if (info == FTS_D || info == FTS_DP || info == FTS_DC) {
		} else if (!top && path[len] == '/') {
			int64_t f = key_position(a, path + len + 1);
			if (f >= 0)
				rc = add_file(a, (uint64_t)f, path, &room, err,
					      errlen);
		} else if (!top) {
			unlisted = 1; /* not where it should be: look up each */
		}
	}
	int walk_errno = errno;
	if (fts)
		fts_close(fts);
	/* No directory (metadata consolidated, no chunk written): no file. */
	if (failed && rc == 0 && walk_errno != ENOENT) {
		snprintf(err, errlen, "%s: cannot be listed (%s)", a->dir,
			 strerror(walk_errno));
		rc = -EIO;
	}
	if (rc == 0 && unlisted) {
		a->nfiles = 0;
		char path[4200];
		for (uint64_t f = 0; f < a->grid[0] * a->grid[1] && rc == 0;
		     f++) {
			rfs_zarr_chunk_path(a, f, path, sizeof(path));
			rc = add_file(a, f, path, &room, err, errlen);
		}
	}
	if (unwatched) { /* not all: reads would miss a directory */
		for (size_t i = 0; i < a->ndir_watches; i++)
			rfs_watch_forget(a->watch, a->dir_watches[i]);
		free(a->dir_watches);
		a->dir_watches = NULL;
		a->ndir_watches = 0;
	}
	if (rc == 0 && a->nfiles)
		qsort(a->files, a->nfiles, sizeof(*a->files), cmp_file);
	return rc;
}

int rfs_zarr_array_watch(struct rfs_zarr_array *a, struct rfs_watch *w,
			 char *err, size_t errlen)
{
	a->watch = w;
	struct stat st;
	if (stat(a->meta_file, &st) != 0) {
		snprintf(err, errlen, "%s: %s", a->meta_file, strerror(errno));
		return -EIO;
	}
	rfs_zarr_id_of(&st, &a->meta_id);
	/* Watches before the files' identities: no change between. */
	int rc = walk_dirs(a, 1, err, errlen);
	a->watched = rc == 0;
	return rc;
}

void rfs_zarr_log_changed(struct rfs_zarr_array *a, const char *path)
{
	if (a->changed && atomic_exchange(a->changed, 1) == 0)
		rfs_log("source %s: %s (array %s) changed since the mount: "
			"new batches fail with EIO for the life of the mount "
			"(remount to serve the new bytes)",
			a->store, path, a->name);
}

/* A file now as it was at mount: stat by name (st NULL) or st given. */
int rfs_zarr_same_as_mount(struct rfs_zarr_array *a,
			   const struct rfs_zarr_id *id, const char *path,
			   const struct stat *st)
{
	struct stat now;
	int ok;
	if (st)
		ok = id_same(id, st);
	else if (stat(path, &now) == 0)
		ok = id_same(id, &now);
	else
		ok = errno == ENOENT && !id->present;
	if (!ok)
		rfs_zarr_log_changed(a, path);
	return ok;
}

int rfs_zarr_array_check_meta(struct rfs_zarr_array *a)
{
	if (a->changed && atomic_load(a->changed))
		return -EIO;
	if (!a->watched)
		return 0;
	return rfs_zarr_same_as_mount(a, &a->meta_id, a->meta_file, NULL) ?
		       0 :
		       -EIO;
}

int rfs_zarr_array_check(struct rfs_zarr_array *a, uint64_t first,
			 uint64_t last)
{
	char path[4200];
	if (!a->watched)
		return 0;
	if (a->dir_watches) {
		if (!rfs_watch_any_written(a->watch, a->dir_watches,
					   a->ndir_watches))
			return 0;
		/* Seen once (the flag is sticky): name the file for the log,
		 * else the directory (a new name, its attributes). */
		for (size_t k = 0; k < a->nfiles; k++) {
			rfs_zarr_chunk_path(a, a->files[k].f, path,
					    sizeof(path));
			if (!rfs_zarr_same_as_mount(a, &a->files[k].id, path,
						    NULL))
				return -EIO;
		}
		rfs_zarr_log_changed(a, a->dir);
		return -EIO;
	}
	for (uint64_t i = first / a->m.chunk[0]; i <= last / a->m.chunk[0]; i++)
		for (uint64_t j = 0; j < a->grid[1]; j++) {
			uint64_t f = i * a->grid[1] + j;
			rfs_zarr_chunk_path(a, f, path, sizeof(path));
			if (!rfs_zarr_same_as_mount(a, rfs_zarr_file_id(a, f),
						    path, NULL))
				return -EIO;
		}
	return 0;
}

/* For a read of the whole array (at mount, unwatched): lists the chunk
 * files present, so that absent ones read as fill unopened (a column's
 * shape can claim 2^24 with none written: an open each took 9 s).
 * @return 1 when listed, 0 when not (each is opened). */
int rfs_zarr_files_list(struct rfs_zarr_array *a)
{
	char err[256];
	if (a->watched)
		return 0;
	if (walk_dirs(a, 0, err, sizeof(err)) == 0)
		return 1;
	a->nfiles = 0;
	return 0;
}

int rfs_zarr_array_reads_file(const struct rfs_zarr_array *a, dev_t dev,
			      ino_t ino)
{
	struct stat st;
	int yes = a->dir && a->meta_id.dev == dev && a->meta_id.ino == ino;
	for (size_t i = 0; i < a->nfiles && !yes; i++)
		yes = a->files[i].id.dev == dev && a->files[i].id.ino == ino;
	return yes || (a->dir && stat(a->dir, &st) == 0 && st.st_dev == dev &&
		       st.st_ino == ino);
}
