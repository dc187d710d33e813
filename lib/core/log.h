/* SPDX-License-Identifier: MIT */
/* Logging: one line per event, to stderr until a log file or syslog is
 * set. */
#ifndef RFS_LOG_H
#define RFS_LOG_H

#include <pthread.h>
#include <stdint.h>

/* Sends later lines to the file open for appending at fd, which is taken
 * (closed on failure, else kept open for the life of the process).
 * @return 0 or -errno. Call before threads start. */
int rfs_log_set_fd(int fd);

/* Sends lines to syslog (as rankfs[PID], LOG_DAEMON) unless a file is
 * set: stderr is /dev/null once daemonised. Call before threads start. */
void rfs_log_to_syslog(void);

/* The last line this thread logged (rfs_log, or rfs_log_limited's,
 * logged or dropped) since it called rfs_log_thread_forget(), up to 511
 * bytes, "" if none: what a failed task logged last, to say why it
 * failed. Valid for the thread's life. */
const char *rfs_log_thread_last(void);
void rfs_log_thread_forget(void);

/* Thread-safe; prefixes a timestamp and "rankfs: ". */
void rfs_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* An error on stderr, one line: "rankfs: " and the message, its control
 * characters escaped as in the log's lines (it may name a path). */
void rfs_log_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Lines that may repeat at any rate (one per failed read): within a
 * minute each distinct line (a cause: a chunk, a range of rows) is logged
 * once, up to RFS_LOG_CAUSES of them, and its repeats and any further
 * causes are only counted; the first line after the minute is logged with
 * the count of those it stood for, and rfs_log_limit_destroy() logs the
 * count of those no such line came for. One limit per source (or call
 * site). */
#define RFS_LOG_CAUSES 16
struct rfs_log_limit {
	long long minute_start; /* CLOCK_MONOTONIC seconds; 0: never */
	unsigned long long dropped; /* since the last line logged */
	uint64_t causes[RFS_LOG_CAUSES]; /* hashes of this minute's lines */
	unsigned ncauses;
	char *last; /* the last line logged, for the count at destroy */
	pthread_mutex_t lock;
};
#define RFS_LOG_LIMIT_INIT                        \
	{                                         \
		.lock = PTHREAD_MUTEX_INITIALIZER \
	}

void rfs_log_limited(struct rfs_log_limit *l, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* As rfs_log_limited, for lines whose cause is cause rather than the line
 * itself (a changed file refuses every batch: the rows of each differ). */
void rfs_log_limited_by(struct rfs_log_limit *l, const char *cause,
			const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* A limit that is not static (one per source, say). Destroy logs the
 * lines counted since the last one logged, if any (with the last line
 * logged, prefixed "at exit: "), and frees what the limit holds; call it
 * once no thread logs through l. */
void rfs_log_limit_init(struct rfs_log_limit *l);
void rfs_log_limit_destroy(struct rfs_log_limit *l);

#endif
