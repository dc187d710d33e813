/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/source/registry.c: each backend's probe claims its
 * format, and a path no backend claims gets today's error, word for word. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <hdf5.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "h5_fixture.h"
#include "source/backend.h"

static char dir[PATH_MAX];

/* Valid until the fourth call after. */
static const char *in_dir(const char *name)
{
	static char path[4][PATH_MAX + 64];
	static int next;
	char *p = path[next++ % 4];
	snprintf(p, sizeof(path[0]), "%s/%s", dir, name);
	return p;
}

static void write_text(const char *path, const char *text)
{
	FILE *fp = fopen(path, "w");
	assert_non_null(fp);
	fputs(text, fp);
	fclose(fp);
}

static const char *backend_of(const char *path)
{
	const struct rfs_source_backend *b;
	char err[512] = "";
	int rc = rfs_source_backend_of(path, &b, err, sizeof(err));
	if (rc != 0)
		fail_msg("%s: rc %d (%s)", path, rc, err);
	return b->name;
}

/* A file whose superblock follows a 512-byte user block (h5jam's). */
static void write_user_block(const char *path)
{
	hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
	assert_true(H5Pset_userblock(fcpl, 512) >= 0);
	hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
	hsize_t dims[2] = { 4, 3 };
	hid_t space = H5Screate_simple(2, dims, NULL);
	hid_t d = H5Dcreate2(f, "/X", H5T_IEEE_F32LE, space, H5P_DEFAULT,
			     H5P_DEFAULT, H5P_DEFAULT);
	float v[12] = { 0 };
	assert_true(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT,
			     v) >= 0);
	H5Dclose(d);
	H5Sclose(space);
	H5Fclose(f);
	H5Pclose(fcpl);
}

static void test_probe_picks_backend(void **state)
{
	(void)state;
	char h5[PATH_MAX + 64];
	snprintf(h5, sizeof(h5), "%s", in_dir("x.h5ad"));
	assert_int_equal(h5fx_write_f32(h5, 8, 3, 2, 1), 0);
	assert_string_equal(backend_of(h5), "hdf5");
	/* The signature after a user block, where H5Fis_hdf5 finds it. */
	const char *ub = in_dir("user_block.h5");
	write_user_block(ub);
	assert_string_equal(backend_of(ub), "hdf5");
	struct rfs_source *s = NULL;
	char err[512] = "";
	assert_int_equal(rfs_source_open(ub, "/X", NULL, &s, err, 512), 0);
	assert_int_equal(rfs_source_info(s)->rows, 4);
	rfs_source_destroy(s);
	/* A directory holding a zarr group's or array's metadata. */
	const char *v2 = in_dir("v2.zarr");
	assert_int_equal(mkdir(v2, 0755), 0);
	write_text(in_dir("v2.zarr/.zgroup"), "{\"zarr_format\": 2}");
	assert_string_equal(backend_of(v2), "zarr");
	assert_int_equal(rfs_source_is_store(v2), 1);
	const char *v3 = in_dir("v3.zarr");
	assert_int_equal(mkdir(v3, 0755), 0);
	write_text(in_dir("v3.zarr/zarr.json"),
		   "{\"zarr_format\": 3, \"node_type\": \"group\"}");
	assert_string_equal(backend_of(v3), "zarr");
	/* Neither a collection: each is one source. */
	char **members = (char **)&members;
	size_t n = 1;
	assert_int_equal(rfs_source_members(v2, &members, &n, err, 512), 0);
	assert_null(members);
	assert_int_equal(n, 0);
	assert_int_equal(rfs_source_members(h5, &members, &n, err, 512), 0);
	assert_int_equal(rfs_source_is_store(h5), 0);
	assert_int_equal(rfs_source_is_store(dir), 0);
}

/* The open's error, in full, and *out untouched. */
static void expect_unknown(const char *path, int want_rc, const char *tail)
{
	char err[512] = "", want[PATH_MAX + 256];
	struct rfs_source *s = (struct rfs_source *)&s;
	snprintf(want, sizeof(want), "%s: %s", path, tail);
	assert_int_equal(rfs_source_open(path, NULL, NULL, &s, err, 512),
			 want_rc);
	assert_string_equal(err, want);
	assert_true(s == (struct rfs_source *)&s);
}

static void test_unknown_format(void **state)
{
	(void)state;
	const char *text = in_dir("notes.h5");
	write_text(text, "this is not an HDF5 file, though named so\n");
	expect_unknown(text, -EINVAL, "not an HDF5 file");
	const char *empty = in_dir("empty.h5ad");
	write_text(empty, "");
	expect_unknown(empty, -EINVAL, "not an HDF5 file");
	const char *plain = in_dir("plain");
	assert_int_equal(mkdir(plain, 0755), 0);
	expect_unknown(plain, -EINVAL,
		       "not a regular file, nor a zarr store (a directory "
		       "without .zgroup, .zarray, .zmetadata or zarr.json)");
	const char *fifo = in_dir("fifo");
	assert_int_equal(mkfifo(fifo, 0600), 0);
	expect_unknown(fifo, -EINVAL, "not a regular file");
	expect_unknown(in_dir("missing.h5ad"), -ENOENT,
		       "No such file or directory");
}

static int setup(void **state)
{
	(void)state;
	return h5fx_tmpdir(dir, sizeof(dir));
}

static int teardown(void **state)
{
	(void)state;
	h5fx_rmtree(dir);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_probe_picks_backend),
		cmocka_unit_test(test_unknown_format),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
