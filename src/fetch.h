/*
 * fetch.h: taking the next job off this process's queues (fetch.c, doc/protocol.md §7.8,
 * §7.9): reliable fetch (the job moves atomically into our in-progress list) or basic
 * fetch, resolved once at the first fetch and dropped to basic at run time when the server
 * turns out not to have LMOVE.
 */
#ifndef COGWORKERD_FETCH_H
#define COGWORKERD_FETCH_H

#include <stddef.h>
#include "redis.h"
#include "state.h"

/* The longest a fetcher blocks in one fetch: bounds how late it sees a stop. */
#define FETCH_TIMEOUT 2.0

struct fetched {
	char *raw;
	size_t len;
	char *queue;            /* the queue name it came from */
};

/* 1 = a job, 0 = nothing, -1 = error (r->err), -2 = "unsupported": fall back to basic.
 * paused: SMEMBERS cogworker:paused_queues, read by the caller in its last round trip
 * (taken over), or NULL to read it now. */
int fetch_job(struct rconn *r, int index, struct fetched *out, double *idle, redisReply *paused);
void fetched_free(struct fetched *f);
enum fetch_mode fetch_mode_resolve(struct rconn *r);
void fetch_mode_fallback(void);

#endif
