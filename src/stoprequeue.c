/* SPDX-License-Identifier: MIT */
/*
 * stoprequeue.c: the last Redis work of a stop (doc/protocol.md §7.2, §7.7).
 *
 * In reliable mode, what is still owed is settled once more; a filing that still fails is
 * parked in cogworker:unsettled (PARK_UNSETTLED moves it off our list and records it in one
 * step, so recovery elsewhere can complete it), and then one REQUEUE puts every unfinished
 * job of our in-progress list back on its queue. Finished-but-unacked jobs go to REQUEUE as
 * marks, so the same script drops them instead of requeueing them: a separate ack pass
 * that failed used to requeue finished jobs (lesson 23).
 *
 * In basic mode there is no in-progress list: the jobs running are known from our workers
 * hash, and each goes back with REQUEUE_ENTRY.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "job.h"
#include "json.h"
#include "keys.h"
#include "settle.h"
#include "state.h"
#include "stoprequeue.h"
#include "util.h"
#include "workflow.h"

static char *unsettled_record(const struct pending *p)
{
	char *payload = json_quote(p->payload, strlen(p->payload));
	char *rec = xasprintf("{\"set\":\"%s\",\"score\":%.6f,\"payload\":%s}", p->set, p->score,
	                      payload);
	free(payload);
	return rec;
}

static int park_unsettled(struct rconn *r, const struct pending *p)
{
	char *list = xasprintf(K_INPROGRESS "%s", D.identity);
	char *rec = unsettled_record(p);
	const char *keys[] = { list, K_UNSETTLED };
	const char *args[] = { p->raw, rec };
	redisReply *rep = rscript(r, "park_unsettled", 2, keys, 2, args, NULL);
	free(list);
	free(rec);
	if (!rep)
		return -1;
	freeReplyObject(rep);
	return 0;
}

static void requeue_reliable(struct rconn *r, const struct conf *c)
{
	struct log_site site = LOG_SITE("Shutdown");
	settle_pending_all(r, &site);
	struct pending *left = pending_take_all();
	int nmarks = 0, cap = 16;
	char **marks = xcalloc((size_t)cap, sizeof *marks);
	for (struct pending *p = left; p; p = p->next) {
		char kind = 'd';
		/* Its batch settle is still owed, and comes before the job leaves the list
		 * (doc/protocol.md §7.34): no mark, so the requeue puts it back; it runs again
		 * and settles then. Gone from the list already, the settle is lost: say so. A
		 * late ack's settle made once already is only redone (settle.h): acked. */
		if (p->flow && p->flow_only) {
			log_error("jid=%s: its settle in batch %s and of the jobs waiting for it is "
			          "lost (cogworkerctl batch settle does it by hand): %s",
			          p->jid ? p->jid : "?", p->bid ? p->bid : "-", r->err);
			continue;
		}
		if (p->flow && !p->flow_made) {
			log_warn("jid=%s: its batch settle is still owed: requeued, to run and settle "
			         "again", p->jid ? p->jid : "?");
			continue;
		}
		if (!p->is_ack && park_unsettled(r, p) == 0)
			continue;
		if (!p->is_ack) {
			log_error("couldn't hand over the filing of jid=%s: %s", p->jid ? p->jid : "?",
			          r->err);
			kind = 'k';
		}
		if (nmarks == cap)
			marks = xrealloc(marks, (size_t)(cap *= 2) * sizeof *marks);
		marks[nmarks++] = xasprintf("%c:%s", kind, p->raw);
	}
	char *list = xasprintf(K_INPROGRESS "%s", D.identity);
	char *presence = xasprintf(K_PROCESS "%s", D.identity);
	char ttl[32], now[32], maxo[16];
	snprintf(ttl, sizeof ttl, "%ld", conf_queued_ttl(c));
	snprintf(now, sizeof now, "%ld", (long)now_float());
	snprintf(maxo, sizeof maxo, "%d", c->max_orphanings);
	const char *keys[] = { list, presence, K_LAST_BEAT, K_REPEAT_ORPHANS, K_DEAD, K_QUEUES,
	                       K_LIVE_QUEUES };
	const char **args = xcalloc((size_t)nmarks + 12, sizeof *args);
	const char *fixed[] = { K_QUEUE, "default", K_RUNNING, ttl, D.identity, "", now,
	                        K_ORPHANINGS, ORPHAN_COUNTER_TTL, maxo, K_SETTLED, SETTLED_WAITED };
	memcpy(args, fixed, sizeof fixed);
	for (int i = 0; i < nmarks; i++)
		args[12 + i] = marks[i];
	redisReply *rep = rscript(r, "requeue", 7, keys, 12 + nmarks, args, NULL);
	if (!rep) {
		log_error("shutdown requeue failed (the jobs stay in %s for recovery): %s", list,
		          r->err);
		pending_acks_lost(left, r->err);
	} else {
		if (rep->type == REDIS_REPLY_ARRAY && rep->elements >= 2 && rep->element[0]->integer > 0)
			log_info("requeued %lld unfinished job(s)", rep->element[0]->integer);
		freeReplyObject(rep);
	}
	for (int i = 0; i < nmarks; i++)
		free(marks[i]);
	free(marks);
	while (left) {
		struct pending *p = left;
		left = p->next;
		pending_free(p);
	}
	free(args);
	free(list);
	free(presence);
}

static void requeue_basic(struct rconn *r, const struct conf *c)
{
	char *workers = xasprintf(K_WORKERS "%s", D.identity);
	redisReply *rep = rcmd(r, "HVALS %s", workers);
	char ttl[32];
	snprintf(ttl, sizeof ttl, "%ld", conf_queued_ttl(c));
	for (size_t i = 0; rep && rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++) {
		const char *entry = rep->element[i]->str;
		cJSON *e = job_json_parse(entry, strlen(entry));
		const cJSON *q = cJSON_GetObjectItemCaseSensitive(e, "queue");
		size_t start, len;
		if (!cJSON_IsString(q) || json_member_span(entry, strlen(entry), "payload", &start,
		                                           &len) != 0) {
			log_error("unreadable workers entry skipped at shutdown: %.200s", entry);
			cJSON_Delete(e);
			continue;
		}
		char *payload = xstrndup(entry + start, len);
		struct job j;
		job_parse(&j, payload, len, q->valuestring);
		char *qkey = xasprintf(K_QUEUE "%s", q->valuestring);
		char *lock = xasprintf(K_RUNNING "%s", j.pjid ? j.pjid : "");
		const char *keys[] = { qkey, lock };
		const char *args[] = { payload, j.jid ? j.jid : "", ttl,
		                       j.periodic_until_executed && j.pjid ? "1" : "" };
		redisReply *ok = rscript(r, "requeue_entry", 2, keys, 4, args, NULL);
		if (ok)
			freeReplyObject(ok);
		else
			log_error("couldn't requeue jid=%s at shutdown: %s", j.jid ? j.jid : "?", r->err);
		job_free(&j);
		free(qkey);
		free(lock);
		free(payload);
		cJSON_Delete(e);
	}
	if (rep)
		freeReplyObject(rep);
	free(workers);
}

void stop_requeue(struct rconn *r)
{
	struct conf *c = conf_acquire();
	if (atomic_load(&D.fetch_mode) == FETCH_BASIC)
		requeue_basic(r, c);
	else
		requeue_reliable(r, c);
	conf_release(c);
}
