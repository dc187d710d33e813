/* SPDX-License-Identifier: MIT */
/*
 * The formats rankfs reads: the one file that names the backends. Each
 * probes a path (a signature, a store's marker files) and the first that
 * claims it opens it; a new format is a folder and one line in FORMATS.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "source/backend.h"

#define FORMATS(X) X(hdf5) X(zarr)

#define DECLARE(f) extern const struct rfs_source_backend rfs_##f##_backend;
#define ENTRY(f) &rfs_##f##_backend,
FORMATS(DECLARE)
static const struct rfs_source_backend *const backends[] = { FORMATS(ENTRY) };
#define N (sizeof(backends) / sizeof(*backends))

int rfs_source_backend_of(const char *path,
			  const struct rfs_source_backend **out, char *err,
			  size_t errlen)
{
	struct stat st;
	int rc = stat(path, &st) == 0 ? 0 : -errno;
	for (size_t i = 0; i < N && rc == 0; i++) {
		*out = backends[i];
		if ((rc = backends[i]->probe(path, &st)) > 0)
			return 0;
	}
	if (rc < 0)
		snprintf(err, errlen, "%s: %s", path, strerror(-rc));
	else if (S_ISDIR(st.st_mode))
		snprintf(err, errlen,
			 "%s: not a regular file, nor a zarr store (a "
			 "directory without .zgroup, .zarray, .zmetadata or "
			 "zarr.json)",
			 path);
	else
		snprintf(err, errlen, "%s: not %s", path,
			 S_ISREG(st.st_mode) ? "an HDF5 file" :
					       "a regular file");
	return rc < 0 ? rc : -EINVAL;
}

int rfs_source_is_store(const char *dir)
{
	struct stat st;
	int yes = 0;
	if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
		for (size_t i = 0; i < N && !yes; i++)
			yes = backends[i]->probe(dir, &st) > 0;
	return yes;
}

int rfs_source_members(const char *path, char ***members, size_t *n, char *err,
		       size_t errlen)
{
	int rc = 0;
	*members = NULL;
	*n = 0;
	for (size_t i = 0; i < N && rc == 0; i++)
		if (backends[i]->members)
			rc = backends[i]->members(path, members, n, err,
						  errlen);
	return rc;
}
