/* SPDX-License-Identifier: MIT */
#include "os/memlimit.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "os/cgroup.h"
#include "core/config.h"
#include "core/parse.h"

/* cgroup v1 writes "no limit" as the largest page-aligned counter,
 * 2^63 - 4096 on x86-64; anything this large limits nothing. */
#define NO_LIMIT (UINT64_C(1) << 62)

static void lower(struct rfs_memlimit *l, uint64_t bytes, const char *what,
		  const char *path)
{
	if (bytes >= l->bytes)
		return;
	l->bytes = bytes;
	snprintf(l->where, sizeof(l->where), "%s (%s)", what, path);
}

static void read_meminfo(const char *root, struct rfs_memlimit *l)
{
	char path[PATH_MAX], line[256];
	snprintf(path, sizeof(path), "%s/proc/meminfo", root);
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	unsigned long long kb;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemTotal: %llu kB", &kb) == 1 &&
		    kb < NO_LIMIT >> 10) {
			lower(l, (uint64_t)kb << 10, "the machine's memory",
			      "MemTotal in /proc/meminfo");
			break;
		}
	fclose(f);
}

/* A limit file's value: a number of bytes, or v2's "max". */
static void read_limit(const char *path, struct rfs_memlimit *l)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	char text[64] = "";
	uint64_t v;
	if (fgets(text, sizeof(text), f) &&
	    rfs_parse_u64(text, strcspn(text, "\n"), NO_LIMIT - 1, 0, &v) == 0)
		lower(l, v, "the limit of its memory cgroup", path);
	fclose(f);
}

/* A group's memory limit file. */
static void read_group(const char *dir, int v2, void *arg)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/%s", dir,
		 v2 ? "memory.max" : "memory.limit_in_bytes");
	read_limit(path, arg);
}

void rfs_memlimit_read(const char *root, struct rfs_memlimit *out)
{
	*out = (struct rfs_memlimit){ .bytes = UINT64_MAX };
	read_meminfo(root, out);
	rfs_cgroup_each_dir(root, "memory", read_group, out);
}

int rfs_memlimit_fit(uint64_t *cache_mb, const struct rfs_memlimit *l,
		     char *err, size_t errlen)
{
	if (l->bytes == UINT64_MAX) {
		if (*cache_mb == RFS_UNSET)
			*cache_mb = RFS_MEMLIMIT_DEFAULT_MB;
		return 0;
	}
	uint64_t mb = l->bytes >> 20;
	uint64_t room = mb > RFS_MEMLIMIT_OVERHEAD_MB ?
				mb - RFS_MEMLIMIT_OVERHEAD_MB :
				0;
	if (*cache_mb == RFS_UNSET) {
		*cache_mb = room / 2 < RFS_MEMLIMIT_DEFAULT_MB ?
				    room / 2 :
				    RFS_MEMLIMIT_DEFAULT_MB;
		if (*cache_mb >= 1)
			return 0;
		snprintf(err, errlen,
			 "the %" PRIu64 " MiB of %s leave no room for "
			 "cache_mb beside the daemon's own %d MiB",
			 mb, l->where, RFS_MEMLIMIT_OVERHEAD_MB);
		return -EINVAL;
	}
	if (*cache_mb <= room)
		return 0;
	int n = snprintf(err, errlen,
			 "option cache_mb=%" PRIu64 ": the daemon would hold "
			 "up to %" PRIu64 " MiB (cache_mb and %d MiB of its "
			 "own), more than the %" PRIu64 " MiB of %s",
			 *cache_mb, *cache_mb + RFS_MEMLIMIT_OVERHEAD_MB,
			 RFS_MEMLIMIT_OVERHEAD_MB, mb, l->where);
	if (n >= 0 && (size_t)n < errlen && room)
		snprintf(err + n, errlen - (size_t)n,
			 "; give cache_mb=%" PRIu64 " or less", room);
	return -EINVAL;
}

struct rfs_claims {
	struct rfs_memlimit limit; /* set at create */
	/* What the mount has claimed and still holds, and set aside for
	 * the cache (cache_mb, or its least where it may yield, and the
	 * daemon's own; spare claims: all of cache_mb); the most held at
	 * once and the biggest claim since; under lock. */
	pthread_mutex_t lock;
	uint64_t held, reserved_mb, spare_mb;
	struct rfs_memlimit_peak peak;
};

int rfs_claims_create(const struct rfs_memlimit *l, struct rfs_claims **out)
{
	struct rfs_claims *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	if (l)
		c->limit = *l;
	else
		rfs_memlimit_read("", &c->limit);
	pthread_mutex_init(&c->lock, NULL);
	*out = c;
	return 0;
}

void rfs_claims_destroy(struct rfs_claims *c)
{
	if (!c)
		return;
	pthread_mutex_destroy(&c->lock);
	free(c);
}

void rfs_memlimit_reserve(struct rfs_claims *c, uint64_t cache_mb,
			  uint64_t least_mb)
{
	pthread_mutex_lock(&c->lock);
	c->reserved_mb = (least_mb < cache_mb ? least_mb : cache_mb) +
			 RFS_MEMLIMIT_OVERHEAD_MB;
	c->spare_mb = cache_mb + RFS_MEMLIMIT_OVERHEAD_MB;
	c->peak = (struct rfs_memlimit_peak){ .held = c->held };
	pthread_mutex_unlock(&c->lock);
}

void rfs_memlimit_peak(struct rfs_claims *c, struct rfs_memlimit_peak *out)
{
	pthread_mutex_lock(&c->lock);
	*out = c->peak;
	pthread_mutex_unlock(&c->lock);
}

uint64_t rfs_memlimit_claimed(struct rfs_claims *c)
{
	pthread_mutex_lock(&c->lock);
	uint64_t n = c->held;
	pthread_mutex_unlock(&c->lock);
	return n;
}

void rfs_memlimit_release(struct rfs_claims *c, uint64_t *claimed)
{
	if (c && *claimed) {
		pthread_mutex_lock(&c->lock);
		c->held -= *claimed < c->held ? *claimed : c->held;
		pthread_mutex_unlock(&c->lock);
	}
	*claimed = 0;
}

void rfs_memlimit_release_part(struct rfs_claims *c, uint64_t *claimed,
			       uint64_t bytes)
{
	uint64_t part = bytes < *claimed ? bytes : *claimed;
	*claimed -= part;
	rfs_memlimit_release(c, &part);
}

/* Why a claim of bytes (wraps: over 2^64) is refused, given what was
 * claimed before it and set aside (MiB: cache_mb and the daemon's own)
 * when it was made. */
static void refusal(const struct rfs_claims *c, const char *file,
		    const char *what, uint64_t count, uint64_t bytes, int wraps,
		    uint64_t before, uint64_t aside_mb, char *err,
		    size_t errlen)
{
	struct rfs_buf b = { 0 };
	rfs_buf_printf(&b, "%s: %s claims %" PRIu64 " entries: ", file, what,
		       count);
	if (wraps)
		rfs_buf_printf(&b, "over 2^64 bytes");
	else
		rfs_buf_printf(&b, "at least %" PRIu64 " MiB", bytes >> 20);
	uint64_t mb = c->limit.bytes >> 20;
	if (c->limit.bytes == UINT64_MAX)
		rfs_buf_printf(&b, " at mount, more than this process can "
				   "address");
	else
		rfs_buf_printf(&b,
			       " at mount, more than the %" PRIu64 " MiB of %s",
			       mb, c->limit.where);
	/* The cache set aside, beside the daemon's own: none where a
	 * default yields to the claims (rfs_memlimit_reserve()). */
	uint64_t cache_mb = aside_mb ? aside_mb - RFS_MEMLIMIT_OVERHEAD_MB : 0;
	if (before || aside_mb)
		rfs_buf_printf(&b, " leaves beside");
	if (before)
		rfs_buf_printf(&b, " the %" PRIu64 " MiB claimed before it%s",
			       (before + (1 << 20) - 1) >> 20,
			       aside_mb ? " and" : "");
	if (cache_mb)
		rfs_buf_printf(&b, " cache_mb=%" PRIu64 " with", cache_mb);
	if (aside_mb)
		rfs_buf_printf(&b, " the daemon's own %d MiB",
			       RFS_MEMLIMIT_OVERHEAD_MB);
	/* A smaller cache_mb that leaves room for it. */
	uint64_t need = wraps || bytes >= NO_LIMIT ?
				UINT64_MAX :
				(before + bytes + (1 << 20) - 1) >> 20;
	if (cache_mb && need + RFS_MEMLIMIT_OVERHEAD_MB < mb)
		rfs_buf_printf(&b, "; give cache_mb=%" PRIu64 " or less",
			       mb - need - RFS_MEMLIMIT_OVERHEAD_MB);
	snprintf(err, errlen, "%s", b.failed ? "out of memory" : b.data);
	rfs_buf_free(&b);
}

/* A claim, spare or not (rfs_memlimit_claim_spare()). */
static int claim(struct rfs_claims *c, const char *file, const char *what,
		 uint64_t count, uint64_t each, int spare, uint64_t *claimed,
		 char *err, size_t errlen)
{
	/* No ledger (a source opened alone): each claim alone, no limit. */
	struct rfs_claims alone = { .limit.bytes = UINT64_MAX,
				    .lock = PTHREAD_MUTEX_INITIALIZER };
	if (!c)
		c = &alone;
	/* Past the address space, whatever the limit: a size_t would wrap. */
	uint64_t most = c->limit.bytes < SIZE_MAX ? c->limit.bytes : SIZE_MAX;
	uint64_t bytes;
	int wraps = __builtin_mul_overflow(count, each, &bytes);
	pthread_mutex_lock(&c->lock);
	uint64_t before = c->held;
	/* Set aside only against a known limit, and never past it. */
	uint64_t aside_mb = c->limit.bytes == UINT64_MAX ? 0 :
			    spare			 ? c->spare_mb :
							   c->reserved_mb;
	uint64_t aside = aside_mb << 20 < most ? aside_mb << 20 : most;
	uint64_t room = most - aside;
	int fits = !wraps && bytes <= room && c->held <= room - bytes;
	if (fits) {
		c->held += bytes;
		if (c->held > c->peak.held)
			c->peak.held = c->held;
		if (bytes > c->peak.biggest) {
			c->peak.biggest = bytes;
			snprintf(c->peak.what, sizeof(c->peak.what), "%s: %s",
				 file, what);
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (fits) {
		if (claimed)
			*claimed += bytes;
		return 0;
	}
	refusal(c, file, what, count, bytes, wraps, before, aside_mb, err,
		errlen);
	return -ENOMEM;
}

int rfs_memlimit_claim(struct rfs_claims *c, const char *file, const char *what,
		       uint64_t count, uint64_t each, uint64_t *claimed,
		       char *err, size_t errlen)
{
	return claim(c, file, what, count, each, 0, claimed, err, errlen);
}

int rfs_memlimit_claim_spare(struct rfs_claims *c, const char *file,
			     const char *what, uint64_t count, uint64_t each,
			     uint64_t *claimed, char *err, size_t errlen)
{
	return claim(c, file, what, count, each, 1, claimed, err, errlen);
}
