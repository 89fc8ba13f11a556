/*
 * daemon.h: the state the daemon's threads share, and the entry points of each thread.
 *
 * Threads (DESIGN.md "Process shape"): the manager is the main thread (signals, heartbeat,
 * supervision, stop); N fetcher threads (fetcher.c); the scheduled poller (scheduled.c);
 * the ticker (ticker.c); the subscriber (heartbeat.c). Each has its own struct rconn.
 *
 * The in-memory records PROTOCOL §7.3 trusts over Redis live here, under one mutex:
 * running jobs (a count per raw payload: two copies of one payload can run at once),
 * performing jobs (handler child alive; the heartbeat refreshes their periodic locks),
 * pending settlements (an ack or a filing still owed) and deferred lock releases.
 */
#ifndef COGWORKERD_DAEMON_H
#define COGWORKERD_DAEMON_H

#include <pthread.h>
#include <stdatomic.h>
#include "config.h"
#include "redis.h"
#include "log.h"
#include "keys.h"
#include "outcome.h"       /* enum decision, ABORT_GRACE */

enum fetch_mode { FETCH_UNRESOLVED, FETCH_RELIABLE, FETCH_BASIC };

/* A settlement still owed for a job that ran (PROTOCOL §7.7). */
struct pending {
	struct pending *next;
	char *raw;
	int is_ack;             /* 1: an ack; 0: a filing */
	char *set;              /* "cogworker:retry" or "cogworker:dead" */
	double score;
	char *payload;
	char *jid, *cls;        /* for locks and on_death */
	char *pjid;
	int unique;
	char *queue;
	char *args_json;
};

struct raw_count {
	char *raw;
	int count;
	char *jid, *pjid;       /* performing only: for the lock refresh */
	int until_executed;
};

struct deferred_release {
	struct deferred_release *next;
	char *key, *jid;
};

struct fetcher;

struct daemon {
	struct conf *conf;              /* replaced on reload under conf_lock */
	pthread_rwlock_t conf_lock;
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
	struct pending *pending;
	struct deferred_release *deferred;

	struct fetcher *fetchers;
	int nfetchers;
	int wake_fd;                    /* eventfd: wakes the manager (remote signals) */
	atomic_int remote_request;      /* 1 quiet, 2 resume, 3 stop */
};

extern struct daemon D;

#define FETCH_TIMEOUT 2.0

/* Snapshot the conf for reading; release with conf_release. */
struct conf *conf_acquire(void);
void conf_release(struct conf *c);

/* Sleep up to s seconds, returning early (1) when stopping begins. */
int sleep_unless_stopping(double s);

/* records (manager.c) */
void running_add(const char *raw);
void running_remove(const char *raw);
int running_has(const char *raw);
void performing_add(const char *raw, const char *jid, const char *pjid, int until_executed);
void performing_remove(const char *raw);
void pending_add(struct pending *p);    /* takes ownership */
struct pending *pending_take(const char *raw);     /* removes and returns, or NULL */
int pending_has(const char *raw);
void pending_free(struct pending *p);

/* fetch.c */
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

/* What execute leaves to settle. */
enum disposition { DISP_ACK, DISP_SETTLED, DISP_GIVE_BACK, DISP_ABANDON };

/* fetcher.c */
int fetchers_start(int n);
void fetchers_abort_all(void);
/* Detach the fetchers still running (stuck in a Redis call at stop): never joined. */
void fetchers_abandon(void);
int fetchers_join(double deadline);     /* 0 when all have exited before the deadline */

/* settle.c */
struct job;
struct handler;
/* Route a failure; returns the disposition, and *died = 1 with *dead_entry (malloc'd) when
 * this write put the job in dead (on_death is then owed, after settling). */
enum disposition route_failure(struct rconn *r, const struct job *j, enum decision d,
                               const char *error_class, const char *error_message,
                               struct log_site *site, int *died, char **dead_entry);
int record_attempt(struct rconn *r, const char *jid, long attempt, double when,
                   const char *outcome, const char *error_class, const char *error_message,
                   struct log_site *site);
void bump_stats(struct rconn *r, int success, struct log_site *site);
/* bump_stats in two halves, for a caller's pipeline: stats_add appends its 3 commands,
 * stats_read reads their 3 replies (the earlier ones read already) and logs. */
void stats_add(struct rconn *r, struct rpipe *p, int success);
void stats_read(struct rconn *r, struct rpipe *p, struct log_site *site);
int settle_ack(struct rconn *r, const char *raw, size_t len, const char *jid);
/* settle_ack whose first attempt rides on a caller's pipeline: settle_ack_add appends the
 * ACK (returns 0 and appends nothing in basic mode); once the replies before it are read,
 * settle_ack_read(…, added, …) reads its reply and goes on as settle_ack does (attempts 2
 * and 3, then a pending entry). */
int settle_ack_add(struct rconn *r, struct rpipe *p, const char *raw, size_t len,
                   const char *jid);
int settle_ack_read(struct rconn *r, struct rpipe *p, int added, const char *raw, size_t len,
                    const char *jid);
/* REQUEUE_ONE of a job on our in-progress list (give back, stray): the reply, or NULL. */
redisReply *requeue_one(struct rconn *r, const char *raw, size_t len);
int give_back(struct rconn *r, const char *raw, size_t len, const char *queue);
void settle_pending_all(struct rconn *r, struct log_site *site);
/* 1 when Redis answered at all (for log-site recovery). */
int site_result(struct log_site *site, struct rconn *r, int ok, const char *what);
void release_owned(struct rconn *r, const char *key, const char *jid);
int expire_owned(struct rconn *r, const char *key, const char *jid, long ttl);
void deferred_releases_retry(struct rconn *r);
void release_job_locks(struct rconn *r, const char *jid, const char *pjid, int unique,
                       const char *cls, const char *queue, const char *args_json);
void extend_job_locks(struct rconn *r, const char *jid, const char *pjid, int unique,
                      const char *cls, const char *queue, const char *args_json, double delay);

/* deathhook.c */
void on_death_run(const char *cls, const char *jid, const char *dead_entry);
/* Owed death notifications are run after settling by the caller that filed the entry. */

/* heartbeat.c */
int heartbeat_beat(struct rconn *r);
int subscriber_start(void);
void subscriber_stop(void);
void presence_remove(struct rconn *r);

/* ---- the scheduled poller (scheduled.c, keyguard.c, recovery.c; PROTOCOL §7.10-§7.15) ----
 * Everything below runs on the poller thread only, with the poller's own connection. */

/* scheduled.c: starts the (detached, never joined) poller thread. */
int poller_start(void);

/* keyguard.c: one key check (§7.15). 0 when Redis answered, -1 on an availability error. */
int keyguard_check(struct rconn *r, struct log_site *site);

/* recovery.c: one orphan recovery pass (§7.10). scan = also SCAN for unregistered lists.
 * The report decides whether the pass counts as a real check (§7.14). */
struct orphan_report {
	int registry_read;      /* SMEMBERS cogworker:inprogress_identities worked */
	int scan_done;          /* the SCAN ran to its end */
	int conn_lost;          /* an availability error happened during the pass */
};
void orphan_recovery(struct rconn *r, int scan, struct orphan_report *rep,
                     struct log_site *site);
/* recovery.c: reconcile the own in-progress list (§7.11). -1 on an availability error. */
int reconcile_own(struct rconn *r, struct log_site *site);
/* ticker.c */
int ticker_start(void);
/* For the unit tests: a ticker on the current conf (not started), and one pass of its loop
 * (pick up the conf, publish if due, tick unless quiet). */
struct ticker;
struct ticker *ticker_new(void);
void ticker_free(struct ticker *t);
void ticker_tick_once(struct ticker *t);

/* manager.c */
void stop_requeue(struct rconn *r);
int manager_run(const char *path, const struct conf_overrides *ov, struct conf *conf);
/* The shared state and the conf, without starting anything (also for unit tests). */
void daemon_init(struct conf *conf);

#endif
