/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for option parsing (lib/core/config.c, lib/core/parse.c).
 *
 * Input: a -o list, "key=value,key,...". Every option is applied; accepted
 * values must render back (JSON, identity) without crashing, and a value
 * rankfs accepts for a numeric option must render as that number. An
 * empty option or one a space made is explained (lib/core/mountopt.c) in a
 * line that names its list or itself.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/config.h"
#include "core/mountopt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *list = malloc(size + 1), err[256], said[512];
	char *whole = malloc(size + 1);
	if (!list || !whole) {
		free(list);
		free(whole);
		return 0;
	}
	memcpy(list, data, size);
	list[size] = '\0';
	memcpy(whole, list, size + 1);
	if (rfs_mountopt_list_has_empty(whole) &&
	    (!rfs_mountopt_explain_space("", whole, "b=2", said,
					 sizeof(said)) ||
	     strncmp(said, "-o ", 3) != 0))
		abort(); /* an empty option is always explained */

	struct rfs_config c;
	rfs_config_init(&c);
	char *save = NULL;
	for (char *opt = strtok_r(list, ",", &save); opt;
	     opt = strtok_r(NULL, ",", &save)) {
		if (rfs_mountopt_explain_space(opt, whole, NULL, said,
					       sizeof(said)) &&
		    !strstr(said, opt) && strlen(opt) < 200)
			abort(); /* names the option (unless cut short) */
		char *eq = strchr(opt, '=');
		if (eq)
			*eq = '\0';
		err[0] = '\0';
		int rc = rfs_config_set(&c, opt, eq ? eq + 1 : NULL, err,
					sizeof(err));
		if (rc != 0 && rc != -ENOENT && rc != -EINVAL)
			abort();
		if (rc == -EINVAL && !strstr(err, opt))
			abort(); /* every message names its option */
	}
	struct rfs_buf b = { 0 };
	rfs_config_render_json(&c, &b);
	rfs_config_render_identity(&c, &b);
	rfs_buf_free(&b);
	rfs_config_free(&c);
	free(list);
	free(whole);
	return 0;
}
