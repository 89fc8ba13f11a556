/* SPDX-License-Identifier: MIT */
/*
 * warm.h: warm handlers (doc/design.md "Warm handlers", doc/protocol.md §1.2): a handler
 * with `warm = true` runs as long-lived processes, each fed one job at a time over fd 3.
 *
 * A pool belongs to one fetcher thread and holds at most one process per warm handler
 * class (the fetcher runs one job at a time, so one process per class is all it can use);
 * nothing in it is shared between threads but the start-failure backoff of each class and
 * the counters. Library code: it knows nothing of Redis or the daemon's state.
 */
#ifndef COGWORKERD_WARM_H
#define COGWORKERD_WARM_H

#include <stddef.h>
#include "config.h"
#include "handler.h"

struct warm_pool;

/* At a stop, how long warm processes get to exit after the EOF on their fd 3 before their
 * groups are killed: the stop's budget (doc/design.md "Stop") counts ABORT_GRACE and
 * 3 s for the fetchers to end, and this, plus a bounded reap, fits in it. */
#define WARM_STOP_GRACE 1.0

struct warm_pool *warm_pool_new(void);

/*
 * Run one job (raw, its JSON as fetched) on a warm process of handler h, starting one when
 * the pool has none (or only one started from another version of h). req is the job's run
 * request (outcome.h's job_run_init, with the caller's hooks; its env is not used: the
 * process gets its own). Like handler_run: returns 0 with res filled, to be freed with
 * run_result_free. A job whose message could not be delivered never started and is
 * handed to a new process; while the command can't get a process to "ready", the job
 * waits (with the class's backoff) until it does, or until req->abort or req->cancel.
 */
int warm_pool_run(struct warm_pool *p, const struct handler *h, const struct run_request *req,
                  const char *raw, size_t rawlen, struct run_result *res);

/*
 * Between jobs: idle processes past their warm_idle_timeout leave, processes of a handler
 * that changed (current conf c) or that died idle are replaced or dropped, retired ones
 * are reaped (and killed after their grace), what they printed is logged. Returns the
 * seconds until it has something to do again (0: nothing pending).
 */
double warm_pool_tend(struct warm_pool *p, const struct conf *c);

/* Retire every process (EOF on fd 3), wait up to grace for them to exit, kill the rest;
 * frees p. */
void warm_pool_free(struct warm_pool *p, double grace);

#endif
