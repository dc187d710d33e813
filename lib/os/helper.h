/* SPDX-License-Identifier: MIT */
/* A helper process: one of rankfs's programs, for work that may crash or
 * hang (HDF5 reading a damaged file), answering requests in turn on a
 * socket. Started with posix_spawn when first asked, and again after it
 * died: a fork of the daemon would copy the page tables of a process
 * holding many files and, beside a running thread, maybe a lock that
 * thread holds. Its owner (a dataset, for its sources) stops it.
 *
 * The program is looked for beside the running executable (build/;
 * .device/lib/, scripts/device-pack's loader), one folder up
 * (build/tests/), in ../libexec/rankfs/ from it (an install, wherever it
 * was moved), then where it was configured to install (RFS_LIBEXECDIR). */
#ifndef RFS_HELPER_H
#define RFS_HELPER_H

struct rfs_helper;

/* No process yet. @return 0 or -ENOMEM. */
int rfs_helper_create(struct rfs_helper **out);

/* Takes h for one request and returns the socket (SOCK_STREAM) of its
 * process, program started if none runs (its end is descriptor 3, its
 * stderr /dev/null). @return the socket, or a negative errno (not
 * started: logged once); rfs_helper_end() follows either way. */
int rfs_helper_begin(struct rfs_helper *h, const char *program);

/* Ends the request. failed: the process did not answer: it is killed
 * if it still runs and reaped, *status its wait status (else 0). */
void rfs_helper_end(struct rfs_helper *h, int failed, int *status);

/* Ends the process, if one runs; a later request starts another. */
void rfs_helper_stop(struct rfs_helper *h);

/* Stops it and frees h. Accepts NULL. */
void rfs_helper_destroy(struct rfs_helper *h);

#endif
