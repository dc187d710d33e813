/* SPDX-License-Identifier: MIT */
/*
 * libfuse 3.14's signal handlers only set the session's exit flag. Its
 * loops look at the flag between waits (sem_wait in the multithreaded
 * loop, read of /dev/fuse in the single-threaded one), and a signal's
 * interruption is what ends the wait: a signal that comes after the look
 * and before the wait is lost, and the daemon then runs on until the next
 * request (libfuse pull request #1201, first in 3.18). CI saw a SIGHUP
 * leave a mount up for more than 20 seconds; a job's SIGTERM at the end
 * of training must not. Here the handler also wakes a helper thread,
 * which sends the same signal again to the loop's thread every 20 ms
 * until the loop returns: each one interrupts the wait it is in, and the
 * loop then sees the flag. A request the loop's thread is serving then
 * (with -s) may see EINTR too; the daemon's reads and writes retry it.
 */
#include "stop_signal.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>

#include "os/quiet_thread.h"

static const int stop_signals[] = { SIGTERM, SIGINT, SIGHUP };
#define STOP_SIGNALS (sizeof(stop_signals) / sizeof(stop_signals[0]))
#define KICK_INTERVAL_NS (20 * 1000 * 1000)

static struct fuse_session *session;
static pthread_t loop_thread, kicker;
static sem_t asked; /* posted by the handler, and by end() */
static atomic_int which; /* the first signal taken (lock-free) */
static atomic_int loop_returned;
static struct sigaction before[STOP_SIGNALS];

static void on_stop(int sig)
{
	int saved = errno;
	fuse_session_exit(session); /* a store, as libfuse's handler does */
	int none = 0;
	atomic_compare_exchange_strong(&which, &none, sig);
	sem_post(&asked); /* async-signal-safe */
	errno = saved;
}

static void *kick_loop(void *unused)
{
	(void)unused;
	while (sem_wait(&asked) != 0) /* EINTR */
		;
	struct timespec interval = { 0, KICK_INTERVAL_NS };
	int sig = atomic_load(&which); /* 0: posted by end(), no signal */
	while (sig && !atomic_load(&loop_returned)) {
		pthread_kill(loop_thread, sig);
		nanosleep(&interval, NULL);
	}
	return NULL;
}

int rfs_stop_signal_start(struct fuse_session *se)
{
	session = se;
	loop_thread = pthread_self();
	atomic_store(&which, 0);
	atomic_store(&loop_returned, 0);
	if (sem_init(&asked, 0, 0) != 0)
		return -errno;
	int rc = rfs_quiet_thread_create(&kicker, "rankfs-stop", kick_loop,
					 NULL);
	if (rc != 0) {
		sem_destroy(&asked);
		return rc;
	}
	/* No SA_RESTART: the wait must be interrupted. */
	struct sigaction sa = { .sa_handler = on_stop, .sa_flags = 0 };
	sigemptyset(&sa.sa_mask); /* one at a time: the first is kept */
	for (size_t i = 0; i < STOP_SIGNALS; i++)
		sigaddset(&sa.sa_mask, stop_signals[i]);
	for (size_t i = 0; i < STOP_SIGNALS; i++)
		sigaction(stop_signals[i], &sa, &before[i]);
	return 0;
}

int rfs_stop_signal_end(void)
{
	atomic_store(&loop_returned, 1);
	sem_post(&asked); /* the helper stops, signal or not */
	pthread_join(kicker, NULL);
	/* Only the loop's thread takes these signals (every other thread
	 * blocks them), and it is here: no handler posts while it goes. */
	for (size_t i = 0; i < STOP_SIGNALS; i++)
		sigaction(stop_signals[i], &before[i], NULL);
	sem_destroy(&asked);
	return atomic_load(&which);
}
