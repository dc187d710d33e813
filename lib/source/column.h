/* SPDX-License-Identifier: MIT */
/* A per-row column (an obs column or a 1-D dataset) held in memory, as
 * labels, weights or filters read it. HDF5-free: source.c fills it.
 *
 * Categorical-like columns (categorical, bool, enum, strings) are codes
 * into a list of category names, -1 for missing. Integer columns keep
 * their values, floating columns their doubles. */
#ifndef RFS_COLUMN_H
#define RFS_COLUMN_H

#include <stddef.h>
#include <stdint.h>

enum rfs_column_kind {
	RFS_COLUMN_CODES, /* codes[i] indexes categories; -1 missing */
	RFS_COLUMN_INT, /* codes[i] is the value */
	RFS_COLUMN_REAL, /* reals[i] */
};

struct rfs_column {
	enum rfs_column_kind kind;
	uint64_t rows;
	int64_t *codes; /* CODES and INT; owned */
	double *reals; /* REAL; owned */
	/* REAL: bit N set when some part stored N-byte floats (2, 4, 8; an
	 * integer part counts as 8): a filter value is rounded to each. */
	unsigned real_sizes;
	char **categories; /* CODES; owned, each owned */
	uint64_t ncategories;
	int boolean; /* CODES from a bool: categories "False", "True" */
	/* Bytes its reading claimed (memlimit.c) in the ledger claims (the
	 * source's), released when freed. */
	uint64_t claimed;
	struct rfs_claims *claims;
};

/* Writes why column what of file cannot be read (rc) in err, as both
 * backends say it: -ERANGE, a uint64 over 2^63 - 1 (columns are int64,
 * as label files are); -ENOTSUP, a type no column holds; or rc's text. */
void rfs_column_error(const char *file, const char *what, int rc, char *err,
		      size_t errlen);

/* Frees what c owns, releases its claim and zeroes it. Accepts a zeroed
 * column. */
void rfs_column_free(struct rfs_column *c);

/* "categorical", "integer", "float" or "bool". */
const char *rfs_column_kind_name(const struct rfs_column *c);

/* Moves src's rows and claim to the end of dst (src is freed). Categories are
 * united: sorted if every part's categories are sorted (as pandas makes
 * them), in order of first appearance otherwise; codes are remapped.
 * An empty dst takes src as it is. Integer and float parts make a float
 * column. What it allocates beside the parts is claimed first
 * (memlimit.c) for src's file and what (its column), and released when
 * freed, before it returns: the doubles of an integer part made float
 * (8 bytes a row), the tables uniting categories (24 bytes a category
 * of dst, 16 of src), the rows dst grows by while src holds them (8
 * bytes a row of src). On failure err says why, naming file and what.
 * @return 0, -EINVAL (categorical and numeric parts), -ENOMEM (out of
 * memory, or a claim refused). */
int rfs_column_append(struct rfs_column *dst, struct rfs_column *src,
		      const char *file, const char *what, char *err,
		      size_t errlen);

/* Keeps in keep[] (one byte per row, 1 = kept) only the rows whose value
 * is one of values, a '|'-separated list: category names for categorical
 * columns (true/false/1/0 for bools), numbers for numeric ones.
 * @return 0, or -EINVAL with a message in err naming the value that no
 * category has or that is not a number. */
int rfs_column_keep(const struct rfs_column *c, const char *values,
		    uint8_t *keep, char *err, size_t errlen);

/* Makes c a categorical column of n strings (taken, with the array): the
 * categories are the distinct strings, sorted, as pandas makes them, or
 * with in_order each string its own category, in order (category names
 * read as a column); c keeps its claim.
 * @return 0 or -ENOMEM (the strings are freed). */
int rfs_column_from_strings(struct rfs_column *c, char **strings, uint64_t n,
			    int in_order);

/* Applies an AnnData nullable column's mask (a bool column, true where
 * the row has no value) to its values: a categorical-like row becomes
 * missing (-1), and categories only missing rows had (a nullable string
 * array's placeholders) are dropped. An integer or float column has no
 * missing value: *missing counts its masked rows, -EDOM when some.
 * @return 0, -EDOM, -EINVAL (mask not bool or of another length),
 * -ENOMEM. */
int rfs_column_apply_mask(struct rfs_column *values,
			  const struct rfs_column *mask, uint64_t *missing);

/* Each row's value as text, for category names: a categorical row's
 * category ("?" where missing), an integer in decimal, a float as the
 * shortest text that reads back as it. *out: c->rows heap strings, NULL on
 * failure. @return 0 or -ENOMEM. */
int rfs_column_names(const struct rfs_column *c, char ***out);

/* The row's value as a weight (numeric columns). */
double rfs_column_real(const struct rfs_column *c, uint64_t row);

#endif
