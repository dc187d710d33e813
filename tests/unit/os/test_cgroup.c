/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/os/cgroup.c: the directories of the process's groups,
 * from a directory standing in for / (its /proc/self/cgroup and
 * mountinfo), innermost first, v1's for the controller asked and v2's. */
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

#include "os/cgroup.h"
#include "fake_root.h"

struct seen {
	char dirs[8][PATH_MAX];
	int v2[8];
	int n;
};

static void record(const char *dir, int v2, void *arg)
{
	struct seen *s = arg;
	assert_true(s->n < 8);
	/* Relative to the stand-in root. */
	snprintf(s->dirs[s->n], PATH_MAX, "%s", dir + strlen(fake_root));
	s->v2[s->n++] = v2;
}

static void test_v1_controller_and_v2(void **state)
{
	(void)state;
	fake_root_put("proc/self/cgroup", "5:cpu,cpuacct:/batch/job\n"
					  "4:memory:/other\n"
					  "0::/slice/unit\n");
	fake_root_put("proc/self/mountinfo",
		      "35 31 0:32 / /cg/cpu rw - cgroup cgroup rw,cpu,cpuacct\n"
		      "36 31 0:33 / /cg/memory rw - cgroup cgroup rw,memory\n"
		      "41 31 0:38 / /cg/unified rw - cgroup2 cgroup2 rw\n");
	struct seen s = { .n = 0 };
	rfs_cgroup_each_dir(fake_root, "cpu", record, &s);
	assert_int_equal(s.n, 6);
	assert_string_equal(s.dirs[0], "/cg/cpu/batch/job");
	assert_string_equal(s.dirs[1], "/cg/cpu/batch");
	assert_string_equal(s.dirs[2], "/cg/cpu");
	assert_false(s.v2[2]);
	assert_string_equal(s.dirs[3], "/cg/unified/slice/unit");
	assert_true(s.v2[3]);
	assert_string_equal(s.dirs[5], "/cg/unified");
	s.n = 0;
	rfs_cgroup_each_dir(fake_root, "memory", record, &s);
	assert_int_equal(s.n, 5);
	assert_string_equal(s.dirs[0], "/cg/memory/other");
	/* "cpu" is not "cpuset": whole words of the controller list. */
	fake_root_put("proc/self/cgroup", "3:cpuset:/set\n");
	s.n = 0;
	rfs_cgroup_each_dir(fake_root, "cpu", record, &s);
	assert_int_equal(s.n, 0);
}

static void test_mount_roots(void **state)
{
	(void)state;
	/* A container's view: the mount shows its own group as /. */
	fake_root_put("proc/self/cgroup", "0::/pods/p1\n");
	fake_root_put(
		"proc/self/mountinfo",
		"29 20 0:26 /pods/p1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
		"30 20 0:26 /pods/p2 /elsewhere rw - cgroup2 cgroup2 rw\n");
	struct seen s = { .n = 0 };
	rfs_cgroup_each_dir(fake_root, "memory", record, &s);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.dirs[0], "/sys/fs/cgroup");
}

static void test_nothing_to_read(void **state)
{
	(void)state;
	struct seen s = { .n = 0 };
	rfs_cgroup_each_dir(fake_root, "memory", record, &s);
	assert_int_equal(s.n, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_v1_controller_and_v2,
				       fake_root_clean),
		cmocka_unit_test_setup(test_mount_roots, fake_root_clean),
		cmocka_unit_test_setup(test_nothing_to_read, fake_root_clean),
	};
	return cmocka_run_group_tests(tests, fake_root_make, fake_root_remove);
}
