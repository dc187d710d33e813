/* SPDX-License-Identifier: MIT */
/*
 * rankfs-cat: any file of a mount's namespace on stdout, without FUSE
 * (like squashfuse_extract).
 *
 *   rankfs-cat [-o OPTIONS] SOURCE... PATH
 *
 * The command line is a mount's with PATH, relative to the mount's root,
 * in place of MOUNTPOINT: the same -o options (rankfs's through
 * rfs_config_set(), libfuse's and mount(8)'s words checked as a mount
 * checks them and then ignored), the same sources, the same view
 * (lib/serve/view.c) and the same name parser (lib/serve/inode.c). So its bytes are
 * what a mount serves at PATH: a second opinion for tests, and a batch
 * at hand where FUSE is not.
 *
 * Prefetch never changes bytes, and nothing here would ever read ahead,
 * so the view is made with prefetch=0 (no threads) for every file except
 * config.json and stats.json, which show the prefetch depth and must
 * read as a mount's. stats.json is a fresh mount's: nothing served yet.
 *
 * Exit status: 0 the file was written; 1 bad options or sources, a
 * failed read or write; 2 bad usage, or PATH names no file of the
 * namespace (ENOENT, a directory).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/buf.h"
#include "serve/cache.h"
#include "core/config.h"
#include "serve/inode.h"
#include "core/mountopt.h"
#include "serve/view.h"

#define EXIT_PATH 2
/* root / epoch / E / rank / R / kind / file, and room to spare. */
#define DEPTH_MAX 8

static int usage(FILE *out)
{
	fprintf(out, "usage: rankfs-cat [-o OPTIONS] SOURCE... PATH\n");
	return EXIT_PATH;
}

static void print_help(void)
{
	struct rfs_buf b = { 0 };
	usage(stdout);
	printf("\nWrites the file PATH (relative to the mount's root, e.g. "
	       "epoch/3/rank/1/batch/000042.npy)\nof the mount "
	       "'rankfs [-o OPTIONS] SOURCE... MOUNTPOINT' to stdout, "
	       "without FUSE.\nlibfuse's options, mount(8)'s words, -f, -d "
	       "and -s are checked as a mount\nchecks them, then ignored.\n\n"
	       "rankfs options:\n");
	rfs_config_render_help(&b);
	if (!b.failed && b.data)
		fputs(b.data, stdout);
	rfs_buf_free(&b);
	printf("\nExit status: 0 written; 1 bad options or sources, a failed "
	       "read or write;\n2 bad usage, or PATH is no file of the "
	       "mount.\nSee rankfs(1) and docs/usage.md.\n");
}

/* One option, "key" or "key=value", as the mount's opts.c takes it;
 * list is the -o argument it came from, next the argument after it. */
static int take_option(struct rfs_config *c, const char *arg, const char *list,
		       const char *next)
{
	char key[64];
	struct rfs_buf msg = { 0 };
	int rc = rfs_mountopt_take(c, "rankfs-cat", arg, list, next, key, &msg);
	if (rc < 0)
		fputs(msg.data && !msg.failed ? msg.data :
						"rankfs-cat: out of memory\n",
		      stderr);
	rfs_buf_free(&msg);
	return rc < 0 ? -1 : 0;
}

/* An -o group split as libfuse splits it: at commas, a backslash
 * escaping the next character, "\ooo" an octal byte. given is the
 * argument and next the one after it (NULL: none), for errors. */
static int take_options(struct rfs_config *c, const char *given,
			const char *next)
{
	char *list = strdup(given);
	if (!list)
		return -1;
	int rc = 0;
	char *s = list, *d = list, *opt = list;
	for (;; s++) {
		if (*s == ',' || *s == '\0') {
			int end = *s == '\0';
			*d = '\0';
			/* An empty one too, as the mount refuses it. */
			rc = take_option(c, opt, given, next);
			if (rc != 0 || end)
				break;
			opt = d = s + 1;
		} else if (s[0] == '\\' && s[1] != '\0') {
			s++;
			if (s[0] >= '0' && s[0] <= '3' && s[1] >= '0' &&
			    s[1] <= '7' && s[2] >= '0' && s[2] <= '7') {
				*d++ = (char)((s[0] - '0') << 6 |
					      (s[1] - '0') << 3 | (s[2] - '0'));
				s += 2;
			} else {
				*d++ = *s;
			}
		} else {
			*d++ = *s;
		}
	}
	free(list);
	return rc;
}

/* The node at path, looked up one component at a time from the root as
 * the kernel would: "" and "." stay, ".." goes up (not above the root),
 * and nothing, not even a trailing "/", follows a file. On failure
 * *failed_at is the length of path's prefix that failed.
 * @return 0, or rfs_inode_lookup()'s error. */
static int resolve(const struct rfs_inode_space *s, const char *path,
		   struct rfs_node *out, size_t *failed_at)
{
	struct rfs_node stack[DEPTH_MAX] = { { .type = RFS_NODE_ROOT } };
	size_t depth = 0;
	const char *p = path;
	for (;;) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);
		char name[256];
		int rc = 0;
		*failed_at = (size_t)(p - path) + len;
		if (len >= sizeof(name)) {
			rc = -ENAMETOOLONG;
		} else if (len == 2 && p[0] == '.' && p[1] == '.') {
			if (depth == 0)
				rc = -ENOENT; /* out of the mount */
			else
				depth--;
		} else if (len && !(len == 1 && p[0] == '.')) {
			memcpy(name, p, len);
			name[len] = '\0';
			rc = depth + 1 < DEPTH_MAX ?
				     rfs_inode_lookup(s, &stack[depth], name,
						      &stack[depth + 1]) :
				     -ENOENT;
			if (rc == 0)
				depth++;
		}
		if (rc == 0 && slash && !rfs_inode_is_dir(&stack[depth]))
			rc = -ENOTDIR;
		if (rc != 0)
			return rc;
		if (!slash)
			break;
		p = slash + 1;
	}
	*out = stack[depth];
	return 0;
}

static int write_all(const void *data, size_t len)
{
	const char *p = data;
	while (len) {
		ssize_t n = write(STDOUT_FILENO, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* A batch, index, label or .npz file of an epoch or of a step, checked
 * against the size that lookup reports (st_size). */
static int write_file(struct rfs_view *v, const struct rfs_inode_space *s,
		      const struct rfs_node *n, const char *path)
{
	struct rfs_cache_key key = { .rank = n->rank, .kind = n->kind };
	struct rfs_cache_entry *e;
	rfs_inode_batch(s, n, &key.epoch, &key.batch);
	uint64_t size;
	int rc = rfs_view_file_size(v, &key, &size);
	if (rc == 0)
		rc = rfs_view_get(v, &key, &e);
	if (rc != 0) {
		fprintf(stderr, "rankfs-cat: %s: %s\n", path, strerror(-rc));
		return 1;
	}
	size_t len = rfs_cache_entry_size(e);
	if (len != size) {
		fprintf(stderr,
			"rankfs-cat: %s: %zu bytes generated, but its size is "
			"%" PRIu64 "\n",
			path, len, size);
		rc = -EIO;
	} else {
		rc = write_all(rfs_cache_entry_data(e), len);
		if (rc != 0)
			fprintf(stderr, "rankfs-cat: writing %s: %s\n", path,
				strerror(-rc));
	}
	rfs_view_put(v, e);
	return rc != 0;
}

/* @return the exit status. */
static int cat(struct rfs_view *v, const struct rfs_config *c, const char *path)
{
	struct rfs_inode_space s;
	struct rfs_node n;
	size_t failed_at = 0, len = 0;
	const char *text = NULL;
	char *stats = NULL;
	int rc;

	uint64_t batches = rfs_view_batches_per_rank(v);
	if (rfs_inode_space_init(&s, c->world_size, rfs_view_kinds(v),
				 rfs_view_has_npz(v), batches,
				 c->epochs) != 0) {
		fprintf(stderr,
			"rankfs-cat: %llu batches per epoch (world_size x "
			"batches per rank) are too many to number every file "
			"of every epoch; raise batch_size\n",
			(unsigned long long)(c->world_size * batches));
		return 1;
	}
	s.var_names = rfs_view_var_names_txt(v, &len) != NULL;
	rc = resolve(&s, path, &n, &failed_at);
	if (rc != 0) {
		fprintf(stderr,
			"rankfs-cat: %.*s: %s (not in the mount's "
			"namespace)\n",
			(int)failed_at, path, strerror(-rc));
		return EXIT_PATH;
	}
	switch (n.type) {
	case RFS_NODE_FILE:
	case RFS_NODE_STEP_FILE:
		return write_file(v, &s, &n, path);
	case RFS_NODE_CONFIG:
		text = rfs_view_config_json(v, &len);
		break;
	case RFS_NODE_DATASET:
		text = rfs_view_dataset_json(v, &len);
		break;
	case RFS_NODE_VAR_NAMES:
		text = rfs_view_var_names_txt(v, &len);
		break;
	case RFS_NODE_STATS:
		if (rfs_view_stats_json(v, &stats, &len) != 0) {
			fprintf(stderr, "rankfs-cat: %s: %s\n", path,
				strerror(ENOMEM));
			return 1;
		}
		text = stats;
		break;
	default:
		fprintf(stderr,
			"rankfs-cat: %s: %s (rankfs-cat writes files)\n", path,
			strerror(EISDIR));
		return EXIT_PATH;
	}
	rc = write_all(text, len);
	if (rc != 0)
		fprintf(stderr, "rankfs-cat: writing %s: %s\n", path,
			strerror(-rc));
	free(stats);
	return rc != 0;
}

/* config.json and stats.json show the prefetch depth: only they need
 * prefetch as given (they are root entries, so their name is the last
 * component; elsewhere the name resolves to nothing). */
static int shows_prefetch(const char *path)
{
	const char *slash = strrchr(path, '/');
	const char *name = slash ? slash + 1 : path;
	return strcmp(name, "config.json") == 0 ||
	       strcmp(name, "stats.json") == 0;
}

int main(int argc, char *argv[])
{
	struct rfs_config c;
	struct rfs_view *v = NULL;
	char **args = calloc((size_t)argc + 1, sizeof(*args));
	char err[1024];
	size_t nargs = 0;
	int status = 1, options_done = 0;

	rfs_config_init(&c);
	if (!args) {
		fprintf(stderr, "rankfs-cat: out of memory\n");
		goto out;
	}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (options_done || a[0] != '-' || a[1] == '\0') {
			args[nargs++] = argv[i];
		} else if (strcmp(a, "--") == 0) {
			options_done = 1;
		} else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			print_help();
			status = rfs_buf_flush_stdout("rankfs-cat") ? 1 : 0;
			goto out;
		} else if (strcmp(a, "-V") == 0 ||
			   strcmp(a, "--version") == 0) {
			printf("rankfs-cat %s\n", RANKFS_VERSION);
			status = rfs_buf_flush_stdout("rankfs-cat") ? 1 : 0;
			goto out;
		} else if (strncmp(a, "-o", 2) == 0) {
			if (a[2] == '\0' && i + 1 == argc) {
				fprintf(stderr,
					"rankfs-cat: -o needs a value\n");
				status = usage(stderr);
				goto out;
			}
			const char *list = a[2] ? a + 2 : argv[++i];
			if (take_options(&c, list,
					 i + 1 < argc ? argv[i + 1] : NULL) !=
			    0)
				goto out;
		} else if (strncmp(a, "--log-file=", 11) == 0) {
			if (rfs_config_set(&c, "log_file", a + 11, err,
					   sizeof(err)) != 0) {
				fprintf(stderr, "rankfs-cat: --log-file: %s\n",
					err);
				goto out;
			}
		} else if (strcmp(a, "-f") != 0 && strcmp(a, "-d") != 0 &&
			   strcmp(a, "-s") != 0) {
			fprintf(stderr,
				"rankfs-cat: unknown option '%s'; rankfs-cat "
				"takes -o OPTION[,OPTION...], -f, -d, -s, "
				"--log-file=PATH, -h, -V\n",
				a);
			goto out;
		}
	}
	if (nargs < 2) {
		fprintf(stderr, "rankfs-cat: missing %s\n",
			nargs ? "PATH" : "SOURCE and PATH");
		status = usage(stderr);
		goto out;
	}
	const char *path = args[--nargs];
	/* Logs go to stderr: this tool writes nothing but stdout. */
	if (!shows_prefetch(path))
		c.prefetch = 0;
	if (rfs_view_create(&c, args, nargs, &v, err, sizeof(err)) != 0) {
		fprintf(stderr, "rankfs-cat: %s\n", err);
		goto out;
	}
	status = cat(v, rfs_view_config(v), path);
out:
	rfs_view_destroy(v);
	rfs_config_free(&c);
	free(args);
	return status;
}
