/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for a zarr store's metadata (lib/source/zarr/zarr_meta.c,
 * lib/source/zarr/zarr_array.c's open, lib/source/zarr/zarr_source.c, lib/source/zarr/zarr_obs.c,
 * lib/source/zarr/zarr_collection.c).
 *
 * Input: byte 0, then one metadata document (JSON text).
 *   bits 0-1: where the document goes: the root's zarr.json (v3, with any
 *             consolidated_metadata inline), the root's .zmetadata (v2
 *             consolidated), the root's .zarray (v2, a lone array), or
 *             the root's zarr.json again
 *   bits 2-3: the dataset asked: automatic, /X, /layers/a, /raw/X
 * The document alone is a whole store (consolidated metadata names every
 * node); no chunk file exists, so arrays read as their fill_value. First
 * rfs_zarr_meta_parse() takes the document (and every node of a
 * consolidated one) as v2 and as v3; then the store is opened as a
 * source, and its rows, obs columns (those the metadata names) and var
 * names read; then as a dataset (lib/source/dataset.c), its var names as a
 * mount serves them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "source/column.h"
#include "source/dataset.h"
#include "core/log.h"
#include "os/memlimit.h"
#include "source/source.h"
#include "source/zarr/zarr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static char root[256];
/* What the sources borrow, as a mount's: the ledger of claims. */
static struct rfs_source_env env;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	rfs_log_set_fd(open("/dev/null", O_WRONLY | O_CLOEXEC));
	/* Watches would only add inotify ids per run; reads check by stat. */
	setenv("RANKFS_FAULT_NO_WATCH", "1", 1);
	/* As a daemon with 1 GiB to use: scripts/fuzz's -malloc_limit_mb,
	 * so that a claim it refuses is no finding, one it lets by is. */
	struct rfs_memlimit limit = { .bytes = UINT64_C(1) << 30 };
	snprintf(limit.where, sizeof(limit.where), "the fuzz target's limit");
	if (rfs_claims_create(&limit, &env.claims) != 0)
		abort();
	/* scripts/fuzz names a scratch directory it removes. */
	const char *scratch = getenv("RANKFS_FUZZ_DIR");
	snprintf(root, sizeof(root), "%s/rfs-fuzz-store-%d",
		 scratch ? scratch : "/dev/shm", getpid());
	mkdir(root, 0755);
	return 0;
}

static void check_meta(const struct rfs_zarr_meta *m)
{
	if (m->ndims < 1 || m->ndims > 2 || m->chunk[0] == 0 ||
	    m->chunk[1] == 0 || m->inner[0] == 0 || m->inner[1] == 0 ||
	    m->chunk[0] % m->inner[0] || m->chunk[1] % m->inner[1] ||
	    m->pipe.ncomp < 0 || m->pipe.ncomp > RFS_ZARR_COMPS_MAX ||
	    (m->ndims == 1 && m->shape[1] != 1))
		abort();
	if (m->kind == RFS_ZARR_STRING ? m->elem != 0 || !m->pipe.strings :
					 m->elem == 0 || m->elem > 8)
		abort();
	if (m->inner[0] * m->inner[1] * (m->elem ? m->elem : 8) >
	    (UINT64_C(1) << 31))
		abort(); /* a decoded chunk over 2 GiB */
}

static void parse_both(json_t *j)
{
	struct rfs_zarr_meta m;
	char err[512];
	for (int v3 = 0; v3 < 2; v3++) {
		err[0] = '\0';
		int rc = rfs_zarr_meta_parse(j, v3, "fuzz", &m, err,
					     sizeof(err));
		if (rc == 0)
			check_meta(&m);
		else if ((rc != -EINVAL && rc != -ENOTSUP) ||
			 strncmp(err, "fuzz: ", 6) != 0)
			abort(); /* every refusal names the array */
	}
}

static int write_file(const char *path, const void *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	ssize_t w = write(fd, p, n);
	close(fd);
	return w == (ssize_t)n ? 0 : -1;
}

/* Obs columns and 1-D arrays the consolidated metadata names. */
static int column_names(json_t *nodes, int v2, char names[8][300])
{
	const char *k;
	json_t *v;
	int n = 0;
	json_object_foreach(nodes, k, v)
	{
		char name[300];
		size_t len = strlen(k);
		if (n == 8 || len > 250)
			break;
		if (v2) { /* "obs/a/.zarray" -> "obs/a" */
			const char *slash = strrchr(k, '/');
			if (!slash || (strcmp(slash, "/.zarray") != 0 &&
				       strcmp(slash, "/.zgroup") != 0))
				continue;
			len = (size_t)(slash - k);
		}
		if (strncmp(k, "obs/", 4) == 0 && len > 4 &&
		    !memchr(k + 4, '/', len - 4))
			snprintf(name, sizeof(name), "%.*s", (int)(len - 4),
				 k + 4);
		else if (len > 0)
			snprintf(name, sizeof(name), "/%.*s", (int)len, k);
		else
			continue;
		int seen = 0;
		for (int i = 0; i < n; i++)
			seen |= strcmp(names[i], name) == 0;
		if (!seen)
			snprintf(names[n++], 300, "%s", name);
	}
	return n;
}

static void read_source(struct rfs_source *s, json_t *nodes, int v2)
{
	const struct rfs_source_info *in = rfs_source_info(s);
	char err[512];
	int64_t rows[2] = { 0, (int64_t)in->rows - 1 };
	if (in->rows == 0 || in->cols == 0)
		abort(); /* refused at open */
	if (in->sparse) {
		struct rfs_csr csr;
		if (rfs_source_read_csr(s, rows, 2, NULL, &csr) == 0)
			rfs_source_csr_free(&csr);
	} else if (rfs_source_row_bytes(s) <= (1u << 20)) {
		void *dst = malloc(2 * rfs_source_row_bytes(s));
		if (dst)
			(void)rfs_source_read_rows(s, rows, 2, dst);
		free(dst);
	}
	char names[8][300];
	int n = nodes ? column_names(nodes, v2, names) : 0;
	for (int i = 0; i < n; i++) {
		struct rfs_column c;
		if (rfs_source_read_column(s, names[i], &c, err, sizeof(err)) !=
		    0)
			continue;
		if (c.rows != in->rows)
			abort();
		for (uint64_t r = 0; c.kind == RFS_COLUMN_CODES && r < c.rows;
		     r++)
			if (c.codes[r] < -1 ||
			    c.codes[r] >= (int64_t)c.ncategories)
				abort();
		rfs_column_free(&c);
	}
	char **var;
	uint64_t nvar;
	if (rfs_source_read_var_names(s, &var, &nvar, err, sizeof(err)) == 0) {
		if (nvar != in->cols)
			abort();
		for (uint64_t i = 0; i < nvar; i++)
			free(var[i]);
		free(var);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const files[4] = { "zarr.json", ".zmetadata",
					      ".zarray", "zarr.json" };
	static const char *const datasets[4] = { NULL, "/X", "/layers/a",
						 "/raw/X" };
	char path[512], err[512];
	if (size < 1)
		return 0;
	int mode = data[0] & 3;
	const char *dataset = datasets[(data[0] >> 2) & 3];
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/%s", root, files[i]);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/%s", root, files[mode]);
	if (write_file(path, data + 1, size - 1) != 0)
		abort();

	/* The parser alone, on every node the document holds. */
	json_t *j = json_loadb((const char *)data + 1, size - 1,
			       JSON_DECODE_ANY, NULL);
	json_t *nodes = NULL;
	if (json_is_object(j)) {
		parse_both(j);
		nodes = mode == 1 ? json_object_get(j, "metadata") :
				    json_object_get(
					    json_object_get(
						    j, "consolidated_metadata"),
					    "metadata");
		const char *k;
		json_t *v;
		json_object_foreach(nodes, k, v) if (json_is_object(v))
			parse_both(v);
	}

	struct rfs_source *s = NULL;
	err[0] = '\0';
	int rc = rfs_source_open(root, dataset, &env, &s, err, sizeof(err));
	if (rc == 0) {
		read_source(s, json_is_object(nodes) ? nodes : NULL, mode == 1);
		rfs_source_destroy(s);
	} else if (!err[0]) {
		abort(); /* every refusal says why */
	}
	/* The dataset layer over it: var names as a mount serves them. */
	struct rfs_dataset *d = NULL;
	char *paths[1] = { root };
	struct rfs_dataset_join none = { RFS_VARJOIN_NONE, NULL };
	if (rc == 0 &&
	    rfs_dataset_open_joined(paths, 1, dataset, &env, 1u << 20, &none, &d, err,
				    sizeof(err)) == 0) {
		for (uint64_t i = 0; i < rfs_dataset_var_count(d); i++)
			if (!rfs_dataset_var_name(d, i))
				abort();
		rfs_dataset_destroy(d);
	}
	char **members;
	size_t nmembers;
	if (rfs_source_members(root, &members, &nmembers, err, sizeof(err)) ==
	    1) {
		for (size_t i = 0; i < nmembers; i++)
			free(members[i]);
		free(members);
	}
	/* Every claim for the store is given back with it (memlimit.c):
	 * one kept would refuse later inputs' claims, and a mount's. */
	if (rfs_memlimit_claimed(env.claims) != 0)
		abort();
	json_decref(j);
	return 0;
}
