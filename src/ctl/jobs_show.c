/* SPDX-License-Identifier: MIT */
/*
 * jobs_show.c: `jobs list` and `jobs show`, for people (a table; one job in detail) and
 * for programs (--json).
 *
 * `show` gathers everything known about one jid: every place it is found (a jid can sit
 * in more than one set at once), its status hash (status bookkeeping, which outlives the
 * job), its attempts log, and the records of its runs kept with their output (§7.29): how
 * each ended and what it cost (usage.h), which is where a finished job's cost is found
 * when neither status nor history is on. Output never rewrites a payload: --json carries the raw
 * member as a string, and as JSON only when it is valid JSON; the human forms print it
 * on one line, control characters as spaces.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "grouplimits.h"
#include "jobs_cut.h"
#include "jobs_find.h"
#include "jobs_history.h"
#include "jobs_show.h"
#include "json.h"
#include "usage.h"
#include "workflow.h"

/* ---- output of entries ---- */

static void member_raw(struct sbuf *b, const struct entry *e, const char *name)
{
	size_t s, l;
	const char *t = e->size ? e->summary : e->raw;      /* cut: its summary (jobs_cut.c) */
	if (e->j.obj && json_member_span(t, e->size ? e->summary_len : e->raw_len, name, &s, &l) == 0)
		sb_add(b, t + s, l);
	else
		sb_adds(b, "null");
}

static void entry_json(struct sbuf *b, const struct entry *e, int with_payload)
{
	sb_printf(b, "{\"set\":\"%s\",\"key\":", jobs_set_names[e->set]);
	jstr(b, e->key);
	sb_adds(b, ",\"jid\":");
	jstr(b, e->j.obj ? e->j.jid : NULL);
	sb_adds(b, ",\"class\":");
	jstr(b, jobs_entry_class(e));
	sb_adds(b, ",\"queue\":");
	jstr(b, jobs_payload_queue(e));
	sb_adds(b, ",\"args\":");
	if (e->j.obj && (!e->size || jobs_entry_has(e, "args")))
		sb_adds(b, e->j.args_json);
	else
		sb_adds(b, "null");
	sb_adds(b, ",\"score\":");
	e->has_score ? jnum(b, e->score) : sb_adds(b, "null");
	static const char *const raw_fields[] = { "retry", "retry_count", "created_at",
	                                          "enqueued_at", "at", "failed_at" };
	for (size_t i = 0; i < sizeof raw_fields / sizeof *raw_fields; i++) {
		sb_printf(b, ",\"%s\":", raw_fields[i]);
		member_raw(b, e, raw_fields[i]);
	}
	sb_adds(b, ",\"error_class\":");
	jstr(b, jobs_string_member(e, "error_class"));
	sb_adds(b, ",\"error_message\":");
	jstr(b, jobs_string_member(e, "error_message"));
	if (e->set == S_RUNNING || e->set == S_WAITING || e->set == S_INPROGRESS) {
		sb_adds(b, ",\"process\":");
		jstr(b, e->process);
	}
	if (e->set == S_RUNNING)
		sb_printf(b, ",\"run_at\":%lld", e->run_at);
	if (e->set == S_AFTER) {
		sb_adds(b, ",\"waiting_since\":");
		jnum(b, e->since);
	}
	if (e->set == S_WAITING) {
		sb_adds(b, ",\"handler\":");
		jstr(b, e->handler);
		sb_printf(b, ",\"limit\":%d,\"waiting_since\":", e->limit);
		jnum(b, e->since);
	}
	if (!e->j.obj) {
		sb_adds(b, ",\"parse_error\":");
		jstr(b, e->j.parse_error);
	}
	sb_adds(b, ",\"raw\":");
	jstrn(b, e->raw, e->raw_len);
	if (e->size)            /* raw is its first bytes only */
		sb_printf(b, ",\"truncated\":true,\"size\":%zu", e->size);
	if (with_payload) {
		sb_adds(b, ",\"payload\":");
		if (json_valid(e->raw, e->raw_len))
			sb_add(b, e->raw, e->raw_len);
		else
			sb_adds(b, "null");
	}
	sb_addc(b, '}');
}

static double number_member(const struct entry *e, const char *name)
{
	const cJSON *v = e->j.obj ? cJSON_GetObjectItemCaseSensitive(e->j.obj, name) : NULL;
	return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* The "when" of an entry for people. */
static void entry_when(const struct entry *e, double now, char *out, size_t n)
{
	char rel[48];
	double t = NAN;
	const char *pre = "";
	switch (e->set) {
	case S_SCHEDULED: case S_RETRY: case S_DEAD:
		t = e->score;
		break;
	case S_RUNNING:
		t = (double)e->run_at;
		pre = "started ";
		break;
	case S_WAITING: case S_AFTER:
		t = e->since;
		pre = "waiting since ";
		break;
	default:
		t = number_member(e, "enqueued_at");
		if (isnan(t))
			t = number_member(e, "created_at");
		break;
	}
	if (isnan(t) || t <= 0) {
		snprintf(out, n, "-");
		return;
	}
	ctl_relative(t, now, rel, sizeof rel);
	snprintf(out, n, "%s%s", pre, rel);
}

static char *entry_error(const struct entry *e)
{
	const char *ec = jobs_string_member(e, "error_class");
	const char *em = jobs_string_member(e, "error_message");
	if (!e->j.obj)
		return xstrdup(e->j.parse_error ? e->j.parse_error : "not a JSON object");
	if (!ec && !em)
		return xstrdup("");
	return xasprintf("%s%s%s", ec ? ec : "", ec && em ? ": " : "", em ? em : "");
}

/* The args shown of an entry: a cut one's size when its args were not read. */
static const char *cut_args(const struct entry *e, const char *args, char *buf, size_t n)
{
	if (!e->size || jobs_entry_has(e, "args"))
		return args;
	snprintf(buf, n, "(truncated: a job of %zu bytes)", e->size);
	return buf;
}

/* ---- jobs list ---- */

int jobs_list(struct ctl *c, unsigned sets, const struct filter *f, int limit)
{
	struct found fd = { .limit = limit };
	if (jobs_find(c, sets, f, 0, &fd) < 0) {
		jobs_found_free(&fd);
		return CTL_USAGE;
	}
	double now = now_float();
	if (c->json) {
		struct sbuf b;
		sb_init(&b);
		sb_addc(&b, '[');
		for (int i = 0; i < fd.n; i++) {
			if (i)
				sb_addc(&b, ',');
			entry_json(&b, &fd.v[i], 0);
		}
		sb_addc(&b, ']');
		jprint(&b);
	} else if (fd.n == 0) {
		char sl[128];
		jobs_set_list(sets, sl, sizeof sl);
		printf("no jobs (%s)\n", sl);
	} else {
		static const char *heads[] = { "SET", "JID", "CLASS", "QUEUE", "WHEN", "ARGS", "ERROR" };
		static const int limits[] = { 0, 0, 40, 0, 0, 40, 50 };
		struct table t;
		table_init(&t, 7, heads, limits);
		for (int i = 0; i < fd.n; i++) {
			const struct entry *e = &fd.v[i];
			char when[256];
			entry_when(e, now, when, sizeof when);
			if (e->set == S_RUNNING && e->process)
				snprintf(when + strlen(when), sizeof when - strlen(when), " on %s", e->process);
			if (e->set == S_WAITING && e->process)
				snprintf(when + strlen(when), sizeof when - strlen(when),
				         " on %s for a slot (max_concurrency %d)", e->process, e->limit);
			char *err = entry_error(e), cut[96];
			const char *q = jobs_payload_queue(e);
			const char *cls = jobs_entry_class(e);
			const char *row[] = { jobs_set_names[e->set], e->j.obj && e->j.jid ? e->j.jid : "-",
			                      cls ? cls : "?", q ? q : "-", when,
			                      cut_args(e, e->j.obj ? e->j.args_json : e->raw, cut,
			                               sizeof cut), err };
			table_add(&t, row);
			free(err);
		}
		table_print(&t);
		table_free(&t);
	}
	/* What the walk of the group lines left (at most GROUPS_READ_MAX per class), said so
	 * that "no jobs" or a short table is not read as all of them; --json's array has no
	 * room for it, so there it goes to stderr. */
	if (fd.group_lines_not_read && c->json)
		ctl_error("warning: %lld more groups not read (a walk reads at most %d group "
		          "lines per class)", fd.group_lines_not_read, GROUPS_READ_MAX);
	else if (fd.group_lines_not_read)
		printf("... and %lld more groups not read (a walk reads at most %d group lines "
		       "per class)\n", fd.group_lines_not_read, GROUPS_READ_MAX);
	jobs_found_free(&fd);
	return CTL_OK;
}

int jobs_list_page(struct ctl *c, int set, const struct filter *f, long from, int limit,
                   long budget)
{
	struct found fd = { 0 };
	struct page pg;
	if (jobs_page(c, set, f, from, limit, budget, &fd, &pg) < 0) {
		jobs_found_free(&fd);
		return CTL_USAGE;
	}
	struct sbuf b;
	sb_init(&b);
	sb_printf(&b, "{\"set\":\"%s\",\"total\":%lld,\"from\":%ld,\"read\":%ld,\"next\":",
	          jobs_set_names[set], pg.total, pg.from, pg.read);
	pg.next >= 0 ? sb_printf(&b, "%ld", pg.next) : sb_adds(&b, "null");
	sb_adds(&b, ",\"jobs\":[");
	for (int i = 0; i < fd.n; i++) {
		if (i)
			sb_addc(&b, ',');
		entry_json(&b, &fd.v[i], 0);
	}
	sb_adds(&b, "]}");
	jprint(&b);
	jobs_found_free(&fd);
	return CTL_OK;
}

/* ---- jobs show ---- */

/* Characters of args, payload and error shown before the cut (without --full). */
#define SHOW_CUT 2000

/* "label      text" on one line; cut at SHOW_CUT characters, the size said, unless full. */
static void show_field(const char *label, const char *s, size_t len, int full)
{
	char *line = ctl_oneline(s, len, full ? 0 : SHOW_CUT);
	size_t chars = 0;
	for (size_t i = 0; i < len; i++)
		chars += ((unsigned char)s[i] & 0xC0) != 0x80;
	printf("%-10s %s", label, line);
	if (!full && chars > SHOW_CUT)
		printf(" (cut: %zu bytes in all; --full shows everything)", len);
	printf("\n");
	free(line);
}

/* "3" from an error message "exit status 3…", else -1. */
static int exit_status_of(const char *msg)
{
	int code;
	if (msg && sscanf(msg, "exit status %d", &code) == 1)
		return code;
	return -1;
}

/* How the retry budget stands, in words that fit where the entry is: a dead entry says
 * why it is dead, not "1 of 25 allowed". */
static void show_retries(const struct entry *e)
{
	long n = e->j.retry_count;
	int max = e->j.max_retries;
	const cJSON *retry = cJSON_GetObjectItemCaseSensitive(e->j.obj, "retry");
	if (e->set != S_DEAD) {
		printf("retries    %ld failure(s) so far; %d retr%s allowed\n", n, max,
		       max == 1 ? "y" : "ies");
		return;
	}
	int code = exit_status_of(jobs_string_member(e, "error_message"));
	const char *ec = jobs_string_member(e, "error_class");
	const char *em = jobs_string_member(e, "error_message");
	printf("retries    dead after %ld failure(s): ", n);
	if (ec && !strcmp(ec, JOB_CANCELLED))
		printf("cancelled on request (jobs cancel), which skips the retries\n");
	else if (ec && !strcmp(ec, JOB_EXPIRED))
		printf("its deadline passed before it started, which skips the retries%s\n",
		       number_member(e, "expires_at") > 0
		       ? " (jobs retry --expires-in D gives it a new one)" : "");
	else if (max == 0)
		printf("retry is %s, so the first failure goes to dead\n",
		       cJSON_IsFalse(retry) ? "false" : "0");
	else if (n > max)
		printf("retries exhausted (%d allowed)\n", max);
	else if (code > 0 && ec && !strcmp(ec, "Cogworker::HandlerFailed"))
		printf("dead (exit code %d), cut short with %ld of %d retries left\n", code,
		       max - n + 1, max);
	else if (em && strstr(em, "(E2BIG)"))
		printf("dead (E2BIG): its args do not fit in an argv, no retry could run it\n");
	else
		printf("cut short with %ld of %d retries left (killed, orphaned or interrupted "
		       "too often)\n", max - n + 1, max);
}

/* An attempt's outcome for people: the attempts log says "killed" for a job cut short to
 * dead, which reads like a signal; say what happened instead. */
static void attempt_outcome(const char *oc, const char *msg, char *out, size_t n)
{
	int code = exit_status_of(msg);
	if (oc && !strcmp(oc, "killed") && code > 0)
		snprintf(out, n, "dead (exit code %d)", code);
	else if (oc && !strcmp(oc, "killed"))
		snprintf(out, n, "dead (cut short)");
	else
		snprintf(out, n, "%s", oc ? oc : "?");
}

static void show_human(const struct entry *e, double now, int full)
{
	char iso[32], rel[48];
	printf("where      %s", jobs_set_names[e->set]);
	if (e->set == S_RUNNING)
		printf(" on %s (%s)", e->process, e->key);
	else if (e->set == S_WAITING)
		printf(" on %s for a max_concurrency slot: its handler %s runs at most %d at a time "
		       "there, and this job runs when one of them ends (%s)", e->process,
		       e->handler ? e->handler : "?", e->limit, e->key);
	else if (e->set == S_INPROGRESS)
		printf(": in the in-progress list of %s (%s)", e->process, e->key);
	else if (e->set == S_AFTER)
		printf(": waiting for other jobs (%s)", e->key);
	else if (e->set == S_GROUP)
		printf(": set aside for its group until the group has room (%s)", e->key);
	else
		printf(" (%s)", e->key);
	if (e->has_score && e->set != S_GROUP) {
		ctl_iso_time(e->score, iso);
		ctl_relative(e->score, now, rel, sizeof rel);
		printf(", %s %s (%s)", e->set == S_DEAD ? "died" : "due", iso, rel);
	}
	if (e->set == S_RUNNING && e->run_at > 0) {
		ctl_iso_time((double)e->run_at, iso);
		ctl_relative((double)e->run_at, now, rel, sizeof rel);
		printf(", started %s (%s)", iso, rel);
	}
	if ((e->set == S_WAITING || e->set == S_AFTER) && e->since > 0) {
		ctl_iso_time(e->since, iso);
		ctl_relative(e->since, now, rel, sizeof rel);
		printf(", since %s (%s)", iso, rel);
	}
	printf("\n");
	if (!e->j.obj) {
		printf("class      (unparseable): %s\n", e->j.parse_error ? e->j.parse_error : "");
	} else {
		const char *q = jobs_payload_queue(e);
		printf("class      %s\nqueue      %s\n", e->j.cls ? e->j.cls : "?", q ? q : "-");
		char cut[96];
		const char *args = cut_args(e, e->j.args_json, cut, sizeof cut);
		show_field("args", args, strlen(args), full);
		show_retries(e);
		static const char *const times[][2] = {
			{ "created_at", "created" }, { "enqueued_at", "enqueued" }, { "at", "at" },
			{ "failed_at", "failed" },
		};
		for (size_t i = 0; i < sizeof times / sizeof *times; i++) {
			double t = number_member(e, times[i][0]);
			if (isnan(t))
				continue;
			ctl_iso_time(t, iso);
			ctl_relative(t, now, rel, sizeof rel);
			printf("%-10s %s (%s)\n", times[i][1], iso, rel);
		}
		char *err = entry_error(e);
		if (*err)
			show_field("error", err, strlen(err), full);
		free(err);
	}
	if (e->size)
		printf("size       %zu bytes, more than max_job_bytes: truncated to its first %zu "
		       "bytes, below\n", e->size, e->raw_len);
	show_field("payload", e->raw, e->raw_len, full);
}

/* The status hash (HGETALL reply, or NULL) as a JSON object of strings, or null. */
static void status_json(struct sbuf *b, const redisReply *st)
{
	if (!st) {
		sb_adds(b, "null");
		return;
	}
	sb_addc(b, '{');
	for (size_t i = 0; i + 1 < st->elements; i += 2) {
		if (i)
			sb_addc(b, ',');
		jstrn(b, st->element[i]->str, st->element[i]->len);
		sb_addc(b, ':');
		jstrn(b, st->element[i + 1]->str, st->element[i + 1]->len);
	}
	sb_addc(b, '}');
}

static const redisReply *status_field(const redisReply *st, const char *name)
{
	for (size_t i = 0; st && i + 1 < st->elements; i += 2)
		if (st->element[i]->len == strlen(name) &&
		    memcmp(st->element[i]->str, name, st->element[i]->len) == 0)
			return st->element[i + 1];
	return NULL;
}

/* status     working, updated 2026-01-01T12:00:00Z (3s ago); 42% halfway; then the
 * fields the daemon does not own (written by the handler or the app) one per line. */
static void status_human(const redisReply *st, double now)
{
	if (!st) {
		printf("status     -\n");
		return;
	}
	const redisReply *s = status_field(st, "status"), *u = status_field(st, "update_time");
	char *sv = s ? ctl_oneline(s->str, s->len, 0) : xstrdup("?");
	printf("status     %s", sv);
	free(sv);
	if (u) {
		char iso[32], rel[48];
		double t = strtod(u->str, NULL);
		ctl_iso_time(t, iso);
		ctl_relative(t, now, rel, sizeof rel);
		printf(", updated %s (%s)", iso, rel);
	}
	printf("\n");
	const redisReply *pct = status_field(st, "pct"), *msg = status_field(st, "message");
	if (pct || msg) {
		char *p = pct ? ctl_oneline(pct->str, pct->len, 20) : NULL;
		char *m = msg ? ctl_oneline(msg->str, msg->len, 200) : NULL;
		printf("progress   %s%s%s%s\n", p ? p : "", p ? "%" : "", p && m && *m ? " " : "",
		       m ? m : "");
		free(p);
		free(m);
	}
	const redisReply *ec = status_field(st, "error_class"), *em = status_field(st, "error_message");
	if (ec || em) {
		char *e = ctl_oneline(em ? em->str : "", em ? em->len : 0, 300);
		printf("  error    %.*s%s%s\n", ec ? (int)ec->len : 0, ec ? ec->str : "",
		       ec && *e ? ": " : "", e);
		free(e);
	}
	const redisReply *cpu = status_field(st, "cpu_s"), *rss = status_field(st, "maxrss_bytes");
	if (cpu) {
		struct run_usage ru;
		char cost[64];
		usage_of(&ru, strtod(cpu->str, NULL), rss ? strtoll(rss->str, NULL, 10) : -1);
		usage_text(&ru, cost, sizeof cost);
		printf("  cost    %s\n", cost);
	}
	static const char *const own[] = { "status", "update_time", "pct", "message",
	                                   "error_class", "error_message", "class", "queue",
	                                   "cpu_s", "maxrss_bytes" };
	for (size_t i = 0; i + 1 < st->elements; i += 2) {
		const redisReply *k = st->element[i], *v = st->element[i + 1];
		int known = 0;
		for (size_t o = 0; o < sizeof own / sizeof *own && !known; o++)
			known = k->len == strlen(own[o]) && memcmp(k->str, own[o], k->len) == 0;
		if (known)
			continue;
		char *kk = ctl_oneline(k->str, k->len, 40), *vv = ctl_oneline(v->str, v->len, 200);
		printf("  %s = %s\n", kk, vv);
		free(kk);
		free(vv);
	}
}

/* A job running or waiting on a process is on that process's in-progress list too: that
 * entry says nothing more, and shown as well it read as a second copy of the job. */
static void drop_listed_twice(struct found *fd)
{
	int n = 0;
	for (int i = 0; i < fd->n; i++) {
		const struct entry *e = &fd->v[i];
		int twice = 0;
		for (int k = 0; k < fd->n && e->set == S_INPROGRESS && !twice; k++) {
			const struct entry *o = &fd->v[k];
			twice = (o->set == S_RUNNING || o->set == S_WAITING) && o->process &&
			        strcmp(o->process, e->process) == 0 && e->j.obj && o->j.obj &&
			        e->j.jid && o->j.jid && strcmp(e->j.jid, o->j.jid) == 0;
		}
		if (twice) {
			struct entry gone = fd->v[i];
			fd->v[i] = (struct entry){ 0 };
			jobs_entry_free(&gone);
		} else {
			fd->v[n++] = fd->v[i];
		}
	}
	fd->n = n;
}

/* A job that waits for others (doc/protocol.md §7.34): its hash and what it still waits
 * for; nothing when it does not wait. */
struct waits {
	int waiting, any;
	char *bid;
	redisReply *after;
	redisReply *dependants;     /* the jobs that wait for this one (NULL: unread) */
};

static void waits_read(struct ctl *c, const char *jid, struct waits *w)
{
	memset(w, 0, sizeof *w);
	if (!jid || jid[0] == '{')
		return;
	redisReply *h = rcmd(&c->r, "HMGET " K_WAIT "%s any bid", jid);
	if (h && h->type == REDIS_REPLY_ARRAY && h->elements == 2 && h->element[0]->str) {
		w->waiting = 1;
		w->any = strcmp(h->element[0]->str, "1") == 0;
		w->bid = h->element[1]->str && *h->element[1]->str ? xstrdup(h->element[1]->str)
		                                                   : NULL;
		w->after = rcmd(&c->r, "SMEMBERS " K_AFTER "%s", jid);
	}
	if (h)
		freeReplyObject(h);
	w->dependants = rcmd(&c->r, "SMEMBERS " K_DEPENDANTS "%s", jid);
}

static void waits_free(struct waits *w)
{
	free(w->bid);
	if (w->after)
		freeReplyObject(w->after);
	if (w->dependants)
		freeReplyObject(w->dependants);
}

/* [{jid, state}] of a set of jids, one pipelined round: the state is how it settled
 * (success, dead, discarded: its settled record), else "after" (waiting for others), else
 * its status hash's status (status bookkeeping), else "pending". */
static void states_json(struct ctl *c, struct sbuf *b, const redisReply *set)
{
	size_t n = set && set->type == REDIS_REPLY_ARRAY ? set->elements : 0;
	struct rpipe p;
	rpipe_begin(&c->r, &p);
	for (size_t i = 0; i < n; i++) {
		const char *jid = set->element[i]->str;
		rpipe_add(&c->r, &p, "GET " K_SETTLED "%s", jid);
		rpipe_add(&c->r, &p, "ZSCORE " K_BATCH_WAITING " %s", jid);
		rpipe_add(&c->r, &p, "HGET " K_STATUS "%s status", jid);
	}
	redisReply **r = xcalloc(3 * n + 1, sizeof *r);
	rpipe_exec(&c->r, &p, r);
	sb_addc(b, '[');
	for (size_t i = 0; i < n; i++) {
		const redisReply *st = r[3 * i], *wt = r[3 * i + 1], *ss = r[3 * i + 2];
		sb_adds(b, i ? ",{\"jid\":" : "{\"jid\":");
		jstr(b, set->element[i]->str);
		sb_adds(b, ",\"state\":");
		if (st && st->str && strcmp(st->str, SETTLED_WAITED) != 0)   /* no outcome */
			jstrn(b, st->str, st->len);
		else if (wt && wt->str)
			jstr(b, "after");
		else if (ss && ss->str)
			jstrn(b, ss->str, ss->len);
		else
			jstr(b, "pending");
		sb_addc(b, '}');
	}
	sb_addc(b, ']');
	for (size_t i = 0; i < 3 * n; i++)
		if (r[i])
			freeReplyObject(r[i]);
	free(r);
}

/* Its batch: from any copy of it found, else from its waiting record. */
static const char *batch_of(const struct found *fd, const struct waits *w)
{
	for (int i = 0; i < fd->n; i++)
		if (fd->v[i].j.bid)
			return fd->v[i].j.bid;
	return w->bid;
}

static void waits_json(struct ctl *c, struct sbuf *b, const struct found *fd,
                       const struct waits *w)
{
	sb_adds(b, ",\"batch\":");
	jstr(b, batch_of(fd, w));
	sb_adds(b, ",\"dependants\":");
	states_json(c, b, w->dependants);
	sb_adds(b, ",\"waits_for\":");
	if (!w->waiting) {
		sb_adds(b, "null");
		return;
	}
	sb_adds(b, "{\"jids\":[");
	for (size_t i = 0; w->after && w->after->type == REDIS_REPLY_ARRAY &&
	     i < w->after->elements; i++) {
		if (i)
			sb_addc(b, ',');
		jstr(b, w->after->element[i]->str);
	}
	sb_adds(b, "],\"after_any\":");
	jbool(b, w->any);
	sb_adds(b, ",\"states\":");
	states_json(c, b, w->after);
	sb_addc(b, '}');
}

static void waits_human(const struct found *fd, const struct waits *w)
{
	const char *bid = batch_of(fd, w);
	if (bid)
		printf("batch      %s\n", bid);
	if (!w->waiting)
		return;
	printf("waits for  (%s):", w->any ? "after-any: runs once they all settled"
	       : "runs once they all succeeded");
	for (size_t i = 0; w->after && w->after->type == REDIS_REPLY_ARRAY &&
	     i < w->after->elements; i++)
		printf(" %s", w->after->element[i]->str);
	printf("\n");
}

/* ---- the runs kept with their output (doc/protocol.md §7.29, §4.9 "Output run") ---- */

struct kept_run {
	long long n;
	const redisReply *rec;
};

static int cmp_kept(const void *a, const void *b)
{
	long long x = ((const struct kept_run *)a)->n, y = ((const struct kept_run *)b)->n;
	return x < y ? -1 : x > y;
}

/* The numbered fields of cogworker:output:<jid> (its bookkeeping fields left out), oldest
 * first; *n how many. */
static struct kept_run *kept_runs_of(const redisReply *h, size_t *n)
{
	*n = 0;
	if (!h || h->type != REDIS_REPLY_ARRAY)
		return NULL;
	struct kept_run *v = xcalloc(h->elements / 2 + 1, sizeof *v);
	for (size_t i = 0; i + 1 < h->elements; i += 2) {
		char *end;
		long long k = strtoll(h->element[i]->str, &end, 10);
		if (end != h->element[i]->str && !*end && k > 0)
			v[(*n)++] = (struct kept_run){ k, h->element[i + 1] };
	}
	qsort(v, *n, sizeof *v, cmp_kept);
	return v;
}

/* Each kept run's record, with its number: {"run":n, <the record's members>}. */
static void runs_json(struct sbuf *b, const redisReply *h)
{
	size_t n;
	struct kept_run *v = kept_runs_of(h, &n);
	sb_adds(b, ",\"runs\":[");
	for (size_t i = 0; i < n; i++) {
		const redisReply *r = v[i].rec;
		sb_printf(b, "%s{\"run\":%lld", i ? "," : "", v[i].n);
		if (r->len > 2 && r->str[0] == '{' && json_valid(r->str, r->len))
			sb_printf(b, ",%.*s", (int)r->len - 1, r->str + 1);
		else
			sb_adds(b, "}");
	}
	sb_adds(b, "]");
	free(v);
}

/*   #2   2026-01-01T12:00:00Z  success     0.51s cpu=0.48s maxrss=151MiB */
static void runs_human(const redisReply *h)
{
	size_t n;
	struct kept_run *v = kept_runs_of(h, &n);
	if (n)
		printf("\nruns       %zu kept (cogworkerctl jobs log)\n", n);
	for (size_t i = 0; i < n; i++) {
		cJSON *o = job_json_parse(v[i].rec->str, v[i].rec->len);
		const cJSON *oc = o ? cJSON_GetObjectItemCaseSensitive(o, "outcome") : NULL;
		struct run_cells rc = { .iso = "" };
		jobs_run_cells(o, &rc);
		printf("  #%-3lld %s  %-9s  %s%s\n", v[i].n, rc.iso,
		       cJSON_IsString(oc) ? oc->valuestring : "?", rc.took, rc.cost);
		if (o)
			cJSON_Delete(o);
	}
	free(v);
}

/* ---- where a job found nowhere ended: its last run in history ---- */

/* "where" for a job in no set and not waiting: how its last run in history ended, else
 * that it is nowhere; its class and queue from history, else from its status. */
static void ended_human(const redisReply *st, const struct hist_runs *h, double now, int cut)
{
	const struct hist_run *last = jobs_history_last(h);
	if (!last && cut) {
		printf("where      nowhere searched (finished, deleted, or in a group line not "
		       "read); only its status is left\n");
	} else if (!last) {
		printf("where      nowhere (finished, or deleted); only its status is left\n");
	} else {
		char iso[32], rel[48];
		double t = jobs_history_finished(last);
		ctl_iso_time(t, iso);
		ctl_relative(t, now, rel, sizeof rel);
		const char *oc = last->outcome;
		if (!strcmp(oc, "success"))
			printf("where      finished: succeeded %s (%s)", iso, rel);
		else if (!strcmp(oc, "discarded"))
			printf("where      finished: discarded %s (%s)", iso, rel);
		else if (!strcmp(oc, "retrying"))
			printf("where      nowhere now: its last run failed %s (%s) and was to be "
			       "retried (deleted since, or on its way)", iso, rel);
		else
			printf("where      finished: dead %s (%s), deleted from the dead set since",
			       iso, rel);
		printf(", after %d run%s in history\n", h->n, h->n == 1 ? "" : "s");
	}
	const char *hk = last ? jobs_history_field(last, "class") : NULL;
	const char *hq = last ? jobs_history_field(last, "queue") : NULL;
	const redisReply *k = status_field(st, "class"), *q = status_field(st, "queue");
	printf("class      %.*s\n", hk ? (int)strlen(hk) : k ? (int)k->len : 1,
	       hk ? hk : k ? k->str : "?");
	printf("queue      %.*s\n", hq ? (int)strlen(hq) : q ? (int)q->len : 1,
	       hq ? hq : q ? q->str : "-");
}

/* The job's fair-share group (doc/protocol.md §7.35), when its class declares group_by:
 * the group, the path, why the value is no group, and, set aside, its place in the line. */
struct job_group {
	int known;                  /* its class declares group_by */
	char *name, *by;
	const char *why;            /* the value is no group (it is in ""), else NULL */
	const struct entry *aside;  /* its entry in the group set, or NULL */
	long long place, line;      /* 1 = the next to come back; 0 unknown; its line's length */
};

static int group_read(struct ctl *c, const struct found *fd, struct job_group *g)
{
	memset(g, 0, sizeof *g);
	const struct entry *e = NULL;
	for (int i = 0; i < fd->n; i++) {
		if (fd->v[i].set == S_GROUP && !g->aside)
			g->aside = &fd->v[i];
		if (!e && fd->v[i].j.obj && fd->v[i].j.cls)
			e = &fd->v[i];
	}
	if (!e)
		return 0;
	/* A cut entry: its summary holds its small members, args among them (jobs_cut.c). */
	int r = group_limits_job_group(&c->r, e->j.cls, e->size ? e->summary : e->raw,
	                               e->size ? e->summary_len : e->raw_len, &g->name, &g->by,
	                               &g->why);
	if (r < 0)
		return -1;
	g->known = r;
	if (g->aside) {
		const struct entry *a = g->aside;
		redisReply *rk = a->size ? NULL : rcmd(&c->r, "ZRANK %s %b", a->key, a->raw, a->raw_len);
		redisReply *n = rcmd(&c->r, "ZCARD %s", a->key);
		if (rk && rk->type == REDIS_REPLY_INTEGER)
			g->place = rk->integer + 1;
		g->line = reply_integer(n, 0);
		if (rk)
			freeReplyObject(rk);
		if (n)
			freeReplyObject(n);
	}
	return 0;
}

static void group_free(struct job_group *g)
{
	free(g->name);
	free(g->by);
}

/* ,"group": {"name", "group_by", "invalid", "set_aside", "key", "place", "line"} or null. */
static void group_json(struct sbuf *b, const struct job_group *g)
{
	sb_adds(b, ",\"group\":");
	if (!g->known) {
		sb_adds(b, "null");
		return;
	}
	sb_adds(b, "{\"name\":");
	jstr(b, g->name);
	sb_adds(b, ",\"group_by\":");
	jstr(b, g->by);
	sb_adds(b, ",\"invalid\":");
	jstr(b, g->why);
	sb_printf(b, ",\"set_aside\":%s,\"key\":", g->aside ? "true" : "false");
	jstr(b, g->aside ? g->aside->key : NULL);
	if (g->aside && g->place)
		sb_printf(b, ",\"place\":%lld", g->place);
	else
		sb_adds(b, ",\"place\":null");
	if (g->aside)
		sb_printf(b, ",\"line\":%lld}", g->line);
	else
		sb_adds(b, ",\"line\":null}");
}

static void group_human(const struct job_group *g)
{
	if (!g->known)
		return;
	char *name = ctl_oneline(g->name, strlen(g->name), 80);
	printf("group      %s%s (group_by %s", *name ? "" : "\"\"", name, g->by);
	if (g->why)
		printf(": the value is %s, so the group \"\"", g->why);
	printf(")");
	if (g->aside && g->place)
		printf(": set aside, %lld of %lld in its line, back when its group has room",
		       g->place, g->line);
	else if (g->aside)
		printf(": set aside in a line of %lld, back when its group has room", g->line);
	printf("\n");
	free(name);
}

/* The search of the group lines was cut (src/grouplimits.h: at most GROUPS_READ_MAX lines
 * per class): "the first N of M group lines" into out, for a search that must not claim the
 * lines it did not read; 0 when it read them all. */
static int lines_cut(const struct found *fd, char *out, size_t n)
{
	if (!fd->group_lines_not_read)
		return 0;
	snprintf(out, n, "the first %d of %lld group lines (a search reads at most %d per class)",
	         fd->group_lines, fd->group_lines + fd->group_lines_not_read, GROUPS_READ_MAX);
	return 1;
}

/* ,"group_lines_cut": {"read", "not_read", "read_max"} when the search of the group lines
 * was cut; absent when it read them all. */
static void lines_cut_json(struct sbuf *b, const struct found *fd)
{
	if (!fd->group_lines_not_read)
		return;
	sb_printf(b, ",\"group_lines_cut\":{\"read\":%d,\"not_read\":%lld,\"read_max\":%d}",
	          fd->group_lines, fd->group_lines_not_read, GROUPS_READ_MAX);
}

/* ,"ended": {"outcome", "finished_at", "runs"} from history for a job found nowhere (in no
 * set, not waiting), else null. */
static void ended_json(struct sbuf *b, const struct found *fd, const struct waits *w,
                       const struct hist_runs *h)
{
	const struct hist_run *last = jobs_history_last(h);
	sb_adds(b, ",\"ended\":");
	if (fd->n || w->waiting || !last) {
		sb_adds(b, "null");
		return;
	}
	sb_adds(b, "{\"outcome\":");
	jstr(b, last->outcome);
	sb_adds(b, ",\"finished_at\":");
	jnum(b, jobs_history_finished(last));
	sb_printf(b, ",\"runs\":%d}", h->n);
}

int jobs_show(struct ctl *c, const char *arg, int full, const struct show_at *at)
{
	struct filter f = { .arg = arg };
	struct found fd = { 0 };
	unsigned sets = BIT(S_WAITING) | BIT(S_AFTER) |
	                (at ? RUN_SETS : BIT(S_QUEUED) | ZSETS | BIT(S_GROUP) | RUN_SETS);
	if ((at && jobs_find_at(c, at->set, at->score, &f, &fd) < 0) ||
	    jobs_find(c, sets, &f, 1, &fd) < 0) {
		jobs_found_free(&fd);
		return CTL_USAGE;
	}
	drop_listed_twice(&fd);
	const char *jid = NULL;
	for (int i = 0; i < fd.n && !jid; i++)
		if (fd.v[i].j.obj && fd.v[i].j.jid)
			jid = fd.v[i].j.jid;
	/* status:<jid> (status bookkeeping): also outlives the job, e.g. a completed one. */
	redisReply *st = NULL;
	if (jid || arg[0] != '{') {
		st = rcmd(&c->r, "HGETALL " K_STATUS "%s", jid ? jid : arg);
		if (st && (st->type != REDIS_REPLY_ARRAY || st->elements == 0)) {
			freeReplyObject(st);
			st = NULL;
		} else if (!st && !c->r.unavailable) {
			ctl_error("warning: " K_STATUS "%s unreadable: %s", jid ? jid : arg, c->r.err);
		}
	}
	struct waits w;
	waits_read(c, jid ? jid : arg, &w);
	struct hist_runs hist;
	if (jobs_history_read(c, jid ? jid : arg, &hist) < 0) {
		jobs_found_free(&fd);
		waits_free(&w);
		if (st)
			freeReplyObject(st);
		return ctl_redis_error_family(c, K_HISTORY_JID);
	}
	char cut[128];
	if (fd.n == 0 && !st && !w.waiting && hist.n == 0) {
		if (lines_cut(&fd, cut, sizeof cut))
			ctl_error("no job %s (looked in queues, scheduled, retry, dead, running, in "
			          "progress, waiting, status, history, and %s; not in the others)",
			          arg, cut);
		else
			ctl_error("no job %s (looked in queues, scheduled, retry, dead, running, in "
			          "progress, waiting, group lines, status, history)", arg);
		jobs_found_free(&fd);
		waits_free(&w);
		return CTL_NOTHING;
	}
	if (!jid && fd.n == 0)
		jid = arg;
	redisReply *att = NULL;
	if (jid) {
		att = rcmd(&c->r, "LRANGE " K_ATTEMPTS "%s 0 -1", jid);
		if (!att) {
			if (c->r.unavailable) {
				jobs_found_free(&fd);
				waits_free(&w);
				jobs_history_free(&hist);
				if (st)
					freeReplyObject(st);
				return ctl_redis_error_family(c, K_ATTEMPTS);
			}
			ctl_error("warning: " K_ATTEMPTS "%s unreadable: %s", jid, c->r.err);
		}
	}
	redisReply *runs = jid ? rcmd(&c->r, "HGETALL " K_OUTPUT "%s", jid) : NULL;
	struct job_group grp;
	if (group_read(c, &fd, &grp) != 0 && !c->r.unavailable)
		ctl_error("warning: its group unreadable: %s", c->r.err);
	double now = now_float();
	if (c->json) {
		struct sbuf b;
		sb_init(&b);
		sb_adds(&b, "{\"jid\":");
		jstr(&b, jid);
		sb_adds(&b, ",\"locations\":[");
		for (int i = 0; i < fd.n; i++) {
			if (i)
				sb_addc(&b, ',');
			entry_json(&b, &fd.v[i], 1);
		}
		sb_adds(&b, "]");
		group_json(&b, &grp);
		waits_json(c, &b, &fd, &w);
		sb_adds(&b, ",\"status\":");
		status_json(&b, st);
		sb_adds(&b, ",\"attempts\":[");
		for (size_t i = 0; att && i < att->elements; i++) {
			if (i)
				sb_addc(&b, ',');
			const redisReply *a = att->element[i];
			if (json_valid(a->str, a->len))
				sb_add(&b, a->str, a->len);
			else
				jstrn(&b, a->str, a->len);
		}
		sb_adds(&b, "]");
		runs_json(&b, runs);
		jobs_history_json(&b, &hist);
		ended_json(&b, &fd, &w, &hist);
		lines_cut_json(&b, &fd);
		sb_adds(&b, "}");
		jprint(&b);
	} else {
		printf("jid        %s\n", jid ? jid : "(none)");
		for (int i = 0; i < fd.n; i++) {
			if (i)
				printf("\n");
			show_human(&fd.v[i], now, full);
		}
		group_human(&grp);
		waits_human(&fd, &w);
		if (fd.n == 0 && !w.waiting)
			ended_human(st, &hist, now, fd.group_lines_not_read > 0);
		if (fd.n == 0 && !w.waiting && lines_cut(&fd, cut, sizeof cut))
			printf("searched   %s; not in the others\n", cut);
		status_human(st, now);
		size_t na = hist.n ? 0 : att ? att->elements : 0;
		if (hist.n)
			jobs_history_human(&hist);
		else
			printf("\nattempts   %zu\n", na);
		for (size_t i = 0; i < na; i++) {
			const redisReply *a = att->element[i];
			cJSON *o = job_json_parse(a->str, a->len);
			const cJSON *n = o ? cJSON_GetObjectItemCaseSensitive(o, "attempt") : NULL;
			const cJSON *t = o ? cJSON_GetObjectItemCaseSensitive(o, "failed_at") : NULL;
			const cJSON *oc = o ? cJSON_GetObjectItemCaseSensitive(o, "outcome") : NULL;
			const cJSON *ec = o ? cJSON_GetObjectItemCaseSensitive(o, "error_class") : NULL;
			const cJSON *em = o ? cJSON_GetObjectItemCaseSensitive(o, "error_message") : NULL;
			char iso[32] = "?";
			if (cJSON_IsNumber(t))
				ctl_iso_time(t->valuedouble, iso);
			const char *msg = cJSON_IsString(em) ? em->valuestring : "";
			char *line = ctl_oneline(msg, strlen(msg), 200);
			char said[48];
			attempt_outcome(cJSON_IsString(oc) ? oc->valuestring : NULL, msg, said,
			                sizeof said);
			if (o)
				printf("  #%-3d %s  %-9s  %s: %s\n",
				       cJSON_IsNumber(n) ? (int)n->valuedouble : (int)i + 1, iso, said,
				       cJSON_IsString(ec) ? ec->valuestring : "?", line);
			else
				printf("  (unreadable) %.*s\n", (int)a->len, a->str);
			free(line);
			if (o)
				cJSON_Delete(o);
		}
		runs_human(runs);
	}
	if (runs)
		freeReplyObject(runs);
	group_free(&grp);
	jobs_history_free(&hist);
	if (att)
		freeReplyObject(att);
	if (st)
		freeReplyObject(st);
	waits_free(&w);
	jobs_found_free(&fd);
	return CTL_OK;
}
