/* SPDX-License-Identifier: MIT */
/*
 * warm.c: warm handlers (doc/design.md "Warm handlers", doc/protocol.md §1.2): long-lived
 * processes of a handler's command, each fed one job at a time over a UNIX socket on its
 * fd 3, recycled, and held to every rule a cold handler is held to.
 *
 * Who owns a process. Each fetcher thread has a pool of its own, with at most one process
 * per warm handler class, started by that thread the first time it runs a job of the
 * class. That shape keeps three guarantees without any new machinery: a process is only
 * ever in one thread's hands (no locks, no hand-over between threads); it is forked by a
 * long-lived fetcher thread, so PR_SET_PDEATHSIG (which fires when the forking *thread*
 * exits) kills it only when the daemon dies; and "one job at a time" holds because the
 * fetcher itself runs one job at a time. The pool of a process of concurrency N thus holds
 * up to N processes of each warm class in use; idle ones leave after warm_idle_timeout.
 *
 * A job on a process (proc_serve, one poll loop like the cold pump's): the job message is
 * written in non-blocking pieces (a 50 MB job must not block the fetcher, and the process
 * may talk while it reads), the socket is read and cut into messages, stdout and stderr
 * go through the same line cutting, log budget and tail as a cold child's (pump.c's
 * outpipes, begun anew for each job), and the pidfd tells an exit. "done" ends the job;
 * the pipes are then drained of what is there (a handler flushes before "done", so its
 * output precedes the message): each job's output is its own. A timeout, a cancel or the
 * stop's abort sends {"type":"cancel"} and starts the grace; at its end the whole group
 * is SIGKILLed. A process whose job was cancelled, timed out or aborted is never reused,
 * even if it answered "done" in time: a hard timeout must really stop the work, and only
 * a new process proves that it did.
 *
 * What a process does wrong is its failure, never the daemon's: EOF, an exit, garbage,
 * an unknown type, a line over WARM_LINE_MAX, a second "done", no "ready" within
 * warm_start_timeout. It is killed, reaped and replaced, and the reason logged. The job
 * it was running fails like a cold handler that died so (exit status, signal), or as
 * "warm process …" (RUN_WARM_BROKEN) when no exit status says it; the retry rules do the
 * rest. A job whose message could not be written (EPIPE: the process died idle) never
 * started and goes to a new process without counting an attempt, up to the third process
 * in a row that took part of it and died (the job may be what kills them: that fails it).
 * A timeout, cancel or abort while the message is still being written (a process that
 * does not read) is that job's outcome, like any other.
 *
 * A command that keeps failing before "ready" (a syntax error, a missing module) backs
 * off per class, for every fetcher at once (struct health, the only shared state), and
 * says so once when it starts failing and once when it recovers. The job waits meanwhile
 * (it stays on the in-progress list; the stop gives it up at once, as RUN_ABORTED, for the
 * shutdown requeue, rather than hold the drain for it): none is lost, and none is failed
 * for a fault that a fix of the handler will mend. A command that can't be spawned at all
 * (not found, not executable) fails the job as HandlerSpawnFailed, like a cold handler.
 *
 * Recycling: after warm_max_jobs jobs less a per-process random jitter of up to a tenth (so
 * a pool started together never recycles in lockstep), when its RSS is over warm_max_rss
 * after a job, past warm_max_age, or when "done" asks for it. The replacement is spawned
 * at once, before the next job needs it, and the old process is retired: EOF on its fd 3
 * asks it to exit, and after its kill_grace its group is killed. Retired processes are
 * reaped by warm_pool_tend, which the fetcher calls between jobs and wakes for.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
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
#include "handler.h"
#include "handler_int.h"
#include "json.h"
#include "log.h"
#include "reaper.h"
#include "util.h"
#include "warm.h"
#include "warm_proto.h"

#define WARM_TICK          0.1      /* longest poll sleep: the abort and cancel flags */
#define WARM_READ_CHUNK    65536
#define WARM_DRAIN_SECS    0.1      /* output read after the group is gone */
#define WARM_REAP_WAIT     1.0      /* after SIGKILL, how long we wait for the exit here */
#define WARM_BACKOFF_MIN   0.5
#define WARM_BACKOFF_MAX   30.0
/* Processes in a row that may end before they have read a whole job: past that, the job
 * itself is the likely cause (it kills what reads it) and fails as a warm fault. */
#define WARM_DELIVERY_TRIES 3
/* EOF on fd 3 is how a dying process looks a moment before its exit does: it is a
 * protocol error only when the process is still there this much later. */
#define WARM_EOF_GRACE     0.5
/* The longest a fetcher with warm processes parks before it looks at them again (a reload
 * that changed their handler, one that died idle): one more blocking fetch per 5 s. */
#define WARM_TEND_IDLE     5.0

struct warm_proc {
	pid_t pid;
	int pidfd;                  /* -1: waitpid(WNOHANG) */
	int sock;                   /* our end of fd 3, non-blocking */
	struct outpipes *o;
	char *rbuf;                 /* what the socket gave that is not a whole line yet */
	size_t rlen, rcap;
	char *cls;
	struct sbuf print;          /* what it was started from (fingerprint) */
	char tag[96];               /* "warm Cls pid=N": its output between jobs */
	struct run_request idle_req;
	double born, used;          /* monotonic: spawned, last job ended */
	long jobs, max_jobs;        /* max_jobs: 0 = no limit (jitter applied) */
	long long max_rss;
	double max_age, idle_timeout, kill_grace, start_timeout;
	int ready;
	int exited, wstatus;
	double kill_at;             /* retiring: SIGKILL to its group then */
	struct warm_proc *next;     /* on the retiring list */
};

struct warm_pool {
	struct warm_proc **procs;   /* one per class in use, or NULL */
	int n;
	struct warm_proc *retiring;
};

/* ----------------------------------------------------------------------------------------
 * The start-failure backoff of each class, shared by every fetcher
 * ------------------------------------------------------------------------------------- */

struct health {
	char *cls;
	int failures;               /* failed starts in a row */
	double retry_at;            /* monotonic */
};

static pthread_mutex_t health_mu = PTHREAD_MUTEX_INITIALIZER;
static struct health *healths;
static int nhealths;

static struct health *health_find(const char *cls)
{
	for (int i = 0; i < nhealths; i++)
		if (strcmp(healths[i].cls, cls) == 0)
			return &healths[i];
	healths = xrealloc(healths, sizeof *healths * (size_t)(nhealths + 1));
	healths[nhealths] = (struct health){ xstrdup(cls), 0, 0 };
	return &healths[nhealths++];
}

/* Seconds to wait before the class may start a process again (0: now). */
static double health_wait(const char *cls)
{
	pthread_mutex_lock(&health_mu);
	double wait = health_find(cls)->retry_at - mono_now();
	pthread_mutex_unlock(&health_mu);
	return wait > 0 ? wait : 0;
}

static void health_failed(const char *cls, const char *why)
{
	pthread_mutex_lock(&health_mu);
	struct health *h = health_find(cls);
	int n = ++h->failures;
	double backoff = WARM_BACKOFF_MIN * (double)(1 << (n < 7 ? n - 1 : 6));
	if (backoff > WARM_BACKOFF_MAX)
		backoff = WARM_BACKOFF_MAX;
	h->retry_at = mono_now() + backoff * (0.8 + 0.4 * random_unit());
	pthread_mutex_unlock(&health_mu);
	if (n == 1)
		log_warn("warm: %s: %s; its jobs wait while new processes are tried with a backoff "
		         "of up to %gs (logged again when one is ready)", cls, why, WARM_BACKOFF_MAX);
}

static void health_ok(const char *cls)
{
	pthread_mutex_lock(&health_mu);
	struct health *h = health_find(cls);
	int was = h->failures;
	h->failures = 0;
	h->retry_at = 0;
	pthread_mutex_unlock(&health_mu);
	if (was)
		log_info("warm: %s: a process is ready again after %d failed start(s)", cls, was);
}

/* ----------------------------------------------------------------------------------------
 * One process: start, reap, retire
 * ------------------------------------------------------------------------------------- */

/*
 * What a process is started from: a reload that changes any of it replaces the process.
 * It is built for every job and every tend, so without printf (formatting its doubles
 * cost the daemon about 5 % of its CPU per warm no-op job): the numbers go in as their
 * bytes, and two prints are compared with their lengths (same_print).
 */
static void fingerprint(const struct handler *h, struct sbuf *b)
{
	const struct argv_list *lists[] = { &h->command, &h->env, &h->env_passthrough };
	const char *strs[] = { h->cwd, h->user, h->group };
	const long long ints[] = { h->rlimit_cpu, h->rlimit_as, h->rlimit_nofile,
	                           h->rlimit_nproc, h->warm_max_jobs, h->warm_max_rss };
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
}

/* Is h, as configured now, what w was started from? */
static int same_print(const struct warm_proc *w, const struct handler *h)
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

static void proc_free(struct warm_proc *w)
{
	if (!w)
		return;
	outpipes_free(w->o);
	close_fd(&w->sock);
	close_fd(&w->pidfd);
	free(w->rbuf);
	free(w->cls);
	sb_free(&w->print);
	free(w);
}

static void proc_try_reap(struct warm_proc *w)
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
		group_signal(w->pid, SIGKILL);
		reaper_untrack((int)w->pid);
		atomic_fetch_sub(&warm_processes_live, 1);
	}
}

/* SIGKILL the group and wait (bounded) for the leader: 1 when reaped. */
static int proc_kill(struct warm_proc *w)
{
	group_signal(w->pid, SIGKILL);
	for (double until = mono_now() + WARM_REAP_WAIT; !w->exited && mono_now() < until;) {
		if (w->pidfd >= 0) {
			struct pollfd pfd = { .fd = w->pidfd, .events = POLLIN };
			poll(&pfd, 1, 50);
		} else {
			sleep_seconds(0.01);
		}
		proc_try_reap(w);
	}
	return w->exited;
}

/* "exit status 3", "killed by signal 9 (SIGKILL)", for log lines. */
static void status_text(int wstatus, char *out, size_t n)
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
static struct warm_proc *proc_start(const struct handler *h, const struct run_request *req,
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
	int rc = handler_spawn(&sreq, fail, &pid, &io);
	close(sv[1]);
	handler_free_env(env);
	if (rc != 0) {
		close(sv[0]);
		return NULL;
	}
	atomic_fetch_add(&warm_processes_live, 1);
	metrics_inc(METRIC_WARM_STARTED);

	struct warm_proc *w = xcalloc(1, sizeof *w);
	w->pid = pid;
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
static void pool_retire(struct warm_pool *p, struct warm_proc *w)
{
	close_fd(&w->sock);
	outpipes_begin(w->o, &w->idle_req);
	w->kill_at = mono_now() + w->kill_grace;
	proc_try_reap(w);
	w->next = p->retiring;
	p->retiring = w;
}

/* RSS of pid in bytes (/proc/PID/statm's resident pages), -1 unknown. */
static long long proc_rss(pid_t pid)
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

/* ----------------------------------------------------------------------------------------
 * Serving a process: waiting for "ready", running a job
 * ------------------------------------------------------------------------------------- */

static double tend_retiring(struct warm_pool *p, double now);

/* Before the job starts: give up waiting for a process. */
static int stop_asked(const struct run_request *req)
{
	return (req->abort && atomic_load(req->abort)) || (req->cancel && atomic_load(req->cancel)) ||
	       (req->stopping && atomic_load(req->stopping));
}

enum phase { PH_READY, PH_JOB };
enum kill_why { KW_NONE, KW_TIMEOUT, KW_ABORT, KW_CANCEL };

struct serve {
	struct warm_pool *pool;         /* its retiring processes are tended meanwhile */
	double next_tend;
	enum phase phase;
	const struct run_request *req;  /* the job's (hooks, timeout), or the idle one */
	const char *jid;                /* the job's jid, or NULL */
	const char *msg;                /* the job message, and how much of it went out */
	size_t msglen, off;
	double ready_by;                /* PH_READY: monotonic deadline */
	double deadline;                /* PH_JOB: the job's timeout, monotonic; 0 none */
	enum kill_why why_kill;
	double kill_at;
	int killed;
	int done;                       /* got "done": in done_msg */
	struct warm_msg done_msg;
	/* The job message could not be written whole: the process is gone. The job never
	 * started unless we killed it (a timeout, cancel or abort during the write, as when
	 * the process does not read): then the kill decides, as for any other job. */
	int undelivered;
	int broken;                     /* protocol error or no ready in time: in why */
	double eof_at;                  /* monotonic: fd 3 reached EOF then; 0 not yet */
	char why[300];
};

static void send_cancel(struct warm_proc *w, const struct serve *s)
{
	/* Only between whole messages; a socket too full to take it is a process not
	 * reading, which the grace's SIGKILL deals with. */
	if (s->phase == PH_JOB && s->off == s->msglen && w->sock >= 0)
		(void)send(w->sock, WARM_CANCEL_LINE, sizeof WARM_CANCEL_LINE - 1,
		           MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void begin_kill(struct warm_proc *w, struct serve *s, enum kill_why why, double grace,
                       double now)
{
	if (grace < 0)
		grace = 0;
	if (s->why_kill == KW_NONE) {
		s->why_kill = why;
		s->kill_at = now + grace;
		send_cancel(w, s);
		return;
	}
	if (why == KW_CANCEL)
		s->why_kill = why;      /* the cancel names the outcome, as for a cold child */
	if (now + grace < s->kill_at)
		s->kill_at = now + grace;
}

static void protocol_error(struct serve *s, const char *fmt, const char *detail)
{
	if (s->broken)
		return;
	s->broken = 1;
	snprintf(s->why, sizeof s->why, fmt, detail);
}

static void serve_tick(struct warm_proc *w, struct serve *s, double now)
{
	const struct run_request *req = s->req;

	if (s->phase == PH_JOB && !w->exited && !s->done) {
		if (req->cancel && atomic_load(req->cancel) && s->why_kill != KW_CANCEL)
			begin_kill(w, s, KW_CANCEL, req->kill_grace, now);
		if (req->abort && atomic_load(req->abort) && s->why_kill != KW_ABORT)
			begin_kill(w, s, KW_ABORT, req->abort_grace, now);
		if (s->deadline > 0 && now >= s->deadline && s->why_kill == KW_NONE)
			begin_kill(w, s, KW_TIMEOUT, req->kill_grace, now);
	}
	if (s->phase == PH_READY && !w->ready && !w->exited && now >= s->ready_by) {
		s->broken = 1;
		snprintf(s->why, sizeof s->why, "no \"ready\" within warm_start_timeout");
	}
	if (s->eof_at > 0 && !w->exited && now >= s->eof_at + WARM_EOF_GRACE && !s->done)
		protocol_error(s, "%s", "closed fd 3");
	if (s->why_kill != KW_NONE && !s->killed && !s->done && now >= s->kill_at) {
		group_signal(w->pid, SIGKILL);
		s->killed = 1;
	}
}

static void handle_message(struct warm_proc *w, struct serve *s, const char *line, size_t len)
{
	struct warm_msg m;
	char why[160];

	if (s->broken || s->done) {         /* anything after "done" waits for its turn */
		if (s->done)
			protocol_error(s, "%s after \"done\"", "a message");
		return;
	}
	if (warm_msg_parse(line, len, &m, why, sizeof why) < 0) {
		protocol_error(s, "bad message: %s", why);
		return;
	}
	switch (m.type) {
	case WARM_MSG_READY:
		if (w->ready)
			protocol_error(s, "%s", "a second \"ready\"");
		else
			w->ready = 1;
		break;
	case WARM_MSG_PROGRESS:
		if (s->phase != PH_JOB)
			protocol_error(s, "%s", "\"progress\" with no job");
		else if (s->req->on_progress)
			s->req->on_progress(s->req->ctx, m.pct, m.message);
		break;
	case WARM_MSG_DONE:
		if (s->phase != PH_JOB || s->off < s->msglen) {
			protocol_error(s, "%s", "\"done\" with no job");
			break;
		}
		if (m.jid && (!s->jid || strcmp(m.jid, s->jid) != 0)) {
			protocol_error(s, "\"done\" for another job (jid %s)", m.jid);
			break;
		}
		s->done = 1;
		s->done_msg = m;
		return;                         /* m is kept */
	}
	warm_msg_free(&m);
}

/* Cut what the socket holds into lines: 1 read some, 0 nothing there, -1 EOF or error. */
static int sock_read(struct warm_proc *w, struct serve *s)
{
	if (w->rcap - w->rlen < WARM_READ_CHUNK) {
		w->rcap = w->rlen + WARM_READ_CHUNK;
		w->rbuf = xrealloc(w->rbuf, w->rcap);
	}
	/*
	 * recv, not recvmsg with room for control data: descriptors a hostile process sends
	 * with SCM_RIGHTS are then discarded by the kernel (closed, never installed here), so
	 * it can neither push descriptors into the daemon nor exhaust its table that way.
	 */
	ssize_t n = recv(w->sock, w->rbuf + w->rlen, WARM_READ_CHUNK, MSG_DONTWAIT);
	if (n == 0)
		return -1;
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	size_t scanned = w->rlen;
	w->rlen += (size_t)n;
	size_t start = 0;
	for (;;) {
		char *nl = memchr(w->rbuf + scanned, '\n', w->rlen - scanned);
		if (!nl)
			break;
		size_t end = (size_t)(nl - w->rbuf);
		if (end - start > WARM_LINE_MAX)
			protocol_error(s, "%s", "a message over 1 MiB");
		else
			handle_message(w, s, w->rbuf + start, end - start);
		start = scanned = end + 1;
	}
	if (w->rlen - start > WARM_LINE_MAX)
		protocol_error(s, "%s", "a message over 1 MiB");
	memmove(w->rbuf, w->rbuf + start, w->rlen - start);
	w->rlen -= start;
	/* A big job ran: do not keep its buffer for the life of the process. */
	if (w->rcap > 4 * WARM_READ_CHUNK && w->rlen < WARM_READ_CHUNK) {
		w->rcap = w->rlen + WARM_READ_CHUNK;
		w->rbuf = xrealloc(w->rbuf, w->rcap);
	}
	return 1;
}

/*
 * The process has exited: what it wrote before is still in the socket, and may be more
 * than one read ("done" behind a burst of progress, then an exit). Read it all before the
 * exit is judged. Bounded: the leader is gone and its group killed, so only what is
 * buffered is left, unless a member that left the group holds fd 3 and keeps writing.
 */
static void sock_read_rest(struct warm_proc *w, struct serve *s)
{
	for (int i = 0; i < 64 && w->sock >= 0 && s->eof_at == 0 && !s->done && !s->broken; i++) {
		int got = sock_read(w, s);
		if (got < 0)
			s->eof_at = mono_now();
		if (got <= 0)
			break;
	}
}

static void sock_write(struct warm_proc *w, struct serve *s)
{
	while (s->off < s->msglen) {
		ssize_t n = send(w->sock, s->msg + s->off, s->msglen - s->off,
		                 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			s->off += (size_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		s->undelivered = 1;     /* EPIPE, ECONNRESET: the process is gone */
		return;
	}
}

static int serve_timeout_ms(const struct serve *s, const struct warm_proc *w, double now)
{
	double t = w->pidfd >= 0 ? WARM_TICK : 0.01;

	if (s->phase == PH_READY && s->ready_by - now < t)
		t = s->ready_by - now;
	if (s->deadline > 0 && s->why_kill == KW_NONE && s->deadline - now < t)
		t = s->deadline - now;
	if (s->why_kill != KW_NONE && !s->killed && s->kill_at - now < t)
		t = s->kill_at - now;
	if (s->eof_at > 0 && s->eof_at + WARM_EOF_GRACE - now < t)
		t = s->eof_at + WARM_EOF_GRACE - now;
	return t < 0 ? 0 : (int)(t * 1000.0 + 0.999);
}

/* Serve w until the phase ends: ready, done, exit, a protocol error or no delivery. */
static void proc_serve(struct warm_proc *w, struct serve *s)
{
	for (;;) {
		struct pollfd fds[4];
		int nfds = 0, i_sock = -1, i_out, i_err, i_pid = -1;
		double now = mono_now();

		serve_tick(w, s, now);
		if (s->done || s->broken || s->undelivered || w->exited ||
		    (s->phase == PH_READY && (w->ready || stop_asked(s->req))))
			break;
		if (w->sock >= 0 && s->eof_at == 0) {
			i_sock = nfds;
			fds[nfds++] = (struct pollfd){ .fd = w->sock, .events = POLLIN |
			                               (s->off < s->msglen ? POLLOUT : 0) };
		}
		outpipes_poll(w->o, fds, &nfds, &i_out, &i_err);
		if (w->pidfd >= 0) {
			i_pid = nfds;
			fds[nfds++] = (struct pollfd){ .fd = w->pidfd, .events = POLLIN };
		}
		int n = poll(fds, (nfds_t)nfds, serve_timeout_ms(s, w, now));
		if (n < 0 && errno != EINTR) {
			log_warn("warm: poll: %s", strerror(errno));
			sleep_seconds(0.01);
			continue;
		}
		if (n > 0 && i_sock >= 0 && (fds[i_sock].revents & POLLOUT))
			sock_write(w, s);
		if (n > 0 && i_sock >= 0 && (fds[i_sock].revents & (POLLIN | POLLHUP | POLLERR)) &&
		    sock_read(w, s) < 0)
			s->eof_at = mono_now();
		if (s->eof_at > 0 && s->off < s->msglen)
			s->undelivered = 1;     /* gone before it had the whole job */
		if (n > 0)
			outpipes_ready(w->o, fds, i_out, i_err);
		if (w->pidfd < 0 || (n > 0 && i_pid >= 0 && fds[i_pid].revents))
			proc_try_reap(w);
		if (w->exited)
			sock_read_rest(w, s);
		if (w->exited && s->off < s->msglen)
			s->undelivered = 1;     /* seen exited before its EOF: the same */
		/* A retired process is killed after its grace even while this one works for an
		 * hour: the tend between jobs would come too late (a process recycled for its
		 * RSS, or one whose job timed out, lingering). */
		if (s->pool && s->pool->retiring && now >= s->next_tend) {
			tend_retiring(s->pool, mono_now());
			s->next_tend = now + WARM_TICK;
		}
	}
}

/* After the leader's exit: what is left in the pipes, for at most WARM_DRAIN_SECS. */
static void drain_after_exit(struct warm_proc *w)
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

/* ----------------------------------------------------------------------------------------
 * Getting a ready process
 * ------------------------------------------------------------------------------------- */

/* Sleep up to s, in ticks, unless the job is aborted or cancelled: 0 slept, -1 stopped.
 * The pool's retiring processes are tended meanwhile. */
static int wait_unless_stopped(struct warm_pool *p, const struct run_request *req, double s)
{
	for (double until = mono_now() + s; mono_now() < until;) {
		if (stop_asked(req))
			return -1;
		if (p->retiring)
			tend_retiring(p, mono_now());
		double left = until - mono_now();
		sleep_seconds(left < WARM_TICK ? left : WARM_TICK);
	}
	return 0;
}

static int pool_slot(struct warm_pool *p, const char *cls)
{
	for (int i = 0; i < p->n; i++)
		if (p->procs[i] && strcmp(p->procs[i]->cls, cls) == 0)
			return i;
	for (int i = 0; i < p->n; i++)
		if (!p->procs[i])
			return i;
	p->procs = xrealloc(p->procs, sizeof *p->procs * (size_t)(p->n + 1));
	p->procs[p->n] = NULL;
	return p->n++;
}

/* A start that failed before "ready": killed, reaped, logged (with the backoff). */
static void start_failed(struct warm_pool *p, struct warm_proc *w, const char *why)
{
	char line[400];

	if (!w->exited)
		proc_kill(w);
	drain_after_exit(w);
	if (why) {
		snprintf(line, sizeof line, "process pid=%d %s", (int)w->pid, why);
	} else {
		char st[64];
		status_text(w->wstatus, st, sizeof st);
		snprintf(line, sizeof line, "process pid=%d exited before \"ready\" (%s)",
		         (int)w->pid, st);
	}
	metrics_inc(METRIC_WARM_CRASHED);
	health_failed(w->cls, line);
	if (w->exited) {
		proc_free(w);
	} else {        /* not gone after SIGKILL (uninterruptible sleep): the tend reaps it */
		w->kill_at = 0;
		close_fd(&w->sock);
		w->next = p->retiring;
		p->retiring = w;
	}
}

/*
 * Nothing to see on an idle process: no output, no message or hang-up on fd 3, no exit,
 * in one poll. That is the common case, checked before every job and at every tend; the
 * reads, waitpid and peek of idle_check cost five system calls where this costs one.
 */
static int idle_quiet(const struct warm_proc *w)
{
	struct pollfd fds[4];
	int nfds = 0, i_out, i_err;

	if (w->pidfd < 0 || w->sock < 0 || w->rlen > 0 || w->exited)
		return 0;
	fds[nfds++] = (struct pollfd){ .fd = w->sock, .events = POLLIN };
	fds[nfds++] = (struct pollfd){ .fd = w->pidfd, .events = POLLIN };
	outpipes_poll(w->o, fds, &nfds, &i_out, &i_err);
	return poll(fds, (nfds_t)nfds, 0) == 0;
}

/*
 * A process still starting, kept when its job was stopped (pool_ready): its "ready" is
 * read here as pool_ready would read it, not taken for a message sent while idle. NULL
 * when it is fine (ready now, or still within warm_start_timeout), else why it must go
 * (in why).
 */
static const char *starting_check(struct warm_proc *w, double now, char *why, size_t n)
{
	struct serve s = { .phase = PH_READY, .req = &w->idle_req,
	                   .ready_by = w->born + w->start_timeout };

	outpipes_drain(w->o);
	int eof = sock_read(w, &s) < 0;
	proc_try_reap(w);
	if (w->exited)
		return "exited before \"ready\"";
	if (s.broken)
		snprintf(why, n, "broke the protocol: %s", s.why);
	else if (eof)
		snprintf(why, n, "closed fd 3 before \"ready\"");
	else if (!w->ready && now >= s.ready_by)
		snprintf(why, n, "sent no \"ready\" within warm_start_timeout");
	else {
		if (w->ready)
			health_ok(w->cls);
		return NULL;
	}
	return why;
}

/* What an idle process printed or sent: output logged; any message, or EOF, ends it. */
static const char *idle_check(struct warm_proc *w)
{
	if (idle_quiet(w))
		return NULL;
	outpipes_drain(w->o);
	proc_try_reap(w);
	if (w->exited)
		return "exited while idle";
	if (w->rlen > 0)
		return "sent a message while idle";
	char c;
	ssize_t n = recv(w->sock, &c, 1, MSG_DONTWAIT | MSG_PEEK);
	if (n == 0)
		return "closed fd 3 while idle";
	if (n > 0)
		return "sent a message while idle";
	/* An error (ECONNRESET: it closed fd 3 with bytes of ours unread) passes as quiet,
	 * and that is fine: the job's message then meets EPIPE, which hands the job to a new
	 * process without an attempt, as a process found closed here would. */
	return NULL;
}

enum got { GOT_READY, GOT_SPAWN_FAILED, GOT_STOPPED };

/*
 * The slot's process, ready: the one there when it is of h as configured now, else a new
 * one (the old one retired). Waits through the class's backoff while starts fail.
 */
static enum got pool_ready(struct warm_pool *p, int slot, const struct handler *h,
                           const struct run_request *req, struct run_result *res)
{
	struct warm_proc *w = p->procs[slot];

	if (w && !same_print(w, h)) {
		metrics_inc(METRIC_WARM_RECYCLED_RELOAD);
		log_info("warm: %s pid=%d: its handler changed; replaced", w->cls, (int)w->pid);
		pool_retire(p, w);
		p->procs[slot] = w = NULL;
	}
	for (;;) {
		/* A ready process that died or spoke while idle can't take a job: what it sent
		 * would read as the job's answer. */
		const char *bad = w && w->ready ? idle_check(w) : NULL;
		if (bad) {
			char st[64] = "";
			if (w->exited)
				status_text(w->wstatus, st, sizeof st);
			metrics_inc(METRIC_WARM_CRASHED);
			log_warn("warm: %s pid=%d %s%s%s; starting another", w->cls, (int)w->pid, bad,
			         *st ? " with " : "", st);
			p->procs[slot] = NULL;
			if (!w->exited)
				proc_kill(w);
			drain_after_exit(w);
			if (w->exited)
				proc_free(w);
			else
				pool_retire(p, w);
			w = NULL;
		}
		if (w && w->ready)
			return GOT_READY;
		if (!w) {
			double wait = health_wait(h->class_name);
			if (wait > 0 && wait_unless_stopped(p, req, wait) < 0)
				return GOT_STOPPED;
			w = proc_start(h, req, res);
			if (!w)
				return GOT_SPAWN_FAILED;
			p->procs[slot] = w;
		}
		struct serve s = { .pool = p, .phase = PH_READY, .req = &w->idle_req,
		                   .ready_by = w->born + h->warm_start_timeout };
		struct run_request watch = w->idle_req;
		watch.abort = req->abort;
		watch.cancel = req->cancel;
		watch.stopping = req->stopping;
		s.req = &watch;
		/* A process kept while starting (its job was stopped) may have said "ready" long
		 * ago: read it before its warm_start_timeout is judged. */
		if (!w->ready && sock_read(w, &s) < 0)
			s.eof_at = mono_now();
		proc_serve(w, &s);
		if (w->ready && !s.broken && !w->exited) {
			health_ok(h->class_name);
			return GOT_READY;
		}
		if (!s.broken && !w->exited)
			return GOT_STOPPED;     /* still starting: kept for the next job */
		p->procs[slot] = NULL;
		start_failed(p, w, s.broken ? s.why : NULL);
		w = NULL;
		if (stop_asked(req))
			return GOT_STOPPED;
	}
}

/* ----------------------------------------------------------------------------------------
 * A job
 * ------------------------------------------------------------------------------------- */

static void result_stopped(const struct run_request *req, struct run_result *res)
{
	res->status = req->cancel && atomic_load(req->cancel) ? RUN_CANCELLED : RUN_ABORTED;
	res->code = 0;
	res->tail = xstrdup("");
}

/* How the job ended when the process did not say "done". */
static void result_lost(struct warm_proc *w, const struct serve *s, struct run_result *res)
{
	res->code = 0;
	if (s->why_kill == KW_TIMEOUT)
		res->status = RUN_TIMEOUT;
	else if (s->why_kill == KW_ABORT)
		res->status = RUN_ABORTED;
	else if (s->why_kill == KW_CANCEL)
		res->status = RUN_CANCELLED;
	else if (s->undelivered) {
		res->status = RUN_WARM_BROKEN;
		res->detail = xasprintf("%d warm processes in a row ended before they had read the "
		                        "whole job", WARM_DELIVERY_TRIES);
	} else if (s->broken) {
		res->status = RUN_WARM_BROKEN;
		res->detail = xasprintf("warm process broke the protocol: %s", s->why);
	} else if (w->exited && w->wstatus != -1 && WIFSIGNALED(w->wstatus)) {
		res->status = RUN_SIGNALED;
		res->code = WTERMSIG(w->wstatus);
	} else if (w->exited && w->wstatus != -1 && WIFEXITED(w->wstatus) &&
	           WEXITSTATUS(w->wstatus) != 0) {
		res->status = RUN_EXITED;
		res->code = WEXITSTATUS(w->wstatus);
	} else {
		res->status = RUN_WARM_BROKEN;
		res->detail = xstrdup("warm process exited (status 0) before \"done\"");
	}
}

/* After the job: is w to be replaced, and why (NULL: kept). */
static const char *recycle_reason(struct warm_proc *w, const struct serve *s, enum metric *m)
{
	if (s->why_kill != KW_NONE) {
		*m = METRIC_WARM_RECYCLED_CANCEL;
		return s->why_kill == KW_TIMEOUT ? "its job timed out"
		       : s->why_kill == KW_ABORT ? "its job was stopped" : "its job was cancelled";
	}
	if (s->done_msg.recycle) {
		*m = METRIC_WARM_RECYCLED_ASKED;
		return "it asked to be recycled";
	}
	if (w->max_jobs > 0 && w->jobs >= w->max_jobs) {
		*m = METRIC_WARM_RECYCLED_JOBS;
		return "it ran warm_max_jobs jobs";
	}
	if (w->max_age > 0 && mono_now() - w->born >= w->max_age) {
		*m = METRIC_WARM_RECYCLED_AGE;
		return "it is older than warm_max_age";
	}
	if (w->max_rss > 0) {
		long long rss = proc_rss(w->pid);
		if (rss > w->max_rss) {
			*m = METRIC_WARM_RECYCLED_RSS;
			return "its RSS is over warm_max_rss";
		}
	}
	return NULL;
}

/*
 * One try of the job on the slot's ready process: 1 done or lost (res filled), 0 the
 * message could not be delivered (nothing started; the process is gone). *partials counts
 * the processes that took part of the message and ended before the rest: the job may be
 * what kills them (a memory limit on a large one), so the WARM_DELIVERY_TRIES-th fails it
 * instead of handing it on for ever. A process gone before it took a byte died idle.
 */
static int run_on(struct warm_pool *p, int slot, const struct handler *h,
                  const struct run_request *req, const char *raw, size_t rawlen,
                  struct run_result *res, int *partials)
{
	struct warm_proc *w = p->procs[slot];
	double deadline = req->timeout > 0 ? now_float() + req->timeout : 0;
	struct serve s = { .pool = p, .phase = PH_JOB, .req = req };
	char *msg = warm_job_message(raw, rawlen, deadline, &s.msglen);
	char *jid = NULL;
	size_t at, n;
	if (json_member_span(raw, rawlen, "jid", &at, &n) == 0)
		jid = json_string_decode(raw + at, n, &n);
	s.jid = jid;

	s.msg = msg;
	s.deadline = req->timeout > 0 ? mono_now() + req->timeout : 0;
	outpipes_drain(w->o);               /* what it printed idle is not the job's */
	outpipes_end_run(w->o);
	outpipes_begin(w->o, req);
	res->pid = (int)w->pid;
	sock_write(w, &s);
	proc_serve(w, &s);
	free(msg);
	free(jid);
	s.jid = NULL;
	if (s.undelivered && s.why_kill == KW_NONE && !s.done &&
	    (s.off == 0 || ++*partials < WARM_DELIVERY_TRIES)) {
		outpipes_begin(w->o, &w->idle_req);
		p->procs[slot] = NULL;
		metrics_inc(METRIC_WARM_CRASHED);
		if (!w->exited)
			proc_kill(w);
		log_warn("warm: %s pid=%d could not take a job (it is gone); the job goes to a new "
		         "process, no attempt counted", w->cls, (int)w->pid);
		drain_after_exit(w);
		if (w->exited)
			proc_free(w);
		else
			pool_retire(p, w);
		return 0;
	}
	if (s.done) {
		outpipes_drain(w->o);
		res->status = s.why_kill == KW_TIMEOUT ? RUN_TIMEOUT : s.why_kill == KW_ABORT
		              ? RUN_ABORTED : s.why_kill == KW_CANCEL ? RUN_CANCELLED : RUN_EXITED;
		res->code = res->status == RUN_EXITED ? s.done_msg.exit : 0;
	} else {
		if (!w->exited)
			proc_kill(w);
		drain_after_exit(w);
		result_lost(w, &s, res);
	}
	outpipes_end_run(w->o);
	if (s.done && s.done_msg.error) {
		/* In place of the stderr tail, so held to its size (a line may be 1 MiB, and
		 * the tail goes to the history and the attempts log): the end is kept, as the
		 * tail's is. */
		size_t keep = s.done_msg.error_len < req->output_tail ? s.done_msg.error_len
		              : req->output_tail;
		res->tail = xmalloc(keep + 1);
		memcpy(res->tail, s.done_msg.error + s.done_msg.error_len - keep, keep);
		res->tail[keep] = '\0';
		res->tail_len = keep;
	} else {
		res->tail = outpipes_tail(w->o, &res->tail_len);
	}
	outpipes_begin(w->o, &w->idle_req);
	w->used = mono_now();
	w->jobs++;

	if (!s.done) {                      /* it died, was killed or broke the protocol */
		char st[64] = "";
		if (w->exited)
			status_text(w->wstatus, st, sizeof st);
		if (s.why_kill == KW_NONE) {
			metrics_inc(METRIC_WARM_CRASHED);
			log_warn("warm: %s pid=%d %s%s while running a job; a new process takes its "
			         "place", w->cls, (int)w->pid, s.broken ? "broke the protocol: " :
			         "ended with ", s.broken ? s.why : st);
		} else {
			metrics_inc(METRIC_WARM_RECYCLED_CANCEL);
		}
		p->procs[slot] = NULL;
		if (w->exited)
			proc_free(w);
		else
			pool_retire(p, w);
		warm_msg_free(&s.done_msg);
		return 1;
	}
	enum metric m = METRIC_WARM_RECYCLED_JOBS;
	const char *why = s.broken ? NULL : recycle_reason(w, &s, &m);
	if (s.broken) {                     /* a message after "done": its job stands */
		metrics_inc(METRIC_WARM_CRASHED);
		log_warn("warm: %s pid=%d broke the protocol: %s; replaced", w->cls, (int)w->pid,
		         s.why);
		p->procs[slot] = NULL;
		proc_kill(w);
		if (w->exited)
			proc_free(w);
		else
			pool_retire(p, w);
	} else if (why) {
		metrics_inc(m);
		log_info("warm: %s pid=%d: %s after %ld job(s); replaced", w->cls, (int)w->pid, why,
		         w->jobs);
		p->procs[slot] = NULL;
		pool_retire(p, w);
		/* A hard timeout stays hard: the grace that began at the cancel covers the exit
		 * too, not a further kill_grace from a late "done". */
		if (s.why_kill != KW_NONE && s.kill_at < w->kill_at)
			w->kill_at = s.kill_at;
		/* The replacement warms up while this job is settled and the next fetched. */
		struct run_result fail;
		struct warm_proc *fresh = s.why_kill == KW_ABORT ? NULL : proc_start(h, req, &fail);
		if (fresh)
			p->procs[slot] = fresh;
		else if (s.why_kill != KW_ABORT)
			run_result_free(&fail);
	}
	warm_msg_free(&s.done_msg);
	return 1;
}

int warm_pool_run(struct warm_pool *p, const struct handler *h, const struct run_request *req,
                  const char *raw, size_t rawlen, struct run_result *res)
{
	int slot = pool_slot(p, h->class_name);
	int partials = 0;

	memset(res, 0, sizeof *res);
	res->started = now_float();
	for (int tries = 0;; tries++) {
		enum got g = pool_ready(p, slot, h, req, res);
		if (g == GOT_SPAWN_FAILED)
			return 0;
		if (g == GOT_STOPPED) {
			result_stopped(req, res);
			break;
		}
		res->started = now_float();
		if (run_on(p, slot, h, req, raw, rawlen, res, &partials))
			break;
		/* Not delivered: nothing started. Past a few processes in a row, it counts as a
		 * start failure of the class, so the next try waits for the backoff. */
		if (tries + 1 >= WARM_DELIVERY_TRIES)
			health_failed(h->class_name, "processes died before they could take a job");
	}
	res->finished = now_float();
	return 0;
}

/* ----------------------------------------------------------------------------------------
 * Between jobs
 * ------------------------------------------------------------------------------------- */

static double tend_retiring(struct warm_pool *p, double now)
{
	double next = 0;

	for (struct warm_proc **pp = &p->retiring; *pp;) {
		struct warm_proc *w = *pp;
		outpipes_drain(w->o);
		proc_try_reap(w);
		if (!w->exited && now >= w->kill_at) {
			group_signal(w->pid, SIGKILL);
			proc_try_reap(w);
		}
		if (w->exited) {
			*pp = w->next;
			proc_free(w);
			continue;
		}
		double due = w->kill_at > now ? w->kill_at - now : WARM_TICK;
		if (next == 0 || due < next)
			next = due;
		pp = &w->next;
	}
	return next;
}

double warm_pool_tend(struct warm_pool *p, const struct conf *c)
{
	double now = mono_now(), next = 0;

	if (!p)
		return 0;
	for (int i = 0; i < p->n; i++) {
		struct warm_proc *w = p->procs[i];
		if (!w)
			continue;
		const struct handler *h = conf_find_handler(c, w->cls);
		char buf[400];
		const char *why = w->ready ? idle_check(w) : starting_check(w, now, buf, sizeof buf);
		enum metric m = METRIC_WARM_CRASHED;
		if (why) {
			char st[64] = "";
			if (w->exited)
				status_text(w->wstatus, st, sizeof st);
			log_warn("warm: %s pid=%d %s%s%s; dropped", w->cls, (int)w->pid, why,
			         *st ? " with " : "", st);
		} else if (!h || !h->warm || !same_print(w, h)) {
			why = "its handler changed";
			m = METRIC_WARM_RECYCLED_RELOAD;
		} else if (w->idle_timeout > 0 && now - w->used >= w->idle_timeout) {
			why = "idle for warm_idle_timeout";
			m = METRIC_WARM_RECYCLED_IDLE;
		} else if (w->max_age > 0 && now - w->born >= w->max_age) {
			why = "older than warm_max_age";
			m = METRIC_WARM_RECYCLED_AGE;
		}
		if (why) {
			metrics_inc(m);
			if (m != METRIC_WARM_CRASHED)
				log_info("warm: %s pid=%d: %s; retired", w->cls, (int)w->pid, why);
			p->procs[i] = NULL;
			if (w->exited) {
				drain_after_exit(w);
				proc_free(w);
			} else {
				pool_retire(p, w);
			}
			continue;
		}
		double due = w->idle_timeout > 0 ? w->used + w->idle_timeout - now : 0;
		if (w->max_age > 0 && (due == 0 || w->born + w->max_age - now < due))
			due = w->born + w->max_age - now;
		if (due > 0 && (next == 0 || due < next))
			next = due;
	}
	double r = tend_retiring(p, now);
	if (r > 0 && (next == 0 || r < next))
		next = r;
	/* A reload, or a process that died idle, is seen within WARM_TEND_IDLE. */
	for (int i = 0; i < p->n; i++)
		if (p->procs[i] && (next == 0 || next > WARM_TEND_IDLE))
			next = WARM_TEND_IDLE;
	return next;
}

struct warm_pool *warm_pool_new(void)
{
	return xcalloc(1, sizeof(struct warm_pool));
}

void warm_pool_free(struct warm_pool *p, double grace)
{
	if (!p)
		return;
	double now = mono_now();
	for (int i = 0; i < p->n; i++) {
		struct warm_proc *w = p->procs[i];
		if (!w)
			continue;
		pool_retire(p, w);
		if (w->kill_at > now + grace)
			w->kill_at = now + grace;
	}
	for (struct warm_proc *w = p->retiring; w; w = w->next)
		if (w->kill_at > now + grace)
			w->kill_at = now + grace;
	while (p->retiring && mono_now() < now + grace + WARM_REAP_WAIT) {
		tend_retiring(p, mono_now());
		if (p->retiring)
			sleep_seconds(0.02);
	}
	for (struct warm_proc *w = p->retiring, *n; w; w = n) {
		n = w->next;
		log_warn("warm: %s pid=%d not reaped at exit (its group was killed)", w->cls,
		         (int)w->pid);
		proc_free(w);
	}
	free(p->procs);
	free(p);
}
