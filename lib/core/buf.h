/* SPDX-License-Identifier: MIT */
/* Growable byte buffer for rendering small text files (JSON). */
#ifndef RFS_BUF_H
#define RFS_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

struct rfs_buf {
	char *data; /* NUL-terminated while len < cap; owned, free() it */
	size_t len;
	size_t cap;
	int failed; /* an allocation failed: data is incomplete */
};

/* Appends printf-style text. On allocation failure sets failed and keeps
 * what was there; check rfs_buf_finish() once at the end. */
void rfs_buf_printf(struct rfs_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Appends s as a JSON string literal, quotes included. A byte that is not
 * part of well-formed UTF-8 (a file name can hold any) is written as the
 * escaped lone surrogate U+DC00 + byte, as Python's surrogateescape
 * decodes it: json.load then os.fsencode give the bytes back. */
void rfs_buf_json_string(struct rfs_buf *b, const char *s);

/* Appends the shortest decimal text for v, without an exponent (option
 * values are decimals), that same(ctx, value read back) accepts; same
 * NULL: that reads back as v exactly. */
void rfs_buf_decimal(struct rfs_buf *b, double v,
		     int (*same)(const void *ctx, double typed),
		     const void *ctx);

/* @return 0 and hands b->data to the caller, or -ENOMEM (b is freed). */
int rfs_buf_finish(struct rfs_buf *b, char **out, size_t *len);

void rfs_buf_free(struct rfs_buf *b);

/* qsort's comparison of two char * elements, by strcmp. */
int rfs_buf_compare_strings(const void *a, const void *b);

/* Frees n heap strings and their array. Accepts NULL. */
void rfs_buf_free_strings(char **strings, uint64_t n);

/* Flushes stdout; text lost to a full disk or a closed stdout is a
 * failure, said on stderr as "prog: writing to stdout: why".
 * @return 0, or -1 said. */
int rfs_buf_flush_stdout(const char *prog);

#endif
