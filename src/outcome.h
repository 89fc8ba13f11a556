/* SPDX-License-Identifier: MIT */
/*
 * outcome.h: one run of a job's handler, from the handler conf to what the run comes to:
 * the run request, the error class and message of a failed run, and the failure decision
 * (doc/protocol.md §1.1, §4.2, §7.5). The daemon's fetchers and `cogworkerctl exec` both run jobs
 * through this, so what exec reports is what the daemon would file (outcome.c says why).
 *
 * Library code: it knows nothing of the daemon's threads, Redis or shared state.
 */
#ifndef COGWORKERD_OUTCOME_H
#define COGWORKERD_OUTCOME_H

#include <stddef.h>
#include "config.h"
#include "handler.h"
#include "job.h"

/*
 * The grace between TERM and KILL of a handler stopped on request: the daemon's stop
 * deadline (shutdown_timeout) has passed, or exec was interrupted. The handler has had its
 * chance to finish already; this is only long enough to flush and remove temp files,
 * short so that a stop ends well inside systemd's TimeoutStopSec (the units count 2 s for
 * it), and the manager waits for the fetchers this long plus a little.
 */
#define ABORT_GRACE 2.0

/* What a run comes to. Every field is set by the function that fills it. */
struct run_outcome {
	int success;                /* exited 0 */
	int aborted;                /* stopped on request: no outcome, nothing to file */
	int cancelled;              /* cancelled (Cogworker::Cancelled): dead or discarded,
	                             * whatever the retry budget and the exit-code map say */
	int exit_code;              /* a non-zero exit status, for the exit-code map; else -1 */
	int spawn_errno;            /* the errno of a spawn that failed; else 0 */
	int permanent;              /* a failure no retry can mend (an arg holding NUL) */
	int oom;                    /* the kernel killed something of it past memory_max */
	const char *error_class;    /* NULL for a success or an abort */
	char *error_message;        /* malloc'd, NULL when error_class is */
	char *detail;               /* the message without the stderr tail ("exit status 4"),
	                             * for the log line; malloc'd, NULL when error_class is */
};

/*
 * A run request for job j under handler h, with what it points to. The request is the
 * daemon's: the raw payload on stdin, the COGWORKER_* environment, args as argv when the
 * handler asks, the handler's timeout, grace, tail, cwd, rlimits and ids, ABORT_GRACE. The
 * caller adds its own hooks (log_tag, log_output, on_stdout_line, ctx, abort) and may widen
 * req.output_tail for its own use: the error message is built from message_tail bytes.
 */
struct job_run {
	struct run_request req;
	char **env;
	char **extra;               /* args_as_argv, appended to the command */
	int nextra;
	unsigned *groups;
	size_t message_tail;        /* the handler's output_tail */
};

/* 0; or -1 when the handler's user or group can't be resolved, or an arg to pass as argv
 * holds a NUL (a permanent failure): then *o is that failure, nothing is to be run and run
 * needs no job_run_free. */
int job_run_init(struct job_run *run, const struct job *j, const struct handler *h,
                 struct run_outcome *o);
void job_run_free(struct job_run *run);

/* What the finished run res of run comes to. */
void outcome_of_run(struct run_outcome *o, const struct job_run *run,
                    const struct run_result *res);
/* A job whose class has no handler in the conf. */
void outcome_no_handler(struct run_outcome *o, const char *cls);
void outcome_free(struct run_outcome *o);

/*
 * Where a failure goes (doc/protocol.md §7.5): the retry budget first, then the handler's
 * dead_exit_codes and discard_exit_codes (h may be NULL: no handler), else a retry. A
 * spawn that no retry can fix (E2BIG: the job's args do not fit in an argv; an arg holding
 * NUL, o->permanent) is cut short like a dead exit code: retrying it 25 times only delays
 * the dead entry by three weeks.
 */
enum decision { DECIDE_RETRY, DECIDE_DEAD, DECIDE_KILLED, DECIDE_DISCARD };
enum decision decide_failure(const struct job *j, const struct handler *h,
                             const struct run_outcome *o);
/* Why the decision d was taken, for people: "exit code 3 is in dead_exit_codes",
 * "retries exhausted", "cancelled", …; "" for a plain retry. */
void decision_reason(enum decision d, const struct job *j, const struct run_outcome *o,
                     char *out, size_t n);

/* The elements of a JSON array as argv strings: strings decoded, anything else as its
 * original text (a big integer keeps its digits). NULL with *n = 0 for an empty array or
 * not an array. Each string and the array malloc'd. A string holding NUL can't be an argv
 * element: then NULL, *n = 0 and *nul_at = its index (else -1). */
char **args_as_argv(const char *args_json, int *n, int *nul_at);

#endif
