/*
 * HDF5 access. HDF5 1.10's threadsafe build (Debian's) serialises every call
 * behind one global lock, so this reader keeps calls few: a fetch is sorted,
 * adjacent rows are merged into runs, and each run is one read into a
 * staging buffer (never a large union selection: building those is
 * quadratic in 1.10). Rows are then copied to their places in the batch.
 *
 * A contiguous, unfiltered dataset stored in the byte order we serve is just
 * N x row_bytes bytes at H5Dget_offset(): its runs are read with pread on
 * our own descriptor, outside HDF5's lock, so fetches run in parallel. A
 * short pread (the file was truncated) is an error, never zeros. Anything
 * else (chunked, compressed, big-endian, compact) goes through H5Dread.
 */
#include "source.h"

#include <errno.h>
#include <hdf5.h>
#include <stdatomic.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "log.h"

struct rfs_source {
	struct rfs_source_info info;
	char *path;
	char *dataset;
	size_t row_bytes;
	hid_t file;
	hid_t dset;
	hid_t mem_type; /* little-endian type the rows are read as */
	int fd; /* for direct reads; -1: use H5Dread */
	uint64_t data_offset; /* file offset of row 0 when fd >= 0 */
	struct stat opened; /* the file as it was at open */
	atomic_int change_logged;
};

static void quiet_hdf5(void)
{
	/* Per thread in threadsafe builds: we report errors ourselves. */
	H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Reads a string attribute (fixed or variable length) into out. */
static int read_string_attr(hid_t obj, const char *name, char *out, size_t n)
{
	int rc = -1;
	if (H5Aexists(obj, name) <= 0)
		return -1;
	hid_t attr = H5Aopen(obj, name, H5P_DEFAULT);
	hid_t type = attr >= 0 ? H5Aget_type(attr) : -1;
	if (type < 0 || H5Tget_class(type) != H5T_STRING)
		goto close;
	if (H5Tis_variable_str(type) > 0) {
		char *value = NULL;
		hid_t mem = H5Tcopy(H5T_C_S1);
		H5Tset_size(mem, H5T_VARIABLE);
		if (H5Aread(attr, mem, &value) >= 0 && value) {
			snprintf(out, n, "%s", value);
			H5free_memory(value);
			rc = 0;
		}
		H5Tclose(mem);
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

static int is_anndata(hid_t file, const char *path)
{
	char kind[64];
	if (ends_with(path, ".h5ad"))
		return 1;
	return read_string_attr(file, "encoding-type", kind, sizeof(kind)) ==
		       0 &&
	       strcmp(kind, "anndata") == 0;
}

struct dataset_list {
	char *text;
	size_t len, cap;
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
	static const enum rfs_dtype signed_dt[] = { RFS_INT8, RFS_INT16, 0,
						    RFS_INT32, 0, 0, 0,
						    RFS_INT64 };
	static const enum rfs_dtype unsigned_dt[] = { RFS_UINT8, RFS_UINT16, 0,
						      RFS_UINT32, 0, 0, 0,
						      RFS_UINT64 };

	if (cls == H5T_INTEGER && (size == 1 || size == 2 || size == 4 ||
				   size == 8)) {
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
		 * binary16 as a custom float. Read it as itself, in LE. */
		size_t spos, epos, esize, mpos, msize;
		if (H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize) <
			    0 ||
		    spos != 15 || epos != 10 || esize != 5 || mpos != 0 ||
		    msize != 10)
			return -ENOTSUP;
		*dt = RFS_FLOAT16;
		*mem = H5Tcopy(type);
		if (*mem < 0 || H5Tset_order(*mem, H5T_ORDER_LE) < 0)
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
	case H5T_FLOAT:
		return "float of this size";
	default:
		return "unknown";
	}
}

/* Every filter in the pipeline must be available, or reads fail later. */
static int check_filters(struct rfs_source *s, char *err, size_t errlen)
{
	hid_t dcpl = H5Dget_create_plist(s->dset);
	if (dcpl < 0)
		return 0;
	int rc = 0;
	int n = H5Pget_nfilters(dcpl);
	for (int i = 0; i < n && rc == 0; i++) {
		unsigned flags, config;
		size_t nvalues = 0;
		char name[64] = "";
		H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)i, &flags,
						 &nvalues, NULL, sizeof(name),
						 name, &config);
		if (id >= 0 && H5Zfilter_avail(id) <= 0) {
			snprintf(err, errlen,
				 "%s: dataset %s needs HDF5 filter '%s' (id "
				 "%d), which is not available",
				 s->path, s->dataset, name[0] ? name : "?",
				 (int)id);
			rc = -ENOTSUP;
		}
	}
	switch (H5Pget_layout(dcpl)) {
	case H5D_CHUNKED:
		s->info.layout = "chunked";
		break;
	case H5D_COMPACT:
		s->info.layout = "compact";
		break;
	default:
		s->info.layout = "contiguous";
	}
	H5Pclose(dcpl);
	return rc;
}

static int describe_group(struct rfs_source *s, char *err, size_t errlen)
{
	char kind[64] = "";
	hid_t group = H5Gopen2(s->file, s->dataset, H5P_DEFAULT);
	if (group >= 0) {
		read_string_attr(group, "encoding-type", kind, sizeof(kind));
		H5Gclose(group);
	}
	if (strcmp(kind, "csr_matrix") == 0 || strcmp(kind, "csc_matrix") == 0)
		snprintf(err, errlen,
			 "%s: %s is a sparse %s: CSR sources are not "
			 "supported yet",
			 s->path, s->dataset, kind);
	else
		snprintf(err, errlen, "%s: %s is a group, not a dataset",
			 s->path, s->dataset);
	return -ENOTSUP;
}

static int describe_dataset(struct rfs_source *s, char *err, size_t errlen)
{
	int rc = 0;
	hid_t space = H5Dget_space(s->dset);
	hid_t type = H5Dget_type(s->dset);
	int ndims = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
	hsize_t dims[2] = { 0, 1 };

	if (ndims < 1 || ndims > 2) {
		snprintf(err, errlen,
			 "%s: dataset %s has %d dimensions; rankfs serves "
			 "N or N x D datasets",
			 s->path, s->dataset, ndims);
		rc = -ENOTSUP;
		goto close;
	}
	H5Sget_simple_extent_dims(space, dims, NULL);
	if (type < 0 || map_type(type, &s->info.dtype, &s->mem_type) != 0) {
		snprintf(err, errlen,
			 "%s: dataset %s has unsupported dtype (%s); rankfs "
			 "serves int8..int64, uint8..uint64, float16/32/64",
			 s->path, s->dataset,
			 type >= 0 ? type_class_name(type) : "unreadable");
		rc = -ENOTSUP;
		goto close;
	}
	if (dims[0] == 0) {
		snprintf(err, errlen, "%s: dataset %s has no rows", s->path,
			 s->dataset);
		rc = -EINVAL;
		goto close;
	}
	s->info.ndims = ndims;
	s->info.rows = dims[0];
	s->info.cols = ndims == 2 ? dims[1] : 1;
	s->row_bytes = s->info.cols * rfs_dtype_size(s->info.dtype);
	if (s->row_bytes == 0) {
		snprintf(err, errlen, "%s: dataset %s has rows of 0 columns",
			 s->path, s->dataset);
		rc = -EINVAL;
		goto close;
	}
	rc = check_filters(s, err, errlen);
close:
	if (type >= 0)
		H5Tclose(type);
	if (space >= 0)
		H5Sclose(space);
	return rc;
}

static int open_dataset(struct rfs_source *s, char *err, size_t errlen)
{
	H5O_info_t info;
	/* H5Oget_info_by_name fails cleanly on any missing path component. */
	if (H5Oget_info_by_name(s->file, s->dataset, &info, H5P_DEFAULT) < 0) {
		char found[512];
		describe_datasets(s->file, found, sizeof(found));
		snprintf(err, errlen,
			 "%s: dataset %s not found (datasets: %s)", s->path,
			 s->dataset, found);
		return -EINVAL;
	}
	if (info.type == H5O_TYPE_GROUP)
		return describe_group(s, err, errlen);
	if (info.type != H5O_TYPE_DATASET) {
		snprintf(err, errlen, "%s: %s is not a dataset", s->path,
			 s->dataset);
		return -EINVAL;
	}
	s->dset = H5Dopen2(s->file, s->dataset, H5P_DEFAULT);
	if (s->dset < 0) {
		snprintf(err, errlen, "%s: cannot open dataset %s", s->path,
			 s->dataset);
		return -EINVAL;
	}
	return describe_dataset(s, err, errlen);
}

/* Enables pread when the dataset's bytes are exactly what we serve. */
static void setup_direct_reads(struct rfs_source *s)
{
	hid_t dcpl = H5Dget_create_plist(s->dset);
	hid_t type = H5Dget_type(s->dset);
	int plain = dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CONTIGUOUS &&
		    H5Pget_nfilters(dcpl) == 0 && type >= 0 &&
		    H5Tequal(type, s->mem_type) > 0;
	haddr_t offset = plain ? H5Dget_offset(s->dset) : HADDR_UNDEF;
	if (type >= 0)
		H5Tclose(type);
	if (dcpl >= 0)
		H5Pclose(dcpl);
	if (offset == HADDR_UNDEF)
		return; /* not plain, or never written (all fill value) */
	s->fd = open(s->path, O_RDONLY | O_CLOEXEC);
	s->data_offset = offset;
	s->info.direct = s->fd >= 0;
}

static int pread_run(struct rfs_source *s, uint64_t first, uint64_t count,
		     void *dst)
{
	size_t want = count * s->row_bytes, got = 0;
	off_t at = (off_t)(s->data_offset + first * s->row_bytes);
	while (got < want) {
		ssize_t n = pread(s->fd, (char *)dst + got, want - got,
				  at + (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rfs_log("source %s dataset %s: read of rows [%llu, "
				"%llu) failed: %s",
				s->path, s->dataset, (unsigned long long)first,
				(unsigned long long)(first + count),
				n < 0 ? strerror(errno) :
					"file ends before the data");
			return -EIO;
		}
		got += (size_t)n;
	}
	return 0;
}

static int read_run(struct rfs_source *s, uint64_t first, uint64_t count,
		    void *dst)
{
	if (s->fd >= 0)
		return pread_run(s, first, count, dst);

	hsize_t start[2] = { first, 0 };
	hsize_t extent[2] = { count, s->info.cols };
	int nd = s->info.ndims;
	int rc = -EIO;
	hid_t file_space = H5Dget_space(s->dset);
	hid_t mem_space = H5Screate_simple(nd, extent, NULL);
	if (file_space >= 0 && mem_space >= 0 &&
	    H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, NULL,
				extent, NULL) >= 0 &&
	    H5Dread(s->dset, s->mem_type, mem_space, file_space, H5P_DEFAULT,
		    dst) >= 0)
		rc = 0;
	if (mem_space >= 0)
		H5Sclose(mem_space);
	if (file_space >= 0)
		H5Sclose(file_space);
	if (rc != 0)
		rfs_log("source %s dataset %s: read of rows [%llu, %llu) "
			"failed",
			s->path, s->dataset, (unsigned long long)first,
			(unsigned long long)(first + count));
	return rc;
}

/* The fingerprint covers shape, dtype and the first and last rows: enough
 * to tell different data apart cheaply, at mount time only. */
static int fingerprint(struct rfs_source *s, char *err, size_t errlen)
{
	XXH3_state_t *st = XXH3_createState();
	unsigned char *row = malloc(s->row_bytes);
	int rc = -ENOMEM;
	if (!st || !row)
		goto out;
	uint64_t head[4] = { s->info.rows, s->info.cols,
			     (uint64_t)s->info.ndims, s->info.dtype };
	XXH3_64bits_reset(st);
	XXH3_64bits_update(st, head, sizeof(head));
	XXH3_64bits_update(st, s->dataset, strlen(s->dataset));
	uint64_t ends[2] = { 0, s->info.rows - 1 };
	for (int i = 0; i < 2; i++) {
		rc = read_run(s, ends[i], 1, row);
		if (rc != 0) {
			snprintf(err, errlen,
				 "%s: dataset %s: cannot read row %llu",
				 s->path, s->dataset,
				 (unsigned long long)ends[i]);
			goto out;
		}
		XXH3_64bits_update(st, row, s->row_bytes);
	}
	s->info.fingerprint = XXH3_64bits_digest(st);
out:
	free(row);
	XXH3_freeState(st);
	return rc;
}

int rfs_source_open(const char *path, const char *dataset,
		    struct rfs_source **out, char *err, size_t errlen)
{
	struct rfs_source *s = calloc(1, sizeof(*s));
	int rc = -ENOMEM;
	struct stat st;

	if (!s) {
		snprintf(err, errlen, "%s: out of memory", path);
		return rc;
	}
	s->file = s->dset = s->mem_type = H5I_INVALID_HID;
	s->fd = -1;
	quiet_hdf5();

	s->path = realpath(path, NULL);
	if (!s->path || stat(s->path, &st) != 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = -EINVAL;
		snprintf(err, errlen, "%s: not a regular file", path);
		goto fail;
	}
	FILE *probe = fopen(s->path, "rbe");
	if (!probe) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		goto fail;
	}
	fclose(probe);
	if (H5Fis_hdf5(s->path) <= 0) {
		rc = -EINVAL;
		snprintf(err, errlen, "%s: not an HDF5 file", path);
		goto fail;
	}
	s->file = H5Fopen(s->path, H5F_ACC_RDONLY, H5P_DEFAULT);
	if (s->file < 0) {
		rc = -EINVAL;
		snprintf(err, errlen, "%s: cannot open as HDF5", path);
		goto fail;
	}
	if (!dataset && !is_anndata(s->file, s->path)) {
		char found[512];
		describe_datasets(s->file, found, sizeof(found));
		rc = -EINVAL;
		snprintf(err, errlen,
			 "%s: not an AnnData file; name the rows with "
			 "-o dataset=/PATH (datasets: %s)",
			 path, found);
		goto fail;
	}
	s->dataset = strdup(dataset ? dataset : "/X");
	if (!s->dataset)
		goto fail;
	rc = open_dataset(s, err, errlen);
	if (rc != 0)
		goto fail;
	setup_direct_reads(s);
	rc = fingerprint(s, err, errlen);
	if (rc != 0)
		goto fail;
	s->info.path = s->path;
	s->info.dataset = s->dataset;
	s->info.mtime = st.st_mtime;
	s->opened = st;
	*out = s;
	return 0;
fail:
	rfs_source_destroy(s);
	return rc;
}

const struct rfs_source_info *rfs_source_info(const struct rfs_source *s)
{
	return &s->info;
}

size_t rfs_source_row_bytes(const struct rfs_source *s)
{
	return s->row_bytes;
}

struct wanted {
	uint64_t row;
	size_t slot;
};

static int cmp_wanted(const void *a, const void *b)
{
	const struct wanted *x = a, *y = b;
	return (x->row > y->row) - (x->row < y->row);
}

/*
 * HDF5 reads a truncated file's missing bytes as zeros, and a file replaced
 * or rewritten under the mount would mix old and new rows. Either way a
 * batch could hold wrong bytes, so once the file's identity, size or mtime
 * differs from what was opened, every new read fails with EIO (batches
 * already generated stay served). One stat per fetch is cheap next to it.
 */
static int check_unchanged(struct rfs_source *s)
{
	struct stat now;
	const struct stat *was = &s->opened;
	int gone = stat(s->path, &now) != 0;
	if (!gone && now.st_dev == was->st_dev && now.st_ino == was->st_ino &&
	    now.st_size == was->st_size &&
	    now.st_mtim.tv_sec == was->st_mtim.tv_sec &&
	    now.st_mtim.tv_nsec == was->st_mtim.tv_nsec)
		return 0;
	if (atomic_exchange(&s->change_logged, 1) == 0) {
		if (gone)
			rfs_log("source %s: %s; new batches fail with EIO",
				s->path, strerror(errno));
		else
			rfs_log("source %s changed under the mount (inode "
				"%llu -> %llu, size %lld -> %lld, mtime %lld "
				"-> %lld); new batches fail with EIO",
				s->path, (unsigned long long)was->st_ino,
				(unsigned long long)now.st_ino,
				(long long)was->st_size,
				(long long)now.st_size,
				(long long)was->st_mtim.tv_sec,
				(long long)now.st_mtim.tv_sec);
	}
	return -EIO;
}

int rfs_source_read_rows(struct rfs_source *s, const int64_t *rows, size_t n,
			 void *dst)
{
	int rc = -ENOMEM;
	struct wanted *w = malloc(n * sizeof(*w));
	unsigned char *staging = malloc(n * s->row_bytes);
	unsigned char *out = dst;

	quiet_hdf5();
	if (!w || !staging)
		goto out;
	for (size_t i = 0; i < n; i++)
		w[i] = (struct wanted){ (uint64_t)rows[i], i };
	qsort(w, n, sizeof(*w), cmp_wanted);

	rc = check_unchanged(s);
	if (rc != 0 && n > 0)
		rfs_log("source %s dataset %s: rows %llu..%llu (%zu rows) "
			"not read: the file changed",
			s->path, s->dataset, (unsigned long long)w[0].row,
			(unsigned long long)w[n - 1].row, n);
	for (size_t i = 0, j; i < n && rc == 0; i = j) {
		/* A run: sorted rows where each is the same as or next to
		 * the one before. Its distinct rows fit the staging buffer. */
		for (j = i + 1; j < n && w[j].row - w[j - 1].row <= 1; j++)
			;
		uint64_t first = w[i].row, count = w[j - 1].row - first + 1;
		rc = read_run(s, first, count, staging);
		for (size_t k = i; k < j && rc == 0; k++)
			memcpy(out + w[k].slot * s->row_bytes,
			       staging + (w[k].row - first) * s->row_bytes,
			       s->row_bytes);
	}
out:
	free(staging);
	free(w);
	return rc;
}

void rfs_source_destroy(struct rfs_source *s)
{
	if (!s)
		return;
	if (s->fd >= 0)
		close(s->fd);
	if (s->mem_type >= 0)
		H5Tclose(s->mem_type);
	if (s->dset >= 0)
		H5Dclose(s->dset);
	if (s->file >= 0)
		H5Fclose(s->file);
	free(s->dataset);
	free(s->path);
	free(s);
}
