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
	/* Batches and dependencies (doc/protocol.md §7.34): with either, the push is
	 * BATCH_PUSH, which adds the member or makes the job wait in the same step. */
	const char *bid;            /* a member of this batch ("bid" in its JSON), or NULL */
	const char *adder;          /* the running member that adds it, or NULL */
	const char *const *after;   /* jids it waits for ("after" in its JSON) */
	int nafter;
	int after_any;              /* runs once they settled, whatever the outcome */
};

/*
 * The most jobs one push may wait for (--after, doc/protocol.md §7.34): each is carried in
 * the job's JSON, checked by cogworkerctl one by one and written by BATCH_PUSH in one atomic
 * step. A wider fan-in is a batch whose on_success callback is the job.
 */
#define PUSH_MAX_AFTER 1000

/* 0 when a push may wait for n jobs, else -1 with the refusal, naming the cap, in err. */
int producer_after_ok(int n, char *err, size_t errlen);

/* 1 pushed (jid_out filled), 0 suppressed by a held unique lock, -1 error (r->err or err).
 * With dependencies not yet met, "pushed" is into the waiting set: *waiting (may be NULL)
 * says so. */
int producer_push(struct rconn *r, const struct push *p, char jid_out[25], char *err,
                  size_t errlen);
int producer_push_flow(struct rconn *r, const struct push *p, char jid_out[25], char *err,
                       size_t errlen, int *waiting);

/* DELETE_IF_OWNED (doc/protocol.md §6.19), the one call of it: 1 deleted, 0 held by
 * another jid or by none, -1 error (r->err). */
int owned_delete(struct rconn *r, const char *key, const char *jid);

/*
 * A job taken out by hand (cogworkerctl jobs delete, jobs kill) gives back the locks it
 * holds, as a daemon does when a job dies (doc/protocol.md §7.18): its unique lock when it
 * is until_executed, its periodic running lock when it has a pjid, each only while its jid
 * owns it (DELETE_IF_OWNED). Otherwise an identical push is refused until the TTL (24 h).
 * The number released, or -1 (r->err).
 */
struct job;
int producer_release_locks(struct rconn *r, const struct job *j);

/* Build the job JSON without pushing it (cogworkerctl exec); malloc'd. */
char *producer_build(const struct push *p, const char *jid, double now, double at);

#endif
