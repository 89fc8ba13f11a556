/* SPDX-License-Identifier: MIT */
/*
 * handler.c: run one handler command as a child process (doc/design.md "Handlers",
 * doc/protocol.md §1.1).
 *
 * handler_run puts the pieces together, in order: the executable is looked up in the
 * child's PATH and the child started with its pipes (spawn.c: vfork, and only raw,
 * async-signal-safe calls until execve), then served until it and its whole process group
 * are gone (pump.c: stdin, output lines, pidfd, timeout and abort, the grandchild rule),
 * and how it ended becomes the run_result. Whatever needs allocation or NSS happens before,
 * in the caller: the environment (handler_build_env, handler_env.c) and the user and
 * groups (handler_resolve_ids, handler_user.c). handler_int.h is what these files share.
 *
 * SIGPIPE: the daemon ignores it; handler_run additionally blocks it in the calling thread
 * while the pump still has stdin to write and consumes a SIGPIPE its own writes raised, so
 * other callers (cogworkerctl exec) do not need to ignore it.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "handler.h"
#include "handler_int.h"
#include "jobcg.h"
#include "reaper.h"
#include "util.h"

/* The argv to exec: command + extra_args, NULL-terminated (pointers into req). */
static char **build_argv(const struct run_request *req)
{
	int n = req->command->n, nx = req->extra_args ? req->nextra : 0;
	char **argv = xmalloc(sizeof(char *) * (size_t)(n + nx + 1));

	for (int i = 0; i < n; i++)
		argv[i] = req->command->v[i];
	for (int i = 0; i < nx; i++)
		argv[n + i] = (char *)req->extra_args[i];
	argv[n + nx] = NULL;
	return argv;
}

/* A SIGPIPE raised by our own write on the (blocked) calling thread: take it off. */
static void consume_sigpipe(void)
{
	sigset_t s;
	struct timespec zero = { 0, 0 };

	sigemptyset(&s);
	sigaddset(&s, SIGPIPE);
	while (sigtimedwait(&s, NULL, &zero) == SIGPIPE)
		;
}

static void spawn_failed(struct run_result *res, int err, enum spawn_step step,
                         const char *path)
{
	res->status = RUN_SPAWN_FAILED;
	res->code = err;
	res->spawn_step = step;
	res->exec_path = path ? xstrdup(path) : NULL;
	res->tail = xstrdup("");
	res->tail_len = 0;
	res->finished = now_float();
}

int handler_spawn(const struct run_request *req, struct run_result *res, pid_t *pid,
                  struct child_io *io)
{
	char *path = NULL, **argv;
	int err, step;

	*pid = 0;
	io->caps = NULL;
	io->njoin = 0;
	if (!req->command || req->command->n < 1 || !req->command->v || !req->command->v[0]) {
		spawn_failed(res, EINVAL, SPAWN_STEP_RESOLVE, NULL);
		return -1;
	}
	err = resolve_exec_path(req->command->v[0], req->env, req->cwd, &path);
	if (err) {
		spawn_failed(res, err, SPAWN_STEP_RESOLVE, req->command->v[0]);
		if (!strchr(req->command->v[0], '/'))
			res->search_path = exec_search_path(req->env);
		return -1;
	}
	char why[PATH_MAX + 200];
	if (cgcaps_v2_apply(req->cgroup ? jobcg_dir_fd(req->cgroup) : -1, req->caps, why,
	                    sizeof why) != 0) {
		spawn_failed(res, EIO, SPAWN_STEP_CGROUP, path);
		res->detail = xstrdup(why);
		free(path);
		return -1;
	}
	if (req->caps && caps_any(req->caps) && caps_need_v1(req->caps)) {
		io->caps = capgroup_take(req->caps, why, sizeof why);
		if (!io->caps) {
			spawn_failed(res, EIO, SPAWN_STEP_CGROUP, path);
			res->detail = xstrdup(why);
			free(path);
			return -1;
		}
		io->njoin = capgroup_join_fds(io->caps, io->join,
		                              (int)(sizeof io->join / sizeof *io->join));
	}
	argv = build_argv(req);
	err = spawn_handler(req, path, argv, (char *const *)req->env, pid, io, &step);
	free(argv);
	res->pid = (int)*pid;
	if (err) {
		spawn_failed(res, err, (enum spawn_step)step, path);
		capgroup_give(io->caps);
		io->caps = NULL;
		free(path);
		return -1;
	}
	free(path);
	reaper_track((int)*pid);         /* the child leads its own process group */
	return 0;
}

int handler_run(const struct run_request *req, struct run_result *res,
                void (*spawned)(void *ctx, int pid), void *spawned_ctx)
{
	struct child_io io;
	sigset_t pipeset, saved;
	pid_t pid;
	int epipe;

	memset(res, 0, sizeof *res);
	usage_none(&res->usage);
	res->started = now_float();
	struct usage_cg_mark cg;
	if (req->cgroup)
		usage_cg_begin(jobcg_dir_fd(req->cgroup), jobcg_cpu_stat_fd(req->cgroup), &cg);
	if (handler_spawn(req, res, &pid, &io) != 0) {
		if (req->cgroup)
			usage_cg_end(jobcg_dir_fd(req->cgroup), jobcg_cpu_stat_fd(req->cgroup), &cg,
		             &res->usage);
		usage_none(&res->usage);        /* nothing ran */
		return 0;
	}
	if (spawned)
		spawned(spawned_ctx, (int)pid);

	/* Only a write to the child's stdin can raise SIGPIPE, and spawn_handler wrote what
	 * fitted before the child existed: the mask is needed when some is left. */
	int blocked = io.in >= 0;
	if (blocked) {
		sigemptyset(&pipeset);
		sigaddset(&pipeset, SIGPIPE);
		pthread_sigmask(SIG_BLOCK, &pipeset, &saved);
	}
	epipe = pump_run(req, &io, pid, res);   /* returns once the child is reaped */
	reaper_untrack((int)pid);               /* and its group killed */
	if (req->cgroup) {                      /* the cgroup too: wait for it to be empty */
		jobcg_wait_empty(req->cgroup, JOBCG_WAIT_SECS);
		/* its figures over wait4's: escaped processes included (usage.h) */
		usage_cg_end(jobcg_dir_fd(req->cgroup), jobcg_cpu_stat_fd(req->cgroup), &cg,
		             &res->usage);
	}
	if (io.caps) {                          /* the caps' cgroups (v1): their figures */
		capgroup_usage(io.caps, &res->usage);
		capgroup_give(io.caps);
	}

	if (epipe)
		consume_sigpipe();
	if (blocked)
		pthread_sigmask(SIG_SETMASK, &saved, NULL);
	res->finished = now_float();
	return 0;
}

const char *run_said(const struct run_result *res, size_t *len)
{
	if (res->error) {
		*len = res->error_len;
		return res->error;
	}
	*len = res->tail_len;
	return res->tail;
}

void run_result_free(struct run_result *res)
{
	if (!res)
		return;
	free(res->tail);
	res->tail = NULL;
	res->tail_len = 0;
	free(res->error);
	res->error = NULL;
	res->error_len = 0;
	free(res->exec_path);
	res->exec_path = NULL;
	free(res->detail);
	res->detail = NULL;
}
