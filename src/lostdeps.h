/* SPDX-License-Identifier: MIT */
/*
 * lostdeps.h: the poller's look for dependencies settled where no daemon saw it (a Ruby
 * worker ran, buried or deleted them, doc/protocol.md §7.34 "Lost dependencies"), so the
 * jobs waiting for them do not wait for ever.
 */
#ifndef COGWORKERD_LOSTDEPS_H
#define COGWORKERD_LOSTDEPS_H

#include "redis.h"

/* What one process keeps between looks: where its walk of the waiting jobs is. */
struct lostdeps {
	long offset;
};

/*
 * One look, at each orphan check: the dependencies of jobs that have waited longer than
 * threshold seconds (lost_dependency_threshold; 0 = never look), without a settled record,
 * are searched for in every queue, set and process. One found in dead settles dead; one
 * found nowhere at two searches threshold seconds apart settles discarded (BATCH_SETTLE:
 * the jobs waiting for it are buried, or released with after-any). At most one search per
 * threshold / 2 fleet-wide. No element longer than max_job_bytes is read (0: no limit);
 * a search that met one judges nothing lost. 0 done (or nothing to do), -1 error (r->err).
 */
int lostdeps_look(struct rconn *r, struct lostdeps *st, double threshold,
                  long long max_job_bytes);

#endif
