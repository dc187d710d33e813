/* Logging: one line per event, to stderr until a log file is set. */
#ifndef RFS_LOG_H
#define RFS_LOG_H

/* Sends later lines to path (appended). @return 0 or -errno. Call before
 * threads start. */
int rfs_log_set_file(const char *path);

/* Drops lines (stderr is /dev/null once daemonised) unless a file is set. */
void rfs_log_silence_stderr(void);

/* Thread-safe; prefixes a timestamp and "rankfs: ". */
void rfs_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
