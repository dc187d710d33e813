/* SPDX-License-Identifier: MIT */
/* Mount options: defaults, validation and their canonical text form.
 * A plain value (docs/style.md convention 3): callers own the struct; strings in it
 * are heap copies freed by rfs_config_free(). */
#ifndef RFS_CONFIG_H
#define RFS_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

enum rfs_strategy {
	RFS_STREAMING,
	RFS_SHUFFLE,
	RFS_BLOCK_SHUFFLE,
	RFS_WEIGHTED,
	RFS_CLASS_BALANCED,
};
enum rfs_partition {
	RFS_PARTITION_BATCH,
	RFS_PARTITION_ROUND_ROBIN,
	RFS_PARTITION_CONTIGUOUS,
	RFS_PARTITION_FILE,
};

/* A repeatable text option (filter=): every value, in the order given. */
struct rfs_strlist {
	char **items; /* owned, each a heap copy */
	size_t count;
};

struct rfs_config {
	uint64_t world_size;
	uint64_t batch_size;
	uint64_t seed;
	uint64_t strategy; /* enum rfs_strategy */
	uint64_t block_size;
	uint64_t fetch_factor;
	uint64_t partition; /* enum rfs_partition */
	uint64_t drop_last;
	uint64_t total_size; /* draws per epoch; 0: the rows sampled from */
	char *weights; /* column or dataset of row weights; NULL: none */
	char *label; /* column or dataset of labels; NULL: none */
	double smoothing; /* class_balanced: 0 balanced .. 1 natural */
	struct rfs_strlist filter; /* COLUMN:V1|V2 each; rows must match all */
	char *dataset; /* NULL: automatic (/X for .h5ad) */
	char *layer; /* .h5ad layers/NAME instead of X; NULL: none */
	uint64_t raw; /* 1: .h5ad raw/X instead of X */
	uint64_t dtype; /* 0: the source's; else enum rfs_dtype + 1 */
	uint64_t var_join; /* enum rfs_varjoin_mode: NONE, INNER or OUTER */
	char *var_names; /* file of served var names; NULL: none */
	uint64_t epochs;
	uint64_t cache_mb; /* RFS_UNSET: default (memlimit.c) */
	uint64_t prefetch; /* batches ahead per rank; RFS_UNSET: default */
	uint64_t threads; /* prefetch threads; RFS_UNSET: one per core */
	char *log_file; /* NULL: stderr */
	uint64_t open_timeout; /* seconds per mount-time read of a source */
};

/* Epochs that resolve: [0, 2^31). */
#define RFS_EPOCHS (UINT64_C(1) << 31)

/* prefetch and threads before the view resolves them. */
#define RFS_UNSET UINT64_MAX

void rfs_config_init(struct rfs_config *c);
void rfs_config_free(struct rfs_config *c);

/* Sets one option from its text value.
 * @return 0; -ENOENT if key is not a rankfs option (err untouched);
 *         -EINVAL with a one-line message in err naming the option and the
 *         accepted values, or -ENOMEM (err says so). */
int rfs_config_set(struct rfs_config *c, const char *key, const char *value,
		   char *err, size_t errlen);

/* Appends the options as JSON members ("name": value, ...) without braces. */
void rfs_config_render_json(const struct rfs_config *c, struct rfs_buf *b);

/* Appends "name=value" for every option that changes served bytes, one per
 * line: the option part of the view_id. */
void rfs_config_render_identity(const struct rfs_config *c, struct rfs_buf *b);

/* Appends a help paragraph: one line per option with default and values. */
void rfs_config_render_help(struct rfs_buf *b);

/* The name of option i (in --help's order), NULL past the last. */
const char *rfs_config_option_name(size_t i);

const char *rfs_config_strategy_name(uint64_t strategy);

/* Deep copy of src into dst (strings duplicated). @return 0 or -ENOMEM
 * (dst is then empty but safe to free). */
int rfs_config_copy(struct rfs_config *dst, const struct rfs_config *src);

#endif
