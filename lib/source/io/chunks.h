/* SPDX-License-Identifier: MIT */
/* Rows of a chunked array, assembled from decoded chunks kept in a
 * bounded LRU shared by every array of a mount, so reads that need the
 * same chunk decode it once: the first get of a chunk loads it, outside
 * the lock; concurrent gets of it wait for that load. Chunks being loaded
 * or held count against the capacity too, with their loads' temporaries,
 * so however many threads read, memory stays within it.
 *
 * A backend registers each array with a loader (zarr_array.c: its files
 * and codecs; hdf5_read.c: pread at the addresses HDF5's index gave at
 * mount, and inflate.c); everything here is format-free and thread-safe. */
#ifndef RFS_CHUNKS_H
#define RFS_CHUNKS_H

#include <stddef.h>
#include <stdint.h>

/* A chunked 1-D or 2-D array; 1-D ones have cols = chunk_cols = 1. */
struct rfs_chunked {
	uint64_t cols;
	uint64_t chunk_rows, chunk_cols;
	uint64_t grid_cols; /* chunks across: ceil(cols / chunk_cols) */
	size_t elem;
	/* Decodes bytes [at, at + len) of chunk k (row-major over the grid)
	 * into out and logs its failures. ctx is borrowed: it must stay
	 * valid while reads happen. @return 0, -EIO, -ENOMEM. */
	int (*load)(void *ctx, uint64_t k, size_t at, void *out, size_t len);
	void *ctx;
	/* The bytes of temporaries load() takes for chunk k, counted while
	 * it runs; NULL: about a chunk, and for a part two (a part the codec
	 * cannot decode alone is decoded from the whole chunk). */
	size_t (*scratch)(void *ctx, uint64_t k);
	/* With chunks that span the columns (grid_cols 1): rows of the part
	 * of a chunk decoded and cached alone, where a codec decodes parts
	 * (0: whole chunks). A scattered read of a big chunk then decodes
	 * and holds only the parts it touches. */
	uint64_t part_rows;
};

struct rfs_bigbuf;
struct rfs_chunk_cache;

/* capacity: bytes of decoded chunks kept while unused; their buffers
 * from pool (bigbuf.h; NULL: none), which must outlive the cache.
 * @return 0 or -ENOMEM. */
int rfs_chunks_create(size_t capacity, struct rfs_bigbuf *pool,
		      struct rfs_chunk_cache **out);

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

/* Frees the cache. Accepts NULL. */
void rfs_chunks_destroy(struct rfs_chunk_cache *cc);

/* Copies c into the cache's registry, as array *id. Not thread-safe:
 * call at mount time.
 * @return 0 with *id set, or -ENOMEM. */
int rfs_chunks_register(struct rfs_chunk_cache *cc, const struct rfs_chunked *c,
			uint64_t *id);

/* Reads rows [first, first + count) of dataset id to dst, row i at
 * dst + i x cols x elem. Thread-safe. @return 0, -EIO, -ENOMEM. */
int rfs_chunks_read(struct rfs_chunk_cache *cc, uint64_t id, uint64_t first,
		    uint64_t count, void *dst);

/* Reads n distinct rows of dataset id, sorted ascending, row i to to[i]:
 * the rows of one row of chunks are served by one lookup of each chunk.
 * Thread-safe. @return 0, -EIO, -ENOMEM. */
int rfs_chunks_read_rows(struct rfs_chunk_cache *cc, uint64_t id,
			 const uint64_t *rows, size_t n,
			 unsigned char *const *to);

#endif
