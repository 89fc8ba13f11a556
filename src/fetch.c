/* SPDX-License-Identifier: MIT */
/*
 * fetch.c: taking the next job off the queues (doc/protocol.md §7.8, §7.9).
 *
 * Reliable fetch (the default) moves a job atomically from its queue into this process's
 * in-progress list, so a job is never only in the memory of a process that may die.
 * Basic fetch pops it with BRPOP (a crash loses it, as cogworker's basic mode does).
 *
 * A fetch is a try, then a park. The try takes without blocking: LMOVE from the one active
 * queue, or the FETCH script over several in a weighted random order, so queue weights
 * decide among queues that all have work. Only when it finds nothing does the fetcher park
 * in a blocking BLMOVE (BRPOP in basic mode), on the queue park.c picks, or wait locally;
 * park.c says how idle fetchers are spread, how long they block and how they are woken.
 * After a job or a wake-up the next fetch tries first; after a long block that ran out it
 * parks again at once (nothing can have come unseen).
 *
 * Pause is immediate. cogworker reads the paused set before each fetch, so a fetcher
 * already blocked on a queue took jobs pushed after the pause (2 of 5 in a test). Here
 * every fetch command is followed, in the same round trip, by SMEMBERS of the paused set:
 * Redis runs a client's commands in order, so that read happens right after the job was
 * taken, blocking or not, and sees any pause that returned before the job was pushed. A
 * job of a paused queue is handed back to the head of its queue (REQUEUE_ONE, or RPUSH in
 * basic mode) unstarted; the read also refreshes the paused set park.c keeps, so fetchers
 * park only on active queues. The command count on the busy path is unchanged: the
 * SMEMBERS that used to precede each fetch (riding on the ack's round trip) follows it now.
 *
 * Tries are shared between fetchers (try_reliable): while one fetcher's try is in flight,
 * others that want a job queue theirs, and the next round trip carries all of them, each
 * with its own ack, queues and take, and the paused set read once after every take. With
 * warm handlers, whose jobs take less than a round trip, that is what keeps the daemon
 * from being bound by Redis latency: 0.38 server writes per job at concurrency 16 instead
 * of 1.0. Each job taken goes to the fetcher that asked for it, at once; the leader of a
 * round does nothing for the others but their Redis commands, on its connection: what
 * each try comes to (an ack to retry, a job of a paused queue to hand back, a script to
 * load) is settled by its own fetcher, on its own connection, once the round is over.
 *
 * The ack of the job a fetcher just finished rides on its next try (settle.h, held_ack):
 * ACK's LREM and DEL first, then the fetch and the SMEMBERS, in one round trip, so a busy
 * fetcher costs Redis one round trip per job after its handler. Redis runs them in that
 * order, so the job is off the in-progress list before the next one lands there. Only a
 * try carries it: before a park or a local wait the ack is sent on its own, as it would
 * have been without the ride, never held across a block.
 *
 * A job longer than max_job_bytes is never read: the fetch's replies are read with that
 * limit on the link (rlink.h), so such a job arrives as a nil with its length and its first
 * and last bytes, and is buried by those (settle.h bury_too_large) wherever it came from,
 * a paused queue included: it could not be handed back without being read. One pushed with
 * hundreds of MB costs the daemon its first 400 KB (the wrapper keeps its first 100 000
 * characters), not a copy of it in memory. A burial that fails for want of Redis is tried
 * again before the next fetch; the job waits on the in-progress list meanwhile (reconcile
 * reads that list with the same limit and leaves it alone).
 *
 * The fetch mode is resolved at the first fetch, not at start (lesson 52): a connection
 * error during the version check is not remembered (lesson 41), and an "unknown command"
 * from LMOVE/BLMOVE at run time switches every fetcher to basic (safe: no LMOVE ever
 * succeeded).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "fetch.h"
#include "job.h"
#include "keys.h"
#include "park.h"
#include "settle.h"
#include "state.h"
#include "util.h"

#define FETCH_TOO_LARGE 3       /* next_job: a job too large to read, in out->big */

static struct log_site bury_site = LOG_SITE("Processor");

static void too_large_free(struct too_large *t)
{
	rskip_free(&t->seen);
	free(t->queue);
	memset(t, 0, sizeof *t);
}

void fetched_free(struct fetched *f)
{
	free(f->raw);
	free(f->queue);
	too_large_free(&f->big);
	memset(f, 0, sizeof *f);
}

static int version_at_least_6_2(const char *info)
{
	const char *v = strstr(info, "redis_version:");
	if (!v)
		return 1;
	int major = 0, minor = 0;
	sscanf(v + 14, "%d.%d", &major, &minor);
	return major > 6 || (major == 6 && minor >= 2);
}

enum fetch_mode fetch_mode_resolve(struct rconn *r)
{
	int m = atomic_load(&D.fetch_mode);
	if (m != FETCH_UNRESOLVED)
		return (enum fetch_mode)m;
	pthread_mutex_lock(&D.mode_lock);
	m = atomic_load(&D.fetch_mode);
	if (m == FETCH_UNRESOLVED) {
		struct conf *c = conf_acquire();
		int basic = c->fetch_basic;
		conf_release(c);
		if (basic) {
			m = FETCH_BASIC;
		} else {
			redisReply *rep = rcmd(r, "INFO server");
			if (!rep && r->unavailable) {
				m = FETCH_UNRESOLVED;   /* not memoised: ask again next time */
			} else if (rep && rep->type == REDIS_REPLY_STRING &&
			           !version_at_least_6_2(rep->str)) {
				log_warn("reliable fetch needs Redis >= 6.2 (LMOVE); falling back to :basic");
				m = FETCH_BASIC;
			} else {
				m = FETCH_RELIABLE;     /* INFO refused: assume a modern server */
			}
			if (rep)
				freeReplyObject(rep);
		}
		atomic_store(&D.fetch_mode, m);
	}
	pthread_mutex_unlock(&D.mode_lock);
	return (enum fetch_mode)m;
}

void fetch_mode_fallback(void)
{
	pthread_mutex_lock(&D.mode_lock);
	if (atomic_load(&D.fetch_mode) != FETCH_BASIC) {
		atomic_store(&D.fetch_mode, FETCH_BASIC);
		log_warn("LMOVE/BLMOVE isn't supported by this Redis; falling back to :basic");
	}
	pthread_mutex_unlock(&D.mode_lock);
}

static int is_unknown_command(const char *err)
{
	return strcasestr(err, "unknown command") || strcasestr(err, "unknown redis command");
}

/* The configured queues (weight-expanded) minus those paused at the last read; n = count. */
static char **active_queues(const struct conf *c, int *n)
{
	char **out = xcalloc((size_t)c->nqueues + 1, sizeof *out);
	*n = 0;
	for (int i = 0; i < c->nqueues; i++)
		if (!park_is_paused(c->queues[i]))
			out[(*n)++] = xstrdup(c->queues[i]);
	return out;
}

static void free_list(char **v, int n)
{
	for (int i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static void shuffle(char **v, int n)
{
	for (int i = n - 1; i > 0; i--) {
		int k = (int)(random_unit() * (i + 1));
		char *t = v[i];
		v[i] = v[k];
		v[k] = t;
	}
}

/* Remove later duplicates, keeping the first occurrence: a weighted random order. */
static int dedup(char **v, int n)
{
	int m = 0;
	for (int i = 0; i < n; i++) {
		int seen = 0;
		for (int k = 0; k < m; k++)
			if (strcmp(v[k], v[i]) == 0)
				seen = 1;
		if (seen)
			free(v[i]);
		else
			v[m++] = v[i];
	}
	return m;
}

/* The job is the reply's string itself, not a copy of it (a large job was held twice
 * here): hiredis 0.14 allocates it with malloc and frees it with free, so it is taken
 * over and the reply left without it. */
static int take(redisReply *rep, const char *queue, struct fetched *out)
{
	if (!rep || rep->type != REDIS_REPLY_STRING)
		return 0;
	out->raw = rep->str;
	out->len = rep->len;
	rep->str = NULL;
	rep->len = 0;
	out->queue = xstrdup(queue);
	return 1;
}

/* {cogworker:queue:<q>, raw} (the FETCH script, BRPOP) into out. */
static int take_pair(redisReply *rep, struct fetched *out)
{
	size_t plen = strlen(K_QUEUE);
	if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
	    rep->element[0]->type != REDIS_REPLY_STRING ||
	    strncmp(rep->element[0]->str, K_QUEUE, plen) != 0)
		return 0;
	return take(rep->element[1], rep->element[0]->str + plen, out);
}

/* No job in rep, but one too large to read in its place (an integer: rlink.h): what was
 * seen of it into out->big, from queue (for a pair, the reply's queue key).
 * FETCH_TOO_LARGE, or 0 when there is none. */
static int too_large(struct rconn *r, const redisReply *rep, int pair, const char *queue,
                     int basic, struct fetched *out)
{
	size_t plen = strlen(K_QUEUE);
	if (pair) {
		if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
		    rep->element[0]->type != REDIS_REPLY_STRING ||
		    strncmp(rep->element[0]->str, K_QUEUE, plen) != 0)
			return 0;
		queue = rep->element[0]->str + plen;
		rep = rep->element[1];
	}
	struct rskip seen;
	if (rep->type != REDIS_REPLY_INTEGER || !rconn_skipped(r, &seen))
		return 0;
	out->big.seen = seen;
	out->big.queue = xstrdup(queue ? queue : "?");
	out->big.taken = basic;
	return FETCH_TOO_LARGE;
}

static int reply_has(const redisReply *rep, const char *name)
{
	for (size_t i = 0; rep && rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++)
		if (rep->element[i]->type == REDIS_REPLY_STRING && strcmp(rep->element[i]->str, name) == 0)
			return 1;
	return 0;
}

/* ---- one fetch round trip: the fetch, then the paused set ---- */

struct round {
	redisReply *rep;            /* the fetch's reply; NULL on an error (r->err) */
	int unavailable;
	redisReply *paused;         /* SMEMBERS of the paused set; NULL if it failed */
	int paused_lost;            /* ... for want of Redis: the pause state is unknown */
};

/*
 * Queue SMEMBERS of the paused set behind the fetch command already on p and read both.
 * Redis runs one client's commands in order, so this read of the paused set happens right
 * after the fetch took its job, blocking or not: any pause that returned before the job
 * was pushed is in it (pause_check). The fetch's error is left in r->err.
 */
static void round_paused(struct rconn *r, struct round *rd, redisReply *paused)
{
	rd->paused = paused;
	rd->paused_lost = !paused && r->unavailable;
	if (!rd->paused_lost)
		park_paused_update(paused);         /* a command error (WRONGTYPE): none paused */
}

static void round_read(struct rconn *r, struct rpipe *p, struct round *rd,
                       struct held_ack *held)
{
	char err[sizeof r->err];
	redisReply *paused;
	rpipe_add(r, p, "SMEMBERS %s", K_PAUSED);
	if (held)
		ack_held_read(r, p, held);      /* queued first, so read first */
	rpipe_read(r, p, 1, &rd->rep);
	rd->unavailable = r->unavailable;
	snprintf(err, sizeof err, "%s", r->err);
	rpipe_read(r, p, 1, &paused);
	round_paused(r, rd, paused);
	snprintf(r->err, sizeof r->err, "%s", err);
	r->unavailable = rd->unavailable;
}

static void round_free(struct round *rd)
{
	if (rd->rep)
		freeReplyObject(rd->rep);
	if (rd->paused)
		freeReplyObject(rd->paused);
}

/* The fetch's error as fetch_job returns it: -2 "unsupported" (fall back to basic), -1. */
static int round_error(const struct rconn *r, int basic)
{
	return !basic && !r->unavailable && is_unknown_command(r->err) ? -2 : -1;
}

enum { TAKEN_ACTIVE, TAKEN_PAUSED, TAKEN_UNKNOWN };

/* Was the queue of a job taken in round rd paused at that moment (or unknown)? */
static int taken_paused(const struct round *rd, const char *queue)
{
	return rd->paused_lost ? TAKEN_UNKNOWN
	       : reply_has(rd->paused, queue) ? TAKEN_PAUSED : TAKEN_ACTIVE;
}

/* A job from a queue paused at the moment it was taken (or with the pause state unknown)
 * goes back to the head of its queue unstarted (§7.9): 1 to run it, 0 given back. */
static int pause_settle(struct rconn *r, int paused, struct fetched *out)
{
	if (paused == TAKEN_ACTIVE)
		return 1;
	log_debug("Fetch: a job of %s, %s, handed back unstarted", out->queue,
	          paused == TAKEN_UNKNOWN ? "whose pause state could not be read"
	          : "a paused queue");
	give_back(r, out->raw, out->len, out->queue);
	fetched_free(out);
	return 0;
}

static int pause_check(struct rconn *r, const struct round *rd, struct fetched *out)
{
	return pause_settle(r, taken_paused(rd, out->queue), out);
}

/* Run the fetch queued on p and settle what it brought: 1 a job, 0 none, -1/-2 error. */
static int finish(struct rconn *r, struct rpipe *p, int basic, int pair, const char *queue,
                  struct held_ack *held, struct fetched *out)
{
	struct round rd = { 0 };
	round_read(r, p, &rd, held);
	int got;
	if (!rd.rep)
		got = round_error(r, basic);
	else
		got = pair ? take_pair(rd.rep, out) : take(rd.rep, queue, out);
	if (got == 1)
		got = pause_check(r, &rd, out);
	else if (got == 0 && rd.rep)
		got = too_large(r, rd.rep, pair, queue, basic, out);
	round_free(&rd);
	return got;
}

/* Raise the socket timeout above a server-side block (and back): the server must answer
 * first (doc/design.md "Redis"). */
static double raise_timeout(struct rconn *r, double block)
{
	double normal = rconn_command_timeout(r);
	if (normal < block + 1.0)
		rconn_set_timeouts(r, r->rc.connect_timeout, block + normal);
	return normal;
}

/* ---- reliable fetch: tries shared between fetchers ---- */

/*
 * One fetcher's try, as it waits to ride on a round trip: its queues (weight-ordered,
 * consumed), its held ack, where its job goes, and what came of it. Lives on the trying
 * fetcher's stack; the leader of the round fills it, under comb_mu it is marked done, and
 * the leader never touches it again: a waiter may return (and its stack frame go) as soon
 * as it holds the lock after that.
 */
struct want {
	char **active;
	int n;
	struct held_ack *held;
	struct fetched *out;
	int got;                    /* by the leader: 1 a job in out, 0 none, -1 the fetch failed */
	int paused;                 /* TAKEN_*: the job's queue at the take */
	int unavailable;            /* the fetch's error, when it failed */
	char err[512];
	redisReply *rep;            /* the fetch's reply, during the round */
	const char **keys;          /* its queue keys, then the in-progress list (owned) */
	int nd;
	int done;
	struct want *next;
};

static pthread_mutex_t comb_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t comb_cv = PTHREAD_COND_INITIALIZER;
static struct want *comb_head, **comb_tail = &comb_head;
static int comb_leading;

/* The fetch command of w on p: LMOVE from its one active queue, or FETCH over several. */
static void want_add(struct rconn *r, struct rpipe *p, struct want *w, const char *dst)
{
	shuffle(w->active, w->n);
	w->nd = dedup(w->active, w->n);
	w->keys = xcalloc((size_t)w->nd + 1, sizeof *w->keys);
	for (int i = 0; i < w->nd; i++)
		w->keys[i] = xasprintf(K_QUEUE "%s", w->active[i]);
	w->keys[w->nd] = xstrdup(dst);
	ack_held_add(r, p, w->held);
	if (w->nd == 1) {
		const char *argv[] = { "LMOVE", w->keys[0], dst, "RIGHT", "LEFT" };
		rpipe_add_argv(r, p, 5, argv, NULL);
	} else {
		rpipe_add_script(r, p, "fetch", w->nd + 1, w->keys, 0, NULL, NULL);
	}
}

/*
 * What the round brought w, settled by w's own fetcher on its own connection r once the
 * round is over: its fetch's error (a script to load on first use), a job of a paused
 * queue to hand back, its held ack judged (retried when the round failed). Each fetcher
 * does its own, at once: on the leader, a Redis failure mid-round cost every ack's retry
 * pauses in a row (0.1 s each) while all the others waited, past the stop's 3 s wait for
 * the fetchers at a high concurrency.
 */
static int want_settle(struct rconn *r, struct want *w)
{
	int got = w->got;
	if (got < 0) {
		snprintf(r->err, sizeof r->err, "%s", w->err);
		r->unavailable = w->unavailable;
		got = round_error(r, 0);
		if (got == -1 && w->nd > 1 && !r->unavailable &&
		    strncmp(r->err, "NOSCRIPT", 8) == 0) {
			/* First use on this server: EVAL it (rscript caches it), then read the
			 * paused set after it, as the pipeline does. */
			struct round rd = { .rep = rscript(r, "fetch", w->nd + 1, w->keys, 0, NULL,
			                                   NULL) };
			if (!rd.rep) {
				got = round_error(r, 0);
			} else {
				round_paused(r, &rd, rcmd(r, "SMEMBERS %s", K_PAUSED));
				got = take_pair(rd.rep, w->out);
				if (got == 1)
					got = pause_check(r, &rd, w->out);
				else
					got = too_large(r, rd.rep, 1, NULL, 0, w->out);
			}
			round_free(&rd);
		}
	} else if (got == 1) {
		got = pause_settle(r, w->paused, w->out);
	}
	for (int i = 0; i <= w->nd; i++)
		free((char *)w->keys[i]);
	free(w->keys);
	free_list(w->active, w->nd);
	/* The fetch's outcome is what the caller reads in r, not the ack's. */
	int unavailable = r->unavailable;
	snprintf(w->err, sizeof w->err, "%s", r->err);
	ack_held_settle(r, w->held);
	r->unavailable = unavailable;
	snprintf(r->err, sizeof r->err, "%s", w->err);
	return got;
}

/*
 * One round trip for every try in the batch: for each, its held ack and its take, then
 * the paused set once (read after every take, so it still sees any pause that returned
 * before a job was pushed), on the leader's connection r. Each want gets what its replies
 * mean (its job and whether its queue was paused, or its error), and nothing more.
 */
static void round_batch(struct rconn *r, struct want *batch)
{
	char *dst = xasprintf(K_INPROGRESS "%s", D.identity);
	struct rpipe p;
	struct round rd = { 0 };
	redisReply *paused;

	rpipe_begin(r, &p);
	for (struct want *w = batch; w; w = w->next)
		want_add(r, &p, w, dst);
	rpipe_add(r, &p, "SMEMBERS %s", K_PAUSED);
	for (struct want *w = batch; w; w = w->next) {
		ack_held_read(r, &p, w->held);
		rpipe_read(r, &p, 1, &w->rep);      /* on failure r->err is this reply's error */
		w->unavailable = r->unavailable;
		snprintf(w->err, sizeof w->err, "%s", r->err);
	}
	rpipe_read(r, &p, 1, &paused);
	round_paused(r, &rd, paused);
	for (struct want *w = batch; w; w = w->next) {
		if (!w->rep) {
			w->got = -1;
			continue;
		}
		w->got = w->nd == 1 ? take(w->rep, w->active[0], w->out) : take_pair(w->rep, w->out);
		if (w->got == 1)
			w->paused = taken_paused(&rd, w->out->queue);
		else    /* in the order of the replies: the link keeps what it saw in that order */
			w->got = too_large(r, w->rep, w->nd > 1, w->active[0], 0, w->out);
		freeReplyObject(w->rep);
		w->rep = NULL;
	}
	round_free(&rd);
	free(dst);
}

/*
 * Non-blocking: take a job from the active queues (consumed), behind the held ack if any
 * (settled here). Tries are combined: a fetcher that wants a job while another's round
 * trip is in flight queues its try, and the next round carries every queued one, each
 * with its own queues, ack and job, so N fetchers finishing together cost one round trip,
 * not N (doc/protocol.md §7.9). Only tries are combined, never a blocking fetch, and each
 * job taken is its fetcher's at once: none waits in memory for a fetcher to be free.
 */
static int try_reliable(struct rconn *r, char **active, int n, struct held_ack *held,
                        struct fetched *out)
{
	struct want me = { .active = active, .n = n, .held = held, .out = out };

	pthread_mutex_lock(&comb_mu);
	*comb_tail = &me;
	comb_tail = &me.next;
	while (!me.done) {
		if (comb_leading) {
			pthread_cond_wait(&comb_cv, &comb_mu);
			continue;
		}
		comb_leading = 1;
		struct want *batch = comb_head;
		comb_head = NULL;
		comb_tail = &comb_head;
		pthread_mutex_unlock(&comb_mu);
		round_batch(r, batch);
		pthread_mutex_lock(&comb_mu);
		for (struct want *w = batch, *next; w; w = next) {
			next = w->next;
			w->done = 1;    /* a waiter may return as soon as the lock is free */
		}
		comb_leading = 0;
		pthread_cond_broadcast(&comb_cv);
	}
	pthread_mutex_unlock(&comb_mu);
	/* Perhaps another fetcher's round: its outcome, as if this connection had run it. */
	return want_settle(r, &me);
}

static int park_reliable(struct rconn *r, const struct fetch_state *st, const char *queue,
                         double block, struct fetched *out)
{
	char *src = xasprintf(K_QUEUE "%s", queue);
	char *dst = xasprintf(K_INPROGRESS "%s", D.identity);
	char tmo[32];
	snprintf(tmo, sizeof tmo, "%g", block);
	double normal = raise_timeout(r, block);
	struct rpipe p;
	rpipe_begin(r, &p);
	int got = FETCH_IDLE;
	if (p.failed_conn || r->connects == st->id_connects) {
		const char *argv[] = { "BLMOVE", src, dst, "RIGHT", "LEFT", tmo };
		rpipe_add_argv(r, &p, 6, argv, NULL);
		got = finish(r, &p, 0, 0, queue, NULL, out);
	}
	/* else: reconnected since CLIENT ID was read: the waker would unblock a stale id, so
	 * re-plan (with the new id) instead of blocking. */
	rconn_set_timeouts(r, r->rc.connect_timeout, normal);
	free(src);
	free(dst);
	return got;
}

/* ---- basic fetch ---- */

/* BRPOP over the shuffled, weight-expanded list (consumed). */
static int park_basic(struct rconn *r, const struct fetch_state *st, char **active, int n,
                      double block, struct fetched *out)
{
	shuffle(active, n);
	const char **argv = xcalloc((size_t)n + 2, sizeof *argv);
	char tmo[32];
	snprintf(tmo, sizeof tmo, "%g", block);
	argv[0] = "BRPOP";
	for (int i = 0; i < n; i++)
		argv[1 + i] = xasprintf(K_QUEUE "%s", active[i]);
	argv[n + 1] = tmo;
	double normal = raise_timeout(r, block);
	struct rpipe p;
	rpipe_begin(r, &p);
	int got = FETCH_IDLE;
	if (p.failed_conn || r->connects == st->id_connects) {
		rpipe_add_argv(r, &p, n + 2, argv, NULL);
		got = finish(r, &p, 1, 1, NULL, NULL, out);
	}
	rconn_set_timeouts(r, r->rc.connect_timeout, normal);
	for (int i = 0; i < n; i++)
		free((char *)argv[1 + i]);
	free(argv);
	free_list(active, n);
	return got;
}

/* ---- the fetch ---- */

void fetch_state_init(struct fetch_state *st, int index)
{
	memset(st, 0, sizeof *st);
	st->index = index;
	st->hot = 1;
	st->client_id = -1;
	st->id_connects = -1;
}

/* This connection's CLIENT ID, asked once per connection; -1 when unknown or refused. */
static long long client_id(struct rconn *r, struct fetch_state *st)
{
	if (rconn_connect(r, 0) != 0)
		return -1;
	if (st->id_connects == r->connects)
		return st->client_id;
	st->id_connects = r->connects;
	st->client_id = -1;
	redisReply *rep = rcmd(r, "CLIENT ID");
	if (rep && rep->type == REDIS_REPLY_INTEGER)
		st->client_id = rep->integer;
	else if (!rep && r->unavailable)
		st->id_connects = -1;           /* ask again on the next connection */
	if (rep)
		freeReplyObject(rep);
	return st->client_id;
}

static int next_job(struct rconn *r, struct fetch_state *st, struct fetched *out)
{
	enum fetch_mode mode = fetch_mode_resolve(r);
	if (mode == FETCH_UNRESOLVED)
		return -1;
	if (!park_paused_known()) {
		/* The first fetch of the process: know the paused queues before choosing any. */
		redisReply *rep = rcmd(r, "SMEMBERS %s", K_PAUSED);
		if (!rep && r->unavailable)
			return -1;
		park_paused_update(rep);
		if (rep)
			freeReplyObject(rep);
	}
	struct conf *c = conf_acquire();
	double idle_max = c->fetch_idle_max_interval;
	int n = 0;
	unsigned gen = park_paused_gen();
	char **active = active_queues(c, &n);
	conf_release(c);
	if (n == 0) {
		/* Every queue paused: no Redis call until the waker sees a resume. */
		free(active);
		ack_held_settle(r, &st->held);
		park_wait_idle(FETCH_TIMEOUT);
		st->hot = 1;
		return FETCH_IDLE;
	}
	int basic = mode == FETCH_BASIC;
	if (st->hot && !basic) {
		int got = try_reliable(r, active, n, &st->held, out);
		if (got == 1)
			park_took_job();
		if (got != 0)
			return got;
		st->hot = 0;
		c = conf_acquire();
		gen = park_paused_gen();
		active = active_queues(c, &n);
		conf_release(c);
		if (n == 0) {
			free(active);
			return 0;
		}
	}
	ack_held_settle(r, &st->held);      /* never held across a block */
	long long id = client_id(r, st);
	struct park_plan plan;
	enum park_result pr = park_plan(st->index, basic, id, idle_max, st->max_block, gen, &plan);
	if (pr != PARK_ON) {
		free_list(active, n);
		st->hot = pr == PARK_SIGNALLED;
		return FETCH_IDLE;
	}
	int got = FETCH_IDLE;
	if (st->max_block > 0 && plan.block > st->max_block)
		plan.block = st->max_block < 0.1 ? 0.1 : st->max_block;
	if (atomic_load(&D.quiet) || atomic_load(&D.stopping))
		free_list(active, n);           /* changed while deciding: do not block */
	else if (basic)
		got = park_basic(r, st, active, n, plan.block, out);
	else {
		free_list(active, n);
		got = park_reliable(r, st, plan.queue, plan.block, out);
	}
	int replan = park_leave(st->index, got == 1);
	/* Unblocked, or a rotating block ended: try every queue first. A long block that ran
	 * out parks again at once: nothing can have come unseen. */
	st->hot = got == 1 || replan || plan.rotating;
	free(plan.queue);
	return got;
}

/* A job too large to read, taken by a fetch (out->big), becomes st's burial to make. */
static void owe_burial(struct fetch_state *st, struct fetched *out, long long max)
{
	st->owed = out->big;
	st->owed.max = max;
	memset(&out->big, 0, sizeof out->big);
	st->hot = 1;            /* there may be more behind it */
}

/*
 * A try and nothing more, for a job to hold while another runs (fetcher.c "prefetch"):
 * never a park, a local wait or a burial (a job too large to read is owed to the next
 * fetch_job, which buries it). The held ack rides on it, or goes alone when no try can be
 * made; either way it is settled when this returns. Reliable fetch only: a job taken by
 * basic fetch is in no list, and a crash while it waited would lose it.
 */
int fetch_try(struct rconn *r, struct fetch_state *st, struct fetched *out)
{
	memset(out, 0, sizeof *out);
	struct conf *c = conf_acquire();
	long long max = c->max_job_bytes;
	int n = 0;
	char **active = NULL;
	if (atomic_load(&D.fetch_mode) == FETCH_RELIABLE && park_paused_known() && !st->owed.seen.len)
		active = active_queues(c, &n);
	conf_release(c);
	int got = 0;
	if (n > 0) {
		/* Its own round trip, not a shared one: the reply is awaited while the job runs,
		 * so sharing would save Redis a read event and cost a wake-up of the waiting
		 * fetchers (a futex each) that this path is there to save. */
		struct want me = { .active = active, .n = n, .held = &st->held, .out = out };
		rconn_limit_bulk(r, (size_t)max, TOO_LARGE_HEAD);
		round_batch(r, &me);
		got = want_settle(r, &me);
		rconn_limit_bulk(r, 0, 0);
	} else {
		free(active);
	}
	ack_held_settle(r, &st->held);
	if (got == 1)
		park_took_job();
	if (got == FETCH_TOO_LARGE) {
		owe_burial(st, out, max);
		got = 0;                /* buried by the next fetch_job */
	}
	return got;
}

/* A job held since its fetch gets its queue's pause state read again before it starts:
 * 1 to run it, 0 handed back (paused, or the state unknown: pause_settle). */
int fetch_recheck_paused(struct rconn *r, struct fetched *out)
{
	struct round rd = { 0 };
	round_paused(r, &rd, rcmd(r, "SMEMBERS %s", K_PAUSED));
	int run = pause_check(r, &rd, out);
	round_free(&rd);
	return run;
}

/* The burial owed in st, if any: 0 done (or given up on a command error, logged: the job
 * is still on the list, or gone with basic fetch's pop), -1 Redis unavailable. */
static int bury_owed(struct rconn *r, struct fetch_state *st)
{
	struct too_large *t = &st->owed;
	if (!t->seen.len)
		return 0;
	if (bury_too_large(r, NULL, &t->seen, t->queue, t->taken, t->max, &bury_site) < 0) {
		if (r->unavailable)
			return -1;
		log_error("a job of %zu bytes from queue %s, too large to read, not buried: %s",
		          t->seen.len, t->queue, r->err);
	}
	too_large_free(t);
	return 0;
}

int fetch_job(struct rconn *r, struct fetch_state *st, struct fetched *out)
{
	memset(out, 0, sizeof *out);
	if (bury_owed(r, st) < 0)
		return -1;
	struct conf *c = conf_acquire();
	long long max = c->max_job_bytes;
	conf_release(c);
	fetch_mode_resolve(r);          /* before the limit: INFO's reply is a long string */
	rconn_limit_bulk(r, (size_t)max, TOO_LARGE_HEAD);
	int got = next_job(r, st, out);
	rconn_limit_bulk(r, 0, 0);
	ack_held_settle(r, &st->held);      /* an error before the try: ack it on its own */
	if (got == FETCH_TOO_LARGE) {
		owe_burial(st, out, max);
		got = bury_owed(r, st) < 0 ? -1 : 0;
	}
	return got;
}
