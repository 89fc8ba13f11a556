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

int workflow_settle(struct rconn *r, const char *jid, const char *bid, const char *outcome)
{
	const char *args[] = { jid, outcome, bid ? bid : "" };
	redisReply *rep = workflow_script(r, "batch_settle", 3, args, NULL);
	if (!rep)
		return -1;
	if (rep->type == REDIS_REPLY_ARRAY && rep->elements >= 2) {
		long long released = reply_integer(rep->element[0], 0);
		long long buried = reply_integer(rep->element[1], 0);
		if (released)
			log_info("jid=%s %s: %lld job(s) waiting for it released", jid, outcome,
			         released);
		if (buried)
			log_warn("jid=%s %s: %lld job(s) waiting for it buried as "
			         "Cogworker::DependencyFailed", jid, outcome, buried);
		workflow_log_fired(rep, 2);
	}
	freeReplyObject(rep);
	return 0;
}

void workflow_settle_filed(struct rconn *r, const char *jid, const char *bid,
                           const char *outcome)
{
	if (jid && workflow_settle(r, jid, bid, outcome) != 0)
		log_error("jid=%s %s, but not settled in its batch%s%s nor for the jobs waiting for "
		          "it: %s (cogworkerctl batch settle --outcome %s does it)", jid, outcome,
		          bid ? " " : "", bid ? bid : "", r->err, outcome);
}

/* How many open batches and waiting jobs one look reads at most. */
#define TEND_BATCH "100"

int workflow_tend(struct rconn *r)
{
	const char *args[] = { TEND_BATCH };
	redisReply *rep = workflow_script(r, "batch_expire", 1, args, NULL);
	if (!rep)
		return -1;
	if (rep->type == REDIS_REPLY_ARRAY && rep->elements >= 2) {
		const redisReply *ex = rep->element[0];
		for (size_t i = 0; ex->type == REDIS_REPLY_ARRAY && i + 1 < ex->elements; i += 2)
			log_warn("batch %s expired uncommitted (%lld member(s) pending): its callbacks "
			         "will not fire", ex->element[i]->str,
			         reply_integer(ex->element[i + 1], 0));
		long long again = reply_integer(rep->element[1], 0);
		if (again)
			log_warn("%lld settled job(s) had jobs still waiting for them (a settle cut "
			         "short): released now", again);
		workflow_log_fired(rep, 2);
	}
	freeReplyObject(rep);
	return 0;
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
