/* Logging: one line per event, to stderr until a log file is set. */
#ifndef RFS_LOG_H
#define RFS_LOG_H

#include <pthread.h>

/* Sends later lines to path (appended, created if missing). For tests and
 * tools: the daemon checks what its log_file is first (fs/main.c).
 * @return 0 or -errno. Call before threads start. */
int rfs_log_set_file(const char *path);

/* Sends later lines to the file open for appending at fd, which is taken
 * (closed on failure, else kept open for the life of the process).
 * @return 0 or -errno. Call before threads start. */
int rfs_log_set_fd(int fd);

/* Drops lines (stderr is /dev/null once daemonised) unless a file is set. */
void rfs_log_silence_stderr(void);

/* Thread-safe; prefixes a timestamp and "rankfs: ". */
void rfs_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A line that may repeat at any rate (one per failed read): the first is
 * logged, later ones within a minute are only counted, and the next one
 * after the minute is logged with the count of those it stood for. One
 * limit per call site, zero-initialised (static). */
struct rfs_log_limit {
	long long minute_start; /* CLOCK_MONOTONIC seconds; 0: never */
	unsigned long long dropped; /* since the last line logged */
	pthread_mutex_t lock;
};
#define RFS_LOG_LIMIT_INIT                      \
	{                                       \
		0, 0, PTHREAD_MUTEX_INITIALIZER \
	}

void rfs_log_limited(struct rfs_log_limit *l, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* A limit that is not static (one per source, say). */
void rfs_log_limit_init(struct rfs_log_limit *l);
void rfs_log_limit_destroy(struct rfs_log_limit *l);

#endif
