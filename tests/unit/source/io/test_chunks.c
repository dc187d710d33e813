/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/source/io/chunks.c: rows assembled from deflated
 * chunks through the HDF5 backend's loader (chunks narrower than the
 * rows, as wide, and a 1-D array), a truncated file, one load per chunk,
 * a loader's chunks cached in parts, arrays kept apart, least recently
 * used chunks evicted first, and one load shared by concurrent readers. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "source/hdf5/hdf5_source.h"
#include "source/io/chunks.h"
#include "h5_fixture.h"

#define ROWS 10
#define COLS_MAX 7
#define CR 4 /* chunk rows */

/* Columns of the array and of its chunks. */
struct shape {
	uint64_t cols, chunk_cols;
};

static struct shape narrow = { 7, 3 }, full_width = { 7, 7 }, one_d = { 1, 1 };

static uint16_t value(uint64_t r, uint64_t c)
{
	return (uint16_t)(r * 100 + c);
}

struct fixture {
	char dir[PATH_MAX];
	char path[PATH_MAX + 16];
	int fd;
	struct rfs_log_limit log;
	struct hdf5_chunks h; /* the HDF5 backend's loader's */
	struct rfs_chunked c;
};

/* Writes a file of deflated chunks (full size at the edges, as HDF5
 * stores them) of the array shaped by *state and fills in their
 * locations. */
static int setup(void **state)
{
	const struct shape *shape = *state;
	uint64_t cols = shape->cols, chunk_cols = shape->chunk_cols;
	struct fixture *f = calloc(1, sizeof(*f));
	if (!f || h5fx_tmpdir(f->dir, sizeof(f->dir)) != 0)
		return -1;
	snprintf(f->path, sizeof(f->path), "%s/chunks", f->dir);
	FILE *out = fopen(f->path, "wb");
	uint64_t grid_rows = (ROWS + CR - 1) / CR;
	uint64_t grid_cols = (cols + chunk_cols - 1) / chunk_cols;
	f->c = (struct rfs_chunked){ .cols = cols,
				     .chunk_rows = CR,
				     .chunk_cols = chunk_cols,
				     .grid_cols = grid_cols,
				     .elem = 2,
				     .load = rfs_hdf5_chunk_load,
				     .scratch = rfs_hdf5_chunk_scratch,
				     .ctx = &f->h };
	f->log = (struct rfs_log_limit)RFS_LOG_LIMIT_INIT;
	f->h = (struct hdf5_chunks){ .path = f->path,
				     .name = "/x",
				     .log = &f->log,
				     .chunk_rows = CR,
				     .grid_cols = grid_cols,
				     .elem = 2,
				     .chunk_bytes = CR * chunk_cols * 2,
				     .pipeline = { 1,
						   { RFS_FILTER_DEFLATE } } };
	f->h.locs = calloc(grid_rows * grid_cols, sizeof(*f->h.locs));
	fputs("header", out);
	for (uint64_t gr = 0; gr < grid_rows; gr++)
		for (uint64_t gc = 0; gc < grid_cols; gc++) {
			uint16_t chunk[CR * COLS_MAX] = { 0 };
			for (uint64_t r = 0; r < CR; r++)
				for (uint64_t c = 0; c < chunk_cols; c++)
					chunk[r * chunk_cols + c] =
						value(gr * CR + r,
						      gc * chunk_cols + c);
			unsigned char z[256];
			uLongf len = sizeof(z);
			compress2(z, &len, (unsigned char *)chunk,
				  CR * chunk_cols * sizeof(chunk[0]), 6);
			struct rfs_chunk_loc *loc =
				&f->h.locs[gr * grid_cols + gc];
			loc->addr = (uint64_t)ftell(out);
			loc->size = len;
			fwrite(z, 1, len, out);
		}
	fclose(out);
	f->fd = open(f->path, O_RDONLY);
	f->h.fd = f->fd;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	close(f->fd);
	free(f->h.locs);
	rfs_log_limit_destroy(&f->log);
	h5fx_rmtree(f->dir);
	free(f);
	return 0;
}

/* Rows first, first + stride, ... below end through
 * rfs_chunks_read_rows, scattered in reverse order; nothing else of the
 * buffer is written. */
static void check_sorted_rows(struct rfs_chunk_cache *cc, uint64_t id,
			      uint64_t cols, uint64_t first, uint64_t end,
			      uint64_t stride)
{
	uint16_t scattered[ROWS * COLS_MAX];
	unsigned char *to[ROWS] = { 0 };
	uint64_t rows[ROWS] = { 0 };
	size_t n = 0;
	for (uint64_t r = first; r < end; r += stride)
		rows[n++] = r;
	for (size_t k = 0; k < n; k++)
		to[k] = (unsigned char *)&scattered[(n - 1 - k) * cols];
	memset(scattered, 0xff, sizeof(scattered));
	assert_int_equal(rfs_chunks_read_rows(cc, id, rows, n, to), 0);
	for (size_t k = 0; k < n; k++)
		for (uint64_t c = 0; c < cols; c++)
			assert_int_equal(scattered[(n - 1 - k) * cols + c],
					 value(rows[k], c));
	for (size_t i = n * cols; i < ROWS * COLS_MAX; i++)
		assert_int_equal(scattered[i], 0xffff);
}

static void test_rows_across_chunks(void **state)
{
	struct fixture *f = *state;
	struct rfs_chunk_cache *cc;
	uint64_t id = 99;
	assert_int_equal(rfs_chunks_create(1 << 20, NULL, &cc), 0);
	assert_int_equal(rfs_chunks_register(cc, &f->c, &id), 0);
	assert_true(id == 0);
	uint64_t cols = f->c.cols;
	/* Every run of every length, so runs start and end inside and at
	 * the edges of chunks: as a run into one buffer, and as sorted rows,
	 * adjacent and every other one. */
	for (uint64_t first = 0; first < ROWS; first++) {
		for (uint64_t count = 1; first + count <= ROWS; count++) {
			/* A row more than the longest run: the canary. */
			uint16_t out[(ROWS + 1) * COLS_MAX];
			memset(out, 0xff, sizeof(out));
			assert_int_equal(
				rfs_chunks_read(cc, id, first, count, out), 0);
			for (uint64_t r = 0; r < count; r++)
				for (uint64_t c = 0; c < cols; c++)
					assert_int_equal(out[r * cols + c],
							 value(first + r, c));
			assert_int_equal(out[count * cols], 0xffff);
			check_sorted_rows(cc, id, cols, first, first + count,
					  1);
			check_sorted_rows(cc, id, cols, first, first + count,
					  2);
		}
	}
	rfs_chunks_destroy(cc);
}

static void test_truncated_file_is_eio(void **state)
{
	struct fixture *f = *state;
	struct rfs_chunk_cache *cc;
	uint64_t id;
	off_t cut = (off_t)f->h.locs[4].addr;
	assert_int_equal(rfs_chunks_create(1 << 20, NULL, &cc), 0);
	assert_int_equal(rfs_chunks_register(cc, &f->c, &id), 0);
	assert_int_equal(truncate(f->path, cut), 0);
	uint16_t out[ROWS * COLS_MAX];
	assert_int_equal(rfs_chunks_read(cc, id, 0, 3, out), 0);
	assert_int_equal(rfs_chunks_read(cc, id, 5, 2, out), -EIO);
	rfs_chunks_destroy(cc);
}

/* A loader (the zarr backend's way): called once per chunk, its bytes
 * placed like decoded HDF5 chunks; its failure is the read's. */
struct loads {
	int calls;
	uint64_t fail; /* chunk that fails, or UINT64_MAX */
};

static int load_chunk(void *ctx, uint64_t k, size_t at, void *out, size_t len)
{
	struct loads *l = ctx;
	uint16_t *v = out;
	l->calls++;
	if (k == l->fail)
		return -EIO;
	assert_int_equal(at, 0);
	/* 10 x 7 in chunks of CR x 3: grid of 3 columns */
	for (size_t i = 0; i < len / 2; i++) {
		uint64_t r = k / 3 * CR + i / 3, c = k % 3 * 3 + i % 3;
		v[i] = value(r, c);
	}
	return 0;
}

/* ROWS x 7 uint16 through a loader, in chunks of CR rows and chunk_cols
 * columns. */
static struct rfs_chunked
loaded(uint64_t chunk_cols,
       int (*load)(void *, uint64_t, size_t, void *, size_t), void *ctx)
{
	return (struct rfs_chunked){ .cols = 7,
				     .chunk_rows = CR,
				     .chunk_cols = chunk_cols,
				     .grid_cols =
					     (7 + chunk_cols - 1) / chunk_cols,
				     .elem = 2,
				     .load = load,
				     .ctx = ctx };
}

static void test_loader(void **state)
{
	(void)state;
	struct rfs_chunk_cache *cc;
	struct loads l = { 0, UINT64_MAX };
	struct rfs_chunked c = loaded(3, load_chunk, &l);
	uint64_t id, rows[3] = { 1, 2, 9 };
	uint16_t got[3][7];
	unsigned char *to[3] = { (void *)got[0], (void *)got[1],
				 (void *)got[2] };
	assert_int_equal(rfs_chunks_create(1 << 20, NULL, &cc), 0);
	assert_int_equal(rfs_chunks_register(cc, &c, &id), 0);
	assert_int_equal(rfs_chunks_read_rows(cc, id, rows, 3, to), 0);
	for (int i = 0; i < 3; i++)
		for (int k = 0; k < 7; k++)
			assert_int_equal(got[i][k], value(rows[i], k));
	assert_int_equal(l.calls, 6); /* two rows of 3 chunks */
	assert_int_equal(rfs_chunks_read(cc, id, 0, 3, got), 0);
	assert_int_equal(l.calls, 6); /* all cached */
	l.fail = 4; /* rows 4..7, columns 3..5 */
	assert_int_equal(rfs_chunks_read(cc, id, 5, 1, got), -EIO);
	rfs_chunks_destroy(cc);
}

/* A loader of parts: rows 0..9 of 7 columns, in chunks of CR rows, each
 * decoded in parts of 3 rows (the last of a chunk 1 row). */
struct parts {
	int calls;
	uint16_t add; /* to every value */
	size_t at[8], len[8];
	uint64_t k[8];
};

static int load_part(void *ctx, uint64_t k, size_t at, void *out, size_t len)
{
	struct parts *l = ctx;
	uint16_t *v = out;
	size_t row = 7 * 2;
	assert_true(l->calls < 8);
	l->k[l->calls] = k;
	l->at[l->calls] = at;
	l->len[l->calls++] = len;
	assert_int_equal(at % row, 0);
	assert_int_equal(len % row, 0);
	for (size_t i = 0; i < len / 2; i++)
		v[i] = value(k * CR + at / row + i / 7, i % 7) + l->add;
	return 0;
}

static void test_parts(void **state)
{
	(void)state;
	struct rfs_chunk_cache *cc;
	struct parts l = { 0 };
	struct rfs_chunked c = loaded(7, load_part, &l);
	c.part_rows = 3;
	uint64_t id, rows[3] = { 2, 3, 9 };
	uint16_t got[6][7];
	unsigned char *to[3] = { (void *)got[0], (void *)got[1],
				 (void *)got[2] };
	assert_int_equal(rfs_chunks_create(1 << 20, NULL, &cc), 0);
	assert_int_equal(rfs_chunks_register(cc, &c, &id), 0);
	/* Rows 2..6: parts rows 0-2 and 3 of chunk 0, 4-6 of chunk 1. */
	assert_int_equal(rfs_chunks_read(cc, id, 2, 5, got), 0);
	for (int i = 0; i < 5; i++)
		for (int k = 0; k < 7; k++)
			assert_int_equal(got[i][k], value(2 + i, k));
	assert_int_equal(l.calls, 3);
	size_t row = 7 * 2;
	assert_int_equal(l.k[0], 0);
	assert_int_equal(l.at[0], 0);
	assert_int_equal(l.len[0], 3 * row);
	assert_int_equal(l.k[1], 0);
	assert_int_equal(l.at[1], 3 * row);
	assert_int_equal(l.len[1], row);
	assert_int_equal(l.k[2], 1);
	assert_int_equal(l.at[2], 0);
	assert_int_equal(l.len[2], 3 * row);
	/* Rows 2 and 3 again, cached; row 9 is chunk 2's second row: its
	 * first part (the chunk's rows 8..11, past the array after 9). */
	assert_int_equal(rfs_chunks_read_rows(cc, id, rows, 3, to), 0);
	for (int i = 0; i < 3; i++)
		for (int k = 0; k < 7; k++)
			assert_int_equal(got[i][k], value(rows[i], k));
	assert_int_equal(l.calls, 4);
	assert_int_equal(l.k[3], 2);
	assert_int_equal(l.at[3], 0);
	assert_int_equal(l.len[3], 3 * row);
	rfs_chunks_destroy(cc);
}

/* Two arrays of the same shape: chunk 0 of each is its own, loaded by
 * its own loader (the key is the array and the chunk). */
static void test_arrays_apart(void **state)
{
	(void)state;
	struct rfs_chunk_cache *cc;
	struct parts l[2] = { { 0 }, { .add = 1000 } };
	struct rfs_chunked a = loaded(7, load_part, &l[0]);
	struct rfs_chunked b = loaded(7, load_part, &l[1]);
	uint64_t id[2];
	uint16_t got[2][7];
	assert_int_equal(rfs_chunks_create(1 << 20, NULL, &cc), 0);
	assert_int_equal(rfs_chunks_register(cc, &a, &id[0]), 0);
	assert_int_equal(rfs_chunks_register(cc, &b, &id[1]), 0);
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < 2; i++) {
			assert_int_equal(rfs_chunks_read(cc, id[i], 1, 1, got),
					 0);
			assert_int_equal(got[0][3], value(1, 3) + l[i].add);
			assert_int_equal(l[i].calls, 1);
		}
	}
	rfs_chunks_destroy(cc);
}

/* Room for two chunks of 56 bytes beside a load (one more and its
 * scratch, 112): the one used least recently goes, not the oldest. */
static void test_least_recently_used_goes(void **state)
{
	(void)state;
	struct rfs_chunk_cache *cc;
	struct parts l = { 0 };
	struct rfs_chunked c = loaded(7, load_part, &l);
	uint64_t id;
	uint16_t got[CR][7];
	assert_int_equal(rfs_chunks_create(200, NULL, &cc), 0);
	assert_int_equal(rfs_chunks_register(cc, &c, &id), 0);
	/* 2 evicts 1, not 0, read since; then 1 evicts 2. */
	uint64_t chunks[] = { 0, 1, 0, 2, 0, 1 };
	uint64_t loads[] = { 1, 2, 2, 3, 3, 4 };
	for (int i = 0; i < 6; i++) {
		assert_int_equal(
			rfs_chunks_read(cc, id, chunks[i] * CR, 1, got), 0);
		assert_int_equal(got[0][1], value(chunks[i] * CR, 1));
		assert_int_equal(l.calls, loads[i]);
	}
	assert_int_equal(l.k[2], 2);
	assert_int_equal(l.k[3], 1);
	assert_int_equal(rfs_chunks_read(cc, id, 0, 1, got), 0);
	assert_int_equal(l.calls, 4); /* 0 kept */
	rfs_chunks_destroy(cc);
}

/* A loader that waits at a gate: its chunk stays being loaded until the
 * test opens it; it fails its first load when told to. */
struct gate {
	pthread_mutex_t lock;
	pthread_cond_t moved;
	int calls, open, fail;
};

static int load_gated(void *ctx, uint64_t k, size_t at, void *out, size_t len)
{
	struct gate *g = ctx;
	uint16_t *v = out;
	pthread_mutex_lock(&g->lock);
	g->calls++;
	pthread_cond_broadcast(&g->moved);
	while (!g->open)
		pthread_cond_wait(&g->moved, &g->lock);
	int fail = g->fail;
	g->fail = 0;
	pthread_mutex_unlock(&g->lock);
	for (size_t i = 0; i < len / 2; i++)
		v[i] = value(k * CR + at / 14 + i / 7, i % 7);
	return fail ? -EIO : 0;
}

struct reader {
	pthread_t thread;
	struct rfs_chunk_cache *cc;
	uint64_t id, first;
	uint16_t got[2][7];
	int rc;
};

static void *read_two(void *arg)
{
	struct reader *r = arg;
	r->rc = rfs_chunks_read(r->cc, r->id, r->first, 2, r->got);
	return NULL;
}

/* Three readers of chunk 0 at once: one loads it, the others wait for
 * that load and share its chunk, or its failure (then the next read
 * loads again). Evicting everything meanwhile leaves the chunk being
 * loaded alone. */
static void test_one_load_shared(void **state)
{
	(void)state;
	for (int fail = 0; fail < 2; fail++) {
		struct gate g = { .lock = PTHREAD_MUTEX_INITIALIZER,
				  .moved = PTHREAD_COND_INITIALIZER,
				  .fail = fail };
		struct rfs_chunk_cache *cc;
		struct rfs_chunked c = loaded(7, load_gated, &g);
		struct reader r[3];
		uint64_t id;
		assert_int_equal(rfs_chunks_create(1 << 20, NULL, &cc), 0);
		assert_int_equal(rfs_chunks_register(cc, &c, &id), 0);
		for (int i = 0; i < 3; i++) {
			r[i] = (struct reader){ .cc = cc,
						.id = id,
						.first = (uint64_t)i };
			pthread_create(&r[i].thread, NULL, read_two, &r[i]);
			if (i > 0)
				continue;
			pthread_mutex_lock(&g.lock);
			while (g.calls == 0)
				pthread_cond_wait(&g.moved, &g.lock);
			pthread_mutex_unlock(&g.lock);
		}
		nanosleep(&(struct timespec){ 0, 100000000 }, NULL);
		rfs_chunks_drop(cc);
		pthread_mutex_lock(&g.lock);
		g.open = 1;
		pthread_cond_broadcast(&g.moved);
		pthread_mutex_unlock(&g.lock);
		for (int i = 0; i < 3; i++) {
			pthread_join(r[i].thread, NULL);
			assert_int_equal(r[i].rc, fail ? -EIO : 0);
			for (int k = 0; k < 7 && !fail; k++)
				assert_int_equal(r[i].got[1][k],
						 value((uint64_t)i + 1, k));
		}
		assert_int_equal(g.calls, 1);
		uint16_t got[2][7];
		assert_int_equal(rfs_chunks_read(cc, id, 0, 2, got), 0);
		assert_int_equal(g.calls, 1 + fail);
		rfs_chunks_destroy(cc);
	}
}

/* The share, handed out once cache_mb has settled (view.c), after reads
 * at mount: the chunks they decoded over it are evicted, and what is
 * reserved out of it for the mount's life leaves an eighth of it to
 * chunks. */
static void test_share(void **state)
{
	(void)state;
	struct rfs_chunk_cache *cc;
	struct loads l = { 0, UINT64_MAX };
	struct rfs_chunked c = loaded(3, load_chunk, &l);
	uint64_t id;
	uint16_t got[ROWS][7];
	assert_int_equal(rfs_chunks_create(1 << 20, NULL, &cc), 0);
	assert_int_equal(rfs_chunks_register(cc, &c, &id), 0);
	assert_int_equal(rfs_chunks_read(cc, id, 0, ROWS, got), 0);
	assert_int_equal(l.calls, 9);
	rfs_chunks_limit(cc, 8000);
	assert_int_equal(rfs_chunks_reserve(cc, 7001),
			 -ENOSPC); /* its eighth stays */
	assert_int_equal(rfs_chunks_reserve(cc, 4000), 0);
	assert_int_equal(rfs_chunks_reserve(cc, 2000), 0);
	assert_int_equal(rfs_chunks_reserve(cc, 1001), -ENOSPC);
	assert_int_equal(rfs_chunks_reserve(cc, 1000), 0);
	/* 1000 left, all nine chunks held. */
	assert_int_equal(rfs_chunks_read(cc, id, 0, ROWS, got), 0);
	assert_int_equal(l.calls, 9);
	rfs_chunks_destroy(cc);
	/* A share of 100: the chunks over 100 bytes (the first, read
	 * first) decode again. */
	assert_int_equal(rfs_chunks_create(1 << 20, NULL, &cc), 0);
	assert_int_equal(rfs_chunks_register(cc, &c, &id), 0);
	assert_int_equal(rfs_chunks_read(cc, id, 0, ROWS, got), 0);
	rfs_chunks_limit(cc, 100);
	assert_int_equal(rfs_chunks_read(cc, id, 0, ROWS, got), 0);
	for (int r = 0; r < ROWS; r++)
		for (int k = 0; k < 7; k++)
			assert_int_equal(got[r][k], value(r, k));
	assert_true(l.calls > 18);
	/* Dropped: every chunk decodes again. */
	int calls = l.calls;
	rfs_chunks_drop(cc);
	assert_int_equal(rfs_chunks_read(cc, id, 8, 2, got), 0);
	assert_int_equal(l.calls, calls + 3);
	assert_int_equal(rfs_chunks_read(cc, id, 8, 2, got), 0);
	assert_int_equal(l.calls, calls + 3);
	rfs_chunks_drop(cc);
	assert_int_equal(rfs_chunks_read(cc, id, 8, 2, got), 0);
	assert_int_equal(l.calls, calls + 6);
	/* All 100 free again, its eighth kept. */
	assert_int_equal(rfs_chunks_reserve(cc, 88), 0);
	assert_int_equal(rfs_chunks_reserve(cc, 1), -ENOSPC);
	rfs_chunks_destroy(cc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_prestate_setup_teardown(
			test_rows_across_chunks, setup, teardown, &narrow),
		cmocka_unit_test_prestate_setup_teardown(
			test_rows_across_chunks, setup, teardown, &full_width),
		cmocka_unit_test_prestate_setup_teardown(
			test_rows_across_chunks, setup, teardown, &one_d),
		cmocka_unit_test_prestate_setup_teardown(
			test_truncated_file_is_eio, setup, teardown, &narrow),
		cmocka_unit_test(test_loader),
		cmocka_unit_test(test_parts),
		cmocka_unit_test(test_arrays_apart),
		cmocka_unit_test(test_least_recently_used_goes),
		cmocka_unit_test(test_one_load_shared),
		cmocka_unit_test(test_share),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
