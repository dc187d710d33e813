#include "chunks.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"
#include "log.h"

/* The cache holds decoded chunks only; a key is (dataset id, chunk
 * index) in its rank and batch fields. */
struct rfs_chunk_cache {
	struct rfs_cache *cache;
	size_t keep; /* capacity mappings leave to chunks */
	struct rfs_chunked *sets; /* registry; read-only after mount */
	size_t count, cap;
};

static int pread_all(int fd, void *dst, size_t len, uint64_t at)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = pread(fd, (char *)dst + got, len - got,
				  (off_t)(at + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -ENODATA;
		got += (size_t)n;
	}
	return 0;
}

static int decode(void *ctx, const struct rfs_cache_key *key,
		  struct rfs_cache_fill *f)
{
	struct rfs_chunk_cache *cc = ctx;
	const struct rfs_chunked *c = &cc->sets[key->rank];
	size_t out_len = c->chunk_rows * c->chunk_cols * c->elem;
	if (c->load) {
		/* Its stored bytes and temporaries: about a chunk. */
		unsigned char *buf = rfs_cache_fill_buffer(f, out_len, out_len);
		return buf ? c->load(c->ctx, key->batch, buf, out_len) :
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
	rc = pread_all(c->fd, stored, loc->size, loc->addr);
	if (rc == 0)
		rc = rfs_inflate_decode(&c->pipeline, loc->mask, stored,
					loc->size, out, out_len, c->elem,
					scratch);
	if (rc != 0) {
		uint64_t first = key->batch / c->grid_cols * c->chunk_rows;
		rfs_log("source %s dataset %s: chunk %llu (rows %llu..%llu, "
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

/* Copies n rows of chunk row gr from each chunk of that row: a run (out
 * given: rows first + k to out + k rows) or sorted rows (rows[k] to
 * to[k]). */
static int copy_chunk_row(struct rfs_chunk_cache *cc, uint64_t id, uint64_t gr,
			  const uint64_t *rows, uint64_t first, size_t n,
			  unsigned char *const *to, unsigned char *out)
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
		struct rfs_cache_key key = { .rank = id,
					     .batch = gr * c->grid_cols + gc };
		struct rfs_cache_entry *e;
		int rc = rfs_cache_get(cc->cache, &key, &e);
		if (rc != 0)
			return rc;
		const unsigned char *chunk = rfs_cache_entry_data(e);
		uint64_t c0 = gc * c->chunk_cols;
		uint64_t ncols = c->cols - c0 < c->chunk_cols ? c->cols - c0 :
								c->chunk_cols;
		uint64_t row0 = gr * c->chunk_rows; /* the chunk's first */
		if (stretch)
			memcpy(out, chunk + (first - row0) * row_bytes,
			       n * row_bytes);
		for (size_t k = 0; k < n && !stretch; k++) {
			uint64_t r = rows ? rows[k] : first + k;
			unsigned char *dst = out ? out + k * row_bytes : to[k];
			memcpy(dst + c0 * c->elem,
			       chunk + (r - row0) * c->chunk_cols * c->elem,
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
		uint64_t gr = r0 / c->chunk_rows;
		uint64_t r1 = (gr + 1) * c->chunk_rows < end ?
				      (gr + 1) * c->chunk_rows :
				      end;
		int rc = copy_chunk_row(cc, id, gr, NULL, r0, r1 - r0, NULL,
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
		/* Rows i..j-1 lie in the same row of chunks. */
		uint64_t gr = rows[i] / c->chunk_rows;
		for (j = i + 1; j < n && rows[j] / c->chunk_rows == gr; j++)
			;
		int rc = copy_chunk_row(cc, id, gr, rows + i, 0, j - i, to + i,
					NULL);
		if (rc != 0)
			return rc;
	}
	return 0;
}
