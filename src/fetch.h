/* SPDX-License-Identifier: MIT */
/*
 * fetch.h: taking the next job off this process's queues (fetch.c, doc/protocol.md §7.8,
 * §7.9): reliable fetch (the job moves atomically into our in-progress list) or basic
 * fetch, resolved once at the first fetch and dropped to basic at run time when the server
 * turns out not to have LMOVE. Where an idle fetcher waits is park.h's.
 */
#ifndef COGWORKERD_FETCH_H
#define COGWORKERD_FETCH_H

#include <stddef.h>
#include "park.h"
#include "redis.h"
#include "settle.h"
#include "state.h"

/* A job longer than max_job_bytes, which the fetch dropped unread (rlink.h), to be buried
 * (settle.h bury_too_large). */
struct too_large {
	struct rskip seen;      /* what was seen of it; seen.len 0: none */
	char *queue;
	int taken;              /* basic fetch: it is on no list any more */
	long long max;          /* max_job_bytes when it was fetched */
};

struct fetched {
	char *raw;              /* malloc'd, a NUL after its len bytes: job_take takes it */
	size_t len;
	char *queue;            /* the queue name it came from */
	struct too_large big;   /* the fetch's own: fetch_job buries it */
};

/* What one fetcher carries from fetch to fetch. */
struct fetch_state {
	int index;              /* the fetcher's number */
	int hot;                /* try every queue before parking: after a job or a wake-up */
	long long client_id;    /* CLIENT ID of the connection, -1 unknown */
	int id_connects;        /* r->connects when client_id was read */
	struct held_ack held;   /* the last job's ack, sent with the next try (settle.h) */
	double max_block;       /* the longest a park may wait (warm processes to tend), 0 = no
	                         * bound of the fetcher's own */
	struct too_large owed;  /* a burial that failed for want of Redis, tried again first */
};
void fetch_state_init(struct fetch_state *st, int index);

/* 1 = a job, 0 = nothing (call again), FETCH_IDLE = nothing, after a wait without any
 * Redis command (no success to report to a log site: lesson 73), -1 = error (r->err),
 * -2 = "unsupported": fall back to basic. A job of a queue found paused when it was taken
 * is given back, never returned. An ack held in st->held goes out with the try, or on its
 * own before anything else (a park, a wait); it is settled when fetch_job returns. A job
 * longer than max_job_bytes is never read: it is buried, and 0 returned (§7.9). */
#define FETCH_IDLE 2
int fetch_job(struct rconn *r, struct fetch_state *st, struct fetched *out);
/* A try only (reliable fetch, never a park or a wait): 1 = a job, 0 = none (or not
 * tried), -1 = error, -2 = "unsupported"; the held ack is settled either way. For a job
 * held while another runs (fetcher.c). */
int fetch_try(struct rconn *r, struct fetch_state *st, struct fetched *out);
/* Read the paused set again for a held job: 1 run it, 0 it was handed back (freed). */
int fetch_recheck_paused(struct rconn *r, struct fetched *out);
void fetched_free(struct fetched *f);
enum fetch_mode fetch_mode_resolve(struct rconn *r);
void fetch_mode_fallback(void);

#endif
