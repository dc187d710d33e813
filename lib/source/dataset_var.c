/* SPDX-License-Identifier: MIT */
#include "source/dataset_var.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "os/deadline.h"
#include "core/log.h"
#include "os/memlimit.h"

/* Rows and stored values per read while counting served values:
 * bounded memory (a row of more values is read alone). */
#define COUNT_ROWS 4096
#define COUNT_VALUES (1 << 20)

static int read_names(struct rfs_dataset_var *v, struct rfs_source *s,
		      char ***names, uint64_t *n, char *err, size_t errlen)
{
	char what[PATH_MAX + 64];
	snprintf(what, sizeof(what), "source %s: reading its var names",
		 rfs_source_info(s)->path);
	rfs_deadline_begin(v->env->deadline, what);
	int rc = rfs_source_read_var_names(s, names, n, err, errlen);
	rfs_deadline_end(v->env->deadline);
	return rc;
}

/* The served values of each row of file f, from its column ids. */
static int count_served(struct rfs_dataset_var *v, size_t f,
			struct rfs_source *s, char *err, size_t errlen)
{
	const struct rfs_source_info *info = rfs_source_info(s);
	/* Kept for the mount, as many as the rows the metadata says. */
	int rc = rfs_memlimit_claim(v->env->claims, info->path,
				    "a count of served values per row "
				    "(var_join)",
				    info->rows, sizeof(uint32_t), &v->claimed,
				    err, errlen);
	if (rc != 0)
		return rc;
	int64_t *rows = malloc(COUNT_ROWS * sizeof(*rows));
	uint32_t *counts =
		malloc((info->rows ? info->rows : 1) * sizeof(*counts));
	rc = rows && counts ? 0 : -ENOMEM;
	char what[PATH_MAX + 64];
	int refused = 0;
	snprintf(what, sizeof(what), "source %s: counting its served values",
		 info->path);
	for (uint64_t first = 0, m; first < info->rows && rc == 0; first += m) {
		/* As many values as indptr says: claimed, a block of
		 * COUNT_VALUES at most unless one row holds more. */
		uint64_t nnz = 0, held = 0;
		for (m = 0; first + m < info->rows && m < COUNT_ROWS; m++) {
			uint64_t len = rfs_source_row_nnz(s, first + m);
			if (m && nnz + len > COUNT_VALUES)
				break;
			nnz += len;
			rows[m] = (int64_t)(first + m);
		}
		char rows_what[300];
		snprintf(rows_what, sizeof(rows_what),
			 "%.200s rows %llu to %llu (their stored values, read "
			 "to count those var_join serves)",
			 info->dataset, (unsigned long long)first,
			 (unsigned long long)(first + m - 1));
		rc = rfs_source_claim_csr_read(s, rows_what, nnz, &held, err,
					       errlen);
		if (rc != 0) {
			refused = 1;
			break;
		}
		struct rfs_csr csr;
		rfs_deadline_begin(v->env->deadline, what);
		rc = rfs_source_read_csr(s, rows, m, NULL, &csr);
		rfs_deadline_end(v->env->deadline);
		if (rc != 0) {
			rfs_memlimit_release(v->env->claims, &held);
			break;
		}
		for (uint64_t i = 0; i < m; i++) {
			uint64_t kept = 0;
			for (uint64_t k = csr.start[i]; k < csr.start[i + 1];
			     k++)
				kept += rfs_varjoin_served(
						v->join, f,
						(uint64_t)csr.cols[k]) >= 0;
			uint64_t all = csr.start[i + 1] - csr.start[i];
			counts[first + i] = (uint32_t)kept;
			v->nnz += kept;
			if (kept > v->max_row_nnz)
				v->max_row_nnz = kept;
			if (all - kept > v->max_dropped)
				v->max_dropped = all - kept;
		}
		rfs_source_csr_free(&csr);
		rfs_memlimit_release(v->env->claims, &held);
	}
	if (rc != 0) {
		free(counts);
		counts = NULL;
	}
	if (rc != 0 && !refused)
		snprintf(err, errlen,
			 "%s: %s: cannot read its column ids to count the "
			 "served values: %s",
			 info->path, info->dataset, strerror(-rc));
	v->served_nnz[f] = counts;
	free(rows);
	return rc;
}

/* The join's nnz accounting: a file that drops nothing keeps its own. */
static int count_csr(struct rfs_dataset_var *v, struct rfs_source *const *files,
		     size_t n, char *err, size_t errlen)
{
	v->served_nnz = calloc(n, sizeof(*v->served_nnz));
	if (!v->served_nnz) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t f = 0; f < n; f++) {
		const struct rfs_source_info *info = rfs_source_info(files[f]);
		if (info->max_row_nnz > v->widest)
			v->widest = info->max_row_nnz;
		if (rfs_varjoin_drops(v->join, f)) {
			/* Counts are stored in 32 bits. */
			if (info->max_row_nnz > UINT32_MAX) {
				snprintf(err, errlen,
					 "%s: a row of %llu stored values is "
					 "too many to join",
					 info->path,
					 (unsigned long long)info->max_row_nnz);
				return -EINVAL;
			}
			int rc = count_served(v, f, files[f], err, errlen);
			if (rc != 0)
				return rc;
			continue;
		}
		v->nnz += info->nnz;
		if (info->max_row_nnz > v->max_row_nnz)
			v->max_row_nnz = info->max_row_nnz;
	}
	return 0;
}

static int build_join(struct rfs_dataset_var *v, const char *names_file,
		      struct rfs_source *const *files, size_t n, char *err,
		      size_t errlen)
{
	char ***names = calloc(n, sizeof(*names));
	uint64_t *counts = calloc(n, sizeof(*counts));
	const char **paths = calloc(n, sizeof(*paths));
	char **wanted = NULL;
	uint64_t nwanted = 0, wanted_claimed = 0;
	int rc = names && counts && paths ? 0 : -ENOMEM;
	if (rc != 0)
		snprintf(err, errlen, "out of memory");
	for (size_t f = 0; f < n && rc == 0; f++) {
		const struct rfs_source_info *info = rfs_source_info(files[f]);
		paths[f] = info->path;
		if (!info->has_var) {
			snprintf(err, errlen,
				 "%s: %s has no var names: var_join=%s and "
				 "var_names= need them in every file",
				 info->path, info->dataset,
				 rfs_varjoin_mode_name(v->mode));
			rc = -EINVAL;
			break;
		}
		rc = read_names(v, files[f], &names[f], &counts[f], err,
				errlen);
	}
	if (rc == 0 && v->mode == RFS_VARJOIN_NAMES)
		rc = rfs_varjoin_read_file(v->env->claims, names_file, &wanted,
					   &nwanted, &wanted_claimed, err,
					   errlen);
	if (rc == 0)
		rc = rfs_varjoin_create(v->env->claims, v->mode,
					(char *const *const *)names, counts,
					paths, n, wanted, nwanted, names_file,
					&v->join, err, errlen);
	for (size_t f = 0; names && f < n; f++)
		rfs_source_free_var_names(files[f], names[f], counts[f]);
	free(names);
	free(counts);
	free(paths);
	rfs_buf_free_strings(wanted, nwanted);
	rfs_memlimit_release(v->env->claims, &wanted_claimed);
	return rc;
}

int rfs_dataset_var_build(struct rfs_dataset_var *v,
			  const struct rfs_source_env *env,
			  enum rfs_varjoin_mode mode, const char *names_file,
			  struct rfs_source *const *files, size_t n, char *err,
			  size_t errlen)
{
	*v = (struct rfs_dataset_var){ .mode = mode, .env = env };
	if (mode == RFS_VARJOIN_NONE) {
		/* The files agree (dataset.c): the first one's names. */
		if (!rfs_source_info(files[0])->has_var)
			return 0;
		int rc = read_names(v, files[0], &v->names, &v->count, err,
				    errlen);
		if (rc == -EINVAL) {
			/* A var of another length than X's width: such a
			 * file mounted before var_names.txt, and still does,
			 * without it. */
			rfs_log("%s; no var_names.txt", err);
			return 0;
		}
		if (rc == 0)
			v->fingerprint =
				rfs_source_info(files[0])->var_fingerprint;
		return rc;
	}
	int rc = build_join(v, names_file, files, n, err, errlen);
	if (rc != 0)
		return rc;
	v->count = rfs_varjoin_cols(v->join);
	v->fingerprint = rfs_varjoin_fingerprint(v->join);
	if (rfs_source_info(files[0])->sparse)
		rc = count_csr(v, files, n, err, errlen);
	return rc;
}

void rfs_dataset_var_free(struct rfs_dataset_var *v, size_t nfiles)
{
	if (!v->join)
		rfs_buf_free_strings(v->names, v->count);
	for (size_t f = 0; v->served_nnz && f < nfiles; f++)
		free(v->served_nnz[f]);
	free(v->served_nnz);
	rfs_varjoin_destroy(v->join);
	rfs_memlimit_release(v->env ? v->env->claims : NULL, &v->claimed);
	*v = (struct rfs_dataset_var){ 0 };
}
