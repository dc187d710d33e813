/* SPDX-License-Identifier: MIT */
#include "core/mountopt.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/config.h"
#include "core/parse.h"

/* libfuse's own -o options that rankfs passes through unchanged. */
static const char *const fuse_keys[] = {
	"allow_other", "allow_root",  "default_permissions",
	"fsname",      "subtype",     "auto_unmount",
	"max_read",    "max_threads", "max_idle_threads",
	"clone_fd",    "debug",	      "ro",
	NULL
};

/* mount(8) and fstab options that mean nothing to a read-only FUSE
 * daemon: accepted and dropped, so fstab lines and mount -t fuse.rankfs
 * work with their usual words (the mount stays read-only). */
static const char *const ignored_keys[] = {
	"rw",	      "defaults",    "auto",	   "noauto",   "user",
	"nouser",     "users",	     "owner",	   "group",    "nofail",
	"_netdev",    "dev",	     "nodev",	   "suid",     "nosuid",
	"exec",	      "noexec",	     "atime",	   "noatime",  "relatime",
	"norelatime", "strictatime", "nodiratime", "diratime", "sync",
	"async",      "lazytime",    "nolazytime", "comment",  NULL
};

static int listed(const char *const *keys, const char *key)
{
	for (size_t i = 0; keys[i]; i++)
		if (strcmp(key, keys[i]) == 0)
			return 1;
	return 0;
}

/* libfuse 3.14 takes any number for its thread counts (max_threads=0
 * runs one handler; -1 becomes 2^32 - 1), and its other options' values
 * are found wrong only after the sources are open, in lines of its own
 * (or fusermount3's): checked here as ours are. Those of fuse_keys that
 * this does not name take no value. */
static int check_fuse(const char *key, const char *value, char *err,
		      size_t errlen)
{
	int idle = strcmp(key, "max_idle_threads") == 0;
	int name = strcmp(key, "fsname") == 0 || strcmp(key, "subtype") == 0;
	int max_read = strcmp(key, "max_read") == 0;
	uint64_t n;
	if (idle || strcmp(key, "max_threads") == 0) {
		if (value &&
		    rfs_parse_u64(value, strlen(value), 1024, 1, &n) == 0 &&
		    n >= (uint64_t)!idle)
			return 0;
		snprintf(err, errlen,
			 "option %s=%s: expected an integer from %d to 1024",
			 key, value ? value : "", !idle);
		return -EINVAL;
	}
	if (max_read &&
	    (!value ||
	     rfs_parse_u64(value, strlen(value), UINT32_MAX, 1, &n) != 0 ||
	     n == 0)) {
		snprintf(err, errlen,
			 "option max_read=%s: expected an integer from 1 to %u",
			 value ? value : "", UINT32_MAX);
		return -EINVAL;
	}
	if (name && (!value || !*value || strlen(value) > 1024)) {
		snprintf(err, errlen,
			 "option %s=%.40s%s: expected a name of 1 to 1024 "
			 "bytes",
			 key, value ? value : "",
			 value && strlen(value) > 40 ? "..." : "");
		return -EINVAL;
	}
	if (!max_read && !name && value) {
		snprintf(err, errlen, "option %s=%s: %s takes no value", key,
			 value, key);
		return -EINVAL;
	}
	return 0;
}

int rfs_mountopt_list_has_empty(const char *list)
{
	size_t item = 0; /* characters of the item so far */
	for (const char *s = list; *s; s++) {
		if (*s == '\\' && s[1]) {
			s++;
			item++;
		} else if (*s == ',') {
			if (!item)
				return 1;
			item = 0;
		} else {
			item++;
		}
	}
	return !item;
}

/* Whether list's last character is a comma that ends an item (not one
 * escaped by a backslash). */
static int ends_with_comma(const char *list)
{
	size_t len = strlen(list), slashes = 0;
	if (!len || list[len - 1] != ',')
		return 0;
	while (slashes + 1 < len && list[len - 2 - slashes] == '\\')
		slashes++;
	return slashes % 2 == 0;
}

/* Whether a command line argument reads as an option rather than a
 * SOURCE or MOUNTPOINT: a name and '=' before any '/'. */
static int looks_like_option(const char *arg)
{
	size_t name = strcspn(arg, "=/");
	return arg[0] != '-' && name > 0 && arg[name] == '=';
}

#define NO_SPACES "options are comma-separated without spaces"

int rfs_mountopt_explain_space(const char *opt, const char *list,
			       const char *next, char *err, size_t errlen)
{
	size_t name = strcspn(opt, "=");
	if (*opt == '\0' && list && ends_with_comma(list) && next &&
	    looks_like_option(next)) {
		snprintf(
			err, errlen,
			"-o %s ends with a comma, and '%s' after it is an "
			"argument of its own: a space after a comma? (" NO_SPACES
			": -o %s%s)",
			list, next, list, next);
	} else if (*opt == '\0') {
		if (list)
			snprintf(err, errlen,
				 "-o %s: an empty option (a comma at the start "
				 "or end, or two in a row; " NO_SPACES ")",
				 list);
		else
			snprintf(err, errlen,
				 "an empty option (a comma at the start or end "
				 "of -o's list, or two in a row; " NO_SPACES
				 ")");
	} else if (isspace((unsigned char)opt[0])) {
		snprintf(err, errlen,
			 "option '%s': a space after a comma (" NO_SPACES ")",
			 opt);
	} else if (name && isspace((unsigned char)opt[name - 1])) {
		snprintf(err, errlen,
			 "option '%s': a space before %s (" NO_SPACES ")", opt,
			 opt[name] ? "'='" : "a comma");
	} else {
		return 0;
	}
	return 1;
}

/* Edits (insert, delete, substitute a character) from a to b, counting
 * only up to 3: enough to tell a typo from another word. */
static size_t edits(const char *a, const char *b)
{
	size_t n = strlen(b), row[65], prev;
	if (n > 64 || strlen(a) > 64)
		return 3;
	for (size_t j = 0; j <= n; j++)
		row[j] = j;
	for (size_t i = 1; a[i - 1]; i++) {
		prev = row[0];
		row[0] = i;
		for (size_t j = 1; j <= n; j++) {
			size_t was = row[j];
			size_t best = prev + (a[i - 1] != b[j - 1]);
			if (row[j] + 1 < best)
				best = row[j] + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			prev = was;
		}
	}
	return row[n] < 3 ? row[n] : 3;
}

/* The option key most likely meant, or NULL: within two edits, and
 * fewer than half its length (so that "ab" suggests nothing). */
static const char *meant(const char *key)
{
	const char *best = NULL;
	size_t best_edits = 3;
	for (int set = 0; set < 2; set++)
		for (size_t i = 0;; i++) {
			const char *name = set ? fuse_keys[i] :
						 rfs_config_option_name(i);
			if (!name)
				break;
			size_t e = edits(key, name);
			if (e < best_edits && 2 * e < strlen(name)) {
				best = name;
				best_edits = e;
			}
		}
	return best;
}

/* Appends the line refusing key, an option neither rankfs's nor
 * libfuse's nor mount(8)'s: the option meant when key is within two
 * edits of one, then every option taken. */
static void render_unknown(struct rfs_buf *b, const char *prog, const char *key)
{
	const char *guess = meant(key);
	rfs_buf_printf(b, "%s: unknown option '%s'", prog, key);
	if (guess)
		rfs_buf_printf(b, " (%s?)", guess);
	rfs_buf_printf(b, "; rankfs's options: ");
	for (size_t i = 0; rfs_config_option_name(i); i++)
		rfs_buf_printf(b, "%s%s", i ? ", " : "",
			       rfs_config_option_name(i));
	rfs_buf_printf(b, "; libfuse's: ");
	for (size_t i = 0; fuse_keys[i]; i++)
		rfs_buf_printf(b, "%s%s", i ? ", " : "", fuse_keys[i]);
	rfs_buf_printf(b, " (%s --help says what each does)\n", prog);
}

int rfs_mountopt_take(struct rfs_config *c, const char *prog, const char *arg,
		      const char *list, const char *next, char key[64],
		      struct rfs_buf *msg)
{
	char err[512];
	const char *eq = strchr(arg, '='), *value = eq ? eq + 1 : NULL;
	size_t klen = eq ? (size_t)(eq - arg) : strlen(arg);
	int rc = -1;
	if (rfs_mountopt_explain_space(arg, list, next, err, sizeof(err)))
		goto refuse;
	if (klen >= 64) {
		rfs_buf_printf(msg, "%s: unknown option '%.64s...'\n", prog,
			       arg);
		return -1;
	}
	memcpy(key, arg, klen);
	key[klen] = '\0';
	rc = rfs_config_set(c, key, value, err, sizeof(err));
	if (rc != -ENOENT)
		goto refuse;
	/* mount -o remount,... on a mount: mount.fuse3 starts us again with
	 * it. A mount(8) word, but not one to ignore. */
	if (strcmp(key, "remount") == 0) {
		rfs_buf_printf(msg,
			       "%s: option remount: a rankfs mount cannot be "
			       "remounted (it is read-only, its options fixed "
			       "for its life): unmount it and mount again\n",
			       prog);
		return -1;
	}
	if (listed(fuse_keys, key)) {
		rc = check_fuse(key, value, err, sizeof(err));
		if (rc == 0)
			return 1;
		goto refuse;
	}
	/* mount(8)'s: x-systemd.*, x-gvfs-* ... */
	if (strncmp(key, "x-", 2) == 0 || listed(ignored_keys, key))
		return 0;
	render_unknown(msg, prog, key);
	return -1;
refuse:
	if (rc == 0)
		return 0;
	rfs_buf_printf(msg, "%s: %s\n", prog, err);
	return -1;
}
