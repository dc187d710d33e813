/* Bounded cache of generated files, with shared generation.
 *
 * rfs_cache_get() returns a referenced entry; every get is paired with one
 * rfs_cache_put(). The first get of a key calls fill() outside the lock;
 * concurrent gets of the same key wait for that one generation instead of
 * starting their own. Unreferenced entries are kept in LRU order while the
 * total stays within the capacity; referenced entries are never evicted, so
 * memory is at most capacity plus what readers hold at that moment. A failed
 * fill is not cached: the next get tries again. Thread-safe. */
#ifndef RFS_CACHE_H
#define RFS_CACHE_H

#include <stddef.h>
#include <stdint.h>

struct rfs_cache_key {
	uint64_t epoch;
	uint64_t rank;
	uint64_t batch;
	uint64_t kind;
};

/* Builds the bytes of key into a buffer from rfs_bigbuf_alloc(*len), owned
 * by the cache afterwards. On failure it leaves nothing allocated.
 * @return 0 or a negative errno. */
typedef int (*rfs_cache_fill_fn)(void *ctx, const struct rfs_cache_key *key,
				 void **data, size_t *len);

struct rfs_cache;
struct rfs_cache_entry;

int rfs_cache_create(size_t capacity, rfs_cache_fill_fn fill, void *ctx,
		     struct rfs_cache **out);

/* All entries must have been put back. Accepts NULL. */
void rfs_cache_destroy(struct rfs_cache *c);

/* @return 0 with *out referenced, or fill()'s error. */
int rfs_cache_get(struct rfs_cache *c, const struct rfs_cache_key *key,
		  struct rfs_cache_entry **out);

void rfs_cache_put(struct rfs_cache *c, struct rfs_cache_entry *e);

/* The entry's bytes: valid while the entry is referenced. */
const void *rfs_cache_entry_data(const struct rfs_cache_entry *e);
size_t rfs_cache_entry_size(const struct rfs_cache_entry *e);

struct rfs_cache_counters {
	uint64_t hits; /* gets served by an existing or pending entry */
	uint64_t misses; /* gets that ran fill() */
	uint64_t bytes; /* bytes held now */
	uint64_t entries;
};

void rfs_cache_counters(struct rfs_cache *c, struct rfs_cache_counters *out);

#endif
