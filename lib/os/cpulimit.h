/* SPDX-License-Identifier: MIT */
/* The cores this process may keep busy, for the default of threads: not
 * every core of a node that it shares with other jobs. */
#ifndef RFS_CPULIMIT_H
#define RFS_CPULIMIT_H

#include <stdint.h>

/* The least cgroup CPU quota on the process's path up its hierarchies,
 * in cores, a fraction counting as one (v2 cpu.max "QUOTA PERIOD", v1
 * cpu.cfs_quota_us over cpu.cfs_period_us), or UINT64_MAX where none
 * limits it. root: "" for this system, or a directory standing in for /
 * (tests). */
uint64_t rfs_cpulimit_quota(const char *root);

/* The cores of the process's CPU affinity (sched_getaffinity(2): a job's
 * cpuset, taskset), or the quota's where fewer; at least 1. */
uint64_t rfs_cpulimit_cores(void);

#endif
