/* SPDX-License-Identifier: MIT */
/*
 * web_http.c: the parts of an HTTP request `cogworkerctl web` reads itself, as pure
 * functions (no sockets, no Redis) so that tests/fuzz/fuzz_web.c can call them:
 * application/x-www-form-urlencoded bodies and query strings, the Cookie header, the path,
 * and the Host / Origin checks that stand between a browser on another site and the
 * dashboard's actions.
 *
 * Rules kept here:
 * - Decoding never guesses: a '%' not followed by two hex digits makes the whole form or
 *   path malformed (400), instead of passing a half-decoded name on to Redis.
 * - A path segment is decoded once, after the split, so "%2F" can never make a new
 *   segment, and "", "." and ".." segments are refused: a queue or jid is a single
 *   segment, and no route ever means a parent.
 * - Form values keep their length: a job's exact member may hold any byte, and an action
 *   hands it back to Redis as read (jobs_act.c).
 * - Host and Origin compare whole host:port strings, case-insensitively, after the scheme:
 *   a prefix or suffix match would let "127.0.0.1.evil.example" through.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include "web.h"

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int pct_decode(const char *s, size_t len, int plus_space, char **out, size_t *outlen)
{
	char *d = xmalloc(len + 1);
	size_t n = 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '%') {
			int hi = i + 2 < len ? hexval((unsigned char)s[i + 1]) : -1;
			int lo = i + 2 < len ? hexval((unsigned char)s[i + 2]) : -1;
			if (hi < 0 || lo < 0) {
				free(d);
				*out = NULL;
				*outlen = 0;
				return -1;
			}
			d[n++] = (char)(hi * 16 + lo);
			i += 2;
		} else if (s[i] == '+' && plus_space) {
			d[n++] = ' ';
		} else {
			d[n++] = s[i];
		}
	}
	d[n] = '\0';
	*out = d;
	*outlen = n;
	return 0;
}

static void form_add(struct form *f, char *name, char *value, size_t vlen)
{
	if (f->n == f->cap) {
		f->cap = f->cap ? f->cap * 2 : 8;
		f->names = xrealloc(f->names, sizeof *f->names * (size_t)f->cap);
		f->values = xrealloc(f->values, sizeof *f->values * (size_t)f->cap);
		f->lens = xrealloc(f->lens, sizeof *f->lens * (size_t)f->cap);
	}
	f->names[f->n] = name;
	f->values[f->n] = value;
	f->lens[f->n++] = vlen;
}

int form_parse(const char *s, size_t len, struct form *f)
{
	memset(f, 0, sizeof *f);
	size_t i = 0;
	while (i < len) {
		const char *amp = memchr(s + i, '&', len - i);
		size_t end = amp ? (size_t)(amp - s) : len;
		if (end > i) {          /* "a=1&&b=2": the empty field is nothing */
			if (f->n >= FORM_MAX_FIELDS)
				return -1;
			const char *eq = memchr(s + i, '=', end - i);
			size_t nend = eq ? (size_t)(eq - s) : end;
			char *name, *value;
			size_t nlen, vlen;
			if (pct_decode(s + i, nend - i, 1, &name, &nlen) != 0)
				return -1;
			if (pct_decode(eq ? eq + 1 : s + end, eq ? end - nend - 1 : 0, 1, &value,
			               &vlen) != 0) {
				free(name);
				return -1;
			}
			if (strlen(name) != nlen) {         /* a NUL in a name: no route has one */
				free(name);
				free(value);
				return -1;
			}
			form_add(f, name, value, vlen);
		}
		i = end + 1;
	}
	return 0;
}

void form_add_copy(struct form *f, const char *name, const char *value)
{
	form_add(f, xstrdup(name), xstrdup(value), strlen(value));
}

const char *form_get(const struct form *f, const char *name, size_t *len)
{
	for (int i = 0; i < f->n; i++)
		if (strcmp(f->names[i], name) == 0) {
			if (len)
				*len = f->lens[i];
			return f->values[i];
		}
	return NULL;
}

void form_free(struct form *f)
{
	for (int i = 0; i < f->n; i++) {
		free(f->names[i]);
		free(f->values[i]);
	}
	free(f->names);
	free(f->values);
	free(f->lens);
	memset(f, 0, sizeof *f);
}

/* Cookie: a=1; b=2 (RFC 6265 §4.2: "; "-separated pairs; a value may be quoted). */
char *cookie_get(const char *header, const char *name)
{
	size_t nlen = strlen(name);
	const char *p = header;
	while (p && *p) {
		while (*p == ' ' || *p == '\t' || *p == ';')
			p++;
		const char *end = strchr(p, ';');
		size_t plen = end ? (size_t)(end - p) : strlen(p);
		if (plen > nlen && memcmp(p, name, nlen) == 0 && p[nlen] == '=') {
			const char *v = p + nlen + 1;
			size_t vlen = plen - nlen - 1;
			while (vlen && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
				vlen--;
			if (vlen >= 2 && v[0] == '"' && v[vlen - 1] == '"') {
				v++;
				vlen -= 2;
			}
			return xstrndup(v, vlen);
		}
		p = end;
	}
	return NULL;
}

void path_free(struct path *p)
{
	for (int i = 0; i < p->n; i++)
		free(p->seg[i]);
	p->n = 0;
}

int path_split(const char *path, struct path *p)
{
	memset(p, 0, sizeof *p);
	if (path[0] != '/')
		return -1;
	const char *s = path + 1;
	if (!*s)
		return 0;
	for (;;) {
		const char *slash = strchr(s, '/');
		size_t len = slash ? (size_t)(slash - s) : strlen(s);
		char *seg;
		size_t slen;
		if (len == 0 && !slash)         /* a trailing '/': "/queues/" is "/queues" */
			break;
		if (len == 0 || p->n == PATH_MAX_SEGMENTS || pct_decode(s, len, 0, &seg, &slen) != 0)
			goto bad;
		if (strlen(seg) != slen || strchr(seg, '/') || strcmp(seg, ".") == 0 ||
		    strcmp(seg, "..") == 0) {
			free(seg);
			goto bad;
		}
		p->seg[p->n++] = seg;
		if (!slash)
			break;
		s = slash + 1;
	}
	return 0;
bad:
	path_free(p);
	return -1;
}

/* The host part of "host[:port]" or "[v6][:port]" into out (lowercased, brackets kept
 * off); -1 when it does not fit or is malformed. */
static int host_part(const char *hp, char *out, size_t n)
{
	size_t len;
	if (hp[0] == '[') {
		const char *rb = strchr(hp, ']');
		if (!rb || (rb[1] && rb[1] != ':'))
			return -1;
		hp++;
		len = (size_t)(rb - hp);
	} else {
		len = strcspn(hp, ":");
	}
	if (len == 0 || len >= n)
		return -1;
	for (size_t i = 0; i < len; i++)
		out[i] = (char)tolower((unsigned char)hp[i]);
	out[len] = '\0';
	return 0;
}

int host_is_loopback(const char *host)
{
	char h[256];
	if (!host || host_part(host, h, sizeof h) != 0)
		return 0;
	if (strcmp(h, "localhost") == 0 || strcmp(h, "::1") == 0)
		return 1;
	/* 127.0.0.0/8, written as a dotted quad of digits only */
	if (strncmp(h, "127.", 4) != 0)
		return 0;
	int dots = 0;
	for (const char *p = h; *p; p++) {
		if (*p == '.')
			dots++;
		else if (!isdigit((unsigned char)*p))
			return 0;
	}
	return dots == 3;
}

int origin_matches(const char *origin, const char *host)
{
	if (!origin || !host)
		return 0;
	const char *sep = strstr(origin, "://");
	if (!sep)
		return 0;           /* "null" (a sandboxed or file: page), or garbage */
	const char *o = sep + 3;
	size_t olen = strlen(o), hlen = strlen(host);
	if (olen != hlen || olen == 0)
		return 0;
	for (size_t i = 0; i < olen; i++)
		if (tolower((unsigned char)o[i]) != tolower((unsigned char)host[i]))
			return 0;
	return 1;
}

int secret_equal(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char d = la != lb;
	for (size_t i = 0; i < la && i < lb; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}
