#include "mountinfo.h"

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

static void copy(char *dst, size_t n, const char *src)
{
	snprintf(dst, n, "%s", src ? src : "");
}

/* "ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - TYPE SOURCE
 * SUPEROPTIONS". @return 1 if line is a mount at point (out filled). */
static int parse_line(char *line, const char *point,
		      struct rfs_mount_entry *out)
{
	char *save = NULL, *field[5];
	line[strcspn(line, "\n")] = '\0';
	for (int i = 0; i < 5; i++)
		if (!(field[i] = strtok_r(i ? NULL : line, " ", &save)))
			return 0;
	unescape_octal(field[4]);
	if (strcmp(field[4], point) != 0)
		return 0;
	char *f;
	while ((f = strtok_r(NULL, " ", &save)) && strcmp(f, "-") != 0)
		; /* mount options, then optional fields */
	char *type = f ? strtok_r(NULL, " ", &save) : NULL;
	char *source = type ? strtok_r(NULL, " ", &save) : NULL;
	if (type)
		unescape_octal(type);
	if (source)
		unescape_octal(source);
	copy(out->majmin, sizeof(out->majmin), field[2]);
	copy(out->fstype, sizeof(out->fstype), type);
	copy(out->source, sizeof(out->source), source);
	return 1;
}

int rfs_mountinfo_find(const char *path, const char *point,
		       struct rfs_mount_entry *out)
{
	FILE *f = fopen(path ? path : "/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	/* Lines are short; a longer one (paths near PATH_MAX) is read in
	 * full by getline. */
	char *line = NULL;
	size_t cap = 0;
	int found = 0;
	while (getline(&line, &cap, f) >= 0)
		found |= parse_line(line, point, out);
	free(line);
	fclose(f);
	return found ? 0 : -ENOENT;
}
