/* SPDX-License-Identifier: MIT */
#include "source/dataset.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "core/buf.h"
#include "source/io/chunks.h"
#include "os/helper.h"
#include "source/dataset_var.h"
#include "os/deadline.h"
#include "core/log.h"
#include "core/rowsort.h"

struct rfs_dataset {
	struct rfs_chunk_cache *chunks; /* decoded chunks of every file */
	struct rfs_source_env env; /* lent to the sources, with chunks */
	struct rfs_helper *strings; /* HDF5's string reader, for every file */
	size_t nfiles;
	struct rfs_source **files;
	uint64_t *starts; /* nfiles + 1: first global row of each file */
	uint64_t fingerprint;
	struct rfs_source_info info; /* the first file's, as served */
	struct rfs_dataset_var var; /* served var names; the join */
	/* Each file read as it is stored: one file, no join or an
	 * identity one. Else rows go through the join's gather or remap. */
	int direct;
	size_t staging_row_bytes; /* dense: the widest file's row */
};

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && strcmp(s + n - m, suffix) == 0;
}

struct path_list {
	char **items;
	size_t count, cap;
};

static int push(struct path_list *l, char *path)
{
	if (!path)
		return -ENOMEM;
	if (l->count == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 8;
		char **items = realloc(l->items, cap * sizeof(*items));
		if (!items) {
			free(path);
			return -ENOMEM;
		}
		l->items = items;
		l->cap = cap;
	}
	l->items[l->count++] = path;
	return 0;
}

/* Adds path (taken), or the members of an annbatch collection. */
static int push_source(struct path_list *l, char *path, char *err,
		       size_t errlen)
{
	char **members;
	size_t n;
	if (!path)
		return -ENOMEM;
	int rc = rfs_source_members(path, &members, &n, err, errlen);
	if (rc <= 0) {
		if (rc == 0)
			return push(l, path);
		free(path);
		return rc;
	}
	free(path);
	rc = 0;
	for (size_t i = 0; i < n; i++) {
		if (rc == 0)
			rc = push(l, members[i]);
		else
			free(members[i]);
	}
	free(members);
	return rc;
}

/* Adds dir's *.h5ad and *.h5 regular files and *.zarr store
 * directories, in name (byte) order. */
static int expand_dir(const char *dir, struct path_list *l, char *err,
		      size_t errlen)
{
	DIR *d = opendir(dir);
	struct path_list found = { 0 };
	struct dirent *e;
	int rc = 0;
	if (!d) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", dir, strerror(-rc));
		return rc;
	}
	while (rc == 0 && (e = readdir(d))) {
		char *path;
		struct stat st;
		int zarr = ends_with(e->d_name, ".zarr");
		if (e->d_name[0] == '.' ||
		    (!ends_with(e->d_name, ".h5ad") &&
		     !ends_with(e->d_name, ".h5") && !zarr))
			continue;
		if (asprintf(&path, "%s/%s", dir, e->d_name) < 0) {
			rc = -ENOMEM;
			break;
		}
		/* One that cannot be looked at (a dangling link, an I/O
		 * error) fails the mount: skipped, this node would serve
		 * another row space than the others, silently. */
		if (stat(path, &st) != 0) {
			rc = -errno;
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
			free(path);
			break;
		}
		/* *.zarr: a store directory; other directories are not
		 * descended into. */
		if (zarr ? !S_ISDIR(st.st_mode) || !rfs_source_is_store(path) :
			   !S_ISREG(st.st_mode)) {
			free(path);
			continue;
		}
		rc = push(&found, path);
	}
	closedir(d);
	if (rc == 0 && found.count == 0) {
		snprintf(err, errlen,
			 "%s: no *.h5ad or *.h5 files (nor *.zarr stores) "
			 "in the directory",
			 dir);
		rc = -EINVAL;
	}
	if (found.count)
		qsort(found.items, found.count, sizeof(char *),
		      rfs_buf_compare_strings);
	for (size_t i = 0; i < found.count; i++) {
		if (rc == 0)
			rc = push_source(l, found.items[i], err, errlen);
		else
			free(found.items[i]);
	}
	free(found.items);
	return rc;
}

struct file_id {
	dev_t dev;
	ino_t ino;
	size_t at; /* in the list */
};

static int cmp_file_id(const void *a, const void *b)
{
	const struct file_id *x = a, *y = b;
	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return (x->at > y->at) - (x->at < y->at);
}

/* A file given twice (as itself, through a link, or in a directory also
 * given) would serve its rows twice over: refused. Sorted by identity,
 * so that directories of many shards cost n log n. */
static int check_distinct(const struct path_list *l, char *err, size_t errlen)
{
	struct file_id *ids = calloc(l->count ? l->count : 1, sizeof(*ids));
	size_t n = 0;
	if (!ids)
		return -ENOMEM;
	for (size_t i = 0; i < l->count; i++) {
		struct stat st;
		if (stat(l->items[i], &st) == 0) /* else opening says why */
			ids[n++] = (struct file_id){ st.st_dev, st.st_ino, i };
	}
	qsort(ids, n, sizeof(*ids), cmp_file_id);
	int rc = 0;
	for (size_t k = 1; k < n && rc == 0; k++) {
		if (ids[k].dev == ids[k - 1].dev &&
		    ids[k].ino == ids[k - 1].ino) {
			snprintf(err, errlen,
				 "%s: the same file as %s: each file may be "
				 "given once",
				 l->items[ids[k].at], l->items[ids[k - 1].at]);
			rc = -EINVAL;
		}
	}
	free(ids);
	return rc;
}

static int expand(char *const *paths, size_t n, struct path_list *l, char *err,
		  size_t errlen)
{
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct stat st;
		if (!paths[i][0]) { /* said ": No such file or directory" */
			snprintf(err, errlen,
				 "source %zu of %zu is an empty name (an "
				 "unset variable?): name a file, a zarr store "
				 "or a directory",
				 i + 1, n);
			rc = -ENOENT;
			break;
		}
		int dir = stat(paths[i], &st) == 0 && S_ISDIR(st.st_mode);
		if (dir && !rfs_source_is_store(paths[i]))
			rc = expand_dir(paths[i], l, err, errlen);
		else if (dir) /* a zarr store, or a collection of them */
			rc = push_source(l, strdup(paths[i]), err, errlen);
		else
			rc = push(l, strdup(paths[i]));
	}
	if (rc == 0)
		rc = check_distinct(l, err, errlen);
	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	return rc;
}

/* Says in err where the var names of files fa and fb first differ (their
 * fingerprints do): a position and both names, not their hashes. Read
 * again here, on the way to refusing the mount. @return 0 where it said
 * so, else -1 (names unreadable or alike), err then unchanged. */
static int say_var_difference(struct rfs_dataset *d, struct rfs_source *fa,
			      struct rfs_source *fb, char *err, size_t errlen)
{
	const struct rfs_source_info *a = rfs_source_info(fa);
	const struct rfs_source_info *b = rfs_source_info(fb);
	char **na = NULL, **nb = NULL, what[PATH_MAX + 64], unsaid[256];
	uint64_t ca = 0, cb = 0, k = 0;
	int said = -1, rc;
	snprintf(what, sizeof(what), "source %s: reading its var names again",
		 b->path);
	rfs_deadline_begin(d->env.deadline, what);
	rc = rfs_source_read_var_names(fa, &na, &ca, unsaid, sizeof(unsaid));
	if (rc != 0)
		goto out;
	rc = rfs_source_read_var_names(fb, &nb, &cb, unsaid, sizeof(unsaid));
	if (rc != 0)
		goto free_a;
	while (k < ca && k < cb && strcmp(na[k], nb[k]) == 0)
		k++;
	/* Names are said as read: rfs_log_say() escapes their control
	 * characters, as in every error line. */
	if (k < ca && k < cb) {
		snprintf(err, errlen,
			 "%s: var name %llu (counting from 0) is '%.200s' "
			 "where %s has '%.200s': var names differ, so the "
			 "columns are not the same genes (-o "
			 "var_join=inner|outer or var_names=FILE joins them)",
			 b->path, (unsigned long long)k, nb[k], a->path, na[k]);
		said = 0;
	}
	rfs_source_free_var_names(fb, nb, cb);
free_a:
	rfs_source_free_var_names(fa, na, ca);
out:
	rfs_deadline_end(d->env.deadline);
	return said;
}

/* Every file must serve rows of the same shape and type as the first. */
static int check_agree(struct rfs_dataset *d, struct rfs_source *fa,
		       struct rfs_source *fb, int join, char *err,
		       size_t errlen)
{
	const struct rfs_source_info *a = rfs_source_info(fa);
	const struct rfs_source_info *b = rfs_source_info(fb);
	if (a->sparse != b->sparse) {
		snprintf(err, errlen,
			 "%s: %s is %s, but %s's is %s (files "
			 "must agree)",
			 b->path, b->dataset, b->sparse ? "CSR" : "dense",
			 a->path, a->sparse ? "CSR" : "dense");
		return -EINVAL;
	}
	/* Joined on var names, the widths may differ (dataset_var.c), not
	 * the dtype: said alone, without the widths the join takes care of
	 * (and its advice to join). */
	if (join && a->dtype != b->dtype) {
		snprintf(err, errlen,
			 "%s: %s is %s, but %s's is %s (files must agree on "
			 "the dtype, joined on var names or not)",
			 b->path, b->dataset, rfs_dtype_name(b->dtype), a->path,
			 rfs_dtype_name(a->dtype));
		return -EINVAL;
	}
	if (a->ndims != b->ndims || (!join && a->cols != b->cols) ||
	    a->dtype != b->dtype) {
		snprintf(err, errlen,
			 "%s: %s has %llu columns of %s, but %s has %llu "
			 "columns of %s (files must agree%s)",
			 b->path, b->dataset, (unsigned long long)b->cols,
			 rfs_dtype_name(b->dtype), a->path,
			 (unsigned long long)a->cols, rfs_dtype_name(a->dtype),
			 a->has_var && b->has_var && a->cols != b->cols &&
					 a->dtype == b->dtype ?
				 "; -o var_join=inner|outer or var_names=FILE "
				 "joins files on their var names" :
				 "");
		return -EINVAL;
	}
	if (!join && a->has_var && b->has_var &&
	    a->var_fingerprint != b->var_fingerprint) {
		if (say_var_difference(d, fa, fb, err, errlen) == 0)
			return -EINVAL;
		snprintf(err, errlen,
			 "%s: var names differ from %s's (xxh3 %016llx vs "
			 "%016llx): the columns are not the same genes "
			 "(-o var_join=inner|outer or var_names=FILE joins "
			 "them)",
			 b->path, a->path,
			 (unsigned long long)b->var_fingerprint,
			 (unsigned long long)a->var_fingerprint);
		return -EINVAL;
	}
	return 0;
}

/* Descriptors a source file holds: rankfs's own and HDF5's. */
#define FDS_PER_FILE 2
/* Besides: stdio, /dev/fuse, inotify, io_uring rings, a log file. */
#define FDS_FIXED 64

/* Counts the descriptors n files need before opening any: past the limit
 * an open fails half-way with EMFILE. Raises the soft limit up to the
 * hard one if that is enough. @return 0 or -EMFILE with err set. */
static int check_descriptors(size_t n, char *err, size_t errlen)
{
	struct rlimit lim;
	rlim_t need = (rlim_t)n * FDS_PER_FILE + FDS_FIXED;
	if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= need)
		return 0;
	if (lim.rlim_max >= need) {
		lim.rlim_cur = need;
		if (setrlimit(RLIMIT_NOFILE, &lim) == 0)
			return 0;
	}
	snprintf(err, errlen,
		 "%zu source files need about %llu file descriptors (%d per "
		 "file and %d more), but RLIMIT_NOFILE allows %llu (hard "
		 "limit %llu): raise it (ulimit -n %llu) or mount fewer, "
		 "larger files",
		 n, (unsigned long long)need, FDS_PER_FILE, FDS_FIXED,
		 (unsigned long long)lim.rlim_cur,
		 (unsigned long long)lim.rlim_max, (unsigned long long)need);
	return -EMFILE;
}

/* The served description, var names and read paths, once the files
 * are open. */
static int serve(struct rfs_dataset *d, const struct rfs_dataset_join *join,
		 char *err, size_t errlen)
{
	enum rfs_varjoin_mode mode = join ? join->mode : RFS_VARJOIN_NONE;
	int rc = rfs_dataset_var_build(&d->var, &d->env, mode,
				       join ? join->names_file : NULL, d->files,
				       d->nfiles, err, errlen);
	if (rc != 0)
		return rc;
	d->info = *rfs_source_info(d->files[0]);
	d->direct = d->nfiles == 1;
	for (size_t f = 1; !d->var.join && f < d->nfiles; f++) {
		const struct rfs_source_info *fi = rfs_source_info(d->files[f]);
		d->info.nnz += fi->nnz;
		if (fi->max_row_nnz > d->info.max_row_nnz)
			d->info.max_row_nnz = fi->max_row_nnz;
	}
	for (size_t f = 0; f < d->nfiles; f++) {
		size_t rb = rfs_source_row_bytes(d->files[f]);
		if (rb > d->staging_row_bytes)
			d->staging_row_bytes = rb;
	}
	if (!d->var.join)
		return 0;
	d->info.cols = d->var.count;
	d->info.var_fingerprint = d->var.fingerprint;
	d->direct = d->nfiles == 1 && rfs_varjoin_identity(d->var.join, 0);
	if (d->info.sparse) {
		d->info.nnz = d->var.nnz;
		d->info.max_row_nnz = d->var.max_row_nnz;
	}
	/* Other columns, other bytes: another view_id. */
	uint64_t part[3] = { d->fingerprint, d->var.fingerprint, mode };
	d->fingerprint = XXH3_64bits(part, sizeof(part));
	return 0;
}

int rfs_dataset_open_joined(char *const *paths, size_t npaths,
			    const char *dataset,
			    const struct rfs_source_env *env,
			    size_t chunk_cache_bytes,
			    const struct rfs_dataset_join *join,
			    struct rfs_dataset **out, char *err, size_t errlen)
{
	int joined = join && join->mode != RFS_VARJOIN_NONE;
	struct path_list list = { 0 };
	struct rfs_dataset *d = calloc(1, sizeof(*d));
	int rc;
	if (d && env)
		d->env = *env;
	if (!d ||
	    rfs_chunks_create(chunk_cache_bytes, d->env.pool, &d->chunks) ||
	    rfs_helper_create(&d->strings) != 0)
		goto oom;
	d->env.chunks = d->chunks;
	d->env.strings = d->strings;
	rc = expand(paths, npaths, &list, err, errlen);
	if (rc == 0)
		rc = check_descriptors(list.count, err, errlen);
	if (rc != 0)
		goto fail;
	d->files = calloc(list.count, sizeof(*d->files));
	d->starts = calloc(list.count + 1, sizeof(*d->starts));
	if (!d->files || !d->starts)
		goto oom;
	XXH64_hash_t fp = 0;
	for (size_t i = 0; i < list.count; i++) {
		char what[PATH_MAX + 32];
		snprintf(what, sizeof(what), "source %s: opening it",
			 list.items[i]);
		rfs_deadline_begin(d->env.deadline, what);
		rc = rfs_source_open(list.items[i], dataset, &d->env,
				     &d->files[i], err, errlen);
		rfs_deadline_end(d->env.deadline);
		if (rc != 0)
			goto fail;
		/* The chunks its fingerprint decoded (its first and last
		 * rows'): kept, they would sit beside what the files and
		 * columns read next claim, and a default cache_mb is not set
		 * aside for those (view.c); served, they decode again. */
		rfs_chunks_drop(d->chunks);
		d->nfiles++;
		const struct rfs_source_info *info =
			rfs_source_info(d->files[i]);
		if (i > 0 && (rc = check_agree(d, d->files[0], d->files[i],
					       joined, err, errlen)) != 0)
			goto fail;
		d->starts[i + 1] = d->starts[i] + info->rows;
		uint64_t part[2] = { fp, info->fingerprint };
		fp = i == 0 ? info->fingerprint :
			      XXH3_64bits(part, sizeof(part));
	}
	d->fingerprint = fp;
	rc = serve(d, join, err, errlen);
	if (rc != 0)
		goto fail;
	*out = d;
	goto out;
oom:
	rc = -ENOMEM;
	snprintf(err, errlen, "out of memory");
fail:
	rfs_dataset_destroy(d);
out:
	rfs_buf_free_strings(list.items, list.count);
	return rc;
}

void rfs_dataset_share_chunks(struct rfs_dataset *d, size_t chunk_cache_bytes)
{
	rfs_chunks_limit(d->chunks, chunk_cache_bytes);
	for (size_t i = 0; i < d->nfiles; i++)
		rfs_source_take_share(d->files[i]);
	/* The first file's, as at open. */
	d->info.read_path = rfs_source_info(d->files[0])->read_path;
}

void rfs_dataset_opened(struct rfs_dataset *d)
{
	rfs_helper_stop(d->strings);
}

void rfs_dataset_destroy(struct rfs_dataset *d)
{
	if (!d)
		return;
	/* Sources first: the chunk cache's datasets borrow their fds. */
	rfs_dataset_var_free(&d->var, d->nfiles);
	for (size_t i = 0; i < d->nfiles; i++)
		rfs_source_destroy(d->files[i]);
	rfs_chunks_destroy(d->chunks);
	rfs_helper_destroy(d->strings);
	free(d->files);
	free(d->starts);
	free(d);
}

size_t rfs_dataset_files(const struct rfs_dataset *d)
{
	return d->nfiles;
}

const char *rfs_dataset_file_reading(const struct rfs_dataset *d, dev_t dev,
				     ino_t ino)
{
	for (size_t i = 0; i < rfs_dataset_files(d); i++)
		if (rfs_source_reads_file(d->files[i], dev, ino))
			return rfs_source_info(d->files[i])->path;
	return NULL;
}

struct rfs_source *rfs_dataset_source(const struct rfs_dataset *d, size_t i)
{
	return d->files[i];
}

const struct rfs_source_info *rfs_dataset_file(const struct rfs_dataset *d,
					       size_t i)
{
	return rfs_source_info(d->files[i]);
}

uint64_t rfs_dataset_file_start(const struct rfs_dataset *d, size_t i)
{
	return d->starts[i];
}

uint64_t rfs_dataset_rows(const struct rfs_dataset *d)
{
	return d->starts[d->nfiles];
}

const struct rfs_source_info *rfs_dataset_info(const struct rfs_dataset *d)
{
	return &d->info;
}

size_t rfs_dataset_row_bytes(const struct rfs_dataset *d)
{
	return d->info.cols * rfs_dtype_size(d->info.dtype);
}

enum rfs_varjoin_mode rfs_dataset_var_join(const struct rfs_dataset *d)
{
	return d->var.mode;
}

uint64_t rfs_dataset_var_count(const struct rfs_dataset *d)
{
	return d->var.count;
}

const char *rfs_dataset_var_name(const struct rfs_dataset *d, uint64_t i)
{
	return d->var.join ? rfs_varjoin_name(d->var.join, i) : d->var.names[i];
}

uint64_t rfs_dataset_var_fingerprint(const struct rfs_dataset *d)
{
	return d->var.fingerprint;
}

uint64_t rfs_dataset_fingerprint(const struct rfs_dataset *d)
{
	return d->fingerprint;
}

int64_t rfs_dataset_mtime(const struct rfs_dataset *d)
{
	int64_t newest = 0;
	for (size_t i = 0; i < d->nfiles; i++)
		if (rfs_source_info(d->files[i])->mtime > newest)
			newest = rfs_source_info(d->files[i])->mtime;
	return newest;
}

/* Of rows sorted in w, those from w[i] on that file f holds, as its own
 * row ids in local: @return the end of the stretch. */
static size_t file_stretch(const struct rfs_dataset *d, size_t f,
			   const struct rfs_wanted *w, size_t i, size_t n,
			   int64_t *local)
{
	size_t j = i;
	for (; j < n && w[j].row < d->starts[f + 1]; j++)
		local[j - i] = (int64_t)(w[j].row - d->starts[f]);
	return j;
}

int rfs_dataset_read_rows(struct rfs_dataset *d, const int64_t *rows, size_t n,
			  void *dst)
{
	if (d->direct)
		return rfs_source_read_rows(d->files[0], rows, n, dst);

	/* Sorted, each file's rows are one stretch: read it as one fetch
	 * from that file into a staging buffer, then put rows in place
	 * (joined: gathered onto the served columns). */
	size_t rb = rfs_dataset_row_bytes(d);
	size_t elem = rfs_dtype_size(d->info.dtype);
	struct rfs_wanted *w = rfs_rowsort(rows, n);
	int64_t *local = malloc(n * sizeof(*local));
	unsigned char *staging = malloc(n * d->staging_row_bytes + 1);
	unsigned char *out = dst;
	int rc = -ENOMEM;
	if (!w || !local || !staging)
		goto out;
	rc = 0;
	size_t i = 0;
	for (size_t f = 0; f < d->nfiles && i < n && rc == 0; f++) {
		size_t j = file_stretch(d, f, w, i, n, local);
		if (j == i)
			continue;
		rc = rfs_source_read_rows(d->files[f], local, j - i, staging);
		int gather = d->var.join &&
			     !rfs_varjoin_identity(d->var.join, f);
		size_t fb = rfs_source_row_bytes(d->files[f]);
		for (size_t k = i; k < j && rc == 0; k++) {
			if (gather)
				rfs_varjoin_gather(d->var.join, f,
						   staging + (k - i) * fb,
						   out + w[k].slot * rb, elem);
			else
				memcpy(out + w[k].slot * rb,
				       staging + (k - i) * rb, rb);
		}
		i = j;
	}
out:
	free(w);
	free(local);
	free(staging);
	return rc;
}

size_t rfs_dataset_read_scratch(const struct rfs_dataset *d, uint64_t n,
				uint64_t nnz)
{
	/* Joined, nnz served are read as up to nnz + n x max_dropped stored
	 * ones (max_dropped is 0 where no file drops a column). */
	size_t most = 0; /* of one file's read, one file at a time */
	for (size_t f = 0; f < d->nfiles; f++) {
		size_t one = rfs_source_read_scratch(
			d->files[f], n, nnz + n * d->var.max_dropped);
		most = one > most ? one : most;
	}
	if (d->direct)
		return most;
	if (!d->info.sparse) /* sorted rows, local ids, staging */
		return most + n * (sizeof(struct rfs_wanted) + sizeof(int64_t) +
				   d->staging_row_bytes);
	/* sorted rows, local ids, the joined rfs_csr, and joined, a row
	 * sorted in scratch of its own */
	size_t elem = rfs_dtype_size(d->info.dtype);
	return most + n * (sizeof(struct rfs_wanted) + sizeof(int64_t)) +
	       (n + 1) * sizeof(uint64_t) + nnz * (elem + sizeof(int64_t)) +
	       (d->var.join ? rfs_varjoin_row_scratch(d->var.widest, elem) : 0);
}

/* The file holding global row (binary search over the starts). */
static size_t file_of(const struct rfs_dataset *d, uint64_t row)
{
	size_t lo = 0, hi = d->nfiles;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (d->starts[mid] <= row)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

uint64_t rfs_dataset_row_nnz(const struct rfs_dataset *d, uint64_t row)
{
	size_t f = file_of(d, row);
	if (d->var.served_nnz && d->var.served_nnz[f])
		return d->var.served_nnz[f][row - d->starts[f]];
	return rfs_source_row_nnz(d->files[f], row - d->starts[f]);
}

int rfs_dataset_read_csr(struct rfs_dataset *d, const int64_t *rows, size_t n,
			 void *values, struct rfs_csr *out)
{
	if (d->direct)
		return rfs_source_read_csr(d->files[0], rows, n, values, out);

	/* Sorted, each file's rows are one stretch: read it as one fetch,
	 * then every row to its slot (joined: remapped onto the served
	 * columns first). */
	size_t elem = rfs_dtype_size(rfs_dataset_info(d)->dtype);
	struct rfs_wanted *w = rfs_rowsort(rows, n);
	int64_t *local = malloc((n ? n : 1) * sizeof(*local));
	/* A row is sorted in scratch: room for the fullest stored row. */
	void *scratch =
		d->var.join ?
			malloc(rfs_varjoin_row_scratch(d->var.widest, elem)) :
			NULL;
	int rc = -ENOMEM;
	*out = (struct rfs_csr){ .rows = n, .pool = d->env.pool };
	out->start = calloc(n + 1, sizeof(*out->start));
	if (!w || !local || !out->start || (d->var.join && !scratch))
		goto out;
	for (size_t i = 0; i < n; i++)
		out->start[i + 1] = out->start[i] +
				    rfs_dataset_row_nnz(d, (uint64_t)rows[i]);
	out->values = values ? values : malloc(out->start[n] * elem + 1);
	out->values_borrowed = values != NULL;
	if (!out->values || rfs_source_csr_alloc_cols(out) != 0)
		goto out;
	rc = 0;
	size_t i = 0;
	for (size_t f = 0; f < d->nfiles && i < n && rc == 0; f++) {
		size_t j = file_stretch(d, f, w, i, n, local);
		if (j == i)
			continue;
		struct rfs_csr part = { 0 };
		rc = rfs_source_read_csr(d->files[f], local, j - i, NULL,
					 &part);
		int remap = d->var.join &&
			    !rfs_varjoin_identity(d->var.join, f);
		for (size_t k = 0; k < j - i && rc == 0; k++) {
			size_t slot = w[i + k].slot;
			uint64_t len = part.start[k + 1] - part.start[k];
			uint64_t to = out->start[slot];
			uint64_t counted = out->start[slot + 1] - to;
			if (remap)
				len = rfs_varjoin_remap_row(
					d->var.join, f,
					part.cols + part.start[k],
					(char *)part.values +
						part.start[k] * elem,
					elem, len, scratch);
			/* Counted at open: a file changed since is EIO. */
			if (len != counted) {
				rfs_log("%s: row %lld: %llu stored values "
					"served, %llu counted at mount",
					rfs_source_info(d->files[f])->path,
					(long long)local[k],
					(unsigned long long)len,
					(unsigned long long)counted);
				rc = -EIO;
				break;
			}
			memcpy((char *)out->values + to * elem,
			       (char *)part.values + part.start[k] * elem,
			       len * elem);
			memcpy(out->cols + to, part.cols + part.start[k],
			       len * sizeof(int64_t));
		}
		rfs_source_csr_free(&part); /* zeroed on a failed read */
		i = j;
	}
out:
	if (rc != 0)
		rfs_source_csr_free(out);
	free(w);
	free(local);
	free(scratch);
	return rc;
}

int rfs_dataset_read_column(struct rfs_dataset *d, const char *name,
			    struct rfs_column *out, char *err, size_t errlen)
{
	*out = (struct rfs_column){ 0 };
	for (size_t i = 0; i < d->nfiles; i++) {
		struct rfs_column part;
		const char *path = rfs_dataset_file(d, i)->path;
		char what[PATH_MAX + 300];
		snprintf(what, sizeof(what), "source %s: reading column %.256s",
			 path, name);
		rfs_deadline_begin(d->env.deadline, what);
		int rc = rfs_source_read_column(d->files[i], name, &part, err,
						errlen);
		rfs_deadline_end(d->env.deadline);
		snprintf(what, sizeof(what), "column '%.256s'", name);
		if (rc == 0 && (rc = rfs_column_append(out, &part, path, what,
						       err, errlen)) != 0)
			rfs_column_free(&part);
		if (rc != 0) {
			rfs_column_free(out);
			return rc;
		}
	}
	return 0;
}
