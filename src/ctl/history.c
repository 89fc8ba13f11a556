/* SPDX-License-Identifier: MIT */
/*
 * history.c: `cogworkerctl history`: the run history (doc/protocol.md §7.22), as cogworker's Web
 * UI History tab shows it: one line per finished run, newest first.
 *
 *   history [--class C] [--status success|failed] [--since T] [--limit N]
 *
 * Reads cogworker:history:all, or :success / :failed for --status, newest first
 * (ZREVRANGEBYSCORE from +inf down to --since, a page at a time), filters by class and
 * stops at --limit runs (default 50, 0 = all). T is a time as every command reads one
 * (src/timearg.h): an epoch, an ISO 8601 time ("2026-01-01", "2026-01-01T06:00:00Z") or a
 * duration back from now ("90m", "12h", "7d"), counted from Redis's clock. The per-day counters (cogworker:history:daily:<day>) of the days the listing
 * covers are shown after the runs (--json: "daily"). History is written only by daemons
 * with history_retention_days > 0.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "ctl.h"
#include "job.h"
#include "json.h"
#include "usage.h"

#define PAGE 500
#define DEFAULT_LIMIT 50
#define MAX_DAYS 31             /* daily counters shown at most */

struct run {
	char *raw;                  /* the entry as stored */
	size_t len;
	double score;
	cJSON *o;                   /* NULL when the entry does not parse */
};

static const char *sfield(const struct run *r, const char *name)
{
	const cJSON *v = r->o ? cJSON_GetObjectItemCaseSensitive(r->o, name) : NULL;
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static double nfield(const struct run *r, const char *name)
{
	const cJSON *v = r->o ? cJSON_GetObjectItemCaseSensitive(r->o, name) : NULL;
	return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static void runs_free(struct run *v, int n)
{
	for (int i = 0; i < n; i++) {
		free(v[i].raw);
		if (v[i].o)
			cJSON_Delete(v[i].o);
	}
	free(v);
}

/* The runs newest first, from index from, at most limit of them, reading at most budget
 * entries (0 = no limit); *next: the index after the last one read (-1 at the end). 0 or
 * CTL_USAGE after the message. */
static int read_runs(struct ctl *c, const char *key, const char *cls, double since, long from,
                     long limit, long budget, long *next, struct run **out, int *nout)
{
	struct run *v = NULL;
	int n = 0, cap = 0;
	char min[64];
	if (isfinite(since))
		snprintf(min, sizeof min, "%.6f", since);
	else
		snprintf(min, sizeof min, "-inf");
	long read = 0;
	*next = -1;
	for (long offset = from;; offset += PAGE) {
		redisReply *rep = rcmd(&c->r, "ZREVRANGEBYSCORE %s +inf %s WITHSCORES LIMIT %ld %d",
		                       key, min, offset, PAGE);
		if (!rep) {
			runs_free(v, n);
			return ctl_redis_error(c, key);
		}
		size_t got = rep->elements / 2;
		int spent = 0;
		for (size_t i = 0; i < got && (limit == 0 || n < limit) && !spent; i++) {
			*next = offset + (long)i + 1;
			spent = budget > 0 && ++read >= budget;
			const redisReply *m = rep->element[2 * i], *s = rep->element[2 * i + 1];
			struct run r = { .raw = xstrndup(m->str, m->len), .len = m->len,
			                 .score = strtod(s->str, NULL) };
			r.o = job_json_parse(r.raw, r.len);
			if (r.o && !cJSON_IsObject(r.o)) {
				cJSON_Delete(r.o);
				r.o = NULL;
			}
			const char *rc = sfield(&r, "class");
			if (cls && !(rc && strcmp(rc, cls) == 0)) {
				free(r.raw);
				if (r.o)
					cJSON_Delete(r.o);
				continue;
			}
			if (n == cap) {
				cap = cap ? cap * 2 : 64;
				v = xrealloc(v, sizeof *v * (size_t)cap);
			}
			v[n++] = r;
		}
		freeReplyObject(rep);
		if (got < PAGE && (limit == 0 || n < limit) && !spent)
			*next = -1;
		if (got < PAGE || (limit > 0 && n >= limit) || spent)
			break;
	}
	*out = v;
	*nout = n;
	return 0;
}

/* "2026-01-01" of an epoch, UTC. */
static void day_of(double t, char out[16])
{
	time_t s = (time_t)floor(t);
	struct tm tm;
	gmtime_r(&s, &tm);
	strftime(out, 16, "%Y-%m-%d", &tm);
}

struct day {
	char day[16];
	long long success, failed;
};

/* The daily counters from the day of `from` to the day of `to` (at most MAX_DAYS, the
 * newest ones), newest first. */
static int read_daily(struct ctl *c, double from, double to, struct day *out, int *nout)
{
	long first = (long)floor(from / 86400.0), last = (long)floor(to / 86400.0);
	if (last - first >= MAX_DAYS)
		first = last - MAX_DAYS + 1;
	int n = 0;
	struct rpipe p;
	rpipe_begin(&c->r, &p);
	for (long d = last; d >= first; d--) {
		day_of((double)d * 86400.0, out[n].day);
		rpipe_add(&c->r, &p, "HMGET " K_HISTORY_DAILY "%s success failed", out[n].day);
		n++;
	}
	redisReply *reps[MAX_DAYS];
	rpipe_exec(&c->r, &p, reps);
	int status = 0;
	for (int i = 0; i < n; i++) {
		const redisReply *r = reps[i];
		if (!r) {
			if (!status)
				status = ctl_redis_error_family(c, K_HISTORY_DAILY);
			continue;
		}
		out[i].success = r->elements == 2 && r->element[0]->type == REDIS_REPLY_STRING
		                 ? strtoll(r->element[0]->str, NULL, 10) : 0;
		out[i].failed = r->elements == 2 && r->element[1]->type == REDIS_REPLY_STRING
		                ? strtoll(r->element[1]->str, NULL, 10) : 0;
		freeReplyObject(reps[i]);
	}
	*nout = n;
	return status;
}

static void print_json(const struct run *v, int n, long from, long next,
                       const struct day *days, int ndays)
{
	struct sbuf b;
	sb_init(&b);
	sb_printf(&b, "{\"from\":%ld,\"next\":", from);
	next >= 0 ? sb_printf(&b, "%ld", next) : sb_adds(&b, "null");
	sb_adds(&b, ",\"runs\":[");
	for (int i = 0; i < n; i++) {
		if (i)
			sb_addc(&b, ',');
		if (v[i].o && json_valid(v[i].raw, v[i].len))
			sb_add(&b, v[i].raw, v[i].len);     /* as stored: nothing re-encoded */
		else
			jstrn(&b, v[i].raw, v[i].len);
	}
	sb_adds(&b, "],\"daily\":[");
	for (int i = 0; i < ndays; i++)
		sb_printf(&b, "%s{\"day\":\"%s\",\"success\":%lld,\"failed\":%lld}", i ? "," : "",
		          days[i].day, days[i].success, days[i].failed);
	sb_adds(&b, "]}");
	jprint(&b);
}

static void print_human(const struct run *v, int n, double now, const struct day *days,
                        int ndays)
{
	static const char *heads[] = { "FINISHED", "STATUS", "CLASS", "QUEUE", "JID", "TOOK",
	                               "CPU", "MAXRSS", "ARGS", "ERROR" };
	static const int limits[] = { 0, 0, 40, 0, 0, 0, 0, 0, 30, 60 };
	struct table t;
	table_init(&t, 10, heads, limits);
	for (int i = 0; i < n; i++) {
		const struct run *r = &v[i];
		char when[96], iso[32], rel[48], took[32] = "-";
		double fin = nfield(r, "finished_at"), start = nfield(r, "started_at");
		if (isnan(fin))
			fin = r->score;
		ctl_iso_time(fin, iso);
		ctl_relative(fin, now, rel, sizeof rel);
		snprintf(when, sizeof when, "%s (%s)", iso, rel);
		if (!isnan(start) && fin >= start) {
			if (fin - start < 60)
				snprintf(took, sizeof took, "%.1fs", fin - start);
			else
				ctl_duration(fin - start, took, sizeof took);
		}
		/* what the run cost (usage.h): "-" where the entry has no figure */
		char cpu[32] = "-", rss[32] = "-";
		double cs = nfield(r, "cpu_s"), rb = nfield(r, "maxrss_bytes");
		if (!isnan(cs))
			snprintf(cpu, sizeof cpu, "%.2fs", cs);
		if (!isnan(rb))
			usage_bytes_human((long long)rb, rss, sizeof rss);
		char *args = NULL, *err = NULL;
		size_t astart, alen;            /* the args text as stored (never re-encoded) */
		if (r->o && json_member_span(r->raw, r->len, "args", &astart, &alen) == 0)
			args = xstrndup(r->raw + astart, alen);
		const char *ec = sfield(r, "error_class"), *em = sfield(r, "error_message");
		if (ec || em)
			err = xasprintf("%s%s%s", ec ? ec : "", ec && em ? ": " : "", em ? em : "");
		const char *row[] = {
			when, r->o ? (sfield(r, "status") ? sfield(r, "status") : "?") : "(unreadable)",
			sfield(r, "class") ? sfield(r, "class") : "?",
			sfield(r, "queue") ? sfield(r, "queue") : "-",
			sfield(r, "jid") ? sfield(r, "jid") : "-", took, cpu, rss,
			args ? args : (r->o ? "" : r->raw), err ? err : "",
		};
		table_add(&t, row);
		free(err);
		free(args);
	}
	table_print(&t);
	table_free(&t);
	if (ndays) {
		printf("\nper day (UTC, all classes):\n");
		static const char *dheads[] = { "DAY", "SUCCESS", "FAILED" };
		struct table d;
		table_init(&d, 3, dheads, NULL);
		for (int i = 0; i < ndays; i++) {
			char s[32], f[32];
			snprintf(s, sizeof s, "%lld", days[i].success);
			snprintf(f, sizeof f, "%lld", days[i].failed);
			const char *row[] = { days[i].day, s, f };
			table_add(&d, row);
		}
		table_print(&d);
		table_free(&d);
	}
}

int cmd_history(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "class", required_argument, NULL, 'C' },
		{ "status", required_argument, NULL, 's' },
		{ "since", required_argument, NULL, 'S' },
		{ "limit", required_argument, NULL, 'l' },
		CTL_COMMON_OPTS,
		{ 0, 0, 0, 0 },
	};
	const char *cls = NULL, *status = NULL, *since_arg = NULL;
	long limit = DEFAULT_LIMIT;
	int ch;
	ctl_getopt_reset();
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 'C': cls = optarg; break;
		case 's':
			if (strcmp(optarg, "success") && strcmp(optarg, "failed")) {
				ctl_error("history: --status is success or failed, not \"%s\"", optarg);
				return CTL_USAGE;
			}
			status = optarg;
			break;
		case 'S': since_arg = optarg; break;
		case 'l': {
			char *end;
			limit = strtol(optarg, &end, 10);
			if (*end || end == optarg || limit < 0) {
				ctl_error("history: --limit wants a count (0 = no limit), not \"%s\"", optarg);
				return CTL_USAGE;
			}
			break;
		}
		default:
			if (!ctl_common_opt(c, ch, argv))
				return CTL_USAGE;
		}
	}
	if (optind < argc) {
		ctl_error("history: unexpected \"%s\"", argv[optind]);
		return CTL_USAGE;
	}
	double since = NAN, asked = now_float();
	int ago = since_arg ? ctl_time_arg("history --since", since_arg, asked, -1, &since) : 0;
	if (ago < 0)
		return CTL_USAGE;
	if (ctl_connect(c) != 0)
		return CTL_USAGE;
	if (ago) {
		double now = ctl_now(c);
		if (now < 0)
			return ctl_redis_error(c, "TIME");
		since += now - asked;           /* a duration counts back from Redis time */
	}
	return ctl_history(c, cls, status, since, 0, limit, 0, NAN);
}

int ctl_history(struct ctl *c, const char *cls, const char *status, double since, long from,
                long limit, long budget, double daily_from)
{
	double now = ctl_now(c);
	if (now < 0)
		return ctl_redis_error(c, "TIME");
	char key[64];
	snprintf(key, sizeof key, K_HISTORY "%s", status ? status : "all");
	struct run *v = NULL;
	int n = 0;
	long next;
	int st = read_runs(c, key, cls, since, from, limit, budget, &next, &v, &n);
	if (st)
		return st;
	struct day days[MAX_DAYS];
	int ndays = 0;
	double oldest = isfinite(daily_from) ? daily_from
	              : isfinite(since) ? since : (n ? v[n - 1].score : now);
	if ((st = read_daily(c, oldest, now, days, &ndays)) != 0) {
		runs_free(v, n);
		return st;
	}
	/* Only the days that recorded something. */
	int kept = 0;
	for (int i = 0; i < ndays; i++)
		if (days[i].success || days[i].failed)
			days[kept++] = days[i];
	ndays = kept;
	if (c->json) {
		print_json(v, n, from, next, days, ndays);
	} else if (n == 0) {
		redisReply *rep = rcmd(&c->r, "EXISTS " K_HISTORY_ALL);
		int any = rep && rep->type == REDIS_REPLY_INTEGER && rep->integer > 0;
		if (rep)
			freeReplyObject(rep);
		printf("no runs recorded%s\n", any ? " that match" :
		       " (history is written by daemons with history_retention_days > 0)");
	} else {
		print_human(v, n, now, days, ndays);
	}
	runs_free(v, n);
	return CTL_OK;
}
