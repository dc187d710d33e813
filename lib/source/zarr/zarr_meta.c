/* SPDX-License-Identifier: MIT */
/*
 * A zarr store's metadata, parsed with jansson. v2 keeps a node's
 * metadata in .zarray or .zgroup and its attributes in .zattrs; v3 keeps
 * both in zarr.json. Either may be consolidated (v2: .zmetadata; v3: the
 * root zarr.json's consolidated_metadata), and then that is read instead
 * of the files, as zarr-python does. What rankfs cannot decode (a codec,
 * a filter, F order, a data type) is refused here, naming it.
 */
#include "source/zarr/zarr.h"

#include "core/convert.h"
#include "source/io/beneath.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int exists(const char *dir, const char *name)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

int rfs_zarr_is_store(const char *dir)
{
	return exists(dir, ".zgroup") || exists(dir, ".zarray") ||
	       exists(dir, ".zmetadata") || exists(dir, "zarr.json");
}

/* A JSON file of st as an object, with jansson's flags. *absent: 1 when
 * there is no such file; -1 when it holds a number out of jansson's range
 * (an integer over 2^63 - 1 is valid JSON, and Python's json reads it,
 * but a json_int_t cannot hold it), an error as any other but for
 * .zmetadata; else 0. The file is read whole first: json_loadfd reads a
 * byte per read(2), 800,000 calls for a 200 KB .zattrs. */
static json_t *load(const struct rfs_zarr_store *st, const char *path,
		    size_t flags, int *absent, char *err, size_t errlen)
{
	json_error_t e;
	struct stat sb;
	json_t *j = NULL;
	char *text = NULL;
	size_t got = 0;
	*absent = 0;
	int fd = st->root_fd < 0 ?
			 -ENOENT :
			 rfs_open_beneath(st->root_fd, st->root, path);
	if (fd < 0) {
		*absent = fd == -ENOENT || fd == -ENOTDIR;
		if (!*absent)
			snprintf(err, errlen, "%s: %s", path,
				 rfs_beneath_strerror(-fd));
		return NULL;
	}
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", path);
		goto out;
	}
	if (sb.st_size > RFS_ZARR_META_MAX) {
		snprintf(err, errlen,
			 "%s: %lld bytes of metadata, more than rankfs reads "
			 "(%d MiB)",
			 path, (long long)sb.st_size, RFS_ZARR_META_MAX >> 20);
		goto out;
	}
	/* One byte more than its size: a file that grew is seen. */
	text = malloc((size_t)sb.st_size + 1);
	for (ssize_t n = 1; text && n > 0 && got <= (size_t)sb.st_size;
	     got += (size_t)n)
		n = pread(fd, text + got, (size_t)sb.st_size + 1 - got,
			  (off_t)got);
	if (!text || got != (size_t)sb.st_size) {
		snprintf(err, errlen, "%s: %s", path,
			 !text ? strerror(ENOMEM) : "changed while read");
		goto out;
	}
	j = json_loadb(text, got, flags, &e);
	if (!j && json_error_code(&e) == json_error_numeric_overflow) {
		*absent = -1;
		snprintf(err, errlen,
			 "%s: a number beyond 64-bit integers and doubles "
			 "(line %d: %s), which rankfs cannot read",
			 path, e.line, e.text);
	} else if (!j)
		snprintf(err, errlen, "%s: not valid JSON (line %d: %s)", path,
			 e.line, e.text);
	else if (!json_is_object(j)) {
		snprintf(err, errlen, "%s: not a JSON object", path);
		json_decref(j);
		j = NULL;
	}
out:
	free(text);
	close(fd);
	return j;
}

/* The root zarr.json of a v3 group read again with its integers as
 * doubles, its consolidated copy left out; NULL if it is not a group. For
 * a copy holding an integer over 2^63 - 1: a group's own metadata holds
 * no integer rankfs reads. */
static json_t *group_without_copy(const struct rfs_zarr_store *st,
				  const char *path)
{
	char err[8];
	int absent;
	json_t *j = load(st, path, JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL,
			 &absent, err, sizeof(err));
	const char *type = json_string_value(json_object_get(j, "node_type"));
	if (!type || strcmp(type, "group") != 0) {
		json_decref(j);
		return NULL;
	}
	json_object_del(j, "consolidated_metadata");
	return j;
}

int rfs_zarr_store_open(const char *dir, struct rfs_zarr_store *st, char *err,
			size_t errlen)
{
	char path[4096];
	int absent;
	*st = (struct rfs_zarr_store){ 0 };
	st->root = strdup(dir);
	if (!st->root)
		return -ENOMEM;
	size_t n = strlen(st->root);
	while (n > 1 && st->root[n - 1] == '/')
		st->root[--n] = '\0';
	/* Every file of the store is opened beneath it (beneath.h); no
	 * directory there holds no metadata. */
	st->root_fd = open(st->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	snprintf(path, sizeof(path), "%s/zarr.json", st->root);
	json_t *root = load(st, path, JSON_DECODE_ANY, &absent, err, errlen);
	/* As for .zmetadata below: such a number in the consolidated copy
	 * (a uint64 fill_value, say) passes the copy over for the nodes' own
	 * files. */
	if (!root && absent == -1 && (root = group_without_copy(st, path)))
		err[0] = '\0';
	if (!root && absent != 1) {
		rfs_zarr_store_close(st);
		return -EINVAL;
	}
	if (root) {
		st->v3 = 1;
		st->root_meta = root;
		json_t *c = json_object_get(root, "consolidated_metadata");
		json_t *m = json_is_object(c) ? json_object_get(c, "metadata") :
						NULL;
		if (json_is_object(m)) {
			st->consolidated = json_incref(m);
			st->meta_file = strdup(path);
		}
		return 0;
	}
	snprintf(path, sizeof(path), "%s/.zmetadata", st->root);
	json_t *zm = load(st, path, JSON_DECODE_ANY, &absent, err, errlen);
	/* Such a number (a uint64 fill_value of an array rankfs may not
	 * even serve) in the consolidated copy: the nodes' own files, as
	 * without one. */
	if (!zm && absent == -1) {
		err[0] = '\0';
		return 0;
	}
	if (!zm && absent != 1) {
		rfs_zarr_store_close(st);
		return -EINVAL;
	}
	if (zm) {
		json_t *m = json_object_get(zm, "metadata");
		if (!json_is_object(m)) {
			snprintf(err, errlen, "%s: no \"metadata\" object",
				 path);
			json_decref(zm);
			rfs_zarr_store_close(st);
			return -EINVAL;
		}
		st->consolidated = json_incref(m);
		st->meta_file = strdup(path);
		json_decref(zm);
	}
	return 0;
}

void rfs_zarr_store_close(struct rfs_zarr_store *st)
{
	json_decref(st->consolidated);
	json_decref(st->root_meta);
	free(st->meta_file);
	if (st->root && st->root_fd >= 0)
		close(st->root_fd);
	free(st->root);
	*st = (struct rfs_zarr_store){ 0 };
}

/* "path/name", or "name" at the root. */
static void key(const char *path, const char *name, char *out, size_t n)
{
	snprintf(out, n, "%s%s%s", path, path[0] ? "/" : "", name);
}

static int node_v2(const struct rfs_zarr_store *st, const char *path,
		   json_t **meta, json_t **attrs, char **file, char *err,
		   size_t errlen)
{
	char k[2048], full[4096];
	int kind = 0, absent;
	static const char *const names[2] = { ".zarray", ".zgroup" };
	for (int i = 0; i < 2 && !kind; i++) {
		key(path, names[i], k, sizeof(k));
		json_t *j = NULL;
		snprintf(full, sizeof(full), "%s/%s", st->root, k);
		if (st->consolidated) {
			j = json_incref(json_object_get(st->consolidated, k));
		} else {
			j = load(st, full, JSON_DECODE_ANY, &absent, err,
				 errlen);
			if (!j && absent != 1)
				return -EINVAL;
		}
		if (j) {
			*meta = j;
			kind = i + 1;
			*file = strdup(st->consolidated ? st->meta_file : full);
			if (!*file)
				return -ENOMEM;
		}
	}
	if (!kind)
		return 0;
	key(path, ".zattrs", k, sizeof(k));
	snprintf(full, sizeof(full), "%s/%s", st->root, k);
	if (st->consolidated) {
		*attrs = json_incref(json_object_get(st->consolidated, k));
	} else {
		*attrs = load(st, full, JSON_DECODE_ANY, &absent, err, errlen);
		if (!*attrs && absent != 1)
			return -EINVAL;
	}
	return kind;
}

static int node_v3(const struct rfs_zarr_store *st, const char *path,
		   json_t **meta, json_t **attrs, char **file, char *err,
		   size_t errlen)
{
	char full[4096];
	int absent;
	json_t *j = NULL;
	snprintf(full, sizeof(full), "%s%s%s/zarr.json", st->root,
		 path[0] ? "/" : "", path);
	if (!path[0])
		j = json_incref(st->root_meta);
	else if (st->consolidated)
		j = json_incref(json_object_get(st->consolidated, path));
	else if (!(j = load(st, full, JSON_DECODE_ANY, &absent, err, errlen)) &&
		 absent != 1)
		return -EINVAL;
	if (!j)
		return 0;
	*meta = j;
	*file = strdup(st->consolidated && path[0] ? st->meta_file : full);
	if (!*file)
		return -ENOMEM;
	*attrs = json_incref(json_object_get(j, "attributes"));
	const char *type = json_string_value(json_object_get(j, "node_type"));
	if (type && strcmp(type, "array") == 0)
		return 1;
	if (type && strcmp(type, "group") == 0)
		return 2;
	snprintf(err, errlen, "%s: node_type is not \"array\" or \"group\"",
		 full);
	return -EINVAL;
}

/* 1 when a segment of path is "." or "..": zarr-python refuses such
 * paths, and a store's attributes (one naming another array) must not
 * lead rankfs to arrays outside it. */
static int leaves_store(const char *path)
{
	for (const char *p = path; *p;) {
		size_t n = strcspn(p, "/");
		if ((n == 1 && p[0] == '.') ||
		    (n == 2 && p[0] == '.' && p[1] == '.'))
			return 1;
		p += n + (p[n] == '/');
	}
	return 0;
}

int rfs_zarr_node(const struct rfs_zarr_store *st, const char *path,
		  json_t **meta, json_t **attrs, char **file, char *err,
		  size_t errlen)
{
	json_t *m = NULL, *a = NULL;
	char *f = NULL;
	int rc = -EINVAL;
	if (leaves_store(path))
		snprintf(err, errlen,
			 "%s: node path '%s' has a '.' or '..' segment",
			 st->root, path);
	else
		rc = st->v3 ? node_v3(st, path, &m, &a, &f, err, errlen) :
			      node_v2(st, path, &m, &a, &f, err, errlen);
	if (rc <= 0 || !meta)
		json_decref(m);
	if (rc <= 0 || !file)
		free(f);
	if (rc <= 0)
		json_decref(a);
	if (meta)
		*meta = rc > 0 ? m : NULL;
	if (file)
		*file = rc > 0 ? f : NULL;
	*attrs = rc > 0 ? a : NULL;
	return rc;
}

const char *rfs_zarr_attr_string(json_t *attrs, const char *k)
{
	return json_string_value(json_object_get(attrs, k));
}

/* Sizes of 1 or 2 dimensions from a JSON array of integers. */
static int dims(json_t *a, uint64_t out[2], int *nd)
{
	if (!json_is_array(a) || json_array_size(a) < 1 ||
	    json_array_size(a) > 2)
		return -1;
	out[1] = 1;
	*nd = (int)json_array_size(a);
	for (int i = 0; i < *nd; i++) {
		json_t *v = json_array_get(a, (size_t)i);
		if (!json_is_integer(v) || json_integer_value(v) < 0)
			return -1;
		out[i] = (uint64_t)json_integer_value(v);
	}
	return 0;
}

static const struct {
	const char *v3, *v2; /* v2 without its byte order */
	enum rfs_dtype dt;
	enum rfs_zarr_kind kind;
} types[] = {
	{ "int8", "i1", RFS_INT8, RFS_ZARR_NUMBER },
	{ "int16", "i2", RFS_INT16, RFS_ZARR_NUMBER },
	{ "int32", "i4", RFS_INT32, RFS_ZARR_NUMBER },
	{ "int64", "i8", RFS_INT64, RFS_ZARR_NUMBER },
	{ "uint8", "u1", RFS_UINT8, RFS_ZARR_NUMBER },
	{ "uint16", "u2", RFS_UINT16, RFS_ZARR_NUMBER },
	{ "uint32", "u4", RFS_UINT32, RFS_ZARR_NUMBER },
	{ "uint64", "u8", RFS_UINT64, RFS_ZARR_NUMBER },
	{ "float16", "f2", RFS_FLOAT16, RFS_ZARR_NUMBER },
	{ "float32", "f4", RFS_FLOAT32, RFS_ZARR_NUMBER },
	{ "float64", "f8", RFS_FLOAT64, RFS_ZARR_NUMBER },
	{ "bool", "b1", RFS_UINT8, RFS_ZARR_BOOL },
	{ "string", "O", RFS_UINT8, RFS_ZARR_STRING },
};

/* The array's dtype (v2) or data_type (v3), name (NULL: none). */
static int data_type(const char *name, int v3, struct rfs_zarr_meta *m,
		     const char *what, char *err, size_t errlen)
{
	/* v2's begins with its byte order. */
	int order = !v3 && name && name[0] && strchr("<>|", name[0]);
	const char *t = v3 ? name : order ? name + 1 : NULL;
	m->pipe.big_endian = order && name[0] == '>';
	for (size_t i = 0; t && i < sizeof(types) / sizeof(types[0]); i++) {
		if (strcmp(t, v3 ? types[i].v3 : types[i].v2) != 0)
			continue;
		m->dtype = types[i].dt;
		m->kind = types[i].kind;
		m->elem = m->kind == RFS_ZARR_STRING ? 0 :
						       rfs_dtype_size(m->dtype);
		return 0;
	}
	snprintf(err, errlen,
		 "%s: %s '%s' is not supported (ints, uints, floats, bool, %s)",
		 what, v3 ? "data_type" : "dtype", name ? name : "?",
		 v3 ? "string" : "vlen-utf8 strings");
	return -ENOTSUP;
}

/* fill_value as one little-endian element: numbers, NaN and infinities
 * by name, bools; null (and strings' fill) as zeros. */
static int fill_value(json_t *v, struct rfs_zarr_meta *m)
{
	double d = 0;
	int64_t i = 0;
	int is_int = 0;
	memset(m->fill, 0, sizeof(m->fill));
	if (!v || json_is_null(v) || m->kind == RFS_ZARR_STRING)
		return 0;
	if (json_is_boolean(v)) {
		i = json_is_true(v);
		is_int = 1;
	} else if (json_is_integer(v)) {
		i = json_integer_value(v);
		is_int = 1;
	} else if (json_is_real(v)) {
		d = json_real_value(v);
	} else if (json_is_string(v)) {
		const char *s = json_string_value(v);
		if (strcmp(s, "NaN") == 0)
			d = NAN;
		else if (strcmp(s, "Infinity") == 0)
			d = INFINITY;
		else if (strcmp(s, "-Infinity") == 0)
			d = -INFINITY;
		else
			return -1;
	} else {
		return -1;
	}
	if (is_int)
		d = (double)i;
	switch (m->dtype) {
	case RFS_FLOAT64:
		memcpy(m->fill, &d, 8);
		return 0;
	case RFS_FLOAT32: {
		float f = (float)d;
		memcpy(m->fill, &f, 4);
		return 0;
	}
	case RFS_FLOAT16:
		rfs_convert(RFS_FLOAT16, m->fill, RFS_FLOAT64, &d, 1);
		return 0;
	default:
		/* A real for an integer type: zarr-python refuses what the
		 * type cannot hold, and casting it is undefined. */
		if (!is_int &&
		    !(d > -9223372036854775808.0 && d < 9223372036854775808.0))
			return -1;
		if (!is_int)
			i = (int64_t)d;
		memcpy(m->fill, &i, m->elem); /* little-endian host */
		return 0;
	}
}

static int v2_compressor(json_t *c, struct rfs_zarr_meta *m, const char *what,
			 char *err, size_t errlen)
{
	const char *id = json_string_value(json_object_get(c, "id"));
	static const struct {
		const char *id;
		enum rfs_zarr_comp comp;
	} known[] = { { "blosc", RFS_ZARR_BLOSC },
		      { "zstd", RFS_ZARR_ZSTD },
		      { "gzip", RFS_ZARR_GZIP },
		      { "zlib", RFS_ZARR_ZLIB } };
	for (size_t i = 0; id && i < 4; i++)
		if (strcmp(id, known[i].id) == 0) {
			m->pipe.comp[m->pipe.ncomp++] = known[i].comp;
			return 0;
		}
	snprintf(err, errlen,
		 "%s: compressor '%s' is not supported (blosc, zstd, gzip, "
		 "zlib)",
		 what, id ? id : "?");
	return -ENOTSUP;
}

static int parse_v2(json_t *j, const char *what, struct rfs_zarr_meta *m,
		    char *err, size_t errlen)
{
	const char *order = json_string_value(json_object_get(j, "order"));
	const char *dt = json_string_value(json_object_get(j, "dtype"));
	const char *sep =
		json_string_value(json_object_get(j, "dimension_separator"));
	json_t *filters = json_object_get(j, "filters");
	json_t *comp = json_object_get(j, "compressor");
	if (order && strcmp(order, "C") != 0) {
		snprintf(err, errlen,
			 "%s: order '%s' is not supported (C order only)", what,
			 order);
		return -ENOTSUP;
	}
	int rc = data_type(dt, 0, m, what, err, errlen);
	if (rc != 0)
		return rc;
	m->sep = sep && strcmp(sep, "/") == 0 ? '/' : '.';
	if (comp && !json_is_null(comp)) {
		rc = v2_compressor(comp, m, what, err, errlen);
		if (rc != 0)
			return rc;
	}
	size_t nf = json_is_array(filters) ? json_array_size(filters) : 0;
	for (size_t i = 0; i < nf; i++) {
		const char *id = json_string_value(
			json_object_get(json_array_get(filters, i), "id"));
		if (id && strcmp(id, "vlen-utf8") == 0 &&
		    m->kind == RFS_ZARR_STRING && nf == 1)
			m->pipe.strings = 1;
		else {
			snprintf(err, errlen,
				 "%s: filter '%s' is not supported (only "
				 "vlen-utf8 on strings)",
				 what, id ? id : "?");
			return -ENOTSUP;
		}
	}
	if (m->kind == RFS_ZARR_STRING && !m->pipe.strings) {
		snprintf(err, errlen,
			 "%s: object dtype without the vlen-utf8 filter is "
			 "not supported",
			 what);
		return -ENOTSUP;
	}
	return 0;
}

/* A v3 codec list: [array->array]* array->bytes [bytes->bytes]*. Only
 * bytes, vlen-utf8 and (outermost) sharding_indexed as array->bytes; no
 * array->array codec (transpose) at all. */
static int v3_codecs(json_t *codecs, int outer, struct rfs_zarr_meta *m,
		     struct rfs_zarr_pipe *p, const char *what, char *err,
		     size_t errlen);

static int v3_sharding(json_t *conf, struct rfs_zarr_meta *m, const char *what,
		       char *err, size_t errlen)
{
	uint64_t inner[2];
	int nd;
	if (dims(json_object_get(conf, "chunk_shape"), inner, &nd) != 0 ||
	    nd != m->ndims || inner[0] == 0 || inner[1] == 0 ||
	    m->chunk[0] % inner[0] != 0 || m->chunk[1] % inner[1] != 0) {
		snprintf(err, errlen,
			 "%s: sharding_indexed chunk_shape must divide the "
			 "shard shape",
			 what);
		return -EINVAL;
	}
	m->inner[0] = inner[0];
	m->inner[1] = inner[1];
	m->sharded = 1;
	const char *loc =
		json_string_value(json_object_get(conf, "index_location"));
	m->index_at_start = loc && strcmp(loc, "start") == 0;
	json_t *ic = json_object_get(conf, "index_codecs");
	size_t n = json_is_array(ic) ? json_array_size(ic) : 0;
	for (size_t i = 0; i < n; i++) {
		json_t *c = json_array_get(ic, i);
		const char *name =
			json_string_value(json_object_get(c, "name"));
		const char *endian = json_string_value(json_object_get(
			json_object_get(c, "configuration"), "endian"));
		if (name && strcmp(name, "bytes") == 0 && i == 0 &&
		    (!endian || strcmp(endian, "little") == 0))
			continue;
		if (name && strcmp(name, "crc32c") == 0 && i == 1 && n == 2) {
			m->index_crc = 1;
			continue;
		}
		snprintf(err, errlen,
			 "%s: shard index codec '%s' is not supported "
			 "(bytes little-endian, then crc32c)",
			 what, name ? name : "?");
		return -ENOTSUP;
	}
	return v3_codecs(json_object_get(conf, "codecs"), 0, m, &m->pipe, what,
			 err, errlen);
}

static int v3_codecs(json_t *codecs, int outer, struct rfs_zarr_meta *m,
		     struct rfs_zarr_pipe *p, const char *what, char *err,
		     size_t errlen)
{
	size_t n = json_is_array(codecs) ? json_array_size(codecs) : 0;
	int seen_a2b = 0;
	for (size_t i = 0; i < n; i++) {
		json_t *c = json_array_get(codecs, i);
		json_t *conf = json_object_get(c, "configuration");
		const char *name =
			json_string_value(json_object_get(c, "name"));
		const char *endian =
			json_string_value(json_object_get(conf, "endian"));
		if (!name)
			name = "?";
		if (!seen_a2b && strcmp(name, "bytes") == 0 &&
		    m->kind != RFS_ZARR_STRING) {
			p->big_endian = endian && strcmp(endian, "big") == 0;
			seen_a2b = 1;
		} else if (!seen_a2b && strcmp(name, "vlen-utf8") == 0 &&
			   m->kind == RFS_ZARR_STRING) {
			p->strings = 1;
			seen_a2b = 1;
		} else if (!seen_a2b && outer && n == 1 &&
			   strcmp(name, "sharding_indexed") == 0) {
			int rc = v3_sharding(conf, m, what, err, errlen);
			if (rc != 0)
				return rc;
			seen_a2b = 1;
		} else if (seen_a2b && p->ncomp < RFS_ZARR_COMPS_MAX &&
			   (strcmp(name, "blosc") == 0 ||
			    strcmp(name, "zstd") == 0 ||
			    strcmp(name, "gzip") == 0 ||
			    strcmp(name, "crc32c") == 0)) {
			p->comp[p->ncomp++] = name[0] == 'b' ? RFS_ZARR_BLOSC :
					      name[0] == 'z' ? RFS_ZARR_ZSTD :
					      name[0] == 'g' ? RFS_ZARR_GZIP :
							       RFS_ZARR_CRC32C;
		} else {
			snprintf(err, errlen,
				 "%s: codec '%s' is not supported here "
				 "(bytes, vlen-utf8, blosc, zstd, gzip, "
				 "crc32c, sharding_indexed)",
				 what, name);
			return -ENOTSUP;
		}
	}
	if (!seen_a2b) {
		snprintf(err, errlen,
			 "%s: codecs lack an array-to-bytes codec (bytes, "
			 "vlen-utf8 or sharding_indexed)",
			 what);
		return -EINVAL;
	}
	return 0;
}

/* An extension the v3 spec lets a reader pass over: an object whose
 * must_understand is false. */
static int optional_extension(json_t *v)
{
	return json_is_object(v) &&
	       json_is_false(json_object_get(v, "must_understand"));
}

/* A key of a v3 array's metadata that rankfs does not know and may not
 * pass over (any but an optional extension, or zarrs' `extensions`
 * list of them), or NULL. */
static const char *not_understood(json_t *j)
{
	static const char *const known[] = {
		"zarr_format",	  "node_type",
		"shape",	  "data_type",
		"chunk_grid",	  "chunk_key_encoding",
		"fill_value",	  "codecs",
		"attributes",	  "storage_transformers",
		"dimension_names"
	};
	const char *k;
	json_t *v;
	json_object_foreach(j, k, v)
	{
		size_t i = 0, n = sizeof(known) / sizeof(*known);
		while (i < n && strcmp(k, known[i]) != 0)
			i++;
		size_t item;
		json_t *e;
		int optional = optional_extension(v);
		if (strcmp(k, "extensions") == 0 && json_is_array(v)) {
			optional = 1;
			json_array_foreach(v, item, e)
				optional &= optional_extension(e);
		}
		if (i == n && !optional)
			return k;
	}
	return NULL;
}

static int parse_v3(json_t *j, const char *what, struct rfs_zarr_meta *m,
		    char *err, size_t errlen)
{
	const char *unknown = not_understood(j);
	if (unknown) {
		snprintf(err, errlen,
			 "%s: metadata key '%s' is not supported (an extension "
			 "whose must_understand is not false)",
			 what, unknown);
		return -ENOTSUP;
	}
	const char *dt = json_string_value(json_object_get(j, "data_type"));
	json_t *grid = json_object_get(j, "chunk_grid");
	json_t *enc = json_object_get(j, "chunk_key_encoding");
	const char *gname = json_string_value(json_object_get(grid, "name"));
	const char *ename = json_string_value(json_object_get(enc, "name"));
	const char *sep = json_string_value(json_object_get(
		json_object_get(enc, "configuration"), "separator"));
	int nd;
	int rc = data_type(dt, 1, m, what, err, errlen);
	if (rc != 0)
		return rc;
	if (!gname || strcmp(gname, "regular") != 0 ||
	    dims(json_object_get(json_object_get(grid, "configuration"),
				 "chunk_shape"),
		 m->chunk, &nd) != 0 ||
	    nd != m->ndims) {
		snprintf(err, errlen,
			 "%s: chunk_grid must be regular with a chunk_shape of "
			 "the array's dimensions",
			 what);
		return -ENOTSUP;
	}
	if (ename && strcmp(ename, "v2") == 0) {
		m->sep = sep && strcmp(sep, "/") == 0 ? '/' : '.';
	} else if (!ename || strcmp(ename, "default") == 0) {
		m->sep = sep && strcmp(sep, ".") == 0 ? '.' : '/';
		m->prefix_c = 1;
	} else {
		snprintf(err, errlen,
			 "%s: chunk_key_encoding '%s' is not supported", what,
			 ename);
		return -ENOTSUP;
	}
	json_t *tr = json_object_get(j, "storage_transformers");
	if (json_is_array(tr) && json_array_size(tr) > 0) {
		const char *name = json_string_value(
			json_object_get(json_array_get(tr, 0), "name"));
		snprintf(err, errlen,
			 "%s: storage transformer '%s' is not supported", what,
			 name ? name : "?");
		return -ENOTSUP;
	}
	m->inner[0] = m->chunk[0];
	m->inner[1] = m->chunk[1];
	return v3_codecs(json_object_get(j, "codecs"), 1, m, &m->pipe, what,
			 err, errlen);
}

int rfs_zarr_meta_parse(json_t *j, int v3, const char *what,
			struct rfs_zarr_meta *m, char *err, size_t errlen)
{
	*m = (struct rfs_zarr_meta){ 0 };
	if (dims(json_object_get(j, "shape"), m->shape, &m->ndims) != 0) {
		snprintf(err, errlen,
			 "%s: shape must have 1 or 2 dimensions (rankfs "
			 "serves N or N x D arrays)",
			 what);
		return -EINVAL;
	}
	if (!v3) {
		int nd;
		if (dims(json_object_get(j, "chunks"), m->chunk, &nd) != 0 ||
		    nd != m->ndims) {
			snprintf(err, errlen,
				 "%s: chunks must match the shape's "
				 "dimensions",
				 what);
			return -EINVAL;
		}
		m->inner[0] = m->chunk[0];
		m->inner[1] = m->chunk[1];
	}
	int rc = v3 ? parse_v3(j, what, m, err, errlen) :
		      parse_v2(j, what, m, err, errlen);
	if (rc == 0 && fill_value(json_object_get(j, "fill_value"), m) != 0) {
		snprintf(err, errlen, "%s: fill_value is not supported", what);
		rc = -ENOTSUP;
	}
	if (rc == 0 && (m->chunk[0] == 0 || m->chunk[1] == 0)) {
		snprintf(err, errlen, "%s: a chunk dimension is 0", what);
		rc = -EINVAL;
	}
	/* A decoded chunk must fit memory and a size_t several times. */
	uint64_t elems;
	if (rc == 0 &&
	    (__builtin_mul_overflow(m->inner[0], m->inner[1], &elems) ||
	     elems > (UINT64_C(1) << 31) / (m->elem ? m->elem : 8))) {
		snprintf(err, errlen, "%s: chunks of over 2 GiB", what);
		rc = -ENOTSUP;
	}
	return rc;
}
