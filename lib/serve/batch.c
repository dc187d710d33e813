/* SPDX-License-Identifier: MIT */
/*
 * A batch file is made in one pass into the buffer the cache hands out
 * (rfs_cache_fill_buffer()): the batch is planned (plan.c), its rows are
 * read in the served dtype (dataset.c, cast by convert.c, CSR rows
 * scattered into zeros), and the .npy header (npy.c) or the .npz's zip
 * (npz.c) is written around them. Everything a fill allocates beside the
 * file is bounded first (fill_scratch()) and counted by the cache with
 * it, so that concurrent fills stay within cache_mb.
 */
#include "serve/batch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bigbuf.h"
#include "core/convert.h"
#include "core/log.h"
#include "core/parse.h"
#include "serve/kind.h"
#include "serve/npy.h"
#include "serve/npz.h"

/* Refuse plans whose working set would not fit a sane daemon. */
#define WINDOW_BYTES_MAX (UINT64_C(1) << 30)
#define BATCH_BYTES_MAX (UINT64_C(1) << 30)
#define NPZ_BYTES_MAX (UINT64_C(7) << 29) /* 3.5 GiB: no zip64 needed */

struct rfs_batch {
	struct rfs_dataset *dataset; /* borrowed */
	struct rfs_planner *planner; /* borrowed */
	const struct rfs_selection *selection; /* borrowed: labels */
	struct rfs_stats *stats; /* borrowed; NULL: not timed */
	struct rfs_bigbuf *pool; /* borrowed: scratch (bigbuf.h) */
	enum rfs_dtype out_dtype; /* of batch files */
	int sparse; /* CSR source: dense .npy built from CSR, and .npz */
	uint64_t file_size[RFS_KIND_NPZ][2]; /* [kind][0 full, 1 last] */
};

/* Shape and dtype of a .npy file of kind (not npz). */
static void file_shape(const struct rfs_batch *b, uint64_t kind, uint64_t rows,
		       uint64_t shape[2], int *ndims, enum rfs_dtype *dtype)
{
	const struct rfs_source_info *info = rfs_dataset_info(b->dataset);
	shape[0] = rows;
	shape[1] = info->cols;
	*ndims = kind == RFS_KIND_BATCH ? info->ndims : 1;
	*dtype = kind == RFS_KIND_BATCH ? b->out_dtype : RFS_INT64;
}

/* .npz values are in the served dtype, float16 as float32: scipy's
 * sparse matrices upcast float16 to float32, so save_npz never writes
 * float16 data, and toarray() of a loaded float16 matrix fails. */
static enum rfs_dtype npz_value_dtype(enum rfs_dtype out)
{
	return out == RFS_FLOAT16 ? RFS_FLOAT32 : out;
}

/* The .npz shape of a batch of rows: its stored values summed from
 * indptr, which is in memory (no data is read). */
static struct rfs_npz_csr npz_shape(const struct rfs_batch *b,
				    const int64_t *rows, uint64_t n)
{
	uint64_t cols = rfs_dataset_info(b->dataset)->cols, nnz = 0;
	for (uint64_t i = 0; i < n; i++)
		nnz += rfs_dataset_row_nnz(b->dataset, (uint64_t)rows[i]);
	return (struct rfs_npz_csr){
		.rows = n,
		.cols = cols,
		.nnz = nnz,
		.value_dtype = npz_value_dtype(b->out_dtype),
		.index_dtype = rfs_npz_index_dtype(cols, nnz)
	};
}

/* Adds each stored value of a CSR batch (in dtype t) into its cell of the
 * zeroed dense rows at dst, as scipy's toarray() does: duplicate column
 * entries add up (so a batch's .npy is its .npz's toarray()), and integers
 * wrap. float16 adds in float32 and rounds once (numpy rounds each sum:
 * only duplicates can tell the two apart). */
#define SCATTER_ADD(type, into, from)                                          \
	do {                                                                   \
		type *d = (type *)(void *)(into);                              \
		const type *s = (from);                                        \
		for (uint64_t i = 0; i < n; i++)                               \
			for (uint64_t k = csr->start[i];                       \
			     k < csr->start[i + 1]; k++)                       \
				d[i * ncols + (uint64_t)csr->cols[k]] += s[k]; \
	} while (0)

static int scatter_add(struct rfs_bigbuf *pool, enum rfs_dtype t,
		       unsigned char *dst, const void *values,
		       const struct rfs_csr *csr, uint64_t n, uint64_t ncols)
{
	switch (t) {
	case RFS_INT8:
	case RFS_UINT8:
		SCATTER_ADD(uint8_t, dst, values);
		break;
	case RFS_INT16:
	case RFS_UINT16:
		SCATTER_ADD(uint16_t, dst, values);
		break;
	case RFS_INT32:
	case RFS_UINT32:
		SCATTER_ADD(uint32_t, dst, values);
		break;
	case RFS_INT64:
	case RFS_UINT64:
		SCATTER_ADD(uint64_t, dst, values);
		break;
	case RFS_FLOAT32:
		SCATTER_ADD(float, dst, values);
		break;
	case RFS_FLOAT64:
		SCATTER_ADD(double, dst, values);
		break;
	default: { /* float16 */
		/* The sums are batch-sized, the same size for every full
		 * batch: a pooled buffer (bigbuf.c), not a fresh mapping
		 * faulted in page by page at each batch. */
		uint64_t cells = n * ncols, nnz = csr->start[n];
		size_t acc_bytes = (cells ? cells : 1) * sizeof(float);
		float *acc = rfs_bigbuf_alloc(pool, acc_bytes);
		float *v = malloc((nnz ? nnz : 1) * sizeof(float));
		if (!acc || !v) {
			rfs_bigbuf_free(pool, acc, acc_bytes);
			free(v);
			return -ENOMEM;
		}
		memset(acc, 0, acc_bytes);
		rfs_convert(RFS_FLOAT32, v, t, values, nnz);
		SCATTER_ADD(float, acc, v);
		rfs_convert(t, dst, RFS_FLOAT32, acc, cells);
		rfs_bigbuf_free(pool, acc, acc_bytes);
		free(v);
	}
	}
	return 0;
}

/* A .npz whose values are the source's as stored: read straight into
 * the file. */
static int npz_reads_values_in_place(const struct rfs_batch *b)
{
	return npz_value_dtype(b->out_dtype) ==
		       rfs_dataset_info(b->dataset)->dtype &&
	       b->out_dtype == rfs_dataset_info(b->dataset)->dtype;
}

/* Bytes of nnz values cast to the served dtype (0: served as stored). */
static size_t npz_served_bytes(const struct rfs_batch *b, uint64_t nnz)
{
	int cast = b->out_dtype != rfs_dataset_info(b->dataset)->dtype;
	return cast ? nnz * rfs_dtype_size(b->out_dtype) : 0;
}

/* Bytes of nnz values widened from float16 (0: not float16). */
static size_t npz_widened_bytes(const struct rfs_batch *b, uint64_t nnz)
{
	enum rfs_dtype t = npz_value_dtype(b->out_dtype);
	return t != b->out_dtype ? nnz * rfs_dtype_size(t) : 0;
}

/* The most memory dense_rows() or npz_file() of n rows (nnz stored
 * values) allocates beside the file, and the fill's row ids: counted in
 * the cache with the file while it is made. */
static size_t fill_scratch(const struct rfs_batch *b, uint64_t kind, uint64_t n,
			   uint64_t nnz)
{
	const struct rfs_source_info *info = rfs_dataset_info(b->dataset);
	size_t ids = n * sizeof(int64_t);
	if (!rfs_kind_is_batch(kind))
		return ids;
	size_t scratch = ids + rfs_dataset_read_scratch(b->dataset, n, nnz);
	size_t out_elem = rfs_dtype_size(b->out_dtype);
	int cast = b->out_dtype != info->dtype;
	if (!b->sparse) /* the rows as stored, cast from there */
		return scratch +
		       (cast ? n * info->cols * rfs_dtype_size(info->dtype) :
			       0);
	if (kind == RFS_KIND_NPZ) /* the values as served, then widened */
		return scratch + (npz_reads_values_in_place(b) ?
					  0 :
					  npz_served_bytes(b, nnz) +
						  npz_widened_bytes(b, nnz));
	scratch += nnz * out_elem; /* the values, cast */
	if (b->out_dtype == RFS_FLOAT16) /* scatter_add()'s float32 sums */
		scratch += (n * info->cols + nnz) * sizeof(float);
	return scratch;
}

/* Dense rows of a batch, in the served dtype, at dst. */
static int dense_rows(struct rfs_batch *b, const int64_t *rows, uint64_t n,
		      unsigned char *dst)
{
	const struct rfs_source_info *info = rfs_dataset_info(b->dataset);
	size_t out_elem = rfs_dtype_size(b->out_dtype);
	uint64_t cells = n * info->cols;
	if (!b->sparse && info->dtype == b->out_dtype)
		return rfs_dataset_read_rows(b->dataset, rows, n, dst);
	if (!b->sparse) { /* pooled, as scatter_add()'s sums */
		size_t raw_bytes = cells * rfs_dtype_size(info->dtype) + 1;
		void *raw = rfs_bigbuf_alloc(b->pool, raw_bytes);
		int rc = raw ? rfs_dataset_read_rows(b->dataset, rows, n, raw) :
			       -ENOMEM;
		if (rc == 0)
			rfs_convert(b->out_dtype, dst, info->dtype, raw, cells);
		rfs_bigbuf_free(b->pool, raw, raw_bytes);
		return rc;
	}
	/* CSR: zeros, then every stored value added at its column. */
	struct rfs_csr csr;
	int rc = rfs_dataset_read_csr(b->dataset, rows, n, NULL, &csr);
	if (rc != 0)
		return rc;
	void *values = malloc(csr.start[n] * out_elem + 1);
	if (!values) {
		rfs_source_csr_free(&csr);
		return -ENOMEM;
	}
	rfs_convert(b->out_dtype, values, info->dtype, csr.values,
		    csr.start[n]);
	memset(dst, 0, cells * out_elem);
	rc = scatter_add(b->pool, b->out_dtype, dst, values, &csr, n,
			 info->cols);
	free(values);
	rfs_source_csr_free(&csr);
	return rc;
}

/* The .npz of a batch: its CSR rows in the served dtype. Uncast values
 * are read straight to their place in the file. */
static int npz_file(struct rfs_batch *b, const int64_t *rows, uint64_t n,
		    struct rfs_cache_fill *f)
{
	const struct rfs_source_info *info = rfs_dataset_info(b->dataset);
	struct rfs_npz_csr m = npz_shape(b, rows, n);
	unsigned char *buf = rfs_cache_fill_buffer(
		f, rfs_npz_size(&m), fill_scratch(b, RFS_KIND_NPZ, n, m.nnz));
	if (!buf)
		return -ENOMEM;
	int in_place = npz_reads_values_in_place(b);
	struct rfs_csr csr;
	int rc = rfs_dataset_read_csr(
		b->dataset, rows, n,
		in_place ? buf + rfs_npz_values_offset(&m) : NULL, &csr);
	if (rc != 0)
		return rc;
	/* Cast to the served dtype, then widened where it is float16: the
	 * values a .npy of the batch holds. */
	size_t served = npz_served_bytes(b, m.nnz);
	unsigned char *cast =
		in_place ? NULL :
			   malloc(served + npz_widened_bytes(b, m.nnz) + 1);
	const void *values = csr.values;
	if (cast && served) {
		rfs_convert(b->out_dtype, cast, info->dtype, values, m.nnz);
		values = cast;
	}
	if (cast && m.value_dtype != b->out_dtype) {
		rfs_convert(m.value_dtype, cast + served, b->out_dtype, values,
			    m.nnz);
		values = cast + served;
	}
	if (in_place || cast)
		rfs_npz_write(&m, values, csr.cols, csr.start, buf);
	else
		rc = -ENOMEM;
	free(cast);
	rfs_source_csr_free(&csr);
	return rc;
}

int rfs_batch_check_sizes(const struct rfs_config *c,
			  const struct rfs_dataset *d, enum rfs_dtype out_dtype,
			  char *err, size_t errlen)
{
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
	const struct rfs_source_info *info = rfs_dataset_info(d);
	size_t elem = rfs_dtype_size(info->dtype);
	if (rfs_dtype_size(out_dtype) > elem)
		elem = rfs_dtype_size(out_dtype);
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
	uint64_t npz_cell = rfs_dtype_size(npz_value_dtype(out_dtype)) + 8;
	uint64_t per_row = info->cols;
	if (info->sparse && info->max_row_nnz > per_row)
		per_row = info->max_row_nnz;
	if (info->sparse &&
	    per_row > NPZ_BYTES_MAX / npz_cell / c->batch_size) {
		snprintf(err, errlen,
			 "batch_size=%llu: a batch of rows of up to %llu "
			 "stored values could make a .npz over 3.5 GiB",
			 (unsigned long long)c->batch_size,
			 (unsigned long long)per_row);
		return -EINVAL;
	}
	return 0;
}

uint64_t rfs_batch_rows(const struct rfs_batch *b, uint64_t batch)
{
	return rfs_partition_batch_rows(rfs_plan_layout(b->planner), batch);
}

/* The size of a .npy file of kind (not npz) of batch. */
static uint64_t npy_size(const struct rfs_batch *b, uint64_t kind,
			 uint64_t batch)
{
	uint64_t last = batch + 1 >=
			rfs_plan_layout(b->planner)->batches_per_rank;
	return b->file_size[kind][last];
}

/* The .npy of key's kind (rows, index or label) of a batch. */
static int npy_file(struct rfs_batch *b, const struct rfs_cache_key *key,
		    const int64_t *rows, uint64_t n, struct rfs_cache_fill *f)
{
	uint64_t shape[2];
	int ndims;
	enum rfs_dtype dtype;
	file_shape(b, key->kind, n, shape, &ndims, &dtype);
	uint64_t nnz = key->kind == RFS_KIND_BATCH && b->sparse ?
			       npz_shape(b, rows, n).nnz :
			       0;
	unsigned char *buf =
		rfs_cache_fill_buffer(f, npy_size(b, key->kind, key->batch),
				      fill_scratch(b, key->kind, n, nnz));
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
			int64_t code = rfs_selection_label(b->selection,
							   (uint64_t)rows[i]);
			memcpy(&labels[i], &code, 8);
		}
	} else {
		return dense_rows(b, rows, n, buf + header);
	}
	return 0;
}

/* Says in stats.json why key's file failed: its path under the mount (as
 * inode.c names it) and the last line its generation logged, else the
 * error's name. */
static void failed(struct rfs_batch *b, const struct rfs_cache_key *key, int rc)
{
	char path[160];
	const char *dir = rfs_kind_name(key->kind),
		   *why = rfs_log_thread_last();
	unsigned width = rfs_parse_decimal_digits(
		rfs_plan_layout(b->planner)->batches_per_rank - 1);
	snprintf(path, sizeof(path), "epoch/%llu/rank/%llu/%s/%0*llu.np%c",
		 (unsigned long long)key->epoch, (unsigned long long)key->rank,
		 dir ? dir : "batch", width < 6 ? 6 : (int)width,
		 (unsigned long long)key->batch,
		 key->kind == RFS_KIND_NPZ ? 'z' : 'y');
	rfs_stats_failed(b->stats, key->rank, path, *why ? why : strerror(-rc));
}

int rfs_batch_fill(void *ctx, const struct rfs_cache_key *key,
		   struct rfs_cache_fill *f)
{
	struct rfs_batch *b = ctx;
	uint64_t t0 = rfs_stats_now_ns();
	uint64_t n = rfs_batch_rows(b, key->batch);
	rfs_log_thread_forget();
	int64_t *rows = malloc(n * sizeof(*rows));
	int rc = rows ? rfs_plan_batch(b->planner, key->epoch, key->rank,
				       key->batch, rows) :
			-ENOMEM;
	if (rc == 0)
		rc = key->kind == RFS_KIND_NPZ ? npz_file(b, rows, n, f) :
						 npy_file(b, key, rows, n, f);
	free(rows);
	if (rc == 0 && rfs_kind_is_batch(key->kind) && b->stats)
		rfs_stats_generated(b->stats, rfs_stats_now_ns() - t0);
	if (rc != 0 && b->stats)
		failed(b, key, rc);
	return rc;
}

/* The sizes of the .npy files of full batches and of the last. */
static void size_files(struct rfs_batch *b)
{
	const struct rfs_layout *l = rfs_plan_layout(b->planner);
	for (uint64_t k = 0; k < RFS_KIND_NPZ; k++) {
		for (int last = 0; last < 2; last++) {
			uint64_t shape[2];
			int ndims;
			enum rfs_dtype dtype;
			file_shape(b, k, last ? l->last_batch : l->batch_size,
				   shape, &ndims, &dtype);
			b->file_size[k][last] =
				rfs_npy_file_size(dtype, ndims, shape);
		}
	}
}

int rfs_batch_create(struct rfs_dataset *d, struct rfs_planner *p,
		     const struct rfs_selection *s, enum rfs_dtype out_dtype,
		     struct rfs_stats *stats, struct rfs_bigbuf *pool,
		     struct rfs_batch **out)
{
	struct rfs_batch *b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	*b = (struct rfs_batch){ .dataset = d,
				 .planner = p,
				 .selection = s,
				 .stats = stats,
				 .pool = pool,
				 .out_dtype = out_dtype,
				 .sparse = rfs_dataset_info(d)->sparse };
	size_files(b);
	*out = b;
	return 0;
}

void rfs_batch_destroy(struct rfs_batch *b)
{
	free(b);
}

int rfs_batch_file_size(struct rfs_batch *b, const struct rfs_cache_key *key,
			uint64_t *size)
{
	uint64_t n = rfs_batch_rows(b, key->batch);
	if (key->kind != RFS_KIND_NPZ) {
		*size = npy_size(b, key->kind, key->batch);
		return 0;
	}
	/* The .npz depends on the batch's stored values: plan it. */
	int64_t *rows = malloc(n * sizeof(*rows));
	int rc = rows ? rfs_plan_batch(b->planner, key->epoch, key->rank,
				       key->batch, rows) :
			-ENOMEM;
	if (rc == 0) {
		struct rfs_npz_csr m = npz_shape(b, rows, n);
		*size = rfs_npz_size(&m);
	}
	free(rows);
	return rc;
}

uint64_t rfs_batch_cost(const struct rfs_batch *b)
{
	uint64_t n = rfs_plan_layout(b->planner)->batch_size, nnz = 0;
	if (b->sparse)
		nnz = (uint64_t)((double)rfs_dataset_info(b->dataset)->nnz /
				 (double)rfs_dataset_rows(b->dataset) *
				 (double)n);
	return b->file_size[RFS_KIND_BATCH][0] +
	       fill_scratch(b, RFS_KIND_BATCH, n, nnz);
}
