/* SPDX-License-Identifier: MIT */
/*
 * rlink.c: the link under every Redis connection (redis.c, sentinel.c, the subscribers):
 * a socket we own, the bytes queued to send, and hiredis's reply reader.
 *
 * Why not a hiredis context: hiredis 0.14 does its own read(2) and write(2) on the
 * context's fd, so nothing can be put between it and the socket (TLS, doc/design.md
 * "Pitfalls"). Its formatter and its reader are public, though, and they are all of the
 * protocol; the rest is a socket, which is kept as hiredis kept it so that the plain path
 * costs the same system calls: one write(2) for what is queued, one read(2) per 16 KiB of
 * reply, on a blocking socket whose SO_RCVTIMEO/SO_SNDTIMEO is the command timeout.
 *
 * - Connect: non-blocking connect(2) and poll(2) until the connect timeout (across every
 *   address the name resolves to: IPv4 first, as hiredis did, then IPv6), then blocking.
 *   TCP gets TCP_NODELAY and keepalive (idle 15 s, then 3 probes 5 s apart: hiredis's
 *   values). Sockets are close-on-exec, so that no handler inherits one.
 * - Output is one growing buffer that is reused, so a command costs no allocation; the
 *   argv encoder writes into it directly (the same bytes as redisFormatCommandArgv, without
 *   its sds per argument and printf per length: a measurable share of a short job's CPU).
 * - A link that failed once (I/O error, timeout, EOF, protocol error) keeps its error and
 *   refuses every further call: after a timeout the reply may still come, and would be
 *   taken for the next command's.
 * - Neither buffer keeps the size of the largest thing it carried. hiredis 0.14's reader
 *   frees its buffer only when new bytes come while it is empty and oversized, which a
 *   batched fetch (several replies in one read) seldom allows: each fetcher kept a buffer
 *   the size of the largest job it had read. So once a reply is taken and nothing is left
 *   buffered, a buffer past the reader's own bound (maxbuf, 16 KiB) is dropped here, and
 *   the output buffer past OUT_KEEP once it is sent.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>
#include "rlink.h"
#include "util.h"

#define READ_CHUNK 16384
#define OUT_KEEP 65536          /* the output buffer kept between commands */
#define KEEPALIVE_IDLE 15

struct rlink {
	int fd;
	redisReader *reader;
	char *out;                  /* queued commands, olen bytes of ocap */
	size_t olen, ocap;
	double timeout;             /* seconds, of each read and write */
	char err[256];              /* why the link broke; "" while it works */
};

static int fail(struct rlink *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct rlink *l, const char *fmt, ...)
{
	if (!l->err[0]) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(l->err, sizeof l->err, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* ---- connecting ---- */

static int set_blocking(int fd, int blocking)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		return -1;
	fl = blocking ? fl & ~O_NONBLOCK : fl | O_NONBLOCK;
	return fcntl(fd, F_SETFL, fl);
}

/* Milliseconds left until deadline (monotonic), for poll; 0 when it has passed. */
static int ms_left(double deadline)
{
	double left = deadline - mono_now();
	return left <= 0 ? 0 : (int)(left * 1000) + 1;
}

/* connect(2) on a non-blocking fd, waiting until deadline. 0, or -1 with errno. */
static int connect_until(int fd, const struct sockaddr *sa, socklen_t len, double deadline)
{
	if (connect(fd, sa, len) == 0)
		return 0;
	if (errno != EINPROGRESS)
		return -1;
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	int n;
	while ((n = poll(&pfd, 1, ms_left(deadline))) < 0 && errno == EINTR)
		;
	if (n == 0)
		errno = ETIMEDOUT;
	if (n <= 0)
		return -1;
	int soerr = 0;
	socklen_t sl = sizeof soerr;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
		return -1;
	errno = soerr;
	return soerr ? -1 : 0;
}

static int open_unix(const char *path, double deadline, char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof sa.sun_path) {
		snprintf(err, errlen, "the unix socket path is too long");
		return -1;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect_until(fd, (struct sockaddr *)&sa, sizeof sa, deadline) < 0) {
		snprintf(err, errlen, "%s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static void tcp_options(int fd)
{
	int one = 1, idle = KEEPALIVE_IDLE, intvl = KEEPALIVE_IDLE / 3, cnt = 3;
	/* Best effort, as hiredis: a socket without them still works. */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	(void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}

static int open_tcp(const char *host, int port, double deadline, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res, *p;
	char service[8];
	snprintf(service, sizeof service, "%d", port);
	int rv = getaddrinfo(host, service, &hints, &res);
	if (rv != 0) {
		hints.ai_family = AF_INET6;
		rv = getaddrinfo(host, service, &hints, &res);
	}
	if (rv != 0) {
		snprintf(err, errlen, "%s", rv == EAI_SYSTEM ? strerror(errno) : gai_strerror(rv));
		return -1;
	}
	int fd = -1, e = 0;
	for (p = res; p && fd < 0; p = p->ai_next) {
		fd = socket(p->ai_family, p->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		            p->ai_protocol);
		if (fd >= 0 && connect_until(fd, p->ai_addr, p->ai_addrlen, deadline) < 0) {
			e = errno;
			close(fd);
			fd = -1;
		} else if (fd < 0) {
			e = errno;
		}
	}
	freeaddrinfo(res);
	if (fd < 0)
		snprintf(err, errlen, "%s", strerror(e));
	else
		tcp_options(fd);
	return fd;
}

struct rlink *rlink_open(const struct rlink_target *t, char *err, size_t errlen)
{
	double deadline = mono_now() + t->connect_timeout;
	int fd = t->path ? open_unix(t->path, deadline, err, errlen)
	         : open_tcp(t->host, t->port, deadline, err, errlen);
	if (fd < 0)
		return NULL;
	if (set_blocking(fd, 1) < 0) {
		snprintf(err, errlen, "%s", strerror(errno));
		close(fd);
		return NULL;
	}
	struct rlink *l = xcalloc(1, sizeof *l);
	l->fd = fd;
	l->reader = redisReaderCreate();
	if (!l->reader)
		abort();                /* out of memory, as the x* allocators */
	rlink_set_timeout(l, t->connect_timeout);
	return l;
}

void rlink_close(struct rlink *l)
{
	if (!l)
		return;
	close(l->fd);
	redisReaderFree(l->reader);
	free(l->out);
	free(l);
}

void rlink_set_timeout(struct rlink *l, double s)
{
	struct timeval tv;
	tv.tv_sec = (time_t)s;
	tv.tv_usec = (suseconds_t)((s - (double)tv.tv_sec) * 1e6);
	l->timeout = s;
	(void)setsockopt(l->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	(void)setsockopt(l->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

int rlink_fd(const struct rlink *l)
{
	return l->fd;
}

const char *rlink_error(const struct rlink *l)
{
	return l->err;
}

/* ---- queueing commands ---- */

/* Room for n more bytes at l->out + l->olen. */
static char *out_room(struct rlink *l, size_t n)
{
	if (l->olen + n > l->ocap) {
		size_t cap = l->ocap ? l->ocap : 1024;
		while (cap < l->olen + n)
			cap *= 2;
		l->out = xrealloc(l->out, cap);
		l->ocap = cap;
	}
	return l->out + l->olen;
}

int rlink_appendv(struct rlink *l, const char *fmt, va_list ap)
{
	char *cmd = NULL;
	int n = redisvFormatCommand(&cmd, fmt, ap);
	if (n < 0)
		return -1;
	memcpy(out_room(l, (size_t)n), cmd, (size_t)n);
	l->olen += (size_t)n;
	redisFreeCommand(cmd);
	return 0;
}

/* "<kind><n>\r\n" at p; returns the end. */
static char *resp_header(char *p, char kind, size_t n)
{
	char digits[24];
	int k = 0;
	do
		digits[k++] = (char)('0' + n % 10);
	while ((n /= 10) > 0);
	*p++ = kind;
	while (k > 0)
		*p++ = digits[--k];
	*p++ = '\r';
	*p++ = '\n';
	return p;
}

/* The length of argument i, whose pieces start at pieces[*k] (and *k moves past them). */
static size_t piece_len(int i, const int *npieces, const char **pieces, const size_t *plens,
                        int *k)
{
	int n = npieces ? npieces[i] : 1;
	size_t len = 0;
	for (int j = 0; j < n; j++, (*k)++)
		len += plens ? plens[*k] : strlen(pieces[*k]);
	return len;
}

void rlink_append_pieces(struct rlink *l, int argc, const int *npieces, const char **pieces,
                         const size_t *plens)
{
	size_t total = 16;
	int k = 0;
	for (int i = 0; i < argc; i++)
		total += piece_len(i, npieces, pieces, plens, &k) + 24;
	char *start = out_room(l, total), *p = start;
	p = resp_header(p, '*', (size_t)argc);
	k = 0;
	for (int i = 0; i < argc; i++) {
		int first = k;
		p = resp_header(p, '$', piece_len(i, npieces, pieces, plens, &k));
		for (int j = first; j < k; j++) {
			size_t n = plens ? plens[j] : strlen(pieces[j]);
			memcpy(p, pieces[j], n);
			p += n;
		}
		*p++ = '\r';
		*p++ = '\n';
	}
	l->olen += (size_t)(p - start);
}

void rlink_append_argv(struct rlink *l, int argc, const char **argv, const size_t *lens)
{
	rlink_append_pieces(l, argc, NULL, argv, lens);
}

/* ---- the bytes on the wire ---- */

static int io_failed(struct rlink *l, const char *what)
{
	if (errno == EAGAIN || errno == EWOULDBLOCK)
		return fail(l, "timeout: no %s within %gs", what, l->timeout);
	return fail(l, "%s", strerror(errno));
}

static int flush(struct rlink *l)
{
	size_t done = 0;
	while (done < l->olen) {
		ssize_t n = write(l->fd, l->out + done, l->olen - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			l->olen = 0;
			return io_failed(l, "room to send");
		}
		done += (size_t)n;
	}
	l->olen = 0;
	if (l->ocap > OUT_KEEP) {
		free(l->out);
		l->out = NULL;
		l->ocap = 0;
	}
	return 0;
}

/* One read(2) into the reader: what the socket has, waiting for it when it has nothing. */
static int fill(struct rlink *l)
{
	char buf[READ_CHUNK];
	ssize_t n;
	while ((n = read(l->fd, buf, sizeof buf)) < 0 && errno == EINTR)
		;
	if (n < 0)
		return io_failed(l, "reply");
	if (n == 0)
		return fail(l, "the server closed the connection");
	if (redisReaderFeed(l->reader, buf, (size_t)n) != REDIS_OK)
		return fail(l, "protocol error: %s", l->reader->errstr);
	return 0;
}

/* The next reply the reader holds, if any (*reply NULL when none). 0 or -1. */
static int buffered(struct rlink *l, void **reply)
{
	*reply = NULL;
	if (redisReaderGetReply(l->reader, reply) != REDIS_OK)
		return fail(l, "protocol error: %s", l->reader->errstr);
	return 0;
}

/* After a reply: an emptied read buffer past the reader's bound goes (the opening
 * comment). The same as hiredis does itself when it finds it so at its next read. */
static void reader_shrink(struct rlink *l)
{
	redisReader *rd = l->reader;
	if (rd->pos < rd->len || sdsalloc(rd->buf) <= rd->maxbuf)
		return;
	sds empty = sdsempty();
	if (!empty)
		abort();                /* out of memory, as the x* allocators */
	sdsfree(rd->buf);
	rd->buf = empty;
	rd->pos = rd->len = 0;
}

int rlink_reply(struct rlink *l, void **reply)
{
	*reply = NULL;
	if (l->err[0] || buffered(l, reply) != 0)
		return -1;
	if (!*reply && flush(l) != 0)
		return -1;
	while (!*reply)
		if (fill(l) != 0 || buffered(l, reply) != 0)
			return -1;
	reader_shrink(l);
	return 0;
}

redisReply *rlink_command(struct rlink *l, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = rlink_appendv(l, fmt, ap);
	va_end(ap);
	void *reply = NULL;
	if (rc != 0)
		fail(l, "bad command format");
	else
		rlink_reply(l, &reply);
	return reply;
}

int rlink_closed_while_idle(struct rlink *l)
{
	struct pollfd pfd = { .fd = l->fd, .events = POLLIN | POLLRDHUP };
	return poll(&pfd, 1, 0) > 0;
}

/* ---- subscribed links ---- */

int rsub_messages(struct rlink *l, rsub_fn on, void *ctx)
{
	for (;;) {
		void *reply = NULL;
		if (l->err[0] || buffered(l, &reply) != 0)
			return -1;
		if (!reply)
			return 0;
		const redisReply *rep = reply;
		if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 3 &&
		    rep->element[0]->type == REDIS_REPLY_STRING &&
		    strcmp(rep->element[0]->str, "message") == 0 &&
		    rep->element[1]->type == REDIS_REPLY_STRING &&
		    rep->element[2]->type == REDIS_REPLY_STRING)
			on(ctx, rep->element[1]->str, rep->element[2]->str);
		freeReplyObject(reply);
	}
}

int rsub_read(struct rlink *l, rsub_fn on, void *ctx)
{
	if (l->err[0] || fill(l) != 0)
		return -1;
	return rsub_messages(l, on, ctx);
}
