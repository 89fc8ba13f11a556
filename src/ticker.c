/* SPDX-License-Identifier: MIT */
/*
 * ticker.c: the periodic (cron) ticker (doc/protocol.md §7.16, §6.14, §6.15, lessons 53-61).
 *
 * One thread with its own Redis connection, no leader: every process of a fleet ticks,
 * and each slot is claimed atomically in Redis (CLAIM: last_slot gate + per-slot NX lock,
 * and the running lock of an until_executed entry written *before* the job exists, lesson
 * 57), so exactly one process pushes the job of a slot.
 *
 * - On time: the thread sleeps until the next slot of any entry (cron_next of each, in its
 *   zone) and claims it the moment it comes; the slot of an entry is its latest match at or
 *   before the current whole second, so a `0 * * * *` entry fires at the hour, not a tick
 *   after it, and a per-second cron fires every second. cogworker ticks every 5 s and claims
 *   only the latest slot, which skipped the slots in between without a word; the claim
 *   itself is unchanged, so Ruby tickers in the same fleet still see each slot claimed once
 *   (theirs, a tick later, finds it taken).
 * - tick_interval is only the catch-up look: the longest the thread sleeps without looking
 *   again, for what is not a new slot (a slot blocked by its previous run's lock, a claim
 *   that failed for want of Redis, a pending rollback or publish, a step of the wall
 *   clock). A look with nothing to do sends nothing to Redis.
 * - It publishes the entries to periodic:schedule when it starts, and again whenever a
 *   reload (HUP) changes the entry set; a failure is only logged (lesson 56). With
 *   periodic_replace the hash is made to hold exactly our entries.
 * - It does not tick before the poller's first real orphan check (D.ready_for_ticker):
 *   after a fleet-wide outage a slot could otherwise fire next to the recovered copy of
 *   the previous run (lesson 61). It does not tick while quiet; resume and reloads kick it
 *   awake (ticker_kick).
 * - A tick: pending rollbacks, deferred lock releases, then each entry in isolation. An
 *   availability error is retried at the next look, without backoff (backing off on a lost
 *   connection left cron idle for minutes after Redis returned, lesson 54); any other
 *   error backs the entry off 5, 10, 20 … 300 s, reset by a success. The thread never dies
 *   (lesson 53) and is abandoned at stop, not joined (lesson 77).
 * - A push that fails after a won claim is rolled back (ROLLBACK: last_slot, slot lock and
 *   running lock in one script, lesson 58); a rollback that fails is kept in memory and
 *   retried at the start of every tick, and its entry waits for it.
 * - A slot blocked by a running lock is retried for BLOCKED_GRACE (15 s) before it counts
 *   as skipped: the lock may only be waiting for a release an outage delayed (lesson 59).
 * - Catch-up (periodic_catch_up, default on): the claim of the current slot is exactly one
 *   run of the most recent missed slot. Off: an entry this ticker never checked primes
 *   last_slot with SET NX first, and a brand-new entry skips its first slot (lesson 60).
 * - Each entry's jobs go to its own queue (`queue`, "default" unless set; a daemon
 *   addition: cogworker has none). The published entry names it only when it is not
 *   "default", so a default entry publishes the same bytes a Ruby process does.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "counters.h"
#include "cron.h"
#include "job.h"
#include "json.h"
#include "keys.h"
#include "producer.h"
#include "settle.h"
#include "state.h"
#include "ticker.h"
#include "util.h"

#define SLOT_LOCK_TTL "20"
#define BLOCKED_GRACE 15.0
#define BACKOFF_FIRST 5.0
#define BACKOFF_MAX 300.0
#define SLACK 0.05              /* a tick due a hair before a backoff ends still counts */
#define SLOT_MARGIN 0.002       /* wake this long after a slot's second begins */

struct entry {
	char pjid[41];
	char *cron_text, *cls, *args, *retry_json, *queue;
	int until_executed;
	struct cron *cron;
	char *schedule_json;        /* the periodic:schedule value (§4.9) */
	/* what this ticker knows of the entry (kept across reloads, by pjid) */
	int64_t done_slot;          /* last slot finished here (fired, lost, skipped...); -1 */
	int checked;                /* this ticker has checked the entry at least once */
	int64_t blocked_slot;       /* the slot the blocked timer runs for; -1 */
	double blocked_since;       /* monotonic */
	double backoff_until;       /* monotonic; 0 = not backing off */
	int backoff_n;
};

struct rollback {
	struct rollback *next;
	char pjid[41];
	int64_t slot;
	char *previous;             /* as CLAIM returned it ("" = none) */
	char jid[25];
	double backoff_until;
	int backoff_n;
};

struct ticker {
	struct rconn r;
	struct conf *conf;          /* the conf the entries were built from (a reference) */
	struct entry *e;
	int n;
	char *signature;            /* what was (or is to be) published */
	int need_publish;
	int publish_failures;       /* consecutive unavailable publish attempts */
	struct rollback *rollbacks;
	struct log_site site;
	double tick_mono;           /* when the current tick began: the clock of backoffs and
	                             * of the blocked grace, so they line up with ticks */
	int64_t tick_now;           /* the whole second the last tick took its slots at */
};

static struct wakeup ticker_wake;

/* ---- entries ---- */

static double backoff_delay(int n)
{
	double d = BACKOFF_FIRST * pow(2.0, n);
	return d > BACKOFF_MAX ? BACKOFF_MAX : d;
}

static void entry_free(struct entry *e)
{
	free(e->cron_text);
	free(e->cls);
	free(e->args);
	free(e->retry_json);
	free(e->queue);
	free(e->schedule_json);
	cron_free(e->cron);
}

static void entries_free(struct entry *e, int n)
{
	for (int i = 0; i < n; i++)
		entry_free(&e[i]);
	free(e);
}

/* Build one entry from the conf; -1 (logged) if it cannot be used. */
static int entry_build(struct entry *e, const struct periodic_entry *p)
{
	char err[256];
	memset(e, 0, sizeof *e);
	e->done_slot = -1;
	e->blocked_slot = -1;
	e->args = json_canonical(p->args_json, strlen(p->args_json));
	if (!e->args || job_pjid(p->cron, p->class_name, p->args_json, e->pjid) != 0) {
		log_error("periodic entry %s (%s, line %d) skipped: its args are not valid JSON",
		          p->class_name, p->cron, p->line);
		free(e->args);
		return -1;
	}
	e->cron = cron_parse(p->cron, err, sizeof err);
	if (!e->cron) {
		/* The conf loader rejects these; a zone file removed since then can get here. */
		log_error("periodic entry %s (%s, line %d) skipped: %s", p->class_name, p->cron,
		          p->line, err);
		free(e->args);
		return -1;
	}
	e->cron_text = xstrdup(p->cron);
	e->cls = xstrdup(p->class_name);
	e->retry_json = xstrdup(p->retry_json ? p->retry_json : "0");
	e->queue = xstrdup(p->queue ? p->queue : "default");
	e->until_executed = p->until_executed;
	char *qc = json_quote(p->cron, strlen(p->cron));
	char *qk = json_quote(p->class_name, strlen(p->class_name));
	char *qq = strcmp(e->queue, "default") != 0 ? json_quote(e->queue, strlen(e->queue)) : NULL;
	e->schedule_json = xasprintf("{\"cron\":%s,\"class\":%s,\"retry\":%s,\"unique\":%s,"
	                             "\"args\":%s%s%s}", qc, qk, e->retry_json,
	                             e->until_executed ? "\"until_executed\"" : "null", e->args,
	                             qq ? ",\"queue\":" : "", qq ? qq : "");
	free(qc);
	free(qk);
	free(qq);
	return 0;
}

/* The publishable state of a conf: the replace flag and every entry's pjid and JSON. */
static char *signature_of(const struct entry *e, int n, int replace)
{
	struct sbuf b;
	sb_init(&b);
	sb_printf(&b, "replace=%d", replace);
	for (int i = 0; i < n; i++)
		sb_printf(&b, "\n%s %s", e[i].pjid, e[i].schedule_json);
	return sb_steal(&b);
}

/*
 * (Re)build the entries from t->conf, keeping what this ticker knew of every pjid that
 * stays. (Classes without a handler and queues nobody here reads are the manager's
 * warnings, at start and after each reload: conf_warnings.)
 */
static void entries_rebuild(struct ticker *t)
{
	const struct conf *c = t->conf;
	struct entry *fresh = xcalloc((size_t)c->nperiodic + 1, sizeof *fresh);
	int n = 0;
	for (int i = 0; i < c->nperiodic; i++) {
		struct entry *e = &fresh[n];
		if (entry_build(e, &c->periodic[i]) != 0)
			continue;
		int dup = 0;
		for (int k = 0; k < n && !dup; k++)
			dup = strcmp(fresh[k].pjid, e->pjid) == 0;
		if (dup) {
			log_warn("periodic entry %s (%s, line %d) ignored: same cron, class and args as "
			         "an earlier entry (pjid %s)", e->cls, e->cron_text, c->periodic[i].line,
			         e->pjid);
			entry_free(e);
			continue;
		}
		for (int k = 0; k < t->n; k++) {
			struct entry *o = &t->e[k];
			if (strcmp(o->pjid, e->pjid) != 0)
				continue;
			e->done_slot = o->done_slot;
			e->checked = o->checked;
			e->blocked_slot = o->blocked_slot;
			e->blocked_since = o->blocked_since;
			e->backoff_until = o->backoff_until;
			e->backoff_n = o->backoff_n;
		}
		n++;
	}
	entries_free(t->e, t->n);
	t->e = fresh;
	t->n = n;
	char *sig = signature_of(fresh, n, c->periodic_replace);
	if (!t->signature || strcmp(sig, t->signature) != 0) {
		free(t->signature);
		t->signature = sig;
		t->need_publish = 1;
		t->publish_failures = 0;
	} else {
		free(sig);
	}
}

/* Pick up a reloaded conf: rebuild and re-publish when the entries changed. */
static void follow_conf(struct ticker *t)
{
	struct conf *c = conf_acquire();
	if (c == t->conf) {
		conf_release(c);
		return;
	}
	struct conf *old = t->conf;
	t->conf = c;
	char *before = t->signature ? xstrdup(t->signature) : NULL;
	entries_rebuild(t);
	if (before && strcmp(before, t->signature) != 0)
		log_info("Periodic: entries changed by the reload (%d entr%s), republishing", t->n,
		         t->n == 1 ? "y" : "ies");
	free(before);
	conf_release(old);
}

/* ---- publishing (§7.16 "Publishing") ---- */

/* 0 published, -1 failed (r->err, r->unavailable). */
static int publish_once(struct ticker *t)
{
	struct rconn *r = &t->r;
	if (t->n > 0) {
		const char **argv = xcalloc((size_t)t->n * 2 + 2, sizeof *argv);
		argv[0] = "HSET";
		argv[1] = K_PERIODIC_SCHEDULE;
		for (int i = 0; i < t->n; i++) {
			argv[2 + 2 * i] = t->e[i].pjid;
			argv[3 + 2 * i] = t->e[i].schedule_json;
		}
		redisReply *rep = rcmd_argv(r, 2 + 2 * t->n, argv, NULL);
		free(argv);
		if (!rep)
			return -1;
		freeReplyObject(rep);
	}
	if (!t->conf->periodic_replace)
		return 0;
	/* Replace: remove every field that is not one of our entries. */
	redisReply *keys = rcmd(r, "HKEYS %s", K_PERIODIC_SCHEDULE);
	if (!keys)
		return -1;
	int rc = 0;
	for (size_t i = 0; keys->type == REDIS_REPLY_ARRAY && i < keys->elements && rc == 0; i++) {
		const redisReply *k = keys->element[i];
		if (k->type != REDIS_REPLY_STRING)
			continue;
		int ours = 0;
		for (int j = 0; j < t->n && !ours; j++)
			ours = strlen(t->e[j].pjid) == k->len && memcmp(t->e[j].pjid, k->str, k->len) == 0;
		if (ours)
			continue;
		const char *argv[] = { "HDEL", K_PERIODIC_SCHEDULE, k->str };
		size_t lens[] = { 4, strlen(K_PERIODIC_SCHEDULE), k->len };
		redisReply *rep = rcmd_argv(r, 3, argv, lens);
		if (rep)
			freeReplyObject(rep);
		else
			rc = -1;
	}
	freeReplyObject(keys);
	return rc;
}

static void publish(struct ticker *t)
{
	if (!t->need_publish)
		return;
	if (t->n == 0 && !t->conf->periodic_replace) {
		t->need_publish = 0;
		return;
	}
	if (publish_once(t) == 0) {
		if (t->publish_failures)
			log_info("Periodic schedule published after %d failed attempt(s)",
			         t->publish_failures);
		t->need_publish = 0;
		t->publish_failures = 0;
		return;
	}
	if (!t->r.unavailable) {
		/* A damaged key does not heal by retrying every tick: logged once, not fatal. */
		log_error("Periodic schedule not published: %s", t->r.err);
		t->need_publish = 0;
		return;
	}
	if (t->publish_failures++ == 0)
		log_warn("Periodic schedule not published (retried every tick): %s", t->r.err);
}

/* ---- rollbacks (§6.15) ---- */

/* 0 done, -1 failed (r->err, r->unavailable). */
static int rollback_run(struct rconn *r, const char *pjid, int64_t slot, const char *previous,
                        const char *jid)
{
	char *last = xasprintf(K_LAST_SLOT "%s", pjid);
	char *lock = xasprintf(K_SLOT_LOCK "%s:%lld", pjid, (long long)slot);
	char *running = xasprintf(K_RUNNING "%s", pjid);
	char s[32];
	snprintf(s, sizeof s, "%lld", (long long)slot);
	const char *keys[] = { last, lock, running };
	const char *args[] = { s, previous, jid };
	redisReply *rep = rscript(r, "rollback", 3, keys, 3, args, NULL);
	free(last);
	free(lock);
	free(running);
	if (!rep)
		return -1;
	freeReplyObject(rep);
	return 0;
}

static int has_rollback(const struct ticker *t, const char *pjid)
{
	for (const struct rollback *b = t->rollbacks; b; b = b->next)
		if (strcmp(b->pjid, pjid) == 0)
			return 1;
	return 0;
}

/* Step 1 of a tick: retry the rollbacks still owed. */
static void rollbacks_retry(struct ticker *t)
{
	struct rollback **pp = &t->rollbacks;
	while (*pp) {
		struct rollback *b = *pp;
		double now = t->tick_mono;
		if (b->backoff_until > now + SLACK) {
			pp = &b->next;
			continue;
		}
		if (rollback_run(&t->r, b->pjid, b->slot, b->previous, b->jid) == 0) {
			site_result(&t->site, &t->r, 1, "rollback");
			log_info("Periodic: rollback of %s slot %lld done", b->pjid, (long long)b->slot);
			*pp = b->next;
			free(b->previous);
			free(b);
			continue;
		}
		if (t->r.unavailable) {
			site_result(&t->site, &t->r, 0, "rollback");
			return;                 /* Redis still away: the others wait too */
		}
		/* Keyed rollback:<pjid>:<slot>: its own backoff, only for these errors. */
		double d = backoff_delay(b->backoff_n++);
		b->backoff_until = now + d;
		log_error("Periodic tick: rollback:%s:%lld failed: %s (next attempt in %gs)", b->pjid,
		          (long long)b->slot, t->r.err, d);
		pp = &b->next;
	}
}

/* ---- one entry ---- */

enum outcome { ENTRY_OK, ENTRY_UNAVAILABLE, ENTRY_ERROR };

/* The slot of e at whole second now: its latest match at or before now (§7.16). */
static int64_t current_slot(const struct entry *e, int64_t now)
{
	return cron_prev(e->cron, now + 1);
}

static void entry_done(struct entry *e, int64_t slot)
{
	e->done_slot = slot;
	e->checked = 1;
	e->blocked_slot = -1;
	e->backoff_n = 0;
	e->backoff_until = 0;
}

/* An error of this tick for e: logged (summarised when Redis is away), backoff unless
 * it was an availability error. */
static enum outcome entry_failed(struct ticker *t, struct entry *e, const char *what)
{
	if (t->r.unavailable) {
		site_result(&t->site, &t->r, 0, "tick");
		return ENTRY_UNAVAILABLE;
	}
	double d = backoff_delay(e->backoff_n++);
	e->backoff_until = t->tick_mono + d;
	log_error("Periodic tick: %s failed: %s%s (next attempt in %gs)", e->pjid, what, t->r.err,
	          d);
	return ENTRY_ERROR;
}

/* Push the job of a won slot: 0 pushed, -1 failed (r->err). */
static int push_job(struct ticker *t, const struct entry *e, int64_t slot, const char *jid)
{
	char extra[160];
	snprintf(extra, sizeof extra, "\"periodic_pjid\":\"%s\",\"periodic_slot\":%lld%s", e->pjid,
	         (long long)slot, e->until_executed ? ",\"periodic_until_executed\":true" : "");
	struct push p = {
		.cls = e->cls, .queue = e->queue, .args_json = e->args, .retry_json = e->retry_json,
		.at = 0, .jid = jid, .unique = 0, .extra = extra,
	};
	char out[25], err[512];
	int rc = producer_push(&t->r, &p, out, err, sizeof err);
	if (rc == 1)
		return 0;
	if (err[0] && strcmp(err, t->r.err) != 0) {
		snprintf(t->r.err, sizeof t->r.err, "%s", err);
		t->r.unavailable = 0;
	}
	return -1;
}

static enum outcome tick_entry(struct ticker *t, struct entry *e, int64_t now)
{
	struct rconn *r = &t->r;
	const struct conf *c = t->conf;
	int64_t slot = current_slot(e, now);
	if (slot < 0 || slot == e->done_slot)
		return ENTRY_OK;
	char jid[25];
	new_jid(jid);

	/* Disabled? A wrong-typed set counts as enabled (lesson 55). */
	redisReply *rep = rcmd(r, "SISMEMBER %s %s", K_DISABLED, e->pjid);
	if (!rep) {
		if (r->unavailable)
			return entry_failed(t, e, "");
		log_error(K_DISABLED " unreadable (%s); treating %s as enabled", r->err, e->pjid);
	} else {
		site_result(&t->site, r, 1, "tick");
		int disabled = rep->type == REDIS_REPLY_INTEGER && rep->integer == 1;
		freeReplyObject(rep);
		if (disabled) {
			metrics_inc(METRIC_CRON_SKIPPED);
			entry_done(e, slot);
			return ENTRY_OK;
		}
	}

	char s[32];
	snprintf(s, sizeof s, "%lld", (long long)slot);
	char *last = xasprintf(K_LAST_SLOT "%s", e->pjid);

	/* Catch-up off, first look at this entry: prime a baseline that exists nowhere. */
	if (!c->periodic_catch_up && !e->checked) {
		rep = rcmd(r, "SET %s %s NX", last, s);
		if (!rep) {
			free(last);
			return entry_failed(t, e, "priming: ");
		}
		site_result(&t->site, r, 1, "tick");
		int primed = rep->type == REDIS_REPLY_STATUS;
		freeReplyObject(rep);
		if (primed) {
			log_info("Periodic: %s primed at slot %lld (catch-up off: its first slot is not "
			         "run)", e->pjid, (long long)slot);
			free(last);
			entry_done(e, slot);
			return ENTRY_OK;
		}
	}

	char *running = xasprintf(K_RUNNING "%s", e->pjid);
	char *lock = xasprintf(K_SLOT_LOCK "%s:%s", e->pjid, s);
	char ttl[32];
	snprintf(ttl, sizeof ttl, "%ld", conf_queued_ttl(c));
	const char *keys[] = { running, last, lock };
	const char *args[] = { s, e->until_executed ? "until_executed" : "", SLOT_LOCK_TTL, jid,
	                       ttl };
	rep = rscript(r, "claim", 3, keys, 5, args, NULL);
	free(running);
	free(last);
	free(lock);
	if (!rep)
		return entry_failed(t, e, "claim: ");
	site_result(&t->site, r, 1, "tick");

	if (rep->type == REDIS_REPLY_INTEGER && rep->integer == 2) {
		freeReplyObject(rep);
		double m = t->tick_mono;
		if (e->blocked_slot != slot) {
			e->blocked_slot = slot;
			e->blocked_since = m;
			log_debug("Periodic: %s slot %lld blocked by its previous run's lock", e->pjid,
			          (long long)slot);
		}
		e->backoff_n = 0;
		e->backoff_until = 0;
		if (m - e->blocked_since + SLACK >= BLOCKED_GRACE) {
			log_info("Periodic: %s slot %lld skipped: its previous run still holds "
			         K_RUNNING "%s", e->pjid, (long long)slot, e->pjid);
			metrics_inc(METRIC_CRON_SKIPPED);
			entry_done(e, slot);
		}
		return ENTRY_OK;
	}
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 1) {
		freeReplyObject(rep);           /* lost: fired elsewhere, or not newer */
		metrics_inc(METRIC_CRON_SKIPPED);
		entry_done(e, slot);
		return ENTRY_OK;
	}
	char *previous = xstrdup(rep->elements >= 2 && rep->element[1]->type == REDIS_REPLY_STRING
	                         ? rep->element[1]->str : "");
	freeReplyObject(rep);

	if (push_job(t, e, slot, jid) == 0) {
		log_debug("Periodic: %s slot %lld pushed as jid=%s", e->pjid, (long long)slot, jid);
		metrics_inc(METRIC_CRON_FIRED);
		free(previous);
		entry_done(e, slot);
		return ENTRY_OK;
	}

	/* The push failed: undo the claim, or owe the rollback. */
	char push_err[512];
	int push_unavailable = r->unavailable;
	snprintf(push_err, sizeof push_err, "%s", r->err);
	if (rollback_run(r, e->pjid, slot, previous, jid) != 0) {
		log_error("Periodic: rollback of %s slot %lld failed (retried every tick): %s",
		          e->pjid, (long long)slot, r->err);
		struct rollback *b = xcalloc(1, sizeof *b);
		snprintf(b->pjid, sizeof b->pjid, "%s", e->pjid);
		b->slot = slot;
		b->previous = previous;
		snprintf(b->jid, sizeof b->jid, "%s", jid);
		b->next = t->rollbacks;
		t->rollbacks = b;
	} else {
		free(previous);
	}
	snprintf(r->err, sizeof r->err, "%s", push_err);
	r->unavailable = push_unavailable;
	char what[64];
	snprintf(what, sizeof what, "push of slot %lld: ", (long long)slot);
	return entry_failed(t, e, what);
}

/* ---- the tick and the thread ---- */

static void tick(struct ticker *t)
{
	t->tick_mono = mono_now();
	rollbacks_retry(t);
	deferred_releases_retry(&t->r);
	int64_t now = (int64_t)floor(now_float());
	t->tick_now = now;
	for (int i = 0; i < t->n && !atomic_load(&D.stopping); i++) {
		struct entry *e = &t->e[i];
		if (e->backoff_until > t->tick_mono + SLACK || has_rollback(t, e->pjid))
			continue;
		/* Redis away (or read-only): the others would only wait out the same error. */
		if (tick_entry(t, e, now) == ENTRY_UNAVAILABLE)
			break;
	}
}

void ticker_tick_once(struct ticker *t)
{
	follow_conf(t);
	publish(t);
	if (!atomic_load(&D.quiet))
		tick(t);
}

/*
 * When the thread must look again (monotonic): at the next slot of any entry, at once for a
 * slot that came after the last tick took its slots, when a backoff ends, and at the
 * latest after the catch-up look (tick_interval). While quiet only the look: resume kicks.
 */
static double next_wake(const struct ticker *t)
{
	double m = mono_now(), wall = now_float();
	double wake = m + t->conf->tick_interval;
	if (atomic_load(&D.quiet))
		return wake;
	int64_t sec = (int64_t)floor(wall);
	for (int i = 0; i < t->n; i++) {
		const struct entry *e = &t->e[i];
		if (e->backoff_until > m) {
			if (e->backoff_until < wake)
				wake = e->backoff_until;
			continue;
		}
		int64_t slot = current_slot(e, sec);
		if (slot >= 0 && slot != e->done_slot && slot > t->tick_now)
			return m;                   /* a slot the last tick did not see yet */
		int64_t next = cron_next(e->cron, sec);
		if (next >= 0 && m + ((double)next - wall) + SLOT_MARGIN < wake)
			wake = m + ((double)next - wall) + SLOT_MARGIN;
	}
	return wake;
}

void ticker_kick(void)
{
	wakeup_kick(&ticker_wake);
}

static void *ticker_main(void *arg)
{
	struct ticker *t = arg;
	publish(t);
	while (!atomic_load(&D.ready_for_ticker)) {
		if (sleep_unless_stopping(0.05)) {
			ticker_free(t);
			return NULL;
		}
	}
	while (!atomic_load(&D.stopping)) {
		ticker_tick_once(t);
		wakeup_wait(&ticker_wake, next_wake(t) - mono_now());
	}
	/* Abandoned at stop (the process exits without waiting for us, lesson 77); a tick
	 * that ends before the exit frees what it holds. */
	ticker_free(t);
	return NULL;
}

struct ticker *ticker_new(void)
{
	struct ticker *t = xcalloc(1, sizeof *t);
	t->site = (struct log_site)LOG_SITE("Periodic tick");
	t->conf = conf_acquire();
	rconn_init(&t->r, &t->conf->redis);
	entries_rebuild(t);
	return t;
}

void ticker_free(struct ticker *t)
{
	entries_free(t->e, t->n);
	while (t->rollbacks) {
		struct rollback *rb = t->rollbacks;
		t->rollbacks = rb->next;
		free(rb->previous);
		free(rb);
	}
	free(t->signature);
	rconn_free(&t->r);
	conf_release(t->conf);
	free(t);
}

int ticker_start(void)
{
	wakeup_init(&ticker_wake);
	struct ticker *t = ticker_new();
	if (thread_start_detached("ticker", ticker_main, t) != 0) {
		log_error("couldn't start the ticker thread");
		return -1;
	}
	return 0;
}
