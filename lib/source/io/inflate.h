/* SPDX-License-Identifier: MIT */
/* Decoding raw HDF5 chunks without HDF5: the deflate (zlib) and shuffle
 * filters, undone in reverse pipeline order. HDF5-free and thread-safe, so
 * chunks are decoded in parallel outside HDF5's global lock. */
#ifndef RFS_INFLATE_H
#define RFS_INFLATE_H

#include <stddef.h>
#include <stdint.h>

#define RFS_FILTER_DEFLATE 1 /* HDF5's H5Z_FILTER_DEFLATE */
#define RFS_FILTER_SHUFFLE 2 /* HDF5's H5Z_FILTER_SHUFFLE */
#define RFS_FILTERS_MAX 8

struct rfs_pipeline {
	int count;
	int ids[RFS_FILTERS_MAX]; /* in the order HDF5 applied them */
};

/* 1 when the pipeline can be decoded here: shuffle, deflate, both in
 * that order, or none. */
int rfs_inflate_supported(const struct rfs_pipeline *p);

/* Decodes one stored chunk (src, stored bytes) into out (out_len bytes:
 * the chunk's elements x elem). Bit i of mask set means filter i was
 * skipped for this chunk (HDF5's filter mask). scratch holds out_len
 * bytes. @return 0, or -EIO when the bytes do not decode to exactly
 * out_len. */
int rfs_inflate_decode(const struct rfs_pipeline *p, unsigned mask,
		       const void *src, size_t stored, void *out,
		       size_t out_len, size_t elem, void *scratch);

#endif
