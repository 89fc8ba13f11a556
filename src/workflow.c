/* SPDX-License-Identifier: MIT */
/*
 * workflow.c: batches and dependencies (doc/protocol.md §7.34) as the daemon and
 * cogworkerctl call them. Every transition is one batch script (lua/batch_*.lua), so this
 * file only assembles their common arguments and says in the log what they did: the
 * rules (membership as a set, callbacks fired once, the release and burial of jobs that
 * wait) live in lua/lib/batch.lua alone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "job.h"
#include "keys.h"
#include "log.h"
#include "util.h"
#include "workflow.h"

#define COMMON_ARGS 8

redisReply *workflow_script(struct rconn *r, const char *name, int nargs, const char **args,
                            const size_t *lens)
{
	char now[32];
	job_format_time(now_float(), now);
	/* As many as given: a cut list dropped a push's dependencies past the 57th, and the
	 * job ran before them (the cap on them is the producer's, PUSH_MAX_AFTER). */
	const char **all = xcalloc((size_t)(COMMON_ARGS + nargs), sizeof *all);
	size_t *all_lens = xcalloc((size_t)(COMMON_ARGS + nargs), sizeof *all_lens);
	const char *common[COMMON_ARGS] = { K_BATCH, K_QUEUE, K_QUEUES, K_DEAD, K_SCHEDULE, now,
	                                    BATCH_KEEP_TTL, SETTLED_TTL };
	for (int i = 0; i < COMMON_ARGS; i++) {
		all[i] = common[i];
		all_lens[i] = strlen(common[i]);
	}
	for (int i = 0; i < nargs; i++) {
		all[COMMON_ARGS + i] = args[i];
		all_lens[COMMON_ARGS + i] = lens ? lens[i] : strlen(args[i]);
	}
	redisReply *rep = rscript(r, name, 0, NULL, COMMON_ARGS + nargs, all, all_lens);
	free(all);
	free(all_lens);
	return rep;
}

void workflow_log_fired(const redisReply *rep, size_t first)
{
	if (!rep || rep->type != REDIS_REPLY_ARRAY)
		return;
	for (size_t i = first; i < rep->elements; i++) {
		const redisReply *e = rep->element[i];
		char bid[64], kind[16], jid[64];
		if (e->type == REDIS_REPLY_STRING &&
		    sscanf(e->str, "%63s %15s %63s", bid, kind, jid) == 3)
			log_info("batch %s: on_%s fired, jid=%s", bid, kind, jid);
	}
}

/* One BATCH_SETTLE call: 1 when its release was cut (more to come), 0 done, -1 error. */
static int settle_call(struct rconn *r, const char *jid, const char *bid, const char *outcome,
                       long long *released, long long *buried)
{
	const char *args[] = { jid, outcome, bid ? bid : "" };
	redisReply *rep = workflow_script(r, "batch_settle", 3, args, NULL);
	if (!rep)
		return -1;
	int more = 0;
	if (rep->type == REDIS_REPLY_ARRAY && rep->elements >= 3) {
		*released += reply_integer(rep->element[0], 0);
		*buried += reply_integer(rep->element[1], 0);
		more = reply_integer(rep->element[2], 0) != 0;
		workflow_log_fired(rep, 3);
	}
	freeReplyObject(rep);
	return more;
}

static void log_settled(const char *jid, const char *outcome, long long released,
                        long long buried)
{
	if (released)
		log_info("jid=%s %s: %lld job(s) waiting for it released", jid, outcome, released);
	if (buried)
		log_warn("jid=%s %s: %lld job(s) waiting for it buried as "
		         "Cogworker::DependencyFailed", jid, outcome, buried);
}

int workflow_settle(struct rconn *r, const char *jid, const char *bid, const char *outcome)
{
	long long released = 0, buried = 0;
	int more = settle_call(r, jid, bid, outcome, &released, &buried);
	if (more < 0)
		return -1;
	while (more > 0)
		more = settle_call(r, jid, bid, outcome, &released, &buried);
	if (more < 0)
		log_warn("jid=%s %s: the rest of the jobs waiting for it not released yet (noted "
		         "in " K_BATCH_OWED ", the poller goes on): %s", jid, outcome, r->err);
	log_settled(jid, outcome, released, buried);
	return 0;
}

char *workflow_owed_note(const char *outcome, const char *bid)
{
	return xasprintf("%s %s", outcome, bid ? bid : "");
}

void workflow_settle_filed(struct rconn *r, const char *jid, const char *bid,
                           const char *outcome)
{
	if (jid && workflow_settle(r, jid, bid, outcome) != 0)
		log_error("jid=%s %s, but not settled in its batch%s%s nor for the jobs waiting for "
		          "it: %s (cogworkerctl batch settle --outcome %s does it)", jid, outcome,
		          bid ? " " : "", bid ? bid : "", r->err, outcome);
}

/* What one BATCH_EXPIRE call looks at: open batches past their time, waiting jobs and
 * listed batches (each a window that goes on from the last call's cursor), and how many
 * calls one look makes at most while the waiting jobs' window has not come round. Each
 * call stays a few ms (doc/performance.md "Batches at scale"); one look reaches up to
 * TEND_ROUNDS * TEND_WAITERS waiting jobs, so all of them within a settled record's 600 s
 * at the default orphan_check_interval up to about 100 000 waiting. */
#define TEND_BATCHES "100"
#define TEND_WAITERS "1000"
#define TEND_LISTED "1000"
#define TEND_ROUNDS 10
/* The most BATCH_SETTLE calls one look makes for the settles owed (each bounded,
 * lib/batch.lua): 10 000 dependants a look, each call a few ms. */
#define OWED_CALLS 40

/* Finish the settles noted in K_BATCH_OWED, up to OWED_CALLS calls. */
static int settle_owed(struct rconn *r)
{
	redisReply *rep = rcmd(r, "HSCAN %s 0 COUNT %d", K_BATCH_OWED, OWED_CALLS);
	if (!rep)
		return -1;
	const redisReply *kv = rep->type == REDIS_REPLY_ARRAY && rep->elements == 2
	                       ? rep->element[1] : NULL;
	int calls = 0, rc = 0;
	for (size_t i = 0; kv && i + 1 < kv->elements && calls < OWED_CALLS && rc == 0; i += 2) {
		const char *jid = kv->element[i]->str, *note = kv->element[i + 1]->str;
		const char *sp = strchr(note, ' ');
		char *outcome = sp ? xstrndup(note, (size_t)(sp - note)) : xstrdup(note);
		const char *bid = sp && sp[1] ? sp + 1 : NULL;
		long long released = 0, buried = 0;
		int more = 1;
		while (more > 0 && calls++ < OWED_CALLS)
			more = settle_call(r, jid, bid, outcome, &released, &buried);
		if (released || buried)
			log_warn("jid=%s %s: a settle cut short (a crash, a Redis error) finished by "
			         "the poller", jid, outcome);
		log_settled(jid, outcome, released, buried);
		rc = more < 0 ? -1 : 0;
		free(outcome);
	}
	freeReplyObject(rep);
	return rc;
}

/* Keep the cursor a reply gives (a string, '' when the window came round). */
static void keep_cursor(char *dst, const redisReply *e)
{
	if (e->type == REDIS_REPLY_STRING && e->len < WORKFLOW_CURSOR_MAX)
		memcpy(dst, e->str, e->len + 1);
	else
		dst[0] = '\0';        /* too long for the buffer: start over */
}

static int tend_once(struct rconn *r, struct workflow_cursor *cur)
{
	const char *args[] = { TEND_BATCHES, cur->waiting, TEND_WAITERS, cur->listed,
	                       TEND_LISTED };
	redisReply *rep = workflow_script(r, "batch_expire", 5, args, NULL);
	if (!rep)
		return -1;
	if (rep->type == REDIS_REPLY_ARRAY && rep->elements >= 4) {
		const redisReply *ex = rep->element[0];
		for (size_t i = 0; ex->type == REDIS_REPLY_ARRAY && i + 1 < ex->elements; i += 2)
			log_warn("batch %s expired uncommitted (%lld member(s) pending): its callbacks "
			         "will not fire; it settles as dead in its parent, if any",
			         ex->element[i]->str, reply_integer(ex->element[i + 1], 0));
		long long again = reply_integer(rep->element[1], 0);
		if (again)
			log_warn("%lld settled job(s) had jobs still waiting for them (a settle cut "
			         "short): released now", again);
		keep_cursor(cur->waiting, rep->element[2]);
		keep_cursor(cur->listed, rep->element[3]);
		workflow_log_fired(rep, 4);
	}
	freeReplyObject(rep);
	return 0;
}

int workflow_tend(struct rconn *r, struct workflow_cursor *cur)
{
	for (int i = 0; i < TEND_ROUNDS; i++) {
		if (tend_once(r, cur) != 0)
			return -1;
		if (!cur->waiting[0])
			break;
	}
	return settle_owed(r);
}

int workflow_counts(struct rconn *r, long long *open, long long *waiting)
{
	struct rpipe p;
	redisReply *rep[2];
	rpipe_begin(r, &p);
	rpipe_add(r, &p, "ZCARD " K_BATCH_OPEN);
	rpipe_add(r, &p, "ZCARD " K_BATCH_WAITING);
	int failures = rpipe_exec(r, &p, rep);
	*open = rep[0] ? reply_integer(rep[0], 0) : 0;
	*waiting = rep[1] ? reply_integer(rep[1], 0) : 0;
	for (int i = 0; i < 2; i++)
		if (rep[i])
			freeReplyObject(rep[i]);
	return failures ? -1 : 0;
}

int workflow_metrics(struct rconn *r, struct sbuf *b)
{
	long long open, waiting;
	if (workflow_counts(r, &open, &waiting) != 0)
		return -1;
	sb_printf(b, "# TYPE cogworkerd_batches_open gauge\ncogworkerd_batches_open %lld\n"
	          "# TYPE cogworkerd_jobs_waiting_for_jobs gauge\n"
	          "cogworkerd_jobs_waiting_for_jobs %lld\n", open, waiting);
	return 0;
}
