/* SPDX-License-Identifier: MIT */
/*
 * redis.c: the Redis layer every thread uses through its own struct rconn.
 *
 * The bytes go through a link of our own (rlink.c: the socket, what is queued to send,
 * hiredis's reply reader), not a hiredis context: hiredis 0.14 reads and writes the
 * context's fd itself, so nothing could be put under it, while its formatter and reader
 * are all of the protocol we need (doc/design.md "Pitfalls").
 *
 * Design notes:
 *
 * - A link is never reconnected in place: a fresh one is simpler and guarantees the same
 *   steps (timeouts, keepalive, AUTH, SELECT) every time.
 * - After an I/O error or a timeout the link is unusable. We free it at once; the next
 *   command connects again, not before the backoff has passed (capped at 2 s, jittered), so
 *   that every thread of a daemon does not hammer a restarting server in lockstep.
 * - Blocking commands (BLMOVE, BRPOP) must finish server-side before the socket times out,
 *   so rcmd_blocking raises the link's timeout above the blocking timeout when needed.
 * - AUTH (password, or ACL user + password) and SELECT run on every new connection.
 * - With Redis Sentinel (sentinel.c) a new connection asks the sentinels for the primary and
 *   checks its ROLE; a READONLY, MASTERDOWN, NOREPLICAS or UNBLOCKED reply (we are on a
 *   demoted primary) drops the connection so that the next call asks again, and so does a
 *   switch announced since the connection was made (rconn_stale).
 *
 * Errors come back as NULL with r->err set and r->unavailable classified, so callers only
 * decide "log it summarised" (unavailable) or "log it in full" (a command error).
 */
#include <ctype.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "counters.h"
#include "redis.h"
#include "scripts.h"
#include "sentinel.h"
#include "util.h"

int (*redis_fault_hook)(const char *name);

/* A WRONGTYPE reply seen on any connection, for the poller's key check (redis.h). */
static atomic_int wrongtype_seen;

int redis_wrongtype_take(void)
{
	return atomic_exchange(&wrongtype_seen, 0);
}

int redis_wrongtype_pending(void)
{
	return atomic_load(&wrongtype_seen);
}

#define BACKOFF_MIN 0.05
#define BACKOFF_MAX 2.0

void rconn_init(struct rconn *r, const struct redis_conf *rc)
{
	memset(r, 0, sizeof *r);
	redis_conf_copy(&r->rc, rc);
}

void rconn_close(struct rconn *r)
{
	rlink_close(r->link);
	r->link = NULL;
}

double rconn_command_timeout(const struct rconn *r)
{
	return r->rc.command_timeout > 0 ? r->rc.command_timeout : 5.0;
}

void rconn_set_timeouts(struct rconn *r, double connect, double command)
{
	r->rc.connect_timeout = connect;
	r->rc.command_timeout = command;
	if (r->link)
		rlink_set_timeout(r->link, command);
}

void rconn_free(struct rconn *r)
{
	rconn_close(r);
	redis_conf_clear(&r->rc);
	memset(r, 0, sizeof *r);
}


static void set_err(struct rconn *r, int unavailable, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->err, sizeof r->err, fmt, ap);
	va_end(ap);
	r->unavailable = unavailable;
}

static void connect_failed(struct rconn *r)
{
	double now = mono_now();
	r->backoff = r->backoff <= 0 ? BACKOFF_MIN : r->backoff * 2;
	if (r->backoff > BACKOFF_MAX)
		r->backoff = BACKOFF_MAX;
	r->next_attempt = now + r->backoff * (0.5 + 0.5 * random_unit());
}

/* AUTH and SELECT on a fresh link; 0 on success. */
static int handshake(struct rconn *r)
{
	redisReply *rep = NULL;
	if (r->rc.password && r->rc.user)
		rep = rlink_command(r->link, "AUTH %s %s", r->rc.user, r->rc.password);
	else if (r->rc.password)
		rep = rlink_command(r->link, "AUTH %s", r->rc.password);
	if (r->rc.password) {
		if (!rep || rep->type == REDIS_REPLY_ERROR) {
			set_err(r, rep == NULL, "AUTH to %s failed: %s", r->endpoint,
			        rep ? rep->str : rlink_error(r->link));
			if (rep)
				freeReplyObject(rep);
			return -1;
		}
		freeReplyObject(rep);
	}
	if (r->rc.db != 0) {
		rep = rlink_command(r->link, "SELECT %d", r->rc.db);
		if (!rep || rep->type == REDIS_REPLY_ERROR) {
			set_err(r, rep == NULL, "SELECT %d on %s failed: %s", r->rc.db, r->endpoint,
			        rep ? rep->str : rlink_error(r->link));
			if (rep)
				freeReplyObject(rep);
			return -1;
		}
		freeReplyObject(rep);
	}
	return 0;
}

/*
 * A connection the server closed while we were not using it (CLIENT KILL, the server's
 * idle `timeout`, a restart) is readable at EOF: reconnect before sending rather than
 * lose the command that would find out (a stats INCR after a long job). Nothing else can
 * be readable on an idle request/response connection. A connection that answered within
 * the last IDLE_CHECK seconds is not asked: that poll was two of a short job's system
 * calls, and a close by the server's idle timeout (whole seconds) cannot be that recent.
 */
#define IDLE_CHECK 0.1
static void drop_if_closed(struct rconn *r)
{
	if (rlink_closed_while_idle(r->link))
		rconn_close(r);
}

/* A new link to host:port (or the unix socket) with the command timeout, AUTH and SELECT;
 * what names the target in messages. 0 on success. */
static int open_link(struct rconn *r, const char *host, int port, const char *what)
{
	struct rlink_target t = {
		.host = host, .port = port, .path = r->rc.path,
		.connect_timeout = r->rc.connect_timeout > 0 ? r->rc.connect_timeout : 2.0,
		.tls = r->rc.use_tls ? r->rc.tls.ctx : NULL, .server_name = r->rc.tls.server_name,
	};
	char why[256];
	snprintf(r->endpoint, sizeof r->endpoint, "%s", what);
	if (!(r->link = rlink_open(&t, why, sizeof why))) {
		set_err(r, 1, "connect to %s failed: %s", what, why);
		return -1;
	}
	rlink_set_timeout(r->link, rconn_command_timeout(r));
	rlink_limit_bulk(r->link, r->bulk_max, r->bulk_head);
	if (handshake(r) != 0) {
		rconn_close(r);
		return -1;
	}
	return 0;
}

void rconn_limit_bulk(struct rconn *r, size_t max, size_t head)
{
	r->bulk_max = max;
	r->bulk_head = head;
	if (r->link)
		rlink_limit_bulk(r->link, max, head);
}

int rconn_skipped(struct rconn *r, struct rskip *out)
{
	return r->link && rlink_skipped(r->link, out);
}

/* Connect to host:port if it is the primary (ROLE); 0 on success. */
static int open_primary(struct rconn *r, const char *host, int port)
{
	char what[300], why[256];
	snprintf(what, sizeof what, "%s:%d (primary of %s)", host, port, r->rc.master_name);
	if (open_link(r, host, port, what) != 0)
		return -1;
	/* An ACL user without ROLE cannot check; a READONLY would tell us soon enough then. */
	int role = redis_role_is_primary(r->link, why, sizeof why);
	int unverifiable = role < 0 && !rlink_error(r->link)[0] &&
	                   strncmp(why, "ROLE: NOPERM", 12) == 0;
	if (role != 1 && !unverifiable) {
		set_err(r, 1, "%s:%d is not the primary of %s: %s", host, port, r->rc.master_name,
		        why);
		rconn_close(r);
		return -1;
	}
	sentinel_note_primary(r->rc.master_name, host, port);
	return 0;
}

/*
 * The primary through the sentinels: the one a +switch-master announced, if any, then each
 * sentinel's answer, from r->sentinel_first on. That is the last one that answered well;
 * after a failure it is the next one, so that a sentinel that hangs is not asked first
 * again. No further sentinel is asked once twice the connect timeout has gone by (each
 * costs at most that), so that a connect stays about as bounded as without Sentinel (the
 * stop's last PING relies on it); the next attempt goes on with the next sentinels.
 * 0 on success.
 */
static int connect_primary(struct rconn *r)
{
	char host[256], failures[sizeof r->err] = "";
	int port, n = r->rc.sentinels.n;
	size_t used = 0;
	double ct = r->rc.connect_timeout > 0 ? r->rc.connect_timeout : 2.0;
	double give_up = mono_now() + 2 * ct;

	if (sentinel_hint(r->generation, host, sizeof host, &port) == 0 &&
	    open_primary(r, host, port) == 0)
		return 0;
	for (int k = 0, first = r->sentinel_first; k < n && (k == 0 || mono_now() < give_up); k++) {
		int i = (first + k) % n;
		char *h = NULL;
		if (sentinel_ask(&r->rc, i, &h, &port, r->err, sizeof r->err) == 0) {
			int ok = open_primary(r, h, port);
			free(h);
			if (ok == 0) {
				r->sentinel_first = i;
				return 0;
			}
		}
		r->sentinel_first = (i + 1) % n;
		if (used < sizeof failures - 1 && !strstr(failures, r->err))
			used += (size_t)snprintf(failures + used, sizeof failures - used, "%s%s",
			                         used ? "; " : "", r->err);
	}
	set_err(r, 1, "no primary of %s found: %s", r->rc.master_name, failures);
	return -1;
}

int rconn_stale(const struct rconn *r)
{
	return r->rc.sentinels.n > 0 && r->generation != sentinel_generation();
}

int rconn_connect(struct rconn *r, int force)
{
	if (r->link && rconn_stale(r))
		rconn_close(r);         /* the sentinels announced another primary */
	if (r->link && mono_now() - r->last_reply >= IDLE_CHECK)
		drop_if_closed(r);
	if (r->link)
		return 0;
	/* News of a switch ends the wait: the announced primary is worth trying at once. */
	if (!force && mono_now() < r->next_attempt && !rconn_stale(r)) {
		set_err(r, 1, "not connected (reconnecting)");
		return -1;
	}
	r->generation = sentinel_generation();
	int failed = r->rc.sentinels.n > 0
	             ? connect_primary(r)
	             : open_link(r, r->rc.host ? r->rc.host : "127.0.0.1",
	                            r->rc.port ? r->rc.port : 6379,
	                            r->rc.display ? r->rc.display : "redis");
	if (failed) {
		connect_failed(r);
		return -1;
	}
	if (r->connects++ > 0)
		metrics_inc(METRIC_REDIS_RECONNECTS);
	return 0;
}

/* True if msg's first word, or a "-CODE" inside a script error, is one of codes. */
static int has_code(const char *msg, const char *const *codes, size_t ncodes)
{
	for (size_t i = 0; i < ncodes; i++) {
		size_t n = strlen(codes[i]);
		if (strncmp(msg, codes[i], n) == 0 && (msg[n] == ' ' || msg[n] == '\0'))
			return 1;
	}
	if (!strstr(msg, "Error running script"))
		return 0;
	for (size_t i = 0; i < ncodes; i++) {
		size_t n = strlen(codes[i]);
		for (const char *p = strchr(msg, '-'); p; p = strchr(p + 1, '-')) {
			if (strncmp(p + 1, codes[i], n) == 0 &&
			    !(isalnum((unsigned char)p[1 + n]) || p[1 + n] == '_'))
				return 1;
		}
	}
	return 0;
}

/* The replies of a server that is no longer (or not yet) a writable primary. */
static const char *const demoted_codes[] = { "READONLY", "MASTERDOWN", "NOREPLICAS",
                                             "UNBLOCKED" };

int redis_error_is_unavailable(const char *msg)
{
	static const char *const codes[] = { "LOADING", "TRYAGAIN", "BUSY" };
	if (!msg)
		return 1;
	return has_code(msg, codes, sizeof codes / sizeof *codes) ||
	       has_code(msg, demoted_codes, sizeof demoted_codes / sizeof *demoted_codes);
}

int redis_error_is_demoted(const char *msg)
{
	return msg && has_code(msg, demoted_codes, sizeof demoted_codes / sizeof *demoted_codes);
}

/*
 * Turn the link's result into ours: NULL + classified error, or the reply. The first
 * reconnect after a drop is immediate, unless the link never had a reply: a server that
 * closes every connection at once (a TLS port, a refused client certificate) must get the
 * backoff, not a thread that reconnects in a loop. A reply ends the backoff.
 */
static redisReply *finish(struct rconn *r, redisReply *rep)
{
	if (!rep) {
		int replied = r->link && rlink_replied(r->link);
		set_err(r, 1, "%s: %s", r->endpoint, r->link && rlink_error(r->link)[0]
		        ? rlink_error(r->link) : "connection lost");
		rconn_close(r);
		connect_failed(r);
		if (replied)
			r->next_attempt = 0;
		return NULL;
	}
	r->backoff = 0;
	r->last_reply = mono_now();
	if (rep->type == REDIS_REPLY_ERROR) {
		/* Also inside a script's error ("... WRONGTYPE Operation against a key ..."). */
		if (strstr(rep->str, "WRONGTYPE"))
			atomic_store(&wrongtype_seen, 1);
		set_err(r, redis_error_is_unavailable(rep->str), "%s", rep->str);
		freeReplyObject(rep);
		/* With Sentinel, a demoted primary's reply means: ask the sentinels again. */
		if (r->rc.sentinels.n > 0 && redis_error_is_demoted(r->err)) {
			rconn_close(r);
			r->next_attempt = 0;
		}
		return NULL;
	}
	return rep;
}

/* The injected fault, if any: 1 when the command must fail. */
static int injected(struct rconn *r, const char *name, size_t len)
{
	if (!redis_fault_hook)
		return 0;
	char buf[64];
	snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), name);
	if (!redis_fault_hook(buf))
		return 0;
	set_err(r, 1, "injected fault: %s", buf);
	return 1;
}

static size_t first_word(const char *s)
{
	size_t n = 0;
	while (s[n] && s[n] != ' ')
		n++;
	return n;
}

redisReply *rcmd(struct rconn *r, const char *fmt, ...)
{
	if (rconn_connect(r, 0) != 0 || injected(r, fmt, first_word(fmt)))
		return NULL;
	va_list ap;
	va_start(ap, fmt);
	int bad = rlink_appendv(r->link, fmt, ap);
	va_end(ap);
	void *rep = NULL;
	if (!bad)
		rlink_reply(r->link, &rep);
	return finish(r, rep);
}

/* A command of argc strings and its reply, on a connected r. */
static redisReply *command_argv_raw(struct rconn *r, int argc, const char **argv,
                                    const size_t *lens)
{
	void *rep = NULL;
	rlink_append_argv(r->link, argc, argv, lens);
	rlink_reply(r->link, &rep);
	return rep;
}

static redisReply *command_argv(struct rconn *r, int argc, const char **argv,
                                const size_t *lens)
{
	if (rconn_connect(r, 0) != 0)
		return NULL;
	return finish(r, command_argv_raw(r, argc, argv, lens));
}

redisReply *rcmd_argv(struct rconn *r, int argc, const char **argv, const size_t *lens)
{
	if (rconn_connect(r, 0) != 0 || injected(r, argv[0], strlen(argv[0])))
		return NULL;
	return finish(r, command_argv_raw(r, argc, argv, lens));
}

redisReply *rcmd_blocking(struct rconn *r, double block, int argc, const char **argv,
                          const size_t *lens)
{
	if (rconn_connect(r, 0) != 0 || injected(r, argv[0], strlen(argv[0])))
		return NULL;
	double normal = rconn_command_timeout(r);
	int raise = normal < block + 1.0;
	if (raise)
		rlink_set_timeout(r->link, block + normal);
	redisReply *rep = finish(r, command_argv_raw(r, argc, argv, lens));
	if (raise && r->link)
		rlink_set_timeout(r->link, normal);
	return rep;
}

void rpipe_begin(struct rconn *r, struct rpipe *p)
{
	p->n = 0;
	p->next = 0;
	p->unavailable = 0;
	p->failed_conn = rconn_connect(r, 0) != 0;
}

void rpipe_add(struct rconn *r, struct rpipe *p, const char *fmt, ...)
{
	if (!p->failed_conn && injected(r, fmt, first_word(fmt)))
		p->failed_conn = 1;
	if (!p->failed_conn) {
		va_list ap;
		va_start(ap, fmt);
		if (rlink_appendv(r->link, fmt, ap) != 0)
			p->failed_conn = 1;
		va_end(ap);
	}
	p->n++;
}

void rpipe_add_argv(struct rconn *r, struct rpipe *p, int argc, const char **argv,
                    const size_t *lens)
{
	rpipe_add_pieces(r, p, argc, NULL, argv, lens);
}

void rpipe_add_pieces(struct rconn *r, struct rpipe *p, int argc, const int *npieces,
                      const char **pieces, const size_t *plens)
{
	if (!p->failed_conn && injected(r, pieces[0], plens ? plens[0] : strlen(pieces[0])))
		p->failed_conn = 1;
	if (!p->failed_conn)
		rlink_append_pieces(r->link, argc, npieces, pieces, plens);
	p->n++;
}

int rpipe_read(struct rconn *r, struct rpipe *p, int n, redisReply **replies)
{
	int failures = 0;
	/* Commands appended before a failure would desynchronise the replies of the next
	 * command: drop the connection instead. */
	if (p->failed_conn && r->link)
		rconn_close(r);
	if (n > p->n - p->next)
		n = p->n - p->next;
	if (n < 0)
		n = 0;
	p->next += n;
	for (int i = 0; i < n; i++) {
		replies[i] = NULL;
		if (p->failed_conn || !r->link) {
			failures++;
			p->unavailable++;
			continue;
		}
		void *rep = NULL;
		rlink_reply(r->link, &rep);
		replies[i] = finish(r, rep);
		if (!replies[i]) {
			failures++;
			p->unavailable += r->unavailable;
			if (!r->link)
				p->failed_conn = 1;
		}
	}
	if (p->failed_conn && !r->err[0])
		set_err(r, 1, "connection lost");
	return failures;
}

int rpipe_exec(struct rconn *r, struct rpipe *p, redisReply **replies)
{
	return rpipe_read(r, p, p->n - p->next, replies);
}

/* argv and lens of EVALSHA (EVAL for a plain_eval script) sha nkeys keys... args...; nk
 * holds the key count's text. Free argv and lens. */
static int script_argv(const struct script *s, int nkeys, const char **keys, int nargs,
                       const char **args, const size_t *arglens, char nk[16],
                       const char ***argv_out, size_t **lens_out)
{
	int argc = 3 + nkeys + nargs;
	const char **argv = xcalloc((size_t)argc, sizeof *argv);
	size_t *lens = xcalloc((size_t)argc, sizeof *lens);
	snprintf(nk, 16, "%d", nkeys);
	argv[0] = s->plain_eval ? "EVAL" : "EVALSHA";
	argv[1] = s->plain_eval ? s->src : s->sha;
	argv[2] = nk;
	for (int i = 0; i < nkeys; i++)
		argv[3 + i] = keys[i];
	for (int i = 0; i < nargs; i++) {
		argv[3 + nkeys + i] = args[i];
		if (arglens)
			lens[3 + nkeys + i] = arglens[i];
	}
	for (int i = 0; i < argc; i++)
		if (!arglens || i < 3 + nkeys)
			lens[i] = strlen(argv[i]);
	*argv_out = argv;
	*lens_out = lens;
	return argc;
}

void rpipe_add_script(struct rconn *r, struct rpipe *p, const char *name, int nkeys,
                      const char **keys, int nargs, const char **args,
                      const size_t *arglens)
{
	const struct script *s = script_get(name);
	if (!p->failed_conn && injected(r, name, strlen(name)))
		p->failed_conn = 1;
	if (!p->failed_conn) {
		const char **argv;
		size_t *lens;
		char nk[16];
		int argc = script_argv(s, nkeys, keys, nargs, args, arglens, nk, &argv, &lens);
		rlink_append_argv(r->link, argc, argv, lens);
		free(argv);
		free(lens);
	}
	p->n++;
}

redisReply *rscript(struct rconn *r, const char *name, int nkeys, const char **keys,
                    int nargs, const char **args, const size_t *arglens)
{
	const struct script *s = script_get(name);
	if (rconn_connect(r, 0) != 0 || injected(r, name, strlen(name)))
		return NULL;
	const char **argv;
	size_t *lens;
	char nk[16];
	int argc = script_argv(s, nkeys, keys, nargs, args, arglens, nk, &argv, &lens);
	redisReply *rep = command_argv(r, argc, argv, lens);
	if (!rep && !r->unavailable && strncmp(r->err, "NOSCRIPT", 8) == 0) {
		argv[0] = "EVAL";
		argv[1] = s->src;
		lens[0] = 4;
		lens[1] = strlen(s->src);
		rep = command_argv(r, argc, argv, lens);
	}
	free(argv);
	free(lens);
	return rep;
}

char *redis_glob_escape(const char *s)
{
	struct sbuf b;
	sb_init(&b);
	for (; *s; s++) {
		if (strchr("*?[]\\", *s))
			sb_addc(&b, '\\');
		sb_addc(&b, *s);
	}
	return sb_steal(&b);
}

double redis_time(struct rconn *r)
{
	redisReply *rep = rcmd(r, "TIME");
	if (!rep)
		return r->unavailable ? -1 : now_float();
	double t = now_float();
	if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2)
		t = atof(rep->element[0]->str) + atof(rep->element[1]->str) / 1e6;
	freeReplyObject(rep);
	return t;
}

long long reply_integer(const redisReply *rep, long long dflt)
{
	if (!rep)
		return dflt;
	if (rep->type == REDIS_REPLY_INTEGER)
		return rep->integer;
	if (rep->type == REDIS_REPLY_STRING)
		return strtoll(rep->str, NULL, 10);
	return dflt;
}

int site_result(struct log_site *site, struct rconn *r, int ok, const char *what)
{
	if (ok)
		log_site_recovered(site, mono_now());
	else if (r->unavailable)
		log_site_unavailable(site, r->err, mono_now());
	else
		log_error("%s: %s: %s", site->name, what, r->err);
	return ok;
}
