/* SPDX-License-Identifier: MIT */
/*
 * jobs.h: what the four parts of `cogworkerctl jobs` share; included by src/ctl/jobs*.c
 * only. jobs.c reads the command line and hands over to jobs_find.c (where a job is: the
 * sets, the walk over them, the match), jobs_show.c (list and show, for people and for
 * --json) or jobs_act.c (retry, delete, kill, reschedule). The split follows those
 * seams because each side changes for its own reasons: a new set touches finding, a new
 * column showing, a new button acting.
 */
#ifndef COGWORKERD_CTL_JOBS_H
#define COGWORKERD_CTL_JOBS_H

#include "ctl.h"
#include "job.h"

/* Where a job can be; also the order in which sets are searched and listed. */
enum set_id { S_QUEUED, S_SCHEDULED, S_RETRY, S_DEAD, S_RUNNING, S_INPROGRESS, S_COUNT };
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
	char *process;              /* running / inprogress: the identity */
	long long run_at;           /* running */
	struct job j;               /* parsed (filled while the entry is looked at) */
};

struct filter {
	const char *arg;            /* a jid, or the raw member */
	const char *queue;
	const char *cls;
};

/* Entries collected by jobs_find, each a copy with j parsed. */
struct found {
	struct entry *v;
	int n, cap;
	int limit;                  /* 0 = none */
};

/* ---- jobs_find.c ---- */
/* Scan several sets (a bit mask) in set order, collecting into out. -1 on error (said);
 * with tolerant, a key unreadable for a reason other than availability is skipped. */
int jobs_find(struct ctl *c, unsigned sets, const struct filter *f, int tolerant,
              struct found *out);
void jobs_found_free(struct found *f);
/* The names of the sets in a mask, ", "-separated, for messages. */
void jobs_set_list(unsigned sets, char *out, size_t n);
/* The entry's queue: the one it sits in, else its payload's; NULL when it has none. */
const char *jobs_payload_queue(const struct entry *e);
/* Its class, "(unparseable)" when the member is not a job. */
const char *jobs_entry_class(const struct entry *e);
/* A string member of the payload, or NULL. */
const char *jobs_string_member(const struct entry *e, const char *name);

/* ---- jobs_show.c ---- */
int jobs_list(struct ctl *c, unsigned sets, const struct filter *f, int limit);
/* full: args, payload and error in full, not cut at SHOW_CUT characters. */
int jobs_show(struct ctl *c, const char *arg, int full);

/* ---- jobs_act.c ---- */
enum action { A_RETRY, A_DELETE, A_KILL, A_RESCHEDULE };
extern const unsigned jobs_action_sets[];              /* the sets each action works on */
/* Act on each JID argument wherever it is found within sets; minutes: reschedule's;
 * expires_in: retry's new deadline, seconds from now (0 = none). */
int jobs_act_on_args(struct ctl *c, enum action a, unsigned sets, const struct filter *base,
                     int nargs, char **args, double minutes, double expires_in);
/* --all: act on every entry of one set that passes the filter. */
int jobs_act_on_all(struct ctl *c, enum action a, int set, const struct filter *f,
                    double expires_in);

/* ---- jobs_run.c ---- */
/* jobs log (want: a run number, 0 = the newest) and jobs cancel. */
int jobs_log(struct ctl *c, const char *jid, long long want, int follow);
int jobs_cancel(struct ctl *c, const char *jid, int discard);
/* `jobs log|cancel ...`: their own options, then the work. */
int jobs_run_command(struct ctl *c, int argc, char **argv);

#endif
