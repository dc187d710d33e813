/* SPDX-License-Identifier: MIT */
#include "source/io/inflate.h"

#include <errno.h>
#include <string.h>
#include <zlib.h>

int rfs_inflate_supported(const struct rfs_pipeline *p)
{
	/* Every stage's output is the decoded chunk's size only in this
	 * order (what h5py and anndata write); HDF5 reads the others. */
	int i = 0;
	if (i < p->count && p->ids[i] == RFS_FILTER_SHUFFLE)
		i++;
	if (i < p->count && p->ids[i] == RFS_FILTER_DEFLATE)
		i++;
	return i == p->count;
}

/* HDF5's shuffle stores byte 0 of every element, then byte 1, ...; the
 * bytes past the last whole element are left as they are. */
static void unshuffle(const unsigned char *in, unsigned char *out, size_t len,
		      size_t elem)
{
	size_t n = len / elem;
	for (size_t b = 0; b < elem; b++)
		for (size_t i = 0; i < n; i++)
			out[i * elem + b] = in[b * n + i];
	memcpy(out + n * elem, in + n * elem, len - n * elem);
}

int rfs_inflate_decode(const struct rfs_pipeline *p, unsigned mask,
		       const void *src, size_t stored, void *out,
		       size_t out_len, size_t elem, void *scratch)
{
	/* Work from the last filter applied to the first, ping-ponging
	 * between out and scratch; the data ends in out. */
	const unsigned char *cur = src;
	size_t len = stored;
	int active = 0;
	for (int i = 0; i < p->count; i++)
		active += !(mask & (1u << i));
	unsigned char *bufs[2] = { out, scratch };
	int next = active % 2 ? 0 : 1; /* so the last write lands in out */
	for (int i = p->count - 1; i >= 0; i--) {
		if (mask & (1u << i))
			continue;
		unsigned char *to = bufs[next];
		next ^= 1;
		if (p->ids[i] == RFS_FILTER_DEFLATE) {
			uLongf got = (uLongf)out_len;
			if (uncompress(to, &got, cur, (uLong)len) != Z_OK ||
			    got != out_len)
				return -EIO;
			len = got;
		} else if (p->ids[i] == RFS_FILTER_SHUFFLE) {
			if (len != out_len)
				return -EIO;
			unshuffle(cur, to, len, elem);
		} else {
			return -EIO;
		}
		cur = to;
	}
	if (!active) {
		if (len != out_len)
			return -EIO;
		memcpy(out, src, out_len);
	}
	return 0;
}
