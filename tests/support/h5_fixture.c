/* SPDX-License-Identifier: MIT */
#include "h5_fixture.h"

#include <ftw.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t h5fx_type_size(enum h5fx_type t)
{
	static const size_t sizes[] = { 1, 2, 4, 8, 1, 2, 4, 8, 2, 4, 8, 4, 8,
					8 };
	return sizes[t];
}

static hid_t f16_type(void)
{
	/* h5py's IEEE_F16LE. */
	hid_t t = H5Tcopy(H5T_IEEE_F32LE);
	H5Tset_fields(t, 15, 10, 5, 0, 10);
	H5Tset_size(t, 2);
	H5Tset_ebias(t, 15);
	return t;
}

/* File and memory types of t; both to be closed with H5Tclose. */
static void types_of(enum h5fx_type t, hid_t *file, hid_t *mem)
{
	switch (t) {
	case H5FX_I8:
		*file = H5Tcopy(H5T_STD_I8LE);
		*mem = H5Tcopy(H5T_NATIVE_INT8);
		break;
	case H5FX_I16:
		*file = H5Tcopy(H5T_STD_I16LE);
		*mem = H5Tcopy(H5T_NATIVE_INT16);
		break;
	case H5FX_I32:
		*file = H5Tcopy(H5T_STD_I32LE);
		*mem = H5Tcopy(H5T_NATIVE_INT32);
		break;
	case H5FX_I64:
		*file = H5Tcopy(H5T_STD_I64LE);
		*mem = H5Tcopy(H5T_NATIVE_INT64);
		break;
	case H5FX_U8:
		*file = H5Tcopy(H5T_STD_U8LE);
		*mem = H5Tcopy(H5T_NATIVE_UINT8);
		break;
	case H5FX_U16:
		*file = H5Tcopy(H5T_STD_U16LE);
		*mem = H5Tcopy(H5T_NATIVE_UINT16);
		break;
	case H5FX_U32:
		*file = H5Tcopy(H5T_STD_U32LE);
		*mem = H5Tcopy(H5T_NATIVE_UINT32);
		break;
	case H5FX_U64:
		*file = H5Tcopy(H5T_STD_U64LE);
		*mem = H5Tcopy(H5T_NATIVE_UINT64);
		break;
	case H5FX_F16:
		*file = f16_type();
		*mem = f16_type();
		break;
	case H5FX_F32:
		*file = H5Tcopy(H5T_IEEE_F32LE);
		*mem = H5Tcopy(H5T_NATIVE_FLOAT);
		break;
	case H5FX_F64:
		*file = H5Tcopy(H5T_IEEE_F64LE);
		*mem = H5Tcopy(H5T_NATIVE_DOUBLE);
		break;
	case H5FX_I32BE:
		*file = H5Tcopy(H5T_STD_I32BE);
		*mem = H5Tcopy(H5T_NATIVE_INT32);
		break;
	case H5FX_F64BE:
		*file = H5Tcopy(H5T_IEEE_F64BE);
		*mem = H5Tcopy(H5T_NATIVE_DOUBLE);
		break;
	case H5FX_STRING:
		*file = H5Tcopy(H5T_C_S1);
		H5Tset_size(*file, 8);
		*mem = H5Tcopy(*file);
		break;
	}
}

static int write_one(hid_t file, const struct h5fx_dataset *d)
{
	hsize_t dims[3], chunk[3];
	int rc = -1;
	for (int i = 0; i < d->ndims; i++) {
		dims[i] = d->dims[i];
		chunk[i] = d->dims[i] ? d->dims[i] : 1;
	}
	chunk[0] = d->dims[0] > 3 ? 3 : (d->dims[0] ? d->dims[0] : 1);
	hid_t ftype = H5I_INVALID_HID, mtype = H5I_INVALID_HID;
	types_of(d->type, &ftype, &mtype);
	hid_t space = H5Screate_simple(d->ndims, dims, NULL);
	hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
	hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
	H5Pset_create_intermediate_group(lcpl, 1);
	if (d->layout == H5FX_CHUNKED || d->layout == H5FX_DEFLATE)
		H5Pset_chunk(dcpl, d->ndims, chunk);
	if (d->layout == H5FX_DEFLATE)
		H5Pset_deflate(dcpl, 6);
	if (d->layout == H5FX_COMPACT)
		H5Pset_layout(dcpl, H5D_COMPACT);
	hid_t dset = H5Dcreate2(file, d->name, ftype, space, lcpl, dcpl,
				H5P_DEFAULT);
	if (dset >= 0 &&
	    (!d->data ||
	     H5Dwrite(dset, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, d->data) >= 0))
		rc = 0;
	if (dset >= 0)
		H5Dclose(dset);
	H5Pclose(dcpl);
	H5Pclose(lcpl);
	H5Sclose(space);
	H5Tclose(mtype);
	H5Tclose(ftype);
	return rc;
}

static int set_string_attr(hid_t obj, const char *name, const char *value)
{
	hid_t type = H5Tcopy(H5T_C_S1);
	H5Tset_size(type, strlen(value) + 1);
	hid_t space = H5Screate(H5S_SCALAR);
	hid_t attr = H5Acreate2(obj, name, type, space, H5P_DEFAULT,
				H5P_DEFAULT);
	int rc = attr >= 0 && H5Awrite(attr, type, value) >= 0 ? 0 : -1;
	if (attr >= 0)
		H5Aclose(attr);
	H5Sclose(space);
	H5Tclose(type);
	return rc;
}

int h5fx_write(const char *path, const struct h5fx_dataset *d, size_t n,
	       int anndata)
{
	hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
	if (file < 0)
		return -1;
	int rc = 0;
	if (anndata)
		rc = set_string_attr(file, "encoding-type", "anndata");
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = write_one(file, &d[i]);
	if (H5Fclose(file) < 0)
		rc = -1;
	return rc;
}

int h5fx_write_group(const char *path, const char *name, const char *kind)
{
	hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
	if (file < 0)
		return -1;
	int rc = -1;
	hid_t group = H5Gcreate2(file, name, H5P_DEFAULT, H5P_DEFAULT,
				 H5P_DEFAULT);
	if (group >= 0) {
		rc = kind ? set_string_attr(group, "encoding-type", kind) : 0;
		H5Gclose(group);
	}
	if (H5Fclose(file) < 0)
		rc = -1;
	return rc;
}

int h5fx_tmpdir(char *dir, size_t len)
{
	const char *base = getenv("TMPDIR");
	if (!base || !*base)
		base = "/tmp";
	if ((size_t)snprintf(dir, len, "%s/rankfs-test-XXXXXX", base) >= len)
		return -1;
	return mkdtemp(dir) ? 0 : -1;
}

static int remove_one(const char *path, const struct stat *st, int flag,
		      struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

void h5fx_rmtree(const char *dir)
{
	nftw(dir, remove_one, 8, FTW_DEPTH | FTW_PHYS);
}

static hid_t open_rw(const char *path)
{
	return H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
}

/* Writes a 1-D dataset of n elements of type (memory type = file type
 * except for strings, given as char pointers). */
static int write_1d(hid_t loc, const char *name, hid_t type, const void *data,
		    size_t n)
{
	hsize_t dims[1] = { n };
	hid_t space = H5Screate_simple(1, dims, NULL);
	hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
	H5Pset_create_intermediate_group(lcpl, 1);
	hid_t dset = H5Dcreate2(loc, name, type, space, lcpl, H5P_DEFAULT,
				H5P_DEFAULT);
	int rc = dset >= 0 && H5Dwrite(dset, type, H5S_ALL, H5S_ALL,
				       H5P_DEFAULT, data) >= 0 ?
			 0 :
			 -1;
	if (dset >= 0)
		H5Dclose(dset);
	H5Pclose(lcpl);
	H5Sclose(space);
	return rc;
}

static hid_t vlen_string(void)
{
	hid_t t = H5Tcopy(H5T_C_S1);
	H5Tset_size(t, H5T_VARIABLE);
	H5Tset_cset(t, H5T_CSET_UTF8);
	return t;
}

int h5fx_add_strings(const char *path, const char *dataset,
		     const char *const *strings, size_t n)
{
	hid_t file = open_rw(path);
	if (file < 0)
		return -1;
	hid_t t = vlen_string();
	int rc = write_1d(file, dataset, t, strings, n);
	H5Tclose(t);
	return H5Fclose(file) < 0 ? -1 : rc;
}

int h5fx_add_categorical(const char *path, const char *name,
			 const int8_t *codes, size_t n,
			 const char *const *categories, size_t ncategories)
{
	char group_path[256];
	snprintf(group_path, sizeof(group_path), "/obs/%s", name);
	hid_t file = open_rw(path);
	if (file < 0)
		return -1;
	hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
	H5Pset_create_intermediate_group(lcpl, 1);
	hid_t group = H5Gcreate2(file, group_path, lcpl, H5P_DEFAULT,
				 H5P_DEFAULT);
	H5Pclose(lcpl);
	int rc = group >= 0 ? set_string_attr(group, "encoding-type",
					      "categorical") :
			      -1;
	hid_t t = vlen_string();
	/* As pandas stores them: int8 under 128 categories, else int16. */
	int16_t *wide = ncategories > 128 ? calloc(n ? n : 1, 2) : NULL;
	for (size_t i = 0; wide && i < n; i++)
		wide[i] = codes[i];
	if (rc == 0 && ncategories > 128)
		rc = wide ? write_1d(group, "codes", H5T_NATIVE_INT16, wide, n) :
			    -1;
	else if (rc == 0)
		rc = write_1d(group, "codes", H5T_NATIVE_INT8, codes, n);
	if (rc == 0)
		rc = write_1d(group, "categories", t, categories, ncategories);
	free(wide);
	H5Tclose(t);
	if (group >= 0)
		H5Gclose(group);
	return H5Fclose(file) < 0 ? -1 : rc;
}

int h5fx_add_bools(const char *path, const char *dataset, const int8_t *v,
		   size_t n)
{
	hid_t file = open_rw(path);
	if (file < 0)
		return -1;
	hid_t t = H5Tenum_create(H5T_NATIVE_INT8);
	int8_t no = 0, yes = 1;
	H5Tenum_insert(t, "FALSE", &no);
	H5Tenum_insert(t, "TRUE", &yes);
	int rc = write_1d(file, dataset, t, v, n);
	H5Tclose(t);
	return H5Fclose(file) < 0 ? -1 : rc;
}

int h5fx_add_var(const char *path, const char *const *names, size_t n)
{
	hid_t file = open_rw(path);
	if (file < 0)
		return -1;
	hid_t group = H5Gcreate2(file, "/var", H5P_DEFAULT, H5P_DEFAULT,
				 H5P_DEFAULT);
	int rc = group >= 0 ? set_string_attr(group, "_index", "_index") : -1;
	hid_t t = vlen_string();
	if (rc == 0)
		rc = write_1d(group, "_index", t, names, n);
	H5Tclose(t);
	if (group >= 0)
		H5Gclose(group);
	return H5Fclose(file) < 0 ? -1 : rc;
}

int h5fx_mark_csr(const char *path, const char *group, uint64_t rows,
		  uint64_t cols)
{
	hid_t file = open_rw(path);
	if (file < 0)
		return -1;
	hid_t g = H5Gopen2(file, group, H5P_DEFAULT);
	int rc = g >= 0 ? set_string_attr(g, "encoding-type", "csr_matrix") :
			  -1;
	hsize_t two = 2;
	int64_t shape[2] = { (int64_t)rows, (int64_t)cols };
	hid_t space = H5Screate_simple(1, &two, NULL);
	hid_t attr = rc == 0 ? H5Acreate2(g, "shape", H5T_STD_I64LE, space,
					  H5P_DEFAULT, H5P_DEFAULT) :
			       -1;
	if (attr < 0 || H5Awrite(attr, H5T_NATIVE_INT64, shape) < 0)
		rc = -1;
	if (attr >= 0)
		H5Aclose(attr);
	H5Sclose(space);
	if (g >= 0)
		H5Gclose(g);
	return H5Fclose(file) < 0 ? -1 : rc;
}

float h5fx_f32_value(uint64_t r, uint64_t c)
{
	return (float)r * 10.0f + (float)c + 0.5f;
}

int h5fx_write_f32(const char *path, uint64_t rows, uint64_t cols, int ndims,
		   int anndata)
{
	float *m = malloc(rows * cols * sizeof(*m) + 1);
	if (!m)
		return -1;
	for (uint64_t r = 0; r < rows; r++)
		for (uint64_t c = 0; c < cols; c++)
			m[r * cols + c] = h5fx_f32_value(r, c);
	struct h5fx_dataset d = { .name = "/X",
				  .type = H5FX_F32,
				  .ndims = ndims,
				  .dims = { rows, ndims == 2 ? cols : 0 },
				  .data = m };
	int rc = h5fx_write(path, &d, 1, anndata);
	free(m);
	return rc;
}
