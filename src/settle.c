/* SPDX-License-Identifier: MIT */
/*
 * settle.c: what happens to a job after its handler ran (doc/protocol.md §7.5–§7.7, §7.20).
 *
 * The order is the point of this file. A job leaves the in-progress list only once it is
 * safely filed: failure routing writes the retry/dead entry first and acks after; when
 * that write fails the job is *interrupted* (rebuilt from the raw payload, filed into retry
 * after 30 s·n or into dead) by a script that removes it from the in-progress list in the
 * same atomic step; when even that fails, the filing is remembered in memory (a pending
 * settlement) and reconcile or shutdown completes it. A job that ran is never put back on
 * a queue because something after its run failed (lessons 11-19).
 *
 * A job that settles for good (a success, a death, a discard) settles in its batch and
 * releases or buries the jobs that wait for it (BATCH_SETTLE, doc/protocol.md §7.34)
 * *before* it leaves the in-progress list: a crash in between leaves the job listed, so it
 * is recovered, runs again and settles again, which the script makes nothing; after the
 * ack, the same crash would lose the settle with nothing left to redo it. A settle that
 * fails is owed with the ack or filing behind it, settled first. A plain job's success is
 * the exception, to keep its single round trip: its settled record goes before the LREM in
 * the ack's pipeline (SET ... GET: the old value says whether jobs wait for it, one command
 * where a SET and an EXISTS were) and the script runs after, only when they do; the
 * poller's BATCH_EXPIRE redoes from the record what a crash cut short. The same old value
 * stands for the orphan counter's DEL and output keeping's EXISTS, which every such ack
 * sent before: REQUEUE and a follower mark the record of a job they touch, so a success
 * whose record was empty has no counter to delete and no one to keep a silent run for.
 *
 * All bookkeeping (stats, throughput, attempts, lock release and extension) is best
 * effort: it is logged on failure and never changes the outcome (lesson 71). Lock
 * releases that fail are kept as deferred releases and retried on every beat (lesson 72).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "counters.h"
#include "deathhook.h"
#include "handler.h"
#include "job.h"
#include "json.h"
#include "keys.h"
#include "outcome.h"
#include "outkeep.h"
#include "producer.h"
#include "settle.h"
#include "state.h"
#include "util.h"
#include "workflow.h"

#define MAX_INTERRUPTS 3
#define INTERRUPT_DELAY 30.0

struct deferred_release {
	struct deferred_release *next;
	char *key, *jid;
};

/* Both lists are this file's; settle_mu guards them (never held across a Redis call). */
static pthread_mutex_t settle_mu = PTHREAD_MUTEX_INITIALIZER;
static struct pending *pending;
static struct deferred_release *deferred;

static void pending_add(struct pending *p)
{
	pthread_mutex_lock(&settle_mu);
	p->next = pending;
	pending = p;
	pthread_mutex_unlock(&settle_mu);
}

int pending_has(const char *raw)
{
	pthread_mutex_lock(&settle_mu);
	int has = 0;
	for (struct pending *p = pending; p && !has; p = p->next)
		has = strcmp(p->raw, raw) == 0;
	pthread_mutex_unlock(&settle_mu);
	return has;
}

struct pending *pending_take_all(void)
{
	pthread_mutex_lock(&settle_mu);
	struct pending *all = pending;
	pending = NULL;
	pthread_mutex_unlock(&settle_mu);
	return all;
}

/* ---- owned keys and deferred releases ---- */

static void defer_release(const char *key, const char *jid)
{
	pthread_mutex_lock(&settle_mu);
	for (struct deferred_release *d = deferred; d; d = d->next)
		if (strcmp(d->key, key) == 0 && strcmp(d->jid, jid) == 0) {
			pthread_mutex_unlock(&settle_mu);
			return;
		}
	struct deferred_release *d = xcalloc(1, sizeof *d);
	d->key = xstrdup(key);
	d->jid = xstrdup(jid);
	d->next = deferred;
	deferred = d;
	pthread_mutex_unlock(&settle_mu);
}

void release_owned(struct rconn *r, const char *key, const char *jid)
{
	if (owned_delete(r, key, jid) >= 0)
		return;
	if (r->unavailable) {
		log_warn("release of %s deferred: %s", key, r->err);
		defer_release(key, jid);
	} else {
		log_error("release of %s failed (ignored): %s", key, r->err);
	}
}

int expire_owned(struct rconn *r, const char *key, const char *jid, long ttl)
{
	char t[32];
	snprintf(t, sizeof t, "%ld", ttl < 1 ? 1 : ttl);
	const char *keys[] = { key };
	const char *args[] = { jid, t };
	redisReply *rep = rscript(r, "expire_if_owned", 1, keys, 2, args, NULL);
	if (!rep) {
		log_error("lock %s not extended (ignored): %s", key, r->err);
		return -1;
	}
	freeReplyObject(rep);
	return 0;
}

void deferred_releases_retry(struct rconn *r)
{
	pthread_mutex_lock(&settle_mu);
	struct deferred_release *list = deferred;
	deferred = NULL;
	pthread_mutex_unlock(&settle_mu);
	while (list) {
		struct deferred_release *d = list;
		list = d->next;
		int failed = owned_delete(r, d->key, d->jid) < 0;
		if (failed && r->unavailable) {
			d->next = list;                 /* Redis still away: keep the rest */
			pthread_mutex_lock(&settle_mu);
			struct deferred_release **tail = &deferred;
			while (*tail)
				tail = &(*tail)->next;
			*tail = d;
			pthread_mutex_unlock(&settle_mu);
			return;
		}
		if (failed)         /* a stale r->err after a success is not a failure */
			log_error("deferred release of %s dropped: %s", d->key, r->err);
		free(d->key);
		free(d->jid);
		free(d);
	}
}

void release_job_locks(struct rconn *r, const char *jid, const char *pjid, int unique,
                       const char *cls, const char *queue, const char *args_json)
{
	if (!jid)
		return;
	if (unique) {
		char *k = job_unique_key(cls, queue, args_json);
		if (k)
			release_owned(r, k, jid);
		free(k);
	}
	if (pjid) {
		char *k = xasprintf(K_RUNNING "%s", pjid);
		release_owned(r, k, jid);
		free(k);
	}
}

void extend_job_locks(struct rconn *r, const char *jid, const char *pjid, int unique,
                      const char *cls, const char *queue, const char *args_json, double delay)
{
	if (!jid)
		return;
	struct conf *c = conf_acquire();
	double ttl = delay + c->unique_lock_ttl;
	conf_release(c);
	long t = (long)ttl + (ttl > (double)(long)ttl);
	if (unique) {
		char *k = job_unique_key(cls, queue, args_json);
		if (k)
			expire_owned(r, k, jid, t);
		free(k);
	}
	if (pjid) {
		char *k = xasprintf(K_RUNNING "%s", pjid);
		expire_owned(r, k, jid, t);
		free(k);
	}
}

/* ---- stats, throughput and attempts ---- */

void stats_add(struct rconn *r, struct rpipe *p, int success)
{
	char bucket[64];
	snprintf(bucket, sizeof bucket, K_THROUGHPUT "%ld", (long)(now_float() / 3600));
	rpipe_add(r, p, "INCR %s", success ? K_PROCESSED : K_FAILED);
	rpipe_add(r, p, "HINCRBY %s %s 1", bucket, success ? "processed" : "failed");
	rpipe_add(r, p, "EXPIRE %s 90000", bucket);
}

void stats_read(struct rconn *r, struct rpipe *p, struct log_site *site)
{
	redisReply *rep[3];
	int failures = rpipe_read(r, p, 3, rep);
	for (int i = 0; i < 3; i++)
		if (rep[i])
			freeReplyObject(rep[i]);
	if (failures && !r->unavailable)
		log_error("stats failed (ignored): %s", r->err);
	else
		site_result(site, r, failures == 0, "stats failed (ignored)");
}

void bump_stats(struct rconn *r, int success, struct log_site *site)
{
	struct rpipe p;
	rpipe_begin(r, &p);
	stats_add(r, &p, success);
	stats_read(r, &p, site);
}

int record_attempt(struct rconn *r, const char *jid, long attempt, double when,
                   const char *outcome, const char *error_class, const char *error_message,
                   struct log_site *site)
{
	if (!jid)
		return 0;
	char t[32];
	job_format_time(when, t);
	char *qc = json_quote(error_class, strlen(error_class));
	char *qm = json_quote(error_message, strlen(error_message));
	char *entry = xasprintf("{\"attempt\":%ld,\"failed_at\":%s,\"outcome\":\"%s\","
	                        "\"error_class\":%s,\"error_message\":%s}",
	                        attempt, t, outcome, qc, qm);
	char *key = xasprintf(K_ATTEMPTS "%s", jid);
	struct rpipe p;
	redisReply *rep[3];
	rpipe_begin(r, &p);
	rpipe_add(r, &p, "RPUSH %s %s", key, entry);
	rpipe_add(r, &p, "LTRIM %s -25 -1", key);
	rpipe_add(r, &p, "EXPIRE %s 2592000", key);
	int failures = rpipe_exec(r, &p, rep);
	for (int i = 0; i < 3; i++)
		if (rep[i])
			freeReplyObject(rep[i]);
	if (failures && !r->unavailable)
		log_error("attempts log failed (ignored): %s", r->err);
	else
		site_result(site, r, failures == 0, "attempts log failed (ignored)");
	free(qc);
	free(qm);
	free(entry);
	free(key);
	return failures == 0;
}

/* ---- finished here: acks Redis confirmed ---- */

/*
 * A failover can lose an acknowledged write (the demoted primary took it, or the replica
 * had not got it yet). A job whose ack was lost reappears on our list on the new primary
 * though it finished here, and reconcile would requeue it: a second run. So the last
 * FINISHED_KEEP confirmed acks are remembered as digests of the raw payload, and
 * reconcile acks such a stray again instead (doc/protocol.md §7.11).
 */
#define FINISHED_KEEP 16384
static uint64_t finished[FINISHED_KEEP];        /* under settle_mu; 0 = empty */
static unsigned char finished_how[FINISHED_KEEP];       /* index into settled_outcomes */
static unsigned finished_next;

/* How a finished job settled for good, as finished_how keeps it: [0] a retry. */
static const char *const settled_outcomes[] = { NULL, SETTLED_SUCCESS, SETTLED_DEAD,
                                                SETTLED_DISCARDED };

static void finished_note(const char *raw, size_t len, const char *outcome)
{
	uint64_t d = bytes_digest(raw, len);
	unsigned char how = 0;
	for (unsigned char i = 1; outcome && i < 4; i++)
		if (strcmp(outcome, settled_outcomes[i]) == 0)
			how = i;
	pthread_mutex_lock(&settle_mu);
	finished[finished_next] = d;
	finished_how[finished_next] = how;
	finished_next = (finished_next + 1) % FINISHED_KEEP;
	pthread_mutex_unlock(&settle_mu);
}

int finished_here(const char *raw, size_t len, const char **outcome)
{
	uint64_t d = bytes_digest(raw, len);
	int found = 0;
	unsigned char how = 0;
	pthread_mutex_lock(&settle_mu);
	for (unsigned i = 0; i < FINISHED_KEEP && !found; i++) {
		found = finished[i] == d;
		how = finished_how[i];
	}
	pthread_mutex_unlock(&settle_mu);
	if (outcome)
		*outcome = found ? settled_outcomes[how] : NULL;
	return found;
}

/* ---- ack, give back ---- */

/* A pending settlement that owes the settle of a job for good, then its ack (or, in basic
 * mode, the settle only: the job left its list already); made: it was made once already. */
static void owe_flow(const char *raw, size_t len, const char *jid, const char *bid,
                     const char *outcome, int made)
{
	struct pending *p = xcalloc(1, sizeof *p);
	p->raw = xstrndup(raw, len);
	p->is_ack = atomic_load(&D.fetch_mode) != FETCH_BASIC;
	p->flow_only = !p->is_ack;
	p->since = now_float();
	p->jid = xstrdup(jid);
	p->flow = xstrdup(outcome);
	p->settled = outcome;
	p->bid = bid ? xstrdup(bid) : NULL;
	p->flow_made = made;
	pending_add(p);
}

/* ACK attempts first..3, sleeping 0.1·n s after a failed attempt n; then a pending entry,
 * which settles the job again (outcome, bid) before its late ack. settle: the settle is
 * still to make (a plain success whose record did not ride on its ack), each attempt
 * making it first. */
static int ack_attempts(struct rconn *r, const char *raw, size_t len, const char *jid,
                        const char *bid, const char *outcome, int first, int settle)
{
	char *list = xasprintf(K_INPROGRESS "%s", D.identity);
	char *counter = xasprintf(K_ORPHANINGS "%s", jid ? jid : "");
	const char *keys[] = { list, counter };
	const char *args[] = { raw };
	size_t lens[] = { len };
	int ok = 0;
	if (first > 1)
		sleep_seconds(0.1 * (first - 1));
	for (int attempt = first; attempt <= 3 && !ok; attempt++) {
		if (settle && workflow_settle(r, jid, bid, outcome) == 0)
			settle = 0;
		redisReply *rep = settle ? NULL : rscript(r, "ack", 2, keys, 1, args, lens);
		if (rep) {
			freeReplyObject(rep);
			finished_note(raw, len, outcome);
			ok = 1;
		} else if (attempt < 3) {
			sleep_seconds(0.1 * attempt);
		}
	}
	if (!ok) {
		/* Not final: reconcile retries it, and an attempt whose reply was lost may have
		 * been made after all (a stalled server runs what it was sent). */
		log_warn("couldn't acknowledge finished job jid=%s yet (3 attempts failed: %s): "
		         "retried once Redis answers", jid ? jid : "?", r->err);
		if (jid && outcome) {
			owe_flow(raw, len, jid, bid, outcome, !settle);
		} else {
			struct pending *p = xcalloc(1, sizeof *p);
			p->raw = xstrndup(raw, len);
			p->is_ack = 1;
			p->jid = jid ? xstrdup(jid) : NULL;
			p->since = now_float();
			pending_add(p);
		}
	}
	free(list);
	free(counter);
	return ok ? 0 : -1;
}

int settle_ack(struct rconn *r, const char *raw, size_t len, const char *jid, const char *bid,
               const char *outcome)
{
	if (atomic_load(&D.fetch_mode) == FETCH_BASIC)
		return 0;
	return ack_attempts(r, raw, len, jid, bid, outcome, 1, 0);
}

/* workflow_settle, or, when Redis fails, the settle and the ack owed (owe_flow). */
static int flow_first(struct rconn *r, const char *raw, size_t len, const char *jid,
                      const char *bid, const char *outcome)
{
	if (!jid || workflow_settle(r, jid, bid, outcome) == 0)
		return 0;
	log_error("couldn't settle jid=%s (%s) in its batch and dependants, nor ack it (kept in "
	          "memory, settled later): %s", jid, outcome, r->err);
	owe_flow(raw, len, jid, bid, outcome, 0);
	return -1;
}

int settle_flow_first(struct rconn *r, const struct job *j, const char *outcome)
{
	return flow_first(r, j->raw, j->raw_len, j->jid, j->bid, outcome);
}

/* A success's settled record, in the pipeline of its ack, before the LREM: one SET ... GET
 * (Redis 6.2, as the LMOVE a held ack follows), whose reply says whether the job needs a
 * closer look (what BATCH_PUSH, REQUEUE or a follower left there, doc/protocol.md §7.34). */
static void settled_add(struct rconn *r, struct rpipe *p, const char *jid)
{
	char *rec = xstrcat2(K_SETTLED, jid);
	const char *set[] = { "SET", rec, SETTLED_SUCCESS, "EX", SETTLED_TTL, "GET" };
	rpipe_add_argv(r, p, 6, set, NULL);
	free(rec);
}

/* The reply of settled_add: HELD_PRIOR_*. A reply lost (the LREM's says) counts as none. */
static int settled_read(struct rconn *r, struct rpipe *p)
{
	redisReply *rep;
	rpipe_read(r, p, 1, &rep);
	int prior = !rep || rep->type != REDIS_REPLY_STRING ? HELD_PRIOR_NONE
	            : strcmp(rep->str, SETTLED_WAITED) == 0 ? HELD_PRIOR_WAITED : HELD_PRIOR_OTHER;
	if (rep)
		freeReplyObject(rep);
	return prior;
}

void ack_hold(struct held_ack *a, char *raw, size_t len, const char *jid, const char *bid,
              const char *outcome, struct outrun *out, int ran_before)
{
	memset(a, 0, sizeof *a);
	a->raw = raw;
	a->len = len;
	a->jid = jid ? xstrdup(jid) : NULL;
	a->bid = bid ? xstrdup(bid) : NULL;
	a->outcome = outcome;
	a->out = out;
	a->ran_before = ran_before;
}

/* The held ack writes the settled record itself: a plain job's success (settle.c's opening
 * comment); every other settle for good was made before the ack, by BATCH_SETTLE. */
static int held_writes_record(const struct held_ack *a)
{
	return a->jid && !a->bid && a->outcome && strcmp(a->outcome, SETTLED_SUCCESS) == 0;
}

void ack_held_add(struct rconn *r, struct rpipe *p, struct held_ack *a)
{
	if (!a->raw)
		return;
	/* ACK's commands (§6.11) without the script: in a pipeline nothing comes between them
	 * either, a DEL cannot fail on a damaged counter, and the server is spared a Lua call
	 * per job. Only the LREM's reply decides whether the ack was done. A plain success
	 * sends no DEL: its record's SET ... GET says whether a counter may exist. */
	char *list = xstrcat2(K_INPROGRESS, D.identity);
	const char *lrem[] = { "LREM", list, "1", a->raw };
	size_t lens[] = { 4, strlen(list), 1, a->len };
	if (held_writes_record(a))
		settled_add(r, p, a->jid);
	rpipe_add_argv(r, p, 4, lrem, lens);
	if (!held_writes_record(a)) {
		char *counter = xstrcat2(K_ORPHANINGS, a->jid ? a->jid : "");
		const char *del[] = { "DEL", counter };
		rpipe_add_argv(r, p, 2, del, NULL);
		free(counter);
	}
	a->added = 1;
	free(list);
}

void ack_held_read(struct rconn *r, struct rpipe *p, struct held_ack *a)
{
	if (!a->added || a->read)
		return;
	redisReply *rep;
	if (held_writes_record(a))
		a->prior = settled_read(r, p);
	rpipe_read(r, p, 1, &rep);
	a->read = 1;
	a->ok = rep != NULL;
	a->unavailable = r->unavailable;
	snprintf(a->err, sizeof a->err, "%s", r->err);
	if (!held_writes_record(a)) {
		redisReply *del;
		rpipe_read(r, p, 1, &del);
		if (del)
			freeReplyObject(del);
	}
	if (rep)
		freeReplyObject(rep);
}

/* A plain success acked whose record held something: delete its orphan counter (REQUEUE
 * marks the record of each job it puts back) and release the jobs that wait for it. Both
 * best effort: the counter expires, and the poller releases what waits. */
static void held_look_closer(struct rconn *r, const struct held_ack *a)
{
	char *counter = xstrcat2(K_ORPHANINGS, a->jid);
	redisReply *rep = rcmd(r, "DEL %s", counter);
	if (rep)
		freeReplyObject(rep);
	free(counter);
	if (a->prior == HELD_PRIOR_WAITED && workflow_settle(r, a->jid, NULL, SETTLED_SUCCESS) != 0)
		log_warn("jid=%s: the jobs waiting for it not released yet (the poller will): %s",
		         a->jid, r->err);
}

void ack_held_settle(struct rconn *r, struct held_ack *a)
{
	if (!a->raw)
		return;
	if (!a->added) {
		/* No fetch to ride on: the same commands, on a pipeline of their own. */
		struct rpipe p;
		rpipe_begin(r, &p);
		ack_held_add(r, &p, a);
		ack_held_read(r, &p, a);
	}
	int done = a->read && a->ok;
	if (done) {
		finished_note(a->raw, a->len, a->outcome);
		if (held_writes_record(a) && a->prior != HELD_PRIOR_NONE)
			held_look_closer(r, a);
	} else {
		/* The ride failed: the record it carried is made by the settle itself, before
		 * each attempt of the ack, as for a member (a late ack settles as the first
		 * would have); the ACK script deletes the counter. */
		r->unavailable = a->unavailable;    /* the LREM's error, for what follows */
		snprintf(r->err, sizeof r->err, "%s", a->err);
		ack_attempts(r, a->raw, a->len, a->jid, a->bid, a->outcome, 2,
		             held_writes_record(a));
	}
	/* The output writer asks about a silent run unless the record said no one can. */
	outkeep_judge(a->out, !done || !held_writes_record(a) || a->prior != HELD_PRIOR_NONE ||
	                      a->ran_before);
	running_remove(a->raw);
	free(a->raw);
	free(a->jid);
	free(a->bid);
	memset(a, 0, sizeof *a);
}

redisReply *requeue_one(struct rconn *r, const char *raw, size_t len)
{
	return requeue_one_at(r, raw, len, 0);
}

redisReply *requeue_one_at(struct rconn *r, const char *raw, size_t len, int back)
{
	char *list = xasprintf(K_INPROGRESS "%s", D.identity);
	char ttl[32];
	struct conf *c = conf_acquire();
	snprintf(ttl, sizeof ttl, "%ld", conf_queued_ttl(c));
	conf_release(c);
	const char *keys[] = { list };
	const char *args[] = { raw, K_QUEUE, "default", K_RUNNING, ttl, "back" };
	size_t lens[] = { len, strlen(K_QUEUE), 7, strlen(K_RUNNING), strlen(ttl), 4 };
	redisReply *rep = rscript(r, "requeue_one", 1, keys, back ? 6 : 5, args, lens);
	free(list);
	return rep;
}

int give_back(struct rconn *r, const char *raw, size_t len, const char *queue)
{
	redisReply *rep;
	if (atomic_load(&D.fetch_mode) == FETCH_BASIC) {
		char *key = xasprintf(K_QUEUE "%s", queue);
		const char *argv[] = { "RPUSH", key, raw };
		size_t lens[] = { 5, strlen(key), len };
		rep = rcmd_argv(r, 3, argv, lens);
		free(key);
	} else {
		rep = requeue_one(r, raw, len);
	}
	if (!rep) {
		log_error("couldn't give back a job (left in progress for reconcile): %s", r->err);
		return -1;
	}
	freeReplyObject(rep);
	return 0;
}

/* ---- failure routing and the interrupt path ---- */

static struct pending *pending_filing(const struct job *j, const char *set, double score,
                                      const char *payload)
{
	struct pending *p = xcalloc(1, sizeof *p);
	p->raw = xstrndup(j->raw, j->raw_len);
	p->set = xstrdup(set);
	p->score = score;
	p->payload = xstrdup(payload);
	p->jid = j->jid ? xstrdup(j->jid) : NULL;
	p->cls = j->cls ? xstrdup(j->cls) : NULL;
	p->pjid = j->pjid ? xstrdup(j->pjid) : NULL;
	p->unique = j->unique;
	p->queue = xstrdup(j->queue);
	p->args_json = j->args_json ? xstrdup(j->args_json) : NULL;
	if (strcmp(set, K_DEAD) == 0 && j->jid) {
		p->flow = xstrdup(SETTLED_DEAD);
		p->bid = j->bid ? xstrdup(j->bid) : NULL;
	}
	return p;
}

/* Write a filing with the INTERRUPT script: 1 filed, 0 no longer ours, -1 error. */
static int interrupt_write(struct rconn *r, const char *raw, size_t len, const char *jid,
                           const char *set, double score, const char *payload)
{
	if (atomic_load(&D.fetch_mode) == FETCH_BASIC) {
		char sc[64];
		snprintf(sc, sizeof sc, "%.6f", score);
		const char *argv[] = { "ZADD", set, sc, payload };
		redisReply *rep = rcmd_argv(r, 4, argv, NULL);
		if (!rep)
			return -1;
		freeReplyObject(rep);
		return 1;
	}
	char *list = xasprintf(K_INPROGRESS "%s", D.identity);
	char *counter = xasprintf(K_ORPHANINGS "%s", jid ? jid : "");
	char sc[64];
	snprintf(sc, sizeof sc, "%.6f", score);
	const char *keys[] = { list, set, counter };
	const char *args[] = { raw, sc, payload };
	size_t lens[] = { len, strlen(sc), strlen(payload) };
	redisReply *rep = rscript(r, "interrupt", 3, keys, 3, args, lens);
	free(list);
	free(counter);
	if (!rep)
		return -1;
	int filed = (int)reply_integer(rep, 0);
	freeReplyObject(rep);
	return filed;
}

static enum disposition interrupt_job(struct rconn *r, const struct job *j, enum decision d,
                                      const char *error_class, const char *error_message,
                                      int *died, char **dead_entry, struct filing *where)
{
	double now = now_float();
	long count = j->interrupted_count + 1;
	long attempt = j->retry_count + 1;
	int out_of_retries = attempt > j->max_retries || d != DECIDE_RETRY;
	int to_dead = out_of_retries || count > MAX_INTERRUPTS;
	const char *set = to_dead ? K_DEAD : K_RETRY;
	double score = to_dead ? now : now + INTERRUPT_DELAY * (double)count;
	char *payload = job_failure_payload(j, error_class, error_message, now, attempt, 1, count);
	if (!payload)
		payload = job_minimal_dead_entry(j->raw, j->raw_len, j->jid, error_class,
		                                 error_message, now);
	/* Its batch settle first (the filing below takes it off the list); a failure owes
	 * both, in that order (pending_filing). */
	int filed = to_dead && j->jid && workflow_settle(r, j->jid, j->bid, SETTLED_DEAD) != 0
	            ? -1 : interrupt_write(r, j->raw, j->raw_len, j->jid, set, score, payload);
	*where = (struct filing){ .set = set, .delay = to_dead ? 0 : score - now,
	                          .interrupted = 1, .owed = filed < 0, .gone = filed == 0 };
	if (filed < 0) {
		log_error("couldn't file failed job jid=%s into %s (kept in memory, filed later): %s",
		          j->jid ? j->jid : "?", set, r->err);
		pending_add(pending_filing(j, set, score, payload));
		free(payload);
		return DISP_SETTLED;
	}
	if (filed == 1 && !to_dead) {
		extend_job_locks(r, j->jid, j->pjid, j->unique, j->cls, j->queue, j->args_json,
		                 INTERRUPT_DELAY * (double)count);
	} else if (filed == 1) {
		release_job_locks(r, j->jid, j->pjid, j->unique, j->cls, j->queue, j->args_json);
		*died = 1;
		*dead_entry = payload;
		payload = NULL;
	}
	free(payload);
	return DISP_SETTLED;
}

const char *attempt_outcome(enum decision d)
{
	switch (d) {
	case DECIDE_RETRY: return "retrying";
	case DECIDE_DEAD: return "dead";
	case DECIDE_KILLED: return "killed";
	case DECIDE_DISCARD: return "discarded";
	}
	return "dead";
}

enum disposition route_failure(struct rconn *r, const struct job *j, enum decision d,
                               const char *error_class, const char *error_message,
                               struct log_site *site, int *died, char **dead_entry,
                               struct filing *where)
{
	double now = now_float();
	long n = j->retry_count + 1;
	struct filing unused;
	if (!where)
		where = &unused;
	memset(where, 0, sizeof *where);
	*died = 0;
	*dead_entry = NULL;
	if (d == DECIDE_DISCARD) {
		release_job_locks(r, j->jid, j->pjid, j->unique, j->cls, j->queue, j->args_json);
		record_attempt(r, j->jid, n, now, "discarded", error_class, error_message, site);
		return settle_flow_first(r, j, SETTLED_DISCARDED) == 0 ? DISP_ACK : DISP_SETTLED;
	}
	char *payload = job_failure_payload(j, error_class, error_message, now, n, 0, 0);
	if (!payload)
		return interrupt_job(r, j, d, error_class, error_message, died, dead_entry, where);
	double delay = d == DECIDE_RETRY ? job_backoff(n) : 0;
	char score[64];
	snprintf(score, sizeof score, "%.6f", now + delay);
	const char *argv[] = { "ZADD", d == DECIDE_RETRY ? K_RETRY : K_DEAD, score, payload };
	redisReply *rep = rcmd_argv(r, 4, argv, NULL);
	if (!rep) {
		log_error("couldn't file failed job jid=%s into %s: %s; interrupting",
		          j->jid ? j->jid : "?", argv[1], r->err);
		free(payload);
		return interrupt_job(r, j, d, error_class, error_message, died, dead_entry, where);
	}
	freeReplyObject(rep);
	where->set = argv[1];
	where->delay = delay;
	if (d == DECIDE_RETRY) {
		extend_job_locks(r, j->jid, j->pjid, j->unique, j->cls, j->queue, j->args_json, delay);
	} else {
		release_job_locks(r, j->jid, j->pjid, j->unique, j->cls, j->queue, j->args_json);
	}
	record_attempt(r, j->jid, n, now, attempt_outcome(d), error_class, error_message, site);
	if (d != DECIDE_RETRY) {
		*died = 1;
		*dead_entry = payload;
		return settle_flow_first(r, j, SETTLED_DEAD) == 0 ? DISP_ACK : DISP_SETTLED;
	}
	free(payload);
	return DISP_ACK;
}

/* ---- jobs that are not jobs ---- */

/*
 * The unparseable payload, or the object that is no job (job_parse's invalid), goes to dead
 * as a wrapper (lesson 10), never run and never retried; no on_death, now or when a failed
 * burial is filed later (the pending filing is marked a burial).
 */
enum disposition bury_unparseable(struct rconn *r, const struct job *j, struct log_site *site)
{
	double now = now_float();
	const char *ecls = j->obj ? "Cogworker::InvalidJob" : "JSON::ParserError";
	const char *why = j->invalid ? j->invalid : j->parse_error ? j->parse_error : "not a job";
	char *wrapper = job_unparseable_wrapper(j->raw, j->raw_len, j->fetched_from, ecls, why,
	                                        now);
	char score[64];
	snprintf(score, sizeof score, "%.6f", now);
	const char *argv[] = { "ZADD", K_DEAD, score, wrapper };
	redisReply *rep = rcmd_argv(r, 4, argv, NULL);
	bump_stats(r, 0, site);
	log_error("%s job from queue %s moved to dead: %s", j->obj ? "invalid" : "unparseable",
	          j->fetched_from ? j->fetched_from : "?", why);
	if (rep) {
		freeReplyObject(rep);
		free(wrapper);
		return DISP_ACK;
	}
	/* The burial itself failed: owe it, like any filing (reconcile completes it). */
	struct pending *p = xcalloc(1, sizeof *p);
	p->raw = xstrndup(j->raw, j->raw_len);
	p->set = xstrdup(K_DEAD);
	p->score = now;
	p->payload = wrapper;
	p->queue = xstrdup(j->queue);
	p->burial = 1;
	pending_add(p);
	return DISP_SETTLED;
}

/*
 * A job longer than max_job_bytes that the fetch dropped unread (rlink.h) is an invalid job
 * too, buried the same way, but by what was seen of it: the wrapper gets its first
 * characters, and BURY_TOO_LARGE finds it on the list by its length, head and tail. No
 * pending filing when that fails: the job is still on the list (the fetcher tries again),
 * and its head is all a filing could hold.
 */
int bury_too_large(struct rconn *r, const char *from, const struct rskip *seen,
                   const char *queue, int taken, long long max, struct log_site *site)
{
	double now = now_float();
	char *why = job_too_large_why(seen->len, max);
	char *wrapper = job_unparseable_wrapper(seen->head, seen->head_len, queue,
	                                        "Cogworker::InvalidJob", why, now);
	char *list = from ? xstrdup(from) : xasprintf(K_INPROGRESS "%s", D.identity);
	char len[32], score[64];
	snprintf(len, sizeof len, "%zu", seen->len);
	snprintf(score, sizeof score, "%.6f", now);
	const char *keys[] = { list, K_DEAD };
	const char *args[] = { len, seen->head, seen->tail, score, wrapper, taken ? "1" : "0" };
	size_t lens[] = { strlen(len), seen->head_len < 256 ? seen->head_len : 256,
	                  seen->tail_len, strlen(score), strlen(wrapper), 1 };
	redisReply *rep = rscript(r, "bury_too_large", 2, keys, 6, args, lens);
	if (rep && reply_integer(rep, 0) == 1) {
		metrics_inc(METRIC_JOBS_DEAD);
		bump_stats(r, 0, site);
		log_error("invalid job from queue %s moved to dead: %s", queue, why);
	} else if (rep) {
		log_warn("a job of %zu bytes from queue %s, too large to read, is no longer on %s: "
		         "not buried", seen->len, queue, list);
	}
	if (rep)
		freeReplyObject(rep);
	free(why);
	free(wrapper);
	free(list);
	return rep ? 0 : -1;
}

/* ---- pending settlements (reconcile, stop) ---- */

void pending_free(struct pending *p)
{
	free(p->raw);
	free(p->set);
	free(p->payload);
	free(p->jid);
	free(p->cls);
	free(p->pjid);
	free(p->queue);
	free(p->args_json);
	free(p->flow);
	free(p->bid);
	free(p);
}

/* Settle one pending entry: 0 settled (forget it), -1 still owed. */
static int settle_one(struct rconn *r, struct pending *p)
{
	if (p->flow) {              /* before the job leaves the list (§7.34) */
		if (workflow_settle(r, p->jid, p->bid, p->flow) != 0)
			return -1;
		free(p->flow);
		p->flow = NULL;
	}
	if (p->flow_only)
		return 0;
	if (p->is_ack) {
		char *list = xasprintf(K_INPROGRESS "%s", D.identity);
		char *counter = xasprintf(K_ORPHANINGS "%s", p->jid ? p->jid : "");
		const char *keys[] = { list, counter };
		const char *args[] = { p->raw };
		redisReply *rep = rscript(r, "ack", 2, keys, 1, args, NULL);
		free(list);
		free(counter);
		if (!rep)
			return -1;
		freeReplyObject(rep);
		finished_note(p->raw, strlen(p->raw), p->settled);
		char late[32];
		human_duration(now_float() - p->since, 1, late, sizeof late);
		log_info("acknowledged finished job jid=%s %s after its ack first failed",
		         p->jid ? p->jid : "?", late);
		return 0;
	}
	int filed = interrupt_write(r, p->raw, strlen(p->raw), p->jid, p->set, p->score, p->payload);
	if (filed < 0)
		return -1;
	/* A burial: nothing ran, nothing to notify (§4.6), no locks of its own, no on_death. */
	if (filed == 1 && strcmp(p->set, K_DEAD) == 0 && !p->burial) {
		release_job_locks(r, p->jid, p->pjid, p->unique, p->cls, p->queue, p->args_json);
		on_death_run(p->cls, p->jid, p->payload);
	} else if (filed == 1 && strcmp(p->set, K_RETRY) == 0) {
		/* An interrupt into retry filed late: its locks last until it is due (§7.18). */
		double delay = p->score - now_float();
		extend_job_locks(r, p->jid, p->pjid, p->unique, p->cls, p->queue, p->args_json,
		                 delay > 0 ? delay : 0);
	}
	return 0;
}

void pending_acks_lost(const struct pending *list, const char *why)
{
	for (const struct pending *p = list; p; p = p->next)
		if (p->is_ack)
			log_error("finished job jid=%s was never acknowledged (%s): it stays in "
			          K_INPROGRESS "%s, and its recovery will run it again",
			          p->jid ? p->jid : "?", why, D.identity);
}

/* Held for a whole settling pass: the stop sequence's pass waits for a reconcile pass the
 * poller may be in the middle of, so no entry is out of the pending list while the shutdown
 * requeue reads it (a pending ack missed there would be requeued and run again). */
static pthread_mutex_t settling = PTHREAD_MUTEX_INITIALIZER;

void settle_pending_all(struct rconn *r, struct log_site *site)
{
	pthread_mutex_lock(&settling);
	struct pending *list = pending_take_all();
	while (list) {
		struct pending *p = list;
		list = p->next;
		p->next = NULL;
		if (settle_one(r, p) == 0) {
			site_result(site, r, 1, "settle");
			pending_free(p);
		} else {
			site_result(site, r, 0, "settle");
			pending_add(p);
		}
	}
	pthread_mutex_unlock(&settling);
}
