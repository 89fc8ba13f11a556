/* SPDX-License-Identifier: MIT */
/*
 * jobs_history.c: a job's runs as history keeps them (doc/protocol.md §7.22), for `jobs
 * show` (and so the dashboard's job page and /api/jobs/<jid>, which run it).
 *
 * The daemon's history write keeps, per jid, an index of pointers to the job's entries
 * (cogworker:history:jid:<jid>: "<finished_at> <outcome>" scored finished_at, kept by
 * lua/history_write.lua in step with history's trims). A look is two round trips whatever
 * history holds: the index, then one ZRANGEBYSCORE of cogworker:history:all at each
 * pointer's score, pipelined. A pointer is shown only when its entry is still there and
 * names this jid: the index can never show a run history no longer has (another writer's
 * trims leave pointers behind until the index's TTL). The outcome comes from the index
 * (history's entry only says success or failed; the index the attempt's word: retrying,
 * dead, killed, discarded), the rest from the entry: times, error, cost.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "job.h"
#include "jobs_history.h"
#include "json.h"
#include "usage.h"

static double num_of(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const char *str_of(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The member of an entries reply that is this jid's entry, parsed (NULL: none). */
static cJSON *entry_of(const redisReply *rep, const char *jid, char **raw)
{
	for (size_t i = 0; rep && rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++) {
		const redisReply *m = rep->element[i];
		cJSON *o = m->str ? job_json_parse(m->str, m->len) : NULL;
		const char *j = o ? str_of(o, "jid") : NULL;
		if (j && strcmp(j, jid) == 0) {
			*raw = xstrndup(m->str, m->len);
			return o;
		}
		if (o)
			cJSON_Delete(o);
	}
	return NULL;
}

int jobs_history_read(struct ctl *c, const char *jid, struct hist_runs *out)
{
	memset(out, 0, sizeof *out);
	if (!jid)
		return 0;
	redisReply *idx = rcmd(&c->r, "ZRANGE " K_HISTORY_JID "%s 0 -1 WITHSCORES", jid);
	if (!idx) {
		if (!c->r.unavailable)
			ctl_error("warning: " K_HISTORY_JID "%s unreadable: %s", jid, c->r.err);
		return c->r.unavailable ? -1 : 0;
	}
	size_t n = idx->type == REDIS_REPLY_ARRAY ? idx->elements / 2 : 0;
	struct rpipe p;
	rpipe_begin(&c->r, &p);
	for (size_t i = 0; i < n; i++) {
		const char *score = idx->element[2 * i + 1]->str;
		rpipe_add(&c->r, &p, "ZRANGEBYSCORE " K_HISTORY_ALL " %s %s", score, score);
	}
	redisReply **rep = xcalloc(n + 1, sizeof *rep);
	if (n && rpipe_exec(&c->r, &p, rep) && c->r.unavailable) {
		for (size_t i = 0; i < n; i++)
			if (rep[i])
				freeReplyObject(rep[i]);
		free(rep);
		freeReplyObject(idx);
		return -1;
	}
	out->v = xcalloc(n + 1, sizeof *out->v);
	out->indexed = (int)n;
	for (size_t i = 0; i < n; i++) {
		const redisReply *ptr = idx->element[2 * i];
		char *raw = NULL;
		cJSON *e = entry_of(rep[i], jid, &raw);
		if (rep[i])
			freeReplyObject(rep[i]);
		if (!e)
			continue;           /* trimmed from history: not shown */
		const char *sp = ptr->str ? memchr(ptr->str, ' ', ptr->len) : NULL;
		struct hist_run *h = &out->v[out->n++];
		h->n = (int)i + 1;
		h->outcome = sp ? xstrndup(sp + 1, ptr->len - (size_t)(sp + 1 - ptr->str))
		                : xstrdup(str_of(e, "status") ? str_of(e, "status") : "?");
		h->entry = e;
		h->raw = raw;
	}
	free(rep);
	freeReplyObject(idx);
	return 0;
}

void jobs_history_free(struct hist_runs *h)
{
	for (int i = 0; i < h->n; i++) {
		free(h->v[i].outcome);
		free(h->v[i].raw);
		cJSON_Delete(h->v[i].entry);
	}
	free(h->v);
	memset(h, 0, sizeof *h);
}

const struct hist_run *jobs_history_last(const struct hist_runs *h)
{
	return h->n ? &h->v[h->n - 1] : NULL;
}

double jobs_history_finished(const struct hist_run *r)
{
	return num_of(r->entry, "finished_at");
}

const char *jobs_history_field(const struct hist_run *r, const char *name)
{
	return str_of(r->entry, name);
}

void jobs_run_cells(const cJSON *o, struct run_cells *out)
{
	double t0 = num_of(o, "started_at"), t1 = num_of(o, "finished_at");
	double rss = num_of(o, "maxrss_bytes");
	snprintf(out->iso, sizeof out->iso, "?");
	out->took[0] = '\0';
	if (!isnan(t0))
		ctl_iso_time(t0, out->iso);
	if (!isnan(t0) && !isnan(t1))
		human_duration(t1 - t0, 2, out->took, sizeof out->took);
	struct run_usage u;
	usage_of(&u, num_of(o, "cpu_s"), isnan(rss) ? -1 : (long long)rss);
	usage_text(&u, out->cost, sizeof out->cost);
}

/* ,"history":[{"run":n,"outcome":…,"duration_s":…,<the entry's members>}, …] */
void jobs_history_json(struct sbuf *b, const struct hist_runs *h)
{
	sb_adds(b, ",\"history\":[");
	for (int i = 0; i < h->n; i++) {
		const struct hist_run *r = &h->v[i];
		sb_printf(b, "%s{\"run\":%d,\"outcome\":", i ? "," : "", r->n);
		jstr(b, r->outcome);
		sb_adds(b, ",\"duration_s\":");
		jnum(b, num_of(r->entry, "finished_at") - num_of(r->entry, "started_at"));
		size_t len = strlen(r->raw);
		if (len > 2 && r->raw[0] == '{')
			sb_printf(b, ",%.*s", (int)len - 1, r->raw + 1);
		else
			sb_addc(b, '}');
	}
	sb_addc(b, ']');
}

/*
 * attempts   3 in history
 *   #1   2026-01-01T12:00:00Z  retrying   0.05s cpu=0.01s maxrss=3.1MiB  Cogworker::…: exit 1
 */
void jobs_history_human(const struct hist_runs *h)
{
	printf("\nattempts   %d in history (oldest first; cogworkerctl history)\n", h->n);
	for (int i = 0; i < h->n; i++) {
		const struct hist_run *r = &h->v[i];
		struct run_cells rc = { .iso = "" };
		jobs_run_cells(r->entry, &rc);
		const char *ec = str_of(r->entry, "error_class"), *em = str_of(r->entry, "error_message");
		char *err = em ? ctl_oneline(em, strlen(em), 200) : NULL;
		printf("  #%-3d %s  %-9s  %s%s%s%s%s%s\n", r->n, rc.iso, r->outcome, rc.took, rc.cost,
		       ec || err ? "  " : "", ec ? ec : "", ec && err ? ": " : "", err ? err : "");
		free(err);
	}
}
