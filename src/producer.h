/* SPDX-License-Identifier: MIT */
/*
 * producer.h: pushing a job by cogworker's producer rules (doc/protocol.md §5), shared by
 * cogworkerctl and the periodic ticker.
 */
#ifndef COGWORKERD_PRODUCER_H
#define COGWORKERD_PRODUCER_H

#include "redis.h"

struct push {
	const char *cls;
	const char *queue;          /* NULL = "default" */
	const char *args_json;      /* a JSON array; NULL = "[]" */
	const char *retry_json;     /* JSON text of retry; NULL = omitted (means true) */
	double at;                  /* 0 = now; < 1e9 = seconds from now; else an epoch */
	const char *jid;            /* NULL = a new one */
	int unique;                 /* until_executed */
	double unique_lock_ttl;     /* for the unique lock */
	const char *extra;          /* extra members as JSON text without braces, or NULL */
	double status_expiration;   /* > 0: write status "queued" after the push (§5 step 4) */
};

/* 1 pushed (jid_out filled), 0 suppressed by a held unique lock, -1 error (r->err or err). */
int producer_push(struct rconn *r, const struct push *p, char jid_out[25], char *err,
                  size_t errlen);

/* Build the job JSON without pushing it (cogworkerctl exec); malloc'd. */
char *producer_build(const struct push *p, const char *jid, double now, double at);

#endif
