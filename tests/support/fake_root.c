/* SPDX-License-Identifier: MIT */
#include "fake_root.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

char fake_root[] = "/tmp/rankfs-test-root-XXXXXX";

void fake_root_put(const char *rel, const char *text)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", fake_root, rel);
	for (char *p = path + strlen(fake_root) + 1; (p = strchr(p, '/'));
	     p++) {
		*p = '\0';
		mkdir(path, 0755);
		*p = '/';
	}
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_true(fputs(text, f) >= 0);
	assert_int_equal(fclose(f), 0);
}

int fake_root_make(void **state)
{
	(void)state;
	return mkdtemp(fake_root) ? 0 : -1;
}

int fake_root_remove(void **state)
{
	(void)state;
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fake_root);
	return system(cmd) == 0 ? 0 : -1;
}

int fake_root_clean(void **state)
{
	return fake_root_remove(state) || mkdir(fake_root, 0700) ? -1 : 0;
}
