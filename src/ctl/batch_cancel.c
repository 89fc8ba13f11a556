/* SPDX-License-Identifier: MIT */
/*
 * batch_cancel.c: `cogworkerctl batch cancel BID --yes` (doc/protocol.md §7.34, §6.28,
 * §6.31).
 *
 * Three steps, each in windows, so that the cost follows the batch and the keys swept,
 * never their product, and no script call holds Redis for more than a few ms
 * (doc/performance.md "Batches at scale"):
 *
 *   1. the walk: BATCH_CANCEL on the batch, a chunk of its members per call; it cancels
 *      the batch at its first call (nothing fires in it or under it from then on), settles
 *      each member still waiting as discarded, and hands back its child batches, walked in
 *      turn: the tree's bids are what the next steps look for;
 *   2. the sweep: BATCH_PURGE over the schedule, retry, then every queue, a window per
 *      call, takes out the jobs whose "bid" is in the tree and settles each as discarded,
 *      in the same step; the sorted sets first, since what is due moves from them to the
 *      queues while the sweep runs;
 *   3. the running members, found in one read of the workers hashes and in-progress lists,
 *      are cancelled as `jobs cancel` does (they settle dead, in the cancelled batch).
 *
 * It replaced a look for each member in every queue and set, twice (`jobs delete` and
 * `jobs cancel` per jid), which never ended for 100 000 members. A cancel cut short is
 * finished by running it again: the walk and the sweep find what is left.
 */
#include <stdlib.h>
#include <string.h>
#include "ctl.h"
#include "job.h"
#include "jobs_find.h"
#include "jobs_run.h"
#include "producer.h"
#include "workflow.h"

#define WALK_CHUNK "200"        /* members BATCH_CANCEL looks at per call */
#define SWEEP_WINDOW "500"      /* entries of a list BATCH_PURGE looks at per call */
#define SWEEP_TAKE "500"        /* the most jobs it takes out (and settles) per call; */
#define SWEEP_ZSET_TAKE "100"   /* of a sorted set (its ZSCAN COUNT: no budget there) */
#define SWEEP_BUDGET_MS "10"    /* a list's call stops once it spent that (Redis's clock) */

struct cancel {
	struct ctl *c;
	char **bids;                    /* the tree: the batch, then each child met */
	size_t nbids, cap;
	char status[16];                /* the first call's: cancelled, again, complete */
	long long members, discarded, deleted, running, calls;
	double slowest;                 /* seconds: the longest script call seen from here */
};

static void add_bid(struct cancel *x, const char *bid)
{
	if (x->nbids == x->cap) {
		x->cap = x->cap ? x->cap * 2 : 16;
		x->bids = xrealloc(x->bids, sizeof *x->bids * x->cap);
	}
	x->bids[x->nbids++] = xstrdup(bid);
}

static int in_tree(const struct cancel *x, const char *bid)
{
	for (size_t i = 0; bid && i < x->nbids; i++)
		if (strcmp(x->bids[i], bid) == 0)
			return 1;
	return 0;
}

/* One batch script call, timed; its reply must be an array of at least n elements, the
 * first a string. NULL after the message. */
static redisReply *call(struct cancel *x, const char *name, int nargs, const char **args,
                        size_t n)
{
	double t0 = mono_now();
	redisReply *rep = workflow_script(&x->c->r, name, nargs, args, NULL);
	double took = mono_now() - t0;
	x->calls++;
	if (took > x->slowest)
		x->slowest = took;
	if (!rep) {
		ctl_redis_error(x->c, "batch cancel");
		return NULL;
	}
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements < n ||
	    rep->element[0]->type != REDIS_REPLY_STRING) {
		ctl_error("batch cancel: unexpected reply from %s", name);
		freeReplyObject(rep);
		return NULL;
	}
	return rep;
}

/* Step 1 for one batch of the tree (index i): its members, a chunk per call. */
static int walk(struct cancel *x, size_t i)
{
	char cursor[64] = "";
	do {
		const char *args[] = { x->bids[i], cursor, WALK_CHUNK };
		redisReply *rep = call(x, "batch_cancel", 3, args, 5);
		if (!rep)
			return CTL_USAGE;
		if (!cursor[0] && i == 0)
			snprintf(x->status, sizeof x->status, "%s", rep->element[0]->str);
		snprintf(cursor, sizeof cursor, "%s", rep->element[1]->str);
		const redisReply *ch = rep->element[2];
		for (size_t k = 0; ch->type == REDIS_REPLY_ARRAY && k < ch->elements; k++)
			add_bid(x, ch->element[k]->str);
		x->members += rep->element[3]->type == REDIS_REPLY_ARRAY
		              ? (long long)rep->element[3]->elements : 0;
		x->discarded += reply_integer(rep->element[4], 0);
		ctl_print_fired(x->c, rep, 5);
		freeReplyObject(rep);
	} while (strcmp(cursor, "0") != 0);
	return CTL_OK;
}

/* The locks a job taken out held, given back as jobs delete does. */
static void release(struct cancel *x, const redisReply *locked)
{
	for (size_t i = 0; locked->type == REDIS_REPLY_ARRAY && i < locked->elements; i++) {
		struct job j;
		job_parse(&j, locked->element[i]->str, locked->element[i]->len, NULL);
		if (producer_release_locks(&x->c->r, &j) < 0)
			ctl_error("warning: the locks of %s not released (they expire by their TTL): "
			          "%s", j.jid ? j.jid : "a member", x->c->r.err);
		job_free(&j);
	}
}

/* Step 2 for one key: a list (a queue) or a sorted set (attempts: the prefix of the
 * failures list its jobs lose, or ""). */
static int sweep(struct cancel *x, const char *key, const char *kind, const char *attempts,
                 const char *tomb)
{
	char cursor[64] = "0";
	while (cursor[0]) {
		const char *args[] = { x->bids[0], key, kind, cursor, SWEEP_WINDOW, tomb, attempts,
		                       strcmp(kind, "list") == 0 ? SWEEP_TAKE : SWEEP_ZSET_TAKE,
		                       SWEEP_BUDGET_MS };
		redisReply *rep = call(x, "batch_purge", 9, args, 3);
		if (!rep)
			return CTL_USAGE;
		snprintf(cursor, sizeof cursor, "%s", rep->element[0]->str);
		x->deleted += reply_integer(rep->element[1], 0);
		release(x, rep->element[2]);
		ctl_print_fired(x->c, rep, 3);
		freeReplyObject(rep);
	}
	return CTL_OK;
}

static int sweep_all(struct cancel *x)
{
	char tomb[80], jid[25];
	new_jid(jid);
	snprintf(tomb, sizeof tomb, "cogworkerctl batch cancel %s: removed %s", x->bids[0], jid);
	if (sweep(x, K_SCHEDULE, "zset", "", tomb) != CTL_OK ||
	    sweep(x, K_RETRY, "zset", K_ATTEMPTS, tomb) != CTL_OK)
		return CTL_USAGE;
	struct queue_info *qi;
	int nq, rc = CTL_OK;
	if (ctl_queue_names(x->c, 1, 1, &qi, &nq) != 0)
		return CTL_USAGE;
	for (int i = 0; i < nq && rc == CTL_OK; i++) {
		char *key = xasprintf(K_QUEUE "%s", qi[i].name);
		rc = sweep(x, key, "list", "", tomb);
		free(key);
	}
	ctl_free_queues(qi, nq);
	return rc;
}

/* Step 3: each running member of the tree (its workers entry, or its in-progress entry
 * when it started under a second ago), once. */
static int stop_running(struct cancel *x)
{
	struct found fd = { 0 };
	const struct filter any = { 0 };
	if (jobs_find(x->c, RUN_SETS, &any, 1, &fd) < 0) {
		jobs_found_free(&fd);
		return CTL_USAGE;
	}
	int rc = CTL_OK;
	for (int i = 0; i < fd.n; i++) {
		const struct entry *e = &fd.v[i];
		int again = 0;
		for (int k = 0; k < i && !again; k++)
			again = fd.v[k].j.jid && e->j.jid && strcmp(fd.v[k].j.jid, e->j.jid) == 0;
		if (again || !e->j.jid || !in_tree(x, e->j.bid))
			continue;
		x->running++;
		if (jobs_cancel_on(x->c, e->j.jid, e->process, jobs_entry_class(e), 0) == CTL_USAGE)
			rc = CTL_USAGE;
	}
	jobs_found_free(&fd);
	return rc;
}

static void cancel_free(struct cancel *x)
{
	for (size_t i = 0; i < x->nbids; i++)
		free(x->bids[i]);
	free(x->bids);
}

static void report(const struct cancel *x)
{
	if (x->c->json)
		printf("{\"bid\":\"%s\",\"cancelled\":true,\"again\":%s,\"children\":%zu,"
		       "\"discarded\":%lld,\"members\":%lld,\"deleted\":%lld,\"running\":%lld,"
		       "\"script_calls\":%lld,\"slowest_call_ms\":%.1f}\n", x->bids[0],
		       strcmp(x->status, "again") == 0 ? "true" : "false", x->nbids - 1,
		       x->discarded, x->members, x->deleted, x->running, x->calls,
		       x->slowest * 1000);
	else
		printf("%lld member job(s) deleted (queued, scheduled, retry), %lld running "
		       "cancelled; %lld script calls, the longest %.1f ms\n", x->deleted,
		       x->running, x->calls, x->slowest * 1000);
}

int ctl_batch_cancel(struct ctl *c, const char *bid)
{
	if (!c->yes) {
		ctl_error("batch cancel deletes the batch's jobs not yet run and cancels the running "
		          "ones: add --yes");
		return CTL_USAGE;
	}
	struct cancel x = { .c = c };
	add_bid(&x, bid);
	int rc = CTL_OK;
	for (size_t i = 0; i < x.nbids && rc == CTL_OK; i++)
		rc = walk(&x, i);
	if (rc == CTL_OK && strcmp(x.status, "complete") == 0) {
		ctl_error("batch %s is complete (its callbacks fired): nothing to cancel", bid);
		if (c->json)
			printf("{\"bid\":\"%s\",\"cancelled\":false,\"reason\":\"complete\"}\n", bid);
		cancel_free(&x);
		return CTL_NOTHING;
	}
	if (rc == CTL_OK && !c->json)
		printf("cancelled %s%s: no callback will fire; %zu child batch(es), %lld waiting "
		       "member(s) discarded, %lld member job(s) to stop\n", bid,
		       strcmp(x.status, "again") == 0 ? " (again)" : "", x.nbids - 1, x.discarded,
		       x.members);
	if (rc == CTL_OK)
		rc = sweep_all(&x);
	if (rc == CTL_OK)
		rc = stop_running(&x);
	if (rc == CTL_OK)
		report(&x);
	cancel_free(&x);
	return rc;
}
