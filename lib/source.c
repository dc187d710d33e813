/*
 * HDF5 access. HDF5 1.10's threadsafe build (Debian's) serialises every call
 * behind one global lock, so HDF5 describes the file at mount time and the
 * bytes are read around it wherever the layout allows:
 *
 * - a contiguous, unfiltered dataset stored in the byte order we serve is
 *   just rows x row_bytes bytes at H5Dget_offset(): runs of rows are read
 *   with pread on our own descriptor (fetch.c submits a batch's together),
 *   or, while those bytes sit in the page cache and fit in the memory
 *   cache_mb leaves for chunks, copied out of a mapping (rowmap.c);
 * - a chunked dataset whose filters are deflate and shuffle (what h5py and
 *   anndata write) has its chunk addresses taken from HDF5's index once;
 *   chunks are then read with pread and decoded in the calling thread
 *   (chunks.c), through an LRU of decoded chunks;
 * - anything else (other filters, big-endian, compact, unallocated chunks,
 *   external raw data files, virtual datasets) goes through H5Dread, one
 *   hyperslab per run of adjacent rows (never a large union selection:
 *   building those is quadratic in 1.10).
 *
 * A fetch is sorted and adjacent rows are merged into runs; rows are then
 * copied to their places in the batch. A short read (the file was
 * truncated) is an error, never zeros.
 *
 * A CSR matrix (anndata's csr_matrix group) is three 1-D datasets: its
 * indptr is read whole at open (8 bytes per row) and a fetch reads, per run
 * of adjacent rows, one range of data and of indices.
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
#include <sys/uio.h>
#include <unistd.h>
#include <xxhash.h>

#include "chunks.h"
#include "column.h"
#include "convert.h"
#include "fetch.h"
#include "log.h"
#include "rowmap.h"
#include "rowsort.h"

/* More chunks than this are read through HDF5 (the index costs 40 bytes
 * per chunk at mount). */
#define CHUNKS_MAX (UINT64_C(1) << 24)

enum read_path { READ_HDF5, READ_PREAD, READ_CHUNKS };

/* One HDF5 dataset read as rows: the dense rows, or a CSR's data or
 * indices (1-D: cols 1). */
struct array {
	hid_t dset;
	hid_t mem_type; /* little-endian type the rows are read as */
	char *name; /* HDF5 path, for log lines */
	int ndims;
	uint64_t rows, cols;
	enum rfs_dtype dtype;
	size_t elem, row_bytes;
	const char *layout; /* "contiguous", "chunked", "compact" */
	enum read_path path;
	uint64_t offset; /* READ_PREAD: file offset of row 0 */
	struct rfs_rowmap map; /* READ_PREAD: a mapping, when lent memory */
	uint64_t chunks_id; /* READ_CHUNKS: in the mount's chunk cache */
};

struct rfs_source {
	struct rfs_source_info info;
	char *path;
	char *dataset;
	hid_t file;
	/* Served datasets are opened with it: their external raw data files
	 * are named from the mount's working directory. */
	hid_t dapl;
	int fd; /* read-only: pread and chunk reads */
	struct rfs_chunk_cache *chunks; /* borrowed, may be NULL */
	struct array x; /* dense rows, or a CSR's data */
	struct array indices; /* CSR only */
	int64_t *indptr; /* CSR only: rows + 1 entries */
	struct stat opened; /* the file as it was at open */
	/* Files the served rows are read from besides the source (an
	 * external link's target, a virtual dataset's sources), watched for
	 * changes like the source itself. */
	struct linked_file {
		char *path;
		struct stat opened;
	} *linked;
	size_t nlinked, linked_cap;
	int anndata; /* obs columns can be named without a path */
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
		/* HDF5 converts no strings between ASCII and UTF-8. */
		H5Tset_cset(mem, H5Tget_cset(type));
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
	case H5T_FLOAT:
		return "float of this size";
	default:
		return "unknown";
	}
}

/* Every filter in the pipeline must be available, or reads fail later;
 * the pipeline is recorded for direct chunk reads. */
static int read_filters(struct rfs_source *s, struct array *a,
			struct rfs_pipeline *pipe, char *err, size_t errlen)
{
	hid_t dcpl = H5Dget_create_plist(a->dset);
	if (dcpl < 0)
		return 0;
	int rc = 0;
	int n = H5Pget_nfilters(dcpl);
	pipe->count = 0;
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
				 s->path, a->name, name[0] ? name : "?",
				 (int)id);
			rc = -ENOTSUP;
		}
		if (pipe->count < RFS_FILTERS_MAX)
			pipe->ids[pipe->count] = (int)id;
		pipe->count++;
	}
	switch (H5Pget_layout(dcpl)) {
	case H5D_CHUNKED:
		a->layout = "chunked";
		break;
	case H5D_COMPACT:
		a->layout = "compact";
		break;
	case H5D_VIRTUAL:
		a->layout = "virtual";
		break;
	default:
		a->layout = "contiguous";
	}
	H5Pclose(dcpl);
	return rc;
}

/* Where HDF5's addresses start in the file: after the userblock. Chunk
 * addresses leave it out before HDF5 1.14.4 (HDF5 issue #3003), while
 * H5Dget_offset() has always counted it. */
static uint64_t chunk_address_base(hid_t file)
{
#if H5_VERSION_GE(1, 14, 4)
	(void)file;
	return 0;
#else
	hsize_t userblock = 0;
	hid_t fcpl = H5Fget_create_plist(file);
	if (fcpl >= 0) {
		if (H5Pget_userblock(fcpl, &userblock) < 0)
			userblock = 0;
		H5Pclose(fcpl);
	}
	return userblock;
#endif
}

/* Asks HDF5's index where every chunk is, as file offsets (base: see
 * chunk_address_base). @return 0 when each chunk is allocated and direct
 * reads can serve the array (c->locs then set). */
static int locate_chunks(struct array *a, hid_t dcpl, uint64_t base,
			 struct rfs_chunked *c)
{
	hsize_t dims[2] = { 1, 1 };
	unsigned opts = 0;
	if (H5Pget_chunk(dcpl, a->ndims, dims) != a->ndims ||
	    H5Pget_chunk_opts(dcpl, &opts) < 0 ||
	    (opts & H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS))
		return -1;
	if (!a->rows || !a->cols)
		return -1; /* nothing to read; open_rows refuses it */
	c->chunk_rows = dims[0];
	c->chunk_cols = a->ndims == 2 ? dims[1] : 1;
	uint64_t grid_rows = (a->rows + c->chunk_rows - 1) / c->chunk_rows;
	c->grid_cols = (a->cols + c->chunk_cols - 1) / c->chunk_cols;
	if (grid_rows > CHUNKS_MAX / c->grid_cols)
		return -1;
	c->locs = calloc(grid_rows * c->grid_cols, sizeof(*c->locs));
	if (!c->locs)
		return -1;
	for (uint64_t r = 0; r < grid_rows; r++) {
		for (uint64_t k = 0; k < c->grid_cols; k++) {
			hsize_t at[2] = { r * c->chunk_rows,
					  k * c->chunk_cols };
			struct rfs_chunk_loc *loc =
				&c->locs[r * c->grid_cols + k];
			haddr_t addr;
			hsize_t size;
			if (H5Dget_chunk_info_by_coord(a->dset, at, &loc->mask,
						       &addr, &size) < 0 ||
			    addr == HADDR_UNDEF) {
				free(c->locs);
				c->locs = NULL;
				return -1; /* unallocated: fill values */
			}
			loc->addr = base + addr;
			loc->size = size;
		}
	}
	return 0;
}

/* Maps a contiguous array when the chunk memory of cache_mb has room for
 * all of it and an eighth to spare (a chunk-less array leaves that memory
 * unused); the mapped pages then count against cache_mb. */
static void map_array(struct rfs_source *s, struct array *a)
{
	uint64_t len;
	if (!s->chunks || __builtin_mul_overflow(a->rows, a->row_bytes, &len) ||
	    len == 0 ||
	    rfs_rowmap_open(&a->map, s->fd, a->offset, len) != 0)
		return;
	if (rfs_chunks_reserve(s->chunks, a->map.map_len) != 0)
		rfs_rowmap_close(&a->map);
}

/* Whether the dataset's bytes are in the source file itself, not in a
 * file an external link leads to (whose offsets mean nothing in ours). */
static int in_source_file(const struct rfs_source *s, hid_t dset)
{
	H5O_info_t file, data;
	return H5Oget_info(s->file, &file) >= 0 &&
	       H5Oget_info(dset, &data) >= 0 && file.fileno == data.fileno;
}

/* Watches path (resolved) from now on, once per file.
 * @return 0, -errno of a failed stat, or -ENOMEM. */
static int add_linked(struct rfs_source *s, const char *path)
{
	struct linked_file l = { .path = realpath(path, NULL) };
	if (!l.path || stat(l.path, &l.opened) != 0) {
		int rc = -errno;
		free(l.path);
		return rc;
	}
	for (size_t i = 0; i < s->nlinked; i++) {
		if (s->linked[i].opened.st_dev == l.opened.st_dev &&
		    s->linked[i].opened.st_ino == l.opened.st_ino) {
			free(l.path);
			return 0;
		}
	}
	if (s->nlinked == s->linked_cap) {
		size_t cap = s->linked_cap ? 2 * s->linked_cap : 4;
		struct linked_file *more =
			realloc(s->linked, cap * sizeof(*more));
		if (!more) {
			free(l.path);
			return -ENOMEM;
		}
		s->linked = more;
		s->linked_cap = cap;
	}
	s->linked[s->nlinked++] = l;
	return 0;
}

/* Adds the file an external link led a's dataset to (if it did) to the
 * files watched for changes. */
static void watch_linked(struct rfs_source *s, const struct array *a)
{
	if (in_source_file(s, a->dset))
		return;
	char name[PATH_MAX] = "";
	hid_t file = H5Iget_file_id(a->dset);
	if (file >= 0) {
		H5Fget_name(file, name, sizeof(name));
		H5Fclose(file);
	}
	/* HDF5 opened it by this name, absolute or relative to the working
	 * directory of now: resolved before the daemon leaves it. */
	int rc = add_linked(s, name);
	if (rc != 0)
		rfs_log("source %s dataset %s: the file its external link "
			"leads to (%s) cannot be watched for changes: %s",
			s->path, a->name, name, strerror(-rc));
}

/* The length of the source's directory in its (absolute) path: what
 * HDF5's ${ORIGIN} stands for. */
static size_t source_dir_len(const struct rfs_source *s)
{
	return (size_t)(strrchr(s->path, '/') - s->path);
}

/* Whether dir/name (or name alone, with dir NULL) is an existing file;
 * its path in out. */
static int exists_at(const char *dir, size_t dir_len, const char *name,
		     char *out, size_t len)
{
	struct stat st;
	if (dir)
		snprintf(out, len, "%.*s/%s", (int)dir_len, dir, name);
	else
		snprintf(out, len, "%s", name);
	return stat(out, &st) == 0 && S_ISREG(st.st_mode);
}

/* Whether base is under one of the prefixes HDF5_VDS_PREFIX lists
 * (':' between them; a leading ${ORIGIN} is the directory dir_len bytes
 * of dir name, as HDF5 expands it: once, at the start of the whole
 * list). Its path in out. */
static int under_vds_prefix(const char *dir, size_t dir_len,
			    const char *base, char *out, size_t len)
{
	const char *env = getenv("HDF5_VDS_PREFIX");
	if (!env || !*env)
		return 0;
	const char *origin = "${ORIGIN}";
	int expand = strncmp(env, origin, strlen(origin)) == 0;
	char *list = NULL;
	if (asprintf(&list, "%.*s%s%s", expand ? (int)dir_len : 0, dir,
		     expand ? "/" : "", env + (expand ? strlen(origin) : 0)) <
	    0)
		return 0;
	int found = 0;
	for (char *p = list; !found && *p;) {
		size_t n = strcspn(p, ":");
		found = n > 0 && exists_at(p, n, base, out, len);
		p += n + (p[n] == ':');
	}
	free(list);
	return found;
}

/* Where HDF5 finds a virtual dataset's source file name: as given when
 * absolute, then (its last component when absolute) under the
 * HDF5_VDS_PREFIX entries, beside the source, and as given.
 * @return whether one exists, its path in out. */
static int find_vds_file(const struct rfs_source *s, const char *name,
			 char *out, size_t len)
{
	if (name[0] == '/' && exists_at(NULL, 0, name, out, len))
		return 1;
	const char *base = name[0] == '/' ? strrchr(name, '/') + 1 : name;
	const char *dir = s->path;
	size_t dir_len = source_dir_len(s);
	return under_vds_prefix(dir, dir_len, base, out, len) ||
	       exists_at(dir, dir_len, base, out, len) ||
	       exists_at(NULL, 0, base, out, len);
}

/* HDF5 opens a virtual dataset's source at the first read of its rows, by
 * a name it resolves then, possibly from the working directory, which the
 * daemon leaves for "/"; what it cannot open it serves as fill values.
 * One element of mapping i read now opens it where it was checked, and
 * HDF5 keeps it open. */
static void open_vds_source(hid_t dset, hid_t dcpl, size_t i)
{
	hid_t vspace = H5Pget_virtual_vspace(dcpl, i);
	hid_t space = H5Dget_space(dset);
	hid_t type = H5Dget_type(dset);
	hsize_t at[2 * H5S_MAX_RANK] = { 0 }, one[H5S_MAX_RANK];
	unsigned char value[64];
	int ndims = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
	H5S_sel_type sel = vspace >= 0 ? H5Sget_select_type(vspace)
					: H5S_SEL_ERROR;
	int first = sel == H5S_SEL_ALL ||
		    (sel == H5S_SEL_HYPERSLABS &&
		     H5Sget_select_hyper_blocklist(vspace, 0, 1, at) >= 0) ||
		    (sel == H5S_SEL_POINTS &&
		     H5Sget_select_elem_pointlist(vspace, 0, 1, at) >= 0);
	for (int d = 0; d < H5S_MAX_RANK; d++)
		one[d] = 1;
	if (first && ndims > 0 && type >= 0 &&
	    H5Tget_size(type) <= sizeof(value) &&
	    H5Sselect_hyperslab(space, H5S_SELECT_SET, at, NULL, one, NULL) >=
		    0) {
		hid_t mem = H5Screate_simple(1, one, NULL);
		if (mem >= 0) {
			H5Dread(dset, type, mem, space, H5P_DEFAULT, value);
			H5Sclose(mem);
		}
	}
	if (type >= 0)
		H5Tclose(type);
	if (space >= 0)
		H5Sclose(space);
	if (vspace >= 0)
		H5Sclose(vspace);
}

/* A virtual dataset reads its rows from other files, and HDF5 serves a
 * missing one's rows as fill values: each must exist at mount. Those of
 * the served rows are opened (open_vds_source) and watched for changes
 * from then on (watch); what is read whole at mount (indptr, columns)
 * need not be. Names with printf-style patterns (unlimited mappings) are
 * not checked. */
static int check_vds_files(struct rfs_source *s, hid_t dset, const char *what,
			   int watch, char *err, size_t errlen)
{
	size_t count = 0;
	int rc = 0;
	hid_t dcpl = H5Dget_create_plist(dset);
	if (dcpl < 0 || H5Pget_layout(dcpl) != H5D_VIRTUAL ||
	    H5Pget_virtual_count(dcpl, &count) < 0)
		count = 0;
	for (size_t i = 0; i < count && rc == 0; i++) {
		char name[PATH_MAX] = "", found[2 * PATH_MAX];
		if (H5Pget_virtual_filename(dcpl, i, name, sizeof(name)) < 0 ||
		    strcmp(name, ".") == 0 || strchr(name, '%'))
			continue;
		if (!find_vds_file(s, name, found, sizeof(found))) {
			snprintf(err, errlen,
				 "%s: dataset %s is a virtual dataset whose "
				 "source file %s does not exist where HDF5 "
				 "looks (HDF5 would serve its rows as fill "
				 "values)",
				 s->path, what, name);
			rc = -ENOENT;
		} else if (watch && (rc = add_linked(s, found)) != 0) {
			snprintf(err, errlen, "%s: %s", found, strerror(-rc));
		} else if (watch) {
			open_vds_source(dset, dcpl, i);
		}
	}
	if (dcpl >= 0)
		H5Pclose(dcpl);
	return rc;
}

/* Where HDF5 1.10 opens the external raw data file name of a dataset: as
 * named when absolute, else under HDF5_EXTFILE_PREFIX when that is set
 * (a leading ${ORIGIN} is the source's directory), else in the working
 * directory (H5Pset_efile_prefix's documentation says the file's
 * directory; the library's code does not). A relative prefix, "." too,
 * would name other files once the daemon has left the working directory
 * (the variable outranks the mount's access property): refused.
 * @return 0, -EINVAL (the prefix is relative) or -errno of getcwd. */
static int external_file_path(const struct rfs_source *s, const char *name,
			      char *out, size_t len)
{
	const char *env = getenv("HDF5_EXTFILE_PREFIX");
	const char *origin = "${ORIGIN}";
	char cwd[PATH_MAX];
	if (name[0] == '/') {
		snprintf(out, len, "%s", name);
	} else if (env && *env) {
		if (strncmp(env, origin, strlen(origin)) == 0)
			snprintf(out, len, "%.*s/%s/%s",
				 (int)source_dir_len(s),
				 s->path, env + strlen(origin), name);
		else if (env[0] == '/')
			snprintf(out, len, "%s%s%s", env,
				 ends_with(env, "/") ? "" : "/", name);
		else
			return -EINVAL;
	} else if (getcwd(cwd, sizeof(cwd))) {
		snprintf(out, len, "%s%s%s", cwd,
			 ends_with(cwd, "/") ? "" : "/", name);
	} else {
		return -errno;
	}
	return 0;
}

/* The bytes of dataset dset's raw data (at most UINT64_MAX). */
static uint64_t raw_bytes(hid_t dset)
{
	hid_t space = H5Dget_space(dset), type = H5Dget_type(dset);
	hssize_t n = space >= 0 ? H5Sget_simple_extent_npoints(space) : 0;
	size_t elem = type >= 0 ? H5Tget_size(type) : 0;
	uint64_t bytes;
	if (n <= 0 || __builtin_mul_overflow((uint64_t)n, elem, &bytes))
		bytes = n <= 0 ? 0 : UINT64_MAX;
	if (type >= 0)
		H5Tclose(type);
	if (space >= 0)
		H5Sclose(space);
	return bytes;
}

/* A dataset in external raw data files (H5Pset_external): HDF5 opens
 * them at every read and serves what a short one lacks as zeros. Each
 * must hold the bytes the dataset takes from it; those of the served rows
 * are watched for changes like the source (watch). */
static int check_external_files(struct rfs_source *s, hid_t dset,
				const char *what, int watch, char *err,
				size_t errlen)
{
	hid_t dcpl = H5Dget_create_plist(dset);
	int count = dcpl >= 0 ? H5Pget_external_count(dcpl) : 0;
	uint64_t left = count > 0 ? raw_bytes(dset) : 0;
	int rc = 0;
	for (int i = 0; i < count && left > 0 && rc == 0; i++) {
		char name[PATH_MAX] = "", path[2 * PATH_MAX] = "";
		off_t offset = 0;
		hsize_t size = 0;
		struct stat st;
		/* HDF5 1.10 copies with strncpy: room left for the NUL. */
		if (H5Pget_external(dcpl, (unsigned)i, sizeof(name) - 1, name,
				    &offset, &size) < 0) {
			snprintf(err, errlen, "%s: dataset %s: cannot read "
				 "its list of external files", s->path,
				 what);
			rc = -EINVAL;
			break;
		}
		uint64_t take = size < left ? size : left; /* or UNLIMITED */
		left -= take;
		rc = external_file_path(s, name, path, sizeof(path));
		int fd = rc == 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
		if (rc == -EINVAL) {
			snprintf(err, errlen,
				 "%s: dataset %s is stored in external file "
				 "%s, and HDF5_EXTFILE_PREFIX (%s) is a "
				 "relative directory: rankfs reads from / "
				 "once mounted; give an absolute one, or one "
				 "that starts with ${ORIGIN}",
				 s->path, what, name,
				 getenv("HDF5_EXTFILE_PREFIX"));
		} else if (rc != 0 || fd < 0 || fstat(fd, &st) != 0) {
			rc = rc ? rc : -errno;
			snprintf(err, errlen,
				 "%s: dataset %s is stored in external file "
				 "%s, which cannot be read at %s: %s",
				 s->path, what, name, path, strerror(-rc));
		} else if ((uint64_t)st.st_size < take ||
			   (uint64_t)st.st_size - take < (uint64_t)offset) {
			rc = -EINVAL;
			snprintf(err, errlen,
				 "%s: dataset %s reads %llu bytes at offset "
				 "%lld of its external file %s, which has "
				 "%lld (HDF5 would serve the rest as zeros)",
				 s->path, what, (unsigned long long)take,
				 (long long)offset, path,
				 (long long)st.st_size);
		} else if (watch && (rc = add_linked(s, path)) != 0) {
			snprintf(err, errlen, "%s: %s", path, strerror(-rc));
		}
		if (fd >= 0)
			close(fd);
	}
	if (dcpl >= 0)
		H5Pclose(dcpl);
	return rc;
}

/* Checks the files other than the source that dataset dset's raw data
 * is read from (check_vds_files, check_external_files). */
static int check_linked_storage(struct rfs_source *s, hid_t dset,
				const char *what, int watch, char *err,
				size_t errlen)
{
	int rc = check_vds_files(s, dset, what, watch, err, errlen);
	return rc ? rc : check_external_files(s, dset, what, watch, err,
					      errlen);
}

/* Picks how the array's bytes are read: pread, direct chunks or HDF5. */
static void choose_read_path(struct rfs_source *s, struct array *a,
			     const struct rfs_pipeline *pipe)
{
	hid_t dcpl = H5Dget_create_plist(a->dset);
	hid_t type = H5Dget_type(a->dset);
	/* Bytes as stored are bytes as served, at offsets into our file. */
	int direct = type >= 0 && H5Tequal(type, a->mem_type) > 0 &&
		     in_source_file(s, a->dset);
	H5D_layout_t layout = dcpl >= 0 ? H5Pget_layout(dcpl) : H5D_COMPACT;
	a->path = READ_HDF5;
	if (direct && layout == H5D_CONTIGUOUS && pipe->count == 0) {
		haddr_t offset = H5Dget_offset(a->dset);
		/* Else never written, or in external files. */
		if (offset != HADDR_UNDEF) {
			a->offset = offset;
			a->path = READ_PREAD;
			map_array(s, a);
		}
	} else if (direct && layout == H5D_CHUNKED && s->chunks &&
		   pipe->count <= RFS_FILTERS_MAX &&
		   rfs_inflate_supported(pipe)) {
		struct rfs_chunked c = { .fd = s->fd,
					 .path = s->path,
					 .name = a->name,
					 .rows = a->rows,
					 .cols = a->cols,
					 .elem = a->elem,
					 .pipeline = *pipe };
		if (locate_chunks(a, dcpl, chunk_address_base(s->file), &c) ==
			    0 &&
		    rfs_chunks_register(s->chunks, &c, &a->chunks_id) == 0)
			a->path = READ_CHUNKS;
	}
	if (type >= 0)
		H5Tclose(type);
	if (dcpl >= 0)
		H5Pclose(dcpl);
}

/* Opens dataset name as an array of 1 or 2 dimensions of a served dtype.
 * want_ndims 1 asks for a 1-D dataset (a CSR part). */
static int open_array(struct rfs_source *s, const char *name, int want_ndims,
		      struct array *a, char *err, size_t errlen)
{
	struct rfs_pipeline pipe = { 0 };
	int rc = -EINVAL;
	a->name = strdup(name);
	a->dset = H5Dopen2(s->file, name, s->dapl);
	if (!a->name || a->dset < 0) {
		snprintf(err, errlen, "%s: cannot open dataset %s", s->path,
			 name);
		return a->name ? -EINVAL : -ENOMEM;
	}
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
	rc = read_filters(s, a, &pipe, err, errlen);
	if (rc == 0) {
		choose_read_path(s, a, &pipe);
		watch_linked(s, a);
		rc = check_linked_storage(s, a->dset, a->name, 1, err,
					  errlen);
	}
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
	if (a->mem_type >= 0)
		H5Tclose(a->mem_type);
	if (a->dset >= 0)
		H5Dclose(a->dset);
	free(a->name);
}

/* Logs a copy of rows [first, first + count) that hit the end of the
 * file. @return -EIO. */
static int copy_failed(struct rfs_source *s, struct array *a,
		       uint64_t first, uint64_t count)
{
	rfs_log("source %s dataset %s: read of rows [%llu, %llu) failed: "
		"file ends before the data (SIGBUS in the mapping)",
		s->path, a->name, (unsigned long long)first,
		(unsigned long long)(first + count));
	return -EIO;
}

/* len bytes at byte off of a's mapping to dst, for rows [first, first +
 * count) (named when it fails). */
static int copy_mapped(struct rfs_source *s, struct array *a, uint64_t off,
		       size_t len, void *dst, uint64_t first, uint64_t count)
{
	if (rfs_rowmap_copy(&a->map, off, len, dst) == 0)
		return 0;
	return copy_failed(s, a, first, count);
}

/* Rows rows[k] of a's mapping to to[k], k < m. */
static int gather_mapped(struct rfs_source *s, struct array *a,
			 const uint64_t *rows, size_t m,
			 unsigned char *const *to)
{
	size_t failed;
	if (rfs_rowmap_gather(&a->map, rows, a->row_bytes, m, a->row_bytes,
			      to, &failed) == 0)
		return 0;
	return copy_failed(s, a, rows[failed], 1);
}

static int pread_run(struct rfs_source *s, struct array *a, uint64_t first,
		     uint64_t count, void *dst)
{
	if (rfs_rowmap_resident(&a->map))
		return copy_mapped(s, a, first * a->row_bytes,
				   count * a->row_bytes, dst, first, count);
	size_t want = count * a->row_bytes, got = 0;
	off_t at = (off_t)(a->offset + first * a->row_bytes);
	while (got < want) {
		ssize_t n = pread(s->fd, (char *)dst + got, want - got,
				  at + (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rfs_log("source %s dataset %s: read of rows [%llu, "
				"%llu) failed: %s",
				s->path, a->name, (unsigned long long)first,
				(unsigned long long)(first + count),
				n < 0 ? strerror(errno) :
					"file ends before the data");
			return -EIO;
		}
		got += (size_t)n;
	}
	return 0;
}

static int hdf5_run(struct rfs_source *s, struct array *a, uint64_t first,
		    uint64_t count, void *dst);

/* Rows [first, first + count) of an array read through HDF5, row i to
 * to[i] (the other paths scatter rows themselves: read_sorted). */
static int hdf5_rows_to(struct rfs_source *s, struct array *a, uint64_t first,
			uint64_t count, unsigned char *const *to)
{
	unsigned char *staging = malloc(count * a->row_bytes);
	int rc = staging ? hdf5_run(s, a, first, count, staging) : -ENOMEM;
	for (uint64_t i = 0; i < count && rc == 0; i++)
		memcpy(to[i], staging + i * a->row_bytes, a->row_bytes);
	free(staging);
	return rc;
}

/* Rows [first, first + count) of a into dst, by the array's read path. */
static int read_run(struct rfs_source *s, struct array *a, uint64_t first,
		    uint64_t count, void *dst)
{
	if (a->path == READ_PREAD)
		return pread_run(s, a, first, count, dst);
	if (a->path == READ_CHUNKS)
		return rfs_chunks_read(s->chunks, a->chunks_id, first, count,
					dst);
	return hdf5_run(s, a, first, count, dst);
}

/* Through HDF5, under its lock: one hyperslab. */
static int hdf5_run(struct rfs_source *s, struct array *a, uint64_t first,
		    uint64_t count, void *dst)
{
	hsize_t start[2] = { first, 0 };
	hsize_t extent[2] = { count, a->cols };
	int rc = -EIO;
	hid_t file_space = H5Dget_space(a->dset);
	hid_t mem_space = H5Screate_simple(a->ndims, extent, NULL);
	if (file_space >= 0 && mem_space >= 0 &&
	    H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, NULL,
				extent, NULL) >= 0 &&
	    H5Dread(a->dset, a->mem_type, mem_space, file_space, H5P_DEFAULT,
		    dst) >= 0)
		rc = 0;
	if (mem_space >= 0)
		H5Sclose(mem_space);
	if (file_space >= 0)
		H5Sclose(file_space);
	if (rc != 0)
		rfs_log("source %s dataset %s: read of rows [%llu, %llu) "
			"failed",
			s->path, a->name, (unsigned long long)first,
			(unsigned long long)(first + count));
	return rc;
}

static const char *path_name(const struct array *a)
{
	return a->map.map		? "mmap" :
	       a->path == READ_PREAD	? "pread" :
	       a->path == READ_CHUNKS ? "chunks" :
					"hdf5";
}

/* Reads a 2-element "shape" attribute (anndata's sparse groups). */
static int read_shape(hid_t group, uint64_t shape[2])
{
	if (H5Aexists(group, "shape") <= 0)
		return -1;
	hid_t attr = H5Aopen(group, "shape", H5P_DEFAULT);
	hid_t space = attr >= 0 ? H5Aget_space(attr) : -1;
	int64_t v[2];
	int rc = -1;
	if (space >= 0 && H5Sget_simple_extent_npoints(space) == 2 &&
	    H5Aread(attr, H5T_NATIVE_INT64, v) >= 0 && v[0] >= 0 && v[1] > 0) {
		shape[0] = (uint64_t)v[0];
		shape[1] = (uint64_t)v[1];
		rc = 0;
	}
	if (space >= 0)
		H5Sclose(space);
	if (attr >= 0)
		H5Aclose(attr);
	return rc;
}

/* anndata's csr_matrix: data, indices, indptr and a shape attribute. */
static int open_csr(struct rfs_source *s, hid_t group, char *err,
		    size_t errlen)
{
	char name[600];
	uint64_t shape[2];
	int rc;
	if (read_shape(group, shape) != 0) {
		snprintf(err, errlen, "%s: %s is csr_matrix without a valid "
				      "shape attribute",
			 s->path, s->dataset);
		return -EINVAL;
	}
	snprintf(name, sizeof(name), "%s/data", s->dataset);
	rc = open_array(s, name, 1, &s->x, err, errlen);
	snprintf(name, sizeof(name), "%s/indices", s->dataset);
	if (rc == 0)
		rc = open_array(s, name, 1, &s->indices, err, errlen);
	if (rc == 0 && (s->indices.dtype >= RFS_FLOAT16 ||
			s->indices.rows != s->x.rows)) {
		snprintf(err, errlen,
			 "%s: %s/indices must be integers, one per value",
			 s->path, s->dataset);
		rc = -EINVAL;
	}
	if (rc != 0)
		return rc;
	snprintf(name, sizeof(name), "%s/indptr", s->dataset);
	hid_t dset = H5Dopen2(s->file, name, H5P_DEFAULT);
	if (dset >= 0 &&
	    (rc = check_linked_storage(s, dset, name, 0, err, errlen)) != 0) {
		H5Dclose(dset);
		return rc;
	}
	hid_t space = dset >= 0 ? H5Dget_space(dset) : -1;
	rc = -EINVAL;
	if (space >= 0 && H5Sget_simple_extent_ndims(space) == 1 &&
	    (uint64_t)H5Sget_simple_extent_npoints(space) == shape[0] + 1) {
		s->indptr = malloc((shape[0] + 1) * sizeof(*s->indptr));
		rc = s->indptr ? 0 : -ENOMEM;
		if (rc == 0 && H5Dread(dset, H5T_NATIVE_INT64, H5S_ALL,
				       H5S_ALL, H5P_DEFAULT, s->indptr) < 0)
			rc = -EIO;
	}
	for (uint64_t r = 0; r < shape[0] && rc == 0; r++) {
		if (s->indptr[r] < 0 || s->indptr[r] > s->indptr[r + 1])
			rc = -EINVAL;
		else if ((uint64_t)(s->indptr[r + 1] - s->indptr[r]) >
			 s->info.max_row_nnz)
			s->info.max_row_nnz =
				(uint64_t)(s->indptr[r + 1] - s->indptr[r]);
	}
	if (rc == 0 && (uint64_t)s->indptr[shape[0]] > s->x.rows)
		rc = -EINVAL;
	if (space >= 0)
		H5Sclose(space);
	if (dset >= 0)
		H5Dclose(dset);
	if (rc != 0) {
		snprintf(err, errlen,
			 "%s: %s has no valid indptr (%llu + 1 non-decreasing "
			 "offsets into data)",
			 s->path, name, (unsigned long long)shape[0]);
		return rc == -ENOMEM ? rc : -EINVAL;
	}
	s->info.sparse = 1;
	s->info.rows = shape[0];
	s->info.cols = shape[1];
	s->info.ndims = 2;
	s->info.nnz = (uint64_t)s->indptr[shape[0]];
	s->info.index_dtype = s->indices.dtype;
	return 0;
}

static int open_group(struct rfs_source *s, char *err, size_t errlen)
{
	char kind[64] = "";
	int rc = -ENOTSUP;
	hid_t group = H5Gopen2(s->file, s->dataset, H5P_DEFAULT);
	if (group >= 0)
		read_string_attr(group, "encoding-type", kind, sizeof(kind));
	if (strcmp(kind, "csr_matrix") == 0)
		rc = open_csr(s, group, err, errlen);
	else if (strcmp(kind, "csc_matrix") == 0)
		snprintf(err, errlen,
			 "%s: %s is a csc_matrix: its rows are scattered over "
			 "every column; rewrite it as CSR (adata.X = "
			 "adata.X.tocsr())",
			 s->path, s->dataset);
	else
		snprintf(err, errlen, "%s: %s is a group, not a dataset",
			 s->path, s->dataset);
	if (group >= 0)
		H5Gclose(group);
	return rc;
}

static int open_rows(struct rfs_source *s, char *err, size_t errlen)
{
	H5O_info_t info;
	int rc;
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
		rc = open_group(s, err, errlen);
	else if (info.type != H5O_TYPE_DATASET) {
		snprintf(err, errlen, "%s: %s is not a dataset", s->path,
			 s->dataset);
		return -EINVAL;
	} else {
		rc = open_array(s, s->dataset, 2, &s->x, err, errlen);
		s->info.rows = s->x.rows;
		s->info.cols = s->x.cols;
		s->info.ndims = s->x.ndims;
	}
	if (rc != 0)
		return rc;
	s->info.dtype = s->x.dtype;
	s->info.layout = s->x.layout;
	s->info.read_path = path_name(&s->x);
	s->info.direct = s->x.path != READ_HDF5;
	if (s->info.rows == 0) {
		snprintf(err, errlen, "%s: dataset %s has no rows", s->path,
			 s->dataset);
		return -EINVAL;
	}
	if (s->info.cols == 0) {
		snprintf(err, errlen, "%s: dataset %s has rows of 0 columns",
			 s->path, s->dataset);
		return -EINVAL;
	}
	/* A row must fit a batch file (1 GiB) in any served dtype (8 bytes
	 * at most), which also keeps every size product within 64 bits. */
	if (s->info.cols > (UINT64_C(1) << 30) / 8) {
		snprintf(err, errlen,
			 "%s: dataset %s has %llu columns: a row of over "
			 "1 GiB cannot be served",
			 s->path, s->dataset, (unsigned long long)s->info.cols);
		return -EINVAL;
	}
	return 0;
}

/* The fingerprint covers shape, dtype and the first and last rows: enough
 * to tell different data apart cheaply, at mount time only. */
static int fingerprint(struct rfs_source *s, char *err, size_t errlen)
{
	XXH3_state_t *st = XXH3_createState();
	size_t row_bytes = s->info.cols * rfs_dtype_size(s->info.dtype);
	unsigned char *row = malloc(row_bytes);
	int rc = -ENOMEM;
	if (!st || !row)
		goto out;
	uint64_t head[5] = { s->info.rows, s->info.cols,
			     (uint64_t)s->info.ndims, s->info.dtype,
			     s->info.nnz };
	XXH3_64bits_reset(st);
	XXH3_64bits_update(st, head, sizeof(head));
	XXH3_64bits_update(st, s->dataset, strlen(s->dataset));
	const int64_t ends[2] = { 0, (int64_t)s->info.rows - 1 };
	for (int i = 0; i < 2; i++) {
		if (s->info.sparse) {
			struct rfs_csr csr;
			rc = rfs_source_read_csr(s, &ends[i], 1, NULL, &csr);
			if (rc == 0) {
				XXH3_64bits_update(st, csr.values,
						   csr.start[1] * s->x.elem);
				XXH3_64bits_update(st, csr.cols,
						   csr.start[1] * 8);
				rfs_source_csr_free(&csr);
			}
		} else {
			rc = read_run(s, &s->x, (uint64_t)ends[i], 1, row);
			XXH3_64bits_update(st, row, row_bytes);
		}
		if (rc != 0) {
			snprintf(err, errlen,
				 "%s: dataset %s: cannot read row %lld",
				 s->path, s->dataset, (long long)ends[i]);
			goto out;
		}
	}
	s->info.fingerprint = XXH3_64bits_digest(st);
out:
	free(row);
	XXH3_freeState(st);
	return rc;
}

/* Which var table names the columns of dataset, if any. */
static const char *var_table(const char *dataset)
{
	if (strcmp(dataset, "/X") == 0 || strncmp(dataset, "/layers/", 8) == 0)
		return "/var";
	if (strcmp(dataset, "/raw/X") == 0)
		return "/raw/var";
	return NULL;
}

static int read_strings(hid_t dset, uint64_t n, char ***out);
static int64_t length_1d(hid_t dset);

/* XXH3 of the var names (each followed by a NUL), so files whose columns
 * are different genes are told apart even when D agrees. */
static void fingerprint_var(struct rfs_source *s)
{
	const char *table = s->anndata ? var_table(s->dataset) : NULL;
	char index[128] = "_index";
	hid_t group = table ? H5Gopen2(s->file, table, H5P_DEFAULT) : -1;
	if (group < 0)
		return;
	read_string_attr(group, "_index", index, sizeof(index));
	hid_t names = H5Dopen2(group, index, H5P_DEFAULT);
	int64_t n = names >= 0 ? length_1d(names) : -1;
	char **strings = NULL;
	if (n >= 0 && read_strings(names, (uint64_t)n, &strings) == 0) {
		XXH3_state_t *st = XXH3_createState();
		if (st) {
			XXH3_64bits_reset(st);
			for (int64_t i = 0; i < n; i++)
				XXH3_64bits_update(st, strings[i],
						   strlen(strings[i]) + 1);
			s->info.var_fingerprint = XXH3_64bits_digest(st);
			s->info.has_var = 1;
			XXH3_freeState(st);
		}
		for (int64_t i = 0; i < n; i++)
			free(strings[i]);
		free(strings);
	}
	if (names >= 0)
		H5Dclose(names);
	H5Gclose(group);
}

int rfs_source_open(const char *path, const char *dataset,
		    struct rfs_chunk_cache *chunks, struct rfs_source **out,
		    char *err, size_t errlen)
{
	struct rfs_source *s = calloc(1, sizeof(*s));
	int rc = -ENOMEM;
	struct stat st;

	if (!s) {
		snprintf(err, errlen, "%s: out of memory", path);
		return rc;
	}
	s->file = s->dapl = H5I_INVALID_HID;
	s->x.dset = s->x.mem_type = H5I_INVALID_HID;
	s->indices.dset = s->indices.mem_type = H5I_INVALID_HID;
	s->fd = -1;
	s->chunks = chunks;
	quiet_hdf5();
	hbool_t threadsafe = 0;
	if (H5is_library_threadsafe(&threadsafe) < 0 || !threadsafe) {
		/* Reads run on many threads at once. */
		snprintf(err, errlen, "%s: the HDF5 library is not built "
				      "thread-safe (rankfs needs it)", path);
		rc = -ENOTSUP;
		goto fail;
	}

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
	s->opened = st;
	s->info.mtime = st.st_mtime;
	s->fd = open(s->path, O_RDONLY | O_CLOEXEC);
	if (s->fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		goto fail;
	}
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
	/* HDF5 names external raw data files when it reads them, from the
	 * working directory of then: the daemon's is "/". */
	char cwd[PATH_MAX];
	s->dapl = H5Pcreate(H5P_DATASET_ACCESS);
	if (s->dapl < 0 || (getcwd(cwd, sizeof(cwd)) &&
			    H5Pset_efile_prefix(s->dapl, cwd) < 0)) {
		rc = -ENOMEM;
		snprintf(err, errlen, "%s: %s", path, strerror(-rc));
		goto fail;
	}
	s->anndata = is_anndata(s->file, s->path);
	if (!dataset && !s->anndata) {
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
	if (!s->dataset) {
		snprintf(err, errlen, "%s: out of memory", path);
		goto fail;
	}
	s->info.path = s->path;
	s->info.dataset = s->dataset;
	rc = open_rows(s, err, errlen);
	if (rc != 0)
		goto fail;
	rc = fingerprint(s, err, errlen);
	if (rc != 0)
		goto fail;
	fingerprint_var(s);
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
	return s->info.cols * rfs_dtype_size(s->info.dtype);
}

/* @return 1 when path is the file was describes (identity, size and
 * mtime), 0 when it changed (now describes it), -1 when it is gone. */
static int same_file(const char *path, const struct stat *was,
		     struct stat *now)
{
	if (stat(path, now) != 0)
		return -1;
	return now->st_dev == was->st_dev && now->st_ino == was->st_ino &&
	       now->st_size == was->st_size &&
	       now->st_mtim.tv_sec == was->st_mtim.tv_sec &&
	       now->st_mtim.tv_nsec == was->st_mtim.tv_nsec;
}

/*
 * HDF5 reads a truncated file's missing bytes as zeros, and a file replaced
 * or rewritten under the mount would mix old and new rows. Either way a
 * batch could hold wrong bytes, so once the file's identity, size or mtime
 * differs from what was opened (the source's, or that of a linked file the
 * served rows come from), every new read fails with EIO (batches already
 * generated stay served). One stat per file per fetch is cheap next to it.
 */
static int check_unchanged(struct rfs_source *s)
{
	struct stat now;
	const char *path = s->path;
	const struct stat *was = &s->opened;
	int same = same_file(path, was, &now);
	for (size_t i = 0; same == 1 && i < s->nlinked; i++) {
		path = s->linked[i].path;
		was = &s->linked[i].opened;
		same = same_file(path, was, &now);
	}
	if (same == 1)
		return 0;
	int gone_why = errno; /* of a failed stat; snprintf may change it */
	if (atomic_exchange(&s->change_logged, 1) == 0) {
		char what[2 * PATH_MAX + 32];
		if (path == s->path)
			snprintf(what, sizeof(what), "source %s", path);
		else
			snprintf(what, sizeof(what),
				 "%s (linked from source %s)", path, s->path);
		if (same < 0)
			rfs_log("%s: %s; new batches fail with EIO", what,
				strerror(gone_why));
		else
			rfs_log("%s changed under the mount (inode %llu -> "
				"%llu, size %lld -> %lld, mtime %lld -> %lld); "
				"new batches fail with EIO",
				what, (unsigned long long)was->st_ino,
				(unsigned long long)now.st_ino,
				(long long)was->st_size,
				(long long)now.st_size,
				(long long)was->st_mtim.tv_sec,
				(long long)now.st_mtim.tv_sec);
	}
	return -EIO;
}

/* Runs: sorted rows where each is the same as or next to the one
 * before. @return the end of the run starting at w[i]. */
static size_t run_end(const struct rfs_wanted *w, size_t i, size_t n)
{
	size_t j = i + 1;
	while (j < n && w[j].row - w[j - 1].row <= 1)
		j++;
	return j;
}

static int unchanged_or_log(struct rfs_source *s, const struct rfs_wanted *w,
			    size_t n)
{
	int rc = check_unchanged(s);
	if (rc != 0 && n > 0)
		rfs_log("source %s dataset %s: rows %llu..%llu (%zu rows) "
			"not read: the file changed",
			s->path, s->dataset, (unsigned long long)w[0].row,
			(unsigned long long)w[n - 1].row, n);
	return rc;
}

/* Distinct sorted rows of a, row i to to[i]: a chunked array in one
 * pass over the chunks (rows of one chunk share its lookups), the others
 * run by run of consecutive rows. */
static int fetch_sorted(struct rfs_source *s, struct array *a,
			const uint64_t *rows, size_t m,
			unsigned char *const *to);

static int read_sorted(struct rfs_source *s, struct array *a,
		       const uint64_t *rows, size_t m, unsigned char *const *to)
{
	if (a->path == READ_CHUNKS)
		return rfs_chunks_read_rows(s->chunks, a->chunks_id, rows, m,
					     to);
	if (a->path == READ_PREAD)
		return fetch_sorted(s, a, rows, m, to);
	int rc = 0;
	for (size_t i = 0, j; i < m && rc == 0; i = j) {
		for (j = i + 1; j < m && rows[j] == rows[j - 1] + 1; j++)
			;
		rc = hdf5_rows_to(s, a, rows[i], j - i, to + i);
	}
	return rc;
}

/* A contiguous array's rows: copied from its mapping while the bytes are
 * in the page cache; else every run of consecutive rows one read,
 * submitted together (fetch.c). */
static int fetch_sorted(struct rfs_source *s, struct array *a,
			const uint64_t *rows, size_t m, unsigned char *const *to)
{
	if (rfs_rowmap_resident(&a->map))
		return gather_mapped(s, a, rows, m, to);
	struct iovec *iov = malloc((m ? m : 1) * sizeof(*iov));
	struct rfs_fetch_run *runs = malloc((m ? m : 1) * sizeof(*runs));
	size_t nruns = 0, failed = 0;
	int rc = -ENOMEM;
	if (!iov || !runs)
		goto out;
	for (size_t i = 0, j; i < m; i = j) {
		for (j = i + 1; j < m && rows[j] == rows[j - 1] + 1 &&
				j - i < IOV_MAX;
		     j++)
			;
		for (size_t k = i; k < j; k++)
			iov[k] = (struct iovec){ to[k], a->row_bytes };
		runs[nruns++] = (struct rfs_fetch_run){
			.off = a->offset + rows[i] * a->row_bytes,
			.len = (j - i) * a->row_bytes,
			.iov = iov + i,
			.iovcnt = (int)(j - i) };
	}
	rc = rfs_fetch(s->fd, runs, nruns, &failed);
	if (rc != 0) {
		uint64_t first = (runs[failed].off - a->offset) / a->row_bytes;
		rfs_log("source %s dataset %s: read of rows [%llu, %llu) "
			"failed: %s",
			s->path, a->name, (unsigned long long)first,
			(unsigned long long)(first + (uint64_t)runs[failed].iovcnt),
			rc == -ENODATA ? "file ends before the data" :
					 strerror(-rc));
		rc = -EIO;
	}
out:
	free(iov);
	free(runs);
	return rc;
}

int rfs_source_read_rows(struct rfs_source *s, const int64_t *rows, size_t n,
			 void *dst)
{
	size_t row_bytes = s->x.row_bytes;
	int rc = -ENOMEM;
	struct rfs_wanted *w = rfs_rowsort(rows, n);
	uint64_t *distinct = malloc((n ? n : 1) * sizeof(*distinct));
	unsigned char **to = malloc((n ? n : 1) * sizeof(*to));
	unsigned char *out = dst;

	quiet_hdf5();
	if (!w || !distinct || !to)
		goto out;
	rc = unchanged_or_log(s, w, n);
	if (rc != 0)
		goto out;
	/* Each distinct row is read straight into its first slot; repeats
	 * are copied from there. */
	size_t m = 0;
	for (size_t k = 0; k < n; k++) {
		if (k && w[k].row == w[k - 1].row)
			continue;
		distinct[m] = w[k].row;
		to[m++] = out + w[k].slot * row_bytes;
	}
	rc = read_sorted(s, &s->x, distinct, m, to);
	for (size_t k = 1; k < n && rc == 0; k++)
		if (w[k].row == w[k - 1].row)
			memcpy(out + w[k].slot * row_bytes,
			       out + w[k - 1].slot * row_bytes, row_bytes);
out:
	free(to);
	free(distinct);
	free(w);
	return rc;
}

int rfs_source_mapped_rows(struct rfs_source *s, const unsigned char **rows)
{
	struct array *a = &s->x;
	if (s->info.sparse || !a->map.map || !rfs_rowmap_resident(&a->map))
		return -EAGAIN;
	int rc = check_unchanged(s);
	if (rc == 0)
		*rows = a->map.base;
	return rc;
}

size_t rfs_source_read_scratch(const struct rfs_source *s, uint64_t n,
			       uint64_t nnz)
{
	const struct array *a = &s->x;
	if (s->info.sparse) /* the arrays of rfs_source_read_csr() */
		return (n + 1) * sizeof(uint64_t) +
		       n * sizeof(struct rfs_wanted) +
		       nnz * (2 * a->elem + s->indices.elem +
			      2 * sizeof(int64_t));
	/* rfs_source_read_rows(), fetch_sorted() and hdf5_rows_to() */
	size_t per_row = sizeof(struct rfs_wanted) + sizeof(uint64_t) +
			 sizeof(unsigned char *) + sizeof(struct iovec) +
			 sizeof(struct rfs_fetch_run);
	return n * (per_row + (a->path == READ_HDF5 ? a->row_bytes : 0));
}

uint64_t rfs_source_row_nnz(const struct rfs_source *s, uint64_t row)
{
	return (uint64_t)(s->indptr[row + 1] - s->indptr[row]);
}

void rfs_source_csr_free(struct rfs_csr *c)
{
	free(c->start);
	if (!c->values_borrowed)
		free(c->values);
	free(c->cols);
	*c = (struct rfs_csr){ 0 };
}

/* The values and column ids of rows [first, last] (one run) into out at
 * their slots; column ids are checked against the width. */
static int read_csr_run(struct rfs_source *s, const struct rfs_wanted *w,
			size_t i, size_t j, struct rfs_csr *out,
			unsigned char *values, unsigned char *raw_cols,
			int64_t *cols)
{
	uint64_t a = (uint64_t)s->indptr[w[i].row];
	uint64_t b = (uint64_t)s->indptr[w[j - 1].row + 1];
	size_t elem = s->x.elem;
	int rc = 0;
	if (b > a) {
		rc = read_run(s, &s->x, a, b - a, values);
		if (rc == 0)
			rc = read_run(s, &s->indices, a, b - a, raw_cols);
	}
	if (rc != 0)
		return rc;
	rfs_convert(RFS_INT64, cols, s->indices.dtype, raw_cols, b - a);
	for (uint64_t k = 0; k < b - a; k++) {
		if (cols[k] < 0 || (uint64_t)cols[k] >= s->info.cols) {
			rfs_log("source %s dataset %s: column index %lld of "
				"value %llu is outside 0..%llu",
				s->path, s->dataset, (long long)cols[k],
				(unsigned long long)(a + k),
				(unsigned long long)(s->info.cols - 1));
			return -EIO;
		}
	}
	for (size_t k = i; k < j; k++) {
		uint64_t from = (uint64_t)s->indptr[w[k].row] - a;
		uint64_t len = rfs_source_row_nnz(s, w[k].row);
		uint64_t to = out->start[w[k].slot];
		memcpy((unsigned char *)out->values + to * elem,
		       values + from * elem, len * elem);
		memcpy(out->cols + to, cols + from, len * sizeof(int64_t));
	}
	return 0;
}

int rfs_source_read_csr(struct rfs_source *s, const int64_t *rows, size_t n,
			void *dst, struct rfs_csr *out)
{
	int rc = -ENOMEM;
	size_t elem = s->x.elem;
	struct rfs_wanted *w = rfs_rowsort(rows, n);
	unsigned char *values = NULL, *raw_cols = NULL;
	int64_t *cols = NULL;

	quiet_hdf5();
	*out = (struct rfs_csr){ .rows = n };
	out->start = calloc(n + 1, sizeof(*out->start));
	if (!w || !out->start)
		goto out;
	for (size_t i = 0; i < n; i++)
		out->start[i + 1] =
			out->start[i] + rfs_source_row_nnz(s, (uint64_t)rows[i]);
	uint64_t total = out->start[n];
	/* A run's distinct values are at most the batch's. */
	out->values = dst ? dst : malloc(total * elem + 1);
	out->values_borrowed = dst != NULL;
	out->cols = malloc(total * sizeof(int64_t) + 1);
	values = malloc(total * elem + 1);
	raw_cols = malloc(total * s->indices.elem + 1);
	cols = malloc(total * sizeof(int64_t) + 1);
	if (!out->values || !out->cols || !values || !raw_cols || !cols)
		goto out;
	rc = unchanged_or_log(s, w, n);
	for (size_t i = 0, j; i < n && rc == 0; i = j) {
		j = run_end(w, i, n);
		rc = read_csr_run(s, w, i, j, out, values, raw_cols, cols);
	}
out:
	if (rc != 0)
		rfs_source_csr_free(out);
	free(w);
	free(values);
	free(raw_cols);
	free(cols);
	return rc;
}

/*
 * Columns. An obs column of an AnnData file is one of: a group with
 * encoding-type "categorical" (codes + categories, anndata >= 0.8); a
 * dataset of codes whose "categories" attribute references the category
 * names (anndata 0.7); a numeric, bool (HDF5 enum) or string dataset.
 * A "/path" names any 1-D dataset of the file. Columns are read whole, at
 * mount time only.
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

/* Reads a 1-D string dataset (variable or fixed length) into n heap
 * strings. */
static int read_strings(hid_t dset, uint64_t n, char ***out)
{
	hid_t ftype = H5Dget_type(dset);
	char **strings = calloc(n ? n : 1, sizeof(*strings));
	int rc = -ENOMEM;
	if (ftype < 0 || !strings)
		goto out;
	rc = -EIO;
	if (H5Tis_variable_str(ftype) > 0) {
		hid_t mem = H5Tcopy(H5T_C_S1);
		char **raw = calloc(n ? n : 1, sizeof(*raw));
		if (mem >= 0 && raw && H5Tset_size(mem, H5T_VARIABLE) >= 0 &&
		    H5Tset_cset(mem, H5Tget_cset(ftype)) >= 0 &&
		    H5Dread(dset, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw) >=
			    0) {
			rc = 0;
			for (uint64_t i = 0; i < n && rc == 0; i++)
				if (!(strings[i] = strdup(raw[i] ? raw[i] :
								   "")))
					rc = -ENOMEM;
			hid_t space = H5Dget_space(dset);
			H5Dvlen_reclaim(mem, space, H5P_DEFAULT, raw);
			H5Sclose(space);
		}
		free(raw);
		if (mem >= 0)
			H5Tclose(mem);
	} else {
		size_t size = H5Tget_size(ftype);
		char *raw = n < (SIZE_MAX - 1) / (size ? size : 1) ?
				    malloc(n * size + 1) : NULL;
		if (raw && H5Dread(dset, ftype, H5S_ALL, H5S_ALL, H5P_DEFAULT,
				   raw) >= 0) {
			rc = 0;
			for (uint64_t i = 0; i < n && rc == 0; i++)
				if (!(strings[i] = strndup(raw + i * size,
							   size)))
					rc = -ENOMEM;
		}
		free(raw);
	}
out:
	if (ftype >= 0)
		H5Tclose(ftype);
	if (rc != 0 && strings) {
		for (uint64_t i = 0; i < n; i++)
			free(strings[i]);
		free(strings);
		strings = NULL;
	}
	*out = strings;
	return rc;
}

/* The shortest decimal text that reads back as v. */
static void real_text(double v, char *out, size_t n)
{
	for (int digits = 1; digits <= 17; digits++) {
		snprintf(out, n, "%.*g", digits, v);
		if (strtod(out, NULL) == v)
			return;
	}
}

static int read_enum(hid_t dset, uint64_t n, struct rfs_column *out);

/* Names of an enum dataset's values (pandas' bool categories are h5py
 * bool enums): each value's member name. */
static int enum_names(hid_t dset, uint64_t n, char **names)
{
	struct rfs_column e = { 0 };
	int rc = read_enum(dset, n, &e);
	for (uint64_t i = 0; i < n && rc == 0; i++)
		if (!(names[i] = strdup(e.codes[i] >= 0 ?
						e.categories[e.codes[i]] :
						"?")))
			rc = -ENOMEM;
	rfs_column_free(&e);
	return rc;
}

/* Category names of a categorical column: strings, bools (enums), or
 * numbers as text. *out and *count are set only on success. */
static int read_categories(hid_t dset, char ***out, uint64_t *count)
{
	int64_t n = length_1d(dset);
	hid_t type = H5Dget_type(dset);
	H5T_class_t cls = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
	int rc = -EINVAL;
	if (type >= 0)
		H5Tclose(type);
	if (n < 0)
		return rc;
	if (cls == H5T_STRING) {
		rc = read_strings(dset, (uint64_t)n, out);
		if (rc == 0)
			*count = (uint64_t)n;
		return rc;
	}
	if (cls != H5T_INTEGER && cls != H5T_FLOAT && cls != H5T_ENUM)
		return rc;
	char **names = calloc(n ? (size_t)n : 1, sizeof(*names));
	double *v = calloc(n ? (size_t)n : 1, sizeof(*v));
	int64_t *k = calloc(n ? (size_t)n : 1, sizeof(*k));
	rc = -ENOMEM;
	if (names && v && k && cls == H5T_ENUM)
		rc = enum_names(dset, (uint64_t)n, names);
	else if (names && v && k)
		rc = read_numbers(dset, cls == H5T_INTEGER ? H5T_NATIVE_INT64 :
							     H5T_NATIVE_DOUBLE,
				  cls == H5T_INTEGER ? (void *)k : (void *)v);
	for (int64_t i = 0; i < n && rc == 0 && cls != H5T_ENUM; i++) {
		char text[40];
		if (cls == H5T_INTEGER)
			snprintf(text, sizeof(text), "%lld", (long long)k[i]);
		else
			real_text(v[i], text, sizeof(text));
		if (!(names[i] = strdup(text)))
			rc = -ENOMEM;
	}
	if (rc != 0 && names) {
		for (int64_t i = 0; i < n; i++)
			free(names[i]);
		free(names);
		names = NULL;
	}
	free(v);
	free(k);
	if (rc == 0) {
		*out = names;
		*count = (uint64_t)n;
	}
	return rc;
}

/* An HDF5 enum (h5py's bool is one): its members become the categories,
 * in order of value. */
static int read_enum(hid_t dset, uint64_t n, struct rfs_column *out)
{
	hid_t ftype = H5Dget_type(dset);
	hid_t mem = ftype >= 0 ? H5Tget_native_type(ftype, H5T_DIR_ASCEND) :
				 -1;
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

static int categorical(hid_t codes, hid_t cats, uint64_t n,
		       struct rfs_column *out)
{
	int rc = read_codes(codes, n, out);
	if (rc == 0)
		rc = read_categories(cats, &out->categories,
				     &out->ncategories);
	for (uint64_t i = 0; i < n && rc == 0; i++)
		if (out->codes[i] >= (int64_t)out->ncategories ||
		    out->codes[i] < -1)
			rc = -EINVAL;
	return rc;
}

static int read_column_dataset(hid_t dset, uint64_t n, struct rfs_column *out)
{
	hid_t type = H5Dget_type(dset);
	H5T_class_t cls = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
	size_t size = type >= 0 ? H5Tget_size(type) : 8;
	hid_t cats = -1;
	int rc = -ENOTSUP;
	if (type >= 0)
		H5Tclose(type);
	if (cls == H5T_INTEGER && (cats = referenced_categories(dset)) >= 0) {
		rc = categorical(dset, cats, n, out);
		H5Dclose(cats);
		return rc;
	}
	switch (cls) {
	case H5T_INTEGER:
		out->kind = RFS_COLUMN_INT;
		out->rows = n;
		out->codes = calloc(n ? n : 1, sizeof(int64_t));
		return out->codes ? read_numbers(dset, H5T_NATIVE_INT64,
						 out->codes) :
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
		rc = read_strings(dset, n, &strings);
		return rc ? rc : rfs_column_from_strings(out, strings, n);
	}
	default:
		return -ENOTSUP;
	}
}

int rfs_source_read_column(struct rfs_source *s, const char *name,
			   struct rfs_column *out, char *err, size_t errlen)
{
	char path[512], what[300], kind[64] = "", filter[64];
	H5O_info_t info;
	hid_t obj = -1, codes = -1, cats = -1;
	int rc = -EINVAL;

	*out = (struct rfs_column){ 0 };
	quiet_hdf5();
	column_name(name, what, sizeof(what));
	if (name[0] != '/' && !s->anndata) {
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
		obj = H5Gopen2(s->file, path, H5P_DEFAULT);
		read_string_attr(obj, "encoding-type", kind, sizeof(kind));
		if (strcmp(kind, "categorical") != 0) {
			snprintf(err, errlen,
				 "%s: %s is a group with encoding '%s', not a "
				 "column rankfs reads (categorical, numeric, "
				 "bool, string)",
				 s->path, what, kind[0] ? kind : "none");
			rc = -ENOTSUP;
			goto out;
		}
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
	/* Read at mount: one served as fill values would go unnoticed. */
	int vds = 0;
	for (int k = 0; k < 2 && vds == 0; k++) {
		hid_t dset = k == 0 ? codes : cats;
		char dset_name[sizeof(path) + 16] = "";
		if (dset >= 0)
			vds = check_linked_storage(
				s, dset,
				H5Iget_name(dset, dset_name,
					    sizeof(dset_name)) > 0 ?
					dset_name :
					what,
				0, err, errlen);
	}
	if (vds != 0) {
		rc = vds;
		goto out;
	}
	int64_t n = codes >= 0 ? length_1d(codes) : -1;
	if (n != (int64_t)s->info.rows) {
		snprintf(err, errlen,
			 "%s: %s has %lld rows, the data %llu (a column needs "
			 "one value per row, 1-D)",
			 s->path, what, (long long)n,
			 (unsigned long long)s->info.rows);
		goto out;
	}
	rc = cats >= 0 ? categorical(codes, cats, (uint64_t)n, out) :
			 read_column_dataset(codes, (uint64_t)n, out);
	if (rc == -ENOTSUP)
		snprintf(err, errlen,
			 "%s: %s has a type rankfs cannot read as a column "
			 "(categorical, integer, float, bool or string)",
			 s->path, what);
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
		describe_datasets(s->file, found, sizeof(found));
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

void rfs_source_destroy(struct rfs_source *s)
{
	if (!s)
		return;
	close_array(&s->x);
	close_array(&s->indices);
	free(s->indptr);
	if (s->file >= 0)
		H5Fclose(s->file);
	if (s->dapl >= 0)
		H5Pclose(s->dapl);
	if (s->fd >= 0)
		close(s->fd);
	for (size_t i = 0; i < s->nlinked; i++)
		free(s->linked[i].path);
	free(s->linked);
	free(s->dataset);
	free(s->path);
	free(s);
}
