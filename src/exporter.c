/* SPDX-License-Identifier: MIT */
/*
 * exporter.c: cogworker's eight exporter metrics (doc/protocol.md §7.26), read from Redis.
 *
 *   # TYPE cogworker_processed_total counter      GET cogworker:stats:processed
 *   # TYPE cogworker_failed_total counter         GET cogworker:stats:failed
 *   # TYPE cogworker_retry_size gauge             ZCARD cogworker:retry
 *   # TYPE cogworker_scheduled_size gauge         ZCARD cogworker:schedule
 *   # TYPE cogworker_dead_size gauge              ZCARD cogworker:dead
 *   # TYPE cogworker_queue_size gauge             LLEN per member of cogworker:queues, by name
 *   # TYPE cogworker_queue_latency_seconds gauge  oldest job's age (§4.1), 3 decimals
 *   # TYPE cogworker_busy_workers gauge           sum of `busy` over live presence hashes
 *
 * One # TYPE line per metric, no HELP lines, no per-process labels, no histograms. Three
 * pipelined round trips: the scalars and both member lists, then LLEN + LINDEX -1 per queue
 * and HGET busy per process, with Redis TIME for "now".
 */
#include <stdlib.h>
#include <string.h>
#include "exporter.h"
#include "job.h"
#include "keys.h"

void exporter_label_value(struct sbuf *out, const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '\\')
			sb_adds(out, "\\\\");
		else if (s[i] == '"')
			sb_adds(out, "\\\"");
		else if (s[i] == '\n')
			sb_adds(out, "\\n");
		else
			sb_addc(out, s[i]);
	}
}

double exporter_latency(const char *raw, size_t len, double now)
{
	cJSON *o = job_json_parse(raw, len);
	double t = -1;
	if (cJSON_IsObject(o)) {
		const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "enqueued_at");
		if (!cJSON_IsNumber(e))
			e = cJSON_GetObjectItemCaseSensitive(o, "created_at");
		if (cJSON_IsNumber(e))
			t = e->valuedouble;
	}
	cJSON_Delete(o);
	if (t < 0 || now - t < 0)
		return 0;
	return now - t;
}

static int cmp_reply_str(const void *a, const void *b)
{
	const redisReply *x = *(redisReply *const *)a, *y = *(redisReply *const *)b;
	size_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(x->str, y->str, n);
	return c ? c : (x->len > y->len) - (x->len < y->len);
}

static void free_replies(redisReply **rep, int n)
{
	for (int i = 0; i < n; i++)
		if (rep[i])
			freeReplyObject(rep[i]);
}

int exporter_render(struct rconn *r, struct sbuf *out, const char **what)
{
	static const char *names[] = { "GET " K_PROCESSED, "GET " K_FAILED, "ZCARD " K_RETRY,
	                               "ZCARD " K_SCHEDULE, "ZCARD " K_DEAD,
	                               "SMEMBERS " K_QUEUES, "SMEMBERS " K_PROCESSES };
	redisReply *first[7];
	struct rpipe p;
	*what = "";
	rpipe_begin(r, &p);
	rpipe_add(r, &p, "GET " K_PROCESSED);
	rpipe_add(r, &p, "GET " K_FAILED);
	rpipe_add(r, &p, "ZCARD " K_RETRY);
	rpipe_add(r, &p, "ZCARD " K_SCHEDULE);
	rpipe_add(r, &p, "ZCARD " K_DEAD);
	rpipe_add(r, &p, "SMEMBERS " K_QUEUES);
	rpipe_add(r, &p, "SMEMBERS " K_PROCESSES);
	if (rpipe_exec(r, &p, first) != 0) {
		for (int i = 0; i < 7; i++)
			if (!first[i]) {
				*what = names[i];
				break;
			}
		free_replies(first, 7);
		return -1;
	}
	redisReply *queues = first[5], *procs = first[6];
	size_t nq = queues->type == REDIS_REPLY_ARRAY ? queues->elements : 0;
	size_t np = procs->type == REDIS_REPLY_ARRAY ? procs->elements : 0;
	redisReply **qs = xcalloc(nq + 1, sizeof *qs);
	for (size_t i = 0; i < nq; i++)
		qs[i] = queues->element[i];
	qsort(qs, nq, sizeof *qs, cmp_reply_str);

	double now = redis_time(r);
	if (now < 0) {
		*what = "TIME";
		free(qs);
		free_replies(first, 7);
		return -1;
	}
	int nsecond = (int)(2 * nq + np);
	redisReply **second = xcalloc((size_t)nsecond + 1, sizeof *second);
	rpipe_begin(r, &p);
	for (size_t i = 0; i < nq; i++) {
		char *key = xasprintf(K_QUEUE "%.*s", (int)qs[i]->len, qs[i]->str);
		const char *llen[] = { "LLEN", key };
		const char *lindex[] = { "LINDEX", key, "-1" };
		size_t keylen = strlen(K_QUEUE) + qs[i]->len;
		size_t l1[] = { 4, keylen }, l2[] = { 6, keylen, 2 };
		rpipe_add_argv(r, &p, 2, llen, l1);
		rpipe_add_argv(r, &p, 3, lindex, l2);
		free(key);
	}
	for (size_t i = 0; i < np; i++) {
		const redisReply *id = procs->element[i];
		char *key = xasprintf(K_PROCESS "%.*s", (int)id->len, id->str);
		const char *hget[] = { "HGET", key, "busy" };
		size_t l[] = { 4, strlen(K_PROCESS) + id->len, 4 };
		rpipe_add_argv(r, &p, 3, hget, l);
		free(key);
	}
	int failed = nsecond ? rpipe_exec(r, &p, second) : 0;
	if (failed) {
		for (int i = 0; i < nsecond; i++)
			if (!second[i]) {
				*what = i < (int)(2 * nq) ? (i % 2 ? "LINDEX " K_QUEUE "<q> -1"
				                                   : "LLEN " K_QUEUE "<q>")
				                          : "HGET " K_PROCESS "<id> busy";
				break;
			}
		free_replies(second, nsecond);
		free(second);
		free(qs);
		free_replies(first, 7);
		return -1;
	}

	sb_adds(out, "# TYPE cogworker_processed_total counter\n");
	sb_printf(out, "cogworker_processed_total %lld\n", reply_integer(first[0], 0));
	sb_adds(out, "# TYPE cogworker_failed_total counter\n");
	sb_printf(out, "cogworker_failed_total %lld\n", reply_integer(first[1], 0));
	sb_adds(out, "# TYPE cogworker_retry_size gauge\n");
	sb_printf(out, "cogworker_retry_size %lld\n", reply_integer(first[2], 0));
	sb_adds(out, "# TYPE cogworker_scheduled_size gauge\n");
	sb_printf(out, "cogworker_scheduled_size %lld\n", reply_integer(first[3], 0));
	sb_adds(out, "# TYPE cogworker_dead_size gauge\n");
	sb_printf(out, "cogworker_dead_size %lld\n", reply_integer(first[4], 0));
	sb_adds(out, "# TYPE cogworker_queue_size gauge\n");
	for (size_t i = 0; i < nq; i++) {
		sb_adds(out, "cogworker_queue_size{queue=\"");
		exporter_label_value(out, qs[i]->str, qs[i]->len);
		sb_printf(out, "\"} %lld\n", reply_integer(second[2 * i], 0));
	}
	sb_adds(out, "# TYPE cogworker_queue_latency_seconds gauge\n");
	for (size_t i = 0; i < nq; i++) {
		const redisReply *oldest = second[2 * i + 1];
		double lat = oldest->type == REDIS_REPLY_STRING
		             ? exporter_latency(oldest->str, oldest->len, now) : 0;
		sb_adds(out, "cogworker_queue_latency_seconds{queue=\"");
		exporter_label_value(out, qs[i]->str, qs[i]->len);
		sb_printf(out, "\"} %.3f\n", lat);
	}
	long long busy = 0;
	for (size_t i = 0; i < np; i++) {
		const redisReply *b = second[2 * nq + i];
		if (b->type == REDIS_REPLY_STRING)
			busy += strtoll(b->str, NULL, 10);
	}
	sb_adds(out, "# TYPE cogworker_busy_workers gauge\n");
	sb_printf(out, "cogworker_busy_workers %lld\n", busy);

	free_replies(second, nsecond);
	free(second);
	free(qs);
	free_replies(first, 7);
	return 0;
}
