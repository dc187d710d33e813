/* Unit tests for lib/memlimit.c: the memory limit read from a directory
 * standing in for / (meminfo, the process's cgroups, the cgroup mounts
 * and their limit files, v1 and v2), and cache_mb fitted to it. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "memlimit.h"

#define MIB (UINT64_C(1) << 20)

static char root[] = "/tmp/rankfs-test-memlimit-XXXXXX";

/* Writes text to root/rel, making its directories. */
static void put(const char *rel, const char *text)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (char *p = path + strlen(root) + 1; (p = strchr(p, '/')); p++) {
		*p = '\0';
		mkdir(path, 0755);
		*p = '/';
	}
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_true(fputs(text, f) >= 0);
	assert_int_equal(fclose(f), 0);
}

static int make_root(void **state)
{
	(void)state;
	return mkdtemp(root) ? 0 : -1;
}

static int remove_root(void **state)
{
	(void)state;
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd) == 0 ? 0 : -1;
}

/* A fresh tree for each test: what the previous one wrote is gone. */
static int clean_root(void **state)
{
	return remove_root(state) || mkdir(root, 0700) ? -1 : 0;
}

static const char meminfo[] = "MemTotal:       24684084 kB\n"
			      "MemFree:         1000000 kB\n";

static void test_machine_memory_alone(void **state)
{
	(void)state;
	put("proc/meminfo", meminfo);
	struct rfs_memlimit l;
	rfs_memlimit_read(root, &l);
	assert_true(l.bytes == UINT64_C(24684084) * 1024);
	assert_non_null(strstr(l.where, "MemTotal"));
}

static void test_nothing_readable(void **state)
{
	(void)state;
	struct rfs_memlimit l;
	rfs_memlimit_read(root, &l);
	assert_true(l.bytes == UINT64_MAX);
}

/* v1: the memory controller's hierarchy, mounted with others beside it;
 * the least limit on the path up counts, v1's "no limit" counts not. */
static void test_v1_least_on_the_path_up(void **state)
{
	(void)state;
	put("proc/meminfo", meminfo);
	put("proc/self/cgroup", "5:cpu,cpuacct:/other\n"
				"4:memory:/jobs/job1/task\n"
				"0::/\n");
	put("proc/self/mountinfo",
	    "35 31 0:32 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
	    "36 31 0:33 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup "
	    "rw,memory\n");
	put("sys/fs/cgroup/memory/memory.limit_in_bytes",
	    "9223372036854771712\n");
	put("sys/fs/cgroup/memory/jobs/memory.limit_in_bytes", "4294967296\n");
	put("sys/fs/cgroup/memory/jobs/job1/memory.limit_in_bytes",
	    "9223372036854771712\n");
	put("sys/fs/cgroup/memory/jobs/job1/task/memory.limit_in_bytes",
	    "8589934592\n");
	/* cpu's hierarchy has no say, whatever its files hold. */
	put("sys/fs/cgroup/cpu/other/memory.limit_in_bytes", "1048576\n");
	struct rfs_memlimit l;
	rfs_memlimit_read(root, &l);
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
	put("proc/meminfo", meminfo);
	put("proc/self/cgroup", "0::/kubepods/pod7/c1\n");
	put("proc/self/mountinfo",
	    "30 20 0:27 /kubepods/pod7/c1 /sys/fs/cgroup rw shared:9 - "
	    "cgroup2 cgroup2 rw,nsdelegate\n");
	put("sys/fs/cgroup/memory.max", "536870912\n");
	struct rfs_memlimit l;
	rfs_memlimit_read(root, &l);
	assert_true(l.bytes == 512 * MIB);
	put("sys/fs/cgroup/memory.max", "max\n");
	rfs_memlimit_read(root, &l);
	assert_true(l.bytes == UINT64_C(24684084) * 1024);
}

static void test_v2_walks_up_and_skips_other_roots(void **state)
{
	(void)state;
	put("proc/self/cgroup", "0::/user.slice/job.scope\n");
	put("proc/self/mountinfo",
	    /* Another namespace's group: not above this process's. */
	    "29 20 0:26 /elsewhere /mnt/other rw - cgroup2 cgroup2 rw\n"
	    "30 20 0:27 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
	put("mnt/other/memory.max", "1048576\n");
	put("sys/fs/cgroup/user.slice/memory.max", "2147483648\n");
	put("sys/fs/cgroup/user.slice/job.scope/memory.max", "max\n");
	struct rfs_memlimit l;
	rfs_memlimit_read(root, &l);
	assert_true(l.bytes == 2048 * MIB);
	assert_non_null(strstr(l.where, "user.slice/memory.max"));
}

/* mountinfo escapes a space as \040; a mount root is a whole directory:
 * /user is not above /user.slice. */
static void test_escapes_and_root_boundaries(void **state)
{
	(void)state;
	put("proc/self/cgroup", "0::/user.slice/my job\n");
	put("proc/self/mountinfo",
	    "29 20 0:26 /user /mnt/user rw - cgroup2 cgroup2 rw\n"
	    "30 20 0:27 / /sys/fs/cg\\040v2 rw - cgroup2 cgroup2 rw\n");
	put("mnt/user/memory.max", "1048576\n");
	put("mnt/user/.slice/my job/memory.max", "1048576\n");
	put("sys/fs/cg v2/user.slice/my job/memory.max", "3221225472\n");
	struct rfs_memlimit l;
	rfs_memlimit_read(root, &l);
	assert_true(l.bytes == 3072 * MIB);
	assert_non_null(strstr(l.where, "cg v2/user.slice/my job/memory.max"));
}

static void test_garbage_limits_nothing(void **state)
{
	(void)state;
	put("proc/self/cgroup", "0::/a\n");
	put("proc/self/mountinfo",
	    "30 20 0:27 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
	put("sys/fs/cgroup/a/memory.max", "12 apples\n");
	struct rfs_memlimit l;
	rfs_memlimit_read(root, &l);
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
		cmocka_unit_test_setup(test_machine_memory_alone, clean_root),
		cmocka_unit_test_setup(test_nothing_readable, clean_root),
		cmocka_unit_test_setup(test_v1_least_on_the_path_up,
				       clean_root),
		cmocka_unit_test_setup(test_v2_and_mount_roots, clean_root),
		cmocka_unit_test_setup(test_v2_walks_up_and_skips_other_roots,
				       clean_root),
		cmocka_unit_test_setup(test_escapes_and_root_boundaries,
				       clean_root),
		cmocka_unit_test_setup(test_garbage_limits_nothing, clean_root),
		cmocka_unit_test(test_default_fits_the_limit),
		cmocka_unit_test(test_given_value_refused_over_the_limit),
		cmocka_unit_test(test_this_machine),
	};
	return cmocka_run_group_tests(tests, make_root, remove_root);
}
