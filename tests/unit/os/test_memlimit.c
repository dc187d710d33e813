/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/os/memlimit.c: the memory limit read from a directory
 * standing in for / (meminfo, the process's cgroups, the cgroup mounts
 * and their limit files, v1 and v2), and cache_mb fitted to it. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/config.h"
#include "os/memlimit.h"
#include "fake_root.h"

#define MIB (UINT64_C(1) << 20)

/* The ledger the tests claim in, made anew for each limit they set. */
static struct rfs_claims *claims;

static void use_limit(const struct rfs_memlimit *l)
{
	rfs_claims_destroy(claims);
	claims = NULL;
	assert_int_equal(rfs_claims_create(l, &claims), 0);
}

static const char meminfo[] = "MemTotal:       24684084 kB\n"
			      "MemFree:         1000000 kB\n";

static void test_machine_memory_alone(void **state)
{
	(void)state;
	fake_root_put("proc/meminfo", meminfo);
	struct rfs_memlimit l;
	rfs_memlimit_read(fake_root, &l);
	assert_true(l.bytes == UINT64_C(24684084) * 1024);
	assert_non_null(strstr(l.where, "MemTotal"));
}

static void test_nothing_readable(void **state)
{
	(void)state;
	struct rfs_memlimit l;
	rfs_memlimit_read(fake_root, &l);
	assert_true(l.bytes == UINT64_MAX);
}

/* v1: the memory controller's hierarchy, mounted with others beside it;
 * the least limit on the path up counts, v1's "no limit" counts not. */
static void test_v1_least_on_the_path_up(void **state)
{
	(void)state;
	fake_root_put("proc/meminfo", meminfo);
	fake_root_put("proc/self/cgroup", "5:cpu,cpuacct:/other\n"
					  "4:memory:/jobs/job1/task\n"
					  "0::/\n");
	fake_root_put(
		"proc/self/mountinfo",
		"35 31 0:32 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
		"36 31 0:33 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup "
		"rw,memory\n");
	fake_root_put("sys/fs/cgroup/memory/memory.limit_in_bytes",
		      "9223372036854771712\n");
	fake_root_put("sys/fs/cgroup/memory/jobs/memory.limit_in_bytes",
		      "4294967296\n");
	fake_root_put("sys/fs/cgroup/memory/jobs/job1/memory.limit_in_bytes",
		      "9223372036854771712\n");
	fake_root_put(
		"sys/fs/cgroup/memory/jobs/job1/task/memory.limit_in_bytes",
		"8589934592\n");
	/* cpu's hierarchy has no say, whatever its files hold. */
	fake_root_put("sys/fs/cgroup/cpu/other/memory.limit_in_bytes",
		      "1048576\n");
	struct rfs_memlimit l;
	rfs_memlimit_read(fake_root, &l);
	assert_true(l.bytes == 4 * 1024 * MIB);
	assert_non_null(strstr(l.where, "memory cgroup"));
	assert_non_null(strstr(
		l.where, "/sys/fs/cgroup/memory/jobs/memory.limit_in_bytes"));
}

/* v2: memory.max, "max" for none; a container's view where the mount's
 * root is the process's own group. */
static void test_v2_and_mount_roots(void **state)
{
	(void)state;
	fake_root_put("proc/meminfo", meminfo);
	fake_root_put("proc/self/cgroup", "0::/kubepods/pod7/c1\n");
	fake_root_put(
		"proc/self/mountinfo",
		"30 20 0:27 /kubepods/pod7/c1 /sys/fs/cgroup rw shared:9 - "
		"cgroup2 cgroup2 rw,nsdelegate\n");
	fake_root_put("sys/fs/cgroup/memory.max", "536870912\n");
	struct rfs_memlimit l;
	rfs_memlimit_read(fake_root, &l);
	assert_true(l.bytes == 512 * MIB);
	fake_root_put("sys/fs/cgroup/memory.max", "max\n");
	rfs_memlimit_read(fake_root, &l);
	assert_true(l.bytes == UINT64_C(24684084) * 1024);
}

static void test_v2_walks_up_and_skips_other_roots(void **state)
{
	(void)state;
	fake_root_put("proc/self/cgroup", "0::/user.slice/job.scope\n");
	fake_root_put(
		"proc/self/mountinfo",
		/* Another namespace's group: not above this process's. */
		"29 20 0:26 /elsewhere /mnt/other rw - cgroup2 cgroup2 rw\n"
		"30 20 0:27 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
	fake_root_put("mnt/other/memory.max", "1048576\n");
	fake_root_put("sys/fs/cgroup/user.slice/memory.max", "2147483648\n");
	fake_root_put("sys/fs/cgroup/user.slice/job.scope/memory.max", "max\n");
	struct rfs_memlimit l;
	rfs_memlimit_read(fake_root, &l);
	assert_true(l.bytes == 2048 * MIB);
	assert_non_null(strstr(l.where, "user.slice/memory.max"));
}

/* mountinfo escapes a space as \040; a mount root is a whole directory:
 * /user is not above /user.slice. */
static void test_escapes_and_root_boundaries(void **state)
{
	(void)state;
	fake_root_put("proc/self/cgroup", "0::/user.slice/my job\n");
	fake_root_put(
		"proc/self/mountinfo",
		"29 20 0:26 /user /mnt/user rw - cgroup2 cgroup2 rw\n"
		"30 20 0:27 / /sys/fs/cg\\040v2 rw - cgroup2 cgroup2 rw\n");
	fake_root_put("mnt/user/memory.max", "1048576\n");
	fake_root_put("mnt/user/.slice/my job/memory.max", "1048576\n");
	fake_root_put("sys/fs/cg v2/user.slice/my job/memory.max",
		      "3221225472\n");
	struct rfs_memlimit l;
	rfs_memlimit_read(fake_root, &l);
	assert_true(l.bytes == 3072 * MIB);
	assert_non_null(strstr(l.where, "cg v2/user.slice/my job/memory.max"));
}

static void test_garbage_limits_nothing(void **state)
{
	(void)state;
	fake_root_put("proc/self/cgroup", "0::/a\n");
	fake_root_put("proc/self/mountinfo",
		      "30 20 0:27 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
	fake_root_put("sys/fs/cgroup/a/memory.max", "12 apples\n");
	struct rfs_memlimit l;
	rfs_memlimit_read(fake_root, &l);
	assert_true(l.bytes == UINT64_MAX);
}

static struct rfs_memlimit limit_of(uint64_t mb)
{
	struct rfs_memlimit l = { .bytes = mb * MIB };
	snprintf(l.where, sizeof(l.where),
		 "the limit of its memory cgroup "
		 "(/g/memory.max)");
	return l;
}

static void test_default_fits_the_limit(void **state)
{
	(void)state;
	char err[512];
	uint64_t mb = RFS_UNSET;
	struct rfs_memlimit none = { .bytes = UINT64_MAX };
	assert_int_equal(rfs_memlimit_fit(&mb, &none, err, sizeof(err)), 0);
	assert_true(mb == RFS_MEMLIMIT_DEFAULT_MB);
	struct rfs_memlimit l = limit_of(24000);
	mb = RFS_UNSET;
	assert_int_equal(rfs_memlimit_fit(&mb, &l, err, sizeof(err)), 0);
	assert_true(mb == 1024);
	/* Half of what the overhead leaves: the readers share the group. */
	l = limit_of(1024);
	mb = RFS_UNSET;
	assert_int_equal(rfs_memlimit_fit(&mb, &l, err, sizeof(err)), 0);
	assert_true(mb == (1024 - RFS_MEMLIMIT_OVERHEAD_MB) / 2);
	l = limit_of(RFS_MEMLIMIT_OVERHEAD_MB + 1);
	mb = RFS_UNSET;
	assert_int_equal(rfs_memlimit_fit(&mb, &l, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "the 33 MiB of the limit of its memory "
				    "cgroup (/g/memory.max) leave no room for "
				    "cache_mb"));
}

static void test_given_value_refused_over_the_limit(void **state)
{
	(void)state;
	char err[512];
	struct rfs_memlimit l = limit_of(1024);
	uint64_t mb = 1024 - RFS_MEMLIMIT_OVERHEAD_MB;
	assert_int_equal(rfs_memlimit_fit(&mb, &l, err, sizeof(err)), 0);
	assert_true(mb == 992);
	mb = 993;
	assert_int_equal(rfs_memlimit_fit(&mb, &l, err, sizeof(err)), -EINVAL);
	assert_true(mb == 993);
	assert_string_equal(err,
			    "option cache_mb=993: the daemon would hold up to "
			    "1025 MiB (cache_mb and 32 MiB of its own), more "
			    "than the 1024 MiB of the limit of its memory "
			    "cgroup (/g/memory.max); give cache_mb=992 or "
			    "less");
	l = limit_of(20);
	mb = 1;
	assert_int_equal(rfs_memlimit_fit(&mb, &l, err, sizeof(err)), -EINVAL);
	assert_null(strstr(err, "give cache_mb"));
	struct rfs_memlimit none = { .bytes = UINT64_MAX };
	mb = UINT64_C(1) << 30;
	assert_int_equal(rfs_memlimit_fit(&mb, &none, err, sizeof(err)), 0);
}

/* What a file's metadata claims is checked before it is allocated. */
static void test_claims_within_the_limit(void **state)
{
	(void)state;
	char err[512];
	struct rfs_memlimit l = limit_of(256);
	use_limit(&l);
	uint64_t claimed = 0;
	assert_int_equal(rfs_memlimit_claim(claims, "/d/s.zarr", "obs/w",
					    32 * MIB, 8, &claimed, err,
					    sizeof(err)),
			 0);
	assert_int_equal(claimed, 256 * MIB);
	rfs_memlimit_release(claims, &claimed);
	assert_int_equal(claimed, 0);
	assert_int_equal(rfs_memlimit_claimed(claims), 0);
	assert_int_equal(rfs_memlimit_claim(claims, "/d/s.zarr", "obs/w",
					    32 * MIB + 1, 8, NULL, err,
					    sizeof(err)),
			 -ENOMEM);
	assert_int_equal(
		rfs_memlimit_claim(claims, "/d/s.zarr", "obs/ct/categories",
				   UINT64_C(1) << 31, RFS_MEMLIMIT_STRING_BYTES,
				   NULL, err, sizeof(err)),
		-ENOMEM);
	assert_string_equal(err,
			    "/d/s.zarr: obs/ct/categories claims 2147483648 "
			    "entries: at least 81920 MiB at mount, more than "
			    "the 256 MiB of the limit of its memory cgroup "
			    "(/g/memory.max)");
	/* A size that wraps 64 bits is not the small one it wraps to. */
	assert_int_equal(rfs_memlimit_claim(claims, "/d/f.h5", "/lab",
					    (UINT64_C(1) << 61) + 1, 8, NULL,
					    err, sizeof(err)),
			 -ENOMEM);
	assert_non_null(strstr(err, "/d/f.h5: /lab claims 2305843009213693953 "
				    "entries: over 2^64 bytes at mount"));
	/* No limit known: only what no address space holds. */
	struct rfs_memlimit none = { .bytes = UINT64_MAX };
	use_limit(&none);
	assert_int_equal(rfs_memlimit_claim(claims, "/d/f.h5", "/lab",
					    UINT64_C(1) << 40, 40, NULL, err,
					    sizeof(err)),
			 0);
	assert_int_equal(rfs_memlimit_claim(claims, "/d/f.h5", "/lab",
					    UINT64_C(1) << 62, 8, NULL, err,
					    sizeof(err)),
			 -ENOMEM);
	assert_non_null(strstr(err, "over 2^64 bytes at mount, more than "
				    "this process can address"));
}

/* Claims add up: each must fit beside those made before it and not
 * released. */
static void test_claims_add_up(void **state)
{
	(void)state;
	char err[512];
	struct rfs_memlimit l = limit_of(256);
	use_limit(&l);
	uint64_t a = 0, b = 0, c = 0;
	assert_int_equal(rfs_memlimit_claim(claims, "/d/1.h5", "/obs/lab",
					    100 * MIB, 1, &a, err, sizeof(err)),
			 0);
	assert_int_equal(rfs_memlimit_claim(claims, "/d/2.h5", "/obs/lab",
					    100 * MIB, 1, &b, err, sizeof(err)),
			 0);
	assert_int_equal(rfs_memlimit_claimed(claims), 200 * MIB);
	assert_int_equal(rfs_memlimit_claim(claims, "/d/3.h5", "/obs/lab",
					    100 * MIB, 1, &c, err, sizeof(err)),
			 -ENOMEM);
	assert_int_equal(c, 0);
	assert_string_equal(err, "/d/3.h5: /obs/lab claims 104857600 "
				 "entries: at least 100 MiB at mount, more "
				 "than the 256 MiB of the limit of its memory "
				 "cgroup (/g/memory.max) leaves beside the "
				 "200 MiB claimed before it");
	/* What is freed makes room again. */
	rfs_memlimit_release(claims, &a);
	assert_int_equal(rfs_memlimit_claim(claims, "/d/3.h5", "/obs/lab",
					    100 * MIB, 1, &c, err, sizeof(err)),
			 0);
	/* Into one total, as a column of several files is. */
	assert_int_equal(rfs_memlimit_claim(claims, "/d/3.h5", "/obs/w",
					    50 * MIB, 1, &c, err, sizeof(err)),
			 0);
	assert_int_equal(c, 150 * MIB);
	assert_int_equal(rfs_memlimit_claimed(claims), 250 * MIB);
	/* Part of it freed (values as stored, once converted); never more
	 * than it holds. */
	rfs_memlimit_release_part(claims, &c, 50 * MIB);
	assert_int_equal(c, 100 * MIB);
	assert_int_equal(rfs_memlimit_claimed(claims), 200 * MIB);
	rfs_memlimit_release_part(claims, &b, 200 * MIB);
	assert_int_equal(b, 0);
	assert_int_equal(rfs_memlimit_claimed(claims), 100 * MIB);
	rfs_memlimit_release(claims, &b);
	rfs_memlimit_release(claims, &c);
	assert_int_equal(rfs_memlimit_claimed(claims), 0);
	/* Held for the process's life: nothing to give back. */
	assert_int_equal(rfs_memlimit_claim(claims, "/d/1.h5", "/X/indptr",
					    256 * MIB, 1, NULL, err,
					    sizeof(err)),
			 0);
	assert_int_equal(rfs_memlimit_claim(claims, "/d/1.h5", "/obs/lab", 1, 1,
					    NULL, err, sizeof(err)),
			 -ENOMEM);
}

/* cache_mb and the daemon's own are set aside before any claim: the
 * cache fills after the mount. */
static void test_cache_set_aside_first(void **state)
{
	(void)state;
	char err[512];
	struct rfs_memlimit l = limit_of(256);
	use_limit(&l);
	rfs_memlimit_reserve(claims, 112, 112);
	uint64_t a = 0, b = 0;
	assert_int_equal(rfs_memlimit_claim(claims, "/d/1.h5", "/obs/lab",
					    112 * MIB, 1, &a, err, sizeof(err)),
			 0);
	rfs_memlimit_release(claims, &a);
	assert_int_equal(rfs_memlimit_claim(claims, "/d/1.h5", "/obs/lab",
					    100 * MIB, 1, &a, err, sizeof(err)),
			 0);
	assert_int_equal(rfs_memlimit_claim(claims, "/d/2.h5", "/obs/lab",
					    20 * MIB, 1, &b, err, sizeof(err)),
			 -ENOMEM);
	assert_string_equal(err, "/d/2.h5: /obs/lab claims 20971520 entries: "
				 "at least 20 MiB at mount, more than the 256 "
				 "MiB of the limit of its memory cgroup "
				 "(/g/memory.max) leaves beside the 100 MiB "
				 "claimed before it and cache_mb=112 with the "
				 "daemon's own 32 MiB; give cache_mb=104 or "
				 "less");
	rfs_memlimit_release(claims, &a);
	/* Nothing before it: the cache alone. */
	assert_int_equal(rfs_memlimit_claim(claims, "/d/1.h5", "/obs/lab",
					    200 * MIB, 1, &a, err, sizeof(err)),
			 -ENOMEM);
	assert_non_null(strstr(err, "(/g/memory.max) leaves beside "
				    "cache_mb=112 with the daemon's own 32 "
				    "MiB; give cache_mb=24 or less"));
	/* No cache_mb leaves room: none suggested. */
	assert_int_equal(rfs_memlimit_claim(claims, "/d/1.h5", "/obs/lab",
					    250 * MIB, 1, &a, err, sizeof(err)),
			 -ENOMEM);
	assert_null(strstr(err, "give cache_mb"));
	/* No limit known: nothing to set aside from. */
	struct rfs_memlimit none = { .bytes = UINT64_MAX };
	use_limit(&none);
	rfs_memlimit_reserve(claims, 1 << 20, 1 << 20);
	assert_int_equal(rfs_memlimit_claim(claims, "/d/1.h5", "/obs/lab",
					    UINT64_C(1) << 40, 1, &a, err,
					    sizeof(err)),
			 0);
	rfs_memlimit_release(claims, &a);
}

/* A cache_mb not given sets aside only its least for the claims the
 * mount needs, which then say what they leave of it (rfs_memlimit_peak):
 * view.c lowers the default. A spare claim still sees all of it. */
static void test_default_yields_to_claims(void **state)
{
	(void)state;
	char err[512];
	struct rfs_memlimit l = limit_of(256);
	use_limit(&l);
	rfs_memlimit_reserve(claims, 112, 0);
	uint64_t a = 0, b = 0;
	/* Over what 112 would leave (the given one's refusal, above). */
	assert_int_equal(rfs_memlimit_claim(claims, "/d/1.h5", "/obs/lab",
					    150 * MIB, 1, &a, err, sizeof(err)),
			 0);
	assert_int_equal(rfs_memlimit_claim(claims, "/d/2.h5", "/obs/w",
					    50 * MIB, 1, &b, err, sizeof(err)),
			 0);
	rfs_memlimit_release(claims, &b);
	assert_int_equal(rfs_memlimit_claim(claims, "/d/2.h5", "/obs/w",
					    20 * MIB, 1, &b, err, sizeof(err)),
			 0);
	struct rfs_memlimit_peak p;
	rfs_memlimit_peak(claims, &p);
	assert_true(p.held == 200 * MIB); /* not the 170 held now */
	assert_true(p.biggest == 150 * MIB);
	assert_string_equal(p.what, "/d/1.h5: /obs/lab");
	/* A spare claim must fit beside all of cache_mb. */
	uint64_t c = 0;
	assert_int_equal(rfs_memlimit_claim_spare(claims, "/d/1.h5",
						  "/X (its chunks' addresses)",
						  MIB, 24, &c, err,
						  sizeof(err)),
			 -ENOMEM);
	assert_string_equal(err, "/d/1.h5: /X (its chunks' addresses) claims "
				 "1048576 entries: at least 24 MiB at mount, "
				 "more than the 256 MiB of the limit of its "
				 "memory cgroup (/g/memory.max) leaves beside "
				 "the 170 MiB claimed before it and "
				 "cache_mb=112 with the daemon's own 32 MiB; "
				 "give cache_mb=30 or less");
	assert_int_equal(rfs_memlimit_claim_spare(claims, "/d/1.h5", "/X",
						  10 * MIB, 1, &c, err,
						  sizeof(err)),
			 -ENOMEM);
	/* One the mount needs, over what the daemon's own leaves: no
	 * cache_mb to name. */
	assert_int_equal(rfs_memlimit_claim(claims, "/d/3.h5", "/obs/lab",
					    60 * MIB, 1, &c, err, sizeof(err)),
			 -ENOMEM);
	assert_string_equal(err, "/d/3.h5: /obs/lab claims 62914560 entries: "
				 "at least 60 MiB at mount, more than the 256 "
				 "MiB of the limit of its memory cgroup "
				 "(/g/memory.max) leaves beside the 170 MiB "
				 "claimed before it and the daemon's own 32 "
				 "MiB");
	assert_int_equal(c, 0);
	/* Settled: all of it set aside, the peak counted from there. */
	rfs_memlimit_reserve(claims, 54, 54);
	rfs_memlimit_peak(claims, &p);
	assert_true(p.held == 170 * MIB && p.biggest == 0);
	assert_string_equal(p.what, "");
	assert_int_equal(rfs_memlimit_claim(claims, "/d/3.h5", "/obs/lab", MIB,
					    1, &c, err, sizeof(err)),
			 -ENOMEM);
	rfs_memlimit_release(claims, &a);
	rfs_memlimit_release(claims, &b);
	/* No limit known: nothing set aside, the peak counted still. */
	struct rfs_memlimit none = { .bytes = UINT64_MAX };
	use_limit(&none);
	rfs_memlimit_reserve(claims, 1024, 0);
	assert_int_equal(rfs_memlimit_claim_spare(claims, "/d/1.h5", "/X",
						  5 * MIB, 1, &a, err,
						  sizeof(err)),
			 0);
	rfs_memlimit_peak(claims, &p);
	assert_true(p.held == 5 * MIB);
	rfs_memlimit_release(claims, &a);
}

enum { CLAIMERS = 8, CLAIMS = 20000 };

static void *claim_and_release(void *arg)
{
	char err[512];
	uint64_t *kept = arg, c = 0;
	for (int i = 0; i < CLAIMS; i++) {
		/* cmocka's asserts are the main thread's: counted here. */
		if (rfs_memlimit_claim(claims, "/d/1.h5", "/a", 3, 1, &c, err,
				       sizeof(err)) != 0) {
			*kept = UINT64_MAX;
			return NULL;
		}
		if (i % 2) /* every other claim given back */
			rfs_memlimit_release(claims, &c);
	}
	*kept = c;
	return NULL;
}

/* Threads claiming and releasing at once lose no update. */
static void test_claims_from_threads(void **state)
{
	(void)state;
	struct rfs_memlimit l = limit_of(256);
	use_limit(&l);
	pthread_t t[CLAIMERS];
	uint64_t kept[CLAIMERS];
	for (int i = 0; i < CLAIMERS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, claim_and_release,
						&kept[i]),
				 0);
	for (int i = 0; i < CLAIMERS; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < CLAIMERS; i++)
		assert_int_equal(kept[i], 0);
	assert_int_equal(rfs_memlimit_claimed(claims), 0);
}

/* Two ledgers (two mounts in one process) are independent: claims in
 * one do not count in the other, nor what one sets aside, nor its
 * peak; one destroyed leaves the other's. */
static void test_ledgers_are_independent(void **state)
{
	(void)state;
	char err[512];
	struct rfs_memlimit l = limit_of(256);
	struct rfs_claims *a, *b;
	assert_int_equal(rfs_claims_create(&l, &a), 0);
	assert_int_equal(rfs_claims_create(&l, &b), 0);
	uint64_t in_a = 0, in_b = 0;
	assert_int_equal(rfs_memlimit_claim(a, "/a.h5", "/X", 200 * MIB, 1,
					    &in_a, err, sizeof(err)),
			 0);
	assert_int_equal(rfs_memlimit_claimed(b), 0);
	/* b's room is all of its own: a's 200 MiB are not before it. */
	assert_int_equal(rfs_memlimit_claim(b, "/b.h5", "/X", 200 * MIB, 1,
					    &in_b, err, sizeof(err)),
			 0);
	rfs_memlimit_reserve(a, 112, 112);
	struct rfs_memlimit_peak peak;
	rfs_memlimit_peak(b, &peak);
	assert_int_equal(peak.held, 200 * MIB);
	assert_string_equal(peak.what, "/b.h5: /X");
	rfs_memlimit_release(b, &in_b);
	/* b set nothing aside: 200 MiB fit it again, not a. */
	assert_int_equal(rfs_memlimit_claim(b, "/b.h5", "/X", 200 * MIB, 1,
					    &in_b, err, sizeof(err)),
			 0);
	rfs_claims_destroy(b);
	assert_int_equal(rfs_memlimit_claimed(a), 200 * MIB);
	rfs_memlimit_release(a, &in_a);
	assert_int_equal(rfs_memlimit_claimed(a), 0);
	rfs_claims_destroy(a);
	rfs_claims_destroy(NULL); /* accepted */
	/* No ledger: each claim alone, against the address space. */
	assert_int_equal(rfs_memlimit_claim(NULL, "/c.h5", "/X", 1 << 20, 1,
					    NULL, err, sizeof(err)),
			 0);
	assert_int_equal(rfs_memlimit_claim(NULL, "/c.h5", "/X", UINT64_MAX, 2,
					    NULL, err, sizeof(err)),
			 -ENOMEM);
}

/* This machine's own: whatever it says, a real amount and a source. */
static void test_this_machine(void **state)
{
	(void)state;
	struct rfs_memlimit l;
	rfs_memlimit_read("", &l);
	assert_true(l.bytes > 16 * MIB && l.bytes < UINT64_MAX);
	assert_true(l.where[0] != '\0');
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_machine_memory_alone,
				       fake_root_clean),
		cmocka_unit_test_setup(test_nothing_readable, fake_root_clean),
		cmocka_unit_test_setup(test_v1_least_on_the_path_up,
				       fake_root_clean),
		cmocka_unit_test_setup(test_v2_and_mount_roots,
				       fake_root_clean),
		cmocka_unit_test_setup(test_v2_walks_up_and_skips_other_roots,
				       fake_root_clean),
		cmocka_unit_test_setup(test_escapes_and_root_boundaries,
				       fake_root_clean),
		cmocka_unit_test_setup(test_garbage_limits_nothing,
				       fake_root_clean),
		cmocka_unit_test(test_default_fits_the_limit),
		cmocka_unit_test(test_given_value_refused_over_the_limit),
		cmocka_unit_test(test_claims_within_the_limit),
		cmocka_unit_test(test_claims_add_up),
		cmocka_unit_test(test_cache_set_aside_first),
		cmocka_unit_test(test_default_yields_to_claims),
		cmocka_unit_test(test_claims_from_threads),
		cmocka_unit_test(test_ledgers_are_independent),
		cmocka_unit_test(test_this_machine),
	};
	int failed =
		cmocka_run_group_tests(tests, fake_root_make, fake_root_remove);
	rfs_claims_destroy(claims);
	return failed;
}
