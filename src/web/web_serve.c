/* SPDX-License-Identifier: MIT */
/*
 * web_serve.c: the HTTP side of `cogworkerctl web` (libmicrohttpd), and who may do what.
 *
 * One thread per connection (libmicrohttpd's own), at most MAX_CONNECTIONS of them, so a
 * slow request (a cancel that waits for its job, an output stream that waits for new
 * bytes) holds up nobody else. Redis connections come from a pool (web_pool.c) for the
 * time a request runs.
 *
 * What answers what:
 *   /assets/NAME     the embedded files (web/), the same for everybody
 *   /api/...         JSON (web_api.c), behind the checks below
 *   a page's URL     the page shell (web/index.html); the script draws the page from /api
 *   anything else    404
 *
 * The checks, in order, for every request:
 * 1. Host: without --auth-file (a loopback listener) the Host header must name a loopback
 *    address or localhost, so a site that rebinds its DNS name to 127.0.0.1 cannot read
 *    the API from a browser on this host.
 * 2. Who: a session cookie (HttpOnly, SameSite=Strict) from a login, or a script's
 *    "Authorization: Bearer name:password"; without --auth-file a browser gets a session
 *    for the local user at its first GET /api/session. No session, no API (401).
 * 3. A POST (every change is one) also needs: an Origin header, when sent, naming this
 *    host; Sec-Fetch-Site, when sent, "same-origin"; and the session's CSRF token in
 *    X-CSRF-Token (a Bearer caller needs none: browsers never send that header by
 *    themselves). --read-only refuses every POST but login and logout (403).
 * 4. Every answer carries a Content-Security-Policy without inline script or style and
 *    without any other origin, nosniff, no framing and no referrer.
 * Each POST is logged with who, from where, what and its result (web_log_action).
 */
#define rcmd bsd_rcmd        /* <netdb.h> declares BSD's rcmd(3); ours is redis.h's */
#include <netdb.h>
#undef rcmd
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <microhttpd.h>
#include "json.h"
#include "log.h"
#include "web.h"

#define MAX_CONNECTIONS 64
#define MAX_STREAMS 32          /* output streams open at once (each holds a thread) */
#define BODY_MAX (4 << 20)      /* a POST body: a page of selected entries, with room */
#define LOGIN_FAIL_DELAY 1.0    /* seconds, in the failing connection's own thread */
#define SESSION_COOKIE "cwsid"

static const char security_headers[][2][160] = {
	{ "Content-Security-Policy",
	  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
	  "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'" },
	{ "X-Content-Type-Options", "nosniff" },
	{ "X-Frame-Options", "DENY" },
	{ "Referrer-Policy", "no-referrer" },
	{ "Cross-Origin-Opener-Policy", "same-origin" },
	{ "Cross-Origin-Resource-Policy", "same-origin" },
};

/* The page URLs: their first segment (web/app.js draws each). */
static const char *const pages[] = {
	"queues", "jobs", "batches", "processes", "periodic", "limits", "history", "metrics",
	"login", NULL,
};

static struct web_opts *opts;
static pthread_mutex_t streams_mu = PTHREAD_MUTEX_INITIALIZER;
static int streams;

/* ---- answers ---- */

static void add_common_headers(struct MHD_Response *res)
{
	for (size_t i = 0; i < sizeof security_headers / sizeof *security_headers; i++)
		MHD_add_response_header(res, security_headers[i][0], security_headers[i][1]);
}

static enum MHD_Result send_buffer(struct MHD_Connection *conn, unsigned status,
                                   const char *type, const char *data, size_t len,
                                   int copy, const char *cookie, const char *cache)
{
	struct MHD_Response *res = MHD_create_response_from_buffer(
		len, (void *)data, copy ? MHD_RESPMEM_MUST_COPY : MHD_RESPMEM_PERSISTENT);
	if (!res)
		return MHD_NO;
	add_common_headers(res);
	MHD_add_response_header(res, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	MHD_add_response_header(res, MHD_HTTP_HEADER_CACHE_CONTROL, cache ? cache : "no-store");
	if (cookie)
		MHD_add_response_header(res, MHD_HTTP_HEADER_SET_COOKIE, cookie);
	enum MHD_Result ret = MHD_queue_response(conn, status, res);
	MHD_destroy_response(res);
	return ret;
}

static enum MHD_Result send_json_error(struct MHD_Connection *conn, unsigned status,
                                       const char *msg)
{
	struct sbuf b;
	sb_init(&b);
	sb_adds(&b, "{\"error\":");
	jstr(&b, msg);
	sb_addc(&b, '}');
	enum MHD_Result r = send_buffer(conn, status, "application/json", b.s, b.len, 1, NULL,
	                                NULL);
	sb_free(&b);
	return r;
}

/* Secure under TLS: the browser then never sends the session over plain HTTP. */
static char *session_cookie(const char *id)
{
	const char *secure = opts->tls_cert ? "; Secure" : "";
	if (!id)
		return xasprintf(SESSION_COOKIE "=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0%s",
		                 secure);
	return xasprintf(SESSION_COOKIE "=%s; Path=/; HttpOnly; SameSite=Strict%s", id, secure);
}

void web_log_action(const char *user, const char *peer, const char *what, const char *result)
{
	struct log_field f[] = {
		{ .key = "user", .str = user }, { .key = "peer", .str = peer },
		{ .key = "action", .str = what }, { .key = "result", .str = result },
	};
	log_event(LOG_INFO, "web_action", f, 4, "web: %s (from %s): %s: %s", user, peer, what,
	          result);
}

/* ---- one request ---- */

struct request {
	struct sbuf body;
	int too_big;
};

static const char *header(struct MHD_Connection *conn, const char *name)
{
	return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
}

static void peer_of(struct MHD_Connection *conn, char *out, size_t n)
{
	snprintf(out, n, "?");
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	if (!ci || !ci->client_addr)
		return;
	socklen_t len = ci->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
	                                                       : sizeof(struct sockaddr_in);
	getnameinfo(ci->client_addr, len, out, (socklen_t)n, NULL, 0, NI_NUMERICHOST);
}

/* Who sent the request: a live session (copied into *s), or a Bearer name:password.
 * 1 session, 2 bearer (name in s->user), 0 nobody. */
static int who(struct MHD_Connection *conn, struct web_session *s)
{
	memset(s, 0, sizeof *s);
	const char *cookies = header(conn, MHD_HTTP_HEADER_COOKIE);
	char *id = cookies ? cookie_get(cookies, SESSION_COOKIE) : NULL;
	int found = id && web_session_get(id, s) == 0;
	free(id);
	if (found)
		return 1;
	const char *auth = header(conn, MHD_HTTP_HEADER_AUTHORIZATION);
	if (opts->auth_file && auth && strncmp(auth, "Bearer ", 7) == 0) {
		const char *cred = auth + 7;
		const char *colon = strchr(cred, ':');
		if (colon && (size_t)(colon - cred) < sizeof s->user) {
			snprintf(s->user, sizeof s->user, "%.*s", (int)(colon - cred), cred);
			if (web_users_check(&opts->users, s->user, colon + 1))
				return 2;
		}
		s->user[0] = '\0';
	}
	return 0;
}

/* May this POST come from where it says? NULL yes, else why not. */
static const char *cross_site(struct MHD_Connection *conn)
{
	const char *origin = header(conn, "Origin");
	const char *host = header(conn, MHD_HTTP_HEADER_HOST);
	if (origin && !origin_matches(origin, host))
		return "a request from another site (Origin)";
	const char *site = header(conn, "Sec-Fetch-Site");
	if (site && strcmp(site, "same-origin") != 0)
		return "a request from another site (Sec-Fetch-Site)";
	return NULL;
}

static enum MHD_Result query_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *value)
{
	(void)kind;
	form_add_copy(cls, key, value ? value : "");
	return MHD_YES;
}

static void session_json(struct sbuf *b, const struct web_session *s, int logged_in)
{
	sb_adds(b, "{\"user\":");
	jstr(b, logged_in ? s->user : NULL);
	sb_adds(b, ",\"csrf\":");
	jstr(b, logged_in && s->csrf[0] ? s->csrf : NULL);
	sb_printf(b, ",\"read_only\":%s,\"auth\":%s,\"insecure_http\":%s,\"version\":\"%s\"}",
	          opts->read_only ? "true" : "false", opts->auth_file ? "true" : "false",
	          opts->insecure_http ? "true" : "false", COGWORKERD_VERSION);
}

/* GET /api/session: who is logged in and the CSRF token; without --auth-file, the first
 * one makes the local session. */
static enum MHD_Result api_session(struct MHD_Connection *conn, struct web_session *s, int kind)
{
	char *cookie = NULL;
	if (!kind && !opts->auth_file) {
		web_session_new("local", s);
		kind = 1;
		cookie = session_cookie(s->id);
	}
	struct sbuf b;
	sb_init(&b);
	session_json(&b, s, kind != 0);
	enum MHD_Result r = send_buffer(conn, 200, "application/json", b.s, b.len, 1, cookie,
	                                NULL);
	sb_free(&b);
	free(cookie);
	return r;
}

static enum MHD_Result api_login(struct MHD_Connection *conn, struct request *rq,
                                 const char *peer)
{
	if (!opts->auth_file)
		return send_json_error(conn, 404, "no login here: started without --auth-file");
	struct form f;
	int bad = form_parse(rq->body.s, rq->body.len, &f);
	const char *user = form_get(&f, "user", NULL), *pw = form_get(&f, "password", NULL);
	enum MHD_Result r;
	if (bad || !user || !pw || !*user) {
		r = send_json_error(conn, 400, "login wants user and password");
	} else if (!web_users_check(&opts->users, user, pw)) {
		web_log_action(user, peer, "login", "refused: wrong user or password");
		sleep_seconds(LOGIN_FAIL_DELAY);
		r = send_json_error(conn, 401, "wrong user or password");
	} else {
		struct web_session s;
		web_session_new(user, &s);
		web_log_action(user, peer, "login", "ok");
		char *cookie = session_cookie(s.id);
		struct sbuf b;
		sb_init(&b);
		session_json(&b, &s, 1);
		r = send_buffer(conn, 200, "application/json", b.s, b.len, 1, cookie, NULL);
		sb_free(&b);
		free(cookie);
	}
	form_free(&f);
	return r;
}

/* ---- output streams (server-sent events) ---- */

struct stream {
	struct web_follow f;
	struct sbuf pending;
	size_t off;
	int ended;
};

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct stream *st = cls;
	while (st->off == st->pending.len) {
		if (st->ended)
			return MHD_CONTENT_READER_END_OF_STREAM;
		st->pending.len = 0;
		st->off = 0;
		st->ended = web_follow_step(&st->f, &st->pending);
	}
	size_t n = st->pending.len - st->off;
	if (n > max)
		n = max;
	memcpy(buf, st->pending.s + st->off, n);
	st->off += n;
	return (ssize_t)n;
}

static void stream_free(void *cls)
{
	struct stream *st = cls;
	free(st->f.jid);
	sb_free(&st->pending);
	free(st);
	pthread_mutex_lock(&streams_mu);
	streams--;
	pthread_mutex_unlock(&streams_mu);
}

static enum MHD_Result send_stream(struct MHD_Connection *conn, struct web_reply *rp)
{
	pthread_mutex_lock(&streams_mu);
	int ok = streams < MAX_STREAMS;
	if (ok)
		streams++;
	pthread_mutex_unlock(&streams_mu);
	if (!ok)
		return send_json_error(conn, 503, "too many output streams open: try again later");
	struct stream *st = xcalloc(1, sizeof *st);
	sb_init(&st->pending);
	st->f.jid = rp->stream_jid;
	st->f.st.run = rp->stream_run;
	rp->stream_jid = NULL;
	struct MHD_Response *res = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384,
	                                                             stream_read, st, stream_free);
	if (!res) {
		stream_free(st);
		return MHD_NO;
	}
	add_common_headers(res);
	MHD_add_response_header(res, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
	MHD_add_response_header(res, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	enum MHD_Result r = MHD_queue_response(conn, 200, res);
	MHD_destroy_response(res);
	return r;
}

/* ---- the API ---- */

static enum MHD_Result api(struct MHD_Connection *conn, const char *method, struct path *p,
                           struct request *rq)
{
	char peer[128];
	peer_of(conn, peer, sizeof peer);
	struct web_session s;
	int kind = who(conn, &s);
	int post = strcmp(method, MHD_HTTP_METHOD_POST) == 0;
	const char *route = p->n > 1 ? p->seg[1] : "";
	if (post) {
		const char *why = cross_site(conn);
		if (why) {
			web_log_action(kind ? s.user : "-", peer, "refused", why);
			return send_json_error(conn, 403, why);
		}
	}
	if (p->n == 2 && strcmp(route, "session") == 0 && !post)
		return api_session(conn, &s, kind);
	if (p->n == 2 && strcmp(route, "login") == 0 && post)
		return api_login(conn, rq, peer);
	if (!kind)
		return send_json_error(conn, 401, opts->auth_file ? "log in first"
		                                                  : "no session: load the page first");
	if (post && kind == 1) {
		const char *token = header(conn, "X-CSRF-Token");
		if (!token || !secret_equal(token, s.csrf)) {
			web_log_action(s.user, peer, "refused", "no valid CSRF token");
			return send_json_error(conn, 403, "no valid CSRF token: reload the page");
		}
	}
	if (p->n == 2 && strcmp(route, "logout") == 0 && post) {
		const char *cookies = header(conn, MHD_HTTP_HEADER_COOKIE);
		char *id = cookies ? cookie_get(cookies, SESSION_COOKIE) : NULL;
		web_session_end(id);
		free(id);
		web_log_action(s.user, peer, "logout", "ok");
		char *cookie = session_cookie(NULL);
		enum MHD_Result r = send_buffer(conn, 200, "application/json", "{}", 2, 1, cookie,
		                                NULL);
		free(cookie);
		return r;
	}
	char *what = NULL;
	if (post) {
		struct sbuf w;
		sb_init(&w);
		sb_adds(&w, "POST /api");
		for (int i = 1; i < p->n; i++) {
			char *seg = ctl_oneline(p->seg[i], strlen(p->seg[i]), 120);
			sb_printf(&w, "/%s", seg);
			free(seg);
		}
		what = sb_steal(&w);
		if (opts->read_only) {
			web_log_action(s.user, peer, what, "refused: read-only");
			free(what);
			return send_json_error(conn, 403, "read-only: this dashboard was started with "
			                                  "--read-only");
		}
	}
	struct web_req q = { .method = method, .user = s.user, .peer = peer };
	q.path.n = p->n - 1;
	for (int i = 1; i < p->n; i++)
		q.path.seg[i - 1] = p->seg[i];
	struct web_reply rp = { .status = 200, .type = "application/json" };
	sb_init(&rp.body);
	int bad = 0;
	/* The query string, as libmicrohttpd split and decoded it. */
	MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, query_arg, &q.query);
	bad |= post && form_parse(rq->body.s, rq->body.len, &q.body) != 0;
	if (rq->too_big || bad) {
		form_free(&q.body);
		free(what);
		sb_free(&rp.body);
		return send_json_error(conn, rq->too_big ? 413 : 400,
		                       rq->too_big ? "request body too large" : "malformed form data");
	}
	web_api(&q, &rp);
	form_free(&q.body);
	form_free(&q.query);
	if (what) {
		char *res = ctl_oneline(rp.body.s, rp.body.len, 600);
		char *line = xasprintf("%u %s", rp.status, res);
		web_log_action(s.user, peer, what, line);
		free(line);
		free(res);
		free(what);
	}
	if (rp.stream) {
		sb_free(&rp.body);
		return send_stream(conn, &rp);
	}
	enum MHD_Result r = send_buffer(conn, rp.status, rp.type, rp.body.s, rp.body.len, 1,
	                                NULL, NULL);
	sb_free(&rp.body);
	free(rp.stream_jid);
	return r;
}

static enum MHD_Result serve(struct MHD_Connection *conn, const char *url, const char *method,
                             struct request *rq)
{
	int get = strcmp(method, MHD_HTTP_METHOD_GET) == 0 ||
	          strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
	if (!get && strcmp(method, MHD_HTTP_METHOD_POST) != 0)
		return send_json_error(conn, 405, "method not allowed");
	if (!opts->auth_file && !host_is_loopback(header(conn, MHD_HTTP_HEADER_HOST)))
		return send_json_error(conn, 403, "this dashboard answers to a loopback address or "
		                                  "localhost only (started without --auth-file)");
	struct path p;
	if (path_split(url, &p) != 0)
		return send_json_error(conn, 400, "malformed path");
	enum MHD_Result r;
	if (p.n >= 1 && strcmp(p.seg[0], "api") == 0) {
		r = api(conn, method, &p, rq);
	} else if (!get) {
		r = send_json_error(conn, 405, "method not allowed");
	} else {
		const struct web_asset *a = NULL;
		if (p.n == 2 && strcmp(p.seg[0], "assets") == 0) {
			char *name = xasprintf("/assets/%s", p.seg[1]);
			a = web_asset_find(name);
			free(name);
		} else if (p.n == 0) {
			a = web_asset_find("/index.html");
		} else {
			for (int i = 0; pages[i] && !a; i++)
				if (strcmp(p.seg[0], pages[i]) == 0)
					a = web_asset_find("/index.html");
		}
		if (a)
			r = send_buffer(conn, 200, a->type, a->data, a->len, 0, NULL, "no-cache");
		else
			r = send_buffer(conn, 404, "text/plain; charset=utf-8", "not found\n", 10, 0,
			                NULL, NULL);
	}
	path_free(&p);
	return r;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **req_cls)
{
	(void)cls;
	(void)version;
	struct request *rq = *req_cls;
	if (!rq) {
		rq = xcalloc(1, sizeof *rq);
		sb_init(&rq->body);
		*req_cls = rq;
		return MHD_YES;
	}
	if (*upload_data_size) {
		if (rq->body.len + *upload_data_size > BODY_MAX)
			rq->too_big = 1;
		else
			sb_add(&rq->body, upload_data, *upload_data_size);
		*upload_data_size = 0;
		return MHD_YES;
	}
	return serve(conn, url, method, rq);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)conn;
	(void)toe;
	struct request *rq = *req_cls;
	if (rq) {
		sb_free(&rq->body);
		free(rq);
	}
	*req_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	char line[512];
	vsnprintf(line, sizeof line, fmt, ap);
	line[strcspn(line, "\n")] = '\0';
	log_debug("web: %s", line);
}

int web_serve(struct ctl *base, struct web_opts *o, int fd)
{
	opts = o;
	web_pool_init(base, o->max_redis);
	/* The signals that stop the server are taken by sigwait below, in this thread only:
	 * blocked before libmicrohttpd starts its threads, which inherit the mask. */
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &stop, NULL);
	signal(SIGPIPE, SIG_IGN);
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
	                 MHD_USE_AUTO | (o->tls_cert ? MHD_USE_TLS : 0);
	struct MHD_Daemon *d = MHD_start_daemon(
		flags, 0, NULL, NULL, on_request, NULL,
		MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
		/* Ignored without MHD_USE_TLS; NULL would end the list there. */
		MHD_OPTION_HTTPS_MEM_CERT, o->tls_cert ? o->tls_cert : "",
		MHD_OPTION_HTTPS_MEM_KEY, o->tls_key ? o->tls_key : "",
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)MAX_CONNECTIONS,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
		MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
		MHD_OPTION_END);
	if (!d) {
		ctl_error("web: libmicrohttpd did not start on %s%s", o->listen, o->tls_cert
		          ? " (is --tls-key the key of --tls-cert?)" : "");
		return CTL_USAGE;
	}
	log_info("web: dashboard on %s://%s/ (%s%s%s)", o->tls_cert ? "https" : "http", o->listen,
	         o->auth_file ? "users of " : "no login: loopback only",
	         o->auth_file ? o->auth_file : "", o->read_only ? ", read-only" : "");
	int sig = 0;
	sigwait(&stop, &sig);
	log_info("web: signal %d: stopping", sig);
	MHD_stop_daemon(d);
	return CTL_OK;
}
