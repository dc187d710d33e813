/* SPDX-License-Identifier: MIT */
/* What is mounted where, from /proc/self/mountinfo (proc(5)): main.c
 * refuses a mountpoint that already is one and finds its own mount's
 * device; memlimit.c finds the cgroup hierarchies. */
#ifndef RFS_MOUNTINFO_H
#define RFS_MOUNTINFO_H

struct rfs_mount_entry {
	char majmin[32]; /* the device, "0:52" */
	char root[4096]; /* the directory of the filesystem mounted, "/" */
	char point[4096]; /* where, "/sys/fs/cgroup/memory" */
	char fstype[256]; /* "tmpfs", "fuse.rankfs", "cgroup2" */
	char source[4096]; /* "tmpfs", "/data/a.h5ad"; may be "none" */
	char superopts[1024]; /* "rw,memory" */
};

/* Calls fn for each mount listed in the mountinfo file path (NULL:
 * /proc/self/mountinfo), in its order, escapes decoded, until fn returns
 * non-zero. @return fn's non-zero value, 0 after the last line, or
 * -errno of opening path. */
int rfs_mountinfo_each(const char *path,
		       int (*fn)(const struct rfs_mount_entry *e, void *arg),
		       void *arg);

/* Looks up the mount at point (an absolute, real path, as mountinfo
 * names mount points) in path (NULL: /proc/self/mountinfo). Of several
 * mounts at point, the last listed, the one on top. @return 0 with out
 * filled, -ENOENT if nothing is mounted there, or -errno of opening
 * path. */
int rfs_mountinfo_find(const char *path, const char *point,
		       struct rfs_mount_entry *out);

#endif
