/* Unit tests for lib/mountopt.c: which of a mount's -o words are
 * libfuse's or mount(8)'s, and libfuse values refused up front. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "mountopt.h"

static void test_kinds(void **state)
{
	(void)state;
	assert_int_equal(rfs_mountopt_kind("allow_other"), RFS_MOUNTOPT_FUSE);
	assert_int_equal(rfs_mountopt_kind("max_threads"), RFS_MOUNTOPT_FUSE);
	assert_int_equal(rfs_mountopt_kind("fsname"), RFS_MOUNTOPT_FUSE);
	assert_int_equal(rfs_mountopt_kind("noauto"), RFS_MOUNTOPT_IGNORED);
	assert_int_equal(rfs_mountopt_kind("_netdev"), RFS_MOUNTOPT_IGNORED);
	assert_int_equal(rfs_mountopt_kind("x-systemd.automount"),
			 RFS_MOUNTOPT_IGNORED);
	/* rankfs's own and unknown words are neither. */
	assert_int_equal(rfs_mountopt_kind("world_size"), RFS_MOUNTOPT_OTHER);
	assert_int_equal(rfs_mountopt_kind("allow"), RFS_MOUNTOPT_OTHER);
	assert_int_equal(rfs_mountopt_kind(""), RFS_MOUNTOPT_OTHER);
}

static void expect_refused(const char *key, const char *value,
			   const char *message)
{
	char err[256] = "";
	assert_int_equal(rfs_mountopt_check_fuse(key, value, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, message));
}

static void test_values(void **state)
{
	(void)state;
	char err[256];
	assert_int_equal(rfs_mountopt_check_fuse("allow_other", NULL, err,
						 sizeof(err)),
			 0);
	assert_int_equal(rfs_mountopt_check_fuse("max_threads", "64", err,
						 sizeof(err)),
			 0);
	assert_int_equal(rfs_mountopt_check_fuse("max_idle_threads", "0", err,
						 sizeof(err)),
			 0);
	assert_int_equal(rfs_mountopt_check_fuse("fsname", "/data/a.h5", err,
						 sizeof(err)),
			 0);
	expect_refused("allow_other", "5",
		       "option allow_other=5: allow_other takes no value");
	expect_refused("max_threads", "0",
		       "option max_threads=0: expected an integer from 1");
	expect_refused("max_threads", NULL, "expected an integer from 1");
	expect_refused("max_idle_threads", "-1",
		       "expected an integer from 0 to 1024");
	expect_refused("max_read", "0", "option max_read=0: expected an");
	expect_refused("subtype", "", "option subtype=: expected a name");
}

static void test_names(void **state)
{
	(void)state;
	struct rfs_buf b = { 0 };
	rfs_mountopt_render_fuse_names(&b);
	assert_false(b.failed);
	assert_non_null(strstr(b.data, "allow_other, "));
	assert_non_null(strstr(b.data, "max_threads"));
	assert_null(strstr(b.data, "noauto"));
	rfs_buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kinds),
		cmocka_unit_test(test_values),
		cmocka_unit_test(test_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
