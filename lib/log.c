#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

static FILE *log_stream; /* NULL: stderr; written once before threads */
static int silenced;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

int rfs_log_set_file(const char *path)
{
	FILE *f = fopen(path, "ae");
	if (!f)
		return -errno;
	setvbuf(f, NULL, _IOLBF, 0);
	log_stream = f;
	return 0;
}

void rfs_log_silence_stderr(void)
{
	silenced = 1;
}

void rfs_log(const char *fmt, ...)
{
	FILE *out = log_stream ? log_stream : (silenced ? NULL : stderr);
	if (!out)
		return;
	char stamp[32];
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);

	va_list ap;
	va_start(ap, fmt);
	pthread_mutex_lock(&log_lock);
	fprintf(out, "%s rankfs: ", stamp);
	vfprintf(out, fmt, ap);
	fputc('\n', out);
	fflush(out);
	pthread_mutex_unlock(&log_lock);
	va_end(ap);
}
