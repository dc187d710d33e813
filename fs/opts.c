/* SPDX-License-Identifier: MIT */
#include "opts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/buf.h"
#include "core/log.h"
#include "core/mountopt.h"

enum { KEY_HELP, KEY_VERSION, KEY_LOG_FILE };

static const struct fuse_opt templates[] = {
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	FUSE_OPT_KEY("--log-file=", KEY_LOG_FILE),
	FUSE_OPT_END
};

struct parse_state {
	struct rfs_cli *cli;
	int argc;
	char **argv; /* the command line as given, for errors */
	int action; /* 1: help or version printed */
	int has_fsname, has_subtype;
};

static void usage(FILE *out)
{
	fprintf(out, "usage: rankfs [options] SOURCE... MOUNTPOINT\n");
}

static void print_help(void)
{
	struct rfs_buf b = { 0 };
	usage(stdout);
	printf("\nServes HDF5 and zarr data (.h5ad X, an AnnData zarr store "
	       "or annbatch\ncollection, or -o dataset=/PATH; one source, "
	       "several, or a directory of\n*.h5ad/*.h5/*.zarr) as "
	       "per-epoch, per-rank batch files:\n"
	       "MOUNTPOINT/epoch/E/rank/R/batch/NNNNNN.npy\n\n"
	       "rankfs options:\n");
	rfs_config_render_help(&b);
	if (!b.failed && b.data)
		fputs(b.data, stdout);
	rfs_buf_free(&b);
	/* libfuse's fuse_cmdline_help() would show its own thread defaults
	 * (10 workers, idle ones unbounded as -1), not rankfs's. */
	printf("\nFUSE options:\n"
	       "    -d   -o debug          libfuse's request trace (implies "
	       "-f)\n"
	       "    -f                     stay in the foreground\n"
	       "    -s                     one handler thread\n"
	       "    --log-file=PATH        the same as -o log_file=PATH\n"
	       "    -o clone_fd            one /dev/fuse descriptor per "
	       "worker thread\n"
	       "    -o max_threads=N       worker threads, 1 to 1024 "
	       "(default: 4 x world_size\n"
	       "                           + 4, from 10 to 64)\n"
	       "    -o max_idle_threads=N  idle worker threads kept, 0 to "
	       "1024 (default:\n"
	       "                           all of them)\n"
	       "    -o max_read=N          largest read request, in bytes\n"
	       "    -o fsname=NAME         the source shown by mount and df "
	       "(default: the\n"
	       "                           first SOURCE's absolute path)\n"
	       "    -o subtype=NAME        the type shown as fuse.NAME "
	       "(default: rankfs)\n"
	       "    -o default_permissions the kernel checks file modes "
	       "(always on)\n"
	       "    -o ro                  read-only (always on)\n");
	fuse_lowlevel_help();
	printf("\nSee rankfs(1) and docs/usage.md.\n");
}

/* The first -o argument holding an empty option, and the argument after
 * it (NULL where none): libfuse hands proc one option at a time, without
 * the list it came from. */
static void empty_option_list(const struct parse_state *st, const char **list,
			      const char **next)
{
	*list = *next = NULL;
	for (int i = 1; i < st->argc && strcmp(st->argv[i], "--") != 0; i++) {
		const char *l;
		if (strcmp(st->argv[i], "-o") == 0 && i + 1 < st->argc)
			l = st->argv[++i];
		else if (strncmp(st->argv[i], "-o", 2) == 0)
			l = st->argv[i] + 2;
		else
			continue;
		if (rfs_mountopt_list_has_empty(l)) {
			*list = l;
			*next = i + 1 < st->argc ? st->argv[i + 1] : NULL;
			return;
		}
	}
}

static int take_option(struct parse_state *st, const char *arg)
{
	char key[64];
	const char *list = NULL, *next = NULL;
	struct rfs_buf msg = { 0 };
	if (!*arg)
		empty_option_list(st, &list, &next);
	const char *eq = strchr(arg, '=');
	int rc = rfs_mountopt_take(&st->cli->config, "rankfs", arg, list, next,
				   key, &msg);
	/* One line, "rankfs: ...\n", said again with the option's control
	 * characters escaped: the option is the user's. */
	if (rc < 0 && msg.data && !msg.failed) {
		msg.data[strlen(msg.data) - 1] = '\0';
		rfs_log_say("%s", msg.data + strlen("rankfs: "));
	} else if (rc < 0)
		rfs_log_say("out of memory");
	rfs_buf_free(&msg);
	if (rc == 1) { /* libfuse's: keep */
		st->has_fsname |= strcmp(key, "fsname") == 0;
		st->has_subtype |= strcmp(key, "subtype") == 0;
		st->cli->max_threads_given |= strcmp(key, "max_threads") == 0;
		/* Checked above: 1 .. UINT32_MAX. libfuse keeps the last. */
		if (strcmp(key, "max_read") == 0)
			st->cli->max_read = (unsigned)strtoul(eq + 1, NULL, 10);
	}
	return rc;
}

static int proc(void *data, const char *arg, int key, struct fuse_args *out)
{
	(void)out;
	struct parse_state *st = data;
	char err[256];
	switch (key) {
	case KEY_HELP:
		print_help();
		st->action = 1;
		return 0;
	case KEY_VERSION:
		printf("rankfs %s (libfuse %s)\n", RANKFS_VERSION,
		       fuse_pkgversion());
		st->action = 1;
		return 0;
	case KEY_LOG_FILE: /* --log-file=PATH, same as -o log_file=PATH */
		if (rfs_config_set(&st->cli->config, "log_file",
				   arg + strlen("--log-file="), err,
				   sizeof(err)) != 0) {
			rfs_log_say("--log-file: %s", err);
			return -1;
		}
		return 0;
	case FUSE_OPT_KEY_NONOPT: {
		/* SOURCE... MOUNTPOINT: the last one is known at the end. */
		char **args = realloc(st->cli->sources,
				      (st->cli->nsources + 1) * sizeof(char *));
		if (!args)
			return -1;
		st->cli->sources = args;
		return (args[st->cli->nsources] = strdup(arg)) ?
			       (st->cli->nsources++, 0) :
			       -1;
	}
	case FUSE_OPT_KEY_OPT:
		if (strcmp(arg, "-f") == 0 || strcmp(arg, "-d") == 0 ||
		    strcmp(arg, "-s") == 0)
			return 1; /* for fuse_parse_cmdline */
		if (arg[0] == '-') {
			rfs_log_say(
				"unknown option '%s'; rankfs takes -f, -d, -s, -o OPTION[,OPTION...], --log-file=PATH, -h, -V",
				arg);
			return -1;
		}
		return take_option(st, arg);
	default:
		return 1;
	}
}

/* libfuse splits -o values at commas; a backslash escapes one. */
static char *escape_option_value(const char *s)
{
	char *out = malloc(2 * strlen(s) + 1), *p = out;
	if (!out)
		return NULL;
	for (; *s; s++) {
		if (*s == ',' || *s == '\\')
			*p++ = '\\';
		*p++ = *s;
	}
	*p = '\0';
	return out;
}

/* The mountpoint, made absolute and real as libfuse's own command line
 * parser makes it: the daemon leaves the working directory (fusermount3
 * would unmount a relative one from "/"), fusermount3 refuses a symbolic
 * link, and "m/" names the mount itself, which nothing may look up
 * before the loop serves (main.c). And no source may lie under it: the
 * mount would hide the file it reads. */
static int resolve_mountpoint(struct rfs_cli *cli)
{
	struct stat st;
	char *real = realpath(cli->mountpoint, NULL);
	if (!real || stat(real, &st) != 0) {
		rfs_log_say("mountpoint %s: %s", cli->mountpoint,
			    strerror(errno));
		goto fail;
	}
	if (!S_ISDIR(st.st_mode)) {
		rfs_log_say("mountpoint %s: not a directory", cli->mountpoint);
		goto fail;
	}
	size_t len = strlen(real);
	for (size_t i = 0; i < cli->nsources; i++) {
		char *src = realpath(cli->sources[i], NULL);
		int hidden = src && strncmp(src, real, len) == 0 &&
			     (src[len] == '/' || src[len] == '\0' ||
			      strcmp(real, "/") == 0);
		free(src);
		if (hidden) {
			rfs_log_say(
				"mountpoint %s: source %s lies under it, and the mount would hide it",
				cli->mountpoint, cli->sources[i]);
			goto fail;
		}
	}
	free(cli->mountpoint);
	cli->mountpoint = real;
	return 0;
fail:
	free(real);
	return -1;
}

/* Options every rankfs mount gets: read-only, permissions checked by the
 * kernel from our 0444/0555 modes, named after its source and of subtype
 * rankfs unless told otherwise, unmounted by fusermount3 if the daemon
 * dies. */
static int add_fixed_options(struct rfs_cli *cli, int has_fsname,
			     int has_subtype)
{
	/* Absolute, so mount(8) and df show where the data lives: the first
	 * SOURCE names a mount of several. */
	char *real = realpath(cli->sources[0], NULL);
	char *value = escape_option_value(real ? real : cli->sources[0]);
	char *opt = NULL;
	int rc = -1;
	free(real);
	if (!value)
		return -1;
	if (asprintf(&opt, "-oro,default_permissions,auto_unmount%s%s%s",
		     has_subtype ? "" : ",subtype=rankfs",
		     has_fsname ? "" : ",fsname=", has_fsname ? "" : value) < 0)
		opt = NULL;
	if (opt)
		rc = fuse_opt_add_arg(&cli->args, opt);
	free(opt);
	free(value);
	return rc;
}

int rfs_opts_parse(int argc, char *argv[], struct rfs_cli *cli)
{
	struct parse_state st = { .cli = cli, .argc = argc, .argv = argv };
	memset(cli, 0, sizeof(*cli));
	rfs_config_init(&cli->config);
	cli->args = (struct fuse_args)FUSE_ARGS_INIT(argc, argv);

	/* libfuse would say "fuse: missing argument after `-o'" (after
	 * "--", "-o" is a name). */
	int named = 0;
	for (int i = 1; i < argc - 1; i++)
		named |= strcmp(argv[i], "--") == 0;
	if (argc > 1 && !named && strcmp(argv[argc - 1], "-o") == 0) {
		rfs_log_say("-o needs a value: -o OPTION[,OPTION...]");
		return -1;
	}
	if (fuse_opt_parse(&cli->args, &st, templates, proc) != 0)
		return -1;
	if (st.action) /* help or version, written only if all of it was */
		return rfs_buf_flush_stdout("rankfs") == 0 ? 1 : -1;
	if (fuse_parse_cmdline(&cli->args, &cli->fuse) != 0)
		return -1;
	if (cli->nsources < 2) {
		rfs_log_say("missing %s", cli->nsources ?
						  "MOUNTPOINT" :
						  "SOURCE and MOUNTPOINT");
		usage(stderr);
		return -1;
	}
	cli->mountpoint = cli->sources[--cli->nsources];
	if (resolve_mountpoint(cli) != 0)
		return -1;
	if (add_fixed_options(cli, st.has_fsname, st.has_subtype) != 0) {
		rfs_log_say("out of memory");
		return -1;
	}
	return 0;
}

void rfs_opts_free(struct rfs_cli *cli)
{
	fuse_opt_free_args(&cli->args);
	free(cli->fuse.mountpoint);
	rfs_buf_free_strings(cli->sources, cli->nsources);
	free(cli->mountpoint);
	rfs_config_free(&cli->config);
}
