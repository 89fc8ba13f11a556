/* SPDX-License-Identifier: MIT */
/*
 * stats.c: `cogworkerctl stats`: processed, failed, enqueued (sum of LLEN over
 * cogworker:queues), scheduled, retry, dead, busy (sum of the `busy` field of live
 * processes, as cogworker's dashboard and exporter count it), processes (live ones) and
 * the last 24 hours of hourly throughput (cogworker:throughput:<hour>, oldest first; the
 * table shows the totals and only the hours that had any, --json all 24).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "ctl.h"

#define HOURS 24

static long long counter(const redisReply *rep)
{
	if (!rep || rep->type != REDIS_REPLY_STRING)
		return 0;
	return strtoll(rep->str, NULL, 10);
}

int cmd_stats(struct ctl *c, int argc, char **argv)
{
	if (ctl_only_common_opts(c, argc, argv, 0) < 0)
		return CTL_USAGE;
	if (ctl_connect(c) != 0)
		return CTL_USAGE;
	return ctl_stats(c);
}

int ctl_stats(struct ctl *c)
{
	double now = ctl_now(c);
	if (now < 0)
		return ctl_redis_error(c, "TIME");

	static const char *const keys[] = {
		K_PROCESSED, K_FAILED, K_SCHEDULE, K_RETRY, K_DEAD,
	};
	struct rpipe p;
	rpipe_begin(&c->r, &p);
	rpipe_add(&c->r, &p, "GET %s", keys[0]);
	rpipe_add(&c->r, &p, "GET %s", keys[1]);
	rpipe_add(&c->r, &p, "ZCARD %s", keys[2]);
	rpipe_add(&c->r, &p, "ZCARD %s", keys[3]);
	rpipe_add(&c->r, &p, "ZCARD %s", keys[4]);
	long long hour = (long long)floor(now / 3600.0);
	for (int i = 0; i < HOURS; i++)
		rpipe_add(&c->r, &p, "HMGET " K_THROUGHPUT "%lld processed failed",
		          hour - (HOURS - 1) + i);
	redisReply *reps[5 + HOURS];
	rpipe_exec(&c->r, &p, reps);
	int status = 0;
	for (int i = 0; i < 5 + HOURS && !status; i++)
		if (!reps[i]) {
			char *what = i < 5 ? xstrdup(keys[i])
			                   : xasprintf(K_THROUGHPUT "%lld", hour - (HOURS - 1) + i - 5);
			status = ctl_redis_error(c, what);
			free(what);
		}
	long long v[5] = { 0 };
	long long tp[HOURS][2];
	if (!status) {
		v[0] = counter(reps[0]);
		v[1] = counter(reps[1]);
		for (int i = 2; i < 5; i++)
			v[i] = reps[i]->integer;
		for (int i = 0; i < HOURS; i++) {
			const redisReply *h = reps[5 + i];
			tp[i][0] = h->elements == 2 ? counter(h->element[0]) : 0;
			tp[i][1] = h->elements == 2 ? counter(h->element[1]) : 0;
		}
	}
	for (int i = 0; i < 5 + HOURS; i++)
		if (reps[i])
			freeReplyObject(reps[i]);
	if (status)
		return status;

	struct queue_info *q;
	int nq;
	if ((status = ctl_read_queues(c, now, 0, 0, &q, &nq)) != 0)
		return status;
	long long enqueued = 0;
	for (int i = 0; i < nq; i++)
		enqueued += q[i].size;
	ctl_free_queues(q, nq);
	struct process_info *pr;
	int np;
	if ((status = ctl_read_processes(c, 0, &pr, &np)) != 0)
		return status;
	long long busy = 0;
	for (int i = 0; i < np; i++)
		busy += pr[i].busy_field;
	ctl_free_processes(pr, np);

	if (c->json) {
		struct sbuf b;
		sb_init(&b);
		sb_printf(&b, "{\"processed\":%lld,\"failed\":%lld,\"enqueued\":%lld,"
		          "\"scheduled\":%lld,\"retry\":%lld,\"dead\":%lld,\"busy\":%lld,"
		          "\"processes\":%d,\"throughput\":[", v[0], v[1], enqueued, v[2], v[3], v[4],
		          busy, np);
		for (int i = 0; i < HOURS; i++)
			sb_printf(&b, "%s{\"hour\":%lld,\"processed\":%lld,\"failed\":%lld}", i ? "," : "",
			          (hour - (HOURS - 1) + i) * 3600, tp[i][0], tp[i][1]);
		sb_adds(&b, "]}");
		jprint(&b);
		return CTL_OK;
	}
	printf("processed   %lld\nfailed      %lld\nenqueued    %lld\nscheduled   %lld\n"
	       "retry       %lld\ndead        %lld\nbusy        %lld\nprocesses   %d\n",
	       v[0], v[1], enqueued, v[2], v[3], v[4], busy, np);
	/* The hours that had any: 24 rows of mostly zeros hid the few that mattered. */
	long long sum[2] = { 0, 0 };
	for (int i = 0; i < HOURS; i++) {
		sum[0] += tp[i][0];
		sum[1] += tp[i][1];
	}
	if (sum[0] == 0 && sum[1] == 0) {
		printf("\nthroughput, last 24 hours (UTC): nothing processed or failed\n");
		return CTL_OK;
	}
	printf("\nthroughput, last 24 hours (UTC): %lld processed, %lld failed; the hours with "
	       "any:\n", sum[0], sum[1]);
	static const char *heads[] = { "HOUR", "PROCESSED", "FAILED" };
	struct table t;
	table_init(&t, 3, heads, NULL);
	for (int i = 0; i < HOURS; i++) {
		if (tp[i][0] == 0 && tp[i][1] == 0)
			continue;
		char when[32], a[32], f[32];
		ctl_iso_time((double)(hour - (HOURS - 1) + i) * 3600.0, when);
		when[16] = 'Z';         /* 2026-01-01T12:00Z */
		when[17] = '\0';
		snprintf(a, sizeof a, "%lld", tp[i][0]);
		snprintf(f, sizeof f, "%lld", tp[i][1]);
		const char *row[] = { when, a, f };
		table_add(&t, row);
	}
	table_print(&t);
	table_free(&t);
	return CTL_OK;
}
