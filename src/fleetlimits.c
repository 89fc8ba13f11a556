/* SPDX-License-Identifier: MIT */
/*
 * fleetlimits.c: the fleet-wide limits as Redis holds them (doc/protocol.md §7.30), read for
 * `cogworkerctl limits` and the daemon's /metrics: one implementation, so both show the
 * same thing.
 *
 * The classes and what they declare come from cogworker:limits (written by the ADMIT
 * script at each start, so a class shows up once a job of it has been started or turned
 * away). Then, per class, in one pipelined round trip: the fleet slots still leased (score
 * = expiry, on Redis's clock: an expired lease of a dead holder is not counted even before
 * a script trims it), the jobs turned away whose next try is at most 60 s old (waiters),
 * and the starts of the rate window. Nothing is written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>
#include "exporter.h"
#include "fleetlimits.h"
#include "job.h"
#include "keys.h"

#define WAITER_HORIZON 60.0     /* as lua/admit.lua trims them */

void fleet_limits_free(struct fleet_limit *l, int n)
{
	for (int i = 0; i < n; i++) {
		free(l[i].cls);
		free(l[i].decl);
		for (int k = 0; k < l[i].nholders; k++)
			free(l[i].holders[k]);
		free(l[i].holders);
		free(l[i].expires);
	}
	free(l);
}

static void parse_decl(struct fleet_limit *l)
{
	cJSON *o = job_json_parse(l->decl, strlen(l->decl));
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, "fleet_concurrency");
	const cJSON *rl = cJSON_GetObjectItemCaseSensitive(o, "rate_limit");
	if (cJSON_IsNumber(f) && f->valuedouble >= 1)
		l->fleet_n = (int)f->valuedouble;
	if (cJSON_IsString(rl) && conf_parse_rate(rl->valuestring, &l->rate_n, &l->window) != 0)
		l->rate_n = 0;
	if (o)
		cJSON_Delete(o);
}

static int by_class(const void *a, const void *b)
{
	return strcmp(((const struct fleet_limit *)a)->cls, ((const struct fleet_limit *)b)->cls);
}

int fleet_limits_read(struct rconn *r, struct fleet_limit **out, int *n, const char **what)
{
	*out = NULL;
	*n = 0;
	*what = K_LIMITS;
	double now = redis_time(r);
	if (now < 0)
		return -1;
	redisReply *all = rcmd(r, "HGETALL %s", K_LIMITS);
	if (!all)
		return -1;
	int count = all->type == REDIS_REPLY_ARRAY ? (int)all->elements / 2 : 0;
	struct fleet_limit *l = xcalloc((size_t)count + 1, sizeof *l);
	for (int i = 0; i < count; i++) {
		l[i].cls = xstrndup(all->element[2 * i]->str, all->element[2 * i]->len);
		l[i].decl = xstrndup(all->element[2 * i + 1]->str, all->element[2 * i + 1]->len);
		parse_decl(&l[i]);
	}
	freeReplyObject(all);
	qsort(l, (size_t)count, sizeof *l, by_class);

	char t_now[32], t_waiters[32];
	job_format_time(now, t_now);
	job_format_time(now - WAITER_HORIZON, t_waiters);
	struct rpipe p;
	rpipe_begin(r, &p);
	for (int i = 0; i < count; i++) {
		char t_window[32];
		job_format_time(now - (l[i].rate_n > 0 ? l[i].window : 0), t_window);
		rpipe_add(r, &p, "ZRANGEBYSCORE %s%s (%s +inf WITHSCORES", K_SLOTS, l[i].cls, t_now);
		rpipe_add(r, &p, "ZCOUNT %s%s %s +inf", K_WAITERS, l[i].cls, t_waiters);
		rpipe_add(r, &p, "ZRANGEBYSCORE %s%s (%s +inf WITHSCORES", K_RATE, l[i].cls, t_window);
	}
	redisReply **rep = xcalloc((size_t)count * 3 + 1, sizeof *rep);
	int failures = rpipe_exec(r, &p, rep);
	for (int i = 0; i < count && failures == 0; i++) {
		const redisReply *h = rep[3 * i], *w = rep[3 * i + 1], *s = rep[3 * i + 2];
		l[i].nholders = (int)h->elements / 2;
		l[i].holders = xcalloc((size_t)l[i].nholders + 1, sizeof *l[i].holders);
		l[i].expires = xcalloc((size_t)l[i].nholders + 1, sizeof *l[i].expires);
		for (int k = 0; k < l[i].nholders; k++) {
			l[i].holders[k] = xstrndup(h->element[2 * k]->str, h->element[2 * k]->len);
			l[i].expires[k] = strtod(h->element[2 * k + 1]->str, NULL);
		}
		l[i].waiters = w->integer;
		l[i].window_starts = l[i].rate_n > 0 ? (long long)s->elements / 2 : 0;
		/* The window has room again once the start that has to leave it leaves. */
		long long over = l[i].window_starts - l[i].rate_n;
		if (l[i].rate_n > 0 && over >= 0)
			l[i].next_room = strtod(s->element[2 * over + 1]->str, NULL) + l[i].window;
	}
	for (int i = 0; i < count * 3; i++)
		if (rep[i])
			freeReplyObject(rep[i]);
	free(rep);
	if (failures) {
		*what = "limit keys";
		fleet_limits_free(l, count);
		return -1;
	}
	*out = l;
	*n = count;
	return 0;
}

static void gauge(struct sbuf *b, const char *name, const struct fleet_limit *l, int n,
                  int which)
{
	int any = 0;
	for (int i = 0; i < n; i++) {
		double v;
		switch (which) {
		case 0: v = l[i].fleet_n; break;
		case 1: v = l[i].nholders; break;
		case 2: v = (double)l[i].waiters; break;
		case 3: v = l[i].rate_n; break;
		case 4: v = l[i].window; break;
		default: v = (double)l[i].window_starts; break;
		}
		if ((which == 0 || which == 1) && l[i].fleet_n == 0)
			continue;
		if (which >= 3 && l[i].rate_n == 0)
			continue;
		if (!any)
			sb_printf(b, "# TYPE %s gauge\n", name);
		any = 1;
		sb_printf(b, "%s{class=\"", name);
		exporter_label_value(b, l[i].cls, strlen(l[i].cls));
		sb_printf(b, "\"} %.15g\n", v);
	}
}

void fleet_limits_render(const struct fleet_limit *l, int n, struct sbuf *b)
{
	gauge(b, "cogworkerd_fleet_concurrency", l, n, 0);
	gauge(b, "cogworkerd_fleet_slots_held", l, n, 1);
	gauge(b, "cogworkerd_limit_waiters", l, n, 2);
	gauge(b, "cogworkerd_rate_limit", l, n, 3);
	gauge(b, "cogworkerd_rate_limit_window_seconds", l, n, 4);
	gauge(b, "cogworkerd_rate_limit_window_starts", l, n, 5);
}
