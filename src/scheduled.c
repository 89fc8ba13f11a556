/* SPDX-License-Identifier: MIT */
/*
 * scheduled.c: the scheduled poller thread (doc/protocol.md §7.14).
 *
 * One thread, its own Redis connection, three steps with their own rhythm:
 *
 *   key check        KeyGuard (keyguard.c): first pass, then every 60 s, and at once
 *                    (at most every KEY_CHECK_SOON) when any thread got a WRONGTYPE;
 *   orphan check     orphan recovery + reconcile (recovery.c), then the batches' look
 *                    (BATCH_EXPIRE, workflow.c) and the look for lost dependencies
 *                    (lostdeps.c): first pass, then every
 *                    orphan_check_interval; one poll_interval after a lost connection;
 *   graduation       of due schedule/retry entries, on timers (below), skipped while quiet;
 *                    with each look at the heads (every poll_interval), the sweep of the
 *                    groups with set-aside jobs (fair share, limits_group_sweep), whose
 *                    slots expired or whose rate window opened: nobody releases those.
 *
 * Why each step is guarded on its own: cogworker learned that a repeatedly failing orphan
 * recovery skipped graduation on every poll, fleet-wide (lesson 2), and that one Redis
 * blip could stop the poller for good (lesson 1). So nothing a step does can skip another
 * step or end the loop; errors are logged per site (§7.24: "Key check", "Orphan check",
 * "Reconcile", "Scheduled poll") and the step simply runs again when it is next due. The
 * next orphan check is scheduled *before* the check runs, so a failing check is not
 * retried on every pass with a full SCAN.
 *
 * Timers, not polls. cogworker polls the due range every 5 s, so a scheduled or retried
 * job started up to 5 s late (p99 4.95 s). Here the thread knows the head of each set (its
 * earliest entry) and sleeps until that moment, then moves what is due; poll_interval is
 * only the longest it goes without looking at the heads. How an entry written with an
 * earlier time than the known head is noticed:
 *   - by that look: a look is one bounded read per set (ZRANGEBYSCORE -inf +inf WITHSCORES
 *     LIMIT 0 1, both sets in one round trip), cheap enough to make every poll_interval
 *     (2 s by default), so anything written at least that long before it is due is seen
 *     in time; a retry filed by a worker is at least 15 s ahead (the backoff), always;
 *   - at once with keyspace notifications, when the server has them on (the waker listens
 *     for zadd on both sets and kicks us, poller_kick): nothing to poll, and entries due
 *     within the second are on time too. The server's configuration is never changed: it
 *     is shared, and notifications cost the server on every write.
 * Shorter polls would buy little for a command per set per look from every process of a
 * fleet, at all times, which the idle cost cannot afford (issue 12: <= 5 commands/s).
 *
 * A fleet: every process wakes for the same head, so each wakes a random 0-20 ms after it
 * (HEAD_JITTER): the first moves the entry (CLAIM_AND_REQUEUE, unchanged, queues it once
 * whoever races), the later ones find it gone with their read and only learn the next
 * head; a lost claim (0) is never retried, and head wakes are at least MIN_GAP apart, so
 * a due entry costs the fleet about one read per process, not a race of claims.
 *
 * The Ticker may only start once an orphan check really read the registry (or did its
 * boot SCAN) without losing the connection: after a fleet-wide outage, a slot could
 * otherwise fire before recovery requeued the interrupted run (lessons 38, 61). There is
 * deliberately no timeout on that.
 *
 * Graduation (per set, each isolated, lesson 3): ZRANGEBYSCORE -inf now LIMIT 0 50, again
 * at once while reads come back full (a burst due at one instant drains now, not 50 per
 * poll); each entry is moved by CLAIM_AND_REQUEUE (ZSCORE gate, LPUSH, ZREM: never lost,
 * queued once even with many pollers, lesson 6) with enqueued_at re-stamped in the
 * original text (lessons 7, 8). An entry that is not a job with a queue is buried into
 * dead as (unparseable) (lesson 5); an entry that fails is deferred 60 s with ZADD XX so
 * it can't starve the entries behind it (lesson 4).
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
 * between steps and its sleep returns at least every 0.25 s once stopping.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "admission.h"
#include "counters.h"
#include "deadline.h"
#include "job.h"
#include "keyguard.h"
#include "keys.h"
#include "lostdeps.h"
#include "recovery.h"
#include "scheduled.h"
#include "state.h"
#include "util.h"
#include "workflow.h"

#define KEY_CHECK_INTERVAL 60.0
#define KEY_CHECK_SOON 1.0              /* least gap between checks a WRONGTYPE triggers */
#define POLL_BATCH 50
#define MAX_ROUNDS 20           /* batches per set in one wake: then the next look */
#define DEFER_DELAY 60.0
#define HEAD_JITTER 0.02        /* a head is acted on up to this long after it is due */
#define MIN_GAP 0.01            /* head wakes at most this often */
#define NSETS 2

static const char *const SETS[NSETS] = { K_SCHEDULE, K_RETRY };

struct poller {
	struct rconn r;
	struct log_site key_site, orphan_site, reconcile_site, poll_site, group_site;
	double next_key, next_orphan, next_look;        /* monotonic due times */
	double head[NSETS];     /* score of each set's earliest entry: INFINITY empty, NAN unknown */
	double jitter[NSETS];   /* this process's delay behind each head */
	double last_wake;       /* monotonic: the last head wake */
	double last_key, key_gap;       /* last key check; gap before a WRONGTYPE may trigger one */
	int fruitless;                  /* triggered checks found nothing: said once */
	int scanned;            /* the boot SCAN of a reliable process is done */
	struct wakeup wake;     /* kicked by keyspace notifications and resume */
	struct workflow_cursor tend;    /* where the batch look goes on (workflow_tend) */
	struct lostdeps lost;   /* where the look for lost dependencies walks */
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

/*
 * One read of due entries of a set, each moved: the number read (a full POLL_BATCH means
 * more may be due), or -1 on an availability error (the step ends).
 */
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
	int rc = 0, n = rep->type == REDIS_REPLY_ARRAY ? (int)rep->elements : 0;
	for (int i = 0; i < n && rc == 0; i++)
		rc = graduate_entry(&p->r, set, rep->element[i]->str, rep->element[i]->len);
	freeReplyObject(rep);
	site_result(&p->poll_site, &p->r, rc == 0, "graduation");
	return rc == 0 ? n : -1;
}

/* The score of a head reply (ZRANGEBYSCORE ... WITHSCORES LIMIT 0 1): INFINITY for an
 * empty set, NAN when it could not be read (the set is looked at again at the next look). */
static double head_of(struct poller *p, const char *set, redisReply *rep)
{
	if (!rep) {
		char *what = xasprintf("%s unreadable", set);
		site_result(&p->poll_site, &p->r, 0, what);
		free(what);
		return NAN;
	}
	double h = INFINITY;
	if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
	    rep->element[1]->type == REDIS_REPLY_STRING)
		h = strtod(rep->element[1]->str, NULL);
	freeReplyObject(rep);
	site_result(&p->poll_site, &p->r, 1, "graduation");
	return h;
}

/* Learn the head of each set i with want[i] set, pipelined: one round trip. */
static void look(struct poller *p, const int want[NSETS])
{
	struct rpipe pp;
	redisReply *rep[NSETS];
	rpipe_begin(&p->r, &pp);
	for (int i = 0; i < NSETS; i++)
		if (want[i])
			rpipe_add(&p->r, &pp, "ZRANGEBYSCORE %s -inf +inf WITHSCORES LIMIT 0 1", SETS[i]);
	for (int i = 0; i < NSETS; i++) {
		if (!want[i])
			continue;
		rpipe_read(&p->r, &pp, 1, &rep[i]);
		p->head[i] = head_of(p, SETS[i], rep[i]);
		/* Spread the fleet: the first process to wake moves the entry, the later ones
		 * find it gone with one read instead of racing for it (see the opening comment). */
		p->jitter[i] = random_unit() * HEAD_JITTER;
	}
}

/*
 * Move what is due, schedule before retry, a batch of each in turn while batches come back
 * full (a burst due at one instant drains at once, not POLL_BATCH per poll_interval), then
 * learn the new heads. An availability error ends the step: retry is not read after one
 * on schedule (lesson 3: a command error on one set does not stop the other).
 */
static void scheduled_poll(struct poller *p)
{
	int due[NSETS], full = 1;
	double now = now_float();
	for (int i = 0; i < NSETS; i++)
		due[i] = !isnan(p->head[i]) && p->head[i] <= now;
	for (int round = 0; full && round < MAX_ROUNDS; round++) {
		full = 0;
		for (int i = 0; i < NSETS; i++) {
			if (!due[i] || atomic_load(&D.stopping) || atomic_load(&D.quiet))
				continue;
			int n = poll_set(p, SETS[i]);
			if (n < 0) {
				p->head[0] = p->head[1] = NAN;  /* the next look tries again */
				return;
			}
			due[i] = n == POLL_BATCH;
			full |= due[i];
		}
	}
	int want[NSETS];
	for (int i = 0; i < NSETS; i++)
		want[i] = !isnan(p->head[i]) && p->head[i] <= now;
	if (want[0] || want[1])
		look(p, want);
	/* A head that was due when this began and is still there could neither move nor be
	 * deferred (or a backlog passed MAX_ROUNDS batches): left for the next look, not read
	 * again at once. */
	for (int i = 0; i < NSETS; i++)
		if (want[i] && !full && p->head[i] <= now)
			p->head[i] = NAN;
}

/* When the head of a set is next due, monotonic; INFINITY when unknown or empty. */
static double head_wake(const struct poller *p, int i)
{
	if (isnan(p->head[i]) || isinf(p->head[i]))
		return INFINITY;
	double at = mono_now() + (p->head[i] - now_float()) + p->jitter[i];
	return at > p->last_wake + MIN_GAP ? at : p->last_wake + MIN_GAP;
}

/* ---- the orphan check ---- */

static void orphan_check(struct poller *p, double poll_every)
{
	struct conf *c = conf_acquire();
	int conf_reliable = !c->fetch_basic;
	double lost_after = c->lost_dependency_threshold;
	long long max_job_bytes = c->max_job_bytes;
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
	site_result(&p->orphan_site, &p->r, workflow_tend(&p->r, &p->tend) == 0,
	            "batch expiry and dependants check failed");
	site_result(&p->orphan_site, &p->r,
	            lostdeps_look(&p->r, &p->lost, lost_after, max_job_bytes) == 0,
	            "look for lost dependencies failed");
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

void poller_kick(void)
{
	wakeup_kick(&P.wake);
}

static void *poller_main(void *arg)
{
	struct poller *p = arg;
	int kicked = 0;
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
		if (atomic_load(&D.quiet) || atomic_load(&D.stopping)) {
			/* Nothing graduates while quiet: what the heads were is stale by resume. */
			p->head[0] = p->head[1] = NAN;
			p->next_look = now + poll_every;
		} else {
			if (now >= p->next_look || kicked) {
				p->next_look = now + poll_every;
				const int both[NSETS] = { 1, 1 };
				look(p, both);
				limits_group_sweep(&p->r, &p->group_site);
			}
			if (head_wake(p, 0) <= mono_now() || head_wake(p, 1) <= mono_now()) {
				p->last_wake = mono_now();
				scheduled_poll(p);
			}
		}
		double wake = p->next_key < p->next_orphan ? p->next_key : p->next_orphan;
		if (p->next_look < wake)
			wake = p->next_look;
		for (int i = 0; i < NSETS; i++)
			if (head_wake(p, i) < wake)
				wake = head_wake(p, i);
		/* A WRONGTYPE is a flag in the Redis layer, below us, that nothing can kick us
		 * for: look at it at least every KEY_CHECK_SOON (a local read, no Redis). */
		double soon = redis_wrongtype_pending() ? p->last_key + p->key_gap
		                                        : mono_now() + KEY_CHECK_SOON;
		if (soon < wake)
			wake = soon;
		kicked = wakeup_wait(&p->wake, wake - mono_now());
	}
	return NULL;
}

int poller_start(void)
{
	wakeup_init(&P.wake);
	P.head[0] = P.head[1] = NAN;
	struct conf *c = conf_acquire();
	rconn_init(&P.r, &c->redis);
	conf_release(c);
	P.key_site = (struct log_site)LOG_SITE("Key check");
	P.orphan_site = (struct log_site)LOG_SITE("Orphan check");
	P.reconcile_site = (struct log_site)LOG_SITE("Reconcile");
	P.poll_site = (struct log_site)LOG_SITE("Scheduled poll");
	P.group_site = (struct log_site)LOG_SITE("Group sweep");
	P.key_gap = KEY_CHECK_SOON;
	return thread_start_detached("poller", poller_main, &P);
}
