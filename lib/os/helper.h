/* SPDX-License-Identifier: MIT */
/* A helper process for work that may crash or hang (HDF5 reading a
 * damaged file), answering requests in turn on a socket, started with
 * posix_spawn when first asked and again after it died (a fork of the
 * daemon copies its page tables and maybe a lock another thread holds).
 * Its owner (a dataset) stops it. The program is looked for beside the
 * running executable (build/; .device/lib/, device-pack's loader), one
 * folder up (build/tests/), in ../libexec/rankfs/ from it, then in
 * RFS_LIBEXECDIR; else the running executable is started as it. */
#ifndef RFS_HELPER_H
#define RFS_HELPER_H

struct rfs_helper;

/* No process yet. @return 0 or -ENOMEM. */
int rfs_helper_create(struct rfs_helper **out);

/* Takes h for one request and returns the socket (SOCK_STREAM) of its
 * process, program started if none runs (its end is descriptor 3, its
 * stderr /dev/null). @return the socket, or a negative errno (not
 * started: logged); rfs_helper_end() follows either way. */
int rfs_helper_begin(struct rfs_helper *h, const char *program);

/* Ends the request. failed: the process did not answer: it is killed
 * if it still runs and reaped, *status its wait status (else 0). */
void rfs_helper_end(struct rfs_helper *h, int failed, int *status);

/* Ends the process, if one runs; a later request starts another. */
void rfs_helper_stop(struct rfs_helper *h);

/* Stops it and frees h. Accepts NULL. */
void rfs_helper_destroy(struct rfs_helper *h);

#endif
