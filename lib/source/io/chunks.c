/* SPDX-License-Identifier: MIT */
#include "source/io/chunks.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "serve/cache.h"
#include "source/io/fetch.h"
#include "core/log.h"

/* The cache holds decoded chunks only; a key is (dataset id, chunk
 * index) in its rank and batch fields. */
struct rfs_chunk_cache {
	struct rfs_cache *cache; /* its capacity: the share less reservations */
	size_t keep; /* of the share, what reservations leave to chunks */
	struct rfs_chunked *sets; /* registry; read-only after mount */
	size_t count, cap;
};

/* Rows of a cached unit: a chunk, or a part of one (part_rows). */
static uint64_t unit_rows(const struct rfs_chunked *c)
{
	return c->part_rows ? c->part_rows : c->chunk_rows;
}

static uint64_t units_per_chunk(const struct rfs_chunked *c)
{
	return (c->chunk_rows + unit_rows(c) - 1) / unit_rows(c);
}

/* A row of units (across the chunk grid's columns), numbered from the
 * top: the one row r is in, and its first row and number of rows. */
struct unit_row {
	uint64_t index, first, rows;
};

static struct unit_row unit_row_of(const struct rfs_chunked *c, uint64_t r)
{
	uint64_t gr = r / c->chunk_rows, ur = unit_rows(c);
	uint64_t p = r % c->chunk_rows / ur;
	uint64_t rows = c->chunk_rows - p * ur < ur ? c->chunk_rows - p * ur :
						      ur;
	return (struct unit_row){ .index = gr * units_per_chunk(c) + p,
				  .first = gr * c->chunk_rows + p * ur,
				  .rows = rows };
}

static int decode(void *ctx, const struct rfs_cache_key *key,
		  struct rfs_cache_fill *f)
{
	struct rfs_chunk_cache *cc = ctx;
	const struct rfs_chunked *c = &cc->sets[key->rank];
	size_t out_len = c->chunk_rows * c->chunk_cols * c->elem;
	if (c->load) {
		/* Unit row ur's first row, in chunk row gr. */
		uint64_t ur = key->batch / c->grid_cols,
			 upc = units_per_chunk(c);
		uint64_t gr = ur / upc, row_bytes = c->chunk_cols * c->elem;
		struct unit_row u = unit_row_of(
			c, gr * c->chunk_rows + ur % upc * unit_rows(c));
		uint64_t k = gr * c->grid_cols + key->batch % c->grid_cols;
		/* Its stored bytes and temporaries: about a chunk; for a
		 * part, two (a part the codec cannot decode alone is
		 * decoded from the whole chunk, stored and decoded). */
		unsigned char *buf = rfs_cache_fill_buffer(
			f, u.rows * row_bytes,
			c->part_rows ? 2 * out_len : out_len);
		return buf ? c->load(c->ctx, k,
				     (u.first - gr * c->chunk_rows) * row_bytes,
				     buf, u.rows * row_bytes) :
			     -ENOMEM;
	}
	const struct rfs_chunk_loc *loc = &c->locs[key->batch];
	/* The buffer first: it may wait for room, holding nothing else. */
	unsigned char *out =
		rfs_cache_fill_buffer(f, out_len, loc->size + out_len);
	unsigned char *stored = malloc(loc->size ? loc->size : 1);
	unsigned char *scratch = malloc(out_len);
	int rc = -ENOMEM;
	if (!stored || !out || !scratch)
		goto out;
	rc = rfs_fetch_pread_all(c->fd, stored, loc->size, loc->addr, NULL);
	if (rc == 0)
		rc = rfs_inflate_decode(&c->pipeline, loc->mask, stored,
					loc->size, out, out_len, c->elem,
					scratch);
	if (rc != 0) {
		static struct rfs_log_limit unowned = RFS_LOG_LIMIT_INIT;
		uint64_t first = key->batch / c->grid_cols * c->chunk_rows;
		rfs_log_limited(
			c->log ? c->log : &unowned,
			"source %s dataset %s: chunk %llu (rows %llu..%llu, "
			"%llu bytes at %llu) %s",
			c->path, c->name, (unsigned long long)key->batch,
			(unsigned long long)first,
			(unsigned long long)(first + c->chunk_rows - 1),
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

int rfs_chunks_create(size_t capacity, struct rfs_chunk_cache **out)
{
	struct rfs_chunk_cache *cc = calloc(1, sizeof(*cc));
	if (!cc)
		return -ENOMEM;
	/* Chunked files of a dataset whose other files are mapped. */
	cc->keep = capacity / 8;
	int rc = rfs_cache_create(capacity, decode, cc, &cc->cache);
	if (rc != 0) {
		free(cc);
		return rc;
	}
	*out = cc;
	return 0;
}

int rfs_chunks_reserve(struct rfs_chunk_cache *cc, size_t bytes)
{
	return rfs_cache_reserve(cc->cache, bytes, cc->keep);
}

void rfs_chunks_limit(struct rfs_chunk_cache *cc, size_t capacity)
{
	cc->keep = capacity / 8;
	rfs_cache_resize(cc->cache, capacity);
}

void rfs_chunks_drop(struct rfs_chunk_cache *cc)
{
	rfs_cache_drop(cc->cache);
}

void rfs_chunks_destroy(struct rfs_chunk_cache *cc)
{
	if (!cc)
		return;
	rfs_cache_destroy(cc->cache);
	for (size_t i = 0; i < cc->count; i++)
		free(cc->sets[i].locs);
	free(cc->sets);
	free(cc);
}

int rfs_chunks_register(struct rfs_chunk_cache *cc, const struct rfs_chunked *c,
			uint64_t *id)
{
	if (cc->count == cc->cap) {
		size_t cap = cc->cap ? 2 * cc->cap : 8;
		struct rfs_chunked *sets =
			realloc(cc->sets, cap * sizeof(*sets));
		if (!sets) {
			free(c->locs);
			return -ENOMEM;
		}
		cc->sets = sets;
		cc->cap = cap;
	}
	*id = cc->count;
	cc->sets[cc->count++] = *c;
	return 0;
}

/* Copies n rows of unit row u from each unit of that row: a run (out
 * given: rows first + k to out + k rows) or sorted rows (rows[k] to
 * to[k]). */
static int copy_unit_row(struct rfs_chunk_cache *cc, uint64_t id,
			 struct unit_row u, const uint64_t *rows,
			 uint64_t first, size_t n, unsigned char *const *to,
			 unsigned char *out)
{
	const struct rfs_chunked *c = &cc->sets[id];
	size_t row_bytes = c->cols * c->elem;
	/* Chunks as wide as the rows (every 1-D array, like a CSR's data and
	 * indices): a stretch of rows into one buffer is one copy, not one
	 * per element. */
	int stretch = out && c->grid_cols == 1 && c->chunk_cols == c->cols;
	/* A zarr shard's grid may run past the columns (whole inner chunks
	 * of padding): those hold nothing of the rows. */
	for (uint64_t gc = 0; gc < c->grid_cols && gc * c->chunk_cols < c->cols;
	     gc++) {
		struct rfs_cache_key key = {
			.rank = id, .batch = u.index * c->grid_cols + gc
		};
		struct rfs_cache_entry *e;
		int rc = rfs_cache_get(cc->cache, &key, &e);
		if (rc != 0)
			return rc;
		const unsigned char *unit = rfs_cache_entry_data(e);
		uint64_t c0 = gc * c->chunk_cols;
		uint64_t ncols = c->cols - c0 < c->chunk_cols ? c->cols - c0 :
								c->chunk_cols;
		if (stretch)
			memcpy(out, unit + (first - u.first) * row_bytes,
			       n * row_bytes);
		for (size_t k = 0; k < n && !stretch; k++) {
			uint64_t r = rows ? rows[k] : first + k;
			unsigned char *dst = out ? out + k * row_bytes : to[k];
			memcpy(dst + c0 * c->elem,
			       unit + (r - u.first) * c->chunk_cols * c->elem,
			       ncols * c->elem);
		}
		rfs_cache_put(cc->cache, e);
	}
	return 0;
}

int rfs_chunks_read(struct rfs_chunk_cache *cc, uint64_t id, uint64_t first,
		    uint64_t count, void *dst)
{
	const struct rfs_chunked *c = &cc->sets[id];
	unsigned char *out = dst;
	uint64_t end = first + count, r0 = first;
	while (r0 < end) {
		struct unit_row u = unit_row_of(c, r0);
		uint64_t r1 = u.first + u.rows < end ? u.first + u.rows : end;
		int rc = copy_unit_row(cc, id, u, NULL, r0, r1 - r0, NULL,
				       out + (r0 - first) * c->cols * c->elem);
		if (rc != 0)
			return rc;
		r0 = r1;
	}
	return 0;
}

int rfs_chunks_read_rows(struct rfs_chunk_cache *cc, uint64_t id,
			 const uint64_t *rows, size_t n,
			 unsigned char *const *to)
{
	const struct rfs_chunked *c = &cc->sets[id];
	for (size_t i = 0, j; i < n; i = j) {
		/* Rows i..j-1 lie in the same row of units. */
		struct unit_row u = unit_row_of(c, rows[i]);
		for (j = i + 1; j < n && rows[j] < u.first + u.rows; j++)
			;
		int rc = copy_unit_row(cc, id, u, rows + i, 0, j - i, to + i,
				       NULL);
		if (rc != 0)
			return rc;
	}
	return 0;
}
