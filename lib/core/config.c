/* SPDX-License-Identifier: MIT */
#include "core/config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/parse.h"

enum kind { NUMBER, CHOICE, TEXT, FLAG, REAL, LIST };

static const char *const strategies[] = { "streaming",	    "shuffle",
					  "block_shuffle",  "weighted",
					  "class_balanced", NULL };
/* enum rfs_varjoin_mode's first three; "names" is var_names=FILE. */
static const char *const var_joins[] = { "none", "inner", "outer", NULL };
static const char *const partitions[] = { "batch", "round_robin", "contiguous",
					  "file", NULL };
/* "source", then enum rfs_dtype's names in order. */
static const char *const dtypes[] = { "source", "int8",	   "int16",   "int32",
				      "int64",	"uint8",   "uint16",  "uint32",
				      "uint64", "float16", "float32", "float64",
				      NULL };

/* One row per option; the table drives parsing, JSON, identity and help so
 * they cannot drift apart. */
struct option_def {
	const char *name;
	enum kind kind;
	size_t offset;
	uint64_t min, max; /* NUMBER and FLAG; REAL: [min, max] too */
	const char *const *choices; /* CHOICE */
	/* Changes the bytes served: part of view_id (IF_SET: only when not
	 * its default, so that options added later keep the view_ids of
	 * mounts without them). */
	int identity;
	const char *help;
};

#define FIELD(f) offsetof(struct rfs_config, f)
#define IF_SET 2

static const struct option_def options[] = {
	{ "world_size", NUMBER, FIELD(world_size), 1, 1u << 20, NULL, 1,
	  "number of ranks (default 1)" },
	{ "batch_size", NUMBER, FIELD(batch_size), 1, 1u << 24, NULL, 1,
	  "rows per batch file (default 256)" },
	{ "seed", NUMBER, FIELD(seed), 0, UINT64_MAX, NULL, 1,
	  "key of every shuffle and draw (default 0)" },
	{ "strategy", CHOICE, FIELD(strategy), 0, 0, strategies, 1,
	  "epoch order (default block_shuffle)" },
	{ "block_size", NUMBER, FIELD(block_size), 1, UINT64_C(1) << 40, NULL,
	  1,
	  "rows per block for block_shuffle and the weighted draws (default 64)" },
	{ "fetch_factor", NUMBER, FIELD(fetch_factor), 1, 1u << 16, NULL, 1,
	  "global batches per fetch window (default 16)" },
	{ "partition", CHOICE, FIELD(partition), 0, 0, partitions, 1,
	  "how global batches are split over ranks (default batch)" },
	{ "drop_last", NUMBER, FIELD(drop_last), 0, 1, NULL, 1,
	  "1: only full batches (default); 0: every row, the last batch "
	  "padded by wrapping around" },
	{ "total_size", NUMBER, FIELD(total_size), 1, UINT64_C(1) << 40, NULL,
	  1, "draws per epoch for weighted/class_balanced (default: rows)" },
	{ "weights", TEXT, FIELD(weights), 0, 0, NULL, 1,
	  "obs column or /dataset of row weights (strategy=weighted)" },
	{ "label", TEXT, FIELD(label), 0, 0, NULL, 1,
	  "obs column or /dataset of labels: adds label/ files" },
	{ "smoothing", REAL, FIELD(smoothing), 0, 1, NULL, 1,
	  "class_balanced: 0 balanced (default) .. 1 natural frequencies" },
	{ "filter", LIST, FIELD(filter), 0, 0, NULL, 1,
	  "COLUMN:V1|V2 keeps rows whose column is one of the values "
	  "(repeatable: all must hold)" },
	{ "dataset", TEXT, FIELD(dataset), 0, 0, NULL, 1,
	  "HDF5 path of the N x D dataset or CSR group (default /X for "
	  ".h5ad)" },
	{ "layer", TEXT, FIELD(layer), 0, 0, NULL, 1,
	  "serve .h5ad layers/NAME instead of X" },
	{ "raw", FLAG, FIELD(raw), 0, 1, NULL, 1,
	  "serve .h5ad raw/X instead of X" },
	{ "dtype", CHOICE, FIELD(dtype), 0, 0, dtypes, 1,
	  "element type of batch files (default source: no cast)" },
	{ "var_join", CHOICE, FIELD(var_join), 0, 0, var_joins, IF_SET,
	  "files whose var names differ: inner (names in every file), "
	  "outer (every name, absent ones 0); default none: refused" },
	{ "var_names", TEXT, FIELD(var_names), 0, 0, NULL, IF_SET,
	  "serve exactly the var names of this file (one per line), in its "
	  "order; absent ones 0" },
	{ "epochs", NUMBER, FIELD(epochs), 1, RFS_EPOCHS, NULL, 0,
	  "epochs listed by ls epoch/ (default 10; any epoch resolves)" },
	{ "cache_mb", NUMBER, FIELD(cache_mb), 1, UINT64_C(1) << 30, NULL, 0,
	  "memory for generated batches and decoded chunks in MiB (default "
	  "1024, or half of a smaller memory limit)" },
	/* Up to its default's largest, 2 x fetch_factor: config.json
	 * mounts again. */
	{ "prefetch", NUMBER, FIELD(prefetch), 0, 1u << 17, NULL, 0,
	  "batches generated ahead of each rank's reader (default 2 x "
	  "fetch_factor; 0: off)" },
	{ "threads", NUMBER, FIELD(threads), 1, 1024, NULL, 0,
	  "threads generating prefetched batches (default: one per core it "
	  "may use)" },
	{ "log_file", TEXT, FIELD(log_file), 0, 0, NULL, 0,
	  "append log lines here instead of stderr (default: none)" },
	{ "open_timeout", NUMBER, FIELD(open_timeout), 0, 86400, NULL, 0,
	  "seconds one mount-time read of a source may take before the mount "
	  "gives up naming it (default 120; 0: no limit)" },
};
#define N_OPTIONS (sizeof(options) / sizeof(options[0]))

/* Option o's field in c, as a T. */
#define AT(T, c, o) ((T *)(void *)((char *)(c) + (o)->offset))

void rfs_config_init(struct rfs_config *c)
{
	*c = (struct rfs_config){
		.world_size = 1,
		.batch_size = 256,
		.seed = 0,
		.strategy = RFS_BLOCK_SHUFFLE,
		.block_size = 64,
		.fetch_factor = 16,
		.partition = RFS_PARTITION_BATCH,
		.drop_last = 1,
		.epochs = 10,
		.cache_mb = RFS_UNSET,
		.open_timeout = 120,
		.prefetch = RFS_UNSET,
		.threads = RFS_UNSET,
	};
}

void rfs_config_free(struct rfs_config *c)
{
	for (size_t i = 0; i < N_OPTIONS; i++) {
		const struct option_def *o = &options[i];
		if (o->kind == TEXT) {
			free(*AT(char *, c, o));
			*AT(char *, c, o) = NULL;
		} else if (o->kind == LIST) {
			struct rfs_strlist *l = AT(struct rfs_strlist, c, o);
			rfs_buf_free_strings(l->items, l->count);
			*l = (struct rfs_strlist){ 0 };
		}
	}
}

int rfs_config_copy(struct rfs_config *dst, const struct rfs_config *src)
{
	*dst = *src;
	for (size_t i = 0; i < N_OPTIONS; i++) {
		const struct option_def *o = &options[i];
		if (o->kind == TEXT)
			*AT(char *, dst, o) = NULL;
		else if (o->kind == LIST)
			*AT(struct rfs_strlist, dst, o) =
				(struct rfs_strlist){ 0 };
	}
	for (size_t i = 0; i < N_OPTIONS; i++) {
		const struct option_def *o = &options[i];
		if (o->kind == TEXT && *AT(char *, src, o) &&
		    !(*AT(char *, dst, o) = strdup(*AT(char *, src, o))))
			goto oom;
		if (o->kind != LIST)
			continue;
		const struct rfs_strlist *l = AT(struct rfs_strlist, src, o);
		struct rfs_strlist *d = AT(struct rfs_strlist, dst, o);
		if (l->count && !(d->items = calloc(l->count, sizeof(char *))))
			goto oom;
		for (; d->count < l->count; d->count++)
			if (!(d->items[d->count] = strdup(l->items[d->count])))
				goto oom;
	}
	return 0;
oom:
	rfs_config_free(dst);
	return -ENOMEM;
}

/* A plain decimal fraction such as 0.25, 1 or .5: no sign, exponent, hex,
 * inf or nan, so every node reads the same value. */
static int parse_real(const char *s, double *out)
{
	int digits = 0, dots = 0;
	for (const char *p = s; *p; p++) {
		if (*p >= '0' && *p <= '9')
			digits++;
		else if (*p == '.' && !dots)
			dots++;
		else
			return -EINVAL;
	}
	if (!digits)
		return -EINVAL;
	char *end;
	*out = strtod(s, &end);
	return *end == '\0' && isfinite(*out) ? 0 : -EINVAL;
}

static void list_choices(const struct option_def *o, char *s, size_t n)
{
	size_t used = 0;
	s[0] = '\0';
	for (size_t i = 0; o->choices[i] && used < n; i++)
		used += (size_t)snprintf(s + used, n - used, "%s%s",
					 i ? ", " : "", o->choices[i]);
}

static int out_of_range(const struct option_def *o, const char *value,
			const char *what, char *err, size_t errlen)
{
	snprintf(err, errlen, "option %s=%s: expected %s from %llu to %llu",
		 o->name, value ? value : "", what, (unsigned long long)o->min,
		 (unsigned long long)o->max);
	return -EINVAL;
}

static int set_one(struct rfs_config *c, const struct option_def *o,
		   const char *value, char *err, size_t errlen)
{
	char choices[128];
	uint64_t v;
	double real;

	switch (o->kind) {
	case REAL:
		if (!value || parse_real(value, &real) != 0 ||
		    real < (double)o->min || real > (double)o->max)
			return out_of_range(o, value, "a decimal number", err,
					    errlen);
		*AT(double, c, o) = real;
		return 0;
	case FLAG:
		if (!value) {
			*AT(uint64_t, c, o) = 1;
			return 0;
		}
		__attribute__((fallthrough)); /* raw=0/1 */
	case NUMBER:
		if (!value ||
		    rfs_parse_u64(value, strlen(value), o->max, 0, &v) != 0 ||
		    v < o->min)
			return out_of_range(o, value, "an integer", err,
					    errlen);
		*AT(uint64_t, c, o) = v;
		return 0;
	case CHOICE:
		for (size_t i = 0; value && o->choices[i]; i++) {
			if (strcmp(value, o->choices[i]) == 0) {
				*AT(uint64_t, c, o) = i;
				return 0;
			}
		}
		list_choices(o, choices, sizeof(choices));
		snprintf(err, errlen, "option %s=%s: expected one of %s",
			 o->name, value ? value : "", choices);
		return -EINVAL;
	case TEXT:
	case LIST: {
		if (!value || !*value) {
			snprintf(err, errlen, "option %s needs a value",
				 o->name);
			return -EINVAL;
		}
		/* TEXT replaces its value; LIST appends one more. */
		struct rfs_strlist *l =
			o->kind == LIST ? AT(struct rfs_strlist, c, o) : NULL;
		char *copy = strdup(value), **items = NULL;
		if (copy && l &&
		    (items = realloc(l->items,
				     (l->count + 1) * sizeof(*items))))
			l->items = items;
		if (!copy || (l && !items)) {
			free(copy);
			snprintf(err, errlen, "option %s: out of memory",
				 o->name);
			return -ENOMEM;
		}
		if (l) {
			l->items[l->count++] = copy;
		} else {
			free(*AT(char *, c, o));
			*AT(char *, c, o) = copy;
		}
		return 0;
	}
	}
	return -EINVAL;
}

int rfs_config_set(struct rfs_config *c, const char *key, const char *value,
		   char *err, size_t errlen)
{
	for (size_t i = 0; i < N_OPTIONS; i++)
		if (strcmp(key, options[i].name) == 0)
			return set_one(c, &options[i], value, err, errlen);
	return -ENOENT;
}

const char *rfs_config_strategy_name(uint64_t strategy)
{
	return strategy < sizeof(strategies) / sizeof(strategies[0]) - 1 ?
		       strategies[strategy] :
		       "?";
}

static void render_value(const struct rfs_config *c, const struct option_def *o,
			 struct rfs_buf *b, int json)
{
	const char *text;

	switch (o->kind) {
	case NUMBER:
		/* Only options that cannot reach RFS_UNSET use it (seed can). */
		if (*AT(uint64_t, c, o) == RFS_UNSET && o->max < RFS_UNSET)
			rfs_buf_printf(b, "%s", json ? "null" : "default");
		else
			rfs_buf_printf(b, "%llu",
				       (unsigned long long)*AT(uint64_t, c, o));
		break;
	case FLAG:
		if (json)
			rfs_buf_printf(b, "%s",
				       *AT(uint64_t, c, o) ? "true" : "false");
		else
			rfs_buf_printf(b, "%d", *AT(uint64_t, c, o) ? 1 : 0);
		break;
	case CHOICE:
		text = o->choices[*AT(uint64_t, c, o)];
		json ? rfs_buf_json_string(b, text) :
		       rfs_buf_printf(b, "%s", text);
		break;
	case TEXT:
		text = *AT(char *, c, o);
		if (json && text)
			rfs_buf_json_string(b, text);
		else
			rfs_buf_printf(b, "%s", text ? text : "null");
		break;
	case REAL:
		/* Read again by parse_real: config.json mounts again. */
		rfs_buf_decimal(b, *AT(double, c, o), NULL, NULL);
		break;
	case LIST: {
		const struct rfs_strlist *l = AT(struct rfs_strlist, c, o);
		rfs_buf_printf(b, "%s", json ? "[" : "");
		for (size_t i = 0; i < l->count; i++) {
			rfs_buf_printf(b, "%s", i ? (json ? ", " : ";") : "");
			if (json)
				rfs_buf_json_string(b, l->items[i]);
			else
				rfs_buf_printf(b, "%s", l->items[i]);
		}
		rfs_buf_printf(b, "%s", json ? "]" : "");
		break;
	}
	}
}

void rfs_config_render_json(const struct rfs_config *c, struct rfs_buf *b)
{
	for (size_t i = 0; i < N_OPTIONS; i++) {
		rfs_buf_printf(b, "%s\"%s\": ", i ? ",\n  " : "  ",
			       options[i].name);
		render_value(c, &options[i], b, 1);
	}
}

/* c with the options its strategy does not use at their defaults: the
 * same bytes keep one view_id however they were spelt (streaming has
 * no key and no windows to sort; shuffle and streaming no blocks; only
 * class_balanced smooths). A copy of the pointers, for rendering. */
static struct rfs_config used_by_strategy(const struct rfs_config *c)
{
	struct rfs_config u = *c, d;
	rfs_config_init(&d);
	if (u.strategy == RFS_STREAMING) {
		u.seed = d.seed;
		u.fetch_factor = d.fetch_factor;
	}
	if (u.strategy == RFS_STREAMING || u.strategy == RFS_SHUFFLE)
		u.block_size = d.block_size;
	if (u.strategy != RFS_CLASS_BALANCED)
		u.smoothing = d.smoothing;
	return u;
}

/* Filter f, "COLUMN:V1|V2", with its values sorted, repeats and empty
 * ones dropped (column.c splits them with strtok_r): neither changes the
 * rows kept. NULL: out of memory. */
static char *canonical_filter(const char *f)
{
	char *copy = strdup(f), **values = NULL, *text = NULL, *save;
	char *colon = copy ? strchr(copy, ':') : NULL;
	if (!colon) /* refused when the filters are applied */
		return copy;
	size_t n = 1, len;
	for (const char *p = colon + 1; *p; p++)
		n += *p == '|';
	if ((values = malloc(n * sizeof(*values)))) {
		*colon = '\0';
		n = 0;
		for (char *v = strtok_r(colon + 1, "|", &save); v;
		     v = strtok_r(NULL, "|", &save))
			values[n++] = v;
		qsort(values, n, sizeof(*values), rfs_buf_compare_strings);
		struct rfs_buf b = { 0 };
		rfs_buf_printf(&b, "%s:", copy);
		for (size_t i = 0; i < n; i++)
			if (i == 0 || strcmp(values[i], values[i - 1]) != 0)
				rfs_buf_printf(&b, "%s%s", i ? "|" : "",
					       values[i]);
		if (rfs_buf_finish(&b, &text, &len) != 0)
			text = NULL;
	}
	free(values);
	free(copy);
	return text;
}

/* filter= as view_id sees it: each canonical, sorted, repeats dropped,
 * since rows must match all of them in any order (selection.c). */
static void render_filters_identity(const struct rfs_strlist *l,
				    struct rfs_buf *b)
{
	char **f = calloc(l->count ? l->count : 1, sizeof(*f));
	size_t n = 0;
	while (f && n < l->count && (f[n] = canonical_filter(l->items[n])))
		n++;
	if (!f || n < l->count) {
		b->failed = 1;
	} else {
		qsort(f, n, sizeof(*f), rfs_buf_compare_strings);
		for (size_t i = 0, said = 0; i < n; i++)
			if (i == 0 || strcmp(f[i], f[i - 1]) != 0)
				rfs_buf_printf(b, "%s%s", said++ ? ";" : "",
					       f[i]);
	}
	rfs_buf_free_strings(f, n);
}

void rfs_config_render_identity(const struct rfs_config *given,
				struct rfs_buf *b)
{
	struct rfs_config used = used_by_strategy(given);
	const struct rfs_config *c = &used;
	for (size_t i = 0; i < N_OPTIONS; i++) {
		const struct option_def *o = &options[i];
		if (!o->identity)
			continue;
		if (o->identity == IF_SET &&
		    (o->kind == TEXT ? !*AT(char *, c, o) :
				       !*AT(uint64_t, c, o)))
			continue;
		rfs_buf_printf(b, "%s=", options[i].name);
		if (o->kind == LIST)
			render_filters_identity(AT(struct rfs_strlist, c, o),
						b);
		else
			render_value(c, &options[i], b, 0);
		rfs_buf_printf(b, "\n");
	}
}

const char *rfs_config_option_name(size_t i)
{
	return i < N_OPTIONS ? options[i].name : NULL;
}

void rfs_config_render_help(struct rfs_buf *b)
{
	static const char *const shapes[] = { [NUMBER] = "=N",
					      [TEXT] = "=TEXT",
					      [FLAG] = "",
					      [REAL] = "=X",
					      [LIST] = "=COLUMN:V1|V2" };
	char choices[128] = "=";
	for (size_t i = 0; i < N_OPTIONS; i++) {
		const struct option_def *o = &options[i];
		if (o->kind == CHOICE)
			list_choices(o, choices + 1, sizeof(choices) - 1);
		rfs_buf_printf(b, "    -o %s%s\n        %s\n", o->name,
			       o->kind == CHOICE ? choices : shapes[o->kind],
			       o->help);
	}
}
