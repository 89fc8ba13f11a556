/*
 * scheduled.c: the scheduled poller thread (doc/protocol.md §7.14).
 *
 * One thread, its own Redis connection, three steps with their own rhythm:
 *
 *   key check        KeyGuard (keyguard.c): first poll, then every 60 s, and at once
 *                    (at most every KEY_CHECK_SOON) when any thread got a WRONGTYPE;
 *   orphan check     orphan recovery + reconcile (recovery.c): first poll, then every
 *                    orphan_check_interval; one poll_interval after a lost connection;
 *   scheduled poll   graduation of due schedule/retry entries: every poll_interval,
 *                    skipped while quiet.
 *
 * Why each step is guarded on its own: cogworker learned that a repeatedly failing orphan
 * recovery skipped graduation on every poll, fleet-wide (lesson 2), and that one Redis
 * blip could stop the poller for good (lesson 1). So nothing a step does can skip another
 * step or end the loop; errors are logged per site (§7.24: "Key check", "Orphan check",
 * "Reconcile", "Scheduled poll") and the step simply runs again when it is next due.
 *
 * Why each step has its own due time rather than running on every poll: an operator who
 * asks for recovery in seconds (orphan_check_interval = 1) must get it even with the
 * default poll_interval of 5; with the defaults (60 is a multiple of 5) the rhythm is
 * exactly cogworker's. The next orphan check is scheduled *before* the check runs, so a
 * failing check is not retried on every poll with a full SCAN.
 *
 * The Ticker may only start once an orphan check really read the registry (or did its
 * boot SCAN) without losing the connection: after a fleet-wide outage, a slot could
 * otherwise fire before recovery requeued the interrupted run (lessons 38, 61). There is
 * deliberately no timeout on that.
 *
 * Graduation (per set, each isolated, lesson 3): ZRANGEBYSCORE -inf now LIMIT 0 50; each
 * entry is moved by CLAIM_AND_REQUEUE (ZSCORE gate, LPUSH, ZREM: never lost, queued once
 * even with many pollers, lesson 6) with enqueued_at re-stamped in the original text
 * (lessons 7, 8). An entry that is not a job with a queue is buried into dead as
 * (unparseable) (lesson 5); an entry that fails is deferred 60 s with ZADD XX so it can't
 * starve the entries behind it (lesson 4).
 *
 * Why WRONGTYPE triggers the key check: a wrong-typed key fails every command on it, in
 * every thread, until it is moved (lesson 74); waiting up to a minute for the next check
 * took 38 s and 159 error lines with three damaged keys. The Redis layer notes any WRONGTYPE
 * reply (redis.h: a flag below us, so no lower file calls up) and the poller, sleeping in
 * slices, wakes for it. A check that a WRONGTYPE triggered and that moved nothing means the
 * damaged key is not one KeyGuard knows (or can't be moved: no RENAME): that is said once,
 * and WRONGTYPE triggers no more checks until a minute's check meets none since the last.
 *
 * At stop the thread is abandoned, never joined (lesson 77): it checks the stopping flag
 * between steps and sleeps in slices of 0.1 s.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "counters.h"
#include "deadline.h"
#include "job.h"
#include "keyguard.h"
#include "keys.h"
#include "recovery.h"
#include "scheduled.h"
#include "state.h"
#include "util.h"

#define KEY_CHECK_INTERVAL 60.0
#define KEY_CHECK_SOON 1.0              /* least gap between checks a WRONGTYPE triggers */
#define POLL_BATCH 50
#define DEFER_DELAY 60.0

struct poller {
	struct rconn r;
	struct log_site key_site, orphan_site, reconcile_site, poll_site;
	double next_key, next_orphan, next_poll;        /* monotonic due times */
	double last_key, key_gap;       /* last key check; gap before a WRONGTYPE may trigger one */
	int fruitless;                  /* triggered checks found nothing: said once */
	int scanned;            /* the boot SCAN of a reliable process is done */
};

static struct poller P;

/* ---- the scheduled poll ---- */

/* Best-effort throughput `failed` (stats:failed was counted inside BURY). */
static void count_failed_throughput(struct rconn *r)
{
	char bucket[64];
	snprintf(bucket, sizeof bucket, K_THROUGHPUT "%ld", (long)(now_float() / 3600));
	struct rpipe p;
	redisReply *rep[2];
	rpipe_begin(r, &p);
	rpipe_add(r, &p, "HINCRBY %s failed 1", bucket);
	rpipe_add(r, &p, "EXPIRE %s 90000", bucket);
	if (rpipe_exec(r, &p, rep) > 0)
		log_error("stats failed (ignored): %s", r->err);
	for (int i = 0; i < 2; i++)
		if (rep[i])
			freeReplyObject(rep[i]);
}

/* Push a failing entry 60 s into the future, only if it is still there (XX). */
static void defer_entry(struct rconn *r, const char *set, const char *raw, size_t len,
                        const char *why)
{
	log_error("Scheduled poll: couldn't move an entry of %s (%s); deferred %gs: %.200s", set,
	          why, DEFER_DELAY, raw);
	char score[32];
	job_format_time(now_float() + DEFER_DELAY, score);
	const char *argv[] = { "ZADD", set, "XX", score, raw };
	size_t lens[] = { 4, strlen(set), 2, strlen(score), len };
	redisReply *rep = rcmd_argv(r, 5, argv, lens);
	if (rep)
		freeReplyObject(rep);
	else
		log_error("Scheduled poll: couldn't defer an entry of %s either: %s", set, r->err);
}

/* A due entry that is not a job with a queue goes to dead as (unparseable). */
static int bury_entry(struct rconn *r, const char *set, const char *raw, size_t len,
                      int is_json)
{
	double now = now_float();
	char *msg = xasprintf("not a job (JSON object with a queue) in %s", set);
	char *wrapper = job_unparseable_wrapper(raw, len, NULL, is_json ? "Cogworker::InvalidJob"
	                                        : "JSON::ParserError", msg, now);
	char score[32];
	job_format_time(now, score);
	const char *keys[] = { set, K_DEAD, K_FAILED };
	const char *args[] = { raw, score, wrapper };
	size_t lens[] = { len, strlen(score), strlen(wrapper) };
	redisReply *rep = rscript(r, "bury", 3, keys, 3, args, lens);
	int rc = 0;
	if (rep && reply_integer(rep, 0) == 1) {
		count_failed_throughput(r);
		log_error("Scheduled poll: %s; moved to %s as (unparseable): %.200s", msg, K_DEAD, raw);
	} else if (!rep && r->unavailable) {
		rc = -1;
	} else if (!rep) {
		defer_entry(r, set, raw, len, r->err);
	}
	if (rep)
		freeReplyObject(rep);
	free(wrapper);
	free(msg);
	return rc;
}

/* Move one due entry onto its queue; -1 on an availability error. */
static int graduate_entry(struct rconn *r, const char *set, const char *raw, size_t len)
{
	cJSON *o = job_json_parse(raw, len);
	const cJSON *q = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, "queue") : NULL;
	char *queue = cJSON_IsString(q) && q->valuestring[0] ? xstrdup(q->valuestring) : NULL;
	int is_json = o != NULL;
	if (o)
		cJSON_Delete(o);
	if (!queue)
		return bury_entry(r, set, raw, len, is_json);
	/* Past its deadline: buried or dropped here, never queued (doc/protocol.md §7.31). */
	int expired = deadline_settle_entry(r, set, raw, len);
	if (expired != 0) {
		free(queue);
		return expired < 0 ? -1 : 0;
	}
	int rc = 0;
	char *payload = job_restamp_enqueued(raw, len, now_float());
	char *qkey = xasprintf(K_QUEUE "%s", queue);
	if (!payload) {
		defer_entry(r, set, raw, len, "its enqueued_at could not be re-stamped");
	} else {
		const char *keys[] = { set, K_QUEUES, qkey };
		const char *args[] = { raw, payload, queue };
		size_t lens[] = { len, strlen(payload), strlen(queue) };
		redisReply *rep = rscript(r, "claim_and_requeue", 3, keys, 3, args, lens);
		if (rep)
			freeReplyObject(rep);       /* 1 requeued, 0 gone: someone else took it */
		else if (r->unavailable)
			rc = -1;
		else
			defer_entry(r, set, raw, len, r->err);
	}
	free(payload);
	free(qkey);
	free(queue);
	return rc;
}

/* One set: -1 on an availability error (the step ends), else 0. */
static int poll_set(struct poller *p, const char *set)
{
	char now[32];
	job_format_time(now_float(), now);
	redisReply *rep = rcmd(&p->r, "ZRANGEBYSCORE %s -inf %s LIMIT 0 %d", set, now, POLL_BATCH);
	if (!rep) {
		char *what = xasprintf("%s unreadable", set);
		site_result(&p->poll_site, &p->r, 0, what);
		free(what);
		return p->r.unavailable ? -1 : 0;
	}
	int rc = 0;
	for (size_t i = 0; rep->type == REDIS_REPLY_ARRAY && i < rep->elements && rc == 0; i++)
		rc = graduate_entry(&p->r, set, rep->element[i]->str, rep->element[i]->len);
	freeReplyObject(rep);
	site_result(&p->poll_site, &p->r, rc == 0, "graduation");
	return rc;
}

static void scheduled_poll(struct poller *p)
{
	if (poll_set(p, K_SCHEDULE) == 0)
		poll_set(p, K_RETRY);
}

/* ---- the orphan check ---- */

static void orphan_check(struct poller *p, double poll_every)
{
	struct conf *c = conf_acquire();
	int conf_reliable = !c->fetch_basic;
	conf_release(c);
	int mode = atomic_load(&D.fetch_mode);
	/* Only reliable processes scan, once (lesson 39); basic ones still recover others. */
	int scan = conf_reliable && mode != FETCH_BASIC && !p->scanned;
	struct orphan_report rep;
	orphan_recovery(&p->r, scan, &rep, &p->orphan_site);
	if (rep.conn_lost)
		p->next_orphan = mono_now() + poll_every;
	if (atomic_load(&D.fetch_mode) == FETCH_RELIABLE && !atomic_load(&D.stopping))
		reconcile_own(&p->r, &p->reconcile_site);
	if (rep.conn_lost)
		return;
	if (rep.scan_done)
		p->scanned = 1;
	if ((rep.registry_read || rep.scan_done) && !atomic_exchange(&D.ready_for_ticker, 1))
		log_info("first orphan check completed; periodic jobs may fire from now on");
}

/* ---- the key check ---- */

static int key_check_triggered(const struct poller *p, double now)
{
	return redis_wrongtype_pending() && now >= p->last_key + p->key_gap;
}

static void key_check(struct poller *p, double now)
{
	int seen = redis_wrongtype_take(), triggered = seen && now < p->next_key;
	if (!seen) {                    /* no WRONGTYPE since the last check: episode over */
		p->fruitless = 0;
		p->key_gap = KEY_CHECK_SOON;
	}
	p->next_key = now + KEY_CHECK_INTERVAL;
	p->last_key = now;
	if (triggered)
		log_info("Key check: a command met a key of the wrong type (WRONGTYPE); checking "
		         "the keys now");
	int moved = keyguard_check(&p->r, &p->key_site);
	if (triggered && moved == 0) {
		if (!p->fruitless)
			log_warn("Key check: a command met a key of the wrong type, but the check moved "
			         "none: the key is one it doesn't know, or can't be renamed (see the "
			         "command's error); checking every 60 s again");
		p->fruitless = 1;
		p->key_gap = KEY_CHECK_INTERVAL;
	} else if (moved > 0) {
		p->fruitless = 0;
		p->key_gap = KEY_CHECK_SOON;
	}
}

/* ---- the loop ---- */

static double min3(double a, double b, double c)
{
	double m = a < b ? a : b;
	return m < c ? m : c;
}

static void *poller_main(void *arg)
{
	struct poller *p = arg;
	while (!atomic_load(&D.stopping)) {
		struct conf *c = conf_acquire();
		double poll_every = c->poll_interval, orphan_every = c->orphan_check_interval;
		conf_release(c);
		double now = mono_now();
		if (now >= p->next_key || key_check_triggered(p, now))
			key_check(p, now);
		if (now >= p->next_orphan && !atomic_load(&D.stopping)) {
			p->next_orphan = now + orphan_every;    /* scheduled before it runs */
			orphan_check(p, poll_every);
		}
		if (now >= p->next_poll && !atomic_load(&D.stopping)) {
			p->next_poll = now + poll_every;
			if (!atomic_load(&D.quiet))
				scheduled_poll(p);
		}
		double until = min3(p->next_key, p->next_orphan, p->next_poll);
		while (!atomic_load(&D.stopping) && mono_now() < until &&
		       !key_check_triggered(p, mono_now()))
			sleep_unless_stopping(until - mono_now() < 0.1 ? until - mono_now() : 0.1);
	}
	return NULL;
}

int poller_start(void)
{
	struct conf *c = conf_acquire();
	rconn_init(&P.r, &c->redis);
	conf_release(c);
	P.key_site = (struct log_site)LOG_SITE("Key check");
	P.orphan_site = (struct log_site)LOG_SITE("Orphan check");
	P.reconcile_site = (struct log_site)LOG_SITE("Reconcile");
	P.poll_site = (struct log_site)LOG_SITE("Scheduled poll");
	P.key_gap = KEY_CHECK_SOON;
	pthread_attr_t attr;
	pthread_t t;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);   /* abandoned at stop */
	int rc = thread_start(&t, &attr, "poller", poller_main, &P);
	pthread_attr_destroy(&attr);
	return rc == 0 ? 0 : -1;
}
