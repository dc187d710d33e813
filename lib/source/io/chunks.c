/* SPDX-License-Identifier: MIT */
#include "source/io/chunks.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/bigbuf.h"

#define BUCKETS 4096

/* A decoded unit (a chunk, or a part of one) of a registered array. */
struct unit {
	uint64_t id,
		index; /* the array; the row of units x grid_cols + column */
	unsigned refs;
	int loading, error; /* error: load()'s, once loaded */
	void *data; /* from rfs_bigbuf_alloc() */
	size_t len;
	struct unit *next; /* in its bucket */
	struct unit *lru_prev, *lru_next; /* listed only while refs == 0 */
};

struct rfs_chunk_cache {
	struct rfs_bigbuf *pool; /* the units' buffers; outlives the cache */
	size_t keep; /* of the share, what reservations leave to chunks */
	struct rfs_chunked *sets; /* registry; read-only after mount */
	size_t count, cap;
	pthread_mutex_t lock;
	pthread_cond_t loaded;
	pthread_cond_t room; /* a unit was put back, or memory freed */
	/* All below protected by lock. */
	size_t limit; /* the share less reservations: the units' */
	size_t bytes; /* of every unit, loaded or not, and loads' scratch */
	struct unit *buckets[BUCKETS];
	struct unit lru; /* sentinel: next is the most recent */
	uint64_t next_ticket, turn; /* loads take room in the order asked */
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

static size_t bucket_of(uint64_t id, uint64_t index)
{
	return (index ^ id << 44) * UINT64_C(0x9E3779B97F4A7C15) >> 52;
}

static void lru_unlink(struct unit *u)
{
	u->lru_prev->lru_next = u->lru_next;
	u->lru_next->lru_prev = u->lru_prev;
}

static void unlist(struct rfs_chunk_cache *cc, struct unit *u)
{
	struct unit **p = &cc->buckets[bucket_of(u->id, u->index)];
	while (*p != u)
		p = &(*p)->next;
	*p = u->next;
}

/* Unlists and frees u, a unit nobody holds, and its buffer. */
static void drop(struct rfs_chunk_cache *cc, struct unit *u)
{
	lru_unlink(u);
	unlist(cc, u);
	cc->bytes -= rfs_bigbuf_footprint(u->len);
	rfs_bigbuf_free(cc->pool, u->data, u->len);
	free(u);
}

static struct unit *oldest(struct rfs_chunk_cache *cc)
{
	return cc->lru.lru_prev != &cc->lru ? cc->lru.lru_prev : NULL;
}

/* Drops units nobody holds, least recently used first, until need more
 * bytes fit in the limit or none is left. @return whether they fit. */
static int make_room(struct rfs_chunk_cache *cc, size_t need)
{
	struct unit *victim;
	while (cc->bytes + need > cc->limit && (victim = oldest(cc)))
		drop(cc, victim);
	return cc->bytes + need <= cc->limit;
}

static void set_limit(struct rfs_chunk_cache *cc, size_t limit)
{
	pthread_mutex_lock(&cc->lock);
	cc->limit = limit;
	make_room(cc, 0);
	pthread_mutex_unlock(&cc->lock);
}

/* Loads u, new and referenced by the caller, with the lock held, which
 * it drops meanwhile. */
static void load_locked(struct rfs_chunk_cache *cc, struct unit *u)
{
	const struct rfs_chunked *c = &cc->sets[u->id];
	/* Unit row ur's first row, in chunk row gr. */
	uint64_t ur = u->index / c->grid_cols, upc = units_per_chunk(c);
	uint64_t gr = ur / upc, row_bytes = c->chunk_cols * c->elem;
	struct unit_row r =
		unit_row_of(c, gr * c->chunk_rows + ur % upc * unit_rows(c));
	uint64_t k = gr * c->grid_cols + u->index % c->grid_cols;
	size_t len = r.rows * row_bytes, chunk = c->chunk_rows * row_bytes;
	size_t scratch = c->scratch   ? c->scratch(c->ctx, k) :
			 c->part_rows ? 2 * chunk :
					chunk;
	size_t need = rfs_bigbuf_footprint(len) + scratch;
	/* Room first, holding nothing else. What is left once nothing is
	 * evictable is held or being loaded, and comes back when put; with
	 * nothing left, one unit bigger than the limit goes ahead alone. In
	 * turn: small loads that fit do not overtake a big one forever. */
	uint64_t ticket = cc->next_ticket++;
	while (ticket != cc->turn || (!make_room(cc, need) && cc->bytes > 0))
		pthread_cond_wait(&cc->room, &cc->lock);
	cc->turn++;
	cc->bytes += need;
	if (cc->next_ticket != cc->turn)
		pthread_cond_broadcast(&cc->room); /* the next in line */
	pthread_mutex_unlock(&cc->lock);
	void *data = rfs_bigbuf_alloc(cc->pool, len);
	int rc = data ? c->load(c->ctx, k,
				(r.first - gr * c->chunk_rows) * row_bytes,
				data, len) :
			-ENOMEM;
	pthread_mutex_lock(&cc->lock);
	u->loading = 0;
	u->error = rc;
	cc->bytes -= scratch;
	if (rc == 0) {
		u->data = data;
		u->len = len;
	} else { /* unlisted: new gets try again, waiters see the error */
		unlist(cc, u);
		cc->bytes -= rfs_bigbuf_footprint(len);
		rfs_bigbuf_free(cc->pool, data, len);
	}
	pthread_cond_broadcast(&cc->room);
	pthread_cond_broadcast(&cc->loaded);
}

/* Unit index of array id, referenced: loaded if absent, or waited for
 * while another get loads it. @return 0 with *out set, or load()'s error
 * (a failed load is not kept: the next get tries again). */
static int get(struct rfs_chunk_cache *cc, uint64_t id, uint64_t index,
	       struct unit **out)
{
	size_t b = bucket_of(id, index);
	int loads = 0;
	pthread_mutex_lock(&cc->lock);
	struct unit *u = cc->buckets[b];
	while (u && (u->id != id || u->index != index))
		u = u->next;
	if (u) {
		if (u->refs++ == 0)
			lru_unlink(u); /* loaded and unused until now */
		while (u->loading)
			pthread_cond_wait(&cc->loaded, &cc->lock);
	} else if ((u = malloc(sizeof(*u)))) {
		*u = (struct unit){ .id = id,
				    .index = index,
				    .refs = 1,
				    .loading = 1,
				    .next = cc->buckets[b] };
		cc->buckets[b] = u;
		load_locked(cc, u);
		loads = 1;
	}
	int rc = u ? u->error : -ENOMEM;
	if (rc != 0 && u && --u->refs == 0)
		free(u);
	pthread_mutex_unlock(&cc->lock);
	if (loads)
		rfs_bigbuf_trim(); /* its temporaries freed */
	*out = rc == 0 ? u : NULL;
	return rc;
}

/* Puts u back: unused, it is kept within the limit, least recently used
 * first out, but one bigger than the limit stays while it is all there is
 * (a load that needs the room evicts it). */
static void put(struct rfs_chunk_cache *cc, struct unit *u)
{
	pthread_mutex_lock(&cc->lock);
	if (--u->refs == 0) {
		u->lru_next = cc->lru.lru_next;
		u->lru_prev = &cc->lru;
		cc->lru.lru_next->lru_prev = u;
		cc->lru.lru_next = u;
		struct unit *victim;
		while (cc->bytes > cc->limit && (victim = oldest(cc)) &&
		       rfs_bigbuf_footprint(victim->len) < cc->bytes)
			drop(cc, victim);
		pthread_cond_broadcast(&cc->room); /* evictable now */
	}
	pthread_mutex_unlock(&cc->lock);
}

int rfs_chunks_create(size_t capacity, struct rfs_bigbuf *pool,
		      struct rfs_chunk_cache **out)
{
	struct rfs_chunk_cache *cc = calloc(1, sizeof(*cc));
	if (!cc)
		return -ENOMEM;
	/* Chunked files of a dataset whose other files are mapped. */
	cc->limit = capacity;
	cc->keep = capacity / 8;
	pthread_mutex_init(&cc->lock, NULL);
	pthread_cond_init(&cc->loaded, NULL);
	pthread_cond_init(&cc->room, NULL);
	cc->lru.lru_next = cc->lru.lru_prev = &cc->lru;
	cc->pool = pool;
	*out = cc;
	return 0;
}

int rfs_chunks_reserve(struct rfs_chunk_cache *cc, size_t bytes)
{
	size_t limit = cc->limit; /* set once, at mount: no lock */
	if (bytes > limit || limit - bytes < cc->keep)
		return -ENOSPC;
	set_limit(cc, limit - bytes);
	return 0;
}

void rfs_chunks_limit(struct rfs_chunk_cache *cc, size_t capacity)
{
	cc->keep = capacity / 8;
	set_limit(cc, capacity);
}

void rfs_chunks_drop(struct rfs_chunk_cache *cc)
{
	struct unit *victim;
	pthread_mutex_lock(&cc->lock);
	while ((victim = oldest(cc)))
		drop(cc, victim);
	pthread_mutex_unlock(&cc->lock);
}

void rfs_chunks_destroy(struct rfs_chunk_cache *cc)
{
	if (!cc)
		return;
	for (size_t i = 0; i < BUCKETS; i++) {
		for (struct unit *u = cc->buckets[i], *next; u; u = next) {
			next = u->next;
			rfs_bigbuf_free(cc->pool, u->data, u->len);
			free(u);
		}
	}
	pthread_cond_destroy(&cc->loaded);
	pthread_cond_destroy(&cc->room);
	pthread_mutex_destroy(&cc->lock);
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
		if (!sets)
			return -ENOMEM;
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
		struct unit *e;
		int rc = get(cc, id, u.index * c->grid_cols + gc, &e);
		if (rc != 0)
			return rc;
		const unsigned char *unit = e->data;
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
		put(cc, e);
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
