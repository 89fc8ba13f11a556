/* SPDX-License-Identifier: MIT */
/*
 * jobs_types.h: what every part of `cogworkerctl jobs` shares, at the bottom of them: the
 * sets a job can be in, an entry as read from one, a search's filter and its findings, and
 * the pure helpers over them (jobs_types.c). Nothing here talks to Redis or calls up into
 * a part, so the parts stand on it in one direction (doc/design.md "Where each piece lives"):
 *
 *   jobs.c            the command line (cmd_jobs), on top
 *   jobs_show.c       the subcommands: list and show,
 *   jobs_act.c        retry, delete, kill, reschedule,
 *   jobs_run.c        log and cancel
 *   jobs_find.c       where a job is;  jobs_history.c  its runs in history
 *   jobs_cut.c        entries longer than max_job_bytes, as read and acted on
 *   jobs_types.c      this: the types and the helpers, at the bottom
 *
 * Each part has its header (jobs_find.h, ...), which declares only its own functions; the
 * dashboard's API (src/web/web_api.c) includes those it calls.
 */
#ifndef COGWORKERD_CTL_JOBS_TYPES_H
#define COGWORKERD_CTL_JOBS_TYPES_H

#include <stddef.h>
#include "job.h"

/* Where a job can be; also the order in which sets are searched and listed. */
enum set_id { S_QUEUED, S_SCHEDULED, S_RETRY, S_DEAD, S_RUNNING, S_WAITING, S_AFTER,
              S_GROUP, S_INPROGRESS, S_COUNT };
extern const char *const jobs_set_names[S_COUNT];      /* as --set and the output say them */
extern const char *const jobs_zset_keys[S_COUNT];      /* the key of a zset set, else NULL */
#define BIT(s) (1u << (s))
#define ZSETS (BIT(S_SCHEDULED) | BIT(S_RETRY) | BIT(S_DEAD))
/* Where a running job is found: its process's workers hash, or its in-progress list, where
 * it is a second before the batched workers entry names it (doc/protocol.md §7.23). */
#define RUN_SETS (BIT(S_RUNNING) | BIT(S_INPROGRESS))

/* One member of a set, as read (raw is never re-encoded: actions match on it). */
struct entry {
	int set;
	char *key;                  /* the Redis key that holds it */
	char *qname;                /* queued / running: the queue */
	char *raw;                  /* the exact member (running: the payload text) */
	size_t raw_len;
	double score;
	int has_score;
	char *process;              /* running / waiting / inprogress: the identity */
	long long run_at;           /* running */
	char *handler;              /* waiting: the handler block's class, its max_concurrency, */
	int limit;                  /* and since when (epoch s); the payload is its in-progress */
	double since;               /* entry (basic fetch: class, queue and jid only); after: */
	                            /* since when it waits for other jobs; group: the score */
	                            /* is its place in its group's line (when enqueued) */
	size_t size;                /* cut (jobs_cut.c): the member's length, raw its first */
	char *summary;              /* bytes, summary its small members; 0: raw is all of it */
	size_t summary_len;
	struct job j;               /* parsed (filled while the entry is looked at) */
};

struct filter {
	const char *arg;            /* a jid, or the raw member */
	const char *queue;
	const char *cls;
	const char *text;           /* a substring of the raw member (the dashboard's search) */
};

/* Entries collected by jobs_find, each a copy with j parsed. */
struct found {
	struct entry *v;
	int n, cap;
	int limit;                  /* 0 = none */
	/* The group set, when searched: the lines walked and those not (at most
	 * GROUPS_READ_MAX per class, src/grouplimits.h; or the budget), 0 when none was left
	 * or the search stopped at what it looked for. */
	int group_lines;
	long long group_lines_not_read;
};

void jobs_entry_free(struct entry *e);        /* one collected entry's parts */
void jobs_found_free(struct found *f);
/* The names of the sets in a mask, ", "-separated, for messages. */
void jobs_set_list(unsigned sets, char *out, size_t n);
/* The entry's queue: the one it sits in, else its payload's; NULL when it has none. */
const char *jobs_payload_queue(const struct entry *e);
/* Its class, "(unparseable)" when the member is not a job. */
const char *jobs_entry_class(const struct entry *e);
/* A string member of the payload, or NULL. */
const char *jobs_string_member(const struct entry *e, const char *name);

#endif
