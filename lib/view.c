#include "view.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "buf.h"
#include "npy.h"
#include "plan.h"
#include "source.h"
#include "stats.h"

/* Refuse plans whose working set would not fit a sane daemon. */
#define WINDOW_BYTES_MAX (UINT64_C(1) << 30)
#define BATCH_BYTES_MAX (UINT64_C(1) << 30)

struct rfs_view {
	struct rfs_config config;
	struct rfs_source *source;
	struct rfs_planner *planner;
	struct rfs_cache *cache;
	struct rfs_stats *stats;
	uint64_t view_id;
	uint64_t file_size[RFS_KIND_COUNT];
	char *config_json, *dataset_json;
	size_t config_json_len, dataset_json_len;
};

static void batch_shape(const struct rfs_view *v, uint64_t kind,
			uint64_t shape[2], int *ndims, enum rfs_dtype *dtype)
{
	const struct rfs_source_info *info = rfs_source_info(v->source);
	shape[0] = v->config.batch_size;
	shape[1] = info->cols;
	*ndims = kind == RFS_KIND_BATCH ? info->ndims : 1;
	*dtype = kind == RFS_KIND_BATCH ? info->dtype : RFS_INT64;
}

static int fill(void *ctx, const struct rfs_cache_key *key, void **data,
		size_t *len)
{
	struct rfs_view *v = ctx;
	uint64_t shape[2];
	int ndims;
	enum rfs_dtype dtype;
	int rc = -ENOMEM;

	batch_shape(v, key->kind, shape, &ndims, &dtype);
	size_t size = v->file_size[key->kind];
	unsigned char *buf = malloc(size);
	int64_t *rows = malloc(v->config.batch_size * sizeof(*rows));
	if (!buf || !rows)
		goto fail;
	size_t header = rfs_npy_header(dtype, ndims, shape, (char *)buf);
	rc = rfs_planner_batch(v->planner, key->epoch, key->rank, key->batch,
			       rows);
	if (rc != 0)
		goto fail;
	if (key->kind == RFS_KIND_INDEX) {
		/* int64 little-endian: the host order on every platform we
		 * build for; a big-endian port would swap here. */
		memcpy(buf + header, rows, v->config.batch_size * 8);
	} else {
		rc = rfs_source_read_rows(v->source, rows,
					  v->config.batch_size, buf + header);
		if (rc != 0)
			goto fail;
	}
	free(rows);
	*data = buf;
	*len = size;
	return 0;
fail:
	free(rows);
	free(buf);
	return rc;
}

static int render_config(struct rfs_view *v)
{
	struct rfs_buf b = { 0 };
	rfs_buf_printf(&b, "{\n");
	rfs_config_render_json(&v->config, &b);
	rfs_buf_printf(&b, ",\n  \"view_id\": \"%016llx\"\n}\n",
		       (unsigned long long)v->view_id);
	return rfs_buf_finish(&b, &v->config_json, &v->config_json_len);
}

static int render_dataset(struct rfs_view *v)
{
	const struct rfs_source_info *i = rfs_source_info(v->source);
	struct rfs_buf b = { 0 };
	rfs_buf_printf(&b, "{\n  \"sources\": [{\"path\": ");
	rfs_buf_json_string(&b, i->path);
	rfs_buf_printf(&b, ", \"rows\": %llu}],\n  \"dataset\": ",
		       (unsigned long long)i->rows);
	rfs_buf_json_string(&b, i->dataset);
	rfs_buf_printf(&b,
		       ",\n  \"rows\": %llu,\n  \"columns\": %llu,\n"
		       "  \"dtype\": \"%s\",\n  \"layout\": \"%s\",\n"
		       "  \"read_path\": \"%s\",\n",
		       (unsigned long long)i->rows,
		       (unsigned long long)i->cols, rfs_dtype_name(i->dtype),
		       i->layout, i->direct ? "pread" : "hdf5");
	if (i->ndims == 2)
		rfs_buf_printf(&b, "  \"shape\": [%llu, %llu],\n",
			       (unsigned long long)i->rows,
			       (unsigned long long)i->cols);
	else
		rfs_buf_printf(&b, "  \"shape\": [%llu],\n",
			       (unsigned long long)i->rows);
	rfs_buf_printf(&b, "  \"fingerprint\": \"%016llx\"\n}\n",
		       (unsigned long long)i->fingerprint);
	return rfs_buf_finish(&b, &v->dataset_json, &v->dataset_json_len);
}

/* view_id: xxh64 of the dataset fingerprint and every byte-changing
 * option, so equal ids mean equal files on every node. */
static int compute_view_id(struct rfs_view *v)
{
	struct rfs_buf b = { 0 };
	rfs_buf_printf(&b, "fingerprint=%016llx\n",
		       (unsigned long long)rfs_source_info(v->source)
			       ->fingerprint);
	rfs_config_render_identity(&v->config, &b);
	char *text;
	size_t len;
	int rc = rfs_buf_finish(&b, &text, &len);
	if (rc != 0)
		return rc;
	v->view_id = XXH64(text, len, 0);
	free(text);
	return 0;
}

static int check_sizes(struct rfs_view *v, char *err, size_t errlen)
{
	const struct rfs_source_info *i = rfs_source_info(v->source);
	const struct rfs_config *c = &v->config;
	uint64_t g = c->world_size * c->batch_size;
	if (i->rows < g) {
		snprintf(err, errlen,
			 "%s: %llu rows are fewer than one global batch "
			 "(world_size %llu x batch_size %llu = %llu)",
			 i->path, (unsigned long long)i->rows,
			 (unsigned long long)c->world_size,
			 (unsigned long long)c->batch_size,
			 (unsigned long long)g);
		return -EINVAL;
	}
	uint64_t window = c->fetch_factor * g;
	if (window > i->rows)
		window = i->rows;
	if (window > WINDOW_BYTES_MAX / 8) {
		snprintf(err, errlen,
			 "fetch_factor x world_size x batch_size = %llu rows "
			 "per fetch window is too large (at most %llu)",
			 (unsigned long long)window,
			 (unsigned long long)(WINDOW_BYTES_MAX / 8));
		return -EINVAL;
	}
	if (c->batch_size > BATCH_BYTES_MAX / rfs_source_row_bytes(v->source)) {
		snprintf(err, errlen,
			 "batch_size=%llu: a batch of %zu-byte rows would "
			 "exceed 1 GiB",
			 (unsigned long long)c->batch_size,
			 rfs_source_row_bytes(v->source));
		return -EINVAL;
	}
	return 0;
}

int rfs_view_create(const struct rfs_config *c, const char *source_path,
		    struct rfs_view **out, char *err, size_t errlen)
{
	struct rfs_view *v = calloc(1, sizeof(*v));
	int rc = -ENOMEM;
	if (!v) {
		snprintf(err, errlen, "out of memory");
		return rc;
	}
	v->config = *c;
	v->config.dataset = v->config.log_file = NULL;
	if (c->log_file && !(v->config.log_file = strdup(c->log_file)))
		goto oom;

	rc = rfs_source_open(source_path, c->dataset, &v->source, err, errlen);
	if (rc != 0)
		goto fail;
	v->config.dataset = strdup(rfs_source_info(v->source)->dataset);
	if (!v->config.dataset)
		goto oom;
	rc = check_sizes(v, err, errlen);
	if (rc != 0)
		goto fail;
	rc = rfs_planner_create(&v->config, rfs_source_info(v->source)->rows,
				&v->planner);
	if (rc != 0)
		goto oom;
	for (uint64_t k = 0; k < RFS_KIND_COUNT; k++) {
		uint64_t shape[2];
		int ndims;
		enum rfs_dtype dtype;
		batch_shape(v, k, shape, &ndims, &dtype);
		v->file_size[k] = rfs_npy_file_size(dtype, ndims, shape);
	}
	rc = rfs_cache_create(v->config.cache_mb << 20, fill, v, &v->cache);
	if (rc == 0)
		rc = rfs_stats_create(v->config.world_size, &v->stats);
	if (rc == 0)
		rc = compute_view_id(v);
	if (rc == 0)
		rc = render_config(v);
	if (rc == 0)
		rc = render_dataset(v);
	if (rc != 0)
		goto oom;
	*out = v;
	return 0;
oom:
	rc = -ENOMEM;
	snprintf(err, errlen, "out of memory");
fail:
	rfs_view_destroy(v);
	return rc;
}

void rfs_view_destroy(struct rfs_view *v)
{
	if (!v)
		return;
	rfs_cache_destroy(v->cache);
	rfs_stats_destroy(v->stats);
	rfs_planner_destroy(v->planner);
	rfs_source_destroy(v->source);
	rfs_config_free(&v->config);
	free(v->config_json);
	free(v->dataset_json);
	free(v);
}

const struct rfs_config *rfs_view_config(const struct rfs_view *v)
{
	return &v->config;
}

uint64_t rfs_view_batches_per_rank(const struct rfs_view *v)
{
	return rfs_planner_layout(v->planner)->batches_per_rank;
}

uint64_t rfs_view_file_size(const struct rfs_view *v, uint64_t kind)
{
	return v->file_size[kind];
}

int64_t rfs_view_mtime(const struct rfs_view *v)
{
	return rfs_source_info(v->source)->mtime;
}

const char *rfs_view_config_json(const struct rfs_view *v, size_t *len)
{
	*len = v->config_json_len;
	return v->config_json;
}

const char *rfs_view_dataset_json(const struct rfs_view *v, size_t *len)
{
	*len = v->dataset_json_len;
	return v->dataset_json;
}

int rfs_view_stats_json(struct rfs_view *v, char **out, size_t *len)
{
	struct rfs_cache_counters cc;
	struct rfs_buf b = { 0 };
	rfs_cache_counters(v->cache, &cc);
	rfs_buf_printf(&b, "{\n  \"view_id\": \"%016llx\",\n",
		       (unsigned long long)v->view_id);
	rfs_stats_render_json(v->stats, &b);
	rfs_buf_printf(&b,
		       ",\n  \"cache\": {\"hits\": %llu, \"misses\": %llu, "
		       "\"bytes\": %llu, \"entries\": %llu, "
		       "\"capacity_bytes\": %llu}\n}\n",
		       (unsigned long long)cc.hits,
		       (unsigned long long)cc.misses,
		       (unsigned long long)cc.bytes,
		       (unsigned long long)cc.entries,
		       (unsigned long long)(v->config.cache_mb << 20));
	return rfs_buf_finish(&b, out, len);
}

int rfs_view_get(struct rfs_view *v, const struct rfs_cache_key *key,
		 struct rfs_cache_entry **out)
{
	return rfs_cache_get(v->cache, key, out);
}

void rfs_view_put(struct rfs_view *v, struct rfs_cache_entry *e)
{
	rfs_cache_put(v->cache, e);
}

void rfs_view_count_open(struct rfs_view *v, uint64_t rank)
{
	rfs_stats_batch_opened(v->stats, rank);
}

void rfs_view_count_bytes(struct rfs_view *v, uint64_t rank, uint64_t bytes)
{
	rfs_stats_bytes_served(v->stats, rank, bytes);
}

int rfs_view_plan(struct rfs_view *v, uint64_t epoch, uint64_t rank,
		  uint64_t batch, int64_t *rows)
{
	return rfs_planner_batch(v->planner, epoch, rank, batch, rows);
}
