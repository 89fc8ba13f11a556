/* SPDX-License-Identifier: MIT */
/*
 * workflow.h: batches and dependencies (doc/protocol.md §7.34), the calls the daemon and
 * cogworkerctl share: the batch scripts (lua/batch_*.lua) with their common arguments,
 * and the settle of a job for good.
 */
#ifndef COGWORKERD_WORKFLOW_H
#define COGWORKERD_WORKFLOW_H

#include "redis.h"
#include "util.h"

/* Outcomes a job settles for good with (BATCH_SETTLE's ARGV[10]). */
#define SETTLED_SUCCESS "success"
#define SETTLED_DEAD "dead"
#define SETTLED_DISCARDED "discarded"
/* Not an outcome: a dependency's record while jobs wait for it (BATCH_PUSH writes it; WAITED
 * in lua/lib/batch.lua). It reads as no record; a plain success's ack finds it there. */
#define SETTLED_WAITED "waited"

/*
 * Run batch script name with the eight arguments every batch script takes first
 * (lua/lib/batch.lua: the key prefixes, now, the two TTLs) followed by args (lens as
 * rscript's, for args only; may be NULL). The reply, or NULL (r->err).
 */
redisReply *workflow_script(struct rconn *r, const char *name, int nargs, const char **args,
                            const size_t *lens);

/* Log the callbacks a batch script's reply lists from index first on ('bid kind jid'). */
void workflow_log_fired(const redisReply *rep, size_t first);

/*
 * Job jid settled for good as outcome (SETTLED_*), a member of bid (NULL = none):
 * BATCH_SETTLE, called again while it says its release was cut (each call releases a
 * bounded share, lib/batch.lua), so no call blocks Redis for long. Logs what it fired,
 * released and buried. 0 done (a later call that fails leaves the rest noted in
 * cogworker:batch:owed, for the poller), -1 error (r->err: nothing done).
 */
int workflow_settle(struct rconn *r, const char *jid, const char *bid, const char *outcome);

/* The note a burial script writes in cogworker:batch:owed for the settle it leaves to its
 * caller ("<outcome> <bid>", malloc'd). */
char *workflow_owed_note(const char *outcome, const char *bid);

/*
 * The same for a job whose filing took it off every list already (a burial by orphan
 * recovery, a due entry past its deadline): nothing can redo it, so a failure is said,
 * with the command that settles it by hand.
 */
void workflow_settle_filed(struct rconn *r, const char *jid, const char *bid,
                           const char *outcome);

/* Where the poller's looks go on (cursors of BATCH_EXPIRE's windows, "score member" or
 * empty); zeroed to begin. One per poller: each looks at every waiting job in turn. */
#define WORKFLOW_CURSOR_MAX 512
struct workflow_cursor {
	char waiting[WORKFLOW_CURSOR_MAX], listed[WORKFLOW_CURSOR_MAX];
};

/*
 * The poller's look at each orphan check (BATCH_EXPIRE): uncommitted batches past their
 * time expire, each said in the log, and settle in their parent; dependencies settled
 * without releasing their dependants (a crash after the ack) are settled again, looked
 * for a window of waiting jobs at a time from cur on (several calls while it has not
 * come round); batches whose keys expired leave the list. Then the settles noted in
 * cogworker:batch:owed (a release a crash cut between two calls, a burial whose settle
 * failed) are finished, up to OWED_CALLS calls a look. 0 done, -1 error (r->err).
 */
int workflow_tend(struct rconn *r, struct workflow_cursor *cur);

/* Batches not yet committed and jobs waiting for other jobs, fleet-wide (ZCARD of
 * cogworker:batch:open and :waiting): *open, *waiting. 0, or -1 (r->err). */
int workflow_counts(struct rconn *r, long long *open, long long *waiting);

/* The same as Prometheus gauges, cogworkerd_batches_open and
 * cogworkerd_jobs_waiting_for_jobs, into b. 0, or -1 (r->err; nothing written). */
int workflow_metrics(struct rconn *r, struct sbuf *b);

#endif
