/* SPDX-License-Identifier: MIT */
/*
 * How the HDF5 backend reads rows. HDF5 serialises every call behind one
 * global lock, so the bytes are read around it wherever the layout
 * allows:
 *
 * - a contiguous, unfiltered dataset stored in the byte order we serve is
 *   just rows x row_bytes bytes at H5Dget_offset(): runs of rows are read
 *   with pread on our own descriptor (fetch.c submits a batch's together),
 *   or, while those bytes sit in the page cache and fit in the memory
 *   cache_mb leaves for chunks, copied out of a mapping (rowmap.c);
 * - a 1-D chunked dataset whose chunks are stored as is (anndata's
 *   resizable CSR parts, uncompressed) is read the same way, a read or
 *   copy per chunk a run crosses, at addresses taken from HDF5's index
 *   once;
 * - a chunked dataset whose filters are deflate and shuffle (what h5py and
 *   anndata write) has its chunk addresses taken from HDF5's index once;
 *   chunks are then read with pread and decoded in the calling thread
 *   (rfs_hdf5_chunk_load, the loader of chunks.c's LRU of decoded chunks);
 * - anything else (other filters, big-endian, compact, unallocated chunks)
 *   goes through H5Dread, one hyperslab per run of adjacent rows (never a
 *   large union selection: building those is quadratic in 1.10).
 *
 * Rows arrive sorted and distinct (source.c); adjacent ones are merged
 * into runs. A short read (the file was truncated) is an error, never
 * zeros.
 */
#include "source/hdf5/hdf5_source.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "source/io/chunks.h"
#include "source/io/fetch.h"
#include "source/io/inflate.h"
#include "core/log.h"
#include "os/memlimit.h"

/* Whether HDF5 would undo filter id with these parameters as inflate.c
 * does: deflate checks its level (a damaged level fails every read in
 * HDF5), shuffle unshuffles by its parameter, not the dtype's size. */
static int decoded_as_here(H5Z_filter_t id, size_t nvalues,
			   const unsigned *values, size_t elem)
{
	if (id == H5Z_FILTER_DEFLATE)
		return nvalues == 1 && values[0] <= 9;
	if (id == H5Z_FILTER_SHUFFLE)
		return nvalues == 1 && values[0] == elem;
	return 1;
}

/* Every filter in the pipeline must be available, or reads fail later;
 * the pipeline is recorded for direct chunk reads (a filter whose
 * parameters HDF5 reads otherwise is recorded as id -1: through HDF5). */
int rfs_hdf5_read_filters(struct hdf5_source *s, struct array *a,
			  struct rfs_pipeline *pipe, char *err, size_t errlen)
{
	hid_t dcpl = H5Dget_create_plist(a->dset);
	if (dcpl < 0)
		return 0;
	int rc = 0;
	int n = H5Pget_nfilters(dcpl);
	pipe->count = 0;
	for (int i = 0; i < n && rc == 0; i++) {
		unsigned flags, config, values[8];
		size_t nvalues = 8;
		char name[64] = "";
		H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)i, &flags,
						 &nvalues, values, sizeof(name),
						 name, &config);
		if (id >= 0 && H5Zfilter_avail(id) <= 0) {
			snprintf(err, errlen,
				 "%s: dataset %s needs HDF5 filter '%s' (id "
				 "%d), which is not available",
				 s->path, a->name, name[0] ? name : "?",
				 (int)id);
			rc = -ENOTSUP;
		}
		if (pipe->count < RFS_FILTERS_MAX)
			pipe->ids[pipe->count] =
				decoded_as_here(id, nvalues, values, a->elem) ?
					(int)id :
					-1;
		pipe->count++;
	}
	switch (H5Pget_layout(dcpl)) {
	case H5D_CHUNKED:
		a->layout = "chunked";
		break;
	case H5D_COMPACT:
		a->layout = "compact";
		break;
	default:
		a->layout = "contiguous";
	}
	H5Pclose(dcpl);
	return rc;
}

/* Where HDF5's addresses start in the file: after the userblock. Chunk
 * addresses leave it out before HDF5 1.14.4 (HDF5 issue #3003), while
 * H5Dget_offset() has always counted it. */
static uint64_t chunk_address_base(hid_t file)
{
#if H5_VERSION_GE(1, 14, 4)
	(void)file;
	return 0;
#else
	hsize_t userblock = 0;
	hid_t fcpl = H5Fget_create_plist(file);
	if (fcpl >= 0) {
		if (H5Pget_userblock(fcpl, &userblock) < 0)
			userblock = 0;
		H5Pclose(fcpl);
	}
	return userblock;
#endif
}

/* Claims (memlimit.c) the table of where a's grid of n chunks is, kept
 * for the mount: an unfiltered grid of one-byte chunks, allocated early,
 * is a file of n bytes, none written, and a table of 24 n. A table over
 * the limit is no error: the array is read through HDF5 instead; so it is
 * a spare claim, which a default cache_mb does not yield to alone. */
static int claim_locations(const struct hdf5_source *s, const struct array *a,
			   uint64_t n, uint64_t *claimed)
{
	char what[300], err[1024];
	snprintf(what, sizeof(what), "%s (its chunks' addresses)", a->name);
	if (rfs_memlimit_claim_spare(s->base.env.claims, s->path, what, n,
				     sizeof(struct rfs_chunk_loc), claimed, err,
				     sizeof(err)) == 0)
		return 0;
	rfs_log("%s; its chunks are read through HDF5 instead, one run of "
		"rows at a time under its global lock",
		err);
	return -ENOTSUP;
}

/* Asks HDF5's index where every chunk is, as file offsets, the table
 * claimed in *claimed (the caller keeps or releases it with the table).
 * @return 0 when each chunk is allocated and direct reads can serve the
 * array (c's grid and a->chunked's locs, chunk_rows and grid_cols then
 * set), else -ENOTSUP or -ENOMEM, nothing claimed. */
static int locate_chunks(struct hdf5_source *s, struct array *a, hid_t dcpl,
			 struct rfs_chunked *c, uint64_t *claimed)
{
	uint64_t base = chunk_address_base(s->file);
	struct rfs_chunk_loc **locs = &a->chunked.locs;
	hsize_t dims[2] = { 1, 1 };
	unsigned opts = 0;
	if (H5Pget_chunk(dcpl, a->ndims, dims) != a->ndims ||
	    H5Pget_chunk_opts(dcpl, &opts) < 0 ||
	    (opts & H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS))
		return -ENOTSUP;
	if (!a->rows || !a->cols)
		return -ENOTSUP; /* nothing to read; open_rows refuses it */
	c->chunk_rows = dims[0];
	c->chunk_cols = a->ndims == 2 ? dims[1] : 1;
	uint64_t grid_rows = (a->rows + c->chunk_rows - 1) / c->chunk_rows;
	c->grid_cols = (a->cols + c->chunk_cols - 1) / c->chunk_cols;
	*claimed = 0;
	if (grid_rows > CHUNKS_MAX / c->grid_cols ||
	    claim_locations(s, a, grid_rows * c->grid_cols, claimed) != 0)
		return -ENOTSUP;
	*locs = calloc(grid_rows * c->grid_cols, sizeof(**locs));
	if (!*locs) {
		rfs_memlimit_release(s->base.env.claims, claimed);
		return -ENOMEM;
	}
	for (uint64_t r = 0; r < grid_rows; r++) {
		for (uint64_t k = 0; k < c->grid_cols; k++) {
			hsize_t at[2] = { r * c->chunk_rows,
					  k * c->chunk_cols };
			struct rfs_chunk_loc *loc =
				&(*locs)[r * c->grid_cols + k];
			haddr_t addr;
			hsize_t size, found = 0;
			/* H5Dread finds chunks by another lookup than the
			 * coordinate scan: in a damaged index they disagree,
			 * and what H5Dread does is what h5py serves. */
			if (H5Dget_chunk_info_by_coord(a->dset, at, &loc->mask,
						       &addr, &size) < 0 ||
			    addr == HADDR_UNDEF ||
			    H5Dget_chunk_storage_size(a->dset, at, &found) <
				    0 ||
			    found != size) {
				free(*locs);
				*locs = NULL;
				rfs_memlimit_release(s->base.env.claims,
						     claimed);
				return -ENOTSUP; /* unallocated: fill values */
			}
			loc->addr = base + addr;
			loc->size = size;
		}
	}
	a->chunked.chunk_rows = c->chunk_rows;
	a->chunked.grid_cols = c->grid_cols;
	return 0;
}

int rfs_hdf5_chunk_load(void *ctx, uint64_t k, size_t at, void *out, size_t len)
{
	const struct hdf5_chunks *h = ctx;
	const struct rfs_chunk_loc *loc = &h->locs[k];
	unsigned char *stored = malloc(loc->size ? loc->size : 1);
	unsigned char *scratch = malloc(len);
	int rc = -ENOMEM;
	(void)at; /* whole chunks: no parts */
	if (!stored || !scratch)
		goto out;
	rc = rfs_fetch_pread_all(h->fd, stored, loc->size, loc->addr, NULL);
	if (rc == 0)
		rc = rfs_inflate_decode(&h->pipeline, loc->mask, stored,
					loc->size, out, len, h->elem, scratch);
	if (rc != 0) {
		uint64_t first = k / h->grid_cols * h->chunk_rows;
		rfs_log_limited(
			h->log,
			"source %s dataset %s: chunk %llu (rows %llu..%llu, "
			"%llu bytes at %llu) %s",
			h->path, h->name, (unsigned long long)k,
			(unsigned long long)first,
			(unsigned long long)(first + h->chunk_rows - 1),
			(unsigned long long)loc->size,
			(unsigned long long)loc->addr,
			rc == -EIO     ? "does not decode" :
			rc == -ENODATA ? "is past the end of the file" :
					 strerror(-rc));
		rc = rc == -ENOMEM ? rc : -EIO;
	}
out:
	free(stored);
	free(scratch);
	return rc;
}

/* The stored bytes and a decoded chunk's: the loader's temporaries. */
size_t rfs_hdf5_chunk_scratch(void *ctx, uint64_t k)
{
	const struct hdf5_chunks *h = ctx;
	return h->locs[k].size + h->chunk_bytes;
}

/* A 1-D chunked array with no filters: its chunks' addresses, for reads
 * straight from the file (a->locs, a->chunk_rows; a->offset the lowest
 * address). @return 0, or -ENOTSUP where a chunk is unallocated or not
 * stored whole. */
static int locate_raw_chunks(struct hdf5_source *s, struct array *a, hid_t dcpl)
{
	struct rfs_chunked c = { 0 };
	uint64_t claimed;
	int rc = locate_chunks(s, a, dcpl, &c, &claimed);
	if (rc != 0)
		return rc;
	struct rfs_chunk_loc *locs = a->chunked.locs;
	a->chunked.locs = NULL;
	uint64_t n = (a->rows + c.chunk_rows - 1) / c.chunk_rows;
	uint64_t low = UINT64_MAX;
	for (uint64_t k = 0; k < n && rc == 0; k++) {
		if (locs[k].size != c.chunk_rows * a->row_bytes)
			rc = -ENOTSUP;
		low = locs[k].addr < low ? locs[k].addr : low;
	}
	if (rc != 0) {
		free(locs);
		rfs_memlimit_release(s->base.env.claims, &claimed);
		return rc;
	}
	s->base.claimed += claimed; /* held with the source */
	a->locs = locs;
	a->chunk_rows = c.chunk_rows;
	a->offset = low;
	return 0;
}

/* Maps an array read with pread where the chunk share of cache_mb has
 * room for it and an eighth to spare (a chunk-less array leaves that
 * memory unused); the mapped pages then count against cache_mb. A chunked
 * one maps the stretch from its first chunk to the end of its last (what
 * lies between, other arrays' chunks, counts too). */
static void map_array(struct hdf5_source *s, struct array *a)
{
	uint64_t len = 0, n = 0;
	if (a->path != RFS_READ_PREAD || !s->chunks)
		return;
	if (a->locs)
		n = (a->rows + a->chunk_rows - 1) / a->chunk_rows;
	else if (__builtin_mul_overflow(a->rows, a->row_bytes, &len))
		return;
	for (uint64_t k = 0; k < n; k++)
		if (a->locs[k].addr + a->locs[k].size > a->offset + len)
			len = a->locs[k].addr + a->locs[k].size - a->offset;
	if (len == 0 || rfs_rowmap_open(&a->map, s->fd, a->offset, len) != 0)
		return;
	if (rfs_chunks_reserve(s->chunks, a->map.map_len) != 0)
		rfs_rowmap_close(&a->map);
}

void rfs_hdf5_take_share(struct rfs_source *base)
{
	struct hdf5_source *s = (struct hdf5_source *)base;
	map_array(s, &s->x);
	map_array(s, &s->indices);
	s->base.info.read_path = s->x.map.map ? RFS_READ_MMAP : s->x.path;
}

/* Picks how the array's bytes are read: pread, direct chunks or HDF5. */
void rfs_hdf5_choose_read_path(struct hdf5_source *s, struct array *a,
			       const struct rfs_pipeline *pipe)
{
	hid_t dcpl = H5Dget_create_plist(a->dset);
	hid_t type = H5Dget_type(a->dset);
	/* Bytes as stored are bytes as served (all are in our file:
	 * rfs_hdf5_refuse_outside). */
	int direct = type >= 0 && H5Tequal(type, a->mem_type) > 0;
	H5D_layout_t layout = dcpl >= 0 ? H5Pget_layout(dcpl) : H5D_COMPACT;
	a->path = RFS_READ_LIBRARY;
	if (direct && layout == H5D_CONTIGUOUS && pipe->count == 0) {
		haddr_t offset = H5Dget_offset(a->dset);
		/* Else never written. */
		if (offset != HADDR_UNDEF) {
			a->offset = offset;
			a->path = RFS_READ_PREAD;
		}
	} else if (direct && layout == H5D_CHUNKED && a->ndims == 1 &&
		   pipe->count == 0 && locate_raw_chunks(s, a, dcpl) == 0) {
		a->path = RFS_READ_PREAD;
	} else if (direct && layout == H5D_CHUNKED && s->chunks &&
		   pipe->count <= RFS_FILTERS_MAX &&
		   rfs_inflate_supported(pipe)) {
		struct rfs_chunked c = { .cols = a->cols,
					 .elem = a->elem,
					 .load = rfs_hdf5_chunk_load,
					 .scratch = rfs_hdf5_chunk_scratch,
					 .ctx = &a->chunked };
		struct hdf5_chunks *h = &a->chunked;
		uint64_t claimed;
		if (locate_chunks(s, a, dcpl, &c, &claimed) == 0) {
			h->fd = s->fd;
			h->path = s->path;
			h->name = a->name;
			h->log = &s->base.read_failures;
			h->elem = a->elem;
			h->chunk_bytes = c.chunk_rows * c.chunk_cols * a->elem;
			h->pipeline = *pipe;
			if (rfs_chunks_register(s->chunks, &c, &a->chunks_id) ==
			    0) {
				a->path = RFS_READ_CHUNKS;
				s->base.claimed += claimed;
			} else {
				rfs_memlimit_release(s->base.env.claims,
						     &claimed);
			}
		}
	}
	if (type >= 0)
		H5Tclose(type);
	if (dcpl >= 0)
		H5Pclose(dcpl);
}

/* Logs a failed read of a's rows (or elements: unit) [first, end), why
 * being the errno of the read (-ENODATA: the file ended first), or EIO
 * for a copy out of the mapping. @return -EIO. */
static int read_failed(struct hdf5_source *s, const struct array *a,
		       const char *unit, uint64_t first, uint64_t end, int why)
{
	rfs_log_limited(
		&s->base.read_failures,
		"source %s dataset %s: read of %s [%llu, %llu) failed: %s",
		s->path, a->name, unit, (unsigned long long)first,
		(unsigned long long)end,
		why == -ENODATA ? "file ends before the data" :
		why == -EFAULT	? "file ends before the data (SIGBUS "
				  "in the mapping)" :
				  strerror(-why));
	return -EIO;
}

/* len bytes at byte off of a's mapping to dst, for rows [first, first +
 * count) (named when it fails). */
static int copy_mapped(struct hdf5_source *s, struct array *a, uint64_t off,
		       size_t len, void *dst, uint64_t first, uint64_t count)
{
	if (rfs_rowmap_copy(&a->map, off, len, dst) == 0)
		return 0;
	return read_failed(s, a, "rows", first, first + count, -EFAULT);
}

/* Rows rows[k] of a's mapping to to[k], k < m. */
static int gather_mapped(struct hdf5_source *s, struct array *a,
			 const uint64_t *rows, size_t m,
			 unsigned char *const *to)
{
	size_t failed;
	if (rfs_rowmap_gather(&a->map, rows, a->row_bytes, m, a->row_bytes, to,
			      &failed) == 0)
		return 0;
	return read_failed(s, a, "rows", rows[failed], rows[failed] + 1,
			   -EFAULT);
}

/* Rows [first, first + count), stored at byte at, read into dst. */
static int pread_span(struct hdf5_source *s, struct array *a, uint64_t first,
		      uint64_t count, uint64_t at, void *dst)
{
	int rc =
		rfs_fetch_pread_all(s->fd, dst, count * a->row_bytes, at, NULL);
	return rc ? read_failed(s, a, "rows", first, first + count, rc) : 0;
}

/* Where rows from r0 on are stored in the file, and in *r1 where that
 * stretch ends (at most end): a contiguous array is one stretch, raw
 * chunks one each. */
static uint64_t stretch_at(const struct array *a, uint64_t r0, uint64_t end,
			   uint64_t *r1)
{
	if (!a->locs) {
		*r1 = end;
		return a->offset + r0 * a->row_bytes;
	}
	uint64_t k = r0 / a->chunk_rows, stop = (k + 1) * a->chunk_rows;
	*r1 = stop < end ? stop : end;
	return a->locs[k].addr + (r0 - k * a->chunk_rows) * a->row_bytes;
}

/* Rows [first, first + count) of a chunked array stored unfiltered: a
 * copy or a read per chunk the run crosses. */
static int chunks_run(struct hdf5_source *s, struct array *a, uint64_t first,
		      uint64_t count, void *dst)
{
	int mapped = rfs_rowmap_resident(&a->map);
	unsigned char *out = dst;
	uint64_t end = first + count;
	for (uint64_t r0 = first, r1; r0 < end; r0 = r1) {
		uint64_t at = stretch_at(a, r0, end, &r1);
		size_t len = (r1 - r0) * a->row_bytes;
		int rc = mapped ? copy_mapped(s, a, at - a->offset, len, out,
					      r0, r1 - r0) :
				  pread_span(s, a, r0, r1 - r0, at, out);
		if (rc != 0)
			return rc;
		out += len;
	}
	return 0;
}

static int pread_run(struct hdf5_source *s, struct array *a, uint64_t first,
		     uint64_t count, void *dst)
{
	if (a->locs)
		return chunks_run(s, a, first, count, dst);
	if (rfs_rowmap_resident(&a->map))
		return copy_mapped(s, a, first * a->row_bytes,
				   count * a->row_bytes, dst, first, count);
	return pread_span(s, a, first, count, a->offset + first * a->row_bytes,
			  dst);
}

/* Through HDF5, under its lock: one hyperslab. */
static int hdf5_run(struct hdf5_source *s, struct array *a, uint64_t first,
		    uint64_t count, void *dst)
{
	hsize_t start[2] = { first, 0 };
	hsize_t extent[2] = { count, a->cols };
	int rc = -EIO;
	hid_t file_space = H5Dget_space(a->dset);
	hid_t mem_space = H5Screate_simple(a->ndims, extent, NULL);
	if (file_space >= 0 && mem_space >= 0 &&
	    H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, NULL, extent,
				NULL) >= 0 &&
	    H5Dread(a->dset, a->mem_type, mem_space, file_space, H5P_DEFAULT,
		    dst) >= 0)
		rc = 0;
	if (mem_space >= 0)
		H5Sclose(mem_space);
	if (file_space >= 0)
		H5Sclose(file_space);
	return rc ? read_failed(s, a, "rows", first, first + count, -EIO) : 0;
}

/* Rows [first, first + count) of an array read through HDF5, row i to
 * to[i] (the other paths scatter rows themselves: read_sorted). */
static int hdf5_rows_to(struct hdf5_source *s, struct array *a, uint64_t first,
			uint64_t count, unsigned char *const *to)
{
	unsigned char *staging = malloc(count * a->row_bytes);
	int rc = staging ? hdf5_run(s, a, first, count, staging) : -ENOMEM;
	for (uint64_t i = 0; i < count && rc == 0; i++)
		memcpy(to[i], staging + i * a->row_bytes, a->row_bytes);
	free(staging);
	return rc;
}

/* Rows [first, first + count) of a into dst, by the array's read path. */
static int read_run(struct hdf5_source *s, struct array *a, uint64_t first,
		    uint64_t count, void *dst)
{
	if (a->path == RFS_READ_PREAD)
		return pread_run(s, a, first, count, dst);
	if (a->path == RFS_READ_CHUNKS)
		return rfs_chunks_read(s->chunks, a->chunks_id, first, count,
				       dst);
	return hdf5_run(s, a, first, count, dst);
}

/* Reads submitted together, at most: as many as a ring takes at once
 * (fetch.c), kept on the stack. */
#define PIECES 128

/* Pieces of rows waiting to be read together: what each one is,
 * for its error line. */
struct pieces {
	size_t n;
	struct iovec iov[PIECES];
	struct rfs_fetch_run runs[PIECES];
	const struct array *of[PIECES];
	uint64_t first[PIECES], count[PIECES];
};

/* Reads the pieces waiting in p, and empties it. */
static int read_pieces(struct hdf5_source *s, struct pieces *p)
{
	size_t failed = 0;
	int rc = p->n ? rfs_fetch(s->fd, p->runs, p->n, &failed) : 0;
	p->n = 0;
	return rc ? read_failed(s, p->of[failed], "elements", p->first[failed],
				p->first[failed] + p->count[failed], rc) :
		    0;
}

/* Elements [first, first + count) of a read with pread to dst, as pieces
 * added to p (read whenever it fills): one for a contiguous array, one
 * per chunk crossed for raw chunks. */
static int add_pieces(struct hdf5_source *s, struct pieces *p,
		      const struct array *a, uint64_t first, uint64_t count,
		      unsigned char *dst)
{
	uint64_t end = first + count;
	for (uint64_t r0 = first, r1; r0 < end; r0 = r1) {
		uint64_t at = stretch_at(a, r0, end, &r1);
		size_t len = (r1 - r0) * a->row_bytes;
		if (p->n == PIECES) {
			int rc = read_pieces(s, p);
			if (rc != 0)
				return rc;
		}
		size_t i = p->n++;
		p->iov[i] = (struct iovec){ dst, len };
		p->runs[i] = (struct rfs_fetch_run){
			.off = at, .len = len, .iov = &p->iov[i], .iovcnt = 1
		};
		p->of[i] = a;
		p->first[i] = r0;
		p->count[i] = r1 - r0;
		dst += len;
	}
	return 0;
}

/* Distinct sorted rows of a 1-D array in raw chunks, row i to to[i]:
 * copied from the mapping while resident, else read together. */
static int raw_chunk_rows(struct hdf5_source *s, struct array *a,
			  const uint64_t *rows, size_t m,
			  unsigned char *const *to)
{
	int rc = 0;
	if (rfs_rowmap_resident(&a->map)) {
		for (size_t i = 0; i < m && rc == 0; i++)
			rc = chunks_run(s, a, rows[i], 1, to[i]);
		return rc;
	}
	struct pieces p;
	p.n = 0;
	for (size_t i = 0; i < m && rc == 0; i++)
		rc = add_pieces(s, &p, a, rows[i], 1, to[i]);
	return rc == 0 ? read_pieces(s, &p) : rc;
}

/* A contiguous array's rows: copied from its mapping while the bytes are
 * in the page cache; else every run of consecutive rows one read,
 * submitted together (fetch.c). */
static int fetch_sorted(struct hdf5_source *s, struct array *a,
			const uint64_t *rows, size_t m,
			unsigned char *const *to)
{
	if (rfs_rowmap_resident(&a->map))
		return gather_mapped(s, a, rows, m, to);
	struct iovec *iov = malloc((m ? m : 1) * sizeof(*iov));
	struct rfs_fetch_run *runs = malloc((m ? m : 1) * sizeof(*runs));
	size_t nruns = 0, failed = 0;
	int rc = -ENOMEM;
	if (!iov || !runs)
		goto out;
	for (size_t i = 0, j; i < m; i = j) {
		for (j = i + 1;
		     j < m && rows[j] == rows[j - 1] + 1 && j - i < IOV_MAX;
		     j++)
			;
		for (size_t k = i; k < j; k++)
			iov[k] = (struct iovec){ to[k], a->row_bytes };
		runs[nruns++] =
			(struct rfs_fetch_run){ .off = a->offset +
						       rows[i] * a->row_bytes,
						.len = (j - i) * a->row_bytes,
						.iov = iov + i,
						.iovcnt = (int)(j - i) };
	}
	rc = rfs_fetch(s->fd, runs, nruns, &failed);
	if (rc != 0) {
		uint64_t first = (runs[failed].off - a->offset) / a->row_bytes;
		rc = read_failed(s, a, "rows", first,
				 first + (uint64_t)runs[failed].iovcnt, rc);
	}
out:
	free(iov);
	free(runs);
	return rc;
}

/* Distinct sorted rows of a, row i to to[i]: a chunked array in one
 * pass over the chunks (rows of one chunk share its lookups), the others
 * run by run of consecutive rows. */
static int read_sorted(struct hdf5_source *s, struct array *a,
		       const uint64_t *rows, size_t m, unsigned char *const *to)
{
	if (a->path == RFS_READ_CHUNKS)
		return rfs_chunks_read_rows(s->chunks, a->chunks_id, rows, m,
					    to);
	if (a->path == RFS_READ_PREAD && a->locs)
		return raw_chunk_rows(s, a, rows, m, to);
	if (a->path == RFS_READ_PREAD)
		return fetch_sorted(s, a, rows, m, to);
	int rc = 0;
	for (size_t i = 0, j; i < m && rc == 0; i = j) {
		for (j = i + 1; j < m && rows[j] == rows[j - 1] + 1; j++)
			;
		rc = hdf5_rows_to(s, a, rows[i], j - i, to + i);
	}
	return rc;
}

int rfs_hdf5_read_rows(struct rfs_source *base, const uint64_t *rows, size_t m,
		       unsigned char *const *to)
{
	struct hdf5_source *s = (struct hdf5_source *)base;
	rfs_hdf5_quiet();
	return read_sorted(s, &s->x, rows, m, to);
}

/* CSR ranges: those of an array read with pread while its bytes are not
 * in the page cache are read PIECES at a time together (fetch.c); the
 * others one by one by their array's path. */
int rfs_hdf5_read_csr_ranges(struct rfs_source *base,
			     const struct rfs_csr_range *r, size_t n)
{
	struct hdf5_source *s = (struct hdf5_source *)base;
	struct pieces p;
	p.n = 0;
	int rc = 0;
	rfs_hdf5_quiet();
	for (size_t k = 0; k < n && rc == 0; k++) {
		struct array *a = r[k].part == RFS_CSR_VALUES ? &s->x :
								&s->indices;
		if (a->path == RFS_READ_PREAD && !rfs_rowmap_resident(&a->map))
			rc = add_pieces(s, &p, a, r[k].first, r[k].count,
					r[k].dst);
		else
			rc = read_run(s, a, r[k].first, r[k].count, r[k].dst);
	}
	if (rc == 0)
		rc = read_pieces(s, &p);
	return rc;
}

size_t rfs_hdf5_row_scratch(const struct rfs_source *base)
{
	const struct hdf5_source *s = (const struct hdf5_source *)base;
	/* fetch_sorted()'s arrays, or hdf5_rows_to()'s staging */
	return sizeof(struct iovec) + sizeof(struct rfs_fetch_run) +
	       (s->x.path == RFS_READ_LIBRARY ? s->x.row_bytes : 0);
}
