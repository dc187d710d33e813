/* SPDX-License-Identifier: MIT */
/*
 * What every source format shares. A read of rows is sorted (rowsort.c)
 * and de-duplicated here, so a backend reads each distinct row once, in
 * file order, straight into its first slot; repeats are copied from
 * there. A CSR matrix is its indptr (in memory from open) and two 1-D
 * arrays: a read asks the backend for one range of values and of column
 * ids per run of adjacent rows, all runs in one call (from storage they
 * are then in flight together), checks the ids against the width and
 * places each row's entries at its slot.
 */
#include "source/source.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "core/buf.h"
#include "core/bigbuf.h"
#include "core/convert.h"
#include "core/log.h"
#include "os/memlimit.h"
#include "core/rowsort.h"
#include "source/anndata.h"
#include "source/backend.h"
#include "source/varjoin.h"

const char *rfs_source_read_path_name(enum rfs_read_path p)
{
	switch (p) {
	case RFS_READ_PREAD:
		return "pread";
	case RFS_READ_MMAP:
		return "mmap";
	case RFS_READ_CHUNKS:
		return "chunks";
	case RFS_READ_LIBRARY:
		break;
	}
	return "hdf5";
}

const struct rfs_source_info *rfs_source_info(const struct rfs_source *s)
{
	return &s->info;
}

size_t rfs_source_row_bytes(const struct rfs_source *s)
{
	return s->info.cols * rfs_dtype_size(s->info.dtype);
}

/* Runs: sorted rows where each is the same as or next to the one
 * before. @return the end of the run starting at w[i]. */
static size_t run_end(const struct rfs_wanted *w, size_t i, size_t n)
{
	size_t j = i + 1;
	while (j < n && w[j].row - w[j - 1].row <= 1)
		j++;
	return j;
}

/* Before and after a read (the backend's check_unchanged): bytes read
 * while the file was written may mix old and new rows. */
static int unchanged_or_log(struct rfs_source *s, const struct rfs_wanted *w,
			    size_t n)
{
	int rc = s->ops->check_unchanged(s);
	/* One cause for every batch from now on, whose rows differ: logged
	 * once a minute, then counted. */
	if (rc != 0 && n > 0)
		rfs_log_limited_by(&s->read_failures, "the file changed",
				   "source %s dataset %s: rows %llu..%llu (%zu "
				   "rows) not served: the file changed since "
				   "mount",
				   s->info.path, s->info.dataset,
				   (unsigned long long)w[0].row,
				   (unsigned long long)w[n - 1].row, n);
	return rc;
}

int rfs_source_read_rows(struct rfs_source *s, const int64_t *rows, size_t n,
			 void *dst)
{
	size_t row_bytes = rfs_source_row_bytes(s);
	int rc = -ENOMEM;
	struct rfs_wanted *w = rfs_rowsort(rows, n);
	uint64_t *distinct = malloc((n ? n : 1) * sizeof(*distinct));
	unsigned char **to = malloc((n ? n : 1) * sizeof(*to));
	unsigned char *out = dst;

	if (!w || !distinct || !to)
		goto out;
	rc = unchanged_or_log(s, w, n);
	if (rc != 0)
		goto out;
	size_t m = 0;
	for (size_t k = 0; k < n; k++) {
		if (k && w[k].row == w[k - 1].row)
			continue;
		distinct[m] = w[k].row;
		to[m++] = out + w[k].slot * row_bytes;
	}
	rc = s->ops->read_rows(s, distinct, m, to);
	if (rc == 0)
		rc = unchanged_or_log(s, w, n);
	for (size_t k = 1; k < n && rc == 0; k++)
		if (w[k].row == w[k - 1].row)
			memcpy(out + w[k].slot * row_bytes,
			       out + w[k - 1].slot * row_bytes, row_bytes);
out:
	free(to);
	free(distinct);
	free(w);
	return rc;
}

/* Rows w[i..j), adjacent: values from a of the file, at pos in the
 * scratch arrays. */
struct csr_run {
	size_t i, j;
	uint64_t a, pos;
};

size_t rfs_source_read_scratch(const struct rfs_source *s, uint64_t n,
			       uint64_t nnz)
{
	size_t elem = rfs_dtype_size(s->info.dtype);
	if (s->info.sparse) /* the arrays of rfs_source_read_csr() */
		return (n + 1) * sizeof(uint64_t) +
		       n * (sizeof(struct rfs_wanted) + sizeof(struct csr_run) +
			    2 * sizeof(struct rfs_csr_range)) +
		       nnz * (2 * elem + rfs_dtype_size(s->info.index_dtype) +
			      sizeof(int64_t));
	/* rfs_source_read_rows()'s arrays and the backend's */
	size_t per_row = sizeof(struct rfs_wanted) + sizeof(uint64_t) +
			 sizeof(unsigned char *) + s->ops->row_scratch(s);
	return n * per_row;
}

int rfs_source_claim_csr_read(const struct rfs_source *s, const char *what,
			      uint64_t nnz, uint64_t *claimed, char *err,
			      size_t errlen)
{
	/* rfs_source_read_scratch()'s bytes per stored value. */
	size_t elem = rfs_dtype_size(s->info.dtype);
	return rfs_memlimit_claim(s->env.claims, s->info.path, what, nnz,
				  2 * elem +
					  rfs_dtype_size(s->info.index_dtype) +
					  sizeof(int64_t),
				  claimed, err, errlen);
}

uint64_t rfs_source_row_nnz(const struct rfs_source *s, uint64_t row)
{
	return (uint64_t)(s->indptr[row + 1] - s->indptr[row]);
}

int rfs_source_csr_alloc_cols(struct rfs_csr *c)
{
	c->cols_bytes = c->start[c->rows] * sizeof(int64_t) + 1;
	c->cols = rfs_bigbuf_alloc(c->pool, c->cols_bytes);
	return c->cols ? 0 : -ENOMEM;
}

void rfs_source_csr_free(struct rfs_csr *c)
{
	free(c->start);
	if (!c->values_borrowed)
		free(c->values);
	rfs_bigbuf_free(c->pool, c->cols, c->cols_bytes);
	*c = (struct rfs_csr){ 0 };
}

/* A run's rows placed at their slots: values copied, column ids widened
 * and checked against the width. */
static int place_csr_run(struct rfs_source *s, const struct rfs_wanted *w,
			 const struct csr_run *run, struct rfs_csr *out,
			 const unsigned char *values,
			 const unsigned char *raw_cols)
{
	size_t elem = rfs_dtype_size(s->info.dtype);
	size_t index_elem = rfs_dtype_size(s->info.index_dtype);
	for (size_t k = run->i; k < run->j; k++) {
		uint64_t from =
			(uint64_t)s->indptr[w[k].row] - run->a + run->pos;
		uint64_t len = rfs_source_row_nnz(s, w[k].row);
		uint64_t to = out->start[w[k].slot];
		int64_t *cols = out->cols + to;
		memcpy((unsigned char *)out->values + to * elem,
		       values + from * elem, len * elem);
		rfs_convert(RFS_INT64, cols, s->info.index_dtype,
			    raw_cols + from * index_elem, len);
		for (uint64_t q = 0; q < len; q++) {
			if (cols[q] >= 0 && (uint64_t)cols[q] < s->info.cols)
				continue;
			rfs_log_limited(
				&s->read_failures,
				"source %s dataset %s: column index %lld of "
				"value %llu is outside 0..%llu",
				s->info.path, s->info.dataset,
				(long long)cols[q],
				(unsigned long long)(run->a + from - run->pos +
						     q),
				(unsigned long long)(s->info.cols - 1));
			return -EIO;
		}
	}
	return 0;
}

/* The values and column ids of every run, asked of the backend in one
 * call (so reads from storage can be in flight together), then placed. */
static int read_csr_runs(struct rfs_source *s, const struct rfs_wanted *w,
			 size_t n, struct rfs_csr *out, unsigned char *values,
			 unsigned char *raw_cols)
{
	size_t elem = rfs_dtype_size(s->info.dtype);
	size_t index_elem = rfs_dtype_size(s->info.index_dtype);
	struct csr_run *runs = malloc((n ? n : 1) * sizeof(*runs));
	struct rfs_csr_range *ranges =
		malloc((n ? 2 * n : 1) * sizeof(*ranges));
	size_t nruns = 0, nranges = 0;
	uint64_t pos = 0;
	int rc = -ENOMEM;
	if (!runs || !ranges)
		goto out;
	for (size_t i = 0, j; i < n; i = j) {
		j = run_end(w, i, n);
		uint64_t a = (uint64_t)s->indptr[w[i].row];
		uint64_t b = (uint64_t)s->indptr[w[j - 1].row + 1];
		runs[nruns++] = (struct csr_run){ i, j, a, pos };
		if (b > a) {
			ranges[nranges++] = (struct rfs_csr_range){
				RFS_CSR_VALUES, a, b - a, values + pos * elem
			};
			ranges[nranges++] = (struct rfs_csr_range){
				RFS_CSR_INDICES, a, b - a,
				raw_cols + pos * index_elem
			};
		}
		pos += b - a;
	}
	rc = nranges ? s->ops->read_csr_ranges(s, ranges, nranges) : 0;
	for (size_t r = 0; r < nruns && rc == 0; r++)
		rc = place_csr_run(s, w, &runs[r], out, values, raw_cols);
out:
	free(runs);
	free(ranges);
	return rc;
}

int rfs_source_read_csr(struct rfs_source *s, const int64_t *rows, size_t n,
			void *dst, struct rfs_csr *out)
{
	int rc = -ENOMEM;
	size_t elem = rfs_dtype_size(s->info.dtype);
	size_t index_elem = rfs_dtype_size(s->info.index_dtype);
	struct rfs_wanted *w = rfs_rowsort(rows, n);
	unsigned char *values = NULL, *raw_cols = NULL;
	uint64_t total = 0;

	*out = (struct rfs_csr){ .rows = n, .pool = s->env.pool };
	out->start = calloc(n + 1, sizeof(*out->start));
	if (!w || !out->start)
		goto out;
	for (size_t i = 0; i < n; i++)
		out->start[i + 1] = out->start[i] +
				    rfs_source_row_nnz(s, (uint64_t)rows[i]);
	total = out->start[n];
	/* The runs' distinct values are at most the batch's. */
	out->values = dst ? dst : malloc(total * elem + 1);
	out->values_borrowed = dst != NULL;
	rfs_source_csr_alloc_cols(out);
	/* Pooled and populated: these are megabytes per batch. */
	values = rfs_bigbuf_alloc(s->env.pool, total * elem + 1);
	raw_cols = rfs_bigbuf_alloc(s->env.pool, total * index_elem + 1);
	if (!out->values || !out->cols || !values || !raw_cols)
		goto out;
	rc = unchanged_or_log(s, w, n);
	if (rc == 0)
		rc = read_csr_runs(s, w, n, out, values, raw_cols);
	if (rc == 0)
		rc = unchanged_or_log(s, w, n);
out:
	if (rc != 0)
		rfs_source_csr_free(out);
	free(w);
	rfs_bigbuf_free(s->env.pool, values, total * elem + 1);
	rfs_bigbuf_free(s->env.pool, raw_cols, total * index_elem + 1);
	return rc;
}

void rfs_source_take_share(struct rfs_source *s)
{
	s->ops->take_share(s);
}

int rfs_source_reads_file(const struct rfs_source *s, dev_t dev, ino_t ino)
{
	return s->ops->reads_file(s, dev, ino);
}

enum rfs_source_state rfs_source_state(struct rfs_source *s)
{
	return s->ops->state(s);
}

const char *rfs_source_state_name(enum rfs_source_state st)
{
	switch (st) {
	case RFS_SOURCE_REPLACED:
		return "replaced: serving the file opened at mount";
	case RFS_SOURCE_CHANGED:
		return "changed in place: EIO for new batches";
	case RFS_SOURCE_OK:
		break;
	}
	return "ok";
}

/* Refuses a matrix of no rows, no columns, or rows over 1 GiB, then sets
 * s->info.fingerprint from what every backend describes: shape, dtype,
 * nnz, the dataset's name and the first and last rows (read through the
 * source, so one matrix has one fingerprint in any format). On failure
 * writes one line naming the dataset or the row to err. @return 0,
 * -EINVAL, -EIO, -ENOMEM. */
static int fingerprint(struct rfs_source *s, char *err, size_t errlen)
{
	const struct rfs_source_info *in = &s->info;
	/* A row must fit a batch file (1 GiB) in any served dtype (8 bytes
	 * at most), which also keeps every size product within 64 bits. */
	char why[96] = "";
	if (!in->rows || !in->cols)
		snprintf(why, sizeof(why), "%s",
			 in->rows ? "rows of 0 columns" : "no rows");
	else if (in->cols > (UINT64_C(1) << 30) / 8)
		snprintf(why, sizeof(why),
			 "%llu columns: a row of over 1 GiB cannot be served",
			 (unsigned long long)in->cols);
	if (why[0]) {
		snprintf(err, errlen, "%s: dataset %s has %s", in->path,
			 in->dataset, why);
		return -EINVAL;
	}
	/* A dense row is up to 1 GiB (its width is metadata): claimed while
	 * it is held, when over 1 MiB (under it, within the daemon's own
	 * 32 MiB, so that a cache_mb at its largest still mounts). */
	size_t row_bytes = in->sparse ? 0 : rfs_source_row_bytes(s);
	uint64_t row_held = 0;
	char row_what[300];
	snprintf(row_what, sizeof(row_what),
		 "%.200s's first and last rows (read for its fingerprint)",
		 in->dataset);
	int rc = rfs_memlimit_claim(s->env.claims, in->path, row_what,
				    row_bytes > (1u << 20) ? in->cols : 0,
				    rfs_dtype_size(in->dtype), &row_held, err,
				    errlen);
	if (rc != 0)
		return rc;
	XXH3_state_t *st = XXH3_createState();
	unsigned char *row = row_bytes ? malloc(row_bytes) : NULL;
	rc = -ENOMEM;
	if (!st || (row_bytes && !row)) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	uint64_t head[5] = { in->rows, in->cols, (uint64_t)in->ndims, in->dtype,
			     in->nnz };
	XXH3_64bits_reset(st);
	XXH3_64bits_update(st, head, sizeof(head));
	XXH3_64bits_update(st, in->dataset, strlen(in->dataset));
	const int64_t ends[2] = { 0, (int64_t)in->rows - 1 };
	for (int i = 0; i < 2; i++) {
		if (in->sparse) {
			/* As many values as indptr says: claimed. */
			struct rfs_csr csr;
			char what[300];
			uint64_t held = 0;
			snprintf(what, sizeof(what),
				 "%.200s row %lld (its stored values, read for "
				 "its fingerprint)",
				 in->dataset, (long long)ends[i]);
			rc = rfs_source_claim_csr_read(
				s, what,
				rfs_source_row_nnz(s, (uint64_t)ends[i]), &held,
				err, errlen);
			if (rc != 0)
				goto out;
			rc = rfs_source_read_csr(s, &ends[i], 1, NULL, &csr);
			rfs_memlimit_release(s->env.claims, &held);
			if (rc == 0) {
				XXH3_64bits_update(
					st, csr.values,
					csr.start[1] *
						rfs_dtype_size(in->dtype));
				XXH3_64bits_update(st, csr.cols,
						   csr.start[1] * 8);
				rfs_source_csr_free(&csr);
			}
		} else {
			rc = rfs_source_read_rows(s, &ends[i], 1, row);
			XXH3_64bits_update(st, row, row_bytes);
		}
		if (rc != 0) {
			snprintf(err, errlen,
				 "%s: dataset %s: cannot read row %lld",
				 in->path, in->dataset, (long long)ends[i]);
			goto out;
		}
	}
	s->info.fingerprint = XXH3_64bits_digest(st);
out:
	free(row);
	rfs_memlimit_release(s->env.claims, &row_held);
	XXH3_freeState(st);
	return rc;
}

/* Sets s->info.has_var and var_fingerprint (XXH3 of the names, each
 * followed by a NUL; of their count alone where the backend saw more than
 * the columns: never served, rfs_source_read_var_names() refuses them).
 * @return 0 or a negative errno with err set. */
static int fingerprint_var(struct rfs_source *s, char *err, size_t errlen)
{
	char **names;
	uint64_t n;
	int rc = rfs_anndata_read_var_names(s, &names, &n, err, errlen);
	if (rc == -E2BIG) {
		/* More than the columns, not read: rfs_source_read_var_names
		 * says so; the fingerprint is of their count. */
		s->info.var_fingerprint = XXH3_64bits(&n, sizeof(n));
		s->info.has_var = 1;
		return 0;
	}
	if (rc != 0)
		return rc == -ENOENT ? 0 : rc;
	s->info.var_fingerprint = rfs_varjoin_fingerprint_of(names, n);
	s->info.has_var = 1;
	rfs_source_free_var_names(s, names, n);
	return 0;
}

int rfs_source_read_var_names(struct rfs_source *s, char ***names, uint64_t *n,
			      char *err, size_t errlen)
{
	int rc = s->info.has_var ?
			 rfs_anndata_read_var_names(s, names, n, err, errlen) :
			 -ENOENT;
	if (rc == -ENOENT)
		snprintf(err, errlen, "%s: no var names", s->info.path);
	if ((rc == 0 || rc == -E2BIG) && *n != s->info.cols) {
		snprintf(err, errlen,
			 "%s: %llu var names for %llu columns of %s",
			 s->info.path, (unsigned long long)*n,
			 (unsigned long long)s->info.cols, s->info.dataset);
		rfs_source_free_var_names(s, *names, rc == 0 ? *n : 0);
		*names = NULL;
		*n = 0;
		rc = -EINVAL;
	}
	return rc;
}

void rfs_source_free_var_names(struct rfs_source *s, char **names, uint64_t n)
{
	rfs_buf_free_strings(names, n);
	rfs_memlimit_release(s->env.claims, &s->var_claimed);
}

int rfs_source_open(const char *path, const char *dataset,
		    const struct rfs_source_env *env, struct rfs_source **out,
		    char *err, size_t errlen)
{
	static const struct rfs_source_env none;
	const struct rfs_source_backend *b;
	struct rfs_source *s = NULL;
	if (errlen)
		err[0] = '\0';
	int rc = rfs_source_backend_of(path, &b, err, errlen);
	if (rc == 0)
		rc = b->open(path, dataset, env ? env : &none, &s, err, errlen);
	if (s) {
		s->ops = b->ops;
		s->store = b->store;
	}
	if (rc == 0)
		rc = rfs_anndata_open_rows(s, err, errlen);
	if (rc == 0)
		rc = fingerprint(s, err, errlen);
	if (rc == 0)
		rc = fingerprint_var(s, err, errlen);
	if (rc == -ENOMEM && errlen && !err[0])
		snprintf(err, errlen, "%s: out of memory", path);
	if (rc != 0)
		rfs_source_destroy(s);
	else
		*out = s;
	return rc;
}

void rfs_source_destroy(struct rfs_source *s)
{
	if (!s)
		return;
	rfs_memlimit_release(s->env.claims, &s->claimed);
	rfs_memlimit_release(s->env.claims, &s->var_claimed);
	free(s->indptr);
	s->ops->close(s);
}
