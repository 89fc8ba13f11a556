/* SPDX-License-Identifier: MIT */
/*
 * jobs_run.c: `cogworkerctl jobs log` and `jobs cancel`: what a run printed, and stopping
 * a run (doc/protocol.md §7.13, §7.29).
 *
 *   jobs log JID [--run N] [--follow]
 *   jobs cancel JID [--discard]
 *
 * log reads the runs the daemon keeps in cogworker:output:<jid>: the record of run N (the
 * newest by default) and its text. The output goes to stdout byte for byte and everything
 * about it (which run, where, how it ended) to stderr, so `jobs log JID > file` is the
 * output alone. --follow polls twice a second, reading record and text in one MULTI so the
 * offsets agree (the writer replaces the text once a run prints more than output_keep),
 * prints what is new, and ends when the run's record says it ended, with its outcome; a run
 * whose process is gone is reported as left unfinished.
 *
 * cancel finds the job among the running ones (workers hashes), PUBLISHes "cancel <jid>"
 * (or "cancel <jid> discard") on its process's signal channel, and waits for the job to
 * leave that process: the handler gets TERM, its kill_grace, then KILL, so the wait is the
 * class's kill_grace from this conf plus a margin. The attempts log then says whether the
 * cancel did it (error class Cogworker::Cancelled) or the run ended on its own first. A
 * process that ignores the message (a Ruby cogworker one logs it as unknown) leaves the job
 * running: that is reported, exit 1. Two cancels of one job at once both saw the
 * Cancelled attempt and both said "cancelled": the one that claims cogworker:cancel:<jid>
 * (SET NX, for as long as it may wait) is the one that cancels; another waits the same
 * wait and says the job was already cancelled, exit 1.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "jobs_find.h"
#include "jobs_run.h"
#include "json.h"
#include "producer.h"
#include "workflow.h"

#define FOLLOW_EVERY 0.5        /* seconds between two reads of a followed run */
#define GONE_CHECK_EVERY 5.0    /* seconds between two checks that its process lives */
#define CANCEL_MARGIN 5.0       /* seconds waited beyond kill_grace */

/* ---- a run's record (doc/protocol.md §4.9 "Output run") ---- */

struct runrec {
	cJSON *obj;
	const char *cls, *queue, *identity, *outcome, *error_class, *error_message;
	double started, finished;   /* finished < 0: still running */
	unsigned long long bytes, dropped;
};

static const char *str_of(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static double num_of(const cJSON *o, const char *name, double dflt)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

static int runrec_parse(struct runrec *r, const char *s, size_t len)
{
	memset(r, 0, sizeof *r);
	r->obj = job_json_parse(s, len);
	if (!cJSON_IsObject(r->obj)) {
		if (r->obj)
			cJSON_Delete(r->obj);
		r->obj = NULL;
		return -1;
	}
	r->cls = str_of(r->obj, "class");
	r->queue = str_of(r->obj, "queue");
	r->identity = str_of(r->obj, "identity");
	r->outcome = str_of(r->obj, "outcome");
	r->error_class = str_of(r->obj, "error_class");
	r->error_message = str_of(r->obj, "error_message");
	r->started = num_of(r->obj, "started_at", 0);
	r->finished = num_of(r->obj, "finished_at", -1);
	r->bytes = (unsigned long long)num_of(r->obj, "bytes", 0);
	r->dropped = (unsigned long long)num_of(r->obj, "dropped", 0);
	return 0;
}

static void runrec_free(struct runrec *r)
{
	if (r->obj)
		cJSON_Delete(r->obj);
	r->obj = NULL;
}

/* "dead (Cogworker::Cancelled: cancelled on request) after 3.2s" */
static void say_outcome(const struct runrec *r, long long n)
{
	char took[64];
	ctl_duration(r->finished - r->started, took, sizeof took);
	if (r->error_class)
		fprintf(stderr, "run %lld ended: %s (%s: %s) after %s\n", n,
		        r->outcome ? r->outcome : "?", r->error_class,
		        r->error_message ? r->error_message : "", took);
	else
		fprintf(stderr, "run %lld ended: %s after %s\n", n, r->outcome ? r->outcome : "?",
		        took);
}

static void say_header(const char *jid, long long n, const long long *kept, int nkept,
                       const struct runrec *r)
{
	char at[32];
	ctl_iso_time(r->started, at);
	fprintf(stderr, "jid %s run %lld (kept: %lld", jid, n, kept[0]);
	if (nkept > 1)
		fprintf(stderr, "…%lld", kept[nkept - 1]);
	fprintf(stderr, ") · %s · on %s · started %s\n", r->cls ? r->cls : "?",
	        r->identity ? r->identity : "?", at);
	if (r->dropped)
		fprintf(stderr, "[… the first %llu bytes of %llu were not kept …]\n", r->dropped,
		        r->bytes);
}

/* ---- reading a job's runs ---- */

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;
	return x < y ? -1 : x > y;
}

/* The run numbers kept for jid, ascending; 0 = none, -1 = Redis error (said). */
static int kept_runs(struct ctl *c, const char *jid, long long **out)
{
	*out = NULL;
	redisReply *rep = rcmd(&c->r, "HKEYS " K_OUTPUT "%s", jid);
	if (!rep) {
		ctl_redis_error_family(c, K_OUTPUT);
		return -1;
	}
	long long *v = xcalloc(rep->elements + 1, sizeof *v);
	int n = 0;
	for (size_t i = 0; i < rep->elements; i++) {
		char *end;
		long long k = strtoll(rep->element[i]->str, &end, 10);
		if (*end == '\0' && k > 0)
			v[n++] = k;
	}
	freeReplyObject(rep);
	qsort(v, (size_t)n, sizeof *v, cmp_ll);
	*out = v;
	return n;
}

/* A run's text (malloc'd; NULL when the text key is gone). */
struct text {
	char *s;
	size_t len;
};

/* Record and text of run n, read together; 1 found, 0 gone, -1 Redis error (said). */
static int read_run(struct ctl *c, const char *jid, long long n, struct runrec *r,
                    struct text *text)
{
	char field[32];
	snprintf(field, sizeof field, "%lld", n);
	char *idx = xasprintf(K_OUTPUT "%s", jid);
	char *tkey = xasprintf(K_OUTPUT "%s:%lld", jid, n);
	struct rpipe p;
	redisReply *rep[4];
	rpipe_begin(&c->r, &p);
	rpipe_add(&c->r, &p, "MULTI");
	rpipe_add(&c->r, &p, "HGET %s %s", idx, field);
	rpipe_add(&c->r, &p, "GET %s", tkey);
	rpipe_add(&c->r, &p, "EXEC");
	rpipe_exec(&c->r, &p, rep);
	free(idx);
	free(tkey);
	int rc = -1;
	redisReply *x = rep[3];
	text->s = NULL;
	text->len = 0;
	if (x && x->type == REDIS_REPLY_ARRAY && x->elements == 2) {
		rc = 0;
		if (x->element[0]->type == REDIS_REPLY_STRING &&
		    runrec_parse(r, x->element[0]->str, x->element[0]->len) == 0) {
			rc = 1;
			if (x->element[1]->type == REDIS_REPLY_STRING) {
				text->len = x->element[1]->len;
				text->s = xmalloc(text->len + 1);
				memcpy(text->s, x->element[1]->str, text->len);
			}
		}
	} else {
		ctl_redis_error_family(c, K_OUTPUT);
	}
	for (int i = 0; i < 4; i++)
		if (rep[i])
			freeReplyObject(rep[i]);
	return rc;
}

static void write_out(const char *s, size_t n)
{
	while (n) {
		ssize_t w = write(1, s, n);
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

static int process_alive(struct ctl *c, const char *identity)
{
	redisReply *rep = rcmd(&c->r, "EXISTS " K_PROCESS "%s", identity);
	int alive = !rep || reply_integer(rep, 1) != 0;   /* unknown: assume alive */
	if (rep)
		freeReplyObject(rep);
	return alive;
}

/* Is the job somewhere it will run from (a queue, schedule, retry) or running? */
static int will_run(struct ctl *c, const char *jid)
{
	struct filter f = { .arg = jid };
	struct found fd = { 0 };
	int r = jobs_find(c, BIT(S_QUEUED) | BIT(S_SCHEDULED) | BIT(S_RETRY) | RUN_SETS, &f, 1,
	                  &fd);
	int n = r < 0 ? -1 : fd.n;
	jobs_found_free(&fd);
	return n;
}

static void json_run(struct sbuf *b, const char *jid, long long n, const long long *kept,
                     int nkept, const struct runrec *r, const struct text *text)
{
	sb_adds(b, "{\"jid\":");
	jstr(b, jid);
	sb_printf(b, ",\"run\":%lld,\"runs\":[", n);
	for (int i = 0; i < nkept; i++)
		sb_printf(b, "%s%lld", i ? "," : "", kept[i]);
	sb_adds(b, "],\"class\":");
	jstr(b, r->cls);
	sb_adds(b, ",\"queue\":");
	jstr(b, r->queue);
	sb_adds(b, ",\"identity\":");
	jstr(b, r->identity);
	sb_adds(b, ",\"started_at\":");
	jnum(b, r->started);
	sb_adds(b, ",\"finished_at\":");
	if (r->finished < 0)
		sb_adds(b, "null");
	else
		jnum(b, r->finished);
	sb_adds(b, ",\"outcome\":");
	jstr(b, r->outcome);
	sb_adds(b, ",\"error_class\":");
	jstr(b, r->error_class);
	sb_adds(b, ",\"error_message\":");
	jstr(b, r->error_message);
	sb_printf(b, ",\"bytes\":%llu,\"dropped\":%llu,\"output\":", r->bytes, r->dropped);
	if (text->s)
		jstrn(b, text->s, text->len);
	else
		sb_adds(b, "null");
	sb_addc(b, '}');
}

/* What one look at a followed run found. */
enum look_state { LOOK_RUNNING, LOOK_ENDED, LOOK_GONE, LOOK_DIED, LOOK_ERROR };
struct look {
	enum look_state state;
	unsigned long long skipped; /* bytes not kept between the last look and text */
	const char *text;           /* the output new since the last look (within t) */
	size_t len;
	struct runrec r;            /* the run's record (LOOK_ENDED: how it ended) */
	struct text t;
};

static void look_free(struct look *k)
{
	free(k->t.s);
	runrec_free(&k->r);
}

/*
 * Read run n of jid once and say what is new since *pos (advanced): its new output, and
 * whether it ended, is no longer kept, or was left unfinished by a process now gone
 * (checked every GONE_CHECK_EVERY, *next_check). --follow and the dashboard's stream both
 * loop over it.
 */
static enum look_state follow_look(struct ctl *c, const char *jid, long long n,
                                   unsigned long long *pos, double *next_check, struct look *k)
{
	memset(k, 0, sizeof *k);
	int got = read_run(c, jid, n, &k->r, &k->t);
	if (got <= 0)
		return k->state = got < 0 ? LOOK_ERROR : LOOK_GONE;
	unsigned long long have_from = k->r.dropped;
	if (*pos < have_from) {
		k->skipped = have_from - *pos;
		*pos = have_from;
	}
	if (*pos < have_from + k->t.len) {
		k->text = k->t.s + (*pos - have_from);
		k->len = (size_t)(have_from + k->t.len - *pos);
	}
	*pos = have_from + k->t.len;
	if (k->r.finished >= 0)
		return k->state = LOOK_ENDED;
	if (mono_now() >= *next_check) {
		*next_check = mono_now() + GONE_CHECK_EVERY;
		if (k->r.identity && !process_alive(c, k->r.identity))
			return k->state = LOOK_DIED;
	}
	return k->state = LOOK_RUNNING;
}

/* Print run n as it grows until it ends; the exit status. */
static int follow(struct ctl *c, const char *jid, long long n)
{
	unsigned long long pos = 0;
	double next_check = mono_now() + GONE_CHECK_EVERY;
	for (;;) {
		struct look k;
		enum look_state st = follow_look(c, jid, n, &pos, &next_check, &k);
		if (st == LOOK_ERROR || st == LOOK_GONE) {
			look_free(&k);
			if (st == LOOK_ERROR)
				return CTL_USAGE;
			ctl_error("run %lld of %s is no longer kept (expired, or trimmed by newer runs)",
			          n, jid);
			return CTL_NOTHING;
		}
		if (k.skipped)
			fprintf(stderr, "[… %llu bytes not kept …]\n", k.skipped);
		if (k.len)
			write_out(k.text, k.len);
		if (st == LOOK_ENDED)
			say_outcome(&k.r, n);
		else if (st == LOOK_DIED)
			ctl_error("process %s is gone: run %lld was left unfinished (its job is "
			          "recovered by another process)", k.r.identity, n);
		look_free(&k);
		if (st != LOOK_RUNNING)
			return st == LOOK_ENDED ? CTL_OK : CTL_NOTHING;
		sleep_seconds(FOLLOW_EVERY);
	}
}

/*
 * "Someone waits for this job's first run": the output writer keeps a run that succeeded
 * without printing only for a job that has runs kept or this mark (doc/protocol.md
 * §7.29), so a follower must set it before it first looks, and keep it while it waits.
 * And since a plain success asks about it only when its settled record held something
 * (§7.34), the follower marks that record too (never over an outcome: NX), for as long
 * as BATCH_PUSH's mark lasts. An error is left to the read that follows, which says it.
 */
static void mark_followed(struct ctl *c, const char *jid, int on)
{
	if (on) {
		redisReply *mark = rcmd(&c->r, "SET " K_SETTLED "%s " SETTLED_WAITED " NX EX "
		                        BATCH_KEEP_TTL, jid);
		if (mark)
			freeReplyObject(mark);
	}
	redisReply *rep = on ? rcmd(&c->r, "SET " K_OUTPUT "%s" K_FOLLOWED " 1 EX %d", jid,
	                            (int)GONE_CHECK_EVERY * 2)
	                     : rcmd(&c->r, "DEL " K_OUTPUT "%s" K_FOLLOWED, jid);
	if (rep)
		freeReplyObject(rep);
}

/* With --follow and no run kept yet: wait while the job is on its way (queued, scheduled,
 * retrying or running). The number of runs kept then, or -1 (said). */
static int wait_first_run(struct ctl *c, const char *jid, long long **kept)
{
	int nkept = 0, waiting = 0, gone = 0;
	double next_look = 0;
	while (nkept == 0 && !gone) {
		if (mono_now() >= next_look) {
			mark_followed(c, jid, 1);   /* renewed well within its TTL */
			int w = will_run(c, jid);
			if (w < 0)
				return -1;
			/* Gone: one more look, its run's record may be a moment behind it. */
			gone = w == 0;
			next_look = mono_now() + GONE_CHECK_EVERY;
		}
		if (!waiting++ && !gone)
			fprintf(stderr, "waiting for %s to start…\n", jid);
		sleep_seconds(FOLLOW_EVERY);
		free(*kept);
		if ((nkept = kept_runs(c, jid, kept)) < 0)
			return -1;
	}
	return nkept;
}

int jobs_log(struct ctl *c, const char *jid, long long want, int follow_it)
{
	long long *kept = NULL;
	if (follow_it)
		mark_followed(c, jid, 1);
	int nkept = kept_runs(c, jid, &kept);
	if (nkept == 0 && follow_it)
		nkept = wait_first_run(c, jid, &kept);
	if (follow_it)
		mark_followed(c, jid, 0);
	if (nkept < 0) {
		free(kept);
		return CTL_USAGE;
	}
	if (nkept == 0) {
		ctl_error("no output kept for %s (never run here, a short run that succeeded "
		          "without printing, output_keep = 0, or expired after output_ttl)", jid);
		free(kept);
		return CTL_NOTHING;
	}
	long long n = want > 0 ? want : kept[nkept - 1];
	struct runrec r;
	struct text text;
	int got = read_run(c, jid, n, &r, &text);
	if (got <= 0) {
		if (got == 0)
			ctl_error("run %lld of %s is not kept (kept: runs %lld to %lld)", n, jid,
			          kept[0], kept[nkept - 1]);
		free(kept);
		return got < 0 ? CTL_USAGE : CTL_NOTHING;
	}
	int status = CTL_OK;
	if (c->json) {
		struct sbuf b;
		sb_init(&b);
		json_run(&b, jid, n, kept, nkept, &r, &text);
		jprint(&b);
	} else if (follow_it) {
		say_header(jid, n, kept, nkept, &r);
		status = follow(c, jid, n);
	} else {
		say_header(jid, n, kept, nkept, &r);
		if (text.s)
			write_out(text.s, text.len);
		if (r.finished >= 0)
			say_outcome(&r, n);
		else
			fprintf(stderr, "run %lld is still running (--follow to watch it)\n", n);
	}
	free(text.s);
	runrec_free(&r);
	free(kept);
	return status;
}

/* ---- the dashboard's stream ---- */

static void event(struct sbuf *b, const char *name, const struct sbuf *data)
{
	sb_printf(b, "event: %s\ndata: %s\n\n", name, data->s);
}

static void run_event(struct sbuf *ev, long long n, const struct runrec *r)
{
	struct sbuf d;
	sb_init(&d);
	sb_printf(&d, "{\"run\":%lld,\"class\":", n);
	jstr(&d, r->cls);
	sb_adds(&d, ",\"identity\":");
	jstr(&d, r->identity);
	sb_adds(&d, ",\"started_at\":");
	jnum(&d, r->started);
	sb_printf(&d, ",\"dropped\":%llu}", r->dropped);
	event(ev, "run", &d);
	sb_free(&d);
}

static void end_event(struct sbuf *ev, const char *state, const struct runrec *r,
                      const char *message)
{
	struct sbuf d;
	sb_init(&d);
	sb_printf(&d, "{\"state\":\"%s\",\"message\":", state);
	jstr(&d, message);
	if (r && r->obj) {
		sb_adds(&d, ",\"outcome\":");
		jstr(&d, r->outcome);
		sb_adds(&d, ",\"error_class\":");
		jstr(&d, r->error_class);
		sb_adds(&d, ",\"error_message\":");
		jstr(&d, r->error_message);
		sb_adds(&d, ",\"finished_at\":");
		r->finished >= 0 ? jnum(&d, r->finished) : sb_adds(&d, "null");
	}
	sb_addc(&d, '}');
	event(ev, "end", &d);
	sb_free(&d);
}

/* The run to follow, once one is kept: the one asked for, else the newest. 0 while none
 * is; -1 when none will come (an "end" event is in ev). */
static long long first_run(struct ctl *c, struct follow_state *st, struct sbuf *ev)
{
	if (mono_now() >= st->next_check) {
		st->next_check = mono_now() + GONE_CHECK_EVERY;
		mark_followed(c, st->jid, 1);       /* renewed well within its TTL */
		st->on_its_way = will_run(c, st->jid);
	}
	long long *kept = NULL;
	int nkept = kept_runs(c, st->jid, &kept);
	long long n = nkept > 0 ? (st->run > 0 ? st->run : kept[nkept - 1]) : 0;
	free(kept);
	if (nkept < 0)
		return 0;
	if (n > 0) {
		mark_followed(c, st->jid, 0);
		return n;
	}
	if (st->on_its_way == 0) {
		mark_followed(c, st->jid, 0);
		end_event(ev, "none", NULL, "no output kept for this job, and it is not on its way "
		          "to a run (never run here, a short run that succeeded without printing, "
		          "output_keep = 0, or expired after output_ttl)");
		return -1;
	}
	if (!st->waiting_said++)
		sb_adds(ev, "event: waiting\ndata: {}\n\n");
	return 0;
}

int jobs_follow_events(struct ctl *c, struct follow_state *st, struct sbuf *ev)
{
	if (!st->following) {
		long long n = first_run(c, st, ev);
		if (n <= 0)
			return n < 0;
		st->run = n;
		st->following = 1;
		st->next_check = mono_now() + GONE_CHECK_EVERY;
	}
	struct look k;
	enum look_state s = follow_look(c, st->jid, st->run, &st->pos, &st->next_check, &k);
	if (s == LOOK_ERROR) {
		struct sbuf d;
		sb_init(&d);
		sb_adds(&d, "{\"error\":");
		jstr(&d, c->r.err[0] ? c->r.err : "Redis error");
		sb_printf(&d, ",\"unavailable\":%s}", c->r.unavailable ? "true" : "false");
		event(ev, "error", &d);
		sb_free(&d);
		look_free(&k);
		return 0;
	}
	if (!st->announced && k.r.obj) {
		run_event(ev, st->run, &k.r);
		st->announced = 1;
	}
	if (k.len || k.skipped) {
		struct sbuf d;
		sb_init(&d);
		sb_adds(&d, "{\"text\":");
		jstrn(&d, k.text ? k.text : "", k.len);
		sb_printf(&d, ",\"skipped\":%llu}", k.skipped);
		event(ev, "output", &d);
		sb_free(&d);
	}
	if (s == LOOK_GONE)
		end_event(ev, "gone", NULL, "this run is no longer kept (expired, or trimmed by newer "
		          "runs)");
	else if (s == LOOK_ENDED)
		end_event(ev, "ended", &k.r, NULL);
	else if (s == LOOK_DIED)
		end_event(ev, "died", &k.r, "its process is gone: the run was left unfinished (its "
		          "job is recovered by another process)");
	look_free(&k);
	return s != LOOK_RUNNING;
}

/* ---- cancel ---- */

/* The newest attempt entry of jid, if it says Cogworker::Cancelled from since on:
 * its outcome (malloc'd), else NULL. */
static char *cancelled_outcome(struct ctl *c, const char *jid, double since)
{
	redisReply *rep = rcmd(&c->r, "LINDEX " K_ATTEMPTS "%s -1", jid);
	char *out = NULL;
	if (rep && rep->type == REDIS_REPLY_STRING) {
		cJSON *a = job_json_parse(rep->str, rep->len);
		const char *ec = a ? str_of(a, "error_class") : NULL;
		const char *oc = a ? str_of(a, "outcome") : NULL;
		if (ec && strcmp(ec, JOB_CANCELLED) == 0 && num_of(a, "failed_at", 0) >= since)
			out = xstrdup(oc ? oc : "dead");
		if (a)
			cJSON_Delete(a);
	}
	if (rep)
		freeReplyObject(rep);
	return out;
}

/* Is jid still running on identity (its workers hash, or its in-progress list, which
 * it leaves when settled)? -1 on a Redis error (said). */
static int runs_on(struct ctl *c, const char *jid, const char *identity)
{
	struct filter f = { .arg = jid };
	struct found fd = { 0 };
	if (jobs_find(c, RUN_SETS, &f, 0, &fd) < 0) {
		jobs_found_free(&fd);
		return -1;
	}
	int on = 0;
	for (int i = 0; i < fd.n; i++)
		on |= strcmp(fd.v[i].process, identity) == 0;
	jobs_found_free(&fd);
	return on;
}

static void json_cancel(struct ctl *c, const char *jid, const char *identity, int cancelled,
                        const char *outcome, const char *why)
{
	if (!c->json)
		return;
	struct sbuf b;
	sb_init(&b);
	sb_adds(&b, "{\"jid\":");
	jstr(&b, jid);
	sb_adds(&b, ",\"process\":");
	jstr(&b, identity);
	sb_printf(&b, ",\"cancelled\":%s,\"outcome\":", cancelled ? "true" : "false");
	jstr(&b, outcome);
	sb_adds(&b, ",\"reason\":");
	jstr(&b, why);
	sb_addc(&b, '}');
	jprint(&b);
}

/* Not running: say where it is; a job that is dead as Cogworker::Cancelled was already
 * cancelled, and saying so answers the second of two cancels. */
static int not_running(struct ctl *c, const char *jid, const struct found *fd)
{
	const struct entry *e = fd->n ? &fd->v[0] : NULL;
	const char *ec = e ? jobs_string_member(e, "error_class") : NULL;
	int cancelled = e && e->set == S_DEAD && ec && strcmp(ec, JOB_CANCELLED) == 0;
	if (cancelled)
		ctl_error("%s was already cancelled: it is not running (it is in dead)", jid);
	else if (e)
		ctl_error("%s is not running (it is in %s)", jid, jobs_set_names[e->set]);
	else
		ctl_error("%s is not running (no such job in queues, scheduled, retry, dead or "
		          "running)", jid);
	json_cancel(c, jid, NULL, 0, NULL, cancelled ? "already cancelled" : "not running");
	return CTL_NOTHING;
}

/*
 * Claim the cancel of jid for this command: 1 claimed (token set), 0 another one's under
 * way, -1 on a Redis error (said). The claim outlives the longest wait, and is given back
 * owner-checked when the wait ends, so a cancel that a process ignored can be tried again.
 */
static int claim_cancel(struct ctl *c, const char *key, const char *token, double wait)
{
	redisReply *rep = rcmd(&c->r, "SET %s %s NX EX %ld", key, token, (long)ceil(wait) + 5);
	if (!rep) {
		ctl_redis_error(c, key);
		return -1;
	}
	int claimed = rep->type == REDIS_REPLY_STATUS;
	freeReplyObject(rep);
	return claimed;
}

/* Ask identity to cancel jid: 1 received, 0 nobody listens (said), -1 error (said). */
static int send_cancel(struct ctl *c, const char *jid, const char *identity, int discard)
{
	char *msg = xasprintf("cancel %s%s", jid, discard ? " discard" : "");
	redisReply *rep = rcmd(&c->r, "PUBLISH " K_SIGNAL "%s %s", identity, msg);
	free(msg);
	if (!rep) {
		ctl_redis_error(c, "PUBLISH");
		return -1;
	}
	long long receivers = reply_integer(rep, 0);
	freeReplyObject(rep);
	if (receivers == 0)
		ctl_error("%s runs on %s, which did not receive the cancel (not listening)", jid,
		          identity);
	return receivers > 0;
}

/* Wait up to wait seconds for jid to leave identity: 0 gone, 1 still there, -1 error. */
static int wait_gone(struct ctl *c, const char *jid, const char *identity, double wait)
{
	double deadline = mono_now() + wait;
	int on;
	while ((on = runs_on(c, jid, identity)) == 1 && mono_now() < deadline)
		sleep_seconds(0.2);
	return on;
}

/* What became of the run once it left (or not) its process; mine: this command sent the
 * cancel. The exit status, the reason for --json in *why and the outcome in *outcome. */
static int judge_cancel(struct ctl *c, const char *jid, const char *identity, int mine,
                        int on, double since, double wait, char **outcome, const char **why)
{
	*outcome = on ? NULL : cancelled_outcome(c, jid, since);
	if (on) {
		ctl_error("%s still runs on %s after %gs: %s", jid, identity, wait, mine
		          ? "that process did not act on the cancel (a cogworker Ruby process "
		            "ignores it)" : "another jobs cancel of it is under way");
		*why = mine ? "ignored" : "cancel under way";
	} else if (*outcome && mine) {
		if (!c->json)
			printf("cancelled %s on %s: %s\n", jid, identity, *outcome);
		return CTL_OK;
	} else if (*outcome) {
		ctl_error("%s was already cancelled (by another jobs cancel): %s", jid, *outcome);
		*why = "already cancelled";
	} else {
		ctl_error("%s finished on its own before the cancel took effect", jid);
		*why = "finished first";
	}
	return CTL_NOTHING;
}

int jobs_cancel(struct ctl *c, const char *jid, int discard)
{
	struct filter f = { .arg = jid };
	struct found fd = { 0 };
	if (jobs_find(c, BIT(S_QUEUED) | ZSETS | RUN_SETS, &f, 1, &fd) < 0) {
		jobs_found_free(&fd);
		return CTL_USAGE;
	}
	/* The workers entry first; a job started under a second ago has only its in-progress
	 * entry (RUN_SETS), which names the process to ask all the same. */
	const struct entry *run = NULL;
	for (int i = 0; i < fd.n && !run; i++)
		if (fd.v[i].set == S_RUNNING)
			run = &fd.v[i];
	for (int i = 0; i < fd.n && !run; i++)
		if (fd.v[i].set == S_INPROGRESS)
			run = &fd.v[i];
	if (!run) {
		int st = not_running(c, jid, &fd);
		jobs_found_free(&fd);
		return st;
	}
	char *identity = xstrdup(run->process), *cls = xstrdup(jobs_entry_class(run));
	jobs_found_free(&fd);
	int status = jobs_cancel_on(c, jid, identity, cls, discard);
	free(identity);
	free(cls);
	return status;
}

int jobs_cancel_on(struct ctl *c, const char *jid, const char *identity, const char *cls,
                   int discard)
{
	const struct handler *h = conf_find_handler(&c->conf, cls);
	double wait = (h ? h->kill_grace : 10.0) + CANCEL_MARGIN;
	double now = ctl_now(c);
	if (now < 0)
		return ctl_redis_error(c, "TIME");
	double since = floor(now) - 1;  /* failed_at is the daemon's clock: allow a little skew */
	char token[25], *key = xstrcat2(K_CANCEL, jid), *outcome = NULL;
	const char *why = NULL;
	int status = CTL_USAGE, sent = 1;
	new_jid(token);
	int mine = claim_cancel(c, key, token, wait);
	if (mine < 0)
		goto out;
	if (mine && (sent = send_cancel(c, jid, identity, discard)) <= 0) {
		status = sent == 0 ? CTL_NOTHING : CTL_USAGE;
		why = "not received";
		goto release;
	}
	int on = wait_gone(c, jid, identity, wait);
	if (on >= 0)
		status = judge_cancel(c, jid, identity, mine, on, since, wait, &outcome, &why);
release:
	if (mine && owned_delete(&c->r, key, token) < 0)
		ctl_error("warning: %s not deleted (it expires in %lds): %s", key,
		          (long)ceil(wait) + 5, c->r.err);
	if (status != CTL_USAGE)
		json_cancel(c, jid, identity, status == CTL_OK, outcome, why);
out:
	free(outcome);
	free(key);
	return status;
}

/* ---- the command line ---- */

int jobs_run_command(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "run", required_argument, NULL, 'r' },
		{ "follow", no_argument, NULL, 'f' },
		{ "discard", no_argument, NULL, 'd' },
		CTL_COMMON_OPTS,
		{ 0, 0, 0, 0 },
	};
	long long run = 0;
	int follow_it = 0, discard = 0, ch;
	ctl_getopt_reset();
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 'r': {
			char *end;
			run = strtoll(optarg, &end, 10);
			if (*end || end == optarg || run < 1) {
				ctl_error("jobs log: --run wants a run number (1, 2, …), not \"%s\"", optarg);
				return CTL_USAGE;
			}
			break;
		}
		case 'f': follow_it = 1; break;
		case 'd': discard = 1; break;
		default:
			if (!ctl_common_opt(c, ch, argv))
				return CTL_USAGE;
		}
	}
	int nargs = argc - optind;
	char **args = argv + optind;
	int is_log = nargs > 0 && strcmp(args[0], "log") == 0;
	if (nargs != 2 || (is_log && discard) || (!is_log && (run || follow_it))) {
		ctl_error(is_log ? "usage: cogworkerctl jobs log JID [--run N] [--follow]"
		                 : "usage: cogworkerctl jobs cancel JID [--discard]");
		return CTL_USAGE;
	}
	if (is_log && follow_it && c->json) {
		ctl_error("jobs log: --follow prints as it goes; it has no --json form");
		return CTL_USAGE;
	}
	if (ctl_connect(c) != 0)
		return CTL_USAGE;
	return is_log ? jobs_log(c, args[1], run, follow_it) : jobs_cancel(c, args[1], discard);
}
