/* SPDX-License-Identifier: MIT */
/*
 * keys.h: the name of every Redis key, key prefix and pub/sub channel cogworkerd reads or
 * writes, for the daemon and cogworkerctl alike. The names are cogworker's wire contract:
 * a Ruby client, the Web UI and Ruby workers in the same fleet use the same names, so none
 * may drift, and a name spelled in two places is a name that can drift.
 *
 * Rules of this file:
 * - A name ending in ':' is a prefix: the full key is the prefix followed by what the
 *   comment says (a queue name, an identity, a jid...). Build it with string-literal
 *   concatenation (K_QUEUE "default", "LLEN " K_QUEUE "%s") or xasprintf("%s%s", ...).
 * - Every name is spelled out in full, never pasted together from other macros, so that a
 *   grep for a key name seen in redis-cli lands here.
 * - No other file spells a "cogworker:" or "periodic:" name; the Lua scripts are the
 *   exception, they get their keys through KEYS.
 * <id> is a process identity, <q> a queue name, <jid> a job id, <pjid> a periodic entry id.
 * What each key holds and who writes it: doc/protocol.md §2.
 */
#ifndef COGWORKERD_KEYS_H
#define COGWORKERD_KEYS_H

/* ---- queues ---- */
#define K_QUEUE "cogworker:queue:"              /* + <q>: list of raw jobs */
#define K_QUEUES "cogworker:queues"             /* set of every queue name ever seen */
#define K_LIVE_QUEUES "cogworker:live_queues"   /* zset: queue -> last read by a live process */
#define K_PAUSED "cogworker:paused_queues"      /* set of paused queue names */

/* ---- job sets (zsets scored by time; members are job JSON) ---- */
#define K_SCHEDULE "cogworker:schedule"         /* due time; not periodic:schedule */
#define K_RETRY "cogworker:retry"               /* next attempt time */
#define K_DEAD "cogworker:dead"                 /* time of death; never trimmed */

/* ---- processes and their work ---- */
#define K_PROCESSES "cogworker:processes"       /* set of identities */
#define K_PROCESS "cogworker:process:"          /* + <id>: presence hash (info, busy, quiet) */
#define K_WORKERS "cogworker:workers:"          /* + <id>: hash thread id -> job it runs */
#define K_SIGNAL "cogworker:signal:"            /* + <id>: pub/sub channel quiet|resume|stop */
#define K_INPROGRESS "cogworker:inprogress:"    /* + <id>: list of fetched, unacked jobs */
/* set of the identities that may own a K_INPROGRESS list */
#define K_IDENTITIES "cogworker:inprogress_identities"
#define K_LAST_BEAT "cogworker:last_beat"       /* hash id -> last beat, Redis clock */
/* + <id>: string, the JSON array of the jobs waiting in that process for a max_concurrency
 * slot (a daemon addition, doc/protocol.md §7.30); absent when none wait */
#define K_WAITING "cogworker:waiting:"

/* ---- orphans and failed filings ---- */
#define K_REPEAT_ORPHANS "cogworker:repeat_orphans"     /* list of jobs orphaned too often */
#define K_ORPHANINGS "cogworker:orphanings:"    /* + <jid>: times recovered from the dead */
#define K_UNSETTLED "cogworker:unsettled"       /* list of filings handed over at shutdown */
/* + <key>:<epoch ms>:<8 hex>: a wrong-typed key renamed out of the way by the KeyGuard */
#define K_QUARANTINE "cogworker:quarantine:"
/* list of unusable K_UNSETTLED records */
#define K_RECORDS_QUARANTINE "cogworker:quarantine:cogworker:unsettled:records"

/* ---- counters and per-job records ---- */
#define K_PROCESSED "cogworker:stats:processed" /* running total of successes */
#define K_FAILED "cogworker:stats:failed"       /* running total of failed attempts */
#define K_THROUGHPUT "cogworker:throughput:"    /* + epoch hour: hash processed, failed */
#define K_ATTEMPTS "cogworker:job_attempts:"    /* + <jid>: list of the last failures */
#define K_UNIQUE "cogworker:unique:"            /* + digest: owner jid of a unique lock */
#define K_STATUS "status:"                      /* + <jid>: status bookkeeping hash */
/* + <jid>: hash of a job's kept runs (last, <n> -> record); + <jid>:<n>: run n's output;
 * + <jid> + K_FOLLOWED: "someone waits for this job's first run" (jobs log --follow) */
#define K_OUTPUT "cogworker:output:"
#define K_FOLLOWED ":followed"
/* + <jid>: the token of the one cogworkerctl jobs cancel under way for that job */
#define K_CANCEL "cogworker:cancel:"

/* ---- run history (zsets scored by finished_at; members are run entries) ---- */
#define K_HISTORY "cogworker:history:"          /* + all | success | failed */
#define K_HISTORY_ALL "cogworker:history:all"
#define K_HISTORY_SUCCESS "cogworker:history:success"
#define K_HISTORY_FAILED "cogworker:history:failed"
#define K_HISTORY_DAILY "cogworker:history:daily:"      /* + YYYY-MM-DD: hash success, failed */
/* + <jid>: zset of pointers to the job's entries in K_HISTORY_ALL, "<finished_at> <outcome>"
 * scored finished_at (lua/history_write.lua keeps it; jobs show reads it) */
#define K_HISTORY_JID "cogworker:history:jid:"

/* ---- periodic jobs ---- */
#define K_PERIODIC_SCHEDULE "periodic:schedule" /* hash pjid -> entry, as the ticker runs it */
#define K_DISABLED "periodic:disabled"          /* set of disabled pjids */
#define K_RUNNING "periodic:running:"           /* + <pjid>: owner jid of the run in flight */
#define K_LAST_SLOT "periodic:last_slot:"       /* + <pjid>: epoch of the last claimed slot */
#define K_SLOT_LOCK "periodic:lock:"            /* + <pjid>:<slot>: one claim per slot */

/* ---- limits, deadlines, at-most-once handlers (doc/protocol.md §7.30-§7.32) ---- */
#define K_LIMITS "cogworker:limits"             /* hash class -> its limits, as declared */
#define K_SLOTS "cogworker:limit:"              /* + <class>: zset holder -> lease expiry */
#define K_RATE "cogworker:rate:"                /* + <class>: zset of starts in the window */
#define K_WAITERS "cogworker:limit_waiters:"    /* + <class>: zset jid -> its next try */
#define K_AT_MOST_ONCE "cogworker:at_most_once:"        /* + <id>: set of classes */
/* Fair share (§7.35): per handler class, + <class>: zset group -> its next look (groups with
 * jobs set aside); + <class>:<group>: the group's leases and reservations (zset holder ->
 * expiry), its starts in the window (zset), its set-aside jobs (list, oldest at the right) */
#define K_GROUPS "cogworker:groups:"
#define K_GROUP_SLOTS "cogworker:group_slots:"
#define K_GROUP_RATE "cogworker:group_rate:"
#define K_GROUP_JOBS "cogworker:group_jobs:"
/* list of orphaned jobs of at-most-once classes awaiting burial */
#define K_AT_MOST_ONCE_ORPHANS "cogworker:at_most_once_orphans"

/* ---- batches and dependencies (doc/protocol.md §7.34) ----
 * The batch scripts get K_BATCH in their ARGV and compute the names below from it (they
 * walk up to parent batches and on to dependants they learn as they go): lua/lib/batch.lua
 * spells them again, and test_scripts.py checks the two agree. */
/* + <bid>: hash (state, description, callbacks, fired marks, times); + <bid>:pending,
 * :succeeded, :dead, :discarded: sets of member jids and child bids */
#define K_BATCH "cogworker:batch:"
#define K_BATCH_LIST "cogworker:batch:list"     /* zset bid -> created_at */
#define K_BATCH_OPEN "cogworker:batch:open"     /* zset bid -> when it expires uncommitted */
#define K_BATCH_WAITING "cogworker:batch:waiting"       /* zset jid -> when it began to wait */
#define K_WAIT "cogworker:batch:wait:"          /* + <jid>: hash payload, queue, any, at, bid */
#define K_AFTER "cogworker:batch:after:"        /* + <jid>: set of what it still waits for */
#define K_DEPENDANTS "cogworker:batch:dependants:"     /* + <jid>: set of jids waiting for it */
#define K_SETTLED "cogworker:batch:settled:"    /* + <jid>: success | dead | discarded */
/* Dependencies found nowhere, without a settled record (lostdeps.c): zset jid -> when first
 * missed; and the lock of the fleet's one search per half lost_dependency_threshold. */
#define K_UNSEEN_DEPS "cogworker:unseen_dependencies"
#define K_UNSEEN_DEPS_LOCK "cogworker:unseen_dependencies:lock"
/* hash jid -> "<outcome> <bid>": settles not finished yet (a release cut into calls, a
 * burial's settle still to make): BATCH_SETTLE goes on with them */
#define K_BATCH_OWED "cogworker:batch:owed"

/*
 * Not a key: the prefix of the handler's stdout line that reports progress into K_STATUS.
 * It lives here because it is a cogworker-namespaced name of the same contract.
 */
#define PROGRESS_LINE "cogworker:progress "

#define ORPHAN_COUNTER_TTL "604800"             /* K_ORPHANINGS: 7 days */
/* K_AT_MOST_ONCE, renewed by each beat: read once its owner is dead, by whoever recovers its
 * list, so it must outlive the owner; the recovery horizon the orphan counter has too. */
#define AT_MOST_ONCE_TTL ORPHAN_COUNTER_TTL
/* A finished (completed, cancelled, expired) batch's keys: 7 days, for batch show and for
 * its callbacks' handlers to read. */
#define BATCH_KEEP_TTL "604800"
/* K_SETTLED: 10 minutes. Written for every job that settles, so it is kept short: long
 * enough for a push --after of a job that just finished, and for the poller to repair a
 * release a crash cut short (BATCH_EXPIRE, at most orphan_check_interval later). */
#define SETTLED_TTL "600"

#endif
