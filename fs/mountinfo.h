/* What is mounted where, from /proc/self/mountinfo (proc(5)): a FUSE-free
 * reader for main.c, which refuses a mountpoint that already is one and
 * finds its own mount's device. */
#ifndef RFS_MOUNTINFO_H
#define RFS_MOUNTINFO_H

struct rfs_mount_entry {
	char majmin[32]; /* the device, "0:52" */
	char fstype[256]; /* "tmpfs", "fuse.rankfs" */
	char source[4096]; /* "tmpfs", "/data/a.h5ad"; may be "none" */
};

/* Looks up the mount at point (an absolute, real path, as mountinfo
 * names mount points: escapes are decoded) in the mountinfo file path
 * (NULL: /proc/self/mountinfo). Of several mounts at point, the last
 * listed, the one on top. @return 0 with out filled, -ENOENT if nothing
 * is mounted there, or -errno of opening path. */
int rfs_mountinfo_find(const char *path, const char *point,
		       struct rfs_mount_entry *out);

#endif
