/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "source/io/beneath.h"

static char dir[256], root[300], outside[300];
static int root_fd = -1;

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void at(char *out, const char *name)
{
	snprintf(out, 512, "%s/%s", root, name);
}

static int setup(void **state)
{
	(void)state;
	char path[512];
	snprintf(dir, sizeof(dir), "/tmp/rankfs-beneath-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(root, sizeof(root), "%s/store", dir);
	snprintf(outside, sizeof(outside), "%s/secret", dir);
	mkdir(root, 0755);
	put(outside, "secret");
	at(path, "chunk");
	put(path, "inside");
	at(path, "sub");
	mkdir(path, 0755);
	at(path, "sub/inner");
	put(path, "inner");
	at(path, "up");
	assert_int_equal(symlink("../secret", path), 0);
	at(path, "absolute");
	assert_int_equal(symlink(outside, path), 0);
	at(path, "sideways");
	assert_int_equal(symlink("sub/../chunk", path), 0);
	at(path, "linkdir");
	assert_int_equal(symlink("..", path), 0);
	at(path, "fifo");
	assert_int_equal(mkfifo(path, 0600), 0);
	root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return root_fd < 0 ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[400];
	close(root_fd);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* Opens name under root: what it holds, or the negative errno. */
static int read_at(const char *name, char *text, size_t len)
{
	char path[512];
	at(path, name);
	int fd = rfs_open_beneath(root_fd, root, path);
	if (fd < 0)
		return fd;
	ssize_t got = read(fd, text, len - 1);
	close(fd);
	text[got > 0 ? got : 0] = '\0';
	return 0;
}

static void test_files_inside_are_read(void **state)
{
	(void)state;
	char text[32];
	assert_int_equal(read_at("chunk", text, sizeof(text)), 0);
	assert_string_equal(text, "inside");
	assert_int_equal(read_at("sub/inner", text, sizeof(text)), 0);
	assert_string_equal(text, "inner");
	/* A link that stays inside is followed. */
	assert_int_equal(read_at("sideways", text, sizeof(text)), 0);
	assert_string_equal(text, "inside");
}

static void test_links_out_are_refused(void **state)
{
	(void)state;
	char text[32];
	assert_int_equal(read_at("up", text, sizeof(text)), -EXDEV);
	assert_int_equal(read_at("absolute", text, sizeof(text)), -EXDEV);
	assert_int_equal(read_at("linkdir/secret", text, sizeof(text)), -EXDEV);
	assert_int_equal(read_at("../secret", text, sizeof(text)), -EXDEV);
	assert_string_equal(rfs_beneath_strerror(EXDEV),
			    "a link that leads out of the source");
	/* A path not below the root names nothing of it. */
	assert_int_equal(rfs_open_beneath(root_fd, root, outside), -EXDEV);
	assert_int_equal(rfs_open_beneath(root_fd, root, root), -EXDEV);
}

static void test_fifo_opens_without_waiting(void **state)
{
	(void)state;
	char path[512];
	struct stat st;
	at(path, "fifo");
	int fd = rfs_open_beneath(root_fd, root, path);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_true(S_ISFIFO(st.st_mode)); /* the caller refuses it */
	close(fd);
	at(path, "missing");
	assert_int_equal(rfs_open_beneath(root_fd, root, path), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_files_inside_are_read),
		cmocka_unit_test(test_links_out_are_refused),
		cmocka_unit_test(test_fifo_opens_without_waiting),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
