/* SPDX-License-Identifier: MIT */
/* A mounted view: the source files seen through one configuration. Owns
 * the dataset, the selection (filters, labels, weights), the planner, the
 * batch generator (batch.c) behind the batch cache, the prefetch policy
 * (lookahead.c) and the counters, and turns a file key (epoch, rank,
 * batch, kind) into bytes. The FUSE front end talks only to this.
 * Thread-safe after create. */
#ifndef RFS_VIEW_H
#define RFS_VIEW_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "serve/cache.h"
#include "core/config.h"
#include "serve/kind.h"

struct rfs_view;

/* Opens the sources (files or directories, rfs_dataset_open_joined()) and
 * checks that c can be served from them. c is copied. On failure writes
 * one line naming the culprit to err. @return 0 or a negative errno. */
int rfs_view_create(const struct rfs_config *c, char *const *sources,
		    size_t nsources, struct rfs_view **out, char *err,
		    size_t errlen);

/* No entries may be held. Accepts NULL and half-built views. */
void rfs_view_destroy(struct rfs_view *v);

/* The path of the source file that is the file dev/ino, or whose rows
 * are read from it (rfs_dataset_file_reading()); NULL if none. For
 * refusing a log file that would write into a source. Valid for the
 * view's life. */
const char *rfs_view_source_reading(const struct rfs_view *v, dev_t dev,
				    ino_t ino);

/* Effective options (dataset and total_size resolved). Valid for the
 * view's life. */
const struct rfs_config *rfs_view_config(const struct rfs_view *v);
uint64_t rfs_view_batches_per_rank(const struct rfs_view *v);
/* Directory kinds served: batch and index, plus label when label= is
 * set (RFS_KIND_LABEL is last, so they are the first 2 or 3). */
uint64_t rfs_view_kinds(const struct rfs_view *v);
/* 1 when batch/ also holds .npz files (CSR sources). */
int rfs_view_has_npz(const struct rfs_view *v);
/* Exact size of a file: computed, nothing is generated (an .npz plans its
 * batch and sums row counts from indptr). @return 0 or -ENOMEM. */
int rfs_view_file_size(struct rfs_view *v, const struct rfs_cache_key *key,
		       uint64_t *size);
/* Seconds: the sources' newest mtime, every file's fixed timestamp. */
int64_t rfs_view_mtime(const struct rfs_view *v);
/* config.json and dataset.json, rendered once at create; valid for the
 * view's life. */
const char *rfs_view_config_json(const struct rfs_view *v, size_t *len);
const char *rfs_view_dataset_json(const struct rfs_view *v, size_t *len);
/* var_names.txt: the served var names, one per line; NULL (len 0) when
 * the sources name no columns. Valid for the view's life. */
const char *rfs_view_var_names_txt(const struct rfs_view *v, size_t *len);

/* A snapshot of stats.json; the caller frees *out. @return 0 or -ENOMEM. */
int rfs_view_stats_json(struct rfs_view *v, char **out, size_t *len);

/* The file's bytes, generated on first use. Pair with rfs_view_put().
 * @return 0, -EIO (source read failed, logged), -ENOMEM. */
int rfs_view_get(struct rfs_view *v, const struct rfs_cache_key *key,
		 struct rfs_cache_entry **out);

/* rfs_view_get() for a read() at offset off: the first read of a batch
 * file (off 0) records whether its bytes were ready and how long the
 * reader waited for them. */
int rfs_view_read(struct rfs_view *v, const struct rfs_cache_key *key,
		  uint64_t off, struct rfs_cache_entry **out);
void rfs_view_put(struct rfs_view *v, struct rfs_cache_entry *e);

/* The file's content hash, XXH3-64 as 16 hex digits and a NUL (the
 * user.rankfs.xxh3 attribute); generates the file if needed.
 * @return 0 or rfs_view_get()'s error. */
int rfs_view_xxh3(struct rfs_view *v, const struct rfs_cache_key *key,
		  char out[17]);

/* A file was opened: counts batch opens per rank, and for batch and npz
 * files queues the next prefetch batches of the same rank and kind. */
void rfs_view_opened(struct rfs_view *v, const struct rfs_cache_key *key);
/* A file was closed (released): its bytes are retired from the batch
 * cache (rfs_cache_retire()), kept a while for a reader that comes back
 * (until evicted). */
void rfs_view_released(struct rfs_view *v, const struct rfs_cache_key *key);
/* bytes of a file of rank were returned by read(). */
void rfs_view_count_bytes(struct rfs_view *v, uint64_t rank, uint64_t bytes);

#endif
