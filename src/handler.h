/* SPDX-License-Identifier: MIT */
/*
 * handler.h: running one handler command as a child process (doc/design.md "Handlers",
 * doc/protocol.md §1.1): own process group, job JSON on stdin, COGWORKER_* environment, output
 * pumped to the log, timeout with TERM/grace/KILL of the whole group.
 *
 * Notes on the contract (details in handler.c, spawn.c and pump.c):
 * - env NULL = an empty environment (nothing is inherited); argv[0] without '/' is
 *   searched in the PATH of env (default /usr/local/bin:/usr/bin:/bin), not the daemon's.
 * - rlimit_* < 0 = leave as is; 0 is a real limit. Soft and hard limits are both set.
 * - Output lines longer than 8 KiB are split (for the log and on_stdout_line); an
 *   unterminated last line is delivered at EOF.
 * - Whatever is left in the child's process group after the child exits is SIGKILLed,
 *   after a normal exit too; after TERM (timeout/abort) the grace covers the whole group.
 *   With req->cgroup, so is whatever is left in the cgroup (escaped processes included),
 *   and handler_run returns once it is empty.
 * - code is 0 for RUN_TIMEOUT and RUN_ABORTED; tail is always a malloc'd NUL-terminated
 *   string (possibly empty), also for RUN_SPAWN_FAILED; pid is 0 if nothing was forked.
 * - Children are reaped with waitpid(pid): nothing else in the process may waitpid(-1)
 *   or set SIGCHLD to SIG_IGN. SIGPIPE needs no particular disposition.
 */
#ifndef COGWORKERD_HANDLER_H
#define COGWORKERD_HANDLER_H

#include <stddef.h>
#include <stdatomic.h>
#include "cgcaps.h"
#include "config.h"
#include "confine.h"
#include "usage.h"

enum run_status {
	RUN_EXITED,         /* code = exit status */
	RUN_SIGNALED,       /* code = signal number */
	RUN_TIMEOUT,        /* ran past the timeout; the group was killed */
	RUN_SPAWN_FAILED,   /* code = errno of the failed fork/exec/setup step */
	RUN_ABORTED,        /* stopped on request (daemon stop deadline); outcome ignored */
	RUN_CANCELLED,      /* stopped because *cancel became non-zero (TERM, kill_grace, KILL) */
	RUN_WARM_BROKEN,    /* a warm process ended or broke the protocol while running the
	                     * job, in a way no exit status tells (detail says how) */
};

struct jobcg;

struct run_request {
	const struct argv_list *command;    /* argv to exec (argv[0] is the program) */
	const char *const *extra_args;      /* appended to argv (args_as_argv), may be NULL */
	int nextra;
	const char *const *env;             /* full environment for the child, NULL-terminated */
	const char *stdin_data;             /* written to the child's stdin, then EOF */
	size_t stdin_len;
	double timeout;                     /* seconds, 0 = none */
	double kill_grace;                  /* between TERM and KILL */
	size_t output_tail;                 /* bytes of stderr to keep */
	const char *cwd;                    /* NULL = inherit */
	int set_ids;                        /* switch to uid/gid/groups below */
	unsigned uid, gid;
	const unsigned *groups;             /* supplementary groups (gid_t) */
	int ngroups;
	long long rlimit_cpu, rlimit_as, rlimit_nofile, rlimit_nproc;  /* -1 = leave */
	const struct confinement *confine;  /* made in the child (confine.c); NULL = none */
	const char *log_tag;                /* e.g. "jid=abc": prefix of forwarded output lines */
	int log_output;                     /* forward stdout/stderr lines to the log */
	/* called for each complete stdout line (without newline); may be NULL */
	void (*on_stdout_line)(void *ctx, const char *line, size_t len);
	/* called with every chunk read from stdout or stderr, in the order read (the combined
	 * output, as a terminal would show it); may be NULL. It must not block. */
	void (*on_output)(void *ctx, const char *data, size_t len);
	void *ctx;
	atomic_int *abort;                  /* when it becomes non-zero: TERM, grace, KILL */
	double abort_grace;                 /* grace used on abort */
	/* may be NULL; when it becomes non-zero while the child runs: TERM, kill_grace, KILL,
	 * and the run is RUN_CANCELLED whatever the child's exit. It outranks a timeout or an
	 * abort already under way (the grace then stays the shorter one). */
	atomic_int *cancel;
	/* A warm process (warm.c): the socket end handed to the child as fd 3, its stdin then
	 * /dev/null. 0 = none (a cold child: stdin is the job). */
	int ctl_fd;
	/* A warm job's "progress" messages (pct as written, message or NULL); may be NULL. */
	void (*on_progress)(void *ctx, const char *pct, const char *message);
	/* May be NULL; when it becomes non-zero (the daemon's stop), a warm job still waiting
	 * for a process to be ready gives up unstarted, as RUN_ABORTED: a job that never
	 * started is handed back at once rather than held through the stop's drain. */
	atomic_int *stopping;
	/* May be NULL: the cgroup the child joins before exec (jobcg.h). At the run's end
	 * everything in it is killed (cgroup.kill) and waited for, as the process group is:
	 * the processes that left the group too. */
	struct jobcg *cgroup;
	/* The handler's caps (may be NULL: none): the child runs in cgroups that enforce them
	 * (cgcaps.h), and res->usage has what they measured. */
	const struct handler_caps *caps;
	/* May be NULL: the caller's own work while a warm job runs (fetcher.c's prefetch).
	 * Called once the job message is written whole, then again at the monotonic time it
	 * returns, until it returns 0; the job is not served while it runs, so it must be
	 * short (a Redis round trip), and a timeout or cancel waits for it. */
	double (*beside)(void *ctx);
};

/* Where a RUN_SPAWN_FAILED failed, for its message. */
enum spawn_step {
	SPAWN_STEP_RESOLVE,     /* finding the program (in the child's PATH) */
	SPAWN_STEP_SETUP,       /* pipes, fork, session, signals, descriptors */
	SPAWN_STEP_CWD,         /* chdir to cwd */
	SPAWN_STEP_RLIMIT,
	SPAWN_STEP_IDS,         /* setgroups / setresgid / setresuid */
	SPAWN_STEP_EXEC,        /* execve */
	SPAWN_STEP_CGROUP,      /* joining the run's cgroup, or making, writing or joining
	                         * the caps' cgroups */
	/* The confinement (confine.c): one step per failing enum confine_part, in its order
	 * (spawn_step_of_confine, confine_of_spawn_step). */
	SPAWN_STEP_CONFINE_FIRST,
	SPAWN_STEP_CONFINE_LAST = SPAWN_STEP_CONFINE_FIRST + CONFINE_NO_NEW_PRIVS - CONFINE_NAMESPACES,
};

static inline int spawn_step_of_confine(enum confine_part p)
{
	return SPAWN_STEP_CONFINE_FIRST + (int)p - CONFINE_NAMESPACES;
}

/* The part of the confinement a step is, or CONFINE_OK for the other steps. */
static inline enum confine_part confine_of_spawn_step(int step)
{
	return step >= SPAWN_STEP_CONFINE_FIRST && step <= SPAWN_STEP_CONFINE_LAST
	       ? (enum confine_part)(step - SPAWN_STEP_CONFINE_FIRST + CONFINE_NAMESPACES)
	       : CONFINE_OK;
}

struct run_result {
	enum run_status status;
	int code;
	char *tail;                         /* last output_tail bytes of stderr (malloc'd) */
	size_t tail_len;
	char *error;                        /* a warm job's "done" error, its last output_tail
	                                     * bytes (malloc'd), or NULL: what it said went
	                                     * wrong, apart from what it printed (run_said) */
	size_t error_len;
	double started, finished;           /* wall clock */
	int pid;
	/* RUN_SPAWN_FAILED: the step, and the program (as resolved, else as configured) */
	enum spawn_step spawn_step;
	char *exec_path;                    /* malloc'd, or NULL */
	const char *search_path;            /* the PATH searched for a bare name (borrowed
	                                     * from req->env), or NULL */
	char *detail;                       /* RUN_WARM_BROKEN: what happened; SPAWN_STEP_CGROUP:
	                                     * what failed, or NULL (malloc'd) */
	struct run_usage usage;             /* what the run cost (usage.h); measured = 0 when
	                                     * no process ran */
};

/*
 * Spawn and wait. Never blocks without a bound beyond the child's own timeout; a child that
 * ignores stdin, floods output or forks grandchildren cannot block or hurt the caller.
 * `spawned` (may be NULL) is called in the parent right after the child started.
 * Returns 0 with res filled (res->tail to be freed by run_result_free).
 */
int handler_run(const struct run_request *req, struct run_result *res,
                void (*spawned)(void *ctx, int pid), void *spawned_ctx);
void run_result_free(struct run_result *res);
/* What a failure's message and backtrace are built from: a warm job's "done" error when it
 * gave one (doc/protocol.md §1.2), else the stderr tail. */
const char *run_said(const struct run_result *res, size_t *len);

/* Build the child's environment: allow-listed daemon variables, env_passthrough, the
 * handler's env, then the COGWORKER_* ones. A NULL-terminated, malloc'd array. jid NULL:
 * a warm process's, with COGWORKER_PROTOCOL instead of the job's variables. bid (NULL =
 * none): COGWORKER_BID, the batch the job is a member of (doc/protocol.md §7.34). */
char **handler_build_env(const struct handler *h, const char *jid, const char *cls,
                         const char *queue, const char *retry_count, const char *args_json,
                         const char *bid);
void handler_free_env(char **env);

/*
 * Every command of c (handlers, their on_death, the global on_death) resolved as the
 * daemon will run it (handler_check.c): report(ctx, "<file>:<line>: <problem>") for each
 * that can't be run. Returns how many can't.
 */
int conf_check_commands(const struct conf *c, void (*report)(void *ctx, const char *problem),
                        void *ctx);

/* Resolve user/group names of a handler into req (before any fork). -1 + err on failure. */
int handler_resolve_ids(const struct handler *h, struct run_request *req, unsigned **groups_out,
                        char *err, size_t errlen);

#endif
