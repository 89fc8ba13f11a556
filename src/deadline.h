/* SPDX-License-Identifier: MIT */
/*
 * deadline.h: jobs past their deadline are never started (deadline.c, doc/protocol.md
 * §7.31): the fetchers' check before a run and the poller's before a due entry goes back on
 * its queue.
 */
#ifndef COGWORKERD_DEADLINE_H
#define COGWORKERD_DEADLINE_H

#include <stddef.h>
#include "config.h"
#include "job.h"
#include "log.h"
#include "redis.h"

/* The deadline of job j under handler h (NULL: none), epoch seconds; 0 = none. */
double deadline_of(const struct job *j, const struct handler *h, int *from_job);

/* A fetched job past its deadline: filed into dead as JOB_EXPIRED (or dropped, per the
 * handler's `expired`) and acked, then on_death; it never starts. */
void deadline_settle_fetched(struct rconn *r, const struct conf *c, const struct job *j,
                             const struct handler *h, double deadline, int from_job,
                             struct log_site *site);

/* A due schedule or retry entry: 1 = past its deadline and moved to dead or dropped (or
 * gone meanwhile), 0 = not expired (or left for the fetcher to judge), -1 = Redis
 * unavailable. */
int deadline_settle_entry(struct rconn *r, const char *set, const char *raw, size_t len);

#endif
