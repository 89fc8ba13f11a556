/* SPDX-License-Identifier: MIT */
/*
 * admission.h: between a fetch and the run (admission.c, doc/protocol.md §7.30, §7.31): the job's
 * deadline and its handler's limits (max_concurrency here, fleet_concurrency and rate_limit
 * across the fleet).
 */
#ifndef COGWORKERD_ADMISSION_H
#define COGWORKERD_ADMISSION_H

#include "fetch.h"
#include "job.h"
#include "log.h"
#include "redis.h"
#include "util.h"

struct lease;

/* What a job that may run holds until limits_release. */
struct admission {
	char *local_cls;                /* a max_concurrency slot of this handler class */
	struct lease *lease;            /* a fleet_concurrency slot in Redis */
	struct lease *glease;           /* a group_concurrency slot in Redis */
	char *group;                    /* the job's group (handler with group_by), or NULL */
};

enum gate {
	GATE_RUN,       /* run it, then limits_release */
	GATE_DONE,      /* not to be run now, and already seen to: buried or dropped (expired),
	                 * waiting here, given back to its queue, or moved to the schedule set */
};

/* Decide whether fetched job j may start now; tid is the fetcher's id (the lease holder);
 * from_held: j came from limits_take_held. */
enum gate limits_gate(struct rconn *r, const struct job *j, const char *tid, int from_held,
                      struct admission *a, struct log_site *site);
/* Does handler h limit its jobs per group (group_by with a group limit, §7.35)? */
int limits_grouped(const struct handler *h);
/* Give back the slots a run held (a no-op for an empty admission). */
void limits_release(struct rconn *r, struct admission *a);

/* A job waiting here whose handler has room now (out filled, for process + fetched_free):
 * 1, else 0. Fetchers ask before each fetch. */
int limits_take_held(struct fetched *out);
/* Any job waiting here for a slot: a fetcher then takes no job ahead of it (prefetch). */
int limits_any_held(void);
/* Quiet or stop: every waiting job goes back to the front of its queue. */
void limits_give_back_held(struct rconn *r);
/* The jobs waiting here for a max_concurrency slot, as the JSON array published in
 * cogworker:waiting:<id> (doc/protocol.md §7.30): [{"jid", "class", "queue", "handler",
 * "limit", "since"}, ...], oldest first per handler; *n of them, and *gen, which changes
 * whenever the list does. */
char *limits_waiting_json(unsigned long *gen, int *n);
/* Call fn with each job waiting here (raw as fetched), under the lock: fn must not call
 * Redis. For the re-filing of jobs Redis lost (recovery.h, refile_own). */
void limits_each_held(void (*fn)(void *ctx, const char *raw, size_t len), void *ctx);

/* The poller's look at the groups with set-aside jobs of each handler with group limits
 * (GROUP_SWEEP, doc/protocol.md §6.33): what has room comes back to its queue. */
void limits_group_sweep(struct rconn *r, struct log_site *site);

/* The heartbeat's refresh of this process's fleet slots to process_ttl from Redis's now;
 * retake after a failed beat (a lease may have expired meanwhile). */
void limits_refresh_leases(struct rconn *r, double process_ttl, int retake);

/* This process's limit gauges and counters, Prometheus text (per handler class). */
void limits_metrics(struct sbuf *b);

#endif
