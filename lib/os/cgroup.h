/* SPDX-License-Identifier: MIT */
/* This process's cgroups (cgroups(7)): the directories of its groups,
 * found through /proc/self/cgroup and the cgroup mounts of
 * /proc/self/mountinfo, for memlimit.c and cpulimit.c to read limits in. */
#ifndef RFS_CGROUP_H
#define RFS_CGROUP_H

/* Calls fn(dir, v2, arg) with the directory of the process's group in the
 * v1 hierarchy holding controller and in the v2 hierarchy (v2 set), and
 * with each directory above it up to its mount's: a limit anywhere on
 * that path holds. A group outside what is mounted (another namespace's
 * mount) is passed over. root: "" for this system, or a directory
 * standing in for / (tests). */
void rfs_cgroup_each_dir(const char *root, const char *controller,
			 void (*fn)(const char *dir, int v2, void *arg),
			 void *arg);

#endif
