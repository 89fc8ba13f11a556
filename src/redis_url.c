/* SPDX-License-Identifier: MIT */
/*
 * redis_url.c: the Redis url (redis.url, or REDIS_URL) taken apart into what hiredis needs:
 * host and port or a unix socket path, the db, and the ACL user and password if any; and
 * the addresses of redis.sentinels.
 *
 * With sentinels (doc/design.md "Redis") the url says how to talk to the primary once they
 * have named it: its user, password and db are used, its host and port are not (write the
 * master's name there: redis://:secret@mymaster/2). A unix:// url is refused then, since a
 * sentinel names a TCP address. `display` becomes sentinel://<sentinels>/<master>/<db>
 * (sentinel+tls:// with rediss://).
 *
 * The url may hold a password, so it is never repeated: an error says which part is wrong,
 * not what was written; `display` (what logs show) is the target without credentials; and
 * a parsed password is wiped before its memory is freed. The loader (config.c) parses the
 * url after every other source of it (defaults, file, REDIS_URL), then lets a
 * redis.password_file replace the url's password.
 *
 * rediss:// is redis:// in TLS (the settings are the redis.tls group's, tls.c). Neither
 * takes query parameters (the db is the path, /N), so that nothing in the url is silently
 * ignored: TLS settings in a url (redis-rb's ?ssl_params) would be.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "config_int.h"
#include "tls.h"
#include "util.h"

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	return (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
}

/* Percent-decode s[0..n) into a new string; NULL on a bad escape or an encoded NUL. */
static char *pct_decode(const char *s, size_t n)
{
	char *out = xmalloc(n + 1), *o = out;

	for (size_t i = 0; i < n; i++) {
		if (s[i] != '%') {
			*o++ = s[i];
			continue;
		}
		int a = i + 2 < n ? hexval((unsigned char)s[i + 1]) : -1;
		int b = i + 2 < n ? hexval((unsigned char)s[i + 2]) : -1;
		if (a < 0 || b < 0 || (a == 0 && b == 0)) {
			free(out);
			return NULL;
		}
		*o++ = (char)(a * 16 + b);
		i += 2;
	}
	*o = '\0';
	return out;
}

static int parse_db(const char *s, size_t n, int *db)
{
	long v = 0;

	if (n == 0) {
		*db = 0;
		return 0;
	}
	if (n > 9)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	*db = (int)v;
	return 0;
}

int parse_port(const char *s, size_t n)
{
	int port = 0;

	if (n == 0 || n > 5)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -1;
		port = port * 10 + (s[i] - '0');
	}
	return (port >= 1 && port <= 65535) ? port : -1;
}

/*
 * hp[0..n) as host, host:port or [v6addr]:port (dflt when the port is left out): the host is
 * hp[*hs..*hs + *hlen). The messages fit both a url and a sentinel address.
 */
static const char *split_host_port(const char *hp, size_t n, int dflt, size_t *hs, size_t *hlen,
                                   int *port)
{
	const char *hend = hp + n, *colon, *h;

	if (n > 0 && hp[0] == '[') {
		const char *rb = memchr(hp, ']', n);
		if (!rb || rb == hp + 1)
			return "bad IPv6 address (write it as [addr])";
		h = hp + 1;
		*hlen = (size_t)(rb - h);
		colon = rb + 1 < hend ? rb + 1 : NULL;
		if (colon && *colon != ':')
			return "unexpected text after the IPv6 address";
	} else {
		colon = memchr(hp, ':', n);
		h = hp;
		*hlen = (size_t)((colon ? colon : hend) - hp);
		if (colon && memchr(colon + 1, ':', (size_t)(hend - colon - 1)))
			return "IPv6 addresses must be written in brackets: [::1]:6379";
	}
	if (*hlen == 0)
		return "the address has no host";
	for (size_t i = 0; i < *hlen; i++)
		if (isspace((unsigned char)h[i]) || h[i] == '%')
			return "the host is not valid";
	*port = dflt;
	if (colon && (*port = parse_port(colon + 1, (size_t)(hend - colon - 1))) < 0)
		return "the port is not a number from 1 to 65535";
	*hs = (size_t)(h - hp);
	return NULL;
}

/* redis[s]://[user[:password]@]host[:port][/db] (rest = after "redis[s]://"). */
static const char *parse_tcp_url(const char *rest, struct redis_conf *t)
{
	const char *scheme = t->use_tls ? "rediss" : "redis";
	const char *at = strrchr(rest, '@'), *hp = at ? at + 1 : rest;
	const char *slash = strchr(hp, '/'), *why;
	size_t hs = 0, hlen = 0;

	if (strchr(hp, '?') || strchr(hp, '#'))
		return "query parameters are not supported in redis:// and rediss:// urls (the db is "
		       "the path: /N; TLS settings are in redis.tls)";
	if (at) {
		const char *c = memchr(rest, ':', (size_t)(at - rest));
		const char *uend = c ? c : at;
		if (uend > rest && !(t->user = pct_decode(rest, (size_t)(uend - rest))))
			return "bad percent-encoding in the url's user";
		if (c && at > c + 1 && !(t->password = pct_decode(c + 1, (size_t)(at - c - 1))))
			return "bad percent-encoding in the url's password";
	}
	why = split_host_port(hp, slash ? (size_t)(slash - hp) : strlen(hp), 6379, &hs, &hlen,
	                      &t->port);
	if (why)
		return why;
	if (slash && parse_db(slash + 1, strlen(slash + 1), &t->db) < 0)
		return "the url's database (after the /) is not a number";
	t->host = xstrndup(hp + hs, hlen);
	t->display = xasprintf("%s://%s%s%s:%d/%d", scheme, hp[0] == '[' ? "[" : "", t->host,
	                       hp[0] == '[' ? "]" : "", t->port, t->db);
	return NULL;
}

/* unix:///path/to/sock[?db=N] (rest = after "unix://"). */
static const char *parse_unix_url(const char *rest, struct redis_conf *t)
{
	const char *q = strchr(rest, '?'), *pend = q ? q : rest + strlen(rest);

	if (rest[0] != '/' || pend - rest < 2)
		return "the unix socket path must be absolute: unix:///path/to/redis.sock";
	if (q) {
		if (strncmp(q + 1, "db=", 3) != 0)
			return "the only parameter of a unix:// url is db=N";
		if (parse_db(q + 4, strlen(q + 4), &t->db) < 0 || !q[4])
			return "the url's db parameter is not a number";
	}
	t->path = xstrndup(rest, (size_t)(pend - rest));
	t->port = 0;
	t->display = xasprintf("unix://%s?db=%d", t->path, t->db);
	return NULL;
}

static void free_secret(char *s)
{
	if (s)
		explicit_bzero(s, strlen(s));
	free(s);
}

static void redis_parsed_free(struct redis_conf *rc)
{
	free(rc->host);
	free(rc->path);
	free(rc->user);
	free_secret(rc->password);
	free(rc->display);
	rc->host = rc->path = rc->user = rc->password = rc->display = NULL;
	rc->port = rc->db = rc->use_tls = 0;
}

static void tls_free(struct redis_tls *t)
{
	free(t->ca_file);
	free(t->cert_file);
	free(t->key_file);
	free(t->server_name);
	free(t->verify_where);
	tls_ctx_unref(t->ctx);
	memset(t, 0, sizeof *t);
}

static void sentinel_addrs_free(struct redis_conf *rc)
{
	for (int i = 0; rc->sentinel && i < rc->sentinels.n; i++)
		free(rc->sentinel[i].host);
	free(rc->sentinel);
	rc->sentinel = NULL;
}

void redis_conf_clear(struct redis_conf *rc)
{
	redis_parsed_free(rc);
	sentinel_addrs_free(rc);
	free(rc->url);
	free(rc->password_file);
	argv_free(&rc->sentinels);
	free(rc->master_name);
	free_secret(rc->sentinel_password);
	free(rc->sentinel_password_file);
	tls_free(&rc->tls);
	memset(rc, 0, sizeof *rc);
}

static char *dup_or_null(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

void redis_conf_copy(struct redis_conf *dst, const struct redis_conf *src)
{
	*dst = *src;
	dst->url = dup_or_null(src->url);
	dst->password_file = dup_or_null(src->password_file);
	dst->host = dup_or_null(src->host);
	dst->path = dup_or_null(src->path);
	dst->user = dup_or_null(src->user);
	dst->password = dup_or_null(src->password);
	dst->display = dup_or_null(src->display);
	dst->master_name = dup_or_null(src->master_name);
	dst->sentinel_password = dup_or_null(src->sentinel_password);
	dst->sentinel_password_file = dup_or_null(src->sentinel_password_file);
	dst->tls.ca_file = dup_or_null(src->tls.ca_file);
	dst->tls.cert_file = dup_or_null(src->tls.cert_file);
	dst->tls.key_file = dup_or_null(src->tls.key_file);
	dst->tls.server_name = dup_or_null(src->tls.server_name);
	dst->tls.verify_where = dup_or_null(src->tls.verify_where);
	dst->tls.ctx = tls_ctx_ref(src->tls.ctx);
	memset(&dst->sentinels, 0, sizeof dst->sentinels);
	dst->sentinel = NULL;
	for (int i = 0; i < src->sentinels.n; i++)
		argv_push(&dst->sentinels, src->sentinels.v[i]);
	if (src->sentinel) {
		dst->sentinel = xcalloc((size_t)src->sentinels.n, sizeof *dst->sentinel);
		for (int i = 0; i < src->sentinels.n; i++) {
			dst->sentinel[i].host = xstrdup(src->sentinel[i].host);
			dst->sentinel[i].port = src->sentinel[i].port;
		}
	}
}

const char *redis_addr_parse(const char *s, char **host, int *port)
{
	size_t hs = 0, hlen = 0;
	int p = 0;
	const char *why = split_host_port(s, strlen(s), 26379, &hs, &hlen, &p);

	if (!why && host) {
		*host = xstrndup(s + hs, hlen);
		*port = p;
	}
	return why;
}

int redis_sentinels_parse(struct redis_conf *rc, char *err, size_t errlen)
{
	struct sbuf d;

	sentinel_addrs_free(rc);
	if (rc->sentinels.n == 0)
		return 0;
	if (rc->path) {
		snprintf(err, errlen, "with redis.sentinels the url must be redis[s]://[user[:password]@]"
		         "name[/db]: the sentinels give the primary's host and port");
		return -1;
	}
	rc->sentinel = xcalloc((size_t)rc->sentinels.n, sizeof *rc->sentinel);
	sb_init(&d);
	sb_printf(&d, "sentinel%s://", rc->use_tls ? "+tls" : "");
	for (int i = 0; i < rc->sentinels.n; i++) {
		const char *why = redis_addr_parse(rc->sentinels.v[i], &rc->sentinel[i].host,
		                                   &rc->sentinel[i].port);
		if (why) {      /* the conf reader checked them: only a caller's own list gets here */
			snprintf(err, errlen, "redis.sentinels: '%s' %s", rc->sentinels.v[i], why);
			sb_free(&d);
			sentinel_addrs_free(rc);
			return -1;
		}
		sb_printf(&d, "%s%s", i ? "," : "", rc->sentinels.v[i]);
	}
	sb_printf(&d, "/%s/%d", rc->master_name ? rc->master_name : "", rc->db);
	free(rc->display);
	rc->display = sb_steal(&d);
	return 0;
}

int redis_url_parse(const char *url, struct redis_conf *rc, char *err, size_t errlen)
{
	struct redis_conf t = { 0 };
	const char *why;

	if (!url || !*url)
		why = "the redis url is empty";
	else if (strncasecmp(url, "redis://", 8) == 0)
		why = parse_tcp_url(url + 8, &t);
	else if (strncasecmp(url, "rediss://", 9) == 0) {
		t.use_tls = 1;
		why = parse_tcp_url(url + 9, &t);
	} else if (strncasecmp(url, "unix://", 7) == 0)
		why = parse_unix_url(url + 7, &t);
	else
		why = "unsupported url scheme (use redis://host:port/db, rediss://host:port/db or "
		      "unix:///path?db=N)";
	if (why) {
		redis_parsed_free(&t);
		if (err && errlen)
			snprintf(err, errlen, "invalid redis url: %s", why);
		return -1;
	}
	redis_parsed_free(rc);
	rc->host = t.host;
	rc->port = t.port;
	rc->path = t.path;
	rc->db = t.db;
	rc->user = t.user;
	rc->password = t.password;
	rc->display = t.display;
	rc->use_tls = t.use_tls;
	return 0;
}
