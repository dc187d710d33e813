/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for a stored chunk or shard file read through an
 * array of fixed metadata (lib/source/zarr/zarr_array.c: locate, shard_index, fetch,
 * load_whole, read_part; lib/source/zarr/zarr_codec.c behind them).
 *
 * Input: byte 0 picks one of the metadata below; bytes 1..4 pick a part
 * (where and how long) for a partial load; the rest is the one chunk
 * (or shard) file of the array, written under a tmpfs directory. Every
 * inner chunk is loaded whole and in part, the array read whole (or its
 * strings), and rfs_zarr_array_part_rows asked.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "source/zarr/zarr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

struct variant {
	int v3;
	const char *chunk; /* the chunk file's key */
	const char *meta;
};

#define V3(shape, chunk, dt, fill, codecs)                                  \
	"{\"zarr_format\":3,\"node_type\":\"array\",\"shape\":" shape       \
	",\"data_type\":\"" dt "\",\"chunk_grid\":{\"name\":\"regular\","   \
	"\"configuration\":{\"chunk_shape\":" chunk "}},"                   \
	"\"chunk_key_encoding\":{\"name\":\"default\",\"configuration\":"   \
	"{\"separator\":\"/\"}},\"fill_value\":" fill ",\"codecs\":" codecs \
	",\"attributes\":{}}"
#define SHARD(inner, codecs, crc, loc)                                              \
	"[{\"name\":\"sharding_indexed\",\"configuration\":{\"chunk_shape\":" inner \
	",\"codecs\":" codecs ",\"index_codecs\":[{\"name\":\"bytes\","             \
	"\"configuration\":{\"endian\":\"little\"}}" crc "],"                       \
	"\"index_location\":\"" loc "\"}}]"
#define CRC ",{\"name\":\"crc32c\"}"
#define BYTES_LE \
	"{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}}"
#define BYTES_BE "{\"name\":\"bytes\",\"configuration\":{\"endian\":\"big\"}}"
#define BLOSC                                                                  \
	"{\"name\":\"blosc\",\"configuration\":{\"cname\":\"lz4\",\"clevel\":" \
	"5,\"shuffle\":\"shuffle\",\"typesize\":4,\"blocksize\":0}}"
#define ZSTD "{\"name\":\"zstd\",\"configuration\":{\"level\":3}}"
#define GZIP "{\"name\":\"gzip\",\"configuration\":{\"level\":5}}"
#define CRC32C "{\"name\":\"crc32c\"}"
#define VLEN "{\"name\":\"vlen-utf8\",\"configuration\":{}}"

#define V2(shape, chunks, dt, fill, comp, filters)                       \
	"{\"zarr_format\":2,\"shape\":" shape ",\"chunks\":" chunks      \
	",\"dtype\":\"" dt "\",\"fill_value\":" fill ",\"order\":\"C\"," \
	"\"compressor\":" comp ",\"filters\":" filters "}"
#define V2BLOSC(ts)                                                       \
	"{\"id\":\"blosc\",\"cname\":\"lz4\",\"clevel\":5,\"shuffle\":1," \
	"\"blocksize\":0}"

static const struct variant variants[] = {
	/* 0: v2 blosc, float32, one chunk of 4096 (in parts) */
	{ 0, "0", V2("[4096]", "[4096]", "<f4", "0.0", V2BLOSC(4), "null") },
	/* 1: v2 zstd, big-endian int16 */
	{ 0, "0",
	  V2("[1000]", "[1000]", ">i2", "7", "{\"id\":\"zstd\",\"level\":3}",
	     "null") },
	/* 2: v2 gzip, 2-D uint8 */
	{ 0, "0.0",
	  V2("[64,16]", "[64,16]", "|u1", "3", "{\"id\":\"gzip\",\"level\":5}",
	     "null") },
	/* 3: v2 zlib, float64, edge chunk past the shape */
	{ 0, "0",
	  V2("[100]", "[128]", "<f8", "\"NaN\"",
	     "{\"id\":\"zlib\",\"level\":1}", "null") },
	/* 4: v2 vlen-utf8 strings, blosc */
	{ 0, "0",
	  V2("[50]", "[64]", "|O", "\"\"", V2BLOSC(1),
	     "[{\"id\":\"vlen-utf8\"}]") },
	/* 5: v2 blosc, 2-D int32, rows in parts */
	{ 0, "0.0", V2("[512,8]", "[512,8]", "<i4", "0", V2BLOSC(4), "null") },
	/* 6: v3 sharded, index at the end with crc32c, inner blosc */
	{ 1, "c/0",
	  V3("[1024]", "[1024]", "float32", "0.0",
	     SHARD("[128]", "[" BYTES_LE "," BLOSC "]", CRC, "end")) },
	/* 7: v3 sharded, index at the start without crc, zstd + crc32c */
	{ 1, "c/0",
	  V3("[256]", "[256]", "int64", "-1",
	     SHARD("[32]", "[" BYTES_LE "," ZSTD "," CRC32C "]", "", "start")) },
	/* 8: v3 sharded 2-D, big-endian, gzip */
	{ 1, "c/0/0",
	  V3("[32,8]", "[32,8]", "uint16", "9",
	     SHARD("[8,4]", "[" BYTES_BE "," GZIP "]", CRC, "end")) },
	/* 9: v3 sharded strings, zstd */
	{ 1, "c/0",
	  V3("[40]", "[64]", "string", "\"\"",
	     SHARD("[16]", "[" VLEN "," ZSTD "]", CRC, "end")) },
	/* 10: v3 bytes + crc32c, float64 */
	{ 1, "c/0",
	  V3("[300]", "[300]", "float64", "\"Infinity\"",
	     "[" BYTES_LE "," CRC32C "]") },
	/* 11: v3 blosc, bool */
	{ 1, "c/0",
	  V3("[2048]", "[2048]", "bool", "true", "[" BYTES_LE "," BLOSC "]") },
	/* 12: v3 bytes alone, 2-D uint16 */
	{ 1, "c/0/0",
	  V3("[16,16]", "[16,16]", "uint16", "0", "[" BYTES_LE "]") },
	/* 13: v3 sharded, blosc inner, many inner chunks, index start */
	{ 1, "c/0",
	  V3("[4096]", "[4096]", "uint8", "0",
	     SHARD("[64]", "[" BYTES_LE "," BLOSC "]", CRC, "start")) },
	/* 14: v3 strings, gzip, not sharded */
	{ 1, "c/0",
	  V3("[20]", "[20]", "string", "\"\"", "[" VLEN "," GZIP "]") },
	/* 15: v3 float16, zstd then blosc (stacked) */
	{ 1, "c/0",
	  V3("[1000]", "[1000]", "float16", "\"-Infinity\"",
	     "[" BYTES_LE "," ZSTD "," BLOSC "]") },
};
#define NVARIANTS (sizeof(variants) / sizeof(*variants))

static char root[256];

static int write_file(const char *path, const void *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	const char *c = p;
	while (n) {
		ssize_t w = write(fd, c, n);
		if (w <= 0) {
			close(fd);
			return -1;
		}
		c += w;
		n -= (size_t)w;
	}
	return close(fd);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	rfs_log_set_fd(open("/dev/null", O_WRONLY | O_CLOEXEC));
	/* scripts/fuzz names a scratch directory it removes. */
	const char *scratch = getenv("RANKFS_FUZZ_DIR");
	snprintf(root, sizeof(root), "%s/rfs-fuzz-chunk-%d",
		 scratch ? scratch : "/dev/shm", getpid());
	mkdir(root, 0755);
	for (size_t v = 0; v < NVARIANTS; v++) {
		char dir[512], path[600];
		snprintf(dir, sizeof(dir), "%s/%zu", root, v);
		mkdir(dir, 0755);
		snprintf(path, sizeof(path), "%s/c", dir);
		mkdir(path, 0755);
		snprintf(path, sizeof(path), "%s/c/0", dir);
		if (strcmp(variants[v].chunk, "c/0/0") == 0)
			mkdir(path, 0755);
		snprintf(path, sizeof(path), "%s/%s", dir,
			 variants[v].v3 ? "zarr.json" : ".zarray");
		if (write_file(path, variants[v].meta,
			       strlen(variants[v].meta)) != 0)
			abort();
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 5)
		return 0;
	const struct variant *v = &variants[data[0] % NVARIANTS];
	char dir[512], path[600], err[512];
	snprintf(dir, sizeof(dir), "%s/%zu", root, (size_t)(v - variants));
	snprintf(path, sizeof(path), "%s/%s", dir, v->chunk);
	if (write_file(path, data + 5, size - 5) != 0)
		abort();
	struct rfs_zarr_store st;
	if (rfs_zarr_store_open(dir, &st, err, sizeof(err)) != 0)
		abort(); /* fixed metadata: always opens */
	struct rfs_zarr_array a;
	if (rfs_zarr_array_open(&st, "", NULL, &a, err, sizeof(err)) != 0)
		abort();
	size_t chunk_bytes = a.m.inner[0] * a.m.inner[1] * a.m.elem;
	uint64_t chunks = a.igrid[0] * a.igrid[1];
	if (a.m.kind == RFS_ZARR_STRING) {
		char **s = NULL;
		if (rfs_zarr_array_read_strings(&a, &s) == 0) {
			for (uint64_t i = 0; i < a.m.shape[0]; i++) {
				if (!s[i])
					abort();
				free(s[i]);
			}
			free(s);
		}
	} else {
		unsigned char *whole = malloc(chunk_bytes);
		unsigned char *part = malloc(chunk_bytes);
		size_t at =
			((size_t)data[1] | (size_t)data[2] << 8) % chunk_bytes;
		size_t len = ((size_t)data[3] | (size_t)data[4] << 8) %
				     (chunk_bytes - at) +
			     1;
		/* Whole elements, as lib/source/io/chunks.c asks (whole rows). */
		at -= at % a.m.elem;
		len += a.m.elem - 1;
		len -= len % a.m.elem;
		for (uint64_t k = 0; k < chunks && whole && part; k++) {
			int rc = rfs_zarr_array_load(&a, k, 0, whole,
						     chunk_bytes);
			if (rc != 0 && rc != -EIO && rc != -ENOMEM)
				abort();
			int prc = rfs_zarr_array_load(&a, k, at, part, len);
			if (prc != 0 && prc != -EIO && prc != -ENOMEM)
				abort();
			if (rc == 0 && prc == 0 &&
			    memcmp(part, whole + at, len) != 0)
				abort(); /* a part unlike the whole */
		}
		free(whole);
		free(part);
		(void)rfs_zarr_array_part_rows(&a);
		size_t all = a.m.shape[0] * a.m.shape[1] * a.m.elem;
		unsigned char *dst = malloc(all);
		if (dst)
			(void)rfs_zarr_array_read_all(&a, dst);
		free(dst);
	}
	rfs_zarr_array_close(&a);
	rfs_zarr_store_close(&st);
	return 0;
}
