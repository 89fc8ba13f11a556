/* SPDX-License-Identifier: MIT */
/*
 * warm_serve.c: one exchange with a warm process (doc/protocol.md §1.2): waiting for its
 * "ready", or serving one job.
 *
 * A job on a process (warm_serve, one poll loop like the cold pump's): the job message is
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
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "json.h"
#include "log.h"
#include "warm_int.h"

/* Before the job starts: give up waiting for a process. */
int warm_stop_asked(const struct run_request *req)
{
	return (req->abort && atomic_load(req->abort)) || (req->cancel && atomic_load(req->cancel)) ||
	       (req->stopping && atomic_load(req->stopping));
}


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
		warm_proc_sigkill(w);
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
int warm_sock_read(struct warm_proc *w, struct serve *s)
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
		int got = warm_sock_read(w, s);
		if (got < 0)
			s->eof_at = mono_now();
		if (got <= 0)
			break;
	}
}

void warm_sock_write(struct warm_proc *w, struct serve *s)
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
	if (s->beside_at > 0 && s->beside_at - now < t)
		t = s->beside_at - now;
	return t < 0 ? 0 : (int)(t * 1000.0 + 0.999);
}

/* The caller's work beside the job (run_request.beside) is due: only once the job is
 * written whole, so the process has all of it while the caller is away. */
static int beside_due(const struct serve *s, double now)
{
	return s->phase == PH_JOB && s->beside_at >= 0 && now >= s->beside_at &&
	       s->off == s->msglen;
}

/* Serve w until the phase ends: ready, done, exit, a protocol error or no delivery. */
void warm_serve(struct warm_proc *w, struct serve *s)
{
	for (;;) {
		struct pollfd fds[4];
		int nfds = 0, i_sock = -1, i_out, i_err, i_pid = -1;
		double now = mono_now();

		serve_tick(w, s, now);
		if (s->done || s->broken || s->undelivered || w->exited ||
		    (s->phase == PH_READY && (w->ready || warm_stop_asked(s->req))))
			break;
		if (beside_due(s, now)) {
			double at = s->req->beside(s->req->ctx);
			s->beside_at = at > 0 ? at : -1;
			now = mono_now();
			serve_tick(w, s, now);      /* what came due meanwhile: a timeout, a cancel */
		}
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
			warm_sock_write(w, s);
		if (n > 0 && i_sock >= 0 && (fds[i_sock].revents & (POLLIN | POLLHUP | POLLERR)) &&
		    warm_sock_read(w, s) < 0)
			s->eof_at = mono_now();
		if (s->eof_at > 0 && s->off < s->msglen)
			s->undelivered = 1;     /* gone before it had the whole job */
		if (n > 0)
			outpipes_ready(w->o, fds, i_out, i_err);
		if (w->pidfd < 0 || (n > 0 && i_pid >= 0 && fds[i_pid].revents))
			warm_proc_reap(w);
		if (w->exited)
			sock_read_rest(w, s);
		if (w->exited && s->off < s->msglen)
			s->undelivered = 1;     /* seen exited before its EOF: the same */
		/* A retired process is killed after its grace even while this one works for an
		 * hour: the tend between jobs would come too late (a process recycled for its
		 * RSS, or one whose job timed out, lingering). */
		if (s->pool && s->pool->retiring && now >= s->next_tend) {
			warm_tend_retiring(s->pool, mono_now());
			s->next_tend = now + WARM_TICK;
		}
	}
}

