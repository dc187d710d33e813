/* SPDX-License-Identifier: MIT */
#include "serve/cache.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "core/bigbuf.h"

#define BUCKETS 4096
/* Retired entries keep at most this fraction of the capacity. */
#define RETIRED_SHARE 8

enum state { FILLING, READY };

struct rfs_cache_entry {
	struct rfs_cache_key key;
	enum state state;
	int error; /* set with state READY when fill failed */
	unsigned refs;
	void *data; /* from rfs_cache_fill_buffer(), counted from then on */
	size_t len;
	int retired; /* its file was closed: see rfs_cache_retire() */
	struct rfs_cache_entry *next_in_bucket;
	/* In lru or retired (by the flag above) only when refs == 0. */
	struct rfs_cache_entry *lru_prev, *lru_next;
};

struct rfs_cache {
	size_t capacity;
	rfs_cache_fill_fn fill;
	void *ctx;
	struct rfs_bigbuf *pool; /* borrowed: entries' buffers */
	pthread_mutex_t lock;
	pthread_cond_t filled;
	pthread_cond_t room; /* an entry was put back or a fill failed */
	/* All below protected by lock. */
	struct rfs_cache_entry *buckets[BUCKETS];
	struct rfs_cache_entry lru; /* sentinel: next is most recent */
	struct rfs_cache_entry retired; /* sentinel: next retired last */
	size_t bytes; /* of every entry with a buffer, being filled or not */
	size_t retired_bytes, retired_limit; /* of the retired list */
	uint64_t entries, hits, misses, prefetched, room_waits;
	uint64_t next_ticket, turn; /* fills take room in the order asked */
};

int rfs_cache_create(size_t capacity, rfs_cache_fill_fn fill, void *ctx,
		     struct rfs_bigbuf *pool, struct rfs_cache **out)
{
	struct rfs_cache *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->capacity = capacity;
	c->fill = fill;
	c->ctx = ctx;
	c->pool = pool;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->filled, NULL);
	pthread_cond_init(&c->room, NULL);
	c->lru.lru_next = c->lru.lru_prev = &c->lru;
	c->retired.lru_next = c->retired.lru_prev = &c->retired;
	c->retired_limit = capacity / RETIRED_SHARE;
	*out = c;
	return 0;
}

static size_t bucket_of(const struct rfs_cache_key *k)
{
	return XXH3_64bits(k, sizeof(*k)) % BUCKETS;
}

static void lru_unlink(struct rfs_cache_entry *e)
{
	e->lru_prev->lru_next = e->lru_next;
	e->lru_next->lru_prev = e->lru_prev;
	e->lru_prev = e->lru_next = NULL;
}

/* The memory an entry holds (its buffer's, from bigbuf.c). */
static size_t held(const struct rfs_cache_entry *e)
{
	return rfs_bigbuf_footprint(e->len);
}

static void push_front(struct rfs_cache_entry *list, struct rfs_cache_entry *e)
{
	e->lru_next = list->lru_next;
	e->lru_prev = list;
	list->lru_next->lru_prev = e;
	list->lru_next = e;
}

/* An entry nobody holds joins its list: retired ones leave first. */
static void park(struct rfs_cache *c, struct rfs_cache_entry *e)
{
	push_front(e->retired ? &c->retired : &c->lru, e);
	if (e->retired)
		c->retired_bytes += held(e);
}

/* Takes a parked entry off its list. */
static void unpark(struct rfs_cache *c, struct rfs_cache_entry *e)
{
	lru_unlink(e);
	if (e->retired)
		c->retired_bytes -= held(e);
}

static void table_remove(struct rfs_cache *c, struct rfs_cache_entry *e)
{
	struct rfs_cache_entry **p = &c->buckets[bucket_of(&e->key)];
	while (*p != e)
		p = &(*p)->next_in_bucket;
	*p = e->next_in_bucket;
}

/* Unlists and frees e, a parked entry, and its buffer. */
static void drop(struct rfs_cache *c, struct rfs_cache_entry *e)
{
	unpark(c, e);
	table_remove(c, e);
	c->bytes -= held(e);
	c->entries--;
	rfs_bigbuf_free(c->pool, e->data, e->len);
	free(e);
}

/* The oldest entry of list, or NULL when it is empty. */
static struct rfs_cache_entry *oldest(struct rfs_cache_entry *list)
{
	return list->lru_prev != list ? list->lru_prev : NULL;
}

/* The next entry to evict: the oldest retired, else the oldest unused. */
static struct rfs_cache_entry *next_victim(struct rfs_cache *c)
{
	struct rfs_cache_entry *victim = oldest(&c->retired);
	return victim ? victim : oldest(&c->lru);
}

/* Drops unreferenced entries, retired ones first, until need more bytes
 * fit in the capacity or none is left. @return whether they fit. */
static int make_room(struct rfs_cache *c, size_t need)
{
	struct rfs_cache_entry *victim;
	while (c->bytes + need > c->capacity && (victim = next_victim(c)))
		drop(c, victim);
	return c->bytes + need <= c->capacity;
}

/* Keeps the capacity. An entry bigger than it stays while it is all the
 * cache holds: a file read in many requests is generated once per open,
 * not once per request. A fill that needs the room evicts it, as does
 * retiring it. */
static void evict(struct rfs_cache *c)
{
	struct rfs_cache_entry *victim;
	while (c->retired_bytes > c->retired_limit &&
	       (victim = oldest(&c->retired)))
		drop(c, victim);
	while (c->bytes > c->capacity && (victim = next_victim(c)) &&
	       held(victim) < c->bytes)
		drop(c, victim);
}

void rfs_cache_destroy(struct rfs_cache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < BUCKETS; i++) {
		struct rfs_cache_entry *e = c->buckets[i];
		while (e) {
			struct rfs_cache_entry *next = e->next_in_bucket;
			rfs_bigbuf_free(c->pool, e->data, e->len);
			free(e);
			e = next;
		}
	}
	pthread_cond_destroy(&c->filled);
	pthread_cond_destroy(&c->room);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static struct rfs_cache_entry *find(struct rfs_cache *c,
				    const struct rfs_cache_key *k)
{
	struct rfs_cache_entry *e = c->buckets[bucket_of(k)];
	while (e && memcmp(&e->key, k, sizeof(*k)) != 0)
		e = e->next_in_bucket;
	return e;
}

/* Called with the lock held and e referenced by the caller. */
static void release_locked(struct rfs_cache *c, struct rfs_cache_entry *e)
{
	if (--e->refs > 0)
		return;
	park(c, e);
	evict(c);
	pthread_cond_broadcast(&c->room); /* evictable now */
}

struct rfs_cache_fill {
	struct rfs_cache *cache;
	struct rfs_cache_entry *entry;
	size_t scratch; /* counted in bytes until the fill returns */
};

void *rfs_cache_fill_buffer(struct rfs_cache_fill *f, size_t len,
			    size_t scratch)
{
	struct rfs_cache *c = f->cache;
	struct rfs_cache_entry *e = f->entry;
	size_t footprint = rfs_bigbuf_footprint(len);
	size_t need = footprint + scratch;
	pthread_mutex_lock(&c->lock);
	if (e->data) {
		pthread_mutex_unlock(&c->lock);
		return NULL;
	}
	/* What is left once nothing is evictable is held or being filled,
	 * and comes back when put; with nothing left, one entry bigger than
	 * the capacity goes ahead alone. In turn: small fills that fit do
	 * not overtake a big one forever. */
	uint64_t ticket = c->next_ticket++;
	int waited = 0;
	while (ticket != c->turn || (!make_room(c, need) && c->bytes > 0)) {
		c->room_waits += !waited;
		waited = 1;
		pthread_cond_wait(&c->room, &c->lock);
	}
	c->turn++;
	c->bytes += need;
	if (c->next_ticket != c->turn)
		pthread_cond_broadcast(&c->room); /* the next in line */
	pthread_mutex_unlock(&c->lock);
	/* Pooled (bigbuf.c), else mapped: outside the lock. */
	void *data = rfs_bigbuf_alloc(c->pool, len);
	pthread_mutex_lock(&c->lock);
	f->scratch = scratch;
	if (data) {
		e->data = data;
		e->len = len;
	} else {
		c->bytes -= footprint;
		pthread_cond_broadcast(&c->room);
	}
	pthread_mutex_unlock(&c->lock);
	return data;
}

/* Runs fill() for e, a new entry referenced by the caller. Called with the
 * lock held, which it drops meanwhile. */
static void fill_locked(struct rfs_cache *c, struct rfs_cache_entry *e)
{
	struct rfs_cache_fill f = { .cache = c, .entry = e };
	pthread_mutex_unlock(&c->lock);
	int rc = c->fill(c->ctx, &e->key, &f);
	pthread_mutex_lock(&c->lock);
	e->state = READY;
	e->error = rc;
	if (f.scratch) { /* the temporaries are freed */
		c->bytes -= f.scratch;
		pthread_cond_broadcast(&c->room);
	}
	if (rc != 0) {
		/* Unlisted now, so new gets retry; waiters still hold
		 * references and see the error. */
		table_remove(c, e);
		c->entries--;
		if (e->data) {
			c->bytes -= held(e);
			rfs_bigbuf_free(c->pool, e->data, e->len);
			e->data = NULL;
			e->len = 0;
			pthread_cond_broadcast(&c->room);
		}
	}
	pthread_cond_broadcast(&c->filled);
	if (f.scratch) { /* outside the lock, once its waiters have it */
		pthread_mutex_unlock(&c->lock);
		rfs_bigbuf_trim();
		pthread_mutex_lock(&c->lock);
	}
}

/* A new entry for key, being filled, referenced once. */
static struct rfs_cache_entry *insert(struct rfs_cache *c,
				      const struct rfs_cache_key *key)
{
	struct rfs_cache_entry *e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->key = *key;
	e->state = FILLING;
	e->refs = 1;
	size_t b = bucket_of(key);
	e->next_in_bucket = c->buckets[b];
	c->buckets[b] = e;
	c->entries++;
	return e;
}

int rfs_cache_get(struct rfs_cache *c, const struct rfs_cache_key *key,
		  struct rfs_cache_entry **out, enum rfs_cache_found *found)
{
	enum rfs_cache_found unasked;
	found = found ? found : &unasked;
	pthread_mutex_lock(&c->lock);
	struct rfs_cache_entry *e = find(c, key);
	if (e) {
		c->hits++;
		*found = e->state == READY ? RFS_CACHE_READY : RFS_CACHE_WAITED;
		if (e->refs++ == 0 && e->state == READY)
			unpark(c, e);
		e->retired = 0; /* read again: in use after all */
		while (e->state == FILLING)
			pthread_cond_wait(&c->filled, &c->lock);
	} else {
		c->misses++;
		*found = RFS_CACHE_FILLED;
		e = insert(c, key);
		if (!e) {
			pthread_mutex_unlock(&c->lock);
			*out = NULL;
			return -ENOMEM;
		}
		fill_locked(c, e);
	}
	int rc = e->error;
	if (rc != 0) {
		if (--e->refs == 0)
			free(e);
		e = NULL;
	}
	pthread_mutex_unlock(&c->lock);
	*out = e;
	return rc;
}

void rfs_cache_warm(struct rfs_cache *c, const struct rfs_cache_key *key)
{
	pthread_mutex_lock(&c->lock);
	/* Looked up and inserted under one lock: a reader's get in between
	 * would otherwise be undone as a retirement. */
	struct rfs_cache_entry *e = find(c, key) ? NULL : insert(c, key);
	if (e) {
		c->prefetched++;
		fill_locked(c, e);
		if (e->error == 0) {
			release_locked(c, e);
		} else if (--e->refs == 0) {
			free(e);
		}
	}
	pthread_mutex_unlock(&c->lock);
}

void rfs_cache_retire(struct rfs_cache *c, const struct rfs_cache_key *key)
{
	pthread_mutex_lock(&c->lock);
	struct rfs_cache_entry *e = find(c, key);
	if (e && e->state == READY && !e->retired) {
		if (e->refs == 0)
			lru_unlink(e); /* from the ordinary list */
		e->retired = 1;
		if (e->refs == 0) /* else when its holder puts it */
			park(c, e);
		evict(c);
	}
	pthread_mutex_unlock(&c->lock);
}

void rfs_cache_put(struct rfs_cache *c, struct rfs_cache_entry *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&c->lock);
	release_locked(c, e);
	pthread_mutex_unlock(&c->lock);
}

const void *rfs_cache_entry_data(const struct rfs_cache_entry *e)
{
	return e->data;
}

size_t rfs_cache_entry_size(const struct rfs_cache_entry *e)
{
	return e->len;
}

void rfs_cache_counters(struct rfs_cache *c, struct rfs_cache_counters *out)
{
	pthread_mutex_lock(&c->lock);
	*out = (struct rfs_cache_counters){ .hits = c->hits,
					    .misses = c->misses,
					    .prefetched = c->prefetched,
					    .bytes = c->bytes,
					    .entries = c->entries,
					    .room_waits = c->room_waits };
	pthread_mutex_unlock(&c->lock);
}
