/* SPDX-License-Identifier: MIT */
#include "os/cgroup.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os/mountinfo.h"

/* The process's group in each hierarchy, from /proc/self/cgroup
 * ("ID:CONTROLLERS:PATH"): v1's controller and v2's. */
struct groups {
	const char *root;
	const char *controller;
	char v1[PATH_MAX]; /* "" if none */
	char v2[PATH_MAX];
	void (*fn)(const char *dir, int v2, void *arg);
	void *arg;
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
		else if (has_word(ctrls, g->controller))
			snprintf(g->v1, sizeof(g->v1), "%s", group);
	}
	free(line);
	fclose(f);
}

/* The group's directory under the mount, then each one above it up to
 * the mount's. */
static void walk_up(const struct groups *g, const struct rfs_mount_entry *m,
		    const char *group, int v2)
{
	size_t rootlen = strcmp(m->root, "/") ? strlen(m->root) : 0;
	if (strncmp(group, m->root, rootlen) != 0 ||
	    (group[rootlen] != '/' && group[rootlen] != '\0'))
		return;
	char dir[PATH_MAX];
	int base = snprintf(dir, sizeof(dir), "%s%s", g->root, m->point);
	if (base < 0 || (size_t)base >= sizeof(dir))
		return;
	int len = snprintf(dir + base, sizeof(dir) - (size_t)base, "%s",
			   group + rootlen);
	if (len < 0 || (size_t)(base + len) >= sizeof(dir))
		return;
	for (;;) {
		g->fn(dir, v2, g->arg);
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
		walk_up(g, m, g->v2, 1);
	else if (g->v1[0] && strcmp(m->fstype, "cgroup") == 0 &&
		 has_word(m->superopts, g->controller))
		walk_up(g, m, g->v1, 0);
	return 0;
}

void rfs_cgroup_each_dir(const char *root, const char *controller,
			 void (*fn)(const char *dir, int v2, void *arg),
			 void *arg)
{
	struct groups g = {
		.root = root, .controller = controller, .fn = fn, .arg = arg
	};
	read_groups(&g);
	if (!g.v1[0] && !g.v2[0])
		return;
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/proc/self/mountinfo", root);
	rfs_mountinfo_each(path, visit_mount, &g);
}
