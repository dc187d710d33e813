/* SPDX-License-Identifier: MIT */
#include "core/buf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve(struct rfs_buf *b, size_t extra)
{
	size_t need = b->len + extra + 1;
	if (need <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap *= 2;
	char *p = realloc(b->data, cap);
	if (!p) {
		b->failed = 1;
		return -ENOMEM;
	}
	b->data = p;
	b->cap = cap;
	return 0;
}

void rfs_buf_printf(struct rfs_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || b->failed || reserve(b, (size_t)n) != 0) {
		b->failed = 1;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

/* Bytes in the well-formed UTF-8 sequence of 2 to 4 bytes at p (RFC
 * 3629: no overlong forms, surrogates or code points past U+10FFFF), or
 * 0. */
static size_t utf8_sequence(const unsigned char *p)
{
	size_t n = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : 2;
	unsigned lo = 0x80, hi = 0xbf; /* the second byte's range */
	if (p[0] < 0xc2 || p[0] > 0xf4)
		return 0;
	if (p[0] == 0xe0)
		lo = 0xa0;
	else if (p[0] == 0xed)
		hi = 0x9f;
	else if (p[0] == 0xf0)
		lo = 0x90;
	else if (p[0] == 0xf4)
		hi = 0x8f;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

void rfs_buf_json_string(struct rfs_buf *b, const char *s)
{
	rfs_buf_printf(b, "\"");
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		size_t n = *p >= 0x80 ? utf8_sequence(p) : 1;
		if (*p == '"' || *p == '\\')
			rfs_buf_printf(b, "\\%c", *p);
		else if (*p < 0x20)
			rfs_buf_printf(b, "\\u%04x", *p);
		else if (n == 0) /* Python's surrogateescape: fsencode undoes */
			rfs_buf_printf(b, "\\udc%02x", *p);
		else
			rfs_buf_printf(b, "%.*s", (int)n, (const char *)p);
		p += n ? n - 1 : 0;
	}
	rfs_buf_printf(b, "\"");
}

void rfs_buf_decimal(struct rfs_buf *b, double v,
		     int (*same)(const void *ctx, double typed),
		     const void *ctx)
{
	char text[40];
	int digits = 1;
	for (; digits < 17; digits++) {
		snprintf(text, sizeof(text), "%.*g", digits, v);
		double typed = strtod(text, NULL);
		if (same ? same(ctx, typed) : typed == v)
			break;
	}
	snprintf(text, sizeof(text), "%.*g", digits, v);
	const char *e = strchr(text, 'e');
	if (!e) {
		rfs_buf_printf(b, "%s", text);
		return;
	}
	/* d significant digits from 10^exp down: d - 1 - exp decimals. */
	int decimals = digits - 1 - atoi(e + 1);
	rfs_buf_printf(b, "%.*f", decimals > 0 ? decimals : 0, v);
}

int rfs_buf_finish(struct rfs_buf *b, char **out, size_t *len)
{
	if (b->failed || !b->data) {
		rfs_buf_free(b);
		return -ENOMEM;
	}
	*out = b->data;
	*len = b->len;
	b->data = NULL;
	b->len = b->cap = 0;
	return 0;
}

int rfs_buf_compare_strings(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void rfs_buf_free_strings(char **strings, uint64_t n)
{
	for (uint64_t i = 0; strings && i < n; i++)
		free(strings[i]);
	free(strings);
}

void rfs_buf_free(struct rfs_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
	b->failed = 0;
}

int rfs_buf_flush_stdout(const char *prog)
{
	errno = 0;
	if (fflush(stdout) == 0 && !ferror(stdout))
		return 0;
	fprintf(stderr, "%s: writing to stdout: %s\n", prog,
		strerror(errno ? errno : EIO));
	return -1;
}
