/*
 * Through FUSE, every read of a generated file is a request: a handler
 * wakes, copies the bytes into the kernel's pages (or the reader's
 * buffer), and the pages are dropped again at close. With passthrough
 * the open hands the kernel a file holding the bytes, a memfd filled
 * once here, and the kernel reads it like any tmpfs file: no request, no
 * copy in the daemon, no pages to drop, no context switch per read.
 *
 * The kernel takes one backing file per inode at a time (an open of an
 * inode in another mode, or with another backing file, fails with EIO):
 * opens of a file while one is open share its memfd, and the last release
 * unregisters it. A memfd is sealed once filled and never reused: a
 * mapping of the file keeps its bytes after close.
 *
 * libfuse 3.14 predates passthrough: the session's I/O is wrapped to ask
 * for it in the INIT reply when the kernel offers it, and opens are
 * answered with the reply written here (passthrough_wire.c).
 */
#include "passthrough.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fs.h"
#include "log.h"
#include "passthrough_wire.h"

#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U /* Linux 6.3 */
#endif

/* An inode opened through passthrough, and its backing id. */
struct backed {
	uint64_t ino;
	int id; /* 0 while the first open registers it */
	unsigned opens;
	struct backed *next;
};

struct rfs_passthrough {
	int fd; /* the session's /dev/fuse */
	_Atomic uint64_t init_unique; /* the INIT request offering it */
	atomic_int on; /* asked for, and the kernel has not refused */
	pthread_mutex_t lock;
	pthread_cond_t registered;
	struct backed *open; /* protected by lock */
};

static const char off_reads_fuse[] = "; reads go through FUSE";

static ssize_t read_request(int fd, void *buf, size_t len, void *userdata)
{
	struct rfs_passthrough *p = ((struct rfs_fs *)userdata)->passthrough;
	ssize_t n = read(fd, buf, len);
	uint64_t unique;
	int offers = n > 0 ? rfs_wire_init_offers(buf, (size_t)n, &unique) :
			     -1;
	if (offers == 1)
		atomic_store(&p->init_unique, unique);
	else if (offers == 0)
		rfs_log("FUSE passthrough off: the kernel does not offer it "
			"(Linux 6.9+ built with CONFIG_FUSE_PASSTHROUGH)%s",
			off_reads_fuse);
	return n;
}

/* A memfd holding what fill writes (nothing: fill NULL), sealed.
 * @return its descriptor or -errno. */
static int memfd_with(rfs_passthrough_fill *fill, void *ctx)
{
	int fd = memfd_create("rankfs", MFD_CLOEXEC | MFD_NOEXEC_SEAL);
	if (fd < 0 && errno == EINVAL) /* before Linux 6.3 */
		fd = memfd_create("rankfs", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	int rc = fill ? fill(ctx, fd) : 0;
	if (rc != 0) {
		close(fd);
		return rc;
	}
	/* Nothing changes it now, not even by mistake. */
	fcntl(fd, F_ADD_SEALS,
	      F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	return fd;
}

/* A backing id for what fill writes. @return it, or -errno. */
static int register_bytes(struct rfs_passthrough *p,
			  rfs_passthrough_fill *fill, void *ctx)
{
	int fd = memfd_with(fill, ctx);
	if (fd < 0)
		return fd;
	struct rfs_backing_map map = { .fd = fd };
	int id = ioctl(p->fd, RFS_DEV_IOC_BACKING_OPEN, &map);
	int err = errno;
	close(fd); /* the kernel holds its own reference */
	if (id > 0)
		return id;
	/* Not for want of memory: every open would be refused alike. */
	if (err != ENOMEM && atomic_exchange(&p->on, 0))
		rfs_log("FUSE passthrough off: the kernel refused a backing "
			"file: %s (it needs CAP_SYS_ADMIN outside a user "
			"namespace)%s", strerror(err), off_reads_fuse);
	return -err;
}

static void unregister(struct rfs_passthrough *p, int id)
{
	uint32_t arg = (uint32_t)id;
	if (ioctl(p->fd, RFS_DEV_IOC_BACKING_CLOSE, &arg) != 0)
		rfs_log("FUSE passthrough: unregistering backing file %d: %s",
			id, strerror(errno));
}

/* The INIT reply (header, then fuse_init_out) to the request that offered
 * passthrough: sent asking for it. The kernel takes the reply within the
 * write, and may send opens at once: `on` is set before, and undone if
 * the kernel then refuses a backing file (the probe, an empty one). */
static ssize_t write_init(struct rfs_passthrough *p, int fd,
			  struct iovec *iov)
{
	unsigned char body[256];
	if (iov[1].iov_len > sizeof(body)) {
		rfs_log("FUSE passthrough off: an INIT reply of %zu bytes%s",
			iov[1].iov_len, off_reads_fuse);
		return writev(fd, iov, 2);
	}
	memcpy(body, iov[1].iov_base, iov[1].iov_len);
	if (!rfs_wire_init_ask(body, iov[1].iov_len)) {
		rfs_log("FUSE passthrough off: libfuse's INIT reply has no "
			"room for it%s", off_reads_fuse);
		return writev(fd, iov, 2);
	}
	struct iovec patched[2] = { iov[0], { body, iov[1].iov_len } };
	atomic_store(&p->on, 1);
	ssize_t rc = writev(fd, patched, 2);
	int err = errno;
	int id = rc >= 0 ? register_bytes(p, NULL, NULL) : -1;
	if (id > 0) {
		unregister(p, id);
		rfs_log("FUSE passthrough on: the kernel reads opened files "
			"from memory the daemon fills once per open");
	}
	if (rc < 0)
		atomic_store(&p->on, 0);
	errno = err;
	return rc;
}

static ssize_t write_reply(int fd, struct iovec *iov, int count,
			   void *userdata)
{
	struct rfs_passthrough *p = ((struct rfs_fs *)userdata)->passthrough;
	uint64_t init = atomic_load(&p->init_unique);
	if (init && count == 2 &&
	    iov[0].iov_len == sizeof(struct fuse_out_header) &&
	    ((struct fuse_out_header *)iov[0].iov_base)->unique == init &&
	    ((struct fuse_out_header *)iov[0].iov_base)->error == 0) {
		atomic_store(&p->init_unique, 0);
		return write_init(p, fd, iov);
	}
	return writev(fd, iov, count);
}

int rfs_passthrough_attach(struct fuse_session *se,
			   struct rfs_passthrough **out)
{
	static const struct fuse_custom_io io = { .read = read_request,
						  .writev = write_reply };
	struct rfs_passthrough *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->fd = fuse_session_fd(se);
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->registered, NULL);
	*out = p;
	/* The mounted descriptor again (libfuse 3.14 only installs the
	 * hooks): libfuse still unmounts and closes it, once. */
	int rc = fuse_session_custom_io(se, &io, p->fd);
	if (rc != 0) {
		rfs_passthrough_destroy(p);
		*out = NULL;
	}
	return rc < 0 ? rc : rc > 0 ? -EINVAL : 0;
}

void rfs_passthrough_destroy(struct rfs_passthrough *p)
{
	if (!p)
		return;
	while (p->open) {
		struct backed *b = p->open;
		p->open = b->next;
		free(b);
	}
	pthread_cond_destroy(&p->registered);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

int rfs_passthrough_on(struct rfs_passthrough *p)
{
	return p && atomic_load(&p->on);
}

static struct backed **find(struct rfs_passthrough *p, uint64_t ino)
{
	struct backed **at = &p->open;
	while (*at && (*at)->ino != ino)
		at = &(*at)->next;
	return at;
}

/* ino's entry once registered, or NULL; with p->lock held. */
static struct backed *registered(struct rfs_passthrough *p, uint64_t ino)
{
	struct backed *b = *find(p, ino);
	while (b && b->id == 0) {
		pthread_cond_wait(&p->registered, &p->lock);
		b = *find(p, ino);
	}
	return b;
}

/* One open of ino less; its backing id is dropped with the last. */
static void drop_open(struct rfs_passthrough *p, uint64_t ino)
{
	pthread_mutex_lock(&p->lock);
	struct backed **at = find(p, ino), *b = *at;
	if (b && --b->opens == 0) {
		*at = b->next;
		unregister(p, b->id);
		free(b);
	}
	pthread_mutex_unlock(&p->lock);
}

/* Answers req with ino's backing id. */
static void reply(struct rfs_passthrough *p, fuse_req_t req, uint64_t ino,
		  int id)
{
	struct rfs_open_out out;
	rfs_wire_open_passthrough(&out, 1, id);
	/* Not delivered (the open was interrupted): no release will come. */
	if (fuse_reply_buf(req, (const char *)&out, sizeof(out)) != 0)
		drop_open(p, ino);
}

int rfs_passthrough_share(struct rfs_passthrough *p, fuse_req_t req,
			  uint64_t ino)
{
	/* Whatever `on` says now: an inode with a backing file must be
	 * opened with it. */
	pthread_mutex_lock(&p->lock);
	struct backed *b = registered(p, ino);
	int id = b ? b->id : 0;
	if (b)
		b->opens++;
	pthread_mutex_unlock(&p->lock);
	if (!id)
		return -ENOENT;
	reply(p, req, ino, id);
	return 0;
}

int rfs_passthrough_reply_open(struct rfs_passthrough *p, fuse_req_t req,
			       uint64_t ino, rfs_passthrough_fill *fill,
			       void *ctx)
{
	pthread_mutex_lock(&p->lock);
	struct backed *b = registered(p, ino);
	if (b) {
		b->opens++;
	} else if (!atomic_load(&p->on)) {
		pthread_mutex_unlock(&p->lock);
		return -EOPNOTSUPP;
	} else if ((b = calloc(1, sizeof(*b)))) {
		/* Registered outside the lock; opens of ino wait for it. */
		*b = (struct backed){ .ino = ino, .opens = 1, .next = p->open };
		p->open = b;
		pthread_mutex_unlock(&p->lock);
		int id = register_bytes(p, fill, ctx);
		pthread_mutex_lock(&p->lock);
		if (id > 0) {
			b->id = id;
		} else {
			*find(p, ino) = b->next;
			free(b);
			b = NULL;
		}
		pthread_cond_broadcast(&p->registered);
		if (!b) {
			pthread_mutex_unlock(&p->lock);
			return id;
		}
	}
	int id = b ? b->id : 0;
	pthread_mutex_unlock(&p->lock);
	if (!id)
		return -ENOMEM;
	reply(p, req, ino, id);
	return 0;
}

void rfs_passthrough_release(struct rfs_passthrough *p, uint64_t ino)
{
	drop_open(p, ino);
}
