/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for decoding one stored zarr chunk (lib/source/zarr/zarr_codec.c):
 * rfs_zarr_decode (a known size, and the strings path of no known size),
 * rfs_zarr_vlen_utf8, rfs_zarr_part_bytes and rfs_zarr_decode_part.
 *
 * Input: a 12-byte header, then the chunk's stored bytes.
 *   [0]     ncomp (% 5)
 *   [1..4]  the codecs, in encode order (% 5: blosc zstd gzip zlib crc32c)
 *   [5]     bit 0: big-endian elements; bit 1: strings
 *   [6]     element size: 1, 2, 4 or 8 (% 4)
 *   [7..8]  elements the chunk decodes to (little-endian uint16)
 *   [9..10] where a part starts, [11] how long, each scaled to the chunk
 *           and cut to whole elements (as lib/source/io/chunks.c asks, by rows)
 * A part decoded alone must be the same bytes as in the whole chunk
 * decoded, when both decode.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "source/zarr/zarr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct mem {
	const uint8_t *p;
	size_t n;
};

static int read_mem(void *ctx, void *dst, size_t n, uint64_t off)
{
	const struct mem *m = ctx;
	if (off > m->n || n > m->n - off)
		return 1;
	memcpy(dst, m->p + off, n);
	return 0;
}

#define HEAD 12

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < HEAD)
		return 0;
	struct rfs_zarr_pipe p = { 0 };
	p.ncomp = data[0] % 5;
	for (int i = 0; i < p.ncomp; i++)
		p.comp[i] = (enum rfs_zarr_comp)(data[1 + i] % 5);
	p.big_endian = data[5] & 1;
	p.strings = (data[5] >> 1) & 1;
	static const size_t elems[4] = { 1, 2, 4, 8 };
	size_t elem = elems[data[6] % 4];
	size_t count = (size_t)data[7] | (size_t)data[8] << 8;
	size_t want = count * elem;
	const uint8_t *src = data + HEAD;
	size_t n = size - HEAD;
	/* An exact copy: ASan sees any read past the stored bytes. */
	uint8_t *stored = malloc(n ? n : 1);
	if (!stored)
		return 0;
	memcpy(stored, src, n);
	char why[256];

	/* The whole chunk, of a known size. */
	unsigned char *whole = malloc(want ? want : 1);
	int whole_rc = -1;
	if (whole && want) {
		why[0] = '\0';
		whole_rc = rfs_zarr_decode(&p, stored, n, elem, want, whole,
					   NULL, NULL, why, sizeof(why));
		if (whole_rc != 0 && whole_rc != -EIO && whole_rc != -ENOMEM)
			abort();
		if (whole_rc == -EIO && !why[0])
			abort(); /* every failure says why */
	}

	/* No known size (strings), then the vlen-utf8 framing. */
	void *dec = NULL;
	size_t declen = 0;
	why[0] = '\0';
	int rc = rfs_zarr_decode(&p, stored, n, elem, 0, NULL, &dec, &declen,
				 why, sizeof(why));
	if (rc == 0) {
		if (declen > (UINT64_C(1) << 31))
			abort();
		char **s = NULL;
		uint64_t items = count % 64;
		if (rfs_zarr_vlen_utf8(dec, declen, items, &s) == 0) {
			for (uint64_t i = 0; i < items; i++)
				free(s[i]);
			free(s);
		}
		free(dec);
	} else if (rc == -EIO && !why[0]) {
		abort();
	}

	/* Parts, as the chunk cache reads them. */
	struct mem m = { stored, n };
	if (want) {
		size_t part = rfs_zarr_part_bytes(&p, want, n, read_mem, &m);
		/* part may exceed want: blosc_cbuffer_validate() does not
		 * check the header's block size (part_rows() ignores such). */
		size_t at = ((size_t)data[9] | (size_t)data[10] << 8) % want;
		size_t len = data[11] % 4 == 0 && part ?
				     part - at % part :
				     (size_t)data[11] * elem + 1;
		if (len > want - at)
			len = want - at;
		if (part && data[11] % 4 == 1) /* whole blocks */
			at -= at % part;
		/* Whole elements, as chunks.c asks (rows of them): a byte
		 * order swap goes by elements from at. */
		at -= at % elem;
		len -= len % elem;
		len = len ? len : elem;
		unsigned char *out = malloc(len ? len : 1);
		if (out) {
			int prc = rfs_zarr_decode_part(
				&p, elem, want, n, read_mem, &m, at, len, out);
			if (prc != 0 && prc != 1 && prc != -ENOMEM)
				abort();
			if (prc == 0 && whole_rc == 0 &&
			    memcmp(out, whole + at, len) != 0)
				abort(); /* a part that differs from the whole */
			free(out);
		}
	}
	free(whole);
	free(stored);
	return 0;
}
