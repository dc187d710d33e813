/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/source/io/rowmap.c: copies out of a mapping, the page-cache
 * probe, and SIGBUS turned into -EIO. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "h5_fixture.h"
#include "source/io/rowmap.h"

#define PAGES 64

struct file {
	char dir[PATH_MAX], path[PATH_MAX + 8];
	size_t page, size;
	unsigned char *data;
	int fd;
};

/* A file of PAGES pages and a bit, written and flushed (clean pages can
 * be dropped from the page cache), open read-only. */
static void make_file(struct file *f)
{
	assert_int_equal(h5fx_tmpdir(f->dir, sizeof(f->dir)), 0);
	snprintf(f->path, sizeof(f->path), "%s/f", f->dir);
	f->page = (size_t)sysconf(_SC_PAGESIZE);
	f->size = PAGES * f->page + 100;
	f->data = malloc(f->size);
	assert_non_null(f->data);
	for (size_t i = 0; i < f->size; i++)
		f->data[i] = (unsigned char)(i * 7 + i / 251);
	int w = open(f->path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(w >= 0);
	assert_true(write(w, f->data, f->size) == (ssize_t)f->size);
	assert_int_equal(fsync(w), 0);
	close(w);
	f->fd = open(f->path, O_RDONLY);
	assert_true(f->fd >= 0);
}

/* Pages of f in the page cache (mincore: the test owns the file). */
static size_t cached_pages(const struct file *f)
{
	void *p = mmap(NULL, f->size, PROT_READ, MAP_SHARED, f->fd, 0);
	assert_true(p != MAP_FAILED);
	size_t pages = (f->size + f->page - 1) / f->page, n = 0;
	unsigned char vec[PAGES + 1];
	assert_true(pages <= sizeof(vec));
	assert_int_equal(mincore(p, f->size, vec), 0);
	for (size_t i = 0; i < pages; i++)
		n += vec[i] & 1;
	munmap(p, f->size);
	return n;
}

/* Drops f from the page cache. POSIX_FADV_DONTNEED skips pages another
 * CPU holds a reference to at that moment, so it is checked and asked
 * again; a kernel that keeps them fails the test, never passes it. */
static void drop_from_page_cache(const struct file *f)
{
	size_t left = 0;
	for (int tries = 0; tries < 100; tries++) {
		assert_int_equal(
			posix_fadvise(f->fd, 0, 0, POSIX_FADV_DONTNEED), 0);
		left = cached_pages(f);
		if (left == 0)
			return;
		usleep(10000);
	}
	fail_msg("%s: %zu pages stay in the page cache after "
		 "POSIX_FADV_DONTNEED",
		 f->path, left);
}

static void drop_file(struct file *f)
{
	close(f->fd);
	free(f->data);
	h5fx_rmtree(f->dir);
}

static void test_copies_match_the_file(void **state)
{
	(void)state;
	struct file f;
	make_file(&f);
	struct rfs_rowmap m;
	/* An array starting inside a page, as HDF5 places them. */
	uint64_t at = 1000;
	assert_int_equal(rfs_rowmap_open(&m, f.fd, at, f.size - at), 0);
	unsigned char out[3 * 4096];
	uint64_t offs[] = { 0, 1, f.page - at, 5 * f.page + 17,
			    f.size - at - sizeof(out) };
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		memset(out, 0, sizeof(out));
		assert_int_equal(rfs_rowmap_copy(&m, offs[i], sizeof(out), out),
				 0);
		assert_memory_equal(out, f.data + at + offs[i], sizeof(out));
	}
	rfs_rowmap_close(&m);
	assert_null(m.map);
	rfs_rowmap_close(&m); /* twice is harmless */
	assert_int_equal(rfs_rowmap_open(&m, f.fd, at, 0), -EINVAL);
	drop_file(&f);
}

/* A gather copies each piece to its own buffer, in any order of
 * offsets, rows given as numbers and a row size too, and names the first
 * piece past the end of a shrunk file, one cut in mid-copy included. */
static void test_gather_copies_each_piece(void **state)
{
	(void)state;
	struct file f;
	make_file(&f);
	struct rfs_rowmap m;
	assert_int_equal(rfs_rowmap_open(&m, f.fd, 0, f.size), 0);
	enum { LEN = 3000, N = 5 };
	uint64_t offs[N] = { 9 * f.page + 5, 0, f.page - 1, 9 * f.page + 5,
			     f.size - LEN };
	unsigned char *out = calloc(N, LEN);
	assert_non_null(out);
	unsigned char *to[N];
	for (size_t k = 0; k < N; k++)
		to[k] = out + k * LEN;
	size_t failed = 99;
	assert_int_equal(rfs_rowmap_gather(&m, offs, 1, N, LEN, to, &failed),
			 0);
	assert_int_equal(failed, 99); /* untouched on success */
	for (size_t k = 0; k < N; k++)
		assert_memory_equal(to[k], f.data + offs[k], LEN);
	assert_int_equal(rfs_rowmap_gather(&m, offs, 1, 0, LEN, to, &failed),
			 0);

	uint64_t rows[N] = { 7, 0, 20, 3, f.size / LEN - 1 };
	memset(out, 0, N * LEN);
	assert_int_equal(rfs_rowmap_gather(&m, rows, LEN, N, LEN, to, &failed),
			 0);
	for (size_t k = 0; k < N; k++)
		assert_memory_equal(to[k], f.data + rows[k] * LEN, LEN);

	assert_int_equal(truncate(f.path, (off_t)(4 * f.page)), 0);
	uint64_t cut[][N] = {
		{ 0, f.page, 2 * f.page, 20 * f.page, f.page },
		{ 0, f.page, 2 * f.page, 4 * f.page - 100, 0 }, /* mid-copy */
	};
	for (size_t c = 0; c < 2; c++) {
		memset(out, 0, N * LEN);
		assert_int_equal(rfs_rowmap_gather(&m, cut[c], 1, N, LEN, to,
						   &failed),
				 -EIO);
		assert_int_equal(failed, 3);
		for (size_t k = 0; k < 3; k++)
			assert_memory_equal(to[k], f.data + cut[c][k], LEN);
	}
	free(out);
	rfs_rowmap_close(&m);
	drop_file(&f);
}

/* Forgets when the probe last ran, so the next question probes. */
static int resident_now(struct rfs_rowmap *m)
{
	atomic_store(&m->probed_ms, 0);
	return rfs_rowmap_resident(m);
}

/* Whether a read with RWF_NOWAIT of the page at `at` fails with EAGAIN
 * (any other failure fails the test). */
static int nowait_read_misses(const struct file *f, off_t at)
{
	char byte;
	struct iovec iov = { &byte, 1 };
	ssize_t got = preadv2(f->fd, &iov, 1, at, RWF_NOWAIT);
	assert_true(got == 1 || (got < 0 && errno == EAGAIN));
	return got < 0;
}

/* Whether ask() says "not resident" after f is dropped, or the device
 * answers too fast for any probe to tell. A NOWAIT read that misses starts
 * reading the page in, and where the device answers before the read looks
 * again (an interrupt on the same CPU, a RAM-backed disk) it succeeds: then
 * "resident" is right, as no read would wait. So a new drop and a new
 * question, many times, each miss reading one page (POSIX_FADV_RANDOM), so
 * that each of the probe's samples is a new chance to see one (the advice
 * stays on f's descriptor). A probe that never says 0 passes only where
 * the test's own NOWAIT reads after a drop mostly succeed too and its reads
 * brought pages back in: a probe that guesses fails, and so does one that
 * blocks, except on such a device, where the two cannot be told apart. */
static int sees_the_drop(struct rfs_rowmap *m, const struct file *f,
			 int (*ask)(struct rfs_rowmap *))
{
	enum { TRIES = 100, OWN_READS = 20 };
	assert_int_equal(posix_fadvise(f->fd, 0, 0, POSIX_FADV_RANDOM), 0);
	for (int tries = 0; tries < TRIES; tries++) {
		drop_from_page_cache(f);
		if (ask(m) == 0)
			return 1;
	}
	size_t brought_back = cached_pages(f);
	int misses = 0;
	for (int k = 0; k < OWN_READS; k++) {
		drop_from_page_cache(f);
		misses += nowait_read_misses(
			f, (off_t)((k * 7 % PAGES) * f->page));
	}
	fprintf(stderr,
		"%s: the probe never saw a drop in %d tries; this "
		"test's own NOWAIT reads missed %d of %d times\n",
		f->path, TRIES, misses, OWN_READS);
	return misses < OWN_READS / 2 && brought_back > 0;
}

static void test_resident_follows_the_page_cache(void **state)
{
	(void)state;
	struct file f;
	make_file(&f);
	struct rfs_rowmap m;
	assert_int_equal(rfs_rowmap_open(&m, f.fd, 0, f.size), 0);
	/* Just written: in the page cache. */
	int in = rfs_rowmap_probe(&m);
	if (in < 0)
		fail_msg("%s: this file system cannot read with RWF_NOWAIT: "
			 "run the tests where TMPDIR is ext4, xfs or btrfs",
			 f.path);
	assert_int_equal(in, 1);
	assert_int_equal(rfs_rowmap_resident(&m), 1);
	/* Dropped from the page cache. (A miss starts reading the page in,
	 * so each check below drops the pages first.) */
	drop_from_page_cache(&f);
	assert_int_equal(rfs_rowmap_resident(&m), 1); /* not probed again */
	assert_true(sees_the_drop(&m, &f, resident_now));
	/* Read back in (as the pread path does): resident again. */
	unsigned char *back = malloc(f.size);
	assert_true(pread(f.fd, back, f.size, 0) == (ssize_t)f.size);
	free(back);
	assert_int_equal(resident_now(&m), 1);
	assert_true(sees_the_drop(&m, &f, rfs_rowmap_probe));
	rfs_rowmap_close(&m);
	struct rfs_rowmap none = { 0 };
	assert_int_equal(rfs_rowmap_resident(&none), 0);
	assert_int_equal(rfs_rowmap_probe(&none), -1);
	drop_file(&f);
}

static void test_shrunk_file_is_eio_not_sigbus(void **state)
{
	(void)state;
	struct file f;
	make_file(&f);
	struct rfs_rowmap m;
	assert_int_equal(rfs_rowmap_open(&m, f.fd, 0, f.size), 0);
	assert_int_equal(truncate(f.path, (off_t)f.page), 0);
	unsigned char out[200];
	/* Twice: the guard works again after a fault. */
	for (int round = 0; round < 2; round++) {
		assert_int_equal(rfs_rowmap_copy(&m, 3 * f.page, sizeof(out),
						 out),
				 -EIO);
		assert_int_equal(rfs_rowmap_copy(&m, 10, sizeof(out), out), 0);
		assert_memory_equal(out, f.data + 10, sizeof(out));
	}
	rfs_rowmap_close(&m);
	drop_file(&f);
}

/* Outside a copy, SIGBUS is what it was: the process dies of it. */
static void test_other_sigbus_still_kills(void **state)
{
	(void)state;
	struct file f;
	make_file(&f);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rfs_rowmap m;
		signal(SIGBUS, SIG_DFL); /* not cmocka's handler */
		if (rfs_rowmap_open(&m, f.fd, 0, f.size) != 0 ||
		    truncate(f.path, (off_t)f.page) != 0)
			_exit(3);
		volatile unsigned char c = m.base[3 * f.page];
		(void)c;
		_exit(0);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status))
		assert_int_equal(WTERMSIG(status), SIGBUS);
	else /* AddressSanitizer reports the fault and exits non-zero */
		assert_true(WEXITSTATUS(status) != 0 &&
			    WEXITSTATUS(status) != 3);
	drop_file(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_copies_match_the_file),
		cmocka_unit_test(test_gather_copies_each_piece),
		cmocka_unit_test(test_resident_follows_the_page_cache),
		cmocka_unit_test(test_shrunk_file_is_eio_not_sigbus),
		cmocka_unit_test(test_other_sigbus_still_kills),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
