/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/os/cpulimit.c: CPU quotas read up the groups (v1 and
 * v2, a fraction of a core counting as one), and the cores this process
 * may use. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sched.h>

#include "os/cpulimit.h"
#include "fake_root.h"

static void test_v2_quota(void **state)
{
	(void)state;
	fake_root_put("proc/self/cgroup", "0::/pod/c\n");
	fake_root_put("proc/self/mountinfo",
		      "30 20 0:27 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
	fake_root_put("sys/fs/cgroup/pod/c/cpu.max", "max 100000\n");
	assert_true(rfs_cpulimit_quota(fake_root) == UINT64_MAX);
	fake_root_put("sys/fs/cgroup/pod/cpu.max", "250000 100000\n");
	assert_true(rfs_cpulimit_quota(fake_root) == 3); /* 2.5 cores */
	fake_root_put("sys/fs/cgroup/pod/c/cpu.max", "100000 100000\n");
	assert_true(rfs_cpulimit_quota(fake_root) == 1);
}

static void test_v1_quota(void **state)
{
	(void)state;
	fake_root_put("proc/self/cgroup", "2:cpu,cpuacct:/job\n");
	fake_root_put(
		"proc/self/mountinfo",
		"32 23 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup "
		"rw,cpu,cpuacct\n");
	fake_root_put("sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_quota_us", "-1\n");
	fake_root_put("sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_period_us",
		      "100000\n");
	assert_true(rfs_cpulimit_quota(fake_root) == UINT64_MAX);
	fake_root_put("sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_quota_us",
		      "800000\n");
	assert_true(rfs_cpulimit_quota(fake_root) == 8);
	/* A quota without its period limits nothing. */
	fake_root_put("sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_period_us",
		      "garbage\n");
	assert_true(rfs_cpulimit_quota(fake_root) == UINT64_MAX);
}

/* This process: its affinity's cores, or fewer under a quota. */
static void test_this_process(void **state)
{
	(void)state;
	cpu_set_t set;
	assert_int_equal(sched_getaffinity(0, sizeof(set), &set), 0);
	uint64_t cores = rfs_cpulimit_cores();
	assert_true(cores >= 1 && cores <= (uint64_t)CPU_COUNT(&set));
	uint64_t quota = rfs_cpulimit_quota("");
	assert_true(cores == (quota < (uint64_t)CPU_COUNT(&set) ?
				      quota :
				      (uint64_t)CPU_COUNT(&set)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_v2_quota, fake_root_clean),
		cmocka_unit_test_setup(test_v1_quota, fake_root_clean),
		cmocka_unit_test(test_this_process),
	};
	return cmocka_run_group_tests(tests, fake_root_make, fake_root_remove);
}
