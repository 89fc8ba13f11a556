/* SPDX-License-Identifier: MIT */
/*
 * json_canon.c: canonical JSON (json_canonical), and Ruby's Float#to_s (json_ruby_float) it
 * prints floats with; string literals are escaped by json.c's json_quote rules.
 *
 * The digests of unique jobs and periodic entries hash args as Ruby's
 * JSON.generate(JSON.parse(text)) prints them, so we print the same way while scanning
 * (json.c's scanner, strict about UTF-8: Ruby's generator raises on invalid UTF-8, so such
 * text has no canonical form to match): compact, keys in order, strings decoded and
 * re-escaped Ruby's way, integers as their digits, floats through Ruby's Float#to_s
 * (json_ruby_float). A repeated key comes out the way Ruby's Hash holds it: at the first
 * key's place, with the last value.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE             /* qsort_r */
#endif
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "json.h"
#include "json_int.h"
#include "util.h"

/* ------------------------------------------------------------------------------------------
 * Ruby's Float#to_s.
 * ---------------------------------------------------------------------------------------- */

/* Does the decimal mantissa m (digits) times 10^exp10 read back as d? */
static int reads_back(uint64_t m, int exp10, double d)
{
	char buf[48];
	snprintf(buf, sizeof buf, "%llue%d", (unsigned long long)m, exp10);
	return strtod(buf, NULL) == d;
}

/*
 * The shortest decimal digits that read back as d (> 0, finite), as Ruby's dtoa mode 0
 * gives them: no trailing zeros, *decpt such that d = 0.DIGITS x 10^decpt. For each length
 * the correctly rounded candidate (printf) is tried; when it misses, the candidate one unit
 * away on the other side of d may still hit, because the round-trip interval is lopsided
 * at powers of two.
 */
static void shortest_digits(double d, char digits[24], int *decpt)
{
	char buf[40];
	uint64_t m = 0;
	int e = 0, found = 0;
	for (int prec = 1; prec <= 17 && !found; prec++) {
		snprintf(buf, sizeof buf, "%.*e", prec - 1, d);
		char *x = strchr(buf, 'e');
		e = atoi(x + 1) - (prec - 1);   /* d ~ m x 10^e */
		m = 0;
		for (char *c = buf; c < x; c++)
			if (*c >= '0' && *c <= '9')
				m = m * 10 + (uint64_t)(*c - '0');
		if (reads_back(m, e, d)) {
			found = 1;
		} else {
			double approx = strtod(buf, NULL);
			uint64_t other = approx < d ? m + 1 : m - 1;
			if (reads_back(other, e, d)) {
				m = other;
				found = 1;
			}
		}
	}
	while (m % 10 == 0 && m != 0) {
		m /= 10;
		e++;
	}
	int n = snprintf(digits, 24, "%llu", (unsigned long long)m);
	*decpt = e + n;
}

void json_ruby_float(double d, char out[40])
{
	if (isnan(d)) {
		strcpy(out, "NaN");
		return;
	}
	if (isinf(d)) {
		strcpy(out, d < 0 ? "-Infinity" : "Infinity");
		return;
	}
	char *o = out;
	if (signbit(d))
		*o++ = '-';
	d = fabs(d);
	if (d == 0) {
		strcpy(o, "0.0");
		return;
	}
	char dg[24];
	int decpt;
	shortest_digits(d, dg, &decpt);
	int digs = (int)strlen(dg);

	if (decpt > 0 && (decpt < digs || decpt <= 15)) {
		/* Fixed notation: a fraction within 17 digits, or a whole number below 1e15. */
		if (decpt < digs) {
			sprintf(o, "%.*s.%s", decpt, dg, dg + decpt);
		} else {
			memcpy(o, dg, (size_t)digs);
			memset(o + digs, '0', (size_t)(decpt - digs));
			strcpy(o + decpt, ".0");
		}
	} else if (decpt <= 0 && decpt > -4) {
		/* 0.000ddd down to 0.001 x 10^-1 */
		strcpy(o, "0.");
		memset(o + 2, '0', (size_t)-decpt);
		strcpy(o + 2 - decpt, dg);
	} else {
		/* d.ddde+XX, at least one fraction digit, exponent with sign and two digits */
		sprintf(o, "%c.%se%+03d", dg[0], digs > 1 ? dg + 1 : "0", decpt - 1);
	}
}

/* ------------------------------------------------------------------------------------------
 * Canonical JSON: printing while scanning.
 * ---------------------------------------------------------------------------------------- */

struct canon {
	struct scan s;          /* strict: canonical form needs valid UTF-8 */
	struct sbuf out;
};

/* A string at the cursor, decoded and re-escaped. Lone surrogates fail: Ruby's parser
 * rejects or mangles them, and its generator rejects the result. */
static int canon_string(struct canon *c)
{
	const char *start = c->s.p;
	if (scan_string(&c->s) < 0)
		return -1;
	const char *p = start + 1, *end = c->s.p - 1;
	sb_addc(&c->out, '"');
	while (p < end) {
		const char *run = p;
		while (p < end && *p != '\\' && *p != '"')
			p++;
		sb_add(&c->out, run, (size_t)(p - run));  /* raw UTF-8, checked by scan_string */
		if (p == end)
			break;
		uint32_t cp;
		p += decode_escape(p, end, &cp);
		if (cp >= 0xD800 && cp <= 0xDFFF)
			return -1;
		put_escaped(&c->out, cp);
	}
	sb_addc(&c->out, '"');
	return 0;
}

/*
 * Ruby's generator refuses Infinity, but only if it is still there when the object is
 * printed: a repeated key may have replaced it. So an infinity is written as this byte,
 * which canonical text never holds otherwise (controls are escaped), and looked for at
 * the end.
 */
#define INFINITY_MARK '\x01'

/* Integers keep their digits (any size); Ruby reads -0 as the Integer 0. Floats go through
 * a double and come out as Ruby prints them. */
static int canon_number(struct canon *c)
{
	const char *start = c->s.p;
	int is_float;
	if (scan_number(&c->s, &is_float) < 0)
		return -1;
	size_t n = (size_t)(c->s.p - start);
	if (!is_float) {
		if (n == 2 && start[0] == '-' && start[1] == '0')
			sb_addc(&c->out, '0');
		else
			sb_add(&c->out, start, n);
		return 0;
	}
	char *text = xstrndup(start, n);
	double d = strtod(text, NULL);
	free(text);
	if (isinf(d)) {
		sb_addc(&c->out, INFINITY_MARK);
		return 0;
	}
	char f[40];
	json_ruby_float(d, f);
	sb_adds(&c->out, f);
	return 0;
}

/* Where a member of the object being printed sits in the output. */
struct canon_member {
	size_t koff, klen, voff, vlen;
	int use, drop;      /* use: member whose value is printed here */
};

static int compare_member_keys(const void *a, const void *b, void *arg)
{
	const struct canon_member *ms = ((void **)arg)[0];
	const char *out = ((void **)arg)[1];
	const struct canon_member *x = &ms[*(const int *)a], *y = &ms[*(const int *)b];
	size_t n = x->klen < y->klen ? x->klen : y->klen;
	int r = memcmp(out + x->koff, out + y->koff, n);
	if (r)
		return r;
	if (x->klen != y->klen)
		return x->klen < y->klen ? -1 : 1;
	return *(const int *)a - *(const int *)b;
}

/*
 * Repeated keys: Ruby's Hash keeps the first key's place and the last value. The members
 * were printed as they came, at out[from..]; find the repeats (sort by key, canonical key
 * text being a faithful spelling of the decoded key) and print the object again.
 */
static void canon_merge_duplicates(struct canon *c, size_t from, struct canon_member *ms, int n)
{
	int *idx = xmalloc((size_t)n * sizeof *idx);
	for (int i = 0; i < n; i++) {
		idx[i] = i;
		ms[i].use = i;
		ms[i].drop = 0;
	}
	void *arg[2] = { ms, c->out.s };
	qsort_r(idx, (size_t)n, sizeof *idx, compare_member_keys, arg);
	int dups = 0;
	for (int g = 0; g < n;) {
		int h = g + 1;
		while (h < n && ms[idx[h]].klen == ms[idx[g]].klen &&
		       memcmp(c->out.s + ms[idx[h]].koff, c->out.s + ms[idx[g]].koff,
		              ms[idx[g]].klen) == 0)
			h++;
		if (h - g > 1) {
			ms[idx[g]].use = idx[h - 1];
			for (int k = g + 1; k < h; k++)
				ms[idx[k]].drop = 1;
			dups = 1;
		}
		g = h;
	}
	free(idx);
	if (!dups)
		return;
	char *old = xstrndup(c->out.s + from, c->out.len - from);
	c->out.len = from;
	sb_addc(&c->out, '{');
	int first = 1;
	for (int i = 0; i < n; i++) {
		if (ms[i].drop)
			continue;
		if (!first)
			sb_addc(&c->out, ',');
		first = 0;
		const struct canon_member *v = &ms[ms[i].use];
		sb_add(&c->out, old + ms[i].koff - from, ms[i].klen);
		sb_addc(&c->out, ':');
		sb_add(&c->out, old + v->voff - from, v->vlen);
	}
	sb_addc(&c->out, '}');
	free(old);
}

static int canon_value(struct canon *c);

static int canon_container(struct canon *c, char close, int is_object)
{
	struct canon_member *ms = NULL;
	int n = 0, cap = 0, rc = -1;
	size_t from = c->out.len;

	if (++c->s.depth > JSON_MAX_DEPTH)
		return -1;
	sb_addc(&c->out, *c->s.p++);
	skip_ws(&c->s);
	if (c->s.p < c->s.end && *c->s.p == close)
		goto closed;
	for (;;) {
		struct canon_member m = { 0, 0, 0, 0, 0, 0 };
		if (is_object) {
			if (c->s.p >= c->s.end || *c->s.p != '"')
				goto out;
			m.koff = c->out.len;
			if (canon_string(c) < 0)
				goto out;
			m.klen = c->out.len - m.koff;
			skip_ws(&c->s);
			if (c->s.p >= c->s.end || *c->s.p != ':')
				goto out;
			c->s.p++;
			sb_addc(&c->out, ':');
			skip_ws(&c->s);
		}
		m.voff = c->out.len;
		if (canon_value(c) < 0)
			goto out;
		m.vlen = c->out.len - m.voff;
		if (is_object) {
			if (n == cap) {
				cap = cap ? 2 * cap : 8;
				ms = xrealloc(ms, (size_t)cap * sizeof *ms);
			}
			ms[n++] = m;
		}
		skip_ws(&c->s);
		if (c->s.p < c->s.end && *c->s.p == close)
			break;
		if (c->s.p >= c->s.end || *c->s.p != ',')
			goto out;
		c->s.p++;
		sb_addc(&c->out, ',');
		skip_ws(&c->s);
	}
closed:
	c->s.p++;
	sb_addc(&c->out, close);
	c->s.depth--;
	if (n > 1)
		canon_merge_duplicates(c, from, ms, n);
	rc = 0;
out:
	free(ms);
	return rc;
}

static int canon_value(struct canon *c)
{
	if (c->s.p >= c->s.end)
		return -1;
	switch (*c->s.p) {
	case '{': return canon_container(c, '}', 1);
	case '[': return canon_container(c, ']', 0);
	case '"': return canon_string(c);
	case 't': case 'f': case 'n': {
		const char *start = c->s.p;
		int rc = scan_word(&c->s, *start == 't' ? "true" : *start == 'f' ? "false" : "null");
		if (rc == 0)
			sb_add(&c->out, start, (size_t)(c->s.p - start));
		return rc;
	}
	default: return canon_number(c);
	}
}

char *json_canonical(const char *raw, size_t len)
{
	if (!raw)
		return NULL;
	struct canon c = { { raw, raw + len, 0, 1 }, { NULL, 0, 0 } };
	sb_init(&c.out);
	skip_ws(&c.s);
	if (canon_value(&c) < 0)
		goto bad;
	skip_ws(&c.s);
	if (c.s.p != c.s.end || memchr(c.out.s, INFINITY_MARK, c.out.len))
		goto bad;
	return sb_steal(&c.out);
bad:
	sb_free(&c.out);
	return NULL;
}
