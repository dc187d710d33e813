/* SPDX-License-Identifier: MIT */
/* A deadline on a mount-time step that reads a source (deadline.c says
 * why the process ends when one passes). A mount has one (the view's):
 * one step at a time, from one thread. */
#ifndef RFS_DEADLINE_H
#define RFS_DEADLINE_H

struct rfs_deadline;

/* Steps of seconds each at most (0: no deadline). @return 0, -ENOMEM. */
int rfs_deadline_create(unsigned seconds, struct rfs_deadline **out);
/* Ends a step still running. Accepts NULL. */
void rfs_deadline_destroy(struct rfs_deadline *d);

/* d's seconds a step may take (0: no limit), for work of the step that
 * another process does (HDF5's strings: hdf5_strings.c); d NULL: 120. */
unsigned rfs_deadline_seconds(const struct rfs_deadline *d);

/* Starts a step of d, what naming it ("source X: opening it"); copied.
 * If the step has not ended when d's limit passes, the process prints
 * "rankfs: WHAT: no answer after N s ..." to stderr and the log and
 * exits with status 1. d NULL: no deadline. @return 0, or a negative
 * errno (no thread: the step runs without a deadline). */
int rfs_deadline_begin(struct rfs_deadline *d, const char *what);

/* Ends the step of d begun last. Accepts a step that failed to begin,
 * and NULL. */
void rfs_deadline_end(struct rfs_deadline *d);

#endif
