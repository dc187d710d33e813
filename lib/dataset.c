#include "dataset.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "chunks.h"
#include "deadline.h"
#include "rowsort.h"

struct rfs_dataset {
	struct rfs_chunk_cache *chunks; /* decoded chunks of every file */
	size_t nfiles;
	struct rfs_source **files;
	uint64_t *starts; /* nfiles + 1: first global row of each file */
	uint64_t fingerprint;
};

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
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
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return -errno;
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
		qsort(found.items, found.count, sizeof(char *), cmp_str);
	for (size_t i = 0; i < found.count; i++) {
		if (rc == 0)
			rc = push_source(l, found.items[i], err, errlen);
		else
			free(found.items[i]);
	}
	free(found.items);
	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
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
	if (!ids) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
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
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		int rc;
		int dir = stat(paths[i], &st) == 0 && S_ISDIR(st.st_mode);
		if (dir && !rfs_source_is_store(paths[i]))
			rc = expand_dir(paths[i], l, err, errlen);
		else if (dir) /* a zarr store, or a collection of them */
			rc = push_source(l, strdup(paths[i]), err, errlen);
		else
			rc = push(l, strdup(paths[i]));
		if (rc == -ENOMEM)
			snprintf(err, errlen, "out of memory");
		if (rc != 0)
			return rc;
	}
	return check_distinct(l, err, errlen);
}

/* Every file must serve rows of the same shape and type as the first. */
static int check_agree(const struct rfs_source_info *a,
		       const struct rfs_source_info *b, char *err,
		       size_t errlen)
{
	if (a->sparse != b->sparse) {
		snprintf(err, errlen,
			 "%s: %s is %s, but %s's is %s (files "
			 "must agree)",
			 b->path, b->dataset, b->sparse ? "CSR" : "dense",
			 a->path, a->sparse ? "CSR" : "dense");
		return -EINVAL;
	}
	if (a->ndims != b->ndims || a->cols != b->cols ||
	    a->dtype != b->dtype) {
		snprintf(err, errlen,
			 "%s: %s has %llu columns of %s, but %s has %llu "
			 "columns of %s (files must agree)",
			 b->path, b->dataset, (unsigned long long)b->cols,
			 rfs_dtype_name(b->dtype), a->path,
			 (unsigned long long)a->cols, rfs_dtype_name(a->dtype));
		return -EINVAL;
	}
	if (a->has_var && b->has_var &&
	    a->var_fingerprint != b->var_fingerprint) {
		snprintf(err, errlen,
			 "%s: var names differ from %s's (xxh3 %016llx vs "
			 "%016llx): the columns are not the same genes",
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

int rfs_dataset_open(char *const *paths, size_t npaths, const char *dataset,
		     size_t chunk_cache_bytes, struct rfs_dataset **out,
		     char *err, size_t errlen)
{
	struct path_list list = { 0 };
	struct rfs_dataset *d = calloc(1, sizeof(*d));
	int rc = -ENOMEM;
	if (!d || rfs_chunks_create(chunk_cache_bytes, &d->chunks) != 0) {
		free(d);
		snprintf(err, errlen, "out of memory");
		return rc;
	}
	rc = expand(paths, npaths, &list, err, errlen);
	if (rc == 0)
		rc = check_descriptors(list.count, err, errlen);
	if (rc != 0)
		goto fail;
	d->files = calloc(list.count, sizeof(*d->files));
	d->starts = calloc(list.count + 1, sizeof(*d->starts));
	if (!d->files || !d->starts) {
		rc = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	XXH64_hash_t fp = 0;
	for (size_t i = 0; i < list.count; i++) {
		char what[PATH_MAX + 32];
		snprintf(what, sizeof(what), "source %s: opening it",
			 list.items[i]);
		rfs_deadline_begin(what);
		rc = rfs_source_open(list.items[i], dataset, d->chunks,
				     &d->files[i], err, errlen);
		rfs_deadline_end();
		if (rc != 0)
			goto fail;
		d->nfiles++;
		const struct rfs_source_info *info =
			rfs_source_info(d->files[i]);
		if (i > 0 && (rc = check_agree(rfs_source_info(d->files[0]),
					       info, err, errlen)) != 0)
			goto fail;
		d->starts[i + 1] = d->starts[i] + info->rows;
		uint64_t part[2] = { fp, info->fingerprint };
		fp = i == 0 ? info->fingerprint :
			      XXH3_64bits(part, sizeof(part));
	}
	d->fingerprint = fp;
	*out = d;
	rc = 0;
	goto out;
fail:
	rfs_dataset_destroy(d);
out:
	for (size_t i = 0; i < list.count; i++)
		free(list.items[i]);
	free(list.items);
	return rc;
}

void rfs_dataset_destroy(struct rfs_dataset *d)
{
	if (!d)
		return;
	/* Sources first: the chunk cache's datasets borrow their fds. */
	for (size_t i = 0; i < d->nfiles; i++)
		rfs_source_destroy(d->files[i]);
	rfs_chunks_destroy(d->chunks);
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
	return rfs_source_info(d->files[0]);
}

size_t rfs_dataset_row_bytes(const struct rfs_dataset *d)
{
	return rfs_source_row_bytes(d->files[0]);
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

int rfs_dataset_read_rows(struct rfs_dataset *d, const int64_t *rows, size_t n,
			  void *dst)
{
	if (d->nfiles == 1)
		return rfs_source_read_rows(d->files[0], rows, n, dst);

	/* Sorted, each file's rows are one stretch: read it as one fetch
	 * from that file into a staging buffer, then put rows in place. */
	size_t rb = rfs_dataset_row_bytes(d);
	struct rfs_wanted *w = rfs_rowsort(rows, n);
	int64_t *local = malloc(n * sizeof(*local));
	unsigned char *staging = malloc(n * rb);
	unsigned char *out = dst;
	int rc = -ENOMEM;
	if (!w || !local || !staging)
		goto out;
	rc = 0;
	size_t i = 0;
	for (size_t f = 0; f < d->nfiles && i < n && rc == 0; f++) {
		size_t j = i;
		while (j < n && w[j].row < d->starts[f + 1]) {
			local[j - i] = (int64_t)(w[j].row - d->starts[f]);
			j++;
		}
		if (j == i)
			continue;
		rc = rfs_source_read_rows(d->files[f], local, j - i, staging);
		for (size_t k = i; k < j && rc == 0; k++)
			memcpy(out + w[k].slot * rb, staging + (k - i) * rb,
			       rb);
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
	size_t most = 0; /* of one file's read, one file at a time */
	for (size_t f = 0; f < d->nfiles; f++) {
		size_t one = rfs_source_read_scratch(d->files[f], n, nnz);
		most = one > most ? one : most;
	}
	if (d->nfiles == 1)
		return most;
	if (!rfs_dataset_info(d)->sparse) /* sorted rows, local ids, staging */
		return most + n * (sizeof(struct rfs_wanted) + sizeof(int64_t) +
				   rfs_dataset_row_bytes(d));
	/* local, slots, and the joined rfs_csr */
	size_t elem = rfs_dtype_size(rfs_dataset_info(d)->dtype);
	return most + n * (sizeof(int64_t) + sizeof(size_t)) +
	       (n + 1) * sizeof(uint64_t) + nnz * (elem + sizeof(int64_t));
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

uint64_t rfs_dataset_nnz(const struct rfs_dataset *d)
{
	uint64_t total = 0;
	for (size_t f = 0; f < d->nfiles; f++)
		total += rfs_source_info(d->files[f])->nnz;
	return total;
}

uint64_t rfs_dataset_max_row_nnz(const struct rfs_dataset *d)
{
	uint64_t most = 0;
	for (size_t f = 0; f < d->nfiles; f++)
		if (rfs_source_info(d->files[f])->max_row_nnz > most)
			most = rfs_source_info(d->files[f])->max_row_nnz;
	return most;
}

uint64_t rfs_dataset_row_nnz(const struct rfs_dataset *d, uint64_t row)
{
	size_t f = file_of(d, row);
	return rfs_source_row_nnz(d->files[f], row - d->starts[f]);
}

int rfs_dataset_read_csr(struct rfs_dataset *d, const int64_t *rows, size_t n,
			 void *values, struct rfs_csr *out)
{
	if (d->nfiles == 1)
		return rfs_source_read_csr(d->files[0], rows, n, values, out);

	/* Each file's rows in one fetch, then every row to its slot. */
	size_t elem = rfs_dtype_size(rfs_dataset_info(d)->dtype);
	int64_t *local = malloc((n ? n : 1) * sizeof(*local));
	size_t *slots = malloc((n ? n : 1) * sizeof(*slots));
	int rc = -ENOMEM;
	*out = (struct rfs_csr){ .rows = n };
	out->start = calloc(n + 1, sizeof(*out->start));
	if (!local || !slots || !out->start)
		goto out;
	for (size_t i = 0; i < n; i++)
		out->start[i + 1] = out->start[i] +
				    rfs_dataset_row_nnz(d, (uint64_t)rows[i]);
	out->values = values ? values : malloc(out->start[n] * elem + 1);
	out->values_borrowed = values != NULL;
	out->cols = malloc(out->start[n] * sizeof(int64_t) + 1);
	if (!out->values || !out->cols)
		goto out;
	rc = 0;
	for (size_t f = 0; f < d->nfiles && rc == 0; f++) {
		size_t m = 0;
		for (size_t i = 0; i < n; i++) {
			if (file_of(d, (uint64_t)rows[i]) != f)
				continue;
			local[m] = rows[i] - (int64_t)d->starts[f];
			slots[m++] = i;
		}
		if (m == 0)
			continue;
		struct rfs_csr part;
		rc = rfs_source_read_csr(d->files[f], local, m, NULL, &part);
		for (size_t k = 0; k < m && rc == 0; k++) {
			uint64_t len = part.start[k + 1] - part.start[k];
			uint64_t to = out->start[slots[k]];
			memcpy((char *)out->values + to * elem,
			       (char *)part.values + part.start[k] * elem,
			       len * elem);
			memcpy(out->cols + to, part.cols + part.start[k],
			       len * sizeof(int64_t));
		}
		if (rc == 0)
			rfs_source_csr_free(&part);
	}
out:
	if (rc != 0)
		rfs_source_csr_free(out);
	free(local);
	free(slots);
	return rc;
}

int rfs_dataset_read_column(struct rfs_dataset *d, const char *name,
			    struct rfs_column *out, char *err, size_t errlen)
{
	*out = (struct rfs_column){ 0 };
	for (size_t i = 0; i < d->nfiles; i++) {
		struct rfs_column part;
		char what[PATH_MAX + 300];
		snprintf(what, sizeof(what), "source %s: reading column %.256s",
			 rfs_dataset_file(d, i)->path, name);
		rfs_deadline_begin(what);
		int rc = rfs_source_read_column(d->files[i], name, &part, err,
						errlen);
		rfs_deadline_end();
		if (rc == 0 && (rc = rfs_column_append(out, &part)) != 0) {
			if (rc == -EINVAL)
				snprintf(err, errlen,
					 "%s: column '%s' is %s here but not "
					 "in the files before it",
					 rfs_dataset_file(d, i)->path, name,
					 rfs_column_kind_name(&part));
			else
				snprintf(err, errlen, "out of memory");
			rfs_column_free(&part);
		}
		if (rc != 0) {
			rfs_column_free(out);
			return rc;
		}
	}
	return 0;
}
