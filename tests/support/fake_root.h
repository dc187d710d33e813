/* SPDX-License-Identifier: MIT */
/* A directory standing in for / in unit tests of code that reads /proc
 * and /sys (memlimit.c, cpulimit.c, cgroup.c): made once per test file,
 * emptied before each test. */
#ifndef RFS_FAKE_ROOT_H
#define RFS_FAKE_ROOT_H

extern char fake_root[]; /* its path, once fake_root_make() ran */

/* Writes text to fake_root/rel, making its directories; fails the test
 * if it cannot. */
void fake_root_put(const char *rel, const char *text);

/* cmocka group setup and teardown, and a test setup that empties it. */
int fake_root_make(void **state);
int fake_root_remove(void **state);
int fake_root_clean(void **state);

#endif
