/* SPDX-License-Identifier: MIT */
/*
 * pump.c: serving a running handler child until it and its process group are gone: its
 * stdin fed, its output read and cut into lines, its exit noticed, its timeout and abort
 * enforced.
 *
 * One poll() loop per child serves everything at once: what the spawn could not write of
 * the job JSON beforehand (spawn.c) written to stdin in non-blocking chunks (EPIPE = the
 * child closed stdin: the rest is dropped, not an error), stdout and stderr read in 64 KiB
 * chunks and cut into lines for the log and for on_stdout_line (lines longer than
 * HANDLER_LINE_MAX are split, so memory stays bounded however much the child prints; the
 * last req->output_tail bytes of stderr go to a ring buffer), and a pidfd (from the
 * spawn's CLONE_PIDFD, else pidfd_open, Linux >= 5.3) that becomes readable when the child
 * exits; without pidfds the loop falls back to waitpid(WNOHANG) every 10 ms. We hold our
 * own copies of the output pipes' write ends until the child has exited, so a child's end
 * is one wake-up (the pidfd), not two (EOF first, the exit a moment later). No SIGCHLD
 * handler is involved: signals belong to the main thread. The child is reaped with
 * wait4(pid) — never waitpid(-1), which would steal other fetchers' children — whose
 * rusage is the run's cost (usage.h): its CPU and that of the descendants it waited for. The poll
 * timeout is at most 100 ms so the abort flag is noticed promptly. What reaches the log is
 * capped per stream and run (HANDLER_LOG_BUDGET), counted as the log gets it, each line
 * with its prefix and escaping: a flooding handler keeps its tail and callback, but cannot
 * flood the journal (counted by content, 5 MB of empty lines once wrote 121 MB of log).
 *
 * Timeout, abort and cancel: SIGTERM to the process group, then the grace period
 * (kill_grace, or abort_grace for an abort) during which output is still pumped; the grace
 * ends early once the whole group is gone; then SIGKILL to the group. A cancel seen before
 * the leader was reaped decides the outcome (RUN_CANCELLED), even over a timeout or an
 * abort already in progress: whoever asked for it is told the job was cancelled, and it is
 * settled once, as that. A cancel raised after the reap changes nothing here.
 *
 * The grandchild rule
 * -------------------
 * A handler must not leave work behind: whatever is still in the child's process group
 * when the child (the group leader) has exited is sent SIGKILL, also after a normal exit
 * (exit 0 with a backgrounded grandchild included), without a grace period: the job's
 * outcome is already decided and its leftovers are not part of it. After a timeout or an
 * abort, the grace applies to the whole group before the final SIGKILL. A grandchild that
 * left the group (its own setsid) is out of reach of the group's kill: with a cgroup
 * (req->cgroup, jobcg.h) the same SIGKILL goes to everything in the cgroup, and
 * handler_run waits for it to be empty; without one it lives on (systemd's cgroup kill
 * covers it at the stop). It may hold the output pipes open: so after the leader exits,
 * output is drained only for at most HANDLER_DRAIN_SECS, never until EOF.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "handler.h"
#include "handler_int.h"
#include "jobcg.h"
#include "log.h"
#include "util.h"

#define HANDLER_LINE_MAX    8192        /* longer output lines are split */
#define HANDLER_LOG_BUDGET  (1 << 20)   /* log bytes per stream and run, lines as written */
/* Kept within the budget for the line saying "cut": some 190 bytes as text, 270 as JSON,
 * which also carries the job's class, jid and queue (a job with longer ones takes more). */
#define HANDLER_LOG_NOTICE  512
#define HANDLER_CHUNK       65536       /* one read() / write() */
#define HANDLER_TICK        0.1         /* max poll() sleep: abort flag latency */
#define HANDLER_REAP_TICK   0.01        /* poll() sleep without a pidfd */
#define HANDLER_DRAIN_SECS  0.1         /* output drained after the group is gone */

/* ----------------------------------------------------------------------------------------
 * Output: lines for the log and the callback, a ring buffer for the stderr tail
 * ------------------------------------------------------------------------------------- */

struct linebuf {
	size_t len;             /* first: setting it touches one page, not the buffer's two */
	char buf[HANDLER_LINE_MAX];
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

/* malloc'd, not calloc'd, and the big buffers last and never cleared: a handler that
 * prints nothing leaves their pages untouched (RSS per fetcher, and a memset per job). */
struct outpipes {
	const struct run_request *req;
	int out, err;                   /* read ends; -1 = closed */
	int out_lines, err_lines;       /* cut the streams into lines at all */
	size_t logged[2];               /* log bytes the stream's lines took */
	int cut[2];                     /* the budget is spent: no more lines logged */
	struct ring tail;
	struct linebuf out_line, err_line;
	char chunk[HANDLER_CHUNK];
};

struct pump {
	const struct run_request *req;
	struct child_io io;
	int pidfd;
	size_t in_off;
	int epipe;                      /* a stdin write raised SIGPIPE */
	struct outpipes *o;
};

static void emit_line(struct outpipes *p, int is_err, const char *s, size_t n)
{
	const struct run_request *req = p->req;

	/*
	 * A handler that floods its output must not flood the journal (nor slow the daemon
	 * down writing it, nor get the daemon's own lines rate-limited away): past the budget,
	 * lines are still read and fed to the tail and the callback, but no longer logged. The
	 * budget counts what the log gets, prefix and escaping included, so a line is written
	 * only if all of it fits (HANDLER_LOG_NOTICE stays free for the line that says so,
	 * once per stream).
	 */
	if (req->log_output && !p->cut[is_err]) {
		const char *tag = req->log_tag ? req->log_tag : "handler";
		const char *stream = is_err ? "stderr" : "stdout";
		const struct log_field f[] = { { "stream", stream, 0 } };
		size_t room = HANDLER_LOG_BUDGET - HANDLER_LOG_NOTICE - p->logged[is_err];
		size_t took = log_data_within(room, LOG_INFO, "output", f, 1, s, n, "%s %s: ", tag,
		                              stream);
		if (took != LOG_NO_ROOM) {
			p->logged[is_err] += took;
		} else {
			p->cut[is_err] = 1;
			p->logged[is_err] += log_warn("%s %s: output past %d KiB of log; the rest of "
			                              "this run's %s is not logged", tag, stream,
			                              HANDLER_LOG_BUDGET / 1024, stream);
		}
	}
	if (!is_err && req->on_stdout_line)
		req->on_stdout_line(req->ctx, s, n);
}

/* Cut data into lines; a line reaching HANDLER_LINE_MAX bytes is emitted as it is. */
static void lines_feed(struct outpipes *p, int is_err, const char *s, size_t n)
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

/* At EOF, or at the end of a warm job: an unterminated last line is still a line. */
static void lines_flush(struct outpipes *p, int is_err)
{
	struct linebuf *lb = is_err ? &p->err_line : &p->out_line;

	if (lb->len && (is_err ? p->err_lines : p->out_lines))
		emit_line(p, is_err, lb->buf, lb->len);
	lb->len = 0;
}

static void output_close(struct outpipes *p, int is_err)
{
	int *fd = is_err ? &p->err : &p->out;

	if (*fd < 0)
		return;
	close_fd(fd);
	lines_flush(p, is_err);
}

/* One read from stdout or stderr: 1 when it read something. */
static int output_read(struct outpipes *p, int is_err)
{
	int fd = is_err ? p->err : p->out;
	ssize_t n = read(fd, p->chunk, sizeof p->chunk);

	if (n > 0) {
		if (p->req->on_output)
			p->req->on_output(p->req->ctx, p->chunk, (size_t)n);
		if (is_err)
			ring_add(&p->tail, p->chunk, (size_t)n);
		if (is_err ? p->err_lines : p->out_lines)
			lines_feed(p, is_err, p->chunk, (size_t)n);
		return 1;
	}
	if (n == 0 || (errno != EAGAIN && errno != EINTR))
		output_close(p, is_err);
	return 0;
}

struct outpipes *outpipes_new(int out, int err)
{
	struct outpipes *p = xmalloc(sizeof *p);

	memset(p, 0, offsetof(struct outpipes, out_line));
	p->out_line.len = p->err_line.len = 0;
	p->out = out;
	p->err = err;
	return p;
}

void outpipes_begin(struct outpipes *p, const struct run_request *req)
{
	p->req = req;
	p->out_lines = req->log_output || req->on_stdout_line;
	p->err_lines = req->log_output;
	p->logged[0] = p->logged[1] = 0;
	p->cut[0] = p->cut[1] = 0;
	if (p->tail.cap != req->output_tail) {
		free(p->tail.buf);
		p->tail.cap = req->output_tail;
		p->tail.buf = req->output_tail ? xmalloc(req->output_tail) : NULL;
	}
	p->tail.head = p->tail.len = 0;
}

int outpipes_poll(const struct outpipes *p, struct pollfd *fds, int *nfds, int *i_out,
                  int *i_err)
{
	*i_out = *i_err = -1;
	if (p->out >= 0) {
		*i_out = *nfds;
		fds[(*nfds)++] = (struct pollfd){ .fd = p->out, .events = POLLIN };
	}
	if (p->err >= 0) {
		*i_err = *nfds;
		fds[(*nfds)++] = (struct pollfd){ .fd = p->err, .events = POLLIN };
	}
	return p->out >= 0 || p->err >= 0;
}

void outpipes_ready(struct outpipes *p, const struct pollfd *fds, int i_out, int i_err)
{
	/* Hung up with nothing to read: EOF without a read() to find out. */
	for (int k = 0; k < 2; k++) {
		int i = k ? i_err : i_out;
		if (i < 0 || !fds[i].revents)
			continue;
		if ((fds[i].revents & (POLLIN | POLLHUP)) == POLLHUP)
			output_close(p, k);
		else
			output_read(p, k);
	}
}

void outpipes_drain(struct outpipes *p)
{
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < 64 && (k ? p->err : p->out) >= 0 && output_read(p, k); i++)
			;
}

void outpipes_end_run(struct outpipes *p)
{
	lines_flush(p, 0);
	lines_flush(p, 1);
}

char *outpipes_tail(const struct outpipes *p, size_t *len)
{
	return ring_take(&p->tail, len);
}

int outpipes_open(const struct outpipes *p)
{
	return p->out >= 0 || p->err >= 0;
}

void outpipes_free(struct outpipes *p)
{
	if (!p)
		return;
	output_close(p, 0);
	output_close(p, 1);
	free(p->tail.buf);
	free(p);
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

enum kill_reason { KILL_NONE, KILL_TIMEOUT, KILL_ABORT, KILL_CANCEL };

struct watch {
	pid_t pid;
	int exited, wstatus;
	enum kill_reason reason;
	double deadline;                /* timeout (monotonic), 0 = none */
	double kill_at;                 /* SIGKILL after the grace, once TERMed */
	int killed;                     /* SIGKILL sent to the group */
	double drain_until;             /* once exited and killed: stop reading output then */
	double next_group_check;        /* group_alive() rate limit (it may scan /proc) */
	struct run_usage usage;         /* wait4's rusage, once reaped */
};

void group_signal(pid_t pgid, int sig)
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
int group_alive(pid_t pgid)
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
		return;
	}
	if (why == KILL_CANCEL)
		w->reason = why;            /* TERMed already: the cancel names the outcome */
	if (now + grace < w->kill_at)
		w->kill_at = now + grace;   /* abort during a timeout's grace: the shorter wins */
}

static void try_reap(struct watch *w)
{
	int st;
	struct rusage ru;
	pid_t r = wait4(w->pid, &st, WNOHANG, &ru);

	if (r == w->pid) {
		w->exited = 1;
		w->wstatus = st;
		usage_from_rusage(&w->usage, &ru);
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

	if (!w->exited && req->cancel && atomic_load(req->cancel) && w->reason != KILL_CANCEL)
		start_kill(w, KILL_CANCEL, req->kill_grace, now);
	/* After a cancel this only shortens the grace: the stop's deadline still holds. */
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
			if (req->cgroup)        /* the escaped ones: they may hold our pipes too */
				jobcg_kill(req->cgroup);
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
	return !outpipes_open(p->o) || now >= w->drain_until;
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
		if (w->exited) {
			close_fd(&p->io.in);
			/* Our write ends go now, so that the output reaches EOF once drained. */
			close_fd(&p->io.out_w);
			close_fd(&p->io.err_w);
		}
		if (p->io.in >= 0) {
			i_in = nfds;
			fds[nfds++] = (struct pollfd){ .fd = p->io.in, .events = POLLOUT };
		}
		outpipes_poll(p->o, fds, &nfds, &i_out, &i_err);
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
		if (n > 0)
			outpipes_ready(p->o, fds, i_out, i_err);
		if (!w->exited && (p->pidfd < 0 || (n > 0 && i_pid >= 0 && fds[i_pid].revents)))
			try_reap(w);
	}
	close_fd(&p->io.in);
	close_fd(&p->io.out_w);
	close_fd(&p->io.err_w);
}

static void fill_outcome(struct run_result *res, const struct watch *w)
{
	if (w->reason == KILL_TIMEOUT) {
		res->status = RUN_TIMEOUT;
		res->code = 0;
	} else if (w->reason == KILL_ABORT) {
		res->status = RUN_ABORTED;
		res->code = 0;
	} else if (w->reason == KILL_CANCEL) {
		res->status = RUN_CANCELLED;
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

int pump_run(const struct run_request *req, const struct child_io *io, pid_t pid,
             struct run_result *res)
{
	struct pump *p = xcalloc(1, sizeof *p);
	struct watch w;
	int epipe;

	p->req = req;
	p->io = *io;
	p->in_off = io->in_off;
	p->pidfd = io->pidfd;
	if (p->pidfd < 0)       /* CLOEXEC; -1: poll waitpid */
		p->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	p->o = outpipes_new(io->out, io->err);
	outpipes_begin(p->o, req);
	if (!req->stdin_data || !req->stdin_len)
		close_fd(&p->io.in);

	memset(&w, 0, sizeof w);
	w.pid = pid;
	usage_none(&w.usage);
	if (req->timeout > 0)
		w.deadline = mono_now() + req->timeout;
	pump_loop(p, &w);              /* returns once the child is reaped and its group killed */

	fill_outcome(res, &w);
	res->usage = w.usage;
	outpipes_end_run(p->o);
	res->tail = outpipes_tail(p->o, &res->tail_len);
	outpipes_free(p->o);
	close_fd(&p->pidfd);
	epipe = p->epipe;
	free(p);
	return epipe;
}
