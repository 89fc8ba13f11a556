/* SPDX-License-Identifier: MIT */
/*
 * warm_proc.c: one warm process's life (doc/design.md "Warm handlers"): started with its
 * socket on fd 3, reaped, killed, retired, its RSS read. The pool (warm.c) decides when;
 * this file only knows how.
 *
 * A process is spawned like a cold child (spawn.c: its own process group, PDEATHSIG, the
 * handler's ids, cwd and rlimits) with one more descriptor: our end of a socketpair is
 * kept non-blocking, its end becomes fd 3. What it is started from (the fingerprint of
 * its handler) is kept, so that a reload that changes the handler replaces it.
 *
 * Reaping is by pid (never waitpid(-1), which would take other fetchers' children), and
 * the grandchild rule of cold children holds: once the leader has exited, whatever is
 * left in its group is SIGKILLed. With containment (jobcg.h) each process has a cgroup of
 * its own, warm-N, made before it starts: every SIGKILL of its group goes to the cgroup
 * too, and the cgroup is emptied and removed when the process is freed, so whatever it
 * started, escaped or not, ends with it (doc/design.md "Containment"). A retired process was asked to leave by EOF on its
 * fd 3; its group is killed after its kill_grace, by warm_tend_retiring, which the pool's
 * tend and a long job's serve loop both call, so a retired process never lingers for the
 * length of the next job.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "counters.h"
#include "jobcg.h"
#include "reaper.h"
#include "warm_int.h"

static atomic_uint warm_cg_seq;     /* names the processes' cgroups: warm-N */

/*
 * What a process is started from: a reload that changes any of it replaces the process.
 * It is built for every job and every tend, so without printf (formatting its doubles
 * cost the daemon about 5 % of its CPU per warm no-op job): the numbers go in as their
 * bytes, and two prints are compared with their lengths (warm_same_print).
 */
static void fingerprint(const struct handler *h, struct sbuf *b)
{
	const struct confinement *cf = &h->confine;
	const struct argv_list *lists[] = { &h->command, &h->env, &h->env_passthrough,
	                                    &cf->writable_paths };
	const char *strs[] = { h->cwd, h->user, h->group };
	const long long ints[] = { h->rlimit_cpu, h->rlimit_as, h->rlimit_nofile,
	                           h->rlimit_nproc, h->warm_max_jobs, h->warm_max_rss,
	                           cf->network, cf->private_tmp, cf->read_only,
	                           cf->no_new_privileges };
	const double secs[] = { h->warm_max_age, h->warm_idle_timeout, h->warm_start_timeout,
	                        h->kill_grace };

	sb_init(b);
	for (size_t k = 0; k < sizeof lists / sizeof *lists; k++) {
		for (int i = 0; i < lists[k]->n; i++) {
			sb_adds(b, lists[k]->v[i]);
			sb_addc(b, '\x1f');
		}
		sb_addc(b, '\x1e');
	}
	for (size_t k = 0; k < sizeof strs / sizeof *strs; k++) {
		sb_adds(b, strs[k] ? strs[k] : "");
		sb_addc(b, '\x1e');
	}
	sb_add(b, (const char *)ints, sizeof ints);
	sb_add(b, (const char *)secs, sizeof secs);
	sb_add(b, (const char *)h->caps.max, sizeof h->caps.max);     /* its cgroup's caps */
}

/* Is h, as configured now, what w was started from? */
int warm_same_print(const struct warm_proc *w, const struct handler *h)
{
	struct sbuf now;

	fingerprint(h, &now);
	int same = now.len == w->print.len && memcmp(now.s, w->print.s, now.len) == 0;
	sb_free(&now);
	return same;
}

static int fd_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

void warm_proc_free(struct warm_proc *w)
{
	if (!w)
		return;
	jobcg_free(w->cg);              /* what it started: killed, waited for, removed */
	usage_proc_close(&w->proc);
	outpipes_free(w->o);
	capgroup_give(w->caps);
	close_fd(&w->sock);
	close_fd(&w->pidfd);
	free(w->rbuf);
	free(w->cls);
	sb_free(&w->print);
	free(w);
}

void warm_proc_reap(struct warm_proc *w)
{
	int st;
	pid_t r;

	if (w->exited)
		return;
	r = waitpid(w->pid, &st, WNOHANG);
	if (r == w->pid) {
		w->exited = 1;
		w->wstatus = st;
	} else if (r < 0 && errno == ECHILD) {
		w->exited = 1;
		w->wstatus = -1;
	}
	if (w->exited) {
		/* The grandchild rule: nothing of its group outlives the leader. While a member
		 * lives the group's id stays taken, so this reaches that group or nothing. */
		warm_proc_sigkill(w);
		reaper_untrack((int)w->pid);
		atomic_fetch_sub(&warm_processes_live, 1);
	}
}

/* SIGKILL to its group and its cgroup (the processes that left the group). */
void warm_proc_sigkill(struct warm_proc *w)
{
	group_signal(w->pid, SIGKILL);
	if (w->cg)
		jobcg_kill(w->cg);
}

/* SIGKILL the group and wait (bounded) for the leader: 1 when reaped. */
int warm_proc_kill(struct warm_proc *w)
{
	warm_proc_sigkill(w);
	for (double until = mono_now() + WARM_REAP_WAIT; !w->exited && mono_now() < until;) {
		if (w->pidfd >= 0) {
			struct pollfd pfd = { .fd = w->pidfd, .events = POLLIN };
			poll(&pfd, 1, 50);
		} else {
			sleep_seconds(0.01);
		}
		warm_proc_reap(w);
	}
	return w->exited;
}

/* "exit status 3", "killed by signal 9 (SIGKILL)", for log lines. */
void warm_status_text(int wstatus, char *out, size_t n)
{
	if (wstatus == -1)
		snprintf(out, n, "an unknown status");
	else if (WIFEXITED(wstatus))
		snprintf(out, n, "exit status %d", WEXITSTATUS(wstatus));
	else if (WIFSIGNALED(wstatus))
		snprintf(out, n, "signal %d (SIG%s)", WTERMSIG(wstatus),
		         sigabbrev_np(WTERMSIG(wstatus)) ? sigabbrev_np(WTERMSIG(wstatus)) : "?");
	else
		snprintf(out, n, "status %d", wstatus);
}

static void setup_failed(struct run_result *fail, int err)
{
	fail->status = RUN_SPAWN_FAILED;
	fail->code = err;
	fail->spawn_step = SPAWN_STEP_SETUP;
	fail->tail = xstrdup("");
}

/*
 * Spawn a process of h with the ids, cwd and rlimits of req (the job's request: the same
 * handler resolved them). NULL with fail filled (RUN_SPAWN_FAILED) when it could not be
 * started at all.
 */
struct warm_proc *warm_proc_start(const struct handler *h, const struct run_request *req,
                                    struct run_result *fail)
{
	int sv[2];
	pid_t pid;
	struct child_io io;
	struct run_request sreq = *req;
	char **env = handler_build_env(h, NULL, NULL, NULL, NULL, NULL, NULL);

	memset(fail, 0, sizeof *fail);
	fail->started = now_float();
	/* The child's end must be above 2: its dup2 onto 3 follows those onto 0-2. */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		setup_failed(fail, errno);
		handler_free_env(env);
		return NULL;
	}
	if (sv[1] <= 2) {
		int low = sv[1];
		sv[1] = fcntl(low, F_DUPFD_CLOEXEC, 3);
		close(low);
		if (sv[1] < 0) {
			setup_failed(fail, errno);
			close(sv[0]);
			handler_free_env(env);
			return NULL;
		}
	}
	sreq.command = &h->command;
	sreq.extra_args = NULL;
	sreq.nextra = 0;
	sreq.env = (const char *const *)env;
	sreq.stdin_data = NULL;
	sreq.stdin_len = 0;
	sreq.ctl_fd = sv[1];
	char cgname[32];
	snprintf(cgname, sizeof cgname, "warm-%u", atomic_fetch_add(&warm_cg_seq, 1));
	sreq.cgroup = jobcg_new(cgname);
	int rc = handler_spawn(&sreq, fail, &pid, &io);
	close(sv[1]);
	handler_free_env(env);
	if (rc != 0) {
		jobcg_free(sreq.cgroup);
		close(sv[0]);
		return NULL;
	}
	atomic_fetch_add(&warm_processes_live, 1);
	metrics_inc(METRIC_WARM_STARTED);

	struct warm_proc *w = xcalloc(1, sizeof *w);
	w->pid = pid;
	w->cg = sreq.cgroup;
	w->caps = io.caps;
	w->pidfd = io.pidfd >= 0 ? io.pidfd : (int)syscall(SYS_pidfd_open, pid, 0);
	w->sock = sv[0];
	fd_nonblock(w->sock);
	/* No copies of the write ends: between jobs a process's end must read as EOF. */
	close_fd(&io.out_w);
	close_fd(&io.err_w);
	close_fd(&io.in);
	fd_nonblock(io.out);
	fd_nonblock(io.err);
	w->o = outpipes_new(io.out, io.err);
	w->cls = xstrdup(h->class_name);
	fingerprint(h, &w->print);
	snprintf(w->tag, sizeof w->tag, "warm %s pid=%d", h->class_name, (int)pid);
	/* The job's tail size, though nothing reads an idle tail: outpipes_begin keeps the
	 * buffer between jobs instead of a free and a malloc around each. */
	w->idle_req = (struct run_request){ .log_tag = w->tag, .log_output = 1,
	                                    .output_tail = h->output_tail };
	outpipes_begin(w->o, &w->idle_req);
	w->born = w->used = mono_now();
	usage_proc_init(&w->proc, w->pid);
	if (h->warm_max_jobs > 0) {
		long long span = h->warm_max_jobs / 10;
		w->max_jobs = (long)(h->warm_max_jobs - (long long)(random_unit() * (double)(span + 1)));
		if (w->max_jobs < 1)
			w->max_jobs = 1;
	}
	w->max_rss = h->warm_max_rss;
	w->max_age = h->warm_max_age;
	w->idle_timeout = h->warm_idle_timeout;
	w->kill_grace = h->kill_grace;
	w->start_timeout = h->warm_start_timeout;
	return w;
}

/* Ask w to leave (EOF on its fd 3); it is killed after its grace, reaped by the tend. */
void warm_pool_retire(struct warm_pool *p, struct warm_proc *w)
{
	close_fd(&w->sock);
	outpipes_begin(w->o, &w->idle_req);
	w->kill_at = mono_now() + w->kill_grace;
	warm_proc_reap(w);
	w->next = p->retiring;
	p->retiring = w;
}

/* RSS of pid in bytes (/proc/PID/statm's resident pages), -1 unknown. */
long long warm_proc_rss(pid_t pid)
{
	char path[64], buf[128];
	long long size, resident;
	ssize_t n;
	int fd;

	snprintf(path, sizeof path, "/proc/%d/statm", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	if (sscanf(buf, "%lld %lld", &size, &resident) != 2)
		return -1;
	return resident * (long long)sysconf(_SC_PAGESIZE);
}

/* After the leader's exit: what is left in the pipes, for at most WARM_DRAIN_SECS. */
void warm_drain_after_exit(struct warm_proc *w)
{
	for (double until = mono_now() + WARM_DRAIN_SECS; outpipes_open(w->o) &&
	     mono_now() < until;) {
		struct pollfd fds[2];
		int nfds = 0, i_out, i_err;
		outpipes_poll(w->o, fds, &nfds, &i_out, &i_err);
		if (poll(fds, (nfds_t)nfds, 20) > 0)
			outpipes_ready(w->o, fds, i_out, i_err);
	}
}

double warm_tend_retiring(struct warm_pool *p, double now)
{
	double next = 0;

	for (struct warm_proc **pp = &p->retiring; *pp;) {
		struct warm_proc *w = *pp;
		outpipes_drain(w->o);
		warm_proc_reap(w);
		if (!w->exited && now >= w->kill_at) {
			warm_proc_sigkill(w);
			warm_proc_reap(w);
		}
		if (w->exited) {
			*pp = w->next;
			warm_proc_free(w);
			continue;
		}
		double due = w->kill_at > now ? w->kill_at - now : WARM_TICK;
		if (next == 0 || due < next)
			next = due;
		pp = &w->next;
	}
	return next;
}
