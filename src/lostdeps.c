/* SPDX-License-Identifier: MIT */
/*
 * lostdeps.c: the poller's look for lost dependencies (doc/protocol.md §7.34 "Lost
 * dependencies").
 *
 * A job that waits for another is released or buried when that one settles for good,
 * which a daemon says with BATCH_SETTLE or its settled record. A Ruby worker knows nothing
 * of it: a dependency it runs leaves no record, one it retries to exhaustion goes to dead
 * with none, and one deleted from its Web UI is simply gone; the job waiting for it
 * waited for ever. So at each orphan check this looks at jobs that have waited longer than
 * lost_dependency_threshold, and at their dependencies with no settled record that are not
 * waiting themselves (those are somewhere, and their own dependencies are looked at), and
 * searches for them everywhere a job can be: every queue, the schedule, retry and dead, the
 * in-progress lists, the repeat and at-most-once orphans, the unsettled records, and each
 * process's workers hash and slot waiters (a basic fetch's running jobs).
 *
 *   - Found in dead (and nowhere else): it died without a settle, so it settles dead now,
 *     in its batch too (its entry names it): the rule of a dependency that died.
 *   - Found nowhere: its outcome is unknown (run to success by a Ruby worker, or deleted),
 *     so it is never taken for a success: at two searches at least the threshold apart it
 *     settles discarded, which buries the jobs waiting for it as DependencyFailed ("was
 *     discarded"), or releases those with after-any. The first miss is kept in Redis
 *     (cogworker:unseen_dependencies, dep -> time), so any process's later search counts,
 *     and a find deletes it. Two misses, because the search is not atomic (a job moving
 *     from a list not yet read to one read already is missed once) and a job run by a
 *     basic fetch is in no list while it runs.
 *   - Found anywhere else: it still runs or waits its turn; its first miss, if any, goes.
 *
 * What it costs: a search reads every job in Redis, by pages (LRANGE / ZRANGE of 100, never
 * one long command; an element over 64 KiB is read alone, and one over max_job_bytes not
 * at all: such a search judges nothing lost), so it runs only when some job waited longer
 * than the threshold for a dependency with no record, and at most once per threshold / 2
 * fleet-wide (the lock cogworker:unseen_dependencies:lock, SET NX EX). Measured: a queue of
 * 100 000 jobs searched twice (the two misses) took 2 002 pages, the longest 2.6 ms of
 * Redis time, 34 ms in all. Each look reads WAITERS_PER_LOOK waiting
 * jobs, walking the oldest on from where its last look stopped, so jobs stuck for other
 * reasons (a dependency scheduled far ahead) cannot hide the others.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "job.h"
#include "keys.h"
#include "log.h"
#include "lostdeps.h"
#include "util.h"
#include "workflow.h"

#define WAITERS_PER_LOOK 100
#define MAX_CANDIDATES 1000
#define PAGE 100
/* Longer elements of a page come as their lengths (rlink.h) and are read again one by one,
 * up to max_job_bytes: a page holds at most PAGE x ELEMENT_MAX bytes. */
#define ELEMENT_MAX (64 * 1024)

struct cand {
	char *jid;
	int found;      /* somewhere other than dead */
	char *dead;     /* its entry in dead (the first seen), or NULL */
};

struct search {
	struct cand *v;
	int n;
	long long max_job_bytes;    /* the longest element read (0: no limit) */
	int blind;                  /* an element could not be read: no "nowhere" verdict */
};

static int cand_cmp(const void *a, const void *b)
{
	return strcmp(((const struct cand *)a)->jid, ((const struct cand *)b)->jid);
}

static struct cand *cand_find(struct search *s, const char *id, size_t len)
{
	int lo = 0, hi = s->n - 1;
	while (lo <= hi) {
		int mid = (lo + hi) / 2;
		int c = strncmp(s->v[mid].jid, id, len);
		if (c == 0 && s->v[mid].jid[len] != '\0')
			c = 1;
		if (c == 0)
			return &s->v[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return NULL;
}

static void search_free(struct search *s)
{
	for (int i = 0; i < s->n; i++) {
		free(s->v[i].jid);
		free(s->v[i].dead);
	}
	free(s->v);
	s->v = NULL;
	s->n = 0;
}

/* Each jid the text names ("jid":"X", or escaped, \"jid\":\"X\", as in a workers entry's
 * payload) that is a candidate: marked found, or its dead entry kept. */
static void mark(struct search *s, const char *t, size_t n, int in_dead)
{
	const char *end = t + n;
	for (const char *p = t; (p = memmem(p, (size_t)(end - p), "\"jid", 4)) != NULL;) {
		p += 4;
		const char *q = p;
		while (q < end && (*q == '\\' || *q == '"' || *q == ':' || *q == ' '))
			q++;
		const char *id = q;
		while (q < end && *q != '"' && *q != '\\')
			q++;
		struct cand *c = cand_find(s, id, (size_t)(q - id));
		if (!c)
			continue;
		if (!in_dead)
			c->found = 1;
		else if (!c->dead)
			c->dead = xstrndup(t, n);
	}
}

static void mark_reply(struct search *s, const redisReply *rep, int in_dead)
{
	if (rep->type == REDIS_REPLY_STRING) {
		mark(s, rep->str, rep->len, in_dead);
		return;
	}
	for (size_t i = 0; rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++)
		if (rep->element[i]->type == REDIS_REPLY_STRING)
			mark(s, rep->element[i]->str, rep->element[i]->len, in_dead);
}

/* Elements first to last of a list (zset 0) or a sorted set (zset 1), none longer than
 * max bytes read (0: no limit). */
static redisReply *range(struct rconn *r, const char *key, int zset, long first, long last,
                         long long max)
{
	rconn_limit_bulk(r, (size_t)max, 0);
	redisReply *rep = rcmd(r, zset ? "ZRANGE %s %ld %ld" : "LRANGE %s %ld %ld", key, first,
	                       last);
	rconn_limit_bulk(r, 0, 0);
	return rep;
}

/* A list or a sorted set, page by page; an element too long for a page read alone, and
 * one longer than max_job_bytes (a fetcher buries it unread) makes the search blind. */
static int walk(struct rconn *r, struct search *s, const char *key, int zset, int in_dead)
{
	for (long start = 0;; start += PAGE) {
		redisReply *rep = range(r, key, zset, start, start + PAGE - 1, ELEMENT_MAX);
		if (!rep)
			return -1;
		size_t got = rep->type == REDIS_REPLY_ARRAY ? rep->elements : 0;
		for (size_t i = 0; i < got; i++) {
			const redisReply *e = rep->element[i];
			if (e->type == REDIS_REPLY_STRING) {
				mark(s, e->str, e->len, in_dead);
				continue;
			}
			redisReply *one = range(r, key, zset, start + (long)i, start + (long)i,
			                        s->max_job_bytes);
			if (!one) {
				freeReplyObject(rep);
				return -1;
			}
			if (one->type == REDIS_REPLY_ARRAY && one->elements == 1 &&
			    one->element[0]->type == REDIS_REPLY_STRING)
				mark_reply(s, one, in_dead);
			else if (one->type == REDIS_REPLY_ARRAY && one->elements == 1)
				s->blind = 1;
			freeReplyObject(one);
		}
		freeReplyObject(rep);
		if (got < PAGE)
			return 0;
	}
}

/* The keys prefix + each member of set, read with how (0 list, 1 HVALS, 2 GET). */
static int walk_members(struct rconn *r, struct search *s, const char *set, const char *prefix,
                        int how)
{
	redisReply *names = rcmd(r, "SMEMBERS %s", set);
	if (!names)
		return -1;
	int rc = 0;
	for (size_t i = 0; rc == 0 && names->type == REDIS_REPLY_ARRAY && i < names->elements; i++) {
		char *key = xstrcat2(prefix, names->element[i]->str);
		if (how == 0) {
			rc = walk(r, s, key, 0, 0);
		} else {
			rconn_limit_bulk(r, (size_t)s->max_job_bytes, 0);
			redisReply *rep = rcmd(r, how == 1 ? "HVALS %s" : "GET %s", key);
			rconn_limit_bulk(r, 0, 0);
			if (rep) {
				s->blind |= rep->type == REDIS_REPLY_INTEGER;
				for (size_t k = 0; rep->type == REDIS_REPLY_ARRAY && k < rep->elements;
				     k++)
					s->blind |= rep->element[k]->type == REDIS_REPLY_INTEGER;
				mark_reply(s, rep, 0);
				freeReplyObject(rep);
			} else {
				rc = -1;
			}
		}
		free(key);
	}
	freeReplyObject(names);
	return rc;
}

/* Every place a job can be, dead last (a job found elsewhere too is not dead). */
static int search(struct rconn *r, struct search *s)
{
	static const char *const lists[] = { K_REPEAT_ORPHANS, K_AT_MOST_ONCE_ORPHANS, K_UNSETTLED };
	if (walk_members(r, s, K_QUEUES, K_QUEUE, 0) != 0 ||
	    walk_members(r, s, K_IDENTITIES, K_INPROGRESS, 0) != 0 ||
	    walk_members(r, s, K_PROCESSES, K_WORKERS, 1) != 0 ||
	    walk_members(r, s, K_PROCESSES, K_WAITING, 2) != 0 ||
	    walk(r, s, K_SCHEDULE, 1, 0) != 0 || walk(r, s, K_RETRY, 1, 0) != 0)
		return -1;
	for (size_t i = 0; i < sizeof lists / sizeof *lists; i++)
		if (walk(r, s, lists[i], 0, 0) != 0)
			return -1;
	return walk(r, s, K_DEAD, 1, 1);
}

/* Up to WAITERS_PER_LOOK jobs that have waited longer than threshold, from st's place on. */
static redisReply *old_waiters(struct rconn *r, struct lostdeps *st, double now,
                               double threshold)
{
	char max[32];
	snprintf(max, sizeof max, "%.6f", now - threshold);
	for (int again = 0; again < 2; again++) {
		redisReply *rep = rcmd(r, "ZRANGEBYSCORE " K_BATCH_WAITING " -inf %s LIMIT %ld %d", max,
		                       st->offset, WAITERS_PER_LOOK);
		if (!rep)
			return NULL;
		size_t n = rep->type == REDIS_REPLY_ARRAY ? rep->elements : 0;
		st->offset = n < WAITERS_PER_LOOK ? 0 : st->offset + (long)n;
		if (n > 0 || again)
			return rep;
		freeReplyObject(rep);
	}
	return NULL;
}

/* Their dependencies, once each, at most MAX_CANDIDATES, sorted: into s. 0, or -1. */
static int dependencies_of(struct rconn *r, const redisReply *waiters, struct search *s)
{
	size_t n = waiters->elements;
	redisReply **reps = xcalloc(n, sizeof *reps);
	struct rpipe p;
	rpipe_begin(r, &p);
	for (size_t i = 0; i < n; i++)
		rpipe_add(r, &p, "SMEMBERS " K_AFTER "%s", waiters->element[i]->str);
	int failures = rpipe_exec(r, &p, reps);
	s->v = xcalloc(MAX_CANDIDATES, sizeof *s->v);
	for (size_t i = 0; i < n; i++) {
		for (size_t k = 0; reps[i] && reps[i]->type == REDIS_REPLY_ARRAY &&
		     k < reps[i]->elements && s->n < MAX_CANDIDATES; k++) {
			const char *dep = reps[i]->element[k]->str;
			int seen = 0;
			for (int j = 0; j < s->n && !seen; j++)
				seen = strcmp(s->v[j].jid, dep) == 0;
			if (!seen)
				s->v[s->n++].jid = xstrdup(dep);
		}
		if (reps[i])
			freeReplyObject(reps[i]);
	}
	free(reps);
	qsort(s->v, (size_t)s->n, sizeof *s->v, cand_cmp);
	return failures ? -1 : 0;
}

/* A reply to GET of a settled record: 1 when it is one (jobs waiting for it leave
 * SETTLED_WAITED there, which is none); an error counts as one (nothing judged lost). */
static int settled_record(const redisReply *rep)
{
	if (!rep || rep->type == REDIS_REPLY_ERROR)
		return 1;
	return rep->type == REDIS_REPLY_STRING && strcmp(rep->str, SETTLED_WAITED) != 0;
}

/* Keep only those without a settled record that do not wait themselves. 0, or -1. */
static int keep_unsettled(struct rconn *r, struct search *s)
{
	redisReply **reps = xcalloc((size_t)s->n * 2, sizeof *reps);
	struct rpipe p;
	rpipe_begin(r, &p);
	for (int i = 0; i < s->n; i++) {
		rpipe_add(r, &p, "GET " K_SETTLED "%s", s->v[i].jid);
		rpipe_add(r, &p, "ZSCORE " K_BATCH_WAITING " %s", s->v[i].jid);
	}
	int failures = rpipe_exec(r, &p, reps);
	int kept = 0;
	for (int i = 0; i < s->n; i++) {
		int gone = !settled_record(reps[2 * i]) && reps[2 * i + 1] &&
		           reps[2 * i + 1]->type == REDIS_REPLY_NIL;
		if (gone)
			s->v[kept++] = s->v[i];
		else
			free(s->v[i].jid);
		for (int k = 0; k < 2; k++)
			if (reps[2 * i + k])
				freeReplyObject(reps[2 * i + k]);
	}
	s->n = kept;
	free(reps);
	return failures ? -1 : 0;
}

/* A candidate found nowhere: its first miss noted, or, that long ago, settled discarded. */
static int nowhere(struct rconn *r, const struct cand *c, double now, double threshold)
{
	char t[32];
	snprintf(t, sizeof t, "%.6f", now);
	redisReply *rep = rcmd(r, "ZADD " K_UNSEEN_DEPS " NX %s %s", t, c->jid);
	if (rep) {
		freeReplyObject(rep);
		rep = rcmd(r, "ZSCORE " K_UNSEEN_DEPS " %s", c->jid);
	}
	if (!rep)
		return -1;
	double first = rep->type == REDIS_REPLY_STRING ? atof(rep->str) : now;
	freeReplyObject(rep);
	if (first > now - threshold)
		return 0;
	log_warn("jid=%s: jobs wait for it, but it has no settled record and no queue, set or "
	         "process has had it for %.0f s (a Ruby worker ran it, or it was deleted): "
	         "settled as discarded", c->jid, now - first);
	if (workflow_settle(r, c->jid, NULL, SETTLED_DISCARDED) != 0)
		return -1;
	rep = rcmd(r, "ZREM " K_UNSEEN_DEPS " %s", c->jid);
	if (rep)
		freeReplyObject(rep);
	return rep ? 0 : -1;
}

/* What the search found, candidate by candidate. */
static int judge(struct rconn *r, struct search *s, double now, double threshold)
{
	for (int i = 0; i < s->n; i++) {
		const struct cand *c = &s->v[i];
		if (!c->found && !c->dead) {
			if (!s->blind && nowhere(r, c, now, threshold) != 0)
				return -1;
			continue;
		}
		if (!c->found) {
			struct job j;
			job_parse(&j, c->dead, strlen(c->dead), K_DEAD);
			log_warn("jid=%s: jobs wait for it, and it is in dead without a settled record "
			         "(a Ruby worker buried it?): settled as dead", c->jid);
			int rc = workflow_settle(r, c->jid, j.bid, SETTLED_DEAD);
			job_free(&j);
			if (rc != 0)
				return -1;
		}
		redisReply *rep = rcmd(r, "ZREM " K_UNSEEN_DEPS " %s", c->jid);
		if (!rep)
			return -1;
		freeReplyObject(rep);
	}
	return 0;
}

/* Forget first misses of dependencies nothing waits for any more (settled meanwhile, or
 * their dependants cancelled): a few of the oldest at each look. */
static int prune_marks(struct rconn *r)
{
	redisReply *marks = rcmd(r, "ZRANGE " K_UNSEEN_DEPS " 0 99");
	if (!marks)
		return -1;
	int rc = 0;
	for (size_t i = 0; rc == 0 && marks->type == REDIS_REPLY_ARRAY && i < marks->elements;
	     i++) {
		const char *dep = marks->element[i]->str;
		redisReply *rep = rcmd(r, "EXISTS " K_DEPENDANTS "%s", dep);
		if (rep && reply_integer(rep, 1) == 0) {
			freeReplyObject(rep);
			rep = rcmd(r, "ZREM " K_UNSEEN_DEPS " %s", dep);
		}
		if (rep)
			freeReplyObject(rep);
		else
			rc = -1;
	}
	freeReplyObject(marks);
	return rc;
}

/* The fleet's one search per threshold / 2: 1 ours, 0 another's, -1 error. */
static int take_turn(struct rconn *r, double threshold)
{
	long ttl = (long)ceil(threshold / 2);
	redisReply *rep = rcmd(r, "SET " K_UNSEEN_DEPS_LOCK " 1 NX EX %ld", ttl < 1 ? 1 : ttl);
	if (!rep)
		return -1;
	int ours = rep->type == REDIS_REPLY_STATUS;
	freeReplyObject(rep);
	return ours;
}

int lostdeps_look(struct rconn *r, struct lostdeps *st, double threshold,
                  long long max_job_bytes)
{
	if (threshold <= 0)
		return 0;
	double now = now_float();
	redisReply *waiters = old_waiters(r, st, now, threshold);
	if (!waiters)
		return -1;
	struct search s = { .max_job_bytes = max_job_bytes };
	int rc = 0;
	if (waiters->type == REDIS_REPLY_ARRAY && waiters->elements > 0)
		rc = dependencies_of(r, waiters, &s);
	freeReplyObject(waiters);
	if (rc == 0 && s.n > 0)
		rc = keep_unsettled(r, &s);
	int turn = rc == 0 && s.n > 0 ? take_turn(r, threshold) : 0;
	if (turn < 0)
		rc = -1;
	if (turn > 0) {
		rc = search(r, &s);
		if (rc == 0)
			rc = judge(r, &s, now_float(), threshold);
		if (rc == 0)
			rc = prune_marks(r);
	}
	search_free(&s);
	return rc;
}
