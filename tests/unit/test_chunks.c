/* Unit tests for lib/chunks.c: rows assembled from deflated chunks read
 * with pread, a truncated file, and one decode per chunk. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "chunks.h"
#include "h5_fixture.h"

#define ROWS 10
#define COLS 7
#define CR 4 /* chunk rows */
#define CC 3 /* chunk cols */

static uint16_t value(uint64_t r, uint64_t c)
{
	return (uint16_t)(r * 100 + c);
}

struct fixture {
	char dir[PATH_MAX];
	char path[PATH_MAX + 16];
	int fd;
	struct rfs_chunked c;
};

/* Writes a file of deflated chunks (full size at the edges, as HDF5
 * stores them) and fills in their locations. */
static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	if (!f || h5fx_tmpdir(f->dir, sizeof(f->dir)) != 0)
		return -1;
	snprintf(f->path, sizeof(f->path), "%s/chunks", f->dir);
	FILE *out = fopen(f->path, "wb");
	uint64_t grid_rows = (ROWS + CR - 1) / CR, grid_cols = (COLS + CC - 1) / CC;
	f->c = (struct rfs_chunked){ .path = f->path, .name = "/x",
				     .rows = ROWS, .cols = COLS,
				     .chunk_rows = CR, .chunk_cols = CC,
				     .grid_cols = grid_cols, .elem = 2,
				     .pipeline = { 1, { RFS_FILTER_DEFLATE } } };
	f->c.locs = calloc(grid_rows * grid_cols, sizeof(*f->c.locs));
	fputs("header", out);
	for (uint64_t gr = 0; gr < grid_rows; gr++)
		for (uint64_t gc = 0; gc < grid_cols; gc++) {
			uint16_t chunk[CR * CC] = { 0 };
			for (int r = 0; r < CR; r++)
				for (int c = 0; c < CC; c++)
					chunk[r * CC + c] = value(
						gr * CR + (uint64_t)r,
						gc * CC + (uint64_t)c);
			unsigned char z[256];
			uLongf len = sizeof(z);
			compress2(z, &len, (unsigned char *)chunk,
				  sizeof(chunk), 6);
			struct rfs_chunk_loc *loc =
				&f->c.locs[gr * grid_cols + gc];
			loc->addr = (uint64_t)ftell(out);
			loc->size = len;
			fwrite(z, 1, len, out);
		}
	fclose(out);
	f->fd = open(f->path, O_RDONLY);
	f->c.fd = f->fd;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	close(f->fd);
	h5fx_rmtree(f->dir);
	free(f);
	return 0;
}

static void test_rows_across_chunks(void **state)
{
	struct fixture *f = *state;
	struct rfs_chunk_cache *cc;
	uint64_t id = 99;
	assert_int_equal(rfs_chunk_cache_create(1 << 20, &cc), 0);
	assert_int_equal(rfs_chunk_cache_register(cc, &f->c, &id), 0);
	assert_true(id == 0);
	/* Every run of every length, so runs start and end inside and at
	 * the edges of chunks. */
	for (uint64_t first = 0; first < ROWS; first++) {
		for (uint64_t count = 1; first + count <= ROWS; count++) {
			uint16_t out[ROWS * COLS];
			memset(out, 0xff, sizeof(out));
			assert_int_equal(rfs_chunked_read(cc, id, first, count,
							  out, NULL),
					 0);
			for (uint64_t r = 0; r < count; r++)
				for (uint64_t c = 0; c < COLS; c++)
					assert_int_equal(out[r * COLS + c],
							 value(first + r, c));
		}
	}
	rfs_chunk_cache_destroy(cc);
}

static void test_truncated_file_is_eio(void **state)
{
	struct fixture *f = *state;
	struct rfs_chunk_cache *cc;
	uint64_t id;
	off_t cut = (off_t)f->c.locs[4].addr; /* the cache owns locs next */
	assert_int_equal(rfs_chunk_cache_create(1 << 20, &cc), 0);
	assert_int_equal(rfs_chunk_cache_register(cc, &f->c, &id), 0);
	assert_int_equal(truncate(f->path, cut), 0);
	uint16_t out[ROWS * COLS];
	assert_int_equal(rfs_chunked_read(cc, id, 0, 3, out, NULL), 0);
	assert_int_equal(rfs_chunked_read(cc, id, 5, 2, out, NULL), -EIO);
	rfs_chunk_cache_destroy(cc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_rows_across_chunks, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_truncated_file_is_eio,
						setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
