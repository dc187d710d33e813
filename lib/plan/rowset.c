/* SPDX-License-Identifier: MIT */
#include "plan/rowset.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

uint64_t rfs_rowset_row(const struct rfs_rowset *r, uint64_t v)
{
	uint64_t at = v;
	if (r->nranges) {
		/* The last range whose prefix is <= v. */
		uint64_t lo = 0, hi = r->nranges;
		while (hi - lo > 1) {
			uint64_t mid = lo + (hi - lo) / 2;
			if (r->range_prefix[mid] <= v)
				lo = mid;
			else
				hi = mid;
		}
		at = r->range_start[lo] + (v - r->range_prefix[lo]);
	}
	return r->base ? r->base[at] : at;
}

int rfs_rowset_set_weights(struct rfs_rowset *r,
			   double (*weight)(void *ctx, uint64_t row), void *ctx,
			   uint64_t *bad)
{
	double *cdf = malloc((r->length ? r->length : 1) * sizeof(*cdf));
	if (!cdf)
		return -ENOMEM;
	double most = 0;
	for (uint64_t v = 0; v < r->length; v++) {
		double w = weight(ctx, rfs_rowset_row(r, v));
		if (!(w >= 0) || isinf(w)) {
			*bad = v;
			free(cdf);
			return -EINVAL;
		}
		most = w > most ? w : most;
		cdf[v] = w; /* the sums replace the weights below */
	}
	/* Weights near DBL_MAX would sum to infinity, and subnormal ones
	 * draw with a few bits: such weights are scaled by the power of two
	 * that brings the largest into [1, 2) (exact, but for weights that
	 * fall below 2^-1074 beside the largest: too small to be drawn). */
	int scale = most > 0x1p500 || (most > 0 && most < 0x1p-500) ?
			    -ilogb(most) :
			    0;
	/* long double keeps the running sum exact enough for 10^9 rows. */
	long double sum = 0;
	uint64_t last = r->length;
	for (uint64_t v = 0; v < r->length; v++) {
		double w = ldexp(cdf[v], scale);
		if (w > 0)
			last = v;
		sum += w;
		cdf[v] = (double)sum;
	}
	if (last == r->length) {
		*bad = r->length;
		free(cdf);
		return -EINVAL;
	}
	free(r->cdf);
	r->cdf = cdf;
	r->last_weighted = last;
	return 0;
}

uint64_t rfs_rowset_draw(const struct rfs_rowset *r, uint64_t u)
{
	double x = (double)u * 0x1p-53 * r->cdf[r->length - 1];
	/* First v with cdf[v] > x: a zero-weight row repeats its
	 * predecessor's sum, so it is never the first to exceed x. */
	uint64_t lo = 0, hi = r->length;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (r->cdf[mid] > x)
			hi = mid;
		else
			lo = mid + 1;
	}
	/* x can round up to the total: the last weighted row then. */
	return lo < r->length ? lo : r->last_weighted;
}

void rfs_rowset_free(struct rfs_rowset *r)
{
	free(r->range_start);
	free(r->range_prefix);
	free(r->cdf);
	r->range_start = r->range_prefix = NULL;
	r->cdf = NULL;
	r->nranges = 0;
}
