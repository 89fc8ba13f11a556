/* SPDX-License-Identifier: MIT */
/*
 * grouplimits.c: the groups of fair share as Redis holds them (doc/protocol.md §7.35), read
 * for cogworkerctl (groups, queues, top, the dashboard) and the daemon's /metrics: one
 * implementation, so all show the same thing. Nothing is written.
 *
 * The classes with groups and their limits come from cogworker:limits (ADMIT declares
 * group_by, group_concurrency and group_rate_limit there at each start). The groups with
 * jobs set aside are the members of cogworker:groups:<class>; groups whose jobs all run
 * are found only by a SCAN of their slots (asked for by cogworkerctl groups, never by
 * /metrics, which must stay cheap whatever the keyspace). Then, per group, in one
 * pipelined round trip: its line's length, its live slots (score = expiry on Redis's
 * clock: a dead holder's expired lease is not counted even before a script trims it),
 * its starts in the window.
 *
 * Bounded: at most GROUPS_READ_MAX groups per class per read, the first of the index by its
 * order (the next look soonest: ZRANGE 0 N-1, cheap whatever the index holds), because
 * each group costs three commands and the readers read often (each scrape, top each
 * second): 100 000 tenants waiting at once were 300 000 commands per read. Most waiting
 * first would need every line's ZCARD, the cost being bounded. What is cut is said, not
 * hidden: ZCARD of the index gives the exact number of groups waiting, and each row carries
 * how many of its class were not read. The walk over the lines (cogworkerctl jobs show and
 * list, the dashboard's searches) takes the same head of each index (index_head), and says
 * how many lines it left.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>
#include "exporter.h"
#include "group.h"
#include "grouplimits.h"
#include "job.h"
#include "json.h"
#include "keys.h"

struct grouped_class {
	char *cls;
	int n, rate_n;
	double window;
};

void group_limits_free(struct group_row *g, int n)
{
	for (int i = 0; i < n; i++) {
		free(g[i].cls);
		free(g[i].group);
	}
	free(g);
}

/* The classes whose declaration has group_by (and only, if given). */
static int grouped_classes(struct rconn *r, const char *only, struct grouped_class **out)
{
	redisReply *all = rcmd(r, "HGETALL %s", K_LIMITS);
	if (!all)
		return -1;
	int count = 0;
	size_t pairs = all->type == REDIS_REPLY_ARRAY ? all->elements / 2 : 0;
	struct grouped_class *c = xcalloc(pairs + 1, sizeof *c);
	for (size_t i = 0; i < pairs; i++) {
		const redisReply *k = all->element[2 * i], *v = all->element[2 * i + 1];
		if (only && (k->len != strlen(only) || memcmp(k->str, only, k->len) != 0))
			continue;
		cJSON *o = job_json_parse(v->str, v->len);
		const cJSON *by = cJSON_GetObjectItemCaseSensitive(o, "group_by");
		const cJSON *gn = cJSON_GetObjectItemCaseSensitive(o, "group_concurrency");
		const cJSON *gr = cJSON_GetObjectItemCaseSensitive(o, "group_rate_limit");
		if (cJSON_IsString(by)) {
			struct grouped_class *g = &c[count++];
			g->cls = xstrndup(k->str, k->len);
			if (cJSON_IsNumber(gn) && gn->valuedouble >= 1)
				g->n = (int)gn->valuedouble;
			if (cJSON_IsString(gr) &&
			    conf_parse_rate(gr->valuestring, &g->rate_n, &g->window) != 0)
				g->rate_n = 0;
		}
		if (o)
			cJSON_Delete(o);
	}
	freeReplyObject(all);
	*out = c;
	return count;
}

struct rows {
	struct group_row *v;
	int n, cap;
};

/* Is group g among the rows from `from` on (its class's)? */
static int has_row(const struct rows *rs, int from, const char *g, size_t len)
{
	for (int i = from; i < rs->n; i++)
		if (strlen(rs->v[i].group) == len && memcmp(rs->v[i].group, g, len) == 0)
			return 1;
	return 0;
}

static void add_row(struct rows *rs, const struct grouped_class *c, const char *g, size_t len)
{
	if (rs->n == rs->cap) {
		rs->cap = rs->cap ? rs->cap * 2 : 16;
		rs->v = xrealloc(rs->v, (size_t)rs->cap * sizeof *rs->v);
	}
	struct group_row *row = &rs->v[rs->n++];
	memset(row, 0, sizeof *row);
	row->cls = xstrdup(c->cls);
	row->group = xstrndup(g, len);
	row->n = c->n;
	row->rate_n = c->rate_n;
	row->window = c->window;
}

/* Groups with slots held, found by their slot keys, added to the class's rows (from `from`
 * on) while they are fewer than GROUPS_READ_MAX; *cut when one more was found. -1 only when
 * the connection is lost. */
static int scan_running(struct rconn *r, const struct grouped_class *c, struct rows *rs,
                        int from, int *cut)
{
	char *esc = redis_glob_escape(c->cls);
	char *prefix = xasprintf(K_GROUP_SLOTS "%s:", c->cls);
	size_t plen = strlen(prefix);
	int rc = 0;
	for (char cursor[32] = "0";;) {
		redisReply *rep = rcmd(r, "SCAN %s MATCH " K_GROUP_SLOTS "%s:* COUNT 1000", cursor,
		                       esc);
		if (!rep) {
			rc = r->unavailable ? -1 : 0;
			break;
		}
		if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2) {
			const redisReply *keys = rep->element[1];
			for (size_t i = 0; i < keys->elements && !*cut; i++) {
				const char *g = keys->element[i]->str + plen;
				size_t len = keys->element[i]->len - plen;
				if (keys->element[i]->len < plen || has_row(rs, from, g, len))
					continue;       /* found twice: waiting and by the SCAN */
				if (rs->n - from >= GROUPS_READ_MAX)
					*cut = 1;
				else
					add_row(rs, c, g, len);
			}
			snprintf(cursor, sizeof cursor, "%s", *cut ? "0" : rep->element[0]->str);
		} else {
			snprintf(cursor, sizeof cursor, "0");
		}
		freeReplyObject(rep);
		if (strcmp(cursor, "0") == 0)
			break;
	}
	free(esc);
	free(prefix);
	return rc;
}

static int by_class_waiting(const void *a, const void *b)
{
	const struct group_row *x = a, *y = b;
	int c = strcmp(x->cls, y->cls);
	if (c)
		return c;
	if (x->waiting != y->waiting)
		return x->waiting > y->waiting ? -1 : 1;
	return strcmp(x->group, y->group);
}

/* Each row's counts, in one pipelined round trip. */
static int count_rows(struct rconn *r, struct rows *rs, double now)
{
	char t_now[32];
	job_format_time(now, t_now);
	struct rpipe p;
	rpipe_begin(r, &p);
	for (int i = 0; i < rs->n; i++) {
		const struct group_row *g = &rs->v[i];
		char t_window[32];
		job_format_time(now - g->window, t_window);
		rpipe_add(r, &p, "ZCARD %s%s:%s", K_GROUP_JOBS, g->cls, g->group);
		rpipe_add(r, &p, "ZCOUNT %s%s:%s (%s +inf", K_GROUP_SLOTS, g->cls, g->group, t_now);
		rpipe_add(r, &p, "ZCOUNT %s%s:%s (%s +inf", K_GROUP_RATE, g->cls, g->group, t_window);
	}
	redisReply **rep = xcalloc((size_t)rs->n * 3 + 1, sizeof *rep);
	int failures = rpipe_exec(r, &p, rep);
	for (int i = 0; i < rs->n && !failures; i++) {
		rs->v[i].waiting = reply_integer(rep[3 * i], 0);
		rs->v[i].running = reply_integer(rep[3 * i + 1], 0);
		rs->v[i].window_starts = rs->v[i].rate_n ? reply_integer(rep[3 * i + 2], 0) : 0;
	}
	for (int i = 0; i < rs->n * 3; i++)
		if (rep[i])
			freeReplyObject(rep[i]);
	free(rep);
	return failures ? -1 : 0;
}

/* The head of the class's index, the one choice of what a read or a walk looks at: its
 * ZCARD into *groups and its first GROUPS_READ_MAX members (*head, to free), in one round
 * trip. */
static int index_head(struct rconn *r, const char *cls, long long *groups, redisReply **head)
{
	struct rpipe p;
	redisReply *rep[2];
	rpipe_begin(r, &p);
	rpipe_add(r, &p, "ZCARD %s%s", K_GROUPS, cls);
	rpipe_add(r, &p, "ZRANGE %s%s 0 %d", K_GROUPS, cls, GROUPS_READ_MAX - 1);
	int failures = rpipe_exec(r, &p, rep);
	*head = NULL;
	if (!failures) {
		*groups = reply_integer(rep[0], 0);
		*head = rep[1];
		rep[1] = NULL;
	}
	for (int i = 0; i < 2; i++)
		if (rep[i])
			freeReplyObject(rep[i]);
	return failures ? -1 : 0;
}

/* The class's groups with jobs set aside: the head of its index as rows, and *groups. */
static int read_index(struct rconn *r, const struct grouped_class *c, struct rows *rs,
                      long long *groups)
{
	redisReply *g;
	if (index_head(r, c->cls, groups, &g) != 0)
		return -1;
	for (size_t k = 0; g->type == REDIS_REPLY_ARRAY && k < g->elements; k++)
		add_row(rs, c, g->element[k]->str, g->element[k]->len);
	freeReplyObject(g);
	return 0;
}

int group_limits_read(struct rconn *r, const char *only, int with_running,
                      struct group_row **out, int *n, const char **what)
{
	*out = NULL;
	*n = 0;
	*what = K_LIMITS;
	double now = redis_time(r);
	if (now < 0)
		return -1;
	struct grouped_class *c;
	int nc = grouped_classes(r, only, &c);
	if (nc < 0)
		return -1;
	struct rows rs = { 0 };
	int rc = 0;
	for (int i = 0; i < nc && rc == 0; i++) {
		int from = rs.n, cut = 0;
		long long groups = 0, read = 0;
		if (read_index(r, &c[i], &rs, &groups) != 0) {
			*what = K_GROUPS;
			rc = -1;
			break;
		}
		read = rs.n - from;
		/* Cut already: the SCAN's groups would all be past the bound. */
		if (with_running && groups > read)
			cut = 1;
		else if (with_running && scan_running(r, &c[i], &rs, from, &cut) != 0) {
			*what = "SCAN";
			rc = -1;
		}
		for (int k = from; k < rs.n; k++) {
			rs.v[k].class_groups = groups;
			rs.v[k].class_not_read = groups > read ? groups - read : 0;
			rs.v[k].running_cut = cut;
		}
	}
	if (rc == 0 && rs.n && count_rows(r, &rs, now) != 0) {
		*what = "group keys";
		rc = -1;
	}
	for (int i = 0; i < nc; i++)
		free(c[i].cls);
	free(c);
	if (rc) {
		group_limits_free(rs.v, rs.n);
		return -1;
	}
	if (rs.n)
		qsort(rs.v, (size_t)rs.n, sizeof *rs.v, by_class_waiting);
	*out = rs.v;
	*n = rs.n;
	return 0;
}

int group_limits_lines(struct rconn *r, char ***keys, int *n, long long *not_read)
{
	*keys = NULL;
	*n = 0;
	*not_read = 0;
	struct grouped_class *c;
	int nc = grouped_classes(r, NULL, &c);
	if (nc < 0)
		return -1;
	int rc = 0, cap = 0;
	for (int i = 0; i < nc; i++) {
		redisReply *g = NULL;
		long long groups = 0;
		if (rc == 0 && index_head(r, c[i].cls, &groups, &g) != 0)
			rc = -1;
		for (size_t k = 0; g && g->type == REDIS_REPLY_ARRAY && k < g->elements; k++) {
			if (*n == cap) {
				cap = cap ? cap * 2 : 16;
				*keys = xrealloc(*keys, (size_t)cap * sizeof **keys);
			}
			(*keys)[(*n)++] = xasprintf(K_GROUP_JOBS "%s:%.*s", c[i].cls,
			                            (int)g->element[k]->len, g->element[k]->str);
		}
		if (g) {
			long long read = g->type == REDIS_REPLY_ARRAY ? (long long)g->elements : 0;
			*not_read += groups > read ? groups - read : 0;
			freeReplyObject(g);
		}
		free(c[i].cls);
	}
	free(c);
	return rc;
}

int group_limits_job_group(struct rconn *r, const char *cls, const char *raw, size_t len,
                           char **group, char **by, const char **why)
{
	*group = *by = NULL;
	*why = NULL;
	redisReply *d = rcmd(r, "HGET %s %s", K_LIMITS, cls);
	if (!d)
		return -1;
	cJSON *o = d->type == REDIS_REPLY_STRING ? job_json_parse(d->str, d->len) : NULL;
	const cJSON *gb = cJSON_GetObjectItemCaseSensitive(o, "group_by");
	struct group_path path;
	const char *err;
	int found = 0;
	if (cJSON_IsString(gb) && group_path_parse(gb->valuestring, &path, &err) == 0) {
		if (group_of(raw, len, &path, group, why) != GROUP_INVALID)
			*why = NULL;
		*by = xstrdup(gb->valuestring);
		group_path_free(&path);
		found = 1;
	}
	if (o)
		cJSON_Delete(o);
	freeReplyObject(d);
	return found;
}

/* A group in a line of text: as it is, or JSON-quoted when it would not read as one word
 * ("", a space, a comma, a control character, a quote). */
static void group_name(struct sbuf *b, const char *g)
{
	int plain = *g != '\0';
	for (const unsigned char *p = (const unsigned char *)g; *p && plain; p++)
		plain = *p > 0x20 && *p != ',' && *p != '"' && *p != 0x7f;
	if (plain) {
		sb_adds(b, g);
		return;
	}
	char *q = json_quote(g, strlen(g));
	sb_adds(b, q);
	free(q);
}

int group_limits_waiting_line(const struct group_row *g, int n, int *i, int top,
                              struct sbuf *out)
{
	while (*i < n) {
		int k = *i;
		long long jobs = 0, groups = 0;
		for (; k < n && strcmp(g[k].cls, g[*i].cls) == 0; k++) {
			jobs += g[k].waiting;
			groups += g[k].waiting > 0;
		}
		int from = *i;
		*i = k;
		if (!jobs)
			continue;
		sb_printf(out, "%s: %lld job(s) set aside in %lld group(s)", g[from].cls, jobs, groups);
		if (g[from].class_not_read)
			sb_printf(out, " read, %lld more group(s) not read", g[from].class_not_read);
		sb_addc(out, ':');
		/* Most waiting first within the class (group_limits_read's order). */
		int shown = 0;
		for (int x = from; x < k && g[x].waiting > 0 && shown < top; x++, shown++) {
			sb_adds(out, shown ? ", " : " ");
			group_name(out, g[x].group);
			sb_printf(out, " %lld", g[x].waiting);
		}
		if (groups > shown)
			sb_printf(out, " (and %lld more)", groups - shown);
		return 1;
	}
	return 0;
}

static void class_label(struct sbuf *b, const char *name, const char *cls)
{
	sb_printf(b, "%s{class=\"", name);
	exporter_label_value(b, cls, strlen(cls));
	sb_addc(b, '"');
}

void group_limits_render(const struct group_row *g, int n, int top, struct sbuf *b)
{
	/* The groups waiting are exact (the groups read that wait, and those not read: each is
	 * in the index for its line); the jobs are those of the groups read. */
	static const char *const names[] = { "cogworkerd_groups_waiting",
	                                     "cogworkerd_group_jobs_waiting",
	                                     "cogworkerd_groups_not_read" };
	for (int which = 0; which < 3; which++) {
		sb_printf(b, "# TYPE %s gauge\n", names[which]);
		for (int i = 0; i < n;) {
			long long count[3] = { g[i].class_not_read, 0, g[i].class_not_read };
			int k = i;
			for (; k < n && strcmp(g[k].cls, g[i].cls) == 0; k++) {
				count[0] += g[k].waiting > 0;
				count[1] += g[k].waiting;
			}
			class_label(b, names[which], g[i].cls);
			sb_printf(b, "} %lld\n", count[which]);
			i = k;
		}
	}
	/* Rows come most waiting first within each class: the first `top` of each. */
	sb_adds(b, "# TYPE cogworkerd_group_waiting gauge\n");
	for (int i = 0, rank = 0; i < n; i++) {
		rank = i > 0 && strcmp(g[i].cls, g[i - 1].cls) == 0 ? rank + 1 : 0;
		if (rank >= top || g[i].waiting == 0)
			continue;
		class_label(b, "cogworkerd_group_waiting", g[i].cls);
		sb_adds(b, ",group=\"");
		exporter_label_value(b, g[i].group, strlen(g[i].group));
		sb_printf(b, "\"} %lld\n", g[i].waiting);
	}
}
