/*
 * What a shuffled epoch's row gather costs, outside FUSE: rankfs's read of
 * rows (rfs_source_read_rows: each batch's rows sorted and copied out of
 * the source's mapping, the next row prefetched) against a plain memcpy
 * per row from the same mapping, into the same buffers, in alternating
 * rounds, in CPU time. The file must be in the page cache (scripts/bench
 * reads it in; rows are mapped only then).
 *
 *     build/rankfs-bench-gather data/bench/dense-100000.h5ad [ROUNDS]
 *         [switch]
 *
 * "switch" pins the program to CPU 0 beside two processes that wake each
 * other through pipes there, so the gather is switched out and back in
 * thousands of times a second, as in a FUSE daemon serving readers.
 */
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "chunks.h"
#include "permute.h"
#include "rowsort.h"
#include "source.h"

#define BATCH 256
#define BUFFERS 32 /* rotate as a batch cache does */

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* How often this process was switched out while runnable. */
static long involuntary_switches(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long n = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "nonvoluntary_ctxt_switches: %ld", &n) == 1)
			break;
	if (f)
		fclose(f);
	return n;
}

/* Pins the caller to CPU 0 and starts two processes there that pass a
 * byte back and forth, one of them pausing 20 us per turn. @return the
 * first one's pid (killing it ends both: each dies with its parent), or
 * -1. */
static pid_t start_switching(void)
{
	cpu_set_t cpu0;
	CPU_ZERO(&cpu0);
	CPU_SET(0, &cpu0);
	int there[2], back[2];
	if (sched_setaffinity(0, sizeof(cpu0), &cpu0) != 0 ||
	    pipe(there) != 0 || pipe(back) != 0)
		return -1;
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	/* Both end with their parent, whatever way it exits. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	char c = 0;
	if (fork() == 0 && prctl(PR_SET_PDEATHSIG, SIGKILL) == 0)
		for (;;)
			if (read(there[0], &c, 1) != 1 ||
			    write(back[1], &c, 1) != 1)
				_exit(0);
	for (;;) {
		if (write(there[1], &c, 1) != 1 || read(back[0], &c, 1) != 1)
			_exit(0);
		usleep(20);
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE.h5ad [ROUNDS] [switch]\n",
			argv[0]);
		return 2;
	}
	int switched = argc > 3 && strcmp(argv[3], "switch") == 0;
	int rounds = argc > 2 ? atoi(argv[2]) : 9;
	if (rounds < 1) {
		fprintf(stderr, "gather: ROUNDS must be 1 or more\n");
		return 2;
	}
	char err[512] = "out of memory";
	struct rfs_chunk_cache *chunks;
	struct rfs_source *s;
	/* Room for the whole array: rankfs maps it only if cache_mb has. */
	if (rfs_chunks_create((size_t)8 << 30, &chunks) != 0 ||
	    rfs_source_open(argv[1], NULL, chunks, &s, err, sizeof(err)) != 0) {
		fprintf(stderr, "gather: %s\n", err);
		return 1;
	}
	const unsigned char *base;
	if (rfs_source_mapped_rows(s, &base) != 0) {
		fprintf(stderr, "gather: %s: rows not mapped (not dense and "
			"contiguous, or not in the page cache)\n", argv[1]);
		return 1;
	}
	size_t rb = rfs_source_row_bytes(s);
	uint64_t n = rfs_source_info(s)->rows / BATCH * BATCH;
	if (n == 0) {
		fprintf(stderr, "gather: %s: fewer rows than a batch (%d)\n",
			argv[1], BATCH);
		return 1;
	}
	uint64_t *rows = malloc(n * sizeof(*rows));
	uint64_t *tmp = malloc(BATCH * sizeof(*tmp));
	unsigned char *buf[BUFFERS];
	double *t[2] = { malloc(rounds * sizeof(double)),
			 malloc(rounds * sizeof(double)) };
	if (!rows || !tmp || !t[0] || !t[1])
		return 1;
	for (int b = 0; b < BUFFERS; b++)
		if (!(buf[b] = malloc(BATCH * rb)))
			return 1;
	/* One shuffled epoch, each batch's rows sorted as a fetch sorts them
	 * (so both sides copy in the same order). */
	struct rfs_permute p;
	rfs_permute_init(&p, n, rfs_permute_key(0, 0, 0, 0));
	rfs_permute_apply_range(&p, 0, n, rows);
	for (uint64_t i = 0; i < n; i += BATCH)
		rfs_rowsort_u64(rows + i, tmp, BATCH);
	unsigned char *check = malloc(BATCH * rb);
	if (!check)
		return 1;

	pid_t switching = switched ? start_switching() : 0;
	if (switching < 0) {
		perror("gather: switch");
		return 1;
	}
	long switches = involuntary_switches();
	double cpu = now_ms();
	for (int r = -1; r < rounds; r++) { /* round -1 warms up */
		for (int way = 0; way < 2; way++) {
			double t0 = now_ms();
			for (uint64_t i = 0; i < n; i += BATCH) {
				unsigned char *to = buf[(i / BATCH) % BUFFERS];
				if (way == 0) {
					for (size_t k = 0; k < BATCH; k++)
						memcpy(to + k * rb,
						       base + rows[i + k] * rb,
						       rb);
				} else if (rfs_source_read_rows(
						   s, (const int64_t *)rows + i,
						   BATCH, to) != 0) {
					fputs("gather: read failed\n",
					      stderr);
					return 1;
				}
			}
			if (r >= 0)
				t[way][r] = now_ms() - t0;
		}
		/* Both ways left the last batch's rows in the same buffer:
		 * a gather that copied nothing cannot pass for fast. */
		unsigned char *last = buf[(n / BATCH - 1) % BUFFERS];
		for (size_t k = 0; k < BATCH; k++)
			memcpy(check + k * rb, base + rows[n - BATCH + k] * rb,
			       rb);
		if (memcmp(check, last, BATCH * rb) != 0) {
			fputs("gather: rows differ from the mapping\n", stderr);
			return 1;
		}
	}
	switches = involuntary_switches() - switches;
	cpu = now_ms() - cpu;
	printf("%llu rows of %zu bytes, batches of %d, %d rounds%s "
	       "(median, min-max CPU ms per epoch)\n",
	       (unsigned long long)n, rb, BATCH, rounds,
	       switched ? ", switched on CPU 0" : "");
	double med[2];
	const char *name[2] = { "memcpy per row", "rfs_source_read_rows" };
	for (int way = 0; way < 2; way++) {
		qsort(t[way], rounds, sizeof(double), cmp_double);
		med[way] = t[way][rounds / 2];
		printf("%-22s %7.1f  %.1f-%.1f\n", name[way], med[way],
		       t[way][0], t[way][rounds - 1]);
	}
	printf("ratio rfs_source_read_rows / memcpy: %.2f\n", med[1] / med[0]);
	printf("switched out while runnable: %ld times, %.0f per CPU second\n",
	       switches, switches / (cpu / 1e3));
	if (switching > 0)
		kill(switching, SIGKILL);
	for (int b = 0; b < BUFFERS; b++)
		free(buf[b]);
	free(check);
	free(rows);
	free(tmp);
	free(t[0]);
	free(t[1]);
	rfs_source_destroy(s);
	rfs_chunks_destroy(chunks);
	return 0;
}
