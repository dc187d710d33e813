/* SPDX-License-Identifier: MIT */
/* Batch generation: a file key (epoch, rank, batch, kind) -> the batch's
 * planned rows -> the rows fetched from the dataset -> the encoded bytes
 * of a .npy (rows, index or label) or a CSR .npz; and each file's exact
 * size without generating it. The view creates one and hands
 * rfs_batch_fill() to its cache. Thread-safe after create: fills run
 * concurrently. */
#ifndef RFS_BATCH_H
#define RFS_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "serve/cache.h"
#include "core/config.h"
#include "source/dataset.h"
#include "core/dtype.h"
#include "plan/plan.h"
#include "plan/selection.h"
#include "serve/stats.h"

struct rfs_batch;

/* Checks, before a planner exists, that c's fetch windows and batches
 * (of rows in out_dtype) fit a sane daemon: a window of at most 2^27
 * rows, a batch of at most 1 GiB, an .npz of the fullest rows below
 * 3.5 GiB (a plain zip). On failure writes one line naming the options
 * to err. @return 0 or -EINVAL. */
int rfs_batch_check_sizes(const struct rfs_config *c,
			  const struct rfs_dataset *d, enum rfs_dtype out_dtype,
			  char *err, size_t errlen);

/* Batches of d's rows as p plans them, served in out_dtype, with the
 * labels of s, their scratch from pool (bigbuf.h; NULL: none). d, p, s,
 * stats (NULL: generation not timed) and pool are borrowed and must
 * outlive the batch. @return 0 or -ENOMEM. */
int rfs_batch_create(struct rfs_dataset *d, struct rfs_planner *p,
		     const struct rfs_selection *s, enum rfs_dtype out_dtype,
		     struct rfs_stats *stats, struct rfs_bigbuf *pool,
		     struct rfs_batch **out);

/* Accepts NULL. No fill may be running. */
void rfs_batch_destroy(struct rfs_batch *b);

/* Rows in batch (batch_size, or fewer for the last with drop_last=0). */
uint64_t rfs_batch_rows(const struct rfs_batch *b, uint64_t batch);

/* Exact size of key's file: computed, nothing is generated (an .npz plans
 * its batch and sums row counts from indptr). @return 0 or -ENOMEM. */
int rfs_batch_file_size(struct rfs_batch *b, const struct rfs_cache_key *key,
			uint64_t *size);

/* The memory a batch file of batch_size rows holds while it is
 * generated: the file and its generation's scratch (CSR: of a batch of
 * average rows). What prefetch counts per queued batch. */
uint64_t rfs_batch_cost(const struct rfs_batch *b);

/* The cache's fill (rfs_cache_fill_fn, ctx a struct rfs_batch): generates
 * key's file into the buffer it takes from f, and times batch files for
 * stats. @return 0, -EIO (source read failed, logged), -ENOMEM. */
int rfs_batch_fill(void *ctx, const struct rfs_cache_key *key,
		   struct rfs_cache_fill *f);

#endif
