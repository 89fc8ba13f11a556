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

/*
 * The most groups of one class a read counts (doc/protocol.md §7.35): each costs three
 * commands, and /metrics, top (each second), queues, groups and the dashboard all read.
 * The groups read are the first of cogworker:groups:<class> by its order (the next look
 * soonest); how many there are is ZCARD of that index, exact; what was not read is said
 * (class_not_read, running_cut).
 */
#define GROUPS_READ_MAX 1000

struct group_row {
	char *cls;                      /* the handler class */
	char *group;                    /* the group ("" is one) */
	int n;                          /* group_concurrency, 0 = none */
	int rate_n;                     /* group_rate_limit starts per window, 0 = none */
	double window;                  /* seconds */
	long long running;              /* live slots: leases and reservations */
	long long waiting;              /* jobs set aside in its line */
	long long window_starts;        /* starts within the last window (rate only) */
	/* Of its class, the same in every row of it: */
	long long class_groups;         /* groups with jobs set aside: ZCARD of the index */
	long long class_not_read;       /* of those, not read (beyond GROUPS_READ_MAX) */
	int running_cut;                /* with_running: groups holding slots not all looked
	                                   for (the SCAN stopped, or never ran, at the bound) */
};

/*
 * The groups of every class that declares group limits in cogworker:limits (only: just
 * that class; NULL = all), sorted by class, most waiting first, then by name: at most
 * GROUPS_READ_MAX per class. The groups with jobs set aside come from
 * cogworker:groups:<class>, its first GROUPS_READ_MAX; with_running adds those with slots
 * held and none waiting, while the class has room under the bound (a SCAN of
 * cogworker:group_slots:<class>:*, so not for /metrics). 0, or -1 with r->err and *what.
 */
int group_limits_read(struct rconn *r, const char *only, int with_running,
                      struct group_row **out, int *n, const char **what);
void group_limits_free(struct group_row *g, int n);
/*
 * The group lines of every class that declares group limits: the keys
 * cogworker:group_jobs:<class>:<group> of the groups in cogworker:groups:<class>, for a walk
 * over the jobs set aside (cogworkerctl jobs): at most GROUPS_READ_MAX per class, the groups
 * group_limits_read reads, and *not_read the lines of all classes beyond them (so a search
 * that found nothing can say it did not look there). *keys malloc'd (each string too); 0,
 * or -1 with r->err.
 */
int group_limits_lines(struct rconn *r, char ***keys, int *n, long long *not_read);
/*
 * The group of a job of class cls (its raw text, len bytes) as the fleet declares it: the
 * group_by that cogworker:limits records for cls. 1 with *group and *by (both malloc'd: the
 * group, "" among them, and the path) and *why (static, non-NULL when the value is no group
 * and the job goes to ""); 0 when cls declares no group_by (or the job is not JSON); -1 with
 * r->err.
 */
int group_limits_job_group(struct rconn *r, const char *cls, const char *raw, size_t len,
                           char **group, char **by, const char **why);
/*
 * One line per class with jobs set aside, from the rows of group_limits_read (from *i on,
 * the rows of one class; *i moves past them): "<class>: N job(s) set aside in G group(s):
 * A 3, B 2, … (and K more)", the top most waiting groups by name ("" shown as ""); a class
 * whose read was cut, "<class>: N job(s) set aside in G group(s) read, M more group(s) not
 * read: …". 1 with the line appended to out, 0 when no class is left with any. For queues
 * and top.
 */
int group_limits_waiting_line(const struct group_row *g, int n, int *i, int top,
                              struct sbuf *out);
/* Prometheus, cardinality-safe: per class the groups waiting (exact, the groups not read
 * counted), the jobs set aside in the groups read and the groups not read
 * (cogworkerd_groups_waiting, cogworkerd_group_jobs_waiting, cogworkerd_groups_not_read),
 * and the top most waiting groups read of each class by name
 * (cogworkerd_group_waiting{class,group}). */
void group_limits_render(const struct group_row *g, int n, int top, struct sbuf *b);

#endif
