/* SPDX-License-Identifier: MIT */
#include "os/cpulimit.h"

#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>

#include "os/cgroup.h"

/* The first two numbers of path, or fewer; "max" reads as none. */
static int read_numbers(const char *path, long long *a, long long *b)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	int got = fscanf(f, "%lld %lld", a, b);
	fclose(f);
	return got > 0 ? got : 0;
}

static void read_group(const char *dir, int v2, void *arg)
{
	uint64_t *cores = arg;
	char path[PATH_MAX + 32];
	long long quota, period, unused;
	if (v2) {
		snprintf(path, sizeof(path), "%s/cpu.max", dir);
		if (read_numbers(path, &quota, &period) != 2)
			return; /* "max PERIOD", or no file */
	} else {
		snprintf(path, sizeof(path), "%s/cpu.cfs_quota_us", dir);
		if (read_numbers(path, &quota, &unused) < 1)
			return;
		snprintf(path, sizeof(path), "%s/cpu.cfs_period_us", dir);
		if (read_numbers(path, &period, &unused) < 1)
			return;
	}
	if (quota <= 0 || period <= 0) /* v1's -1: none */
		return;
	uint64_t n =
		((uint64_t)quota + (uint64_t)period - 1) / (uint64_t)period;
	if (n < *cores)
		*cores = n;
}

uint64_t rfs_cpulimit_quota(const char *root)
{
	uint64_t cores = UINT64_MAX;
	rfs_cgroup_each_dir(root, "cpu", read_group, &cores);
	return cores;
}

uint64_t rfs_cpulimit_cores(void)
{
	cpu_set_t set;
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t cores = online > 0 ? (uint64_t)online : 1;
	/* The affinity's, where it fits a cpu_set_t (1024 cores). */
	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		cores = (uint64_t)CPU_COUNT(&set);
	uint64_t quota = rfs_cpulimit_quota("");
	return quota < cores ? quota : cores;
}
