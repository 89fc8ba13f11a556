/* SPDX-License-Identifier: MIT */
/*
 * settle.h: what happens to a job after its handler ran (settle.c, doc/protocol.md
 * §7.5–§7.7, §7.20): failure routing, the interrupt path, acks and give-backs, the
 * best-effort bookkeeping, owned keys and their deferred releases.
 *
 * Settling owns the pending settlements (an ack or a filing still owed because Redis
 * failed when it was due): settle.c is the only place that builds one, keeps the list,
 * and completes them (reconcile and stop call settle_pending_all).
 */
#ifndef COGWORKERD_SETTLE_H
#define COGWORKERD_SETTLE_H

#include <stddef.h>
#include "log.h"
#include "outcome.h"
#include "redis.h"

struct job;
struct handler;
struct outrun;

/* A settlement still owed for a job that ran (doc/protocol.md §7.7). */
struct pending {
	struct pending *next;
	char *raw;
	int is_ack;             /* 1: an ack; 0: a filing */
	char *set;              /* K_RETRY or K_DEAD */
	double score;
	char *payload;
	char *jid, *cls;        /* for locks and on_death */
	int burial;             /* an unparseable or invalid payload's wrapper: no on_death */
	char *pjid;
	int unique;
	char *queue;
	char *args_json;
	double since;           /* an ack: when it was first owed (epoch s), for its log line */
	char *flow;             /* owed first: BATCH_SETTLE with this outcome (workflow.h) */
	char *bid;              /* the job's batch, for flow */
	int flow_only;          /* nothing else owed: the job left its list already */
	const char *settled;    /* an ack: how the job settled for good (SETTLED_*), or NULL */
	int flow_made;          /* flow was made once: redone only in case a failover lost it,
	                         * so the stop drops the job as acked, not requeued for it */
};

/* What a run leaves to settle. */
enum disposition { DISP_ACK, DISP_SETTLED, DISP_GIVE_BACK, DISP_ABANDON };

/* Where route_failure put a failure, for the job's log line. */
struct filing {
	const char *set;        /* K_RETRY or K_DEAD; NULL: discarded */
	double delay;           /* into retry: seconds until it is due */
	int interrupted;        /* filed by the interrupt path (the plain write failed) */
	int owed;               /* not written: kept in memory, reconcile or stop files it */
	int gone;               /* the interrupt found the job no longer ours: not filed */
};

/* Route a failure; returns the disposition, and *died = 1 with *dead_entry (malloc'd) when
 * this write put the job in dead (on_death is then owed, after settling). *where (may be
 * NULL) says where it went. */
enum disposition route_failure(struct rconn *r, const struct job *j, enum decision d,
                               const char *error_class, const char *error_message,
                               struct log_site *site, int *died, char **dead_entry,
                               struct filing *where);
/* A payload that is not a job goes to dead as an (unparseable) wrapper; no on_death. */
enum disposition bury_unparseable(struct rconn *r, const struct job *j, struct log_site *site);
/* A job longer than max (max_job_bytes) that the fetch from queue dropped unread, of which
 * seen is what it saw (rlink.h), to dead as an invalid job (doc/protocol.md §6.30), taken
 * from list (NULL: the own in-progress list; orphan recovery's parking lists too); taken:
 * basic fetch, it is on no list any more. 0 done, -1 failed (r->err). */
int bury_too_large(struct rconn *r, const char *list, const struct rskip *seen,
                   const char *queue, int taken, long long max, struct log_site *site);
/* What a read with the bulk limit keeps of a job too large (rlink_limit_bulk's head): the
 * wrapper keeps its first MAX_RAW_PAYLOAD characters, of 4 bytes at most. */
#define TOO_LARGE_HEAD (4 * MAX_RAW_PAYLOAD)

/* The attempt entry's outcome for a decision: retrying, dead, killed, discarded. */
const char *attempt_outcome(enum decision d);
int record_attempt(struct rconn *r, const char *jid, long attempt, double when,
                   const char *outcome, const char *error_class, const char *error_message,
                   struct log_site *site);
void bump_stats(struct rconn *r, int success, struct log_site *site);
/* bump_stats in two halves, for a caller's pipeline: stats_add appends its 3 commands,
 * stats_read reads their 3 replies (the earlier ones read already) and logs. */
void stats_add(struct rconn *r, struct rpipe *p, int success);
void stats_read(struct rconn *r, struct rpipe *p, struct log_site *site);

/*
 * Ack a job that ran, settled for good as outcome (SETTLED_*; NULL: a retry, nothing
 * settled), a member of bid (NULL: none). Its settle was made before (settle_flow_first);
 * should the ack be owed, the late ack settles again first (BATCH_SETTLE, which counts
 * once), since a failover that loses the ack may lose the settle made before it: a late
 * ack settles as the first would have (doc/protocol.md §7.7). 0 acked, -1 owed.
 */
int settle_ack(struct rconn *r, const char *raw, size_t len, const char *jid, const char *bid,
               const char *outcome);

/*
 * A job settled for good as outcome (workflow.h): its batch and the jobs that wait for it
 * (BATCH_SETTLE), before it leaves its in-progress list (doc/protocol.md §7.34). 0 done;
 * -1 owed: Redis failed, and a pending settlement now holds the settle and the ack after
 * it, so the caller must not ack (reconcile and stop complete it, in that order).
 */
int settle_flow_first(struct rconn *r, const struct job *j, const char *outcome);

/*
 * An ack held back to ride on its fetcher's next fetch (fetch.c), so that a job costs one
 * round trip after its handler, not two: the ack of the job that ended and the fetch of
 * the next one go out together, the ack first. ack_hold takes over the job's running
 * record: it goes when the ack is judged (ack_held_settle), so reconcile never takes the
 * job for a stray meanwhile. ack_held_add queues the ack's commands on a pipeline and
 * ack_held_read reads their replies, in their turn; ack_held_settle judges them (attempts
 * 2 and 3, then a pending entry, as settle_ack) or, with nothing queued, sends them on a
 * pipeline of their own first. It is a no-op when nothing is held. Reliable fetch only
 * (basic fetch has no ack).
 *
 * A plain job's success is acked by its settled record's SET ... GET and the LREM, nothing
 * else (doc/protocol.md §7.34): what the record held before says whether the job needs a
 * closer look (prior): jobs wait for it, or it was recovered from a dead process or
 * requeued at a stop (its orphan counter to delete, a run of it kept). Only then does the
 * settle delete the counter and release the waiting jobs; and it tells the output writer
 * whether a silent run of it must be asked about (outkeep_judge).
 */
struct held_ack {
	char *raw;                  /* NULL: none held */
	size_t len;
	char *jid;
	int added;                  /* queued on a pipeline */
	int read;                   /* its replies read: ok, or err / unavailable below */
	int ok;
	int unavailable;
	int prior;                  /* HELD_PRIOR_*: the settled record before the SET ... GET */
	int ran_before;             /* the job's payload says an earlier attempt ran (failed_at) */
	struct outrun *out;         /* its silent run, to judge (outkeep_end_success), or NULL */
	const char *outcome;        /* how it settled for good (SETTLED_*), NULL: a retry */
	char *bid;
	char err[sizeof ((struct rconn *)0)->err];
};
enum { HELD_PRIOR_NONE, HELD_PRIOR_WAITED, HELD_PRIOR_OTHER };
/* raw (malloc'd) is the held ack's from then on: a job's text is not copied to be acked.
 * outcome and bid as settle_ack's; only a plain job's success writes its settled record
 * in the ack's pipeline (a member's, and every failure's, was written by its settle).
 * out and ran_before: its silent run to judge, if any, and whether an earlier attempt of
 * it ran (either NULL / 0). */
void ack_hold(struct held_ack *a, char *raw, size_t len, const char *jid, const char *bid,
              const char *outcome, struct outrun *out, int ran_before);
void ack_held_add(struct rconn *r, struct rpipe *p, struct held_ack *a);
void ack_held_read(struct rconn *r, struct rpipe *p, struct held_ack *a);
void ack_held_settle(struct rconn *r, struct held_ack *a);
/* True if an ack of exactly this raw payload was confirmed by Redis lately (the last 16384
 * acks): a stray that finished here, whose ack a failover lost (doc/protocol.md §7.11).
 * *outcome (may be NULL) is then how it settled for good (SETTLED_*), NULL for a retry. */
int finished_here(const char *raw, size_t len, const char **outcome);
/* REQUEUE_ONE of a job on our in-progress list (give back, stray): the reply, or NULL. */
redisReply *requeue_one(struct rconn *r, const char *raw, size_t len);
/* The same, to the back of the queue when back (a job a saturated handler gives away,
 * doc/protocol.md §7.30). */
redisReply *requeue_one_at(struct rconn *r, const char *raw, size_t len, int back);
int give_back(struct rconn *r, const char *raw, size_t len, const char *queue);

/* ---- pending settlements ---- */
int pending_has(const char *raw);
/* Try every pending settlement once; what still fails stays owed. */
void settle_pending_all(struct rconn *r, struct log_site *site);
/* The stop sequence takes over what is still owed (a list linked by next), after a last
 * settle_pending_all; free each with pending_free. */
struct pending *pending_take_all(void);
void pending_free(struct pending *p);
/* The acks in list will never be made: one ERROR each (why: the last Redis error). Only
 * now is a failed ack final: until the stop, reconcile retries it. */
void pending_acks_lost(const struct pending *list, const char *why);

/* ---- owned keys (doc/protocol.md §7.20) ---- */
void release_owned(struct rconn *r, const char *key, const char *jid);
int expire_owned(struct rconn *r, const char *key, const char *jid, long ttl);
void deferred_releases_retry(struct rconn *r);
void release_job_locks(struct rconn *r, const char *jid, const char *pjid, int unique,
                       const char *cls, const char *queue, const char *args_json);
void extend_job_locks(struct rconn *r, const char *jid, const char *pjid, int unique,
                      const char *cls, const char *queue, const char *args_json, double delay);

#endif
