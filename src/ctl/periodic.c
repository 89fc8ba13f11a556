/* SPDX-License-Identifier: MIT */
/*
 * periodic.c: `cogworkerctl periodic` (doc/protocol.md §7.16, §7.28):
 *
 *   periodic [list]           the published entries (periodic:schedule): pjid, cron, class,
 *                             args, retry, unique, enabled, last run (periodic:last_slot:
 *                             <pjid>, or never) and next run (cron_next from now)
 *   periodic run PJID         push the entry's class and args as an ordinary job, by the
 *                             producer rules (no periodic_* fields, protocol defaults), on
 *                             the entry's queue when it names one (cogworkerd's `queue`)
 *   periodic enable|disable PJID   SREM / SADD periodic:disabled
 *
 * A PJID may be abbreviated to any unambiguous prefix (the table shows 12 characters).
 * Next runs are computed in this host's time zone unless the cron names one, as the
 * Ticker does: every process of a fleet must share it.
 */
#include <stdlib.h>
#include <string.h>
#include "ctl.h"
#include "cron.h"
#include "job.h"
#include "json.h"
#include "producer.h"

#define AMBIGUOUS_SHOWN 5       /* pjids named when a prefix matches several */

struct pentry {
	char *pjid;
	char *raw;                  /* the entry JSON */
	char *cron, *cls, *unique;  /* NULL when absent / not a string */
	char *queue;                /* the entry's queue (a daemon addition), NULL = default */
	char *args;                 /* original text of args, or NULL */
	char *retry;                /* original text of retry, or NULL */
	int enabled;
	long long last_slot;        /* -1 = never */
	long long next_run;         /* -1 = unknown */
};

static void free_entries(struct pentry *e, int n)
{
	for (int i = 0; i < n; i++) {
		free(e[i].pjid);
		free(e[i].raw);
		free(e[i].cron);
		free(e[i].cls);
		free(e[i].unique);
		free(e[i].queue);
		free(e[i].args);
		free(e[i].retry);
	}
	free(e);
}

static char *member_text(const char *raw, const char *key)
{
	size_t start, len;
	if (json_member_span(raw, strlen(raw), key, &start, &len) != 0)
		return NULL;
	return xstrndup(raw + start, len);
}

static void parse_entry(struct pentry *e)
{
	cJSON *o = job_json_parse(e->raw, strlen(e->raw));
	const cJSON *v;
	if (!o)
		return;
	if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(o, "cron")))
		e->cron = xstrdup(v->valuestring);
	if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(o, "class")))
		e->cls = xstrdup(v->valuestring);
	if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(o, "unique")))
		e->unique = xstrdup(v->valuestring);
	if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(o, "queue")) && v->valuestring[0])
		e->queue = xstrdup(v->valuestring);
	if (cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(o, "args")))
		e->args = member_text(e->raw, "args");
	e->retry = member_text(e->raw, "retry");
	cJSON_Delete(o);
}

static int by_class(const void *a, const void *b)
{
	const struct pentry *x = a, *y = b;
	int d = strcmp(x->cls ? x->cls : "", y->cls ? y->cls : "");
	return d ? d : strcmp(x->pjid, y->pjid);
}

/* Every published entry with its state; 0 or CTL_USAGE after the message. */
static int read_entries(struct ctl *c, double now, struct pentry **out, int *n)
{
	*out = NULL;
	*n = 0;
	redisReply *h = rcmd(&c->r, "HGETALL " K_PERIODIC_SCHEDULE);
	if (!h)
		return ctl_redis_error(c, K_PERIODIC_SCHEDULE);
	int count = (int)(h->elements / 2);
	struct pentry *e = xcalloc((size_t)count + 1, sizeof *e);
	for (int i = 0; i < count; i++) {
		e[i].pjid = xstrndup(h->element[2 * i]->str, h->element[2 * i]->len);
		e[i].raw = xstrndup(h->element[2 * i + 1]->str, h->element[2 * i + 1]->len);
		e[i].last_slot = e[i].next_run = -1;
		parse_entry(&e[i]);
	}
	freeReplyObject(h);
	struct rpipe p;
	rpipe_begin(&c->r, &p);
	for (int i = 0; i < count; i++) {
		rpipe_add(&c->r, &p, "SISMEMBER " K_DISABLED " %s", e[i].pjid);
		rpipe_add(&c->r, &p, "GET " K_LAST_SLOT "%s", e[i].pjid);
	}
	redisReply **reps = xcalloc((size_t)p.n + 1, sizeof *reps);
	rpipe_exec(&c->r, &p, reps);
	int status = 0;
	for (int i = 0; i < count && !status; i++) {
		if (!reps[2 * i]) {
			status = ctl_redis_error(c, K_DISABLED);
			break;
		}
		e[i].enabled = reply_integer(reps[2 * i], 0) == 0;
		/* A damaged last_slot key shows as "never" rather than failing the list. */
		const redisReply *ls = reps[2 * i + 1];
		if (ls && ls->type == REDIS_REPLY_STRING)
			e[i].last_slot = strtoll(ls->str, NULL, 10);
		char err[256];
		struct cron *cr = e[i].cron ? cron_parse(e[i].cron, err, sizeof err) : NULL;
		if (cr) {
			int64_t next = cron_next(cr, (int64_t)now);
			e[i].next_run = next < 0 ? -1 : (long long)next;
			cron_free(cr);
		}
	}
	for (int i = 0; i < p.n; i++)
		if (reps[i])
			freeReplyObject(reps[i]);
	free(reps);
	if (status) {
		free_entries(e, count);
		return status;
	}
	qsort(e, (size_t)count, sizeof *e, by_class);
	*out = e;
	*n = count;
	return 0;
}

int ctl_periodic_list(struct ctl *c)
{
	double now = ctl_now(c);
	if (now < 0)
		return ctl_redis_error(c, "TIME");
	struct pentry *e;
	int n;
	int s = read_entries(c, now, &e, &n);
	if (s)
		return s;
	if (c->json) {
		struct sbuf b;
		sb_init(&b);
		sb_addc(&b, '[');
		for (int i = 0; i < n; i++) {
			sb_adds(&b, i ? ",{\"pjid\":" : "{\"pjid\":");
			jstr(&b, e[i].pjid);
			sb_adds(&b, ",\"cron\":");
			jstr(&b, e[i].cron);
			sb_adds(&b, ",\"class\":");
			jstr(&b, e[i].cls);
			sb_printf(&b, ",\"args\":%s,\"retry\":%s,\"unique\":", e[i].args ? e[i].args : "null",
			          e[i].retry ? e[i].retry : "null");
			jstr(&b, e[i].unique);
			sb_adds(&b, ",\"queue\":");
			jstr(&b, e[i].queue ? e[i].queue : "default");
			sb_printf(&b, ",\"enabled\":%s,\"last_run\":", e[i].enabled ? "true" : "false");
			e[i].last_slot >= 0 ? sb_printf(&b, "%lld", e[i].last_slot) : sb_adds(&b, "null");
			sb_adds(&b, ",\"next_run\":");
			e[i].next_run >= 0 ? sb_printf(&b, "%lld", e[i].next_run) : sb_adds(&b, "null");
			sb_addc(&b, '}');
		}
		sb_addc(&b, ']');
		jprint(&b);
	} else if (n == 0) {
		printf("no periodic entries (" K_PERIODIC_SCHEDULE " is empty)\n");
	} else {
		static const char *heads[] = { "PJID", "CRON", "CLASS", "ARGS", "LAST RUN", "NEXT RUN",
		                               "UNIQUE", "STATE" };
		static const int limits[] = { 12, 0, 0, 40, 0, 0, 0, 0 };
		struct table t;
		table_init(&t, 8, heads, limits);
		for (int i = 0; i < n; i++) {
			char last[96] = "never", next[96] = "?", iso[32], rel[48];
			if (e[i].last_slot >= 0) {
				ctl_iso_time((double)e[i].last_slot, iso);
				ctl_relative((double)e[i].last_slot, now, rel, sizeof rel);
				snprintf(last, sizeof last, "%s (%s)", iso, rel);
			}
			if (e[i].next_run >= 0) {
				ctl_iso_time((double)e[i].next_run, iso);
				ctl_relative((double)e[i].next_run, now, rel, sizeof rel);
				snprintf(next, sizeof next, "%s (%s)", iso, rel);
			}
			char pj[13];
			snprintf(pj, sizeof pj, "%s", e[i].pjid);
			const char *row[] = { pj, e[i].cron ? e[i].cron : "?", e[i].cls ? e[i].cls : "?",
			                      e[i].args ? e[i].args : "?", last, next,
			                      e[i].unique ? e[i].unique : "-",
			                      e[i].enabled ? "Enabled" : "Disabled" };
			table_add(&t, row);
		}
		table_print(&t);
		table_free(&t);
	}
	free_entries(e, n);
	return CTL_OK;
}

/*
 * Resolve a pjid (or an unambiguous prefix of one) to the full pjid and its entry JSON.
 * 0, CTL_NOTHING (message printed) or CTL_USAGE.
 */
static int resolve(struct ctl *c, const char *arg, char **pjid, char **entry)
{
	*pjid = *entry = NULL;
	redisReply *rep = rcmd(&c->r, "HGET " K_PERIODIC_SCHEDULE " %s", arg);
	if (!rep)
		return ctl_redis_error(c, K_PERIODIC_SCHEDULE);
	if (rep->type == REDIS_REPLY_STRING) {
		*pjid = xstrdup(arg);
		*entry = xstrndup(rep->str, rep->len);
		freeReplyObject(rep);
		return 0;
	}
	freeReplyObject(rep);
	/* Any prefix, however short, that names one entry (the help says so; a schedule has
	 * a handful of entries, so one or two characters are often enough). */
	size_t alen = strlen(arg);
	rep = rcmd(&c->r, "HGETALL " K_PERIODIC_SCHEDULE);
	if (!rep)
		return ctl_redis_error(c, K_PERIODIC_SCHEDULE);
	int matches = 0;
	struct sbuf some;
	sb_init(&some);
	for (size_t i = 0; i + 1 < rep->elements; i += 2) {
		const redisReply *k = rep->element[i];
		if (k->len <= alen || memcmp(k->str, arg, alen) != 0)
			continue;
		if (matches++ == 0) {
			*pjid = xstrndup(k->str, k->len);
			*entry = xstrndup(rep->element[i + 1]->str, rep->element[i + 1]->len);
		}
		if (matches <= AMBIGUOUS_SHOWN)
			sb_printf(&some, "%s%.*s", matches > 1 ? ", " : "",
			          (int)(k->len < 12 ? k->len : 12), k->str);
	}
	freeReplyObject(rep);
	if (matches == 1) {
		sb_free(&some);
		return 0;
	}
	free(*pjid);
	free(*entry);
	*pjid = *entry = NULL;
	if (matches > 1) {
		ctl_error("pjid prefix %s is ambiguous: %d entries start with it (%s%s); give more of "
		          "it", arg, matches, some.s, matches > AMBIGUOUS_SHOWN ? ", …" : "");
		sb_free(&some);
		return CTL_USAGE;
	}
	sb_free(&some);
	ctl_error("no periodic entry %s in " K_PERIODIC_SCHEDULE, arg);
	return CTL_NOTHING;
}

static int run_entry(struct ctl *c, const char *pjid, const char *raw)
{
	struct pentry e = { .raw = xstrdup(raw) };
	parse_entry(&e);
	int status = CTL_OK;
	if (!e.cls || !e.cls[0]) {
		ctl_error("periodic entry %s has no class", pjid);
		status = CTL_NOTHING;
		goto out;
	}
	struct push p = {
		.cls = e.cls, .queue = e.queue, .args_json = e.args,
		.unique_lock_ttl = c->conf.unique_lock_ttl,
		.status_expiration = c->conf.status_expiration,
	};
	char jid[25], err[512];
	int r = producer_push(&c->r, &p, jid, err, sizeof err);
	if (r <= 0) {
		ctl_error("periodic run %s: push failed: %s", pjid, err[0] ? err : c->r.err);
		status = CTL_USAGE;
		goto out;
	}
	if (c->json) {
		struct sbuf b;
		sb_init(&b);
		sb_adds(&b, "{\"pjid\":");
		jstr(&b, pjid);
		sb_printf(&b, ",\"jid\":\"%s\",\"class\":", jid);
		jstr(&b, e.cls);
		sb_adds(&b, ",\"queue\":");
		jstr(&b, e.queue ? e.queue : "default");
		sb_addc(&b, '}');
		jprint(&b);
	} else {
		printf("%s\n", jid);
	}
out:
	free(e.raw);
	free(e.cron);
	free(e.cls);
	free(e.unique);
	free(e.queue);
	free(e.args);
	free(e.retry);
	return status;
}

static int enable_disable(struct ctl *c, const char *pjid, int enable)
{
	char unchanged[512], done[512];
	snprintf(unchanged, sizeof unchanged, "periodic entry %s is already %s", pjid,
	         enable ? "enabled" : "disabled");
	snprintf(done, sizeof done, "%s %s", enable ? "enabled" : "disabled", pjid);
	return ctl_toggle_member(c, K_DISABLED, pjid, !enable, "pjid", "enabled", enable,
	                         unchanged, done);
}

int cmd_periodic(struct ctl *c, int argc, char **argv)
{
	if (ctl_only_common_opts(c, argc, argv, argc) < 0)
		return CTL_USAGE;
	int nargs = argc - optind;
	char **args = argv + optind;
	if (nargs == 0 || strcmp(args[0], "list") == 0) {
		if (nargs > 1) {
			ctl_error("%s: unexpected \"%s\"", argv[0], args[1]);
			return CTL_USAGE;
		}
		if (ctl_connect(c) != 0)
			return CTL_USAGE;
		return ctl_periodic_list(c);
	}
	const char *sub = args[0];
	int which = strcmp(sub, "run") == 0 ? 1 : strcmp(sub, "enable") == 0 ? 2
	          : strcmp(sub, "disable") == 0 ? 3 : 0;
	if (!which) {
		ctl_error("%s: unknown subcommand \"%s\" (list, run, enable, disable)", argv[0], sub);
		return CTL_USAGE;
	}
	if (nargs != 2 || !args[1][0]) {
		ctl_error("usage: cogworkerctl periodic %s PJID", sub);
		return CTL_USAGE;
	}
	if (ctl_connect(c) != 0)
		return CTL_USAGE;
	return ctl_periodic_act(c, sub, args[1]);
}

int ctl_periodic_act(struct ctl *c, const char *what, const char *arg)
{
	int which = strcmp(what, "run") == 0 ? 1 : strcmp(what, "enable") == 0 ? 2
	          : strcmp(what, "disable") == 0 ? 3 : 0;
	if (!which || !*arg) {
		ctl_error("periodic: %s %s: no such action (run, enable, disable PJID)", what, arg);
		return CTL_USAGE;
	}
	char *pjid, *entry;
	int s = resolve(c, arg, &pjid, &entry);
	if (s)
		return s;
	if (which == 1)
		s = run_entry(c, pjid, entry);
	else
		s = enable_disable(c, pjid, which == 2);
	free(pjid);
	free(entry);
	return s;
}
