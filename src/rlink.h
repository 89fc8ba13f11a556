/* SPDX-License-Identifier: MIT */
/*
 * rlink.h: one link to a Redis server (or a sentinel): the socket, the bytes to send and
 * the reply reader, owned here rather than by a hiredis context, so that the bytes can go
 * through TLS (rlink.c's opening comment says why). hiredis is used for the protocol
 * only: formatting commands and parsing replies. A link is used by one thread.
 *
 * Every call that waits is bounded: the connect by the target's connect timeout, each read
 * and write by the link's timeout (rlink_set_timeout). After any I/O error, a timeout or a
 * protocol error the link is broken for good (rlink_error says why): close it.
 */
#ifndef COGWORKERD_RLINK_H
#define COGWORKERD_RLINK_H

#include <stdarg.h>
#include <stddef.h>
#include <hiredis.h>

struct rlink;

struct ssl_ctx_st;

/* Where to connect: a TCP host and port, or a unix socket path; in TLS or not. */
struct rlink_target {
	const char *host;
	int port;
	const char *path;               /* non-NULL: a unix socket, host and port unused */
	double connect_timeout;         /* seconds, > 0: the connect and the TLS handshake */
	struct ssl_ctx_st *tls;         /* non-NULL: TLS with this context (tls.h) */
	const char *server_name;        /* TLS: the name to expect; NULL: host */
};

/* A connected link (keepalive and TCP_NODELAY on TCP, the TLS handshake done), or NULL
 * with the reason in err. */
struct rlink *rlink_open(const struct rlink_target *t, char *err, size_t errlen);
void rlink_close(struct rlink *l);
/* Every later read and write waits at most s seconds. */
void rlink_set_timeout(struct rlink *l, double s);
int rlink_fd(const struct rlink *l);
/* Why the link broke ("" while it works). */
const char *rlink_error(const struct rlink *l);
/* Whether a reply was read on it: a link that fails before its first reply tells about the
 * server (it closes every connection, it speaks TLS), not of a connection lost. */
int rlink_replied(const struct rlink *l);
/* "plain text", or the TLS version, cipher and the server's certificate (--check). */
void rlink_tls_summary(const struct rlink *l, char *out, size_t outlen);

/* Queue a command (sent by the next rlink_reply): printf-like as hiredis's redisCommand,
 * or argc strings of lens bytes (strlen when lens is NULL). 0, or -1 on a bad format. */
int rlink_appendv(struct rlink *l, const char *fmt, va_list ap);
void rlink_append_argv(struct rlink *l, int argc, const char **argv, const size_t *lens);
/* The same with argument i made of npieces[i] consecutive pieces (one each when npieces is
 * NULL), written where it goes: an argument that splices a large text into others' (a
 * workers entry and its job) is not first built on its own. */
void rlink_append_pieces(struct rlink *l, int argc, const int *npieces, const char **pieces,
                         const size_t *plens);
/* Send what is queued, then read until the next reply. 0 with *reply (free with
 * freeReplyObject), or -1 with the link broken. */
int rlink_reply(struct rlink *l, void **reply);
/* A command and its reply: the reply (an error reply too), or NULL with the link broken. */
redisReply *rlink_command(struct rlink *l, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Strings too long to read. After rlink_limit_bulk(l, max, head), a string longer than max
 * bytes in a reply is not read into memory: it comes back as an integer reply, its length
 * (no command this daemon limits answers an integer where it sends a string), its bytes
 * are read off the socket and dropped as they come, and what was seen of it is kept for
 * rlink_skipped, in the order of the replies: its length, its first head bytes (at most)
 * and its last RSKIP_TAIL. A job pushed with hundreds of MB is then never held by the
 * daemon (max_job_bytes, doc/protocol.md §7.9). The limit holds until changed (0: none);
 * setting it forgets the strings dropped before.
 */
#define RSKIP_TAIL 64
struct rskip {
	size_t len;                 /* its length; 0: nothing dropped */
	char *head;                 /* its first head_len bytes, malloc'd */
	size_t head_len;
	char tail[RSKIP_TAIL];      /* its last tail_len bytes */
	size_t tail_len;
};
void rlink_limit_bulk(struct rlink *l, size_t max, size_t head);
/* The oldest string dropped since the limit was set, taken (free with rskip_free): 1, or 0
 * when there is none. */
int rlink_skipped(struct rlink *l, struct rskip *out);
void rskip_free(struct rskip *s);

/*
 * A connection the server closed while we did not use it (CLIENT KILL, its idle timeout,
 * a restart) can be told without a round trip: true when the idle link is readable, which
 * on a request/response connection only a close (or garbage) makes it.
 */
int rlink_closed_while_idle(struct rlink *l);

/*
 * On a subscribed link: rsub_read reads what the socket has now (the caller polled
 * rlink_fd), then calls on(ctx, channel, payload) for each "message"; the SUBSCRIBE
 * confirmations and anything else are skipped. rsub_messages only goes through what was
 * read already, without reading: call it right after the SUBSCRIBE's reply, since a
 * message that came in the same read waits in the reader unseen by poll. 0, or -1 on a
 * broken link.
 */
typedef void (*rsub_fn)(void *ctx, const char *channel, const char *payload);
int rsub_read(struct rlink *l, rsub_fn on, void *ctx);
int rsub_messages(struct rlink *l, rsub_fn on, void *ctx);

#endif
