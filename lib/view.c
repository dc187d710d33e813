#include "view.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "bigbuf.h"
#include "buf.h"
#include "convert.h"
#include "dataset.h"
#include "kind.h"
#include "log.h"
#include "npy.h"
#include "npz.h"
#include "plan.h"
#include "prefetch.h"
#include "sampler.h"
#include "selection.h"
#include "stats.h"

/* Refuse plans whose working set would not fit a sane daemon. */
#define WINDOW_BYTES_MAX (UINT64_C(1) << 30)
#define BATCH_BYTES_MAX (UINT64_C(1) << 30)
#define NPZ_BYTES_MAX (UINT64_C(7) << 29) /* 3.5 GiB: no zip64 needed */

/* Where each rank's sequential reader is, for prefetch, per rank and
 * kind, in positions (epoch x batches + batch). Protected by
 * rfs_view.readers_lock. */
struct reader {
	uint64_t queued_to; /* the furthest queued */
	uint64_t furthest; /* the furthest opened since the last jump */
	uint64_t last_open_ns; /* 0: never opened */
};

/* Readers that opened a batch within this long share the prefetch room;
 * one idle longer (a one-off cat, a finished job) leaves it to others. */
#define READER_IDLE_NS (UINT64_C(10) * 1000000000u)
/* Positions a loader's concurrent workers open out of order by: at most
 * their number times the batches each keeps ahead. */
#define REORDER_SLACK 32

struct rfs_view {
	struct rfs_config config;
	struct rfs_dataset *dataset;
	struct rfs_selection selection;
	struct rfs_planner *planner;
	struct rfs_cache *cache;
	struct rfs_stats *stats;
	struct rfs_prefetch *prefetch; /* NULL: prefetch=0 */
	uint64_t prefetch_depth; /* batches ahead, bounded by the cache */
	uint64_t prefetch_room; /* bytes all readers' queued batches may take */
	uint64_t batch_cost; /* a batch file and its generation's scratch */
	pthread_mutex_t readers_lock;
	struct reader *readers; /* world_size x RFS_KIND_COUNT */
	/* Protected by readers_lock: readers within READER_IDLE_NS, counted
	 * at that time. */
	uint64_t active_readers, readers_counted_ns;
	atomic_int prefetch_paused_logged;
	enum rfs_dtype out_dtype; /* of batch files */
	int sparse; /* CSR source: dense .npy built from CSR, and .npz */
	uint64_t view_id;
	uint64_t kinds;
	uint64_t file_size[RFS_KIND_COUNT][2]; /* [kind][0 full, 1 last] */
	char *config_json, *dataset_json;
	size_t config_json_len, dataset_json_len;
};

/* Shape and dtype of a .npy file of kind (not npz). */
static void file_shape(const struct rfs_view *v, uint64_t kind, uint64_t rows,
		       uint64_t shape[2], int *ndims, enum rfs_dtype *dtype)
{
	const struct rfs_source_info *info = rfs_dataset_info(v->dataset);
	shape[0] = rows;
	shape[1] = info->cols;
	*ndims = kind == RFS_KIND_BATCH ? info->ndims : 1;
	*dtype = kind == RFS_KIND_BATCH ? v->out_dtype : RFS_INT64;
}

/* .npz values are in the served dtype, float16 as float32: scipy's
 * sparse matrices upcast float16 to float32, so save_npz never writes
 * float16 data, and toarray() of a loaded float16 matrix fails. */
static enum rfs_dtype npz_value_dtype(const struct rfs_view *v)
{
	return v->out_dtype == RFS_FLOAT16 ? RFS_FLOAT32 : v->out_dtype;
}

/* The .npz shape of a batch of rows: its stored values summed from
 * indptr, which is in memory (no data is read). */
static struct rfs_npz_csr npz_shape(const struct rfs_view *v,
				    const int64_t *rows, uint64_t n)
{
	uint64_t cols = rfs_dataset_info(v->dataset)->cols, nnz = 0;
	for (uint64_t i = 0; i < n; i++)
		nnz += rfs_dataset_row_nnz(v->dataset, (uint64_t)rows[i]);
	return (struct rfs_npz_csr){ .rows = n,
				     .cols = cols,
				     .nnz = nnz,
				     .value_dtype = npz_value_dtype(v),
				     .index_dtype = rfs_npz_index_dtype(
					     cols, nnz) };
}

/* Adds each stored value of a CSR batch (in dtype t) into its cell of the
 * zeroed dense rows at dst, as scipy's toarray() does: duplicate column
 * entries add up (so a batch's .npy is its .npz's toarray()), and integers
 * wrap. float16 adds in float32 and rounds once (numpy rounds each sum:
 * only duplicates can tell the two apart). */
#define SCATTER_ADD(type, into, from)                                      \
	do {                                                               \
		type *d = (type *)(void *)(into);                          \
		const type *s = (from);                                    \
		for (uint64_t i = 0; i < n; i++)                           \
			for (uint64_t k = csr->start[i];                   \
			     k < csr->start[i + 1]; k++)                   \
				d[i * ncols + (uint64_t)csr->cols[k]] +=   \
					s[k];                              \
	} while (0)

static int scatter_add(enum rfs_dtype t, unsigned char *dst,
		       const void *values, const struct rfs_csr *csr,
		       uint64_t n, uint64_t ncols)
{
	switch (t) {
	case RFS_INT8:
	case RFS_UINT8: SCATTER_ADD(uint8_t, dst, values); break;
	case RFS_INT16:
	case RFS_UINT16: SCATTER_ADD(uint16_t, dst, values); break;
	case RFS_INT32:
	case RFS_UINT32: SCATTER_ADD(uint32_t, dst, values); break;
	case RFS_INT64:
	case RFS_UINT64: SCATTER_ADD(uint64_t, dst, values); break;
	case RFS_FLOAT32: SCATTER_ADD(float, dst, values); break;
	case RFS_FLOAT64: SCATTER_ADD(double, dst, values); break;
	default: { /* float16 */
		/* The sums are batch-sized, the same size for every full
		 * batch: a pooled buffer (bigbuf.c), not a fresh mapping
		 * faulted in page by page at each batch. */
		uint64_t cells = n * ncols, nnz = csr->start[n];
		size_t acc_bytes = (cells ? cells : 1) * sizeof(float);
		float *acc = rfs_bigbuf_alloc(acc_bytes);
		float *v = malloc((nnz ? nnz : 1) * sizeof(float));
		if (!acc || !v) {
			rfs_bigbuf_free(acc, acc_bytes);
			free(v);
			return -ENOMEM;
		}
		memset(acc, 0, acc_bytes);
		rfs_convert(RFS_FLOAT32, v, t, values, nnz);
		SCATTER_ADD(float, acc, v);
		rfs_convert(t, dst, RFS_FLOAT32, acc, cells);
		rfs_bigbuf_free(acc, acc_bytes);
		free(v);
	}
	}
	return 0;
}

static int is_batch(uint64_t kind)
{
	return kind == RFS_KIND_BATCH || kind == RFS_KIND_NPZ;
}

/* A .npz whose values are the source's as stored: read straight into
 * the file. */
static int npz_reads_values_in_place(const struct rfs_view *v)
{
	return npz_value_dtype(v) == rfs_dataset_info(v->dataset)->dtype &&
	       v->out_dtype == rfs_dataset_info(v->dataset)->dtype;
}

/* Bytes of nnz values cast to the served dtype (0: served as stored). */
static size_t npz_served_bytes(const struct rfs_view *v, uint64_t nnz)
{
	int cast = v->out_dtype != rfs_dataset_info(v->dataset)->dtype;
	return cast ? nnz * rfs_dtype_size(v->out_dtype) : 0;
}

/* Bytes of nnz values widened from float16 (0: not float16). */
static size_t npz_widened_bytes(const struct rfs_view *v, uint64_t nnz)
{
	enum rfs_dtype t = npz_value_dtype(v);
	return t != v->out_dtype ? nnz * rfs_dtype_size(t) : 0;
}

/* The most memory dense_rows() or npz_file() of n rows (nnz stored
 * values) allocates beside the file, and generate()'s row ids: counted in
 * the cache with the file while it is made. */
static size_t fill_scratch(const struct rfs_view *v, uint64_t kind,
			   uint64_t n, uint64_t nnz)
{
	const struct rfs_source_info *info = rfs_dataset_info(v->dataset);
	size_t ids = n * sizeof(int64_t);
	if (!is_batch(kind))
		return ids;
	size_t scratch = ids + rfs_dataset_read_scratch(v->dataset, n, nnz);
	size_t out_elem = rfs_dtype_size(v->out_dtype);
	int cast = v->out_dtype != info->dtype;
	if (!v->sparse) /* the rows as stored, cast from there */
		return scratch + (cast ? n * info->cols *
					  rfs_dtype_size(info->dtype) :
				  0);
	if (kind == RFS_KIND_NPZ) /* the values as served, then widened */
		return scratch + (npz_reads_values_in_place(v) ?
					  0 :
					  npz_served_bytes(v, nnz) +
						  npz_widened_bytes(v, nnz));
	scratch += nnz * out_elem; /* the values, cast */
	if (v->out_dtype == RFS_FLOAT16) /* scatter_add()'s float32 sums */
		scratch += (n * info->cols + nnz) * sizeof(float);
	return scratch;
}

/* Dense rows of a batch, in the served dtype, at dst. */
static int dense_rows(struct rfs_view *v, const int64_t *rows, uint64_t n,
		      unsigned char *dst)
{
	const struct rfs_source_info *info = rfs_dataset_info(v->dataset);
	size_t out_elem = rfs_dtype_size(v->out_dtype);
	uint64_t cells = n * info->cols;
	if (!v->sparse && info->dtype == v->out_dtype)
		return rfs_dataset_read_rows(v->dataset, rows, n, dst);
	if (!v->sparse) { /* pooled, as scatter_add()'s sums */
		size_t raw_bytes = cells * rfs_dtype_size(info->dtype) + 1;
		void *raw = rfs_bigbuf_alloc(raw_bytes);
		int rc = raw ? rfs_dataset_read_rows(v->dataset, rows, n, raw) :
			       -ENOMEM;
		if (rc == 0)
			rfs_convert(v->out_dtype, dst, info->dtype, raw, cells);
		rfs_bigbuf_free(raw, raw_bytes);
		return rc;
	}
	/* CSR: zeros, then every stored value added at its column. */
	struct rfs_csr csr;
	int rc = rfs_dataset_read_csr(v->dataset, rows, n, NULL, &csr);
	if (rc != 0)
		return rc;
	void *values = malloc(csr.start[n] * out_elem + 1);
	if (!values) {
		rfs_csr_free(&csr);
		return -ENOMEM;
	}
	rfs_convert(v->out_dtype, values, info->dtype, csr.values,
		    csr.start[n]);
	memset(dst, 0, cells * out_elem);
	rc = scatter_add(v->out_dtype, dst, values, &csr, n, info->cols);
	free(values);
	rfs_csr_free(&csr);
	return rc;
}

/* The .npz of a batch: its CSR rows in the served dtype. Uncast values
 * are read straight to their place in the file. */
static int npz_file(struct rfs_view *v, const int64_t *rows, uint64_t n,
		    struct rfs_cache_fill *f)
{
	const struct rfs_source_info *info = rfs_dataset_info(v->dataset);
	struct rfs_npz_csr m = npz_shape(v, rows, n);
	unsigned char *buf = rfs_cache_fill_buffer(
		f, rfs_npz_size(&m), fill_scratch(v, RFS_KIND_NPZ, n, m.nnz));
	if (!buf)
		return -ENOMEM;
	int in_place = npz_reads_values_in_place(v);
	struct rfs_csr csr;
	int rc = rfs_dataset_read_csr(v->dataset, rows, n,
				      in_place ? buf + rfs_npz_values_offset(&m) :
						 NULL,
				      &csr);
	if (rc != 0)
		return rc;
	/* Cast to the served dtype, then widened where it is float16: the
	 * values a .npy of the batch holds. */
	size_t served = npz_served_bytes(v, m.nnz);
	unsigned char *cast = in_place ? NULL :
			      malloc(served + npz_widened_bytes(v, m.nnz) + 1);
	const void *values = csr.values;
	if (cast && served) {
		rfs_convert(v->out_dtype, cast, info->dtype, values, m.nnz);
		values = cast;
	}
	if (cast && m.value_dtype != v->out_dtype) {
		rfs_convert(m.value_dtype, cast + served, v->out_dtype, values,
			    m.nnz);
		values = cast + served;
	}
	if (in_place || cast)
		rfs_npz_write(&m, values, csr.cols, csr.start, buf);
	else
		rc = -ENOMEM;
	free(cast);
	rfs_csr_free(&csr);
	return rc;
}

uint64_t rfs_view_batch_rows(const struct rfs_view *v, uint64_t batch)
{
	return rfs_partition_batch_rows(rfs_planner_layout(v->planner), batch);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int generate(void *ctx, const struct rfs_cache_key *key,
		    struct rfs_cache_fill *f);

/* The cache's fill: generate(), timed for stats.json. */
static int fill(void *ctx, const struct rfs_cache_key *key,
		struct rfs_cache_fill *f)
{
	struct rfs_view *v = ctx;
	uint64_t t0 = now_ns();
	int rc = generate(ctx, key, f);
	if (rc == 0 && is_batch(key->kind))
		rfs_stats_generated(v->stats, now_ns() - t0);
	return rc;
}

/* The .npy of key's kind (rows, index or label) of a batch. */
static int npy_file(struct rfs_view *v, const struct rfs_cache_key *key,
		    const int64_t *rows, uint64_t n, struct rfs_cache_fill *f)
{
	uint64_t shape[2];
	int ndims;
	enum rfs_dtype dtype;
	file_shape(v, key->kind, n, shape, &ndims, &dtype);
	uint64_t nnz = key->kind == RFS_KIND_BATCH && v->sparse ?
			       npz_shape(v, rows, n).nnz :
			       0;
	unsigned char *buf = rfs_cache_fill_buffer(
		f, rfs_view_file_size(v, key),
		fill_scratch(v, key->kind, n, nnz));
	if (!buf)
		return -ENOMEM;
	size_t header = rfs_npy_header(dtype, ndims, shape, (char *)buf);
	/* int64 files are little-endian: the host order on every platform
	 * we build for; a big-endian port would swap here. */
	if (key->kind == RFS_KIND_INDEX) {
		memcpy(buf + header, rows, n * 8);
	} else if (key->kind == RFS_KIND_LABEL) {
		int64_t *labels = (int64_t *)(void *)(buf + header);
		for (uint64_t i = 0; i < n; i++) {
			int64_t code = rfs_selection_label(&v->selection,
							   (uint64_t)rows[i]);
			memcpy(&labels[i], &code, 8);
		}
	} else {
		return dense_rows(v, rows, n, buf + header);
	}
	return 0;
}

static int generate(void *ctx, const struct rfs_cache_key *key,
		    struct rfs_cache_fill *f)
{
	struct rfs_view *v = ctx;
	uint64_t n = rfs_view_batch_rows(v, key->batch);
	int64_t *rows = malloc(n * sizeof(*rows));
	if (!rows)
		return -ENOMEM;
	int rc = rfs_planner_batch(v->planner, key->epoch, key->rank,
				   key->batch, rows);
	if (rc == 0)
		rc = key->kind == RFS_KIND_NPZ ? npz_file(v, rows, n, f) :
						 npy_file(v, key, rows, n, f);
	free(rows);
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

static void render_label(const struct rfs_view *v, struct rfs_buf *b)
{
	const struct rfs_column *l = &v->selection.label;
	if (!v->selection.has_label) {
		rfs_buf_printf(b, "  \"label\": null,\n");
		return;
	}
	rfs_buf_printf(b, "  \"label\": {\"column\": ");
	rfs_buf_json_string(b, v->config.label);
	rfs_buf_printf(b, ", \"kind\": \"%s\", \"categories\": ",
		       rfs_column_kind_name(l));
	if (l->kind != RFS_COLUMN_CODES) {
		rfs_buf_printf(b, "null},\n");
		return;
	}
	rfs_buf_printf(b, "[");
	for (uint64_t i = 0; i < l->ncategories; i++) {
		rfs_buf_printf(b, "%s", i ? ", " : "");
		rfs_buf_json_string(b, l->categories[i]);
	}
	rfs_buf_printf(b, "]},\n");
}

static int render_dataset(struct rfs_view *v)
{
	const struct rfs_source_info *i = rfs_dataset_info(v->dataset);
	struct rfs_buf b = { 0 };
	rfs_buf_printf(&b, "{\n  \"sources\": [");
	for (size_t f = 0; f < rfs_dataset_files(v->dataset); f++) {
		const struct rfs_source_info *fi =
			rfs_dataset_file(v->dataset, f);
		rfs_buf_printf(&b, "%s\n    {\"path\": ", f ? "," : "");
		rfs_buf_json_string(&b, fi->path);
		rfs_buf_printf(&b,
			       ", \"rows\": %llu, \"first_row\": %llu, "
			       "\"layout\": \"%s\", \"read_path\": \"%s\"}",
			       (unsigned long long)fi->rows,
			       (unsigned long long)rfs_dataset_file_start(
				       v->dataset, f),
			       fi->layout, fi->read_path);
	}
	rfs_buf_printf(&b, "\n  ],\n  \"dataset\": ");
	rfs_buf_json_string(&b, i->dataset);
	uint64_t rows = rfs_dataset_rows(v->dataset);
	rfs_buf_printf(&b,
		       ",\n  \"rows\": %llu,\n  \"columns\": %llu,\n"
		       "  \"dtype\": \"%s\",\n  \"served_dtype\": \"%s\",\n"
		       "  \"format\": \"%s\",\n  \"layout\": \"%s\",\n"
		       "  \"read_path\": \"%s\",\n",
		       (unsigned long long)rows, (unsigned long long)i->cols,
		       rfs_dtype_name(i->dtype), rfs_dtype_name(v->out_dtype),
		       v->sparse ? "csr" : "dense", i->layout, i->read_path);
	if (v->sparse)
		rfs_buf_printf(&b, "  \"nnz\": %llu,\n",
			       (unsigned long long)rfs_dataset_nnz(v->dataset));
	if (i->ndims == 2)
		rfs_buf_printf(&b, "  \"shape\": [%llu, %llu],\n",
			       (unsigned long long)rows,
			       (unsigned long long)i->cols);
	else
		rfs_buf_printf(&b, "  \"shape\": [%llu],\n",
			       (unsigned long long)rows);
	rfs_buf_printf(&b, "  \"filtered_rows\": %llu,\n",
		       (unsigned long long)v->selection.kept_rows);
	render_label(v, &b);
	rfs_buf_printf(&b, "  \"fingerprint\": \"%016llx\"\n}\n",
		       (unsigned long long)rfs_dataset_fingerprint(v->dataset));
	return rfs_buf_finish(&b, &v->dataset_json, &v->dataset_json_len);
}

/* view_id: xxh64 of the dataset fingerprint and every byte-changing
 * option, so equal ids mean equal files on every node. */
static int compute_view_id(struct rfs_view *v)
{
	struct rfs_buf b = { 0 };
	rfs_buf_printf(&b, "fingerprint=%016llx\n",
		       (unsigned long long)rfs_dataset_fingerprint(v->dataset));
	uint64_t columns = rfs_selection_digest(&v->selection);
	if (columns)
		rfs_buf_printf(&b, "columns=%016llx\n",
			       (unsigned long long)columns);
	rfs_config_render_identity(&v->config, &b);
	/* epochs is no byte-changing option, but it can widen step names. */
	unsigned width = rfs_step_name_width(v->config.epochs,
					     rfs_view_batches_per_rank(v));
	if (width > RFS_STEP_MIN_WIDTH)
		rfs_buf_printf(&b, "step_digits=%u\n", width);
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
	const struct rfs_config *c = &v->config;
	uint64_t window = c->fetch_factor * c->world_size * c->batch_size;
	if (window > WINDOW_BYTES_MAX / 8) {
		snprintf(err, errlen,
			 "fetch_factor x world_size x batch_size = %llu rows "
			 "per fetch window is too large (at most %llu)",
			 (unsigned long long)window,
			 (unsigned long long)(WINDOW_BYTES_MAX / 8));
		return -EINVAL;
	}
	/* Rows as stored or as served, whichever is wider (cols is below
	 * 2^27, source.c, so these products fit). */
	const struct rfs_source_info *info = rfs_dataset_info(v->dataset);
	size_t elem = rfs_dtype_size(info->dtype);
	if (rfs_dtype_size(v->out_dtype) > elem)
		elem = rfs_dtype_size(v->out_dtype);
	uint64_t row_bytes = info->cols * elem;
	if (c->batch_size > BATCH_BYTES_MAX / row_bytes) {
		snprintf(err, errlen,
			 "batch_size=%llu: a batch of %llu-byte rows would "
			 "exceed 1 GiB",
			 (unsigned long long)c->batch_size,
			 (unsigned long long)row_bytes);
		return -EINVAL;
	}
	/* A batch of the fullest rows as .npz (value plus an 8-byte index
	 * per stored value) must stay a plain zip, below 4 GiB. A row holds
	 * at most cols values, or more where column ids repeat. */
	uint64_t npz_cell = rfs_dtype_size(npz_value_dtype(v)) + 8;
	uint64_t per_row = info->cols;
	if (v->sparse && rfs_dataset_max_row_nnz(v->dataset) > per_row)
		per_row = rfs_dataset_max_row_nnz(v->dataset);
	if (v->sparse && per_row > NPZ_BYTES_MAX / npz_cell / c->batch_size) {
		snprintf(err, errlen,
			 "batch_size=%llu: a batch of rows of up to %llu "
			 "stored values could make a .npz over 3.5 GiB",
			 (unsigned long long)c->batch_size,
			 (unsigned long long)per_row);
		return -EINVAL;
	}
	return 0;
}

/* Why the planner found no batch for some rank, in the user's terms. */
static void explain_too_few(const struct rfs_view *v, char *const *sources,
			    size_t nsources, char *err, size_t errlen)
{
	const struct rfs_config *c = &v->config;
	const char *what = nsources == 1 ? sources[0] : "the sources";
	const char *filtered = v->selection.kept ? " (after filters)" : "";
	if (c->partition == RFS_PARTITION_FILE) {
		uint64_t r = 0; /* the first rank short of a batch */
		while (r + 1 < v->selection.sequences &&
		       v->selection.seqs[r].length >= c->batch_size)
			r++;
		snprintf(err, errlen,
			 "%s: with partition=file rank %llu's files hold "
			 "%llu rows%s, fewer than batch_size %llu",
			 what, (unsigned long long)r,
			 (unsigned long long)v->selection.seqs[r].length,
			 filtered, (unsigned long long)c->batch_size);
		return;
	}
	uint64_t len = c->total_size ? c->total_size :
				       v->selection.kept_rows;
	snprintf(err, errlen,
		 "%s: %llu rows%s are fewer than one global batch "
		 "(world_size %llu x batch_size %llu = %llu)",
		 what, (unsigned long long)len, filtered,
		 (unsigned long long)c->world_size,
		 (unsigned long long)c->batch_size,
		 (unsigned long long)(c->world_size * c->batch_size));
}

static int size_files(struct rfs_view *v)
{
	const struct rfs_layout *l = rfs_planner_layout(v->planner);
	for (uint64_t k = 0; k < RFS_KIND_NPZ; k++) {
		for (int last = 0; last < 2; last++) {
			uint64_t shape[2];
			int ndims;
			enum rfs_dtype dtype;
			file_shape(v, k, last ? l->last_batch : l->batch_size,
				   shape, &ndims, &dtype);
			v->file_size[k][last] =
				rfs_npy_file_size(dtype, ndims, shape);
		}
	}
	v->kinds = v->selection.has_label ? 3 : 2;
	return 0;
}

/* dataset=, layer= and raw each name the matrix to serve: at most one. */
static int resolve_matrix(struct rfs_config *c, char *err, size_t errlen)
{
	int named = !!c->dataset + !!c->layer + !!c->raw;
	char *path = NULL;
	if (named > 1) {
		snprintf(err, errlen,
			 "options dataset, layer and raw each name the matrix "
			 "to serve: give one of them");
		return -EINVAL;
	}
	if (c->layer && asprintf(&path, "/layers/%s", c->layer) < 0)
		return -ENOMEM;
	if (c->raw && !(path = strdup("/raw/X")))
		return -ENOMEM;
	if (path) {
		free(c->dataset);
		c->dataset = path;
	}
	return 0;
}

static void prefetch_one(void *ctx, const struct rfs_cache_key *key)
{
	struct rfs_view *v = ctx;
	/* A failure is the reader's to see, when it asks itself. */
	rfs_cache_warm(v->cache, key);
}

/* Batches queued ahead of each reader now: the queued batches of the
 * active readers (the ranks that read this mount, not all of world_size
 * on a multi-node job) take at most prefetch_room together, counting
 * what their generation needs beside them, so that they are not evicted
 * before they are read. Called with readers_lock held. */
static uint64_t depth_now(const struct rfs_view *v)
{
	uint64_t readers = v->active_readers ? v->active_readers : 1;
	uint64_t fits = v->prefetch_room / (readers * v->batch_cost);
	return fits < v->prefetch_depth ? fits : v->prefetch_depth;
}

/* Counts the readers that opened within READER_IDLE_NS of now. Called with
 * readers_lock held. */
static void count_readers(struct rfs_view *v, uint64_t now)
{
	uint64_t active = 0;
	for (uint64_t i = 0; i < v->config.world_size * RFS_KIND_COUNT; i++)
		active += v->readers[i].last_open_ns &&
			  now - v->readers[i].last_open_ns <= READER_IDLE_NS;
	v->active_readers = active;
	v->readers_counted_ns = now;
}

/* A batch of batch_size rows as prefetch holds it: its file, and while it
 * is generated the scratch beside it (CSR: of a batch of average rows). */
static uint64_t batch_cost(const struct rfs_view *v)
{
	uint64_t n = v->config.batch_size, nnz = 0;
	if (v->sparse)
		nnz = (uint64_t)((double)rfs_dataset_nnz(v->dataset) /
				 (double)rfs_dataset_rows(v->dataset) *
				 (double)n);
	return v->file_size[RFS_KIND_BATCH][0] +
	       fill_scratch(v, RFS_KIND_BATCH, n, nnz);
}

/* Prefetch depth for one reader within half the batch cache; with more
 * readers, depth_now() shares that half out. */
static int start_prefetch(struct rfs_view *v, size_t cache_bytes)
{
	struct rfs_config *c = &v->config;
	if (c->threads == RFS_UNSET) {
		long cores = sysconf(_SC_NPROCESSORS_ONLN);
		c->threads = cores > 0 ? (uint64_t)cores : 1;
	}
	if (c->prefetch == RFS_UNSET)
		c->prefetch = 2 * c->fetch_factor;
	v->batch_cost = batch_cost(v);
	v->prefetch_room = cache_bytes / 2;
	uint64_t fits = v->prefetch_room / v->batch_cost;
	v->prefetch_depth = c->prefetch < fits ? c->prefetch : fits;
	if (c->prefetch && !v->prefetch_depth)
		rfs_log("prefetch is off: a batch (%llu bytes with its "
			"generation's scratch) does not fit in the prefetch "
			"room, half the generated files' part of cache_mb=%llu "
			"(%llu bytes); raise cache_mb",
			(unsigned long long)v->batch_cost,
			(unsigned long long)c->cache_mb,
			(unsigned long long)v->prefetch_room);
	c->prefetch = v->prefetch_depth; /* config.json: the depth in use */
	v->readers = calloc(c->world_size * RFS_KIND_COUNT,
			    sizeof(*v->readers));
	if (!v->readers)
		return -ENOMEM;
	pthread_mutex_init(&v->readers_lock, NULL);
	if (!v->prefetch_depth)
		return 0;
	return rfs_prefetch_create((unsigned)c->threads,
				   2 * c->world_size * v->prefetch_depth + 16,
				   prefetch_one, v, &v->prefetch);
}

/* total_size sets the draws of weighted and class_balanced; the other
 * strategies serve each of their L rows once. config.json shows L for
 * every strategy, so L itself is taken back, and nothing else. */
static int check_total_size(const struct rfs_view *v, char *err,
			    size_t errlen)
{
	const struct rfs_config *c = &v->config;
	if (!c->total_size || rfs_strategy_draws(c->strategy))
		return 0;
	uint64_t rows = 0;
	for (uint64_t s = 0; s < v->selection.sequences; s++)
		rows += v->selection.seqs[s].length;
	if (c->total_size == rows)
		return 0;
	snprintf(err, errlen,
		 "option total_size=%llu: strategy=%s serves each of its %llu "
		 "rows once (total_size sets the draws of weighted and "
		 "class_balanced)",
		 (unsigned long long)c->total_size,
		 rfs_strategy_name(c->strategy), (unsigned long long)rows);
	return -EINVAL;
}

int rfs_view_create(const struct rfs_config *c, char *const *sources,
		    size_t nsources, struct rfs_view **out, char *err,
		    size_t errlen)
{
	struct rfs_view *v = calloc(1, sizeof(*v));
	int rc = -ENOMEM;
	if (!v || rfs_config_copy(&v->config, c) != 0)
		goto oom;
	rc = resolve_matrix(&v->config, err, errlen);
	if (rc != 0)
		goto fail;
	/* Decoded chunks and batches share cache_mb: a row of a chunked
	 * dataset can span many chunks, and re-decoding them per batch costs
	 * far more than holding them. */
	size_t cache_bytes = v->config.cache_mb << 20;
	size_t chunk_bytes = cache_bytes / 2;
	/* Pooled free buffers: an eighth of the cache, at most 32 MiB. */
	rfs_bigbuf_limit(cache_bytes / 8);
	rc = rfs_dataset_open(sources, nsources, v->config.dataset, chunk_bytes,
			      &v->dataset, err, errlen);
	if (rc != 0)
		goto fail;
	const struct rfs_source_info *info = rfs_dataset_info(v->dataset);
	v->sparse = info->sparse;
	v->out_dtype = v->config.dtype ? (enum rfs_dtype)(v->config.dtype - 1) :
					 info->dtype;
	/* config.json and view_id show what was resolved, one way for each
	 * view: layer=counts is dataset=/layers/counts, and no dtype= the
	 * source's dtype (so its options mount the same view again). */
	free(v->config.dataset);
	v->config.dataset = strdup(rfs_dataset_info(v->dataset)->dataset);
	if (!v->config.dataset)
		goto oom;
	free(v->config.layer);
	v->config.layer = NULL;
	v->config.raw = 0;
	v->config.dtype = v->out_dtype + 1;
	rc = check_sizes(v, err, errlen);
	if (rc == 0)
		rc = rfs_selection_build(&v->config, v->dataset, &v->selection,
					 err, errlen);
	if (rc == 0)
		rc = check_total_size(v, err, errlen);
	if (rc != 0)
		goto fail;
	rc = rfs_planner_create(&v->config, v->selection.seqs, &v->planner);
	if (rc == -EINVAL) {
		explain_too_few(v, sources, nsources, err, errlen);
		goto fail;
	}
	if (rc != 0)
		goto oom;
	/* config.json shows the resolved length of S_e. */
	v->config.total_size = 0;
	for (uint64_t s = 0; s < v->selection.sequences; s++)
		v->config.total_size +=
			rfs_planner_sequence_length(v->planner, s);
	size_files(v);
	/* The planner's row ids come out of the batches' half, and may
	 * take half of it: fewer windows are built at once if need be. */
	size_t least;
	if (rfs_planner_limit(v->planner, (cache_bytes - chunk_bytes) / 2,
			      &least)) {
		snprintf(err, errlen,
			 "cache_mb=%llu is too small for the fetch windows: "
			 "planning needs %llu MiB of row ids, and may take a "
			 "quarter of cache_mb (fetch_factor x world_size x "
			 "batch_size rows per window); raise cache_mb or lower "
			 "fetch_factor",
			 (unsigned long long)v->config.cache_mb,
			 (unsigned long long)((least + (1 << 20) - 1) >> 20));
		rc = -EINVAL;
		goto fail;
	}
	size_t plan_bytes = rfs_planner_memory_bound(v->planner);
	size_t batch_bytes = cache_bytes - chunk_bytes - plan_bytes;
	rc = rfs_cache_create(batch_bytes, fill, v, &v->cache);
	if (rc == 0)
		rc = rfs_stats_create(v->config.world_size, &v->stats);
	if (rc == 0)
		rc = start_prefetch(v, batch_bytes);
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
	/* Workers use the cache and planner: stop them first. */
	rfs_prefetch_destroy(v->prefetch);
	if (v->readers)
		pthread_mutex_destroy(&v->readers_lock);
	free(v->readers);
	rfs_cache_destroy(v->cache);
	rfs_bigbuf_drain();
	rfs_stats_destroy(v->stats);
	rfs_planner_destroy(v->planner);
	rfs_selection_free(&v->selection);
	rfs_dataset_destroy(v->dataset);
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

uint64_t rfs_view_kinds(const struct rfs_view *v)
{
	return v->kinds;
}

int rfs_view_has_npz(const struct rfs_view *v)
{
	return v->sparse;
}

uint64_t rfs_view_file_size(struct rfs_view *v, const struct rfs_cache_key *key)
{
	uint64_t n = rfs_view_batch_rows(v, key->batch);
	if (key->kind != RFS_KIND_NPZ)
		return v->file_size[key->kind]
				   [key->batch + 1 >= rfs_view_batches_per_rank(v)];
	/* The .npz depends on the batch's stored values: plan it. */
	int64_t *rows = malloc(n * sizeof(*rows));
	if (!rows || rfs_planner_batch(v->planner, key->epoch, key->rank,
				       key->batch, rows) != 0) {
		free(rows);
		return 0;
	}
	struct rfs_npz_csr m = npz_shape(v, rows, n);
	free(rows);
	return rfs_npz_size(&m);
}

int64_t rfs_view_mtime(const struct rfs_view *v)
{
	return rfs_dataset_mtime(v->dataset);
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
	struct rfs_prefetch_counters pc = { 0 };
	struct rfs_buf b = { 0 };
	rfs_cache_counters(v->cache, &cc);
	if (v->prefetch)
		rfs_prefetch_counters(v->prefetch, &pc);
	rfs_buf_printf(&b, "{\n  \"view_id\": \"%016llx\",\n",
		       (unsigned long long)v->view_id);
	rfs_stats_render_json(v->stats, &b);
	rfs_buf_printf(&b,
		       ",\n  \"cache\": {\"hits\": %llu, \"misses\": %llu, "
		       "\"bytes\": %llu, \"entries\": %llu, "
		       "\"capacity_bytes\": %llu, \"room_waits\": %llu}",
		       (unsigned long long)cc.hits,
		       (unsigned long long)cc.misses,
		       (unsigned long long)cc.bytes,
		       (unsigned long long)cc.entries,
		       (unsigned long long)(v->config.cache_mb << 20),
		       (unsigned long long)cc.room_waits);
	uint64_t depth = 0;
	if (v->prefetch) {
		pthread_mutex_lock(&v->readers_lock);
		depth = depth_now(v);
		pthread_mutex_unlock(&v->readers_lock);
	}
	rfs_buf_printf(&b,
		       ",\n  \"prefetch\": {\"depth\": %llu, \"queued\": %llu, "
		       "\"done\": %llu, \"dropped\": %llu}\n}\n",
		       (unsigned long long)depth,
		       (unsigned long long)pc.queued,
		       (unsigned long long)pc.done,
		       (unsigned long long)pc.dropped);
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

int rfs_view_read(struct rfs_view *v, const struct rfs_cache_key *key,
		  uint64_t off, struct rfs_cache_entry **out)
{
	if (off != 0 || !is_batch(key->kind))
		return rfs_cache_get(v->cache, key, out);
	enum rfs_cache_found found;
	uint64_t t0 = now_ns();
	int rc = rfs_cache_get_found(v->cache, key, out, &found);
	/* The enums list the same cases in the same order. */
	rfs_stats_first_read(v->stats, key->rank, (enum rfs_stats_found)found,
			     now_ns() - t0);
	return rc;
}

void rfs_view_released(struct rfs_view *v, const struct rfs_cache_key *key)
{
	rfs_cache_retire(v->cache, key);
}

void rfs_view_opened(struct rfs_view *v, const struct rfs_cache_key *key)
{
	if (!is_batch(key->kind))
		return;
	rfs_stats_batch_opened(v->stats, key->rank, key->epoch, key->batch,
			       rfs_view_batch_rows(v, key->batch));
	if (!v->prefetch)
		return;
	/* A reader in order at pos gets pos + 1 .. pos + depth queued,
	 * continuing from what is queued already. In order allows for the
	 * reordering of a loader's concurrent workers: within REORDER_SLACK
	 * behind the furthest opened or past the queue. A jump queues
	 * nothing (a reader in random order would have depth batches made
	 * for nothing at every open); the next open in order starts afresh
	 * from there. Positions count on across epochs. A push dropped
	 * because the queue is full is not tried again: the workers are
	 * behind, and the reader generates that batch itself when it gets
	 * there. */
	uint64_t nb = rfs_view_batches_per_rank(v);
	uint64_t pos = key->epoch * nb + key->batch, now = now_ns();
	pthread_mutex_lock(&v->readers_lock);
	struct reader *r = &v->readers[key->rank * RFS_KIND_COUNT + key->kind];
	int was_idle = !r->last_open_ns ||
		       now - r->last_open_ns > READER_IDLE_NS;
	if (!r->last_open_ns)
		r->queued_to = r->furthest = pos;
	r->last_open_ns = now;
	/* A reader starting or coming back changes the count at once;
	 * others leaving it are seen within a second. */
	if (was_idle || now - v->readers_counted_ns >= 1000000000u)
		count_readers(v, now);
	uint64_t depth = depth_now(v), from = pos + 1, to = pos + depth;
	if (!depth && atomic_exchange(&v->prefetch_paused_logged, 1) == 0)
		rfs_log("prefetch paused: %llu ranks reading, each batch %llu "
			"bytes with its generation's scratch, do not fit in "
			"the prefetch room of %llu bytes; raise cache_mb",
			(unsigned long long)v->active_readers,
			(unsigned long long)v->batch_cost,
			(unsigned long long)v->prefetch_room);
	if (pos <= r->queued_to + 1 + REORDER_SLACK &&
	    pos + REORDER_SLACK >= r->furthest) {
		from = r->queued_to >= from ? r->queued_to + 1 : from;
		r->queued_to = to > r->queued_to ? to : r->queued_to;
		r->furthest = pos > r->furthest ? pos : r->furthest;
	} else {
		to = pos;
		r->queued_to = r->furthest = pos;
	}
	pthread_mutex_unlock(&v->readers_lock);
	for (uint64_t p = from; p <= to && p / nb < RFS_EPOCHS; p++) {
		struct rfs_cache_key next = { .epoch = p / nb,
					      .rank = key->rank,
					      .batch = p % nb,
					      .kind = key->kind };
		rfs_prefetch_push(v->prefetch, &next);
	}
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

int rfs_view_xxh3(struct rfs_view *v, const struct rfs_cache_key *key,
		  char out[17])
{
	struct rfs_cache_entry *e;
	int rc = rfs_view_get(v, key, &e);
	if (rc != 0)
		return rc;
	XXH64_hash_t h = XXH3_64bits(rfs_cache_entry_data(e),
				     rfs_cache_entry_size(e));
	rfs_view_put(v, e);
	snprintf(out, 17, "%016llx", (unsigned long long)h);
	return 0;
}
