/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/serve/batch.c: a key's planned rows become the bytes of
 * its .npy (rows, index, label), at the size computed without them. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os/memlimit.h"
#include "serve/batch.h"
#include "serve/cache.h"
#include "core/config.h"
#include "source/dataset.h"
#include "h5_fixture.h"
#include "serve/kind.h"
#include "serve/npy.h"
#include "plan/plan.h"
#include "plan/selection.h"
#include "serve/stats.h"

#define ROWS 1000
#define COLS 5

struct fixture {
	char dir[PATH_MAX];
	char path[PATH_MAX + 32]; /* N x D float32 at /X, obs/cell_type */
};

/* What the sources borrow, as a mount's: a ledger of claims. */
static struct rfs_source_env env;

/* A file's size through rfs_batch_file_size(), which must succeed. */
static uint64_t size_of(struct rfs_batch *b, const struct rfs_cache_key *k)
{
	uint64_t size = 0;
	assert_int_equal(rfs_batch_file_size(b, k, &size), 0);
	return size;
}

static float value(uint64_t r, uint64_t c)
{
	return h5fx_f32_value(r, c);
}

static int8_t code_of(uint64_t r)
{
	return (int8_t)(r % 7 == 0 ? -1 : (int)(r % 3));
}

static int write_source(const char *path, uint64_t rows, int ndims)
{
	int8_t *codes = malloc(rows);
	int rc = codes ? h5fx_write_f32(path, rows, COLS, ndims, 1) : -1;
	for (uint64_t r = 0; r < rows && rc == 0; r++)
		codes[r] = code_of(r);
	static const char *const cats[] = { "a", "b", "c" };
	if (rc == 0)
		rc = h5fx_add_categorical(path, "cell_type", codes, rows, cats,
					  3);
	free(codes);
	return rc;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	if (!f || h5fx_tmpdir(f->dir, sizeof(f->dir)) != 0) {
		free(f);
		return -1;
	}
	snprintf(f->path, sizeof(f->path), "%s/cells.h5ad", f->dir);
	if (write_source(f->path, ROWS, 2) != 0) {
		h5fx_rmtree(f->dir);
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	h5fx_rmtree(f->dir);
	free(f);
	return 0;
}

/* What a batch generator stands on, as the view builds it. */
struct gen {
	struct rfs_config c;
	struct rfs_dataset *d;
	struct rfs_selection s;
	struct rfs_planner *p;
	struct rfs_stats *stats;
	struct rfs_batch *b;
	struct rfs_cache *cache;
};

static void set(struct rfs_config *c, const char *key, const char *value)
{
	char err[128];
	assert_int_equal(rfs_config_set(c, key, value, err, sizeof(err)), 0);
}

/* world_size 2 x batch_size 16, fetch_factor 4, labels from cell_type;
 * dtype unless NULL. */
static void gen_open(struct gen *g, const char *path, const char *strategy,
		     const char *dtype)
{
	char err[512] = "";
	memset(g, 0, sizeof(*g));
	rfs_config_init(&g->c);
	set(&g->c, "world_size", "2");
	set(&g->c, "batch_size", "16");
	set(&g->c, "fetch_factor", "4");
	set(&g->c, "strategy", strategy);
	set(&g->c, "seed", "5");
	set(&g->c, "label", "cell_type");
	char *paths[] = { (char *)path };
	if (rfs_dataset_open_joined(paths, 1, "/X", &env, 1 << 20, NULL, &g->d,
				    err, sizeof(err)) != 0)
		fail_msg("open %s: %s", path, err);
	enum rfs_dtype out = rfs_dataset_info(g->d)->dtype;
	if (dtype) { /* config's dtype: 0 the source's, else enum + 1 */
		set(&g->c, "dtype", dtype);
		out = (enum rfs_dtype)(g->c.dtype - 1);
	}
	assert_int_equal(
		rfs_batch_check_sizes(&g->c, g->d, out, err, sizeof(err)), 0);
	assert_int_equal(rfs_selection_build(&g->c, g->d, env.claims, &g->s,
					     err, sizeof(err)),
			 0);
	assert_int_equal(rfs_plan_create(&g->c, g->s.seqs, &g->p), 0);
	assert_int_equal(rfs_stats_create(2, &g->stats), 0);
	assert_int_equal(rfs_batch_create(g->d, g->p, &g->s, out, g->stats,
					  NULL, &g->b),
			 0);
	assert_int_equal(rfs_cache_create(1 << 20, rfs_batch_fill, g->b, NULL,
					  &g->cache),
			 0);
}

static void gen_close(struct gen *g)
{
	rfs_cache_destroy(g->cache);
	rfs_batch_destroy(g->b);
	rfs_stats_destroy(g->stats);
	rfs_plan_destroy(g->p);
	rfs_selection_free(&g->s);
	rfs_dataset_destroy(g->d);
	rfs_config_free(&g->c);
}

/* Parses an .npy header: returns its length and checks descr/shape. */
static size_t parse_npy(const unsigned char *p, size_t size, const char *descr,
			const char *shape)
{
	assert_true(size >= 64);
	assert_memory_equal(p, "\x93NUMPY\x01\x00", 8);
	size_t hlen = p[8] | (size_t)p[9] << 8;
	size_t total = 10 + hlen;
	assert_int_equal(total % 64, 0);
	assert_true(total <= size);
	assert_int_equal(p[total - 1], '\n');
	char dict[256];
	assert_true(hlen < sizeof(dict));
	memcpy(dict, p + 10, hlen);
	dict[hlen] = '\0';
	char want[128];
	snprintf(want, sizeof(want), "'descr': '%s'", descr);
	assert_non_null(strstr(dict, want));
	assert_non_null(strstr(dict, "'fortran_order': False"));
	snprintf(want, sizeof(want), "'shape': %s", shape);
	assert_non_null(strstr(dict, want));
	return total;
}

static struct rfs_cache_entry *get(struct gen *g, uint64_t epoch, uint64_t rank,
				   uint64_t batch, uint64_t kind)
{
	struct rfs_cache_key k = {
		.epoch = epoch, .rank = rank, .batch = batch, .kind = kind
	};
	struct rfs_cache_entry *e = NULL;
	assert_int_equal(rfs_cache_get(g->cache, &k, &e, NULL), 0);
	assert_true(rfs_cache_entry_size(e) == size_of(g->b, &k));
	return e;
}

/* The index file holds the planned rows, the batch their values, the
 * label file their codes. */
static void check_batch(struct gen *g, uint64_t epoch, uint64_t rank,
			uint64_t batch)
{
	struct rfs_cache_entry *ie = get(g, epoch, rank, batch, RFS_KIND_INDEX);
	struct rfs_cache_entry *be = get(g, epoch, rank, batch, RFS_KIND_BATCH);
	struct rfs_cache_entry *le = get(g, epoch, rank, batch, RFS_KIND_LABEL);
	const unsigned char *ip = rfs_cache_entry_data(ie);
	const unsigned char *bp = rfs_cache_entry_data(be);
	const unsigned char *lp = rfs_cache_entry_data(le);
	size_t ih = parse_npy(ip, rfs_cache_entry_size(ie), "<i8", "(16,)");
	size_t bh = parse_npy(bp, rfs_cache_entry_size(be), "<f4", "(16, 5)");
	size_t lh = parse_npy(lp, rfs_cache_entry_size(le), "<i8", "(16,)");
	assert_int_equal(bh + 16 * COLS * 4, rfs_cache_entry_size(be));
	int64_t rows[16], planned[16], codes[16];
	memcpy(rows, ip + ih, sizeof(rows));
	memcpy(codes, lp + lh, sizeof(codes));
	assert_int_equal(rfs_plan_batch(g->p, epoch, rank, batch, planned), 0);
	assert_memory_equal(rows, planned, sizeof(rows));
	for (int j = 0; j < 16; j++) {
		assert_true(rows[j] >= 0 && rows[j] < ROWS);
		assert_true(codes[j] == code_of((uint64_t)rows[j]));
		float got[COLS];
		memcpy(got, bp + bh + (size_t)j * COLS * 4, sizeof(got));
		for (int col = 0; col < COLS; col++)
			assert_true(got[col] ==
				    value((uint64_t)rows[j], (uint64_t)col));
	}
	rfs_cache_put(g->cache, ie);
	rfs_cache_put(g->cache, be);
	rfs_cache_put(g->cache, le);
}

static void test_files_hold_the_planned_rows(void **state)
{
	struct fixture *f = *state;
	static const char *const strategies[] = { "streaming", "shuffle",
						  "block_shuffle" };
	for (int s = 0; s < 3; s++) {
		struct gen g;
		gen_open(&g, f->path, strategies[s], NULL);
		uint64_t bpr = rfs_plan_layout(g.p)->batches_per_rank;
		assert_true(bpr == ROWS / 32);
		for (uint64_t e = 0; e < 2; e++)
			for (uint64_t r = 0; r < 2; r++)
				for (uint64_t k = 0; k < bpr; k += 5)
					check_batch(&g, e, r, k);
		check_batch(&g, 1234567, 1, bpr - 1);
		gen_close(&g);
	}
}

static void test_sizes_rows_and_cost(void **state)
{
	struct fixture *f = *state;
	struct gen g;
	gen_open(&g, f->path, "shuffle", NULL);
	char header[RFS_NPY_HEADER_MAX];
	const uint64_t bshape[2] = { 16, COLS }, ishape[1] = { 16 };
	uint64_t bsize =
		rfs_npy_header(RFS_FLOAT32, 2, bshape, header) + 16 * COLS * 4;
	uint64_t isize = rfs_npy_header(RFS_INT64, 1, ishape, header) + 16 * 8;
	struct rfs_cache_key k = { .kind = RFS_KIND_BATCH };
	assert_true(size_of(g.b, &k) == bsize);
	k.kind = RFS_KIND_INDEX;
	assert_true(size_of(g.b, &k) == isize);
	k.kind = RFS_KIND_LABEL;
	assert_true(size_of(g.b, &k) == isize);
	assert_true(rfs_batch_rows(g.b, 0) == 16);
	/* A batch held by prefetch: its file and the row ids beside it. */
	assert_true(rfs_batch_cost(g.b) >= bsize + 16 * 8);
	/* Nothing was generated for any of that. */
	struct rfs_cache_counters cc;
	rfs_cache_counters(g.cache, &cc);
	assert_true(cc.misses == 0);
	gen_close(&g);
}

/* dtype= casts the rows; the index is unchanged. */
static void test_cast(void **state)
{
	struct fixture *f = *state;
	struct gen g;
	gen_open(&g, f->path, "shuffle", "float64");
	struct rfs_cache_entry *be = get(&g, 0, 1, 2, RFS_KIND_BATCH);
	const unsigned char *bp = rfs_cache_entry_data(be);
	size_t bh = parse_npy(bp, rfs_cache_entry_size(be), "<f8", "(16, 5)");
	int64_t rows[16];
	assert_int_equal(rfs_plan_batch(g.p, 0, 1, 2, rows), 0);
	for (int j = 0; j < 16; j++) {
		double got;
		memcpy(&got, bp + bh + ((size_t)j * COLS + 3) * 8, 8);
		assert_true(got == (double)value((uint64_t)rows[j], 3));
	}
	rfs_cache_put(g.cache, be);
	gen_close(&g);
}

static void test_one_dimensional_source(void **state)
{
	struct fixture *f = *state;
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/labels.h5ad", f->dir);
	assert_int_equal(write_source(path, 200, 1), 0);
	struct gen g;
	gen_open(&g, path, "shuffle", NULL);
	struct rfs_cache_entry *e = get(&g, 0, 0, 1, RFS_KIND_BATCH);
	const unsigned char *p = rfs_cache_entry_data(e);
	size_t h = parse_npy(p, rfs_cache_entry_size(e), "<f4", "(16,)");
	assert_int_equal(h + 16 * 4, rfs_cache_entry_size(e));
	int64_t rows[16];
	assert_int_equal(rfs_plan_batch(g.p, 0, 0, 1, rows), 0);
	for (int j = 0; j < 16; j++) {
		float got;
		memcpy(&got, p + h + (size_t)j * 4, 4);
		/* Element r of a 1-d /X is element r of the writer's flat
		 * N x 5 buffer. */
		assert_true(got == value((uint64_t)rows[j] / COLS,
					 (uint64_t)rows[j] % COLS));
	}
	rfs_cache_put(g.cache, e);
	gen_close(&g);
}

/* A fetch window too large for a sane daemon is refused, naming the
 * options (a batch over 1 GiB needs wider rows than this source's). */
static void test_check_sizes(void **state)
{
	struct fixture *f = *state;
	struct gen g;
	gen_open(&g, f->path, "shuffle", NULL);
	char err[256] = "";
	struct rfs_config c;
	rfs_config_init(&c);
	set(&c, "fetch_factor", "60000");
	set(&c, "world_size", "100");
	set(&c, "batch_size", "100");
	assert_int_equal(rfs_batch_check_sizes(&c, g.d, RFS_FLOAT32, err,
					       sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "fetch window"));
	rfs_config_free(&c);
	gen_close(&g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_files_hold_the_planned_rows),
		cmocka_unit_test(test_sizes_rows_and_cost),
		cmocka_unit_test(test_cast),
		cmocka_unit_test(test_one_dimensional_source),
		cmocka_unit_test(test_check_sizes),
	};
	if (rfs_claims_create(NULL, &env.claims) != 0)
		return 1;
	int failed = cmocka_run_group_tests(tests, setup, teardown);
	rfs_claims_destroy(env.claims);
	return failed;
}
