/* SPDX-License-Identifier: MIT */
/*
 * spawn.c: starting a handler child: the executable found in the child's PATH, the pipes,
 * and what runs in the child between vfork and execve.
 *
 * The daemon is multi-threaded and may have a large heap, so the child is created the way
 * posix_spawn does it: clone(CLONE_VM | CLONE_VFORK), a vfork on a stack of its own (the
 * parent thread is suspended, no page tables are copied) and, until execve, the child only
 * makes raw, async-signal-safe system calls on data that the parent prepared beforehand
 * (struct child_spec): no malloc, no locks, no stdio. All allocation happens in the parent
 * before the fork: argv, the environment, and the path of the executable, which is
 * searched in the child's PATH (not the daemon's) by the parent.
 *
 * The child, in order: setsid() (its own session and process group, so the whole job tree
 * can be signalled as -pgid); with a cgroup (jobcg.h), "0" written into its cgroup.procs,
 * opened by the parent long before (one write: the child moves itself, before it runs
 * anything of the handler's, so nothing it starts can be outside); "0" into each cgroup.procs of the caps'
 * cgroups (cgcaps.c) likewise; every signal disposition back to SIG_DFL (SIGPIPE is
 * ignored by the daemon and SIG_IGN survives execve), then an empty signal mask (the daemon
 * blocks every signal in every thread); the pipes onto 0/1/2; every other fd closed
 * (close_range, with a loop as fallback); the handler's confinement, if any (confine.c:
 * namespaces, mounts, no_new_privs; before the ids, whose drop takes the privileges
 * namespaces need); chdir; rlimits; setgroups/setresgid/setresuid
 * (as raw syscalls: glibc's set*id wrappers broadcast to the parent's threads, which a
 * vfork child must never do); PR_SET_PDEATHSIG=SIGKILL then a getppid() check (the daemon
 * may have died before the prctl), after the ids because the kernel clears the death
 * signal when they change (a handler with `user` outlived a kill -9 of the daemon); execve. A failing step leaves its step and errno in the spec
 * (the child shares the parent's memory) and _exits; when clone returns in the parent the
 * child has either exec'd or exited, so a zero there means "exec happened", anything else
 * "step X failed with errno E" (RUN_SPAWN_FAILED, code = E, the step for the error
 * message: a missing cwd must not read as a missing program). Under ThreadSanitizer,
 * which cannot follow a shared-memory child, fork() is used instead, and the step and
 * errno come back through a CLOEXEC "report" pipe read until EOF.
 *
 * What a spawn costs is most of what a short job costs, so the parent's side is lean too:
 * - SIGCHLD stays unblocked around the spawn (see there), so the kernel drops it: a
 *   queued SIGCHLD woke a thread of the daemon for nothing (the manager's signalfd poll);
 * - CLONE_PIDFD hands over the pidfd the pump waits on (no pidfd_open);
 * - stdin is written into its pipe before the child exists, while we hold the read end:
 *   a payload that fits (64 KiB, the default pipe size) is all there, the write end is
 *   closed at once, no write can meet EPIPE and the pump has no stdin to serve;
 * - the parent keeps its copies of the child's stdout and stderr write ends until the
 *   child has exited (struct child_io), so a silent child's exit wakes the pump once.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "confine.h"
#include "handler.h"
#include "handler_int.h"
#include "jobcg.h"
#include "util.h"

#if defined(__SANITIZE_THREAD__)
#define HANDLER_USE_FORK 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HANDLER_USE_FORK 1
#endif
#endif
#ifndef HANDLER_USE_FORK
#define HANDLER_USE_FORK 0
#endif

/* Under AddressSanitizer the child's instrumented frames poison the shadow of the stack it
 * ran on, which is the parent's memory (CLONE_VM): left so, the parent's next frames there
 * read as overflows (seen as a report in append_argv). The parent clears it. */
#if defined(__SANITIZE_ADDRESS__)
#define SPAWN_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SPAWN_UNDER_ASAN 1
#endif
#endif
#ifdef SPAWN_UNDER_ASAN
#include <sanitizer/asan_interface.h>
#define CHILD_STACK_DONE(p, n) __asan_unpoison_memory_region((p), (n))
#else
#define CHILD_STACK_DONE(p, n) ((void)(p), (void)(n))
#endif

/* ----------------------------------------------------------------------------------------
 * Finding the executable (in the parent, with the child's PATH)
 * ------------------------------------------------------------------------------------- */

static const char *env_get(const char *const *env, const char *name)
{
	size_t nlen = strlen(name);

	for (; env && *env; env++)
		if (!strncmp(*env, name, nlen) && (*env)[nlen] == '=')
			return *env + nlen + 1;
	return NULL;
}

const char *exec_search_path(const char *const *env)
{
	const char *path = env_get(env, "PATH");

	return path ? path : HANDLER_DEFAULT_PATH;
}

/*
 * argv[0] with a '/' is used as is (relative to the child's cwd); otherwise the first
 * regular, executable file in PATH. Relative PATH entries ("" = ".") are taken relative to
 * req->cwd when one is set, like the child would see them. 0, or an errno.
 */
int resolve_exec_path(const char *file, const char *const *env, const char *cwd, char **out)
{
	const char *path, *p;
	int err = ENOENT;

	*out = NULL;
	if (!*file)
		return ENOENT;
	if (strchr(file, '/')) {
		*out = xstrdup(file);
		return 0;
	}
	path = exec_search_path(env);
	for (p = path;; p++) {
		const char *end = strchrnul(p, ':');
		int dlen = (int)(end - p);
		const char *dir = dlen ? p : ".";
		char *cand;
		struct stat st;

		if (!dlen)
			dlen = 1;
		if (dir[0] != '/' && cwd)
			cand = xasprintf("%s/%.*s/%s", cwd, dlen, dir, file);
		else
			cand = xasprintf("%.*s/%s", dlen, dir, file);
		if (stat(cand, &st) == 0 && S_ISREG(st.st_mode)) {
			if (faccessat(AT_FDCWD, cand, X_OK, AT_EACCESS) == 0) {
				*out = cand;
				return 0;
			}
			err = EACCES;
		}
		free(cand);
		if (!*end)
			break;
		p = end;
	}
	return err;
}

/* ----------------------------------------------------------------------------------------
 * The child side: between vfork and execve. Raw syscalls on prepared data only.
 * ------------------------------------------------------------------------------------- */

#define HANDLER_NRLIMITS 4

struct child_spec {
	const char *path;
	char *const *argv;
	char *const *envp;
	int fd_in, fd_out, fd_err;      /* child ends of the pipes, all >= 3 */
	int fd_report;                  /* fork: CLOEXEC pipe for the failing errno (>= 3) */
	int fd_ctl;                     /* a warm process's socket, to become fd 3; or -1 */
	int fd_cgroup;                  /* the cgroup.procs to join, or -1 */
	const int *join;                /* cgroup.procs files to write "0" into (cgcaps.c) */
	int njoin;
	volatile int step, err;         /* clone: the failing step and errno, by the child */
	pid_t parent;
	const char *cwd;
	int cwd_implicit;               /* cwd is the daemon's own, entered only to see new mounts */
	int set_ids;
	uid_t uid;
	gid_t gid;
	const gid_t *groups;
	size_t ngroups;
	struct confine_child cf;        /* the confinement to make, if any (confine.c) */
	int nrlimits;
	int rl_resource[HANDLER_NRLIMITS];
	struct rlimit rl[HANDLER_NRLIMITS];
	/* The kernel's struct sigaction, for the raw rt_sigaction in the child: only the
	 * handler is set, the rest must be there and zero. */
	/* cppcheck-suppress unusedStructMember ; read by the kernel */
	struct { void *handler; unsigned long flags; void *restorer; unsigned long mask; } ksa_default,
	    ksa_ignore;
	sigset_t empty_mask;
};

/* The spec is the parent's memory under clone(CLONE_VM): step and errno are left there.
 * With fork, they go in one write of 8 bytes (atomic on a pipe). */
#define child_fail(rep, step, e) child_fail_(c, (rep), (step), (e))

__attribute__((noreturn))
static void child_fail_(const struct child_spec *c, int report_fd, int step, int err)
{
	int msg[2] = { step, err };
	ssize_t w;

	if (report_fd < 0) {
		((struct child_spec *)c)->step = step;
		((struct child_spec *)c)->err = err;
		_exit(127);
	}
	do
		w = write(report_fd, msg, sizeof msg);
	while (w < 0 && errno == EINTR);
	_exit(127);
}

static void child_close_from(int lowfd)
{
	if (syscall(SYS_close_range, (unsigned)lowfd, ~0U, 0) == 0)
		return;
	struct rlimit rl;
	long max = 65536;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur < (rlim_t)(1 << 20))
		max = (long)rl.rlim_cur;
	for (long fd = lowfd; fd < max; fd++)
		close((int)fd);
}

__attribute__((noinline, noreturn))
static void child_exec(const struct child_spec *c)
{
	int rep = c->fd_report;

	if (setsid() < 0)
		child_fail(rep, SPAWN_STEP_SETUP, errno);
	if (c->fd_cgroup >= 0 && write(c->fd_cgroup, "0", 1) != 1)
		child_fail(rep, SPAWN_STEP_CGROUP, errno);
	/* Into the caps' cgroups before anything else runs or allocates here, and while the
	 * ids are still the daemon's (those files are root's). */
	for (int i = 0; i < c->njoin; i++)
		if (write(c->join[i], "0", 1) != 1)
			child_fail(rep, SPAWN_STEP_CGROUP, errno);

	/*
	 * The raw system call, not sigaction(3): glibc refuses to touch the two real-time
	 * signals it reserves (32, 33), and an ignored disposition there would be inherited
	 * across exec from whoever started the daemon.
	 */
	/*
	 * A signal sent to the daemon's process group (a terminal's Ctrl-C under make run)
	 * between the clone and the setsid above is pending here, blocked; unblocked at its
	 * default it would kill the handler it was never meant for. Ignoring a pending signal
	 * discards it, so the group-directed ones are ignored once before their default.
	 */
	static const int group_signals[] = { SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGTSTP,
	                                     SIGTTIN, SIGTTOU, SIGWINCH };
	for (size_t i = 0; i < sizeof group_signals / sizeof *group_signals; i++)
		syscall(SYS_rt_sigaction, group_signals[i], &c->ksa_ignore, NULL, _NSIG / 8);
	for (int sig = 1; sig < _NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			syscall(SYS_rt_sigaction, sig, &c->ksa_default, NULL, _NSIG / 8);
	if (sigprocmask(SIG_SETMASK, &c->empty_mask, NULL) < 0)
		child_fail(rep, SPAWN_STEP_SETUP, errno);

	if (dup2(c->fd_in, 0) < 0 || dup2(c->fd_out, 1) < 0 || dup2(c->fd_err, 2) < 0)
		child_fail(rep, SPAWN_STEP_SETUP, errno);
	/* A warm process's socket is fd 3 (doc/protocol.md §1.2): the report pipe, if any,
	 * makes way for it, and dup2 leaves the copy without CLOEXEC. */
	int keep = 3;
	if (c->fd_ctl >= 0) {
		if (rep == 3 && (rep = fcntl(rep, F_DUPFD_CLOEXEC, 4)) < 0)
			child_fail(-1, SPAWN_STEP_SETUP, errno);
		if (c->fd_ctl == 3 ? fcntl(3, F_SETFD, 0) < 0 : dup2(c->fd_ctl, 3) < 0)
			child_fail(rep, SPAWN_STEP_SETUP, errno);
		keep = 4;
	}
	if (rep >= 0 && rep != keep) {
		if (dup3(rep, keep, O_CLOEXEC) < 0)
			child_fail(rep, SPAWN_STEP_SETUP, errno);
		rep = keep;
	}
	child_close_from(rep >= 0 ? keep + 1 : keep);

	/* Before the ids: making namespaces needs what dropping them gives up. */
	enum confine_part part = confine_enter(&c->cf);
	if (part != CONFINE_OK)
		child_fail(rep, spawn_step_of_confine(part), errno);
	/* The daemon's own directory is entered again by its path only so that new mounts
	 * over it are seen; where a mount hides it (private_tmp over a daemon run from under
	 * /tmp), the directory inherited still works, and the job keeps it. */
	if (c->cwd && chdir(c->cwd) < 0 && !c->cwd_implicit)
		child_fail(rep, SPAWN_STEP_CWD, errno);
	for (int i = 0; i < c->nrlimits; i++)
		if (setrlimit(c->rl_resource[i], &c->rl[i]) < 0)
			child_fail(rep, SPAWN_STEP_RLIMIT, errno);
	if (c->set_ids) {
		if (syscall(SYS_setgroups, c->ngroups, c->groups) < 0)
			child_fail(rep, SPAWN_STEP_IDS, errno);
		if (syscall(SYS_setresgid, c->gid, c->gid, c->gid) < 0)
			child_fail(rep, SPAWN_STEP_IDS, errno);
		if (syscall(SYS_setresuid, c->uid, c->uid, c->uid) < 0)
			child_fail(rep, SPAWN_STEP_IDS, errno);
	}
	/* After the ids: a change of them clears the death signal (commit_creds). */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		child_fail(rep, SPAWN_STEP_SETUP, errno);
	if (getppid() != c->parent)         /* the daemon died before the prctl */
		child_fail(rep, SPAWN_STEP_SETUP, ESRCH);
	execve(c->path, c->argv, c->envp);
	child_fail(rep, SPAWN_STEP_EXEC, errno);
}

#if !HANDLER_USE_FORK
#define CHILD_STACK 32768          /* the child's frames until execve: a few hundred bytes */

static int child_entry(void *arg)
{
	child_exec(arg);
}

/* CLONE_PIDFD needs Linux 5.2: refused once, never asked for again. */
static atomic_int no_clone_pidfd;
#endif

/*
 * The only function that forks: kept tiny so nothing lives across the child's run on its
 * stack. The stack is in this frame: the parent is suspended until the child has exec'd
 * or exited (CLONE_VFORK), so nothing else uses it meanwhile. *pidfd: -1 unless given.
 */
__attribute__((noinline))
static pid_t spawn_child(struct child_spec *c, int *pidfd)
{
	*pidfd = -1;
#if HANDLER_USE_FORK
	pid_t pid = fork();
	if (pid == 0)
		child_exec(c);
	return pid;
#else
	char stack[CHILD_STACK] __attribute__((aligned(16)));
	/* The exit signal stays SIGCHLD: execve resets it to SIGCHLD whatever clone said. */
	int flags = CLONE_VM | CLONE_VFORK | SIGCHLD;
	pid_t pid = -1;
	if (!atomic_load(&no_clone_pidfd)) {
		pid = clone(child_entry, stack + sizeof stack, flags | CLONE_PIDFD, c, pidfd);
		if (pid < 0 && errno == EINVAL)
			atomic_store(&no_clone_pidfd, 1);
		else if (pid < 0)
			*pidfd = -1;
	}
	if (pid < 0 && atomic_load(&no_clone_pidfd)) {
		*pidfd = -1;
		pid = clone(child_entry, stack + sizeof stack, flags, c);
	}
	CHILD_STACK_DONE(stack, sizeof stack);
	return pid;
#endif
}

/* ----------------------------------------------------------------------------------------
 * The parent side of spawning
 * ------------------------------------------------------------------------------------- */

/* Move fd above 2, keeping O_CLOEXEC, so the child's dup2 onto 0/1/2 cannot clobber it. */
static int fd_above_stdio(int fd)
{
	int nfd;

	if (fd > 2)
		return fd;
	nfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	close(fd);
	return nfd;
}

static int make_pipe(int p[2])
{
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	p[0] = fd_above_stdio(p[0]);
	p[1] = fd_above_stdio(p[1]);
	if (p[0] < 0 || p[1] < 0) {
		int e = errno;
		if (p[0] >= 0)
			close(p[0]);
		if (p[1] >= 0)
			close(p[1]);
		errno = e;
		return -1;
	}
	return 0;
}

static void spec_add_rlimit(struct child_spec *c, int resource, long long v)
{
	if (v < 0)
		return;
	c->rl_resource[c->nrlimits] = resource;
	c->rl[c->nrlimits].rlim_cur = (rlim_t)v;
	c->rl[c->nrlimits].rlim_max = (rlim_t)v;
	c->nrlimits++;
}

/* getpid() is a system call (glibc no longer caches it): once per process. */
static pid_t self_pid;
static pthread_once_t self_once = PTHREAD_ONCE_INIT;

static void self_forked(void)
{
	self_pid = getpid();
}

static void self_init(void)
{
	self_pid = getpid();
	pthread_atfork(NULL, NULL, self_forked);
}

/*
 * Write what fits of stdin now, before the child exists: we hold the read end, so no
 * EPIPE, and O_NONBLOCK (on our end only: the child's end is another file description)
 * means a pipe smaller than the payload fills up instead of blocking us. Returns the
 * bytes written.
 */
static size_t prefill_stdin(int fd, const char *data, size_t len)
{
	size_t off = 0;

	if (fcntl(fd, F_SETFL, O_NONBLOCK) < 0)
		return 0;
	while (off < len) {
		ssize_t n = write(fd, data + off, len - off);
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			break;
		}
		off += (size_t)n;
	}
	return off;
}

/*
 * Create the pipes and start the child. Returns 0 (the child exec'd: *pid, io filled) or
 * an errno (io closed; *pid set when a child was forked, already reaped).
 */
int spawn_handler(const struct run_request *req, const char *path, char **argv,
                  char *const *envp, pid_t *pid, struct child_io *io, int *step)
{
	static char *const empty_env[] = { NULL };
	int pin[2] = { -1, -1 }, pout[2] = { -1, -1 }, perr[2] = { -1, -1 },
	    prep[2] = { -1, -1 };
	struct child_spec c;
	sigset_t all, old;
	int err = 0, pidfd = -1;

	memset(&c, 0, sizeof c);
	*pid = 0;
	*step = SPAWN_STEP_SETUP;       /* the pipes and the fork */
	io->in = io->out = io->err = io->out_w = io->err_w = io->pidfd = -1;
	io->in_off = 0;
	if (req->ctl_fd > 2) {
		/* A warm process: no stdin to serve, its jobs come over fd 3. */
		pin[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (pin[0] < 0 || (pin[0] = fd_above_stdio(pin[0])) < 0) {
			err = errno;
			goto out;
		}
	} else if (make_pipe(pin) < 0) {
		err = errno;
		goto out;
	}
	if (make_pipe(pout) < 0 || make_pipe(perr) < 0 ||
	    (HANDLER_USE_FORK && make_pipe(prep) < 0)) {
		err = errno;
		goto out;
	}
	if (req->stdin_data && req->stdin_len && pin[1] >= 0)
		io->in_off = prefill_stdin(pin[1], req->stdin_data, req->stdin_len);
	if (io->in_off == (req->stdin_data ? req->stdin_len : 0))
		close_fd(&pin[1]);      /* all of it is in the pipe: the child reads it, then EOF */

	pthread_once(&self_once, self_init);
	c.path = path;
	c.argv = argv;
	c.envp = envp ? envp : empty_env;
	c.fd_in = pin[0];
	c.fd_out = pout[1];
	c.fd_err = perr[1];
	c.fd_report = prep[1];
	c.fd_ctl = req->ctl_fd > 2 ? req->ctl_fd : -1;
	c.fd_cgroup = req->cgroup ? jobcg_procs_fd(req->cgroup) : -1;
	c.join = io->join;
	c.njoin = io->njoin;
	c.parent = self_pid;
	c.cwd = req->cwd;
	confine_prepare(req->confine, &c.cf);
	/* New mounts over the daemon's directory (a writable path) are entered by its path. */
	if (!c.cwd && confine_remounts(&c.cf)) {
		c.cwd = confine_daemon_cwd();
		c.cwd_implicit = 1;
	}
	c.set_ids = req->set_ids;
	c.uid = (uid_t)req->uid;
	c.gid = (gid_t)req->gid;
	c.groups = (const gid_t *)req->groups;
	c.ngroups = req->ngroups > 0 ? (size_t)req->ngroups : 0;
	spec_add_rlimit(&c, RLIMIT_CPU, req->rlimit_cpu);
	spec_add_rlimit(&c, RLIMIT_AS, req->rlimit_as);
	spec_add_rlimit(&c, RLIMIT_NOFILE, req->rlimit_nofile);
	spec_add_rlimit(&c, RLIMIT_NPROC, req->rlimit_nproc);
	c.ksa_default.handler = (void *)SIG_DFL;
	c.ksa_ignore.handler = (void *)SIG_IGN;
	sigemptyset(&c.empty_mask);

	/*
	 * No handler of ours may run in the vfork child: everything blocked around it, except
	 * SIGCHLD, which the child cannot receive (it has no children) and the daemon leaves
	 * at its default: unblocked, the kernel drops it at once; blocked here while our
	 * previous child exited (a short one can, before we get the CPU back), it was queued
	 * for the process and woke another thread of the daemon for nothing.
	 */
	sigfillset(&all);
	sigdelset(&all, SIGCHLD);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	*pid = spawn_child(&c, &pidfd);
	if (*pid < 0)
		err = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (*pid < 0) {
		*pid = 0;
		goto out;
	}

	if (HANDLER_USE_FORK) {
		int child_msg[2] = { 0, 0 };
		ssize_t r;
		close_fd(&prep[1]);
		do
			r = read(prep[0], child_msg, sizeof child_msg);
		while (r < 0 && errno == EINTR);
		if (r == (ssize_t)sizeof child_msg) {
			*step = child_msg[0];
			err = child_msg[1] ? child_msg[1] : EIO;
		}
	} else if (c.err) {
		*step = c.step;
		err = c.err;
	}
	if (err) {
		while (waitpid(*pid, NULL, 0) < 0 && errno == EINTR)
			;
		close_fd(&pidfd);
		goto out;
	}

	io->in = pin[1];
	io->out = pout[0];
	io->err = perr[0];
	io->out_w = pout[1];
	io->err_w = perr[1];
	io->pidfd = pidfd;
	pin[1] = pout[0] = perr[0] = pout[1] = perr[1] = -1;
out:
	close_fd(&pin[0]);
	close_fd(&pin[1]);
	close_fd(&pout[0]);
	close_fd(&pout[1]);
	close_fd(&perr[0]);
	close_fd(&perr[1]);
	close_fd(&prep[0]);
	close_fd(&prep[1]);
	return err;
}
