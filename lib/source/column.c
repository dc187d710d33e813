/* SPDX-License-Identifier: MIT */
#include "source/column.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/convert.h"
#include "os/memlimit.h"

void rfs_column_free(struct rfs_column *c)
{
	rfs_buf_free_strings(c->categories, c->ncategories);
	free(c->codes);
	free(c->reals);
	rfs_memlimit_release(c->claims, &c->claimed);
	*c = (struct rfs_column){ 0 };
}

const char *rfs_column_kind_name(const struct rfs_column *c)
{
	if (c->kind == RFS_COLUMN_INT)
		return "integer";
	if (c->kind == RFS_COLUMN_REAL)
		return "float";
	return c->boolean ? "bool" : "categorical";
}

static int sorted(char *const *names, uint64_t n)
{
	for (uint64_t i = 1; i < n; i++)
		if (strcmp(names[i - 1], names[i]) >= 0)
			return 0;
	return 1;
}

static int cmp_index(const void *a, const void *b, void *names)
{
	char *const *n = names;
	return strcmp(n[*(const uint64_t *)a], n[*(const uint64_t *)b]);
}

/* @return the position of name in names (through the sorted index), or
 * -1. */
static int64_t find_name(char *const *names, const uint64_t *index, uint64_t n,
			 const char *name)
{
	uint64_t lo = 0, hi = n;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		int c = strcmp(names[index[mid]], name);
		if (c == 0)
			return (int64_t)index[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

static uint64_t *name_index(char *const *names, uint64_t n)
{
	uint64_t *index = malloc((n ? n : 1) * sizeof(*index));
	if (!index)
		return NULL;
	for (uint64_t i = 0; i < n; i++)
		index[i] = i;
	qsort_r(index, n, sizeof(*index), cmp_index, (void *)names);
	return index;
}

static void remap(int64_t *codes, uint64_t n, const int64_t *map)
{
	for (uint64_t i = 0; i < n; i++)
		if (codes[i] >= 0)
			codes[i] = map[codes[i]];
}

/* Unites the categories of dst and src into dst, remapping both sides'
 * codes. Takes src's strings. */
static int unite(struct rfs_column *dst, struct rfs_column *src)
{
	uint64_t n1 = dst->ncategories, n2 = src->ncategories;
	int merge_sorted = sorted(dst->categories, n1) &&
			   sorted(src->categories, n2);
	char **all = malloc((n1 + n2 ? n1 + n2 : 1) * sizeof(*all));
	int64_t *map1 = malloc((n1 ? n1 : 1) * sizeof(*map1));
	int64_t *map2 = malloc((n2 ? n2 : 1) * sizeof(*map2));
	uint64_t *index = name_index(dst->categories, n1);
	uint64_t n = 0;
	int rc = -ENOMEM;
	if (!all || !map1 || !map2 || !index)
		goto out;
	if (merge_sorted) {
		uint64_t i = 0, j = 0;
		while (i < n1 || j < n2) {
			int c = i == n1 ? 1 :
				j == n2 ? -1 :
					  strcmp(dst->categories[i],
						 src->categories[j]);
			if (c <= 0) {
				map1[i] = (int64_t)n;
				all[n] = dst->categories[i++];
			}
			if (c >= 0) {
				map2[j] = (int64_t)n;
				if (c == 0)
					free(src->categories[j++]);
				else
					all[n] = src->categories[j++];
			}
			n++;
		}
	} else {
		for (uint64_t i = 0; i < n1; i++) {
			map1[i] = (int64_t)i;
			all[n++] = dst->categories[i];
		}
		for (uint64_t j = 0; j < n2; j++) {
			int64_t at = find_name(dst->categories, index, n1,
					       src->categories[j]);
			if (at >= 0) {
				map2[j] = at;
				free(src->categories[j]);
			} else {
				map2[j] = (int64_t)n;
				all[n++] = src->categories[j];
			}
		}
	}
	remap(dst->codes, dst->rows, map1);
	remap(src->codes, src->rows, map2);
	free(dst->categories);
	free(src->categories);
	src->categories = NULL;
	src->ncategories = 0;
	dst->categories = all;
	dst->ncategories = n;
	all = NULL;
	rc = 0;
out:
	free(all);
	free(map1);
	free(map2);
	free(index);
	return rc;
}

static int to_real(struct rfs_column *c)
{
	if (c->kind == RFS_COLUMN_REAL)
		return 0;
	double *reals = malloc((c->rows ? c->rows : 1) * sizeof(*reals));
	if (!reals)
		return -ENOMEM;
	for (uint64_t i = 0; i < c->rows; i++)
		reals[i] = (double)c->codes[i];
	free(c->codes);
	c->codes = NULL;
	c->reals = reals;
	c->kind = RFS_COLUMN_REAL;
	c->real_sizes = 1u << 8;
	return 0;
}

/* to_real() of one part, its doubles claimed beside its integers until
 * they are freed. */
static int claimed_to_real(struct rfs_column *c, int before, const char *file,
			   const char *what, char *err, size_t errlen)
{
	char why[1200];
	uint64_t held = 0;
	if (c->kind == RFS_COLUMN_REAL)
		return 0;
	snprintf(why, sizeof(why), "%s%s made float (a double per row)", what,
		 before ? " of the files before it" : "");
	int rc = rfs_memlimit_claim(c->claims, file, why, c->rows,
				    sizeof(double), &held, err, errlen);
	if (rc == 0 && (rc = to_real(c)) != 0)
		snprintf(err, errlen, "out of memory");
	rfs_memlimit_release(c->claims, &held);
	return rc;
}

/* unite(), its tables claimed until they are freed: the united
 * categories' array beside both parts', each part's map of codes and
 * the sorted index of dst's, 8 bytes an entry. */
static int claimed_unite(struct rfs_column *dst, struct rfs_column *src,
			 const char *file, const char *what, char *err,
			 size_t errlen)
{
	char why[1200];
	uint64_t held = 0, n1 = dst->ncategories, n2 = src->ncategories;
	snprintf(why, sizeof(why),
		 "%s: the tables uniting its %llu categories with the %llu "
		 "of the files before it",
		 what, (unsigned long long)n2, (unsigned long long)n1);
	/* Counts in memory: no sum wraps. */
	int rc = rfs_memlimit_claim(src->claims, file, why, 3 * n1 + 2 * n2,
				    sizeof(int64_t), &held, err, errlen);
	if (rc == 0 && (rc = unite(dst, src)) != 0)
		snprintf(err, errlen, "out of memory");
	rfs_memlimit_release(src->claims, &held);
	return rc;
}

int rfs_column_append(struct rfs_column *dst, struct rfs_column *src,
		      const char *file, const char *what, char *err,
		      size_t errlen)
{
	int rc;
	if (!dst->codes && !dst->reals) {
		*dst = *src;
		*src = (struct rfs_column){ 0 };
		return 0;
	}
	if ((dst->kind == RFS_COLUMN_CODES) !=
	    (src->kind == RFS_COLUMN_CODES)) {
		snprintf(err, errlen,
			 "%s: %s is %s here but not in the files before it",
			 file, what, rfs_column_kind_name(src));
		return -EINVAL;
	}
	if (dst->kind != src->kind &&
	    ((rc = claimed_to_real(dst, 1, file, what, err, errlen)) != 0 ||
	     (rc = claimed_to_real(src, 0, file, what, err, errlen)) != 0))
		return rc;
	if (dst->kind == RFS_COLUMN_CODES &&
	    (rc = claimed_unite(dst, src, file, what, err, errlen)) != 0)
		return rc;

	/* dst grows by src's rows while src holds them: claimed until src
	 * is freed (a realloc of a mapped block moves no pages; one in the
	 * heap, under 1 MiB in the daemon, is copied). */
	char why[1200];
	uint64_t held = 0, n = dst->rows + src->rows;
	snprintf(why, sizeof(why),
		 "%s: its rows appended to the files before it", what);
	rc = rfs_memlimit_claim(src->claims, file, why, src->rows,
				sizeof(int64_t), &held, err, errlen);
	if (rc != 0)
		return rc;
	if (dst->kind == RFS_COLUMN_REAL) {
		double *r = realloc(dst->reals, n * sizeof(*r));
		if (r) {
			memcpy(r + dst->rows, src->reals,
			       src->rows * sizeof(*r));
			dst->reals = r;
		}
		rc = r ? 0 : -ENOMEM;
	} else {
		int64_t *k = realloc(dst->codes, n * sizeof(*k));
		if (k) {
			memcpy(k + dst->rows, src->codes,
			       src->rows * sizeof(*k));
			dst->codes = k;
		}
		rc = k ? 0 : -ENOMEM;
	}
	if (rc != 0) {
		snprintf(err, errlen, "out of memory");
		rfs_memlimit_release(src->claims, &held);
		return rc;
	}
	dst->boolean = dst->boolean && src->boolean;
	dst->real_sizes |= src->real_sizes;
	dst->rows = n;
	dst->claimed += src->claimed; /* its rows are dst's now */
	src->claimed = 0;
	rfs_memlimit_release(src->claims, &held);
	rfs_column_free(src);
	return 0;
}

static const char *bool_name(const char *v)
{
	if (!strcmp(v, "True") || !strcmp(v, "true") || !strcmp(v, "1"))
		return "True";
	if (!strcmp(v, "False") || !strcmp(v, "false") || !strcmp(v, "0"))
		return "False";
	return v;
}

/* A bool column, or a categorical one whose categories are the two
 * bools (pandas' Categorical of bools): true/false/1/0 name them too. */
static int boolish(const struct rfs_column *c)
{
	if (c->boolean)
		return 1;
	if (c->kind != RFS_COLUMN_CODES || c->ncategories != 2)
		return 0;
	int f = !strcmp(c->categories[0], "False") ||
		!strcmp(c->categories[1], "False");
	int t = !strcmp(c->categories[0], "True") ||
		!strcmp(c->categories[1], "True");
	return f && t;
}

/* b's text into out (n bytes), ending in "..." when it does not fit. */
static void finish_list(struct rfs_buf *b, char *out, size_t n)
{
	snprintf(out, n, "%s", b->failed || !b->data ? "" : b->data);
	if (b->data && !b->failed && b->len >= n && n > 4)
		strcpy(out + n - 4, "...");
	rfs_buf_free(b);
}

static void list_categories(const struct rfs_column *c, char *out, size_t n)
{
	struct rfs_buf b = { 0 };
	for (uint64_t i = 0; i < c->ncategories && b.len < n; i++)
		rfs_buf_printf(&b, "%s%s", i ? ", " : "", c->categories[i]);
	finish_list(&b, out, n);
}

static int parse_number(const struct rfs_column *c, const char *v, int64_t *i,
			double *d)
{
	char *end;
	if (!*v)
		return -EINVAL;
	if (c->kind == RFS_COLUMN_INT) {
		errno = 0;
		*i = strtoll(v, &end, 10);
		return *end || errno ? -EINVAL : 0;
	}
	*d = strtod(v, &end);
	return *end ? -EINVAL : 0;
}

/* The forms filter value d takes in a REAL column's files, as each width
 * they used stores it (0.1 is 0.100000001490116 in float32): up to 3. */
static size_t stored_forms(const struct rfs_column *c, double d,
			   double forms[3])
{
	unsigned sizes = c->real_sizes ? c->real_sizes : 1u << 8;
	size_t n = 0;
	if (sizes & (1u << 8))
		forms[n++] = d;
	if (sizes & (1u << 4))
		forms[n++] = (double)(float)d;
	if (sizes & (1u << 2)) {
		uint16_t half;
		rfs_convert(RFS_FLOAT16, &half, RFS_FLOAT64, &d, 1);
		rfs_convert(RFS_FLOAT64, &forms[n++], RFS_FLOAT16, &half, 1);
	}
	return n;
}

struct stored_value {
	const struct rfs_column *column;
	double value;
};

/* Whether typed, as a filter value, matches the stored value. */
static int types_as(const void *ctx, double typed)
{
	const struct stored_value *s = ctx;
	double forms[3];
	size_t n = stored_forms(s->column, typed, forms);
	for (size_t i = 0; i < n; i++)
		if (forms[i] == s->value)
			return 1;
	return 0;
}

/* Up to 10 of the numeric column's distinct values, for an error, each
 * as it would be typed in a filter (0.1 for float32's 0.1). */
static void list_numbers(const struct rfs_column *c, char *out, size_t n)
{
	struct rfs_buf b = { 0 };
	double seen[10];
	size_t count = 0;
	for (uint64_t r = 0; r < c->rows; r++) {
		double x = rfs_column_real(c, r);
		size_t k = 0;
		while (k < count && seen[k] != x &&
		       !(isnan(x) && isnan(seen[k])))
			k++;
		if (k < count)
			continue;
		if (count == 10) {
			rfs_buf_printf(&b, ", ...");
			break;
		}
		seen[count++] = x;
		rfs_buf_printf(&b, "%s", count > 1 ? ", " : "");
		if (c->kind == RFS_COLUMN_INT)
			rfs_buf_printf(&b, "%lld", (long long)c->codes[r]);
		else
			rfs_buf_decimal(&b, x, types_as,
					&(struct stored_value){ c, x });
	}
	finish_list(&b, out, n);
}

int rfs_column_keep(const struct rfs_column *c, const char *values,
		    uint8_t *keep, char *err, size_t errlen)
{
	char *list = strdup(values), *save = NULL;
	char **given = NULL;
	uint64_t *category = NULL, *hits = NULL, *per_category = NULL;
	uint8_t *wanted = NULL;
	int64_t *ints = NULL;
	double(*forms)[3] = NULL;
	size_t *nforms = NULL;
	size_t count = 0;
	int rc = -ENOMEM;
	if (!list)
		goto out;
	size_t cap = 1;
	for (const char *p = values; *p; p++)
		cap += *p == '|';
	uint64_t ncat = c->ncategories ? c->ncategories : 1;
	given = calloc(cap, sizeof(*given));
	category = calloc(cap, sizeof(*category));
	hits = calloc(cap, sizeof(*hits));
	ints = calloc(cap, sizeof(*ints));
	forms = calloc(cap, sizeof(*forms));
	nforms = calloc(cap, sizeof(*nforms));
	wanted = calloc(ncat, 1);
	per_category = calloc(ncat, sizeof(*per_category));
	if (!given || !category || !hits || !ints || !forms || !nforms ||
	    !wanted || !per_category)
		goto out;
	rc = 0;
	for (char *v = strtok_r(list, "|", &save); v && rc == 0;
	     v = strtok_r(NULL, "|", &save)) {
		given[count] = v;
		if (c->kind != RFS_COLUMN_CODES) {
			double d = 0;
			rc = parse_number(c, v, &ints[count], &d);
			if (rc != 0)
				snprintf(err, errlen,
					 "'%s' is not a number (column is "
					 "%s)",
					 v, rfs_column_kind_name(c));
			nforms[count] = stored_forms(c, d, forms[count]);
			count++;
			continue;
		}
		const char *name = boolish(c) ? bool_name(v) : v;
		uint64_t k = 0;
		while (k < c->ncategories && strcmp(c->categories[k], name))
			k++;
		if (k == c->ncategories) {
			char known[200];
			list_categories(c, known, sizeof(known));
			snprintf(err, errlen, "no value '%s' (values: %s)", v,
				 known);
			rc = -EINVAL;
		} else {
			wanted[k] = 1;
		}
		category[count++] = k;
	}
	for (uint64_t r = 0; r < c->rows && rc == 0; r++) {
		int hit = 0;
		if (c->kind == RFS_COLUMN_CODES) {
			hit = c->codes[r] >= 0 && wanted[c->codes[r]];
			per_category[c->codes[r] >= 0 ? c->codes[r] : 0] +=
				(uint64_t)hit;
		}
		for (size_t k = 0; k < count && c->kind != RFS_COLUMN_CODES;
		     k++) {
			int same = 0;
			for (size_t f = 0; f < nforms[k] && !same; f++)
				same = c->kind == RFS_COLUMN_INT ?
					       c->codes[r] == ints[k] :
					       c->reals[r] == forms[k][f];
			hits[k] += (uint64_t)same;
			hit |= same;
		}
		keep[r] &= (uint8_t)hit;
	}
	/* Every value must be some row's: a typo among right values would
	 * otherwise only thin the rows out. */
	for (size_t k = 0; k < count && rc == 0; k++) {
		if (c->kind == RFS_COLUMN_CODES ? per_category[category[k]] :
						  hits[k])
			continue;
		char known[200];
		if (c->kind == RFS_COLUMN_CODES)
			list_categories(c, known, sizeof(known));
		else
			list_numbers(c, known, sizeof(known));
		snprintf(err, errlen, "no row has value '%s' (values: %s)",
			 given[k], known);
		rc = -EINVAL;
	}
out:
	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	free(list);
	free(given);
	free(category);
	free(hits);
	free(per_category);
	free(wanted);
	free(ints);
	free(forms);
	free(nforms);
	return rc;
}

int rfs_column_apply_mask(struct rfs_column *values,
			  const struct rfs_column *mask, uint64_t *missing)
{
	*missing = 0;
	if (mask->kind != RFS_COLUMN_CODES || !mask->boolean ||
	    mask->rows != values->rows)
		return -EINVAL;
	for (uint64_t i = 0; i < values->rows; i++)
		if (mask->codes[i] == 1) { /* "True" */
			++*missing;
			if (values->kind == RFS_COLUMN_CODES)
				values->codes[i] = -1;
		}
	if (values->kind != RFS_COLUMN_CODES)
		return *missing ? -EDOM : 0;
	if (values->boolean)
		return 0;
	/* Keep the categories some row has, in their order. */
	int64_t *map = calloc(values->ncategories + 1, sizeof(*map));
	if (!map)
		return -ENOMEM;
	for (uint64_t i = 0; i < values->rows; i++)
		if (values->codes[i] >= 0)
			map[values->codes[i]] = 1;
	uint64_t kept = 0;
	for (uint64_t k = 0; k < values->ncategories; k++) {
		if (!map[k]) {
			free(values->categories[k]);
			map[k] = -1;
			continue;
		}
		values->categories[kept] = values->categories[k];
		map[k] = (int64_t)kept++;
	}
	values->ncategories = kept;
	remap(values->codes, values->rows, map);
	free(map);
	return 0;
}

/* The shortest decimal text that reads back as v. */
static void real_text(double v, char *out, size_t n)
{
	for (int digits = 1; digits <= 17; digits++) {
		snprintf(out, n, "%.*g", digits, v);
		if (strtod(out, NULL) == v)
			return;
	}
}

int rfs_column_names(const struct rfs_column *c, char ***out)
{
	char **names = calloc(c->rows ? c->rows : 1, sizeof(*names));
	int rc = names ? 0 : -ENOMEM;
	for (uint64_t i = 0; i < c->rows && rc == 0; i++) {
		char text[40] = "?";
		if (c->kind == RFS_COLUMN_INT)
			snprintf(text, sizeof(text), "%lld",
				 (long long)c->codes[i]);
		else if (c->kind == RFS_COLUMN_REAL)
			real_text(c->reals[i], text, sizeof(text));
		const char *name = c->kind == RFS_COLUMN_CODES &&
						   c->codes[i] >= 0 ?
					   c->categories[c->codes[i]] :
					   text;
		if (!(names[i] = strdup(name)))
			rc = -ENOMEM;
	}
	if (rc != 0) {
		rfs_buf_free_strings(names, c->rows);
		names = NULL;
	}
	*out = names;
	return rc;
}

double rfs_column_real(const struct rfs_column *c, uint64_t row)
{
	return c->kind == RFS_COLUMN_REAL ? c->reals[row] :
					    (double)c->codes[row];
}

int rfs_column_from_strings(struct rfs_column *c, char **strings, uint64_t n,
			    int in_order)
{
	uint64_t *index = in_order ? NULL : name_index(strings, n);
	int64_t *codes = malloc((n ? n : 1) * sizeof(*codes));
	char **cats = in_order ? strings : malloc((n ? n : 1) * sizeof(*cats));
	uint64_t k = 0;
	if ((!in_order && !index) || !codes || !cats) {
		free(index);
		free(codes);
		if (cats != strings)
			free(cats);
		rfs_buf_free_strings(strings, n);
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < n; i++) {
		uint64_t at = in_order ? i : index[i];
		if (!in_order && k && strcmp(cats[k - 1], strings[at]) == 0)
			free(strings[at]);
		else
			cats[k++] = strings[at];
		codes[at] = (int64_t)k - 1;
	}
	free(index);
	if (!in_order)
		free(strings);
	*c = (struct rfs_column){ .kind = RFS_COLUMN_CODES,
				  .rows = n,
				  .codes = codes,
				  .categories = cats,
				  .ncategories = k,
				  .claimed = c->claimed,
				  .claims = c->claims };
	return 0;
}

void rfs_column_error(const char *file, const char *what, int rc, char *err,
		      size_t errlen)
{
	if (rc == -ERANGE)
		snprintf(err, errlen,
			 "%s: %s holds uint64 values over 2^63 - 1, which "
			 "rankfs reads as int64 (label files are int64): store "
			 "them as int64 or as strings",
			 file, what);
	else if (rc == -ENOTSUP)
		snprintf(err, errlen,
			 "%s: %s has a type rankfs cannot read as a column "
			 "(categorical, integer, float, bool or string)",
			 file, what);
	else
		snprintf(err, errlen, "%s: %s cannot be read (%s)", file, what,
			 strerror(-rc));
}
