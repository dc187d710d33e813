/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/serve/npz.c: a valid stored zip of scipy's CSR members,
 * parsed back here by its own reader. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "serve/npy.h"
#include "serve/npz.h"

static uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static unsigned get16(const unsigned char *p)
{
	return (unsigned)p[0] | (unsigned)p[1] << 8;
}

struct member {
	char name[32];
	const unsigned char *data;
	size_t size;
};

/* Walks the local headers, checking each CRC, and the central directory
 * and end record against them. @return the member count. */
static int parse(const unsigned char *z, size_t len, struct member *m)
{
	size_t at = 0;
	int n = 0;
	while (get32(z + at) == 0x04034b50) {
		assert_int_equal(get16(z + at + 8), 0); /* stored */
		uint32_t crc = get32(z + at + 14), size = get32(z + at + 18);
		assert_int_equal(get32(z + at + 22), size);
		unsigned name_len = get16(z + at + 26);
		assert_int_equal(get16(z + at + 28), 0);
		memcpy(m[n].name, z + at + 30, name_len);
		m[n].name[name_len] = '\0';
		m[n].data = z + at + 30 + name_len;
		m[n].size = size;
		assert_int_equal(crc32(0, m[n].data, size), crc);
		at += 30 + name_len + size;
		n++;
	}
	size_t central = at;
	for (int k = 0; k < n; k++) {
		assert_int_equal(get32(z + at), 0x02014b50);
		unsigned name_len = get16(z + at + 28);
		assert_memory_equal(z + at + 46, m[k].name, name_len);
		at += 46 + name_len;
	}
	assert_int_equal(get32(z + at), 0x06054b50);
	assert_int_equal(get16(z + at + 10), n);
	assert_int_equal(get32(z + at + 12), at - central);
	assert_int_equal(get32(z + at + 16), central);
	assert_true(at + 22 == len);
	return n;
}

static const struct member *find(const struct member *m, int n,
				 const char *name)
{
	for (int k = 0; k < n; k++)
		if (strcmp(m[k].name, name) == 0)
			return &m[k];
	fail_msg("no member %s", name);
	return NULL;
}

/* The member's payload after its .npy header, checking the header. */
static const unsigned char *payload(const struct member *m, enum rfs_dtype t,
				    uint64_t n)
{
	char header[RFS_NPY_HEADER_MAX];
	size_t h = rfs_npy_header(t, 1, &n, header);
	assert_memory_equal(m->data, header, h);
	assert_int_equal(m->size, h + n * rfs_dtype_size(t));
	return m->data + h;
}

static void test_csr_members(void **state)
{
	(void)state;
	/* 3 x 5: [[0 1.5 0 0 2], [0 0 0 0 0], [7 0 0 0 0]] */
	const float values[] = { 1.5f, 2.0f, 7.0f };
	const int64_t cols[] = { 1, 4, 0 };
	const uint64_t start[] = { 0, 2, 2, 3 };
	struct rfs_npz_csr m = { .rows = 3,
				 .cols = 5,
				 .nnz = 3,
				 .value_dtype = RFS_FLOAT32,
				 .index_dtype = rfs_npz_index_dtype(5, 3) };
	assert_int_equal(m.index_dtype, RFS_INT32);
	size_t size = rfs_npz_size(&m);
	unsigned char *z = malloc(size);
	rfs_npz_write(&m, values, cols, start, z);
	struct member mem[8];
	assert_int_equal(parse(z, size, mem), 5);
	/* scipy's save_npz order. */
	assert_string_equal(mem[0].name, "indices.npy");
	assert_string_equal(mem[4].name, "data.npy");

	const int32_t want_idx[] = { 1, 4, 0 }, want_ptr[] = { 0, 2, 2, 3 };
	assert_memory_equal(payload(find(mem, 5, "indices.npy"), RFS_INT32, 3),
			    want_idx, sizeof(want_idx));
	assert_memory_equal(payload(find(mem, 5, "indptr.npy"), RFS_INT32, 4),
			    want_ptr, sizeof(want_ptr));
	assert_memory_equal(payload(find(mem, 5, "data.npy"), RFS_FLOAT32, 3),
			    values, sizeof(values));
	const int64_t shape[] = { 3, 5 };
	assert_memory_equal(payload(find(mem, 5, "shape.npy"), RFS_INT64, 2),
			    shape, sizeof(shape));
	/* format: a 0-d |S3 array holding "csr", as numpy saves b'csr'. */
	const struct member *f = find(mem, 5, "format.npy");
	char header[RFS_NPY_HEADER_MAX];
	size_t h = rfs_npy_header_descr("|S3", 0, NULL, header);
	assert_int_equal(f->size, h + 3);
	header[h] = '\0'; /* the dict starts after the 10-byte prefix */
	assert_non_null(strstr(header + 10, "'descr': '|S3'"));
	assert_non_null(strstr(header + 10, "'shape': ()"));
	assert_memory_equal(f->data + h, "csr", 3);
	free(z);
}

static void test_wide_indices_and_empty(void **state)
{
	(void)state;
	assert_int_equal(rfs_npz_index_dtype(UINT64_C(1) << 31, 1), RFS_INT64);
	const uint64_t start[] = { 0, 0 };
	struct rfs_npz_csr m = { .rows = 1,
				 .cols = UINT64_C(3) << 31,
				 .nnz = 0,
				 .value_dtype = RFS_FLOAT64,
				 .index_dtype = RFS_INT64 };
	size_t size = rfs_npz_size(&m);
	unsigned char *z = malloc(size);
	rfs_npz_write(&m, NULL, NULL, start, z);
	struct member mem[8];
	assert_int_equal(parse(z, size, mem), 5);
	const int64_t ptr[] = { 0, 0 };
	assert_memory_equal(payload(find(mem, 5, "indptr.npy"), RFS_INT64, 2),
			    ptr, sizeof(ptr));
	payload(find(mem, 5, "data.npy"), RFS_FLOAT64, 0);
	free(z);
}

/* Values read straight to rfs_npz_values_offset() give the same file as
 * values passed from elsewhere, in both index widths. */
static void test_values_in_place(void **state)
{
	(void)state;
	const double values[] = { 0.5, -2.0, 7.25, 1e300 };
	const int64_t cols[] = { 3, 0, 9, 2 };
	const uint64_t start[] = { 0, 1, 3, 3, 4 };
	for (int wide = 0; wide < 2; wide++) {
		struct rfs_npz_csr m = { .rows = 4,
					 .cols = 10,
					 .nnz = 4,
					 .value_dtype = RFS_FLOAT64,
					 .index_dtype = wide ? RFS_INT64 :
							       RFS_INT32 };
		size_t size = rfs_npz_size(&m);
		unsigned char *a = malloc(size), *b = malloc(size);
		memset(a, 0xaa, size);
		memset(b, 0x55, size);
		rfs_npz_write(&m, values, cols, start, a);
		unsigned char *at = b + rfs_npz_values_offset(&m);
		memcpy(at, values, sizeof(values));
		rfs_npz_write(&m, at, cols, start, b);
		assert_memory_equal(a, b, size);
		struct member mem[8];
		assert_int_equal(parse(b, size, mem), 5);
		assert_ptr_equal(
			payload(find(mem, 5, "data.npy"), RFS_FLOAT64, 4), at);
		free(a);
		free(b);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_csr_members),
		cmocka_unit_test(test_wide_indices_and_empty),
		cmocka_unit_test(test_values_in_place),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
