/* SPDX-License-Identifier: MIT */
/*
 * grouplimits.h: the groups of fair share as Redis holds them (grouplimits.c, doc/protocol.md
 * §7.35), for `cogworkerctl groups`, `queues`, `top`, the dashboard and the daemon's
 * /metrics.
 */
#ifndef COGWORKERD_GROUPLIMITS_H
#define COGWORKERD_GROUPLIMITS_H

#include "redis.h"
#include "util.h"

struct group_row {
	char *cls;                      /* the handler class */
	char *group;                    /* the group ("" is one) */
	int n;                          /* group_concurrency, 0 = none */
	int rate_n;                     /* group_rate_limit starts per window, 0 = none */
	double window;                  /* seconds */
	long long running;              /* live slots: leases and reservations */
	long long waiting;              /* jobs set aside in its line */
	long long window_starts;        /* starts within the last window (rate only) */
};

/*
 * The groups of every class that declares group limits in cogworker:limits (only: just
 * that class; NULL = all), sorted by class, most waiting first, then by name. The groups
 * with jobs set aside come from cogworker:groups:<class>; with_running adds those with
 * slots held and none waiting (a SCAN of cogworker:group_slots:<class>:*, so not for
 * /metrics). 0, or -1 with r->err and *what.
 */
int group_limits_read(struct rconn *r, const char *only, int with_running,
                      struct group_row **out, int *n, const char **what);
void group_limits_free(struct group_row *g, int n);
/* Prometheus, cardinality-safe: per class the groups waiting and the jobs set aside
 * (cogworkerd_groups_waiting, cogworkerd_group_jobs_waiting), and the top most waiting
 * groups of each class by name (cogworkerd_group_waiting{class,group}). */
void group_limits_render(const struct group_row *g, int n, int top, struct sbuf *b);

#endif
