/* SPDX-License-Identifier: MIT */
/* ctl.h: what cogworkerctl's commands share (one file per command group in src/ctl/). */
#ifndef COGWORKERD_CTL_H
#define COGWORKERD_CTL_H

#include <getopt.h>
#include <stdio.h>
#include "config.h"
#include "keys.h"
#include "redis.h"
#include "util.h"

/* Exit statuses (cogworkerctl(1)). */
#define CTL_OK 0
#define CTL_NOTHING 1           /* not found / nothing done */
#define CTL_USAGE 2             /* usage, connection or Redis error */

struct ctl {
	struct conf conf;
	struct rconn r;
	int json;                   /* --json output */
	int yes;                    /* --yes given */
	/* Said on stderr at the first connection ("using REDIS_URL …"), or NULL. */
	char *notice;
	/* Where the Redis settings came from, for a connection error ("REDIS_URL"). */
	const char *origin;
	/* Entries of each list or sorted set a search for a job reads at most (jobs_find.c),
	 * 0 = all: the dashboard bounds what a request costs; the command line does not. */
	long scan_budget;
	/* ctl_queue_names' SCAN for unlisted queue keys walks the whole keyspace (100 000 keys:
	 * 100 calls, about 50 ms of Redis): with discover_every > 0 (top, which redraws each
	 * second) it runs at most once per that many seconds, the names it found kept
	 * meanwhile; 0 = at each call. discovered_at is mono_now() of the last one (0: none). */
	double discover_every, discovered_at;
	char **discovered;
	int ndiscovered;
	/* Prints a command's --help (ctl.c's table; the commands sit below it). */
	void (*help)(const char *command);
};

/* One line on stderr: "cogworkerctl: <message>" (into the thread's capture, if any). */
void ctl_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Capture, in this thread, what commands print for --json (jprint: the document, into out)
 * and their error lines (ctl_error: into err, '\n'-separated), instead of writing them to
 * stdout and stderr: `cogworkerctl web` answers its API with them (src/web/web_api.c).
 */
struct ctl_capture {
	struct sbuf out, err;
	int documents;              /* jprint calls seen; only the first is kept */
};
void ctl_capture_begin(struct ctl_capture *cap);
void ctl_capture_end(const struct ctl_capture *cap);
void ctl_capture_free(struct ctl_capture *cap);     /* ends it too */
/* Connect (exit status 2 with a message when Redis is unreachable). */
int ctl_connect(struct ctl *c);
/* A failed Redis call: one line "cogworkerctl: <what>: <error>"; returns CTL_USAGE. */
int ctl_redis_error(struct ctl *c, const char *what);
/* The same for a family of keys, named by its prefix (K_ATTEMPTS) less the final ':'. */
int ctl_redis_error_family(struct ctl *c, const char *prefix);
/* The worse of two exit statuses (2 > 1 > 0). */
static inline int ctl_worse(int a, int b) { return a > b ? a : b; }

/*
 * Options every subcommand accepts anywhere on its command line (--json, --yes, --help),
 * so that `cogworkerctl queues clear default --yes` works as well as `cogworkerctl --yes
 * queues clear default`. Put CTL_COMMON_OPTS into a getopt_long table and call
 * ctl_common_opt() for an option the table's owner does not know: 1 = handled; 0 = a bad
 * option, already reported in one line (getopt's own messages are off). --help prints the
 * command's help and exits 0.
 */
#define CTL_OPT_JSON 0x1001
#define CTL_OPT_YES 0x1002
#define CTL_OPT_HELP 0x1003
#define CTL_COMMON_OPTS { "json", no_argument, NULL, CTL_OPT_JSON }, \
                        { "yes", no_argument, NULL, CTL_OPT_YES }, \
                        { "help", no_argument, NULL, CTL_OPT_HELP }
int ctl_common_opt(struct ctl *c, int ch, char **argv);
/* getopt_long over argv with a fresh state; wraps the reset that glibc needs. */
void ctl_getopt_reset(void);
/* For commands with no options of their own: parse the common ones; returns the number of
 * positional arguments (at argv + optind), or -1 (reported) when bad or more than max. */
int ctl_only_common_opts(struct ctl *c, int argc, char **argv, int max_args);

/*
 * SADD (add) or SREM member of set, for the on/off switches kept as set membership
 * (queues pause/resume, periodic enable/disable). --json prints
 * {"<key>":member,"<flag>":flag_value,"changed":…}; otherwise done is printed, or, when
 * nothing changed, unchanged goes to stderr with exit status 1.
 */
int ctl_toggle_member(struct ctl *c, const char *set, const char *member, int add,
                      const char *key, const char *flag, int flag_value,
                      const char *unchanged, const char *done);
/* Time: Redis TIME (the host clock when refused); -1 when Redis is unreachable. */
double ctl_now(struct ctl *c);
/* "2026-01-01T12:00:00Z" (UTC, whole seconds). */
void ctl_iso_time(double t, char out[32]);
/* How long something took or has waited, for people, as the daemon's log says it:
 * "0.21s", "12.40s", then "4m 05s", "3h 02m", "2d 04h". Every cogworkerctl view uses it
 * (queues' latency, top, jobs log, history), so one duration reads the same everywhere. */
void ctl_duration(double secs, char *out, size_t n);
/* "12s ago" (t before now) or "in 4m 05s" (t after now): whole seconds. */
void ctl_relative(double t, double now, char *out, size_t n);
/*
 * A duration or a time given on the command line, read by the one grammar of every command
 * (src/timearg.h). 0 and the value (ctl_time_arg: 1 when it was a duration counted from
 * now, forward with dir > 0 or back with dir < 0), or -1 after one line naming what
 * ("push --in") and what is wrong. With if_zero, a duration of 0 is refused, saying what
 * it would do ("would expire the job the moment it is due").
 */
int ctl_duration_arg(const char *what, const char *s, const char *if_zero, double *secs);
/*
 * 1 when the len bytes of s are UTF-8; else 0 after one line naming what and the byte
 * ("push: ARG 2 is not UTF-8: byte 4 is \xE9"). A job's JSON is UTF-8 only (cogworker's
 * JSON refuses other bytes, and the daemons bury such a job): refused at the push, not
 * scrubbed into U+FFFD.
 */
int ctl_utf8_ok(const char *what, const char *s, size_t len);
/* The strings push and exec build a job from, each through ctl_utf8_ok, named for cmd:
 * CLASS, --queue, --jid (either may be NULL), each ARG. */
int ctl_job_strings_ok(const char *cmd, const char *cls, const char *queue, const char *jid,
                       int nargs, char **args);
int ctl_time_arg(const char *what, const char *s, double now, int dir, double *t);

/* Args given as JSON (push --json-args, --stdin, exec): 1 when json is an array; else 0
 * after one line that says what is wrong and where ("<what> is not valid JSON: it ends
 * too soon ([1,2)", "<what> must be a JSON array of args, not an object: …"). */
int ctl_args_json_ok(const char *what, const char *json);

/* JSON output helpers (compact, appended to an sbuf). */
void jstr(struct sbuf *b, const char *s);                 /* a string, or null */
void jstrn(struct sbuf *b, const char *s, size_t len);    /* a string of len bytes */
void jnum(struct sbuf *b, double d);                      /* %.6f trimmed; null if NaN */
void jbool(struct sbuf *b, int v);
/* Print b followed by a newline on stdout, and free it. */
void jprint(struct sbuf *b);

/*
 * Human tables: columns sized to their widest cell (in characters), cells longer than
 * the column's limit cut with "…". Cells are copied.
 */
struct table {
	int ncols;
	const char **heads;
	const int *limits;          /* per column, 0 = no limit; may be NULL */
	char **cells;
	int nrows, cap;
};
void table_init(struct table *t, int ncols, const char **heads, const int *limits);
void table_add(struct table *t, const char *const *row);
void table_print(struct table *t);
void table_free(struct table *t);

/* One line of text: control characters shown as spaces, cut to max characters. */
char *ctl_oneline(const char *s, size_t len, size_t max);

/* Where the job jid is, for people ("queued on default", "scheduled for 2027-…Z", "in
 * retry, …", "running on <identity>"): 1 with out filled, 0 when it is nowhere, -1 after
 * an error message (jobs_find.c). */
int ctl_job_whereabouts(struct ctl *c, const char *jid, char *out, size_t n);

/* Shared readers (queues.c / processes.c) used by stats and metrics too. */
struct queue_info {
	char *name;
	long long size;
	double latency;             /* seconds, ≥ 0; 0 for an empty queue */
	int paused;
	int waiting;                /* its jobs live processes hold for a slot (queues only) */
};
/*
 * Queue names (size and latency left 0): the members of cogworker:queues, plus paused
 * queues not in it (with_paused), plus every list key cogworker:queue:* that SCAN finds
 * (discover: jobs LPUSHed by a producer that never SADDed the name). Sorted by name.
 * 0 on success, else CTL_USAGE after the message.
 */
int ctl_queue_names(struct ctl *c, int with_paused, int discover, struct queue_info **out, int *n);
/* The same with size (LLEN) and latency (oldest job, LINDEX -1) read. */
int ctl_read_queues(struct ctl *c, double now, int with_paused, int discover,
                    struct queue_info **out, int *n);
void ctl_free_queues(struct queue_info *q, int n);
/* Forget the names a SCAN found (c->discovered). */
void ctl_free_discovered(struct ctl *c);

struct process_info {
	char *identity;
	char *info;                 /* raw info JSON, or NULL */
	char *hostname;             /* from info, else the identity's first field */
	long long pid, concurrency; /* -1 when unknown */
	char **queues;
	int nqueues;
	int quiet;
	long long busy_field;       /* the `busy` field (may be stale) */
	long long busy;             /* HLEN cogworker:workers:<id> */
	long long ttl;              /* presence TTL, -1 when none */
	double started_at;          /* 0 when unknown */
	long long rss_kb;           /* -1 when unknown */
	long long warm;             /* warm handler processes, -1 when unknown */
	char *waiting;              /* cogworker:waiting:<id> (JSON), or NULL: none wait */
};
/* The live processes (presence hash exists), sorted by identity. Members of
 * cogworker:processes without a presence hash are SREMed when prune. */
int ctl_read_processes(struct ctl *c, int prune, struct process_info **out, int *n);
void ctl_free_processes(struct process_info *p, int n);

/* A job waiting in a live process for a max_concurrency slot, as it publishes them
 * (cogworker:waiting:<id>, doc/protocol.md §7.30). */
struct waiting_job {
	const char *identity;       /* the process's (owned by the process list) */
	char *jid, *cls, *queue, *handler;      /* NULL when the record lacks one */
	int limit;                  /* the handler's max_concurrency */
	double since;               /* epoch seconds */
};
/* Every such job of the processes p (from ctl_read_processes), oldest first. */
void ctl_waiting_jobs(const struct process_info *p, int n, struct waiting_job **out, int *nout);
void ctl_free_waiting(struct waiting_job *w, int n);

/*
 * The work of a command once its command line is read and Redis connected, printing what
 * the command prints (--json: one document): called by the command and, with a capture,
 * by `cogworkerctl web`'s API (web_api.c), which may not run getopt in its threads.
 */
int ctl_stats(struct ctl *c);
/* discover: SCAN for queue keys nobody listed (a walk of the keyspace: not for the web). */
int ctl_queues_list(struct ctl *c, int discover);
/* 1 when q keeps QUEUE_NAME_RULE (config.h); else 0 after "<what>: bad queue name "q": the
 * rule". */
int ctl_queue_name_ok(const char *what, const char *q);
/* A warning on stderr when no live process reads queue q, naming the queues they read. */
void ctl_warn_unread_queue(struct ctl *c, const char *q);
int ctl_queue_pause(struct ctl *c, const char *q, int pause);      /* pause or resume */
int ctl_queue_clear(struct ctl *c, const char *q);                 /* needs c->yes */
int ctl_processes_list(struct ctl *c);
/* msg: quiet, resume or stop; to every live process (all) or the nids identities. */
int ctl_processes_signal(struct ctl *c, const char *msg, int all, int nids, char **ids);
int ctl_periodic_list(struct ctl *c);
/* what: run, enable or disable; arg: a pjid or an unambiguous prefix of one. */
int ctl_periodic_act(struct ctl *c, const char *what, const char *arg);
int ctl_limits(struct ctl *c);
/* The groups of fair share (groups.c), of class cls only (NULL: every class); with_running,
 * also the groups whose jobs all run (a SCAN of their slot keys: not for the web). */
int ctl_groups(struct ctl *c, const char *cls, int with_running);
/* The runs newest first (from index from, at most limit, reading at most budget entries
 * of the history set; 0 = no limit), filtered by class and status (NULL = all) and by
 * since (NAN = any), and the per-day counts from daily_from (NAN: the oldest run shown)
 * to now. */
int ctl_history(struct ctl *c, const char *cls, const char *status, double since, long from,
                long limit, long budget, double daily_from);
/* Batches (batch.c): the list newest first from index from (paged: the dashboard's
 * {total, from, next, batches}), one batch with its members and child batches; and cancel
 * (batch_cancel.c; needs c->yes). */
/* A batch list's filter (the dashboard's): state as shown (open, committed, complete,
 * cancelled, expired), text a substring of the description; NULL members: any. */
struct batch_filter {
	const char *state, *text;
};
int ctl_batch_state_ok(const char *state);
int ctl_batch_list(struct ctl *c, long from, int limit, int paged,
                   const struct batch_filter *f, long budget);
int ctl_batch_show(struct ctl *c, const char *bid);
int ctl_batch_cancel(struct ctl *c, const char *bid);

int cmd_push(struct ctl *c, int argc, char **argv);
int cmd_stats(struct ctl *c, int argc, char **argv);
int cmd_queues(struct ctl *c, int argc, char **argv);
int cmd_jobs(struct ctl *c, int argc, char **argv);
int cmd_processes(struct ctl *c, int argc, char **argv);
int cmd_periodic(struct ctl *c, int argc, char **argv);
int cmd_exec(struct ctl *c, int argc, char **argv);
int cmd_metrics(struct ctl *c, int argc, char **argv);
int cmd_history(struct ctl *c, int argc, char **argv);
int cmd_top(struct ctl *c, int argc, char **argv);
int cmd_limits(struct ctl *c, int argc, char **argv);
int cmd_groups(struct ctl *c, int argc, char **argv);
int cmd_web(struct ctl *c, int argc, char **argv);
int cmd_batch(struct ctl *c, int argc, char **argv);
/* The callbacks a batch script's reply lists from index first on, printed as "fired: bid
 * kind jid" (not with --json). */
void ctl_print_fired(struct ctl *c, const redisReply *rep, size_t first);

#endif
