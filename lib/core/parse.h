/* SPDX-License-Identifier: MIT */
/* Strict decimal parsing shared by option values and path names. */
#ifndef RFS_PARSE_H
#define RFS_PARSE_H

#include <stddef.h>
#include <stdint.h>

/* Parses s[0..len) as an unsigned decimal integer <= max: digits only, no
 * sign, no spaces, no hex or exponent. With canonical set, leading zeros are
 * refused too ("0" itself is fine), so every value has exactly one name.
 * @return 0, -EINVAL (not a number), -ERANGE (over max). */
int rfs_parse_u64(const char *s, size_t len, uint64_t max, int canonical,
		  uint64_t *out);

/* Number of decimal digits of v (1 for 0). */
unsigned rfs_parse_decimal_digits(uint64_t v);

#endif
