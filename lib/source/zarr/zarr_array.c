/* SPDX-License-Identifier: MIT */
/*
 * Chunks of one zarr array. Rows are served from "inner" chunks: a chunk
 * file's whole content, or, when sharded, one chunk inside a shard file,
 * found by the shard's index (a pair of little-endian uint64 offset and
 * size per inner chunk, all ones when absent, with a CRC-32C after it
 * when the index codecs say so) and read alone with pread.
 *
 * A shard's index is 16 bytes per inner chunk, fixed per array by its
 * metadata (2^24 inner chunks: 256 MiB), so its memory is settled at
 * mount: one buffer an index is read into, whole, one read at a time,
 * claimed at open against the memory limit (memlimit.h; over it, the
 * mount fails naming the store and array), and, for a served array,
 * indexes kept once read in bytes taken from the decoded chunks' share of
 * cache_mb, up to INDEX_CACHE_MAX (rfs_zarr_array_keep_indexes). A read
 * of a shard whose index is not kept waits for the buffer, which holds
 * the last index read.
 *
 * Files are opened per read, so a mount holds no descriptors for its
 * chunks. A read checks the file it opened before and after the pread
 * against its identity at mount (zarr_files.c), and a batch first checks
 * by name the files its rows are in (a chunk already decoded in the LRU is
 * served without opening its file).
 */
#include "source/zarr/zarr.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/bigbuf.h"
#include "source/io/beneath.h"
#include "source/io/chunks.h"
#include "source/io/fetch.h"
#include "core/log.h"
#include "os/memlimit.h"
#include "os/watch.h"

/* Shard indexes (and zarr_meta.c's little-endian data) are used in
 * place: a big-endian host would need swaps rankfs does not make. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "the zarr backend assumes a little-endian host");

#define INDEX_CACHE_MAX (64u << 20)
#define ABSENT UINT64_MAX
#define FILES_MAX (UINT64_C(1) << 24)
/* Decoded chunks are 2 GiB at most (zarr_meta.c); codecs add little. */
#define STORED_MAX ((UINT64_C(1) << 31) + (UINT64_C(1) << 20))

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
	return a / b + (a % b != 0);
}

int rfs_zarr_array_open(const struct rfs_zarr_store *st, const char *path,
			atomic_int *changed, struct rfs_zarr_array *a,
			char *err, size_t errlen)
{
	json_t *meta = NULL, *attrs = NULL;
	char what[4200];
	*a = (struct rfs_zarr_array){ 0 };
	a->store = st->root;
	a->store_fd = st->root_fd;
	a->changed = changed;
	snprintf(what, sizeof(what), "%s: array %s", st->root,
		 path[0] ? path : "/");
	int kind = rfs_zarr_node(st, path, &meta, &attrs, &a->meta_file, err,
				 errlen);
	int rc = kind < 0 ? kind : 0;
	if (kind == 0 || kind == 2) {
		snprintf(err, errlen, "%s: %s %s", st->root, path,
			 kind ? "is a group, not an array" :
				(st->v3 ? "not found (no zarr.json)" :
					  "not found (no .zarray)"));
		rc = -EINVAL;
	}
	if (rc == 0)
		rc = rfs_zarr_meta_parse(meta, st->v3, what, &a->m, err,
					 errlen);
	json_decref(meta);
	json_decref(attrs);
	if (rc != 0)
		return rc;
	if (asprintf(&a->dir, "%s%s%s", st->root, path[0] ? "/" : "", path) <
	    0) {
		a->dir = NULL;
		return -ENOMEM;
	}
	a->name = strdup(path[0] ? path : "/"); /* the root: a lone array */
	if (!a->name || pthread_mutex_init(&a->lock, NULL) != 0)
		return -ENOMEM;
	if (pthread_mutex_init(&a->read_lock, NULL) != 0) {
		pthread_mutex_destroy(&a->lock);
		return -ENOMEM;
	}
	a->lock_init = 1;
	for (int d = 0; d < 2; d++) {
		a->grid[d] = ceil_div(a->m.shape[d], a->m.chunk[d]);
		a->per[d] = a->m.chunk[d] / a->m.inner[d];
		a->igrid[d] = a->grid[d] * a->per[d];
	}
	/* Each is looked at at mount (rfs_zarr_array_watch); a shard's
	 * index is read whole. */
	uint64_t files = a->grid[0] * a->grid[1];
	if (a->grid[0] > FILES_MAX || a->grid[1] > FILES_MAX ||
	    files > FILES_MAX || a->per[0] > FILES_MAX ||
	    a->per[1] > FILES_MAX || a->per[0] * a->per[1] > FILES_MAX) {
		snprintf(err, errlen,
			 "%s: over %llu chunk files, or inner chunks in a "
			 "shard: use bigger chunks",
			 what, (unsigned long long)FILES_MAX);
		return -ENOTSUP;
	}
	if (a->m.sharded && files > 0) {
		a->index = calloc(files, sizeof(*a->index));
		if (!a->index)
			return -ENOMEM;
		/* The buffer of one index read (its CRC's 4 bytes aside). */
		char claim[1200];
		snprintf(claim, sizeof(claim), "%s (a shard's index)", a->name);
		a->claims = st->claims;
		return rfs_memlimit_claim(a->claims, st->root, claim,
					  a->per[0] * a->per[1], 16,
					  &a->index_claimed, err, errlen);
	}
	return 0;
}

/* A shard index's bytes: 16 per inner chunk, and its CRC-32C. */
static size_t shard_index_size(const struct rfs_zarr_array *a)
{
	return (size_t)(16 * a->per[0] * a->per[1]) + (a->m.index_crc ? 4 : 0);
}

void rfs_zarr_array_keep_indexes(struct rfs_zarr_array *a,
				 struct rfs_chunk_cache *cc)
{
	size_t each = shard_index_size(a);
	uint64_t files = a->grid[0] * a->grid[1];
	if (!a->m.sharded || each > INDEX_CACHE_MAX)
		return;
	uint64_t n = INDEX_CACHE_MAX / each < files ? INDEX_CACHE_MAX / each :
						      files;
	/* As many as the share leaves room for, beside its eighth kept for
	 * chunks. */
	while (n > 0 && rfs_chunks_reserve(cc, (size_t)n * each) != 0)
		n /= 2;
	a->index_cap = (size_t)n * each;
}

void rfs_zarr_array_close(struct rfs_zarr_array *a)
{
	if (a->index)
		for (uint64_t f = 0; f < a->grid[0] * a->grid[1]; f++)
			rfs_bigbuf_free(NULL, a->index[f], shard_index_size(a));
	free(a->index);
	rfs_bigbuf_free(NULL, a->index_buf, shard_index_size(a));
	rfs_memlimit_release(a->claims, &a->index_claimed);
	for (size_t i = 0; i < a->ndir_watches; i++)
		rfs_watch_forget(a->watch, a->dir_watches[i]);
	free(a->dir_watches);
	free(a->files);
	free(a->meta_file);
	free(a->name);
	free(a->dir);
	if (a->lock_init) {
		pthread_mutex_destroy(&a->lock);
		pthread_mutex_destroy(&a->read_lock);
	}
	*a = (struct rfs_zarr_array){ 0 };
}

/* Reads shard f's index into a->index_buf (unless it holds it), its crc
 * checked and every entry either absent or within the file. Under
 * read_lock. */
static int read_index(struct rfs_zarr_array *a, uint64_t f, int fd,
		      uint64_t size, char *why, size_t whylen)
{
	uint64_t n = a->per[0] * a->per[1];
	size_t len = (size_t)(16 * n), total = shard_index_size(a);
	if (a->index_buf_f == f + 1)
		return 0;
	if (size < total) {
		snprintf(why, whylen,
			 "is %llu bytes, shorter than its %zu-byte index",
			 (unsigned long long)size, total);
		return -EIO;
	}
	/* Kept for the mount's life: mapped where big (bigbuf.c), not in
	 * the heap between fills' temporaries (fs/main.c); not pooled. */
	if (!a->index_buf && !(a->index_buf = rfs_bigbuf_alloc(NULL, total)))
		return -ENOMEM;
	unsigned char *raw = a->index_buf;
	a->index_buf_f = 0;
	size_t got;
	int rc = rfs_fetch_pread_all(
		fd, raw, total, a->m.index_at_start ? 0 : size - total, &got);
	uint32_t crc;
	if (rc == 0 && a->m.index_crc) {
		memcpy(&crc, raw + len, 4);
		if (crc != rfs_zarr_crc32c(raw, len)) {
			snprintf(why, whylen,
				 "has an index failing its crc32c");
			rc = -EIO;
		}
	} else if (rc != 0) {
		snprintf(why, whylen, "index cannot be read (%s)",
			 strerror(-rc));
		rc = -EIO;
	}
	const uint64_t *idx = (const uint64_t *)raw; /* little-endian host */
	for (uint64_t k = 0; k < n && rc == 0; k++) {
		uint64_t off = idx[2 * k], nb = idx[2 * k + 1];
		if (off == ABSENT && nb == ABSENT)
			continue;
		if (off > size || nb > size - off) {
			snprintf(why, whylen,
				 "has an index entry for inner chunk %llu "
				 "(%llu bytes at %llu) past the end of the "
				 "file (%llu bytes)",
				 (unsigned long long)k, (unsigned long long)nb,
				 (unsigned long long)off,
				 (unsigned long long)size);
			rc = -EIO;
		}
	}
	if (rc == 0)
		a->index_buf_f = f + 1;
	return rc;
}

/* Inner chunk p's entry (offset, bytes) in shard f's index: kept, or read
 * into the array's one buffer (and kept where index_cap has room). */
static int shard_entry(struct rfs_zarr_array *a, uint64_t f, uint64_t p, int fd,
		       uint64_t size, uint64_t entry[2], char *why,
		       size_t whylen)
{
	size_t total = shard_index_size(a);
	pthread_mutex_lock(&a->lock);
	const uint64_t *kept = a->index[f];
	if (kept)
		memcpy(entry, kept + 2 * p, 16);
	pthread_mutex_unlock(&a->lock);
	if (kept)
		return 0;
	pthread_mutex_lock(&a->read_lock);
	int rc = read_index(a, f, fd, size, why, whylen);
	if (rc == 0) {
		const uint64_t *idx = (const uint64_t *)a->index_buf;
		memcpy(entry, idx + 2 * p, 16);
		pthread_mutex_lock(&a->lock);
		uint64_t *copy = NULL;
		if (!a->index[f] && a->index_bytes + total <= a->index_cap &&
		    (copy = rfs_bigbuf_alloc(NULL, total))) {
			memcpy(copy, idx, total);
			a->index[f] = copy;
			a->index_bytes += total;
		}
		pthread_mutex_unlock(&a->lock);
	}
	pthread_mutex_unlock(&a->read_lock);
	return rc;
}

/* The chunk (shard) file of inner chunk k: its position in the grid. */
static uint64_t file_of(const struct rfs_zarr_array *a, uint64_t k)
{
	uint64_t gi = k / a->igrid[1], gj = k % a->igrid[1];
	return gi / a->per[0] * a->grid[1] + gj / a->per[1];
}

/* Where one inner chunk's stored bytes lie. */
struct place {
	int fd; /* its file, open; -1: the chunk is absent */
	uint64_t f; /* the file's index in the grid */
	uint64_t off, len; /* the stored bytes within the file */
	char path[4200];
};

/* Opens the file of inner chunk k, checked against its identity at mount,
 * and finds the chunk in it (a shard's index). On success the caller
 * closes pl->fd when it is not -1. where: the file and chunk, for log
 * lines. */
static int locate(struct rfs_zarr_array *a, uint64_t k, struct place *pl,
		  char *where, size_t wherelen, char *why, size_t whylen)
{
	uint64_t gi = k / a->igrid[1], gj = k % a->igrid[1];
	uint64_t p = gi % a->per[0] * a->per[1] + gj % a->per[1];
	struct stat before;
	uint64_t entry[2];
	int rc = 0;
	pl->f = file_of(a, k);
	rfs_zarr_chunk_path(a, pl->f, pl->path, sizeof(pl->path));
	if (a->m.sharded)
		snprintf(where, wherelen, "shard %s, inner chunk %llu",
			 pl->path, (unsigned long long)p);
	else
		snprintf(where, wherelen, "chunk %s", pl->path);
	pl->fd = rfs_open_beneath(a->store_fd, a->store, pl->path);
	if (pl->fd < 0) {
		int why_not = -pl->fd;
		pl->fd = -1;
		if (why_not != ENOENT) {
			snprintf(why, whylen, "cannot be opened (%s)",
				 rfs_beneath_strerror(why_not));
			return -EIO;
		}
		if (a->watched && rfs_zarr_file_id(a, pl->f)->present) {
			rfs_zarr_log_changed(a, pl->path);
			snprintf(why, whylen, "was removed since the mount");
			return -EIO;
		}
		return 0; /* absent: fill_value */
	}
	if (fstat(pl->fd, &before) != 0) {
		snprintf(why, whylen, "cannot be looked at (%s)",
			 strerror(errno));
		rc = -EIO;
		goto out;
	}
	if (a->watched && !rfs_zarr_same_as_mount(a, rfs_zarr_file_id(a, pl->f),
						  pl->path, &before)) {
		snprintf(why, whylen, "changed since the mount");
		rc = -EIO;
		goto out;
	}
	if (!S_ISREG(before.st_mode)) {
		snprintf(why, whylen, "is not a regular file");
		rc = -EIO;
		goto out;
	}
	pl->off = 0;
	pl->len = (uint64_t)before.st_size;
	if (a->m.sharded) {
		rc = shard_entry(a, pl->f, p, pl->fd, (uint64_t)before.st_size,
				 entry, why, whylen);
		if (rc != 0)
			goto out;
		pl->off = entry[0];
		pl->len = entry[1];
		if (pl->off == ABSENT && pl->len == ABSENT) {
			close(pl->fd);
			pl->fd = -1;
			goto out;
		}
	}
	if (pl->len > STORED_MAX) { /* no chunk rankfs decodes is that big */
		snprintf(why, whylen,
			 "is %llu bytes, over the %llu a chunk may "
			 "take",
			 (unsigned long long)pl->len,
			 (unsigned long long)STORED_MAX);
		rc = -EIO;
	}
out:
	if (rc != 0) {
		close(pl->fd);
		pl->fd = -1;
	}
	return rc;
}

/* 0 when the file read is still as at mount, after the read. */
static int unchanged_after(struct rfs_zarr_array *a, const struct place *pl,
			   char *why, size_t whylen)
{
	struct stat after;
	if (a->watched &&
	    (fstat(pl->fd, &after) != 0 ||
	     !rfs_zarr_same_as_mount(a, rfs_zarr_file_id(a, pl->f), pl->path,
				     &after))) {
		snprintf(why, whylen, "changed while read");
		return -EIO;
	}
	return 0;
}

/* The stored bytes of inner chunk k (malloc'd), or *stored NULL when it
 * is absent. */
static int fetch(struct rfs_zarr_array *a, uint64_t k, unsigned char **stored,
		 size_t *n, char *where, size_t wherelen, char *why,
		 size_t whylen)
{
	struct place pl;
	*stored = NULL;
	int rc = locate(a, k, &pl, where, wherelen, why, whylen);
	if (rc != 0 || pl.fd < 0)
		return rc;
	*stored = malloc(pl.len ? pl.len : 1);
	if (!*stored) {
		close(pl.fd);
		return -ENOMEM;
	}
	size_t got;
	rc = rfs_fetch_pread_all(pl.fd, *stored, pl.len, pl.off, &got);
	if (rc != 0) {
		snprintf(why, whylen,
			 rc == -ENODATA ? "is truncated (%zu of %llu bytes)" :
					  "cannot be read (%zu of %llu bytes)",
			 got, (unsigned long long)pl.len);
		rc = -EIO;
	}
	*n = pl.len;
	if (rc == 0)
		rc = unchanged_after(a, &pl, why, whylen);
	close(pl.fd);
	if (rc != 0) {
		free(*stored);
		*stored = NULL;
	}
	return rc;
}

static void fill(const struct rfs_zarr_array *a, void *out, size_t len)
{
	unsigned char *o = out;
	for (size_t i = 0; i + a->m.elem <= len; i += a->m.elem)
		memcpy(o + i, a->m.fill, a->m.elem);
}

static void log_failure(const struct rfs_zarr_array *a, uint64_t k,
			const char *where, const char *why)
{
	static struct rfs_log_limit unowned = RFS_LOG_LIMIT_INIT;
	uint64_t gi = k / a->igrid[1];
	rfs_log_limited(a->failures ? a->failures : &unowned,
			"source %s array %s: %s (rows %llu..%llu) %s: not "
			"served",
			a->store, a->name, where,
			(unsigned long long)(gi * a->m.inner[0]),
			(unsigned long long)((gi + 1) * a->m.inner[0] - 1),
			why);
}

/* Bytes of a decoded inner chunk. */
static size_t decoded_bytes(const struct rfs_zarr_array *a)
{
	return a->m.inner[0] * a->m.inner[1] * a->m.elem;
}

/* The whole of decoded inner chunk k into out (out_len bytes). */
static int load_whole(struct rfs_zarr_array *a, uint64_t k, void *out,
		      size_t out_len)
{
	char where[4300], why[256] = "";
	unsigned char *stored;
	size_t n = 0;
	int rc = fetch(a, k, &stored, &n, where, sizeof(where), why,
		       sizeof(why));
	if (rc == 0 && !stored)
		fill(a, out, out_len);
	else if (rc == 0)
		rc = rfs_zarr_decode(&a->m.pipe, stored, n, a->m.elem, out_len,
				     out, NULL, NULL, why, sizeof(why));
	free(stored);
	if (rc == -EIO)
		log_failure(a, k, where, why);
	return rc;
}

/* A part of a stored chunk, for rfs_zarr_decode_part. */
static int read_stored(void *ctx, void *dst, size_t n, uint64_t off)
{
	const struct place *pl = ctx;
	size_t got;
	if (off > pl->len || n > pl->len - off)
		return 1;
	return rfs_fetch_pread_all(pl->fd, dst, n, pl->off + off, &got) == 0 ?
		       0 :
		       1;
}

/* Bytes [at, at + n) of decoded inner chunk k into out. */
static int read_part(struct rfs_zarr_array *a, uint64_t k, size_t at, size_t n,
		     unsigned char *out)
{
	size_t chunk_bytes = decoded_bytes(a);
	char where[4300], why[256] = "";
	struct place pl;
	int rc = locate(a, k, &pl, where, sizeof(where), why, sizeof(why));
	if (rc == 0 && pl.fd < 0) {
		fill(a, out, n);
		return 0;
	}
	if (rc == 0) {
		rc = rfs_zarr_decode_part(&a->m.pipe, a->m.elem, chunk_bytes,
					  pl.len, read_stored, &pl, at, n, out);
		if (rc == 0)
			rc = unchanged_after(a, &pl, why, sizeof(why));
		close(pl.fd);
	}
	if (rc == 1 && rfs_zarr_decoded_max(&a->m.pipe, pl.len) < chunk_bytes) {
		/* Not worth the whole chunk's allocation. */
		snprintf(why, sizeof(why),
			 "%llu stored bytes cannot decode to the %zu bytes of "
			 "its chunk's shape",
			 (unsigned long long)pl.len, chunk_bytes);
		rc = -EIO;
	}
	if (rc == 1) { /* not in part: the whole chunk */
		unsigned char *tmp = malloc(chunk_bytes);
		if (!tmp)
			return -ENOMEM;
		rc = load_whole(a, k, tmp, chunk_bytes);
		if (rc == 0)
			memcpy(out, tmp + at, n);
		free(tmp);
		return rc;
	}
	if (rc == -EIO)
		log_failure(a, k, where, why);
	return rc;
}

int rfs_zarr_array_load(void *ctx, uint64_t k, size_t at, void *out, size_t len)
{
	struct rfs_zarr_array *a = ctx;
	size_t chunk_bytes = decoded_bytes(a);
	if (at == 0 && len == chunk_bytes)
		return load_whole(a, k, out, len);
	return read_part(a, k, at, len, out);
}

uint64_t rfs_zarr_array_part_rows(struct rfs_zarr_array *a)
{
	size_t row = a->m.inner[1] * a->m.elem; /* of a chunk */
	size_t chunk_bytes = decoded_bytes(a);
	if (a->igrid[1] != 1 || a->m.kind == RFS_ZARR_STRING)
		return 0;
	/* The first chunk stored tells the codec's part size: a store's
	 * chunks are alike (a chunk that is not still reads right, in
	 * parts that cost more). A few absent ones are passed over. */
	for (uint64_t k = 0; k < a->igrid[0] && k < 16; k++) {
		char where[4300], why[256];
		struct place pl;
		if (locate(a, k, &pl, where, sizeof(where), why, sizeof(why)) !=
		    0)
			return 0;
		if (pl.fd < 0)
			continue;
		size_t part = rfs_zarr_part_bytes(&a->m.pipe, chunk_bytes,
						  pl.len, read_stored, &pl);
		close(pl.fd);
		return part >= row && part < chunk_bytes ? part / row : 0;
	}
	return 0;
}

/* Whether inner chunk k's file was absent when listed. */
static int listed_absent(const struct rfs_zarr_array *a, int listed, uint64_t k)
{
	return listed && !rfs_zarr_file_id(a, file_of(a, k))->present;
}

int rfs_zarr_array_read_all(struct rfs_zarr_array *a, void *dst)
{
	size_t row_bytes = a->m.shape[1] * a->m.elem;
	/* Only a chunk's rows within the array: a chunk longer than the
	 * array (its metadata may say 2 GiB for 40 rows) is read as that
	 * prefix, an absent one filled no further (rfs_zarr_array_load in
	 * part; a codec that cannot decodes the chunk whole, as before). */
	size_t inner_row = a->m.inner[1] * a->m.elem;
	size_t most = (a->m.shape[0] < a->m.inner[0] ? a->m.shape[0] :
						       a->m.inner[0]) *
		      inner_row;
	unsigned char *tmp = malloc(most ? most : 1);
	int rc = tmp ? 0 : -ENOMEM;
	int listed = rc == 0 && rfs_zarr_files_list(a);
	for (uint64_t k = 0; k < a->igrid[0] * a->igrid[1] && rc == 0; k++) {
		uint64_t r0 = k / a->igrid[1] * a->m.inner[0];
		uint64_t c0 = k % a->igrid[1] * a->m.inner[1];
		if (r0 >= a->m.shape[0] || c0 >= a->m.shape[1])
			continue; /* a shard's padding past the array */
		uint64_t nr = a->m.shape[0] - r0 < a->m.inner[0] ?
				      a->m.shape[0] - r0 :
				      a->m.inner[0];
		if (listed_absent(a, listed, k))
			fill(a, tmp, nr * inner_row);
		else
			rc = rfs_zarr_array_load(a, k, 0, tmp, nr * inner_row);
		uint64_t nc = a->m.shape[1] - c0 < a->m.inner[1] ?
				      a->m.shape[1] - c0 :
				      a->m.inner[1];
		for (uint64_t r = 0; r < nr && rc == 0; r++)
			memcpy((unsigned char *)dst + (r0 + r) * row_bytes +
				       c0 * a->m.elem,
			       tmp + r * a->m.inner[1] * a->m.elem,
			       nc * a->m.elem);
	}
	free(tmp);
	return rc;
}

int rfs_zarr_array_read_strings(struct rfs_zarr_array *a, char ***strings)
{
	uint64_t rows = a->m.shape[0];
	char **s = calloc(rows ? rows : 1, sizeof(*s));
	int rc = s ? 0 : -ENOMEM;
	int listed = rc == 0 && rfs_zarr_files_list(a);
	char where[4300], why[256] = "";
	for (uint64_t k = 0; k < a->igrid[0] && rc == 0; k++) {
		uint64_t r0 = k * a->m.inner[0];
		if (r0 >= rows)
			break;
		uint64_t nr = rows - r0 < a->m.inner[0] ? rows - r0 :
							  a->m.inner[0];
		unsigned char *stored = NULL;
		void *dec = NULL;
		size_t n = 0, declen = 0;
		char **part = NULL;
		if (!listed_absent(a, listed, k))
			rc = fetch(a, k, &stored, &n, where, sizeof(where), why,
				   sizeof(why));
		if (rc == 0 && stored)
			rc = rfs_zarr_decode(&a->m.pipe, stored, n, 0, 0, NULL,
					     &dec, &declen, why, sizeof(why));
		if (rc == 0 && dec &&
		    (rc = rfs_zarr_vlen_utf8(dec, declen, nr, &part)) == -EIO)
			snprintf(why, sizeof(why),
				 "is not vlen-utf8 strings of %llu items",
				 (unsigned long long)a->m.inner[0]);
		for (uint64_t i = 0; i < nr && rc == 0; i++)
			if (!(s[r0 + i] = part ? part[i] : strdup("")))
				rc = -ENOMEM;
		free(part);
		free(dec);
		free(stored);
		if (rc == -EIO)
			log_failure(a, k, where, why);
	}
	if (rc != 0 && s) {
		rfs_buf_free_strings(s, rows);
		s = NULL;
	}
	*strings = s;
	return rc;
}
