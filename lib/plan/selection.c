/* SPDX-License-Identifier: MIT */
#include "plan/selection.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "os/memlimit.h"
#include "plan/sampler.h"

/* keep[] &= the rows filter "COLUMN:V1|V2" keeps. */
static int apply_filter(struct rfs_dataset *d, const char *filter,
			uint8_t *keep, char *err, size_t errlen)
{
	char msg[1024] = "";
	const char *colon = strchr(filter, ':');
	if (!colon || colon == filter || !colon[1]) {
		snprintf(err, errlen,
			 "option filter=%s: expected COLUMN:VALUE1|VALUE2",
			 filter);
		return -EINVAL;
	}
	char *name = strndup(filter, (size_t)(colon - filter));
	struct rfs_column col;
	int rc = name ? rfs_dataset_read_column(d, name, &col, msg,
						sizeof(msg)) :
			-ENOMEM;
	if (rc == 0) {
		rc = rfs_column_keep(&col, colon + 1, keep, msg, sizeof(msg));
		rfs_column_free(&col);
	}
	if (rc != 0)
		snprintf(err, errlen, "option filter=%s: %s", filter,
			 rc == -ENOMEM && !msg[0] ? "out of memory" : msg);
	free(name);
	return rc;
}

static int build_kept(const struct rfs_config *c, struct rfs_dataset *d,
		      struct rfs_selection *s, char *err, size_t errlen)
{
	uint64_t n = rfs_dataset_rows(d);
	s->kept_rows = n;
	if (!c->filter.count)
		return 0;
	/* A row count a file's metadata alone can claim (memlimit.c). */
	uint64_t marks = 0;
	int rc = rfs_memlimit_claim(s->claims, "option filter",
				    "a mark per row", n, 1, &marks, err,
				    errlen);
	if (rc != 0)
		return rc;
	uint8_t *keep = malloc(n);
	if (!keep) {
		snprintf(err, errlen,
			 "option filter: no memory to mark %llu "
			 "rows",
			 (unsigned long long)n);
		rfs_memlimit_release(s->claims, &marks);
		return -ENOMEM;
	}
	memset(keep, 1, n);
	for (size_t i = 0; i < c->filter.count && rc == 0; i++)
		rc = apply_filter(d, c->filter.items[i], keep, err, errlen);
	uint64_t count = 0;
	for (uint64_t r = 0; r < n && rc == 0; r++)
		count += keep[r];
	if (rc == 0 && count == 0) {
		snprintf(err, errlen,
			 "option filter: no row matches every "
			 "filter");
		rc = -EINVAL;
	}
	if (rc == 0)
		rc = rfs_memlimit_claim(s->claims, "option filter",
					"the kept rows", count,
					sizeof(*s->kept), &s->claimed, err,
					errlen);
	if (rc == 0 && !(s->kept = malloc(count * sizeof(*s->kept))))
		rc = -ENOMEM;
	for (uint64_t r = 0, k = 0; r < n && rc == 0; r++)
		if (keep[r])
			s->kept[k++] = r;
	s->kept_rows = count;
	free(keep);
	rfs_memlimit_release(s->claims, &marks);
	return rc;
}

/* The first file whose column name is float (it made the joined column
 * float), or NULL: read again, on the error path only. */
static const char *first_float_file(struct rfs_dataset *d, const char *name)
{
	for (size_t i = 0; i < rfs_dataset_files(d); i++) {
		struct rfs_column part;
		char msg[1024];
		if (rfs_source_read_column(rfs_dataset_source(d, i), name,
					   &part, msg, sizeof(msg)) != 0)
			return NULL;
		int real = part.kind == RFS_COLUMN_REAL;
		rfs_column_free(&part);
		if (real)
			return rfs_dataset_file(d, i)->path;
	}
	return NULL;
}

static int read_label(const struct rfs_config *c, struct rfs_dataset *d,
		      struct rfs_selection *s, char *err, size_t errlen)
{
	char msg[1024];
	if (!c->label) {
		if (c->strategy == RFS_CLASS_BALANCED) {
			snprintf(err, errlen,
				 "option strategy=class_balanced "
				 "needs label=COLUMN");
			return -EINVAL;
		}
		return 0;
	}
	int rc = rfs_dataset_read_column(d, c->label, &s->label, msg,
					 sizeof(msg));
	if (rc == 0 && s->label.kind == RFS_COLUMN_REAL) {
		/* Files of integers and one of floats: that one named. */
		rfs_column_free(&s->label);
		const char *file = first_float_file(d, c->label);
		snprintf(msg, sizeof(msg),
			 "%.900s%sa float column cannot be a label (use a "
			 "categorical, integer, bool or string column)",
			 file ? file : "", file ? ": " : "");
		rc = -EINVAL;
	}
	if (rc != 0) {
		snprintf(err, errlen, "option label=%s: %s", c->label, msg);
		return rc;
	}
	s->has_label = 1;
	return 0;
}

/* The first index, from `from` on, of a kept id >= row (or kept_rows). */
static uint64_t first_kept(const struct rfs_selection *s, uint64_t from,
			   uint64_t row)
{
	uint64_t a = from, b = s->kept_rows;
	while (a < b) {
		uint64_t m = a + (b - a) / 2;
		if (s->kept[m] < row)
			a = m + 1;
		else
			b = m;
	}
	return a;
}

/* Rank r's files are r, r + W, r + 2W, ...: their stretches of the kept
 * rows (or of all rows) become the rank's ranges. */
static int file_ranges(const struct rfs_config *c, struct rfs_dataset *d,
		       struct rfs_selection *s, uint64_t rank, char *err,
		       size_t errlen)
{
	struct rfs_rowset *r = &s->seqs[rank];
	size_t files = rfs_dataset_files(d);
	size_t mine = (files - rank + c->world_size - 1) / c->world_size;
	r->base = s->kept;
	r->range_start = calloc(mine + 1, sizeof(uint64_t));
	r->range_prefix = calloc(mine + 1, sizeof(uint64_t));
	if (!r->range_start || !r->range_prefix)
		return -ENOMEM;
	for (size_t f = rank; f < files; f += c->world_size) {
		uint64_t lo = rfs_dataset_file_start(d, f);
		uint64_t hi = rfs_dataset_file_start(d, f + 1);
		if (s->kept) { /* the stretch of kept ids within [lo, hi) */
			lo = first_kept(s, 0, lo);
			hi = first_kept(s, lo, hi);
		}
		if (hi == lo)
			continue;
		r->range_start[r->nranges] = lo;
		r->range_prefix[r->nranges + 1] =
			r->range_prefix[r->nranges] + (hi - lo);
		r->nranges++;
	}
	r->length = r->range_prefix[r->nranges];
	if (r->length == 0) {
		snprintf(err, errlen,
			 "option partition=file: rank %llu gets no rows "
			 "(%zu files for %llu ranks%s)",
			 (unsigned long long)rank, files,
			 (unsigned long long)c->world_size,
			 s->kept ? ", after the filters" : "");
		return -EINVAL;
	}
	return 0;
}

struct weight_ctx {
	const struct rfs_column *column; /* weighted: the weights */
	const struct rfs_selection *sel; /* class_balanced: labels */
	double *class_weight; /* class_balanced: by code */
	const int64_t *values; /* class_balanced, integer labels: sorted */
	uint64_t nvalues;
	uint64_t claimed; /* values (memlimit.c) */
};

static double column_weight(void *ctx, uint64_t row)
{
	const struct weight_ctx *w = ctx;
	return rfs_column_real(w->column, row);
}

/* Index of v in the sorted distinct label values (integer labels). */
static uint64_t value_index(const struct weight_ctx *w, int64_t v)
{
	uint64_t lo = 0, hi = w->nvalues;
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (w->values[mid] <= v)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

static double class_weight(void *ctx, uint64_t row)
{
	const struct weight_ctx *w = ctx;
	int64_t code = rfs_selection_label(w->sel, row);
	if (w->values)
		return w->class_weight[value_index(w, code)];
	return code < 0 ? 0.0 : w->class_weight[code];
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* 1 / count(class)^(1 - smoothing) over the sampled rows; the counts are
 * of the kept rows, so a filtered class is balanced among what remains. */
static int class_weights(const struct rfs_config *c,
			 const struct rfs_selection *s, struct weight_ctx *w,
			 char *err, size_t errlen)
{
	const struct rfs_rowset *r = &s->seqs[0];
	uint64_t classes = s->label.ncategories;
	int64_t *sorted = NULL;
	if (s->label.kind == RFS_COLUMN_INT) {
		int rc = rfs_memlimit_claim(s->claims,
					    "option strategy=class_balanced",
					    "the sampled rows' labels, sorted",
					    r->length, sizeof(*sorted),
					    &w->claimed, err, errlen);
		if (rc != 0)
			return rc;
		sorted = malloc(r->length * sizeof(*sorted));
		if (!sorted)
			return -ENOMEM;
		for (uint64_t v = 0; v < r->length; v++)
			sorted[v] =
				rfs_selection_label(s, rfs_rowset_row(r, v));
		qsort(sorted, r->length, sizeof(*sorted), cmp_i64);
		classes = 0;
		for (uint64_t v = 0; v < r->length; v++)
			if (!classes || sorted[classes - 1] != sorted[v])
				sorted[classes++] = sorted[v];
		w->values = sorted;
		w->nvalues = classes;
	}
	uint64_t *count = calloc(classes ? classes : 1, sizeof(*count));
	w->class_weight = calloc(classes ? classes : 1, sizeof(double));
	if (!count || !w->class_weight) {
		free(count);
		return -ENOMEM;
	}
	for (uint64_t v = 0; v < r->length; v++) {
		int64_t code = rfs_selection_label(s, rfs_rowset_row(r, v));
		if (w->values)
			count[value_index(w, code)]++;
		else if (code >= 0)
			count[code]++;
	}
	for (uint64_t k = 0; k < classes; k++)
		w->class_weight[k] = count[k] ? 1.0 / pow((double)count[k],
							  1.0 - c->smoothing) :
						0.0;
	free(count);
	return 0;
}

/* The weights' cumulative sums, 8 bytes per sampled row (rowset.c), for
 * the selection's life. */
static int claim_sums(const struct rfs_config *c, struct rfs_selection *s,
		      char *err, size_t errlen)
{
	return rfs_memlimit_claim(s->claims,
				  c->strategy == RFS_WEIGHTED ?
					  "option strategy=weighted" :
					  "option strategy=class_balanced",
				  "a weight sum per sampled row",
				  s->seqs[0].length, sizeof(double),
				  &s->claimed, err, errlen);
}

static int set_weights(const struct rfs_config *c, struct rfs_dataset *d,
		       struct rfs_selection *s, char *err, size_t errlen)
{
	struct weight_ctx w = { .sel = s };
	struct rfs_column weights = { 0 };
	char msg[1024];
	uint64_t bad;
	int rc;

	if (c->strategy == RFS_WEIGHTED) {
		if (!c->weights) {
			snprintf(err, errlen,
				 "option strategy=weighted needs "
				 "weights=COLUMN");
			return -EINVAL;
		}
		rc = rfs_dataset_read_column(d, c->weights, &weights, msg,
					     sizeof(msg));
		if (rc == 0 && weights.kind == RFS_COLUMN_CODES) {
			snprintf(msg, sizeof(msg),
				 "a %s column cannot be weights (use a "
				 "numeric column)",
				 rfs_column_kind_name(&weights));
			rc = -EINVAL;
		}
		if (rc != 0) {
			snprintf(err, errlen, "option weights=%s: %s",
				 c->weights, msg);
			rfs_column_free(&weights);
			return rc;
		}
		w.column = &weights;
	} else {
		rc = class_weights(c, s, &w, err, errlen);
	}
	if (rc == 0)
		rc = claim_sums(c, s, err, errlen);
	if (rc == 0)
		rc = rfs_rowset_set_weights(
			&s->seqs[0], w.column ? column_weight : class_weight,
			&w, &bad);
	if (rc == -EINVAL && c->strategy == RFS_WEIGHTED) {
		if (bad == s->seqs[0].length)
			snprintf(err, errlen,
				 "option weights=%s: every weight is 0",
				 c->weights);
		else {
			uint64_t row = rfs_rowset_row(&s->seqs[0], bad);
			/* Of several files: the file and its own row too. */
			char where[PATH_MAX + 64] = "";
			size_t f = 0, files = rfs_dataset_files(d);
			while (f + 1 < files &&
			       rfs_dataset_file_start(d, f + 1) <= row)
				f++;
			uint64_t own = row - rfs_dataset_file_start(d, f);
			if (files > 1)
				snprintf(where, sizeof(where),
					 " (row %llu of %s)",
					 (unsigned long long)own,
					 rfs_dataset_file(d, f)->path);
			snprintf(err, errlen,
				 "option weights=%s: row %llu%s has weight %g "
				 "(weights must be finite and >= 0)",
				 c->weights, (unsigned long long)row, where,
				 rfs_column_real(&weights, row));
		}
	} else if (rc == -EINVAL) {
		snprintf(err, errlen,
			 "option label=%s: every sampled row's label is "
			 "missing",
			 c->label);
	}
	rfs_column_free(&weights);
	free(w.class_weight);
	free((void *)w.values);
	rfs_memlimit_release(s->claims, &w.claimed);
	return rc;
}

/* Options that only mean something together. */
static int check_combination(const struct rfs_config *c, char *err,
			     size_t errlen)
{
	int draws = rfs_sampler_draws(c->strategy);
	if (c->weights && c->strategy != RFS_WEIGHTED) {
		snprintf(err, errlen,
			 "option weights=%s needs "
			 "strategy=weighted",
			 c->weights);
		return -EINVAL;
	}
	if (draws && c->partition == RFS_PARTITION_FILE) {
		snprintf(err, errlen,
			 "option partition=file works with streaming, shuffle "
			 "and block_shuffle, not strategy=%s",
			 rfs_config_strategy_name(c->strategy));
		return -EINVAL;
	}
	return 0;
}

int rfs_selection_build(const struct rfs_config *c, struct rfs_dataset *d,
			struct rfs_claims *claims, struct rfs_selection *out,
			char *err, size_t errlen)
{
	*out = (struct rfs_selection){ .claims = claims };
	if (errlen)
		err[0] = '\0';
	int rc = check_combination(c, err, errlen);
	if (rc == 0)
		rc = build_kept(c, d, out, err, errlen);
	if (rc == 0)
		rc = read_label(c, d, out, err, errlen);
	if (rc != 0)
		goto out;
	if (c->partition == RFS_PARTITION_FILE &&
	    rfs_dataset_files(d) < c->world_size) {
		snprintf(err, errlen,
			 "option partition=file: %zu source files for "
			 "world_size %llu; every rank needs a file",
			 rfs_dataset_files(d),
			 (unsigned long long)c->world_size);
		rc = -EINVAL;
		goto out;
	}
	out->sequences = c->partition == RFS_PARTITION_FILE ? c->world_size : 1;
	out->seqs = calloc(out->sequences, sizeof(*out->seqs));
	rc = out->seqs ? 0 : -ENOMEM;
	if (c->partition == RFS_PARTITION_FILE) {
		for (uint64_t r = 0; r < out->sequences && rc == 0; r++)
			rc = file_ranges(c, d, out, r, err, errlen);
	} else if (rc == 0) {
		out->seqs[0] = (struct rfs_rowset){ .length = out->kept_rows,
						    .base = out->kept };
	}
	if (rc == 0 && rfs_sampler_draws(c->strategy))
		rc = set_weights(c, d, out, err, errlen);
out:
	if (rc == -ENOMEM && errlen && !err[0]) /* else a column said why */
		snprintf(err, errlen, "out of memory");
	if (rc != 0)
		rfs_selection_free(out);
	return rc;
}

void rfs_selection_free(struct rfs_selection *s)
{
	for (uint64_t i = 0; s->seqs && i < s->sequences; i++)
		rfs_rowset_free(&s->seqs[i]);
	free(s->seqs);
	free(s->kept);
	rfs_column_free(&s->label);
	rfs_memlimit_release(s->claims, &s->claimed);
	*s = (struct rfs_selection){ 0 };
}

/* h and n bytes at p, hashed into a new h: each part's length goes into
 * the seed, so that parts never run into one another. */
static uint64_t chain(uint64_t h, const void *p, uint64_t n)
{
	return XXH3_64bits_withSeed(n ? p : NULL, (size_t)n, h + n);
}

uint64_t rfs_selection_digest(const struct rfs_selection *s)
{
	int weighted = 0;
	for (uint64_t i = 0; s->seqs && i < s->sequences; i++)
		weighted |= s->seqs[i].cdf != NULL;
	if (!s->kept && !s->has_label && !weighted)
		return 0;
	uint64_t h = chain(0, s->kept,
			   s->kept ? s->kept_rows * sizeof(*s->kept) : 0);
	h = chain(h, s->label.codes,
		  s->has_label ? s->label.rows * sizeof(*s->label.codes) : 0);
	/* The names too: dataset.json lists them, and a renamed category
	 * keeps its codes. */
	for (uint64_t i = 0; s->has_label && i < s->label.ncategories; i++)
		h = chain(h, s->label.categories[i],
			  strlen(s->label.categories[i]) + 1);
	for (uint64_t i = 0; s->seqs && i < s->sequences; i++) {
		const struct rfs_rowset *r = &s->seqs[i];
		h = chain(h, r->cdf, r->cdf ? r->length * sizeof(*r->cdf) : 0);
	}
	return h ? h : 1; /* 0 says: nothing from columns */
}

int64_t rfs_selection_label(const struct rfs_selection *s, uint64_t row)
{
	return s->label.codes[row];
}
