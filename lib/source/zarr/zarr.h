/* SPDX-License-Identifier: MIT */
/*
 * The zarr backend, shared by its files: zarr_codec.c (decoding a stored
 * chunk: blosc, zstd, gzip/zlib, crc32c, byte order, vlen-utf8 framing),
 * zarr_meta.c (a store's nodes and an array's metadata, v2 and v3, with
 * jansson), zarr_files.c (an array's chunk files: listed, watched, their
 * identities and change checks), zarr_array.c (shard indexes, reads, the
 * loader of the mount's decoded-chunk LRU), zarr_source.c (open, describe,
 * rows) and zarr_obs.c (obs columns, var names).
 *
 * A directory store only, C order only. Everything here is thread-safe
 * once a source is open: reads open the chunk file they need, pread it
 * and decode in the calling thread.
 */
#ifndef RFS_ZARR_H
#define RFS_ZARR_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "core/dtype.h"
#include "source/backend.h"

struct rfs_chunk_cache;
struct rfs_column;

/* Bytes-to-bytes codecs. */
enum rfs_zarr_comp {
	RFS_ZARR_BLOSC,
	RFS_ZARR_ZSTD,
	RFS_ZARR_GZIP,
	RFS_ZARR_ZLIB,
	RFS_ZARR_CRC32C, /* 4 bytes of checksum after the data */
};
#define RFS_ZARR_COMPS_MAX 4

/* How one stored chunk (an inner chunk, when sharded) decodes. */
struct rfs_zarr_pipe {
	int big_endian; /* elements stored big-endian: swapped on decode */
	int strings; /* vlen-utf8 framing, not fixed-size elements */
	int ncomp;
	enum rfs_zarr_comp comp[RFS_ZARR_COMPS_MAX]; /* in encode order */
};

/* zarr_codec.c */
/* Decodes src (n stored bytes) through p's codecs, last applied first.
 * want > 0: the result must be exactly want bytes, written to dst (room
 * for want); want 0 (strings): *out is a malloc'd buffer of *outlen.
 * Byte order is swapped to little-endian for elements of elem bytes.
 * @return 0, -EIO with why set (what failed), -ENOMEM. */
int rfs_zarr_decode(const struct rfs_zarr_pipe *p, const void *src, size_t n,
		    size_t elem, size_t want, void *dst, void **out,
		    size_t *outlen, char *why, size_t whylen);
/* Reads n bytes at off of a stored chunk. @return 0, else the part
 * cannot be read so (the whole chunk is then read, and fails as it
 * does). */
typedef int (*rfs_zarr_read_fn)(void *ctx, void *dst, size_t n, uint64_t off);
/* Bytes [at, at + n) of a chunk that decodes to want bytes, decoding
 * only what holds them: for a pipe of blosc alone (zarr v2's default),
 * the blosc blocks they lie in, with only those blocks' stored bytes read
 * (through read, of a chunk of stored bytes). A range of an atlas's
 * values in a 3 MB chunk decodes about 512 KiB instead of the chunk.
 * Blocks stored out of order (blosc's threads) and chunks blosc stored
 * uncompressed read in part too. @return 0; 1 where this chunk cannot
 * (another codec, a malformed header or block table, a failed read or
 * decode): decode it whole, which says why; -ENOMEM. */
int rfs_zarr_decode_part(const struct rfs_zarr_pipe *p, size_t elem,
			 size_t want, uint64_t stored, rfs_zarr_read_fn read,
			 void *ctx, size_t at, size_t n, void *out);
/* The bytes of the parts rfs_zarr_decode_part() decodes one at a time
 * in a chunk of want bytes (stored bytes read through read): blosc's
 * block size, or 0 where the chunk does not decode in parts. */
size_t rfs_zarr_part_bytes(const struct rfs_zarr_pipe *p, size_t want,
			   uint64_t stored, rfs_zarr_read_fn read, void *ctx);
/* The most bytes stored bytes can decode to through p: what each
 * compressing stage's densest encoder makes of its input, at most
 * (saturating). A chunk whose shape holds more is not what an encoder
 * wrote. */
uint64_t rfs_zarr_decoded_max(const struct rfs_zarr_pipe *p, uint64_t stored);
/* CRC-32C (Castagnoli), as zarr v3's crc32c codec. */
uint32_t rfs_zarr_crc32c(const void *p, size_t n);
/* numcodecs' vlen-utf8 framing: int32 count, then per item int32 length
 * and bytes. Takes the first want items into *out (heap strings).
 * @return 0, -EIO (bad framing, fewer items), -ENOMEM. */
int rfs_zarr_vlen_utf8(const void *p, size_t n, uint64_t want, char ***out);

enum rfs_zarr_kind { RFS_ZARR_NUMBER, RFS_ZARR_BOOL, RFS_ZARR_STRING };

/* An array's metadata, v2 or v3. */
struct rfs_zarr_meta {
	int ndims; /* 1 or 2 */
	uint64_t shape[2]; /* shape[1] 1 when 1-D */
	uint64_t chunk[2]; /* of a chunk file: a shard's when sharded */
	uint64_t inner[2]; /* of a decoded chunk: chunk[] unless sharded */
	enum rfs_zarr_kind kind;
	enum rfs_dtype dtype; /* NUMBER; BOOL reads as RFS_UINT8 */
	size_t elem; /* bytes of an element; 0 for strings */
	struct rfs_zarr_pipe pipe; /* of a chunk (an inner chunk) */
	int sharded, index_at_start, index_crc;
	char sep; /* chunk key separator */
	int prefix_c; /* v3 default key encoding: "c/0/0" */
	unsigned char fill[8]; /* one element, little-endian */
};

/* A store: its root and, when consolidated, every node's metadata. */
struct rfs_zarr_store {
	char *root; /* absolute, no trailing slash */
	int root_fd; /* O_PATH of root (-1: no directory): beneath.h */
	int v3;
	json_t *consolidated; /* v2: .zmetadata's "metadata"; v3: the
			       * root's consolidated_metadata.metadata */
	json_t *root_meta; /* v3: the root zarr.json; v2: NULL */
	char *meta_file; /* the consolidated file, or NULL */
	struct rfs_claims *claims; /* the source's ledger (memlimit.h) */
};

/* zarr_meta.c */
/* The most bytes of a metadata file read (.zattrs, .zmetadata, ...),
 * its text and jansson's tree of it held at mount: docs/usage.md. */
#define RFS_ZARR_META_MAX (16 << 20)
/* 1 if dir is a zarr store (.zgroup, .zarray, .zmetadata or zarr.json). */
int rfs_zarr_is_store(const char *dir);
/* Opens the store at dir (absolute). @return 0, or -EINVAL/-ENOMEM with
 * err set and nothing to close. */
int rfs_zarr_store_open(const char *dir, struct rfs_zarr_store *st, char *err,
			size_t errlen);
void rfs_zarr_store_close(struct rfs_zarr_store *st);
/* The node at path ("" for the root, "X/data", no leading slash): *meta
 * its metadata (the .zarray/.zgroup, or zarr.json; NULL if none), *attrs
 * its attributes (may be NULL), both new references; *file the metadata
 * file read (malloc'd; the consolidated file when consolidated). meta and
 * file may be NULL: not wanted.
 * @return 1 array, 2 group, 0 absent, -ENOMEM, -EINVAL (bad JSON, or a
 * "." or ".." segment in path: err). */
int rfs_zarr_node(const struct rfs_zarr_store *st, const char *path,
		  json_t **meta, json_t **attrs, char **file, char *err,
		  size_t errlen);
/* A string attribute of attrs, or NULL. */
const char *rfs_zarr_attr_string(json_t *attrs, const char *key);
/* Parses an array's metadata. what names it in err ("STORE: array X").
 * @return 0, -ENOTSUP (codec, filter, order, dtype: err names it),
 * -EINVAL (malformed: err). */
int rfs_zarr_meta_parse(json_t *meta, int v3, const char *what,
			struct rfs_zarr_meta *m, char *err, size_t errlen);

/* A file's identity, kept from mount: any difference is a change. */
struct rfs_zarr_id {
	int present;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
};
void rfs_zarr_id_of(const struct stat *st, struct rfs_zarr_id *id);

/* A chunk file present at mount. */
struct rfs_zarr_file {
	uint64_t f; /* its position in the file grid */
	struct rfs_zarr_id id;
};

/* One array of a store, read by chunks. */
struct rfs_zarr_array {
	struct rfs_zarr_meta m;
	char *dir; /* absolute: the array's directory */
	char *name; /* in the store, for log lines: "X/data" */
	const char *store; /* borrowed: the store's root, for log lines */
	int store_fd; /* borrowed: the store's root_fd */
	uint64_t grid[2]; /* chunk (shard) files along each dimension */
	uint64_t per[2]; /* inner chunks per file along each dimension */
	uint64_t igrid[2]; /* inner chunks along each dimension */
	atomic_int *changed; /* borrowed: the source's sticky flag */
	/* borrowed: the source's limit on failure lines (NULL: one shared
	 * by arrays not served) */
	struct rfs_log_limit *failures;
	/* watched: the chunk files present at mount, by grid position
	 * (found by listing the array's directories, not by looking up
	 * every file the shape claims); absent ones are not listed */
	struct rfs_zarr_file *files;
	size_t nfiles;
	int watched; /* files and meta_id hold the mount's view */
	/* inotify watches of the array's directories in the mount's table
	 * watch (watch.h), or NULL (none could be added): each chunk file
	 * looked up instead */
	struct rfs_watch *watch;
	int *dir_watches;
	size_t ndir_watches;
	char *meta_file;
	struct rfs_zarr_id meta_id;
	pthread_mutex_t lock;
	uint64_t **index; /* per shard file: its index once kept; protected
			   * by lock */
	size_t index_bytes; /* protected by lock */
	/* Indexes kept at most: bytes taken from the chunk share
	 * (rfs_zarr_array_keep_indexes); 0 keeps none. */
	size_t index_cap;
	/* A shard's index is read whole into one buffer, one read at a
	 * time, its bytes claimed at open (memlimit.h) and released at
	 * close: index_buf holds shard index_buf_f - 1's (0: none);
	 * protected by read_lock */
	pthread_mutex_t read_lock;
	unsigned char *index_buf;
	uint64_t index_buf_f;
	uint64_t index_claimed;
	struct rfs_claims *claims; /* the store's, index_claimed's */
	int lock_init;
};

/* zarr_array.c */
/* Opens the array at path of st: metadata parsed, nothing read yet.
 * @return 0, -EINVAL (absent, a group, 0-D or 3-D), -ENOTSUP, -ENOMEM,
 * err set. */
int rfs_zarr_array_open(const struct rfs_zarr_store *st, const char *path,
			atomic_int *changed, struct rfs_zarr_array *a,
			char *err, size_t errlen);
void rfs_zarr_array_close(struct rfs_zarr_array *a);
/* Keeps a served sharded array's shard indexes once read, in bytes taken
 * from the decoded chunks' share of cache_mb (rfs_chunks_reserve): all of
 * them where they fit in 64 MiB and the share allows, else as many as do
 * (none: a read of a shard not kept reads its index again, unless it was
 * the last read). Call once, at mount, once the share is handed out
 * (rfs_chunks_limit()), before reads are served. */
void rfs_zarr_array_keep_indexes(struct rfs_zarr_array *a,
				 struct rfs_chunk_cache *cc);
/* Bytes [at, at + len) of decoded inner chunk k (row-major over igrid;
 * inner[0] x inner[1] x elem bytes) into out: the whole chunk, or a part
 * decoded alone where the codec can (rfs_zarr_decode_part). Absent chunks
 * read as fill_value. The loader of chunks.c; thread-safe. Failures
 * logged with store, array and chunk. @return 0, -EIO, -ENOMEM. */
int rfs_zarr_array_load(void *ctx, uint64_t k, size_t at, void *out,
			size_t len);
/* Rows of the parts the array's chunks decode in (chunks.h's part_rows):
 * the whole rows a blosc block holds, where chunks span the columns (a
 * part straddling two blocks is cut from both); else 0. Reads the first
 * stored chunk's header. */
uint64_t rfs_zarr_array_part_rows(struct rfs_zarr_array *a);
/* Reads a whole numeric or bool array (dst: shape[0] x shape[1] x elem
 * bytes), or a string array into *strings (shape[0] heap strings).
 * @return 0, -EIO (logged), -ENOMEM. */
int rfs_zarr_array_read_all(struct rfs_zarr_array *a, void *dst);
int rfs_zarr_array_read_strings(struct rfs_zarr_array *a, char ***strings);

/* zarr_files.c */
/* Watches the array's directories (inotify, in w) and records the identity of
 * the metadata and of every chunk file present, for
 * rfs_zarr_array_check() and the reads. Costs what the directories hold,
 * not what the shape claims: 2^24 chunk files claimed and none written
 * were 2^24 stats. @return 0, -ENOMEM, -EIO (err set). */
int rfs_zarr_array_watch(struct rfs_zarr_array *a, struct rfs_watch *w,
			 char *err, size_t errlen);
/* Checks the chunk files that hold rows [first, last] of a watched array
 * against their identity at mount: a difference sets the sticky flag
 * and is logged. With directory watches (a->dir_watches) any change in
 * the array's directories counts, whatever the rows: a caller checks
 * once per read rather than per row. Without, a stat of each file.
 * @return 0 or -EIO. */
int rfs_zarr_array_check(struct rfs_zarr_array *a, uint64_t first,
			 uint64_t last);
/* 0 when the metadata file is as at mount, else -EIO (flag set). */
int rfs_zarr_array_check_meta(struct rfs_zarr_array *a);
/* The path of the chunk (shard) file at grid position f into out. */
void rfs_zarr_chunk_path(const struct rfs_zarr_array *a, uint64_t f, char *out,
			 size_t n);
/* 1 when the array reads the file (dev, ino) as it was at mount,
 * through links too (a chunk file or the array's directory that is one):
 * its metadata, a chunk file listed, or its directory. */
int rfs_zarr_array_reads_file(const struct rfs_zarr_array *a, dev_t dev,
			      ino_t ino);
/* The identity at mount of chunk file f (present 0: absent, or not
 * listed). */
const struct rfs_zarr_id *rfs_zarr_file_id(const struct rfs_zarr_array *a,
					   uint64_t f);
/* Sets the sticky changed flag, logging path the first time. */
void rfs_zarr_log_changed(struct rfs_zarr_array *a, const char *path);
/* 1 when the file at path (stat by name, st NULL; or st given) is as id
 * records it at mount; else 0, the change logged. */
int rfs_zarr_same_as_mount(struct rfs_zarr_array *a,
			   const struct rfs_zarr_id *id, const char *path,
			   const struct stat *st);
/* For a read of the whole array (at mount, unwatched): lists the chunk
 * files present, so that absent ones read as fill unopened.
 * @return 1 when listed, 0 when not (each is then opened). */
int rfs_zarr_files_list(struct rfs_zarr_array *a);

/* The backend's source (zarr_source.c). */
struct zarr_source {
	struct rfs_source base; /* first: the interface's view */
	char *path; /* the store's root, absolute */
	char *dataset; /* "/X", "/layers/NAME", "/raw/X" ... */
	struct rfs_zarr_store st;
	struct rfs_chunk_cache *chunks; /* the mount's, or own_chunks */
	struct rfs_chunk_cache *own_chunks; /* when opened without one */
	struct rfs_zarr_array x; /* dense rows, or a CSR's data */
	struct rfs_zarr_array indices; /* CSR only */
	uint64_t x_id, indices_id; /* in chunks */
	struct rfs_zarr_id *files; /* every file of the store, by (dev, ino) */
	size_t nfiles;
	atomic_int changed; /* sticky: a file of the store changed */
};

/* zarr_obs.c */
int rfs_zarr_read_column(struct rfs_source *base, const char *path,
			 const char *what, enum rfs_memlimit_as as,
			 struct rfs_column *out, char *err, size_t errlen);

/* zarr_collection.c: as rfs_source_members(). */
int rfs_zarr_members(const char *path, char ***members, size_t *n, char *err,
		     size_t errlen);
#endif
