/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/os/watch.c: writes to an opened file, and what is not one. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "os/watch.h"

static char dir[] = "/tmp/rankfs-watch-XXXXXX";
static struct rfs_watch *w; /* the tests' table */

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
	int id = rfs_watch_add(w, ro);
	int other_id = rfs_watch_add(w, other_fd);
	assert_true(id >= 0 && other_id >= 0);
	assert_int_equal(rfs_watch_any_written(w, &id, 1), 0);
	/* Same size, through another descriptor: seen. */
	assert_int_equal(pwrite(fd, "x", 1, 3), 1);
	assert_int_equal(rfs_watch_any_written(w, &id, 1), 1);
	assert_int_equal(rfs_watch_any_written(w, &id, 1), 1); /* and kept */
	assert_int_equal(rfs_watch_any_written(w, &other_id, 1), 0);
	/* Truncation too. */
	assert_int_equal(ftruncate(other_fd, 4), 0);
	assert_int_equal(rfs_watch_any_written(w, &other_id, 1), 1);
	rfs_watch_forget(w, id);
	rfs_watch_forget(w, other_id);
	rfs_watch_forget(w, -1); /* ignored */
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
	int id = rfs_watch_add(w, fd);
	assert_true(id >= 0);
	snprintf(moved, sizeof(moved), "%s/moved", dir);
	assert_int_equal(rename(path, moved), 0);
	assert_int_equal(futimens(fd, NULL), 0);
	assert_int_equal(unlink(moved), 0);
	assert_int_equal(rfs_watch_any_written(w, &id, 1), 0);
	/* The inode is watched, not the name: still seen after all that. */
	assert_int_equal(pwrite(fd, "y", 1, 0), 1);
	assert_int_equal(rfs_watch_any_written(w, &id, 1), 1);
	rfs_watch_forget(w, id);
	close(fd);
}

/* A watched directory: each kind of change in it counts, for its id
 * alone; nothing counts before the change. */
static void test_directory_changes_are_seen(void **state)
{
	(void)state;
	static const char *const how[] = { "write", "utime", "create", "rename",
					   "unlink" };
	for (size_t k = 0; k < sizeof(how) / sizeof(how[0]); k++) {
		char sub[256], path[256], other[256];
		snprintf(sub, sizeof(sub), "%s/d", dir);
		snprintf(other, sizeof(other), "%s/e", dir);
		assert_int_equal(mkdir(sub, 0755), 0);
		assert_int_equal(mkdir(other, 0755), 0);
		snprintf(path, sizeof(path), "%s/d/f", dir);
		int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		assert_true(fd >= 0);
		int ids[2] = { rfs_watch_add_dir(w, other, NULL),
			       rfs_watch_add_dir(w, sub, NULL) };
		assert_true(ids[0] >= 0 && ids[1] >= 0);
		assert_int_equal(rfs_watch_add_dir(w, sub, NULL),
				 ids[1]); /* one id */
		assert_int_equal(rfs_watch_any_written(w, ids, 2), 0);
		char moved[300];
		snprintf(moved, sizeof(moved), "%s/g", sub);
		switch (k) {
		case 0:
			assert_int_equal(pwrite(fd, "x", 1, 0), 1);
			break;
		case 1:
			assert_int_equal(futimens(fd, NULL), 0);
			break;
		case 2:
			close(open(moved, O_WRONLY | O_CREAT | O_CLOEXEC,
				   0644));
			break;
		case 3:
			assert_int_equal(rename(path, moved), 0);
			break;
		default:
			assert_int_equal(unlink(path), 0);
		}
		if (rfs_watch_any_written(w, ids, 1) ||
		    !rfs_watch_any_written(w, ids, 2) ||
		    !rfs_watch_any_written(w, &ids[1], 1))
			fail_msg("%s in a watched directory", how[k]);
		rfs_watch_forget(w, ids[0]);
		rfs_watch_forget(w, ids[1]);
		close(fd);
		unlink(path);
		unlink(moved);
		assert_int_equal(rmdir(sub), 0);
		assert_int_equal(rmdir(other), 0);
	}
	assert_true(rfs_watch_add_dir(w, "/nonexistent-rankfs-dir", NULL) < 0);
}

static int digits_only(const char *name)
{
	return strspn(name, "0123456789") == strlen(name);
}

/* A filter passes over names nobody reads (a note, a lock file); a name
 * it keeps, and the directory's own events, still count. */
static void test_directory_name_filter(void **state)
{
	(void)state;
	char sub[256], path[300], moved[300];
	snprintf(sub, sizeof(sub), "%s/filtered", dir);
	assert_int_equal(mkdir(sub, 0755), 0);
	int id = rfs_watch_add_dir(w, sub, digits_only);
	assert_true(id >= 0);
	snprintf(path, sizeof(path), "%s/notes.txt", sub);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "x", 1, 0), 1);
	close(fd);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rfs_watch_any_written(w, &id, 1), 0);
	snprintf(path, sizeof(path), "%s/5", sub);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(rfs_watch_any_written(w, &id, 1), 1);
	rfs_watch_forget(w, id);
	assert_int_equal(unlink(path), 0);
	/* The directory itself renamed: no name, so it counts. */
	id = rfs_watch_add_dir(w, sub, digits_only);
	snprintf(moved, sizeof(moved), "%s/filtered-moved", dir);
	assert_int_equal(rename(sub, moved), 0);
	assert_int_equal(rfs_watch_any_written(w, &id, 1), 1);
	rfs_watch_forget(w, id);
	assert_int_equal(rmdir(moved), 0);
}

static void test_bad_descriptor(void **state)
{
	(void)state;
	assert_true(rfs_watch_add(w, 987654) < 0);
}

/* Two tables (two mounts in one process) share nothing: a file watched
 * in both and forgotten in one is still watched in the other, and one
 * destroyed leaves the other's watches. */
static void test_tables_are_independent(void **state)
{
	(void)state;
	char path[256];
	int fd = make_file("both", path, sizeof(path));
	struct rfs_watch *other;
	assert_int_equal(rfs_watch_create(&other), 0);
	int id = rfs_watch_add(w, fd), other_id = rfs_watch_add(other, fd);
	assert_true(id >= 0 && other_id >= 0);
	rfs_watch_forget(w, id);
	assert_int_equal(pwrite(fd, "x", 1, 3), 1);
	assert_int_equal(rfs_watch_any_written(other, &other_id, 1), 1);
	assert_int_equal(rfs_watch_any_written(w, &id, 1), 0);
	id = rfs_watch_add(w, fd);
	rfs_watch_destroy(other);
	assert_int_equal(rfs_watch_any_written(w, &id, 1), 0);
	assert_int_equal(pwrite(fd, "y", 1, 3), 1);
	assert_int_equal(rfs_watch_any_written(w, &id, 1), 1);
	rfs_watch_forget(w, id);
	rfs_watch_destroy(NULL); /* accepted */
	close(fd);
	unlink(path);
}

static int setup(void **state)
{
	(void)state;
	return mkdtemp(dir) && rfs_watch_create(&w) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	rfs_watch_destroy(w);
	return rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_write_and_truncate_are_seen),
		cmocka_unit_test(test_rename_unlink_and_utime_are_not_writes),
		cmocka_unit_test(test_directory_changes_are_seen),
		cmocka_unit_test(test_directory_name_filter),
		cmocka_unit_test(test_bad_descriptor),
		cmocka_unit_test(test_tables_are_independent),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
