/* SPDX-License-Identifier: MIT */
#include "source/io/rowmap.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define PROBE_INTERVAL_MS 1000
#define PROBE_SAMPLES 64

static pthread_mutex_t install_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction previous; /* the handler ours stands in front of */
/* The copy this thread is in, if any: where its SIGBUS jumps to. */
static __thread sigjmp_buf *volatile guard;

static void on_sigbus(int sig, siginfo_t *info, void *ctx)
{
	sigjmp_buf *g = guard;
	/* A fault in the copy (si_code > 0: raised by the kernel for an
	 * access, not sent with kill). */
	if (g && info && info->si_code > 0) {
		guard = NULL;
		siglongjmp(*g, 1);
	}
	/* Not a guarded copy: what would have happened without us. */
	if (previous.sa_flags & SA_SIGINFO) {
		previous.sa_sigaction(sig, info, ctx);
	} else if (previous.sa_handler != SIG_DFL &&
		   previous.sa_handler != SIG_IGN) {
		previous.sa_handler(sig);
	} else {
		/* SA_NODEFER: the default action happens right here. */
		signal(sig, previous.sa_handler);
		raise(sig);
	}
}

/* Puts the guard's handler in front unless it is there: someone may have
 * replaced it since (a test harness does, per test, and may put ours back
 * with signal(), without SA_SIGINFO: compared by address, so `previous`
 * is never ours and cannot recurse). */
static int install_guard(void)
{
	struct sigaction now, sa;
	int rc;
	pthread_mutex_lock(&install_lock);
	rc = sigaction(SIGBUS, NULL, &now);
	if (rc == 0 && now.sa_sigaction != on_sigbus) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = on_sigbus;
		sa.sa_flags = SA_SIGINFO | SA_NODEFER;
		sigemptyset(&sa.sa_mask);
		rc = sigaction(SIGBUS, &sa, &previous);
	}
	rc = rc == 0 ? 0 : -errno;
	pthread_mutex_unlock(&install_lock);
	return rc;
}

int rfs_rowmap_open(struct rfs_rowmap *m, int fd, uint64_t offset, uint64_t len)
{
	int rc = install_guard();
	if (rc != 0)
		return rc;
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t start = offset - offset % page;
	if (len == 0 || offset + len < offset ||
	    offset + len - start > SIZE_MAX)
		return -EINVAL;
	size_t map_len = (size_t)(offset + len - start);
	void *p = mmap(NULL, map_len, PROT_READ, MAP_SHARED, fd, (off_t)start);
	if (p == MAP_FAILED)
		return -errno;
	memset(m, 0, sizeof(*m));
	m->map = p;
	m->map_len = map_len;
	m->base = (const unsigned char *)p + (offset - start);
	m->fd = fd;
	m->offset = offset;
	return 0;
}

void rfs_rowmap_close(struct rfs_rowmap *m)
{
	if (m->map)
		munmap(m->map, m->map_len);
	m->map = NULL;
}

/* splitmix64: the sample positions of probe number n. */
static uint64_t mix(uint64_t x)
{
	x += UINT64_C(0x9e3779b97f4a7c15);
	x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
	return x ^ (x >> 31);
}

int rfs_rowmap_probe(struct rfs_rowmap *m)
{
	if (!m->map)
		return -1;
	/* mincore() would tell exactly, but only for files the daemon owns
	 * or may write (Linux 5.2+). A read that must not wait tells for any
	 * file; but a miss starts readahead there, so the next probe looks
	 * elsewhere (random pages), and the first miss ends the probe (one
	 * readahead a second on cold data). */
	uint64_t len = m->map_len - (size_t)(m->base - (unsigned char *)m->map);
	uint64_t seed = atomic_fetch_add(&m->probes, 1) * PROBE_SAMPLES;
	for (unsigned k = 0; k < PROBE_SAMPLES; k++) {
		char byte;
		struct iovec iov = { &byte, 1 };
		off_t at = (off_t)(m->offset + mix(seed + k) % len);
		ssize_t got = preadv2(m->fd, &iov, 1, at, RWF_NOWAIT);
		if (got < 0 && errno == EAGAIN)
			return 0;
		if (got != 1)
			return -1;
	}
	return 1;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int rfs_rowmap_resident(struct rfs_rowmap *m)
{
	if (!m->map)
		return 0;
	int64_t now = now_ms() + 1; /* never 0, which means "never" */
	int64_t last = atomic_load(&m->probed_ms);
	/* One thread probes; the others go by the verdict they find. */
	if ((last == 0 || now - last >= PROBE_INTERVAL_MS) &&
	    atomic_compare_exchange_strong(&m->probed_ms, &last, now))
		atomic_store(&m->resident, rfs_rowmap_probe(m) == 1);
	return atomic_load(&m->resident);
}

int rfs_rowmap_copy(const struct rfs_rowmap *m, uint64_t off, size_t len,
		    void *dst)
{
	unsigned char *to = dst;
	size_t failed;
	return rfs_rowmap_gather(m, &off, 1, 1, len, &to, &failed);
}

int rfs_rowmap_gather(const struct rfs_rowmap *m, const uint64_t *at,
		      uint64_t unit, size_t n, size_t len,
		      unsigned char *const *to, size_t *failed)
{
	sigjmp_buf env;
	volatile size_t k = 0; /* read after the jump */
	if (sigsetjmp(env, 0) != 0) {
		*failed = k;
		return -EIO;
	}
	guard = &env;
	atomic_signal_fence(memory_order_seq_cst);
	for (size_t i = 0; i < n; i++) {
		k = i;
		/* Keeps the copy of piece i after k names it. */
		atomic_signal_fence(memory_order_seq_cst);
		memcpy(to[i], m->base + at[i] * unit, len);
	}
	atomic_signal_fence(memory_order_seq_cst);
	guard = NULL;
	return 0;
}
