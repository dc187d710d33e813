/* SPDX-License-Identifier: MIT */
#include "core/parse.h"

#include <errno.h>

int rfs_parse_u64(const char *s, size_t len, uint64_t max, int canonical,
		  uint64_t *out)
{
	if (len == 0)
		return -EINVAL;
	if (canonical && len > 1 && s[0] == '0')
		return -EINVAL;
	uint64_t v = 0;
	int too_big = 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		unsigned d = (unsigned)(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			too_big = 1;
		else
			v = v * 10 + d;
	}
	if (too_big || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

unsigned rfs_parse_decimal_digits(uint64_t v)
{
	unsigned n = 1;
	while (v >= 10) {
		v /= 10;
		n++;
	}
	return n;
}
