/* SPDX-License-Identifier: MIT */
/*
 * web_api.c: the JSON API of `cogworkerctl web` (doc/protocol.md §7.33), which the pages
 * use and scripts may too. Each route runs the code of the cogworkerctl command that does
 * the same thing, with a capture (ctl.h) in place of stdout and stderr, so an answer is
 * that command's --json document, field for field, and there is one implementation of
 * each read and each action:
 *
 *   exit 0   200 and the document
 *   exit 1   GET: 404; POST: 409 (nothing done, e.g. a queue already paused);
 *            {"error": the command's message, "result": the document or null}
 *   exit 2   503 {"error", "unavailable": true} while Redis is away (the page shows a
 *            banner and tries again), else 400 {"error"} for a bad request or a Redis error
 *
 * Reads stay bounded (doc/design.md "The web dashboard"): no KEYS and no SCAN of the
 * keyspace (the queue list is the queues and paused sets), and no read of a whole job set:
 * lists are pages by index (ZRANGE / LRANGE offsets).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "ctl/jobs_act.h"
#include "ctl/jobs_show.h"
#include "exporter.h"
#include "web.h"

typedef int (*route_fn)(struct ctl *c, struct web_req *q, struct web_reply *r);

struct route {
	const char *method;
	const char *pat[4];         /* segments after /api; "*" takes any one */
	route_fn fn;
};

static const char *seg(const struct web_req *q, int i)
{
	return i < q->path.n ? q->path.seg[i] : NULL;
}

/* ---- the routes ---- */

#define PAGE_MAX 200            /* entries of a page at most */
#define PAGE_BUDGET 5000        /* entries a filtered page reads at most */
#define SEARCH_BUDGET 10000     /* entries of each set a search for a jid reads at most */
#define WAITING_MAX 500         /* jobs waiting for a slot listed per class at most */

/* A whole number from the query, within [lo, hi], else dflt. */
static long qnum(const struct form *f, const char *name, long dflt, long lo, long hi)
{
	const char *v = form_get(f, name, NULL);
	if (!v || !*v)
		return dflt;
	char *end;
	long n = strtol(v, &end, 10);
	return *end || n < lo || n > hi ? dflt : n;
}

/* A query field, NULL when absent or empty. */
static const char *qstr(const struct form *f, const char *name)
{
	const char *v = form_get(f, name, NULL);
	return v && *v ? v : NULL;
}

static int set_of(const char *name)
{
	for (int s = 0; s < S_COUNT; s++)
		if (s != S_INPROGRESS && s != S_GROUP && strcmp(jobs_set_names[s], name) == 0)
			return s;
	return -1;
}

static int get_stats(struct ctl *c, struct web_req *q, struct web_reply *r)
{
	(void)q;
	(void)r;
	return ctl_stats(c);
}

static int get_queues(struct ctl *c, struct web_req *q, struct web_reply *r)
{
	(void)q;
	(void)r;
	return ctl_queues_list(c, 0);
}

static int post_queue(struct ctl *c, struct web_req *q, struct web_reply *r)
{
	(void)r;
	const char *name = seg(q, 1), *act = seg(q, 2);
	if (!ctl_queue_name_ok("queues", name))
		return CTL_USAGE;
	if (strcmp(act, "pause") == 0 || strcmp(act, "resume") == 0)
		return ctl_queue_pause(c, name, act[0] == 'p');
	if (strcmp(act, "clear") == 0)
		return ctl_queue_clear(c, name);
	ctl_error("no action %s on a queue (pause, resume, clear)", act);
	return CTL_USAGE;
}

/* The jobs waiting for a fleet slot or a rate window (doc/protocol.md §7.30): per class of
 * cogworker:limits, the jids in its waiters set with their next try, which is also their
 * score in the schedule set (ADMIT puts both), so each links to its entry. */
static int get_waiting(struct ctl *c, struct web_req *q, struct web_reply *r)
{
	(void)q;
	(void)r;
	double now = ctl_now(c);
	if (now < 0)
		return ctl_redis_error(c, "TIME");
	redisReply *cls = rcmd(&c->r, "HKEYS " K_LIMITS);
	if (!cls)
		return ctl_redis_error(c, K_LIMITS);
	struct rpipe p;
	rpipe_begin(&c->r, &p);
	for (size_t i = 0; i < cls->elements; i++) {
		const redisReply *k = cls->element[i];
		rpipe_add(&c->r, &p, "ZCOUNT " K_WAITERS "%b %f +inf", k->str, k->len, now - 60);
		rpipe_add(&c->r, &p, "ZRANGEBYSCORE " K_WAITERS "%b %f +inf WITHSCORES LIMIT 0 %d",
		          k->str, k->len, now - 60, WAITING_MAX);
	}
	redisReply **reps = xcalloc((size_t)p.n + 1, sizeof *reps);
	int failed = rpipe_exec(&c->r, &p, reps);
	struct sbuf b;
	sb_init(&b);
	sb_adds(&b, "{\"classes\":[");
	for (size_t i = 0; i < cls->elements && !failed; i++) {
		const redisReply *count = reps[2 * i], *w = reps[2 * i + 1];
		sb_adds(&b, i ? ",{\"class\":" : "{\"class\":");
		jstrn(&b, cls->element[i]->str, cls->element[i]->len);
		sb_printf(&b, ",\"waiting\":%lld,\"jobs\":[", reply_integer(count, 0));
		for (size_t k = 0; k + 1 < w->elements; k += 2) {
			sb_adds(&b, k ? ",{\"jid\":" : "{\"jid\":");
			jstrn(&b, w->element[k]->str, w->element[k]->len);
			sb_adds(&b, ",\"next_try\":");
			jnum(&b, strtod(w->element[k + 1]->str, NULL));
			sb_addc(&b, '}');
		}
		sb_adds(&b, "]}");
	}
	sb_adds(&b, "]}");
	for (int i = 0; i < p.n; i++)
		if (reps[i])
			freeReplyObject(reps[i]);
	free(reps);
	freeReplyObject(cls);
	if (failed) {
		sb_free(&b);
		return ctl_redis_error(c, K_WAITERS);
	}
	jprint(&b);
	return CTL_OK;
}

/* GET /api/jobs/<set>: a page by index; GET /api/jobs/<jid>: the job. */
static int get_jobs(struct ctl *c, struct web_req *q, struct web_reply *r)
{
	const char *arg = seg(q, 1);
	if (strcmp(arg, "waiting") == 0)
		return get_waiting(c, q, r);
	int set = set_of(arg);
	if (set >= 0) {
		struct filter f = { .queue = qstr(&q->query, "queue"), .cls = qstr(&q->query, "class"),
		                    .text = qstr(&q->query, "q") };
		long from = qnum(&q->query, "from", 0, 0, 1L << 40);
		int limit = (int)qnum(&q->query, "limit", 50, 1, PAGE_MAX);
		return jobs_list_page(c, set, &f, from, limit, PAGE_BUDGET);
	}
	const char *hint = qstr(&q->query, "set");
	const char *score = qstr(&q->query, "score");
	struct show_at at = { .set = hint ? set_of(hint) : -1 };
	if (at.set >= 0 && jobs_zset_keys[at.set] && score)
		at.score = strtod(score, NULL);
	else
		at.set = -1;
	return jobs_show(c, arg, 1, at.set >= 0 ? &at : NULL);
}

static int action_of(const char *name)
{
	static const char *const names[] = { "retry", "delete", "kill", "reschedule" };
	for (int a = 0; a < 4; a++)
		if (strcmp(names[a], name) == 0)
			return a;
	return -1;
}

/* POST /api/jobs/<set>/<action>: entry=<member>… (as listed), or jid=<jid>… for entries
 * listed truncated (jobs_cut.c: found by their jid in that set), or all=1 with the filters;
 * POST /api/jobs/<jid>/cancel [discard=1]. */
static int post_jobs(struct ctl *c, struct web_req *q, struct web_reply *r)
{
	(void)r;
	const char *what = seg(q, 2);
	int set = set_of(seg(q, 1)), a = action_of(what);
	const struct form *b = &q->body;
	if (set < 0 && strcmp(what, "cancel") == 0) {
		const char *d = form_get(b, "discard", NULL);
		return jobs_cancel(c, seg(q, 1), d && strcmp(d, "1") == 0);
	}
	if (set < 0 || a < 0) {
		ctl_error("no such action: POST /api/jobs/SET/ACTION (retry, delete, kill, "
		          "reschedule) or /api/jobs/JID/cancel");
		return CTL_USAGE;
	}
	double minutes = 0;
	if (a == A_RESCHEDULE) {
		minutes = (double)qnum(b, "minutes", 0, 1, 10080);
		if (minutes < 1) {
			ctl_error("reschedule: minutes must be a whole number from 1 to 10080 (a week)");
			return CTL_USAGE;
		}
	}
	const char *all = form_get(b, "all", NULL);
	struct filter f = { .queue = qstr(b, "queue"), .cls = qstr(b, "class"), .text = qstr(b, "q") };
	if (all && strcmp(all, "1") == 0) {
		if (a == A_RESCHEDULE) {
			ctl_error("reschedule works on chosen entries, not all");
			return CTL_USAGE;
		}
		/* An explicit action on all that match: the whole set is its scope. */
		c->scan_budget = 0;
		return jobs_act_on_all(c, (enum action)a, set, &f, 0);
	}
	int n = 0, njids = 0;
	char **raws = xcalloc((size_t)b->n + 1, sizeof *raws);
	char **jids = xcalloc((size_t)b->n + 1, sizeof *jids);
	size_t *lens = xcalloc((size_t)b->n + 1, sizeof *lens);
	for (int i = 0; i < b->n; i++)
		if (strcmp(b->names[i], "entry") == 0) {
			raws[n] = b->values[i];
			lens[n++] = b->lens[i];
		} else if (strcmp(b->names[i], "jid") == 0) {
			jids[njids++] = b->values[i];
		}
	int st = n || !njids
	         ? jobs_act_on_members(c, (enum action)a, set, f.queue, n, raws, lens, minutes)
	         : jobs_act_on_args(c, (enum action)a, BIT(set), &f, njids, jids, minutes, 0);
	free(jids);
	free(raws);
	free(lens);
	return st;
}

static int get_output(struct ctl *c, struct web_req *q, struct web_reply *r)
{
	long long run = qnum(&q->query, "run", 0, 1, 1L << 40);
	if (q->path.n == 4) {
		if (strcmp(seg(q, 3), "stream") != 0) {
			ctl_error("no such route");
			return CTL_USAGE;
		}
		r->stream = 1;
		r->stream_jid = xstrdup(seg(q, 1));
		r->stream_run = run;
		return CTL_OK;
	}
	return jobs_log(c, seg(q, 1), run, 0);
}

static int get_processes(struct ctl *c, struct web_req *q, struct web_reply *r)
{
	(void)q;
	(void)r;
	return ctl_processes_list(c);
}

static int post_process(struct ctl *c, struct web_req *q, struct web_reply *r)
{
	(void)r;
	const char *act = seg(q, 2);
	if (strcmp(act, "quiet") && strcmp(act, "resume") && strcmp(act, "stop")) {
		ctl_error("no action %s on a process (quiet, resume, stop)", act);
		return CTL_USAGE;
	}
	char *id = (char *)seg(q, 1);
	return ctl_processes_signal(c, act, 0, 1, &id);
}

static int get_periodic(struct ctl *c, struct web_req *q, struct web_reply *r)
{
	(void)q;
	(void)r;
	return ctl_periodic_list(c);
}

static int post_periodic(struct ctl *c, struct web_req *q, struct web_reply *r)
{
	(void)r;
	return ctl_periodic_act(c, seg(q, 2), seg(q, 1));
}

static int get_limits(struct ctl *c, struct web_req *q, struct web_reply *r)
{
	(void)q;
	(void)r;
	return ctl_limits(c);
}

/* GET /api/groups[?class=C]: the fair-share groups with jobs set aside (doc/protocol.md
 * §7.35), as `groups --json` lists them, less the groups whose jobs all run (found only by
 * a SCAN of the keyspace). */
static int get_groups(struct ctl *c, struct web_req *q, struct web_reply *r)
{
	(void)r;
	return ctl_groups(c, qstr(&q->query, "class"), 0);
}

static int get_history(struct ctl *c, struct web_req *q, struct web_reply *r)
{
	(void)r;
	const char *status = qstr(&q->query, "status");
	if (status && strcmp(status, "success") && strcmp(status, "failed")) {
		ctl_error("status is success or failed");
		return CTL_USAGE;
	}
	long days = qnum(&q->query, "days", 14, 1, 31);
	double now = ctl_now(c);
	if (now < 0)
		return ctl_redis_error(c, "TIME");
	return ctl_history(c, qstr(&q->query, "class"), status, NAN,
	                   qnum(&q->query, "from", 0, 0, 1L << 40),
	                   qnum(&q->query, "limit", 50, 1, PAGE_MAX), PAGE_BUDGET,
	                   now - (double)(days - 1) * 86400.0);
}

/* GET /api/batches: a page by index, filtered by state and description (q); GET
 * /api/batches/<bid>: the batch. */
static int get_batches(struct ctl *c, struct web_req *q, struct web_reply *r)
{
	(void)r;
	if (q->path.n == 2)
		return ctl_batch_show(c, seg(q, 1));
	struct batch_filter f = { .state = qstr(&q->query, "state"), .text = qstr(&q->query, "q") };
	if (f.state && !ctl_batch_state_ok(f.state)) {
		ctl_error("state is open, committed, complete, cancelled or expired, not \"%s\"",
		          f.state);
		return CTL_USAGE;
	}
	return ctl_batch_list(c, qnum(&q->query, "from", 0, 0, 1L << 40),
	                      (int)qnum(&q->query, "limit", 50, 1, PAGE_MAX), 1, &f, PAGE_BUDGET);
}

/* POST /api/batches/<bid>/cancel (c->yes: the page asked). */
static int post_batch(struct ctl *c, struct web_req *q, struct web_reply *r)
{
	(void)r;
	if (strcmp(seg(q, 2), "cancel") != 0) {
		ctl_error("no action %s on a batch (cancel)", seg(q, 2));
		return CTL_USAGE;
	}
	return ctl_batch_cancel(c, seg(q, 1));
}

/* The eight metrics of cogworker's exposition, as `cogworkerctl metrics` prints them. */
static int get_metrics(struct ctl *c, struct web_req *q, struct web_reply *r)
{
	(void)q;
	const char *what = NULL;
	if (exporter_render(&c->r, &r->body, &what) != 0)
		return ctl_redis_error(c, what && *what ? what : "metrics");
	r->type = EXPORTER_CONTENT_TYPE;
	return CTL_OK;
}

static const struct route routes[] = {
	{ "GET", { "stats" }, get_stats },
	{ "GET", { "queues" }, get_queues },
	{ "POST", { "queues", "*", "*" }, post_queue },
	{ "GET", { "jobs", "*" }, get_jobs },
	{ "POST", { "jobs", "*", "*" }, post_jobs },
	{ "GET", { "jobs", "*", "output" }, get_output },
	{ "GET", { "jobs", "*", "output", "stream" }, get_output },
	{ "GET", { "processes" }, get_processes },
	{ "POST", { "processes", "*", "*" }, post_process },
	{ "GET", { "periodic" }, get_periodic },
	{ "POST", { "periodic", "*", "*" }, post_periodic },
	{ "GET", { "limits" }, get_limits },
	{ "GET", { "groups" }, get_groups },
	{ "GET", { "history" }, get_history },
	{ "GET", { "metrics" }, get_metrics },
	{ "GET", { "batches" }, get_batches },
	{ "GET", { "batches", "*" }, get_batches },
	{ "POST", { "batches", "*", "*" }, post_batch },
	{ NULL, { NULL }, NULL },
};

/* ---- dispatch ---- */

static int matches(const struct route *rt, const struct web_req *q)
{
	int n = 0;
	while (n < 4 && rt->pat[n])
		n++;
	if (n != q->path.n)
		return 0;
	for (int i = 0; i < n; i++)
		if (strcmp(rt->pat[i], "*") != 0 && strcmp(rt->pat[i], q->path.seg[i]) != 0)
			return 0;
	return 1;
}

static void error_body(struct sbuf *b, const char *msg, int unavailable, const struct sbuf *doc)
{
	sb_adds(b, "{\"error\":");
	jstr(b, msg && *msg ? msg : "failed");
	if (unavailable)
		sb_adds(b, ",\"unavailable\":true");
	if (doc) {
		sb_adds(b, ",\"result\":");
		if (doc->len)
			sb_add(b, doc->s, doc->len);
		else
			sb_adds(b, "null");
	}
	sb_addc(b, '}');
}

void web_api(struct web_req *q, struct web_reply *r)
{
	const char *method = strcmp(q->method, "HEAD") == 0 ? "GET" : q->method;
	const struct route *rt = NULL;
	int other_method = 0;
	for (const struct route *x = routes; x->method && !rt; x++)
		if (matches(x, q)) {
			if (strcmp(x->method, method) == 0)
				rt = x;
			else
				other_method = 1;
		}
	if (!rt) {
		r->status = other_method ? 405 : 404;
		error_body(&r->body, other_method ? "method not allowed" : "no such API route", 0,
		           NULL);
		return;
	}
	struct web_ctx *x = web_ctx_take();
	if (!x) {
		r->status = 503;
		error_body(&r->body, "every Redis connection of the dashboard is busy: try again", 0,
		           NULL);
		return;
	}
	struct ctl_capture cap;
	ctl_capture_begin(&cap);
	x->c.scan_budget = SEARCH_BUDGET;
	int status = ctl_connect(&x->c) != 0 ? CTL_USAGE : rt->fn(&x->c, q, r);
	int unavailable = status == CTL_USAGE && x->c.r.unavailable;
	ctl_capture_end(&cap);
	web_ctx_give(x);
	if (r->stream && status == CTL_OK) {
		ctl_capture_free(&cap);
		return;
	}
	r->stream = 0;
	if (status == CTL_OK) {
		r->status = 200;
		if (cap.out.len)
			sb_add(&r->body, cap.out.s, cap.out.len);
		else if (!r->body.len)
			sb_adds(&r->body, "{}");
	} else if (status == CTL_NOTHING) {
		r->status = strcmp(method, "GET") == 0 ? 404 : 409;
		r->body.len = 0;
		error_body(&r->body, cap.err.s, 0, &cap.out);
	} else {
		r->status = unavailable ? 503 : 400;
		r->body.len = 0;
		error_body(&r->body, cap.err.s, unavailable, NULL);
	}
	ctl_capture_free(&cap);
}

/* ---- output streams ---- */

#define STREAM_EVERY 0.5        /* seconds between two looks, as jobs log --follow */

int web_follow_step(struct web_follow *f, struct sbuf *b)
{
	if (f->looked++)
		sleep_seconds(STREAM_EVERY);
	f->st.jid = f->jid;
	struct web_ctx *x = web_ctx_take();
	int ended = 0;
	if (x) {
		struct ctl_capture cap;
		ctl_capture_begin(&cap);
		x->c.scan_budget = SEARCH_BUDGET;
		if (ctl_connect(&x->c) == 0) {
			ended = jobs_follow_events(&x->c, &f->st, b);
		} else {
			sb_adds(b, "event: error\ndata: {\"error\":");
			jstr(b, x->c.r.err);
			sb_adds(b, ",\"unavailable\":true}\n\n");
		}
		ctl_capture_free(&cap);
		web_ctx_give(x);
	}
	/* A comment line when nothing else goes out, so a reader that left is noticed at the
	 * next write and its thread ends. */
	if (!b->len)
		sb_adds(b, ":\n\n");
	return ended;
}
