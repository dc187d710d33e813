/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/serve/view.c: one source seen through one configuration,
 * through the facade the front end calls (generation: test_batch.c;
 * prefetch policy: test_lookahead.c; JSON: test_view_json.c). */
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
#include <sys/stat.h>
#include <unistd.h>

#include "core/config.h"
#include "h5_fixture.h"
#include "os/memlimit.h"
#include "serve/npy.h"
#include "serve/view.h"

#define ROWS 1000
#define COLS 5

struct fixture {
	char dir[PATH_MAX];
	char path[PATH_MAX + 32]; /* the N x D float32 source, /X */
};

static float value(uint64_t r, uint64_t c)
{
	return h5fx_f32_value(r, c);
}

static int write_source_cols(const char *path, uint64_t rows, int ndims,
			     uint64_t cols)
{
	return h5fx_write_f32(path, rows, cols, ndims, 0);
}

static int write_source(const char *path, uint64_t rows, int ndims)
{
	return write_source_cols(path, rows, ndims, COLS);
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

/* world_size 2 x batch_size 16, fetch_factor 4, plus extra options. */
/* A file's size through rfs_view_file_size(), which must succeed. */
static uint64_t file_size(struct rfs_view *v, uint64_t kind)
{
	uint64_t size = 0;
	struct rfs_cache_key k = { .kind = kind };
	assert_int_equal(rfs_view_file_size(v, &k, &size), 0);
	return size;
}

static void make_config(struct rfs_config *c, const char *strategy,
			const char *seed)
{
	char err[128];
	rfs_config_init(c);
	assert_int_equal(rfs_config_set(c, "world_size", "2", err, sizeof(err)),
			 0);
	assert_int_equal(
		rfs_config_set(c, "batch_size", "16", err, sizeof(err)), 0);
	assert_int_equal(
		rfs_config_set(c, "fetch_factor", "4", err, sizeof(err)), 0);
	assert_int_equal(
		rfs_config_set(c, "strategy", strategy, err, sizeof(err)), 0);
	assert_int_equal(rfs_config_set(c, "seed", seed, err, sizeof(err)), 0);
	assert_int_equal(rfs_config_set(c, "cache_mb", "1", err, sizeof(err)),
			 0);
	/* Exact cache counters below: no background generation. */
	assert_int_equal(rfs_config_set(c, "prefetch", "0", err, sizeof(err)),
			 0);
}

static struct rfs_view *create_ok(const struct rfs_config *c, const char *path)
{
	struct rfs_view *v = NULL;
	char err[512] = "";
	int rc = rfs_view_create(c, (char *[]){ (char *)path }, 1, &v, err,
				 sizeof(err));
	if (rc != 0)
		fail_msg("view on %s: %d %s", path, rc, err);
	assert_non_null(v);
	return v;
}

/* The view_id text from config.json. */
static void view_id_of(struct rfs_view *v, char id[17])
{
	size_t len;
	const char *j = rfs_view_config_json(v, &len);
	const char *at = strstr(j, "\"view_id\": \"");
	assert_non_null(at);
	at += strlen("\"view_id\": \"");
	memcpy(id, at, 16);
	id[16] = '\0';
	assert_int_equal(strspn(id, "0123456789abcdef"), 16);
	assert_int_equal(at[16], '"');
}

static void test_sizes_and_layout(void **state)
{
	struct fixture *f = *state;
	struct rfs_config c;
	make_config(&c, "block_shuffle", "3");
	struct rfs_view *v = create_ok(&c, f->path);
	assert_true(rfs_view_batches_per_rank(v) == ROWS / 32);

	char header[RFS_NPY_HEADER_MAX];
	const uint64_t bshape[2] = { 16, COLS }, ishape[1] = { 16 };
	uint64_t bsize =
		rfs_npy_header(RFS_FLOAT32, 2, bshape, header) + 16 * COLS * 4;
	uint64_t isize = rfs_npy_header(RFS_INT64, 1, ishape, header) + 16 * 8;
	assert_true(file_size(v, RFS_KIND_BATCH) == bsize);
	assert_true(file_size(v, RFS_KIND_INDEX) == isize);
	assert_true(bsize == 128 + 320 && isize == 128 + 128);

	struct stat st;
	assert_int_equal(stat(f->path, &st), 0);
	assert_true(rfs_view_mtime(v) == st.st_mtime);

	/* Effective options: copied, dataset resolved for .h5ad. */
	const struct rfs_config *e = rfs_view_config(v);
	assert_true(e != &c);
	assert_int_equal(e->world_size, 2);
	assert_int_equal(e->batch_size, 16);
	assert_int_equal(e->seed, 3);
	assert_non_null(e->dataset);
	assert_string_equal(e->dataset, "/X");
	assert_null(c.dataset); /* the caller's is untouched */
	rfs_view_destroy(v);
	rfs_view_destroy(NULL);
	rfs_config_free(&c);
}

static void test_json_files(void **state)
{
	struct fixture *f = *state;
	struct rfs_config c;
	make_config(&c, "shuffle", "77");
	struct rfs_view *v = create_ok(&c, f->path);
	size_t len;
	const char *cj = rfs_view_config_json(v, &len);
	assert_int_equal(strlen(cj), len);
	assert_int_equal(cj[0], '{');
	assert_non_null(strstr(cj, "\"view_id\": \""));
	assert_non_null(strstr(cj, "\"world_size\": 2"));
	assert_non_null(strstr(cj, "\"batch_size\": 16"));
	assert_non_null(strstr(cj, "\"seed\": 77"));
	assert_non_null(strstr(cj, "\"strategy\": \"shuffle\""));
	assert_non_null(strstr(cj, "\"dataset\": \"/X\""));
	assert_int_equal(strcmp(cj + len - 2, "}\n"), 0);

	const char *dj = rfs_view_dataset_json(v, &len);
	assert_int_equal(strlen(dj), len);
	assert_non_null(strstr(dj, "\"rows\": 1000"));
	assert_non_null(strstr(dj, "\"columns\": 5"));
	assert_non_null(strstr(dj, "\"dtype\": \"float32\""));
	assert_non_null(strstr(dj, "\"shape\": [1000, 5]"));
	assert_non_null(strstr(dj, "\"dataset\": \"/X\""));
	assert_non_null(strstr(dj, "\"layout\": \"contiguous\""));
	assert_non_null(strstr(dj, "cells.h5ad\""));
	assert_non_null(strstr(dj, "\"fingerprint\": \""));

	char *sj;
	assert_int_equal(rfs_view_stats_json(v, &sj, &len), 0);
	char id[17], want[64];
	view_id_of(v, id);
	snprintf(want, sizeof(want), "\"view_id\": \"%s\"", id);
	assert_non_null(strstr(sj, want));
	assert_non_null(strstr(sj, "\"misses\": 0"));
	assert_non_null(strstr(sj, "\"capacity_bytes\": 1048576"));
	/* cache_mb=1 split (budget.c): the planner's share is its bound. */
	assert_non_null(strstr(sj, "\"budget\": {\"total_bytes\": 1048576, "
				   "\"chunks_bytes\": 524288, "));
	assert_non_null(strstr(sj, "\"pool_bytes\": 131072, "
				   "\"sources_bytes\": "));
	assert_non_null(strstr(sj, "\"sources\": [\n    {\"path\": \""));
	assert_non_null(strstr(sj, "\", \"state\": \"ok\"}\n  ]\n}\n"));
	free(sj);
	rfs_view_destroy(v);
	rfs_config_free(&c);
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

/* Checks the batch file against the rows of its index file (the plan:
 * test_batch.c), and copies those rows to planned (NULL: not wanted). */
static void check_batches(struct rfs_view *v, uint64_t epoch, uint64_t rank,
			  uint64_t batch, int64_t *planned)
{
	struct rfs_cache_key ik = { .epoch = epoch,
				    .rank = rank,
				    .batch = batch,
				    .kind = RFS_KIND_INDEX };
	struct rfs_cache_key bk = ik;
	bk.kind = RFS_KIND_BATCH;
	struct rfs_cache_entry *ie, *be;
	assert_int_equal(rfs_view_get(v, &ik, &ie), 0);
	assert_int_equal(rfs_view_get(v, &bk, &be), 0);
	assert_true(rfs_cache_entry_size(ie) == file_size(v, RFS_KIND_INDEX));
	assert_true(rfs_cache_entry_size(be) == file_size(v, RFS_KIND_BATCH));

	const unsigned char *ip = rfs_cache_entry_data(ie);
	const unsigned char *bp = rfs_cache_entry_data(be);
	size_t ih = parse_npy(ip, rfs_cache_entry_size(ie), "<i8", "(16,)");
	size_t bh = parse_npy(bp, rfs_cache_entry_size(be), "<f4", "(16, 5)");
	assert_int_equal(ih + 16 * 8, rfs_cache_entry_size(ie));
	assert_int_equal(bh + 16 * COLS * 4, rfs_cache_entry_size(be));

	int64_t rows[16];
	memcpy(rows, ip + ih, sizeof(rows));
	if (planned)
		memcpy(planned, rows, sizeof(rows));
	for (int j = 0; j < 16; j++) {
		assert_true(rows[j] >= 0 && rows[j] < ROWS);
		float got[COLS];
		memcpy(got, bp + bh + (size_t)j * COLS * 4, sizeof(got));
		for (int col = 0; col < COLS; col++)
			if (got[col] != value((uint64_t)rows[j], (uint64_t)col))
				fail_msg("e%llu r%llu b%llu slot %d (row %lld) "
					 "col %d: %g",
					 (unsigned long long)epoch,
					 (unsigned long long)rank,
					 (unsigned long long)batch, j,
					 (long long)rows[j], col,
					 (double)got[col]);
	}
	rfs_view_put(v, ie);
	rfs_view_put(v, be);
}

static void test_batch_bytes(void **state)
{
	struct fixture *f = *state;
	static const char *const strategies[] = { "streaming", "shuffle",
						  "block_shuffle" };
	for (int s = 0; s < 3; s++) {
		struct rfs_config c;
		make_config(&c, strategies[s], "5");
		struct rfs_view *v = create_ok(&c, f->path);
		uint64_t bpr = rfs_view_batches_per_rank(v);
		for (uint64_t e = 0; e < 2; e++)
			for (uint64_t r = 0; r < 2; r++)
				for (uint64_t k = 0; k < bpr; k += 5)
					check_batches(v, e, r, k, NULL);
		check_batches(v, 1234567, 1, bpr - 1, NULL);
		/* streaming serves rows in file order. */
		if (s == 0) {
			int64_t rows[16];
			check_batches(v, 0, 1, 3, rows);
			for (int j = 0; j < 16; j++)
				assert_true(rows[j] == 3 * 32 + 16 + j);
		}
		rfs_view_destroy(v);
		rfs_config_free(&c);
	}
}

static void test_get_is_cached(void **state)
{
	struct fixture *f = *state;
	struct rfs_config c;
	make_config(&c, "shuffle", "5");
	struct rfs_view *v = create_ok(&c, f->path);
	struct rfs_cache_key k = {
		.epoch = 0, .rank = 1, .batch = 2, .kind = RFS_KIND_BATCH
	};
	struct rfs_cache_entry *a, *b;
	assert_int_equal(rfs_view_get(v, &k, &a), 0);
	assert_int_equal(rfs_view_get(v, &k, &b), 0);
	assert_true(a == b);
	rfs_view_put(v, a);
	rfs_view_put(v, b);
	rfs_view_opened(v, &(struct rfs_cache_key){ .rank = 1 });
	rfs_view_count_bytes(v, 1, 448);
	char *sj;
	size_t len;
	assert_int_equal(rfs_view_stats_json(v, &sj, &len), 0);
	assert_non_null(strstr(sj, "\"hits\": 1"));
	assert_non_null(strstr(sj, "\"misses\": 1"));
	assert_non_null(strstr(sj, "\"entries\": 1"));
	assert_non_null(strstr(sj, "\"bytes_served\": 448"));
	free(sj);
	rfs_view_destroy(v);
	rfs_config_free(&c);
}

/* stats.json's prefetch field: depth, queued or done. */
static uint64_t prefetch_count(struct rfs_view *v, const char *field)
{
	char *sj = NULL, name[32];
	size_t len;
	assert_int_equal(rfs_view_stats_json(v, &sj, &len), 0);
	snprintf(name, sizeof(name), "\"%s\": ", field);
	const char *at = strstr(strstr(sj, "\"prefetch\""), name);
	assert_non_null(at);
	uint64_t n = strtoull(at + strlen(name), NULL, 10);
	free(sj);
	return n;
}

/* Waits (up to 30 s: a sanitized build on a busy machine is slow) until
 * n prefetched batches are done. */
static void wait_prefetched(struct rfs_view *v, uint64_t n)
{
	for (int i = 0; i < 30000 && prefetch_count(v, "done") < n; i++)
		usleep(1000);
	assert_int_equal(prefetch_count(v, "done"), n);
}

/* A view of path with prefetch=depth, and cache_mb unless NULL
 * (make_config's otherwise). */
static struct rfs_view *prefetching_view(struct rfs_config *c, const char *path,
					 const char *depth,
					 const char *cache_mb)
{
	char err[64];
	make_config(c, "shuffle", "5");
	assert_int_equal(rfs_config_set(c, "prefetch", depth, err, sizeof(err)),
			 0);
	if (cache_mb)
		assert_int_equal(rfs_config_set(c, "cache_mb", cache_mb, err,
						sizeof(err)),
				 0);
	return create_ok(c, path);
}

static void open_at(struct rfs_view *v, uint64_t epoch, uint64_t rank,
		    uint64_t batch)
{
	rfs_view_opened(v, &(struct rfs_cache_key){ .epoch = epoch,
						    .rank = rank,
						    .batch = batch });
}

static void test_opened_prefetches_ahead(void **state)
{
	struct fixture *f = *state;
	struct rfs_config c;
	struct rfs_view *v = prefetching_view(&c, f->path, "3", NULL);
	rfs_view_opened(v, &(struct rfs_cache_key){ .rank = 1, .batch = 4 });
	/* Batches 5, 6, 7 of rank 1 get generated in the background. */
	wait_prefetched(v, 3);
	char *sj = NULL;
	size_t len;
	assert_int_equal(rfs_view_stats_json(v, &sj, &len), 0);
	assert_non_null(strstr(sj, "\"depth\": 3, \"queued\": 3, "
				   "\"done\": 3"));
	/* Generated ahead, not missed: no reader asked for them. */
	assert_non_null(strstr(sj, "\"hits\": 0, \"misses\": 0, "
				   "\"prefetched\": 3"));
	free(sj);
	/* Reading one of them now is a hit; another batch is a miss. */
	struct rfs_cache_entry *e;
	struct rfs_cache_key k = { .rank = 1, .batch = 6 };
	assert_int_equal(rfs_view_get(v, &k, &e), 0);
	rfs_view_put(v, e);
	k.batch = 9;
	assert_int_equal(rfs_view_get(v, &k, &e), 0);
	rfs_view_put(v, e);
	assert_int_equal(rfs_view_stats_json(v, &sj, &len), 0);
	assert_non_null(strstr(sj, "\"hits\": 1, \"misses\": 1, "
				   "\"prefetched\": 3"));
	free(sj);
	rfs_view_destroy(v);
	rfs_config_free(&c);
}

/* The ranks that read share the room for prefetched batches: the depth
 * halves when a second starts. */
static void test_prefetch_depth_shared_by_readers(void **state)
{
	struct fixture *f = *state;
	struct rfs_config c;
	struct rfs_view *v = prefetching_view(&c, f->path, "60000", NULL);
	uint64_t depth = rfs_view_config(v)->prefetch;
	assert_true(depth >= 2 && depth < 60000); /* cut to the room */
	assert_int_equal(prefetch_count(v, "depth"), depth);
	open_at(v, 0, 0, 0);
	assert_int_equal(prefetch_count(v, "depth"), depth);
	open_at(v, 0, 1, 0);
	assert_int_equal(prefetch_count(v, "depth"), depth / 2);
	rfs_view_destroy(v);
	rfs_config_free(&c);
}

static void test_view_id(void **state)
{
	struct fixture *f = *state;
	struct rfs_config c1, c2, c3, c4;
	char err[64];
	char id1[17], id2[17], id3[17], id4[17];
	make_config(&c1, "block_shuffle", "5");
	make_config(&c2, "block_shuffle", "5");
	make_config(&c3, "block_shuffle", "6");
	make_config(&c4, "block_shuffle", "5");
	/* Options outside the identity do not change it. */
	assert_int_equal(rfs_config_set(&c2, "cache_mb", "7", err, sizeof(err)),
			 0);
	assert_int_equal(rfs_config_set(&c2, "epochs", "3", err, sizeof(err)),
			 0);
	assert_int_equal(rfs_config_set(&c2, "threads", "3", err, sizeof(err)),
			 0);
	assert_int_equal(
		rfs_config_set(&c4, "block_size", "32", err, sizeof(err)), 0);
	struct rfs_view *v1 = create_ok(&c1, f->path);
	struct rfs_view *v2 = create_ok(&c2, f->path);
	struct rfs_view *v3 = create_ok(&c3, f->path);
	struct rfs_view *v4 = create_ok(&c4, f->path);
	view_id_of(v1, id1);
	view_id_of(v2, id2);
	view_id_of(v3, id3);
	view_id_of(v4, id4);
	assert_string_equal(id1, id2);
	assert_string_not_equal(id1, id3);
	assert_string_not_equal(id1, id4);

	/* The same data in another file of another layout: same id. */
	char copy[PATH_MAX + 32];
	snprintf(copy, sizeof(copy), "%s/copy.h5ad", f->dir);
	assert_int_equal(write_source(copy, ROWS, 2), 0);
	struct rfs_view *v5 = create_ok(&c1, copy);
	char id5[17];
	view_id_of(v5, id5);
	assert_string_equal(id1, id5);
	/* Different data: different id. */
	char other[PATH_MAX + 32];
	snprintf(other, sizeof(other), "%s/other.h5ad", f->dir);
	assert_int_equal(write_source(other, ROWS + 1, 2), 0);
	struct rfs_view *v6 = create_ok(&c1, other);
	char id6[17];
	view_id_of(v6, id6);
	assert_string_not_equal(id1, id6);

	rfs_view_destroy(v1);
	rfs_view_destroy(v2);
	rfs_view_destroy(v3);
	rfs_view_destroy(v4);
	rfs_view_destroy(v5);
	rfs_view_destroy(v6);
	rfs_config_free(&c1);
	rfs_config_free(&c2);
	rfs_config_free(&c3);
	rfs_config_free(&c4);
}

/* The shares are handed out from cache_mb as settled: the default from
 * the memory limit (claims this small leave it), or a given one, whose
 * chunk share maps the source (800,000 bytes) where an eighth of it
 * stays beside the mapping. */
static void test_shares_from_settled(void **state)
{
	struct fixture *f = *state;
	struct rfs_config c;
	struct rfs_memlimit l;
	char err[256], path[PATH_MAX + 32], want[128];
	uint64_t mb = RFS_UNSET;
	rfs_memlimit_read("", &l);
	assert_int_equal(rfs_memlimit_fit(&mb, &l, err, sizeof(err)), 0);
	snprintf(path, sizeof(path), "%s/wide.h5ad", f->dir);
	assert_int_equal(write_source_cols(path, 40000, 2, COLS), 0);
	for (const char *given = NULL;; given = given ? "2" : "1") {
		make_config(&c, "shuffle", "5");
		if (!given)
			c.cache_mb = RFS_UNSET;
		else
			assert_int_equal(rfs_config_set(&c, "cache_mb", given,
							err, sizeof(err)),
					 0);
		struct rfs_view *v = create_ok(&c, path);
		uint64_t settled = rfs_view_config(v)->cache_mb;
		assert_true(settled ==
			    (given ? strtoull(given, NULL, 10) : mb));
		size_t len;
		char *sj;
		assert_int_equal(rfs_view_stats_json(v, &sj, &len), 0);
		snprintf(want, sizeof(want),
			 "\"total_bytes\": %llu, \"chunks_bytes\": %llu, ",
			 (unsigned long long)settled << 20,
			 (unsigned long long)settled << 19);
		assert_non_null(strstr(sj, want));
		free(sj);
		const char *dj = rfs_view_dataset_json(v, &len);
		assert_non_null(strstr(dj, settled == 1 ?
						   "\"read_path\": \"pread\"" :
						   "\"read_path\": \"mmap\""));
		rfs_view_destroy(v);
		rfs_config_free(&c);
		if (given && given[0] == '2')
			break;
	}
}

static void test_errors(void **state)
{
	struct fixture *f = *state;
	struct rfs_config c;
	char err[512];
	struct rfs_view *v = NULL;

	/* Fewer rows than one global batch (2 x 16 = 32). */
	char small[PATH_MAX + 32];
	snprintf(small, sizeof(small), "%s/small.h5ad", f->dir);
	assert_int_equal(write_source(small, 31, 2), 0);
	make_config(&c, "shuffle", "1");
	memset(err, 0, sizeof(err));
	assert_int_equal(rfs_view_create(&c, (char *[]){ (char *)small }, 1, &v,
					 err, sizeof(err)),
			 -EINVAL);
	assert_null(v);
	assert_non_null(strstr(err, "small.h5ad"));
	assert_non_null(strstr(err, "31 rows"));
	assert_non_null(strstr(err, "fewer than one global batch"));
	assert_non_null(strstr(err, "32"));
	/* Exactly one global batch is fine. */
	assert_int_equal(write_source(small, 32, 2), 0);
	v = create_ok(&c, small);
	assert_true(rfs_view_batches_per_rank(v) == 1);
	rfs_view_destroy(v);
	v = NULL;

	/* The source's own errors come through. */
	char missing[PATH_MAX + 32];
	snprintf(missing, sizeof(missing), "%s/missing.h5ad", f->dir);
	memset(err, 0, sizeof(err));
	assert_int_equal(rfs_view_create(&c, (char *[]){ (char *)missing }, 1,
					 &v, err, sizeof(err)),
			 -ENOENT);
	assert_null(v);
	assert_non_null(strstr(err, "missing.h5ad"));

	char wrong[64];
	assert_int_equal(
		rfs_config_set(&c, "dataset", "/Y", wrong, sizeof(wrong)), 0);
	memset(err, 0, sizeof(err));
	assert_int_equal(rfs_view_create(&c, (char *[]){ (char *)f->path }, 1,
					 &v, err, sizeof(err)),
			 -EINVAL);
	assert_null(v);
	assert_non_null(strstr(err, "/Y"));
	rfs_config_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sizes_and_layout),
		cmocka_unit_test(test_json_files),
		cmocka_unit_test(test_batch_bytes),
		cmocka_unit_test(test_get_is_cached),
		cmocka_unit_test(test_opened_prefetches_ahead),
		cmocka_unit_test(test_prefetch_depth_shared_by_readers),
		cmocka_unit_test(test_view_id),
		cmocka_unit_test(test_shares_from_settled),
		cmocka_unit_test(test_errors),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
