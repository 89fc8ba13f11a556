/* SPDX-License-Identifier: MIT */
/*
 * jobs.h: what the four parts of `cogworkerctl jobs` share; included by src/ctl/jobs*.c
 * and by the dashboard's API (web_api.c), which runs the same code. jobs.c reads the command line and hands over to jobs_find.c (where a job is: the
 * sets, the walk over them, the match), jobs_show.c (list and show, for people and for
 * --json) or jobs_act.c (retry, delete, kill, reschedule); jobs_history.c reads a job's runs from
 * history for show. The split follows those
 * seams because each side changes for its own reasons: a new set touches finding, a new
 * column showing, a new button acting.
 */
#ifndef COGWORKERD_CTL_JOBS_H
#define COGWORKERD_CTL_JOBS_H

#include "ctl.h"
#include "job.h"

/* Where a job can be; also the order in which sets are searched and listed. */
enum set_id { S_QUEUED, S_SCHEDULED, S_RETRY, S_DEAD, S_RUNNING, S_WAITING, S_AFTER,
              S_INPROGRESS, S_COUNT };
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
	                            /* since when it waits for other jobs */
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
};

/* ---- jobs_find.c ---- */
/* Scan several sets (a bit mask) in set order, collecting into out. -1 on error (said);
 * with tolerant, a key unreadable for a reason other than availability is skipped. */
int jobs_find(struct ctl *c, unsigned sets, const struct filter *f, int tolerant,
              struct found *out);
void jobs_found_free(struct found *f);
/* The entries of a sorted set with one score (a link from a list names the set and the
 * score, as cogworker's Web UI does), so finding a job there reads a few entries. */
int jobs_find_at(struct ctl *c, int set, double score, const struct filter *f,
                 struct found *out);
/* Where a page of a set stands: the set's size, the first index looked at, how many
 * entries were read, and where the next page starts (-1: no more). */
struct page {
	long long total;
	long from, read, next;
};
/*
 * One page of one set, by index (the dashboard's lists): the entries from index from on
 * that pass the filter, at most limit of them, reading at most budget entries (0 = no
 * limit), so a page of a set of any size costs the same. Queued needs f->queue; running is
 * read whole (it is as large as the fleet's concurrency) and cut. 0, or -1 (said).
 */
int jobs_page(struct ctl *c, int set, const struct filter *f, long from, int limit,
              long budget, struct found *out, struct page *pg);
void jobs_entry_free(struct entry *e);        /* one collected entry's parts */
/* The names of the sets in a mask, ", "-separated, for messages. */
void jobs_set_list(unsigned sets, char *out, size_t n);
/* The entry's queue: the one it sits in, else its payload's; NULL when it has none. */
const char *jobs_payload_queue(const struct entry *e);
/* Its class, "(unparseable)" when the member is not a job. */
const char *jobs_entry_class(const struct entry *e);
/* A string member of the payload, or NULL. */
const char *jobs_string_member(const struct entry *e, const char *name);

/* ---- jobs_cut.c ---- */
#define JOBS_CUT_HEAD 16384     /* the bytes of a cut entry kept (at most max_job_bytes) */
/* A read of entries (argv: LRANGE, ZRANGE, ZREVRANGE, ZRANGEBYSCORE (WITHSCORES), HVALS or
 * HMGET and its arguments after key, at most 12) with an entry over max_job_bytes cut to
 * {length, first bytes, summary}. The reply, or NULL (c->r.err). */
redisReply *jobs_read(struct ctl *c, const char *key, int argc, const char **argv);
/* The same in steps, for a pipeline: begin (the limit on), the commands, take on each reply
 * in order, end (the limit off), then peek on each reply (its summaries). */
void jobs_cut_begin(struct ctl *c);
void jobs_cut_take(struct ctl *c, redisReply *rep);
void jobs_cut_end(struct ctl *c);
void jobs_cut_peek(struct ctl *c, const char *key, int argc, const char **argv, redisReply *rep);
/* Point e's raw (and, cut, size and summary) at an element of such a reply: 1, or 0 when
 * it holds no entry (a nil). */
int jobs_entry_member(struct entry *e, const redisReply *m);
/* job_parse of the entry: its summary when cut. */
void jobs_entry_parse(struct entry *e);
/* Whether the parsed entry has member name. */
int jobs_entry_has(const struct entry *e, const char *name);
/* ACT_CUT on a cut entry: act (retry, delete, kill, reschedule), dest (KEYS[2]: retry's
 * queue key, kill's dead), score (kill, reschedule: the new one), queue (retry's name).
 * 1 done, 0 gone, -1 Redis error (c->r.err), -2 no jid to find it by. */
int jobs_cut_act(struct ctl *c, const struct entry *e, const char *act, const char *dest,
                 const char *score, const char *queue);

/* ---- jobs_show.c ---- */
int jobs_list(struct ctl *c, unsigned sets, const struct filter *f, int limit);
/* A page of one set (jobs_page) as JSON: {set, total, from, read, next, jobs: [...]}. */
int jobs_list_page(struct ctl *c, int set, const struct filter *f, long from, int limit,
                   long budget);
/* full: args, payload and error in full, not cut at SHOW_CUT characters. With at (a zset
 * and a score, from a list's link), the job is looked for there and among the running
 * ones only. */
struct show_at {
	int set;
	double score;
};
int jobs_show(struct ctl *c, const char *arg, int full, const struct show_at *at);

/* ---- jobs_history.c ---- */
/* One run of a job as history keeps it: its place in the job's index (1 = the oldest
 * indexed), the outcome the index gives, and its entry (times, error, cost). */
struct hist_run {
	int n;
	char *outcome;
	cJSON *entry;
	char *raw;                  /* the entry as stored */
};
struct hist_runs {
	struct hist_run *v;
	int n;                      /* runs found in history, oldest first */
	int indexed;                /* pointers in the index (trimmed ones are not shown) */
};
/* The runs of jid through its history index: 0 (none is not an error), -1 when Redis is
 * unavailable. */
int jobs_history_read(struct ctl *c, const char *jid, struct hist_runs *out);
void jobs_history_free(struct hist_runs *h);
const struct hist_run *jobs_history_last(const struct hist_runs *h);        /* or NULL */
double jobs_history_finished(const struct hist_run *r);
const char *jobs_history_field(const struct hist_run *r, const char *name); /* a string */
void jobs_history_json(struct sbuf *b, const struct hist_runs *h);  /* ,"history":[…] */
/* The start, run time and cost (" cpu=… maxrss=…", usage.h) of a run, as its history
 * entry or kept record (started_at, finished_at, cpu_s, maxrss_bytes) gives them. */
struct run_cells {
	char iso[32], took[32], cost[64];
};
void jobs_run_cells(const cJSON *o, struct run_cells *out);
void jobs_history_human(const struct hist_runs *h);                 /* the attempts rows */

/* ---- jobs_act.c ---- */
enum action { A_RETRY, A_DELETE, A_KILL, A_RESCHEDULE };
extern const unsigned jobs_action_sets[];              /* the sets each action works on */
/* Act on each JID argument wherever it is found within sets; minutes: reschedule's;
 * expires_in: retry's new deadline, seconds from now (0 = none). */
int jobs_act_on_args(struct ctl *c, enum action a, unsigned sets, const struct filter *base,
                     int nargs, char **args, double minutes, double expires_in);
/* Act on members of one set given as read (the dashboard's selection: the exact text of
 * each, so an entry changed or taken meanwhile is left alone and reported as gone); queue
 * names the list for the queued set. */
int jobs_act_on_members(struct ctl *c, enum action a, int set, const char *queue, int n,
                        char *const *raws, const size_t *lens, double minutes);
/* --all: act on every entry of one set that passes the filter. */
int jobs_act_on_all(struct ctl *c, enum action a, int set, const struct filter *f,
                    double expires_in);

/* ---- jobs_run.c ---- */
/* jobs log (want: a run number, 0 = the newest) and jobs cancel. */
int jobs_log(struct ctl *c, const char *jid, long long want, int follow);
int jobs_cancel(struct ctl *c, const char *jid, int discard);
/* The same for a job known to run on identity (its class cls gives the wait: its
 * kill_grace), found by the caller: asked, waited for and judged as jobs cancel does. */
int jobs_cancel_on(struct ctl *c, const char *jid, const char *identity, const char *cls,
                   int discard);
/* A followed run as server-sent events (the dashboard's stream of `jobs log --follow`):
 * each call looks once and appends to ev what is new: "waiting" (no run kept yet, the job
 * on its way), "run" (which run, its class, process, start), "output" ({text, skipped}),
 * "error" (Redis did not answer; the next call tries again) and, last, "end" ({state:
 * ended|gone|died|none, outcome, error_class, error_message, message}). 1 after "end". */
struct follow_state {
	const char *jid;
	long long run;              /* the run asked for (0 = the newest), then followed */
	unsigned long long pos;     /* output bytes sent */
	double next_check;          /* monotonic: the next look at the job or its process */
	int on_its_way;             /* the job was last seen queued, scheduled, retrying or running */
	int following, announced, waiting_said;
};
int jobs_follow_events(struct ctl *c, struct follow_state *st, struct sbuf *ev);
/* `jobs log|cancel ...`: their own options, then the work. */
int jobs_run_command(struct ctl *c, int argc, char **argv);

#endif
