/*
 * fetch.c: taking the next job off the queues (doc/protocol.md §7.8, §7.9).
 *
 * Reliable fetch (the default) moves a job atomically from its queue into this process's
 * in-progress list, so a job is never only in the memory of a process that may die.
 * Basic fetch pops it with BRPOP (a crash loses it, as cogworker's basic mode does).
 *
 * How an idle daemon starts a job within milliseconds on *any* queue: cogworker polls
 * its queues with the FETCH script and sleeps 0.25 → 1 s between empty rounds, so a job
 * waits up to a second. A blocking command can only watch one list (BLMOVE), so instead
 * each idle fetcher parks in BLMOVE on one queue, and idle fetchers are spread over the
 * queues (fetcher i watches queue (i + round) mod n): with at least as many fetchers as
 * queues every queue has a fetcher blocked on it server-side, and a push wakes it at once.
 * Whenever a round finds work, or a blocking wait ends, the next fetch is again one call
 * of the weighted FETCH script, so queue weights decide among queues that all have work.
 * With fewer fetchers than queues the block is bounded by fetch_idle_max_interval, so
 * the rotation reaches every queue within a bounded time. The cost of an idle daemon is
 * one FETCH call and one BLMOVE per fetcher every 2 s.
 *
 * Paused queues are read fresh (SMEMBERS) before every fetch, as cogworker does, so
 * pausing takes effect at once in a mixed fleet. After a success the fetcher sends that
 * SMEMBERS in the round trip that acks the job (fetcher.c, finish_success) and hands the
 * reply in: the same command at the same place in the connection's command stream, one
 * round trip fewer.
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
#include "keys.h"
#include "state.h"
#include "util.h"

void fetched_free(struct fetched *f)
{
	free(f->raw);
	free(f->queue);
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

/* The configured queues (weight-expanded) minus the paused ones; n = count. paused: the
 * SMEMBERS reply when the caller read it already (taken over), else NULL. */
static char **active_queues(struct rconn *r, const struct conf *c, int *n, int *err,
                            redisReply *paused)
{
	redisReply *rep = paused ? paused : rcmd(r, "SMEMBERS %s", K_PAUSED);
	*err = 0;
	if (!rep && r->unavailable) {
		*err = 1;
		return NULL;
	}
	char **out = xcalloc((size_t)c->nqueues, sizeof *out);
	*n = 0;
	for (int i = 0; i < c->nqueues; i++) {
		int is_paused = 0;
		for (size_t k = 0; rep && rep->type == REDIS_REPLY_ARRAY && k < rep->elements; k++)
			if (strcmp(rep->element[k]->str, c->queues[i]) == 0)
				is_paused = 1;
		if (!is_paused)
			out[(*n)++] = xstrdup(c->queues[i]);
	}
	if (rep)
		freeReplyObject(rep);
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

static int take_reply(redisReply *rep, const char *queue, struct fetched *out)
{
	if (!rep || rep->type != REDIS_REPLY_STRING)
		return 0;
	out->raw = xstrndup(rep->str, rep->len);
	out->len = rep->len;
	out->queue = xstrdup(queue);
	return 1;
}

static int blmove(struct rconn *r, const char *queue, double block, struct fetched *out)
{
	char *src = xasprintf(K_QUEUE "%s", queue);
	char *dst = xasprintf(K_INPROGRESS "%s", D.identity);
	char tmo[32];
	snprintf(tmo, sizeof tmo, "%g", block);
	const char *argv[] = { "BLMOVE", src, dst, "RIGHT", "LEFT", tmo };
	redisReply *rep = rcmd_blocking(r, block, 6, argv, NULL);
	free(src);
	free(dst);
	if (!rep)
		return r->unavailable ? -1 : (is_unknown_command(r->err) ? -2 : -1);
	int got = take_reply(rep, queue, out);
	freeReplyObject(rep);
	return got;
}

static int fetch_script(struct rconn *r, char **order, int n, struct fetched *out)
{
	const char **keys = xcalloc((size_t)n + 1, sizeof *keys);
	for (int i = 0; i < n; i++)
		keys[i] = xasprintf(K_QUEUE "%s", order[i]);
	keys[n] = xasprintf(K_INPROGRESS "%s", D.identity);
	redisReply *rep = rscript(r, "fetch", n + 1, keys, 0, NULL, NULL);
	for (int i = 0; i <= n; i++)
		free((char *)keys[i]);
	free(keys);
	if (!rep)
		return r->unavailable ? -1 : (is_unknown_command(r->err) ? -2 : -1);
	int got = 0;
	if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
	    rep->element[0]->type == REDIS_REPLY_STRING) {
		const char *q = rep->element[0]->str + strlen(K_QUEUE);
		got = take_reply(rep->element[1], q, out);
	}
	freeReplyObject(rep);
	return got;
}

/* Idle fetchers parked in BLMOVE, per queue name (a few configured names: never shrinks). */
static pthread_mutex_t park_mu = PTHREAD_MUTEX_INITIALIZER;
static struct parked { char *name; int n; } *parked;
static int nparked;

static int *park_slot(const char *queue)        /* under park_mu */
{
	for (int i = 0; i < nparked; i++)
		if (strcmp(parked[i].name, queue) == 0)
			return &parked[i].n;
	parked = xrealloc(parked, (size_t)(nparked + 1) * sizeof *parked);
	parked[nparked].name = xstrdup(queue);
	parked[nparked].n = 0;
	return &parked[nparked++].n;
}

static int fetch_reliable(struct rconn *r, int index, char **active, int n, double idle_max,
                          int concurrency, struct fetched *out, double *idle)
{
	shuffle(active, n);
	int nd = dedup(active, n);
	int got;
	if (nd == 1) {
		got = blmove(r, active[0], FETCH_TIMEOUT, out);
	} else {
		got = fetch_script(r, active, nd, out);
		if (got == 0) {
			/* Idle: park on one queue, spread over fetchers and rotated per round. */
			char **byname = xcalloc((size_t)nd, sizeof *byname);
			memcpy(byname, active, (size_t)nd * sizeof *byname);
			for (int i = 1; i < nd; i++)        /* a stable order to spread over */
				for (int k = i; k > 0 && strcmp(byname[k - 1], byname[k]) > 0; k--) {
					char *t = byname[k];
					byname[k] = byname[k - 1];
					byname[k - 1] = t;
				}
			/* The queue with the fewest fetchers parked on it, ties broken by the
			 * rotation: rotation alone let two fetchers park on one queue while
			 * another had none, and a push there waited a whole BLMOVE timeout. */
			int start = (int)(((long)index + (long)*idle) % nd), pick = start;
			int least = -1, watched = 0;
			pthread_mutex_lock(&park_mu);
			for (int k = 0; k < nd; k++) {
				int i = (start + k) % nd, cnt = *park_slot(byname[i]);
				watched += cnt > 0;
				if (least < 0 || cnt < least) {
					least = cnt;
					pick = i;
				}
			}
			watched += least == 0;
			(*park_slot(byname[pick]))++;
			pthread_mutex_unlock(&park_mu);
			/* A queue nobody watches is reached by rotation within idle_max. */
			double block = concurrency >= nd && watched >= nd ? FETCH_TIMEOUT : idle_max;
			if (block < 0.1)
				block = 0.1;
			if (block > FETCH_TIMEOUT)
				block = FETCH_TIMEOUT;
			got = blmove(r, byname[pick], block, out);
			pthread_mutex_lock(&park_mu);
			(*park_slot(byname[pick]))--;
			pthread_mutex_unlock(&park_mu);
			free(byname);
			*idle += 1;
		}
	}
	for (int i = 0; i < nd; i++)
		free(active[i]);
	free(active);
	return got;
}

static int fetch_basic(struct rconn *r, char **active, int n, struct fetched *out)
{
	shuffle(active, n);
	const char **argv = xcalloc((size_t)n + 2, sizeof *argv);
	argv[0] = "BRPOP";
	for (int i = 0; i < n; i++)
		argv[1 + i] = xasprintf(K_QUEUE "%s", active[i]);
	argv[n + 1] = "2";
	redisReply *rep = rcmd_blocking(r, FETCH_TIMEOUT, n + 2, argv, NULL);
	for (int i = 0; i < n; i++)
		free((char *)argv[1 + i]);
	free(argv);
	free_list(active, n);
	if (!rep)
		return -1;
	int got = 0;
	if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2)
		got = take_reply(rep->element[1], rep->element[0]->str + strlen(K_QUEUE), out);
	freeReplyObject(rep);
	return got;
}

int fetch_job(struct rconn *r, int index, struct fetched *out, double *idle, redisReply *paused)
{
	memset(out, 0, sizeof *out);
	enum fetch_mode mode = fetch_mode_resolve(r);
	if (mode == FETCH_UNRESOLVED) {
		if (paused)
			freeReplyObject(paused);
		return -1;
	}
	struct conf *c = conf_acquire();
	double idle_max = c->fetch_idle_max_interval;
	int concurrency = c->concurrency;
	int n = 0, err = 0;
	char **active = active_queues(r, c, &n, &err, paused);
	conf_release(c);
	if (err)
		return -1;
	if (n == 0) {
		free(active);
		sleep_unless_stopping(FETCH_TIMEOUT);
		return 0;
	}
	if (mode == FETCH_BASIC)
		return fetch_basic(r, active, n, out);
	int got = fetch_reliable(r, index, active, n, idle_max, concurrency, out, idle);
	if (got == 1)
		*idle = 0;
	return got;
}
