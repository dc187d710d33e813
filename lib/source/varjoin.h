/* SPDX-License-Identifier: MIT */
/* Files whose var (gene) names differ, served as one matrix: the served
 * columns are a list of names (var_join=inner, outer, or var_names=FILE),
 * and each source's columns map onto them, computed once at mount time.
 * A read then costs a gather (dense) or a remap (CSR) per row, nothing
 * more; a source whose columns are the served ones in order is an
 * identity and is read as before. Immutable after create: thread-safe. */
#ifndef RFS_VARJOIN_H
#define RFS_VARJOIN_H

#include <stddef.h>
#include <stdint.h>

enum rfs_varjoin_mode {
	RFS_VARJOIN_NONE, /* files must have the same var names */
	RFS_VARJOIN_INNER, /* the names every file has, first file's order */
	RFS_VARJOIN_OUTER, /* every name, in first-seen order; absent: 0 */
	RFS_VARJOIN_NAMES, /* the names of var_names=FILE, in its order */
};

struct rfs_varjoin;
struct rfs_claims; /* memlimit.h: the ledger claims are made in */

/* "none", "inner", "outer" or "names". */
const char *rfs_varjoin_mode_name(enum rfs_varjoin_mode m);

/* XXH3 of names (each followed by a NUL): as a source's var_fingerprint. */
uint64_t rfs_varjoin_fingerprint_of(char *const *names, uint64_t n);

/* Reads path: one name per line (a CR before the newline dropped), the
 * last newline optional. Empty file,
 * an empty line or a name given twice: -EINVAL with err naming path (and
 * the name). *names: n heap strings in a heap array, the caller's, their
 * bytes claimed (memlimit.c: RFS_MEMLIMIT_STRING_BYTES each, as the list
 * grows) and added to *claimed, to be released once they are freed.
 * @return 0, -EINVAL, -ENOENT/-EACCES (cannot be read), -ENOMEM (a claim
 * refused: err says so). */
int rfs_varjoin_read_file(struct rfs_claims *claims, const char *path,
			  char ***names, uint64_t *n, uint64_t *claimed,
			  char *err, size_t errlen);

/* Builds the mapping of nsources sources: names[f] holds counts[f]
 * names, paths[f] names source f in errors. wanted (NAMES mode only) is
 * the served list, read from wanted_from (rfs_varjoin_read_file(): no
 * name twice). Nothing is kept of the arguments. A name twice in one
 * source, var_join=inner
 * with no shared name, or a wanted name in no source: -EINVAL with err
 * naming the name and the file. What it allocates is claimed first
 * (memlimit.c), a var index's length being its file's word: each
 * source's hash index (8 bytes a slot, 2 to 4 slots a name) and, for
 * outer, one of every name, with a list of the served names, until it
 * returns; the served names (RFS_MEMLIMIT_STRING_BYTES each) and each
 * source's map (8 bytes a served column and a column of its own) until
 * rfs_varjoin_destroy(). A claim refused: -ENOMEM with err naming the
 * file (or the option) and the table. @return 0, -EINVAL, -ENOMEM. */
int rfs_varjoin_create(struct rfs_claims *claims, enum rfs_varjoin_mode mode,
		       char *const *const *names, const uint64_t *counts,
		       const char *const *paths, size_t nsources,
		       char *const *wanted, uint64_t nwanted,
		       const char *wanted_from, struct rfs_varjoin **out,
		       char *err, size_t errlen);

/* Frees j and releases its claims. Accepts NULL. */
void rfs_varjoin_destroy(struct rfs_varjoin *j);

/* Served columns, and the name of column i (valid until destroy). */
uint64_t rfs_varjoin_cols(const struct rfs_varjoin *j);
const char *rfs_varjoin_name(const struct rfs_varjoin *j, uint64_t i);
/* XXH3 of the served names, as rfs_varjoin_fingerprint_of(). */
uint64_t rfs_varjoin_fingerprint(const struct rfs_varjoin *j);

/* 1 if source f's columns are the served ones, in order. */
int rfs_varjoin_identity(const struct rfs_varjoin *j, size_t f);
/* 1 if some column of source f is not served (its CSR rows shrink). */
int rfs_varjoin_drops(const struct rfs_varjoin *j, size_t f);
/* The served column of source f's column c, or -1. */
int64_t rfs_varjoin_served(const struct rfs_varjoin *j, size_t f, uint64_t c);

/* Dense: source f's row src (its columns of elem bytes) into the served
 * row dst, absent columns 0. */
void rfs_varjoin_gather(const struct rfs_varjoin *j, size_t f, const void *src,
			void *dst, size_t elem);

/* Bytes of scratch rfs_varjoin_remap_row() needs for a row of up to len
 * stored values of elem bytes. */
size_t rfs_varjoin_row_scratch(uint64_t len, size_t elem);

/* CSR: one row of source f in place: cols[0..len) and their values
 * (elem bytes each) become served column ids, entries of unserved
 * columns dropped, sorted by column (stable: repeated ids keep their
 * order). scratch: rfs_varjoin_row_scratch(len, elem) bytes.
 * @return the row's new length. */
uint64_t rfs_varjoin_remap_row(const struct rfs_varjoin *j, size_t f,
			       int64_t *cols, void *values, size_t elem,
			       uint64_t len, void *scratch);

#endif
