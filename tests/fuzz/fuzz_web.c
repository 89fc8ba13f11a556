/* SPDX-License-Identifier: MIT */
/*
 * fuzz_web.c: the parts of an HTTP request `cogworkerctl web` parses itself
 * (src/web/web_http.c): forms and query strings, paths, the Cookie header, and the Host and
 * Origin checks. The input is cut at '\n' into a path, a Cookie header, a form, a Host and
 * an Origin.
 *
 * What must hold: a form that parses gives names without NUL and values whose length is
 * right, and encoding its fields again and parsing that gives the same fields; a path that
 * splits has at most PATH_MAX_SEGMENTS segments, none empty, ".", ".." or holding '/' or
 * NUL, and encoding them again splits the same; a cookie's value is part of the header; a
 * loopback Host names localhost, ::1 or 127.x.y.z; an Origin that matches a Host is as long
 * as it after its scheme; equal secrets compare equal and only those.
 */
#include <ctype.h>
#include <strings.h>
#include "fuzz.h"
#include "web.h"

static void encode(struct sbuf *b, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~')
			sb_addc(b, (char)ch);
		else
			sb_printf(b, "%%%02X", ch);
	}
}

static void check_form(const char *s, size_t n)
{
	struct form f;
	if (form_parse(s, n, &f) == 0) {
		struct sbuf b;
		sb_init(&b);
		for (int i = 0; i < f.n; i++) {
			CHECK(strlen(f.names[i]) < n + 1);
			CHECK(f.values[i][f.lens[i]] == '\0');
			if (i)
				sb_addc(&b, '&');
			encode(&b, f.names[i], strlen(f.names[i]));
			sb_addc(&b, '=');
			encode(&b, f.values[i], f.lens[i]);
		}
		struct form g;
		CHECK(form_parse(b.s, b.len, &g) == 0);
		/* Empty names with empty values ("=" alone) come back as such; "" fields vanish. */
		int k = 0;
		for (int i = 0; i < f.n; i++) {
			CHECK(k < g.n);
			CHECK(strcmp(f.names[i], g.names[k]) == 0);
			CHECK(f.lens[i] == g.lens[k]);
			CHECK(memcmp(f.values[i], g.values[k], f.lens[i]) == 0);
			k++;
		}
		CHECK(k == g.n);
		if (f.n)
			CHECK(form_get(&f, f.names[0], NULL) != NULL);
		form_free(&g);
		sb_free(&b);
	}
	form_free(&f);
}

static void check_path(const char *s)
{
	struct path p;
	if (path_split(s, &p) != 0)
		return;
	CHECK(p.n <= PATH_MAX_SEGMENTS);
	struct sbuf b;
	sb_init(&b);
	for (int i = 0; i < p.n; i++) {
		const char *g = p.seg[i];
		CHECK(*g && !strchr(g, '/') && strcmp(g, ".") && strcmp(g, ".."));
		sb_addc(&b, '/');
		encode(&b, g, strlen(g));
	}
	if (!p.n)
		sb_addc(&b, '/');
	struct path q;
	CHECK(path_split(b.s, &q) == 0);
	CHECK(q.n == p.n);
	for (int i = 0; i < p.n; i++)
		CHECK(strcmp(p.seg[i], q.seg[i]) == 0);
	path_free(&q);
	path_free(&p);
	sb_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = xmalloc(size + 1);
	memcpy(buf, data, size);
	buf[size] = '\0';
	char *part[5] = { buf, "", "", "", "" };
	size_t len[5] = { size, 0, 0, 0, 0 };
	for (int i = 1; i < 5; i++) {
		char *nl = memchr(part[i - 1], '\n', len[i - 1]);
		if (!nl)
			break;
		*nl = '\0';
		part[i] = nl + 1;
		len[i] = len[i - 1] - (size_t)(nl + 1 - part[i - 1]);
		len[i - 1] = (size_t)(nl - part[i - 1]);
	}
	check_path(part[0]);
	char *v = cookie_get(part[1], "cwsid");
	if (v) {
		CHECK(strstr(part[1], v) != NULL);
		free(v);
	}
	check_form(part[2], len[2]);
	if (host_is_loopback(part[3])) {
		const char *h = part[3] + (part[3][0] == '[');
		CHECK(strncasecmp(h, "localhost", 9) == 0 || strncmp(h, "::1", 3) == 0 ||
		      strncmp(h, "127.", 4) == 0);
	}
	if (origin_matches(part[4], part[3]))
		CHECK(strlen(strstr(part[4], "://") + 3) == strlen(part[3]));
	CHECK(secret_equal(part[1], part[1]));
	CHECK(secret_equal(part[3], part[4]) == (strcmp(part[3], part[4]) == 0));
	free(buf);
	return 0;
}
