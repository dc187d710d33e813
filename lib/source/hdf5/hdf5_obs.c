/* SPDX-License-Identifier: MIT */
#include "source/hdf5/hdf5_source.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/log.h"
#include "os/memlimit.h"

/* Columns: the 1-D datasets anndata.c reads through read_column (it
 * finds them, checks their shapes and reads their encodings), read whole,
 * at mount time only. */

/* Length of a 1-D dataset, or -1 when it is not 1-D. */
static int64_t length_1d(hid_t dset)
{
	hid_t space = H5Dget_space(dset);
	hsize_t dims[2] = { 0, 0 };
	int nd = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
	if (nd == 1)
		H5Sget_simple_extent_dims(space, dims, NULL);
	if (space >= 0)
		H5Sclose(space);
	return nd == 1 ? (int64_t)dims[0] : -1;
}

static int missing_filter(hid_t dset, char *name, size_t n)
{
	hid_t dcpl = H5Dget_create_plist(dset);
	int missing = 0;
	int count = dcpl >= 0 ? H5Pget_nfilters(dcpl) : 0;
	for (int i = 0; i < count && !missing; i++) {
		unsigned flags, config;
		size_t nvalues = 0;
		name[0] = '\0';
		H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)i, &flags,
						 &nvalues, NULL, n, name,
						 &config);
		if (id >= 0 && H5Zfilter_avail(id) <= 0) {
			missing = 1;
			if (!name[0])
				snprintf(name, n, "id %d", (int)id);
		}
	}
	if (dcpl >= 0)
		H5Pclose(dcpl);
	return missing;
}

static int read_numbers(hid_t dset, hid_t mem, void *out)
{
	return H5Dread(dset, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0 ?
		       -EIO :
		       0;
}

/* Integers as int64: a uint64 over 2^63 - 1, which HDF5's conversion
 * would clamp to it, is -ERANGE instead. */
static int read_integers(hid_t dset, uint64_t n, int64_t *out)
{
	hid_t type = H5Dget_type(dset);
	int u64 = type >= 0 && H5Tget_sign(type) == H5T_SGN_NONE &&
		  H5Tget_size(type) == 8;
	if (type >= 0)
		H5Tclose(type);
	int rc = read_numbers(dset, u64 ? H5T_NATIVE_UINT64 : H5T_NATIVE_INT64,
			      out);
	for (uint64_t i = 0; i < n && rc == 0 && u64; i++)
		if ((uint64_t)out[i] > INT64_MAX)
			rc = -ERANGE;
	return rc;
}

/* Reads a 1-D string dataset (variable or fixed length) into n heap
 * strings. */
static int read_strings(const struct hdf5_source *s, hid_t dset, uint64_t n,
			char ***out)
{
	hid_t ftype = H5Dget_type(dset);
	char **strings = calloc(n ? n : 1, sizeof(*strings));
	int rc = -ENOMEM;
	if (ftype < 0 || !strings)
		goto out;
	rc = -EIO;
	if (H5Tis_variable_str(ftype) > 0) {
		free(strings);
		strings = NULL;
		rc = rfs_hdf5_read_vlen(s, dset, NULL, H5Tget_cset(ftype), n,
					&strings);
	} else {
		size_t size = H5Tget_size(ftype);
		char *raw = n < (SIZE_MAX - 1) / (size ? size : 1) ?
				    malloc(n * size + 1) :
				    NULL;
		if (raw && H5Dread(dset, ftype, H5S_ALL, H5S_ALL, H5P_DEFAULT,
				   raw) >= 0) {
			rc = 0;
			for (uint64_t i = 0; i < n && rc == 0; i++)
				if (!(strings[i] =
					      strndup(raw + i * size, size)))
					rc = -ENOMEM;
		}
		free(raw);
	}
out:
	if (ftype >= 0)
		H5Tclose(ftype);
	if (rc != 0 && strings) {
		rfs_buf_free_strings(strings, n);
		strings = NULL;
	}
	*out = strings;
	return rc;
}

/* An HDF5 enum (h5py's bool is one): its members become the categories,
 * in order of value. */
static int read_enum(hid_t dset, uint64_t n, struct rfs_column *out)
{
	hid_t ftype = H5Dget_type(dset);
	hid_t mem = ftype >= 0 ? H5Tget_native_type(ftype, H5T_DIR_ASCEND) : -1;
	hid_t super = mem >= 0 ? H5Tget_super(mem) : -1;
	int members = mem >= 0 ? H5Tget_nmembers(mem) : -1;
	size_t size = super >= 0 ? H5Tget_size(super) : 0;
	int is_signed = super >= 0 && H5Tget_sign(super) == H5T_SGN_2;
	unsigned char *raw = NULL;
	int64_t values[256];
	int rc = -EINVAL;

	if (members < 1 || members > 256 || size < 1 || size > 8)
		goto out;
	rc = -ENOMEM;
	out->kind = RFS_COLUMN_CODES;
	out->rows = n;
	out->categories = calloc((size_t)members, sizeof(char *));
	out->codes = calloc(n ? n : 1, sizeof(int64_t));
	raw = calloc(n ? n : 1, size);
	if (!out->categories || !out->codes || !raw)
		goto out;
	for (int m = 0; m < members; m++) {
		unsigned char v[8] = { 0 };
		char *name = H5Tget_member_name(mem, (unsigned)m);
		H5Tget_member_value(mem, (unsigned)m, v);
		int64_t x = 0;
		memcpy(&x, v, size); /* native order: little-endian here */
		if (is_signed && size < 8 && (x >> (8 * size - 1)) & 1)
			x -= (int64_t)1 << (8 * size);
		values[m] = x;
		out->categories[m] = name ? strdup(name) : NULL;
		H5free_memory(name);
		out->ncategories++;
		if (!out->categories[m])
			goto out;
	}
	/* h5py's bool: FALSE=0, TRUE=1, shown as numpy prints them. */
	if (members == 2 && strcmp(out->categories[0], "FALSE") == 0 &&
	    strcmp(out->categories[1], "TRUE") == 0 && values[0] == 0 &&
	    values[1] == 1) {
		strcpy(out->categories[0], "False");
		strcpy(out->categories[1], "True");
		out->boolean = 1;
	}
	rc = read_numbers(dset, mem, raw);
	for (uint64_t i = 0; i < n && rc == 0; i++) {
		int64_t x = 0;
		memcpy(&x, raw + i * size, size);
		if (is_signed && size < 8 && (x >> (8 * size - 1)) & 1)
			x -= (int64_t)1 << (8 * size);
		out->codes[i] = -1;
		for (int m = 0; m < members; m++)
			if (values[m] == x)
				out->codes[i] = m;
	}
out:
	free(raw);
	if (super >= 0)
		H5Tclose(super);
	if (mem >= 0)
		H5Tclose(mem);
	if (ftype >= 0)
		H5Tclose(ftype);
	return rc;
}

/* A dataset's values as they are: numbers, an enum's, or strings (as
 * rfs_column_from_strings, in_order). */
static int read_values(const struct hdf5_source *s, hid_t dset, uint64_t n,
		       int in_order, struct rfs_column *out)
{
	hid_t type = H5Dget_type(dset);
	H5T_class_t cls = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
	size_t size = type >= 0 ? H5Tget_size(type) : 8;
	int rc;
	if (type >= 0)
		H5Tclose(type);
	switch (cls) {
	case H5T_INTEGER:
		out->kind = RFS_COLUMN_INT;
		out->rows = n;
		out->codes = calloc(n ? n : 1, sizeof(int64_t));
		return out->codes ? read_integers(dset, n, out->codes) :
				    -ENOMEM;
	case H5T_FLOAT:
		out->kind = RFS_COLUMN_REAL;
		out->rows = n;
		/* As stored: filter values are rounded to it (column.c). */
		out->real_sizes = 1u << (size == 2 || size == 4 ? size : 8);
		out->reals = calloc(n ? n : 1, sizeof(double));
		return out->reals ? read_numbers(dset, H5T_NATIVE_DOUBLE,
						 out->reals) :
				    -ENOMEM;
	case H5T_ENUM:
		return read_enum(dset, n, out);
	case H5T_STRING: {
		char **strings;
		rc = read_strings(s, dset, n, &strings);
		return rc ? rc :
			    rfs_column_from_strings(out, strings, n, in_order);
	}
	default:
		return -ENOTSUP;
	}
}

/* What reading dset whole takes per entry, at least: a number's int64 or
 * double (and an enum's stored value), a heap string (made codes: its
 * index, code and category too; and a fixed-length string's stored
 * bytes, or a variable-length one's heap string in the helper that
 * reads it, hdf5_strings.c, held until this process has them all: 40
 * bytes a row measured for 2^20 and 3.5 x 2^20 short strings); as
 * category names, a number's text too. */
static uint64_t entry_bytes(hid_t dset, enum rfs_memlimit_as as)
{
	hid_t type = H5Dget_type(dset);
	H5T_class_t cls = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
	size_t size = type >= 0 ? H5Tget_size(type) : 0;
	int fixed = cls == H5T_STRING && H5Tis_variable_str(type) == 0;
	if (type >= 0)
		H5Tclose(type);
	if (cls == H5T_STRING)
		return (as == RFS_MEMLIMIT_CODES ?
				RFS_MEMLIMIT_CODED_STRING_BYTES :
				RFS_MEMLIMIT_STRING_BYTES) +
		       (fixed ? size : RFS_MEMLIMIT_STRING_BYTES);
	return 8 + (cls == H5T_ENUM ? size : 0) +
	       (as == RFS_MEMLIMIT_NAMES ? RFS_MEMLIMIT_STRING_BYTES : 0);
}

int rfs_hdf5_read_column(struct rfs_source *base, const char *path,
			 const char *what, enum rfs_memlimit_as as,
			 struct rfs_column *out, char *err, size_t errlen)
{
	struct hdf5_source *s = (struct hdf5_source *)base;
	char filter[64], name[512] = "?";
	*out = (struct rfs_column){ .claims = s->base.env.claims };
	rfs_hdf5_quiet();
	hid_t dset = H5Dopen2(s->file, path, H5P_DEFAULT);
	int64_t n = dset >= 0 ? length_1d(dset) : -1;
	int rc = n >= 0 ? 0 : -EIO;
	if (rc != 0)
		rfs_column_error(s->path, what, rc, err, errlen);
	else if (missing_filter(dset, filter, sizeof(filter))) {
		snprintf(err, errlen,
			 "%s: %s needs HDF5 filter '%s', which is not "
			 "available",
			 s->path, what, filter);
		rc = -ENOTSUP;
	}
	/* Named as the user named it, not as a link's target names it. */
	if (rc == 0)
		rc = rfs_hdf5_refuse_outside(s, dset, path, err, errlen);
	/* Refused, before it is read, where its length claims more than
	 * the daemon may hold (memlimit.c). */
	if (rc == 0) {
		H5Iget_name(dset, name, sizeof(name));
		rc = rfs_memlimit_claim(s->base.env.claims, s->path, name,
					(uint64_t)n, entry_bytes(dset, as),
					&out->claimed, err, errlen);
	}
	if (rc == 0 && (rc = read_values(s, dset, (uint64_t)n,
					 as == RFS_MEMLIMIT_NAMES, out)) != 0)
		rfs_column_error(s->path, what, rc, err, errlen);
	if (rc != 0)
		rfs_column_free(out);
	if (dset >= 0)
		H5Dclose(dset);
	return rc;
}
