/* SPDX-License-Identifier: MIT */
/*
 * warm.c: the pool of warm handlers (doc/design.md "Warm handlers", doc/protocol.md §1.2): long-lived
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
 * The pool is this file; one process's life (start, reap, kill, retire) is warm_proc.c and
 * one exchange with a process (its "ready", a job) is warm_serve.c (warm_int.h says how
 * they stand).
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
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "counters.h"
#include "jobcg.h"
#include "json.h"
#include "log.h"
#include "usage.h"
#include "warm_int.h"

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
 * Getting a ready process
 * ------------------------------------------------------------------------------------- */

/* Sleep up to s, in ticks, unless the job is aborted or cancelled: 0 slept, -1 stopped.
 * The pool's retiring processes are tended meanwhile. */
static int wait_unless_stopped(struct warm_pool *p, const struct run_request *req, double s)
{
	for (double until = mono_now() + s; mono_now() < until;) {
		if (warm_stop_asked(req))
			return -1;
		if (p->retiring)
			warm_tend_retiring(p, mono_now());
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
		warm_proc_kill(w);
	warm_drain_after_exit(w);
	if (why) {
		snprintf(line, sizeof line, "process pid=%d %s", (int)w->pid, why);
	} else {
		char st[64];
		warm_status_text(w->wstatus, st, sizeof st);
		snprintf(line, sizeof line, "process pid=%d exited before \"ready\" (%s)",
		         (int)w->pid, st);
	}
	metrics_inc(METRIC_WARM_CRASHED);
	health_failed(w->cls, line);
	if (w->exited) {
		warm_proc_free(w);
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
	int eof = warm_sock_read(w, &s) < 0;
	warm_proc_reap(w);
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
	warm_proc_reap(w);
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

	if (w && !warm_same_print(w, h)) {
		metrics_inc(METRIC_WARM_RECYCLED_RELOAD);
		log_info("warm: %s pid=%d: its handler changed; replaced", w->cls, (int)w->pid);
		warm_pool_retire(p, w);
		p->procs[slot] = w = NULL;
	}
	for (;;) {
		/* A ready process that died or spoke while idle can't take a job: what it sent
		 * would read as the job's answer. */
		const char *bad = w && w->ready ? idle_check(w) : NULL;
		if (bad) {
			char st[64] = "";
			if (w->exited)
				warm_status_text(w->wstatus, st, sizeof st);
			metrics_inc(METRIC_WARM_CRASHED);
			log_warn("warm: %s pid=%d %s%s%s; starting another", w->cls, (int)w->pid, bad,
			         *st ? " with " : "", st);
			p->procs[slot] = NULL;
			if (!w->exited)
				warm_proc_kill(w);
			warm_drain_after_exit(w);
			if (w->exited)
				warm_proc_free(w);
			else
				warm_pool_retire(p, w);
			w = NULL;
		}
		if (w && w->ready)
			return GOT_READY;
		if (!w) {
			double wait = health_wait(h->class_name);
			if (wait > 0 && wait_unless_stopped(p, req, wait) < 0)
				return GOT_STOPPED;
			w = warm_proc_start(h, req, res);
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
		if (!w->ready && warm_sock_read(w, &s) < 0)
			s.eof_at = mono_now();
		warm_serve(w, &s);
		if (w->ready && !s.broken && !w->exited) {
			health_ok(h->class_name);
			return GOT_READY;
		}
		if (!s.broken && !w->exited)
			return GOT_STOPPED;     /* still starting: kept for the next job */
		p->procs[slot] = NULL;
		start_failed(p, w, s.broken ? s.why : NULL);
		w = NULL;
		if (warm_stop_asked(req))
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
		long long rss = warm_proc_rss(w->pid);
		if (rss > w->max_rss) {
			*m = METRIC_WARM_RECYCLED_RSS;
			return "its RSS is over warm_max_rss";
		}
	}
	return NULL;
}

/*
 * What one job cost (usage.h): the process's CPU and peak resident set over the job (its
 * high-water mark reset as the job starts), and with a cgroup of its own that cgroup's
 * counters over the job, whose CPU counts what the process started too.
 */
struct job_cost {
	struct usage_mark proc;
	struct usage_cg_mark cg;
};

static void cost_begin(struct warm_proc *w, struct job_cost *c)
{
	usage_proc_begin(&w->proc, &c->proc, w->cg == NULL);
	if (w->cg)
		usage_cg_begin(jobcg_dir_fd(w->cg), jobcg_cpu_stat_fd(w->cg), &c->cg);
}

/* Before the process is reaped (/proc/<pid> is still its own) when it is to be read. */
static void cost_end(struct warm_proc *w, struct job_cost *c, struct run_usage *u)
{
	usage_none(u);
	if (!w->exited)
		usage_proc_end(&w->proc, &c->proc, u, w->cg == NULL);
	if (w->cg)
		usage_cg_end(jobcg_dir_fd(w->cg), jobcg_cpu_stat_fd(w->cg), &c->cg, u);
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
	struct serve s = { .pool = p, .phase = PH_JOB, .req = req,
	                   .beside_at = req->beside ? 0 : -1 };
	char *msg = warm_job_message(raw, rawlen, deadline, &s.msglen);
	char *jid = json_member_string(raw, rawlen, "jid");
	s.jid = jid;

	s.msg = msg;
	s.deadline = req->timeout > 0 ? mono_now() + req->timeout : 0;
	outpipes_drain(w->o);               /* what it printed idle is not the job's */
	outpipes_end_run(w->o);
	outpipes_begin(w->o, req);
	res->pid = (int)w->pid;
	struct job_cost cost;
	cost_begin(w, &cost);
	if (w->caps)
		capgroup_begin(w->caps);        /* each job its own peak, OOM kills and I/O */
	warm_sock_write(w, &s);
	warm_serve(w, &s);
	cost_end(w, &cost, &res->usage);
	if (w->caps)                        /* after: it fills what the v2 cgroup left unknown */
		capgroup_usage(w->caps, &res->usage);
	free(msg);
	free(jid);
	s.jid = NULL;
	if (s.undelivered && s.why_kill == KW_NONE && !s.done &&
	    (s.off == 0 || ++*partials < WARM_DELIVERY_TRIES)) {
		outpipes_begin(w->o, &w->idle_req);
		p->procs[slot] = NULL;
		metrics_inc(METRIC_WARM_CRASHED);
		if (!w->exited)
			warm_proc_kill(w);
		log_warn("warm: %s pid=%d could not take a job (it is gone); the job goes to a new "
		         "process, no attempt counted", w->cls, (int)w->pid);
		warm_drain_after_exit(w);
		if (w->exited)
			warm_proc_free(w);
		else
			warm_pool_retire(p, w);
		return 0;
	}
	if (s.done) {
		outpipes_drain(w->o);
		res->status = s.why_kill == KW_TIMEOUT ? RUN_TIMEOUT : s.why_kill == KW_ABORT
		              ? RUN_ABORTED : s.why_kill == KW_CANCEL ? RUN_CANCELLED : RUN_EXITED;
		res->code = res->status == RUN_EXITED ? s.done_msg.exit : 0;
	} else {
		if (!w->exited)
			warm_proc_kill(w);
		warm_drain_after_exit(w);
		result_lost(w, &s, res);
	}
	outpipes_end_run(w->o);
	res->tail = outpipes_tail(w->o, &res->tail_len);
	if (s.done && s.done_msg.error) {
		/* Used in place of the stderr tail (run_said), so held to its size (a line may
		 * be 1 MiB, and it goes to the history and the attempts log): the end is kept,
		 * as the tail's is. The tail stays what the job printed, for exec to show. */
		size_t keep = s.done_msg.error_len < req->output_tail ? s.done_msg.error_len
		              : req->output_tail;
		res->error = xmalloc(keep + 1);
		memcpy(res->error, s.done_msg.error + s.done_msg.error_len - keep, keep);
		res->error[keep] = '\0';
		res->error_len = keep;
	}
	outpipes_begin(w->o, &w->idle_req);
	w->used = mono_now();
	w->jobs++;

	if (!s.done) {                      /* it died, was killed or broke the protocol */
		char st[64] = "";
		if (w->exited)
			warm_status_text(w->wstatus, st, sizeof st);
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
			warm_proc_free(w);
		else
			warm_pool_retire(p, w);
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
		warm_proc_kill(w);
		if (w->exited)
			warm_proc_free(w);
		else
			warm_pool_retire(p, w);
	} else if (why) {
		metrics_inc(m);
		log_info("warm: %s pid=%d: %s after %ld job(s); replaced", w->cls, (int)w->pid, why,
		         w->jobs);
		p->procs[slot] = NULL;
		warm_pool_retire(p, w);
		/* A hard timeout stays hard: the grace that began at the cancel covers the exit
		 * too, not a further kill_grace from a late "done". */
		if (s.why_kill != KW_NONE && s.kill_at < w->kill_at)
			w->kill_at = s.kill_at;
		/* The replacement warms up while this job is settled and the next fetched. */
		struct run_result fail;
		struct warm_proc *fresh = s.why_kill == KW_ABORT ? NULL : warm_proc_start(h, req, &fail);
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
	usage_none(&res->usage);
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
				warm_status_text(w->wstatus, st, sizeof st);
			log_warn("warm: %s pid=%d %s%s%s; dropped", w->cls, (int)w->pid, why,
			         *st ? " with " : "", st);
		} else if (!h || !h->warm || !warm_same_print(w, h)) {
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
				warm_drain_after_exit(w);
				warm_proc_free(w);
			} else {
				warm_pool_retire(p, w);
			}
			continue;
		}
		double due = w->idle_timeout > 0 ? w->used + w->idle_timeout - now : 0;
		if (w->max_age > 0 && (due == 0 || w->born + w->max_age - now < due))
			due = w->born + w->max_age - now;
		if (due > 0 && (next == 0 || due < next))
			next = due;
	}
	double r = warm_tend_retiring(p, now);
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
		warm_pool_retire(p, w);
		if (w->kill_at > now + grace)
			w->kill_at = now + grace;
	}
	for (struct warm_proc *w = p->retiring; w; w = w->next)
		if (w->kill_at > now + grace)
			w->kill_at = now + grace;
	while (p->retiring && mono_now() < now + grace + WARM_REAP_WAIT) {
		warm_tend_retiring(p, mono_now());
		if (p->retiring)
			sleep_seconds(0.02);
	}
	for (struct warm_proc *w = p->retiring, *n; w; w = n) {
		n = w->next;
		log_warn("warm: %s pid=%d not reaped at exit (its group was killed)", w->cls,
		         (int)w->pid);
		warm_proc_free(w);
	}
	free(p->procs);
	free(p);
}
