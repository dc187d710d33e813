/* SPDX-License-Identifier: MIT */
/*
 * The read paths of a contiguous array's rows, one against another, on a
 * raw file of float32 rows (what a contiguous unfiltered HDF5 dataset is
 * at its data offset): a shuffled epoch's batches of 256 rows, each
 * batch's rows sorted and runs of adjacent rows coalesced as
 * fetch_sorted() in lib/source/source.c does, read by
 *
 *   map     rfs_rowmap_gather (the mapping, next row prefetched: today)
 *   mapnp   the same copy loop without the software prefetch
 *   maprnd  rfs_rowmap_gather on a mapping advised MADV_RANDOM
 *   uring   rfs_fetch through io_uring (lib/source/io/fetch.c)
 *   preadv  rfs_fetch with RANKFS_NO_URING=1 (one preadv per run)
 *
 * One timed pass per process (so a script can interleave paths):
 *
 *   build/rankfs-bench-read-paths gen FILE ROWS COLS OFFSET
 *   build/rankfs-bench-read-paths run FILE OFFSET ROWS COLS PATH BATCHES
 *       THREADS SEED cold|warm
 *
 * BATCHES 0: the whole epoch (ROWS / 256 batches). warm: one untimed
 * pass over another epoch first (page cache and page tables filled, as
 * in a daemon that has served an epoch). cold: drop_caches (needs root)
 * right before the timed pass. THREADS threads take batches in turn.
 * Row r's first 4 bytes hold r; every row read is checked.
 * Prints one line: path regime threads rows seconds rows/s cpu_s
 * minflt majflt.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "source/io/fetch.h"
#include "plan/permute.h"
#include "source/io/rowmap.h"
#include "core/rowsort.h"

#define BATCH 256
#define BUFFERS 8 /* per thread, rotated as a batch cache does */

enum path { MAP, MAPNP, MAPRND, URING, PREADV };

static struct {
	int fd;
	uint64_t offset, rows, row_bytes;
	struct rfs_rowmap map;
	enum path path;
	const uint64_t *order; /* batches' rows, each batch sorted */
	size_t batches;
	int threads;
	pthread_barrier_t start;
} g;

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* rfs_rowmap_gather without the prefetch of the next row (and without
 * its SIGBUS guard, a sigsetjmp per batch). */
static void gather_noprefetch(const uint64_t *at, size_t n,
			      unsigned char *const *to)
{
	for (size_t i = 0; i < n; i++)
		memcpy(to[i], g.map.base + at[i] * g.row_bytes, g.row_bytes);
}

/* As fetch_sorted() builds them: one run per stretch of adjacent rows. */
static int fetch_batch(const uint64_t *rows, size_t m,
		       unsigned char *const *to)
{
	struct iovec iov[BATCH];
	struct rfs_fetch_run runs[BATCH];
	size_t nruns = 0, failed;
	for (size_t i = 0, j; i < m; i = j) {
		for (j = i + 1; j < m && rows[j] == rows[j - 1] + 1 &&
				j - i < IOV_MAX;
		     j++)
			;
		for (size_t k = i; k < j; k++)
			iov[k] = (struct iovec){ to[k], g.row_bytes };
		runs[nruns++] = (struct rfs_fetch_run){
			.off = g.offset + rows[i] * g.row_bytes,
			.len = (j - i) * g.row_bytes,
			.iov = iov + i,
			.iovcnt = (int)(j - i) };
	}
	return rfs_fetch(g.fd, runs, nruns, &failed);
}

static int read_batch(const uint64_t *rows, unsigned char *const *to)
{
	size_t failed;
	switch (g.path) {
	case MAP:
	case MAPRND:
		return rfs_rowmap_gather(&g.map, rows, g.row_bytes, BATCH,
					 g.row_bytes, to, &failed);
	case MAPNP:
		gather_noprefetch(rows, BATCH, to);
		return 0;
	default:
		return fetch_batch(rows, BATCH, to);
	}
}

static void *worker(void *arg)
{
	int t = (int)(intptr_t)arg;
	unsigned char *buf[BUFFERS];
	unsigned char *to[BATCH];
	for (int b = 0; b < BUFFERS; b++) {
		buf[b] = malloc(BATCH * g.row_bytes);
		if (!buf[b])
			abort();
		memset(buf[b], 1, BATCH * g.row_bytes); /* faulted in now */
	}
	/* A ring made (and a fetch done) before the clock starts. */
	if (g.path == URING || g.path == PREADV) {
		size_t failed;
		struct iovec iov = { buf[0], g.row_bytes };
		struct rfs_fetch_run run = { g.offset, g.row_bytes, &iov, 1 };
		if (rfs_fetch(g.fd, &run, 1, &failed) != 0)
			abort();
		if (g.path == URING && !rfs_fetch_uses_uring()) {
			fprintf(stderr, "read_paths: no io_uring\n");
			exit(1);
		}
	}
	pthread_barrier_wait(&g.start);
	size_t n = 0;
	for (size_t b = (size_t)t; b < g.batches; b += (size_t)g.threads) {
		unsigned char *dst = buf[n++ % BUFFERS];
		const uint64_t *rows = g.order + b * BATCH;
		for (int k = 0; k < BATCH; k++)
			to[k] = dst + k * g.row_bytes;
		if (read_batch(rows, to) != 0) {
			fprintf(stderr, "read_paths: read failed\n");
			exit(1);
		}
		for (int k = 0; k < BATCH; k++) {
			uint32_t id;
			memcpy(&id, to[k], 4);
			if (id != (uint32_t)rows[k]) {
				fprintf(stderr, "read_paths: row %llu wrong\n",
					(unsigned long long)rows[k]);
				exit(1);
			}
		}
	}
	for (int b = 0; b < BUFFERS; b++)
		free(buf[b]);
	return NULL;
}

/* One epoch's first `batches` batches, each sorted. */
static uint64_t *epoch(uint64_t seed, size_t batches)
{
	uint64_t *rows = malloc(g.rows * sizeof(*rows));
	uint64_t tmp[BATCH];
	if (!rows)
		abort();
	struct rfs_permute p;
	rfs_permute_init(&p, g.rows, rfs_permute_key(seed, 0, 0, 0));
	rfs_permute_apply_range(&p, 0, g.rows, rows);
	for (size_t b = 0; b < batches; b++)
		rfs_rowsort_u64(rows + b * BATCH, tmp, BATCH);
	return rows;
}

static double pass(void)
{
	pthread_t th[64];
	pthread_barrier_init(&g.start, NULL, (unsigned)g.threads + 1);
	for (int t = 0; t < g.threads; t++)
		pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
	pthread_barrier_wait(&g.start);
	double t0 = now_s();
	for (int t = 0; t < g.threads; t++)
		pthread_join(th[t], NULL);
	double dt = now_s() - t0;
	pthread_barrier_destroy(&g.start);
	return dt;
}

static uint64_t mix(uint64_t *s)
{
	uint64_t x = (*s += UINT64_C(0x9e3779b97f4a7c15));
	x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
	return x ^ (x >> 31);
}

static int gen(const char *file, uint64_t rows, uint64_t cols,
	       uint64_t offset)
{
	FILE *f = fopen(file, "wb");
	size_t rb = cols * 4;
	unsigned char *row = calloc(1, rb > offset ? rb : offset);
	uint64_t s = 42;
	if (!f || !row || fwrite(row, 1, offset, f) != offset)
		return 1;
	for (uint64_t r = 0; r < rows; r++) {
		uint32_t id = (uint32_t)r;
		memcpy(row, &id, 4);
		for (size_t c = 1; c < cols; c++) {
			float v = (float)(mix(&s) >> 40) / (1 << 24);
			memcpy(row + 4 * c, &v, 4);
		}
		if (fwrite(row, 1, rb, f) != rb)
			return 1;
	}
	return fclose(f) != 0;
}

int main(int argc, char **argv)
{
	if (argc == 6 && strcmp(argv[1], "gen") == 0)
		return gen(argv[2], strtoull(argv[3], NULL, 10),
			   strtoull(argv[4], NULL, 10),
			   strtoull(argv[5], NULL, 10));
	if (argc != 11 || strcmp(argv[1], "run") != 0) {
		fprintf(stderr, "usage: see bench/read_paths.c\n");
		return 2;
	}
	const char *names[] = { "map", "mapnp", "maprnd", "uring", "preadv" };
	g.path = (enum path)-1;
	for (int i = 0; i < 5; i++)
		if (strcmp(argv[6], names[i]) == 0)
			g.path = (enum path)i;
	g.offset = strtoull(argv[3], NULL, 10);
	g.rows = strtoull(argv[4], NULL, 10);
	g.row_bytes = strtoull(argv[5], NULL, 10) * 4;
	size_t batches = strtoull(argv[7], NULL, 10);
	g.threads = atoi(argv[8]);
	uint64_t seed = strtoull(argv[9], NULL, 10);
	int cold = strcmp(argv[10], "cold") == 0;
	if ((int)g.path < 0 || g.threads < 1 || g.threads > 64 ||
	    g.rows < BATCH) {
		fprintf(stderr, "read_paths: bad arguments\n");
		return 2;
	}
	if (batches == 0 || batches > g.rows / BATCH)
		batches = g.rows / BATCH;
	if (g.path == PREADV)
		setenv("RANKFS_NO_URING", "1", 1);
	g.fd = open(argv[2], O_RDONLY);
	if (g.fd < 0 ||
	    rfs_rowmap_open(&g.map, g.fd, g.offset, g.rows * g.row_bytes)) {
		perror("read_paths: open");
		return 1;
	}
	if (g.path == MAPRND)
		madvise(g.map.map, g.map.map_len, MADV_RANDOM);
	g.batches = batches;
	if (!cold) { /* page cache and page tables filled */
		uint64_t *warm = epoch(seed + 1000, g.rows / BATCH);
		g.order = warm;
		g.batches = g.rows / BATCH;
		pass();
		free(warm);
		g.batches = batches;
	}
	uint64_t *order = epoch(seed, batches);
	g.order = order;
	if (cold) {
		int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
		sync();
		if (fd < 0 || write(fd, "3", 1) != 1) {
			perror("read_paths: drop_caches");
			return 1;
		}
		close(fd);
	}
	struct rusage r0, r1;
	getrusage(RUSAGE_SELF, &r0);
	double dt = pass();
	getrusage(RUSAGE_SELF, &r1);
	double cpu = (r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) +
		     (r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) / 1e6 +
		     (r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) +
		     (r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) / 1e6;
	uint64_t n = (uint64_t)batches * BATCH;
	printf("%s %s %d %llu %.4f %.0f %.4f %ld %ld\n", names[g.path],
	       cold ? "cold" : "warm", g.threads, (unsigned long long)n, dt,
	       n / dt, cpu, r1.ru_minflt - r0.ru_minflt,
	       r1.ru_majflt - r0.ru_majflt);
	free(order);
	rfs_rowmap_close(&g.map);
	close(g.fd);
	return 0;
}
