/* SPDX-License-Identifier: MIT */
/* dataset.c's var names: the names its columns serve (the first file's,
 * or var_join's, varjoin.c), built at open from the sources' own
 * (rfs_source_read_var_names()), and for CSR sources whose unserved
 * columns are dropped, each row's served stored values, counted once
 * at open so that a .npz's exact size needs no read. Private to
 * dataset.c; immutable after build. */
#ifndef RFS_DATASET_VAR_H
#define RFS_DATASET_VAR_H

#include <stddef.h>
#include <stdint.h>

#include "source/source.h"
#include "source/varjoin.h"

struct rfs_dataset_var {
	enum rfs_varjoin_mode mode;
	struct rfs_varjoin *join; /* NULL in mode NONE */
	char **names; /* served; NULL: the sources have none */
	uint64_t count;
	uint64_t fingerprint; /* XXH3 of names, as a var_fingerprint */
	/* CSR, join only: per file, NULL where no column is dropped; else
	 * the served stored values of each of its rows. */
	uint32_t **served_nnz;
	uint64_t nnz, max_row_nnz; /* CSR, join: served */
	uint64_t max_dropped; /* CSR, join: most values a row loses */
	uint64_t widest; /* CSR, join: the fullest row of any file, stored */
	uint64_t claimed; /* served_nnz (memlimit.c) */
	const struct rfs_source_env *env; /* borrowed: the dataset's */
};

/* Builds v for files[0..n): mode NONE reads the first file's names (if
 * it has any; files must agree, dataset.c checks their fingerprints);
 * a join reads every file's (each must have them) and, for var_names,
 * names_file. On failure writes one line naming the file to err.
 * @return 0, -EINVAL, -ENOENT, -ENOMEM, -EIO. */
int rfs_dataset_var_build(struct rfs_dataset_var *v,
			  const struct rfs_source_env *env,
			  enum rfs_varjoin_mode mode, const char *names_file,
			  struct rfs_source *const *files, size_t n, char *err,
			  size_t errlen);

/* Accepts a zeroed or half-built v. */
void rfs_dataset_var_free(struct rfs_dataset_var *v, size_t nfiles);

#endif
