/* SPDX-License-Identifier: MIT */
/*
 * producer.c: the one funnel every push of ours goes through (doc/protocol.md §5).
 *
 * An immediate job is LPUSHed on its own, and only then is the queue name added to
 * cogworker:queues, best effort: a MULTI of both raised when the listing was unwritable
 * after the job was already queued, and callers pushed it again and again (lesson 68).
 * A unique job takes its lock with SET NX EX before anything is pushed, with a TTL that
 * includes the wait until it is due (lesson 69).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "job.h"
#include "json.h"
#include "keys.h"
#include "log.h"
#include "producer.h"
#include "util.h"
#include "workflow.h"

char *producer_build(const struct push *p, const char *jid, double now, double at)
{
	const char *queue = p->queue ? p->queue : "default";
	char *qc = json_quote(p->cls, strlen(p->cls));
	char *qq = json_quote(queue, strlen(queue));
	char t[32];
	job_format_time(now, t);
	struct sbuf b;
	sb_init(&b);
	sb_printf(&b, "{\"class\":%s,\"args\":%s,\"queue\":%s,\"jid\":\"%s\"", qc,
	          p->args_json ? p->args_json : "[]", qq, jid);
	if (p->retry_json)
		sb_printf(&b, ",\"retry\":%s", p->retry_json);
	if (p->unique)
		sb_adds(&b, ",\"unique\":\"until_executed\"");
	if (p->extra && *p->extra)
		sb_printf(&b, ",%s", p->extra);
	if (p->bid) {
		char *qb = json_quote(p->bid, strlen(p->bid));
		sb_printf(&b, ",\"bid\":%s", qb);
		free(qb);
	}
	for (int i = 0; i < p->nafter; i++) {
		char *qa = json_quote(p->after[i], strlen(p->after[i]));
		sb_printf(&b, "%s%s", i ? "," : ",\"after\":[", qa);
		free(qa);
	}
	if (p->nafter)
		sb_addc(&b, ']');
	if (p->nafter && p->after_any)
		sb_adds(&b, ",\"after_any\":true");
	sb_printf(&b, ",\"created_at\":%s", t);
	if (at > 0) {
		char a[32];
		job_format_time(at, a);
		sb_printf(&b, ",\"at\":%s}", a);
	} else {
		sb_printf(&b, ",\"enqueued_at\":%s}", t);
	}
	free(qc);
	free(qq);
	return sb_steal(&b);
}

static int take_unique_lock(struct rconn *r, const struct push *p, const char *jid, double now,
                            double at, char *err, size_t errlen)
{
	char *key = job_unique_key(p->cls, p->queue ? p->queue : "default", p->args_json);
	if (!key) {
		snprintf(err, errlen, "args are not valid JSON");
		return -1;
	}
	double wait = at > now ? at - now : 0;
	long ttl = (long)ceil(p->unique_lock_ttl + wait);
	redisReply *rep = rcmd(r, "SET %s %s NX EX %ld", key, jid, ttl < 1 ? 1 : ttl);
	free(key);
	if (!rep) {
		snprintf(err, errlen, "%s", r->err);
		return -1;
	}
	int taken = rep->type == REDIS_REPLY_STATUS;
	freeReplyObject(rep);
	return taken;
}

int owned_delete(struct rconn *r, const char *key, const char *jid)
{
	const char *keys[] = { key };
	const char *args[] = { jid };
	redisReply *rep = rscript(r, "delete_if_owned", 1, keys, 1, args, NULL);
	if (!rep)
		return -1;
	int released = rep->type == REDIS_REPLY_INTEGER && rep->integer == 1;
	freeReplyObject(rep);
	return released;
}

/* The push failed after the lock was taken: give the lock back (owner-checked, best
 * effort), or an identical push would be refused until its TTL ran out. */
static void release_unpushed_lock(struct rconn *r, const struct push *p, const char *jid)
{
	char *key = job_unique_key(p->cls, p->queue ? p->queue : "default", p->args_json);
	if (!key)
		return;
	char saved[sizeof r->err];
	memcpy(saved, r->err, sizeof saved);    /* the push's error is the one reported */
	if (owned_delete(r, key, jid) < 0)
		log_warn("unique lock %s of the failed push not released (ignored): %s", key, r->err);
	memcpy(r->err, saved, sizeof saved);
	free(key);
}

int producer_release_locks(struct rconn *r, const struct job *j)
{
	if (!j->obj || j->invalid || !j->jid)
		return 0;
	int released = 0;
	char *keys[2] = { j->unique ? job_unique_key(j->cls, j->queue, j->args_json) : NULL,
	                  j->pjid ? xstrcat2(K_RUNNING, j->pjid) : NULL };
	for (int i = 0; i < 2 && released >= 0; i++) {
		int d = keys[i] ? owned_delete(r, keys[i], j->jid) : 0;
		released = d < 0 ? -1 : released + d;
	}
	free(keys[0]);
	free(keys[1]);
	return released;
}

/* Best effort: a push that happened is reported as pushed whatever this does. */
static void status_queued(struct rconn *r, const struct push *p, const char *jid)
{
	char *key = xasprintf(K_STATUS "%s", jid);
	char now[32], ttl[32];
	snprintf(now, sizeof now, "%ld", (long)now_float());
	snprintf(ttl, sizeof ttl, "%ld", (long)ceil(p->status_expiration));
	const char *argv[] = { "HSET", key, "status", "queued", "update_time", now, "class", p->cls,
	                       "queue", p->queue ? p->queue : "default" };
	redisReply *rep = rcmd_argv(r, 10, argv, NULL);
	if (rep) {
		freeReplyObject(rep);
		rep = rcmd(r, "EXPIRE %s %s", key, ttl);
	}
	if (rep)
		freeReplyObject(rep);
	else
		log_warn("status of jid=%s not written (ignored): %s", jid, r->err);
	free(key);
}

/*
 * A job's JSON is UTF-8 or no job (doc/protocol.md §4.5): its class and queue would be
 * scrubbed into U+FFFD by json_quote, and bytes in args or extra go into Redis as they are,
 * where the daemons bury the job and Ruby's JSON refuses it. Refused here, naming the field.
 */
static int strings_are_utf8(const struct push *p, char *err, size_t errlen)
{
	const char *const names[] = { "class", "queue", "jid", "args", "extra members" };
	const char *const values[] = { p->cls, p->queue, p->jid, p->args_json, p->extra };
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		long at = values[i] ? utf8_invalid_at(values[i], strlen(values[i])) : -1;
		if (at >= 0) {
			snprintf(err, errlen, "the %s is not UTF-8: byte %ld is \\x%02X", names[i],
			         at + 1, (unsigned char)values[i][at]);
			return 0;
		}
	}
	return 1;
}

int producer_after_ok(int n, char *err, size_t errlen)
{
	if (n <= PUSH_MAX_AFTER)
		return 0;
	snprintf(err, errlen, "%d dependencies: a job waits for at most %d (for more, make them "
	         "a batch and this job its on_success callback)", n, PUSH_MAX_AFTER);
	return -1;
}

/* BATCH_PUSH: membership or waiting and the push in one step. */
static redisReply *push_flow(struct rconn *r, const struct push *p, const char *jid,
                             const char *json, double at, int *waiting)
{
	char due[32] = "";
	if (at > 0)
		job_format_time(at, due);
	int n = 7 + p->nafter;
	const char **args = xcalloc((size_t)n, sizeof *args);
	const char *fixed[] = { jid, json, p->queue ? p->queue : "default", due,
	                        p->bid ? p->bid : "", p->adder ? p->adder : "",
	                        p->after_any ? "1" : "0" };
	memcpy(args, fixed, sizeof fixed);
	for (int i = 0; i < p->nafter; i++)
		args[7 + i] = p->after[i];
	redisReply *rep = workflow_script(r, "batch_push", n, args, NULL);
	free(args);
	if (rep && waiting)
		*waiting = rep->type == REDIS_REPLY_ARRAY && rep->elements >= 1 &&
		           rep->element[0]->type == REDIS_REPLY_STRING &&
		           strcmp(rep->element[0]->str, "waiting") == 0;
	return rep;
}

int producer_push(struct rconn *r, const struct push *p, char jid_out[25], char *err,
                  size_t errlen)
{
	return producer_push_flow(r, p, jid_out, err, errlen, NULL);
}

int producer_push_flow(struct rconn *r, const struct push *p, char jid_out[25], char *err,
                       size_t errlen, int *waiting)
{
	if (waiting)
		*waiting = 0;
	char jid[25];
	if (!p->cls || !*p->cls) {  /* a daemon would bury it, under another jid (§4.6) */
		snprintf(err, errlen, "the class is empty");
		return -1;
	}
	if (!strings_are_utf8(p, err, errlen) || producer_after_ok(p->nafter, err, errlen) != 0)
		return -1;
	if (p->jid)
		snprintf(jid, sizeof jid, "%s", p->jid);
	else
		new_jid(jid);
	err[0] = '\0';
	double now = now_float();
	double at = p->at <= 0 ? 0 : (p->at < 1e9 ? now + p->at : p->at);
	if (p->unique) {
		int taken = take_unique_lock(r, p, jid, now, at, err, errlen);
		if (taken <= 0)
			return taken;
	}
	char *json = producer_build(p, jid, now, at);
	const char *queue = p->queue ? p->queue : "default";
	redisReply *rep;
	if (p->bid || p->nafter) {
		rep = push_flow(r, p, jid, json, at, waiting);
	} else if (at > 0) {
		char score[32];
		job_format_time(at, score);
		const char *argv[] = { "ZADD", K_SCHEDULE, score, json };
		rep = rcmd_argv(r, 4, argv, NULL);
	} else {
		char *key = xasprintf(K_QUEUE "%s", queue);
		const char *argv[] = { "LPUSH", key, json };
		rep = rcmd_argv(r, 3, argv, NULL);
		free(key);
	}
	free(json);
	if (!rep) {
		snprintf(err, errlen, "%s", r->err);
		if (p->unique)
			release_unpushed_lock(r, p, jid);
		return -1;
	}
	freeReplyObject(rep);
	if (at <= 0 && !p->bid && !p->nafter) {     /* BATCH_PUSH did it */
		rep = rcmd(r, "SADD " K_QUEUES " %s", queue);
		if (rep)
			freeReplyObject(rep);
		else
			log_warn("pushed jid=%s, but " K_QUEUES " not updated (ignored): %s", jid,
			         r->err);
	}
	if (p->status_expiration > 0)
		status_queued(r, p, jid);
	memcpy(jid_out, jid, 25);
	return 1;
}
