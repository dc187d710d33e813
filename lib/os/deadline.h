/* SPDX-License-Identifier: MIT */
/* A deadline on a mount-time step that reads a source (deadline.c says
 * why the process ends when one passes). One step at a time, from one
 * thread. */
#ifndef RFS_DEADLINE_H
#define RFS_DEADLINE_H

/* Seconds each later step may last (0: no deadline). Default 120. */
void rfs_deadline_set_limit(unsigned seconds);
unsigned rfs_deadline_limit(void);

/* Starts a step, what naming it ("source X: opening it"); copied. If the
 * step has not ended when the limit passes, the process prints
 * "rankfs: WHAT: no answer after N s ..." to stderr and the log and
 * exits with status 1. @return 0, or a negative errno (no thread: the
 * step runs without a deadline). */
int rfs_deadline_begin(const char *what);

/* Ends the step begun last. Accepts a step that failed to begin. */
void rfs_deadline_end(void);

#endif
