/* SPDX-License-Identifier: MIT */
#include "serve/view_json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "core/buf.h"
#include "source/column.h"
#include "serve/kind.h"
#include "core/log.h"
#include "os/memlimit.h"

int rfs_view_json_id(const struct rfs_config *c, const struct rfs_dataset *d,
		     const struct rfs_selection *s, uint64_t batches_per_rank,
		     uint64_t *out)
{
	struct rfs_buf b = { 0 };
	rfs_buf_printf(&b, "fingerprint=%016llx\n",
		       (unsigned long long)rfs_dataset_fingerprint(d));
	uint64_t columns = rfs_selection_digest(s);
	if (columns)
		rfs_buf_printf(&b, "columns=%016llx\n",
			       (unsigned long long)columns);
	rfs_config_render_identity(c, &b);
	/* epochs is no byte-changing option, but it can widen step names. */
	unsigned width = rfs_kind_step_name_width(c->epochs, batches_per_rank);
	if (width > RFS_STEP_MIN_WIDTH)
		rfs_buf_printf(&b, "step_digits=%u\n", width);
	char *text;
	size_t len;
	int rc = rfs_buf_finish(&b, &text, &len);
	if (rc != 0)
		return rc;
	*out = XXH64(text, len, 0);
	free(text);
	return 0;
}

int rfs_view_json_config(const struct rfs_config *c, uint64_t view_id,
			 char **out, size_t *len)
{
	struct rfs_buf b = { 0 };
	rfs_buf_printf(&b, "{\n");
	rfs_config_render_json(c, &b);
	rfs_buf_printf(&b, ",\n  \"view_id\": \"%016llx\"\n}\n",
		       (unsigned long long)view_id);
	return rfs_buf_finish(&b, out, len);
}

static void render_label(const struct rfs_config *c,
			 const struct rfs_selection *s, struct rfs_buf *b)
{
	const struct rfs_column *l = &s->label;
	if (!s->has_label) {
		rfs_buf_printf(b, "  \"label\": null,\n");
		return;
	}
	rfs_buf_printf(b, "  \"label\": {\"column\": ");
	rfs_buf_json_string(b, c->label);
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

static void render_sources(const struct rfs_dataset *d, struct rfs_buf *b)
{
	rfs_buf_printf(b, "{\n  \"sources\": [");
	for (size_t f = 0; f < rfs_dataset_files(d); f++) {
		const struct rfs_source_info *fi = rfs_dataset_file(d, f);
		rfs_buf_printf(b, "%s\n    {\"path\": ", f ? "," : "");
		rfs_buf_json_string(b, fi->path);
		rfs_buf_printf(b,
			       ", \"rows\": %llu, \"first_row\": %llu, "
			       "\"layout\": \"%s\", \"read_path\": \"%s\"}",
			       (unsigned long long)fi->rows,
			       (unsigned long long)rfs_dataset_file_start(d, f),
			       fi->layout,
			       rfs_source_read_path_name(fi->read_path));
	}
	rfs_buf_printf(b, "\n  ],\n");
}

int rfs_view_json_dataset(const struct rfs_config *c,
			  const struct rfs_dataset *d,
			  const struct rfs_selection *s,
			  enum rfs_dtype out_dtype, char **out, size_t *len)
{
	const struct rfs_source_info *i = rfs_dataset_info(d);
	struct rfs_buf b = { 0 };
	render_sources(d, &b);
	rfs_buf_printf(&b, "  \"dataset\": ");
	rfs_buf_json_string(&b, i->dataset);
	uint64_t rows = rfs_dataset_rows(d);
	rfs_buf_printf(&b,
		       ",\n  \"rows\": %llu,\n  \"columns\": %llu,\n"
		       "  \"dtype\": \"%s\",\n  \"served_dtype\": \"%s\",\n"
		       "  \"format\": \"%s\",\n  \"layout\": \"%s\",\n"
		       "  \"read_path\": \"%s\",\n",
		       (unsigned long long)rows, (unsigned long long)i->cols,
		       rfs_dtype_name(i->dtype), rfs_dtype_name(out_dtype),
		       i->sparse ? "csr" : "dense", i->layout,
		       rfs_source_read_path_name(i->read_path));
	if (i->sparse)
		rfs_buf_printf(&b, "  \"nnz\": %llu,\n",
			       (unsigned long long)i->nnz);
	if (i->ndims == 2)
		rfs_buf_printf(&b, "  \"shape\": [%llu, %llu],\n",
			       (unsigned long long)rows,
			       (unsigned long long)i->cols);
	else
		rfs_buf_printf(&b, "  \"shape\": [%llu],\n",
			       (unsigned long long)rows);
	/* The served var names (var_names.txt) and how they were joined. */
	rfs_buf_printf(&b, "  \"var_join\": \"%s\",\n",
		       rfs_varjoin_mode_name(rfs_dataset_var_join(d)));
	if (rfs_dataset_var_count(d))
		rfs_buf_printf(
			&b,
			"  \"var_names\": {\"count\": %llu, "
			"\"fingerprint\": \"%016llx\"},\n",
			(unsigned long long)rfs_dataset_var_count(d),
			(unsigned long long)rfs_dataset_var_fingerprint(d));
	else
		rfs_buf_printf(&b, "  \"var_names\": null,\n");
	rfs_buf_printf(&b, "  \"filtered_rows\": %llu,\n",
		       (unsigned long long)s->kept_rows);
	render_label(c, s, &b);
	rfs_buf_printf(&b, "  \"fingerprint\": \"%016llx\"\n}\n",
		       (unsigned long long)rfs_dataset_fingerprint(d));
	return rfs_buf_finish(&b, out, len);
}

int rfs_view_json_var_names(struct rfs_claims *claims,
			    const struct rfs_dataset *d, char **out,
			    size_t *len, uint64_t *claimed, char *err,
			    size_t errlen)
{
	uint64_t n = rfs_dataset_var_count(d), bytes = 0, held = 0;
	*out = NULL;
	*len = 0;
	if (!n)
		return 0;
	/* One name a line: a name that is empty or breaks its line would
	 * put the names after it on the wrong columns. */
	for (uint64_t i = 0; i < n; i++) {
		const char *name = rfs_dataset_var_name(d, i);
		if (!name[0] || strpbrk(name, "\n\r")) {
			rfs_log("var name %llu ('%.100s') is empty or holds a "
				"line break: no var_names.txt",
				(unsigned long long)i, name);
			return 0;
		}
		bytes += strlen(name) + 1;
	}
	/* Kept for the mount, as long as the names the metadata gave. */
	int rc = rfs_memlimit_claim(claims, "var_names.txt",
				    "the served var names (a byte per "
				    "character, one a line)",
				    bytes + 1, 1, &held, err, errlen);
	if (rc != 0)
		return rc;
	char *text = malloc(bytes + 1);
	if (!text) {
		rfs_memlimit_release(claims, &held);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	size_t at = 0;
	for (uint64_t i = 0; i < n; i++) {
		const char *name = rfs_dataset_var_name(d, i);
		size_t l = strlen(name);
		memcpy(text + at, name, l);
		text[at + l] = '\n';
		at += l + 1;
	}
	text[at] = '\0';
	*out = text;
	*len = at;
	*claimed += held;
	return 0;
}

int rfs_view_json_stats(const struct rfs_view_json_live *l, char **out,
			size_t *len)
{
	struct rfs_buf b = { 0 };
	rfs_buf_printf(&b, "{\n  \"view_id\": \"%016llx\",\n",
		       (unsigned long long)l->view_id);
	rfs_stats_render_json(l->stats, &b);
	rfs_buf_printf(&b,
		       ",\n  \"cache\": {\"hits\": %llu, \"misses\": %llu, "
		       "\"prefetched\": %llu, \"bytes\": %llu, "
		       "\"entries\": %llu, \"capacity_bytes\": %llu, "
		       "\"room_waits\": %llu}",
		       (unsigned long long)l->cache.hits,
		       (unsigned long long)l->cache.misses,
		       (unsigned long long)l->cache.prefetched,
		       (unsigned long long)l->cache.bytes,
		       (unsigned long long)l->cache.entries,
		       (unsigned long long)l->budget.total,
		       (unsigned long long)l->cache.room_waits);
	rfs_buf_printf(&b,
		       ",\n  \"prefetch\": {\"depth\": %llu, \"queued\": %llu, "
		       "\"done\": %llu, \"dropped\": %llu}",
		       (unsigned long long)l->depth,
		       (unsigned long long)l->prefetch.queued,
		       (unsigned long long)l->prefetch.done,
		       (unsigned long long)l->prefetch.dropped);
	const struct rfs_budget *m = &l->budget;
	rfs_buf_printf(&b,
		       ",\n  \"budget\": {\"total_bytes\": %llu, "
		       "\"chunks_bytes\": %llu, \"batches_bytes\": %llu, "
		       "\"prefetch_bytes\": %llu, \"plan_bytes\": %llu, "
		       "\"pool_bytes\": %llu, \"sources_bytes\": %llu},\n"
		       "  \"sources\": [",
		       (unsigned long long)m->total,
		       (unsigned long long)m->chunks,
		       (unsigned long long)m->batches,
		       (unsigned long long)m->prefetch,
		       (unsigned long long)m->plan, (unsigned long long)m->pool,
		       (unsigned long long)l->sources_bytes);
	size_t files = l->dataset ? rfs_dataset_files(l->dataset) : 0;
	for (size_t i = 0; i < files; i++) {
		rfs_buf_printf(&b, "%s\n    {\"path\": ", i ? "," : "");
		rfs_buf_json_string(&b, rfs_dataset_file(l->dataset, i)->path);
		rfs_buf_printf(&b, ", \"state\": ");
		rfs_buf_json_string(
			&b, rfs_source_state_name(rfs_source_state(
				    rfs_dataset_source(l->dataset, i))));
		rfs_buf_printf(&b, "}");
	}
	rfs_buf_printf(&b, "\n  ]\n}\n");
	return rfs_buf_finish(&b, out, len);
}
