/* SPDX-License-Identifier: MIT */
/*
 * queues.c: `cogworkerctl queues` (name, size, latency, paused) and
 * `queues pause|resume|clear Q` (doc/protocol.md §7.28):
 *
 *   pause / resume   SADD / SREM cogworker:paused_queues Q (jobs stay queued); pausing a
 *                    queue nothing knows (not listed, no jobs, no live reader) warns
 *   clear --yes      DEL cogworker:queue:Q
 *
 * Latency is cogworker's: now − (enqueued_at, else created_at) of the oldest job
 * (LINDEX −1), floored at 0 (§4.1), computed as the exporter does (src/exporter.c).
 *
 * Below the table, the jobs set aside for their fair-share group (§7.35), which have left
 * their queue for a line of their group: per class a line with how many, in how many
 * groups, and the GROUPS_SHOWN most waiting (src/grouplimits.c, as `groups` reads them;
 * --json keeps its array of queues: `groups --json` has them).
 *
 * Queue keys nobody listed are found by a SCAN of the whole keyspace; a caller that reads
 * often (top, each second) sets c->discover_every, and the SCAN then runs that rarely, the
 * names it found kept in c meanwhile.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "ctl.h"
#include "exporter.h"
#include "grouplimits.h"

#define GROUPS_SHOWN 5          /* groups named per class below the table (top N) */

void ctl_free_queues(struct queue_info *q, int n)
{
	for (int i = 0; i < n; i++)
		free(q[i].name);
	free(q);
}

/*
 * The names come from three places (the queues set, the paused set, SCAN) and a name is
 * often in two of them. They are gathered with where each came from, sorted, and the
 * copies of a name merged: a fleet with thousands of queues is one sort, not a search of
 * the list per name.
 */
enum { FROM_LISTED = 1, FROM_PAUSED = 2 };

struct gathered_name {
	char *name;
	int from;
};

struct gathered {
	struct gathered_name *v;
	int count, cap;
};

static void gather(struct gathered *g, const char *name, size_t len, int from)
{
	if (g->count == g->cap) {
		g->cap = g->cap ? g->cap * 2 : 16;
		g->v = xrealloc(g->v, sizeof *g->v * (size_t)g->cap);
	}
	g->v[g->count].name = xstrndup(name, len);
	g->v[g->count++].from = from;
}

static void gathered_free(struct gathered *g)
{
	for (int i = 0; i < g->count; i++)
		free(g->v[i].name);
	free(g->v);
}

static int by_gathered_name(const void *a, const void *b)
{
	return strcmp(((const struct gathered_name *)a)->name,
	              ((const struct gathered_name *)b)->name);
}

/* Sorted, each name once; a name that is only paused is kept only with_paused. */
static struct queue_info *merge(struct gathered *g, int with_paused, int *n)
{
	if (g->count)
		qsort(g->v, (size_t)g->count, sizeof *g->v, by_gathered_name);
	struct queue_info *q = xcalloc((size_t)g->count + 1, sizeof *q);
	*n = 0;
	for (int i = 0; i < g->count;) {
		int from = 0, j = i;
		for (; j < g->count && strcmp(g->v[j].name, g->v[i].name) == 0; j++)
			from |= g->v[j].from;
		if ((from & FROM_LISTED) || with_paused) {
			q[*n].name = g->v[i].name;
			q[(*n)++].paused = (from & FROM_PAUSED) != 0;
			g->v[i].name = NULL;        /* now q's */
		}
		i = j;
	}
	gathered_free(g);
	return q;
}

void ctl_free_discovered(struct ctl *c)
{
	for (int i = 0; i < c->ndiscovered; i++)
		free(c->discovered[i]);
	free(c->discovered);
	c->discovered = NULL;
	c->ndiscovered = 0;
	c->discovered_at = 0;
}

/* SCAN for the list keys cogworker:queue:*, their names gathered into g (and, under
 * c->discover_every, kept in c->discovered). -1 only when Redis is unavailable; another
 * failure ends the walk with what it found. */
static int scan_queue_keys(struct ctl *c, struct gathered *g)
{
	static const char prefix[] = K_QUEUE;
	int from = g->count;
	for (char cursor[32] = "0";;) {
		redisReply *rep = rcmd(&c->r, "SCAN %s MATCH " K_QUEUE "* COUNT 1000 TYPE list",
		                       cursor);
		if (!rep) {
			if (c->r.unavailable)
				return -1;
			break;
		}
		if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2) {
			const redisReply *keys = rep->element[1];
			for (size_t i = 0; i < keys->elements; i++) {
				const redisReply *k = keys->element[i];
				if (k->len > sizeof prefix - 1)
					gather(g, k->str + sizeof prefix - 1, k->len - (sizeof prefix - 1),
					       FROM_LISTED);
			}
			snprintf(cursor, sizeof cursor, "%s", rep->element[0]->str);
		} else {
			snprintf(cursor, sizeof cursor, "0");
		}
		freeReplyObject(rep);
		if (strcmp(cursor, "0") == 0)
			break;
	}
	if (c->discover_every > 0) {
		ctl_free_discovered(c);
		c->ndiscovered = g->count - from;
		c->discovered = xcalloc((size_t)c->ndiscovered + 1, sizeof *c->discovered);
		for (int i = 0; i < c->ndiscovered; i++)
			c->discovered[i] = xstrdup(g->v[from + i].name);
		c->discovered_at = mono_now();
	}
	return 0;
}

int ctl_queue_names(struct ctl *c, int with_paused, int discover, struct queue_info **out, int *n)
{
	*out = NULL;
	*n = 0;
	redisReply *names = rcmd(&c->r, "SMEMBERS " K_QUEUES);
	if (!names)
		return ctl_redis_error(c, K_QUEUES);
	redisReply *paused = rcmd(&c->r, "SMEMBERS " K_PAUSED);
	if (!paused) {
		freeReplyObject(names);
		return ctl_redis_error(c, K_PAUSED);
	}
	struct gathered g = { 0 };
	for (size_t i = 0; i < names->elements; i++)
		gather(&g, names->element[i]->str, names->element[i]->len, FROM_LISTED);
	for (size_t i = 0; i < paused->elements; i++)
		gather(&g, paused->element[i]->str, paused->element[i]->len, FROM_PAUSED);
	freeReplyObject(names);
	freeReplyObject(paused);
	/* Queue keys nobody listed (a plain LPUSH from some producer): found by SCAN, best
	 * effort (an ACL without SCAN, or a server without SCAN TYPE, just finds none); under
	 * c->discover_every, the last SCAN's names while it is recent. */
	int recent = discover && c->discover_every > 0 && c->discovered_at > 0 &&
	             mono_now() - c->discovered_at < c->discover_every;
	for (int i = 0; recent && i < c->ndiscovered; i++)
		gather(&g, c->discovered[i], strlen(c->discovered[i]), FROM_LISTED);
	if (discover && !recent && scan_queue_keys(c, &g) != 0) {
		gathered_free(&g);
		return ctl_redis_error(c, "SCAN");
	}
	*out = merge(&g, with_paused, n);
	return 0;
}

int ctl_read_queues(struct ctl *c, double now, int with_paused, int discover,
                    struct queue_info **out, int *n)
{
	*out = NULL;
	*n = 0;
	struct queue_info *q;
	int count;
	int s = ctl_queue_names(c, with_paused, discover, &q, &count);
	if (s)
		return s;

	struct rpipe p;
	rpipe_begin(&c->r, &p);
	for (int i = 0; i < count; i++) {
		rpipe_add(&c->r, &p, "LLEN " K_QUEUE "%s", q[i].name);
		rpipe_add(&c->r, &p, "LINDEX " K_QUEUE "%s -1", q[i].name);
	}
	redisReply **reps = xcalloc((size_t)p.n + 1, sizeof *reps);
	rpipe_exec(&c->r, &p, reps);
	int status = 0;
	for (int i = 0; i < count && !status; i++) {
		redisReply *len = reps[2 * i], *old = reps[2 * i + 1];
		if (!len || !old) {
			char *what = xasprintf(K_QUEUE "%s", q[i].name);
			status = ctl_redis_error(c, what);
			free(what);
			break;
		}
		q[i].size = reply_integer(len, 0);
		if (old->type == REDIS_REPLY_STRING)
			q[i].latency = exporter_latency(old->str, old->len, now);
	}
	for (int i = 0; i < p.n; i++)
		if (reps[i])
			freeReplyObject(reps[i]);
	free(reps);
	if (status) {
		ctl_free_queues(q, count);
		return status;
	}
	*out = q;
	*n = count;
	return 0;
}

/* Each queue's jobs that live processes hold for a max_concurrency slot: fetched from it,
 * so no longer in its size, and not running either. */
static int count_waiting(struct ctl *c, struct queue_info *q, int n, int *any)
{
	struct process_info *p;
	int np, nw;
	int s = ctl_read_processes(c, 0, &p, &np);
	if (s)
		return s;
	struct waiting_job *w;
	ctl_waiting_jobs(p, np, &w, &nw);
	for (int k = 0; k < nw; k++)
		for (int i = 0; i < n; i++)
			if (w[k].queue && strcmp(w[k].queue, q[i].name) == 0) {
				q[i].waiting++;
				*any = 1;
			}
	ctl_free_waiting(w, nw);
	ctl_free_processes(p, np);
	return 0;
}

/* The text form's lines of the jobs set aside for their group (nothing when none). */
static int print_groups(struct ctl *c)
{
	struct group_row *g;
	int n;
	const char *what;
	if (group_limits_read(&c->r, NULL, 0, &g, &n, &what) != 0)
		return ctl_redis_error(c, what);
	struct sbuf line;
	sb_init(&line);
	for (int i = 0, first = 1; group_limits_waiting_line(g, n, &i, GROUPS_SHOWN, &line);
	     first = 0) {
		if (first)
			printf("set aside for their group (cogworkerctl groups):\n");
		printf("  %s\n", line.s);
		line.len = 0;
	}
	sb_free(&line);
	group_limits_free(g, n);
	return 0;
}

int ctl_queues_list(struct ctl *c, int discover)
{
	double now = ctl_now(c);
	if (now < 0)
		return ctl_redis_error(c, "TIME");
	struct queue_info *q;
	int n;
	int s = ctl_read_queues(c, now, 1, discover, &q, &n);
	if (s)
		return s;
	int any_waiting = 0;
	if ((s = count_waiting(c, q, n, &any_waiting)) != 0) {
		ctl_free_queues(q, n);
		return s;
	}
	if (c->json) {
		struct sbuf b;
		sb_init(&b);
		sb_addc(&b, '[');
		for (int i = 0; i < n; i++) {
			sb_adds(&b, i ? ",{\"name\":" : "{\"name\":");
			jstr(&b, q[i].name);
			sb_printf(&b, ",\"size\":%lld,\"latency\":%.3f,\"paused\":%s,\"waiting\":%d}",
			          q[i].size, q[i].latency, q[i].paused ? "true" : "false", q[i].waiting);
		}
		sb_addc(&b, ']');
		jprint(&b);
	} else if (n == 0) {
		printf("no queues\n");
	} else {
		/* WAITING only when some process holds jobs for a slot: the rare case. */
		static const char *heads[] = { "QUEUE", "SIZE", "LATENCY", "PAUSED", "WAITING" };
		struct table t;
		table_init(&t, any_waiting ? 5 : 4, heads, NULL);
		for (int i = 0; i < n; i++) {
			char size[32], lat[32], waiting[64];
			snprintf(size, sizeof size, "%lld", q[i].size);
			if (q[i].size > 0)
				ctl_duration(q[i].latency, lat, sizeof lat);
			else
				snprintf(lat, sizeof lat, "-");
			snprintf(waiting, sizeof waiting, q[i].waiting ? "%d for a slot" : "-",
			         q[i].waiting);
			const char *row[] = { q[i].name, size, lat, q[i].paused ? "paused" : "no",
			                      waiting };
			table_add(&t, row);
		}
		table_print(&t);
		table_free(&t);
	}
	ctl_free_queues(q, n);
	if (!c->json && (s = print_groups(c)) != 0)
		return s;
	return CTL_OK;
}

int ctl_queue_name_ok(const char *what, const char *q)
{
	if (queue_name_ok(q, strlen(q)))
		return 1;
	char *shown = ctl_oneline(q, strlen(q), 60);
	ctl_error("%s: bad queue name \"%s\": " QUEUE_NAME_RULE, what, shown);
	free(shown);
	return 0;
}

/* How many live processes read q (-1: unknown, Redis said no), and into read the names
 * of the queues the live processes read, for a message. */
static int live_readers(struct ctl *c, const char *q, struct sbuf *read)
{
	struct process_info *p;
	int n, readers = 0;
	if (ctl_read_processes(c, 0, &p, &n) != 0)
		return -1;
	struct gathered g = { 0 };
	for (int i = 0; i < n; i++)
		for (int k = 0; k < p[i].nqueues; k++) {
			readers += strcmp(p[i].queues[k], q) == 0;
			gather(&g, p[i].queues[k], strlen(p[i].queues[k]), FROM_LISTED);
		}
	ctl_free_processes(p, n);
	int count;
	struct queue_info *names = merge(&g, 0, &count);
	for (int i = 0; i < count; i++)
		sb_printf(read, "%s%s", i ? ", " : "", names[i].name);
	ctl_free_queues(names, count);
	return readers;
}

void ctl_warn_unread_queue(struct ctl *c, const char *q)
{
	struct sbuf read;
	sb_init(&read);
	if (live_readers(c, q, &read) == 0)
		ctl_error("warning: no live process reads queue %s (%s%s); its jobs wait there "
		          "until one does", q, read.len ? "they read: " : "none is live", read.s);
	sb_free(&read);
}

/* queues pause of a name nothing knows is most likely a typo: said, and done all the same
 * (a queue may be paused before its first process starts). */
static void warn_unknown_queue(struct ctl *c, const char *q)
{
	struct rpipe p;
	redisReply *rep[2];
	rpipe_begin(&c->r, &p);
	rpipe_add(&c->r, &p, "SISMEMBER " K_QUEUES " %s", q);
	rpipe_add(&c->r, &p, "EXISTS " K_QUEUE "%s", q);
	rpipe_exec(&c->r, &p, rep);
	int known = !rep[0] || !rep[1] || reply_integer(rep[0], 0) || reply_integer(rep[1], 0);
	for (int i = 0; i < 2; i++)
		if (rep[i])
			freeReplyObject(rep[i]);
	struct sbuf read;
	sb_init(&read);
	if (!known && live_readers(c, q, &read) == 0)
		ctl_error("warning: queue %s is unknown: not in " K_QUEUES ", no job on it, and no "
		          "live process reads it (%s%s)", q, read.len ? "they read: " : "none is live",
		          read.s);
	sb_free(&read);
}

int ctl_queue_pause(struct ctl *c, const char *q, int pause)
{
	char unchanged[512], done[512];
	snprintf(unchanged, sizeof unchanged, "queue %s %s", q,
	         pause ? "is already paused" : "is not paused");
	snprintf(done, sizeof done, "%s queue %s", pause ? "paused" : "resumed", q);
	return ctl_toggle_member(c, K_PAUSED, q, pause, "queue", "paused", pause,
	                         unchanged, done);
}

int ctl_queue_clear(struct ctl *c, const char *q)
{
	if (!c->yes) {
		ctl_error("queues clear deletes every job on %s: add --yes", q);
		return CTL_USAGE;
	}
	/* LLEN and DEL in one transaction, so the count is the number deleted. */
	struct rpipe p;
	rpipe_begin(&c->r, &p);
	rpipe_add(&c->r, &p, "MULTI");
	rpipe_add(&c->r, &p, "LLEN " K_QUEUE "%s", q);
	rpipe_add(&c->r, &p, "DEL " K_QUEUE "%s", q);
	rpipe_add(&c->r, &p, "EXEC");
	redisReply *reps[4];
	rpipe_exec(&c->r, &p, reps);
	int status = CTL_OK;
	long long n = 0;
	redisReply *ex = reps[3];
	if (!ex || ex->type != REDIS_REPLY_ARRAY || ex->elements != 2) {
		char *what = xasprintf(K_QUEUE "%s", q);
		status = ctl_redis_error(c, what);
		free(what);
	} else if (ex->element[0]->type == REDIS_REPLY_ERROR) {
		/* Wrong type: the key is deleted all the same (DEL works on any type). */
		n = -1;
	} else {
		n = ex->element[0]->integer;
	}
	for (int i = 0; i < 4; i++)
		if (reps[i])
			freeReplyObject(reps[i]);
	if (status)
		return status;
	if (c->json) {
		struct sbuf b;
		sb_init(&b);
		sb_adds(&b, "{\"queue\":");
		jstr(&b, q);
		sb_printf(&b, ",\"deleted\":%lld}", n < 0 ? 0 : n);
		jprint(&b);
	}
	if (n == 0) {
		ctl_error("queue %s is empty: nothing to clear", q);
		return CTL_NOTHING;
	}
	if (!c->json) {
		if (n < 0)
			printf("cleared queue %s (it was not a list)\n", q);
		else
			printf("cleared queue %s: %lld job(s) deleted\n", q, n);
	}
	return CTL_OK;
}

int cmd_queues(struct ctl *c, int argc, char **argv)
{
	if (ctl_only_common_opts(c, argc, argv, argc) < 0)
		return CTL_USAGE;
	int nargs = argc - optind;
	char **args = argv + optind;
	if (nargs == 0 || strcmp(args[0], "list") == 0) {
		if (nargs > 1) {
			ctl_error("queues: unexpected \"%s\"", args[1]);
			return CTL_USAGE;
		}
		if (ctl_connect(c) != 0)
			return CTL_USAGE;
		return ctl_queues_list(c, 1);
	}
	const char *sub = args[0];
	int which = strcmp(sub, "pause") == 0 ? 1 : strcmp(sub, "resume") == 0 ? 2
	          : strcmp(sub, "clear") == 0 ? 3 : 0;
	if (!which) {
		ctl_error("queues: unknown subcommand \"%s\" (list, pause, resume, clear)", sub);
		return CTL_USAGE;
	}
	if (nargs != 2) {
		ctl_error("usage: cogworkerctl queues %s QUEUE%s", sub, which == 3 ? " --yes" : "");
		return CTL_USAGE;
	}
	const char *q = args[1];
	char what[32];
	snprintf(what, sizeof what, "queues %s", sub);
	if (!ctl_queue_name_ok(what, q))
		return CTL_USAGE;
	if (which == 3 && !c->yes) {
		ctl_error("queues clear deletes every job on %s: add --yes", q);
		return CTL_USAGE;
	}
	if (ctl_connect(c) != 0)
		return CTL_USAGE;
	if (which == 3)
		return ctl_queue_clear(c, q);
	if (which == 1)
		warn_unknown_queue(c, q);
	return ctl_queue_pause(c, q, which == 1);
}
