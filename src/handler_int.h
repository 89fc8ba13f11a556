/* SPDX-License-Identifier: MIT */
/*
 * handler_int.h: what the parts of handler_run share (handler.c, handler_env.c,
 * handler_user.c, spawn.c, pump.c); nothing else includes it. handler.h stays the public
 * header.
 */
#ifndef COGWORKERD_HANDLER_INT_H
#define COGWORKERD_HANDLER_INT_H

#include <sys/types.h>
#include <unistd.h>

#include "handler.h"

#define HANDLER_DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"

/* run_request.groups (unsigned, so handler.h needs no system header) goes to setgroups. */
_Static_assert(sizeof(gid_t) == sizeof(unsigned), "gid_t must be an unsigned int");

static inline void close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

struct child_io {
	int in, out, err;               /* parent ends, CLOEXEC (in non-blocking); -1 = closed */
	size_t in_off;                  /* bytes of stdin already written */
	/* Our copies of the child's stdout and stderr ends, kept until the child has exited,
	 * so that its exit wakes the pump once (pidfd) rather than twice (EOF, then pidfd). */
	int out_w, err_w;
	int pidfd;                      /* from the spawn (CLONE_PIDFD), or -1 */
	/* The caps' cgroups the child joins (req->caps), from handler_spawn on; the child
	 * writes "0" into each of join[] first thing. NULL / 0 when uncapped. */
	struct capgroup *caps;
	int join[4];
	int njoin;
};

/* --- spawn.c ----------------------------------------------------------------------------- */

/* The program to exec for file, searched in env's PATH (not the daemon's): 0 or an errno. */
int resolve_exec_path(const char *file, const char *const *env, const char *cwd, char **out);
/* The PATH that search uses: env's, else HANDLER_DEFAULT_PATH (borrowed). */
const char *exec_search_path(const char *const *env);

/* Start the child with its pipes: 0 (it exec'd; *pid and io set), or an errno and in
 * *step the step that failed (enum spawn_step, handler.h). */
int spawn_handler(const struct run_request *req, const char *path, char **argv,
                  char *const *envp, pid_t *pid, struct child_io *io, int *step);

/* --- handler.c -------------------------------------------------------------------------- */

/* Resolve, spawn and hand the child's group to the reaper: 0 (*pid, io set), or -1 with
 * res filled as RUN_SPAWN_FAILED. For handler_run and warm.c. */
int handler_spawn(const struct run_request *req, struct run_result *res, pid_t *pid,
                  struct child_io *io);

/* --- handler_user.c ----------------------------------------------------------------------- */

/* h's user and group as ids and supplementary groups (malloc'd), without asking whether
 * this process may switch to them: 0, or -1 with err. */
int handler_lookup_ids(const struct handler *h, unsigned *uid, unsigned *gid,
                       unsigned **groups, int *ngroups, char *err, size_t errlen);

/* --- pump.c ------------------------------------------------------------------------------ */

/*
 * The output side of a child (its stdout and stderr read ends, which it takes over): read,
 * cut into lines for the log and on_stdout_line within the log budget of a run, the last
 * output_tail bytes of stderr kept. A cold child has one run; a warm process one per job,
 * each begun with the job's request (its hooks, tag and tail) and ended before its outcome
 * is read, so each job's output is its own.
 */
struct pollfd;
struct outpipes;
struct outpipes *outpipes_new(int out, int err);
void outpipes_begin(struct outpipes *o, const struct run_request *req);
/* Adds the open read ends to fds (their indexes in i_out and i_err, else -1); 0 when both closed. */
int outpipes_poll(const struct outpipes *o, struct pollfd *fds, int *nfds, int *i_out,
                  int *i_err);
void outpipes_ready(struct outpipes *o, const struct pollfd *fds, int i_out, int i_err);
/* Read what is there now (non-blocking read ends), a bounded number of chunks. */
void outpipes_drain(struct outpipes *o);
/* The run's unterminated last lines are emitted as lines. */
void outpipes_end_run(struct outpipes *o);
char *outpipes_tail(const struct outpipes *o, size_t *len);   /* malloc'd, NUL-terminated */
int outpipes_open(const struct outpipes *o);
void outpipes_free(struct outpipes *o);

/* Signal a process group (ESRCH is no error), and whether a member still runs (not a
 * zombie). */
void group_signal(pid_t pgid, int sig);
int group_alive(pid_t pgid);

/*
 * Serve the started child pid through io (the pump takes its descriptors over) until it is
 * reaped and its process group killed, then fill res's status, code and tail. Returns 1
 * when a write to its stdin raised a SIGPIPE, now pending on the calling thread, else 0.
 */
int pump_run(const struct run_request *req, const struct child_io *io, pid_t pid,
             struct run_result *res);

#endif
