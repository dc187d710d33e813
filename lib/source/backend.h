/* SPDX-License-Identifier: MIT */
/* What a source backend provides (source.h is what the dataset layer
 * sees). A backend embeds struct rfs_source first in its own struct, fills
 * info (and indptr for CSR) at open, and answers the operations below;
 * source.c does what every format shares: sorting and de-duplicating the
 * rows asked for, the change check before a read, and CSR rows from
 * ranges of values and column ids. */
#ifndef RFS_SOURCE_BACKEND_H
#define RFS_SOURCE_BACKEND_H

#include <sys/types.h>

#include "core/log.h"
#include "source/source.h"

/* The two arrays of a CSR matrix besides indptr. */
enum rfs_csr_part { RFS_CSR_VALUES, RFS_CSR_INDICES };

/* Elements [first, first + count) of one part, to dst. */
struct rfs_csr_range {
	enum rfs_csr_part part;
	uint64_t first, count;
	void *dst;
};

struct rfs_source_ops {
	/* Distinct ascending rows[0..m) of the dense matrix, row k to
	 * to[k]. Thread-safe; failures logged with file, array and rows.
	 * @return 0, -EIO, -ENOMEM. */
	int (*read_rows)(struct rfs_source *s, const uint64_t *rows, size_t m,
			 unsigned char *const *to);
	/* The ranges r[0..n) of the CSR parts (count > 0, ascending within
	 * a part), each in its stored dtype (info.dtype or
	 * info.index_dtype), little-endian. Given together so that reads
	 * from storage can be in flight at once.
	 * @return 0, -EIO, -ENOMEM. */
	int (*read_csr_ranges)(struct rfs_source *s,
			       const struct rfs_csr_range *r, size_t n);
	/* As rfs_source_read_column(). */
	int (*read_column)(struct rfs_source *s, const char *name,
			   struct rfs_column *out, char *err, size_t errlen);
	/* 0 while the source is as opened, else -EIO (the change logged
	 * once by the backend). Called before every read. */
	int (*check_unchanged)(struct rfs_source *s);
	/* The var index's names, however many (rfs_source_read_var_names()
	 * checks them against the width), or -ENOENT when the served matrix
	 * has no var table. A backend that sees more names than the width
	 * before reading them may return -E2BIG with *n their count and
	 * *names NULL: they cannot be the columns'. Mount time only. */
	int (*read_var_names)(struct rfs_source *s, char ***names, uint64_t *n,
			      char *err, size_t errlen);
	/* As rfs_source_state(). */
	enum rfs_source_state (*state)(struct rfs_source *s);
	/* As rfs_source_reads_file(). */
	int (*reads_file)(const struct rfs_source *s, dev_t dev, ino_t ino);
	/* Bytes a read_rows of one row allocates for itself. */
	size_t (*row_scratch)(const struct rfs_source *s);
	/* As rfs_source_take_share(). */
	void (*take_share)(struct rfs_source *s);
	/* Frees everything; called once, on a source its open returned. */
	void (*close)(struct rfs_source *s);
};

struct rfs_source {
	const struct rfs_source_ops *ops;
	struct rfs_source_info info;
	const int64_t *indptr; /* CSR: info.rows + 1 entries, the backend's */
	struct rfs_source_env env; /* what the mount lent, set by open */
	/* Bytes claimed (memlimit.c) for what the source keeps (indptr, a
	 * table of chunk addresses), held until it is closed, and for the
	 * var names last read, released when they are freed
	 * (rfs_source_free_var_names) or the source closed. */
	uint64_t claimed, var_claimed;
	/* Its reads that fail (a damaged chunk, a column id out of range,
	 * a short file): each batch that meets one would log it again,
	 * once per generation; a line a minute, with the count. Set up by
	 * the backend's open before it reads, torn down by its close. */
	struct rfs_log_limit read_failures;
};

/* Releases what s holds claimed, for a backend's close (whether its open
 * failed or not). */
void rfs_source_release_claims(struct rfs_source *s);

/* Refuses a matrix of no rows, no columns, or rows over 1 GiB, then
 * sets s->info.fingerprint from what every backend describes: shape,
 * dtype, nnz, the dataset's name and the first and last rows (read
 * through the source, so one matrix has one fingerprint in any format).
 * For a backend's open, once info is filled. On failure writes one line
 * naming the dataset or the row to err. @return 0, -EINVAL, -EIO,
 * -ENOMEM. */
int rfs_source_fingerprint(struct rfs_source *s, char *err, size_t errlen);

/* Sets s->info.has_var and var_fingerprint (XXH3 of the names, each
 * followed by a NUL; of their count alone where the backend saw more
 * than the columns: never served, rfs_source_read_var_names() refuses
 * them) from the backend's read_var_names, for its open.
 * @return 0 or a negative errno with err set. */
int rfs_source_fingerprint_var(struct rfs_source *s, char *err, size_t errlen);

/* Which var table names the columns of dataset, relative to the root
 * ("var", "raw/var"), or NULL for a matrix AnnData gives no var. */
const char *rfs_source_var_table(const char *dataset);

/* Writes the mount error for a csc_matrix at dataset (an AnnData path:
 * /X, /raw/X, /layers/NAME, or any other) of path, with the anndata
 * line that rewrites it as CSR. @return -ENOTSUP. */
int rfs_source_refuse_csc(const char *path, const char *dataset, char *err,
			  size_t errlen);

/* 1 when an obs group's encoding-type is one of AnnData's nullable
 * columns (nullable-integer, -boolean, -string-array). */
int rfs_source_is_nullable(const char *encoding);

/* Reads the nullable column at group ("/obs/NAME", or "/PATH") of s:
 * its values and mask, each through the backend's read_column as a
 * /PATH array, the mask applied (rfs_column_apply_mask). what names
 * the column in errors. @return as read_column. */
int rfs_source_read_nullable(struct rfs_source *s, const char *group,
			     const char *what, struct rfs_column *out,
			     char *err, size_t errlen);

/* The backends: open as rfs_source_open(). */
int rfs_hdf5_open(const char *path, const char *dataset,
		  const struct rfs_source_env *env, struct rfs_source **out,
		  char *err, size_t errlen);
/* A directory: a zarr store (zarr_source.c). */
int rfs_zarr_open(const char *path, const char *dataset,
		  const struct rfs_source_env *env, struct rfs_source **out,
		  char *err, size_t errlen);

#endif
