/* SPDX-License-Identifier: MIT */
/*
 * bookkeeping.c: job status and run history, as cogworker's server middleware keeps
 * them, so the Web UI's Jobs and History tabs stay right when cogworkerd runs the jobs.
 *
 * Each record is one pipelined round trip; status is off when status_expiration is 0 and
 * history when history_retention_days is 0. Errors go to their own log sites ("Status",
 * "History") and are otherwise ignored: bookkeeping may miss entries during an outage,
 * it never turns a success into a failure or replaces a handler's error.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "bookkeeping.h"
#include "json.h"
#include "keys.h"
#include "util.h"

#define MAX_BACKTRACE_LINES 200

static struct log_site status_site = LOG_SITE("Status");
static struct log_site history_site = LOG_SITE("History");
static pthread_mutex_t site_lock = PTHREAD_MUTEX_INITIALIZER;

/* Fold a pipeline's outcome into a shared site (fetchers share these two). */
static void site_report(struct log_site *site, struct rconn *r, int failures, const char *what)
{
	pthread_mutex_lock(&site_lock);
	if (failures == 0)
		log_site_recovered(site, mono_now());
	else if (r->unavailable)
		log_site_unavailable(site, r->err, mono_now());
	else
		log_error("%s: %s failed (ignored): %s", site->name, what, r->err);
	pthread_mutex_unlock(&site_lock);
}

static int run_pipeline(struct rconn *r, struct rpipe *p, struct log_site *site, const char *what)
{
	redisReply *rep[16];
	int failures = rpipe_exec(r, p, rep);
	for (int i = 0; i < p->n; i++)
		if (rep[i])
			freeReplyObject(rep[i]);
	site_report(site, r, failures, what);
	return failures;
}

/* EXPIRE seconds: status_expiration rounded up, never 0 (EXPIRE 0 would delete it). */
static long status_ttl(const struct conf *c)
{
	long t = (long)c->status_expiration;
	if ((double)t < c->status_expiration)
		t++;
	return t < 1 ? 1 : t;
}

void status_write(struct rconn *r, const struct conf *c, const struct job *j,
                  const char *status, const char *error_class, const char *error_message,
                  const struct run_usage *usage)
{
	if (c->status_expiration <= 0 || !j->jid)
		return;
	char *key = xasprintf(K_STATUS "%s", j->jid);
	char now[32], ttl[32];
	snprintf(now, sizeof now, "%ld", (long)now_float());
	snprintf(ttl, sizeof ttl, "%ld", status_ttl(c));
	const char *argv[18] = { "HSET", key, "status", status, "update_time", now,
	                         "queue", j->queue };
	char cpu[32], rss[32];
	int argc = 8;
	if (j->cls) {           /* null fields are not written (§7.21) */
		argv[argc++] = "class";
		argv[argc++] = j->cls;
	}
	if (error_class) {
		argv[argc++] = "error_class";
		argv[argc++] = error_class;
		argv[argc++] = "error_message";
		argv[argc++] = error_message ? error_message : "";
	}
	if (usage && usage->measured) {         /* in the same HSET: no command more per job */
		snprintf(cpu, sizeof cpu, "%.3f", usage_cpu(usage));
		argv[argc++] = "cpu_s";
		argv[argc++] = cpu;
		if (usage->maxrss_bytes >= 0) {
			snprintf(rss, sizeof rss, "%lld", usage->maxrss_bytes);
			argv[argc++] = "maxrss_bytes";
			argv[argc++] = rss;
		}
	}
	struct rpipe p;
	rpipe_begin(r, &p);
	rpipe_add_argv(r, &p, argc, argv, NULL);
	rpipe_add(r, &p, "EXPIRE %s %s", key, ttl);
	run_pipeline(r, &p, &status_site, "status write");
	free(key);
}

/* pct (checked: a finite number, kept as written, "42" or "12.5") and message (may be
 * NULL or empty: the one written before stays) into status:<jid>. */
static int progress_write(struct rconn *r, const struct conf *c, const char *jid,
                          const char *pct_text, const char *message)
{
	char *end;
	double pct = strtod(pct_text, &end);
	if (end == pct_text || *end || !isfinite(pct))
		return 0;
	char now[32], ttl[32];
	snprintf(now, sizeof now, "%ld", (long)now_float());
	snprintf(ttl, sizeof ttl, "%ld", status_ttl(c));
	char *key = xasprintf(K_STATUS "%s", jid);
	const char *argv[] = { "HSET", key, "pct", pct_text, "update_time", now, "message",
	                       message };
	struct rpipe p;
	rpipe_begin(r, &p);
	rpipe_add_argv(r, &p, message && *message ? 8 : 6, argv, NULL);
	rpipe_add(r, &p, "EXPIRE %s %s", key, ttl);
	int failures = run_pipeline(r, &p, &status_site, "progress write");
	free(key);
	return failures && p.unavailable ? -1 : 0;
}

int status_progress(struct rconn *r, const struct conf *c, const char *jid,
                    const char *line, size_t len)
{
	static const char prefix[] = PROGRESS_LINE;
	size_t plen = sizeof prefix - 1;
	if (c->status_expiration <= 0 || !jid || len <= plen || memcmp(line, prefix, plen) != 0)
		return 0;
	while (len > plen && (line[len - 1] == '\r' || line[len - 1] == ' '))
		len--;                  /* a CRLF line, trailing blanks */
	char *text = utf8_scrub(line + plen, len - plen, 1000);
	char *message = strchr(text, ' ');
	if (message)
		*message++ = '\0';
	int rc = progress_write(r, c, jid, text, message);
	free(text);
	return rc;
}

int status_progress_msg(struct rconn *r, const struct conf *c, const char *jid,
                        const char *pct, const char *message)
{
	if (c->status_expiration <= 0 || !jid)
		return 0;
	char *m = message ? utf8_scrub(message, strlen(message), 1000) : NULL;
	int rc = progress_write(r, c, jid, pct, m);
	free(m);
	return rc;
}

/* The last lines of stderr as a JSON array (≤ 200), or the exit status alone. */
static char *backtrace_json(const char *tail, size_t len, const char *error_message)
{
	struct sbuf b;
	sb_init(&b);
	sb_addc(&b, '[');
	const char *lines[MAX_BACKTRACE_LINES];
	size_t lens[MAX_BACKTRACE_LINES];
	int n = 0;
	size_t end = len;
	while (end > 0 && n < MAX_BACKTRACE_LINES) {
		while (end > 0 && (tail[end - 1] == '\n' || tail[end - 1] == '\r'))
			end--;
		if (end == 0)
			break;
		size_t start = end;
		while (start > 0 && tail[start - 1] != '\n')
			start--;
		lines[n] = tail + start;
		lens[n++] = end - start;
		end = start;
	}
	if (n == 0) {
		/* Nothing on stderr: the message is then the exit status line alone ("exit
		 * status 3", "killed by signal 9 (SIGKILL)", "exec failed: …"), kept whole. */
		const char *m = error_message ? error_message : "";
		char *q = json_quote(m, strlen(m));
		sb_adds(&b, q);
		free(q);
	}
	for (int i = n - 1; i >= 0; i--) {
		char *q = json_quote(lines[i], lens[i]);
		sb_printf(&b, "%s%s", i == n - 1 ? "" : ",", q);
		free(q);
	}
	sb_addc(&b, ']');
	return sb_steal(&b);
}

static char *quoted_or_null(const char *s)
{
	return s ? json_quote(s, strlen(s)) : xstrdup("null");
}

/* EXPIRE seconds of a job's history index: the retention rounded up, never 0. */
static long history_index_ttl(const struct conf *c)
{
	double d = ceil(c->history_retention_days * 86400.0);
	return d < 1 ? 1 : (long)d;
}

void history_record(struct rconn *r, const struct conf *c, const struct job *j,
                    const char *outcome, double started, double finished,
                    const char *error_class, const char *error_message,
                    const char *stderr_tail, size_t tail_len, const struct run_usage *usage)
{
	if (c->history_retention_days <= 0 || !j->obj)
		return;
	int success = strcmp(outcome, "success") == 0;
	char s[32], f[32];
	job_format_time(started, s);
	job_format_time(finished, f);
	char *jid = quoted_or_null(j->jid), *cls = quoted_or_null(j->cls);
	char *queue = quoted_or_null(j->queue);
	char *ec = success ? xstrdup("null") : quoted_or_null(error_class);
	char *em = success ? xstrdup("null") : quoted_or_null(error_message);
	char *bt = success ? xstrdup("null") : backtrace_json(stderr_tail, tail_len, error_message);
	struct sbuf cost;
	sb_init(&cost);
	usage_json(usage, &cost);
	char *entry = xasprintf("{\"jid\":%s,\"class\":%s,\"queue\":%s,\"args\":%s,\"status\":\"%s\","
	                        "\"started_at\":%s,\"finished_at\":%s,\"error_class\":%s,"
	                        "\"error_message\":%s,\"backtrace\":%s%s}",
	                        jid, cls, queue, j->args_json, success ? "success" : "failed",
	                        s, f, ec, em, bt, cost.s ? cost.s : "");
	sb_free(&cost);
	char day[64], day_ttl[32], cutoff[32], max[32], index_ttl[32];
	time_t t = (time_t)finished;
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(day, sizeof day, K_HISTORY_DAILY "%Y-%m-%d", &tm);
	snprintf(day_ttl, sizeof day_ttl, "%ld", (long)c->history_daily_retention_days * 86400L);
	snprintf(cutoff, sizeof cutoff, "(%.6f", finished - c->history_retention_days * 86400.0);
	snprintf(max, sizeof max, "%d", c->history_max_entries);
	snprintf(index_ttl, sizeof index_ttl, "%ld", history_index_ttl(c));
	char *index = j->jid ? xasprintf(K_HISTORY_JID "%s", j->jid) : NULL;
	const char *keys[] = { K_HISTORY_ALL, success ? K_HISTORY_SUCCESS : K_HISTORY_FAILED, day,
	                       index };
	const char *args[] = { f, entry, cutoff, max, success ? "success" : "failed", day_ttl,
	                       index_ttl, outcome, K_HISTORY_JID };
	redisReply *rep = rscript(r, "history_write", index ? 4 : 3, keys, 9, args, NULL);
	site_report(&history_site, r, rep ? 0 : 1, "history write");
	if (rep)
		freeReplyObject(rep);
	free(index);
	free(jid);
	free(cls);
	free(queue);
	free(ec);
	free(em);
	free(bt);
	free(entry);
}
