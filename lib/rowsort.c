#include "rowsort.h"

#include <stdlib.h>

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
