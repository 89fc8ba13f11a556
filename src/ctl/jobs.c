/*
 * jobs.c: `cogworkerctl jobs`: the Web UI's job pages and buttons (PROTOCOL §7.28).
 *
 *   jobs list [--set S] [--queue Q] [--class C] [--limit N]
 *   jobs show JID
 *   jobs retry JID...          | jobs retry --all --set retry|dead|scheduled [filters]
 *   jobs delete JID...         | jobs delete --all --set S [filters] --yes
 *   jobs kill JID...           | jobs kill --all --set scheduled|retry [filters] --yes
 *   jobs reschedule JID MINUTES
 *
 * Sets: queued (cogworker:queue:<q>), scheduled (cogworker:schedule), retry, dead,
 * running (cogworker:workers:<id> of every process). A JID argument is matched against
 * each entry's jid, or else against the raw member itself, so corrupt entries can be
 * addressed by their exact text. Every action works on the exact member string as read
 * (never a re-encoded copy):
 *
 *   retry       CLAIM_AND_REQUEUE (lua/claim_and_requeue.lua) with enqueued_at re-stamped
 *               by byte-preserving surgery; the claim gate makes a second retry do nothing.
 *               An entry with no usable queue, or an (unparseable) wrapper, stays put.
 *   delete      LREM queue 0 raw | ZREM set raw, then DEL cogworker:job_attempts:<jid>
 *               for retry and dead entries; --all without filters DELs the whole key (and,
 *               for retry/dead, every attempts log of the entries it held).
 *   kill        KILL (lua/kill.lua): ZSCORE check → ZADD dead now → ZREM.
 *   reschedule  ZADD set XX now+minutes·60 raw, minutes clamped to 1…10080.
 *
 * None of them runs on_death.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "ctl.h"
#include "job.h"
#include "json.h"

enum set_id { S_QUEUED, S_SCHEDULED, S_RETRY, S_DEAD, S_RUNNING, S_INPROGRESS, S_COUNT };
static const char *const set_names[S_COUNT] = {
	"queued", "scheduled", "retry", "dead", "running", "inprogress",
};
static const char *const zset_keys[S_COUNT] = {
	NULL, K_SCHEDULE, K_RETRY, K_DEAD, NULL, NULL,
};
#define BIT(s) (1u << (s))
#define ZSETS (BIT(S_SCHEDULED) | BIT(S_RETRY) | BIT(S_DEAD))
#define PAGE 100

struct entry {
	int set;
	char *key;                  /* the Redis key that holds it */
	char *qname;                /* queued / running: the queue */
	char *raw;                  /* the exact member (running: the payload text) */
	size_t raw_len;
	double score;
	int has_score;
	char *process;              /* running / inprogress: the identity */
	long long run_at;           /* running */
	struct job j;               /* parsed (filled while the entry is looked at) */
};

struct filter {
	const char *arg;            /* a jid, or the raw member */
	const char *queue;
	const char *cls;
};

/* Called for each matching entry (parsed); 0 = go on, 1 = stop. */
typedef int (*entry_cb)(struct entry *e, void *ctx);

struct found {
	struct entry *v;
	int n, cap;
	int limit;                  /* 0 = none */
};

static void entry_free(struct entry *e)
{
	free(e->key);
	free(e->qname);
	free(e->raw);
	free(e->process);
	job_free(&e->j);
}

static void found_free(struct found *f)
{
	for (int i = 0; i < f->n; i++)
		entry_free(&f->v[i]);
	free(f->v);
	memset(f, 0, sizeof *f);
}

static int collect(struct entry *e, void *ctx)
{
	struct found *f = ctx;
	if (f->n == f->cap) {
		f->cap = f->cap ? f->cap * 2 : 16;
		f->v = xrealloc(f->v, sizeof *f->v * (size_t)f->cap);
	}
	struct entry *c = &f->v[f->n++];
	*c = (struct entry){
		.set = e->set, .key = xstrdup(e->key), .qname = e->qname ? xstrdup(e->qname) : NULL,
		.raw = xstrndup(e->raw, e->raw_len), .raw_len = e->raw_len, .score = e->score,
		.has_score = e->has_score, .process = e->process ? xstrdup(e->process) : NULL,
		.run_at = e->run_at,
	};
	job_parse(&c->j, c->raw, c->raw_len, c->qname);
	return f->limit > 0 && f->n >= f->limit;
}

static const char *payload_queue(const struct entry *e)
{
	if (e->qname)
		return e->qname;
	const cJSON *q = e->j.obj ? cJSON_GetObjectItemCaseSensitive(e->j.obj, "queue") : NULL;
	return cJSON_IsString(q) ? q->valuestring : NULL;
}

static const char *entry_class(const struct entry *e)
{
	return e->j.obj ? e->j.cls : "(unparseable)";
}

/* Filter, parse and hand one element to cb. */
static int consider(struct entry *e, const struct filter *f, entry_cb cb, void *ctx)
{
	int raw_eq = 0;
	if (f->arg) {
		size_t alen = strlen(f->arg);
		raw_eq = e->raw_len == alen && memcmp(e->raw, f->arg, alen) == 0;
		if (!raw_eq && (alen == 0 || !memmem(e->raw, e->raw_len, f->arg, alen)))
			return 0;
	}
	job_parse(&e->j, e->raw, e->raw_len, e->qname);
	int ok = 1;
	if (f->arg && !raw_eq && !(e->j.obj && e->j.jid && strcmp(e->j.jid, f->arg) == 0))
		ok = 0;
	if (ok && f->cls) {
		const char *cls = entry_class(e);
		ok = cls && strcmp(cls, f->cls) == 0;
	}
	if (ok && f->queue && e->set != S_QUEUED) {
		const char *q = payload_queue(e);
		ok = q && strcmp(q, f->queue) == 0;
	}
	int r = ok ? cb(e, ctx) : 0;
	job_free(&e->j);
	return r;
}

/*
 * Visit the entries of one set, in the Web UI's order (queues by name, each from index 0;
 * schedule and retry soonest first; dead newest first), PAGE at a time. Returns 0 when
 * done, 1 when cb stopped it, -1 after an error message. With tolerant, a key that can't
 * be read for a reason other than availability is skipped with a warning.
 */
static int scan(struct ctl *c, int set, const struct filter *f, int tolerant, entry_cb cb, void *ctx)
{
	int stop = 0;
	if (zset_keys[set]) {
		const char *key = zset_keys[set];
		for (long start = 0; !stop; start += PAGE) {
			redisReply *rep = rcmd(&c->r, "%s %s %ld %ld WITHSCORES",
			                       set == S_DEAD ? "ZREVRANGE" : "ZRANGE", key, start,
			                       start + PAGE - 1);
			if (!rep) {
				if (tolerant && !c->r.unavailable) {
					ctl_error("warning: %s skipped: %s", key, c->r.err);
					return 0;
				}
				ctl_redis_error(c, key);
				return -1;
			}
			size_t n = rep->elements / 2;
			for (size_t i = 0; i < n && !stop; i++) {
				const redisReply *m = rep->element[2 * i], *s = rep->element[2 * i + 1];
				struct entry e = { .set = set, .key = (char *)key, .raw = m->str,
				                   .raw_len = m->len, .score = strtod(s->str, NULL),
				                   .has_score = 1 };
				stop = consider(&e, f, cb, ctx);
			}
			freeReplyObject(rep);
			if (n < PAGE)
				break;
		}
		return stop;
	}
	if (set == S_QUEUED) {
		struct queue_info *qi = NULL;
		int nqi = 0;
		if (!f->queue && ctl_queue_names(c, 1, 1, &qi, &nqi) != 0)
			return -1;
		size_t nq = f->queue ? 1 : (size_t)nqi;
		char **qs = xcalloc(nq + 1, sizeof *qs);
		for (size_t i = 0; i < nq; i++)
			qs[i] = xstrdup(f->queue ? f->queue : qi[i].name);
		ctl_free_queues(qi, nqi);
		int rc = 0;
		for (size_t i = 0; i < nq && !stop && rc == 0; i++) {
			char *key = xasprintf(K_QUEUE "%s", qs[i]);
			for (long start = 0; !stop; start += PAGE) {
				redisReply *rep = rcmd(&c->r, "LRANGE %s %ld %ld", key, start, start + PAGE - 1);
				if (!rep) {
					if (tolerant && !c->r.unavailable) {
						ctl_error("warning: %s skipped: %s", key, c->r.err);
						break;
					}
					ctl_redis_error(c, key);
					rc = -1;
					break;
				}
				for (size_t k = 0; k < rep->elements && !stop; k++) {
					struct entry e = { .set = set, .key = key, .qname = qs[i],
					                   .raw = rep->element[k]->str,
					                   .raw_len = rep->element[k]->len };
					stop = consider(&e, f, cb, ctx);
				}
				size_t got = rep->elements;
				freeReplyObject(rep);
				if (got < PAGE)
					break;
			}
			free(key);
		}
		for (size_t i = 0; i < nq; i++)
			free(qs[i]);
		free(qs);
		return rc ? rc : stop;
	}
	/* running (workers hashes) and inprogress (in-progress lists) */
	const char *reg = set == S_RUNNING ? K_PROCESSES : K_IDENTITIES;
	redisReply *ids = rcmd(&c->r, "SMEMBERS %s", reg);
	if (!ids) {
		if (tolerant && !c->r.unavailable) {
			ctl_error("warning: %s skipped: %s", reg, c->r.err);
			return 0;
		}
		ctl_redis_error(c, reg);
		return -1;
	}
	int rc = 0;
	for (size_t i = 0; i < ids->elements && !stop && rc == 0; i++) {
		char *id = xstrndup(ids->element[i]->str, ids->element[i]->len);
		char *key = xasprintf(set == S_RUNNING ? K_WORKERS "%s" : K_INPROGRESS "%s", id);
		redisReply *rep = rcmd(&c->r, set == S_RUNNING ? "HVALS %s" : "LRANGE %s 0 -1", key);
		if (!rep) {
			if (tolerant && !c->r.unavailable) {
				ctl_error("warning: %s skipped: %s", key, c->r.err);
			} else {
				ctl_redis_error(c, key);
				rc = -1;
			}
		}
		for (size_t k = 0; rep && k < rep->elements && !stop; k++) {
			const redisReply *v = rep->element[k];
			struct entry e = { .set = set, .key = key, .process = id, .raw = v->str,
			                   .raw_len = v->len };
			char *qname = NULL;
			if (set == S_RUNNING) {
				size_t ps, pl;
				if (json_member_span(v->str, v->len, "payload", &ps, &pl) == 0) {
					e.raw = v->str + ps;
					e.raw_len = pl;
				}
				cJSON *w = job_json_parse(v->str, v->len);
				const cJSON *q = w ? cJSON_GetObjectItemCaseSensitive(w, "queue") : NULL;
				const cJSON *ra = w ? cJSON_GetObjectItemCaseSensitive(w, "run_at") : NULL;
				if (cJSON_IsString(q))
					qname = xstrdup(q->valuestring);
				if (cJSON_IsNumber(ra))
					e.run_at = (long long)ra->valuedouble;
				if (w)
					cJSON_Delete(w);
				e.qname = qname;
			}
			stop = consider(&e, f, cb, ctx);
			free(qname);
		}
		if (rep)
			freeReplyObject(rep);
		free(key);
		free(id);
	}
	freeReplyObject(ids);
	return rc ? rc : stop;
}

/* Scan several sets (a bit mask) in set order, collecting into out. -1 on error. */
static int find(struct ctl *c, unsigned sets, const struct filter *f, int tolerant,
                struct found *out)
{
	for (int s = 0; s < S_COUNT; s++) {
		if (!(sets & BIT(s)))
			continue;
		int r = scan(c, s, f, tolerant, collect, out);
		if (r < 0)
			return -1;
		if (r > 0)
			break;
	}
	return 0;
}

static void set_list(unsigned sets, char *out, size_t n)
{
	out[0] = '\0';
	for (int s = 0; s < S_COUNT; s++)
		if (sets & BIT(s))
			snprintf(out + strlen(out), n - strlen(out), "%s%s", out[0] ? ", " : "",
			         set_names[s]);
}

/* ---- output of entries ---- */

static void member_raw(struct sbuf *b, const struct entry *e, const char *name)
{
	size_t s, l;
	if (e->j.obj && json_member_span(e->raw, e->raw_len, name, &s, &l) == 0)
		sb_add(b, e->raw + s, l);
	else
		sb_adds(b, "null");
}

static const char *string_member(const struct entry *e, const char *name)
{
	const cJSON *v = e->j.obj ? cJSON_GetObjectItemCaseSensitive(e->j.obj, name) : NULL;
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void entry_json(struct sbuf *b, const struct entry *e, int with_payload)
{
	sb_printf(b, "{\"set\":\"%s\",\"key\":", set_names[e->set]);
	jstr(b, e->key);
	sb_adds(b, ",\"jid\":");
	jstr(b, e->j.obj ? e->j.jid : NULL);
	sb_adds(b, ",\"class\":");
	jstr(b, entry_class(e));
	sb_adds(b, ",\"queue\":");
	jstr(b, payload_queue(e));
	sb_adds(b, ",\"args\":");
	if (e->j.obj)
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
	jstr(b, string_member(e, "error_class"));
	sb_adds(b, ",\"error_message\":");
	jstr(b, string_member(e, "error_message"));
	if (e->set == S_RUNNING || e->set == S_INPROGRESS) {
		sb_adds(b, ",\"process\":");
		jstr(b, e->process);
	}
	if (e->set == S_RUNNING)
		sb_printf(b, ",\"run_at\":%lld", e->run_at);
	if (!e->j.obj) {
		sb_adds(b, ",\"parse_error\":");
		jstr(b, e->j.parse_error);
	}
	sb_adds(b, ",\"raw\":");
	jstrn(b, e->raw, e->raw_len);
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
	const char *ec = string_member(e, "error_class"), *em = string_member(e, "error_message");
	if (!e->j.obj)
		return xstrdup(e->j.parse_error ? e->j.parse_error : "not a JSON object");
	if (!ec && !em)
		return xstrdup("");
	return xasprintf("%s%s%s", ec ? ec : "", ec && em ? ": " : "", em ? em : "");
}

/* ---- jobs list ---- */

static int list_jobs(struct ctl *c, unsigned sets, const struct filter *f, int limit)
{
	struct found fd = { .limit = limit };
	if (find(c, sets, f, 0, &fd) < 0) {
		found_free(&fd);
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
		set_list(sets, sl, sizeof sl);
		printf("no jobs (%s)\n", sl);
	} else {
		static const char *heads[] = { "SET", "JID", "CLASS", "QUEUE", "WHEN", "ARGS", "ERROR" };
		static const int limits[] = { 0, 0, 40, 0, 0, 40, 50 };
		struct table t;
		table_init(&t, 7, heads, limits);
		for (int i = 0; i < fd.n; i++) {
			const struct entry *e = &fd.v[i];
			char when[96];
			entry_when(e, now, when, sizeof when);
			if (e->set == S_RUNNING && e->process)
				snprintf(when + strlen(when), sizeof when - strlen(when), " on %s", e->process);
			char *err = entry_error(e);
			const char *q = payload_queue(e);
			const char *row[] = { set_names[e->set], e->j.obj && e->j.jid ? e->j.jid : "-",
			                      entry_class(e) ? entry_class(e) : "?", q ? q : "-", when,
			                      e->j.obj ? e->j.args_json : e->raw, err };
			table_add(&t, row);
			free(err);
		}
		table_print(&t);
		table_free(&t);
	}
	found_free(&fd);
	return CTL_OK;
}

/* ---- jobs show ---- */

static void show_human(const struct entry *e, double now)
{
	char iso[32], rel[48];
	printf("where      %s", set_names[e->set]);
	if (e->set == S_RUNNING)
		printf(" on %s (%s)", e->process, e->key);
	else if (e->set == S_INPROGRESS)
		printf(": in the in-progress list of %s (%s)", e->process, e->key);
	else
		printf(" (%s)", e->key);
	if (e->has_score) {
		ctl_iso_time(e->score, iso);
		ctl_relative(e->score, now, rel, sizeof rel);
		printf(", %s %s (%s)", e->set == S_DEAD ? "died" : "due", iso, rel);
	}
	if (e->set == S_RUNNING && e->run_at > 0) {
		ctl_iso_time((double)e->run_at, iso);
		ctl_relative((double)e->run_at, now, rel, sizeof rel);
		printf(", started %s (%s)", iso, rel);
	}
	printf("\n");
	if (!e->j.obj) {
		printf("class      (unparseable): %s\n", e->j.parse_error ? e->j.parse_error : "");
	} else {
		const char *q = payload_queue(e);
		printf("class      %s\nqueue      %s\n", e->j.cls ? e->j.cls : "?", q ? q : "-");
		char *args = ctl_oneline(e->j.args_json, strlen(e->j.args_json), 0);
		printf("args       %s\n", args);
		free(args);
		printf("retries    %ld failure(s) recorded of %d allowed\n", e->j.retry_count,
		       e->j.max_retries);
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
			printf("error      %s\n", err);
		free(err);
	}
	char *raw = ctl_oneline(e->raw, e->raw_len, 0);
	printf("payload    %s\n", raw);
	free(raw);
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
	static const char *const own[] = { "status", "update_time", "pct", "message",
	                                   "error_class", "error_message", "class", "queue" };
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

static int show_job(struct ctl *c, const char *arg)
{
	struct filter f = { .arg = arg };
	struct found fd = { 0 };
	unsigned sets = BIT(S_QUEUED) | ZSETS | BIT(S_RUNNING) | BIT(S_INPROGRESS);
	if (find(c, sets, &f, 1, &fd) < 0) {
		found_free(&fd);
		return CTL_USAGE;
	}
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
	if (fd.n == 0 && !st) {
		ctl_error("no job %s (looked in queues, scheduled, retry, dead, running, in progress, "
		          "status)", arg);
		found_free(&fd);
		return CTL_NOTHING;
	}
	if (!jid && fd.n == 0)
		jid = arg;
	redisReply *att = NULL;
	if (jid) {
		att = rcmd(&c->r, "LRANGE " K_ATTEMPTS "%s 0 -1", jid);
		if (!att) {
			if (c->r.unavailable) {
				found_free(&fd);
				if (st)
					freeReplyObject(st);
				return ctl_redis_error_family(c, K_ATTEMPTS);
			}
			ctl_error("warning: " K_ATTEMPTS "%s unreadable: %s", jid, c->r.err);
		}
	}
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
		sb_adds(&b, "],\"status\":");
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
		sb_adds(&b, "]}");
		jprint(&b);
	} else {
		printf("jid        %s\n", jid ? jid : "(none)");
		for (int i = 0; i < fd.n; i++) {
			if (i)
				printf("\n");
			show_human(&fd.v[i], now);
		}
		if (fd.n == 0) {
			printf("where      nowhere (finished, or deleted); only its status is left\n");
			const redisReply *k = status_field(st, "class"), *q = status_field(st, "queue");
			printf("class      %.*s\nqueue      %.*s\n", k ? (int)k->len : 1, k ? k->str : "?",
			       q ? (int)q->len : 1, q ? q->str : "-");
		}
		status_human(st, now);
		size_t na = att ? att->elements : 0;
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
			if (o)
				printf("  #%-3d %s  %-9s  %s: %s\n",
				       cJSON_IsNumber(n) ? (int)n->valuedouble : (int)i + 1, iso,
				       cJSON_IsString(oc) ? oc->valuestring : "?",
				       cJSON_IsString(ec) ? ec->valuestring : "?", line);
			else
				printf("  (unreadable) %.*s\n", (int)a->len, a->str);
			free(line);
			if (o)
				cJSON_Delete(o);
		}
	}
	if (att)
		freeReplyObject(att);
	if (st)
		freeReplyObject(st);
	found_free(&fd);
	return CTL_OK;
}

/* ---- actions ---- */

enum action { A_RETRY, A_DELETE, A_KILL, A_RESCHEDULE };
static const char *const action_names[] = { "retry", "delete", "kill", "reschedule" };
static const unsigned action_sets[] = {
	[A_RETRY] = ZSETS,
	[A_DELETE] = BIT(S_QUEUED) | ZSETS,
	[A_KILL] = BIT(S_SCHEDULED) | BIT(S_RETRY),
	[A_RESCHEDULE] = BIT(S_SCHEDULED) | BIT(S_RETRY),
};

struct act {
	struct ctl *c;
	enum action a;
	double minutes;
	struct sbuf json;           /* results, when --json */
	int nresults;
	int done;
	int quiet_gone;             /* --all: a vanished entry is not worth a line */
};

static void result(struct act *x, const struct entry *e, const char *arg, const char *what,
                   const char *reason, const char *queue, double at)
{
	if (!x->c->json)
		return;
	struct sbuf *b = &x->json;
	if (x->nresults++)
		sb_addc(b, ',');
	sb_adds(b, "{\"jid\":");
	jstr(b, e && e->j.obj ? e->j.jid : (e ? NULL : arg));
	sb_adds(b, ",\"set\":");
	jstr(b, e ? set_names[e->set] : NULL);
	sb_printf(b, ",\"result\":\"%s\"", what);
	if (reason) {
		sb_adds(b, ",\"reason\":");
		jstr(b, reason);
	}
	if (queue) {
		sb_adds(b, ",\"queue\":");
		jstr(b, queue);
	}
	if (at > 0) {
		sb_adds(b, ",\"at\":");
		jnum(b, at);
	}
	sb_addc(b, '}');
}

static const char *label(const struct entry *e)
{
	return e->j.obj && e->j.jid ? e->j.jid : "(entry without jid)";
}

static int do_retry(struct act *x, const struct entry *e)
{
	struct ctl *c = x->c;
	const char *q = e->j.obj ? string_member(e, "queue") : NULL;
	const char *why = NULL;
	if (!e->j.obj)
		why = "not a JSON object";
	else if (e->j.cls && strcmp(e->j.cls, "(unparseable)") == 0)
		why = "an (unparseable) wrapper";
	else if (!q || !q[0])
		why = "no queue";
	if (why) {
		ctl_error("%s in %s can't be put back on a queue (%s)", label(e), set_names[e->set], why);
		result(x, e, NULL, "refused", why, NULL, 0);
		return CTL_NOTHING;
	}
	char *payload = job_restamp_enqueued(e->raw, e->raw_len, now_float());
	if (!payload) {
		ctl_error("%s in %s can't be put back on a queue (unreadable payload)", label(e),
		          set_names[e->set]);
		result(x, e, NULL, "refused", "unreadable payload", NULL, 0);
		return CTL_NOTHING;
	}
	char *qkey = xasprintf(K_QUEUE "%s", q);
	const char *keys[] = { e->key, K_QUEUES, qkey };
	const char *args[] = { e->raw, payload, q };
	size_t lens[] = { e->raw_len, strlen(payload), strlen(q) };
	redisReply *rep = rscript(&c->r, "claim_and_requeue", 3, keys, 3, args, lens);
	free(payload);
	free(qkey);
	if (!rep) {
		char *what = xasprintf("retry of %s", label(e));
		int s = ctl_redis_error(c, what);
		free(what);
		return s;
	}
	long long r = reply_integer(rep, 0);
	freeReplyObject(rep);
	if (r != 1) {
		if (!x->quiet_gone)
			ctl_error("%s: gone from %s (someone else took it)", label(e), set_names[e->set]);
		result(x, e, NULL, "gone", NULL, NULL, 0);
		return CTL_NOTHING;
	}
	x->done++;
	if (!c->json)
		printf("retried %s: %s -> queue %s\n", label(e), set_names[e->set], q);
	result(x, e, NULL, "retried", NULL, q, 0);
	return CTL_OK;
}

static int do_delete(struct act *x, const struct entry *e)
{
	struct ctl *c = x->c;
	redisReply *rep;
	if (e->set == S_QUEUED) {
		const char *argv[] = { "LREM", e->key, "0", e->raw };
		size_t lens[] = { 4, strlen(e->key), 1, e->raw_len };
		rep = rcmd_argv(&c->r, 4, argv, lens);
	} else {
		const char *argv[] = { "ZREM", e->key, e->raw };
		size_t lens[] = { 4, strlen(e->key), e->raw_len };
		rep = rcmd_argv(&c->r, 3, argv, lens);
	}
	if (!rep)
		return ctl_redis_error(c, e->key);
	long long n = reply_integer(rep, 0);
	freeReplyObject(rep);
	if (n == 0) {
		if (!x->quiet_gone)
			ctl_error("%s: gone from %s", label(e), set_names[e->set]);
		result(x, e, NULL, "gone", NULL, NULL, 0);
		return CTL_NOTHING;
	}
	if ((e->set == S_RETRY || e->set == S_DEAD) && e->j.obj && e->j.jid) {
		rep = rcmd(&c->r, "DEL " K_ATTEMPTS "%s", e->j.jid);
		if (rep)
			freeReplyObject(rep);
		else
			ctl_error("warning: " K_ATTEMPTS "%s not deleted: %s", e->j.jid, c->r.err);
	}
	x->done++;
	if (!c->json)
		printf("deleted %s from %s\n", label(e), e->set == S_QUEUED ? e->key : set_names[e->set]);
	result(x, e, NULL, "deleted", NULL, NULL, 0);
	return CTL_OK;
}

static int do_kill(struct act *x, const struct entry *e)
{
	struct ctl *c = x->c;
	double now = ctl_now(c);
	if (now < 0)
		return ctl_redis_error(c, "TIME");
	char score[32];
	job_format_time(now, score);
	const char *keys[] = { e->key, K_DEAD };
	const char *args[] = { e->raw, score, e->raw };
	size_t lens[] = { e->raw_len, strlen(score), e->raw_len };
	redisReply *rep = rscript(&c->r, "kill", 2, keys, 3, args, lens);
	if (!rep) {
		char *what = xasprintf("kill of %s", label(e));
		int s = ctl_redis_error(c, what);
		free(what);
		return s;
	}
	long long r = reply_integer(rep, 0);
	freeReplyObject(rep);
	if (r != 1) {
		if (!x->quiet_gone)
			ctl_error("%s: gone from %s", label(e), set_names[e->set]);
		result(x, e, NULL, "gone", NULL, NULL, 0);
		return CTL_NOTHING;
	}
	x->done++;
	if (!c->json)
		printf("killed %s: %s -> dead\n", label(e), set_names[e->set]);
	result(x, e, NULL, "killed", NULL, NULL, 0);
	return CTL_OK;
}

static int do_reschedule(struct act *x, const struct entry *e)
{
	struct ctl *c = x->c;
	double now = ctl_now(c);
	if (now < 0)
		return ctl_redis_error(c, "TIME");
	double at = now + x->minutes * 60.0;
	char score[32];
	job_format_time(at, score);
	/* XX: an entry someone took meanwhile is not re-added; same member, no duplicate. */
	const char *argv[] = { "ZADD", e->key, "XX", "CH", score, e->raw };
	size_t lens[] = { 4, strlen(e->key), 2, 2, strlen(score), e->raw_len };
	redisReply *rep = rcmd_argv(&c->r, 6, argv, lens);
	if (!rep)
		return ctl_redis_error(c, e->key);
	long long changed = reply_integer(rep, 0);
	freeReplyObject(rep);
	if (!changed) {         /* taken meanwhile: nothing re-added, and that is fine */
		result(x, e, NULL, "gone", NULL, NULL, 0);
		return CTL_OK;
	}
	x->done++;
	if (!c->json) {
		char iso[32], rel[48];
		ctl_iso_time(at, iso);
		ctl_relative(at, now, rel, sizeof rel);
		printf("rescheduled %s (%s) to %s (%s)\n", label(e), set_names[e->set], iso, rel);
	}
	result(x, e, NULL, "rescheduled", NULL, NULL, at);
	return CTL_OK;
}

static int apply(struct act *x, const struct entry *e)
{
	if (!(action_sets[x->a] & BIT(e->set))) {
		const char *why = e->set == S_DEAD && x->a == A_KILL ? "already dead"
		                : e->set == S_RUNNING ? "it is running (stop its process to interrupt it)"
		                : e->set == S_QUEUED && x->a == A_KILL ? "it is queued (delete it instead)"
		                : e->set == S_QUEUED && x->a == A_RETRY
		                  ? "gone from retry and dead: it is queued already"
		                : e->set == S_QUEUED ? "it is queued already"
		                : "not possible in this set";
		ctl_error("can't %s %s in %s: %s", action_names[x->a], label(e), set_names[e->set], why);
		result(x, e, NULL, "refused", why, NULL, 0);
		return CTL_NOTHING;
	}
	switch (x->a) {
	case A_RETRY: return do_retry(x, e);
	case A_DELETE: return do_delete(x, e);
	case A_KILL: return do_kill(x, e);
	case A_RESCHEDULE: return do_reschedule(x, e);
	}
	return CTL_USAGE;
}

static void act_finish(struct act *x)
{
	if (x->c->json) {
		sb_addc(&x->json, ']');
		sb_printf(&x->json, ",\"done\":%d}", x->done);
		jprint(&x->json);
	} else {
		sb_free(&x->json);
	}
}

static void act_init(struct act *x, struct ctl *c, enum action a)
{
	memset(x, 0, sizeof *x);
	x->c = c;
	x->a = a;
	sb_init(&x->json);
	sb_printf(&x->json, "{\"action\":\"%s\",\"results\":[", action_names[a]);
}

/* Act on each JID argument wherever it is found within sets. */
static int act_on_args(struct ctl *c, enum action a, unsigned sets, const struct filter *base,
                       int nargs, char **args, double minutes)
{
	struct act x;
	act_init(&x, c, a);
	x.minutes = minutes;
	int status = CTL_OK;
	/* Look in every set where the entry could be, so a refusal can say where it is. */
	unsigned look = sets | (sets == action_sets[a] ? BIT(S_QUEUED) | ZSETS | BIT(S_RUNNING) : 0);
	for (int i = 0; i < nargs && status != CTL_USAGE; i++) {
		struct filter f = *base;
		f.arg = args[i];
		struct found fd = { 0 };
		if (find(c, look, &f, 1, &fd) < 0) {
			found_free(&fd);
			status = CTL_USAGE;
			break;
		}
		if (fd.n == 0) {
			char sl[128];
			set_list(sets, sl, sizeof sl);
			ctl_error("no job %s in %s (gone?)", args[i], sl);
			result(&x, NULL, args[i], "not_found", NULL, NULL, 0);
			status = ctl_worse(status, CTL_NOTHING);
		}
		for (int k = 0; k < fd.n && status != CTL_USAGE; k++)
			status = ctl_worse(status, apply(&x, &fd.v[k]));
		found_free(&fd);
	}
	act_finish(&x);
	return status;
}

/* DEL a whole set (delete --all without filters). */
static int delete_whole(struct ctl *c, int set, const char *queue)
{
	struct act x;
	act_init(&x, c, A_DELETE);
	int status = CTL_OK;
	long long deleted = 0;
	if (set == S_QUEUED) {
		char **qs = NULL;
		size_t nq = 0;
		if (queue) {
			qs = xcalloc(2, sizeof *qs);
			qs[nq++] = xstrdup(queue);
		} else {
			struct queue_info *qi;
			int nqi;
			if (ctl_queue_names(c, 1, 1, &qi, &nqi) != 0) {
				sb_free(&x.json);
				return CTL_USAGE;
			}
			qs = xcalloc((size_t)nqi + 1, sizeof *qs);
			for (int i = 0; i < nqi; i++)
				qs[nq++] = xstrdup(qi[i].name);
			ctl_free_queues(qi, nqi);
		}
		for (size_t i = 0; i < nq && status == CTL_OK; i++) {
			struct rpipe p;
			rpipe_begin(&c->r, &p);
			rpipe_add(&c->r, &p, "MULTI");
			rpipe_add(&c->r, &p, "LLEN " K_QUEUE "%s", qs[i]);
			rpipe_add(&c->r, &p, "DEL " K_QUEUE "%s", qs[i]);
			rpipe_add(&c->r, &p, "EXEC");
			redisReply *reps[4];
			rpipe_exec(&c->r, &p, reps);
			redisReply *ex = reps[3];
			if (!ex || ex->type != REDIS_REPLY_ARRAY || ex->elements != 2) {
				char *what = xasprintf(K_QUEUE "%s", qs[i]);
				status = ctl_redis_error(c, what);
				free(what);
			} else if (ex->element[0]->type == REDIS_REPLY_INTEGER) {
				deleted += ex->element[0]->integer;
				if (!c->json && ex->element[0]->integer > 0)
					printf("deleted %lld job(s) from queue %s\n", ex->element[0]->integer, qs[i]);
			}
			for (int k = 0; k < 4; k++)
				if (reps[k])
					freeReplyObject(reps[k]);
		}
		for (size_t i = 0; i < nq; i++)
			free(qs[i]);
		free(qs);
	} else {
		/* Read every member and DEL the key in one transaction, so no entry slips by
		 * without its attempts log being found. */
		const char *key = zset_keys[set];
		redisReply *type = rcmd(&c->r, "TYPE %s", key);
		if (!type) {
			sb_free(&x.json);
			return ctl_redis_error(c, key);
		}
		int wrong = strcmp(type->str, "zset") != 0 && strcmp(type->str, "none") != 0;
		if (wrong)
			snprintf(c->r.err, sizeof c->r.err, "holds a %s, not a zset: left alone", type->str);
		freeReplyObject(type);
		if (wrong) {
			sb_free(&x.json);
			return ctl_redis_error(c, key);
		}
		struct rpipe p;
		rpipe_begin(&c->r, &p);
		rpipe_add(&c->r, &p, "MULTI");
		rpipe_add(&c->r, &p, "ZRANGE %s 0 -1", key);
		rpipe_add(&c->r, &p, "DEL %s", key);
		rpipe_add(&c->r, &p, "EXEC");
		redisReply *reps[4];
		rpipe_exec(&c->r, &p, reps);
		redisReply *ex = reps[3];
		if (!ex || ex->type != REDIS_REPLY_ARRAY || ex->elements != 2 ||
		    ex->element[0]->type != REDIS_REPLY_ARRAY) {
			if (ex && ex->type == REDIS_REPLY_ARRAY && ex->elements == 2 &&
			    ex->element[0]->type == REDIS_REPLY_ERROR)
				snprintf(c->r.err, sizeof c->r.err, "%s", ex->element[0]->str);
			status = ctl_redis_error(c, key);
		} else {
			const redisReply *m = ex->element[0];
			deleted = (long long)m->elements;
			if (set == S_RETRY || set == S_DEAD) {
				struct rpipe d;
				rpipe_begin(&c->r, &d);
				int nd = 0;
				for (size_t i = 0; i < m->elements; i++) {
					struct job j;
					job_parse(&j, m->element[i]->str, m->element[i]->len, NULL);
					if (j.obj && j.jid) {
						rpipe_add(&c->r, &d, "DEL " K_ATTEMPTS "%s", j.jid);
						nd++;
					}
					job_free(&j);
				}
				redisReply **dr = xcalloc((size_t)nd + 1, sizeof *dr);
				if (rpipe_exec(&c->r, &d, dr) > 0)
					ctl_error("warning: some attempts logs not deleted: %s", c->r.err);
				for (int i = 0; i < nd; i++)
					if (dr[i])
						freeReplyObject(dr[i]);
				free(dr);
			}
			if (!c->json && deleted > 0)
				printf("deleted %lld job(s) from %s\n", deleted, set_names[set]);
		}
		for (int k = 0; k < 4; k++)
			if (reps[k])
				freeReplyObject(reps[k]);
	}
	if (status != CTL_OK) {
		sb_free(&x.json);
		return status;
	}
	sb_free(&x.json);
	if (c->json) {
		struct sbuf b;
		sb_init(&b);
		sb_printf(&b, "{\"action\":\"delete\",\"set\":\"%s\",\"results\":[],\"done\":%lld}",
		          set_names[set], deleted);
		jprint(&b);
	}
	if (deleted == 0) {
		ctl_error("nothing to delete in %s", set_names[set]);
		return CTL_NOTHING;
	}
	return CTL_OK;
}

static int act_on_all(struct ctl *c, enum action a, int set, const struct filter *f)
{
	if (a == A_DELETE && !f->cls && (set == S_QUEUED || !f->queue))
		return delete_whole(c, set, f->queue);
	struct found fd = { 0 };
	if (find(c, BIT(set), f, 0, &fd) < 0) {
		found_free(&fd);
		return CTL_USAGE;
	}
	struct act x;
	act_init(&x, c, a);
	x.quiet_gone = 1;
	int status = CTL_OK;
	for (int i = 0; i < fd.n && status != CTL_USAGE; i++)
		status = ctl_worse(status, apply(&x, &fd.v[i]));
	if (fd.n == 0)
		ctl_error("no matching jobs in %s", set_names[set]);
	if (!c->json && fd.n > 0)
		printf("%s: %d of %d job(s) done\n", action_names[a], x.done, fd.n);
	if (x.done == 0)
		status = ctl_worse(status, CTL_NOTHING);
	act_finish(&x);
	found_free(&fd);
	return status;
}

static int parse_set(const char *s)
{
	if (!strcmp(s, "queued") || !strcmp(s, "queue") || !strcmp(s, "enqueued"))
		return S_QUEUED;
	if (!strcmp(s, "scheduled") || !strcmp(s, "schedule"))
		return S_SCHEDULED;
	if (!strcmp(s, "retry") || !strcmp(s, "retries"))
		return S_RETRY;
	if (!strcmp(s, "dead"))
		return S_DEAD;
	if (!strcmp(s, "running") || !strcmp(s, "busy"))
		return S_RUNNING;
	return -1;
}

int cmd_jobs(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "set", required_argument, NULL, 's' },
		{ "queue", required_argument, NULL, 'q' },
		{ "class", required_argument, NULL, 'C' },
		{ "limit", required_argument, NULL, 'l' },
		{ "all", no_argument, NULL, 'a' },
		CTL_COMMON_OPTS,
		{ 0, 0, 0, 0 },
	};
	int ch, set = -1, all = 0;
	long limit = 100;
	struct filter f = { 0 };
	ctl_getopt_reset();
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 's':
			if ((set = parse_set(optarg)) < 0) {
				ctl_error("jobs: unknown set \"%s\" (queued, scheduled, retry, dead, running)",
				          optarg);
				return CTL_USAGE;
			}
			break;
		case 'q': f.queue = optarg; break;
		case 'C': f.cls = optarg; break;
		case 'l': {
			char *end;
			limit = strtol(optarg, &end, 10);
			if (*end || end == optarg || limit < 0) {
				ctl_error("jobs: --limit wants a count (0 = no limit), not \"%s\"", optarg);
				return CTL_USAGE;
			}
			break;
		}
		case 'a': all = 1; break;
		default:
			if (!ctl_common_opt(c, ch, argv))
				return CTL_USAGE;
		}
	}
	int nargs = argc - optind;
	char **args = argv + optind;
	const char *sub = nargs ? args[0] : "list";
	if (nargs) {
		nargs--;
		args++;
	}
	if (f.queue && !*f.queue) {
		ctl_error("jobs: --queue wants a name");
		return CTL_USAGE;
	}
	if (!strcmp(sub, "list")) {
		if (nargs || all) {
			ctl_error("usage: cogworkerctl jobs list [--set S] [--queue Q] [--class C] [--limit N]");
			return CTL_USAGE;
		}
		unsigned sets = set >= 0 ? BIT(set)
		                         : BIT(S_QUEUED) | ZSETS | BIT(S_RUNNING);
		if (ctl_connect(c) != 0)
			return CTL_USAGE;
		return list_jobs(c, sets, &f, (int)limit);
	}
	if (!strcmp(sub, "show")) {
		if (nargs != 1 || all) {
			ctl_error("usage: cogworkerctl jobs show JID");
			return CTL_USAGE;
		}
		if (ctl_connect(c) != 0)
			return CTL_USAGE;
		return show_job(c, args[0]);
	}
	enum action a;
	if (!strcmp(sub, "retry"))
		a = A_RETRY;
	else if (!strcmp(sub, "delete"))
		a = A_DELETE;
	else if (!strcmp(sub, "kill"))
		a = A_KILL;
	else if (!strcmp(sub, "reschedule"))
		a = A_RESCHEDULE;
	else {
		ctl_error("jobs: unknown subcommand \"%s\" "
		          "(list, show, retry, delete, kill, reschedule)", sub);
		return CTL_USAGE;
	}
	if (set >= 0 && !(action_sets[a] & BIT(set))) {
		char sl[128];
		set_list(action_sets[a], sl, sizeof sl);
		ctl_error("jobs %s works on %s, not %s", sub, sl, set_names[set]);
		return CTL_USAGE;
	}
	double minutes = 0;
	if (a == A_RESCHEDULE) {
		if (all || nargs != 2) {
			ctl_error("usage: cogworkerctl jobs reschedule JID MINUTES");
			return CTL_USAGE;
		}
		char *end;
		minutes = strtod(args[1], &end);
		if (*end || end == args[1] || isnan(minutes)) {
			ctl_error("jobs reschedule: MINUTES must be a number, not \"%s\"", args[1]);
			return CTL_USAGE;
		}
		minutes = floor(minutes);
		if (minutes < 1)
			minutes = 1;
		if (minutes > 10080)
			minutes = 10080;
		nargs = 1;
	}
	if (all) {
		if (nargs) {
			ctl_error("jobs %s: give JIDs or --all, not both", sub);
			return CTL_USAGE;
		}
		if (set < 0) {
			char sl[128];
			set_list(action_sets[a], sl, sizeof sl);
			ctl_error("jobs %s --all needs --set (%s)", sub, sl);
			return CTL_USAGE;
		}
		if (a != A_RETRY && !c->yes) {
			ctl_error("jobs %s --all --set %s is destructive: add --yes", sub, set_names[set]);
			return CTL_USAGE;
		}
		if (ctl_connect(c) != 0)
			return CTL_USAGE;
		return act_on_all(c, a, set, &f);
	}
	if (nargs == 0) {
		ctl_error("usage: cogworkerctl jobs %s JID... | --all --set SET", sub);
		return CTL_USAGE;
	}
	if (ctl_connect(c) != 0)
		return CTL_USAGE;
	return act_on_args(c, a, set >= 0 ? BIT(set) : action_sets[a], &f, nargs, args, minutes);
}
