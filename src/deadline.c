/* SPDX-License-Identifier: MIT */
/*
 * deadline.c: jobs past their deadline are never started (doc/protocol.md §7.31).
 *
 * A deadline is the job's own expires_at, or its handler's expires_in after enqueued_at
 * (job_deadline, job.c). It is checked at the two places a job can come to run: when a
 * fetcher has taken it off its queue (before anything of the run: no workers entry, no
 * `start:` line, no status "working"), and when a schedule or retry entry comes due (before
 * it is put back on its queue, so an expired retry does not travel through a queue to be
 * turned away there). The handler's timeout is a different thing and is not touched: a
 * job that started before its deadline runs to its end.
 *
 * What an expired job becomes is the handler's `expired`: "dead" (the default) files it
 * into the dead set as Cogworker::JobExpired, with on_death, like any terminal failure;
 * "discard" drops it. A fetched job goes through failure routing (settle.c), so every
 * fault path of a filing (the interrupt, the pending settlement) applies to it too, and
 * it leaves the in-progress list only once filed. A due entry is moved by the KILL script
 * (check it is still in its set, add it to dead, then remove it) or dropped by ZREM, so
 * two pollers can never bury one entry twice; only the poller whose call moved it does the
 * follow-up (stats, lock release, on_death). The entry's settle in its batch and for the
 * jobs that wait for it (BATCH_SETTLE, in the follow-up) is noted in cogworker:batch:owed
 * by the same script, so a crash or a Redis error between the two leaves the note, which
 * the poller settles.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "bookkeeping.h"
#include "counters.h"
#include "deadline.h"
#include "deathhook.h"
#include "keys.h"
#include "settle.h"
#include "state.h"
#include "util.h"
#include "workflow.h"

static struct log_site entry_site = LOG_SITE("Scheduled poll");

double deadline_of(const struct job *j, const struct handler *h, int *from_job)
{
	return job_deadline(j->obj, h ? h->expires_in : 0, from_job);
}

/* "expired at 2026-01-01T12:00:00Z before it started (its expires_at)". */
static char *expired_message(double deadline, int from_job, const struct handler *h)
{
	char when[32];
	time_t t = (time_t)deadline;
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (from_job)
		return xasprintf("expired at %s before it started (its expires_at)", when);
	return xasprintf("expired at %s before it started (expires_in %gs after it was enqueued)",
	                 when, h ? h->expires_in : 0);
}

/* The job's one line: "expired: K jid=J: expired at … (its expires_at) → dead". */
static void log_expired(const struct job *j, const char *msg, const char *where,
                        const char *how)
{
	const struct log_field f[] = { { "outcome", where, 0 },
	                               { "error_class", JOB_EXPIRED, 0 },
	                               { "error_message", msg, 0 } };
	log_event(LOG_WARN, "expired", f, 3, "expired: %s jid=%s: %s → %s%s", j->cls ? j->cls : "",
	          j->jid ? j->jid : "?", msg, where, how);
}

void deadline_settle_fetched(struct rconn *r, const struct conf *c, const struct job *j,
                             const struct handler *h, double deadline, int from_job,
                             struct log_site *site)
{
	int discard = h && h->expired_discard;
	char *msg = expired_message(deadline, from_job, h);
	bump_stats(r, 0, site);
	status_write(r, c, j, "failed", JOB_EXPIRED, msg, NULL);
	int died = 0;
	char *dead_entry = NULL;
	struct filing w = { 0 };
	enum disposition disp = route_failure(r, j, discard ? DECIDE_DISCARD : DECIDE_DEAD,
	                                      JOB_EXPIRED, msg, site, &died, &dead_entry, &w);
	log_expired(j, msg, discard ? "discarded" : "dead",
	            w.owed ? ", not filed yet: Redis failed; kept in memory for reconcile"
	            : w.gone ? ", not filed: no longer on our in-progress list"
	            : w.interrupted ? ", filed by the interrupt path" : "");
	metrics_inc(METRIC_JOBS_EXPIRED);
	if (disp == DISP_ACK)
		settle_ack(r, j->raw, j->raw_len, j->jid, j->bid,
		           discard ? SETTLED_DISCARDED : SETTLED_DEAD);
	if (died && dead_entry)
		on_death_run(j->cls, j->jid, dead_entry);
	free(dead_entry);
	free(msg);
}

/* A due entry past its deadline: moved to dead or dropped (KILL), its settle noted in the
 * same step (doc/protocol.md §7.34). 1 when this call did it, 0 when the entry was gone
 * already, -1 on an error (in r). */
static int settle_entry(struct rconn *r, const char *set, const struct job *j, int discard,
                        const char *msg, char **dead_entry)
{
	double now = now_float();
	char score[32];
	job_format_time(now, score);
	if (!discard)
		*dead_entry = job_failure_payload(j, JOB_EXPIRED, msg, now, j->retry_count + 1, 0, 0);
	const char *entry = discard ? "" : *dead_entry;
	char *owed = workflow_owed_note(discard ? SETTLED_DISCARDED : SETTLED_DEAD, j->bid);
	const char *keys[] = { set, K_DEAD, K_BATCH_OWED };
	const char *args[] = { j->raw, score, entry, j->jid ? j->jid : "", owed };
	size_t lens[] = { j->raw_len, strlen(score), strlen(entry), j->jid ? strlen(j->jid) : 0,
	                  strlen(owed) };
	redisReply *rep = rscript(r, "kill", j->jid ? 3 : 2, keys, 5, args, lens);
	free(owed);
	if (!rep)
		return -1;
	int done = reply_integer(rep, 0) == 1;
	freeReplyObject(rep);
	return done;
}

int deadline_settle_entry(struct rconn *r, const char *set, const char *raw, size_t len)
{
	struct job j;
	job_parse(&j, raw, len, NULL);
	struct conf *c = conf_acquire();
	const struct handler *h = j.obj ? conf_find_handler(c, j.cls ? j.cls : "") : NULL;
	int from_job = 0;
	double deadline = j.obj ? deadline_of(&j, h, &from_job) : 0;
	int rc = 0;
	log_job_begin(j.cls, j.jid, j.queue);
	if (deadline > 0 && now_float() > deadline) {
		int discard = h && h->expired_discard;
		char *msg = expired_message(deadline, from_job, h);
		char *dead_entry = NULL;
		int done = settle_entry(r, set, &j, discard, msg, &dead_entry);
		if (done < 0 && r->unavailable) {
			rc = -1;
		} else if (done < 0) {
			/* Left due: the fetcher that takes it off its queue checks the deadline too. */
			log_error("Scheduled poll: expired entry of %s not moved: %s", set, r->err);
		} else {
			rc = 1;
		}
		if (done == 1) {
			bump_stats(r, 0, &entry_site);
			workflow_settle_filed(r, j.jid, j.bid, discard ? SETTLED_DISCARDED : SETTLED_DEAD);
			release_job_locks(r, j.jid, j.pjid, j.unique, j.cls, j.queue, j.args_json);
			metrics_inc(METRIC_JOBS_EXPIRED);
			char *from = xasprintf(" (from %s)", set);
			log_expired(&j, msg, discard ? "discarded" : "dead", from);
			free(from);
			if (dead_entry)
				on_death_run(j.cls, j.jid, dead_entry);
		}
		free(dead_entry);
		free(msg);
	}
	log_job_end();
	conf_release(c);
	job_free(&j);
	return rc;
}
