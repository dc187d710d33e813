/* FUSE passthrough (option passthrough; Linux 6.9+, CAP_SYS_ADMIN): at
 * open, a generated file's bytes are copied into a memfd that the kernel
 * then reads from itself, so no read request reaches the daemon and no
 * page of the file passes through FUSE (passthrough.c says why). */
#ifndef RFS_PASSTHROUGH_H
#define RFS_PASSTHROUGH_H

#include <fuse_lowlevel.h>
#include <stddef.h>
#include <stdint.h>

struct rfs_passthrough;

/* Wraps the mounted session's I/O so that its INIT reply asks for
 * passthrough where the kernel offers it. Call before the loop runs; the
 * session's userdata must be the struct rfs_fs holding *out.
 * @return 0 or a negative errno. */
int rfs_passthrough_attach(struct fuse_session *se,
			   struct rfs_passthrough **out);

/* After the session is destroyed. Accepts NULL. */
void rfs_passthrough_destroy(struct rfs_passthrough *p);

/* Writes a file's bytes into fd, a new memfd, from offset 0.
 * @return 0 or a negative errno. */
typedef int rfs_passthrough_fill(void *ctx, int fd);

/* Answers req, an open of inode ino, so that the kernel serves the bytes
 * fill(ctx) writes itself (those of the first of ino's open files, while
 * any is open). @return 0 answered, with a file handle of 1; a negative errno:
 * nothing was answered (passthrough is off, was refused, or failed),
 * answer as usual (with direct_io while rfs_passthrough_on(): an open
 * through the page cache would keep the kernel from taking a backing file
 * for ino until it is released). */
int rfs_passthrough_reply_open(struct rfs_passthrough *p, fuse_req_t req,
			       uint64_t ino, rfs_passthrough_fill *fill,
			       void *ctx);

/* 1 while passthrough is asked for and not refused. */
int rfs_passthrough_on(struct rfs_passthrough *p);

/* Answers req, an open of inode ino, with the bytes ino's open files
 * already share. @return 0 answered; a negative errno: nothing was
 * answered (none is open: generate, then rfs_passthrough_reply_open()). */
int rfs_passthrough_share(struct rfs_passthrough *p, fuse_req_t req,
			  uint64_t ino);

/* The release of an open answered by rfs_passthrough_reply_open(). */
void rfs_passthrough_release(struct rfs_passthrough *p, uint64_t ino);

#endif
