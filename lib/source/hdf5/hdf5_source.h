/* SPDX-License-Identifier: MIT */
/*
 * The HDF5 backend, shared by its files: hdf5_source.c (open, describe,
 * fingerprint), hdf5_read.c (read paths and row reads),
 * hdf5_checks.c (data outside the file refused; change detection)
 * and hdf5_obs.c (obs columns). These are the only
 * files that include <hdf5.h>.
 *
 * HDF5 1.10's threadsafe build (Debian's) serialises every call behind one
 * global lock, so HDF5 describes the file at mount time and the bytes are
 * read around it wherever the layout allows (hdf5_read.c says how).
 */
#ifndef RFS_SOURCE_HDF5_H
#define RFS_SOURCE_HDF5_H

#include <hdf5.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "os/memlimit.h"
#include "source/io/inflate.h"
#include "source/io/rowmap.h"
#include "source/backend.h"

struct rfs_chunk_cache;

/* More chunks than this are read through HDF5 (the index costs 40 bytes
 * per chunk at mount). */
#define CHUNKS_MAX (UINT64_C(1) << 24)

struct rfs_chunk_loc {
	uint64_t addr; /* file offset of the stored chunk */
	uint64_t size; /* stored bytes */
	unsigned mask; /* filters skipped for this chunk */
};

/* A chunked array whose chunks are read with pread at the addresses
 * HDF5's index gave at mount and decoded by inflate.c, outside HDF5's
 * lock: the chunk cache's loader's (chunks.h), in hdf5_read.c. */
struct hdf5_chunks {
	int fd; /* the source's */
	const char *path, *name; /* for log lines */
	struct rfs_log_limit *log; /* the source's */
	uint64_t chunk_rows, grid_cols;
	size_t elem, chunk_bytes; /* chunk_bytes: decoded */
	struct rfs_pipeline pipeline;
	struct rfs_chunk_loc *locs; /* row-major over the grid */
};
int rfs_hdf5_chunk_load(void *ctx, uint64_t k, size_t at, void *out,
			size_t len);
size_t rfs_hdf5_chunk_scratch(void *ctx, uint64_t k);

/* One HDF5 dataset read as rows: the dense rows, or a CSR's data or
 * indices (1-D: cols 1). */
struct array {
	hid_t dset;
	hid_t mem_type; /* little-endian type the rows are read as */
	char *name; /* HDF5 path, for log lines */
	int ndims;
	uint64_t rows, cols;
	enum rfs_dtype dtype;
	size_t elem, row_bytes;
	const char *layout; /* "contiguous", "chunked", "compact" */
	enum rfs_read_path path; /* LIBRARY, PREAD or CHUNKS */
	uint64_t offset; /* RFS_READ_PREAD: file offset of row 0 */
	/* RFS_READ_PREAD of a chunked array stored unfiltered, when set:
	 * where each chunk's rows are (row r at locs[r / chunk_rows].addr +
	 * r % chunk_rows * row_bytes); offset is then the lowest address. */
	struct rfs_chunk_loc *locs;
	uint64_t chunk_rows;
	struct rfs_rowmap map; /* RFS_READ_PREAD: a mapping, when lent memory */
	uint64_t chunks_id; /* RFS_READ_CHUNKS: in the mount's chunk cache */
	struct hdf5_chunks chunked; /* RFS_READ_CHUNKS: its loader's */
};

struct hdf5_source {
	struct rfs_source base; /* first: the interface's view */
	char *path;
	char *dataset;
	hid_t file;
	int fd; /* read-only: pread and chunk reads */
	int watch; /* rfs_watch_add()'s id for fd, or negative */
	struct rfs_chunk_cache *chunks; /* borrowed, may be NULL */
	struct array x; /* dense rows, or a CSR's data */
	struct array indices; /* CSR only */
	struct stat opened; /* fd's file as it was at open */
	struct rfs_helper *strings; /* env's, may be NULL: hdf5_strings.c */
	atomic_int changed; /* sticky: the file was written after open */
	/* ns, once the file was renamed (0: opened's): hdf5_checks.c */
	_Atomic int64_t ctime_seen;
	atomic_int replaced_logged;
};

/* Error printing off for this thread: rankfs reports errors itself
 * (HDF5's error stack is per thread in threadsafe builds). */
void rfs_hdf5_quiet(void);

/* hdf5_read.c: checks the filters of a's pipeline and picks a's
 * read path. @return 0 or a negative errno with err set. */
int rfs_hdf5_read_filters(struct hdf5_source *s, struct array *a,
			  struct rfs_pipeline *pipe, char *err, size_t errlen);
void rfs_hdf5_choose_read_path(struct hdf5_source *s, struct array *a,
			       const struct rfs_pipeline *pipe);
int rfs_hdf5_read_rows(struct rfs_source *base, const uint64_t *rows, size_t m,
		       unsigned char *const *to);
int rfs_hdf5_read_csr_ranges(struct rfs_source *base,
			     const struct rfs_csr_range *r, size_t n);
size_t rfs_hdf5_row_scratch(const struct rfs_source *base);
void rfs_hdf5_take_share(struct rfs_source *base);

/* hdf5_checks.c */
/* Refuses dataset dset (named what) when its data is not in s's file:
 * reached through an external link, virtual, or in external raw data
 * files. Nothing is read outside a source (and no other file is watched
 * for changes), and h5repack makes a copy that holds it. @return 0 or
 * -ENOTSUP with err naming the dataset and the h5repack to run. */
int rfs_hdf5_refuse_outside(const struct hdf5_source *s, hid_t dset,
			    const char *what, char *err, size_t errlen);
int rfs_hdf5_check_unchanged(struct rfs_source *base);
enum rfs_source_state rfs_hdf5_state(struct rfs_source *base);
int rfs_hdf5_reads_file(const struct rfs_source *base, dev_t dev, ino_t ino);

/* hdf5_strings.c: n variable-length strings of a dataset (attr NULL)
 * or of obj's attribute named attr, in s's file, stored in cset, read
 * by the program rankfs-h5strings (a damaged global heap crashes or
 * hangs HDF5). *out: n heap strings. @return 0, -EIO (the read failed,
 * crashed or hung: logged), -ENOMEM. */
int rfs_hdf5_read_vlen(const struct hdf5_source *s, hid_t obj, const char *attr,
		       H5T_cset_t cset, uint64_t n, char ***out);

/* What rfs_hdf5_read_vlen() asks rankfs-h5strings (h5strings_main.c)
 * for, with the file's descriptor. Answered with an int, 0 or 1 (not
 * read), then if 0 the n strings, each its length (uint64_t), bytes. */
/* h5strings_main.c: serves them on descriptor 3 until it closes. */
int rfs_hdf5_strings_serve(void);
struct h5strings_request {
	uint64_t n;
	haddr_t addr; /* of the object's header */
	int32_t cset;
	int32_t attr; /* 1: the object's attribute named name */
	uint32_t limit; /* seconds for the read (open_timeout), 0: none */
	char name[256];
};

/* hdf5_obs.c */
int rfs_hdf5_read_column(struct rfs_source *base, const char *path,
			 const char *what, enum rfs_memlimit_as as,
			 struct rfs_column *out, char *err, size_t errlen);

#endif
