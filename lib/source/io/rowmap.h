/* SPDX-License-Identifier: MIT */
/* A contiguous array's bytes mapped read-only, copied from with a guard.
 *
 * Reading a row with pread or io_uring costs, besides the copy, a
 * page-cache lookup and a page reference per call; for a batch of 256
 * random rows that was most of the daemon's time when the source sat in
 * the page cache (docs/benchmarks.md). Copying out of a mapping costs the
 * copy alone. From storage, though, a mapping reads one page fault at a
 * time where io_uring reads a batch in parallel; so the caller copies
 * from the mapping only while rfs_rowmap_resident() says the bytes are in
 * the page cache, and reads with rfs_fetch() otherwise.
 *
 * A mapped file that shrinks raises SIGBUS on access past its new end (so
 * does a page that cannot be read in). Copies run under a guard that turns
 * that into -EIO for the caller instead of killing the daemon; other
 * SIGBUS signals keep their previous handler. HDF5-free, thread-safe. */
#ifndef RFS_ROWMAP_H
#define RFS_ROWMAP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct rfs_rowmap {
	void *map; /* NULL: not mapped */
	size_t map_len;
	const unsigned char *base; /* byte 0 of the array, inside map */
	int fd; /* borrowed: the file, for probes */
	uint64_t offset; /* of byte 0 in the file */
	atomic_int resident; /* the last probe's verdict */
	_Atomic int64_t probed_ms; /* its time (CLOCK_MONOTONIC); 0: never */
	_Atomic uint64_t probes; /* made so far: each samples other pages */
};

/* Maps len bytes of fd at offset (the array; len > 0). @return 0 or the
 * negative errno of mmap. */
int rfs_rowmap_open(struct rfs_rowmap *m, int fd, uint64_t offset,
		    uint64_t len);

/* Unmaps; a zeroed or closed map is a no-op. */
void rfs_rowmap_close(struct rfs_rowmap *m);

/* Whether copies should come from the mapping now: mapped, and the
 * bytes in the page cache at the last probe. Probes at most once a
 * second, so pages dropped or read in meanwhile change the answer within
 * a second. */
int rfs_rowmap_resident(struct rfs_rowmap *m);

/* Whether the array's bytes are in the page cache now, judged by a
 * sample of 64 random pages: 1 all are, 0 one is not (reading it in has
 * begun), -1 cannot be told (the file system cannot read without
 * waiting, or the file ends before the array). */
int rfs_rowmap_probe(struct rfs_rowmap *m);

/* Copies len bytes at off (counted from the array's byte 0; within it)
 * to dst. @return 0, or -EIO when the file no longer holds them (SIGBUS
 * during the copy). */
int rfs_rowmap_copy(const struct rfs_rowmap *m, uint64_t off, size_t len,
		    void *dst);

/* Copies len bytes at byte at[k] * unit to to[k] for k < n (rows: at
 * the row numbers, unit the row's bytes), under one guard. @return 0, or
 * -EIO with *failed the first piece the file no longer holds. */
int rfs_rowmap_gather(const struct rfs_rowmap *m, const uint64_t *at,
		      uint64_t unit, size_t n, size_t len,
		      unsigned char *const *to, size_t *failed);

#endif
