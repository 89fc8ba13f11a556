/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the Redis link (src/rlink.c) over TLS and in plain text: against a real
 * redis-server that serves TLS (client certificates required) on one port and plain text
 * on another and on a unix socket, and against fake servers forked here that answer a
 * command in one-byte TLS records, close in the middle of a reply, never answer or never
 * read. The certificates are made with the openssl command line, as tests/integration/
 * tlskit.py makes them: a CA, the server's (localhost, 127.0.0.1), a client's, and a
 * second CA nobody trusts.
 *
 * What the integration tests cannot show from outside: replies and commands of many TLS
 * records (16 KiB each) read and written whole, a string past the link's limit dropped
 * while it comes in records, and each way a link breaks named as rlink.h promises.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <openssl/ssl.h>
#include "rlink.h"
#include "tls.h"
#include "util.h"

static char dir[64];                    /* the certificates and the server's socket */
static char sockpath[128];
static int tls_port, plain_port;
static pid_t server_pid;
static SSL_CTX *client_ctx;             /* the CA and the client certificate */

static void path_of(char *out, size_t n, const char *name, const char *ext)
{
	snprintf(out, n, "%s/%s.%s", dir, name, ext);
}

/* A TCP port nobody listens on now. */
static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof sa;
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
		abort();
	close(fd);
	return ntohs(sa.sin_port);
}

static void make_certificates(void)
{
	char cmd[4096];
	snprintf(cmd, sizeof cmd,
	         "set -e; cd %s; EC='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes'\n"
	         "for ca in ca otherca; do openssl req -x509 $EC -keyout $ca.key -out $ca.crt "
	         "-days 3 -subj \"/CN=cogworkerd unit $ca\"; done\n"
	         "signed() { openssl req $EC -keyout $1.key -out $1.csr -subj /CN=$2; "
	         "echo subjectAltName=$3 > $1.ext; openssl x509 -req -in $1.csr -CA $4.crt "
	         "-CAkey $4.key -CAcreateserial -days 2 -extfile $1.ext -out $1.crt; }\n"
	         "signed server localhost DNS:localhost,IP:127.0.0.1 ca\n"
	         "signed client cogworkerd DNS:cogworkerd ca\n"
	         "signed stranger localhost DNS:localhost,IP:127.0.0.1 otherca\n"
	         "chmod 600 *.key\n", dir);
	char quiet[4200];
	snprintf(quiet, sizeof quiet, "(%s) >/dev/null 2>&1", cmd);
	if (system(quiet) != 0) {
		fprintf(stderr, "test_rlink: openssl could not make the certificates\n");
		exit(1);
	}
}

static SSL_CTX *ctx_with(const char *ca, const char *cert)
{
	char caf[128], cf[128], kf[128], err[256];
	path_of(caf, sizeof caf, ca, "crt");
	path_of(cf, sizeof cf, cert ? cert : "", "crt");
	path_of(kf, sizeof kf, cert ? cert : "", "key");
	struct tls_settings t = { .ca_file = caf, .cert_file = cert ? cf : NULL,
		                  .key_file = cert ? kf : NULL, .verify = 1 };
	SSL_CTX *ctx = tls_ctx_new(&t, err, sizeof err);
	if (!ctx) {
		fprintf(stderr, "test_rlink: %s\n", err);
		exit(1);
	}
	return ctx;
}

static void start_server(void)
{
	char cert[128], key[128], ca[128];
	path_of(cert, sizeof cert, "server", "crt");
	path_of(key, sizeof key, "server", "key");
	path_of(ca, sizeof ca, "ca", "crt");
	snprintf(sockpath, sizeof sockpath, "%s/redis.sock", dir);
	tls_port = free_port();
	plain_port = free_port();
	char tp[16], pp[16];
	snprintf(tp, sizeof tp, "%d", tls_port);
	snprintf(pp, sizeof pp, "%d", plain_port);
	server_pid = fork();
	if (server_pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int devnull = open("/dev/null", O_WRONLY);
		dup2(devnull, 1);
		execlp("redis-server", "redis-server", "--port", pp, "--bind", "127.0.0.1",
		       "--tls-port", tp, "--tls-cert-file", cert, "--tls-key-file", key,
		       "--tls-ca-cert-file", ca, "--tls-auth-clients", "yes", "--unixsocket", sockpath,
		       "--save", "", "--appendonly", "no", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 200; i++) {
		struct stat st;
		if (stat(sockpath, &st) == 0)
			return;
		usleep(50000);
	}
	fprintf(stderr, "test_rlink: redis-server did not start\n");
	exit(1);
}

/* ---- links ---- */

static struct rlink *open_tls(SSL_CTX *ctx, int port, const char *name, char *err, size_t n)
{
	struct rlink_target t = { .host = "127.0.0.1", .port = port, .connect_timeout = 2,
		                  .tls = ctx, .server_name = name };
	return rlink_open(&t, err, n);
}

static struct rlink *link_tls(void)
{
	char err[256] = "";
	struct rlink *l = open_tls(client_ctx, tls_port, NULL, err, sizeof err);
	ck_assert_msg(l, "TLS connect: %s", err);
	rlink_set_timeout(l, 5);
	return l;
}

static struct rlink *link_unix(void)
{
	char err[256] = "";
	struct rlink_target t = { .path = sockpath, .connect_timeout = 2 };
	struct rlink *l = rlink_open(&t, err, sizeof err);
	ck_assert_msg(l, "unix connect: %s", err);
	rlink_set_timeout(l, 5);
	return l;
}

static struct rlink *link_plain(int port, char *err, size_t n)
{
	struct rlink_target t = { .host = "127.0.0.1", .port = port, .connect_timeout = 1 };
	return rlink_open(&t, err, n);
}

/* n bytes that differ from one offset to the next (a shifted copy would not match). */
static char *pattern(size_t n, unsigned seed)
{
	char *p = xmalloc(n);
	unsigned x = seed * 2654435761u + 1;
	for (size_t i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		p[i] = (char)(x >> 16);
	}
	return p;
}

static void ok_status(struct rlink *l, redisReply *r)
{
	ck_assert_msg(r, "no reply: %s", rlink_error(l));
	ck_assert_msg(r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_INTEGER,
	              "reply type %d: %s", r->type, r->type == REDIS_REPLY_ERROR ? r->str : "");
	freeReplyObject(r);
}

/* SET key to n patterned bytes through rlink_append_argv, GET it back whole. */
static void round_trip(struct rlink *l, size_t n)
{
	char *v = pattern(n, (unsigned)n);
	const char *argv[] = { "SET", "big", v };
	size_t lens[] = { 3, 3, n };
	rlink_append_argv(l, 3, argv, lens);
	void *r;
	ck_assert_msg(rlink_reply(l, &r) == 0, "SET of %zu bytes: %s", n, rlink_error(l));
	ok_status(l, r);
	redisReply *g = rlink_command(l, "GET big");
	ck_assert_msg(g, "GET of %zu bytes: %s", n, rlink_error(l));
	ck_assert_int_eq(g->type, REDIS_REPLY_STRING);
	ck_assert_uint_eq(g->len, n);
	ck_assert_msg(memcmp(g->str, v, n) == 0, "the %zu bytes read back differ", n);
	freeReplyObject(g);
	free(v);
}

/* ---- against the real server ---- */

START_TEST(test_tls_connect_and_summary)
{
	struct rlink *l = link_tls();
	char sum[512];
	rlink_tls_summary(l, sum, sizeof sum);
	ck_assert_msg(strstr(sum, "TLSv1.3 ") == sum, "summary: %s", sum);
	ck_assert_msg(strstr(sum, "localhost") && strstr(sum, "(verified)"), "summary: %s", sum);
	ck_assert(!rlink_replied(l));
	redisReply *r = rlink_command(l, "PING");
	ck_assert_msg(r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0,
	              "PING: %s", rlink_error(l));
	freeReplyObject(r);
	ck_assert(rlink_replied(l));
	ck_assert_str_eq(rlink_error(l), "");
	rlink_close(l);
	l = link_unix();
	rlink_tls_summary(l, sum, sizeof sum);
	ck_assert_str_eq(sum, "plain text");
	rlink_close(l);
}
END_TEST

/* 1 MB and 8 MB each way: one TLS record carries 16 KiB, so hundreds of records, and a
 * write far past the socket's buffer (the server reads it while we write). */
START_TEST(test_tls_replies_and_commands_over_16k)
{
	struct rlink *l = link_tls();
	size_t sizes[] = { 16383, 16384, 16385, 100000, 1 << 20, 8 << 20 };
	for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
		round_trip(l, sizes[i]);
	rlink_close(l);
	l = link_unix();
	round_trip(l, 1 << 20);
	rlink_close(l);
}
END_TEST

/* 50 commands queued, then their 50 replies of 64 KiB each: many replies per read, and
 * replies cut across records and reads. */
START_TEST(test_tls_pipelined_big_replies)
{
	struct rlink *l = link_tls();
	size_t n = 65536 + 7;
	char *v = pattern(n, 7);
	const char *argv[] = { "SET", "p", v };
	size_t lens[] = { 3, 1, n };
	rlink_append_argv(l, 3, argv, lens);
	void *r;
	ck_assert_int_eq(rlink_reply(l, &r), 0);
	ok_status(l, r);
	for (int i = 0; i < 50; i++) {
		const char *g[] = { "GET", "p" };
		rlink_append_argv(l, 2, g, NULL);
	}
	for (int i = 0; i < 50; i++) {
		ck_assert_msg(rlink_reply(l, &r) == 0, "reply %d: %s", i, rlink_error(l));
		redisReply *g = r;
		ck_assert_uint_eq(g->len, n);
		ck_assert(memcmp(g->str, v, n) == 0);
		freeReplyObject(r);
	}
	free(v);
	rlink_close(l);
}
END_TEST

/* A string past the limit comes as its length, dropped while its records come in, its
 * head and tail kept; the link is clean for the next command. */
START_TEST(test_tls_string_past_the_limit_dropped)
{
	struct rlink *l = link_tls();
	size_t n = 3 << 20;
	char *v = pattern(n, 3);
	const char *argv[] = { "SET", "huge", v };
	size_t lens[] = { 3, 4, n };
	rlink_append_argv(l, 3, argv, lens);
	void *r;
	ck_assert_int_eq(rlink_reply(l, &r), 0);
	ok_status(l, r);
	rlink_limit_bulk(l, 65536, 32);
	redisReply *g = rlink_command(l, "GET huge");
	ck_assert_msg(g, "GET: %s", rlink_error(l));
	ck_assert_int_eq(g->type, REDIS_REPLY_INTEGER);
	ck_assert_int_eq(g->integer, (long long)n);
	freeReplyObject(g);
	struct rskip s;
	ck_assert(rlink_skipped(l, &s));
	ck_assert_uint_eq(s.len, n);
	ck_assert_uint_eq(s.head_len, 32);
	ck_assert(memcmp(s.head, v, 32) == 0);
	ck_assert_uint_eq(s.tail_len, RSKIP_TAIL);
	ck_assert(memcmp(s.tail, v + n - RSKIP_TAIL, RSKIP_TAIL) == 0);
	rskip_free(&s);
	ck_assert(!rlink_skipped(l, &s));
	g = rlink_command(l, "ECHO %s", "after");
	ck_assert_msg(g && g->type == REDIS_REPLY_STRING && strcmp(g->str, "after") == 0,
	              "the next command: %s", rlink_error(l));
	freeReplyObject(g);
	free(v);
	rlink_close(l);
}
END_TEST

/* An idle TLS link is not taken for closed (the session tickets are readable); one the
 * server killed is. */
START_TEST(test_tls_closed_while_idle)
{
	struct rlink *l = link_tls(), *k = link_tls();
	redisReply *r = rlink_command(l, "CLIENT SETNAME victim");
	ok_status(l, r);
	usleep(100000);
	ck_assert(!rlink_closed_while_idle(l));
	ck_assert_str_eq(rlink_error(l), "");
	r = rlink_command(k, "CLIENT KILL TYPE normal SKIPME yes");
	ck_assert_msg(r && r->type == REDIS_REPLY_INTEGER && r->integer >= 1, "CLIENT KILL: %s",
	              rlink_error(k));
	freeReplyObject(r);
	for (int i = 0; i < 100 && !rlink_closed_while_idle(l); i++)
		usleep(20000);
	ck_assert(rlink_closed_while_idle(l));
	rlink_close(l);
	rlink_close(k);
}
END_TEST

struct got { int n; size_t len; char first, last; };

static void on_message(void *ctx, const char *channel, const char *payload)
{
	struct got *g = ctx;
	(void)channel;
	g->n++;
	g->len = strlen(payload);
	g->first = payload[0];
	g->last = payload[g->len - 1];
}

/* A 200 KiB message on a subscribed TLS link: read with rsub_read as poll allows. */
START_TEST(test_tls_subscriber_big_message)
{
	struct rlink *s = link_tls(), *p = link_tls();
	redisReply *r = rlink_command(s, "SUBSCRIBE ch");
	ck_assert_msg(r, "SUBSCRIBE: %s", rlink_error(s));
	freeReplyObject(r);
	size_t n = 200 * 1024;
	char *m = xmalloc(n + 1);
	memset(m, 'x', n);
	m[0] = 'A';
	m[n - 1] = 'Z';
	m[n] = '\0';
	r = rlink_command(p, "PUBLISH ch %s", m);
	ck_assert_msg(r && r->type == REDIS_REPLY_INTEGER && r->integer == 1, "PUBLISH: %s",
	              rlink_error(p));
	freeReplyObject(r);
	struct got g = { 0 };
	double until = mono_now() + 5;
	while (g.n == 0 && mono_now() < until) {
		struct pollfd pfd = { .fd = rlink_fd(s), .events = POLLIN };
		if (poll(&pfd, 1, 100) > 0)
			ck_assert_msg(rsub_read(s, on_message, &g) == 0, "%s", rlink_error(s));
	}
	ck_assert_int_eq(g.n, 1);
	ck_assert_uint_eq(g.len, n);
	ck_assert(g.first == 'A' && g.last == 'Z');
	free(m);
	rlink_close(s);
	rlink_close(p);
}
END_TEST

/* ---- connecting wrong ---- */

START_TEST(test_tls_bad_certificates)
{
	char err[256] = "";
	SSL_CTX *other = ctx_with("otherca", "client");      /* trusts another CA */
	struct rlink *l = open_tls(other, tls_port, NULL, err, sizeof err);
	ck_assert(!l);
	ck_assert_msg(strstr(err, "not signed by a CA we trust"), "unknown CA: %s", err);
	tls_ctx_unref(other);

	l = open_tls(client_ctx, tls_port, "elsewhere.example", err, sizeof err);
	ck_assert(!l);
	ck_assert_msg(strstr(err, "is not for elsewhere.example"), "wrong name: %s", err);

	/* No client certificate: TLS 1.3 may finish the handshake before the refusal. */
	SSL_CTX *anon = ctx_with("ca", NULL);
	err[0] = '\0';
	l = open_tls(anon, tls_port, NULL, err, sizeof err);
	if (l) {
		redisReply *r = rlink_command(l, "PING");
		ck_assert_msg(!r, "a PING answered without a client certificate");
		snprintf(err, sizeof err, "%s", rlink_error(l));
		rlink_close(l);
	}
	ck_assert_msg(strstr(err, "client certificate"), "no client certificate: %s", err);
	tls_ctx_unref(anon);

	/* A client certificate of a CA the server does not know. */
	SSL_CTX *stranger = ctx_with("ca", "stranger");
	err[0] = '\0';
	l = open_tls(stranger, tls_port, NULL, err, sizeof err);
	if (l) {
		redisReply *r = rlink_command(l, "PING");
		ck_assert_msg(!r, "a PING answered with a stranger's certificate");
		snprintf(err, sizeof err, "%s", rlink_error(l));
		rlink_close(l);
	}
	ck_assert_msg(strstr(err, "client certificate"), "stranger's certificate: %s", err);
	tls_ctx_unref(stranger);
}
END_TEST

START_TEST(test_wrong_protocol_and_no_server)
{
	char err[256] = "";
	double t0 = mono_now();
	struct rlink *l = open_tls(client_ctx, plain_port, NULL, err, sizeof err);
	ck_assert(!l);
	ck_assert_msg(strstr(err, "redis://"), "TLS to a plain port: %s", err);
	ck_assert(mono_now() - t0 < 4);

	l = link_plain(tls_port, err, sizeof err);      /* connects: TCP only */
	ck_assert_msg(l, "%s", err);
	redisReply *r = rlink_command(l, "PING");
	ck_assert(!r);
	ck_assert_msg(strstr(rlink_error(l), "rediss://"), "plain to a TLS port: %s",
	              rlink_error(l));
	rlink_close(l);

	l = link_plain(free_port(), err, sizeof err);
	ck_assert(!l);
	ck_assert_msg(strstr(err, "refused"), "no server: %s", err);
}
END_TEST

/* ---- fake servers ---- */

enum fake { DRIBBLE, CLOSE_MID, SILENT, NO_READ, KEY_UPDATE };

#define FAKE_LEN 100000         /* the string the fake servers answer every command with */

static void fake_write(SSL *ssl, int fd, const char *p, size_t n)
{
	if (ssl) {
		if (SSL_write(ssl, p, (int)n) <= 0)
			_exit(3);
	} else if (write(fd, p, n) != (ssize_t)n) {
		_exit(3);
	}
}

/* The fake server's side of one connection, in a child. */
static void fake_serve(int lfd, enum fake mode, int tls)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	int fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		_exit(2);
	SSL *ssl = NULL;
	if (tls) {
		char cert[128], key[128];
		path_of(cert, sizeof cert, "server", "crt");
		path_of(key, sizeof key, "server", "key");
		SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
		if (!ctx || SSL_CTX_use_certificate_chain_file(ctx, cert) != 1 ||
		    SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1)
			_exit(2);
		ssl = SSL_new(ctx);
		SSL_set_fd(ssl, fd);
		if (SSL_accept(ssl) != 1)
			_exit(2);
	}
	if (mode == NO_READ) {
		sleep(10);
		_exit(0);
	}
	char buf[4096];
	int got = ssl ? SSL_read(ssl, buf, sizeof buf) : (int)read(fd, buf, sizeof buf);
	if (got <= 0)
		_exit(2);
	if (mode == SILENT) {
		sleep(10);
		_exit(0);
	}
	if (mode == KEY_UPDATE) {
		/* A reply, then a record with no data in it (a TLS 1.3 KeyUpdate) on the idle
		 * link: readable, and no close. Closed once the client's test is done with it. */
		fake_write(ssl, fd, "+OK\r\n", 5);
		usleep(100000);
		if (SSL_key_update(ssl, SSL_KEY_UPDATE_NOT_REQUESTED) != 1 || SSL_do_handshake(ssl) != 1)
			_exit(3);
		(void)!read(fd, buf, 1);        /* until the client closes, or is closed */
		_exit(0);
	}
	static char reply[FAKE_LEN + 32];
	int h = snprintf(reply, sizeof reply, "$%d\r\n", FAKE_LEN);
	for (int i = 0; i < FAKE_LEN; i++)
		reply[h + i] = (char)('a' + i % 26);
	memcpy(reply + h + FAKE_LEN, "\r\n", 2);
	size_t total = (size_t)h + FAKE_LEN + 2;
	if (mode == CLOSE_MID) {
		fake_write(ssl, fd, reply, total / 2);
		if (ssl)
			SSL_shutdown(ssl);
		close(fd);
		_exit(0);
	}
	/* DRIBBLE: the header and the first 2 000 bytes one per record (or per write), then
	 * the rest in pieces of 7 777, never on a record's or a read's boundary. */
	size_t off = 0;
	for (; off < (size_t)h + 2000; off++) {
		fake_write(ssl, fd, reply + off, 1);
		if (off % 200 == 0)
			usleep(1000);
	}
	for (; off < total; off += 7777)
		fake_write(ssl, fd, reply + off, total - off < 7777 ? total - off : 7777);
	sleep(2);               /* until the client has read it */
	_exit(0);
}

/* A fake server for one connection: its port (*pid its process). */
static int fake_server(enum fake mode, int tls, pid_t *pid)
{
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof sa;
	ck_assert(lfd >= 0 && bind(lfd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
	          listen(lfd, 1) == 0 && getsockname(lfd, (struct sockaddr *)&sa, &len) == 0);
	*pid = fork();
	if (*pid == 0)
		fake_serve(lfd, mode, tls);
	close(lfd);
	return ntohs(sa.sin_port);
}

static struct rlink *fake_link(enum fake mode, int tls, pid_t *pid)
{
	int port = fake_server(mode, tls, pid);
	char err[256] = "";
	struct rlink *l = tls ? open_tls(client_ctx, port, NULL, err, sizeof err)
	                  : link_plain(port, err, sizeof err);
	ck_assert_msg(l, "connect to the fake server: %s", err);
	return l;
}

static void fake_done(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* A record that carries no data on an idle TLS link (a KeyUpdate, as a late session ticket)
 * is readable but no close; the server's close is. */
START_TEST(test_tls_idle_record_is_no_close)
{
	pid_t pid;
	struct rlink *l = fake_link(KEY_UPDATE, 1, &pid);
	rlink_set_timeout(l, 5);
	redisReply *r = rlink_command(l, "PING");
	ck_assert_msg(r && r->type == REDIS_REPLY_STATUS, "%s", rlink_error(l));
	freeReplyObject(r);
	struct pollfd pfd = { .fd = rlink_fd(l), .events = POLLIN };
	ck_assert_int_eq(poll(&pfd, 1, 3000), 1);      /* the KeyUpdate came */
	ck_assert(!rlink_closed_while_idle(l));
	ck_assert_str_eq(rlink_error(l), "");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	for (int i = 0; i < 100 && !rlink_closed_while_idle(l); i++)
		usleep(20000);
	ck_assert(rlink_closed_while_idle(l));
	rlink_close(l);
}
END_TEST

START_TEST(test_reply_in_pieces)
{
	for (int tls = 0; tls <= 1; tls++) {
		pid_t pid;
		struct rlink *l = fake_link(DRIBBLE, tls, &pid);
		rlink_set_timeout(l, 5);
		redisReply *r = rlink_command(l, "GET x");
		ck_assert_msg(r, "%s: %s", tls ? "TLS" : "plain", rlink_error(l));
		ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
		ck_assert_uint_eq(r->len, FAKE_LEN);
		for (size_t i = 0; i < FAKE_LEN; i++)
			if (r->str[i] != (char)('a' + i % 26))
				ck_abort_msg("byte %zu differs", i);
		freeReplyObject(r);
		rlink_close(l);
		fake_done(pid);
	}
}
END_TEST

START_TEST(test_server_closes_mid_reply)
{
	for (int tls = 0; tls <= 1; tls++) {
		pid_t pid;
		struct rlink *l = fake_link(CLOSE_MID, tls, &pid);
		rlink_set_timeout(l, 5);
		ck_assert(!rlink_command(l, "GET x"));
		ck_assert_msg(strstr(rlink_error(l), "closed the connection"), "%s: %s",
		              tls ? "TLS" : "plain", rlink_error(l));
		ck_assert(!strstr(rlink_error(l), "before any reply"));     /* bytes came */
		/* broken for good: the next command is refused without I/O */
		ck_assert(!rlink_command(l, "PING"));
		rlink_close(l);
		fake_done(pid);
	}
}
END_TEST

START_TEST(test_timeouts)
{
	for (int tls = 0; tls <= 1; tls++) {
		pid_t pid;
		struct rlink *l = fake_link(SILENT, tls, &pid);
		rlink_set_timeout(l, 0.3);
		double t0 = mono_now();
		ck_assert(!rlink_command(l, "GET x"));
		double took = mono_now() - t0;
		ck_assert_msg(strstr(rlink_error(l), "timeout: no reply within 0.3s"), "%s",
		              rlink_error(l));
		ck_assert_msg(took > 0.25 && took < 3, "the read waited %.2fs", took);
		rlink_close(l);
		fake_done(pid);

		/* A server that never reads: 32 MB cannot go out; the write gives up in time. */
		l = fake_link(NO_READ, tls, &pid);
		rlink_set_timeout(l, 0.3);
		size_t n = 32 << 20;
		char *v = xcalloc(1, n);
		const char *argv[] = { "SET", "k", v };
		size_t lens[] = { 3, 1, n };
		rlink_append_argv(l, 3, argv, lens);
		void *r;
		t0 = mono_now();
		ck_assert_int_eq(rlink_reply(l, &r), -1);
		took = mono_now() - t0;
		ck_assert_msg(strstr(rlink_error(l), "timeout: no room to send within 0.3s"), "%s",
		              rlink_error(l));
		ck_assert_msg(took > 0.25 && took < 3, "the write waited %.2fs", took);
		free(v);
		rlink_close(l);
		fake_done(pid);
	}
}
END_TEST

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	snprintf(dir, sizeof dir, "/tmp/cw-unit-rlink-XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	make_certificates();
	start_server();
	client_ctx = ctx_with("ca", "client");

	Suite *s = suite_create("rlink");
	TCase *tc = tcase_create("links");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_tls_connect_and_summary);
	tcase_add_test(tc, test_tls_replies_and_commands_over_16k);
	tcase_add_test(tc, test_tls_pipelined_big_replies);
	tcase_add_test(tc, test_tls_string_past_the_limit_dropped);
	tcase_add_test(tc, test_tls_closed_while_idle);
	tcase_add_test(tc, test_tls_subscriber_big_message);
	tcase_add_test(tc, test_tls_idle_record_is_no_close);
	tcase_add_test(tc, test_tls_bad_certificates);
	tcase_add_test(tc, test_wrong_protocol_and_no_server);
	tcase_add_test(tc, test_reply_in_pieces);
	tcase_add_test(tc, test_server_closes_mid_reply);
	tcase_add_test(tc, test_timeouts);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);

	tls_ctx_unref(client_ctx);
	kill(server_pid, SIGTERM);
	waitpid(server_pid, NULL, 0);
	char rm[128];
	snprintf(rm, sizeof rm, "rm -rf %s", dir);
	if (system(rm) != 0)
		fprintf(stderr, "test_rlink: could not remove %s\n", dir);
	return failed ? 1 : 0;
}
