/* SPDX-License-Identifier: MIT */
/*
 * web.h: what the parts of `cogworkerctl web` share; included by the files of src/web/ only.
 *
 *   web.c         the command line (web, web passwd), the listening socket, the run
 *   web_http.c    request parsing with no I/O: forms and query strings, cookies, paths,
 *                 Host and Origin checks (fuzzed by tests/fuzz/fuzz_web.c)
 *   web_auth.c    the users file, password hashes (libcrypt), sessions and CSRF tokens
 *   web_serve.c   libmicrohttpd: one thread per connection, headers, assets, who may do
 *                 what (session, CSRF, Origin, --read-only), the action log
 *   web_pool.c    the Redis connections, one per request running
 *   web_api.c     the JSON API: each route runs a cogworkerctl command's code with a
 *                 capture (ctl.h) and answers with its --json document
 *   build/web_assets.c   web/ (HTML, CSS, JS) embedded at build time (tools/embed-web.sh)
 *
 * The split follows what changes together: a new page touches web/ and web_api.c, a new
 * rule about who may do what web_serve.c and web_auth.c, and the parsers stay free of
 * sockets so a fuzzer can call them.
 */
#ifndef COGWORKERD_WEB_WEB_H
#define COGWORKERD_WEB_WEB_H

#include <pthread.h>
#include <stddef.h>
#include "ctl/ctl.h"
#include "ctl/jobs_run.h"

/* ---- build/web_assets.c ---- */
struct web_asset {
	const char *path;           /* "/assets/app.js"; "/index.html" is every page's shell */
	const char *type;           /* Content-Type */
	const char *data;
	size_t len;
};
extern const struct web_asset web_assets[];         /* {0}-terminated */
const struct web_asset *web_asset_find(const char *path);

/* ---- web_http.c ---- */

/* application/x-www-form-urlencoded (a query string or a POST body), decoded. A name may
 * come more than once (entry=…&entry=…); values may hold any byte, NUL included. */
struct form {
	int n, cap;
	char **names;
	char **values;
	size_t *lens;               /* of each value */
};
#define FORM_MAX_FIELDS 1000
/* 0, or -1 on a malformed one (a bad %-escape, more than FORM_MAX_FIELDS fields); f is
 * usable (and to be freed) either way. */
int form_parse(const char *s, size_t len, struct form *f);
/* Add a field (copies of both). */
void form_add_copy(struct form *f, const char *name, const char *value);
/* The first value of name, or NULL; its length in *len when len is not NULL. */
const char *form_get(const struct form *f, const char *name, size_t *len);
void form_free(struct form *f);
/* %XX and (plus_space) '+' decoded into a malloc'd, NUL-terminated copy; -1 on a bad
 * escape. */
int pct_decode(const char *s, size_t len, int plus_space, char **out, size_t *outlen);

/* The value of cookie name in a Cookie header (malloc'd), or NULL. */
char *cookie_get(const char *header, const char *name);

/* A request path split into its segments, each %-decoded. -1 for a path that is not
 * absolute, has an empty, "." or ".." segment, a segment that decodes to a NUL or a '/',
 * or more than PATH_MAX_SEGMENTS segments. "/" is zero segments. */
#define PATH_MAX_SEGMENTS 8
struct path {
	int n;
	char *seg[PATH_MAX_SEGMENTS];
};
int path_split(const char *path, struct path *p);
void path_free(struct path *p);

/* A Host header (host[:port], [v6][:port]) whose host is a loopback address or localhost. */
int host_is_loopback(const char *host);
/* An Origin header ("http://host:port") naming the same host and port as the Host header:
 * the scheme is not compared (a TLS proxy in front changes it), the rest exactly. */
int origin_matches(const char *origin, const char *host);
/* Constant-time comparison of two NUL-terminated strings (tokens, hashes). */
int secret_equal(const char *a, const char *b);

/* ---- web_auth.c ---- */
struct web_users {
	int n;
	char **names, **hashes;
};
/* The users file: "name:hash" lines ('#' comments and blank lines skipped). 0, or -1 with
 * a message naming the file and line. */
int web_users_load(const char *path, struct web_users *u, char *err, size_t errlen);
void web_users_free(struct web_users *u);
/* 1 when password is name's (crypt_r compares; slow by design), else 0. */
int web_users_check(const struct web_users *u, const char *name, const char *password);
/* A new hash of password (yescrypt, crypt_gensalt's default cost); NULL on failure. */
char *web_hash_password(const char *password);

struct web_session {
	char id[65];                /* the cookie value */
	char csrf[65];              /* sent back on every POST (X-CSRF-Token) */
	char user[128];
	double created, last;       /* monotonic */
};
/* A new session for user, or NULL (never: the oldest one is dropped when full). Copies
 * what the caller needs into out. */
void web_session_new(const char *user, struct web_session *out);
/* The session of a cookie value, refreshed; 0 found (copied into out), -1 none or expired. */
int web_session_get(const char *id, struct web_session *out);
void web_session_end(const char *id);

/* ---- web_serve.c ---- */
struct web_opts {
	const char *listen;         /* "127.0.0.1:8080", "[::1]:8080" */
	const char *auth_file;      /* NULL: nobody logs in (loopback only) */
	int read_only;
	int loopback;               /* listen names a loopback address */
	struct web_users users;
	int max_redis;              /* Redis connections at most (one per request in flight) */
	char *tls_cert, *tls_key;   /* PEM contents (--tls-cert, --tls-key), or NULL: plain HTTP */
	int insecure_http;          /* --insecure-http: plain HTTP off loopback, said everywhere */
};

/* ---- web_pool.c ---- */
/* A request's own Redis connection and command state: taken from the pool for one
 * request, given back after. */
struct web_ctx {
	struct ctl c;
	struct web_ctx *next;       /* in the free list */
};
/* Connections are made from base's conf, at most max of them. */
void web_pool_init(const struct ctl *base, int max);
/* A connection, waiting for one while all are in use; NULL after POOL_WAIT. */
struct web_ctx *web_ctx_take(void);
void web_ctx_give(struct web_ctx *x);

/* Serve until SIGINT or SIGTERM; the exit status. */
int web_serve(struct ctl *base, struct web_opts *o, int fd);

/* One action line on stderr (the journal, under the unit): who, from where, what, result. */
void web_log_action(const char *user, const char *peer, const char *what, const char *result);

/* ---- web_api.c ---- */
struct web_req {
	const char *method;
	struct path path;           /* the path after /api */
	struct form query, body;
	const char *user;
	const char *peer;
};
struct web_reply {
	unsigned status;
	struct sbuf body;
	const char *type;           /* Content-Type; JSON unless the route says otherwise */
	int stream;                 /* the route streams (server-sent events): web_follow_step */
	char *stream_jid;
	long long stream_run;
};
/* Answer one API request (GET or POST, already allowed by web_serve.c). */
void web_api(struct web_req *q, struct web_reply *r);

/* Server-sent events of one run's output (GET /api/jobs/<jid>/output/stream): the next
 * part of the stream into b, after waiting a poll interval (but the first time); 0 more to
 * come, 1 ended (b holds the last event). */
struct web_follow {
	char *jid;
	struct follow_state st;     /* jobs_run.c's: the stream is `jobs log --follow`'s */
	int looked;
};
int web_follow_step(struct web_follow *f, struct sbuf *b);

#endif
