/* SPDX-License-Identifier: MIT */
/*
 * state.h: the state every thread of the daemon shares, below all the thread loops.
 *
 * Threads (doc/design.md "Process shape"): the manager is the main thread (signals,
 * heartbeat, supervision, stop); N fetcher threads (fetcher.c); the scheduled poller
 * (scheduled.c); the ticker (ticker.c); the subscriber (heartbeat.c); the metrics endpoint
 * (metrics.c). Each has its own struct rconn: hiredis contexts are not thread-safe. What
 * they share is here, and only here:
 *
 *   - the conf, reference-counted: a reload swaps in a new one while a running job keeps
 *     the handler it started with (conf_acquire / conf_release);
 *   - the process's identity and flags (quiet, stopping, busy, ...);
 *   - the in-memory records doc/protocol.md §7.3 trusts over Redis, under D.mu: running
 *     jobs (a count per raw payload: two copies of one payload can run at once) and
 *     performing jobs (handler child alive; the heartbeat refreshes their periodic locks).
 *     Pending settlements and deferred releases belong to settling (settle.h);
 *   - the thread registry /healthz reads (thread_start).
 *
 * This file needs nothing above the library: a thread loop may include it, never the
 * other way round.
 */
#ifndef COGWORKERD_STATE_H
#define COGWORKERD_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include "config.h"
#include "util.h"

enum fetch_mode { FETCH_UNRESOLVED, FETCH_RELIABLE, FETCH_BASIC };

/* A payload without a copy of it (a job of 200 MB was held three times over while it ran,
 * twice here): a running one by its digest and length (util.h bytes_digest), a performing
 * one by the text it borrows from its fetcher until performing_remove. */
struct raw_count {
	const char *raw;        /* performing: the run's text; running: NULL */
	uint64_t digest;        /* running: of the text up to its first NUL, and its length */
	size_t len;
	int count;
	char *jid, *pjid;       /* performing only: for the lock refresh */
	int until_executed;
};

struct daemon {
	char identity[320];
	char hostname[256];
	double started_at;
	char *info_json;                /* presence info minus rss (rebuilt at each beat) */

	atomic_int quiet;
	atomic_int stopping;
	atomic_int busy;
	atomic_int ready_for_ticker;
	atomic_int prev_beat_failed;

	pthread_mutex_t mode_lock;
	atomic_int fetch_mode;          /* enum fetch_mode, resolved lazily at first fetch */

	pthread_mutex_t mu;             /* guards the records below */
	struct raw_count *running;
	int nrunning, caprunning;
	struct raw_count *performing;
	int nperforming, capperforming;
	struct cancellable *cancellable;        /* state.c: cancel_register */
	int ncancellable, capcancellable;

	int wake_fd;                    /* eventfd: wakes the manager (remote signals) */
	atomic_int remote_request;      /* 1 quiet, 2 resume, 3 stop */
};

extern struct daemon D;

/* The locks and the first conf, without starting anything (also for the unit tests). */
void state_init(struct conf *conf);

/* Snapshot the conf for reading; release with conf_release. */
struct conf *conf_acquire(void);
void conf_release(struct conf *c);
/* Make c (copied; its contents are taken over) the current conf: a reload. */
void conf_install(struct conf *c);

/* Sleep up to s seconds, returning early (1) when stopping begins. */
int sleep_unless_stopping(double s);

/*
 * A sleep another thread can cut short: the poller sleeps until the head of a set is due,
 * the ticker until the next slot, and each is kicked awake when what it sleeps on changes
 * (a keyspace notification, quiet, resume, a reload) instead of waking up to look.
 * A kick that comes while the owner is awake is kept for its next wait, so none is lost.
 */
struct wakeup {
	pthread_mutex_t mu;
	pthread_cond_t cv;          /* on CLOCK_MONOTONIC */
	int kicked;
};
void wakeup_init(struct wakeup *w);
/* Sleep up to s seconds: 1 when kicked (the kick is consumed), 0 at the timeout. Returns at
 * least every 0.25 s while stopping, so a loop that checks D.stopping ends promptly. */
int wakeup_wait(struct wakeup *w, double s);
void wakeup_kick(struct wakeup *w);

/* The payloads running and performing here. A running one is told apart by digest (the
 * text up to its first NUL, as the strcmp it replaced); performing_add borrows raw, which
 * must stay valid until performing_remove of the same pointer. */
void running_add(const char *raw);
void running_remove(const char *raw);
int running_has(const char *raw);
void performing_add(const char *raw, const char *jid, const char *pjid, int until_executed);
void performing_remove(const char *raw);

/*
 * Runs that a remote cancel can reach (cogworkerctl jobs cancel, doc/protocol.md §7.13):
 * each fetcher registers its cancel flag with the jid of the child it runs, and withdraws
 * it once the child is reaped. cancel_request sets the flag of every registered run of jid
 * to how (CANCEL_DEAD or CANCEL_DISCARD) and returns how many it reached. Registration,
 * withdrawal and the request hold D.mu, so a request either reaches a run that is still
 * being pumped or reaches nothing: the run is settled once, either way.
 */
enum { CANCEL_NONE, CANCEL_DEAD, CANCEL_DISCARD };
void cancel_register(const char *jid, atomic_int *flag);
void cancel_withdraw(const atomic_int *flag);
int cancel_request(const char *jid, int how);

/* pthread_create (attr may be NULL) for a thread /healthz watches; name is a literal
 * ("fetcher", ...). A tracked thread that returns while the daemon is not stopping makes
 * /healthz answer 503 and name it. */
int thread_start(pthread_t *t, const pthread_attr_t *attr, const char *name,
                 void *(*fn)(void *), void *arg);
/* thread_start of a detached thread: one the stop abandons rather than joins (lesson 77).
 * 0, or -1 when it could not be created. */
int thread_start_detached(const char *name, void *(*fn)(void *), void *arg);
/* Append one line per tracked thread that has exited; returns how many. */
int threads_exited(struct sbuf *why);

#endif
