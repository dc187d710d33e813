/* One HDF5 source: open, describe, read rows. The only file that includes
 * <hdf5.h> (STYLE.md convention 7). */
#ifndef RFS_SOURCE_H
#define RFS_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"

struct rfs_source;

struct rfs_source_info {
	const char *path; /* absolute */
	const char *dataset; /* HDF5 path of the rows, e.g. "/X" */
	const char *layout; /* "contiguous", "chunked" or "compact" */
	int ndims; /* 1 (N) or 2 (N x D) */
	uint64_t rows;
	uint64_t cols; /* 1 when ndims == 1 */
	enum rfs_dtype dtype;
	uint64_t fingerprint; /* shape, dtype and sampled rows (view_id) */
	int64_t mtime; /* seconds, of the file when opened */
	int direct; /* rows are read with pread, outside HDF5 */
};

/* Opens path read-only. dataset NULL means automatic: "/X" for AnnData
 * files, an error otherwise. On failure writes one line naming the file and
 * what is wrong to err (no "rankfs:" prefix).
 * @return 0, -ENOENT, -EACCES, -EINVAL (not usable), -ENOTSUP, -ENOMEM. */
int rfs_source_open(const char *path, const char *dataset,
		    struct rfs_source **out, char *err, size_t errlen);

/* Valid until rfs_source_destroy(). */
const struct rfs_source_info *rfs_source_info(const struct rfs_source *s);

/* Bytes of one row. */
size_t rfs_source_row_bytes(const struct rfs_source *s);

/* Reads rows[0..n) (any order, repeats allowed) into dst, row i at
 * dst + i * row_bytes, little-endian. Thread-safe. Failures are logged with
 * file, dataset and rows. @return 0, -EIO, -ENOMEM. */
int rfs_source_read_rows(struct rfs_source *s, const int64_t *rows, size_t n,
			 void *dst);

/* Accepts NULL. */
void rfs_source_destroy(struct rfs_source *s);

#endif
