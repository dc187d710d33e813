/* SPDX-License-Identifier: MIT */
/*
 * numpy's format 1.0: magic "\x93NUMPY", version 1.0, a little-endian u16
 * header length, then a Python dict literal with keys in sorted order,
 * padded with spaces and a final '\n' so the data starts on a 64-byte
 * boundary. numpy (>= 1.23) also reserves room after the dict for the first
 * axis to grow to 21 digits; we add the same spaces so our bytes equal
 * np.save's exactly and files can be compared with numpy's own output.
 */
#include "serve/npy.h"

#include <stdio.h>
#include <string.h>

#define ALIGN 64
#define PREFIX_LEN 10 /* magic (6) + version (2) + header length (2) */
#define GROWTH_AXIS_MAX_DIGITS 21

size_t rfs_npy_header_descr(const char *descr, int ndims, const uint64_t *shape,
			    char *out)
{
	char dict[160], dims[64];
	int first_len = 0;
	if (ndims == 0) {
		snprintf(dims, sizeof(dims), "()");
	} else {
		char first[24];
		first_len = snprintf(first, sizeof(first), "%llu",
				     (unsigned long long)shape[0]);
		if (ndims == 1)
			snprintf(dims, sizeof(dims), "(%s,)", first);
		else
			snprintf(dims, sizeof(dims), "(%s, %llu)", first,
				 (unsigned long long)shape[1]);
	}
	int len = snprintf(dict, sizeof(dict),
			   "{'descr': '%s', 'fortran_order': False, "
			   "'shape': %s, }",
			   descr, dims);
	/* numpy leaves no room to grow a 0-d array. */
	size_t growth = ndims ? (size_t)(GROWTH_AXIS_MAX_DIGITS - first_len) :
				0;
	size_t body = (size_t)len + growth;
	size_t pad = ALIGN - (PREFIX_LEN + body + 1) % ALIGN;
	size_t total = PREFIX_LEN + body + pad + 1;
	size_t header_len = total - PREFIX_LEN;

	memcpy(out, "\x93NUMPY\x01\x00", 8);
	out[8] = (char)(header_len & 0xff);
	out[9] = (char)(header_len >> 8);
	memcpy(out + PREFIX_LEN, dict, (size_t)len);
	memset(out + PREFIX_LEN + len, ' ',
	       total - PREFIX_LEN - (size_t)len - 1);
	out[total - 1] = '\n';
	return total;
}

size_t rfs_npy_header(enum rfs_dtype t, int ndims, const uint64_t *shape,
		      char *out)
{
	return rfs_npy_header_descr(rfs_dtype_descr(t), ndims, shape, out);
}

uint64_t rfs_npy_file_size(enum rfs_dtype t, int ndims, const uint64_t *shape)
{
	char header[RFS_NPY_HEADER_MAX];
	uint64_t n = shape[0] * (ndims == 2 ? shape[1] : 1);
	return rfs_npy_header(t, ndims, shape, header) + n * rfs_dtype_size(t);
}
