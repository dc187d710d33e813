/* SPDX-License-Identifier: MIT */
/*
 * The HDF5 backend's open: the file, whether it is AnnData, and the
 * arrays anndata.c finds the rows in (a dataset, or a CSR's parts), with
 * their shape and dtype. How rows are read is hdf5_read.c's.
 */
#include "source/hdf5/hdf5_source.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "source/io/chunks.h"
#include "core/log.h"
#include "os/watch.h"

void rfs_hdf5_quiet(void)
{
	/* Per thread in threadsafe builds: we report errors ourselves.
	 * Once per thread: the call takes HDF5's global lock, 8 % of the
	 * daemon's CPU when made for every run of a CSR read. */
	static __thread int quiet;
	if (!quiet) {
		H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
		quiet = 1;
	}
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Reads obj's string attribute (fixed or variable length) into out.
 * @return 0, -ENOENT (none) or -EINVAL. */
static int read_string_attr(const struct hdf5_source *s, hid_t obj,
			    const char *name, char *out, size_t n)
{
	int rc = -EINVAL;
	if (H5Aexists(obj, name) <= 0)
		return -ENOENT;
	hid_t attr = H5Aopen(obj, name, H5P_DEFAULT);
	hid_t type = attr >= 0 ? H5Aget_type(attr) : -1;
	if (type < 0 || H5Tget_class(type) != H5T_STRING)
		goto close;
	if (H5Tis_variable_str(type) > 0) {
		char **value = NULL;
		if (rfs_hdf5_read_vlen(s, obj, name, H5Tget_cset(type), 1,
				       &value) == 0) {
			snprintf(out, n, "%s", value[0]);
			free(value[0]);
			free(value);
			rc = 0;
		}
	} else {
		size_t size = H5Tget_size(type);
		char *value = calloc(1, size + 1);
		if (value && H5Aread(attr, type, value) >= 0) {
			snprintf(out, n, "%s", value);
			rc = 0;
		}
		free(value);
	}
close:
	if (type >= 0)
		H5Tclose(type);
	if (attr >= 0)
		H5Aclose(attr);
	return rc;
}

static int is_anndata(const struct hdf5_source *s)
{
	char kind[64];
	if (ends_with(s->path, ".h5ad"))
		return 1;
	return read_string_attr(s, s->file, "encoding-type", kind,
				sizeof(kind)) == 0 &&
	       strcmp(kind, "anndata") == 0;
}

struct dataset_list {
	char *text;
	size_t cap;
	int count;
};

static herr_t list_dataset(hid_t obj, const char *name, const H5O_info_t *info,
			   void *data)
{
	(void)obj;
	struct dataset_list *l = data;
	if (info->type != H5O_TYPE_DATASET)
		return 0;
	if (l->count++ >= 8)
		return 1; /* enough to point the user the right way */
	size_t used = strlen(l->text);
	snprintf(l->text + used, l->cap - used, "%s/%s", used ? ", " : "",
		 name);
	return 0;
}

/* Lists the file's datasets (for error lines), cut to n bytes. */
static void describe_datasets(hid_t file, char *out, size_t n)
{
	struct dataset_list l = { .text = out, .cap = n };
	out[0] = '\0';
	H5Ovisit(file, H5_INDEX_NAME, H5_ITER_NATIVE, list_dataset, &l);
	if (!out[0])
		snprintf(out, n, "none");
}

/* HDF5's predefined type ids are run-time values, hence a function. */
static hid_t le_integer(size_t size, int is_signed)
{
	switch (size) {
	case 1:
		return is_signed ? H5T_STD_I8LE : H5T_STD_U8LE;
	case 2:
		return is_signed ? H5T_STD_I16LE : H5T_STD_U16LE;
	case 4:
		return is_signed ? H5T_STD_I32LE : H5T_STD_U32LE;
	default:
		return is_signed ? H5T_STD_I64LE : H5T_STD_U64LE;
	}
}

/* Maps an HDF5 file type to ours and a little-endian memory type. */
static int map_type(hid_t type, enum rfs_dtype *dt, hid_t *mem)
{
	H5T_class_t cls = H5Tget_class(type);
	size_t size = H5Tget_size(type);
	static const enum rfs_dtype signed_dt[] = { RFS_INT8,  RFS_INT16, 0,
						    RFS_INT32, 0,	  0,
						    0,	       RFS_INT64 };
	static const enum rfs_dtype unsigned_dt[] = { RFS_UINT8,  RFS_UINT16, 0,
						      RFS_UINT32, 0,	      0,
						      0,	  RFS_UINT64 };

	if (cls == H5T_INTEGER &&
	    (size == 1 || size == 2 || size == 4 || size == 8)) {
		int is_signed = H5Tget_sign(type) == H5T_SGN_2;
		*dt = is_signed ? signed_dt[size - 1] : unsigned_dt[size - 1];
		*mem = H5Tcopy(le_integer(size, is_signed));
		return *mem >= 0 ? 0 : -ENOTSUP;
	}
	if (cls == H5T_FLOAT && (size == 4 || size == 8)) {
		*dt = size == 4 ? RFS_FLOAT32 : RFS_FLOAT64;
		*mem = H5Tcopy(size == 4 ? H5T_IEEE_F32LE : H5T_IEEE_F64LE);
		return *mem >= 0 ? 0 : -ENOTSUP;
	}
	if (cls == H5T_FLOAT && size == 2) {
		/* HDF5 1.10 has no predefined half type; h5py writes IEEE
		 * binary16 as a custom float, built this way. Another 2-byte
		 * float (its exponent bias, say) differs from it, and HDF5
		 * converts it. */
		size_t spos, epos, esize, mpos, msize;
		if (H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize) <
			    0 ||
		    spos != 15 || epos != 10 || esize != 5 || mpos != 0 ||
		    msize != 10)
			return -ENOTSUP;
		*dt = RFS_FLOAT16;
		*mem = H5Tcopy(H5T_IEEE_F32LE);
		if (*mem < 0 || H5Tset_fields(*mem, 15, 10, 5, 0, 10) < 0 ||
		    H5Tset_size(*mem, 2) < 0 || H5Tset_ebias(*mem, 15) < 0)
			return -ENOTSUP;
		return 0;
	}
	return -ENOTSUP;
}

static const char *type_class_name(hid_t type)
{
	switch (H5Tget_class(type)) {
	case H5T_STRING:
		return "string";
	case H5T_COMPOUND:
		return "compound";
	case H5T_ENUM:
		return "enum";
	case H5T_BITFIELD:
		return "bitfield";
	case H5T_OPAQUE:
		return "opaque";
	case H5T_REFERENCE:
		return "reference";
	case H5T_VLEN:
		return "variable-length";
	case H5T_ARRAY:
		return "array";
	case H5T_INTEGER:
		return "integer of this size";
	case H5T_FLOAT: /* a 2-byte one: bfloat16's fields, say */
		return H5Tget_size(type) == 2 ?
			       "2-byte float not laid out as IEEE binary16" :
			       "float of this size";
	default:
		return "unknown";
	}
}

/* Opens dataset name as an array of 1 or 2 dimensions of a served dtype.
 * want_ndims 1 asks for a 1-D dataset (a CSR part). */
static int open_array(struct hdf5_source *s, const char *name, int want_ndims,
		      struct array *a, char *err, size_t errlen)
{
	struct rfs_pipeline pipe = { 0 };
	int rc = -EINVAL;
	a->name = strdup(name);
	a->dset = H5Dopen2(s->file, name, H5P_DEFAULT);
	if (!a->name || a->dset < 0) {
		snprintf(err, errlen, "%s: cannot open dataset %s", s->path,
			 name);
		return a->name ? -EINVAL : -ENOMEM;
	}
	if ((rc = rfs_hdf5_refuse_outside(s, a->dset, name, err, errlen)))
		return rc;
	hid_t space = H5Dget_space(a->dset);
	hid_t type = H5Dget_type(a->dset);
	int ndims = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
	hsize_t dims[2] = { 0, 1 };

	if (ndims < 1 || ndims > 2 || (want_ndims == 1 && ndims != 1)) {
		snprintf(err, errlen,
			 "%s: dataset %s has %d dimensions; rankfs serves "
			 "N or N x D datasets",
			 s->path, name, ndims);
		rc = -ENOTSUP;
		goto close;
	}
	H5Sget_simple_extent_dims(space, dims, NULL);
	if (type < 0 || map_type(type, &a->dtype, &a->mem_type) != 0) {
		snprintf(err, errlen,
			 "%s: dataset %s has unsupported dtype (%s); rankfs "
			 "serves int8..int64, uint8..uint64, float16/32/64",
			 s->path, name,
			 type >= 0 ? type_class_name(type) : "unreadable");
		rc = -ENOTSUP;
		goto close;
	}
	a->ndims = ndims;
	a->rows = dims[0];
	a->cols = ndims == 2 ? dims[1] : 1;
	a->elem = rfs_dtype_size(a->dtype);
	a->row_bytes = a->cols * a->elem;
	rc = rfs_hdf5_read_filters(s, a, &pipe, err, errlen);
	if (rc == 0)
		rfs_hdf5_choose_read_path(s, a, &pipe);
close:
	if (type >= 0)
		H5Tclose(type);
	if (space >= 0)
		H5Sclose(space);
	return rc;
}

static void close_array(struct array *a)
{
	rfs_rowmap_close(&a->map);
	free(a->locs);
	a->locs = NULL;
	free(a->chunked.locs);
	a->chunked.locs = NULL;
	if (a->mem_type >= 0)
		H5Tclose(a->mem_type);
	if (a->dset >= 0)
		H5Dclose(a->dset);
	free(a->name);
}

/* Whether an attribute or dataset's stored type (closed here) is an
 * integer: HDF5 would convert floats to int64 by truncation. */
static int stored_as_integers(hid_t type)
{
	int yes = type >= 0 && H5Tget_class(type) == H5T_INTEGER;
	if (type >= 0)
		H5Tclose(type);
	return yes;
}

/* The path of the object obj's attribute name references ("" when it
 * is none): anndata 0.7's categories. */
static void referenced_name(hid_t obj, const char *name, char *out, size_t n)
{
	hid_t attr =
		H5Aexists(obj, name) > 0 ? H5Aopen(obj, name, H5P_DEFAULT) : -1;
	hid_t type = attr >= 0 ? H5Aget_type(attr) : -1, target = -1;
	hobj_ref_t ref;
	if (type >= 0 && H5Tget_class(type) == H5T_REFERENCE &&
	    H5Aread(attr, H5T_STD_REF_OBJ, &ref) >= 0)
		target = H5Rdereference2(obj, H5P_DEFAULT, H5R_OBJECT, &ref);
	if (target < 0 || H5Iget_name(target, out, n) <= 0)
		out[0] = '\0';
	if (target >= 0)
		H5Oclose(target);
	if (type >= 0)
		H5Tclose(type);
	if (attr >= 0)
		H5Aclose(attr);
}

/* The store ops: what anndata.c reads the layout through. */
static int node(struct rfs_source *base, const char *path, const char *key,
		char *val, size_t vallen, char *err, size_t errlen)
{
	struct hdf5_source *s = (struct hdf5_source *)base;
	H5O_info_t info;
	val[0] = '\0';
	rfs_hdf5_quiet();
	/* H5Oget_info_by_name fails cleanly on any missing path component. */
	if (H5Oget_info_by_name(s->file, path, &info, H5P_DEFAULT) < 0) {
		char found[512];
		describe_datasets(s->file, found, sizeof(found));
		snprintf(err, errlen, "%s: dataset %s not found (datasets: %s)",
			 s->path, path, found);
		return 0;
	}
	if (info.type != H5O_TYPE_DATASET && info.type != H5O_TYPE_GROUP) {
		snprintf(err, errlen, "%s: %s is not a dataset", s->path, path);
		return 0;
	}
	/* A dataset's strings are not read: those take the string reader. */
	hid_t obj = H5Oopen(s->file, path, H5P_DEFAULT);
	if (obj >= 0 && info.type == H5O_TYPE_GROUP)
		read_string_attr(s, obj, key, val, vallen);
	else if (obj >= 0)
		referenced_name(obj, key, val, vallen);
	if (obj >= 0)
		H5Oclose(obj);
	return info.type == H5O_TYPE_DATASET ? RFS_NODE_ARRAY : RFS_NODE_GROUP;
}

static int array(struct rfs_source *base, const char *path,
		 struct rfs_store_array *out, char *err, size_t errlen)
{
	struct hdf5_source *s = (struct hdf5_source *)base;
	char val[8];
	hid_t dset = H5Dopen2(s->file, path, H5P_DEFAULT), mem = -1;
	if (dset < 0) {
		if (node(base, path, "", val, sizeof(val), err, errlen) > 0)
			snprintf(err, errlen, "%s: %s is not a dataset",
				 s->path, path);
		return -EINVAL;
	}
	hid_t space = H5Dget_space(dset);
	hid_t type = H5Dget_type(dset);
	hsize_t dims[H5S_MAX_RANK] = { 0 };
	*out = (struct rfs_store_array){ .dtype = RFS_DTYPE_COUNT };
	out->ndims = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
	if (out->ndims > 0 && H5Sget_simple_extent_dims(space, dims, NULL) > 0)
		out->len = dims[0];
	if (type >= 0 && map_type(type, &out->dtype, &mem) != 0)
		out->dtype = RFS_DTYPE_COUNT;
	out->strings = type >= 0 && H5Tget_class(type) == H5T_STRING;
	if (mem >= 0)
		H5Tclose(mem);
	if (type >= 0)
		H5Tclose(type);
	if (space >= 0)
		H5Sclose(space);
	H5Dclose(dset);
	if (out->ndims < 0)
		snprintf(err, errlen, "%s: dataset %s cannot be read", s->path,
			 path);
	return out->ndims < 0 ? -EIO : 0;
}

struct member_call {
	int (*each)(const char *name, void *ctx);
	void *ctx;
};

static herr_t call_member(hid_t group, const char *name, const H5L_info_t *info,
			  void *data)
{
	(void)group, (void)info;
	const struct member_call *m = data;
	return m->each(name, m->ctx);
}

static void members(struct rfs_source *base, const char *group,
		    int (*each)(const char *name, void *ctx), void *ctx)
{
	struct hdf5_source *s = (struct hdf5_source *)base;
	struct member_call m = { each, ctx };
	hid_t g = H5Gopen2(s->file, group, H5P_DEFAULT);
	if (g >= 0) {
		H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, NULL, call_member,
			   &m);
		H5Gclose(g);
	}
}

/* A 2-element integer "shape" attribute (anndata's sparse groups). */
static int read_shape(struct rfs_source *base, const char *path,
		      uint64_t shape[2])
{
	struct hdf5_source *s = (struct hdf5_source *)base;
	hid_t group = H5Gopen2(s->file, path, H5P_DEFAULT);
	hid_t attr = group >= 0 && H5Aexists(group, "shape") > 0 ?
			     H5Aopen(group, "shape", H5P_DEFAULT) :
			     -1;
	hid_t space = attr >= 0 ? H5Aget_space(attr) : -1;
	int64_t v[2];
	int rc = -EINVAL;
	if (space >= 0 && H5Sget_simple_extent_npoints(space) == 2 &&
	    stored_as_integers(H5Aget_type(attr)) &&
	    H5Aread(attr, H5T_NATIVE_INT64, v) >= 0 && v[0] >= 0 && v[1] > 0) {
		shape[0] = (uint64_t)v[0];
		shape[1] = (uint64_t)v[1];
		rc = 0;
	}
	if (space >= 0)
		H5Sclose(space);
	if (attr >= 0)
		H5Aclose(attr);
	if (group >= 0)
		H5Gclose(group);
	return rc;
}

/* What info says of the rows (of the values, for CSR). */
static int described(struct hdf5_source *s, int rc)
{
	s->base.info.dtype = s->x.dtype;
	s->base.info.layout = s->x.layout;
	s->base.info.read_path = s->x.map.map ? RFS_READ_MMAP : s->x.path;
	return rc;
}

static int open_dense(struct rfs_source *base, const char *path, char *err,
		      size_t errlen)
{
	struct hdf5_source *s = (struct hdf5_source *)base;
	int rc = open_array(s, path, 2, &s->x, err, errlen);
	s->base.info.rows = s->x.rows;
	s->base.info.cols = s->x.cols;
	s->base.info.ndims = s->x.ndims;
	return described(s, rc);
}

static int open_csr(struct rfs_source *base, const char *group, uint64_t n[2],
		    char *err, size_t errlen)
{
	struct hdf5_source *s = (struct hdf5_source *)base;
	char name[600];
	snprintf(name, sizeof(name), "%s/data", group);
	int rc = open_array(s, name, 1, &s->x, err, errlen);
	snprintf(name, sizeof(name), "%s/indices", group);
	if (rc == 0)
		rc = open_array(s, name, 1, &s->indices, err, errlen);
	n[0] = s->x.rows;
	n[1] = s->indices.rows;
	s->base.info.index_dtype = s->indices.dtype;
	return described(s, rc);
}

static const struct rfs_store_ops store = {
	.node = node,
	.array = array,
	.members = members,
	.shape = read_shape,
	.open_dense = open_dense,
	.open_csr = open_csr,
};

static void close_source(struct rfs_source *base)
{
	struct hdf5_source *s = (struct hdf5_source *)base;
	rfs_log_limit_destroy(&s->base.read_failures);
	close_array(&s->x);
	close_array(&s->indices);
	if (s->file >= 0)
		H5Fclose(s->file);
	rfs_watch_forget(s->base.env.watch, s->watch);
	if (s->fd >= 0)
		close(s->fd);
	free(s->dataset);
	free(s->path);
	free(s);
}

static const struct rfs_source_ops ops = {
	.read_rows = rfs_hdf5_read_rows,
	.read_csr_ranges = rfs_hdf5_read_csr_ranges,
	.read_column = rfs_hdf5_read_column,
	.check_unchanged = rfs_hdf5_check_unchanged,
	.state = rfs_hdf5_state,
	.reads_file = rfs_hdf5_reads_file,
	.row_scratch = rfs_hdf5_row_scratch,
	.take_share = rfs_hdf5_take_share,
	.close = close_source,
};

static int open_source(const char *path, const char *dataset,
		       const struct rfs_source_env *env,
		       struct rfs_source **out, char *err, size_t errlen)
{
	struct hdf5_source *s = calloc(1, sizeof(*s));
	int rc = -ENOMEM;
	char by_fd[64];

	if (!s) {
		snprintf(err, errlen, "%s: out of memory", path);
		return rc;
	}
	s->file = H5I_INVALID_HID;
	s->x.dset = s->x.mem_type = H5I_INVALID_HID;
	s->indices.dset = s->indices.mem_type = H5I_INVALID_HID;
	rfs_log_limit_init(&s->base.read_failures);
	*out = &s->base; /* closed by the caller, half-built or not */
	s->base.array_noun = "dataset";
	s->base.store_noun = "file";
	s->fd = -1;
	s->watch = -1;
	s->base.env = *env;
	s->chunks = env->chunks;
	s->strings = env->strings;
	rfs_hdf5_quiet();
	hbool_t threadsafe = 0;
	if (H5is_library_threadsafe(&threadsafe) < 0 || !threadsafe) {
		/* Reads run on many threads at once. */
		snprintf(err, errlen,
			 "%s: the HDF5 library is not built "
			 "thread-safe (rankfs needs it)",
			 path);
		return -ENOTSUP;
	}

	/* Non-blocking: a FIFO's open would wait for a writer forever. The
	 * file is looked at, and HDF5 opens it, through this descriptor: a
	 * name swapped meanwhile changes nothing. */
	s->path = realpath(path, NULL);
	s->fd = s->path ? open(s->path,
			       O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY) :
			  -1;
	if (s->fd < 0 || fstat(s->fd, &s->opened) != 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return rc;
	}
	if (!S_ISREG(s->opened.st_mode)) {
		rc = -EINVAL;
		snprintf(err, errlen, "%s: not a regular file", path);
		return rc;
	}
	/* io_uring fails a read of an O_NONBLOCK file that would wait. */
	fcntl(s->fd, F_SETFL, 0);
	snprintf(by_fd, sizeof(by_fd), "/proc/self/fd/%d", s->fd);
	s->base.info.mtime = s->opened.st_mtime;
	s->watch = rfs_watch_add(env->watch, s->fd);
	if (s->watch < 0)
		rfs_log("source %s: no inotify watch (%s): a write to it "
			"once it is unlinked or renamed over would go unseen; "
			"its size, mtime and ctime are checked before and "
			"after every read",
			s->path, strerror(-s->watch));
	/* Our reads are a batch's rows or chunks, in random order: the
	 * kernel's readahead on them read 8-12x the bytes served from
	 * storage (docs/benchmarks.md, run AG). A hint: failure is fine. */
	posix_fadvise(s->fd, 0, 0, POSIX_FADV_RANDOM);
	errno = 0;
	if (H5Fis_hdf5(by_fd) <= 0) {
		/* HDF5 opens the file again: that may be what failed. */
		int why = errno;
		rc = why == EMFILE || why == ENFILE || why == ENOMEM ? -why :
								       -EINVAL;
		snprintf(err, errlen, "%s: %s", path,
			 rc == -EINVAL ? "not an HDF5 file" : strerror(why));
		return rc;
	}
	s->file = H5Fopen(by_fd, H5F_ACC_RDONLY, H5P_DEFAULT);
	if (s->file < 0) {
		rc = -EINVAL;
		snprintf(err, errlen, "%s: cannot open as HDF5", path);
		return rc;
	}
	s->base.anndata = is_anndata(s);
	if (!dataset && !s->base.anndata) {
		char found[512];
		describe_datasets(s->file, found, sizeof(found));
		rc = -EINVAL;
		snprintf(err, errlen,
			 "%s: not an AnnData file; name the rows with "
			 "-o dataset=/PATH (datasets: %s)",
			 path, found);
		return rc;
	}
	s->dataset = strdup(dataset ? dataset : "/X");
	if (!s->dataset) {
		snprintf(err, errlen, "%s: out of memory", path);
		return rc;
	}
	s->base.info.path = s->path;
	s->base.info.dataset = s->dataset;
	return 0;
}

/* An HDF5 file: its signature where H5Fis_hdf5 looks for it, at 0 or
 * after a user block (512, 1024, 2048 ... bytes). */
static int probe(const char *path, const struct stat *st)
{
	static const unsigned char sig[8] = "\211HDF\r\n\032\n";
	unsigned char at_off[8];
	if (!S_ISREG(st->st_mode))
		return 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC), yes = 0;
	if (fd < 0)
		return -errno;
	for (off_t at = 0; !yes && at + 8 <= st->st_size;
	     at = at ? 2 * at : 512)
		yes = pread(fd, at_off, 8, at) == 8 && !memcmp(at_off, sig, 8);
	close(fd);
	return yes;
}

const struct rfs_source_backend rfs_hdf5_backend = {
	.name = "hdf5",
	.probe = probe,
	.open = open_source,
	.ops = &ops,
	.store = &store,
};
