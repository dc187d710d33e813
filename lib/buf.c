#include "buf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

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

void rfs_buf_json_string(struct rfs_buf *b, const char *s)
{
	rfs_buf_printf(b, "\"");
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			rfs_buf_printf(b, "\\%c", *p);
		else if (*p < 0x20)
			rfs_buf_printf(b, "\\u%04x", *p);
		else
			rfs_buf_printf(b, "%c", *p);
	}
	rfs_buf_printf(b, "\"");
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

void rfs_buf_free(struct rfs_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
	b->failed = 0;
}
