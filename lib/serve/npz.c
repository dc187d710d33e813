/* SPDX-License-Identifier: MIT */
/*
 * A zip of stored members, the simplest valid archive: for each member a
 * local header (30 bytes + name) and its bytes, then a central directory
 * entry (46 bytes + name) per member and the end record (22 bytes). No
 * zip64: a batch is capped at 3.5 GiB (batch.c). Times are fixed
 * (1980-01-01) so the same batch always has the same bytes.
 */
#include "serve/npz.h"

#include <string.h>
#include <zlib.h>

#include "core/convert.h"
#include "serve/npy.h"

#define LOCAL_HEADER 30
#define CENTRAL_HEADER 46
#define END_RECORD 22
#define MEMBERS 5
#define DOS_DATE_1980 0x0021 /* 1980-01-01 */

enum { INDICES, INDPTR, FORMAT, SHAPE, DATA };
static const char *const names[MEMBERS] = { "indices.npy", "indptr.npy",
					    "format.npy", "shape.npy",
					    "data.npy" };

enum rfs_dtype rfs_npz_index_dtype(uint64_t cols, uint64_t nnz)
{
	return cols <= INT32_MAX && nnz <= INT32_MAX ? RFS_INT32 : RFS_INT64;
}

/* The .npy header of a member (written to header) and its payload size. */
static size_t member_header(const struct rfs_npz_csr *m, int k, char *header,
			    uint64_t *payload)
{
	uint64_t shape[1];
	size_t is = rfs_dtype_size(m->index_dtype);
	switch (k) {
	case INDICES:
		shape[0] = m->nnz;
		*payload = m->nnz * is;
		return rfs_npy_header(m->index_dtype, 1, shape, header);
	case INDPTR:
		shape[0] = m->rows + 1;
		*payload = (m->rows + 1) * is;
		return rfs_npy_header(m->index_dtype, 1, shape, header);
	case FORMAT:
		*payload = 3;
		return rfs_npy_header_descr("|S3", 0, shape, header);
	case SHAPE:
		shape[0] = 2;
		*payload = 16;
		return rfs_npy_header(RFS_INT64, 1, shape, header);
	default:
		shape[0] = m->nnz;
		*payload = m->nnz * rfs_dtype_size(m->value_dtype);
		return rfs_npy_header(m->value_dtype, 1, shape, header);
	}
}

uint64_t rfs_npz_size(const struct rfs_npz_csr *m)
{
	char header[RFS_NPY_HEADER_MAX];
	uint64_t total = END_RECORD;
	for (int k = 0; k < MEMBERS; k++) {
		uint64_t payload;
		size_t h = member_header(m, k, header, &payload);
		total += LOCAL_HEADER + CENTRAL_HEADER + 2 * strlen(names[k]) +
			 h + payload;
	}
	return total;
}

uint64_t rfs_npz_values_offset(const struct rfs_npz_csr *m)
{
	char header[RFS_NPY_HEADER_MAX];
	uint64_t at = 0, payload;
	for (int k = 0; k < DATA; k++)
		at += LOCAL_HEADER + strlen(names[k]) +
		      member_header(m, k, header, &payload) + payload;
	return at + LOCAL_HEADER + strlen(names[DATA]) +
	       member_header(m, DATA, header, &payload);
}

static unsigned char *put16(unsigned char *p, unsigned v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
	return p + 2;
}

static unsigned char *put32(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
	return p + 4;
}

/* The fields local and central headers share, from "version needed". */
static unsigned char *common_fields(unsigned char *p, uint32_t crc,
				    uint64_t size, size_t name_len)
{
	p = put16(p, 20); /* version needed: 2.0 */
	p = put16(p, 0); /* flags */
	p = put16(p, 0); /* stored */
	p = put16(p, 0); /* time */
	p = put16(p, DOS_DATE_1980);
	p = put32(p, crc);
	p = put32(p, size); /* compressed = uncompressed */
	p = put32(p, size);
	p = put16(p, (unsigned)name_len);
	return put16(p, 0); /* extra field length */
}

/* Writes member k's payload at p. */
static void member_payload(const struct rfs_npz_csr *m, int k,
			   const void *values, const int64_t *cols,
			   const uint64_t *start, unsigned char *p)
{
	switch (k) {
	case INDICES: /* one loop per width: a copy per value was a call */
		rfs_convert(m->index_dtype, p, RFS_INT64, cols, m->nnz);
		break;
	case INDPTR:
		rfs_convert(m->index_dtype, p, RFS_UINT64, start, m->rows + 1);
		break;
	case FORMAT:
		memcpy(p, "csr", 3);
		break;
	case SHAPE: {
		int64_t shape[2] = { (int64_t)m->rows, (int64_t)m->cols };
		memcpy(p, shape, 16);
		break;
	}
	default: /* values may be NULL when nnz is 0, or already here */
		if (m->nnz && values != p)
			memcpy(p, values,
			       m->nnz * rfs_dtype_size(m->value_dtype));
	}
}

void rfs_npz_write(const struct rfs_npz_csr *m, const void *values,
		   const int64_t *cols, const uint64_t *start,
		   unsigned char *out)
{
	uint64_t offset[MEMBERS], size[MEMBERS];
	uint32_t crc[MEMBERS];
	unsigned char *p = out;
	for (int k = 0; k < MEMBERS; k++) {
		char header[RFS_NPY_HEADER_MAX];
		uint64_t payload;
		size_t h = member_header(m, k, header, &payload);
		size_t name_len = strlen(names[k]);
		unsigned char *local = p, *data = p + LOCAL_HEADER + name_len;
		memcpy(data, header, h);
		member_payload(m, k, values, cols, start, data + h);
		size[k] = h + payload;
		crc[k] = (uint32_t)crc32(0L, data, (uInt)size[k]);
		offset[k] = (uint64_t)(local - out);
		p = put32(local, 0x04034b50);
		p = common_fields(p, crc[k], size[k], name_len);
		memcpy(p, names[k], name_len);
		p = data + size[k];
	}
	unsigned char *central = p;
	for (int k = 0; k < MEMBERS; k++) {
		size_t name_len = strlen(names[k]);
		p = put32(p, 0x02014b50);
		p = put16(p, 20); /* made by: 2.0 */
		p = common_fields(p, crc[k], size[k], name_len);
		p = put16(p, 0); /* comment length */
		p = put16(p, 0); /* disk */
		p = put16(p, 0); /* internal attributes */
		p = put32(p, 0); /* external attributes */
		p = put32(p, offset[k]);
		memcpy(p, names[k], name_len);
		p += name_len;
	}
	uint64_t central_size = (uint64_t)(p - central);
	p = put32(p, 0x06054b50);
	p = put16(p, 0); /* this disk */
	p = put16(p, 0); /* disk of the central directory */
	p = put16(p, MEMBERS);
	p = put16(p, MEMBERS);
	p = put32(p, central_size);
	p = put32(p, (uint64_t)(central - out));
	put16(p, 0); /* comment length */
}
