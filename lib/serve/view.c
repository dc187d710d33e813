/* SPDX-License-Identifier: MIT */
/* The view (view.h) builds, in order, the dataset, the selection, the
 * planner, the batch generator behind the cache, the counters (stats.c)
 * and the prefetch policy, and renders its JSON files once (view_json.c). */
#include "serve/view.h"

#include <errno.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "serve/batch.h"
#include "core/bigbuf.h"
#include "serve/budget.h"
#include "os/cpulimit.h"
#include "os/deadline.h"
#include "source/dataset.h"
#include "serve/kind.h"
#include "core/log.h"
#include "serve/lookahead.h"
#include "os/memlimit.h"
#include "os/watch.h"
#include "plan/plan.h"
#include "plan/sampler.h"
#include "plan/selection.h"
#include "serve/stats.h"
#include "serve/view_json.h"

struct rfs_view {
	struct rfs_config config;
	struct rfs_dataset *dataset;
	/* What the sources borrow (source.h): the view's own, so that two
	 * views in a process share none of it; made first, freed last. */
	struct rfs_source_env env;
	struct rfs_selection selection;
	struct rfs_planner *planner;
	struct rfs_batch *batch; /* the cache's fill */
	struct rfs_cache *cache;
	struct rfs_stats *stats;
	struct rfs_lookahead *lookahead;
	struct rfs_budget budget; /* cache_mb's shares */
	uint64_t sources_bytes; /* resident growth while opening sources */
	enum rfs_dtype out_dtype; /* of batch files */
	uint64_t view_id;
	char *config_json, *dataset_json;
	size_t config_json_len, dataset_json_len;
	char *var_names_txt; /* NULL: the sources name no columns */
	size_t var_names_txt_len;
	uint64_t var_names_claimed; /* var_names_txt (memlimit.c) */
};

/* Resident bytes of this process now (0 if unknown). */
static uint64_t resident_bytes(void)
{
	unsigned long long pages = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "re");
	if (f) {
		if (fscanf(f, "%llu %llu", &pages, &resident) != 2)
			resident = 0;
		fclose(f);
	}
	return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* HDF5 (and the zarr backend) take "X", "/X/" and "//X" for "/X", and
 * HDF5 "/./X" and "X/." too: the one spelling, so that checks by name
 * (var names of "/X") and view_id see one path. */
static char *canonical_path(const char *p)
{
	char *out = malloc(strlen(p) + 2), *o = out;
	if (!out)
		return NULL;
	for (*o++ = '/'; *p; p++) {
		/* A "." segment names the group it is in. */
		if (*p == '.' && o[-1] == '/' && (p[1] == '/' || !p[1]))
			continue;
		if (*p != '/' || o[-1] != '/')
			*o++ = *p;
	}
	if (o - out > 1 && o[-1] == '/')
		o--;
	*o = '\0';
	return out;
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
	if (!path && c->dataset && !(path = canonical_path(c->dataset)))
		return -ENOMEM;
	if (path) {
		free(c->dataset);
		c->dataset = path;
	}
	return 0;
}

/* A column given as a path (label=/obs/c, weights=, filter=/obs/c:V) in
 * its one spelling, as the matrix's: "//obs/c/" is "/obs/c", so that
 * view_id and config.json see one path. An obs column name stays. */
static int canonical_column(char **text, int filter)
{
	if (!*text || (*text)[0] != '/')
		return 0;
	char *colon = filter ? strchr(*text, ':') : NULL;
	char *path = colon ? strndup(*text, (size_t)(colon - *text)) :
			     strdup(*text);
	char *canon = path ? canonical_path(path) : NULL, *out = NULL;
	free(path);
	if (!canon || asprintf(&out, "%s%s", canon, colon ? colon : "") < 0) {
		free(canon);
		return -ENOMEM;
	}
	free(canon);
	free(*text);
	*text = out;
	return 0;
}

static int resolve_columns(struct rfs_config *c)
{
	int rc = canonical_column(&c->label, 0);
	if (rc == 0)
		rc = canonical_column(&c->weights, 0);
	for (size_t i = 0; i < c->filter.count && rc == 0; i++)
		rc = canonical_column(&c->filter.items[i], 1);
	return rc;
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
	char counted[160];
	if (c->total_size && rfs_sampler_draws(c->strategy))
		snprintf(counted, sizeof(counted),
			 "option total_size=%llu: %llu draws are",
			 (unsigned long long)c->total_size,
			 (unsigned long long)c->total_size);
	else
		snprintf(counted, sizeof(counted), "%s: %llu rows%s are", what,
			 (unsigned long long)v->selection.kept_rows, filtered);
	snprintf(err, errlen,
		 "%s fewer than one global batch (world_size %llu x "
		 "batch_size %llu = %llu)",
		 counted, (unsigned long long)c->world_size,
		 (unsigned long long)c->batch_size,
		 (unsigned long long)(c->world_size * c->batch_size));
}

/* total_size sets the draws of weighted and class_balanced; the other
 * strategies serve each of their L rows once. config.json shows L for
 * every strategy, so L itself is taken back, and nothing else. */
static int check_total_size(const struct rfs_view *v, char *err, size_t errlen)
{
	const struct rfs_config *c = &v->config;
	if (!c->total_size || rfs_sampler_draws(c->strategy))
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
		 rfs_config_strategy_name(c->strategy),
		 (unsigned long long)rows);
	return -EINVAL;
}

/* Prefetch depth for one reader within room bytes; with more readers,
 * lookahead.c shares the room out. Resolves threads and prefetch in the
 * config: config.json shows the depth in use. */
static int start_lookahead(struct rfs_view *v, size_t room)
{
	struct rfs_config *c = &v->config;
	if (c->threads == RFS_UNSET)
		c->threads = rfs_cpulimit_cores();
	if (c->prefetch == RFS_UNSET)
		c->prefetch = 2 * c->fetch_factor;
	struct rfs_lookahead_params p = {
		.ranks = c->world_size,
		.batches_per_rank = rfs_view_batches_per_rank(v),
		.depth = c->prefetch,
		.threads = c->threads,
		.room = room,
		.batch_cost = rfs_batch_cost(v->batch),
	};
	int rc = rfs_lookahead_create(&p, v->cache, &v->lookahead);
	if (rc != 0)
		return rc;
	uint64_t depth = rfs_lookahead_depth_max(v->lookahead);
	if (c->prefetch && !depth)
		rfs_log("prefetch is off: a batch (%llu bytes with its "
			"generation's scratch) does not fit in the prefetch "
			"room, half the generated files' part of cache_mb=%llu "
			"(%llu bytes); raise cache_mb",
			(unsigned long long)p.batch_cost,
			(unsigned long long)c->cache_mb,
			(unsigned long long)p.room);
	c->prefetch = depth;
	return 0;
}

/* var_join= or var_names=FILE, the file named absolutely so that
 * config.json mounts again from anywhere. */
static int resolve_join(struct rfs_config *c, struct rfs_dataset_join *join,
			char *err, size_t errlen)
{
	*join = (struct rfs_dataset_join){ .mode = c->var_join };
	if (!c->var_names)
		return 0;
	if (c->var_join != RFS_VARJOIN_NONE) {
		snprintf(err, errlen,
			 "options var_join=%s and var_names=%s: give one "
			 "(var_names serves exactly its names)",
			 rfs_varjoin_mode_name(c->var_join), c->var_names);
		return -EINVAL;
	}
	char *path = realpath(c->var_names, NULL);
	if (!path) {
		int rc = -errno;
		snprintf(err, errlen, "var_names=%s: %s", c->var_names,
			 strerror(errno));
		return rc;
	}
	free(c->var_names);
	c->var_names = path;
	join->mode = RFS_VARJOIN_NAMES;
	join->names_file = path;
	return 0;
}

/* log_file named absolutely too (it may not exist yet): config.json
 * says where the lines go, whatever directory it is read from. */
static int absolute_log_file(struct rfs_config *c)
{
	char cwd[PATH_MAX], *path;
	if (!c->log_file || c->log_file[0] == '/')
		return 0;
	if (!getcwd(cwd, sizeof(cwd)))
		return -errno;
	if (asprintf(&path, "%s/%s", strcmp(cwd, "/") ? cwd : "", c->log_file) <
	    0)
		return -ENOMEM;
	free(c->log_file);
	c->log_file = path;
	return 0;
}

static int cannot_split(const struct rfs_view *v, char *err, size_t errlen)
{
	snprintf(err, errlen, "cache_mb=%llu cannot be split on this machine",
		 (unsigned long long)v->config.cache_mb);
	return -EINVAL;
}

/* Hands out cache_mb's shares, once it has settled: the planner's row
 * ids first (they come out of the batches' half, and may take half of
 * it: fewer windows are built at once if need be), then the decoded
 * chunks and what the sources keep of them, and the buffer pool; the
 * batch cache and its prefetch room follow (rfs_view_create()). */
static int hand_out(struct rfs_view *v, char *err, size_t errlen)
{
	struct rfs_budget *b = &v->budget;
	size_t least;
	int rc = rfs_budget_split(v->config.cache_mb, 0, b);
	if (rc == 0 && rfs_plan_limit(v->planner, b->plan_limit, &least)) {
		snprintf(err, errlen,
			 "cache_mb=%llu is too small for the fetch windows: "
			 "planning needs %llu MiB of row ids, and may take a "
			 "quarter of cache_mb (fetch_factor x world_size x "
			 "batch_size rows per window); raise cache_mb or lower "
			 "fetch_factor",
			 (unsigned long long)v->config.cache_mb,
			 (unsigned long long)((least + (1 << 20) - 1) >> 20));
		return -EINVAL;
	}
	if (rc == 0)
		rc = rfs_budget_split(v->config.cache_mb,
				      rfs_plan_memory_bound(v->planner), b);
	if (rc != 0)
		return cannot_split(v, err, errlen);
	rfs_dataset_share_chunks(v->dataset, b->chunks);
	rfs_bigbuf_limit(v->env.pool, b->pool);
	return 0;
}

int rfs_view_create(const struct rfs_config *c, char *const *sources,
		    size_t nsources, struct rfs_view **out, char *err,
		    size_t errlen)
{
	struct rfs_view *v = calloc(1, sizeof(*v));
	int rc = -ENOMEM;
	if (!v || rfs_config_copy(&v->config, c) != 0 ||
	    rfs_watch_create(&v->env.watch) != 0 ||
	    rfs_bigbuf_create(&v->env.pool) != 0 ||
	    rfs_deadline_create((unsigned)v->config.open_timeout,
				&v->env.deadline) != 0 ||
	    rfs_claims_create(NULL, &v->env.claims) != 0)
		goto oom;
	rc = resolve_matrix(&v->config, err, errlen);
	if (rc == 0)
		rc = resolve_columns(&v->config);
	if (rc == -ENOMEM)
		goto oom;
	if (rc != 0)
		goto fail;
	struct rfs_memlimit limit;
	int cache_given = v->config.cache_mb != RFS_UNSET;
	rc = rfs_budget_fit(v->env.claims, &v->config.cache_mb, cache_given,
			    &limit, err, errlen);
	if (rc != 0)
		goto fail;
	/* Reads at mount keep decoded chunks and free buffers within the
	 * shares of cache_mb as fitted, the most it settles to; the shares
	 * are handed out once it has (hand_out()). */
	struct rfs_budget most;
	if (rfs_budget_split(v->config.cache_mb, 0, &most) != 0) {
		rc = cannot_split(v, err, errlen);
		goto fail;
	}
	rfs_bigbuf_limit(v->env.pool, most.pool);
	struct rfs_dataset_join join;
	rc = absolute_log_file(&v->config);
	if (rc != 0) {
		snprintf(err, errlen, "log_file=%s: %s", v->config.log_file,
			 strerror(-rc));
		goto fail;
	}
	rc = resolve_join(&v->config, &join, err, errlen);
	if (rc != 0)
		goto fail;
	uint64_t before = resident_bytes();
	rc = rfs_dataset_open_joined(sources, nsources, v->config.dataset,
				     &v->env, most.chunks, &join, &v->dataset,
				     err, errlen);
	uint64_t after = resident_bytes();
	v->sources_bytes = after > before ? after - before : 0;
	if (rc != 0)
		goto fail;
	const struct rfs_source_info *info = rfs_dataset_info(v->dataset);
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
	rc = rfs_batch_check_sizes(&v->config, v->dataset, v->out_dtype, err,
				   errlen);
	if (rc == 0)
		rc = rfs_selection_build(&v->config, v->dataset, v->env.claims,
					 &v->selection, err, errlen);
	if (rc == 0)
		rc = check_total_size(v, err, errlen);
	if (rc != 0)
		goto fail;
	rc = rfs_plan_create(&v->config, v->selection.seqs, &v->planner);
	if (rc == -EINVAL) {
		explain_too_few(v, sources, nsources, err, errlen);
		goto fail;
	}
	if (rc != 0)
		goto oom;
	/* config.json shows the resolved length of S_e. */
	v->config.total_size = 0;
	for (uint64_t s = 0; s < v->selection.sequences; s++)
		v->config.total_size += rfs_plan_sequence_length(v->planner, s);
	rc = rfs_stats_create(v->config.world_size, &v->stats);
	if (rc == 0)
		rc = rfs_batch_create(v->dataset, v->planner, &v->selection,
				      v->out_dtype, v->stats, v->env.pool,
				      &v->batch);
	if (rc != 0)
		goto oom;
	/* Its claim the last of the mount's, before cache_mb settles: a
	 * default's leaves no room for claims after it. */
	rc = rfs_view_json_var_names(v->env.claims, v->dataset,
				     &v->var_names_txt, &v->var_names_txt_len,
				     &v->var_names_claimed, err, errlen);
	if (rc == 0)
		rc = rfs_budget_settle(v->env.claims, &v->config.cache_mb,
				       cache_given, &limit,
				       rfs_plan_least(v->planner),
				       rfs_batch_cost(v->batch), err, errlen);
	if (rc == 0)
		rc = hand_out(v, err, errlen);
	if (rc != 0)
		goto fail;
	rc = rfs_cache_create(v->budget.batches, rfs_batch_fill, v->batch,
			      v->env.pool, &v->cache);
	if (rc == 0)
		rc = start_lookahead(v, v->budget.prefetch);
	if (rc == 0)
		rc = rfs_view_json_id(&v->config, v->dataset, &v->selection,
				      rfs_view_batches_per_rank(v),
				      &v->view_id);
	if (rc == 0)
		rc = rfs_view_json_config(&v->config, v->view_id,
					  &v->config_json, &v->config_json_len);
	if (rc == 0)
		rc = rfs_view_json_dataset(&v->config, v->dataset,
					   &v->selection, v->out_dtype,
					   &v->dataset_json,
					   &v->dataset_json_len);
	if (rc != 0)
		goto oom;
	rfs_dataset_opened(v->dataset);
	*out = v;
	return 0;
oom:
	rc = -ENOMEM;
	snprintf(err, errlen, "out of memory");
	goto fail;
fail:
	rfs_view_destroy(v);
	return rc;
}

void rfs_view_destroy(struct rfs_view *v)
{
	if (!v)
		return;
	/* Workers use the cache, the batch and the planner: stop them
	 * first. */
	rfs_lookahead_destroy(v->lookahead);
	rfs_cache_destroy(v->cache);
	rfs_batch_destroy(v->batch);
	rfs_stats_destroy(v->stats);
	rfs_plan_destroy(v->planner);
	rfs_selection_free(&v->selection);
	rfs_dataset_destroy(v->dataset);
	rfs_config_free(&v->config);
	free(v->config_json);
	free(v->dataset_json);
	free(v->var_names_txt);
	rfs_memlimit_release(v->env.claims, &v->var_names_claimed);
	rfs_watch_destroy(v->env.watch);
	rfs_bigbuf_destroy(v->env.pool);
	rfs_deadline_destroy(v->env.deadline);
	rfs_claims_destroy(v->env.claims);
	free(v);
}

const struct rfs_config *rfs_view_config(const struct rfs_view *v)
{
	return &v->config;
}

uint64_t rfs_view_batches_per_rank(const struct rfs_view *v)
{
	return rfs_plan_layout(v->planner)->batches_per_rank;
}

uint64_t rfs_view_kinds(const struct rfs_view *v)
{
	return v->selection.has_label ? 3 : 2;
}

int rfs_view_has_npz(const struct rfs_view *v)
{
	return rfs_dataset_info(v->dataset)->sparse;
}

int rfs_view_file_size(struct rfs_view *v, const struct rfs_cache_key *key,
		       uint64_t *size)
{
	return rfs_batch_file_size(v->batch, key, size);
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

const char *rfs_view_source_reading(const struct rfs_view *v, dev_t dev,
				    ino_t ino)
{
	return rfs_dataset_file_reading(v->dataset, dev, ino);
}

const char *rfs_view_var_names_txt(const struct rfs_view *v, size_t *len)
{
	*len = v->var_names_txt_len;
	return v->var_names_txt;
}

const char *rfs_view_dataset_json(const struct rfs_view *v, size_t *len)
{
	*len = v->dataset_json_len;
	return v->dataset_json;
}

int rfs_view_stats_json(struct rfs_view *v, char **out, size_t *len)
{
	struct rfs_view_json_live l = { .view_id = v->view_id,
					.stats = v->stats,
					.budget = v->budget,
					.sources_bytes = v->sources_bytes,
					.dataset = v->dataset };
	rfs_cache_counters(v->cache, &l.cache);
	rfs_lookahead_counters(v->lookahead, &l.prefetch);
	l.depth = rfs_lookahead_depth(v->lookahead);
	return rfs_view_json_stats(&l, out, len);
}

int rfs_view_get(struct rfs_view *v, const struct rfs_cache_key *key,
		 struct rfs_cache_entry **out)
{
	return rfs_cache_get(v->cache, key, out, NULL);
}

void rfs_view_put(struct rfs_view *v, struct rfs_cache_entry *e)
{
	rfs_cache_put(v->cache, e);
}

int rfs_view_read(struct rfs_view *v, const struct rfs_cache_key *key,
		  uint64_t off, struct rfs_cache_entry **out)
{
	if (off != 0 || !rfs_kind_is_batch(key->kind))
		return rfs_cache_get(v->cache, key, out, NULL);
	enum rfs_cache_found found;
	uint64_t t0 = rfs_stats_now_ns();
	int rc = rfs_cache_get(v->cache, key, out, &found);
	rfs_stats_first_read(v->stats, key->rank, found,
			     rfs_stats_now_ns() - t0);
	return rc;
}

void rfs_view_released(struct rfs_view *v, const struct rfs_cache_key *key)
{
	rfs_cache_retire(v->cache, key);
}

void rfs_view_opened(struct rfs_view *v, const struct rfs_cache_key *key)
{
	if (!rfs_kind_is_batch(key->kind))
		return;
	rfs_stats_batch_opened(v->stats, key->rank, key->epoch, key->batch,
			       rfs_batch_rows(v->batch, key->batch),
			       rfs_stats_now_ns());
	rfs_lookahead_opened(v->lookahead, key);
}

void rfs_view_count_bytes(struct rfs_view *v, uint64_t rank, uint64_t bytes)
{
	rfs_stats_bytes_served(v->stats, rank, bytes);
}

int rfs_view_xxh3(struct rfs_view *v, const struct rfs_cache_key *key,
		  char out[17])
{
	struct rfs_cache_entry *e;
	int rc = rfs_view_get(v, key, &e);
	if (rc != 0)
		return rc;
	XXH64_hash_t h =
		XXH3_64bits(rfs_cache_entry_data(e), rfs_cache_entry_size(e));
	rfs_view_put(v, e);
	snprintf(out, 17, "%016llx", (unsigned long long)h);
	return 0;
}
