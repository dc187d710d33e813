/* SPDX-License-Identifier: MIT */
/* Test fixture writer: small HDF5 files made at test time, in a private
 * temporary directory. No HDF5 types in this header, so tests that only
 * need a file need not include <hdf5.h>. */
#ifndef RFS_H5_FIXTURE_H
#define RFS_H5_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

enum h5fx_type {
	H5FX_I8,
	H5FX_I16,
	H5FX_I32,
	H5FX_I64,
	H5FX_U8,
	H5FX_U16,
	H5FX_U32,
	H5FX_U64,
	H5FX_F16, /* IEEE binary16 as h5py writes it */
	H5FX_F32,
	H5FX_F64,
	H5FX_I32BE, /* big-endian on disk: read through HDF5's conversion */
	H5FX_F64BE,
	H5FX_STRING, /* fixed-length strings of 8 bytes */
};

enum h5fx_layout { H5FX_CONTIGUOUS, H5FX_CHUNKED, H5FX_DEFLATE, H5FX_COMPACT };

struct h5fx_dataset {
	const char *name; /* e.g. "/X" or "/obsm/pca": groups are created */
	enum h5fx_type type;
	int ndims; /* 1 to 3 */
	uint64_t dims[3];
	enum h5fx_layout layout;
	/* Elements in C order, in the host's native layout of the type
	 * (for the BE types too: HDF5 converts on write). NULL: unwritten. */
	const void *data;
};

/* Creates path with n datasets. anndata sets the root attribute
 * encoding-type="anndata". @return 0 or -1. */
int h5fx_write(const char *path, const struct h5fx_dataset *d, size_t n,
	       int anndata);

/* The value of row r, column c in h5fx_write_f32()'s files. */
float h5fx_f32_value(uint64_t r, uint64_t c);

/* Creates path with one float32 dataset /X of rows x cols (ndims 2) or
 * rows (ndims 1), cell (r, c) h5fx_f32_value(r, c); anndata as for
 * h5fx_write(). @return 0 or -1. */
int h5fx_write_f32(const char *path, uint64_t rows, uint64_t cols, int ndims,
		   int anndata);

/* Creates path with group name (attribute encoding-type=kind unless NULL)
 * and nothing else. @return 0 or -1. */
int h5fx_write_group(const char *path, const char *name, const char *kind);

/* Adds to an existing file (the functions below each open it read-write):
 * an anndata >= 0.8 categorical obs column /obs/NAME (int8 codes, -1
 * missing, stored as int16 past 128 categories as pandas does;
 * variable-length string categories). @return 0 or -1. */
int h5fx_add_categorical(const char *path, const char *name,
			 const int8_t *codes, size_t n,
			 const char *const *categories, size_t ncategories);

/* A 1-D variable-length string dataset at dataset (groups created). */
int h5fx_add_strings(const char *path, const char *dataset,
		     const char *const *strings, size_t n);

/* A 1-D h5py-style bool dataset (enum FALSE=0, TRUE=1 over int8). */
int h5fx_add_bools(const char *path, const char *dataset, const int8_t *v,
		   size_t n);

/* AnnData var names: /var with attribute _index="_index" and
 * /var/_index as strings. */
int h5fx_add_var(const char *path, const char *const *names, size_t n);

/* Marks group as anndata's csr_matrix of shape rows x cols (attributes
 * encoding-type and shape); its data, indices and indptr are written with
 * h5fx_write. */
int h5fx_mark_csr(const char *path, const char *group, uint64_t rows,
		  uint64_t cols);

/* Size in bytes of one element of t. */
size_t h5fx_type_size(enum h5fx_type t);

/* mkdtemp under $TMPDIR (or /tmp) into dir (at least 64 bytes).
 * @return 0 or -1. */
int h5fx_tmpdir(char *dir, size_t len);

/* Removes dir and everything in it. */
void h5fx_rmtree(const char *dir);

#endif
