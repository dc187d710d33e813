/* SPDX-License-Identifier: MIT */
/* Rows of a chunked dataset read without HDF5: each chunk is read with
 * pread at the address HDF5's index gave at mount time, decoded
 * (inflate.c) outside HDF5's global lock, and kept in a bounded LRU of
 * decoded chunks shared by every dataset of a mount, so fetches that need
 * the same chunk decode it once (cache.c's shared generation).
 *
 * hdf5_read.c describes each dataset (shape, chunk shape, filters,
 * chunk addresses) and registers it; after that everything here is
 * HDF5-free and thread-safe. The zarr backend registers its arrays with a
 * loader of its own instead (zarr_array.c), sharing the same LRU. */
#ifndef RFS_CHUNKS_H
#define RFS_CHUNKS_H

#include <stddef.h>
#include <stdint.h>

#include "source/io/inflate.h"

struct rfs_chunk_loc {
	uint64_t addr; /* file offset of the stored chunk */
	uint64_t size; /* stored bytes */
	unsigned mask; /* filters skipped for this chunk */
};

/* A chunked 1-D or 2-D dataset; 1-D ones have cols = chunk_cols = 1. */
struct rfs_chunked {
	int fd; /* borrowed: the source file, read-only */
	const char *path, *name; /* borrowed, for log lines */
	/* Borrowed: the source's limit on failure lines (NULL: one shared
	 * by every such set). */
	struct rfs_log_limit *log;
	uint64_t cols;
	uint64_t chunk_rows, chunk_cols;
	uint64_t grid_cols; /* chunks across: ceil(cols / chunk_cols) */
	size_t elem;
	struct rfs_pipeline pipeline;
	struct rfs_chunk_loc *locs; /* row-major over the chunk grid */
	/* Or, when set, a loader (zarr: its own files and codecs), which
	 * decodes bytes [at, at + len) of chunk k (row-major over the grid)
	 * into out and logs its failures; fd, pipeline and locs are then
	 * unused. ctx is borrowed like fd. @return 0, -EIO, -ENOMEM. */
	int (*load)(void *ctx, uint64_t k, size_t at, void *out, size_t len);
	void *ctx;
	/* With a loader whose chunks span the columns (grid_cols 1): rows of
	 * the part of a chunk decoded and cached alone, where a codec
	 * decodes parts (0: whole chunks). A scattered read of a big chunk
	 * then decodes and holds only the parts it touches. */
	uint64_t part_rows;
};

struct rfs_chunk_cache;

/* capacity: bytes of decoded chunks kept while unused.
 * @return 0 or -ENOMEM. */
int rfs_chunks_create(size_t capacity, struct rfs_chunk_cache **out);

/* Takes bytes of the capacity for a mapping of a contiguous dataset
 * (rowmap.h), or other memory held beside decoded chunks, which shares
 * this budget with them, for the mount's life; an eighth of it always
 * stays for chunks (of other files of the same dataset). Not thread-safe:
 * call at mount time, once the capacity is the share (rfs_chunks_limit).
 * @return 0, or -ENOSPC when fewer are left. */
int rfs_chunks_reserve(struct rfs_chunk_cache *cc, size_t bytes);

/* Sets the capacity to the share of cache_mb, once it has settled
 * (view.c; until then the capacity bounds what reads at mount keep),
 * before any reservation: decoded chunks over it are evicted. Not
 * thread-safe: call at mount time, before reads. */
void rfs_chunks_limit(struct rfs_chunk_cache *cc, size_t capacity);

/* Evicts every decoded chunk nobody holds. */
void rfs_chunks_drop(struct rfs_chunk_cache *cc);

/* Frees the cache and every registered dataset. Accepts NULL. */
void rfs_chunks_destroy(struct rfs_chunk_cache *cc);

/* Copies c into the cache's registry, which owns c->locs from then on
 * (also on failure). The borrowed fd and names must stay valid while
 * reads happen. Not thread-safe: call at mount time.
 * @return 0 with *id set, or -ENOMEM. */
int rfs_chunks_register(struct rfs_chunk_cache *cc, const struct rfs_chunked *c,
			uint64_t *id);

/* Reads rows [first, first + count) of dataset id to dst, row i at
 * dst + i x cols x elem. Thread-safe. Failures (short file, bad chunk)
 * are logged with file, dataset and rows. @return 0, -EIO, -ENOMEM. */
int rfs_chunks_read(struct rfs_chunk_cache *cc, uint64_t id, uint64_t first,
		    uint64_t count, void *dst);

/* Reads n distinct rows of dataset id, sorted ascending, row i to to[i]:
 * the rows of one row of chunks are served by one lookup of each chunk.
 * Thread-safe. @return 0, -EIO, -ENOMEM. */
int rfs_chunks_read_rows(struct rfs_chunk_cache *cc, uint64_t id,
			 const uint64_t *rows, size_t n,
			 unsigned char *const *to);

#endif
