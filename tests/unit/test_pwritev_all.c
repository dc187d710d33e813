/* Unit tests for lib/pwritev_all.c: every piece lands at its place. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "pwritev_all.h"

/* 300 pieces of 0 to 10 bytes (more than one call takes), at offset 5 of
 * a memfd: the file is their concatenation after 5 zero bytes. */
static void test_many_pieces_at_an_offset(void **state)
{
	(void)state;
	static unsigned char src[300 * 10];
	static unsigned char want[5 + sizeof(src)], got[sizeof(want) + 1];
	struct iovec iov[300];
	size_t at = 5;
	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (unsigned char)(i * 7 + 1);
	for (size_t i = 0; i < 300; i++) {
		size_t len = i % 11 == 0 ? 0 : i % 10 + 1;
		iov[i] = (struct iovec){ src + i * 10, len };
		memcpy(want + at, src + i * 10, len);
		at += len;
	}
	int fd = memfd_create("test", 0);
	assert_true(fd >= 0);
	assert_int_equal(rfs_pwritev_all(fd, iov, 300, 5), 0);
	assert_int_equal(pread(fd, got, sizeof(got), 0), (ssize_t)at);
	assert_memory_equal(got, want, at);
	/* Nothing to write is no error. */
	assert_int_equal(rfs_pwritev_all(fd, iov, 0, 0), 0);
	close(fd);
}

/* A file that takes part of a call (it reaches RLIMIT_FSIZE inside a
 * piece) and then nothing: the bytes it took are the first ones, and the
 * error is the kernel's. */
static void test_short_write_then_refused(void **state)
{
	(void)state;
	static unsigned char src[3][100], got[400];
	struct iovec iov[3];
	for (int i = 0; i < 3; i++) {
		memset(src[i], 'a' + i, sizeof(src[i]));
		iov[i] = (struct iovec){ src[i], sizeof(src[i]) };
	}
	int fd = memfd_create("test", 0);
	assert_true(fd >= 0);
	struct rlimit was, cap;
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &was), 0);
	cap = was;
	cap.rlim_cur = 150;
	void (*old)(int) = signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &cap), 0);
	int rc = rfs_pwritev_all(fd, iov, 3, 0);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &was), 0);
	signal(SIGXFSZ, old);
	assert_int_equal(rc, -EFBIG);
	assert_int_equal(pread(fd, got, sizeof(got), 0), 150);
	assert_memory_equal(got, src[0], 100);
	assert_memory_equal(got + 100, src[1], 50);
	close(fd);
}

/* A descriptor that cannot be written: its errno. */
static void test_errors(void **state)
{
	(void)state;
	char byte = 'x';
	struct iovec iov = { &byte, 1 };
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(rfs_pwritev_all(fds[1], &iov, 1, 0), -ESPIPE);
	close(fds[0]);
	close(fds[1]);
	assert_int_equal(rfs_pwritev_all(-1, &iov, 1, 0), -EBADF);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_many_pieces_at_an_offset),
		cmocka_unit_test(test_short_write_then_refused),
		cmocka_unit_test(test_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
