/*
 * redis_url.c: the Redis url (redis.url, or REDIS_URL) taken apart into what hiredis needs:
 * host and port or a unix socket path, the db, and the ACL user and password if any.
 *
 * The url may hold a password, so it is never repeated: an error says which part is wrong,
 * not what was written; `display` (what logs show) is the target without credentials; and
 * a parsed password is wiped before its memory is freed. The loader (config.c) parses the
 * url after every other source of it (defaults, file, REDIS_URL), then lets a
 * redis.password_file replace the url's password.
 *
 * Only what hiredis 0.14 can do is accepted: rediss:// (TLS) is refused by name rather
 * than as an unknown scheme, and a redis:// url takes no query parameters (the db is its
 * path, /N), so that nothing in the url is silently ignored.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "config_int.h"
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

/* redis://[user[:password]@]host[:port][/db] (rest = after "redis://"). */
static const char *parse_tcp_url(const char *rest, struct redis_conf *t)
{
	const char *at = strrchr(rest, '@'), *hp = at ? at + 1 : rest;
	const char *slash = strchr(hp, '/'), *hend, *colon, *hs;
	size_t hlen;

	if (strchr(hp, '?') || strchr(hp, '#'))
		return "query parameters are not supported in redis:// urls (the db is the path: /N)";
	if (at) {
		const char *c = memchr(rest, ':', (size_t)(at - rest));
		const char *uend = c ? c : at;
		if (uend > rest && !(t->user = pct_decode(rest, (size_t)(uend - rest))))
			return "bad percent-encoding in the url's user";
		if (c && at > c + 1 && !(t->password = pct_decode(c + 1, (size_t)(at - c - 1))))
			return "bad percent-encoding in the url's password";
	}
	hend = slash ? slash : hp + strlen(hp);
	if (hp[0] == '[') {
		const char *rb = memchr(hp, ']', (size_t)(hend - hp));
		if (!rb || rb == hp + 1)
			return "bad IPv6 address (write it as [addr])";
		hs = hp + 1;
		hlen = (size_t)(rb - hs);
		colon = rb + 1 < hend ? rb + 1 : NULL;
		if (colon && *colon != ':')
			return "unexpected text after the IPv6 address";
	} else {
		colon = memchr(hp, ':', (size_t)(hend - hp));
		hs = hp;
		hlen = (size_t)((colon ? colon : hend) - hp);
		if (colon && memchr(colon + 1, ':', (size_t)(hend - colon - 1)))
			return "IPv6 addresses must be written in brackets: redis://[::1]:6379";
	}
	if (hlen == 0)
		return "the url has no host";
	for (size_t i = 0; i < hlen; i++)
		if (isspace((unsigned char)hs[i]) || hs[i] == '%')
			return "the url's host is not valid";
	t->port = 6379;
	if (colon && (t->port = parse_port(colon + 1, (size_t)(hend - colon - 1))) < 0)
		return "the url's port is not a number from 1 to 65535";
	if (slash && parse_db(slash + 1, strlen(slash + 1), &t->db) < 0)
		return "the url's database (after the /) is not a number";
	t->host = xstrndup(hs, hlen);
	t->display = xasprintf("redis://%s%s%s:%d/%d", hp[0] == '[' ? "[" : "", t->host,
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

static void redis_parsed_free(struct redis_conf *rc)
{
	free(rc->host);
	free(rc->path);
	free(rc->user);
	if (rc->password)
		explicit_bzero(rc->password, strlen(rc->password));
	free(rc->password);
	free(rc->display);
	rc->host = rc->path = rc->user = rc->password = rc->display = NULL;
	rc->port = rc->db = 0;
}

void redis_conf_clear(struct redis_conf *rc)
{
	redis_parsed_free(rc);
	free(rc->url);
	free(rc->password_file);
	memset(rc, 0, sizeof *rc);
}

int redis_url_parse(const char *url, struct redis_conf *rc, char *err, size_t errlen)
{
	struct redis_conf t = { 0 };
	const char *why;

	if (!url || !*url)
		why = "the redis url is empty";
	else if (strncasecmp(url, "redis://", 8) == 0)
		why = parse_tcp_url(url + 8, &t);
	else if (strncasecmp(url, "unix://", 7) == 0)
		why = parse_unix_url(url + 7, &t);
	else if (strncasecmp(url, "rediss://", 9) == 0)
		why = "TLS is not supported by hiredis 0.14 (use redis:// or unix://)";
	else
		why = "unsupported url scheme (use redis://host:port/db or unix:///path?db=N)";
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
	return 0;
}
