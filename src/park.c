/* SPDX-License-Identifier: MIT */
/*
 * park.c: where idle fetchers wait, and how they are woken (doc/protocol.md §7.9).
 *
 * The rules, and why:
 *
 * - One watcher per queue. An idle fetcher parks in a blocking fetch (BLMOVE, or BRPOP in
 *   basic mode) on the active queue with the fewest parked fetchers; once every active
 *   queue has one, the others wait here, on a condition variable, without any Redis call.
 *   A push wakes the parked fetcher at once; when it leaves with the job, one local waiter
 *   is signalled, tries every queue and takes the next job or parks in its place, so a burst
 *   drains through a chain of hand-offs. cogworker polls; parking every idle fetcher cost
 *   two commands per fetcher per block (102 commands/s at concurrency 25 over five queues
 *   with 2 s blocks).
 * - Long blocks, cut short. With every active queue watched (or pushes on unwatched ones
 *   notified), a parked fetcher blocks IDLE_BLOCK; whatever must reach it sooner (quiet,
 *   stop, a pause or resume, a queue left unwatched) marks it "re-plan" and kicks the waker
 *   thread, which sends CLIENT UNBLOCK to its connection. The blocking call may not have
 *   reached Redis yet when the first CLIENT UNBLOCK does (it answers 0): the waker retries
 *   until the fetcher is unblocked or has left, so no kick is lost. Without CLIENT UNBLOCK
 *   (refused by an ACL, or a fetcher whose CLIENT ID is unknown) blocks stay at
 *   FETCH_TIMEOUT, as before; and so they do with Redis Sentinel: after a switch every
 *   connection must reach the new primary within seconds, and a CLIENT UNBLOCK would go
 *   through the waker's connection to the new primary, not to the one the fetcher is
 *   blocked on.
 * - Fewer fetchers than queues: some queue has no watcher, so parked fetchers block at most
 *   fetch_idle_max_interval and rotate, each wake trying every queue; with keyspace
 *   notifications for lists the waker learns of a push on an unwatched queue and unblocks
 *   one parked fetcher to take it instead. When a parked fetcher leaves with a job and no
 *   local waiter can take its queue over, the fetchers in long blocks are unblocked, so they
 *   rotate until it is back.
 * - A fetcher that runs a job without parking for it (a try took it, or it had waited for
 *   its handler) may be the one that was to take a queue over: the local waiter signalled
 *   above tries before it parks, and a second job pushed with the first is what it finds.
 *   So a job taken that way while a queue is unwatched hands the queue on in the same way,
 *   to the next waiter or to the long blocks. Without that the queue stayed unwatched until
 *   a long block ran out (issue 21: a job pushed 5 s after two long ones started 24 s late).
 * - The paused queues are read in the same round trip as every fetch (fetch.c); the last
 *   read is kept here so fetchers park only on active queues. A change makes every idle
 *   fetcher re-plan; while one of our queues is paused, the waker reads the set for the
 *   resume (or listens, with keyspace notifications for sets).
 *
 * One mutex guards everything; fetchers hold it only to decide and to register.
 */
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include "park.h"
#include "state.h"
#include "util.h"

#define LOCAL_WAIT_MAX 60.0     /* a local waiter re-plans after this, without a try */
#define GIVE_UP 3.0             /* the waker stops unblocking a fetcher after this */

struct parker {
	int active;                 /* parked in a blocking fetch */
	unsigned seq;               /* registration number: the waker's replies match it */
	char *queue;
	long long client_id;
	int long_block;             /* blocks as if every queue were watched */
	int replan;                 /* must re-plan: the waker unblocks it */
	int unblocked;              /* CLIENT UNBLOCK answered 1, or the waker gave up */
	double replan_since;        /* monotonic */
	unsigned round;             /* rotation among equally watched queues */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t waiters_cv;       /* local waiters: signalled one at a time */
static pthread_cond_t idle_cv;          /* quiet / all paused: broadcast */
static struct parker *pk;
static int npk;
static int nwaiting;
static char **names;                    /* configured queues, distinct */
static char *paused_of;                 /* paused_of[i]: names[i] was paused at the last read */
static int nnames, npaused_ours;
static atomic_int paused_known;         /* the paused set was read once */
static atomic_uint paused_gen;          /* bumped by each change of it */
static int basic_mode;
static int kick_fd = -1;
static double longest_block = IDLE_BLOCK;
static atomic_int unblock_ok, notify_on;

static void cond_init_mono(pthread_cond_t *cv)
{
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(cv, &a);
	pthread_condattr_destroy(&a);
}

static void deadline_in(struct timespec *ts, double s)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	long ns = ts->tv_nsec + (long)((s - (double)(long)s) * 1e9);
	ts->tv_sec += (time_t)s + ns / 1000000000L;
	ts->tv_nsec = ns % 1000000000L;
}

void park_init(int nfetchers, char **qnames, int n, double longest)
{
	longest_block = longest;
	cond_init_mono(&waiters_cv);
	cond_init_mono(&idle_cv);
	pk = xcalloc((size_t)nfetchers + 1, sizeof *pk);
	npk = nfetchers;
	names = xcalloc((size_t)n + 1, sizeof *names);
	for (int i = 0; i < n; i++)
		names[i] = xstrdup(qnames[i]);
	paused_of = xcalloc((size_t)n + 1, 1);
	nnames = n;
	kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

int park_kick_fd(void)
{
	return kick_fd;
}

static void kick_waker(void)
{
	uint64_t one = 1;
	if (kick_fd >= 0 && write(kick_fd, &one, sizeof one) < 0)
		log_error("couldn't wake the waker thread");
}

/* ---- the paused queues ---- */

void park_paused_update(const redisReply *rep)
{
	int changed = 0, n = 0;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < nnames; i++) {
		int p = 0;
		for (size_t k = 0; rep && rep->type == REDIS_REPLY_ARRAY && k < rep->elements && !p; k++)
			p = rep->element[k]->type == REDIS_REPLY_STRING &&
			    strcmp(rep->element[k]->str, names[i]) == 0;
		changed |= paused_of[i] != p;
		paused_of[i] = (char)p;
		n += p;
	}
	npaused_ours = n;
	atomic_store(&paused_known, 1);
	pthread_mutex_unlock(&mu);
	if (changed) {
		atomic_fetch_add(&paused_gen, 1);
		log_debug("paused queues changed (%d of ours paused): idle fetchers re-plan", n);
		park_wake_all();
	}
}

static int paused_locked(const char *q)
{
	for (int i = 0; i < nnames; i++)
		if (strcmp(names[i], q) == 0)
			return paused_of[i];
	return 0;
}

int park_is_paused(const char *q)
{
	pthread_mutex_lock(&mu);
	int p = paused_locked(q);
	pthread_mutex_unlock(&mu);
	return p;
}

unsigned park_paused_gen(void)
{
	return atomic_load(&paused_gen);
}

int park_paused_known(void)
{
	return atomic_load(&paused_known);
}

int park_any_paused(void)
{
	pthread_mutex_lock(&mu);
	int n = npaused_ours;
	pthread_mutex_unlock(&mu);
	return n > 0;
}

/* ---- coverage (under mu) ---- */

static int parked_on(const char *q)
{
	int n = 0;
	for (int i = 0; i < npk; i++)
		n += pk[i].active && strcmp(pk[i].queue, q) == 0;
	return n;
}

/* The queues a parked fetcher can watch: the active ones, or "" (all) in basic mode. */
static int watchable(const char **out)
{
	if (basic_mode) {
		out[0] = "";
		return 1;
	}
	int n = 0;
	for (int i = 0; i < nnames; i++)
		if (!paused_of[i])
			out[n++] = names[i];
	return n;
}

/* Some active queue has no parked fetcher (asked on every job a try takes: no allocation). */
static int some_unwatched(void)
{
	if (basic_mode)
		return parked_on("") == 0;
	for (int i = 0; i < nnames; i++)
		if (!paused_of[i] && parked_on(names[i]) == 0)
			return 1;
	return 0;
}

static void mark_replan(struct parker *p)
{
	if (p->replan)
		return;
	p->replan = 1;
	p->unblocked = 0;
	p->replan_since = mono_now();
}

/* Every fetcher in a long block must re-plan; 1 when there was one (under mu). */
static int mark_long_blocks(void)
{
	int n = 0;
	for (int i = 0; i < npk; i++)
		if (pk[i].active && pk[i].long_block) {
			mark_replan(&pk[i]);
			n++;
		}
	return n > 0;
}

/*
 * A queue may have lost its last watcher, to a fetcher that left its park with a job or
 * went off to run one instead of parking: hand the queue to a local waiter, or, with none
 * and no notifications of pushes, make the long blocks rotate until it is watched again.
 * 1 when the waker must be kicked (under mu).
 */
static int watcher_lost(void)
{
	if (nwaiting > 0) {
		pthread_cond_signal(&waiters_cv);
		return 0;
	}
	return !atomic_load(&notify_on) && mark_long_blocks();
}

/* ---- an idle fetcher ---- */

enum park_result park_plan(int index, int basic, long long client_id, double idle_max,
                           double max_wait, unsigned gen, struct park_plan *plan)
{
	pthread_mutex_lock(&mu);
	if (gen != atomic_load(&paused_gen)) {
		/* The caller chose its queues before a pause or resume: choose again. */
		pthread_mutex_unlock(&mu);
		return PARK_SIGNALLED;
	}
	basic_mode = basic;
	struct parker *me = &pk[index];
	const char **w = xcalloc((size_t)nnames + 1, sizeof *w);
	int n = watchable(w);
	int start = n ? (int)((unsigned)index + me->round++) % n : 0, pick = -1, least = INT_MAX;
	int unwatched = 0;
	for (int k = 0; k < n; k++) {
		int i = (start + k) % n, c = parked_on(w[i]);
		unwatched += c == 0;
		if (c < least) {
			least = c;
			pick = i;
		}
	}
	if (pick < 0 || least > 0) {
		/* Every queue has its watcher: wait here until one leaves with a job, or until
		 * the caller's warm processes want tending (a retired one left <defunct> for a
		 * minute otherwise, and counted as a live one). */
		free(w);
		struct timespec ts;
		deadline_in(&ts, max_wait > 0 && max_wait < LOCAL_WAIT_MAX ? max_wait : LOCAL_WAIT_MAX);
		nwaiting++;
		int rc = pthread_cond_timedwait(&waiters_cv, &mu, &ts);
		nwaiting--;
		pthread_mutex_unlock(&mu);
		return rc == 0 ? PARK_SIGNALLED : PARK_TIMEOUT;
	}
	/* After this one parks, is any queue still unwatched? */
	int covered = unwatched <= 1;
	int can = atomic_load(&unblock_ok) && client_id >= 0;
	if (idle_max < 0.1)
		idle_max = 0.1;
	if (idle_max > FETCH_TIMEOUT)
		idle_max = FETCH_TIMEOUT;
	me->long_block = covered || (can && atomic_load(&notify_on));
	plan->block = !me->long_block ? idle_max : can ? longest_block : FETCH_TIMEOUT;
	plan->rotating = !me->long_block;
	plan->queue = xstrdup(w[pick]);
	me->active = 1;
	me->seq++;
	me->queue = xstrdup(w[pick]);
	me->client_id = client_id;
	me->replan = 0;
	me->unblocked = 0;
	free(w);
	pthread_mutex_unlock(&mu);
	return PARK_ON;
}

int park_leave(int index, int got)
{
	int kick = 0;
	pthread_mutex_lock(&mu);
	struct parker *me = &pk[index];
	int was = me->replan;
	me->active = 0;
	me->replan = 0;
	if (got && me->queue && parked_on(me->queue) == 0)
		kick = watcher_lost();
	free(me->queue);
	me->queue = NULL;
	pthread_mutex_unlock(&mu);
	if (kick)
		kick_waker();
	return was;
}

void park_took_job(void)
{
	pthread_mutex_lock(&mu);
	int kick = some_unwatched() && watcher_lost();
	pthread_mutex_unlock(&mu);
	if (kick)
		kick_waker();
}

void park_wait_idle(double s)
{
	struct timespec ts;
	deadline_in(&ts, s);
	pthread_mutex_lock(&mu);
	pthread_cond_timedwait(&idle_cv, &mu, &ts);
	pthread_mutex_unlock(&mu);
}

/* ---- waking ---- */

void park_wake_all(void)
{
	pthread_mutex_lock(&mu);
	for (int i = 0; i < npk; i++)
		if (pk[i].active)
			mark_replan(&pk[i]);
	pthread_cond_broadcast(&waiters_cv);
	pthread_cond_broadcast(&idle_cv);
	pthread_mutex_unlock(&mu);
	kick_waker();
}

struct target {
	int index;
	unsigned seq;
	long long id;
};

int park_unblock(struct rconn *r)
{
	if (!atomic_load(&unblock_ok))
		return 0;                       /* blocks are short then: nothing to cut */
	double now = mono_now();
	pthread_mutex_lock(&mu);
	struct target *t = xcalloc((size_t)npk + 1, sizeof *t);
	int n = 0;
	for (int i = 0; i < npk; i++) {
		struct parker *p = &pk[i];
		if (!p->active || !p->replan || p->unblocked || p->client_id < 0)
			continue;
		if (now - p->replan_since > GIVE_UP) {
			p->unblocked = 1;           /* its block ends by itself */
			continue;
		}
		t[n++] = (struct target){ i, p->seq, p->client_id };
	}
	pthread_mutex_unlock(&mu);
	if (n == 0) {
		free(t);
		return 0;
	}
	struct rpipe pp;
	redisReply **rep = xcalloc((size_t)n, sizeof *rep);
	rpipe_begin(r, &pp);
	for (int i = 0; i < n; i++)
		rpipe_add(r, &pp, "CLIENT UNBLOCK %lld", t[i].id);
	int failures = rpipe_exec(r, &pp, rep);
	int owed = 0;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < n; i++) {
		struct parker *p = &pk[t[i].index];
		if (!p->active || p->seq != t[i].seq)
			continue;                   /* it has left already */
		if (rep[i] && rep[i]->type == REDIS_REPLY_INTEGER && rep[i]->integer == 1)
			p->unblocked = 1;
		else
			owed++;
	}
	pthread_mutex_unlock(&mu);
	for (int i = 0; i < n; i++)
		if (rep[i])
			freeReplyObject(rep[i]);
	free(rep);
	free(t);
	return failures == n ? -1 : owed;
}

void park_set_unblock_ok(int ok)
{
	atomic_store(&unblock_ok, ok);
}

void park_set_notify(int on)
{
	if (atomic_exchange(&notify_on, on) == on || on)
		return;
	/* Notifications gone: long blocks that counted on them must rotate. */
	pthread_mutex_lock(&mu);
	int kick = mark_long_blocks();
	pthread_mutex_unlock(&mu);
	if (kick)
		kick_waker();
}

void park_queue_pushed(const char *q)
{
	int kick = 0;
	pthread_mutex_lock(&mu);
	int ours = 0;
	for (int i = 0; i < nnames && !ours; i++)
		ours = strcmp(names[i], q) == 0;
	if (ours && !basic_mode && !paused_locked(q) && parked_on(q) == 0) {
		/* Nobody watches q: redirect a parked fetcher, preferably one whose queue keeps
		 * another watcher. One at a time: a burst of pushes needs only one to start. */
		struct parker *pick = NULL;
		int busy = 0;
		for (int i = 0; i < npk && !busy; i++) {
			struct parker *p = &pk[i];
			if (!p->active)
				continue;
			if (p->replan && !p->unblocked)
				busy = 1;
			else if (!p->replan && (!pick || parked_on(p->queue) > 1))
				pick = p;
		}
		if (pick && !busy) {
			mark_replan(pick);
			kick = 1;
		}
	}
	pthread_mutex_unlock(&mu);
	if (kick)
		kick_waker();
}
