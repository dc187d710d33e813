/* SPDX-License-Identifier: MIT */
/*
 * The zarr backend's open and reads: a directory store (v2 or v3), and
 * the arrays anndata.c finds the rows in (one array, or a CSR's data,
 * indices) through the store ops. Served arrays are registered in the mount's chunk
 * cache with zarr_array.c's loader, so a batch reads and decodes, in the
 * calling thread, only the chunks its rows are in. anndata.c reads a
 * CSR's indptr whole at open, through read_column.
 */
#include <errno.h>
#include <fts.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "source/io/chunks.h"
#include "core/log.h"
#include "source/zarr/zarr.h"

/* Decoded chunks of a source opened without a mount's cache. */
#define OWN_CHUNKS_BYTES (64u << 20)

static int cmp_id(const void *a, const void *b)
{
	const struct rfs_zarr_id *x = a, *y = b;
	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return (x->ino > y->ino) - (x->ino < y->ino);
}

/* Every file and directory of the store, for rfs_source_reads_file(). */
static int list_files(struct zarr_source *s, char *err, size_t errlen)
{
	char *roots[] = { s->path, NULL };
	FTS *fts = fts_open(roots, FTS_PHYSICAL | FTS_NOCHDIR, NULL);
	FTSENT *e = NULL;
	int rc = fts ? 0 : -1;
	while (rc == 0 && (errno = 0, e = fts_read(fts))) {
		int info = e->fts_info;
		/* As nftw's walk: what it cannot stat or read fails it. */
		if (info == FTS_ERR || (info == FTS_NS && !e->fts_level) ||
		    (info == FTS_DNR && e->fts_errno != EACCES))
			rc = -1;
		else if (info == FTS_DNR && e->fts_number) /* not a file */
			s->nfiles--;
		/* A new file in a link or an unread directory is a change. */
		if (rc ||
		    (info != FTS_F && info != FTS_DEFAULT && info != FTS_D))
			continue;
		if ((s->nfiles & (s->nfiles - 1)) == 0) { /* 0, 1, 2, 4 ... */
			size_t cap = s->nfiles ? 2 * s->nfiles : 1;
			void *p = realloc(s->files, cap * sizeof(*s->files));
			if (!p)
				rc = -1;
			else
				s->files = p;
		}
		if (rc == 0) {
			e->fts_number = 1;
			rfs_zarr_id_of(e->fts_statp, &s->files[s->nfiles++]);
		}
	}
	if (!e && errno)
		rc = -1;
	if (fts)
		fts_close(fts);
	if (rc != 0) {
		snprintf(err, errlen, "%s: cannot list the store's files",
			 s->path);
		return -ENOMEM;
	}
	qsort(s->files, s->nfiles, sizeof(*s->files), cmp_id);
	return 0;
}

/* Registers a served array: watched, read through the chunk cache. */
static int serve(struct zarr_source *s, struct rfs_zarr_array *a, uint64_t *id,
		 char *err, size_t errlen)
{
	int rc = rfs_zarr_array_watch(a, s->base.env.watch, err, errlen);
	if (rc != 0)
		return rc;
	a->failures = &s->base.read_failures;
	struct rfs_chunked c = { .cols = a->m.shape[1],
				 .chunk_rows = a->m.inner[0],
				 .chunk_cols = a->m.inner[1],
				 .grid_cols = a->igrid[1],
				 .elem = a->m.elem,
				 .load = rfs_zarr_array_load,
				 .ctx = a,
				 .part_rows = rfs_zarr_array_part_rows(a) };
	rc = rfs_chunks_register(s->chunks, &c, id);
	if (rc != 0)
		snprintf(err, errlen, "%s: out of memory", s->path);
	return rc;
}

static int open_numeric(struct zarr_source *s, const char *path, int want_1d,
			struct rfs_zarr_array *a, char *err, size_t errlen)
{
	int rc = rfs_zarr_array_open(&s->st, path, &s->changed, a, err, errlen);
	if (rc != 0)
		return rc;
	if (a->m.kind != RFS_ZARR_NUMBER) {
		snprintf(err, errlen,
			 "%s: array %s holds %s; rankfs serves int8..int64, "
			 "uint8..uint64, float16/32/64",
			 s->path, path,
			 a->m.kind == RFS_ZARR_BOOL ? "bools" : "strings");
		return -ENOTSUP;
	}
	if (want_1d && a->m.ndims != 1) {
		snprintf(err, errlen, "%s: array %s must be 1-D", s->path,
			 path);
		return -EINVAL;
	}
	return 0;
}

/* The store ops: what anndata.c reads the layout through. */
static int node(struct rfs_source *base, const char *path, const char *key,
		char *val, size_t vallen, char *err, size_t errlen)
{
	struct zarr_source *s = (struct zarr_source *)base;
	json_t *attrs;
	int kind = rfs_zarr_node(&s->st, path + (path[0] == '/'), NULL, &attrs,
				 NULL, err, errlen);
	const char *v = rfs_zarr_attr_string(attrs, key);
	snprintf(val, vallen, "%s", v ? v : "");
	json_decref(attrs);
	if (kind == 0)
		snprintf(err, errlen, "%s: %s not found (no %s)", s->path, path,
			 s->st.v3 ? "zarr.json" : ".zarray");
	return kind;
}

static int array(struct rfs_source *base, const char *path,
		 struct rfs_store_array *out, char *err, size_t errlen)
{
	struct zarr_source *s = (struct zarr_source *)base;
	struct rfs_zarr_array a;
	int rc = rfs_zarr_array_open(&s->st, path + 1, NULL, &a, err, errlen);
	*out = (struct rfs_store_array){ .ndims = a.m.ndims,
					 .len = a.m.shape[0],
					 .dtype = a.m.kind == RFS_ZARR_NUMBER ?
							  a.m.dtype :
							  RFS_DTYPE_COUNT,
					 .strings = a.m.kind ==
						    RFS_ZARR_STRING };
	rfs_zarr_array_close(&a);
	return rc;
}

static void members(struct rfs_source *base, const char *group,
		    int (*each)(const char *name, void *ctx), void *ctx)
{
	struct zarr_source *s = (struct zarr_source *)base;
	json_t *attrs = NULL, *v;
	char e[256];
	size_t i;
	if (rfs_zarr_node(&s->st, group + 1, NULL, &attrs, NULL, e,
			  sizeof(e)) == 2)
		json_array_foreach(json_object_get(attrs, "column-order"), i, v)
		{
			if (json_string_value(v) &&
			    each(json_string_value(v), ctx))
				break;
		}
	json_decref(attrs);
}

static int read_shape(struct rfs_source *base, const char *group,
		      uint64_t shape[2])
{
	struct zarr_source *s = (struct zarr_source *)base;
	json_t *attrs = NULL;
	char err[8];
	rfs_zarr_node(&s->st, group + 1, NULL, &attrs, NULL, err, sizeof(err));
	json_t *v = json_object_get(attrs, "shape");
	int rc = json_is_array(v) && json_array_size(v) == 2 ? 0 : -EINVAL;
	for (int i = 0; i < 2 && rc == 0; i++) {
		json_t *d = json_array_get(v, (size_t)i);
		if (!json_is_integer(d) || json_integer_value(d) < 0)
			rc = -EINVAL;
		else
			shape[i] = (uint64_t)json_integer_value(d);
	}
	json_decref(attrs);
	return rc;
}

/* Once the rows are open: the store's files listed, info's mtime (of the
 * served array's metadata). */
static int described(struct zarr_source *s, int rc, char *err, size_t errlen)
{
	struct stat st;
	if (rc == 0)
		rc = list_files(s, err, errlen);
	if (rc == 0 && stat(s->x.meta_file, &st) == 0)
		s->base.info.mtime = st.st_mtime;
	s->base.info.dtype = s->x.m.dtype;
	return rc;
}

static int open_dense(struct rfs_source *base, const char *path, char *err,
		      size_t errlen)
{
	struct zarr_source *s = (struct zarr_source *)base;
	int rc = open_numeric(s, path + 1, 0, &s->x, err, errlen);
	if (rc == 0)
		rc = serve(s, &s->x, &s->x_id, err, errlen);
	s->base.info.rows = s->x.m.shape[0];
	s->base.info.cols = s->x.m.shape[1];
	s->base.info.ndims = s->x.m.ndims;
	return described(s, rc, err, errlen);
}

static int open_csr(struct rfs_source *base, const char *group, uint64_t n[2],
		    char *err, size_t errlen)
{
	struct zarr_source *s = (struct zarr_source *)base;
	char path[1100];
	snprintf(path, sizeof(path), "%s/data", group + 1);
	int rc = open_numeric(s, path, 1, &s->x, err, errlen);
	snprintf(path, sizeof(path), "%s/indices", group + 1);
	if (rc == 0)
		rc = open_numeric(s, path, 1, &s->indices, err, errlen);
	if (rc == 0)
		rc = serve(s, &s->x, &s->x_id, err, errlen);
	if (rc == 0)
		rc = serve(s, &s->indices, &s->indices_id, err, errlen);
	n[0] = s->x.m.shape[0];
	n[1] = s->indices.m.shape[0];
	s->base.info.index_dtype = s->indices.m.dtype;
	return described(s, rc, err, errlen);
}

static const struct rfs_store_ops store = {
	.node = node,
	.array = array,
	.members = members,
	.shape = read_shape,
	.open_dense = open_dense,
	.open_csr = open_csr,
};

static int read_rows(struct rfs_source *base, const uint64_t *rows, size_t m,
		     unsigned char *const *to)
{
	struct zarr_source *s = (struct zarr_source *)base;
	/* The files of each row of chunks, checked once per batch (watched
	 * directories: by check_unchanged, before and after the read). */
	for (size_t i = 0; i < m && !s->x.dir_watches; i++) {
		if (i &&
		    rows[i] / s->x.m.chunk[0] == rows[i - 1] / s->x.m.chunk[0])
			continue;
		if (rfs_zarr_array_check(&s->x, rows[i], rows[i]) != 0)
			return -EIO;
	}
	return rfs_chunks_read_rows(s->chunks, s->x_id, rows, m, to);
}

static int read_csr_ranges(struct rfs_source *base,
			   const struct rfs_csr_range *r, size_t n)
{
	struct zarr_source *s = (struct zarr_source *)base;
	for (size_t k = 0; k < n; k++) {
		int values = r[k].part == RFS_CSR_VALUES;
		struct rfs_zarr_array *a = values ? &s->x : &s->indices;
		uint64_t last = r[k].first + r[k].count - 1;
		if (!a->dir_watches &&
		    rfs_zarr_array_check(a, r[k].first, last) != 0)
			return -EIO;
		int rc = rfs_chunks_read(s->chunks,
					 values ? s->x_id : s->indices_id,
					 r[k].first, r[k].count, r[k].dst);
		if (rc != 0)
			return rc;
	}
	return 0;
}

static int check_unchanged(struct rfs_source *base)
{
	struct zarr_source *s = (struct zarr_source *)base;
	if (atomic_load(&s->changed))
		return -EIO;
	if (rfs_zarr_array_check_meta(&s->x) != 0 ||
	    (s->indices.name && rfs_zarr_array_check_meta(&s->indices) != 0))
		return -EIO;
	if ((s->x.dir_watches && rfs_zarr_array_check(&s->x, 0, 0) != 0) ||
	    (s->indices.dir_watches &&
	     rfs_zarr_array_check(&s->indices, 0, 0) != 0))
		return -EIO;
	return 0;
}

static enum rfs_source_state state(struct rfs_source *base)
{
	return check_unchanged(base) ? RFS_SOURCE_CHANGED : RFS_SOURCE_OK;
}

static int reads_file(const struct rfs_source *base, dev_t dev, ino_t ino)
{
	const struct zarr_source *s = (const struct zarr_source *)base;
	struct rfs_zarr_id key = { .dev = dev, .ino = ino };
	return bsearch(&key, s->files, s->nfiles, sizeof(key), cmp_id) ||
	       rfs_zarr_array_reads_file(&s->x, dev, ino) ||
	       rfs_zarr_array_reads_file(&s->indices, dev, ino);
}

static size_t row_scratch(const struct rfs_source *base)
{
	(void)base; /* chunks.c counts its own */
	return 0;
}

static void close_source(struct rfs_source *base)
{
	struct zarr_source *s = (struct zarr_source *)base;
	rfs_log_limit_destroy(&s->base.read_failures);
	/* The mount's cache keeps the registrations, never used again. */
	rfs_chunks_destroy(s->own_chunks);
	rfs_zarr_array_close(&s->x);
	rfs_zarr_array_close(&s->indices);
	rfs_zarr_store_close(&s->st);
	free(s->files);
	free(s->dataset);
	free(s->path);
	free(s);
}

static void take_share(struct rfs_source *base)
{
	struct zarr_source *s = (struct zarr_source *)base;
	rfs_zarr_array_keep_indexes(&s->x, s->chunks);
	rfs_zarr_array_keep_indexes(&s->indices, s->chunks);
}

static const struct rfs_source_ops ops = {
	.read_rows = read_rows,
	.read_csr_ranges = read_csr_ranges,
	.read_column = rfs_zarr_read_column,
	.check_unchanged = check_unchanged,
	.state = state,
	.reads_file = reads_file,
	.row_scratch = row_scratch,
	.take_share = take_share,
	.close = close_source,
};

/* An AnnData store says so, or at least has an X. */
static int is_anndata(struct zarr_source *s, int *root_kind, char *err,
		      size_t errlen)
{
	json_t *attrs;
	int kind = rfs_zarr_node(&s->st, "", NULL, &attrs, NULL, err, errlen);
	*root_kind = kind;
	const char *enc = rfs_zarr_attr_string(attrs, "encoding-type");
	int yes = enc && strcmp(enc, "anndata") == 0;
	json_decref(attrs);
	if (kind < 0)
		return kind;
	if (!yes && !enc) {
		kind = rfs_zarr_node(&s->st, "X", NULL, &attrs, NULL, err,
				     errlen);
		yes = kind > 0;
		json_decref(attrs);
	}
	return yes;
}

static int open_source(const char *path, const char *dataset,
		       const struct rfs_source_env *env,
		       struct rfs_source **out, char *err, size_t errlen)
{
	struct zarr_source *s = calloc(1, sizeof(*s));
	int rc = -ENOMEM;
	if (!s)
		return rc;
	rfs_log_limit_init(&s->base.read_failures);
	*out = &s->base; /* closed by the caller, half-built or not */
	s->base.array_noun = "array";
	s->base.store_noun = "store";
	s->path = realpath(path, NULL);
	if (!s->path) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return rc;
	}
	s->base.env = *env;
	s->chunks = env->chunks;
	if (!s->chunks) {
		rc = rfs_chunks_create(OWN_CHUNKS_BYTES, env->pool,
				       &s->own_chunks);
		if (rc != 0)
			return rc;
		s->chunks = s->own_chunks;
	}
	int root_kind = 0;
	rc = rfs_zarr_store_open(s->path, &s->st, err, errlen);
	s->st.claims = env->claims;
	if (rc == 0)
		rc = is_anndata(s, &root_kind, err, errlen);
	if (rc < 0)
		return rc;
	s->base.anndata = rc;
	if (!dataset && root_kind == 1)
		dataset = "/"; /* a store that is one array (zarr.save) */
	if (!dataset && !s->base.anndata) {
		snprintf(err, errlen,
			 "%s: not an AnnData zarr store; name the rows with "
			 "-o dataset=/PATH",
			 path);
		return -EINVAL;
	}
	if (asprintf(&s->dataset, "%s%s",
		     dataset && dataset[0] == '/' ? "" : "/",
		     dataset ? dataset : "X") < 0) {
		s->dataset = NULL;
		return -ENOMEM;
	}
	s->base.info.path = s->path;
	s->base.info.dataset = s->dataset;
	s->base.info.layout = "chunked";
	s->base.info.read_path = RFS_READ_CHUNKS;
	return 0;
}

/* A zarr store: a directory with a group's or an array's metadata. */
static int probe(const char *path, const struct stat *st)
{
	return S_ISDIR(st->st_mode) && rfs_zarr_is_store(path);
}

const struct rfs_source_backend rfs_zarr_backend = {
	.name = "zarr",
	.probe = probe,
	.open = open_source,
	.ops = &ops,
	.store = &store,
	.members = rfs_zarr_members,
};
