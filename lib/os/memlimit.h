/* SPDX-License-Identifier: MIT */
/* The memory this process may use, so that cache_mb is checked against it
 * at mount: a daemon whose cache outgrows its memory cgroup is killed, and
 * every reader of its mount fails. */
#ifndef RFS_MEMLIMIT_H
#define RFS_MEMLIMIT_H

#include <stddef.h>
#include <stdint.h>

/* What the daemon holds beside cache_mb (docs/reliability.md: the memory
 * bound tests' margin). */
#define RFS_MEMLIMIT_OVERHEAD_MB 32
/* cache_mb when not given, where memory allows. */
#define RFS_MEMLIMIT_DEFAULT_MB 1024

struct rfs_memlimit {
	uint64_t bytes; /* UINT64_MAX: none known */
	char where[4200]; /* what says so, for messages */
};

/* The least of the machine's memory (MemTotal, proc(5)) and the limits of
 * the process's memory cgroups (v1 memory.limit_in_bytes, v2 memory.max)
 * from its own group up to its hierarchy's root (cgroup.c). root: "" for
 * this system, or a directory standing in for / (tests). Files that
 * cannot be read limit nothing. */
void rfs_memlimit_read(const char *root, struct rfs_memlimit *out);

/* Resolves *cache_mb against l: RFS_UNSET (not given) becomes the
 * default, or half of what l leaves beside the daemon's overhead where
 * that is less (a container's readers share its memory); a given value
 * that with the overhead exceeds l is refused. @return 0, or -EINVAL with
 * err naming cache_mb, the limit and where it comes from. */
int rfs_memlimit_fit(uint64_t *cache_mb, const struct rfs_memlimit *l,
		     char *err, size_t errlen);

/* A heap string's least share of a claim: its pointer in the array and
 * the smallest block glibc's malloc hands out. */
#define RFS_MEMLIMIT_STRING_BYTES (sizeof(char *) + 32)
/* A string column's row, made codes (rfs_column_from_strings): beside its
 * heap string, the sort's index, the code and the categories' slot, 8
 * bytes each, held at once: 64 bytes a row (the peak measured for 2^22
 * distinct short strings; 56 for 10 categories, whose slots stay
 * untouched). */
#define RFS_MEMLIMIT_CODED_STRING_BYTES (RFS_MEMLIMIT_STRING_BYTES + 3 * 8)
/* What a claim's entries are read as (the obs readers): values, category
 * names (a number's text too), or values whose strings are made codes. */
enum rfs_memlimit_as {
	RFS_MEMLIMIT_VALUES,
	RFS_MEMLIMIT_NAMES,
	RFS_MEMLIMIT_CODES
};

/* A mount's ledger of claims (the view's): what is claimed in one counts
 * nowhere else. l: the limit claims are checked against (NULL: this
 * system's, rfs_memlimit_read("")); copied. @return 0, or -ENOMEM. */
struct rfs_claims;
int rfs_claims_create(const struct rfs_memlimit *l, struct rfs_claims **out);
/* Accepts NULL. */
void rfs_claims_destroy(struct rfs_claims *c);

/* Claims, before it is read whole at mount, count entries of at least
 * each bytes (an array's shape, a dataset's length: a few bytes of
 * metadata can claim 2^40 entries that no chunk stores), so that a claim
 * the memory cannot hold fails the mount at once, instead of allocating
 * gigabytes or making entries for minutes first.
 *
 * Claims add up in ledger c, the rule being: cache_mb +
 * RFS_MEMLIMIT_OVERHEAD_MB + every claim not released <= the limit. A
 * claim must fit, beside every claim made in c before it and not
 * released, in c's limit less what rfs_memlimit_reserve() set aside for
 * the cache (its least_mb: a cache_mb not given yields to the claims).
 * c NULL: no ledger (a source opened alone), each claim checked alone
 * against the address space. A claim counts what reading the entries
 * holds at once (the values as stored beside the int64 or doubles made
 * of them), and is held until released: its bytes are added to *claimed
 * (NULL: held for c's life), to be given back with
 * rfs_memlimit_release(c, claimed) when the memory is freed.
 * Thread-safe.
 * @return 0, or -ENOMEM with err naming file, what (the array or dataset
 * in it), the claim, the limit, and what was claimed before it and set
 * aside (then a cache_mb that would leave room). */
int rfs_memlimit_claim(struct rfs_claims *c, const char *file, const char *what,
		       uint64_t count, uint64_t each, uint64_t *claimed,
		       char *err, size_t errlen);

/* As rfs_memlimit_claim(), for a claim the mount can do without (it
 * reads the array another way when refused): it must fit beside the whole
 * cache_mb rfs_memlimit_reserve() set aside, even one not given, so that
 * a default cache_mb does not yield to it alone. Accepted, it is held
 * like any claim and counts among those a default settles against:
 * claims made after it can lower the default, or fail a mount that
 * could have done without it (it is not given back then). */
int rfs_memlimit_claim_spare(struct rfs_claims *c, const char *file,
			     const char *what, uint64_t count, uint64_t each,
			     uint64_t *claimed, char *err, size_t errlen);

/* Gives back to c (NULL: none) the *claimed bytes of claims (their
 * memory freed) and zeroes *claimed. */
void rfs_memlimit_release(struct rfs_claims *c, uint64_t *claimed);

/* Gives back bytes of *claimed (part of what it holds freed, such as
 * values as stored once converted), at most what it holds. */
void rfs_memlimit_release_part(struct rfs_claims *c, uint64_t *claimed,
			       uint64_t bytes);

/* Sets aside cache_mb and the daemon's own RFS_MEMLIMIT_OVERHEAD_MB
 * before any claim (the mount, once cache_mb fits the limit): the cache
 * fills after the mount, and a daemon that then outgrows its memory
 * cgroup is killed. Claims the mount needs see only least_mb (at most
 * cache_mb) of it set aside: cache_mb itself where given, less where it
 * is a default that may yield to them (budget.c settles it once they are
 * known, from rfs_memlimit_peak()); spare claims see all of it. Without a
 * known limit, nothing is set aside. Forgets the peak. */
void rfs_memlimit_reserve(struct rfs_claims *c, uint64_t cache_mb,
			  uint64_t least_mb);

/* What claims in c held at their most since rfs_memlimit_reserve() (or
 * since c was made), for the cache_mb they leave. */
struct rfs_memlimit_peak {
	uint64_t held; /* bytes held at once by claims not released */
	uint64_t biggest; /* bytes of the biggest claim made */
	char what[4400]; /* its "file: what"; "" when none was made */
};
void rfs_memlimit_peak(struct rfs_claims *c, struct rfs_memlimit_peak *out);

/* The bytes claimed in c and not released (tests, fuzz targets). */
uint64_t rfs_memlimit_claimed(struct rfs_claims *c);

#endif
