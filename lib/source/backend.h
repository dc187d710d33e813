/* SPDX-License-Identifier: MIT */
/* What a source backend provides (source.h is what the dataset layer
 * sees), and all a backend includes from lib/source. anndata.c holds the
 * AnnData layout, read through a backend's store ops. A backend registers
 * one struct rfs_source_backend (registry.c lists them); its open embeds
 * struct rfs_source first in its own struct, and its ops answer the
 * operations below. source.c does what every format shares: the
 * fingerprints, the claims held, sorting and de-duplicating the rows
 * asked for, the change check before a read, and CSR rows from ranges of
 * values and column ids. */
#ifndef RFS_SOURCE_BACKEND_H
#define RFS_SOURCE_BACKEND_H

#include <sys/stat.h>
#include <sys/types.h>

#include "core/log.h"
#include "os/memlimit.h"
#include "source/column.h" /* what read_column hands back */
#include "source/source.h"

/* The two arrays of a CSR matrix besides indptr. */
enum rfs_csr_part { RFS_CSR_VALUES, RFS_CSR_INDICES };

/* Elements [first, first + count) of one part, to dst. */
struct rfs_csr_range {
	enum rfs_csr_part part;
	uint64_t first, count;
	void *dst;
};

struct rfs_source_ops {
	/* Distinct ascending rows[0..m) of the dense matrix, row k to
	 * to[k]. Thread-safe; failures logged with file, array and rows.
	 * @return 0, -EIO, -ENOMEM. */
	int (*read_rows)(struct rfs_source *s, const uint64_t *rows, size_t m,
			 unsigned char *const *to);
	/* The ranges r[0..n) of the CSR parts (count > 0, ascending within
	 * a part), each in its stored dtype (info.dtype or
	 * info.index_dtype), little-endian. Given together so that reads
	 * from storage can be in flight at once.
	 * @return 0, -EIO, -ENOMEM. */
	int (*read_csr_ranges)(struct rfs_source *s,
			       const struct rfs_csr_range *r, size_t n);
	/* Reads the 1-D array at path (anndata.c checked its shape with
	 * the store's array op) whole, at mount: integers as int64, floats
	 * as doubles, bools (an HDF5 enum's members) as categories, strings
	 * as codes into the distinct strings sorted, or with as
	 * RFS_MEMLIMIT_NAMES each its own category, in order. Claimed first
	 * (memlimit.c) as as, in out->claimed. what names it in errors.
	 * @return 0 or a negative errno with err set (rfs_column_error());
	 * out zeroed on failure. */
	int (*read_column)(struct rfs_source *s, const char *path,
			   const char *what, enum rfs_memlimit_as as,
			   struct rfs_column *out, char *err, size_t errlen);
	/* 0 while the source is as opened, else -EIO (the change logged
	 * once by the backend). Called before every read. */
	int (*check_unchanged)(struct rfs_source *s);
	/* As rfs_source_state(). */
	enum rfs_source_state (*state)(struct rfs_source *s);
	/* As rfs_source_reads_file(). */
	int (*reads_file)(const struct rfs_source *s, dev_t dev, ino_t ino);
	/* Bytes a read_rows of one row allocates for itself. */
	size_t (*row_scratch)(const struct rfs_source *s);
	/* As rfs_source_take_share(). */
	void (*take_share)(struct rfs_source *s);
	/* Frees everything but the claims (source.c releases them first);
	 * called once, on a source its open returned, half-built or not. */
	void (*close)(struct rfs_source *s);
};

struct rfs_source {
	const struct rfs_source_ops *ops;
	const struct rfs_store_ops *store;
	struct rfs_source_info info;
	int64_t *indptr; /* CSR: info.rows + 1 entries; freed on destroy */
	struct rfs_source_env env; /* what the mount lent, set by open */
	int anndata; /* an AnnData file: obs columns, a var table */
	/* How errors name a /PATH column: "dataset" (HDF5), "array"; and
	 * the source: "file", "store". */
	const char *array_noun, *store_noun;
	/* Bytes claimed (memlimit.c) for what the source keeps (indptr, a
	 * table of chunk addresses), held until it is closed, and for the
	 * var names last read, released when they are freed
	 * (rfs_source_free_var_names) or the source closed. */
	uint64_t claimed, var_claimed;
	/* Its reads that fail (a damaged chunk, a column id out of range,
	 * a short file): each batch that meets one would log it again,
	 * once per generation; a line a minute, with the count. Set up by
	 * the backend's open before it reads, torn down by its close. */
	struct rfs_log_limit read_failures;
};

/* What anndata.c reads the AnnData layout through: groups, attributes
 * and arrays (read_column reads them). Paths are absolute ("/X",
 * "/layers/counts"). Each @return 0 or a negative errno with err set. */
enum { RFS_NODE_ARRAY = 1, RFS_NODE_GROUP = 2 };
/* An array as the store's array op describes it. */
struct rfs_store_array {
	int ndims;
	uint64_t len; /* its first dimension */
	enum rfs_dtype dtype; /* of its numbers; RFS_DTYPE_COUNT: others */
	int strings; /* 1: it holds strings */
};
struct rfs_store_ops {
	/* The node at path: RFS_NODE_ARRAY or RFS_NODE_GROUP, with its
	 * attribute key in val ("" when none): a group's string, an
	 * array's path of the node it names (zarr: a string, relative to
	 * the array's group unless absolute; HDF5: an object reference);
	 * 0 when there is none the layout can use (err says what is
	 * there), or a negative errno (the store cannot be read). */
	int (*node)(struct rfs_source *s, const char *path, const char *key,
		    char *val, size_t vallen, char *err, size_t errlen);
	/* The array at path, which node() found. */
	int (*array)(struct rfs_source *s, const char *path,
		     struct rfs_store_array *out, char *err, size_t errlen);
	/* Calls each with the name of each member of group (zarr: the
	 * names of its "column-order" attribute), in the store's order,
	 * until it returns nonzero; for error lines. */
	void (*members)(struct rfs_source *s, const char *group,
			int (*each)(const char *name, void *ctx), void *ctx);
	/* The group's "shape" attribute: two integers, the first >= 0.
	 * @return 0 or -EINVAL (no such attribute), err untouched. */
	int (*shape)(struct rfs_source *s, const char *group,
		     uint64_t shape[2]);
	/* Opens the array at path (1-D or 2-D) as the rows served: info's
	 * rows, cols, ndims, dtype, layout and read path set. */
	int (*open_dense)(struct rfs_source *s, const char *path, char *err,
			  size_t errlen);
	/* Opens group's 1-D data and indices as the values and column ids
	 * of a CSR: n[0] and n[1] their lengths, info's dtype and
	 * index_dtype set. */
	int (*open_csr)(struct rfs_source *s, const char *group, uint64_t n[2],
			char *err, size_t errlen);
};

/* One format, as registry.c lists it. */
struct rfs_source_backend {
	const char *name; /* "hdf5", "zarr" */
	/* 1 when path (st: its stat) is of this format, else 0, or a
	 * negative errno where it cannot tell (the file cannot be read). */
	int (*probe)(const char *path, const struct stat *st);
	/* Opens path, which probe claimed: the file or store, with
	 * info.path, info.dataset (dataset, or "/X" in an AnnData file) and
	 * anndata set; anndata.c opens the rows through store. On failure
	 * err is set and *out, when set, is the half-built source, which the
	 * caller destroys. */
	int (*open)(const char *path, const char *dataset,
		    const struct rfs_source_env *env, struct rfs_source **out,
		    char *err, size_t errlen);
	const struct rfs_source_ops *ops; /* set in each source it opens */
	const struct rfs_store_ops *store;
	/* May be NULL: as rfs_source_members() (the first backend that says
	 * 1 or fails). */
	int (*members)(const char *path, char ***members, size_t *n, char *err,
		       size_t errlen);
};

/* registry.c: *out, the backend whose probe claims path.
 * @return 0, or a negative errno with err set (path cannot be looked at,
 * or is of no format rankfs reads). */
int rfs_source_backend_of(const char *path,
			  const struct rfs_source_backend **out, char *err,
			  size_t errlen);

#endif
