/* SPDX-License-Identifier: MIT */
/*
 * park.h: where idle fetchers wait and how they are woken (park.c, doc/protocol.md §7.9):
 * the registry of fetchers parked in a blocking fetch, the local wait of the others, the
 * paused queues as last read, and what the waker thread (waker.c) needs to cut a parked
 * fetcher's wait short with CLIENT UNBLOCK.
 */
#ifndef COGWORKERD_PARK_H
#define COGWORKERD_PARK_H

#include "redis.h"

/* The longest block of a parked fetcher the waker can unblock (idle cost: one BLMOVE and
 * one SMEMBERS per parked fetcher per IDLE_BLOCK). */
#define IDLE_BLOCK 30.0
/* The longest block of one the waker cannot unblock: bounds how late it sees a stop. */
#define FETCH_TIMEOUT 2.0

/* Before the fetchers start: their number, the configured queue names (distinct), and the
 * longest block (IDLE_BLOCK; FETCH_TIMEOUT with Redis Sentinel, see park.c). */
void park_init(int nfetchers, char **names, int nnames, double longest);

/* ---- the paused queues (every fetch reads them in its own round trip) ---- */

/* A fresh SMEMBERS of the paused set (NULL after a command error: none paused). When the
 * set of our paused queues changed, every idle fetcher re-plans. */
void park_paused_update(const redisReply *smembers);
/* The paused set has been read at least once (before that, nothing is known paused). */
int park_paused_known(void);
/* Changes with every change of our paused queues. */
unsigned park_paused_gen(void);
/* Our queue q was paused at the last read. */
int park_is_paused(const char *q);
/* One of our queues is paused: the waker reads the set every PAUSED_POLL for the resume. */
int park_any_paused(void);

/* ---- an idle fetcher ---- */

enum park_result {
	PARK_ON,                /* registered as parked on plan->queue: block plan->block s */
	PARK_SIGNALLED,         /* waited locally, woken: work may be waiting, try first */
	PARK_TIMEOUT,           /* waited locally until the timeout: nothing changed */
};

struct park_plan {
	char *queue;            /* malloc'd; "" in basic mode (BRPOP watches every queue) */
	double block;           /* seconds */
	int rotating;           /* a short block: some queue is unwatched, try them all after */
};

/*
 * Where fetcher `index` waits, once a try found nothing: parked in a blocking fetch on the
 * active queue with the fewest parked fetchers (ties rotate), or, when every active queue
 * already has one, locally without any Redis call until a parked one leaves with a job.
 * client_id is its connection's CLIENT ID (-1 unknown: the waker cannot unblock it, so it
 * blocks briefly). basic: one blocking BRPOP watches every queue. gen: park_paused_gen()
 * when the caller chose its active queues; changed since, it must choose again. max_wait:
 * the longest the caller may wait locally (its warm processes want tending then), 0 none.
 */
enum park_result park_plan(int index, int basic, long long client_id, double idle_max,
                           double max_wait, unsigned gen, struct park_plan *plan);
/* The blocking fetch of PARK_ON returned (got: with a job). Returns 1 when the waker was
 * asked to cut it short (something changed: re-plan, trying first). */
int park_leave(int index, int got);
/* This fetcher runs a job it did not park for (a try took it, or it waited for its
 * handler): if a queue has no watcher, a local waiter takes it over, or, with none, the long
 * blocks rotate until one does. */
void park_took_job(void);
/* Quiet, or every queue paused: wait (no Redis) until something changes, up to s. */
void park_wait_idle(double s);

/* ---- waking ---- */

/* Quiet, resume, stop, a pause change: every idle fetcher re-plans at once. */
void park_wake_all(void);
/* The waker: readable when it has work (eventfd). */
int park_kick_fd(void);
/* CLIENT UNBLOCK every parked fetcher that must re-plan; returns how many are still owed
 * (their blocking call has not reached Redis yet: retry in a moment), or -1 when Redis
 * refused (r->err). */
int park_unblock(struct rconn *r);
/* Whether CLIENT UNBLOCK works here (the waker's probe); without it blocks stay short. */
void park_set_unblock_ok(int ok);
/* Pushes on queues nobody watches are notified (keyspace notifications subscribed). */
void park_set_notify(int on);
/* A keyspace notification: a job was pushed on queue q. */
void park_queue_pushed(const char *q);

#endif
