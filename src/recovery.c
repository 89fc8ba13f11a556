/* SPDX-License-Identifier: MIT */
/*
 * recovery.c: orphan recovery (doc/protocol.md §7.10) and reconcile of the own in-progress list
 * (§7.11), both run by the scheduled poller's orphan check.
 *
 * Orphan recovery brings back the jobs of processes that died while running them. The
 * hard part is never taking the jobs of a process that is merely slow: a presence key can
 * expire because Redis was unreachable for a minute or the process stalled (lesson 28).
 * So "dead" is decided *inside* the REQUEUE script, atomically with the moves: presence
 * key gone and last beat older than orphan_threshold on Redis's clock. This file only
 * chooses candidates, calls the script once per identity, and reports.
 *
 * - Candidates come from the registry set cogworker:inprogress_identities; a SCAN of
 *   cogworker:inprogress:* is added once, at boot, in reliable processes (lists from
 *   before the registry existed; scanning every minute everywhere was lesson 39). Each
 *   source is isolated, and the report says which ones worked: only a pass that really
 *   read one of them lets the Ticker start (lesson 38).
 * - Each identity is isolated: a wrong-typed list or a corrupt stamp of one never stops
 *   the others (lesson 37). An availability error ends the pass: every further call would
 *   wait for its own timeout, and the poller retries one poll interval later anyway.
 * - Repeat orphans (a job that kills its process every time) are parked by REQUEUE and
 *   filed into dead here as Cogworker::ProcessDied, whatever their retry setting. The
 *   head-only BURY_ORPHAN script picks the one process that does the follow-up (locks,
 *   counter, stats, its settle, on_death), so a fleet makes one dead entry and one
 *   notification. The settle is noted in cogworker:batch:owed by the burial itself, so a
 *   crash or a Redis error before the follow-up's settle leaves it to the poller.
 * - When even the parking list is unusable, REQUEUE buries the job raw; only this process
 *   knows, so it keeps the raw job in memory and swaps it for the proper entry
 *   (SWAP_DEAD_ENTRY), retrying on every pass until it succeeds (lesson 33).
 * - A job of an at-most-once class (a handler with on_orphan = "dead", §7.32) is never
 *   requeued: REQUEUE parks it in its own list, inside the same atomic call that found its
 *   owner dead, and it is filed into dead here like a repeat orphan, with its own reason.
 *   Which classes are at most once is what the owner published (each process keeps the
 *   set cogworker:at_most_once:<id> written at every beat) plus what this process's conf
 *   says, so the rule holds whichever cogworkerd recovers the list (a Ruby worker does not
 *   know it and requeues such a job).
 * - Unsettled records (filings handed over by a stopping process) are filed head-first by
 *   FILE_UNSETTLED; a record that can't be used is moved to a quarantine list so that it
 *   can't block the list behind it (lesson 35).
 *
 * Reconcile trusts the in-memory record of running jobs (state.c), not the workers
 * hash, which a failover can lose (lesson 42). A listed job that is not running is a
 * stray; a stray with a pending settlement is settled, never re-run; any other stray is
 * requeued only when it was a stray on the previous pass too (the two-look rule), which
 * rules out a job caught between its fetch and "mark running". The two looks must be
 * half a pass apart (at most RECONCILE_LOOK_GAP) in the server's time, not merely two
 * consecutive passes: a pass held up (a
 * DEBUG SLEEP, a slow server) ends when the next one is already due, and two looks a few
 * milliseconds apart both fell between one fetch and its "mark running" (the chaos soak
 * caught a job run twice so).
 *
 * Re-filing is the other way round, and the heartbeat's (refile_own): when a beat finds
 * this process's presence gone, Redis may have lost its keys (a restart without
 * persistence, a flush, a failover to a replica that lagged), and the jobs it runs would be
 * invisible and, should it crash, lost. So each job whose handler runs here, or that waits
 * here for its handler, and that the own list no longer holds, is pushed onto it again, and
 * the workers entries are written again (with basic fetch, which has no list, only those:
 * its stop requeues what the workers hash holds). Not one whose orphan counter exists: that job was
 * recovered from this process as from a dead one (its beats failed for longer than
 * orphan_threshold), so it is queued or running elsewhere already, and filing it here
 * again would only add a run after a crash. Nor a finished one whose ack is owed: a crash
 * then would run it again. A job that ends between the look and the push is taken off
 * again at once (its ack may have found nothing to remove).
 *
 * State kept between passes (the raw burials still to swap, the previous strays) lives
 * in this file and is touched by the poller thread only; re-filing keeps none.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "admission.h"
#include "batch.h"
#include "counters.h"
#include "deathhook.h"
#include "job.h"
#include "json.h"
#include "keys.h"
#include "recovery.h"
#include "settle.h"
#include "state.h"
#include "util.h"
#include "workflow.h"

#define BATCH 100               /* repeat orphans / unsettled records read per pass */
#define RECONCILE_LOOK_GAP 0.5  /* least time between the two looks at a stray */
#define RECORDS_QUARANTINE_TTL "2592000"

/* ---- a small list of strings (raw jobs, identities) ---- */

struct strs {
	char **v;
	size_t *len;
	double *at;             /* strays: when each was first seen (monotonic) */
	int n, cap;
};

static void strs_add_at(struct strs *s, const char *str, size_t len, double at)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 16;
		s->v = xrealloc(s->v, (size_t)s->cap * sizeof *s->v);
		s->len = xrealloc(s->len, (size_t)s->cap * sizeof *s->len);
		s->at = xrealloc(s->at, (size_t)s->cap * sizeof *s->at);
	}
	s->v[s->n] = xstrndup(str, len);
	s->at[s->n] = at;
	s->len[s->n++] = len;
}

static void strs_add(struct strs *s, const char *str, size_t len)
{
	strs_add_at(s, str, len, 0);
}

static int strs_find(const struct strs *s, const char *str)
{
	for (int i = 0; i < s->n; i++)
		if (strcmp(s->v[i], str) == 0)
			return i;
	return -1;
}

static void strs_free(struct strs *s)
{
	for (int i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	free(s->len);
	free(s->at);
	memset(s, 0, sizeof *s);
}

static struct strs raw_burials;  /* repeat orphans buried raw, still to be swapped */
static struct strs prev_strays;  /* strays of the previous reconcile */

/* One pass's view of the conf. */
struct pass {
	struct rconn *r;
	struct log_site *site;
	struct orphan_report *rep;
	char threshold[32], queued_ttl[32], max_orphanings[16];
	int max_n;
	long long max_job_bytes;        /* a longer parked job is not read (bury_parked) */
	struct strs once_marks;         /* "o:<class>" REQUEUE marks (at_most_once_classes) */
};

/* The at-most-once classes of a conf as REQUEUE reads them (lua/requeue.lua): each class
 * whose handler has on_orphan = "dead"; "*" when the fallback handler has it, and then
 * "!<class>" for each class whose own handler has not. */
static void at_most_once_classes(const struct conf *c, const char *prefix, struct strs *out)
{
	int fallback = 0;
	for (int i = 0; i < c->nhandlers; i++)
		if (strcmp(c->handlers[i].class_name, "*") == 0)
			fallback = c->handlers[i].on_orphan_dead;
	for (int i = 0; i < c->nhandlers; i++) {
		const struct handler *h = &c->handlers[i];
		int star = strcmp(h->class_name, "*") == 0;
		if (h->on_orphan_dead || (fallback && !star)) {
			char *v = xasprintf("%s%s%s", prefix, h->on_orphan_dead ? "" : "!",
			                    h->class_name);
			strs_add(out, v, strlen(v));
			free(v);
		}
	}
}

void at_most_once_publish(struct rconn *r, const struct conf *c)
{
	static int published;           /* the heartbeat's thread only */
	struct strs classes = { 0 };
	if (!c->fetch_basic && atomic_load(&D.fetch_mode) != FETCH_BASIC)
		at_most_once_classes(c, "", &classes);
	if (classes.n == 0 && !published)
		return;
	char *key = xasprintf(K_AT_MOST_ONCE "%s", D.identity);
	struct rpipe p;
	redisReply *rep[3];
	rpipe_begin(r, &p);
	rpipe_add(r, &p, "DEL %s", key);
	if (classes.n > 0) {
		const char **argv = xcalloc((size_t)classes.n + 2, sizeof *argv);
		argv[0] = "SADD";
		argv[1] = key;
		for (int i = 0; i < classes.n; i++)
			argv[2 + i] = classes.v[i];
		rpipe_add_argv(r, &p, classes.n + 2, argv, NULL);
		free(argv);
		/* A Ruby worker that recovers our list never deletes the key: it must not stay
		 * for ever (doc/protocol.md §7.32). */
		rpipe_add(r, &p, "EXPIRE %s %s", key, AT_MOST_ONCE_TTL);
	}
	int n = p.n;
	if (rpipe_exec(r, &p, rep) == 0)
		published = classes.n > 0;
	else
		log_error("at-most-once classes not published in %s: %s", key, r->err);
	for (int i = 0; i < n; i++)
		if (rep[i])
			freeReplyObject(rep[i]);
	free(key);
	strs_free(&classes);
}

/* Log a failed call; an availability error marks the pass "connection lost". */
static void pass_error(struct pass *p, const char *what)
{
	if (p->r->unavailable)
		p->rep->conn_lost = 1;
	else
		log_error("%s: %s: %s", p->site->name, what, p->r->err);
}

/* ---- the dead entries a repeat orphan gets ---- */

/* ProcessDied entry (§4.6), or the (unparseable) wrapper when the job doesn't parse;
 * max_n 0: the at-most-once reason instead of the repeat orphan's (§7.32). */
static char *process_died_entry(const struct job *j, int max_n, double now)
{
	char when[32];
	job_format_time(now, when);
	char *msg = max_n > 0
	            ? xasprintf("its process died while running it more than %d times (killed by "
	                        "the OOM killer or SIGKILL?); it is not retried again", max_n)
	            : xstrdup("its process died while running it, and its handler runs a job at "
	                      "most once (on_orphan = \"dead\"); it is not run again");
	char *out = NULL;
	if (j->obj) {
		char *qm = json_quote(msg, strlen(msg));
		struct json_edit e[] = {
			{ "failure_outcome", NULL },
			{ "error_class", "\"Cogworker::ProcessDied\"" },
			{ "error_message", qm },
			{ "failed_at", when },
		};
		out = json_edit_object(j->raw, j->raw_len, e, 4);
		free(qm);
	}
	if (!out)
		out = job_unparseable_wrapper(j->raw, j->raw_len, NULL,
		                              j->parse_error && strcmp(j->parse_error,
		                              "not a JSON object") == 0 ? "Cogworker::InvalidJob" :
		                              "JSON::ParserError",
		                              j->parse_error ? j->parse_error : msg, now);
	free(msg);
	return out;
}

/* What the one process that filed a repeat orphan into dead owes (§7.10 step 3); also for
 * an orphan of an at-most-once class (once). */
static void repeat_orphan_followup(struct pass *p, const struct job *j, const char *entry,
                                   int once)
{
	release_job_locks(p->r, j->jid, j->pjid, j->unique, j->cls, j->queue, j->args_json);
	if (j->jid) {
		char *counter = xasprintf(K_ORPHANINGS "%s", j->jid);
		redisReply *rep = rcmd(p->r, "DEL %s", counter);
		if (rep)
			freeReplyObject(rep);
		else
			log_error("orphan counter %s not deleted (ignored): %s", counter, p->r->err);
		free(counter);
	}
	bump_stats(p->r, 0, p->site);
	workflow_settle_filed(p->r, j->jid, j->bid, SETTLED_DEAD);    /* doc/protocol.md §7.34 */
	if (once)
		log_warn("jid=%s orphaned by a dead process, moved to dead: its handler is at most "
		         "once (on_orphan = \"dead\")", j->jid ? j->jid : "?");
	else
		log_warn("jid=%s orphaned too often, moved to dead", j->jid ? j->jid : "?");
	if (job_gets_on_death(j))       /* never for an unparseable or invalid payload (§4.6) */
		on_death_run(j->cls, j->jid, entry);
}

/* ---- candidates ---- */

/* Duplicates (a SCAN may repeat a key; the registry lists most of them again) are dropped
 * once all are in (strs_unique): a lookup per candidate was quadratic in a registry that
 * anyone with access to Redis can fill. */
static void add_candidate(struct strs *c, const char *id)
{
	if (strcmp(id, D.identity) != 0)
		strs_add(c, id, strlen(id));
}

static int by_string(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sort s and drop its repeats (its len and at arrays are not kept in step: identities). */
static void strs_unique(struct strs *s)
{
	if (s->n < 2)
		return;
	qsort(s->v, (size_t)s->n, sizeof *s->v, by_string);
	int m = 1;
	for (int i = 1; i < s->n; i++) {
		if (strcmp(s->v[i], s->v[m - 1]) == 0)
			free(s->v[i]);
		else
			s->v[m++] = s->v[i];
	}
	s->n = m;
}

static void read_registry(struct pass *p, struct strs *cands)
{
	redisReply *rep = rcmd(p->r, "SMEMBERS %s", K_IDENTITIES);
	if (!rep) {
		pass_error(p, K_IDENTITIES " unreadable");
		return;
	}
	for (size_t i = 0; rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++)
		add_candidate(cands, rep->element[i]->str);
	p->rep->registry_read = 1;
	freeReplyObject(rep);
}

static void scan_lists(struct pass *p, struct strs *cands)
{
	char cursor[32] = "0";
	size_t plen = strlen(K_INPROGRESS);
	do {
		redisReply *rep = rcmd(p->r, "SCAN %s MATCH %s* COUNT 1000", cursor, K_INPROGRESS);
		if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != 2) {
			if (rep)
				freeReplyObject(rep);
			pass_error(p, "scan for in-progress lists failed");
			return;
		}
		snprintf(cursor, sizeof cursor, "%s", rep->element[0]->str);
		const redisReply *keys = rep->element[1];
		for (size_t i = 0; i < keys->elements; i++)
			if (strncmp(keys->element[i]->str, K_INPROGRESS, plen) == 0)
				add_candidate(cands, keys->element[i]->str + plen);
		freeReplyObject(rep);
	} while (strcmp(cursor, "0") != 0);
	p->rep->scan_done = 1;
}

/* ---- one identity ---- */

static void forget_identity_if_empty(struct pass *p, const char *id, const char *list)
{
	redisReply *rep = rcmd(p->r, "LLEN %s", list);
	if (!rep) {
		pass_error(p, "in-progress list unreadable");
		return;
	}
	long long n = reply_integer(rep, -1);
	freeReplyObject(rep);
	if (n != 0)
		return;
	struct rpipe pp;
	redisReply *r3[3];
	char *once = xasprintf(K_AT_MOST_ONCE "%s", id);
	rpipe_begin(p->r, &pp);
	rpipe_add(p->r, &pp, "SREM %s %s", K_IDENTITIES, id);
	rpipe_add(p->r, &pp, "HDEL %s %s", K_LAST_BEAT, id);
	rpipe_add(p->r, &pp, "DEL %s", once);
	free(once);
	if (rpipe_exec(p->r, &pp, r3) > 0)
		pass_error(p, "registry entry not removed");
	for (int i = 0; i < 3; i++)
		if (r3[i])
			freeReplyObject(r3[i]);
}

/* The REQUEUE reply: {moved, failed, n, <n queue names>, <raw-buried jobs...>}. */
static void report_requeue(const char *id, const redisReply *rep)
{
	long long moved = reply_integer(rep->element[0], 0);
	long long failed = reply_integer(rep->element[1], 0);
	long long nq = rep->elements > 2 ? reply_integer(rep->element[2], 0) : 0;
	if (moved > 0) {
		log_warn("requeued %lld job(s) left in progress by dead process %s", moved, id);
		metrics_add(METRIC_ORPHANS_RECOVERED, (unsigned long long)moved);
	}
	if (failed > 0)
		log_warn("%lld job(s) left in progress by %s couldn't be put back", failed, id);
	struct sbuf qs;
	sb_init(&qs);
	size_t i = 3;
	for (; i < rep->elements && (long long)(i - 3) < nq; i++)
		sb_printf(&qs, "%s%s", i > 3 ? ", " : "", rep->element[i]->str);
	if (qs.len)
		log_warn("jobs of dead process %s were requeued onto queue(s) no live process reads: "
		         "%s", id, qs.s);
	sb_free(&qs);
	for (; i < rep->elements; i++)
		if (rep->element[i]->type == REDIS_REPLY_STRING)
			strs_add(&raw_burials, rep->element[i]->str, rep->element[i]->len);
}

static void recover_identity(struct pass *p, const char *id)
{
	char *list = xasprintf(K_INPROGRESS "%s", id);
	char *presence = xasprintf(K_PROCESS "%s", id);
	char *once = xasprintf(K_AT_MOST_ONCE "%s", id);
	char now[32];
	snprintf(now, sizeof now, "%ld", (long)now_float());
	const char *keys[] = { list, presence, K_LAST_BEAT, K_REPEAT_ORPHANS, K_DEAD, K_QUEUES,
	                       K_LIVE_QUEUES, once, K_AT_MOST_ONCE_ORPHANS };
	int nargs = 12 + p->once_marks.n;
	const char **args = xcalloc((size_t)nargs, sizeof *args);
	const char *fixed[] = { K_QUEUE, "default", K_RUNNING, p->queued_ttl, id, p->threshold,
	                        now, K_ORPHANINGS, ORPHAN_COUNTER_TTL, p->max_orphanings,
	                        K_SETTLED, SETTLED_WAITED };
	memcpy(args, fixed, sizeof fixed);
	for (int i = 0; i < p->once_marks.n; i++)
		args[12 + i] = p->once_marks.v[i];
	redisReply *rep = rscript(p->r, "requeue", 9, keys, nargs, args, NULL);
	free(args);
	free(once);
	if (!rep) {
		char *what = xasprintf("recovery of %s failed", id);
		pass_error(p, what);
		free(what);
	} else if (rep->type == REDIS_REPLY_ARRAY && rep->elements >= 3 &&
	           reply_integer(rep->element[0], 0) >= 0) {
		report_requeue(id, rep);
		forget_identity_if_empty(p, id, list);
	}
	if (rep)
		freeReplyObject(rep);
	free(list);
	free(presence);
}

/* ---- after the identities: repeat orphans, raw burials, unsettled records ---- */

/* LRANGE of a parking list with the bulk limit at max_job_bytes (rlink.h): a longer job
 * comes as its length, and what was seen of each (in order) into *seen. */
static redisReply *read_parked(struct pass *p, const char *list, struct rskip **seen, int *n)
{
	*seen = NULL;
	*n = 0;
	if (p->max_job_bytes)
		rconn_limit_bulk(p->r, (size_t)p->max_job_bytes, TOO_LARGE_HEAD);
	redisReply *rep = rcmd(p->r, "LRANGE %s 0 %d", list, BATCH - 1);
	struct rskip s;
	while (p->max_job_bytes && rconn_skipped(p->r, &s)) {
		*seen = xrealloc(*seen, (size_t)(*n + 1) * sizeof **seen);
		(*seen)[(*n)++] = s;
	}
	if (p->max_job_bytes)
		rconn_limit_bulk(p->r, 0, 0);
	return rep;
}

/*
 * File the jobs REQUEUE parked in list (K_REPEAT_ORPHANS, or K_AT_MOST_ONCE_ORPHANS: once)
 * into dead as ProcessDied, head first; only the process whose BURY_ORPHAN filed a job does
 * its follow-up. A job longer than max_job_bytes (a process with a higher limit ran it) is
 * not read: it goes to dead as a fetch buries one (BURY_TOO_LARGE, taken from this list),
 * without the follow-up, which would need it whole.
 */
static void bury_parked(struct pass *p, const char *list, int once)
{
	struct rskip *seen;
	int nseen, next = 0;
	redisReply *rep = read_parked(p, list, &seen, &nseen);
	if (!rep) {
		char *what = xasprintf("%s unreadable", list);
		pass_error(p, what);
		free(what);
		free(seen);
		return;
	}
	for (size_t i = 0; i < rep->elements && !p->rep->conn_lost; i++) {
		const redisReply *e = rep->element[i];
		if (e->type == REDIS_REPLY_INTEGER && next < nseen) {
			if (bury_too_large(p->r, list, &seen[next++], "default", 0, p->max_job_bytes,
			                   p->site) < 0)
				pass_error(p, "repeat orphan too large to read not buried");
			continue;
		}
		if (e->type != REDIS_REPLY_STRING)
			continue;
		struct job j;
		job_parse(&j, e->str, e->len, NULL);
		double now = now_float();
		char score[32];
		job_format_time(now, score);
		char *entry = process_died_entry(&j, once ? 0 : p->max_n, now);
		/* Its settle, which the follow-up makes, is noted in the same step (§7.34). */
		char *owed = workflow_owed_note(SETTLED_DEAD, j.bid);
		const char *keys[] = { list, K_DEAD, K_BATCH_OWED };
		const char *args[] = { e->str, score, entry, j.jid ? j.jid : "", owed };
		size_t lens[] = { e->len, strlen(score), strlen(entry), j.jid ? strlen(j.jid) : 0,
		                  strlen(owed) };
		redisReply *b = rscript(p->r, "bury_orphan", j.jid ? 3 : 2, keys, 5, args, lens);
		free(owed);
		if (!b)
			pass_error(p, "repeat orphan not buried");
		else if (reply_integer(b, 0) == 1)
			repeat_orphan_followup(p, &j, entry, once);
		if (b)
			freeReplyObject(b);
		free(entry);
		job_free(&j);
	}
	for (int k = 0; k < nseen; k++)
		rskip_free(&seen[k]);
	free(seen);
	freeReplyObject(rep);
}

/* Swap one raw burial: 1 done (or gone), 0 keep it for the next pass. */
static int swap_raw_burial(struct pass *p, const char *raw, size_t len)
{
	struct job j;
	job_parse(&j, raw, len, NULL);
	double now = now_float();
	char score[32];
	job_format_time(now, score);
	char *entry = process_died_entry(&j, p->max_n, now);
	const char *keys[] = { K_DEAD };
	const char *args[] = { raw, entry, score };
	size_t lens[] = { len, strlen(entry), strlen(score) };
	redisReply *rep = rscript(p->r, "swap_dead_entry", 1, keys, 3, args, lens);
	int done = rep != NULL;
	if (!rep)
		pass_error(p, "raw dead entry not swapped (retried next pass)");
	else if (reply_integer(rep, 0) == 1)
		repeat_orphan_followup(p, &j, entry, 0);
	if (rep)
		freeReplyObject(rep);
	free(entry);
	job_free(&j);
	return done;
}

static void complete_raw_burials(struct pass *p)
{
	struct strs left = { 0 };
	for (int i = 0; i < raw_burials.n; i++)
		if (p->rep->conn_lost || !swap_raw_burial(p, raw_burials.v[i], raw_burials.len[i]))
			strs_add(&left, raw_burials.v[i], raw_burials.len[i]);
	strs_free(&raw_burials);
	raw_burials = left;
}

/* A usable unsettled record (§4.9): its target set, score text and payload. */
struct record {
	const char *set;
	char *score;
	char *payload;
};

static int record_parse(const char *rec, size_t len, struct record *out)
{
	memset(out, 0, sizeof *out);
	cJSON *o = job_json_parse(rec, len);
	const cJSON *set = cJSON_GetObjectItemCaseSensitive(o, "set");
	const cJSON *score = cJSON_GetObjectItemCaseSensitive(o, "score");
	const cJSON *payload = cJSON_GetObjectItemCaseSensitive(o, "payload");
	size_t start, slen;
	int ok = cJSON_IsObject(o) && cJSON_IsString(set) && cJSON_IsNumber(score) &&
	         cJSON_IsString(payload) && json_member_span(rec, len, "score", &start, &slen) == 0;
	if (ok) {
		static const char *sets[] = { K_RETRY, K_DEAD, K_SCHEDULE };
		for (size_t i = 0; i < 3 && !out->set; i++)
			if (strcmp(set->valuestring, sets[i]) == 0)
				out->set = sets[i];
		ok = out->set != NULL;
	}
	if (ok) {
		out->score = xstrndup(rec + start, slen);    /* the number's own text */
		out->payload = xstrdup(payload->valuestring);
	}
	if (o)
		cJSON_Delete(o);
	return ok ? 0 : -1;
}

/* Move an unusable record out of the way: copy first, then remove. */
static void quarantine_record(struct pass *p, const char *rec, size_t len)
{
	struct rpipe pp;
	redisReply *r3[3];
	const char *push[] = { "RPUSH", K_RECORDS_QUARANTINE, rec };
	size_t push_lens[] = { 5, strlen(K_RECORDS_QUARANTINE), len };
	const char *rem[] = { "LREM", K_UNSETTLED, "1", rec };
	size_t rem_lens[] = { 4, strlen(K_UNSETTLED), 1, len };
	rpipe_begin(p->r, &pp);
	rpipe_add_argv(p->r, &pp, 3, push, push_lens);
	rpipe_add(p->r, &pp, "EXPIRE %s %s", K_RECORDS_QUARANTINE, RECORDS_QUARANTINE_TTL);
	rpipe_add_argv(p->r, &pp, 4, rem, rem_lens);
	if (rpipe_exec(p->r, &pp, r3) == 0)
		log_error("unusable record in %s moved to %s: %.200s", K_UNSETTLED,
		          K_RECORDS_QUARANTINE, rec);
	else
		pass_error(p, r3[0] ? "unusable unsettled record not removed"
		                    : "unusable unsettled record not moved");
	for (int i = 0; i < 3; i++)
		if (r3[i])
			freeReplyObject(r3[i]);
}

static void file_record(struct pass *p, const char *rec, size_t len, const struct record *rc)
{
	struct job j;
	job_parse(&j, rc->payload, strlen(rc->payload), NULL);
	char *counter = j.jid ? xasprintf(K_ORPHANINGS "%s", j.jid) : xstrdup("");
	const char *keys[] = { K_UNSETTLED, rc->set, counter };
	const char *args[] = { rec, rc->score, rc->payload };
	size_t lens[] = { len, strlen(rc->score), strlen(rc->payload) };
	redisReply *rep = rscript(p->r, "file_unsettled", 3, keys, 3, args, lens);
	if (!rep) {
		pass_error(p, "unsettled record not filed");
	} else if (reply_integer(rep, 0) == 1) {
		log_info("filed handed-over job jid=%s into %s", j.jid ? j.jid : "?", rc->set);
		if (strcmp(rc->set, K_DEAD) == 0) {
			release_job_locks(p->r, j.jid, j.pjid, j.unique, j.cls, j.queue, j.args_json);
			if (job_gets_on_death(&j))      /* not a handed-over (unparseable) burial */
				on_death_run(j.cls, j.jid, rc->payload);
		}
	}
	if (rep)
		freeReplyObject(rep);
	free(counter);
	job_free(&j);
}

static void file_unsettled(struct pass *p)
{
	redisReply *rep = rcmd(p->r, "LRANGE %s 0 %d", K_UNSETTLED, BATCH - 1);
	if (!rep) {
		pass_error(p, K_UNSETTLED " unreadable");
		return;
	}
	for (size_t i = 0; i < rep->elements && !p->rep->conn_lost; i++) {
		const redisReply *e = rep->element[i];
		struct record rc;
		if (record_parse(e->str, e->len, &rc) != 0) {
			quarantine_record(p, e->str, e->len);
			continue;
		}
		file_record(p, e->str, e->len, &rc);
		free(rc.score);
		free(rc.payload);
	}
	freeReplyObject(rep);
}

void orphan_recovery(struct rconn *r, int scan, struct orphan_report *rep,
                     struct log_site *site)
{
	memset(rep, 0, sizeof *rep);
	struct pass p = { .r = r, .site = site, .rep = rep };
	struct conf *c = conf_acquire();
	snprintf(p.threshold, sizeof p.threshold, "%.17g", c->orphan_threshold);
	snprintf(p.queued_ttl, sizeof p.queued_ttl, "%ld", conf_queued_ttl(c));
	snprintf(p.max_orphanings, sizeof p.max_orphanings, "%d", c->max_orphanings);
	p.max_n = c->max_orphanings;
	p.max_job_bytes = c->max_job_bytes;
	at_most_once_classes(c, "o:", &p.once_marks);
	conf_release(c);

	struct strs cands = { 0 };
	read_registry(&p, &cands);
	if (scan && !rep->conn_lost)
		scan_lists(&p, &cands);
	strs_unique(&cands);
	for (int i = 0; i < cands.n && !rep->conn_lost && !atomic_load(&D.stopping); i++)
		recover_identity(&p, cands.v[i]);
	strs_free(&cands);
	strs_free(&p.once_marks);
	/* Each step below is isolated: a command error in one never skips the next. */
	if (!rep->conn_lost)
		bury_parked(&p, K_REPEAT_ORPHANS, 0);
	/* cppcheck-suppress duplicateCondition ; each step may set it, through p.rep == rep */
	if (!rep->conn_lost)
		bury_parked(&p, K_AT_MOST_ONCE_ORPHANS, 1);
	/* cppcheck-suppress duplicateCondition ; each step may set it, through p.rep == rep */
	if (!rep->conn_lost)
		complete_raw_burials(&p);
	/* cppcheck-suppress duplicateCondition ; as above */
	if (!rep->conn_lost)
		file_unsettled(&p);
	if (rep->conn_lost)
		site_result(site, r, 0, "orphan check");
	else
		site_result(site, r, 1, "orphan check");
}

/* ---- reconcile ---- */

static int requeue_stray(struct rconn *r, const char *raw, size_t len, struct log_site *site)
{
	redisReply *rep = requeue_one(r, raw, len);
	if (!rep) {
		site_result(site, r, 0, "stray not requeued (retried next pass)");
		return r->unavailable ? -1 : 0;
	}
	if (reply_integer(rep, 0) == 1) {
		struct job j;
		job_parse(&j, raw, len, NULL);
		log_warn("requeued stray in-progress job jid=%s", j.jid ? j.jid : "?");
		job_free(&j);
	}
	freeReplyObject(rep);
	return 1;
}

/* A stray that finished here (its confirmed ack was lost by a failover): ack it again,
 * never run it twice. 1 done, 0 not (retried next pass), -1 Redis unavailable. */
static int drop_finished_stray(struct rconn *r, const char *raw, size_t len)
{
	struct job j;
	job_parse(&j, raw, len, NULL);
	/* The failover that lost the ack may have lost the settle made before it: again, as
	 * what the job settled as here (a retry settles nothing), which counts once
	 * (doc/protocol.md §7.34). */
	const char *outcome;
	finished_here(raw, len, &outcome);
	int rc = outcome ? settle_flow_first(r, &j, outcome) : 0;
	if (rc == 0)
		rc = settle_ack(r, raw, len, j.jid, j.bid, outcome);
	if (rc == 0)
		log_warn("dropped stray in-progress job jid=%s: it finished here (its ack was lost, "
		         "e.g. by a Redis failover)", j.jid ? j.jid : "?");
	job_free(&j);
	/* A failed ack became a pending one: reconcile settles it, and it is no stray then. */
	return rc == 0 ? 1 : (r->unavailable ? -1 : 1);
}

/* ---- jobs of ours that Redis lost ---- */

static void add_held(void *ctx, const char *raw, size_t len)
{
	strs_add(ctx, raw, len);
}

/* The jobs that are this process's to list: those whose handler runs and those waiting
 * for their handler; not a finished one whose ack is still owed. */
static void jobs_listed_here(struct strs *out)
{
	pthread_mutex_lock(&D.mu);
	for (int i = 0; i < D.nperforming; i++)
		for (int k = 0; k < D.performing[i].count; k++)
			strs_add(out, D.performing[i].raw, strlen(D.performing[i].raw));
	pthread_mutex_unlock(&D.mu);
	limits_each_held(add_held, out);
}

/* Those of mine that list (an LRANGE reply) lacks, each element counted once. */
static void not_listed(const struct strs *mine, const redisReply *list, struct strs *out)
{
	char *used = xcalloc(list->elements + 1, 1);
	for (int i = 0; i < mine->n; i++) {
		int found = 0;
		for (size_t k = 0; k < list->elements && !found; k++) {
			const redisReply *e = list->element[k];
			found = !used[k] && e->type == REDIS_REPLY_STRING && e->len == mine->len[i] &&
			        memcmp(e->str, mine->v[i], e->len) == 0;
			used[k] = (char)(used[k] || found);
		}
		if (!found)
			strs_add(out, mine->v[i], mine->len[i]);
	}
	free(used);
}

/* Push one lost job back onto the own list: 1 filed, 0 not, -1 Redis unavailable. */
static int refile_one(struct rconn *r, const char *list, const char *raw, size_t len)
{
	struct job j;
	job_parse(&j, raw, len, NULL);
	const char *jid = j.jid ? j.jid : "?";
	int rc = 0;
	redisReply *rep = NULL;
	if (j.jid) {
		char *counter = xasprintf(K_ORPHANINGS "%s", j.jid);
		rep = rcmd(r, "EXISTS %s", counter);
		free(counter);
		if (!rep)
			goto failed;
	}
	if (rep && reply_integer(rep, 0) > 0) {
		log_warn("jid=%s runs here but was recovered from this process's list as a dead "
		         "process's: not filed again (it is queued or running elsewhere)", jid);
	} else {
		if (rep)
			freeReplyObject(rep);
		rep = rcmd(r, "LPUSH %s %b", list, raw, len);
		if (!rep)
			goto failed;
		if (running_has(raw)) {
			log_warn("filed running job jid=%s again into %s: Redis had lost it", jid,
			         list);
			rc = 1;
		} else {
			/* It ended since the look, and its ack found nothing to remove. */
			freeReplyObject(rep);
			rep = rcmd(r, "LREM %s 1 %b", list, raw, len);
		}
	}
	if (rep)
		freeReplyObject(rep);
	job_free(&j);
	return rc;
failed:
	if (!r->unavailable)
		log_error("jid=%s not filed again into %s: %s", jid, list, r->err);
	job_free(&j);
	return r->unavailable ? -1 : 0;
}

int refile_own(struct rconn *r)
{
	if (atomic_load(&D.fetch_mode) == FETCH_BASIC)
		return batch_basic_rewrite(r);  /* no list: the workers hash is what a stop reads */
	if (atomic_load(&D.fetch_mode) != FETCH_RELIABLE)
		return 0;
	batch_rewrite();
	struct strs mine = { 0 }, lost = { 0 };
	jobs_listed_here(&mine);
	if (mine.n == 0)
		return 0;
	char *list = xasprintf(K_INPROGRESS "%s", D.identity);
	redisReply *rep = rcmd(r, "LRANGE %s 0 -1", list);
	int filed = 0;
	if (rep && rep->type == REDIS_REPLY_ARRAY) {
		not_listed(&mine, rep, &lost);
		for (int i = 0; i < lost.n && filed >= 0; i++) {
			int x = refile_one(r, list, lost.v[i], lost.len[i]);
			filed = x < 0 ? -1 : filed + x;
		}
	} else if (!rep && !r->unavailable) {
		log_error("in-progress list %s unreadable, running jobs not filed again: %s", list,
		          r->err);
	}
	if (rep)
		freeReplyObject(rep);
	if (!rep && r->unavailable)
		filed = -1;
	free(list);
	strs_free(&mine);
	strs_free(&lost);
	return filed;
}

int reconcile_own(struct rconn *r, struct log_site *site)
{
	char *list = xasprintf(K_INPROGRESS "%s", D.identity);
	/* This look happens after `sent`, and before `seen`, in the server's time. */
	struct conf *c = conf_acquire();
	double gap = c->orphan_check_interval / 2;
	long long max = c->max_job_bytes;
	conf_release(c);
	if (gap > RECONCILE_LOOK_GAP)
		gap = RECONCILE_LOOK_GAP;
	double sent = mono_now();
	/* A job too large to read (it comes as its length: rlink.h) is left to the fetcher
	 * that took it, which buries it (doc/protocol.md §7.9). */
	rconn_limit_bulk(r, (size_t)max, 0);
	redisReply *rep = rcmd(r, "LRANGE %s 0 -1", list);
	rconn_limit_bulk(r, 0, 0);
	double seen = mono_now();
	free(list);
	if (!rep) {
		site_result(site, r, 0, "in-progress list unreadable");
		return r->unavailable ? -1 : 0;
	}
	site_result(site, r, 1, "reconcile");
	/* Strays: listed, but not running here (the in-memory record, lesson 42). */
	struct strs strays = { 0 }, owed = { 0 }, now_strays = { 0 };
	for (size_t i = 0; i < rep->elements; i++) {
		const redisReply *e = rep->element[i];
		if (e->type != REDIS_REPLY_STRING || running_has(e->str))
			continue;
		if (pending_has(e->str))
			strs_add(&owed, e->str, e->len);
		else
			strs_add(&strays, e->str, e->len);
	}
	freeReplyObject(rep);
	/* A stray with a pending settlement is settled, never re-run (lessons 18, 19). So is
	 * one that is no longer listed: an ack whose reply was lost may have been made, and
	 * its settling says so in the log instead of leaving "not acknowledged" as the last
	 * word. */
	if (!atomic_load(&D.stopping))
		settle_pending_all(r, site);
	/* The two-look rule: requeue only what was a stray on a look at least `gap` earlier
	 * too (the previous pass's, or the one before if that came too soon after it). */
	int rc = 0;
	for (int i = 0; i < strays.n; i++) {
		int done = 0, k = strs_find(&prev_strays, strays.v[i]);
		double first = k >= 0 ? prev_strays.at[k] : seen;
		if (k >= 0 && sent - first >= gap && rc == 0 && !atomic_load(&D.stopping)) {
			int x = finished_here(strays.v[i], strays.len[i], NULL)
			        ? drop_finished_stray(r, strays.v[i], strays.len[i])
			        : requeue_stray(r, strays.v[i], strays.len[i], site);
			rc = x < 0 ? -1 : 0;
			done = x > 0;
		}
		if (!done)      /* first look, too soon, or a failed requeue: looked at again */
			strs_add_at(&now_strays, strays.v[i], strays.len[i], first);
	}
	strs_free(&prev_strays);
	prev_strays = now_strays;
	strs_free(&strays);
	strs_free(&owed);
	return rc < 0 ? -1 : 0;
}
