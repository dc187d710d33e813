/* SPDX-License-Identifier: MIT */
/*
 * rankfs-plan: the sampling plan without FUSE or HDF5 (like
 * squashfuse_extract), as a second opinion for tests and for debugging.
 *
 *   rankfs-plan --rows N [-o OPTIONS] EPOCH RANK BATCH   print row ids
 *   rankfs-plan --rows N [-o OPTIONS] --time [COUNT]      time planning
 *   rankfs-plan --help | --version
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/buf.h"
#include "core/config.h"
#include "core/mountopt.h"
#include "core/parse.h"
#include "plan/plan.h"
#include "plan/rowset.h"
#include "plan/sampler.h"

static void print_usage(FILE *out)
{
	fprintf(out,
		"usage: rankfs-plan --rows N [-o OPTIONS] EPOCH RANK BATCH\n"
		"       rankfs-plan --rows N [-o OPTIONS] --time [COUNT]\n"
		"       rankfs-plan --help | --version\n");
}

static int usage(void)
{
	print_usage(stderr);
	return 2;
}

static void print_help(void)
{
	print_usage(stdout);
	printf("\nPrints the global row ids of batch BATCH of rank RANK in "
	       "epoch EPOCH, one a\nline, as a mount with these options "
	       "serves them in index/NNNNNN.npy, for a\nsource of N rows; "
	       "or, with --time, times planning COUNT batches (100).\n"
	       "Neither FUSE nor HDF5 is involved: partition=file, filter= "
	       "and the weighted\nstrategies need the data (mount it, or "
	       "use rankfs-cat).\n\n"
	       "    --rows N      rows of the source (or --rows=N)\n"
	       "    -o OPTIONS    rankfs's options, comma-separated without "
	       "spaces\n"
	       "    --time        time the planner instead of printing\n"
	       "    -h, --help    this text\n"
	       "    -V, --version the version\n\n"
	       "Exit status: 0 printed; 2 otherwise, with a line on stderr "
	       "saying why.\nSee docs/sampling.md.\n");
}

/* The options of list, an -o argument; next is the argument after it
 * (NULL: none), for errors. */
static int apply_options(struct rfs_config *c, char *list, const char *next)
{
	char err[512];
	/* Refused as a mount refuses them, though strtok would skip it. */
	if (rfs_mountopt_list_has_empty(list) &&
	    rfs_mountopt_explain_space("", list, next, err, sizeof(err))) {
		fprintf(stderr, "rankfs-plan: %s\n", err);
		return -1;
	}
	for (char *save = NULL, *opt = strtok_r(list, ",", &save); opt;
	     opt = strtok_r(NULL, ",", &save)) {
		if (rfs_mountopt_explain_space(opt, NULL, NULL, err,
					       sizeof(err))) {
			fprintf(stderr, "rankfs-plan: %s\n", err);
			return -1;
		}
		char *eq = strchr(opt, '=');
		if (eq)
			*eq = '\0';
		int rc = rfs_config_set(c, opt, eq ? eq + 1 : NULL, err,
					sizeof(err));
		if (rc == -ENOENT)
			snprintf(err, sizeof(err), "unknown option '%s'", opt);
		if (rc != 0) {
			fprintf(stderr, "rankfs-plan: %s\n", err);
			return -1;
		}
	}
	return 0;
}

static int number(const char *s, uint64_t *out)
{
	if (rfs_parse_u64(s, strlen(s), UINT64_MAX, 0, out) != 0) {
		fprintf(stderr, "rankfs-plan: '%s' is not a number\n", s);
		return -1;
	}
	return 0;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Plans COUNT batches, each in a different window so none is cached. */
static int time_plans(struct rfs_planner *p, const struct rfs_config *c,
		      uint64_t rows, uint64_t count)
{
	const struct rfs_layout *l = rfs_plan_layout(p);
	int64_t *out = malloc(c->batch_size * sizeof(*out));
	if (!out)
		return 1;
	uint64_t windows = rfs_plan_sequence_length(p, 0) / l->window;
	double start = now();
	for (uint64_t i = 0; i < count; i++) {
		uint64_t batch = windows ? (i % windows) * c->fetch_factor : 0;
		rfs_plan_batch(p, i, 0, batch, out);
	}
	double per = (now() - start) / (double)count;
	printf("rows=%" PRIu64 " strategy=%s window=%" PRIu64
	       " rows: %.1f us per batch (%" PRIu64 " batches)\n",
	       rows, rfs_config_strategy_name(c->strategy),
	       l->window < rows ? l->window : rows, per * 1e6, count);
	free(out);
	return 0;
}

int main(int argc, char *argv[])
{
	struct rfs_config c;
	struct rfs_planner *p = NULL;
	uint64_t rows = 0, args[3], count = 100;
	int timing = 0, nargs = 0, status = 2;

	rfs_config_init(&c);
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-h") == 0 ||
		    strcmp(argv[i], "--help") == 0) {
			print_help();
			status = 0;
			goto out;
		} else if (strcmp(argv[i], "-V") == 0 ||
			   strcmp(argv[i], "--version") == 0) {
			printf("rankfs-plan %s\n", RANKFS_VERSION);
			status = 0;
			goto out;
		} else if (strcmp(argv[i], "--rows") == 0 && i + 1 < argc) {
			if (number(argv[++i], &rows) != 0)
				goto out;
		} else if (strncmp(argv[i], "--rows=", 7) == 0) {
			if (number(argv[i] + 7, &rows) != 0)
				goto out;
		} else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
			i++;
			if (apply_options(&c, argv[i],
					  i + 1 < argc ? argv[i + 1] : NULL) !=
			    0)
				goto out;
		} else if (strcmp(argv[i], "--time") == 0) {
			timing = 1;
		} else if (argv[i][0] == '-') {
			int valued = strcmp(argv[i], "-o") == 0 ||
				     strcmp(argv[i], "--rows") == 0;
			fprintf(stderr, "rankfs-plan: %s '%s'\n",
				valued ? "a value must follow" :
					 "unknown option",
				argv[i]);
			status = usage();
			goto out;
		} else if (nargs == 3) {
			fprintf(stderr,
				"rankfs-plan: '%s': one argument too many\n",
				argv[i]);
			status = usage();
			goto out;
		} else if (number(argv[i], &args[nargs]) == 0) {
			nargs++;
		} else {
			goto out;
		}
	}
	if (timing && nargs == 1)
		count = args[0];
	const char *why = NULL;
	if (rows == 0)
		why = "--rows N, the source's rows (at least 1), is needed";
	else if (timing && (nargs > 1 || count == 0))
		why = "--time takes one COUNT of at least 1";
	else if (!timing && nargs != 3)
		why = "EPOCH RANK BATCH are needed";
	if (why) {
		fprintf(stderr, "rankfs-plan: %s\n", why);
		status = usage();
		goto out;
	}
	/* Without the data there are no files, filters or weights. */
	if (c.partition == RFS_PARTITION_FILE ||
	    rfs_sampler_draws(c.strategy) || c.filter.count) {
		fprintf(stderr,
			"rankfs-plan: partition=file, filters and "
			"weighted strategies need the data: mount it\n");
		goto out;
	}
	struct rfs_rowset all = { .length = rows };
	if (rfs_plan_create(&c, &all, &p) != 0) {
		fprintf(stderr,
			"rankfs-plan: %" PRIu64
			" rows are fewer than one global batch\n",
			rows);
		goto out;
	}
	if (timing) {
		status = time_plans(p, &c, rows, count);
		goto out;
	}
	const struct rfs_layout *l = rfs_plan_layout(p);
	if (args[0] >= RFS_EPOCHS) {
		fprintf(stderr,
			"rankfs-plan: epoch %" PRIu64
			" out of range [0, 2^31)\n",
			args[0]);
		goto out;
	}
	if (args[1] >= c.world_size) {
		fprintf(stderr,
			"rankfs-plan: rank %" PRIu64
			" out of range [0, %" PRIu64 ") (world_size)\n",
			args[1], c.world_size);
		goto out;
	}
	if (args[2] >= l->batches_per_rank) {
		fprintf(stderr,
			"rankfs-plan: no batch %" PRIu64 " (%" PRIu64
			" batches per rank)\n",
			args[2], l->batches_per_rank);
		goto out;
	}
	uint64_t n = rfs_partition_batch_rows(l, args[2]);
	int64_t *out = malloc(n * sizeof(*out));
	if (!out || rfs_plan_batch(p, args[0], args[1], args[2], out) != 0) {
		free(out);
		goto out;
	}
	for (uint64_t j = 0; j < n; j++)
		printf("%" PRId64 "\n", out[j]);
	free(out);
	status = 0;
out:
	/* Row ids lost to a full disk or a closed stdout are a failure. */
	if (status == 0 && rfs_buf_flush_stdout("rankfs-plan") != 0)
		status = 2;
	rfs_plan_destroy(p);
	rfs_config_free(&c);
	return status;
}
