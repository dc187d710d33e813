/* SPDX-License-Identifier: MIT */
#include "core/rowsort.h"

#include <stdlib.h>
#include <string.h>

static int cmp_wanted(const void *a, const void *b)
{
	const struct rfs_wanted *x = a, *y = b;
	return (x->row > y->row) - (x->row < y->row);
}

struct rfs_wanted *rfs_rowsort(const int64_t *rows, size_t n)
{
	struct rfs_wanted *w = malloc((n ? n : 1) * sizeof(*w));
	if (!w)
		return NULL;
	for (size_t i = 0; i < n; i++)
		w[i] = (struct rfs_wanted){ (uint64_t)rows[i], i };
	qsort(w, n, sizeof(*w), cmp_wanted);
	return w;
}

void rfs_rowsort_u64(uint64_t *v, uint64_t *tmp, size_t n)
{
	uint64_t max = 0;
	for (size_t i = 0; i < n; i++)
		max |= v[i];
	/* LSD, a byte per pass, only as many passes as max has bytes. */
	for (unsigned shift = 0; shift < 64 && (max >> shift) != 0;
	     shift += 8) {
		size_t count[257] = { 0 };
		for (size_t i = 0; i < n; i++)
			count[((v[i] >> shift) & 0xff) + 1]++;
		for (int d = 0; d < 256; d++)
			count[d + 1] += count[d];
		for (size_t i = 0; i < n; i++)
			tmp[count[(v[i] >> shift) & 0xff]++] = v[i];
		memcpy(v, tmp, n * sizeof(*v));
	}
}
