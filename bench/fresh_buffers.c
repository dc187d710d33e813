/* SPDX-License-Identifier: MIT */
/*
 * What a batch buffer costs when the pool (lib/core/bigbuf.c) has none to give:
 * rfs_bigbuf_alloc() maps and populates it, the batch is written into it,
 * and rfs_bigbuf_free() unmaps it because the pool is full; against the
 * same with the buffer reused from the pool. Wall time per buffer, in
 * alternating rounds; a second thread may read 64 MiB meanwhile, as the
 * daemon's other threads do. docs/benchmarks.md, "The buffer pool".
 *
 *     build/rankfs-bench-buffers [ROUNDS] [busy]
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/bigbuf.h"

#define SIZE ((size_t)1 << 20)
#define BUFFERS 400
#define BUSY_BYTES ((size_t)64 << 20)

static atomic_int stop;

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void *read_memory(void *arg)
{
	volatile unsigned char *p = arg;
	unsigned sum = 0;
	while (!atomic_load(&stop))
		for (size_t i = 0; i < BUSY_BYTES; i += 4096)
			sum += p[i];
	return (void *)(size_t)sum;
}

/* ms per buffer: BUFFERS batches written, each into a fresh buffer (no
 * pool: unmapped after every free) or into one the pool hands back. */
static double per_buffer(const unsigned char *batch, int fresh)
{
	struct rfs_bigbuf *pool = NULL;
	if (!fresh && rfs_bigbuf_create(&pool) != 0)
		exit(1);
	double t0 = now_ms();
	for (int i = 0; i < BUFFERS; i++) {
		unsigned char *b = rfs_bigbuf_alloc(pool, SIZE);
		if (!b) {
			perror("buffers: alloc");
			exit(1);
		}
		memcpy(b, batch, SIZE);
		rfs_bigbuf_free(pool, b, SIZE);
	}
	double ms = (now_ms() - t0) / BUFFERS;
	rfs_bigbuf_destroy(pool);
	return ms;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 3;
	int busy = argc > 2 && strcmp(argv[2], "busy") == 0;
	unsigned char *batch = malloc(SIZE), *other = NULL;
	if (!batch || rounds < 1) {
		fprintf(stderr, "usage: %s [ROUNDS >= 1] [busy]\n", argv[0]);
		return 2;
	}
	memset(batch, 1, SIZE);
	pthread_t reader;
	if (busy) {
		other = malloc(BUSY_BYTES);
		if (!other)
			return 1;
		memset(other, 2, BUSY_BYTES);
		if (pthread_create(&reader, NULL, read_memory, other) != 0)
			return 1;
	}
	printf("%d buffers of 1 MiB per round%s (ms per buffer)\n", BUFFERS,
	       busy ? ", a thread reading 64 MiB meanwhile" : "");
	for (int r = 0; r < rounds; r++) {
		double fresh = per_buffer(batch, 1);
		double reused = per_buffer(batch, 0);
		printf("fresh (mapped, unmapped) %.3f  reused (pooled) %.3f  "
		       "ratio %.0f\n", fresh, reused, fresh / reused);
	}
	if (busy) {
		atomic_store(&stop, 1);
		pthread_join(reader, NULL);
		free(other);
	}
	free(batch);
	return 0;
}
