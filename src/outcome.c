/* SPDX-License-Identifier: MIT */
/*
 * outcome.c: the run path of a job shared by the daemon (fetcher.c) and `cogworkerctl
 * exec`: build the run request from the job and its handler conf, turn the run's result
 * into an error class and message, decide where a failure goes.
 *
 * Why one place: exec exists to answer "what would the daemon do with this job?" without
 * Redis. While it had its own copy of these steps, the copies drifted (exec reported a
 * user that can't be resolved without the "exec failed: " the daemon files), and exec's
 * answer was then about a daemon that does not exist. With one implementation the answer
 * can only differ where the callers deliberately differ: exec may override the timeout
 * (the message then names the timeout that applied), keeps a longer stderr tail to show
 * (the message is still built from the handler's output_tail), and prints instead of
 * logging. tests/integration/test_outcome.py runs the same handler results both ways.
 *
 * The error messages are part of the protocol (what ends up in retry and dead entries
 * and the attempts log): "exit status N", "killed by signal N (SIGNAME)", "timed out
 * after Ss", "exec failed: why", "no handler configured for class C", "cancelled on
 * request" (cogworkerctl jobs cancel), "warm process …" (a warm process that ended or broke the
 * protocol mid-job, doc/protocol.md §1.2), "out of memory (memory_max M, peak P)" (a run
 * the kernel killed something of for memory_max, doc/design.md "Caps per handler"), each
 * followed by
 * the stderr tail as job_error_message joins them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cgcaps.h"
#include "json.h"
#include "outcome.h"
#include "util.h"

#define NO_EXIT_CODE (-1)

static int in_list(const int *v, int n, int code)
{
	for (int i = 0; i < n; i++)
		if (v[i] == code)
			return 1;
	return 0;
}

/*
 * json_array_spans gives each element's original text, and a string element is decoded
 * from that text (json_string_decode), so the walk is one pass over the args: a cJSON walk
 * with cJSON_GetArrayItem(i) started from the head each time, quadratic in the number of
 * args (80 000 args cost 13 s of CPU). The decoding keeps a "\u0000", which cJSON would
 * have cut the string at: an argv element can't hold a NUL, so such args are refused
 * rather than passed truncated.
 */
char **args_as_argv(const char *args_json, int *n, int *nul_at)
{
	size_t len = strlen(args_json);
	size_t *starts = NULL, *lens = NULL;
	int count = json_array_spans(args_json, len, &starts, &lens);
	*n = 0;
	*nul_at = -1;
	char **out = count > 0 ? xcalloc((size_t)count, sizeof *out) : NULL;
	for (int i = 0; i < count && *nul_at < 0; i++) {
		size_t dlen = 0;
		if (args_json[starts[i]] == '"')
			out[i] = json_string_decode(args_json + starts[i], lens[i], &dlen);
		if (!out[i])
			out[i] = xstrndup(args_json + starts[i], lens[i]);
		else if (strlen(out[i]) != dlen)
			*nul_at = i;
	}
	free(starts);
	free(lens);
	if (*nul_at >= 0) {
		for (int i = 0; i <= *nul_at; i++)
			free(out[i]);
		free(out);
		return NULL;
	}
	*n = count > 0 ? count : 0;
	return out;
}

static void failed(struct run_outcome *o, const char *error_class, const char *detail,
                   const char *tail, size_t tail_len)
{
	o->error_class = error_class;
	o->error_message = job_error_message(error_class, detail, tail, tail_len);
	o->detail = xstrdup(detail);
}

/* "exec failed: <what>: <strerror> (<ENAME>)", what being the step that failed: the
 * program (as resolved, or the name and the PATH it was not found in), or the cwd. */
static char *spawn_detail(const struct job_run *run, const struct run_result *res)
{
	const char *prog = res->exec_path ? res->exec_path
	                   : run->req.command && run->req.command->v ? run->req.command->v[0]
	                   : "?";
	const char *ename = strerrorname_np(res->code);
	char why[160];
	snprintf(why, sizeof why, "%s (%s)", strerror(res->code), ename ? ename : "?");
	enum confine_part part = confine_of_spawn_step((int)res->spawn_step);
	if (part != CONFINE_OK)
		return xasprintf("exec failed: %s: %s", confine_part_what(part), why);
	switch (res->spawn_step) {
	case SPAWN_STEP_RESOLVE:
		if (res->search_path)
			return xasprintf("exec failed: %s not found in PATH %s: %s", prog,
			                 res->search_path, why);
		return xasprintf("exec failed: %s: %s", prog, why);
	case SPAWN_STEP_CWD:
		return xasprintf("exec failed: chdir %s: %s", run->req.cwd ? run->req.cwd : "?", why);
	case SPAWN_STEP_RLIMIT:
		return xasprintf("exec failed: setrlimit: %s", why);
	case SPAWN_STEP_IDS:
		return xasprintf("exec failed: switching user/group: %s", why);
	case SPAWN_STEP_SETUP:
		return xasprintf("exec failed: starting %s: %s", prog, why);
	case SPAWN_STEP_CGROUP:
		if (res->detail)
			return xasprintf("exec failed: cgroup of the caps: %s", res->detail);
		return xasprintf("exec failed: joining its cgroup: %s", why);
	case SPAWN_STEP_EXEC:
	default:
		break;
	}
	return xasprintf("exec failed: %s: %s", prog, why);
}

static void outcome_clear(struct run_outcome *o)
{
	memset(o, 0, sizeof *o);
	o->exit_code = NO_EXIT_CODE;
}

static void free_parts(struct job_run *run)
{
	for (int i = 0; i < run->nextra; i++)
		free(run->extra[i]);
	free(run->extra);
	free(run->groups);
	handler_free_env(run->env);
	memset(run, 0, sizeof *run);
}

int job_run_init(struct job_run *run, const struct job *j, const struct handler *h,
                 struct run_outcome *o)
{
	memset(run, 0, sizeof *run);
	char rc[32];
	snprintf(rc, sizeof rc, "%ld", j->retry_count);
	int nul_at = -1;
	if (h->args_as_argv)
		run->extra = args_as_argv(j->args_json, &run->nextra, &nul_at);
	if (nul_at >= 0) {
		/* No retry can ever pass it: cut short to dead, like E2BIG (decide_failure). */
		outcome_clear(o);
		char *what = xasprintf("exec failed: args[%d] holds a NUL character (\\u0000), which "
		                       "can't be passed on a command line", nul_at);
		failed(o, "Cogworker::HandlerSpawnFailed", what, NULL, 0);
		o->permanent = 1;
		free(what);
		return -1;
	}
	/* A warm process has its own environment (warm.c): the job's ids are in its message. */
	run->env = h->warm ? NULL
	           : handler_build_env(h, j->jid ? j->jid : "", j->cls, j->queue, rc, j->args_json,
	                                      j->bid);
	run->message_tail = h->output_tail;
	run->req = (struct run_request){
		.command = &h->command, .extra_args = (const char *const *)run->extra,
		.nextra = run->nextra, .env = (const char *const *)run->env,
		.stdin_data = j->raw, .stdin_len = j->raw_len,
		.timeout = h->timeout, .kill_grace = h->kill_grace, .output_tail = h->output_tail,
		.cwd = h->cwd, .rlimit_cpu = h->rlimit_cpu, .rlimit_as = h->rlimit_as,
		.rlimit_nofile = h->rlimit_nofile, .rlimit_nproc = h->rlimit_nproc,
		.confine = &h->confine, .abort_grace = ABORT_GRACE, .caps = &h->caps,
	};
	char err[256];
	if ((h->user || h->group) &&
	    handler_resolve_ids(h, &run->req, &run->groups, err, sizeof err) != 0) {
		free_parts(run);
		outcome_clear(o);
		/* Reported as a failed exec: to the job it is one (doc/protocol.md §1.1 format). */
		char *what = xasprintf("exec failed: %s", err);
		failed(o, "Cogworker::HandlerSpawnFailed", what, NULL, 0);
		free(what);
		return -1;
	}
	return 0;
}

void job_run_free(struct job_run *run)
{
	free_parts(run);
}

/*
 * A run that failed while the kernel killed something of it for memory failed for that,
 * whatever its exit said (a shell reports its killed child as "exit status 137"): "out of
 * memory (memory_max 256 MiB, peak 256 MiB)", the cap and the peak in the cap's unit. A
 * timeout or a cancel stays what it is: it was asked for.
 */
static int out_of_memory(struct run_outcome *o, const struct job_run *run,
                         const struct run_result *res, const char *tail, size_t tail_len)
{
	long long cap = run->req.caps ? run->req.caps->max[CAP_MEMORY] : 0;
	if (o->success || o->cancelled || o->aborted || res->status == RUN_TIMEOUT ||
	    res->status == RUN_SPAWN_FAILED || !res->usage.cgroup || res->usage.cg_oom_kills <= 0 ||
	    cap <= 0)
		return 0;
	char capt[32], peakt[32], detail[128];
	cgcaps_format_bytes(cap, cap, capt, sizeof capt);
	if (res->usage.cg_memory_peak >= 0)
		cgcaps_format_bytes(res->usage.cg_memory_peak, cap, peakt, sizeof peakt);
	else
		snprintf(peakt, sizeof peakt, "unknown");
	snprintf(detail, sizeof detail, "out of memory (memory_max %s, peak %s)", capt, peakt);
	outcome_free(o);
	outcome_clear(o);
	o->oom = 1;
	failed(o, JOB_OUT_OF_MEMORY, detail, tail, tail_len);
	return 1;
}

static void outcome_of_status(struct run_outcome *o, const struct job_run *run,
                              const struct run_result *res, const char *tail, size_t tail_len);

void outcome_of_run(struct run_outcome *o, const struct job_run *run,
                    const struct run_result *res)
{
	size_t tail_len;
	const char *tail = run_said(res, &tail_len);
	if (tail_len > run->message_tail) {
		tail += tail_len - run->message_tail;
		tail_len = run->message_tail;
	}
	outcome_of_status(o, run, res, tail, tail_len);
	out_of_memory(o, run, res, tail, tail_len);
}

static void outcome_of_status(struct run_outcome *o, const struct job_run *run,
                              const struct run_result *res, const char *tail, size_t tail_len)
{
	char detail[256];
	outcome_clear(o);
	switch (res->status) {
	case RUN_EXITED:
		if (res->code == 0) {
			o->success = 1;
			return;
		}
		o->exit_code = res->code;
		snprintf(detail, sizeof detail, "exit status %d", res->code);
		failed(o, "Cogworker::HandlerFailed", detail, tail, tail_len);
		return;
	case RUN_SIGNALED:
		snprintf(detail, sizeof detail, "killed by signal %d (SIG%s)", res->code,
		         sigabbrev_np(res->code) ? sigabbrev_np(res->code) : "?");
		failed(o, "Cogworker::HandlerSignaled", detail, tail, tail_len);
		return;
	case RUN_TIMEOUT:
		snprintf(detail, sizeof detail, "timed out after %gs", run->req.timeout);
		failed(o, "Cogworker::HandlerTimeout", detail, tail, tail_len);
		return;
	case RUN_SPAWN_FAILED: {
		char *what = spawn_detail(run, res);
		o->spawn_errno = res->code;
		failed(o, "Cogworker::HandlerSpawnFailed", what, tail, tail_len);
		free(what);
		return;
	}
	case RUN_ABORTED:
		o->aborted = 1;
		return;
	case RUN_CANCELLED:
		o->cancelled = 1;
		failed(o, JOB_CANCELLED, "cancelled on request", tail, tail_len);
		return;
	case RUN_WARM_BROKEN:
		failed(o, "Cogworker::HandlerFailed", res->detail ? res->detail : "warm process lost",
		       tail, tail_len);
		return;
	}
}

void outcome_no_handler(struct run_outcome *o, const char *cls)
{
	outcome_clear(o);
	char *detail = xasprintf("no handler configured for class %s", cls);
	failed(o, "Cogworker::NoHandler", detail, NULL, 0);
	free(detail);
}

void outcome_free(struct run_outcome *o)
{
	free(o->error_message);
	o->error_message = NULL;
	free(o->detail);
	o->detail = NULL;
}

enum decision decide_failure(const struct job *j, const struct handler *h,
                             const struct run_outcome *o)
{
	int code = o->exit_code;
	if (j->retry_count + 1 > j->max_retries)
		return DECIDE_DEAD;
	if (o->spawn_errno == E2BIG || o->permanent)
		return DECIDE_KILLED;
	if (h && o->oom && h->caps.dead_on_oom)
		return DECIDE_KILLED;
	if (h && code > 0 && in_list(h->dead_codes, h->ndead, code))
		return DECIDE_KILLED;
	if (h && code > 0 && in_list(h->discard_codes, h->ndiscard, code))
		return DECIDE_DISCARD;
	return DECIDE_RETRY;
}

void decision_reason(enum decision d, const struct job *j, const struct run_outcome *o,
                     char *out, size_t n)
{
	if (o->cancelled) {     /* the caller decided: dead, or discarded on request */
		snprintf(out, n, "%s", d == DECIDE_DISCARD ? "cancelled, --discard" : "cancelled");
		return;
	}
	switch (d) {
	case DECIDE_RETRY:
		snprintf(out, n, "%s", "");
		return;
	case DECIDE_DEAD:
		if (j->max_retries > 0)
			snprintf(out, n, "retries exhausted");
		else if (cJSON_IsFalse(j->obj ? cJSON_GetObjectItemCaseSensitive(j->obj, "retry")
		                       : NULL))
			snprintf(out, n, "retry is false: no retries");
		else
			snprintf(out, n, "retry is 0: no retries");
		return;
	case DECIDE_KILLED:
		if (o->spawn_errno == E2BIG)
			snprintf(out, n, "the arguments do not fit in an argv (E2BIG): no retry can "
			         "succeed");
		else if (o->permanent)
			snprintf(out, n, "an arg holds a NUL character, which no argv can carry: no "
			         "retry can succeed");
		else if (o->oom)
			snprintf(out, n, "out of memory, and the handler has dead_on_oom");
		else
			snprintf(out, n, "exit code %d is in dead_exit_codes", o->exit_code);
		return;
	case DECIDE_DISCARD:
		snprintf(out, n, "exit code %d is in discard_exit_codes", o->exit_code);
		return;
	}
	snprintf(out, n, "%s", "");
}
