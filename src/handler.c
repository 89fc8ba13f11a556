/*
 * handler.c: run one handler command as a child process (DESIGN.md "Handlers",
 * PROTOCOL §1.1).
 *
 * Spawning
 * --------
 * The daemon is multi-threaded and may have a large heap, so the child is created the way
 * posix_spawn does it: vfork() (the parent thread is suspended, no page tables are copied)
 * and, until execve, the child only makes raw, async-signal-safe system calls on data that
 * the parent prepared beforehand (struct child_spec): no malloc, no locks, no stdio. All
 * allocation happens in the parent before the fork: argv, the environment, and the path of
 * the executable, which is searched in the child's PATH (not the daemon's) by the parent.
 *
 * The child, in order: setsid() (its own session and process group, so the whole job tree
 * can be signalled as -pgid); PR_SET_PDEATHSIG=SIGKILL then a getppid() check (the daemon
 * may have died before the prctl); every signal disposition back to SIG_DFL (SIGPIPE is
 * ignored by the daemon and SIG_IGN survives execve), then an empty signal mask (the daemon
 * blocks every signal in every thread); the pipes onto 0/1/2; every other fd closed
 * (close_range, with a loop as fallback); chdir; rlimits; setgroups/setresgid/setresuid
 * (as raw syscalls: glibc's set*id wrappers broadcast to the parent's threads, which a
 * vfork child must never do); execve. A failing step writes its errno into a CLOEXEC
 * "report" pipe and _exits: the parent reads that pipe until EOF, so it learns both "exec
 * succeeded" (EOF) and "step X failed with errno E" (RUN_SPAWN_FAILED, code = E). The same
 * pipe works with fork(), which is used instead of vfork under ThreadSanitizer.
 *
 * Pumping
 * -------
 * One poll() loop per child serves everything at once: the job JSON written to stdin in
 * non-blocking chunks (EPIPE = the child closed stdin: the rest is dropped, not an error),
 * stdout and stderr read in 64 KiB chunks and cut into lines for the log and for
 * on_stdout_line (lines longer than HANDLER_LINE_MAX are split, so memory stays bounded
 * however much the child prints; the last req->output_tail bytes of stderr go to a ring
 * buffer), and a pidfd (pidfd_open, Linux >= 5.3) that becomes readable when the child
 * exits; without pidfds the loop falls back to waitpid(WNOHANG) every 10 ms. No SIGCHLD
 * handler is involved: signals belong to the main thread. The child is reaped with
 * waitpid(pid) — never waitpid(-1), which would steal other fetchers' children. The poll
 * timeout is at most 100 ms so the abort flag is noticed promptly.
 *
 * Timeout and abort: SIGTERM to the process group, then the grace period (kill_grace or
 * abort_grace) during which output is still pumped; the grace ends early once the whole
 * group is gone; then SIGKILL to the group.
 *
 * The grandchild rule
 * -------------------
 * A handler must not leave work behind: whatever is still in the child's process group
 * when the child (the group leader) has exited is sent SIGKILL, also after a normal exit
 * (exit 0 with a backgrounded grandchild included), without a grace period: the job's
 * outcome is already decided and its leftovers are not part of it. After a timeout or an
 * abort, the grace applies to the whole group before the final SIGKILL. A grandchild that
 * left the group (its own setsid) is out of reach here (systemd's cgroup kill covers it),
 * and may hold the output pipes open: so after the leader exits, output is drained only
 * for at most HANDLER_DRAIN_SECS, never until EOF.
 *
 * SIGPIPE: the daemon ignores it; handler_run additionally blocks it in the calling thread
 * while it runs and consumes a SIGPIPE its own writes raised, so other callers (cogworkerctl
 * exec) do not need to ignore it.
 */
#include "handler.h"
#include "reaper.h"
#include "log.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define HANDLER_LINE_MAX    8192        /* longer output lines are split */
#define HANDLER_LOG_BUDGET  (1 << 20)   /* bytes per stream forwarded to the log per run */
#define HANDLER_CHUNK       65536       /* one read() / write() */
#define HANDLER_TICK        0.1         /* max poll() sleep: abort flag latency */
#define HANDLER_REAP_TICK   0.01        /* poll() sleep without a pidfd */
#define HANDLER_DRAIN_SECS  0.1         /* output drained after the group is gone */
#define HANDLER_DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"

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

_Static_assert(sizeof(gid_t) == sizeof(unsigned), "gid_t must be an unsigned int");

/* ----------------------------------------------------------------------------------------
 * Environment
 * ------------------------------------------------------------------------------------- */

/*
 * The daemon's variables that reach handlers without being asked for: PATH (a default when
 * the daemon has none), the locale (LANG, LANGUAGE, LC_*) and TZ. HOME is deliberately
 * not passed: under systemd it is the service's (or root's) home, wrong for a handler run
 * as another user; a handler that needs it sets it in `env` or lists it in
 * `env_passthrough`.
 */
static int env_allowed(const char *entry)
{
	static const char *const names[] = { "PATH", "LANG", "LANGUAGE", "TZ", NULL };
	size_t nlen = strcspn(entry, "=");

	if (entry[nlen] != '=')
		return 0;
	if (!strncmp(entry, "LC_", 3))
		return 1;
	for (int i = 0; names[i]; i++)
		if (strlen(names[i]) == nlen && !strncmp(entry, names[i], nlen))
			return 1;
	return 0;
}

struct envlist {
	char **v;
	int n, cap;
};

/* Add "NAME=value" (taking ownership), replacing an earlier entry of the same name. */
static void envlist_put(struct envlist *e, char *entry)
{
	size_t nlen = strcspn(entry, "=");

	for (int i = 0; i < e->n; i++) {
		if (!strncmp(e->v[i], entry, nlen) && e->v[i][nlen] == '=') {
			free(e->v[i]);
			e->v[i] = entry;
			return;
		}
	}
	if (e->n + 2 > e->cap) {
		e->cap = e->cap ? e->cap * 2 : 32;
		e->v = xrealloc(e->v, sizeof(char *) * (size_t)e->cap);
	}
	e->v[e->n++] = entry;
	e->v[e->n] = NULL;
}

static void envlist_set(struct envlist *e, const char *name, const char *value)
{
	envlist_put(e, xasprintf("%s=%s", name, value ? value : ""));
}

char **handler_build_env(const struct handler *h, const char *jid, const char *cls,
                         const char *queue, const char *retry_count, const char *args_json)
{
	struct envlist e = { 0 };

	envlist_put(&e, xstrdup("PATH=" HANDLER_DEFAULT_PATH));
	for (char **p = environ; p && *p; p++)
		if (env_allowed(*p))
			envlist_put(&e, xstrdup(*p));
	if (h) {
		for (int i = 0; i < h->env_passthrough.n; i++) {
			const char *name = h->env_passthrough.v[i];
			const char *val = getenv(name);
			if (val && *name && !strchr(name, '='))
				envlist_set(&e, name, val);
		}
		for (int i = 0; i < h->env.n; i++)
			if (strchr(h->env.v[i], '=') && h->env.v[i][0] != '=')
				envlist_put(&e, xstrdup(h->env.v[i]));
	}
	envlist_set(&e, "COGWORKER_JID", jid);
	envlist_set(&e, "COGWORKER_CLASS", cls);
	envlist_set(&e, "COGWORKER_QUEUE", queue);
	envlist_set(&e, "COGWORKER_RETRY_COUNT", retry_count ? retry_count : "0");
	/*
	 * execve refuses a single environment string longer than MAX_ARG_STRLEN (32 pages:
	 * 128 KiB with 4 KiB pages) with E2BIG, so a job with bigger args could never run:
	 * COGWORKER_ARGS is then left out, and the handler reads the args from stdin.
	 */
	const char *args = args_json ? args_json : "[]";
	if (strlen(args) + sizeof "COGWORKER_ARGS=" <= 32 * 4096)
		envlist_set(&e, "COGWORKER_ARGS", args);
	else
		log_warn("jid=%s: args too large for COGWORKER_ARGS (%zu bytes), left out: "
		         "the handler gets them on stdin only", jid ? jid : "?", strlen(args));
	return e.v;
}

void handler_free_env(char **env)
{
	if (!env)
		return;
	for (char **p = env; *p; p++)
		free(*p);
	free(env);
}

/* ----------------------------------------------------------------------------------------
 * User and groups (resolved in the parent: NSS lookups allocate and may talk to daemons)
 * ------------------------------------------------------------------------------------- */

static int parse_id(const char *s, unsigned *out)
{
	char *end;
	unsigned long v;

	if (!*s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v > UINT_MAX - 1)
		return -1;
	*out = (unsigned)v;
	return 0;
}

/* 1 found, 0 no such user, -1 lookup error (errno). */
static int lookup_user(const char *name, uid_t *uid, gid_t *gid, char **pw_name)
{
	struct passwd pw, *res = NULL;
	size_t cap = 1024;
	unsigned num;
	int rc;

	for (;;) {
		char *buf = xmalloc(cap);
		if (parse_id(name, &num) == 0)
			rc = getpwuid_r((uid_t)num, &pw, buf, cap, &res);
		else
			rc = getpwnam_r(name, &pw, buf, cap, &res);
		if (rc == ERANGE && cap < (1 << 20)) {
			free(buf);
			cap *= 4;
			continue;
		}
		if (rc == 0 && res) {
			*uid = pw.pw_uid;
			*gid = pw.pw_gid;
			*pw_name = xstrdup(pw.pw_name);
		}
		free(buf);
		if (rc) {
			errno = rc;
			return -1;
		}
		return res != NULL;
	}
}

static int lookup_group(const char *name, gid_t *gid)
{
	struct group gr, *res = NULL;
	size_t cap = 1024;
	unsigned num;
	int rc;

	for (;;) {
		char *buf = xmalloc(cap);
		if (parse_id(name, &num) == 0)
			rc = getgrgid_r((gid_t)num, &gr, buf, cap, &res);
		else
			rc = getgrnam_r(name, &gr, buf, cap, &res);
		if (rc == ERANGE && cap < (1 << 20)) {
			free(buf);
			cap *= 4;
			continue;
		}
		if (rc == 0 && res)
			*gid = gr.gr_gid;
		free(buf);
		if (rc) {
			errno = rc;
			return -1;
		}
		return res != NULL;
	}
}

/* The supplementary groups of user (with gid among them), malloc'd. */
static unsigned *user_groups(const char *user, gid_t gid, int *n)
{
	int cap = 32;

	for (;;) {
		gid_t *g = xmalloc(sizeof(gid_t) * (size_t)cap);
		int cnt = cap;
		if (getgrouplist(user, gid, g, &cnt) >= 0) {
			*n = cnt;
			return (unsigned *)g;
		}
		free(g);
		cap = cnt > cap ? cnt : cap * 2;
		if (cap > 65536) {
			g = xmalloc(sizeof(gid_t));
			g[0] = gid;
			*n = 1;
			return (unsigned *)g;
		}
	}
}

/*
 * user set: its uid, its primary gid (or `group`), its supplementary groups.
 * Only group set: the daemon's uid, that gid, no other supplementary group.
 * Numeric names are accepted when they exist in the user/group database.
 */
int handler_resolve_ids(const struct handler *h, struct run_request *req, unsigned **groups_out,
                        char *err, size_t errlen)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();
	char *pw_name = NULL;
	int rc;

	*groups_out = NULL;
	req->set_ids = 0;
	req->groups = NULL;
	req->ngroups = 0;
	if (!h->user && !h->group)
		return 0;
	if (geteuid() != 0) {
		snprintf(err, errlen, "user/group set for class %s but the daemon is not running as root",
		         h->class_name ? h->class_name : "?");
		return -1;
	}
	if (h->user) {
		rc = lookup_user(h->user, &uid, &gid, &pw_name);
		if (rc <= 0) {
			snprintf(err, errlen, "user %s: %s", h->user,
			         rc < 0 ? strerror(errno) : "no such user");
			return -1;
		}
	}
	if (h->group) {
		rc = lookup_group(h->group, &gid);
		if (rc <= 0) {
			snprintf(err, errlen, "group %s: %s", h->group,
			         rc < 0 ? strerror(errno) : "no such group");
			free(pw_name);
			return -1;
		}
	}
	if (pw_name) {
		*groups_out = user_groups(pw_name, gid, &req->ngroups);
	} else {
		*groups_out = xmalloc(sizeof(unsigned));
		(*groups_out)[0] = gid;
		req->ngroups = 1;
	}
	free(pw_name);
	req->set_ids = 1;
	req->uid = uid;
	req->gid = gid;
	req->groups = *groups_out;
	return 0;
}

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

/*
 * argv[0] with a '/' is used as is (relative to the child's cwd); otherwise the first
 * regular, executable file in PATH. Relative PATH entries ("" = ".") are taken relative to
 * req->cwd when one is set, like the child would see them. 0, or an errno.
 */
static int resolve_exec_path(const char *file, const char *const *env, const char *cwd,
                             char **out)
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
	path = env_get(env, "PATH");
	if (!path)
		path = HANDLER_DEFAULT_PATH;
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
	int fd_report;                  /* CLOEXEC pipe for the failing errno, >= 3 */
	pid_t parent;
	const char *cwd;
	int set_ids;
	uid_t uid;
	gid_t gid;
	const gid_t *groups;
	size_t ngroups;
	int nrlimits;
	int rl_resource[HANDLER_NRLIMITS];
	struct rlimit rl[HANDLER_NRLIMITS];
	struct { void *handler; unsigned long flags; void *restorer; unsigned long mask; } ksa_default;
	sigset_t empty_mask;
};

__attribute__((noreturn))
static void child_fail(int report_fd, int err)
{
	ssize_t w;

	do
		w = write(report_fd, &err, sizeof err);
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
		child_fail(rep, errno);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		child_fail(rep, errno);
	if (getppid() != c->parent)         /* the daemon died before the prctl */
		child_fail(rep, ESRCH);

	/*
	 * The raw system call, not sigaction(3): glibc refuses to touch the two real-time
	 * signals it reserves (32, 33), and an ignored disposition there would be inherited
	 * across exec from whoever started the daemon.
	 */
	for (int sig = 1; sig < _NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			syscall(SYS_rt_sigaction, sig, &c->ksa_default, NULL, _NSIG / 8);
	if (sigprocmask(SIG_SETMASK, &c->empty_mask, NULL) < 0)
		child_fail(rep, errno);

	if (dup2(c->fd_in, 0) < 0 || dup2(c->fd_out, 1) < 0 || dup2(c->fd_err, 2) < 0)
		child_fail(rep, errno);
	if (rep != 3) {
		if (dup3(rep, 3, O_CLOEXEC) < 0)
			child_fail(rep, errno);
		rep = 3;
	}
	child_close_from(4);

	if (c->cwd && chdir(c->cwd) < 0)
		child_fail(rep, errno);
	for (int i = 0; i < c->nrlimits; i++)
		if (setrlimit(c->rl_resource[i], &c->rl[i]) < 0)
			child_fail(rep, errno);
	if (c->set_ids) {
		if (syscall(SYS_setgroups, c->ngroups, c->groups) < 0)
			child_fail(rep, errno);
		if (syscall(SYS_setresgid, c->gid, c->gid, c->gid) < 0)
			child_fail(rep, errno);
		if (syscall(SYS_setresuid, c->uid, c->uid, c->uid) < 0)
			child_fail(rep, errno);
	}
	execve(c->path, c->argv, c->envp);
	child_fail(rep, errno);
}

/* The only function that forks: kept tiny so nothing lives across vfork's second return. */
__attribute__((noinline))
static pid_t spawn_child(const struct child_spec *c)
{
#if HANDLER_USE_FORK
	pid_t pid = fork();
#else
	pid_t pid = vfork();
#endif
	if (pid == 0)
		child_exec(c);
	return pid;
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

static void close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

static void set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl >= 0)
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
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

struct child_io {
	int in, out, err;               /* parent ends, non-blocking, CLOEXEC; -1 = closed */
};

/*
 * Create the pipes and start the child. Returns 0 (the child exec'd: *pid, io filled) or
 * an errno (io closed; *pid set when a child was forked, already reaped).
 */
static int spawn(const struct run_request *req, const char *path, char **argv,
                 char *const *envp, pid_t *pid, struct child_io *io)
{
	static char *const empty_env[] = { NULL };
	int pin[2] = { -1, -1 }, pout[2] = { -1, -1 }, perr[2] = { -1, -1 },
	    prep[2] = { -1, -1 };
	struct child_spec c;
	sigset_t all, old;
	int err = 0, child_err = 0;
	ssize_t r;

	memset(&c, 0, sizeof c);
	*pid = 0;
	io->in = io->out = io->err = -1;
	if (make_pipe(pin) < 0 || make_pipe(pout) < 0 || make_pipe(perr) < 0 ||
	    make_pipe(prep) < 0) {
		err = errno;
		goto out;
	}

	c.path = path;
	c.argv = argv;
	c.envp = envp ? envp : empty_env;
	c.fd_in = pin[0];
	c.fd_out = pout[1];
	c.fd_err = perr[1];
	c.fd_report = prep[1];
	c.parent = getpid();
	c.cwd = req->cwd;
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
	sigemptyset(&c.empty_mask);

	/* No handler of ours may run in the vfork child: everything blocked around it. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	*pid = spawn_child(&c);
	if (*pid < 0)
		err = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (*pid < 0) {
		*pid = 0;
		goto out;
	}

	close_fd(&prep[1]);
	do
		r = read(prep[0], &child_err, sizeof child_err);
	while (r < 0 && errno == EINTR);
	if (r == (ssize_t)sizeof child_err) {
		err = child_err ? child_err : EIO;
		while (waitpid(*pid, NULL, 0) < 0 && errno == EINTR)
			;
		goto out;
	}

	io->in = pin[1];
	io->out = pout[0];
	io->err = perr[0];
	pin[1] = pout[0] = perr[0] = -1;
	set_nonblock(io->in);
	set_nonblock(io->out);
	set_nonblock(io->err);
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

/* ----------------------------------------------------------------------------------------
 * Output: lines for the log and the callback, a ring buffer for the stderr tail
 * ------------------------------------------------------------------------------------- */

struct linebuf {
	char buf[HANDLER_LINE_MAX];
	size_t len;
};

struct ring {
	char *buf;
	size_t cap, head, len;
};

static void ring_add(struct ring *r, const char *p, size_t n)
{
	if (!r->cap)
		return;
	if (n >= r->cap) {
		p += n - r->cap;
		n = r->cap;
	}
	while (n) {
		size_t k = r->cap - r->head < n ? r->cap - r->head : n;
		memcpy(r->buf + r->head, p, k);
		r->head = (r->head + k) % r->cap;
		r->len = r->len + k > r->cap ? r->cap : r->len + k;
		p += k;
		n -= k;
	}
}

/* The ring's content in order, NUL-terminated, malloc'd. */
static char *ring_take(const struct ring *r, size_t *len)
{
	char *s = xmalloc(r->len + 1);

	if (r->len < r->cap) {
		memcpy(s, r->buf, r->len);
	} else if (r->cap) {
		memcpy(s, r->buf + r->head, r->cap - r->head);
		memcpy(s + (r->cap - r->head), r->buf, r->head);
	}
	s[r->len] = '\0';
	*len = r->len;
	return s;
}

struct pump {
	const struct run_request *req;
	struct child_io io;
	int pidfd;
	size_t in_off;
	int epipe;                      /* a stdin write raised SIGPIPE */
	int out_lines, err_lines;       /* cut the streams into lines at all */
	struct linebuf out_line, err_line;
	size_t logged[2];               /* bytes forwarded to the log, per stream */
	struct ring tail;
	char chunk[HANDLER_CHUNK];
};

static void emit_line(struct pump *p, int is_err, const char *s, size_t n)
{
	const struct run_request *req = p->req;

	/*
	 * A handler that floods its output must not flood the journal (nor slow the daemon
	 * down writing it): past the budget, lines are still read and fed to the tail and the
	 * callback, but no longer logged.
	 */
	if (req->log_output && p->logged[is_err] < HANDLER_LOG_BUDGET) {
		log_info("%s %s: %.*s", req->log_tag ? req->log_tag : "handler",
		         is_err ? "stderr" : "stdout", (int)n, s);
		p->logged[is_err] += n + 1;
		if (p->logged[is_err] >= HANDLER_LOG_BUDGET)
			log_warn("%s %s: more than %d KiB of output; the rest is not logged",
			         req->log_tag ? req->log_tag : "handler", is_err ? "stderr" : "stdout",
			         HANDLER_LOG_BUDGET / 1024);
	}
	if (!is_err && req->on_stdout_line)
		req->on_stdout_line(req->ctx, s, n);
}

/* Cut data into lines; a line reaching HANDLER_LINE_MAX bytes is emitted as it is. */
static void lines_feed(struct pump *p, int is_err, const char *s, size_t n)
{
	struct linebuf *lb = is_err ? &p->err_line : &p->out_line;

	while (n) {
		const char *nl = memchr(s, '\n', n);
		size_t take = nl ? (size_t)(nl - s) : n;
		size_t room = HANDLER_LINE_MAX - lb->len;

		if (take > room) {              /* line too long: emit a full piece */
			if (lb->len) {
				memcpy(lb->buf + lb->len, s, room);
				emit_line(p, is_err, lb->buf, HANDLER_LINE_MAX);
				lb->len = 0;
			} else {
				emit_line(p, is_err, s, room);
			}
			s += room;
			n -= room;
			continue;
		}
		if (!nl) {                      /* partial line: keep it */
			memcpy(lb->buf + lb->len, s, take);
			lb->len += take;
			return;
		}
		if (lb->len) {
			memcpy(lb->buf + lb->len, s, take);
			emit_line(p, is_err, lb->buf, lb->len + take);
			lb->len = 0;
		} else {
			emit_line(p, is_err, s, take);
		}
		s += take + 1;
		n -= take + 1;
	}
}

/* At EOF: an unterminated last line is still a line. */
static void lines_flush(struct pump *p, int is_err)
{
	struct linebuf *lb = is_err ? &p->err_line : &p->out_line;

	if (lb->len)
		emit_line(p, is_err, lb->buf, lb->len);
	lb->len = 0;
}

static void output_close(struct pump *p, int is_err)
{
	int *fd = is_err ? &p->io.err : &p->io.out;

	if (*fd < 0)
		return;
	close_fd(fd);
	if (is_err ? p->err_lines : p->out_lines)
		lines_flush(p, is_err);
}

/* One read from stdout or stderr. */
static void output_read(struct pump *p, int is_err)
{
	int fd = is_err ? p->io.err : p->io.out;
	ssize_t n = read(fd, p->chunk, sizeof p->chunk);

	if (n > 0) {
		if (is_err)
			ring_add(&p->tail, p->chunk, (size_t)n);
		if (is_err ? p->err_lines : p->out_lines)
			lines_feed(p, is_err, p->chunk, (size_t)n);
	} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
		output_close(p, is_err);
	}
}

/* One non-blocking write to stdin; closes it when all is written or the child closed it. */
static void input_write(struct pump *p)
{
	const struct run_request *req = p->req;
	size_t left = req->stdin_len - p->in_off;
	ssize_t n;

	if (left == 0) {
		close_fd(&p->io.in);
		return;
	}
	n = write(p->io.in, req->stdin_data + p->in_off, left);
	if (n > 0) {
		p->in_off += (size_t)n;
		if (p->in_off == req->stdin_len)
			close_fd(&p->io.in);
	} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
		if (errno == EPIPE)
			p->epipe = 1;
		close_fd(&p->io.in);        /* the child does not want the rest */
	}
}

/* ----------------------------------------------------------------------------------------
 * The loop
 * ------------------------------------------------------------------------------------- */

enum kill_reason { KILL_NONE, KILL_TIMEOUT, KILL_ABORT };

struct watch {
	pid_t pid;
	int exited, wstatus;
	enum kill_reason reason;
	double deadline;                /* timeout (monotonic), 0 = none */
	double kill_at;                 /* SIGKILL after the grace, once TERMed */
	int killed;                     /* SIGKILL sent to the group */
	double drain_until;             /* once exited and killed: stop reading output then */
	double next_group_check;        /* group_alive() rate limit (it may scan /proc) */
};

static void group_signal(pid_t pgid, int sig)
{
	if (kill(-pgid, sig) < 0 && errno != ESRCH)
		log_warn("handler: kill(-%d, %d): %s", (int)pgid, sig, strerror(errno));
}

/*
 * Is a member of the group still running? kill(-pgid, 0) alone also counts zombies, which
 * linger as long as the reaper of orphans is slow (a lazy init, or a daemon that is PID 1
 * in a container): then /proc is scanned for a member that is not a zombie. Only used
 * during the grace after the leader exited, at most every HANDLER_TICK.
 */
static int group_alive(pid_t pgid)
{
	struct dirent *de;
	int alive = 0;
	DIR *d;

	if (kill(-pgid, 0) < 0 && errno != EPERM)
		return 0;
	d = opendir("/proc");
	if (!d)
		return 1;
	while (!alive && (de = readdir(d))) {
		char path[64], buf[512], state;
		int ppid, pgrp, fd;
		ssize_t n;
		char *rp;

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof path, "/proc/%ld/stat", strtol(de->d_name, NULL, 10));
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		rp = strrchr(buf, ')');
		if (rp && sscanf(rp + 1, " %c %d %d", &state, &ppid, &pgrp) == 3 && pgrp == pgid &&
		    state != 'Z' && state != 'X')
			alive = 1;
	}
	closedir(d);
	return alive;
}

static void start_kill(struct watch *w, enum kill_reason why, double grace, double now)
{
	if (grace < 0)
		grace = 0;
	if (w->reason == KILL_NONE) {
		w->reason = why;
		w->kill_at = now + grace;
		group_signal(w->pid, SIGTERM);
	} else if (now + grace < w->kill_at) {
		w->kill_at = now + grace;   /* abort during a timeout's grace: the shorter wins */
	}
}

static void try_reap(struct watch *w)
{
	int st;
	pid_t r = waitpid(w->pid, &st, WNOHANG);

	if (r == w->pid) {
		w->exited = 1;
		w->wstatus = st;
	} else if (r < 0 && errno == ECHILD) {
		/* Someone else reaped it (SIGCHLD set to SIG_IGN, or a waitpid(-1)): no status. */
		log_warn("handler: child %d vanished without a status", (int)w->pid);
		w->exited = 1;
		w->wstatus = -1;
	}
}

/* Timers: timeout, abort flag, end of grace, the grandchild rule, start of draining. */
static void watch_tick(struct pump *p, struct watch *w, double now)
{
	const struct run_request *req = p->req;

	if (!w->exited && req->abort && atomic_load(req->abort) && w->reason != KILL_ABORT)
		start_kill(w, KILL_ABORT, req->abort_grace, now);
	if (!w->exited && w->deadline > 0 && now >= w->deadline && w->reason == KILL_NONE)
		start_kill(w, KILL_TIMEOUT, req->kill_grace, now);
	if (!w->killed) {
		int due;
		if (w->exited && w->reason == KILL_NONE) {
			due = 1;        /* leftovers after a normal exit: at once */
		} else if (w->exited) {                 /* TERMed: the grace covers the group */
			due = now >= w->kill_at;
			if (!due && now >= w->next_group_check) {
				w->next_group_check = now + HANDLER_TICK;
				due = !group_alive(w->pid);
			}
		} else
			due = w->reason != KILL_NONE && now >= w->kill_at;
		if (due) {
			group_signal(w->pid, SIGKILL);
			w->killed = 1;
		}
	}
	if (w->exited && w->killed && w->drain_until == 0)
		w->drain_until = now + HANDLER_DRAIN_SECS;
}

static int watch_done(const struct pump *p, const struct watch *w, double now)
{
	if (w->drain_until == 0)
		return 0;
	return (p->io.out < 0 && p->io.err < 0) || now >= w->drain_until;
}

static int poll_timeout_ms(const struct pump *p, const struct watch *w, double now)
{
	double t = p->pidfd >= 0 ? HANDLER_TICK : HANDLER_REAP_TICK;

	if (!w->exited && w->deadline > 0 && w->reason == KILL_NONE && w->deadline - now < t)
		t = w->deadline - now;
	if (w->reason != KILL_NONE && !w->killed && w->kill_at - now < t)
		t = w->kill_at - now;
	if (w->drain_until > 0 && w->drain_until - now < t)
		t = w->drain_until - now;
	if (t < 0)
		t = 0;
	return (int)(t * 1000.0 + 0.999);
}

static void pump_loop(struct pump *p, struct watch *w)
{
	for (;;) {
		struct pollfd fds[4];
		int nfds = 0, i_in = -1, i_out = -1, i_err = -1, i_pid = -1;
		double now = mono_now();

		watch_tick(p, w, now);
		if (watch_done(p, w, now))
			break;
		if (w->exited)
			close_fd(&p->io.in);
		if (p->io.in >= 0) {
			i_in = nfds;
			fds[nfds++] = (struct pollfd){ .fd = p->io.in, .events = POLLOUT };
		}
		if (p->io.out >= 0) {
			i_out = nfds;
			fds[nfds++] = (struct pollfd){ .fd = p->io.out, .events = POLLIN };
		}
		if (p->io.err >= 0) {
			i_err = nfds;
			fds[nfds++] = (struct pollfd){ .fd = p->io.err, .events = POLLIN };
		}
		if (p->pidfd >= 0 && !w->exited) {
			i_pid = nfds;
			fds[nfds++] = (struct pollfd){ .fd = p->pidfd, .events = POLLIN };
		}

		int n = poll(fds, (nfds_t)nfds, poll_timeout_ms(p, w, now));
		if (n < 0 && errno != EINTR) {
			log_warn("handler: poll: %s", strerror(errno));
			sleep_seconds(HANDLER_REAP_TICK);
			continue;
		}
		if (n > 0 && i_in >= 0 && fds[i_in].revents)
			input_write(p);
		if (n > 0 && i_out >= 0 && fds[i_out].revents)
			output_read(p, 0);
		if (n > 0 && i_err >= 0 && fds[i_err].revents)
			output_read(p, 1);
		if (!w->exited && (p->pidfd < 0 || (n > 0 && i_pid >= 0 && fds[i_pid].revents)))
			try_reap(w);
	}
	close_fd(&p->io.in);
	output_close(p, 0);
	output_close(p, 1);
}

static void fill_outcome(struct run_result *res, const struct watch *w)
{
	if (w->reason == KILL_TIMEOUT) {
		res->status = RUN_TIMEOUT;
		res->code = 0;
	} else if (w->reason == KILL_ABORT) {
		res->status = RUN_ABORTED;
		res->code = 0;
	} else if (w->wstatus == -1) {
		res->status = RUN_EXITED;   /* unknown status: reported as a failure */
		res->code = 255;
	} else if (WIFEXITED(w->wstatus)) {
		res->status = RUN_EXITED;
		res->code = WEXITSTATUS(w->wstatus);
	} else if (WIFSIGNALED(w->wstatus)) {
		res->status = RUN_SIGNALED;
		res->code = WTERMSIG(w->wstatus);
	} else {
		res->status = RUN_EXITED;
		res->code = 255;
	}
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

static void spawn_failed(struct run_result *res, int err)
{
	res->status = RUN_SPAWN_FAILED;
	res->code = err;
	res->tail = xstrdup("");
	res->tail_len = 0;
	res->finished = now_float();
}

int handler_run(const struct run_request *req, struct run_result *res,
                void (*spawned)(void *ctx, int pid), void *spawned_ctx)
{
	struct pump *p;
	struct watch w;
	char *path = NULL, **argv;
	sigset_t pipeset, saved;
	pid_t pid;
	int err;

	memset(res, 0, sizeof *res);
	res->started = now_float();
	if (!req->command || req->command->n < 1 || !req->command->v || !req->command->v[0]) {
		spawn_failed(res, EINVAL);
		return 0;
	}
	err = resolve_exec_path(req->command->v[0], req->env, req->cwd, &path);
	if (err) {
		spawn_failed(res, err);
		return 0;
	}

	sigemptyset(&pipeset);
	sigaddset(&pipeset, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipeset, &saved);

	p = xcalloc(1, sizeof *p);
	p->req = req;
	p->pidfd = -1;
	argv = build_argv(req);
	err = spawn(req, path, argv, (char *const *)req->env, &pid, &p->io);
	free(argv);
	free(path);
	res->pid = (int)pid;
	if (err) {
		free(p);
		pthread_sigmask(SIG_SETMASK, &saved, NULL);
		spawn_failed(res, err);
		return 0;
	}
	reaper_track((int)pid);          /* the child leads its own process group */
	if (spawned)
		spawned(spawned_ctx, (int)pid);

	p->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);       /* CLOEXEC; -1: poll waitpid */
	p->out_lines = req->log_output || req->on_stdout_line;
	p->err_lines = req->log_output;
	p->tail.cap = req->output_tail;
	p->tail.buf = req->output_tail ? xmalloc(req->output_tail) : NULL;
	if (!req->stdin_data || !req->stdin_len)
		close_fd(&p->io.in);

	memset(&w, 0, sizeof w);
	w.pid = pid;
	if (req->timeout > 0)
		w.deadline = mono_now() + req->timeout;
	pump_loop(p, &w);              /* returns once the child is reaped */
	reaper_untrack((int)pid);      /* and its group killed */

	fill_outcome(res, &w);
	res->tail = ring_take(&p->tail, &res->tail_len);
	close_fd(&p->pidfd);
	if (p->epipe)
		consume_sigpipe();
	free(p->tail.buf);
	free(p);
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	res->finished = now_float();
	return 0;
}

void run_result_free(struct run_result *res)
{
	if (!res)
		return;
	free(res->tail);
	res->tail = NULL;
	res->tail_len = 0;
}
