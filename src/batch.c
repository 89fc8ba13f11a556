/* SPDX-License-Identifier: MIT */
/*
 * batch.c: per-job bookkeeping batched in memory, flushed once a second (doc/protocol.md
 * §7.23, §2 "cogworker:workers:<id>").
 *
 * Why: on the success path of a short job these writes were most of the daemon's Redis
 * traffic: INCR stats:processed, HINCRBY and EXPIRE of the hour's throughput hash, HSET of
 * the workers entry before the run and HDEL after it, five commands and one round trip of
 * eleven. None of them is part of a job's guarantees: they are bookkeeping, best effort
 * already (lesson 71), and what reads them only needs them to be about right and about
 * current: the Web UI and cogworkerctl show totals and rates, and who is busy. Sidekiq
 * makes the same trade (it counts in memory and writes the counters with each beat).
 *
 * So the fetchers only record, in memory: a success adds to a counter (per hour, for the
 * throughput hash), and a job's start and end set and clear the fetcher's slot. The
 * manager calls batch_flush every BATCH_INTERVAL (1 s) and at stop, which writes, in one
 * pipeline: INCRBY stats:processed, HINCRBY + EXPIRE of each hour's throughput hash, one
 * HSET with the entries of the jobs running now that Redis does not have yet (and an EXPIRE
 * of the hash: the beat's finds none before its first entry), one HDEL of
 * the entries whose job has ended. A job that starts and ends between two flushes is
 * never written to the workers hash: it was too short for any reader to see it, as it
 * would have been with a write before and a delete after it; a job that runs longer than
 * a second always is, with its real start time in run_at. Nothing changed, nothing sent:
 * an idle daemon flushes nothing.
 *
 * What it costs: a kill -9 (or a stop with Redis unreachable) loses the counts of the last
 * second at most, never a job, an ack or a settlement, which do not go through here. The
 * workers hash may keep a finished job's entry up to a second longer, and a crashed
 * process's entries expire with the hash's TTL, as before. Counts that Redis refused for
 * want of a connection are kept and sent with the next flush; a command error (a key of
 * the wrong type) is logged and the counts are dropped, as an immediate write would have
 * dropped them.
 *
 * State of an entry, per slot: `gen` counts the jobs started in the slot (set by the
 * fetcher), `written` is the gen whose entry the last flush sent (0: none in Redis,
 * STALE: not known, or lost by Redis: batch_rewrite). Only the manager's thread changes
 * `written` (its flushes, which never overlap, and the beat's batch_rewrite), so a flush
 * needs the lock only to read the slots and the counts.
 *
 * Basic fetch writes the workers entry at once instead (batch_basic_started): its shutdown
 * requeue reads that hash to know which jobs to put back, so the hash must be exact there.
 * The slot still records the job, so that when Redis comes back empty the beat writes the
 * entries again (batch_basic_rewrite), as reliable fetch files its jobs again, and a stop
 * then still puts them back. Each slot's write, its delete and a rewrite of it hold the
 * slot's own lock across the command (`wmu`): a rewrite racing the job's end could
 * otherwise write an entry after its HDEL, and the stop would requeue a finished job.
 * The flush never touches these slots (their `written` is kept equal to `gen`, or 0).
 */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "batch.h"
#include "json.h"
#include "keys.h"
#include "log.h"
#include "state.h"
#include "util.h"

#define STALE ULONG_MAX
#define NHOURS 4            /* hours with counts not yet flushed (only grows in an outage) */

struct slot {
	char field[13];
	const char *raw, *queue;        /* the running job (NULL: none), the fetcher's memory */
	size_t len;
	long run_at;
	unsigned long gen;              /* jobs started in this slot */
	unsigned long written;          /* 0, STALE, or the gen of the entry in Redis */
	pthread_mutex_t wmu;            /* basic fetch: held across the slot's Redis write */
};

struct hour {
	long hour, n;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct slot *slots;
static int nslots;
static long processed;                  /* for INCRBY stats:processed */
static struct hour hours[NHOURS];       /* for HINCRBY throughput:<hour> processed */
static int nhours;

/* Sites are per place in the code (doc/protocol.md §7.24): the flush is one. */
static struct log_site site = LOG_SITE("Bookkeeping");

void batch_init(int n, char (*fields)[13])
{
	pthread_mutex_lock(&mu);
	free(slots);
	slots = xcalloc((size_t)n, sizeof *slots);
	nslots = n;
	for (int i = 0; i < n; i++) {
		memcpy(slots[i].field, fields[i], sizeof slots[i].field);
		pthread_mutex_init(&slots[i].wmu, NULL);
	}
	pthread_mutex_unlock(&mu);
}

static void slot_start(struct slot *s, const char *raw, size_t len, const char *queue,
                       long run_at)            /* under mu */
{
	s->raw = raw;
	s->len = len;
	s->queue = queue;
	s->run_at = run_at;
	s->gen++;
	if (s->gen == 0 || s->gen == STALE)
		s->gen = 1;
}

void batch_job_started(int i, const char *raw, size_t len, const char *queue, long run_at)
{
	pthread_mutex_lock(&mu);
	if (i >= 0 && i < nslots)
		slot_start(&slots[i], raw, len, queue, run_at);
	pthread_mutex_unlock(&mu);
}

void batch_job_ended(int i)
{
	pthread_mutex_lock(&mu);
	if (i >= 0 && i < nslots)
		slots[i].raw = slots[i].queue = NULL;
	pthread_mutex_unlock(&mu);
}

void batch_rewrite(void)
{
	pthread_mutex_lock(&mu);
	for (int i = 0; i < nslots; i++)
		if (slots[i].raw)
			slots[i].written = STALE;
	pthread_mutex_unlock(&mu);
}

/* HSET of slot s's entry now, over r: 0 written, -1 not (logged with site unless NULL). */
static int basic_write(struct rconn *r, struct log_site *site, const struct slot *s)
{
	char *key = xasprintf(K_WORKERS "%s", D.identity);
	char *q = json_quote(s->queue, strlen(s->queue));
	/* The raw payload is spliced in as the object: nothing is re-encoded (§4.9). */
	char *value = xasprintf("{\"queue\":%s,\"payload\":%.*s,\"run_at\":%ld}", q,
	                        (int)s->len, s->raw, s->run_at);
	const char *argv[] = { "HSET", key, s->field, value };
	redisReply *rep = rcmd_argv(r, 4, argv, NULL);
	if (rep)
		freeReplyObject(rep);
	else if (site)
		site_result(site, r, 0, "register failed (ignored)");
	free(q);
	free(key);
	free(value);
	return rep ? 0 : -1;
}

void batch_basic_started(struct rconn *r, struct log_site *site, int i, const char *raw,
                         size_t len, const char *queue, long run_at)
{
	if (i < 0 || i >= nslots)
		return;
	struct slot *s = &slots[i];
	pthread_mutex_lock(&s->wmu);
	pthread_mutex_lock(&mu);
	slot_start(s, raw, len, queue, run_at);
	s->written = s->gen;            /* the flush leaves it alone */
	pthread_mutex_unlock(&mu);
	basic_write(r, site, s);
	pthread_mutex_unlock(&s->wmu);
}

void batch_basic_ended(struct rconn *r, struct log_site *site, int i)
{
	if (i < 0 || i >= nslots)
		return;
	struct slot *s = &slots[i];
	pthread_mutex_lock(&s->wmu);
	pthread_mutex_lock(&mu);
	s->raw = s->queue = NULL;
	s->written = 0;
	pthread_mutex_unlock(&mu);
	char *key = xasprintf(K_WORKERS "%s", D.identity);
	redisReply *rep = rcmd(r, "HDEL %s %s", key, s->field);
	if (rep)
		freeReplyObject(rep);
	else if (site)
		site_result(site, r, 0, "deregister failed (ignored)");
	free(key);
	pthread_mutex_unlock(&s->wmu);
}

void batch_basic_forget(int i)
{
	if (i < 0 || i >= nslots)
		return;
	pthread_mutex_lock(&slots[i].wmu);
	pthread_mutex_lock(&mu);
	slots[i].raw = slots[i].queue = NULL;
	slots[i].written = 0;
	pthread_mutex_unlock(&mu);
	pthread_mutex_unlock(&slots[i].wmu);
}

int batch_basic_rewrite(struct rconn *r)
{
	int rc = 0, filed = 0;
	for (int i = 0; i < nslots && rc == 0; i++) {
		struct slot *s = &slots[i];
		pthread_mutex_lock(&s->wmu);
		if (s->raw && basic_write(r, NULL, s) < 0) {
			if (r->unavailable)
				rc = -1;
			else
				log_error("a running job not filed again into " K_WORKERS "%s: %s",
				          D.identity, r->err);
		} else if (s->raw) {
			filed++;
		}
		pthread_mutex_unlock(&s->wmu);
	}
	if (filed)
		log_warn("filed %d running job(s) again into " K_WORKERS "%s: Redis had lost them "
		         "(basic fetch: a stop puts them back from there)", filed, D.identity);
	return rc;
}

static void add_hour(long hour, long n)        /* under mu */
{
	for (int i = 0; i < nhours; i++)
		if (hours[i].hour == hour) {
			hours[i].n += n;
			return;
		}
	if (nhours == NHOURS) {
		/* Hours of outage on end: the oldest hour's count goes to the next one rather
		 * than be lost (the totals stay right, the hourly split blurs). */
		hours[1].n += hours[0].n;
		memmove(hours, hours + 1, sizeof hours[0] * (NHOURS - 1));
		nhours--;
	}
	hours[nhours].hour = hour;
	hours[nhours++].n = n;
}

void batch_processed(void)
{
	long hour = (long)(now_float() / 3600);
	pthread_mutex_lock(&mu);
	processed++;
	add_hour(hour, 1);
	pthread_mutex_unlock(&mu);
}

/* What one flush sent, for judging its replies. */
struct flush {
	long processed;
	struct hour hours[NHOURS];
	int nhours;
	int nset, *set_slots;           /* the slots whose entries were written, and erased */
	int ndel, *del_slots;
};

/* Anything for a flush to send? (under mu) */
static int anything(void)
{
	if (processed > 0)
		return 1;
	for (int i = 0; i < nslots; i++)
		if ((slots[i].raw && slots[i].written != slots[i].gen) ||
		    (!slots[i].raw && slots[i].written != 0))
			return 1;
	return 0;
}

/*
 * HSET of the entries the running jobs still lack, queued on p under the lock: an entry
 * splices in its job's text, which is the fetcher's and may be freed once the lock is
 * released, so it is written into the pipeline here, once. It was built on its own first,
 * and then copied into the pipeline: a 200 MB job cost 400 MB more at each flush.
 */
static void add_entries(struct rconn *r, struct rpipe *p, struct flush *f, const char *key)
{
	/* HSET key, then per entry its field and its value in three pieces:
	 * {"queue":<q>,"payload":  <the job>  ,"run_at":<t>} */
	int argc = 2 + 2 * f->nset, *npieces = xcalloc((size_t)argc, sizeof *npieces);
	const char **pieces = xcalloc((size_t)argc * 3, sizeof *pieces);
	size_t *plens = xcalloc((size_t)argc * 3, sizeof *plens);
	char **owned = xcalloc((size_t)f->nset * 2 + 1, sizeof *owned);
	int k = 0;
	pieces[k] = "HSET";
	plens[k++] = 4;
	pieces[k] = key;
	plens[k++] = strlen(key);
	for (int i = 0; i < 2; i++)
		npieces[i] = 1;
	for (int n = 0; n < f->nset; n++) {
		const struct slot *s = &slots[f->set_slots[n]];
		char *q = json_quote(s->queue, strlen(s->queue));
		owned[2 * n] = xasprintf("{\"queue\":%s,\"payload\":", q);
		owned[2 * n + 1] = xasprintf(",\"run_at\":%ld}", s->run_at);
		free(q);
		npieces[2 + 2 * n] = 1;
		pieces[k] = s->field;
		plens[k++] = strlen(s->field);
		npieces[3 + 2 * n] = 3;
		pieces[k] = owned[2 * n];
		plens[k++] = strlen(owned[2 * n]);
		/* The raw payload is spliced in as the object: nothing is re-encoded (§4.9). */
		pieces[k] = s->raw;
		plens[k++] = s->len;
		pieces[k] = owned[2 * n + 1];
		plens[k++] = strlen(owned[2 * n + 1]);
	}
	rpipe_add_pieces(r, p, argc, npieces, pieces, plens);
	for (int n = 0; n < 2 * f->nset; n++)
		free(owned[n]);
	free(owned);
	free(npieces);
	free(pieces);
	free(plens);
}

/* Take the counts and queue the flush's commands on p (begun), under the lock. */
static void take(struct rconn *r, struct rpipe *p, struct flush *f, const char *key,
                 const char *ttl)
{
	memset(f, 0, sizeof *f);
	f->set_slots = xcalloc((size_t)nslots + 1, sizeof *f->set_slots);
	f->del_slots = xcalloc((size_t)nslots + 1, sizeof *f->del_slots);
	const char **hdel = xcalloc((size_t)nslots + 2, sizeof *hdel);
	pthread_mutex_lock(&mu);
	f->processed = processed;
	f->nhours = nhours;
	memcpy(f->hours, hours, sizeof hours);
	processed = 0;
	nhours = 0;
	if (f->processed > 0) {
		char n[32];
		snprintf(n, sizeof n, "%ld", f->processed);
		rpipe_add(r, p, "INCRBY %s %s", K_PROCESSED, n);
	}
	for (int i = 0; i < f->nhours; i++) {
		rpipe_add(r, p, "HINCRBY " K_THROUGHPUT "%ld processed %ld", f->hours[i].hour,
		          f->hours[i].n);
		rpipe_add(r, p, "EXPIRE " K_THROUGHPUT "%ld 90000", f->hours[i].hour);
	}
	for (int i = 0; i < nslots; i++) {
		struct slot *s = &slots[i];
		if (s->raw && s->written != s->gen) {
			f->set_slots[f->nset++] = i;
			s->written = s->gen;
		} else if (!s->raw && s->written != 0) {
			hdel[2 + f->ndel] = s->field;
			f->del_slots[f->ndel++] = i;
			s->written = 0;
		}
	}
	/* The ended entries go before the new ones: a reader between the two commands sees
	 * fewer jobs running than there are, never more than the fetchers could run. */
	if (f->ndel) {
		hdel[0] = "HDEL";
		hdel[1] = key;
		rpipe_add_argv(r, p, 2 + f->ndel, hdel, NULL);
	}
	if (f->nset) {
		add_entries(r, p, f, key);
		/* The beat's EXPIRE finds no hash before the first entry exists: without its own
		 * TTL here, a kill -9 before the next beat would leave the entry for ever. */
		rpipe_add(r, p, "EXPIRE %s %s", key, ttl);
	}
	pthread_mutex_unlock(&mu);
	free(hdel);
}

static void flush_free(struct flush *f)
{
	free(f->set_slots);
	free(f->del_slots);
}

/* An entry write whose fate is unknown (no connection): the next flush decides again.
 * The slot fields are the flusher's alone, so no lock is needed for `written`; the lock
 * keeps the compiler and the fetchers' view of the struct honest all the same. */
static void mark_stale(const int *which, int n)
{
	pthread_mutex_lock(&mu);
	for (int i = 0; i < n; i++)
		slots[which[i]].written = STALE;
	pthread_mutex_unlock(&mu);
}

/* Judge one reply as the immediate write was judged; 1 when it failed for want of Redis
 * (so what it carried is owed again), 0 otherwise. */
static int judged(struct rconn *r, redisReply *rep, const char *what)
{
	if (rep) {
		freeReplyObject(rep);
		site_result(&site, r, 1, what);
		return 0;
	}
	if (!r->unavailable) {
		log_error("%s: %s", what, r->err);
		return 0;
	}
	site_result(&site, r, 0, what);
	return 1;
}

int batch_flush(struct rconn *r)
{
	pthread_mutex_lock(&mu);
	int any = anything();
	pthread_mutex_unlock(&mu);
	if (!any)
		return 0;
	char *key = xasprintf(K_WORKERS "%s", D.identity);
	char ttl[32];
	struct conf *c = conf_acquire();
	snprintf(ttl, sizeof ttl, "%ld", (long)c->process_ttl);
	conf_release(c);
	struct flush f;
	struct rpipe p;
	rpipe_begin(r, &p);
	take(r, &p, &f, key, ttl);
	redisReply *rep;
	long back = 0;
	struct hour back_hours[NHOURS];
	int nback = 0;
	if (f.processed > 0) {
		rpipe_read(r, &p, 1, &rep);
		if (judged(r, rep, "stats failed (ignored)"))
			back = f.processed;
	}
	for (int i = 0; i < f.nhours; i++) {
		rpipe_read(r, &p, 1, &rep);
		if (judged(r, rep, "stats failed (ignored)"))
			back_hours[nback++] = f.hours[i];
		rpipe_read(r, &p, 1, &rep);
		judged(r, rep, "stats failed (ignored)");
	}
	if (f.ndel) {
		rpipe_read(r, &p, 1, &rep);
		if (judged(r, rep, "deregister failed (ignored)"))
			mark_stale(f.del_slots, f.ndel);
	}
	if (f.nset) {
		rpipe_read(r, &p, 1, &rep);
		if (judged(r, rep, "register failed (ignored)"))
			mark_stale(f.set_slots, f.nset);
		rpipe_read(r, &p, 1, &rep);
		judged(r, rep, "register failed (ignored)");
	}
	if (back || nback) {
		pthread_mutex_lock(&mu);
		processed += back;
		for (int i = 0; i < nback; i++)
			add_hour(back_hours[i].hour, back_hours[i].n);
		pthread_mutex_unlock(&mu);
	}
	int unavailable = p.unavailable > 0;
	flush_free(&f);
	free(key);
	return unavailable ? -1 : 0;
}
