/* Unit tests for lib/watch.c: writes to an opened file, and what is not one. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "watch.h"

static char dir[] = "/tmp/rankfs-watch-XXXXXX";

static int make_file(const char *name, char *path, size_t n)
{
	snprintf(path, n, "%s/%s", dir, name);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "0123456789", 10), 10);
	return fd;
}

static void test_write_and_truncate_are_seen(void **state)
{
	(void)state;
	char path[256], other[256];
	int fd = make_file("a", path, sizeof(path));
	int other_fd = make_file("b", other, sizeof(other));
	int ro = open(path, O_RDONLY | O_CLOEXEC);
	int id = rfs_watch_add(ro);
	int other_id = rfs_watch_add(other_fd);
	assert_true(id >= 0 && other_id >= 0);
	assert_int_equal(rfs_watch_written(id), 0);
	/* Same size, through another descriptor: seen. */
	assert_int_equal(pwrite(fd, "x", 1, 3), 1);
	assert_int_equal(rfs_watch_written(id), 1);
	assert_int_equal(rfs_watch_written(id), 1); /* and kept */
	assert_int_equal(rfs_watch_written(other_id), 0);
	/* Truncation too. */
	assert_int_equal(ftruncate(other_fd, 4), 0);
	assert_int_equal(rfs_watch_written(other_id), 1);
	rfs_watch_forget(id);
	rfs_watch_forget(other_id);
	rfs_watch_forget(-1); /* ignored */
	close(ro);
	close(fd);
	close(other_fd);
	unlink(path);
	unlink(other);
}

static void test_rename_unlink_and_utime_are_not_writes(void **state)
{
	(void)state;
	char path[256], moved[256];
	int fd = make_file("c", path, sizeof(path));
	int id = rfs_watch_add(fd);
	assert_true(id >= 0);
	snprintf(moved, sizeof(moved), "%s/moved", dir);
	assert_int_equal(rename(path, moved), 0);
	assert_int_equal(futimens(fd, NULL), 0);
	assert_int_equal(unlink(moved), 0);
	assert_int_equal(rfs_watch_written(id), 0);
	/* The inode is watched, not the name: still seen after all that. */
	assert_int_equal(pwrite(fd, "y", 1, 0), 1);
	assert_int_equal(rfs_watch_written(id), 1);
	rfs_watch_forget(id);
	close(fd);
}

static void test_bad_descriptor(void **state)
{
	(void)state;
	assert_true(rfs_watch_add(987654) < 0);
}

static int setup(void **state)
{
	(void)state;
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	return rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_write_and_truncate_are_seen),
		cmocka_unit_test(test_rename_unlink_and_utime_are_not_writes),
		cmocka_unit_test(test_bad_descriptor),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
