/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/core/buf.c: growable text buffer and JSON strings. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/buf.h"

static void test_printf_appends(void **state)
{
	(void)state;
	struct rfs_buf b = { 0 };
	rfs_buf_printf(&b, "%s", "hello");
	rfs_buf_printf(&b, ", %d %s", 42, "world");
	assert_int_equal(b.failed, 0);
	assert_int_equal(b.len, strlen("hello, 42 world"));
	assert_string_equal(b.data, "hello, 42 world");
	assert_true(b.cap > b.len);
	rfs_buf_free(&b);
	assert_null(b.data);
	assert_int_equal(b.len, 0);
}

static void test_printf_grows_over_many_kb(void **state)
{
	(void)state;
	struct rfs_buf b = { 0 };
	char expect_line[64];
	const int lines = 20000; /* ~ 300 KB */
	size_t total = 0;
	for (int i = 0; i < lines; i++) {
		int n = snprintf(expect_line, sizeof(expect_line),
				 "line %06d: %x\n", i, i * 7);
		rfs_buf_printf(&b, "line %06d: %x\n", i, i * 7);
		total += (size_t)n;
		assert_int_equal(b.len, total);
	}
	/* One long piece bigger than the current capacity at once. */
	char *big = malloc(100001);
	assert_non_null(big);
	memset(big, 'z', 100000);
	big[100000] = '\0';
	rfs_buf_printf(&b, "%s", big);
	total += 100000;
	assert_int_equal(b.len, total);
	assert_true(b.cap > b.len);
	assert_int_equal(b.data[b.len], '\0');

	char *out = NULL;
	size_t len = 0;
	assert_int_equal(rfs_buf_finish(&b, &out, &len), 0);
	assert_int_equal(len, total);
	assert_int_equal(strlen(out), total);
	/* Every line is where it should be. */
	size_t at = 0;
	for (int i = 0; i < lines; i++) {
		int n = snprintf(expect_line, sizeof(expect_line),
				 "line %06d: %x\n", i, i * 7);
		assert_memory_equal(out + at, expect_line, (size_t)n);
		at += (size_t)n;
	}
	assert_memory_equal(out + at, big, 100000);
	free(big);
	free(out);
	/* finish handed the data over and left b empty. */
	assert_null(b.data);
	assert_int_equal(b.len, 0);
	assert_int_equal(b.cap, 0);
}

static char *json(const char *s)
{
	struct rfs_buf b = { 0 };
	char *out = NULL;
	size_t len;
	rfs_buf_json_string(&b, s);
	assert_int_equal(rfs_buf_finish(&b, &out, &len), 0);
	assert_int_equal(len, strlen(out));
	return out;
}

static void expect_json(const char *in, const char *want)
{
	char *got = json(in);
	assert_string_equal(got, want);
	free(got);
}

static void test_json_string_escaping(void **state)
{
	(void)state;
	expect_json("", "\"\"");
	expect_json("plain /data/x.h5", "\"plain /data/x.h5\"");
	expect_json("say \"hi\"", "\"say \\\"hi\\\"\"");
	expect_json("a\\b", "\"a\\\\b\"");
	expect_json("\\\"", "\"\\\\\\\"\"");
	expect_json("tab\there", "\"tab\\u0009here\"");
	expect_json("nl\n", "\"nl\\u000a\"");
	expect_json("\x01\x1f", "\"\\u0001\\u001f\"");
	expect_json("\r", "\"\\u000d\"");
	/* 0x20 and above, including DEL and UTF-8, pass through. */
	expect_json(" ~\x7f", "\" ~\x7f\"");
	expect_json("caf\xc3\xa9", "\"caf\xc3\xa9\"");
	expect_json("\xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf",
		    "\"\xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf\"");
}

/* Bytes outside well-formed UTF-8 become escaped lone surrogates
 * (U+DC00 + byte), one per byte: what Python's surrogateescape gives. */
static void test_json_bytes_that_are_not_utf8(void **state)
{
	(void)state;
	expect_json("caf\xe9.h5", "\"caf\\udce9.h5\"");
	expect_json("\xff\xfe", "\"\\udcff\\udcfe\"");
	expect_json("\xc0\xaf", "\"\\udcc0\\udcaf\""); /* overlong '/' */
	expect_json("\xed\xa0\x80", /* a surrogate */
		    "\"\\udced\\udca0\\udc80\"");
	expect_json("\xf4\x90\x80\x80", /* past U+10FFFF */
		    "\"\\udcf4\\udc90\\udc80\\udc80\"");
	expect_json("\xe2\x82", "\"\\udce2\\udc82\""); /* cut short */
	expect_json("\xc3", "\"\\udcc3\""); /* at the end */
	expect_json("\x80\"", "\"\\udc80\\\"\"");
}

static char *decimal(double v, int (*same)(const void *, double),
		     const void *ctx)
{
	struct rfs_buf b = { 0 };
	char *out;
	size_t len;
	rfs_buf_decimal(&b, v, same, ctx);
	assert_int_equal(rfs_buf_finish(&b, &out, &len), 0);
	return out;
}

static int as_float(const void *ctx, double typed)
{
	return (float)typed == *(const float *)ctx;
}

/* Shortest, never with an exponent, and reading back as asked. */
static void test_decimal(void **state)
{
	(void)state;
	const struct {
		double v;
		const char *want;
	} cases[] = { { 0.25, "0.25" },
		      { 0.1, "0.1" },
		      { 1e-05, "0.00001" },
		      { 1.5e-300, NULL },
		      { 1e20, "100000000000000000000" },
		      { 1.0 / 3, "0.3333333333333333" } };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *got = decimal(cases[i].v, NULL, NULL);
		assert_null(strchr(got, 'e'));
		assert_true(strtod(got, NULL) == cases[i].v);
		if (cases[i].want)
			assert_string_equal(got, cases[i].want);
		free(got);
	}
	/* float32's 0.1, typed for a float32 reader. */
	float f = 0.1f;
	char *got = decimal((double)f, as_float, &f);
	assert_string_equal(got, "0.1");
	free(got);
}

static void test_json_every_control_char(void **state)
{
	(void)state;
	char in[2] = { 0, 0 };
	char want[16];
	for (int ch = 1; ch < 0x20; ch++) {
		in[0] = (char)ch;
		snprintf(want, sizeof(want), "\"\\u%04x\"", ch);
		expect_json(in, want);
	}
}

static void test_json_appends_to_existing(void **state)
{
	(void)state;
	struct rfs_buf b = { 0 };
	rfs_buf_printf(&b, "{\"path\": ");
	rfs_buf_json_string(&b, "x\"y");
	rfs_buf_printf(&b, "}");
	assert_string_equal(b.data, "{\"path\": \"x\\\"y\"}");
	rfs_buf_free(&b);
}

static void test_finish_failed_buffer(void **state)
{
	(void)state;
	struct rfs_buf b = { 0 };
	rfs_buf_printf(&b, "some text");
	b.failed = 1; /* as after an allocation failure */
	rfs_buf_printf(&b, "more"); /* ignored once failed */
	assert_int_equal(b.len, strlen("some text"));
	char *out = (char *)&b; /* must not be written */
	size_t len = 12345;
	assert_int_equal(rfs_buf_finish(&b, &out, &len), -ENOMEM);
	assert_true(out == (char *)&b);
	assert_int_equal(len, 12345);
	/* finish freed it. */
	assert_null(b.data);
	assert_int_equal(b.failed, 0);
}

static void test_free_resets(void **state)
{
	(void)state;
	struct rfs_buf b = { 0 };
	rfs_buf_free(&b); /* empty is fine */
	rfs_buf_printf(&b, "abc");
	rfs_buf_free(&b);
	assert_null(b.data);
	assert_int_equal(b.cap, 0);
	/* Reusable after free. */
	rfs_buf_printf(&b, "xyz");
	assert_string_equal(b.data, "xyz");
	rfs_buf_free(&b);
}

/* Text stdout could not take is a failure, said on stderr. */
static void test_flush_stdout(void **state)
{
	(void)state;
	int saved = dup(STDOUT_FILENO);
	assert_true(saved >= 0);
	fflush(stdout);
	assert_non_null(freopen("/dev/full", "w", stdout));
	printf("lost\n");
	assert_int_equal(rfs_buf_flush_stdout("test_buf"), -1);
	assert_int_equal(dup2(saved, STDOUT_FILENO), STDOUT_FILENO);
	close(saved);
	clearerr(stdout);
	printf("kept\n");
	assert_int_equal(rfs_buf_flush_stdout("test_buf"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_printf_appends),
		cmocka_unit_test(test_printf_grows_over_many_kb),
		cmocka_unit_test(test_json_string_escaping),
		cmocka_unit_test(test_json_every_control_char),
		cmocka_unit_test(test_decimal),
		cmocka_unit_test(test_json_bytes_that_are_not_utf8),
		cmocka_unit_test(test_json_appends_to_existing),
		cmocka_unit_test(test_finish_failed_buffer),
		cmocka_unit_test(test_free_resets),
		cmocka_unit_test(test_flush_stdout),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
