/* SPDX-License-Identifier: MIT */
/*
 * outkeep.c: the writer of kept output (doc/protocol.md §7.29): each run's last
 * output_keep bytes of combined stdout/stderr and a record of the run, in
 * cogworker:output:<jid> (the runs of a job) and cogworker:output:<jid>:<n> (run n's bytes).
 *
 * Why a thread of its own. Output keeping must cost the hot path nothing noticeable and
 * must never hold up a job's settlement, also while Redis is slow or away. So the fetchers
 * only copy bytes into a per-run buffer under one mutex (a memcpy per chunk the pump
 * reads) and hand the run over when it ends; this thread does every Redis write, on its own
 * connection, batching the runs that ended since its last pass into one pipeline (woken
 * by an ending run, it waits OUTKEEP_GATHER for more). A short job costs one script call in
 * that pipeline; a short one that succeeded without printing, an EXISTS (silent_success),
 * or nothing when its ack's settled record said no one can ask for it (outkeep_judge).
 *
 * What is kept of a run is its *last* output_keep bytes: the end of a run's output is
 * where a failure shows. While the run is within output_keep, new bytes are APPENDed (so
 * `cogworkerctl jobs log --follow` reads a growing string); once it has printed more, the
 * whole buffer is written in place of the old text and the record says how many bytes
 * were cut from the front ("dropped"). A running run is written at most every
 * OUTKEEP_INTERVAL, which bounds both the write rate and the delay seen by --follow.
 *
 * Best effort, bounded: a write that fails is logged through a log site and the run's
 * bytes stay buffered for the next pass while it runs; a finished run whose write fails is
 * dropped. A failed write may have run with only its reply lost, so the next one replaces
 * the text rather than append (bytes twice) and carries the run's token, by which a run
 * numbered by the lost write is found again (OUTPUT_WRITE). Buffers are bounded by OUTKEEP_MAX_BUFFERED over all runs: a run that finds the
 * budget spent keeps less (what it has), or nothing. Nothing here ever changes an outcome.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "json.h"
#include "keys.h"
#include "log.h"
#include "outkeep.h"
#include "redis.h"
#include "state.h"
#include "util.h"

#define OUTKEEP_INTERVAL 0.5                    /* seconds between writes of a running run */
#define OUTKEEP_MAX_BUFFERED ((size_t)64 << 20) /* bytes buffered over all runs */
#define OUTKEEP_RUN_COST 512                    /* what a run costs besides its bytes */
#define OUTKEEP_BATCH 64                        /* writes per pipeline */
#define OUTKEEP_GATHER 0.02                     /* wait for more once woken: fewer trips */

struct outrun {
	struct outrun *next;
	char *jid, *cls, *queue;
	size_t keep;                /* the most bytes kept (may shrink: the budget is spent) */
	char *buf;                  /* a ring once full: the oldest byte at start */
	size_t cap, start, len;
	unsigned long long total;   /* bytes printed */
	unsigned long long flushed; /* bytes Redis has (absolute offset) */
	long long run;              /* run number in Redis; 0 before the first write */
	double started, finished;
	char *outcome, *error_class, *error_message;
	struct run_usage usage;     /* measured = 0 until the run ended */
	int done;                   /* handed over by outkeep_end */
	int await;                  /* a silent success whose ack has not judged it yet */
	int look;                   /* its job may have runs kept or a follower: ask (EXISTS) */
	int unsure;                 /* a write failed: Redis may or may not have its bytes */
	double next_write;          /* monotonic */
};

/* mu guards the list, every run's buffer and fields, and the budget. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct outrun *runs;
static size_t buffered;
static int stop_asked, flush_at_stop;
static atomic_int writer_exited;
static pthread_t writer;
static struct rconn wconn;
static struct log_site site = LOG_SITE("Output");

struct outrun *outkeep_begin(const char *jid, const char *cls, const char *queue,
                             size_t keep, double started)
{
	if (!keep || !jid || !*jid)
		return NULL;
	pthread_mutex_lock(&mu);
	if (buffered + OUTKEEP_RUN_COST > OUTKEEP_MAX_BUFFERED || stop_asked) {
		pthread_mutex_unlock(&mu);
		return NULL;
	}
	struct outrun *o = xcalloc(1, sizeof *o);
	o->jid = xstrdup(jid);
	o->cls = xstrdup(cls ? cls : "");
	o->queue = xstrdup(queue ? queue : "");
	o->keep = keep;
	o->started = started;
	usage_none(&o->usage);
	o->next_write = mono_now() + OUTKEEP_INTERVAL;
	buffered += OUTKEEP_RUN_COST;
	o->next = runs;
	runs = o;
	pthread_mutex_unlock(&mu);
	return o;
}

/* Room for n more bytes while the buffer is still linear; the budget may say less. */
static void grow(struct outrun *o, size_t n)
{
	size_t want = o->len + n > o->keep ? o->keep : o->len + n;
	if (want <= o->cap)
		return;
	size_t cap = o->cap ? o->cap : 4096;
	while (cap < want)
		cap *= 2;
	if (cap > o->keep)
		cap = o->keep;
	if (buffered + (cap - o->cap) > OUTKEEP_MAX_BUFFERED) {
		/* The budget is spent: this run keeps what it has room for already. */
		o->keep = o->cap;
		return;
	}
	buffered += cap - o->cap;
	o->buf = xrealloc(o->buf, cap);
	o->cap = cap;
}

void outkeep_add(struct outrun *o, const char *data, size_t n)
{
	if (!o || !n)
		return;
	pthread_mutex_lock(&mu);
	o->total += n;
	if (o->len + n > o->cap)
		grow(o, n);
	if (o->keep == 0) {
		pthread_mutex_unlock(&mu);
		return;
	}
	if (n >= o->keep) {                     /* only the end of this chunk stays */
		data += n - o->keep;
		n = o->keep;
		o->start = 0;
		o->len = 0;
	}
	if (o->len + n > o->keep) {             /* full: the oldest bytes go */
		size_t drop = o->len + n - o->keep;
		o->start = (o->start + drop) % o->cap;
		o->len -= drop;
	}
	/* cap == keep whenever the ring wraps: grow() only stops short of keep when the
	 * budget is spent, and then keep became cap. */
	size_t at = (o->start + o->len) % o->cap;
	size_t first = o->cap - at < n ? o->cap - at : n;
	memcpy(o->buf + at, data, first);
	memcpy(o->buf, data + first, n - first);
	o->len += n;
	pthread_mutex_unlock(&mu);
}

static void end_locked(struct outrun *o, const char *outcome, const char *error_class,
                       const char *error_message, double finished,
                       const struct run_usage *usage)
{
	o->usage = *usage;
	o->outcome = xstrdup(outcome);
	o->error_class = error_class ? xstrdup(error_class) : NULL;
	o->error_message = error_message ? xstrdup(error_message) : NULL;
	o->finished = finished;
	o->look = 1;
	o->done = 1;
	pthread_cond_signal(&cv);
}

void outkeep_end(struct outrun *o, const char *outcome, const char *error_class,
                 const char *error_message, double finished, const struct run_usage *usage)
{
	if (!o)
		return;
	pthread_mutex_lock(&mu);
	end_locked(o, outcome, error_class, error_message, finished, usage);
	pthread_mutex_unlock(&mu);
}

static int silent_success(const struct outrun *o);

struct outrun *outkeep_end_success(struct outrun *o, double finished,
                                   const struct run_usage *usage)
{
	if (!o)
		return NULL;
	pthread_mutex_lock(&mu);
	end_locked(o, "success", NULL, NULL, finished, usage);
	o->await = silent_success(o);
	pthread_mutex_unlock(&mu);
	return o->await ? o : NULL;
}

void outkeep_judge(struct outrun *o, int look)
{
	if (!o)
		return;
	pthread_mutex_lock(&mu);
	o->look = look;
	o->await = 0;
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
}

static void run_free(struct outrun *o)
{
	buffered -= o->cap + OUTKEEP_RUN_COST;
	free(o->jid);
	free(o->cls);
	free(o->queue);
	free(o->buf);
	free(o->outcome);
	free(o->error_class);
	free(o->error_message);
	free(o);
}

/* ---- the writer ---- */

/* One write, prepared under mu and sent without it. */
struct write {
	struct outrun *o;
	int final;
	long long run;
	char runstr[32];
	char *key;                  /* cogworker:output:<jid> */
	char mode[2];               /* "a": append data; "s": data replaces the text */
	char *data;
	size_t len;
	char *meta;
	char *token;                /* the run's identity and start (OUTPUT_WRITE's ARGV[7]) */
	unsigned long long upto;    /* o->total when prepared */
	int silent;                 /* silent_success: written only if the job has records */
};

static void jfield(struct sbuf *b, const char *name, const char *s)
{
	if (!s) {
		sb_printf(b, ",\"%s\":null", name);
		return;
	}
	char *q = json_quote(s, strlen(s));
	sb_printf(b, ",\"%s\":%s", name, q);
	free(q);
}

/* The run record (doc/protocol.md §4.9 "Output run"). */
static char *run_meta(const struct outrun *o, unsigned long long dropped)
{
	struct sbuf b;
	sb_init(&b);
	char *cls = json_quote(o->cls, strlen(o->cls));
	sb_printf(&b, "{\"class\":%s", cls);
	free(cls);
	jfield(&b, "queue", o->queue);
	jfield(&b, "identity", D.identity);
	sb_printf(&b, ",\"started_at\":%.6f", o->started);
	if (o->done)
		sb_printf(&b, ",\"finished_at\":%.6f", o->finished);
	else
		sb_printf(&b, ",\"finished_at\":null");
	jfield(&b, "outcome", o->done ? o->outcome : "running");
	jfield(&b, "error_class", o->error_class);
	jfield(&b, "error_message", o->error_message);
	usage_json(&o->usage, &b);
	sb_printf(&b, ",\"bytes\":%llu,\"dropped\":%llu,\"keep\":%zu}", o->total, dropped, o->keep);
	return sb_steal(&b);
}

/* Copy count bytes of the ring from logical offset off (0 = oldest byte kept). */
static char *ring_copy(const struct outrun *o, size_t off, size_t count)
{
	char *s = xmalloc(count + 1);
	for (size_t i = 0; i < count;) {
		size_t at = (o->start + off + i) % o->cap;
		size_t k = o->cap - at < count - i ? o->cap - at : count - i;
		memcpy(s + i, o->buf + at, k);
		i += k;
	}
	return s;
}

static void prepare(struct write *w, struct outrun *o, int final)
{
	memset(w, 0, sizeof *w);
	w->o = o;
	w->final = final;
	w->run = o->run;
	w->key = xasprintf(K_OUTPUT "%s", o->jid);
	w->upto = o->total;
}

/* What the write sends: for a silent success only once it is known to go out (most do
 * not, silent_success), since formatting the record was a tenth of a warm job's cost. */
static void prepare_body(struct write *w)
{
	const struct outrun *o = w->o;

	if (w->meta)
		return;
	unsigned long long oldest = o->total - o->len;   /* absolute offset of buf's first */
	if (oldest == 0 && o->flushed <= o->total && !o->unsure) {
		/* Nothing cut yet: Redis has [0, flushed); send the rest. */
		w->mode[0] = 'a';
		w->len = (size_t)(o->total - o->flushed);
		w->data = ring_copy(o, (size_t)o->flushed, w->len);
		w->meta = run_meta(o, 0);
	} else {
		w->mode[0] = 's';
		w->len = o->len;
		w->data = ring_copy(o, 0, o->len);
		w->meta = run_meta(o, oldest);
	}
	w->token = xasprintf("%s %.6f", D.identity, o->started);
}

static void write_free(struct write *w)
{
	free(w->key);
	free(w->data);
	free(w->meta);
	free(w->token);
}

/*
 * A short run that succeeded without printing has nothing to show: no text, and its outcome
 * is the job's. Written anyway, it cost Redis a script call of six commands and two keys
 * held for output_ttl (a week by default) for every such job: most of what the success
 * path cost Redis, and millions of keys a week at a few hundred jobs a second. So it is
 * written only when the job has runs kept already (a retry that succeeded: `jobs log`
 * must show that run, not the failure before it) or someone waits for it (`jobs log
 * --follow` sets K_FOLLOWED while the job has no run kept); send_batch asks with one
 * EXISTS. A run that has a record already (it ran past OUTKEEP_INTERVAL) is always
 * written, so its record does not stay "running". A plain job's success is not even
 * asked about when its ack's SET ... GET found its settled record empty and its payload
 * has no failed_at (settle.h, held_ack: a job with runs kept failed before, or was put
 * back on a queue by REQUEUE, which marks that record; a follower marks it too): the run
 * waits here for that word (await) and then goes without a command.
 */
static int silent_success(const struct outrun *o)
{
	return o->run == 0 && o->total == 0 && !strcmp(o->outcome, "success");
}

/* Take what is due: every run handed over, and (unless only_done) running ones whose
 * interval is up. */
static int collect(struct write *ws, int max, double now, int only_done)
{
	int n = 0;
	struct outrun **pp = &runs;
	while (*pp && n < max) {
		struct outrun *o = *pp;
		if (o->done && o->await) {
			pp = &o->next;          /* its fetcher's to judge still (never freed here) */
			continue;
		}
		if (o->done && !o->look && silent_success(o)) {
			*pp = o->next;          /* judged by its ack: nothing to show, no one asks */
			run_free(o);
			continue;
		}
		if (o->done) {
			prepare(&ws[n], o, 1);
			ws[n].silent = silent_success(o);
			if (!ws[n].silent)
				prepare_body(&ws[n]);
			n++;
			*pp = o->next;          /* the writer's alone from now on */
			continue;
		}
		if (!only_done && now >= o->next_write && (o->run == 0 || o->total > o->flushed)) {
			prepare(&ws[n], o, 0);
			prepare_body(&ws[n++]);
			o->next_write = now + OUTKEEP_INTERVAL;
		}
		pp = &o->next;
	}
	return n;
}

/* The script's arguments for w. */
static void write_args(struct write *w, const char *runs_cap, const char *ttl,
                       const char **args, size_t *lens)
{
	snprintf(w->runstr, sizeof w->runstr, "%lld", w->run);
	const char *a[] = { w->runstr, w->mode, w->data, w->meta, runs_cap, ttl, w->token };
	for (int i = 0; i < 7; i++) {
		args[i] = a[i];
		lens[i] = i == 2 ? w->len : strlen(a[i]);
	}
}

/* skip[i]: ws[i] is a silent run whose job has no runs kept and no follower (asked with
 * one EXISTS each, in one pipeline). An error skips nothing: the write then says. */
static void skip_unwatched(struct write *ws, int n, int *skip)
{
	struct rpipe p;
	int asked = 0;
	for (int i = 0; i < n; i++) {
		skip[i] = 0;
		if (!ws[i].silent)
			continue;
		if (!asked++)
			rpipe_begin(&wconn, &p);
		char *followed = xasprintf("%s" K_FOLLOWED, ws[i].key);
		const char *argv[] = { "EXISTS", ws[i].key, followed };
		rpipe_add_argv(&wconn, &p, 3, argv, NULL);
		free(followed);
	}
	for (int i = 0; i < n && asked; i++) {
		if (!ws[i].silent)
			continue;
		redisReply *rep;
		rpipe_read(&wconn, &p, 1, &rep);
		skip[i] = rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 0;
		if (rep)
			freeReplyObject(rep);
	}
}

/* Send a batch in one pipeline; a NOSCRIPT reply is sent again with rscript's EVAL. */
static void send_batch(struct write *ws, int n)
{
	struct conf *c = conf_acquire();
	char runs_cap[32], ttl[32];
	snprintf(runs_cap, sizeof runs_cap, "%d", c->output_runs);
	snprintf(ttl, sizeof ttl, "%.0f", ceil(c->output_ttl));
	conf_release(c);
	redisReply *rep[OUTKEEP_BATCH];
	int skip[OUTKEEP_BATCH], noscript[OUTKEEP_BATCH];
	const char *args[7];
	size_t lens[7];
	struct rpipe p;
	skip_unwatched(ws, n, skip);
	rpipe_begin(&wconn, &p);
	for (int i = 0; i < n; i++) {
		if (skip[i])
			continue;
		const char *keys[] = { ws[i].key };
		prepare_body(&ws[i]);
		write_args(&ws[i], runs_cap, ttl, args, lens);
		rpipe_add_script(&wconn, &p, "output_write", 1, keys, 7, args, lens);
	}
	/* Every reply of the pipeline is read before any EVAL goes out: sent in between, an
	 * EVAL would read the reply meant for the next write (seen on a fresh server, where
	 * the first batch's writes all answer NOSCRIPT). */
	for (int i = 0; i < n; i++) {
		rep[i] = NULL;
		noscript[i] = 0;
		if (skip[i])
			continue;
		rpipe_read(&wconn, &p, 1, &rep[i]);
		noscript[i] = !rep[i] && !wconn.unavailable && strncmp(wconn.err, "NOSCRIPT", 8) == 0;
	}
	int ok = 1;
	for (int i = 0; i < n; i++) {
		if (noscript[i]) {
			const char *keys[] = { ws[i].key };
			write_args(&ws[i], runs_cap, ttl, args, lens);
			rep[i] = rscript(&wconn, "output_write", 1, keys, 7, args, lens);
		}
		if (!rep[i] && !skip[i])
			ok = 0;
	}
	site_result(&site, &wconn, ok, "output not kept");
	pthread_mutex_lock(&mu);
	for (int i = 0; i < n; i++) {
		struct write *w = &ws[i];
		if (rep[i] && !w->final) {
			w->o->run = reply_integer(rep[i], 0);
			w->o->flushed = w->upto;
			w->o->unsure = 0;
		} else if (!skip[i] && !w->final) {
			/* The call may have run with its reply lost: the next write replaces the
			 * text (an append would repeat bytes) and finds its run by the token. */
			w->o->unsure = 1;
		}
		if (rep[i])
			freeReplyObject(rep[i]);
		if (w->final)
			run_free(w->o);
		write_free(w);
	}
	pthread_mutex_unlock(&mu);
}

/* Drop a batch unsent (the stop found Redis unreachable). */
static void drop_batch(struct write *ws, int n)
{
	pthread_mutex_lock(&mu);
	for (int i = 0; i < n; i++) {
		if (ws[i].final)
			run_free(ws[i].o);
		write_free(&ws[i]);
	}
	pthread_mutex_unlock(&mu);
}

static void wait_a_little(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	long ns = ts.tv_nsec + (long)(OUTKEEP_INTERVAL / 2 * 1e9);
	ts.tv_sec += ns / 1000000000L;
	ts.tv_nsec = ns % 1000000000L;
	pthread_cond_timedwait(&cv, &mu, &ts);
}

static void *writer_main(void *arg)
{
	(void)arg;
	struct write ws[OUTKEEP_BATCH];
	for (;;) {
		pthread_mutex_lock(&mu);
		/* At stop only finished runs are written: a run still going belongs to a
		 * fetcher the stop gave up on. */
		int stopping = stop_asked;
		int n = collect(ws, OUTKEEP_BATCH, mono_now(), stopping);
		if (n == 0 && stopping) {
			pthread_mutex_unlock(&mu);
			break;
		}
		if (n == 0) {
			wait_a_little();
			pthread_mutex_unlock(&mu);
			/* Woken by a run that ended: a moment for the next ones, so that at a
			 * high job rate one pipeline carries many runs, not one each. */
			sleep_seconds(OUTKEEP_GATHER);
			continue;
		}
		pthread_mutex_unlock(&mu);
		if (stopping && !flush_at_stop)
			drop_batch(ws, n);
		else
			send_batch(ws, n);
	}
	atomic_store(&writer_exited, 1);
	return NULL;
}

int outkeep_start(void)
{
	struct conf *c = conf_acquire();
	rconn_init(&wconn, &c->redis);
	conf_release(c);
	return thread_start(&writer, NULL, "output writer", writer_main, NULL);
}

int outkeep_stop(int flush, double deadline)
{
	pthread_mutex_lock(&mu);
	stop_asked = 1;
	flush_at_stop = flush;
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
	/* At stop the connection gets the stop's short timeouts only from the next connect:
	 * a pass may outlast the deadline, and the writer is then left behind. */
	while (!atomic_load(&writer_exited) && mono_now() < deadline)
		sleep_seconds(0.02);
	if (atomic_load(&writer_exited)) {
		pthread_join(writer, NULL);
		rconn_free(&wconn);
		return 0;
	}
	pthread_detach(writer);
	log_warn("stopping: the output writer did not finish in time; its output is lost");
	return 1;
}
