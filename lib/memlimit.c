#include "memlimit.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "mountinfo.h"

/* cgroup v1 writes "no limit" as the largest page-aligned counter,
 * 2^63 - 4096 on x86-64; anything this large limits nothing. */
#define NO_LIMIT (UINT64_C(1) << 62)

static void lower(struct rfs_memlimit *l, uint64_t bytes, const char *what,
		  const char *path)
{
	if (bytes >= l->bytes)
		return;
	l->bytes = bytes;
	snprintf(l->where, sizeof(l->where), "%s (%s)", what, path);
}

static void read_meminfo(const char *root, struct rfs_memlimit *l)
{
	char path[PATH_MAX], line[256];
	snprintf(path, sizeof(path), "%s/proc/meminfo", root);
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	unsigned long long kb;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemTotal: %llu kB", &kb) == 1 &&
		    kb < NO_LIMIT >> 10) {
			lower(l, (uint64_t)kb << 10, "the machine's memory",
			      "MemTotal in /proc/meminfo");
			break;
		}
	fclose(f);
}

/* A limit file's value: a number of bytes, or v2's "max". */
static void read_limit(const char *path, struct rfs_memlimit *l)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	char text[64] = "";
	char *end;
	if (fgets(text, sizeof(text), f)) {
		errno = 0;
		unsigned long long v = strtoull(text, &end, 10);
		if (!errno && end != text && (*end == '\n' || !*end) &&
		    v < NO_LIMIT)
			lower(l, v, "the limit of its memory cgroup", path);
	}
	fclose(f);
}

/* The process's group in each hierarchy, from /proc/self/cgroup
 * ("ID:CONTROLLERS:PATH"): v1's memory controller and v2's. */
struct groups {
	const char *root;
	char v1[PATH_MAX]; /* "" if none */
	char v2[PATH_MAX];
	struct rfs_memlimit *limit;
};

static int has_word(const char *list, const char *word)
{
	size_t n = strlen(word);
	for (const char *p = list; p; p = strchr(p, ','), p = p ? p + 1 : p)
		if (strncmp(p, word, n) == 0 && (p[n] == ',' || !p[n]))
			return 1;
	return 0;
}

static void read_groups(struct groups *g)
{
	char path[PATH_MAX], *line = NULL;
	size_t cap = 0;
	snprintf(path, sizeof(path), "%s/proc/self/cgroup", g->root);
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	while (getline(&line, &cap, f) >= 0) {
		line[strcspn(line, "\n")] = '\0';
		char *ctrls = strchr(line, ':');
		char *group = ctrls ? strchr(ctrls + 1, ':') : NULL;
		if (!group)
			continue;
		*group++ = '\0';
		*ctrls++ = '\0';
		if (strcmp(line, "0") == 0 && !*ctrls)
			snprintf(g->v2, sizeof(g->v2), "%s", group);
		else if (has_word(ctrls, "memory"))
			snprintf(g->v1, sizeof(g->v1), "%s", group);
	}
	free(line);
	fclose(f);
}

/* Reads file in the group's directory under the mount and in each one
 * above it up to the mount's, keeping the least. A group outside what
 * is mounted (another namespace's mount) limits nothing. */
static void walk_up(const struct groups *g, const struct rfs_mount_entry *m,
		    const char *group, const char *file)
{
	size_t rootlen = strcmp(m->root, "/") ? strlen(m->root) : 0;
	if (strncmp(group, m->root, rootlen) != 0 ||
	    (group[rootlen] != '/' && group[rootlen] != '\0'))
		return;
	char dir[PATH_MAX], path[PATH_MAX + 32];
	int base = snprintf(dir, sizeof(dir), "%s%s", g->root, m->point);
	if (base < 0 || (size_t)base >= sizeof(dir))
		return;
	int len = snprintf(dir + base, sizeof(dir) - (size_t)base, "%s",
			   group + rootlen);
	if (len < 0 || (size_t)(base + len) >= sizeof(dir))
		return;
	for (;;) {
		snprintf(path, sizeof(path), "%s/%s", dir, file);
		read_limit(path, g->limit);
		char *slash = strrchr(dir + base, '/');
		if (!slash)
			break;
		*slash = '\0';
	}
}

static int visit_mount(const struct rfs_mount_entry *m, void *arg)
{
	const struct groups *g = arg;
	if (g->v2[0] && strcmp(m->fstype, "cgroup2") == 0)
		walk_up(g, m, g->v2, "memory.max");
	else if (g->v1[0] && strcmp(m->fstype, "cgroup") == 0 &&
		 has_word(m->superopts, "memory"))
		walk_up(g, m, g->v1, "memory.limit_in_bytes");
	return 0;
}

void rfs_memlimit_read(const char *root, struct rfs_memlimit *out)
{
	*out = (struct rfs_memlimit){ .bytes = UINT64_MAX };
	read_meminfo(root, out);
	struct groups g = { .root = root, .limit = out };
	read_groups(&g);
	if (!g.v1[0] && !g.v2[0])
		return;
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/proc/self/mountinfo", root);
	rfs_mountinfo_each(path, visit_mount, &g);
}

int rfs_memlimit_fit(uint64_t *cache_mb, const struct rfs_memlimit *l,
		     char *err, size_t errlen)
{
	if (l->bytes == UINT64_MAX) {
		if (*cache_mb == RFS_UNSET)
			*cache_mb = RFS_MEMLIMIT_DEFAULT_MB;
		return 0;
	}
	uint64_t mb = l->bytes >> 20;
	uint64_t room = mb > RFS_MEMLIMIT_OVERHEAD_MB ?
				mb - RFS_MEMLIMIT_OVERHEAD_MB :
				0;
	if (*cache_mb == RFS_UNSET) {
		*cache_mb = room / 2 < RFS_MEMLIMIT_DEFAULT_MB ?
				    room / 2 :
				    RFS_MEMLIMIT_DEFAULT_MB;
		if (*cache_mb >= 1)
			return 0;
		snprintf(err, errlen,
			 "the %" PRIu64 " MiB of %s leave no room for "
			 "cache_mb beside the daemon's own %d MiB",
			 mb, l->where, RFS_MEMLIMIT_OVERHEAD_MB);
		return -EINVAL;
	}
	if (*cache_mb <= room)
		return 0;
	int n = snprintf(err, errlen,
			 "option cache_mb=%" PRIu64 ": the daemon would hold "
			 "up to %" PRIu64 " MiB (cache_mb and %d MiB of its "
			 "own), more than the %" PRIu64 " MiB of %s",
			 *cache_mb, *cache_mb + RFS_MEMLIMIT_OVERHEAD_MB,
			 RFS_MEMLIMIT_OVERHEAD_MB, mb, l->where);
	if (n >= 0 && (size_t)n < errlen && room)
		snprintf(err + n, errlen - (size_t)n,
			 "; give cache_mb=%" PRIu64 " or less", room);
	return -EINVAL;
}
