/* SPDX-License-Identifier: MIT */
#include "os/mountinfo.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* mountinfo writes space, tab, newline and backslash in a field as \ooo
 * (octal): decodes them in place. */
static void unescape_octal(char *s)
{
	char *out = s;
	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
		    s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*out++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 |
					(s[3] - '0'));
			s += 3;
		} else {
			*out++ = *s;
		}
	}
	*out = '\0';
}

static void copy(char *dst, size_t n, char *src)
{
	if (src)
		unescape_octal(src);
	snprintf(dst, n, "%s", src ? src : "");
}

/* "ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - TYPE SOURCE
 * SUPEROPTIONS". @return 0 with out filled, or -1 for a short line. */
static int parse_line(char *line, struct rfs_mount_entry *out)
{
	char *save = NULL, *field[5];
	line[strcspn(line, "\n")] = '\0';
	for (int i = 0; i < 5; i++)
		if (!(field[i] = strtok_r(i ? NULL : line, " ", &save)))
			return -1;
	char *f;
	while ((f = strtok_r(NULL, " ", &save)) && strcmp(f, "-") != 0)
		; /* mount options, then optional fields */
	char *type = f ? strtok_r(NULL, " ", &save) : NULL;
	char *source = type ? strtok_r(NULL, " ", &save) : NULL;
	char *superopts = source ? strtok_r(NULL, " ", &save) : NULL;
	copy(out->majmin, sizeof(out->majmin), field[2]);
	copy(out->root, sizeof(out->root), field[3]);
	copy(out->point, sizeof(out->point), field[4]);
	copy(out->fstype, sizeof(out->fstype), type);
	copy(out->source, sizeof(out->source), source);
	copy(out->superopts, sizeof(out->superopts), superopts);
	return 0;
}

int rfs_mountinfo_each(const char *path,
		       int (*fn)(const struct rfs_mount_entry *e, void *arg),
		       void *arg)
{
	FILE *f = fopen(path ? path : "/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	struct rfs_mount_entry *e = malloc(sizeof(*e));
	if (!e) {
		fclose(f);
		return -ENOMEM;
	}
	/* Lines are short; a longer one (paths near PATH_MAX) is read in
	 * full by getline. */
	char *line = NULL;
	size_t cap = 0;
	int rc = 0;
	while (!rc && getline(&line, &cap, f) >= 0)
		if (parse_line(line, e) == 0)
			rc = fn(e, arg);
	free(line);
	free(e);
	fclose(f);
	return rc;
}

struct find {
	const char *point;
	struct rfs_mount_entry *out;
	int found;
};

static int keep_if_at_point(const struct rfs_mount_entry *e, void *arg)
{
	struct find *q = arg;
	if (strcmp(e->point, q->point) == 0) {
		*q->out = *e;
		q->found = 1;
	}
	return 0;
}

int rfs_mountinfo_find(const char *path, const char *point,
		       struct rfs_mount_entry *out)
{
	struct find q = { .point = point, .out = out };
	int rc = rfs_mountinfo_each(path, keep_if_at_point, &q);
	if (rc != 0)
		return rc;
	return q.found ? 0 : -ENOENT;
}
