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

#endif
