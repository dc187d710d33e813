/* SPDX-License-Identifier: MIT */
#include "core/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

/* NULL: stderr, or syslog once set; both written once before threads */
static FILE *log_stream;
static int syslogged;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread char last_line[512]; /* since rfs_log_thread_forget() */

int rfs_log_set_fd(int fd)
{
	FILE *f = fdopen(fd, "a");
	if (!f) {
		int rc = -errno;
		close(fd);
		return rc;
	}
	setvbuf(f, NULL, _IOLBF, 0);
	log_stream = f;
	return 0;
}

void rfs_log_to_syslog(void)
{
	openlog("rankfs", LOG_PID, LOG_DAEMON);
	syslogged = 1;
}

static void remember(const char *line)
{
	snprintf(last_line, sizeof(last_line), "%s", line);
}

const char *rfs_log_thread_last(void)
{
	return last_line;
}

void rfs_log_thread_forget(void)
{
	last_line[0] = '\0';
}

/* s with its control characters escaped (\n, \t, \xHH): a name holding
 * a newline (a source's, say) cannot forge a line. NULL: out of memory. */
static char *escaped(const char *s)
{
	char *out = malloc(4 * strlen(s) + 1), *p = out;
	for (const unsigned char *c = (const unsigned char *)s; out && *c; c++)
		if (*c >= 0x20 && *c != 0x7f)
			*p++ = (char)*c;
		else if (*c == '\n' || *c == '\t')
			p += sprintf(p, "\\%c", *c == '\n' ? 'n' : 't');
		else
			p += sprintf(p, "\\x%02x", *c);
	if (out)
		*p = '\0';
	return out;
}

/* One line to out, stamped (the log) or not (an error on stderr); NULL:
 * to syslog, which stamps the line and names us. */
static void log_line(FILE *out, int stamped, const char *fmt, va_list ap)
{
	char *line, *esc, stamp[32] = "";
	struct timespec ts;
	struct tm tm;
	if (vasprintf(&line, fmt, ap) < 0)
		return;
	if (stamped)
		remember(line);
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	if (stamped)
		strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ ", &tm);
	if ((esc = escaped(line)) && !out) {
		syslog(LOG_WARNING, "%s", esc);
	} else if (esc) {
		pthread_mutex_lock(&log_lock);
		fprintf(out, "%srankfs: %s\n", stamp, esc);
		fflush(out);
		pthread_mutex_unlock(&log_lock);
	}
	free(esc);
	free(line);
}

void rfs_log_say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_line(stderr, 0, fmt, ap);
	va_end(ap);
}

void rfs_log(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_line(log_stream ? log_stream : (syslogged ? NULL : stderr), 1, fmt,
		 ap);
	va_end(ap);
}

void rfs_log_limit_init(struct rfs_log_limit *l)
{
	*l = (struct rfs_log_limit){ 0 };
	pthread_mutex_init(&l->lock, NULL);
}

void rfs_log_limit_destroy(struct rfs_log_limit *l)
{
	/* No later minute's line will count them: said now, with the last
	 * line logged to say what they were like. */
	if (l->dropped && l->last)
		rfs_log("at exit: %s (and %llu more like these, not logged)",
			l->last, l->dropped);
	free(l->last);
	l->last = NULL;
	pthread_mutex_destroy(&l->lock);
}

/* 1 when this minute has logged line (hash h): a repeat of its cause. */
static int seen(const struct rfs_log_limit *l, uint64_t h)
{
	for (unsigned i = 0; i < l->ncauses; i++)
		if (l->causes[i] == h)
			return 1;
	return 0;
}

static void limited(struct rfs_log_limit *l, const char *cause, const char *fmt,
		    va_list ap)
{
	char *line;
	if (vasprintf(&line, fmt, ap) < 0)
		return;
	if (!cause)
		cause = line;
	uint64_t h = XXH3_64bits(cause, strlen(cause));
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	long long now = (long long)ts.tv_sec + 1; /* never 0 */
	unsigned long long dropped = 0;
	pthread_mutex_lock(&l->lock);
	if (!l->minute_start || now - l->minute_start >= 60) {
		l->minute_start = now;
		l->ncauses = 0;
		dropped = l->dropped;
		l->dropped = 0;
	}
	if (seen(l, h) || l->ncauses == RFS_LOG_CAUSES) {
		l->dropped++;
		pthread_mutex_unlock(&l->lock);
		remember(line); /* dropped, still this thread's reason */
		free(line);
		return;
	}
	l->causes[l->ncauses++] = h;
	/* Written under the limit's lock: a caller whose repeat is dropped
	 * returns (and its reader is told EIO) only once the line that
	 * stands for it is in the log. */
	char suffix[96] = "";
	if (dropped)
		snprintf(suffix, sizeof(suffix),
			 " (and %llu more like these, not logged)", dropped);
	rfs_log("%s%s", line, suffix);
	remember(line); /* without the count */
	free(l->last);
	l->last = line;
	pthread_mutex_unlock(&l->lock);
}

void rfs_log_limited(struct rfs_log_limit *l, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	limited(l, NULL, fmt, ap);
	va_end(ap);
}

void rfs_log_limited_by(struct rfs_log_limit *l, const char *cause,
			const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	limited(l, cause, fmt, ap);
	va_end(ap);
}
