/* SPDX-License-Identifier: MIT */
/* The source files of a mount as one row space: rows of every file, in the
 * order given, form the global rows [0, N). Files must agree on columns and
 * dtype (and for AnnData files on var names). Thread-safe after open. */
#ifndef RFS_DATASET_H
#define RFS_DATASET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "source/column.h"
#include "core/dtype.h"
#include "source/source.h"
#include "source/varjoin.h"

struct rfs_dataset;

/* How files whose var names differ are served (varjoin.h): mode, and
 * for RFS_VARJOIN_NAMES the file of names. */
struct rfs_dataset_join {
	enum rfs_varjoin_mode mode;
	const char *names_file; /* borrowed, for the open only */
};

/* paths: the SOURCE arguments, each a file or a directory (its *.h5ad and
 * *.h5 files in name order). dataset as for rfs_source_open(), env too
 * (its chunks aside: the dataset's own, of chunk_cache_bytes, bound the
 * decoded chunks that reads at mount keep, until the share is handed out:
 * rfs_dataset_share_chunks).
 * The columns are joined on var names as join says (NULL or mode NONE:
 * files must have the same var names). On failure writes one line naming
 * the culprit to err. @return 0 or a negative errno. Joined,
 * rfs_dataset_info()'s cols, nnz, max_row_nnz and var_fingerprint are
 * the served ones, and rows are read onto the served columns. */
int rfs_dataset_open_joined(char *const *paths, size_t npaths,
			    const char *dataset,
			    const struct rfs_source_env *env,
			    size_t chunk_cache_bytes,
			    const struct rfs_dataset_join *join,
			    struct rfs_dataset **out, char *err, size_t errlen);

/* Hands out the decoded chunks' share of cache_mb, once it has settled
 * (view.c): the chunk cache's bytes, and out of them, file by file, the
 * mappings and kept zarr shard indexes that fit (rfs_source_take_share),
 * read_path saying so. Mount time, once, before reads are served. */
void rfs_dataset_share_chunks(struct rfs_dataset *d, size_t chunk_cache_bytes);

/* The mount's reads at open are over (rfs_view_create()): the process
 * that read HDF5's strings ends; a later read starts it again. */
void rfs_dataset_opened(struct rfs_dataset *d);

/* Accepts NULL. */
void rfs_dataset_destroy(struct rfs_dataset *d);

size_t rfs_dataset_files(const struct rfs_dataset *d);
/* File i's description; valid until destroy. */
const struct rfs_source_info *rfs_dataset_file(const struct rfs_dataset *d,
					       size_t i);
/* File i's source (its state: rfs_source_state()); valid until destroy. */
struct rfs_source *rfs_dataset_source(const struct rfs_dataset *d, size_t i);
/* The path (as rfs_dataset_file()'s) of the first file whose source is
 * the file dev/ino or reads rows from it (rfs_source_reads_file()), or
 * NULL if none does. Valid until destroy. */
const char *rfs_dataset_file_reading(const struct rfs_dataset *d, dev_t dev,
				     ino_t ino);
/* The global id of file i's first row. */
uint64_t rfs_dataset_file_start(const struct rfs_dataset *d, size_t i);

uint64_t rfs_dataset_rows(const struct rfs_dataset *d);
/* Shape and type of a row: the first file's (all agree), its width the
 * served one when joined; CSR: nnz of all files, max_row_nnz of the
 * fullest row of any (as served, when joined). */
const struct rfs_source_info *rfs_dataset_info(const struct rfs_dataset *d);
size_t rfs_dataset_row_bytes(const struct rfs_dataset *d);
/* The join mode, and the served var names (the first file's, or the
 * join's): count 0 when the sources have none. Valid until destroy. */
enum rfs_varjoin_mode rfs_dataset_var_join(const struct rfs_dataset *d);
uint64_t rfs_dataset_var_count(const struct rfs_dataset *d);
const char *rfs_dataset_var_name(const struct rfs_dataset *d, uint64_t i);
/* XXH3 of the served names, as a source's var_fingerprint. */
uint64_t rfs_dataset_var_fingerprint(const struct rfs_dataset *d);

/* XXH3 over every file's fingerprint, in order (joined: and over the
 * served names and the mode). */
uint64_t rfs_dataset_fingerprint(const struct rfs_dataset *d);
/* Seconds: the newest mtime of the files. */
int64_t rfs_dataset_mtime(const struct rfs_dataset *d);

/* Reads global rows[0..n) (any order, repeats allowed) into dst, row i at
 * dst + i * row_bytes. Thread-safe. @return 0, -EIO (logged), -ENOMEM. */
int rfs_dataset_read_rows(struct rfs_dataset *d, const int64_t *rows, size_t n,
			  void *dst);

/* The most memory rfs_dataset_read_rows() (nnz 0) or
 * rfs_dataset_read_csr() of n rows holding nnz stored values allocates,
 * its rfs_csr arrays included (rfs_source_read_scratch() over the files,
 * and the staging of several). */
size_t rfs_dataset_read_scratch(const struct rfs_dataset *d, uint64_t n,
				uint64_t nnz);

/* CSR sources: the stored values of a global row (indptr is in memory;
 * joined, counted at open). */
uint64_t rfs_dataset_row_nnz(const struct rfs_dataset *d, uint64_t row);

/* CSR sources: the entries of global rows[0..n), in that order
 * (rfs_source_read_csr() over the files; values as there).
 * @return 0, -EIO, -ENOMEM. */
int rfs_dataset_read_csr(struct rfs_dataset *d, const int64_t *rows, size_t n,
			 void *values, struct rfs_csr *out);

/* A column over all files (rfs_source_read_column() per file, joined by
 * rfs_column_append()). @return 0 or a negative errno with err set. */
int rfs_dataset_read_column(struct rfs_dataset *d, const char *name,
			    struct rfs_column *out, char *err, size_t errlen);

#endif
