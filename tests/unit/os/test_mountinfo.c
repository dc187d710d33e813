/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/os/mountinfo.c: the mount at a point, found in a
 * mountinfo file written here (escapes, optional fields, several mounts
 * at one point). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "os/mountinfo.h"

static char path[] = "/tmp/rankfs-test-mountinfo-XXXXXX";

static const char lines[] =
	"22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
	"40 22 0:35 / /tmp rw,nosuid shared:13 master:2 - tmpfs tmpfs rw\n"
	"41 40 0:52 / /tmp/my\\040mnt rw - fuse.rankfs /data/a\\040b.h5 "
	"ro,user_id=0\n"
	"42 40 0:53 / /tmp/twice rw - tmpfs first rw\n"
	"43 42 0:54 / /tmp/twice rw - fuse.rankfs /data/top.h5ad ro\n"
	"44 40 0:55 / /tmp/short rw\n";

static int write_file(void **state)
{
	(void)state;
	int fd = mkstemp(path);
	if (fd < 0)
		return -1;
	FILE *f = fdopen(fd, "w");
	int ok = f && fputs(lines, f) >= 0;
	return f && fclose(f) == 0 && ok ? 0 : -1;
}

static int remove_file(void **state)
{
	(void)state;
	unlink(path);
	return 0;
}

static void test_finds_the_mount(void **state)
{
	(void)state;
	struct rfs_mount_entry e;
	assert_int_equal(rfs_mountinfo_find(path, "/tmp", &e), 0);
	assert_string_equal(e.majmin, "0:35");
	assert_string_equal(e.fstype, "tmpfs");
	assert_string_equal(e.source, "tmpfs");
	assert_int_equal(rfs_mountinfo_find(path, "/", &e), 0);
	assert_string_equal(e.source, "/dev/sda1");
}

static void test_escapes_decoded(void **state)
{
	(void)state;
	struct rfs_mount_entry e;
	assert_int_equal(rfs_mountinfo_find(path, "/tmp/my mnt", &e), 0);
	assert_string_equal(e.majmin, "0:52");
	assert_string_equal(e.fstype, "fuse.rankfs");
	assert_string_equal(e.source, "/data/a b.h5");
	assert_int_equal(rfs_mountinfo_find(path, "/tmp/my\\040mnt", &e),
			 -ENOENT);
}

static void test_last_mount_is_on_top(void **state)
{
	(void)state;
	struct rfs_mount_entry e;
	assert_int_equal(rfs_mountinfo_find(path, "/tmp/twice", &e), 0);
	assert_string_equal(e.majmin, "0:54");
	assert_string_equal(e.source, "/data/top.h5ad");
}

static void test_not_mounted_and_short_lines(void **state)
{
	(void)state;
	struct rfs_mount_entry e;
	assert_int_equal(rfs_mountinfo_find(path, "/tmp/none", &e), -ENOENT);
	assert_int_equal(rfs_mountinfo_find(path, "/tm", &e), -ENOENT);
	/* No " - TYPE SOURCE": found, the names left empty. */
	assert_int_equal(rfs_mountinfo_find(path, "/tmp/short", &e), 0);
	assert_string_equal(e.fstype, "");
	assert_string_equal(e.source, "");
	assert_int_equal(rfs_mountinfo_find("/nonexistent/mountinfo", "/", &e),
			 -ENOENT);
}

static int count_until_tmp(const struct rfs_mount_entry *e, void *arg)
{
	int *seen = arg;
	++*seen;
	if (strcmp(e->point, "/tmp") != 0)
		return 0;
	assert_string_equal(e->root, "/");
	assert_string_equal(e->superopts, "rw");
	return 7;
}

static int keep_last(const struct rfs_mount_entry *e, void *arg)
{
	*(struct rfs_mount_entry *)arg = *e;
	return 0;
}

/* Each mount in order, every field, until the callback says stop. */
static void test_each_mount(void **state)
{
	(void)state;
	int seen = 0;
	assert_int_equal(rfs_mountinfo_each(path, count_until_tmp, &seen), 7);
	assert_int_equal(seen, 2);
	struct rfs_mount_entry e;
	assert_int_equal(rfs_mountinfo_each(path, keep_last, &e), 0);
	assert_string_equal(e.point, "/tmp/short");
	assert_int_equal(rfs_mountinfo_each(path, count_until_tmp, &seen), 7);
	assert_int_equal(rfs_mountinfo_find(path, "/tmp/my mnt", &e), 0);
	assert_string_equal(e.superopts, "ro,user_id=0");
	assert_string_equal(e.root, "/");
	assert_int_equal(rfs_mountinfo_each("/nonexistent/mountinfo", keep_last,
					    &e),
			 -ENOENT);
}

static void test_own_mountinfo(void **state)
{
	(void)state;
	struct rfs_mount_entry e;
	assert_int_equal(rfs_mountinfo_find(NULL, "/", &e), 0);
	assert_true(e.fstype[0] != '\0');
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_finds_the_mount),
		cmocka_unit_test(test_escapes_decoded),
		cmocka_unit_test(test_last_mount_is_on_top),
		cmocka_unit_test(test_not_mounted_and_short_lines),
		cmocka_unit_test(test_each_mount),
		cmocka_unit_test(test_own_mountinfo),
	};
	return cmocka_run_group_tests(tests, write_file, remove_file);
}
