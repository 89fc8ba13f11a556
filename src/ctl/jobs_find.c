/* SPDX-License-Identifier: MIT */
/*
 * jobs_find.c: where a job is, for every `cogworkerctl jobs` subcommand.
 *
 * Sets: queued (cogworker:queue:<q>), scheduled (cogworker:schedule), retry, dead,
 * running (cogworker:workers:<id> of every process), waiting (the jobs a live process
 * holds for a max_concurrency slot, cogworker:waiting:<id>, each with its in-progress
 * entry as payload), after (the jobs waiting for other jobs, cogworker:batch:waiting, each
 * with the payload its cogworker:batch:wait:<jid> keeps), group (the jobs set aside for
 * their fair-share group, cogworker:group_jobs:<class>:<group>, doc/protocol.md §7.35,
 * each line oldest first) and in progress (the in-progress
 * lists of reliable fetch, searched by `show` only). They are walked in the Web UI's order, a
 * page at a time, so a long set never has to fit in one reply. A JID argument is matched
 * against each entry's jid, or else against the raw member itself, so corrupt entries can
 * be addressed by their exact text. What is found is kept as read, byte for byte: the
 * actions hand that exact member back to Redis (LREM, ZREM, the scripts' checks).
 *
 * The dashboard never walks a whole set: it reads a page by index (jobs_page: from an
 * offset, at most a budget of entries read), and its other searches stop after
 * c->scan_budget entries of each list or sorted set (0 = no limit, the command line's).
 */
#include <stdlib.h>
#include <string.h>
#include "grouplimits.h"
#include "jobs_cut.h"
#include "jobs_find.h"
#include "json.h"

#define PAGE 100

/* Called for each matching entry (parsed); 0 = go on, 1 = stop. */
typedef int (*entry_cb)(struct entry *e, void *ctx);

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
		.run_at = e->run_at, .handler = e->handler ? xstrdup(e->handler) : NULL,
		.limit = e->limit, .since = e->since, .size = e->size,
		.summary = e->summary ? xstrndup(e->summary, e->summary_len) : NULL,
		.summary_len = e->summary_len,
	};
	jobs_entry_parse(c);
	return f->limit > 0 && f->n >= f->limit;
}

/* Filter, parse and hand one element to cb. */
static int consider(struct entry *e, const struct filter *f, entry_cb cb, void *ctx)
{
	int raw_eq = 0;
	/* A cut entry (jobs_cut.c) is matched by its summary's jid, never by its head. */
	if (f->arg && !e->size) {
		size_t alen = strlen(f->arg);
		raw_eq = e->raw_len == alen && memcmp(e->raw, f->arg, alen) == 0;
		if (!raw_eq && (alen == 0 || !memmem(e->raw, e->raw_len, f->arg, alen)))
			return 0;
	}
	jobs_entry_parse(e);
	int ok = 1;
	if (f->text && !memmem(e->raw, e->raw_len, f->text, strlen(f->text)) &&
	    !(e->size && memmem(e->summary, e->summary_len, f->text, strlen(f->text))))
		ok = 0;
	if (ok && f->arg && !raw_eq && !(e->j.obj && e->j.jid && strcmp(e->j.jid, f->arg) == 0))
		ok = 0;
	if (ok && f->cls) {
		const char *cls = jobs_entry_class(e);
		ok = cls && strcmp(cls, f->cls) == 0;
	}
	if (ok && f->queue && e->set != S_QUEUED) {
		const char *q = jobs_payload_queue(e);
		ok = q && strcmp(q, f->queue) == 0;
	}
	int r = ok ? cb(e, ctx) : 0;
	job_free(&e->j);
	return r;
}

/* Which part of a list or sorted set a scan reads: from index from, at most budget
 * entries (0 = to the end); next is where it stopped (-1: at the end). */
struct window {
	long from, budget;
	long read, next;
	/* The group set: the lines walked, and those left (the bound, the budget), unless the
	 * walk stopped because it found what it looked for. */
	int group_lines;
	long long group_lines_not_read;
};

/* One more entry read at index i; 1 when the budget is spent. */
static int window_step(struct window *w, long i)
{
	w->read++;
	w->next = i + 1;
	return w->budget > 0 && w->read >= w->budget;
}

/* The in-progress entry of jid among the reply's elements (a jobs_read), into e: 1, or 0
 * when it is not there. */
static int listed_job(const redisReply *list, const char *jid, struct entry *e)
{
	for (size_t k = 0; list && jid && k < list->elements; k++) {
		struct entry x = { 0 };
		if (!jobs_entry_member(&x, list->element[k]))
			continue;
		jobs_entry_parse(&x);
		int same = x.j.obj && x.j.jid && strcmp(x.j.jid, jid) == 0;
		job_free(&x.j);
		if (same) {
			*e = x;
			return 1;
		}
	}
	return 0;
}

/* The waiting set: what each live process publishes, each job with its in-progress entry
 * (read once per process that has any); basic fetch keeps none, and the record's class,
 * queue and jid stand in for it. 0, 1 (cb stopped), -1 after the message. */
static int scan_waiting(struct ctl *c, const struct filter *f, entry_cb cb, void *ctx)
{
	struct process_info *p;
	int np;
	if (ctl_read_processes(c, 0, &p, &np) != 0)
		return -1;
	struct waiting_job *w;
	int nw, stop = 0, rc = 0;
	ctl_waiting_jobs(p, np, &w, &nw);
	for (int i = 0; i < np && !stop && !rc; i++) {
		redisReply *list = NULL;
		char *key = xasprintf(K_WAITING "%s", p[i].identity);
		for (int k = 0; k < nw && !stop; k++) {
			if (w[k].identity != p[i].identity)
				continue;
			if (!list) {
				char *lkey = xasprintf(K_INPROGRESS "%s", p[i].identity);
				const char *argv[] = { "LRANGE", "0", "-1" };
				list = jobs_read(c, lkey, 3, argv);
				free(lkey);
				if (!list && c->r.unavailable) {
					rc = ctl_redis_error(c, K_INPROGRESS);
					break;
				}
			}
			struct entry listed = { 0 };
			int raw = listed_job(list, w[k].jid, &listed);
			struct sbuf stand_in;
			sb_init(&stand_in);
			sb_adds(&stand_in, "{\"class\":");
			jstr(&stand_in, w[k].cls);
			sb_adds(&stand_in, ",\"queue\":");
			jstr(&stand_in, w[k].queue);
			sb_adds(&stand_in, ",\"jid\":");
			jstr(&stand_in, w[k].jid);
			sb_addc(&stand_in, '}');
			struct entry e = { .set = S_WAITING, .key = key, .process = (char *)p[i].identity,
			                   .raw = raw ? listed.raw : stand_in.s,
			                   .raw_len = raw ? listed.raw_len : stand_in.len,
			                   .size = listed.size, .summary = listed.summary,
			                   .summary_len = listed.summary_len,
			                   .qname = w[k].queue, .handler = w[k].handler,
			                   .limit = w[k].limit, .since = w[k].since };
			stop = consider(&e, f, cb, ctx);
			sb_free(&stand_in);
		}
		if (list)
			freeReplyObject(list);
		free(key);
	}
	ctl_free_waiting(w, nw);
	ctl_free_processes(p, np);
	return rc ? -1 : stop;
}

/* One job of the after set from its wait hash's HMGET payload queue reply and its score. */
static int after_entry(const char *jid, const redisReply *h, double since,
                       const struct filter *f, entry_cb cb, void *ctx)
{
	struct entry e = { .set = S_AFTER, .since = since };
	if (!h || h->type != REDIS_REPLY_ARRAY || h->elements != 2 ||
	    !jobs_entry_member(&e, h->element[0]))
		return 0;               /* released or buried meanwhile */
	char *key = xasprintf(K_WAIT "%s", jid);
	e.key = key;
	e.qname = h->element[1]->str;
	int stop = consider(&e, f, cb, ctx);
	free(key);
	return stop;
}

/* The after set (doc/protocol.md §7.34): cogworker:batch:waiting by index, oldest first,
 * PAGE at a time with one pipelined HMGET per job; a jid asked for is read from its wait
 * hash alone. 0, 1 (cb stopped), -1 after the message. */
static int scan_after(struct ctl *c, const struct filter *f, entry_cb cb, void *ctx,
                      struct window *w)
{
	if (f->arg && f->arg[0] != '{') {
		char *wkey = xasprintf(K_WAIT "%s", f->arg);
		const char *argv[] = { "HMGET", "payload", "queue" };
		redisReply *h = jobs_read(c, wkey, 3, argv);
		free(wkey);
		redisReply *s = h ? rcmd(&c->r, "ZSCORE " K_BATCH_WAITING " %s", f->arg) : NULL;
		int stop = h && s ? after_entry(f->arg, h, s->str ? strtod(s->str, NULL) : 0, f, cb,
		                                ctx) : 0;
		if (h)
			freeReplyObject(h);
		if (s)
			freeReplyObject(s);
		return h && s ? stop : (ctl_redis_error(c, K_WAIT), -1);
	}
	int stop = 0;
	for (long start = w->from; !stop; start += PAGE) {
		redisReply *rep = rcmd(&c->r, "ZRANGE " K_BATCH_WAITING " %ld %ld WITHSCORES", start,
		                       start + PAGE - 1);
		if (!rep)
			return ctl_redis_error(c, K_BATCH_WAITING), -1;
		size_t n = rep->elements / 2;
		struct rpipe p;
		const char *argv[] = { "HMGET", "payload", "queue" };
		jobs_cut_begin(c);
		rpipe_begin(&c->r, &p);
		for (size_t i = 0; i < n; i++)
			rpipe_add(&c->r, &p, "HMGET " K_WAIT "%s payload queue", rep->element[2 * i]->str);
		redisReply **hs = xcalloc(n + 1, sizeof *hs);
		int failed = rpipe_exec(&c->r, &p, hs);
		for (size_t i = 0; i < n; i++)
			jobs_cut_take(c, hs[i]);
		jobs_cut_end(c);
		for (size_t i = 0; i < n && !failed; i++) {
			char *wkey = xasprintf(K_WAIT "%s", rep->element[2 * i]->str);
			jobs_cut_peek(c, wkey, 3, argv, hs[i]);
			free(wkey);
		}
		int spent = 0;
		for (size_t i = 0; i < n && !stop && !spent && !failed; i++) {
			stop = after_entry(rep->element[2 * i]->str, hs[i],
			                   strtod(rep->element[2 * i + 1]->str, NULL), f, cb, ctx);
			spent = window_step(w, start + (long)i);
		}
		for (size_t i = 0; i < n; i++)
			if (hs[i])
				freeReplyObject(hs[i]);
		free(hs);
		freeReplyObject(rep);
		if (failed)
			return ctl_redis_error(c, K_WAIT), -1;
		if (n < PAGE && !stop && !spent)
			w->next = -1;
		if (n < PAGE || spent)
			break;
	}
	return stop;
}

/* The entries of one sorted set (dead newest first, else lowest score first), PAGE at a
 * time within w: 0, 1 (cb stopped), -1 after the message (tolerant: a key unreadable for
 * another reason than availability is skipped, 0). */
static int scan_zset(struct ctl *c, int set, const char *key, const struct filter *f,
                     int tolerant, entry_cb cb, void *ctx, struct window *w)
{
	int stop = 0;
	for (long start = w->from; !stop; start += PAGE) {
		char a[32], b[32];
		snprintf(a, sizeof a, "%ld", start);
		snprintf(b, sizeof b, "%ld", start + PAGE - 1);
		const char *argv[] = { set == S_DEAD ? "ZREVRANGE" : "ZRANGE", a, b, "WITHSCORES" };
		redisReply *rep = jobs_read(c, key, 4, argv);
		if (!rep) {
			if (tolerant && !c->r.unavailable) {
				ctl_error("warning: %s skipped: %s", key, c->r.err);
				return 0;
			}
			ctl_redis_error(c, key);
			return -1;
		}
		size_t n = rep->elements / 2;
		int spent = 0;
		for (size_t i = 0; i < n && !stop && !spent; i++) {
			const redisReply *m = rep->element[2 * i], *s = rep->element[2 * i + 1];
			struct entry e = { .set = set, .key = (char *)key,
			                   .score = strtod(s->str, NULL), .has_score = 1 };
			if (jobs_entry_member(&e, m))
				stop = consider(&e, f, cb, ctx);
			spent = window_step(w, start + (long)i);
		}
		freeReplyObject(rep);
		if (n < PAGE && !stop && !spent)
			w->next = -1;
		if (n < PAGE || spent)
			break;
	}
	return stop;
}

/* The group set: the lines of every class with group limits, at most GROUPS_READ_MAX per
 * class (src/grouplimits.c names them, the groups its readers count), each a sorted set by
 * enqueue time, oldest first; a budget bounds the entries read over all the lines (a tenant
 * per line: thousands of them). What was not walked is counted in w, so that a search
 * that found nothing never claims the lines it did not read. */
static int scan_group(struct ctl *c, const struct filter *f, int tolerant, entry_cb cb,
                      void *ctx, struct window *w)
{
	char **keys;
	int n;
	long long beyond;
	if (group_limits_lines(&c->r, &keys, &n, &beyond) != 0) {
		ctl_redis_error(c, K_GROUPS);
		return -1;
	}
	int rc = 0, walked = 0;
	for (int i = 0; i < n; i++) {
		if (rc == 0 && !(w->budget > 0 && w->read >= w->budget)) {
			rc = scan_zset(c, S_GROUP, keys[i], f, tolerant, cb, ctx, w);
			walked++;
		}
		free(keys[i]);
	}
	free(keys);
	w->group_lines = walked;
	w->group_lines_not_read = rc == 1 ? 0 : beyond + (n - walked);
	return rc;
}

/*
 * Visit the entries of one set, in the Web UI's order (queues by name, each from index 0;
 * schedule and retry soonest first; dead newest first), PAGE at a time. Returns 0 when
 * done, 1 when cb stopped it, -1 after an error message. With tolerant, a key that can't
 * be read for a reason other than availability is skipped with a warning. w (or, without
 * one, c->scan_budget entries from index 0 of each key) bounds what is read.
 */
static int scan(struct ctl *c, int set, const struct filter *f, int tolerant, entry_cb cb,
                void *ctx, struct window *w)
{
	int stop = 0;
	struct window own = { .budget = c->scan_budget, .next = -1 };
	if (!w)
		w = &own;
	if (jobs_zset_keys[set])
		return scan_zset(c, set, jobs_zset_keys[set], f, tolerant, cb, ctx, w);
	if (set == S_GROUP)
		return scan_group(c, f, tolerant, cb, ctx, w);
	if (set == S_QUEUED) {
		struct queue_info *qi = NULL;
		int nqi = 0;
		/* Under a scan budget (the dashboard), no SCAN of the keyspace either: the queues
		 * listed or paused only. */
		if (!f->queue && ctl_queue_names(c, 1, c->scan_budget == 0, &qi, &nqi) != 0)
			return -1;
		size_t nq = f->queue ? 1 : (size_t)nqi;
		char **qs = xcalloc(nq + 1, sizeof *qs);
		for (size_t i = 0; i < nq; i++)
			qs[i] = xstrdup(f->queue ? f->queue : qi[i].name);
		ctl_free_queues(qi, nqi);
		int rc = 0;
		for (size_t i = 0; i < nq && !stop && rc == 0; i++) {
			char *key = xasprintf(K_QUEUE "%s", qs[i]);
			int spent = 0;
			w->read = 0;
			for (long start = w->from; !stop && !spent; start += PAGE) {
				char a[32], b[32];
				snprintf(a, sizeof a, "%ld", start);
				snprintf(b, sizeof b, "%ld", start + PAGE - 1);
				const char *argv[] = { "LRANGE", a, b };
				redisReply *rep = jobs_read(c, key, 3, argv);
				if (!rep) {
					if (tolerant && !c->r.unavailable) {
						ctl_error("warning: %s skipped: %s", key, c->r.err);
						break;
					}
					ctl_redis_error(c, key);
					rc = -1;
					break;
				}
				for (size_t k = 0; k < rep->elements && !stop && !spent; k++) {
					struct entry e = { .set = set, .key = key, .qname = qs[i] };
					if (jobs_entry_member(&e, rep->element[k]))
						stop = consider(&e, f, cb, ctx);
					spent = window_step(w, start + (long)k);
				}
				size_t got = rep->elements;
				freeReplyObject(rep);
				if (got < PAGE && !stop && !spent)
					w->next = -1;
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
	if (set == S_WAITING)
		return scan_waiting(c, f, cb, ctx);
	if (set == S_AFTER)
		return scan_after(c, f, cb, ctx, w);
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
		const char *argv[] = { set == S_RUNNING ? "HVALS" : "LRANGE", "0", "-1" };
		redisReply *rep = jobs_read(c, key, set == S_RUNNING ? 1 : 3, argv);
		if (!rep) {
			if (tolerant && !c->r.unavailable) {
				ctl_error("warning: %s skipped: %s", key, c->r.err);
			} else {
				ctl_redis_error(c, key);
				rc = -1;
			}
		}
		for (size_t k = 0; rep && k < rep->elements && !stop; k++) {
			struct entry e = { .set = set, .key = key, .process = id };
			if (!jobs_entry_member(&e, rep->element[k]))
				continue;
			char *qname = NULL;
			if (set == S_RUNNING) {
				/* The workers entry, or its summary when cut: the job is its payload. */
				const char *v = e.size ? e.summary : e.raw;
				size_t vlen = e.size ? e.summary_len : e.raw_len, ps, pl;
				if (json_member_span(v, vlen, "payload", &ps, &pl) == 0) {
					if (e.size) {
						e.summary = (char *)v + ps;
						e.summary_len = pl;
					} else {
						e.raw = (char *)v + ps;
						e.raw_len = pl;
					}
				}
				cJSON *work = job_json_parse(v, vlen);
				const cJSON *q = work ? cJSON_GetObjectItemCaseSensitive(work, "queue") : NULL;
				const cJSON *ra = work ? cJSON_GetObjectItemCaseSensitive(work, "run_at")
				                       : NULL;
				if (cJSON_IsString(q))
					qname = xstrdup(q->valuestring);
				if (cJSON_IsNumber(ra))
					e.run_at = (long long)ra->valuedouble;
				if (work)
					cJSON_Delete(work);
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

int jobs_find(struct ctl *c, unsigned sets, const struct filter *f, int tolerant,
                struct found *out)
{
	for (int s = 0; s < S_COUNT; s++) {
		if (!(sets & BIT(s)))
			continue;
		struct window w = { .budget = c->scan_budget, .next = -1 };
		int r = scan(c, s, f, tolerant, collect, out, &w);
		if (s == S_GROUP) {
			out->group_lines = w.group_lines;
			out->group_lines_not_read = w.group_lines_not_read;
		}
		if (r < 0)
			return -1;
		if (r > 0)
			break;
	}
	return 0;
}

int jobs_find_at(struct ctl *c, int set, double score, const struct filter *f,
                 struct found *out)
{
	const char *key = jobs_zset_keys[set];
	/* The score came back as text with 6 decimals: a microsecond either way finds it. */
	char lo[48], hi[48], n[16];
	snprintf(lo, sizeof lo, "%.6f", score - 1e-6);
	snprintf(hi, sizeof hi, "%.6f", score + 1e-6);
	snprintf(n, sizeof n, "%d", PAGE);
	const char *argv[] = { "ZRANGEBYSCORE", lo, hi, "WITHSCORES", "LIMIT", "0", n };
	redisReply *rep = jobs_read(c, key, 7, argv);
	if (!rep) {
		ctl_redis_error(c, key);
		return -1;
	}
	int stop = 0;
	for (size_t i = 0; i + 1 < rep->elements && !stop; i += 2) {
		const redisReply *m = rep->element[i], *sc = rep->element[i + 1];
		struct entry e = { .set = set, .key = (char *)key, .score = strtod(sc->str, NULL),
		                   .has_score = 1 };
		if (jobs_entry_member(&e, m))
			stop = consider(&e, f, collect, out);
	}
	freeReplyObject(rep);
	return 0;
}

/* The size of the list or sorted set a page is read from; -1 after an error (said). */
static long long set_size(struct ctl *c, int set, const char *queue)
{
	redisReply *rep = set == S_QUEUED ? rcmd(&c->r, "LLEN " K_QUEUE "%s", queue)
	                  : rcmd(&c->r, "ZCARD %s", set == S_AFTER ? K_BATCH_WAITING
	                                                           : jobs_zset_keys[set]);
	if (!rep) {
		ctl_redis_error(c, set == S_QUEUED ? "LLEN" : jobs_zset_keys[set]);
		return -1;
	}
	long long n = reply_integer(rep, 0);
	freeReplyObject(rep);
	return n;
}

int jobs_page(struct ctl *c, int set, const struct filter *f, long from, int limit,
              long budget, struct found *out, struct page *pg)
{
	memset(pg, 0, sizeof *pg);
	pg->from = from;
	pg->next = -1;
	out->limit = limit;
	if (set == S_QUEUED && !f->queue) {
		ctl_error("a page of queued jobs needs a queue");
		return -1;
	}
	if (jobs_zset_keys[set] || set == S_QUEUED || set == S_AFTER) {
		if ((pg->total = set_size(c, set, f->queue)) < 0)
			return -1;
		struct window w = { .from = from, .budget = budget, .next = -1 };
		if (scan(c, set, f, 0, collect, out, &w) < 0)
			return -1;
		pg->read = w.read;
		pg->next = w.next >= 0 && w.next < pg->total ? w.next : -1;
		return 0;
	}
	/* running: as many as the fleet runs at once, read whole and cut here */
	struct found all = { 0 };
	if (scan(c, set, f, 0, collect, &all, NULL) < 0) {
		jobs_found_free(&all);
		return -1;
	}
	pg->total = all.n;
	pg->read = all.n;
	for (int i = 0; i < all.n; i++) {
		if (i >= from && out->n < limit) {
			if (out->n == out->cap) {
				out->cap = out->cap ? out->cap * 2 : 16;
				out->v = xrealloc(out->v, sizeof *out->v * (size_t)out->cap);
			}
			out->v[out->n++] = all.v[i];
			memset(&all.v[i], 0, sizeof all.v[i]);
		} else if (i >= from && pg->next < 0) {
			pg->next = i;
		}
	}
	jobs_found_free(&all);
	return 0;
}

int ctl_job_whereabouts(struct ctl *c, const char *jid, char *out, size_t n)
{
	struct found f = { .limit = 1 };
	struct filter flt = { .arg = jid };
	if (jobs_find(c, BIT(S_QUEUED) | ZSETS | BIT(S_RUNNING) | BIT(S_WAITING) | BIT(S_GROUP) |
	              BIT(S_INPROGRESS), &flt, 1, &f) != 0)
		return -1;
	if (f.n == 0) {
		jobs_found_free(&f);
		return 0;
	}
	const struct entry *e = &f.v[0];
	char iso[32];
	ctl_iso_time(e->score, iso);
	switch (e->set) {
	case S_QUEUED: snprintf(out, n, "queued on %s", e->qname); break;
	case S_SCHEDULED: snprintf(out, n, "scheduled for %s", iso); break;
	case S_RETRY: snprintf(out, n, "in retry, next attempt at %s", iso); break;
	case S_DEAD: snprintf(out, n, "in dead since %s", iso); break;
	case S_RUNNING: snprintf(out, n, "running on %s", e->process); break;
	case S_WAITING: snprintf(out, n, "waiting for a slot on %s", e->process); break;
	case S_AFTER: snprintf(out, n, "waiting for other jobs"); break;
	case S_GROUP: snprintf(out, n, "set aside for its group (%s)", e->key); break;
	default: snprintf(out, n, "fetched by %s", e->process); break;
	}
	jobs_found_free(&f);
	return 1;
}
