/* SPDX-License-Identifier: MIT */
/* Unit tests for fs/opts.c: the command line. What reaches rankfs's
 * config and libfuse, what mount(8)'s words become, and one error line
 * naming the culprit for each kind of bad input. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "opts.h"

/* dir: real (TMPDIR may be a link or relative), as rankfs makes the
 * mountpoint; file and under: what a failed test may leave. */
static char dir[PATH_MAX], mnt[PATH_MAX + 8];
static char file[PATH_MAX + 8], under[PATH_MAX + 16];

static int make_mountpoint(void **state)
{
	(void)state;
	const char *tmp = getenv("TMPDIR");
	char made[PATH_MAX];
	snprintf(made, sizeof(made), "%s/rankfs-test-opts-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(made) || !realpath(made, dir))
		return -1;
	snprintf(mnt, sizeof(mnt), "%s/mnt", dir);
	snprintf(file, sizeof(file), "%s/file", dir);
	snprintf(under, sizeof(under), "%s/x.h5", mnt);
	return mkdir(mnt, 0700);
}

static int remove_mountpoint(void **state)
{
	(void)state;
	unlink(under);
	unlink(file);
	rmdir(mnt);
	return rmdir(dir);
}

/* What one stream (1 or 2) printed while parsing argv. */
struct parsed {
	int rc;
	char out[8192];
};

static void parse(char **argv, int stream, struct rfs_cli *cli,
		  struct parsed *p)
{
	int argc = 0;
	while (argv[argc])
		argc++;
	char path[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/stream", dir);
	fflush(NULL);
	int saved = dup(stream);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(saved >= 0 && fd >= 0);
	assert_true(dup2(fd, stream) == stream);
	p->rc = rfs_opts_parse(argc, argv, cli);
	fflush(NULL);
	assert_true(dup2(saved, stream) == stream);
	close(saved);
	ssize_t n = pread(fd, p->out, sizeof(p->out) - 1, 0);
	assert_true(n >= 0);
	p->out[n] = '\0';
	close(fd);
	unlink(path);
}

/* All the arguments left for libfuse, in one string. */
static void fuse_args_of(const struct rfs_cli *cli, char *out, size_t len)
{
	size_t used = 0;
	out[0] = '\0';
	for (int i = 0; i < cli->args.argc; i++) {
		used += (size_t)snprintf(out + used, len - used, "%s ",
					 cli->args.argv[i]);
		assert_true(used < len);
	}
}

static void test_sources_mountpoint_and_options(void **state)
{
	(void)state;
	/* A relative mountpoint, through a "..", given from dir. */
	char rel[PATH_MAX + 16], cwd[PATH_MAX];
	snprintf(rel, sizeof(rel), "mnt/../../%s/mnt/", strrchr(dir, '/') + 1);
	char *argv[] = { "rankfs", "-f",
			 "-o",	   "world_size=2,batch_size=64,max_threads=8",
			 "-o",	   "seed=7",
			 "a.h5",   "b.h5ad",
			 rel,	   NULL };
	struct rfs_cli cli;
	struct parsed p;
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(dir), 0); /* where no a.h5 is */
	parse(argv, 2, &cli, &p);
	assert_int_equal(chdir(cwd), 0);
	assert_int_equal(p.rc, 0);
	assert_string_equal(p.out, "");
	assert_int_equal(cli.nsources, 2);
	assert_string_equal(cli.sources[0], "a.h5");
	assert_string_equal(cli.sources[1], "b.h5ad");
	assert_string_equal(cli.mountpoint, mnt); /* absolute and real */
	assert_int_equal(cli.config.world_size, 2);
	assert_int_equal(cli.config.batch_size, 64);
	assert_int_equal(cli.config.seed, 7);
	assert_int_equal(cli.fuse.foreground, 1);
	assert_int_equal(cli.fuse.max_threads, 8);
	assert_int_equal(cli.max_threads_given, 1);
	char args[4096];
	fuse_args_of(&cli, args, sizeof(args));
	assert_non_null(strstr(args, "ro,default_permissions,auto_unmount,"
				     "subtype=rankfs,fsname=a.h5"));
	assert_null(strstr(args, "world_size")); /* ours, not libfuse's */
	rfs_opts_free(&cli);
}

static void test_mount_words_dropped_and_names_kept(void **state)
{
	(void)state;
	char *argv[] = { "rankfs",
			 "-o",
			 "rw,noatime,_netdev,x-systemd.automount,nofail",
			 "-o",
			 "fsname=data,subtype=cells,allow_other",
			 "x.h5",
			 mnt,
			 NULL };
	struct rfs_cli cli;
	struct parsed p;
	parse(argv, 2, &cli, &p);
	assert_int_equal(p.rc, 0);
	assert_string_equal(p.out, "");
	char args[4096];
	fuse_args_of(&cli, args, sizeof(args));
	assert_null(strstr(args, "noatime"));
	assert_null(strstr(args, "x-systemd"));
	assert_null(strstr(args, "rw,"));
	assert_non_null(strstr(args, "fsname=data"));
	assert_non_null(strstr(args, "subtype=cells"));
	assert_non_null(strstr(args, "allow_other"));
	assert_null(strstr(args, "subtype=rankfs")); /* the user's wins */
	assert_null(strstr(args, "fsname=x.h5"));
	assert_int_equal(cli.max_threads_given, 0);
	rfs_opts_free(&cli);
}

static void test_fsname_commas_escaped(void **state)
{
	(void)state;
	/* libfuse splits -o values at commas: the source's are escaped. */
	char *argv[] = { "rankfs", "no,such\\file.h5", mnt, NULL };
	struct rfs_cli cli;
	struct parsed p;
	parse(argv, 2, &cli, &p);
	assert_int_equal(p.rc, 0);
	char args[4096];
	fuse_args_of(&cli, args, sizeof(args));
	assert_non_null(strstr(args, "fsname=no\\,such\\\\file.h5"));
	rfs_opts_free(&cli);
}

static void test_log_file_both_spellings(void **state)
{
	(void)state;
	char *argv[] = { "rankfs", "--log-file=/var/log/r.log", "x.h5", mnt,
			 NULL };
	struct rfs_cli cli;
	struct parsed p;
	parse(argv, 2, &cli, &p);
	assert_int_equal(p.rc, 0);
	assert_string_equal(cli.config.log_file, "/var/log/r.log");
	rfs_opts_free(&cli);
	char *argv2[] = { "rankfs", "-o", "log_file=/tmp/r2.log",
			  "x.h5",   mnt,  NULL };
	parse(argv2, 2, &cli, &p);
	assert_int_equal(p.rc, 0);
	assert_string_equal(cli.config.log_file, "/tmp/r2.log");
	rfs_opts_free(&cli);
}

/* op_init must repeat libfuse's max_read (the last one given), or
 * libfuse ends the session at INIT. */
static void test_max_read_kept_for_init(void **state)
{
	(void)state;
	struct rfs_cli cli;
	struct parsed p;
	char *none[] = { "rankfs", "x.h5", mnt, NULL };
	parse(none, 2, &cli, &p);
	assert_int_equal(p.rc, 0);
	assert_int_equal(cli.max_read, 0);
	rfs_opts_free(&cli);
	char *two[] = { "rankfs", "-o", "max_read=65536,max_read=4096",
			"x.h5",	  mnt,	NULL };
	parse(two, 2, &cli, &p);
	assert_int_equal(p.rc, 0);
	assert_int_equal(cli.max_read, 4096);
	char args[4096];
	fuse_args_of(&cli, args, sizeof(args));
	assert_non_null(strstr(args, "max_read=4096"));
	rfs_opts_free(&cli);
}

static void test_help_and_version_print_and_stop(void **state)
{
	(void)state;
	struct rfs_cli cli;
	struct parsed p;
	char *help[] = { "rankfs", "--help", NULL };
	parse(help, 1, &cli, &p);
	assert_int_equal(p.rc, 1);
	assert_non_null(strstr(p.out, "usage: rankfs [options] SOURCE... "
				      "MOUNTPOINT"));
	assert_non_null(strstr(p.out, "world_size"));
	assert_non_null(strstr(p.out, "max_threads"));
	rfs_opts_free(&cli);
	char *version[] = { "rankfs", "-V", NULL };
	parse(version, 1, &cli, &p);
	assert_int_equal(p.rc, 1);
	assert_true(strncmp(p.out, "rankfs ", 7) == 0);
	assert_non_null(strstr(p.out, "(libfuse 3."));
	rfs_opts_free(&cli);
}

/* Each bad command line: parse fails, and its one line on stderr holds
 * what names the culprit. */
static void expect_error(char **argv, const char *culprit)
{
	struct rfs_cli cli;
	struct parsed p;
	parse(argv, 2, &cli, &p);
	if (p.rc != -1 || !strstr(p.out, culprit))
		fail_msg("%s %s: rc %d, stderr \"%s\", expected \"%s\"",
			 argv[1] ? argv[1] : "",
			 argv[1] && argv[2] ? argv[2] : "", p.rc, p.out,
			 culprit);
	assert_true(strncmp(p.out, "rankfs: ", 8) == 0);
	rfs_opts_free(&cli);
}

static void test_bad_command_lines_name_the_culprit(void **state)
{
	(void)state;
	int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	close(fd);
	fd = open(under, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	close(fd);

	char *unknown[] = { "rankfs", "-o", "bogus=1", "x.h5", mnt, NULL };
	expect_error(unknown, "unknown option 'bogus'; rankfs's options: ");
	expect_error(unknown, "world_size");
	expect_error(unknown, "libfuse's: allow_other");
	char *dash[] = { "rankfs", "--frobnicate", "x.h5", mnt, NULL };
	expect_error(dash, "unknown option '--frobnicate'; rankfs takes -f");
	char *ours[] = { "rankfs", "-o", "world_size=0", "x.h5", mnt, NULL };
	expect_error(ours, "option world_size=0: expected");
	char *threads[] = { "rankfs", "-o", "max_threads=0", "x.h5", mnt, NULL };
	expect_error(threads, "option max_threads=0: expected an integer "
			      "from 1 to 1024");
	char *idle[] = { "rankfs", "-o", "max_idle_threads=-1",
			 "x.h5",   mnt,	 NULL };
	expect_error(idle, "option max_idle_threads=-1: expected an integer "
			   "from 0 to 1024");
	char *flag[] = { "rankfs", "-o", "allow_other=yes", "x.h5", mnt, NULL };
	expect_error(flag, "option allow_other=yes: allow_other takes no "
			   "value");
	char *read[] = { "rankfs", "-o", "max_read=0", "x.h5", mnt, NULL };
	expect_error(read, "option max_read=0: expected an integer from 1");
	char *name[] = { "rankfs", "-o", "fsname=", "x.h5", mnt, NULL };
	expect_error(name, "option fsname=: expected a name of 1 to 1024");
	char *none[] = { "rankfs", NULL };
	expect_error(none, "missing SOURCE and MOUNTPOINT");
	char *one[] = { "rankfs", "x.h5", NULL };
	expect_error(one, "missing MOUNTPOINT");
	char *gone[] = { "rankfs", "x.h5", "/no/such/dir", NULL };
	expect_error(gone, "mountpoint /no/such/dir: No such file");
	char *not_dir[] = { "rankfs", "x.h5", file, NULL };
	expect_error(not_dir, "not a directory");
	char *hidden[] = { "rankfs", under, mnt, NULL };
	expect_error(hidden, "lies under it");
	char *log[] = { "rankfs", "--log-file=", "x.h5", mnt, NULL };
	expect_error(log, "rankfs: --log-file: ");
	/* A space after a comma, quoted or not: not "unknown option ''". */
	char *quoted[] = { "rankfs", "-o", "world_size=2, batch_size=64",
			   "x.h5",   mnt,  NULL };
	expect_error(quoted, "option ' batch_size=64': a space after a comma");
	char *split[] = {
		"rankfs", "-o", "world_size=2,", "batch_size=64", "x.h5",
		mnt,	  NULL
	};
	expect_error(split, "-o world_size=2, ends with a comma, and "
			    "'batch_size=64' after it is an argument of its "
			    "own");
	char *joined[] = { "rankfs",
			   "-oseed=1",
			   "-oworld_size=2,",
			   "batch_size=64",
			   "x.h5",
			   mnt,
			   NULL };
	expect_error(joined, "-o world_size=2,batch_size=64)");
	char *twice[] = { "rankfs", "-o", "seed=1,,world_size=2",
			  "x.h5",   mnt,  NULL };
	expect_error(twice, "-o seed=1,,world_size=2: an empty option");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sources_mountpoint_and_options),
		cmocka_unit_test(test_mount_words_dropped_and_names_kept),
		cmocka_unit_test(test_fsname_commas_escaped),
		cmocka_unit_test(test_log_file_both_spellings),
		cmocka_unit_test(test_max_read_kept_for_init),
		cmocka_unit_test(test_help_and_version_print_and_stop),
		cmocka_unit_test(test_bad_command_lines_name_the_culprit),
	};
	return cmocka_run_group_tests(tests, make_mountpoint,
				      remove_mountpoint);
}
