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
#include <stdlib.h>
#include <string.h>
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

static const struct route routes[] = {
	{ "GET", { "stats" }, get_stats },
	{ "GET", { "queues" }, get_queues },
	{ "POST", { "queues", "*", "*" }, post_queue },
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

int web_api_is_action(const char *method)
{
	return strcmp(method, "POST") == 0;
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

/* ---- output streams: filled in with the job pages ---- */

int web_follow_step(struct web_follow *f, struct sbuf *b)
{
	(void)f;
	sb_adds(b, "event: end\ndata: {}\n\n");
	return 1;
}
