/* SPDX-License-Identifier: MIT */
/* One source: a file (or store) of rows, whatever its format. The dataset
 * layer opens sources, reads their description and reads rows through
 * this interface; each format is a backend behind it (backend.h):
 * HDF5 in source/hdf5/, the only files that include HDF5's header (docs/style.md
 * convention 7). A new format is a folder and one line in registry.c. */
#ifndef RFS_SOURCE_H
#define RFS_SOURCE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/dtype.h"

struct rfs_source;
struct rfs_chunk_cache;
struct rfs_watch;
struct rfs_bigbuf;
struct rfs_deadline;
struct rfs_claims;
struct rfs_column;
struct rfs_helper;

/* How a source's rows reach memory (dataset.json's read_path). */
enum rfs_read_path {
	RFS_READ_LIBRARY, /* through the format's library (H5Dread) */
	RFS_READ_PREAD, /* pread at the rows' file offset */
	RFS_READ_MMAP, /* copied out of a mapping while in the page cache,
			* pread otherwise */
	RFS_READ_CHUNKS, /* chunks read and decoded by rankfs (chunks.c) */
};

/* "hdf5", "pread", "mmap" or "chunks". */
const char *rfs_source_read_path_name(enum rfs_read_path p);

struct rfs_source_info {
	const char *path; /* absolute */
	const char *dataset; /* path of the rows in the file, e.g. "/X" */
	const char *layout; /* "contiguous", "chunked" or "compact" */
	enum rfs_read_path read_path; /* of the rows (CSR: of the values) */
	int ndims; /* 1 (N) or 2 (N x D) */
	uint64_t rows;
	uint64_t cols; /* 1 when ndims == 1 */
	enum rfs_dtype dtype; /* of the values, for CSR */
	uint64_t fingerprint; /* shape, dtype and sampled rows (view_id) */
	int64_t mtime; /* seconds, of the file when opened */
	int sparse; /* a CSR matrix (anndata's csr_matrix) */
	uint64_t nnz; /* CSR: stored values */
	uint64_t max_row_nnz; /* CSR: of the fullest row (duplicates count) */
	enum rfs_dtype index_dtype; /* CSR: of the stored column ids */
	int has_var; /* an AnnData var table names the columns */
	uint64_t var_fingerprint; /* XXH3 of the var names, if has_var */
};

/* What a mount lends the sources it opens (the view's, so that two
 * mounts in one process share none of it); each must outlive them. */
struct rfs_source_env {
	/* The ledger mount-time reads claim memory in (memlimit.h); NULL:
	 * each claim checked alone. */
	struct rfs_claims *claims;
	/* Where chunked arrays register for direct chunk reads; NULL: a
	 * zarr source keeps its own, HDF5 reads through the library. */
	struct rfs_chunk_cache *chunks;
	/* Watches on the files read (watch.h); NULL: changes are told by
	 * size, mtime and names alone. */
	struct rfs_watch *watch;
	/* Large scratch buffers' pool (bigbuf.h); NULL: none. */
	struct rfs_bigbuf *pool;
	/* The watchdog of mount-time steps (deadline.h); NULL: none. */
	struct rfs_deadline *deadline;
	/* The process that reads HDF5's variable-length strings, at open
	 * and in later reads of columns and var names (os/helper.h); NULL:
	 * such strings cannot be read. */
	struct rfs_helper *strings;
};

/* Opens path read-only with the backend of its format. dataset NULL means
 * automatic: "/X" for AnnData files, an error otherwise; it may name a
 * dense dataset or a csr_matrix group. env (NULL: all members NULL) is
 * copied. On failure writes one line naming the file and what is wrong to
 * err (no "rankfs:" prefix).
 * @return 0, -ENOENT, -EACCES, -EINVAL (not usable), -ENOTSUP, -ENOMEM. */
int rfs_source_open(const char *path, const char *dataset,
		    const struct rfs_source_env *env, struct rfs_source **out,
		    char *err, size_t errlen);

/* 1 if dir is a directory a backend claims (a zarr store: .zgroup,
 * .zarray, .zmetadata or zarr.json), which rfs_source_open() opens as one
 * source. */
int rfs_source_is_store(const char *dir);

/* A source argument standing for several sources: an annbatch collection
 * (a zarr group whose attribute encoding-type is "annbatch-preshuffled")
 * is its stores dataset_0, dataset_1, ... in numeric order. *members:
 * owned paths, an owned array. @return 1 (a collection: *members set),
 * 0 (not one), -EINVAL, -ENOMEM with err set. */
int rfs_source_members(const char *path, char ***members, size_t *n, char *err,
		       size_t errlen);

/* Valid until rfs_source_destroy(). */
const struct rfs_source_info *rfs_source_info(const struct rfs_source *s);

/* Bytes of one dense row. */
size_t rfs_source_row_bytes(const struct rfs_source *s);

/* Reads rows[0..n) (any order, repeats allowed) into dst, row i at
 * dst + i * row_bytes, little-endian. Dense sources only. Thread-safe.
 * Failures are logged with file, dataset and rows.
 * @return 0, -EIO, -ENOMEM. */
int rfs_source_read_rows(struct rfs_source *s, const int64_t *rows, size_t n,
			 void *dst);

/* Stored entries of CSR rows, in the order asked: row i's values are
 * values[start[i] .. start[i+1]) (the source dtype, little-endian), their
 * column ids cols[...]. Owned by the caller: rfs_source_csr_free(). */
struct rfs_csr {
	uint64_t rows;
	uint64_t *start; /* rows + 1 */
	void *values;
	int64_t *cols;
	size_t cols_bytes; /* as rfs_source_csr_alloc_cols() took them */
	struct rfs_bigbuf *pool; /* cols' (bigbuf.h), NULL: none */
	int values_borrowed; /* values is the caller's: not freed */
};

/* Allocates c->cols for the c->start[c->rows] entries c->start counts
 * (from c->pool: megabytes per batch). @return 0 or -ENOMEM. */
int rfs_source_csr_alloc_cols(struct rfs_csr *c);

/* Reads the entries of rows[0..n) of a CSR source. values: where the
 * values go (room for all of them: the rows' rfs_source_row_nnz()
 * summed), or NULL to allocate them. Column ids outside the width are a
 * read failure. Thread-safe. @return 0, -EIO, -ENOMEM. */
int rfs_source_read_csr(struct rfs_source *s, const int64_t *rows, size_t n,
			void *values, struct rfs_csr *out);

/* The most memory a read of n rows allocates for itself, for the caller
 * to count: rfs_source_read_rows() (nnz 0), or rfs_source_read_csr() of
 * rows holding nnz stored values, its rfs_csr arrays included. */
size_t rfs_source_read_scratch(const struct rfs_source *s, uint64_t n,
			       uint64_t nnz);

/* Claims (memlimit.c), for a read at mount, what rfs_source_read_csr()
 * of rows holding nnz stored values allocates for itself, per value
 * (rfs_source_read_scratch()): indptr says how many a row holds, and the
 * data's declared length alone (no storage) may back them. what names
 * the rows in err. @return 0 or -ENOMEM with err set. */
int rfs_source_claim_csr_read(const struct rfs_source *s, const char *what,
			      uint64_t nnz, uint64_t *claimed, char *err,
			      size_t errlen);

/* Stored values of a CSR row: from indptr, which is in memory. */
uint64_t rfs_source_row_nnz(const struct rfs_source *s, uint64_t row);

void rfs_source_csr_free(struct rfs_csr *c);

/* Reads a per-row column whole: "/PATH" names a 1-D dataset of length
 * rows; any other name is an obs column of an AnnData file (categorical
 * in the 0.8 or 0.7 encoding, numeric, bool or string). On failure writes
 * one line naming the file and the column to err.
 * @return 0, -EINVAL (missing, wrong length), -ENOTSUP (type or filter),
 * -ENOMEM. out is zeroed on failure; free it with rfs_column_free(). */
int rfs_source_read_column(struct rfs_source *s, const char *name,
			   struct rfs_column *out, char *err, size_t errlen);

/* The names of the columns (an AnnData var index), info.cols of them,
 * for var_join: *names is an owned array of owned strings, claimed
 * (memlimit.c) until rfs_source_free_var_names(). On failure
 * writes one line naming the file to err.
 * @return 0, -ENOENT (the source has no var names), -EINVAL, -ENOMEM. */
int rfs_source_read_var_names(struct rfs_source *s, char ***names, uint64_t *n,
			      char *err, size_t errlen);

/* Frees names read by rfs_source_read_var_names() and releases their
 * claim. Accepts NULL. */
void rfs_source_free_var_names(struct rfs_source *s, char **names, uint64_t n);

/* A source as stats.json reports it. A mount serves the files it opened:
 * a path renamed over or unlinked is REPLACED and still served; a file
 * written in place is CHANGED, and every later read of it is EIO. */
enum rfs_source_state {
	RFS_SOURCE_OK,
	RFS_SOURCE_REPLACED,
	RFS_SOURCE_CHANGED,
};
/* Looks now (a stat of the path); logs the first replacement seen. */
enum rfs_source_state rfs_source_state(struct rfs_source *s);
/* "ok", "replaced: serving the file opened at mount" or "changed in
 * place: EIO for new batches". */
const char *rfs_source_state_name(enum rfs_source_state st);

/* 1 if the file dev/ino is the source's file as opened, or one its
 * served rows are read from, or a directory, of a zarr store, else 0: a file
 * rankfs must never write, or create a file in, such as a log file
 * (fs/main.c). Thread-safe. */
int rfs_source_reads_file(const struct rfs_source *s, dev_t dev, ino_t ino);

/* Takes what the source keeps out of the chunk cache's share of
 * cache_mb (rfs_chunks_reserve: a mapping, zarr shard indexes), once the
 * share is handed out (rfs_chunks_limit), read_path saying so. Mount
 * time, once, before reads are served. */
void rfs_source_take_share(struct rfs_source *s);

/* Accepts NULL. */
void rfs_source_destroy(struct rfs_source *s);

#endif
