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
 * - A string longer than the link's limit (rlink.h, rlink_limit_bulk) is dropped while it
 *   is read. hiredis's reader only makes a reply of a string once all of it is buffered,
 *   so the limit is kept in front of it: when the reader waits for the body of a string
 *   (its task is a string and the length line is in, hiredis 0.14's rstack), a length past
 *   the limit turns the task into an integer, which the length line then becomes, and the
 *   body is taken off each later read (feed) before the rest is fed, keeping its first and
 *   last bytes. The reply is returned only once the body has gone by, so the link is clean
 *   for the next command. A string that came whole within one read (at most 16 KiB) is
 *   turned into its length when the reader makes it (create_string), so that the rule is
 *   the same however the bytes arrived.
 *
 * TLS (a target with a context, tls.c): the session is an OpenSSL SSL on the same socket.
 * The handshake runs on the still non-blocking socket, polled until the connect timeout,
 * so that a server that never answers it (a plaintext port reads a ClientHello as the start
 * of a command and waits for its end) costs the connect timeout and is named. Afterwards
 * the socket is blocking with SO_RCVTIMEO/SO_SNDTIMEO as on the plain path, and SSL_read
 * and SSL_write take one system call each in the common case, so a command costs what it
 * costs in plain text plus the cipher. Two things differ:
 * - OpenSSL reads whole records and may hold decrypted bytes poll(2) cannot see, and a
 *   record that carries no data (a TLS 1.3 session ticket) can make a blocking SSL_read
 *   wait for data that was never sent. So whatever reads without a request (a subscriber
 *   woken by poll, the idle check) reads non-blocking until OpenSSL has nothing left.
 * - The idle check cannot take "readable" for "closed": a ticket is readable too. It reads
 *   what is there, and only an EOF, an error or bytes nobody asked for close the link.
 * A plain link whose first bytes are a TLS record, or that the server closes before any
 * reply, says that the port may be a TLS one.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
#include <openssl/err.h>
#include <openssl/ssl.h>
#include "rlink.h"
#include "tls.h"
#include "util.h"

#define READ_CHUNK 16384
#define OUT_KEEP 65536          /* the output buffer kept between commands */
#define KEEPALIVE_IDLE 15

struct rlink {
	int fd;
	SSL *ssl;                   /* NULL: plain text */
	char name[256];             /* the name the server was reached by, for TLS errors */
	unsigned long long received;        /* bytes read so far */
	redisReader *reader;
	char *out;                  /* queued commands, olen bytes of ocap */
	size_t olen, ocap;
	double timeout;             /* seconds, of each read and write */
	unsigned long long replies; /* replies read by rlink_reply */
	redisReplyObjectFunctions fns;      /* hiredis's, but for create_string */
	const redisReplyObjectFunctions *base;
	size_t bulk_max, bulk_head; /* rlink_limit_bulk */
	struct rskip *skipped;      /* the strings dropped, oldest first */
	int nskipped;
	size_t skip_left;           /* bytes of the last one still to come, its CRLF included */
	size_t skip_seen;           /* ... and those gone by */
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

static int io_failed(struct rlink *l, const char *what);
static int tls_failed(struct rlink *l, int ret, const char *what);
static long long read_ready(struct rlink *l);

/*
 * What a server that drops a new connection before its first reply most likely means. In
 * plain text: a TLS port, which takes our command for a broken handshake. In TLS: it did
 * not accept us as a client (TLS 1.3 tells it after the handshake, and the alert that says
 * why is lost when our first command makes the server's close a reset).
 */
static const char *hint_first(const struct rlink *l)
{
	if (!l->ssl)
		return "a TLS port? then the url is rediss://";
	if (!tls_ctx_has_cert(SSL_get_SSL_CTX(l->ssl)))
		return "does the server want a client certificate? redis.tls.cert_file and key_file";
	return "does the server accept our client certificate?";
}

/*
 * TLS 1.3 ends the handshake before the server has checked our certificate: if it refuses
 * it, its alert comes right after, as the session tickets do when it accepts. Wait for
 * what comes first (a round trip, bounded by POST_HANDSHAKE_WAIT in case a server sends no
 * ticket), so that a refusal is named here instead of lost under the first command.
 */
#define POST_HANDSHAKE_WAIT 0.25
static void after_handshake(struct rlink *l, double deadline)
{
	if (SSL_version(l->ssl) != TLS1_3_VERSION)
		return;
	double until = mono_now() + POST_HANDSHAKE_WAIT;
	struct pollfd pfd = { .fd = l->fd, .events = POLLIN };
	int n;
	while ((n = poll(&pfd, 1, ms_left(until < deadline ? until : deadline))) < 0 &&
	       errno == EINTR)
		;
	if (n > 0 && read_ready(l) > 0)
		fail(l, "the server sent data before any command");
}

/* The TLS handshake on l's non-blocking socket, polled until deadline. 0 or -1. */
static int handshake(struct rlink *l, double deadline, double timeout)
{
	for (;;) {
		ERR_clear_error();
		int rc = SSL_connect(l->ssl);
		if (rc == 1)
			return 0;
		int e = SSL_get_error(l->ssl, rc);
		short ev = e == SSL_ERROR_WANT_READ ? POLLIN : e == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
		if (!ev)
			return tls_failed(l, rc, "handshake");
		struct pollfd pfd = { .fd = l->fd, .events = ev };
		int n;
		while ((n = poll(&pfd, 1, ms_left(deadline))) < 0 && errno == EINTR)
			;
		if (n == 0)
			return fail(l, "no TLS handshake within %gs (a plaintext port? then the url is "
			            "redis://)", timeout);
		if (n < 0)
			return fail(l, "%s", strerror(errno));
	}
}

static void *create_string(const redisReadTask *task, char *str, size_t len);

struct rlink *rlink_open(const struct rlink_target *t, char *err, size_t errlen)
{
	double deadline = mono_now() + t->connect_timeout;
	int fd = t->path ? open_unix(t->path, deadline, err, errlen)
	         : open_tcp(t->host, t->port, deadline, err, errlen);
	if (fd < 0)
		return NULL;
	struct rlink *l = xcalloc(1, sizeof *l);
	l->fd = fd;
	l->reader = redisReaderCreate();
	if (!l->reader)
		abort();                /* out of memory, as the x* allocators */
	l->base = l->reader->fn;
	l->fns = *l->base;
	l->fns.createString = create_string;
	l->reader->fn = &l->fns;
	l->reader->privdata = l;
	snprintf(l->name, sizeof l->name, "%s", t->server_name ? t->server_name
	         : t->host ? t->host : "");
	if (t->tls && !(l->ssl = tls_session(t->tls, fd, l->name)))
		fail(l, "TLS: cannot make a session (out of memory?)");
	if (l->ssl && handshake(l, deadline, t->connect_timeout) == 0)
		after_handshake(l, deadline);
	if (!l->err[0] && set_blocking(fd, 1) < 0)
		fail(l, "%s", strerror(errno));
	if (l->err[0]) {
		snprintf(err, errlen, "%s", l->err);
		rlink_close(l);
		return NULL;
	}
	rlink_set_timeout(l, t->connect_timeout);
	return l;
}

void rlink_close(struct rlink *l)
{
	if (!l)
		return;
	SSL_free(l->ssl);
	close(l->fd);
	redisReaderFree(l->reader);
	free(l->out);
	rlink_limit_bulk(l, 0, 0);
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

void rlink_tls_summary(const struct rlink *l, char *out, size_t outlen)
{
	if (l->ssl)
		tls_summary(l->ssl, out, outlen);
	else
		snprintf(out, outlen, "plain text");
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
	if (errno == ECONNRESET && l->received == 0)
		return fail(l, "%s before any reply (%s)", strerror(errno), hint_first(l));
	return fail(l, "%s", strerror(errno));
}

static int closed(struct rlink *l)
{
	if (l->received == 0)
		return fail(l, "the server closed the connection before any reply (%s)",
		            hint_first(l));
	return fail(l, "the server closed the connection");
}

/* An SSL call returned ret: the link's error, from OpenSSL's error or errno. */
static int tls_failed(struct rlink *l, int ret, const char *what)
{
	int saved = errno, e = SSL_get_error(l->ssl, ret);
	char why[sizeof l->err];
	errno = saved;
	switch (e) {
	case SSL_ERROR_WANT_READ:
	case SSL_ERROR_WANT_WRITE:      /* a blocking socket's SO_RCVTIMEO or SO_SNDTIMEO */
		errno = EAGAIN;
		return io_failed(l, what);
	case SSL_ERROR_ZERO_RETURN:
		return closed(l);
	case SSL_ERROR_SYSCALL:
		if (ERR_peek_error() == 0) {
			if (errno == 0)
				return closed(l);
			return io_failed(l, what);
		}
		/* fall through */
	default:
		if (tls_describe(l->ssl, l->name, why, sizeof why) == 0)
			return closed(l);
		return fail(l, "%s", why);
	}
}

/* One write of what is queued: bytes written, or -1 with the link broken. */
static ssize_t link_write(struct rlink *l, const char *buf, size_t n)
{
	if (!l->ssl) {
		ssize_t w;
		while ((w = write(l->fd, buf, n)) < 0 && errno == EINTR)
			;
		return w > 0 ? w : io_failed(l, "room to send");
	}
	ERR_clear_error();
	errno = 0;
	int w = SSL_write(l->ssl, buf, n > INT_MAX ? INT_MAX : (int)n);
	return w > 0 ? w : tls_failed(l, w, "room to send");
}

#define NOTHING_NOW (-2)
/* One read: bytes read (> 0), -1 with the link broken, or NOTHING_NOW when a non-blocking
 * socket has nothing (TLS: nothing OpenSSL could make a byte of data from). */
static ssize_t link_read(struct rlink *l, char *buf, size_t n)
{
	if (!l->ssl) {
		ssize_t r;
		while ((r = read(l->fd, buf, n)) < 0 && errno == EINTR)
			;
		if (r < 0)
			return io_failed(l, "reply");
		return r > 0 ? r : closed(l);
	}
	ERR_clear_error();
	errno = 0;
	int rc = SSL_read(l->ssl, buf, n > INT_MAX ? INT_MAX : (int)n);
	if (rc > 0)
		return rc;
	if (SSL_get_error(l->ssl, rc) == SSL_ERROR_WANT_READ &&
	    (fcntl(l->fd, F_GETFL) & O_NONBLOCK))
		return NOTHING_NOW;
	return tls_failed(l, rc, "reply");
}

static int flush(struct rlink *l)
{
	size_t done = 0;
	while (done < l->olen) {
		ssize_t n = link_write(l, l->out + done, l->olen - done);
		if (n < 0) {
			l->olen = 0;
			return -1;
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

/* ---- strings too long to read ---- */

void rskip_free(struct rskip *s)
{
	free(s->head);
	memset(s, 0, sizeof *s);
}

void rlink_limit_bulk(struct rlink *l, size_t max, size_t head)
{
	for (int i = 0; i < l->nskipped; i++)
		rskip_free(&l->skipped[i]);
	free(l->skipped);
	l->skipped = NULL;
	l->nskipped = 0;
	l->bulk_max = max;
	l->bulk_head = head;
}

int rlink_skipped(struct rlink *l, struct rskip *out)
{
	if (l->nskipped == 0 || (l->nskipped == 1 && l->skip_left))
		return 0;
	*out = l->skipped[0];
	memmove(l->skipped, l->skipped + 1, (size_t)--l->nskipped * sizeof *l->skipped);
	return 1;
}

/* A record of a string of n bytes being dropped, seen from its start. */
static void skip_begin(struct rlink *l, size_t n)
{
	l->skipped = xrealloc(l->skipped, (size_t)(l->nskipped + 1) * sizeof *l->skipped);
	struct rskip *s = &l->skipped[l->nskipped++];
	memset(s, 0, sizeof *s);
	s->len = n;
	s->head = xmalloc(l->bulk_head < n ? l->bulk_head + 1 : n + 1);
	l->skip_seen = 0;
	l->skip_left = n + 2;
}

/* k more bytes of the string being dropped (its CRLF comes last): its head and tail kept. */
static void skip_take(struct rlink *l, const char *p, size_t k)
{
	struct rskip *s = &l->skipped[l->nskipped - 1];
	size_t body = l->skip_seen < s->len ? s->len - l->skip_seen : 0;
	if (body > k)
		body = k;
	if (l->skip_seen < l->bulk_head) {
		size_t n = l->bulk_head - l->skip_seen < body ? l->bulk_head - l->skip_seen : body;
		memcpy(s->head + s->head_len, p, n);
		s->head_len += n;
	}
	if (body >= RSKIP_TAIL) {
		memcpy(s->tail, p + body - RSKIP_TAIL, RSKIP_TAIL);
		s->tail_len = RSKIP_TAIL;
	} else {
		size_t keep = s->tail_len < RSKIP_TAIL - body ? s->tail_len : RSKIP_TAIL - body;
		memmove(s->tail, s->tail + s->tail_len - keep, keep);
		memcpy(s->tail + keep, p, body);
		s->tail_len = keep + body;
	}
	l->skip_seen += k;
	l->skip_left -= k;
}

/*
 * The reader waits for the body of a string longer than the limit: the reader's task
 * becomes an integer, so that the length line it has yet to parse makes an integer reply,
 * what of the body was buffered is taken out of the buffer, and fill takes the rest. 1 when
 * it did, 0 when there is nothing to do yet.
 */
static int skip_long_string(struct rlink *l)
{
	redisReader *rd = l->reader;
	if (!l->bulk_max || l->skip_left || rd->ridx < 0 ||
	    rd->rstack[rd->ridx].type != REDIS_REPLY_STRING)
		return 0;
	char *p = rd->buf + rd->pos, *end = rd->buf + rd->len, *q = p;
	size_t n = 0;
	for (; q < end && isdigit((unsigned char)*q); q++) {
		if (n > (SIZE_MAX - 9) / 10)
			return 0;       /* no such string: hiredis will say it is a protocol error */
		n = n * 10 + (size_t)(*q - '0');
	}
	if (q == p || end - q < 2 || q[0] != '\r' || q[1] != '\n' || n <= l->bulk_max)
		return 0;           /* not all of the length yet, a nil, or short enough */
	char *body = q + 2;
	rd->rstack[rd->ridx].type = REDIS_REPLY_INTEGER;
	skip_begin(l, n);
	size_t have = (size_t)(end - body), now = have < n + 2 ? have : n + 2;
	skip_take(l, body, now);
	memmove(body, body + now, have - now);
	rd->len = (size_t)(body - rd->buf) + have - now;
	sdssetlen(rd->buf, rd->len);
	rd->buf[rd->len] = '\0';
	return 1;
}

/* The reader's createString: a string longer than the limit that came whole becomes its
 * length, as one dropped while it came does (hiredis makes errors and statuses here too). */
static void *create_string(const redisReadTask *task, char *str, size_t len)
{
	struct rlink *l = task->privdata;
	if (!l->bulk_max || len <= l->bulk_max || task->type != REDIS_REPLY_STRING)
		return l->base->createString(task, str, len);
	skip_begin(l, len);
	skip_take(l, str, len);
	l->skip_left = 0;               /* no more of it will come */
	return l->base->createInteger(task, (long long)len);
}

/* ---- reading ---- */

/* n bytes just read, into the reader; the part of a string being dropped taken off first. */
static int feed(struct rlink *l, const char *buf, size_t n)
{
	/* 0x15 (alert) or 0x16 (handshake) starts a TLS record; no RESP reply starts so. */
	if (!l->ssl && l->received == 0 && (buf[0] == 0x15 || buf[0] == 0x16))
		return fail(l, "the server answered in TLS (a TLS port? then the url is rediss://)");
	l->received += n;
	size_t off = l->skip_left < n ? l->skip_left : n;
	if (off)
		skip_take(l, buf, off);
	if (n > off && redisReaderFeed(l->reader, buf + off, n - off) != REDIS_OK)
		return fail(l, "protocol error: %s", l->reader->errstr);
	return 0;
}

/* One read into the reader: what the socket has, waiting for it when it has nothing. */
static int fill(struct rlink *l)
{
	char buf[READ_CHUNK];
	ssize_t n = link_read(l, buf, sizeof buf);
	return n < 0 ? -1 : feed(l, buf, (size_t)n);
}

/*
 * Everything that can be read now without waiting (the caller found the socket readable,
 * or TLS may hold bytes poll cannot see): bytes of data read, or -1 with the link broken.
 * Plain text: one read, which poll said will not wait.
 */
static long long read_ready(struct rlink *l)
{
	if (!l->ssl)
		return fill(l) < 0 ? -1 : 1;
	char buf[READ_CHUNK];
	long long total = 0;
	if (set_blocking(l->fd, 0) < 0)
		return fail(l, "%s", strerror(errno));
	for (;;) {
		ssize_t n = link_read(l, buf, sizeof buf);
		if (n == NOTHING_NOW)
			break;
		if (n < 0 || feed(l, buf, (size_t)n) < 0) {
			total = -1;
			break;
		}
		total += n;
	}
	if (set_blocking(l->fd, 1) < 0)
		return fail(l, "%s", strerror(errno));
	return total;
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

/* buffered, with a string too long to read made an integer first (which may end the
 * reply). */
static int parsed(struct rlink *l, void **reply)
{
	if (buffered(l, reply) != 0)
		return -1;
	if (!*reply && skip_long_string(l))
		return buffered(l, reply);
	return 0;
}

int rlink_reply(struct rlink *l, void **reply)
{
	*reply = NULL;
	if (l->err[0] || parsed(l, reply) != 0)
		return -1;
	if (!*reply && flush(l) != 0)
		return -1;
	while (!*reply)
		if (fill(l) != 0 || parsed(l, reply) != 0)
			return -1;
	while (l->skip_left)            /* the rest of a string dropped, before the next read */
		if (fill(l) != 0) {
			freeReplyObject(*reply);
			*reply = NULL;
			return -1;
		}
	reader_shrink(l);
	l->replies++;
	return 0;
}

int rlink_replied(const struct rlink *l)
{
	return l->replies > 0;
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
	if (poll(&pfd, 1, 0) <= 0)
		return 0;
	if (!l->ssl || (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)))
		return 1;
	return read_ready(l) != 0;
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
	if (l->err[0] || read_ready(l) < 0)
		return -1;
	return rsub_messages(l, on, ctx);
}
