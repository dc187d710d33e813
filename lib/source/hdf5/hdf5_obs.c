/* SPDX-License-Identifier: MIT */
#include "source/hdf5/hdf5_source.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/log.h"
#include "os/memlimit.h"

/*
 * Columns. An obs column of an AnnData file is one of: a group with
 * encoding-type "categorical" (codes + categories, anndata >= 0.8); a
 * dataset of codes whose "categories" attribute references the category
 * names (anndata 0.7); a numeric, bool (HDF5 enum) or string dataset.
 * A "/path" names any 1-D dataset of the file (anndata.c reads the groups
 * of other encodings). Columns are read whole, at mount time only.
 */

static void column_name(const char *name, char *out, size_t n)
{
	if (name[0] == '/')
		snprintf(out, n, "dataset %s", name);
	else
		snprintf(out, n, "obs column '%s'", name);
}

/* Lists obs's members (not _index or __categories) for error lines. */
static herr_t list_member(hid_t group, const char *name, const H5L_info_t *info,
			  void *data)
{
	(void)group, (void)info;
	char *out = data;
	size_t used = strlen(out);
	if (strcmp(name, "_index") == 0 || strcmp(name, "__categories") == 0)
		return 0;
	if (used > 400)
		return 1;
	snprintf(out + used, 512 - used, "%s%s", used ? ", " : "", name);
	return 0;
}

static void describe_obs(hid_t file, char out[512])
{
	out[0] = '\0';
	hid_t obs = H5Gopen2(file, "/obs", H5P_DEFAULT);
	if (obs >= 0) {
		H5Literate(obs, H5_INDEX_NAME, H5_ITER_INC, NULL, list_member,
			   out);
		H5Gclose(obs);
	}
	if (!out[0])
		snprintf(out, 512, "none");
}

/* Length of a 1-D dataset, or -1 when it is not 1-D. */
int64_t rfs_hdf5_length_1d(hid_t dset)
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
int rfs_hdf5_read_strings(const struct hdf5_source *s, hid_t dset, uint64_t n,
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

static int read_values(const struct hdf5_source *s, hid_t dset, uint64_t n,
		       struct rfs_column *out);

/* Category names of a categorical column: strings, bools (enums), or
 * numbers as text. *out and *count are set only on success. */
static int read_categories(const struct hdf5_source *s, hid_t dset, char ***out,
			   uint64_t *count)
{
	int64_t n = rfs_hdf5_length_1d(dset);
	hid_t type = H5Dget_type(dset);
	H5T_class_t cls = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
	struct rfs_column c = { 0 };
	int rc = -EINVAL;
	if (type >= 0)
		H5Tclose(type);
	if (n >= 0 && cls == H5T_STRING) {
		rc = rfs_hdf5_read_strings(s, dset, (uint64_t)n, out);
	} else if (n >= 0 && (cls == H5T_INTEGER || cls == H5T_FLOAT ||
			      cls == H5T_ENUM)) {
		/* Their values: categories that name categories of their
		 * own (themselves, say) would recurse. */
		rc = read_values(s, dset, (uint64_t)n, &c);
		if (rc == 0)
			rc = rfs_column_names(&c, out);
		rfs_column_free(&c);
	}
	if (rc == 0)
		*count = (uint64_t)n;
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

/* Codes of a categorical column, as int64. */
static int read_codes(hid_t dset, uint64_t n, struct rfs_column *out)
{
	out->kind = RFS_COLUMN_CODES;
	out->rows = n;
	out->codes = calloc(n ? n : 1, sizeof(int64_t));
	if (!out->codes)
		return -ENOMEM;
	return read_numbers(dset, H5T_NATIVE_INT64, out->codes);
}

/* The categories dataset an anndata 0.7 codes dataset references. */
static hid_t referenced_categories(hid_t dset)
{
	hid_t attr, type, target = -1;
	hobj_ref_t ref;
	if (H5Aexists(dset, "categories") <= 0)
		return -1;
	attr = H5Aopen(dset, "categories", H5P_DEFAULT);
	type = attr >= 0 ? H5Aget_type(attr) : -1;
	if (type >= 0 && H5Tget_class(type) == H5T_REFERENCE &&
	    H5Aread(attr, H5T_STD_REF_OBJ, &ref) >= 0)
		target = H5Rdereference2(dset, H5P_DEFAULT, H5R_OBJECT, &ref);
	if (type >= 0)
		H5Tclose(type);
	if (attr >= 0)
		H5Aclose(attr);
	return target;
}

static int categorical(const struct hdf5_source *s, hid_t codes, hid_t cats,
		       uint64_t n, struct rfs_column *out)
{
	int rc = read_codes(codes, n, out);
	if (rc == 0)
		rc = read_categories(s, cats, &out->categories,
				     &out->ncategories);
	for (uint64_t i = 0; i < n && rc == 0; i++)
		if (out->codes[i] >= (int64_t)out->ncategories ||
		    out->codes[i] < -1)
			rc = -EINVAL;
	return rc;
}

/* A dataset's values as they are: numbers, an enum's, or strings. */
static int read_values(const struct hdf5_source *s, hid_t dset, uint64_t n,
		       struct rfs_column *out)
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
		rc = rfs_hdf5_read_strings(s, dset, n, &strings);
		return rc ? rc : rfs_column_from_strings(out, strings, n);
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

/* Refuses, before it is read, a dataset whose length claims more than
 * the daemon may hold (memlimit.c). */
int rfs_hdf5_claim(const struct hdf5_source *s, hid_t dset, uint64_t n,
		   enum rfs_memlimit_as as, uint64_t *claimed, char *err,
		   size_t errlen)
{
	char name[512] = "?";
	H5Iget_name(dset, name, sizeof(name));
	return rfs_memlimit_claim(s->base.env.claims, s->path, name, n,
				  entry_bytes(dset, as), claimed, err, errlen);
}

int rfs_hdf5_read_column(struct rfs_source *base, const char *name,
			 struct rfs_column *out, char *err, size_t errlen)
{
	struct hdf5_source *s = (struct hdf5_source *)base;
	char path[512], what[300], filter[64];
	H5O_info_t info;
	hid_t obj = -1, codes = -1, cats = -1;
	int rc = -EINVAL;

	*out = (struct rfs_column){ .claims = s->base.env.claims };
	rfs_hdf5_quiet();
	column_name(name, what, sizeof(what));
	if (name[0] != '/' && !s->base.anndata) {
		snprintf(err, errlen,
			 "%s: not an AnnData file, so it has no %s; name a "
			 "1-D dataset as /PATH",
			 s->path, what);
		return -EINVAL;
	}
	snprintf(path, sizeof(path), "%s%s", name[0] == '/' ? "" : "/obs/",
		 name);
	if (strchr(name, '/') && name[0] != '/')
		goto not_found;
	if (H5Oget_info_by_name(s->file, path, &info, H5P_DEFAULT) < 0)
		goto not_found;
	if (info.type == H5O_TYPE_GROUP) {
		/* A categorical one: anndata.c reads the others. */
		obj = H5Gopen2(s->file, path, H5P_DEFAULT);
		codes = H5Dopen2(obj, "codes", H5P_DEFAULT);
		cats = H5Dopen2(obj, "categories", H5P_DEFAULT);
		if (codes < 0 || cats < 0) {
			snprintf(err, errlen,
				 "%s: %s is categorical but lacks codes or "
				 "categories",
				 s->path, what);
			goto out;
		}
	} else if (info.type == H5O_TYPE_DATASET) {
		codes = H5Dopen2(s->file, path, H5P_DEFAULT);
		/* Integers with a "categories" reference: anndata 0.7. */
		hid_t type = codes >= 0 ? H5Dget_type(codes) : -1;
		if (type >= 0 && H5Tget_class(type) == H5T_INTEGER)
			cats = referenced_categories(codes);
		if (type >= 0)
			H5Tclose(type);
	} else {
		goto not_found;
	}
	if ((codes >= 0 && missing_filter(codes, filter, sizeof(filter))) ||
	    (cats >= 0 && missing_filter(cats, filter, sizeof(filter)))) {
		snprintf(err, errlen,
			 "%s: %s needs HDF5 filter '%s', which is not "
			 "available",
			 s->path, what, filter);
		rc = -ENOTSUP;
		goto out;
	}
	int outside = 0;
	for (int k = 0; k < 2 && outside == 0; k++) {
		hid_t dset = k == 0 ? codes : cats;
		char dset_name[sizeof(path) + 16] = "";
		/* Named as the user named it (not as a link's target names
		 * it), or as HDF5 names the parts it found. */
		if (dset >= 0 &&
		    ((k == 0 && obj < 0) ||
		     H5Iget_name(dset, dset_name, sizeof(dset_name)) <= 0))
			snprintf(dset_name, sizeof(dset_name), "%s", path);
		if (dset >= 0)
			outside = rfs_hdf5_refuse_outside(s, dset, dset_name,
							  err, errlen);
	}
	if (outside != 0) {
		rc = outside;
		goto out;
	}
	int64_t n = codes >= 0 ? rfs_hdf5_length_1d(codes) : -1;
	if (n < 0 && codes >= 0) {
		/* Not 1-D: its dimensions, not a length of -1. */
		hid_t space = H5Dget_space(codes);
		int nd = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
		if (space >= 0)
			H5Sclose(space);
		snprintf(err, errlen,
			 "%s: %s has %d dimensions (a column needs one value "
			 "per row, 1-D)",
			 s->path, what, nd);
		goto out;
	}
	if (n != (int64_t)s->base.info.rows) {
		snprintf(err, errlen,
			 "%s: %s has %lld rows, the data %llu (a column needs "
			 "one value per row, 1-D)",
			 s->path, what, (long long)n,
			 (unsigned long long)s->base.info.rows);
		goto out;
	}
	int64_t ncats = cats >= 0 ? rfs_hdf5_length_1d(cats) : 0;
	/* Without categories, strings are made codes (read_values). */
	rc = rfs_hdf5_claim(s, codes, (uint64_t)n,
			    cats >= 0 ? RFS_MEMLIMIT_VALUES :
					RFS_MEMLIMIT_CODES,
			    &out->claimed, err, errlen);
	if (rc == 0 && ncats > 0)
		rc = rfs_hdf5_claim(s, cats, (uint64_t)ncats,
				    RFS_MEMLIMIT_NAMES, &out->claimed, err,
				    errlen);
	if (rc != 0)
		goto out;
	rc = cats >= 0 ? categorical(s, codes, cats, (uint64_t)n, out) :
			 read_values(s, codes, (uint64_t)n, out);
	if (rc == -ENOTSUP)
		snprintf(err, errlen,
			 "%s: %s has a type rankfs cannot read as a column "
			 "(categorical, integer, float, bool or string)",
			 s->path, what);
	else if (rc == -ERANGE)
		snprintf(err, errlen, "%s: %s " RFS_COLUMN_TOO_LARGE, s->path,
			 what);
	else if (rc == -ENOMEM)
		snprintf(err, errlen,
			 "%s: %s cannot be read: no memory for its %lld values",
			 s->path, what, (long long)n);
	else if (rc != 0)
		snprintf(err, errlen, "%s: %s cannot be read%s", s->path, what,
			 rc == -EINVAL ? " (codes out of range of categories)" :
					 "");
	goto out;
not_found:
	if (name[0] == '/') {
		char found[512];
		rfs_hdf5_describe_datasets(s->file, found, sizeof(found));
		snprintf(err, errlen, "%s: %s not found (datasets: %s)",
			 s->path, what, found);
	} else {
		char found[512];
		describe_obs(s->file, found);
		snprintf(err, errlen, "%s: %s not found (obs columns: %s)",
			 s->path, what, found);
	}
	rc = -EINVAL;
out:
	if (rc != 0)
		rfs_column_free(out);
	if (codes >= 0)
		H5Dclose(codes);
	if (cats >= 0)
		H5Dclose(cats);
	if (obj >= 0)
		H5Gclose(obj);
	return rc;
}
