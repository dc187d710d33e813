/* SPDX-License-Identifier: MIT */
/*
 * Source arguments that are directories: a zarr store is one source,
 * unless it is an annbatch collection (its root's attribute
 * encoding-type is "annbatch-preshuffled"): then its AnnData stores
 * dataset_0, dataset_1, ... are the sources, in numeric order, one row
 * space as the collection's writer laid them out.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "source/zarr/zarr.h"

struct member {
	unsigned long long n;
	char *path;
};

static int cmp_member(const void *a, const void *b)
{
	const struct member *x = a, *y = b;
	return (x->n > y->n) - (x->n < y->n);
}

/* dataset_N, N decimal without leading zeros. */
static int member_number(const char *name, unsigned long long *n)
{
	const char *d = name + 8;
	char *end;
	if (strncmp(name, "dataset_", 8) != 0 || !*d || (d[0] == '0' && d[1]))
		return 0;
	*n = strtoull(d, &end, 10);
	return *end == '\0' && d[0] >= '0' && d[0] <= '9';
}

static int is_collection(const char *dir, char *err, size_t errlen)
{
	struct rfs_zarr_store st;
	json_t *attrs;
	int rc = rfs_zarr_store_open(dir, &st, err, errlen);
	if (rc != 0)
		return rc;
	int kind = rfs_zarr_node(&st, "", NULL, &attrs, NULL, err, errlen);
	const char *enc = rfs_zarr_attr_string(attrs, "encoding-type");
	int yes = kind == 2 && enc && strcmp(enc, "annbatch-preshuffled") == 0;
	json_decref(attrs);
	rfs_zarr_store_close(&st);
	return kind < 0 ? kind : yes;
}

int rfs_zarr_members(const char *path, char ***members, size_t *count,
		     char *err, size_t errlen)
{
	*members = NULL;
	*count = 0;
	int rc = is_collection(path, err, errlen);
	if (rc <= 0)
		return rc;
	DIR *d = opendir(path);
	if (!d) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -errno;
	}
	struct member *m = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	rc = 0;
	while (rc == 0 && (e = readdir(d))) {
		unsigned long long k;
		if (!member_number(e->d_name, &k))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 8;
			void *p = realloc(m, cap * sizeof(*m));
			if (!p) {
				rc = -ENOMEM;
				break;
			}
			m = p;
		}
		if (asprintf(&m[n].path, "%s/%s", path, e->d_name) < 0) {
			rc = -ENOMEM;
			break;
		}
		m[n++].n = k;
	}
	closedir(d);
	if (rc == 0 && n == 0) {
		snprintf(err, errlen,
			 "%s: an annbatch collection without dataset_N "
			 "stores",
			 path);
		rc = -EINVAL;
	}
	char **out = rc == 0 ? calloc(n, sizeof(*out)) : NULL;
	if (rc == 0 && !out)
		rc = -ENOMEM;
	if (rc == 0)
		qsort(m, n, sizeof(*m), cmp_member);
	for (size_t i = 0; i < n; i++) {
		if (rc == 0)
			out[i] = m[i].path;
		else
			free(m[i].path);
	}
	free(m);
	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	if (rc != 0)
		return rc;
	*members = out;
	*count = n;
	return 1;
}
