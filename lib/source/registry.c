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
#define NBACKENDS (sizeof(backends) / sizeof(backends[0]))

int rfs_source_backend_of(const char *path,
			  const struct rfs_source_backend **out, char *err,
			  size_t errlen)
{
	struct stat st;
	int rc = stat(path, &st) == 0 ? 0 : -errno;
	for (size_t i = 0; i < NBACKENDS && rc == 0; i++) {
		*out = backends[i];
		rc = backends[i]->probe(path, &st);
		if (rc > 0)
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
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
		return 0;
	for (size_t i = 0; i < NBACKENDS && !yes; i++)
		yes = backends[i]->probe(dir, &st) > 0;
	return yes;
}

int rfs_source_members(const char *path, char ***members, size_t *n, char *err,
		       size_t errlen)
{
	*members = NULL;
	*n = 0;
	for (size_t i = 0; i < NBACKENDS; i++) {
		int rc = backends[i]->members ?
				 backends[i]->members(path, members, n, err,
						      errlen) :
				 0;
		if (rc != 0)
			return rc;
	}
	return 0;
}

void rfs_source_opening(void)
{
	for (size_t i = 0; i < NBACKENDS; i++)
		if (backends[i]->opening)
			backends[i]->opening();
}

void rfs_source_opened(void)
{
	for (size_t i = 0; i < NBACKENDS; i++)
		if (backends[i]->opened)
			backends[i]->opened();
}
