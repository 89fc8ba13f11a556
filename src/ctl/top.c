/* SPDX-License-Identifier: MIT */
/*
 * top.c: `cogworkerctl top`, a live view of the fleet in the terminal, redrawn every second:
 * processes (busy/concurrency, quiet, RSS, last beat), running jobs (elapsed, a progress
 * bar from the pct and message that `cogworker:progress` lines put into status:<jid>), the
 * jobs a process holds for a max_concurrency slot, queues (size, latency, paused, waiting)
 * and the jobs set aside for their fair-share group (per class, the most waiting groups),
 * processed and failed per minute with a sparkline, the next periodic slots and the latest
 * failures. Keys act on what is shown: quiet/resume a process,
 * pause/resume a queue, retry a failed job, cancel a running job (each after a prompt for
 * the row's number, the last two after a y/N confirmation).
 *
 * Why it is built on the other commands: each section is the --json document of the
 * command that shows the same thing (processes, jobs list --set running, queues, stats,
 * periodic), run in this process with its output caught in a temporary file, and each key
 * runs the command a user would type (processes quiet ID, queues pause Q, jobs retry JID,
 * jobs cancel JID), its message shown on the status line. So top can never show or do
 * anything other than what those commands show and do, and has no Redis logic of its own
 * beyond the status hashes, the counters for the rate and the newest failures. The groups
 * are read by src/grouplimits.c, as `groups` and `queues` read them, without the SCAN for
 * groups that only run (a walk of the keyspace each second); queues' own SCAN for queue
 * keys nobody listed runs every DISCOVER_EVERY seconds, not at each redraw.
 *
 * Plain ANSI (the alternate screen, cursor home, clear to end of line) and termios, no
 * curses: every terminal in use understands these few sequences, and there is no library
 * to install. When stdout is not a terminal, one snapshot is printed without escapes and
 * top exits, so `cogworkerctl top | mail` or a cron job gets the same view as text.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>
#include <cJSON.h>
#include "ctl.h"
#include "grouplimits.h"
#include "job.h"
#include "workflow.h"

#define REFRESH 1.0             /* seconds between two redraws */
/* Seconds between two SCANs of the keyspace for unlisted queue keys (ctl_queue_names):
 * one walks every key, 50 ms of Redis at 100 000, too much for each redraw; the names
 * found are shown meanwhile, a new unlisted queue within this long. */
#define DISCOVER_EVERY 10.0
#define RATE_SAMPLES 61         /* one per refresh: a minute of deltas */
#define SPARK_WIDTH 30
#define FAILURES_SHOWN 6
#define PERIODIC_SHOWN 5
#define GROUPS_SHOWN 5          /* groups named per class with jobs set aside */
/* The key line, and the one that fits 80 columns (the whole line must be seen: it is how
 * a newcomer learns the keys). */
#define KEYS_LONG "q quit · s quiet/resume a process · p pause/resume a queue · " \
                  "r retry a failure · c cancel a running job"
#define KEYS_SHORT "q quit · s quiet/resume · p pause/resume · r retry · c cancel"

/* ---- running the other commands, their output caught ---- */

typedef int (*cmd_fn)(struct ctl *, int, char **);

struct caught {
	int status;
	char *out;                  /* stdout and stderr together, NUL-terminated */
};

/* Run fn(argv) with json as given, stdout and stderr into a temporary file. */
static struct caught run_caught(struct ctl *c, int json, cmd_fn fn, int argc,
                                const char *const *argv)
{
	struct caught r = { CTL_USAGE, NULL };
	char **v = xcalloc((size_t)argc + 1, sizeof *v);
	for (int i = 0; i < argc; i++)
		v[i] = xstrdup(argv[i]);
	FILE *tmp = tmpfile();
	fflush(stdout);
	fflush(stderr);
	int o1 = dup(1), o2 = dup(2);
	if (tmp && o1 >= 0 && o2 >= 0) {
		dup2(fileno(tmp), 1);
		dup2(fileno(tmp), 2);
		int saved = c->json;
		c->json = json;
		r.status = fn(c, argc, v);
		c->json = saved;
		fflush(stdout);
		fflush(stderr);
		dup2(o1, 1);
		dup2(o2, 2);
		long n = ftell(tmp);
		r.out = xcalloc((size_t)(n > 0 ? n : 0) + 1, 1);
		rewind(tmp);
		if (n > 0 && fread(r.out, 1, (size_t)n, tmp) != (size_t)n)
			r.out[0] = '\0';
	}
	if (o1 >= 0)
		close(o1);
	if (o2 >= 0)
		close(o2);
	if (tmp)
		fclose(tmp);
	for (int i = 0; i < argc; i++)
		free(v[i]);
	free(v);
	if (!r.out)
		r.out = xstrdup("");
	return r;
}

/* The --json document of a view command; NULL when it failed (*why: its message). */
static cJSON *view(struct ctl *c, cmd_fn fn, int argc, const char *const *argv, char **why)
{
	struct caught r = run_caught(c, 1, fn, argc, argv);
	cJSON *doc = r.status == CTL_OK ? cJSON_Parse(r.out) : NULL;
	if (!doc && why && !*why) {
		char *nl = strchr(r.out, '\n');
		if (nl)
			*nl = '\0';
		*why = xstrdup(r.out[0] ? r.out : "no answer");
	}
	free(r.out);
	return doc;
}

/* An action: its status and its first line, for the status line. */
static char *act(struct ctl *c, cmd_fn fn, int argc, const char *const *argv)
{
	struct caught r = run_caught(c, 0, fn, argc, argv);
	char *nl = strchr(r.out, '\n');
	if (nl)
		*nl = '\0';
	char *msg = xstrdup(r.out[0] ? r.out : r.status == CTL_OK ? "done" : "nothing done");
	free(r.out);
	return msg;
}

/* ---- reading JSON ---- */

static const char *jget_str(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static double jget_num(const cJSON *o, const char *k, double dflt)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

static int jget_bool(const cJSON *o, const char *k)
{
	return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, k));
}

/* ---- the screen ---- */

struct screen {
	struct sbuf b;
	int width, height, lines;
	int tty;
	int dropped;                /* lines that did not fit above the status line */
	size_t last;                /* where the last line starts in b */
	int bottom;                 /* the status line is being written */
};

/* Append one line, cut to the width in characters (UTF-8 continuation bytes are free). On
 * a terminal the sections get the rows above the status line, which is always drawn: what
 * does not fit is counted, and frame() says so. */
static void line(struct screen *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(struct screen *s, const char *fmt, ...)
{
	if (s->tty && !s->bottom && s->lines >= s->height - 2) {
		s->dropped++;
		return;
	}
	s->last = s->b.len;
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	int chars = 0;
	size_t i;
	for (i = 0; buf[i]; i++) {
		if (((unsigned char)buf[i] & 0xC0) != 0x80 && ++chars > s->width)
			break;
		if ((unsigned char)buf[i] < 0x20)
			buf[i] = ' ';
	}
	sb_printf(&s->b, "%.*s%s\n", (int)i, buf, s->tty ? "\033[K\r" : "");
	s->lines++;
}

/* Characters on screen (UTF-8 continuation bytes take no room). */
static int text_width(const char *t)
{
	int n = 0;
	for (; *t; t++)
		n += ((unsigned char)*t & 0xC0) != 0x80;
	return n;
}

static void heading(struct screen *s, const char *title)
{
	if (s->tty)
		sb_adds(&s->b, "\033[1m");
	line(s, "%s", title);
	if (s->tty)
		sb_adds(&s->b, "\033[0m");
}

static void bar(char *out, size_t n, double pct, int width)
{
	int full = pct < 0 ? 0 : pct > 100 ? width : (int)(pct * width / 100 + 0.5);
	size_t k = 0;
	out[k++] = '[';
	for (int i = 0; i < width && k + 2 < n; i++)
		out[k++] = i < full ? '#' : '.';
	out[k++] = ']';
	out[k] = '\0';
}

/* ▁▂▃▄▅▆▇█ for values relative to their maximum. */
static void spark(char *out, size_t n, const long long *v, int count)
{
	static const char *const ticks[] = { "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█" };
	long long max = 0;
	for (int i = 0; i < count; i++)
		if (v[i] > max)
			max = v[i];
	out[0] = '\0';
	for (int i = 0; i < count; i++) {
		int t = max ? (int)(v[i] * 7 / max) : 0;
		if (strlen(out) + 4 < n)
			strcat(out, ticks[t]);
	}
}

/* ---- state kept between frames ---- */

struct numbered {               /* what a row number refers to, per section */
	char **v;
	int n;
	int *flag;                  /* quiet / paused */
};

struct top {
	long long processed[RATE_SAMPLES], failed[RATE_SAMPLES];
	int samples;
	struct numbered procs, running, queues, failures;
	char *status;               /* the last action's message */
	char prompt[256];
	char input[32];
	int mode;                   /* 0, or the key whose prompt is open */
	int confirm;                /* a y/N question is open for input's row */
};

static void numbered_reset(struct numbered *x)
{
	for (int i = 0; i < x->n; i++)
		free(x->v[i]);
	free(x->v);
	free(x->flag);
	x->v = NULL;
	x->flag = NULL;
	x->n = 0;
}

static void numbered_add(struct numbered *x, const char *s, int flag)
{
	x->v = xrealloc(x->v, sizeof *x->v * (size_t)(x->n + 1));
	x->flag = xrealloc(x->flag, sizeof *x->flag * (size_t)(x->n + 1));
	x->v[x->n] = xstrdup(s ? s : "");
	x->flag[x->n++] = flag;
}

/* ---- the sections ---- */

static void show_processes(struct ctl *c, struct screen *s, struct top *t, char **why)
{
	const char *argv[] = { "processes" };
	cJSON *doc = view(c, cmd_processes, 1, argv, why);
	numbered_reset(&t->procs);
	int n = cJSON_GetArraySize(doc);
	char title[64];
	snprintf(title, sizeof title, "PROCESSES (%d)", n);
	heading(s, title);
	line(s, " #  %-40s %9s %-6s %8s %9s %5s", "identity", "busy", "state", "rss", "beat",
	     "warm");
	const cJSON *p;
	cJSON_ArrayForEach(p, doc) {
		const char *id = jget_str(p, "identity");
		numbered_add(&t->procs, id, jget_bool(p, "quiet"));
		double rss = jget_num(p, "rss_kb", -1);
		char rs[32] = "-";
		if (rss >= 0)
			snprintf(rs, sizeof rs, "%.1fM", rss / 1024);
		char warm[16] = "-";
		if (jget_num(p, "warm", -1) >= 0)
			snprintf(warm, sizeof warm, "%.0f", jget_num(p, "warm", -1));
		line(s, "%2d  %-40s %4.0f/%-4.0f %-6s %8s %8.0fs %5s", t->procs.n, id ? id : "?",
		     jget_num(p, "busy", 0), jget_num(p, "concurrency", 0),
		     jget_bool(p, "quiet") ? "quiet" : "active", rs, jget_num(p, "beat_age", 0),
		     warm);
	}
	if (doc)
		cJSON_Delete(doc);
}

static void show_running(struct ctl *c, struct screen *s, struct top *t, double now, char **why)
{
	const char *argv[] = { "jobs", "list", "--set", "running", "--limit", "0" };
	cJSON *doc = view(c, cmd_jobs, 6, argv, why);
	numbered_reset(&t->running);
	int n = cJSON_GetArraySize(doc);
	char title[64];
	snprintf(title, sizeof title, "RUNNING (%d)", n);
	heading(s, title);
	const cJSON *e;
	cJSON_ArrayForEach(e, doc) {
		const char *jid = jget_str(e, "jid");
		numbered_add(&t->running, jid, 0);
		char el[32], prog[160] = "";
		ctl_duration(now - jget_num(e, "run_at", now), el, sizeof el);
		redisReply *st = jid ? rcmd(&c->r, "HMGET " K_STATUS "%s pct message", jid) : NULL;
		if (st && st->type == REDIS_REPLY_ARRAY && st->elements == 2 &&
		    st->element[0]->type == REDIS_REPLY_STRING) {
			char b[32];
			double pct = strtod(st->element[0]->str, NULL);
			bar(b, sizeof b, pct, 20);
			snprintf(prog, sizeof prog, "%s %3.0f%% %s", b, pct,
			         st->element[1]->type == REDIS_REPLY_STRING ? st->element[1]->str : "");
		}
		if (st)
			freeReplyObject(st);
		line(s, "%2d  %-20s %-24s %-12s %7s  %s", t->running.n, jget_str(e, "class"),
		     jid ? jid : "?", jget_str(e, "queue"), el, prog);
	}
	if (doc)
		cJSON_Delete(doc);
}

/* Jobs a process holds for a max_concurrency slot: shown only when there are some. */
static void show_waiting(struct ctl *c, struct screen *s, double now, char **why)
{
	const char *argv[] = { "jobs", "list", "--set", "waiting", "--limit", "0" };
	cJSON *doc = view(c, cmd_jobs, 6, argv, why);
	int n = cJSON_GetArraySize(doc);
	if (n > 0) {
		char title[64];
		snprintf(title, sizeof title, "WAITING FOR A SLOT (%d)", n);
		heading(s, title);
	}
	const cJSON *e;
	cJSON_ArrayForEach(e, doc) {
		char waited[32];
		ctl_duration(now - jget_num(e, "waiting_since", now), waited, sizeof waited);
		line(s, "    %-20s %-24s %-12s %7s  max_concurrency %.0f on %s", jget_str(e, "class"),
		     jget_str(e, "jid"), jget_str(e, "queue"), waited, jget_num(e, "limit", 0),
		     jget_str(e, "process"));
	}
	if (n > 0)
		line(s, "%s", "");
	if (doc)
		cJSON_Delete(doc);
}

static void show_queues(struct ctl *c, struct screen *s, struct top *t, char **why)
{
	const char *argv[] = { "queues" };
	cJSON *doc = view(c, cmd_queues, 1, argv, why);
	numbered_reset(&t->queues);
	heading(s, "QUEUES");
	line(s, " #  %-24s %8s %10s  %s", "queue", "size", "latency", "");
	const cJSON *q;
	cJSON_ArrayForEach(q, doc) {
		const char *name = jget_str(q, "name");
		int paused = jget_bool(q, "paused");
		numbered_add(&t->queues, name, paused);
		char lat[32] = "-";
		if (jget_num(q, "size", 0) > 0)
			ctl_duration(jget_num(q, "latency", 0), lat, sizeof lat);
		char waiting[48] = "";
		if (jget_num(q, "waiting", 0) > 0)
			snprintf(waiting, sizeof waiting, "%s%.0f waiting for a slot", paused ? ", " : "",
			         jget_num(q, "waiting", 0));
		line(s, "%2d  %-24s %8.0f %10s  %s%s", t->queues.n, name ? name : "?",
		     jget_num(q, "size", 0), lat, paused ? "paused" : "", waiting);
	}
	if (doc)
		cJSON_Delete(doc);
}

/* Jobs set aside for their group (doc/protocol.md §7.35): a line per class, under the
 * queues they left; nothing when none. */
static void show_groups(struct ctl *c, struct screen *s, char **why)
{
	struct group_row *g;
	int n;
	const char *what;
	if (group_limits_read(&c->r, NULL, 0, &g, &n, &what) != 0) {
		if (why && !*why)
			*why = xasprintf("%s: %s", what, c->r.err);
		return;
	}
	struct sbuf l;
	sb_init(&l);
	for (int i = 0, first = 1; group_limits_waiting_line(g, n, &i, GROUPS_SHOWN, &l);
	     first = 0) {
		if (first)
			line(s, "    set aside for their group:");
		line(s, "      %s", l.s);
		l.len = 0;
	}
	sb_free(&l);
	group_limits_free(g, n);
}

/* Batches with members pending (the newest, from batch list) and the jobs that wait for
 * others (doc/protocol.md §7.34); nothing when there are none. */
static void show_batches(struct ctl *c, struct screen *s, char **why)
{
	long long open = 0, waiting = 0;
	workflow_counts(&c->r, &open, &waiting);
	const char *argv[] = { "batch", "list" };
	cJSON *doc = view(c, cmd_batch, 2, argv, why);
	int shown = 0;
	const cJSON *b;
	cJSON_ArrayForEach(b, doc)
		shown += jget_num(b, "pending", 0) > 0;
	if (shown || open || waiting) {
		char title[96];
		snprintf(title, sizeof title, "BATCHES (%lld not committed, %lld job(s) waiting for "
		         "others)", open, waiting);
		heading(s, title);
	}
	int all = cJSON_GetArraySize(doc);
	for (int i = 0, room = 5; i < all && room > 0; i++) {
		b = cJSON_GetArrayItem(doc, i);
		if (jget_num(b, "pending", 0) <= 0)
			continue;
		room--;
		line(s, "    %-24s %-10s %6.0f pending of %-6.0f %s", jget_str(b, "bid"),
		     jget_str(b, "state"), jget_num(b, "pending", 0), jget_num(b, "total", 0),
		     jget_str(b, "description"));
	}
	if (shown || open || waiting)
		line(s, "%s", "");
	if (doc)
		cJSON_Delete(doc);
}

static long long counter(struct ctl *c, const char *key)
{
	redisReply *r = rcmd(&c->r, "GET %s", key);
	long long v = r && r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : -1;
	if (r)
		freeReplyObject(r);
	return v;
}

static void show_rates(struct ctl *c, struct screen *s, struct top *t)
{
	long long p = counter(c, K_PROCESSED), f = counter(c, K_FAILED);
	if (p < 0 && f < 0 && t->samples == 0)
		p = f = 0;
	if (t->samples == RATE_SAMPLES) {
		memmove(t->processed, t->processed + 1, sizeof(long long) * (RATE_SAMPLES - 1));
		memmove(t->failed, t->failed + 1, sizeof(long long) * (RATE_SAMPLES - 1));
		t->samples--;
	}
	t->processed[t->samples] = p < 0 ? 0 : p;
	t->failed[t->samples] = f < 0 ? 0 : f;
	t->samples++;
	long long dp[RATE_SAMPLES] = { 0 }, df[RATE_SAMPLES] = { 0 };
	int nd = t->samples - 1;
	long long sp = 0, sf = 0;
	for (int i = 0; i < nd; i++) {
		dp[i] = t->processed[i + 1] - t->processed[i];
		df[i] = t->failed[i + 1] - t->failed[i];
		dp[i] = dp[i] < 0 ? 0 : dp[i];
		df[i] = df[i] < 0 ? 0 : df[i];
		sp += dp[i];
		sf += df[i];
	}
	int from = nd > SPARK_WIDTH ? nd - SPARK_WIDTH : 0;
	char s1[SPARK_WIDTH * 4 + 1], s2[SPARK_WIDTH * 4 + 1];
	spark(s1, sizeof s1, dp + from, nd - from);
	spark(s2, sizeof s2, df + from, nd - from);
	char span[32];
	snprintf(span, sizeof span, nd >= RATE_SAMPLES - 1 ? "per minute" : "in the last %ds", nd);
	heading(s, "THROUGHPUT");
	if (nd == 0) {
		/* One look (a snapshot, or the first screen) has no rate: "0 in the last 0s"
		 * read as an idle fleet. The totals are what one look knows. */
		line(s, "processed %8lld in total", t->processed[0]);
		line(s, "failed    %8lld in total", t->failed[0]);
		return;
	}
	line(s, "processed %8lld %-16s %s   (total %lld)", sp, span, s1, t->processed[nd]);
	line(s, "failed    %8lld %-16s %s   (total %lld)", sf, span, s2, t->failed[nd]);
}

static void show_periodic(struct ctl *c, struct screen *s, double now, char **why)
{
	const char *argv[] = { "periodic" };
	cJSON *doc = view(c, cmd_periodic, 1, argv, why);
	if (cJSON_GetArraySize(doc) == 0) {
		if (doc)
			cJSON_Delete(doc);
		return;
	}
	heading(s, "NEXT PERIODIC SLOTS");
	/* The soonest first: a selection over the few entries a schedule has. */
	int n = cJSON_GetArraySize(doc);
	int *shown = xcalloc((size_t)n, sizeof *shown);
	for (int k = 0; k < PERIODIC_SHOWN && k < n; k++) {
		int best = -1;
		double bt = 0;
		for (int i = 0; i < n; i++) {
			const cJSON *e = cJSON_GetArrayItem(doc, i);
			double nr = jget_num(e, "next_run", -1);
			if (!shown[i] && nr >= 0 && jget_bool(e, "enabled") && (best < 0 || nr < bt)) {
				best = i;
				bt = nr;
			}
		}
		if (best < 0)
			break;
		shown[best] = 1;
		const cJSON *e = cJSON_GetArrayItem(doc, best);
		char rel[48], at[32];
		ctl_relative(bt, now, rel, sizeof rel);
		ctl_iso_time(bt, at);
		line(s, "    %-20s %-16s %s (%s)", jget_str(e, "class"), jget_str(e, "cron"), at, rel);
	}
	free(shown);
	cJSON_Delete(doc);
}

struct failure {
	char *raw;
	double at;
	int dead;
};

static int newest_first(const void *a, const void *b)
{
	double x = ((const struct failure *)a)->at, y = ((const struct failure *)b)->at;
	return x < y ? 1 : x > y ? -1 : 0;
}

static void show_failures(struct ctl *c, struct screen *s, struct top *t, double now)
{
	struct failure f[2 * FAILURES_SHOWN];
	int n = 0;
	const char *sets[] = { K_DEAD, K_RETRY };
	for (int k = 0; k < 2; k++) {
		/* dead is scored by time of death; retry by the next attempt, which grows with
		 * the failure's time for a given count: its newest scores are recent failures. */
		redisReply *r = rcmd(&c->r, "ZREVRANGE %s 0 %d WITHSCORES", sets[k],
		                     FAILURES_SHOWN - 1);
		for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i + 1 < r->elements; i += 2) {
			cJSON *o = job_json_parse(r->element[i]->str, r->element[i]->len);
			f[n].raw = xstrndup(r->element[i]->str, r->element[i]->len);
			f[n].at = o ? jget_num(o, "failed_at", 0) : 0;
			if (f[n].at <= 0)
				f[n].at = strtod(r->element[i + 1]->str, NULL);
			f[n++].dead = k == 0;
			if (o)
				cJSON_Delete(o);
		}
		if (r)
			freeReplyObject(r);
	}
	qsort(f, (size_t)n, sizeof *f, newest_first);
	numbered_reset(&t->failures);
	heading(s, "RECENT FAILURES");
	for (int i = 0; i < n; i++) {
		if (i < FAILURES_SHOWN) {
			cJSON *o = job_json_parse(f[i].raw, strlen(f[i].raw));
			const char *jid = o ? jget_str(o, "jid") : NULL;
			numbered_add(&t->failures, jid, f[i].dead);
			char rel[48];
			ctl_relative(f[i].at, now, rel, sizeof rel);
			line(s, "%2d  %-5s %-20s %-24s %-12s %s: %s", t->failures.n,
			     f[i].dead ? "dead" : "retry", o ? jget_str(o, "class") : "?",
			     jid ? jid : "?", rel, o ? jget_str(o, "error_class") : "",
			     o ? jget_str(o, "error_message") : "");
			if (o)
				cJSON_Delete(o);
		}
		free(f[i].raw);
	}
}

static void frame(struct ctl *c, struct screen *s, struct top *t)
{
	double now = ctl_now(c);
	char *why = NULL;
	char at[32];
	s->lines = s->dropped = s->bottom = 0;
	s->last = 0;
	sb_init(&s->b);
	if (s->tty)
		sb_adds(&s->b, "\033[H");
	ctl_iso_time(now > 0 ? now : now_float(), at);
	line(s, "cogworkerctl top — %s — %s", c->conf.redis.display ? c->conf.redis.display : "",
	     at);
	if (now < 0) {
		line(s, "Redis unreachable: %s", c->r.err);
	} else {
		show_processes(c, s, t, &why);
		line(s, "%s", "");
		show_running(c, s, t, now, &why);
		line(s, "%s", "");
		show_waiting(c, s, now, &why);
		show_batches(c, s, &why);
		show_queues(c, s, t, &why);
		show_groups(c, s, &why);
		line(s, "%s", "");
		show_rates(c, s, t);
		line(s, "%s", "");
		show_periodic(c, s, now, &why);
		show_failures(c, s, t, now);
	}
	if (s->tty) {
		if (s->dropped) {
			/* The last line that fit gives way to the count of those that did not. */
			int dropped = s->dropped + 1;
			s->b.len = s->last;
			s->b.s[s->b.len] = '\0';
			s->lines--;
			sb_adds(&s->b, "\033[0m");      /* it may have been a bold heading */
			line(s, "… %d more line(s): a taller terminal shows them", dropped);
		}
		/* The status line sits at the bottom. */
		while (s->lines < s->height - 2)
			line(s, "%s", "");
		const char *keys = s->width >= text_width(KEYS_LONG) ? KEYS_LONG : KEYS_SHORT;
		const char *bottom = t->mode ? t->prompt : t->status ? t->status : why ? why : keys;
		sb_adds(&s->b, "\033[7m");
		s->bottom = 1;
		line(s, "%s%s", bottom, t->mode && !t->confirm ? t->input : "");
		sb_adds(&s->b, "\033[0m\033[J");
	}
	free(why);
	fwrite(s->b.s, 1, s->b.len, stdout);
	fflush(stdout);
	sb_free(&s->b);
}

/* ---- the terminal ---- */

static struct termios saved_tio;
static volatile sig_atomic_t quit_asked;

static void on_quit(int sig)
{
	(void)sig;
	quit_asked = 1;
}

static void term_size(struct screen *s)
{
	struct winsize ws;
	s->width = 120;
	s->height = 40;
	if (ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
		s->width = ws.ws_col;
		s->height = ws.ws_row;
	}
}

static void term_enter(void)
{
	struct termios raw;
	tcgetattr(0, &saved_tio);
	raw = saved_tio;
	raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
	raw.c_cc[VMIN] = 0;
	raw.c_cc[VTIME] = 0;
	tcsetattr(0, TCSANOW, &raw);
	fputs("\033[?1049h\033[?25l\033[H\033[J", stdout);
	fflush(stdout);
}

static void term_leave(void)
{
	fputs("\033[?25h\033[?1049l", stdout);
	fflush(stdout);
	tcsetattr(0, TCSANOW, &saved_tio);
}

/* ---- keys ---- */

static const struct numbered *section_of(struct top *t, int key)
{
	switch (key) {
	case 's': return &t->procs;
	case 'p': return &t->queues;
	case 'r': return &t->failures;
	case 'c': return &t->running;
	}
	return NULL;
}

static void open_prompt(struct top *t, int key)
{
	static const char *const what[] = { ['s'] = "quiet/resume process", ['p'] =
		"pause/resume queue", ['r'] = "retry failure", ['c'] = "cancel running job" };
	t->mode = key;
	t->confirm = 0;
	t->input[0] = '\0';
	snprintf(t->prompt, sizeof t->prompt, "%s number (Enter; Esc to cancel): ", what[key]);
}

static void do_action(struct ctl *c, struct top *t, const char *target, int flag)
{
	char *msg = NULL;
	if (t->mode == 's') {
		const char *argv[] = { "processes", flag ? "resume" : "quiet", target };
		msg = act(c, cmd_processes, 3, argv);
	} else if (t->mode == 'p') {
		const char *argv[] = { "queues", flag ? "resume" : "pause", target };
		msg = act(c, cmd_queues, 3, argv);
	} else if (t->mode == 'r') {
		const char *argv[] = { "jobs", "retry", target };
		msg = act(c, cmd_jobs, 3, argv);
	} else if (t->mode == 'c') {
		const char *argv[] = { "jobs", "cancel", target };
		msg = act(c, cmd_jobs, 3, argv);
	}
	free(t->status);
	t->status = msg;
	t->mode = 0;
}

/* One key; 1 = quit. */
static int on_key(struct ctl *c, struct top *t, struct screen *s, int ch)
{
	if (!t->mode) {
		if (ch == 'q' || ch == 'Q')
			return 1;
		if (section_of(t, ch))
			open_prompt(t, ch);
		return 0;
	}
	if (ch == 27) {
		t->mode = 0;
		return 0;
	}
	const struct numbered *sec = section_of(t, t->mode);
	if (t->confirm) {
		int row = atoi(t->input) - 1;
		if ((ch == 'y' || ch == 'Y') && row >= 0 && row < sec->n) {
			snprintf(t->prompt, sizeof t->prompt, "working…");
			t->input[0] = '\0';
			frame(c, s, t);
			do_action(c, t, sec->v[row], sec->flag[row]);
		} else {
			t->mode = 0;
		}
		return 0;
	}
	size_t len = strlen(t->input);
	if (ch >= '0' && ch <= '9' && len + 1 < sizeof t->input) {
		t->input[len] = (char)ch;
		t->input[len + 1] = '\0';
	} else if ((ch == 127 || ch == 8) && len) {
		t->input[len - 1] = '\0';
	} else if (ch == '\r' || ch == '\n') {
		int row = atoi(t->input) - 1;
		if (row < 0 || row >= sec->n) {
			free(t->status);
			t->status = xasprintf("no row %s there", t->input);
			t->mode = 0;
		} else if (t->mode == 'r' || t->mode == 'c') {
			t->confirm = 1;
			snprintf(t->prompt, sizeof t->prompt, "%s %s? y/N ",
			         t->mode == 'r' ? "retry" : "cancel", sec->v[row]);
		} else {
			do_action(c, t, sec->v[row], sec->flag[row]);
		}
	}
	return 0;
}

static void top_free(struct top *t)
{
	numbered_reset(&t->procs);
	numbered_reset(&t->running);
	numbered_reset(&t->queues);
	numbered_reset(&t->failures);
	free(t->status);
}

int cmd_top(struct ctl *c, int argc, char **argv)
{
	if (ctl_only_common_opts(c, argc, argv, 0) < 0)
		return CTL_USAGE;
	if (c->json) {
		ctl_error("top: no --json form (the commands it shows have one)");
		return CTL_USAGE;
	}
	if (ctl_connect(c) != 0)
		return CTL_USAGE;
	struct screen s = { .tty = isatty(1) && isatty(0) };
	struct top t;
	memset(&t, 0, sizeof t);
	term_size(&s);
	if (!s.tty) {
		s.height = 1 << 20;
		frame(c, &s, &t);
		top_free(&t);
		return CTL_OK;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_quit;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	term_enter();
	c->discover_every = DISCOVER_EVERY;
	double next = 0;
	while (!quit_asked) {
		if (mono_now() >= next) {
			term_size(&s);
			frame(c, &s, &t);
			next = mono_now() + REFRESH;
		}
		struct pollfd pfd = { .fd = 0, .events = POLLIN };
		int wait_ms = (int)((next - mono_now()) * 1000);
		if (poll(&pfd, 1, wait_ms > 0 ? wait_ms : 0) > 0) {
			char ch;
			if (read(0, &ch, 1) == 1) {
				if (on_key(c, &t, &s, (unsigned char)ch))
					break;
				next = 0;       /* redraw at once: the prompt or the action's result */
			} else {
				break;          /* the terminal is gone */
			}
		}
	}
	term_leave();
	top_free(&t);
	ctl_free_discovered(c);
	c->discover_every = 0;
	return CTL_OK;
}
