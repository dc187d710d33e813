/* SPDX-License-Identifier: MIT */
/* Opening the files of a source that is a directory (a zarr store) so
 * that nothing outside it is read: a chunk that is a link to /etc/shadow,
 * or into the mount itself, must not be followed, whoever wrote the
 * store and whoever mounts it (root, allow_other). */
#ifndef RFS_BENEATH_H
#define RFS_BENEATH_H

/* Opens path, a file below root (path is root, a '/', then the rest),
 * read-only and non-blocking (a FIFO's open waits for no writer),
 * resolving the rest beneath root_fd, root's directory: a link that
 * leads out of it (absolute, or up past it), or one of /proc's magic
 * links, fails with EXDEV. The caller checks what it opened is a
 * regular file. Thread-safe.
 * @return the descriptor, or a negative errno. */
int rfs_open_beneath(int root_fd, const char *root, const char *path);

/* What an errno of rfs_open_beneath says: strerror(), or for EXDEV that
 * a link leads out of the source. */
const char *rfs_beneath_strerror(int err);

#endif
