/*
 * json.c: JSON worked on as text.
 *
 * cJSON is fine for *reading* a field, but it keeps every number as a double: integers past
 * 2^53 come back wrong, and even exact values are respelled (9007199254740991 prints as
 * 9.00719925474099e+15). A job is written by Ruby and read back by Ruby, so whatever the
 * daemon writes must keep every byte it did not mean to change (PROTOCOL §4.5). Hence this
 * file never builds a tree. It has one small scanner that walks the raw text and checks the
 * grammar of RFC 8259, and three things built on it:
 *
 * - Splicing (json_edit_object, json_member_span): the scanner records where each top-level
 *   member's key and value start and end; the new text is the old text with some value
 *   spans swapped, some members cut out (with the right comma) and new members appended
 *   before the closing brace. Nothing else moves, so numbers, escapes and even whitespace
 *   survive byte for byte.
 *
 * - Canonical JSON (json_canonical): the digests of unique jobs and periodic entries hash
 *   args as Ruby's JSON.generate(JSON.parse(text)) prints them, so we print the same way
 *   while scanning: compact, keys in order, strings decoded and re-escaped Ruby's way,
 *   integers as their digits, floats through Ruby's Float#to_s (json_ruby_float).
 *
 * - UTF-8 scrubbing (utf8_scrub*): error messages and raw payloads come from anywhere and
 *   must be valid UTF-8 before they go into JSON. Each maximal invalid subpart becomes one
 *   U+FFFD, as Ruby's String#scrub does.
 *
 * Strictness. Every entry point rejects what RFC 8259's grammar rejects: trailing garbage,
 * raw control characters in strings, leading zeros, bare words, trailing commas. Bytes
 * that are not valid UTF-8 inside strings are a matter of *encoding*, and there we differ
 * by purpose: the splicing functions let them through untouched (Ruby's parser and cJSON
 * both accept them, and a job must not turn "unparseable" because of one bad byte in its
 * args), while json_valid and json_canonical reject them (Ruby's generator raises on them,
 * so there is no canonical form to match). Nesting deeper than JSON_MAX_DEPTH is rejected
 * so that hostile input cannot exhaust the stack.
 *
 * Duplicate keys. Ruby keeps the *last* value of a repeated key at the *first* key's
 * position; we follow that everywhere: json_member_span returns the last occurrence's
 * value, json_canonical prints the object the way Ruby's Hash holds it, and
 * json_edit_object puts an edited value at the first occurrence and drops the later ones
 * (a removal drops them all). Keys are compared after decoding escapes, so "\u0061" is "a".
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
#include "util.h"

#define JSON_MAX_DEPTH 1000

/* ------------------------------------------------------------------------------------------
 * UTF-8
 * ---------------------------------------------------------------------------------------- */

/*
 * Look at the sequence starting at p (n > 0 bytes available). Returns its length if it is a
 * valid UTF-8 character (*valid = 1), otherwise the length of its maximal invalid subpart
 * (*valid = 0): the lead byte plus any continuation bytes that could still have belonged to
 * it (Unicode §3.9, "U+FFFD substitution of maximal subparts"). Overlong forms, surrogates
 * and code points past U+10FFFF are invalid.
 */
static size_t utf8_next(const unsigned char *p, size_t n, int *valid)
{
	unsigned char c = p[0];
	size_t need;
	unsigned char lo = 0x80, hi = 0xBF;   /* allowed range of the second byte */

	*valid = 1;
	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF) {
		need = 2;
	} else if (c >= 0xE0 && c <= 0xEF) {
		need = 3;
		if (c == 0xE0)
			lo = 0xA0;          /* no overlongs */
		else if (c == 0xED)
			hi = 0x9F;          /* no surrogates */
	} else if (c >= 0xF0 && c <= 0xF4) {
		need = 4;
		if (c == 0xF0)
			lo = 0x90;          /* no overlongs */
		else if (c == 0xF4)
			hi = 0x8F;          /* nothing past U+10FFFF */
	} else {
		*valid = 0;             /* stray continuation, C0, C1, F5..FF */
		return 1;
	}
	for (size_t i = 1; i < need; i++) {
		unsigned char b = i < n ? p[i] : 0;
		unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
		if (i >= n || b < l || b > h) {
			*valid = 0;
			return i;
		}
	}
	return need;
}

/* Code point cp as UTF-8 into u; returns the length. Surrogates are encoded too (for key
 * comparison); callers that need valid output reject them first. */
static size_t utf8_encode(uint32_t cp, char u[4])
{
	if (cp < 0x80) {
		u[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		u[0] = (char)(0xC0 | (cp >> 6));
		u[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		u[0] = (char)(0xE0 | (cp >> 12));
		u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		u[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	u[0] = (char)(0xF0 | (cp >> 18));
	u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
	u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
	u[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

static void utf8_put(struct sbuf *b, uint32_t cp)
{
	char u[4];
	sb_add(b, u, utf8_encode(cp, u));
}

static const char replacement_char[] = "\xEF\xBF\xBD";   /* U+FFFD */

/* Append a scrubbed copy of s to b, at most max_chars characters (0 = all). */
static void utf8_scrub_into(struct sbuf *b, const char *s, size_t len, size_t max_chars)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, chars = 0;
	while (i < len && (max_chars == 0 || chars < max_chars)) {
		int valid;
		size_t n = utf8_next(p + i, len - i, &valid);
		if (valid)
			sb_add(b, s + i, n);
		else
			sb_add(b, replacement_char, 3);
		i += n;
		chars++;
	}
}

char *utf8_scrub(const char *s, size_t len, size_t max_chars)
{
	struct sbuf b;
	sb_init(&b);
	utf8_scrub_into(&b, s, len, max_chars);
	return sb_steal(&b);
}

char *utf8_scrub_len(const char *s, size_t len, size_t max_chars, size_t *out_len)
{
	struct sbuf b;
	sb_init(&b);
	utf8_scrub_into(&b, s, len, max_chars);
	*out_len = b.len;
	return sb_steal(&b);
}

/*
 * Only the end of s matters, and s may be a long output, so scrubbing starts near the end.
 * Each character of the result comes from 1 to 4 bytes of s, so the last max_chars of them
 * lie within the last 4 * max_chars bytes; a scan started in the middle of a sequence agrees
 * with a scan from the start at most 3 bytes later (a maximal subpart never spans a lead
 * byte), hence the 3 bytes of slack.
 */
char *utf8_scrub_tail(const char *s, size_t len, size_t max_chars)
{
	if (max_chars == 0)
		return utf8_scrub(s, len, 0);
	size_t window = max_chars > (SIZE_MAX - 3) / 4 ? len : 4 * max_chars + 3;
	size_t from = len > window ? len - window : 0;
	struct sbuf b;
	sb_init(&b);
	utf8_scrub_into(&b, s + from, len - from, 0);
	/* The scrubbed text is valid UTF-8: count lead bytes backwards. */
	size_t cut = b.len, chars = 0;
	while (cut > 0 && chars < max_chars) {
		cut--;
		if (((unsigned char)b.s[cut] & 0xC0) != 0x80)
			chars++;
	}
	if (cut == 0)
		return sb_steal(&b);
	char *tail = xstrndup(b.s + cut, b.len - cut);
	sb_free(&b);
	return tail;
}

/* ------------------------------------------------------------------------------------------
 * The scanner: checks RFC 8259 grammar on raw text without building anything.
 * ---------------------------------------------------------------------------------------- */

struct scan {
	const char *p, *end;    /* cursor, end of text */
	int depth;
	int strict_utf8;        /* reject invalid UTF-8 inside strings */
};

static void skip_ws(struct scan *s)
{
	while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
		s->p++;
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* The four hex digits at p (p + 4 <= end checked by the caller), or -1. */
static long hex4(const char *p)
{
	long v = 0;
	for (int i = 0; i < 4; i++) {
		int h = hex_value(p[i]);
		if (h < 0)
			return -1;
		v = v << 4 | h;
	}
	return v;
}

/* A string starting at the opening quote; leaves the cursor past the closing quote. */
static int scan_string(struct scan *s)
{
	s->p++;
	while (s->p < s->end) {
		unsigned char c = (unsigned char)*s->p;
		if (c == '"') {
			s->p++;
			return 0;
		}
		if (c < 0x20)
			return -1;
		if (c == '\\') {
			if (s->end - s->p < 2)
				return -1;
			char e = s->p[1];
			if (e == 'u') {
				if (s->end - s->p < 6 || hex4(s->p + 2) < 0)
					return -1;
				s->p += 6;
			} else if (e && strchr("\"\\/bfnrt", e)) {
				s->p += 2;
			} else {
				return -1;
			}
		} else if (c >= 0x80 && s->strict_utf8) {
			int valid;
			size_t n = utf8_next((const unsigned char *)s->p, (size_t)(s->end - s->p), &valid);
			if (!valid)
				return -1;
			s->p += n;
		} else {
			s->p++;
		}
	}
	return -1;
}

static int is_digit(const struct scan *s)
{
	return s->p < s->end && *s->p >= '0' && *s->p <= '9';
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? ; *is_float tells whether it has a
 * fraction or an exponent. */
static int scan_number(struct scan *s, int *is_float)
{
	*is_float = 0;
	if (s->p < s->end && *s->p == '-')
		s->p++;
	if (!is_digit(s))
		return -1;
	if (*s->p++ != '0')
		while (is_digit(s))
			s->p++;
	if (s->p < s->end && *s->p == '.') {
		s->p++;
		*is_float = 1;
		if (!is_digit(s))
			return -1;
		while (is_digit(s))
			s->p++;
	}
	if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
		s->p++;
		*is_float = 1;
		if (s->p < s->end && (*s->p == '+' || *s->p == '-'))
			s->p++;
		if (!is_digit(s))
			return -1;
		while (is_digit(s))
			s->p++;
	}
	return 0;
}

static int scan_word(struct scan *s, const char *word)
{
	size_t n = strlen(word);
	if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0)
		return -1;
	s->p += n;
	return 0;
}

static int scan_value(struct scan *s);

/* The elements of an array or the members of an object, cursor on the opening bracket. */
static int scan_container(struct scan *s, char close, int is_object)
{
	if (++s->depth > JSON_MAX_DEPTH)
		return -1;
	s->p++;
	skip_ws(s);
	if (s->p < s->end && *s->p == close) {
		s->p++;
		s->depth--;
		return 0;
	}
	for (;;) {
		if (is_object) {
			if (s->p >= s->end || *s->p != '"' || scan_string(s) < 0)
				return -1;
			skip_ws(s);
			if (s->p >= s->end || *s->p != ':')
				return -1;
			s->p++;
			skip_ws(s);
		}
		if (scan_value(s) < 0)
			return -1;
		skip_ws(s);
		if (s->p >= s->end)
			return -1;
		if (*s->p == close) {
			s->p++;
			s->depth--;
			return 0;
		}
		if (*s->p != ',')
			return -1;
		s->p++;
		skip_ws(s);
	}
}

/* One value at the cursor (no whitespace skipped before it). */
static int scan_value(struct scan *s)
{
	int is_float;
	if (s->p >= s->end)
		return -1;
	switch (*s->p) {
	case '{': return scan_container(s, '}', 1);
	case '[': return scan_container(s, ']', 0);
	case '"': return scan_string(s);
	case 't': return scan_word(s, "true");
	case 'f': return scan_word(s, "false");
	case 'n': return scan_word(s, "null");
	default: return scan_number(s, &is_float);
	}
}

/* True if text is exactly one value with optional whitespace around it. */
static int scan_whole(const char *raw, size_t len, int strict_utf8)
{
	struct scan s = { raw, raw + len, 0, strict_utf8 };
	skip_ws(&s);
	if (scan_value(&s) < 0)
		return 0;
	skip_ws(&s);
	return s.p == s.end;
}

int json_valid(const char *raw, size_t len)
{
	return raw != NULL && scan_whole(raw, len, 1);
}

/* ------------------------------------------------------------------------------------------
 * Keys: decoding escapes, comparing a raw key with a plain one.
 * ---------------------------------------------------------------------------------------- */

/*
 * Decode the escape at p (p[0] == '\\', already checked by scan_string). Returns the bytes
 * it spans and the code point in *cp; \uD8xx\uDCxx pairs are combined. A surrogate that is
 * not part of a pair comes back as itself (0xD800..0xDFFF) for the caller to judge.
 */
static size_t decode_escape(const char *p, const char *end, uint32_t *cp)
{
	switch (p[1]) {
	case 'b': *cp = '\b'; return 2;
	case 'f': *cp = '\f'; return 2;
	case 'n': *cp = '\n'; return 2;
	case 'r': *cp = '\r'; return 2;
	case 't': *cp = '\t'; return 2;
	case 'u': break;
	default: *cp = (unsigned char)p[1]; return 2;     /* \" \\ \/ */
	}
	uint32_t hi = (uint32_t)hex4(p + 2);
	*cp = hi;
	if (hi >= 0xD800 && hi <= 0xDBFF && end - p >= 12 && p[6] == '\\' && p[7] == 'u') {
		long lo = hex4(p + 8);
		if (lo >= 0xDC00 && lo <= 0xDFFF) {
			*cp = 0x10000 + ((hi - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
			return 12;
		}
	}
	return 6;
}

/* Does the raw key text k (between its quotes, already scanned) decode to key? */
static int key_equals(const char *k, size_t klen, const char *key, size_t keylen)
{
	const char *p = k, *end = k + klen;
	size_t at = 0;
	while (p < end) {
		if (*p != '\\') {
			if (at >= keylen || key[at] != *p)
				return 0;
			at++;
			p++;
			continue;
		}
		uint32_t cp;
		char u[4];
		p += decode_escape(p, end, &cp);
		size_t n = utf8_encode(cp, u);
		if (keylen - at < n || memcmp(key + at, u, n) != 0)
			return 0;
		at += n;
	}
	return at == keylen;
}

/* ------------------------------------------------------------------------------------------
 * Splicing top-level members.
 * ---------------------------------------------------------------------------------------- */

struct member {
	size_t kstart, kend;    /* the key, quotes included */
	size_t vstart, vend;    /* the value */
};

struct layout {
	size_t close;           /* offset of the object's closing brace */
	struct member *m;
	int n, cap;
};

/*
 * Check that raw is one JSON object (whitespace around allowed, nothing else) and record
 * where its members are. Returns 0, or -1 with nothing to free.
 */
static int scan_object_layout(const char *raw, size_t len, struct layout *lay)
{
	struct scan s = { raw, raw + len, 1, 0 };
	memset(lay, 0, sizeof *lay);
	skip_ws(&s);
	if (s.p >= s.end || *s.p != '{')
		goto bad;
	s.p++;
	skip_ws(&s);
	if (s.p < s.end && *s.p == '}')
		goto closed;
	for (;;) {
		struct member m;
		if (s.p >= s.end || *s.p != '"')
			goto bad;
		m.kstart = (size_t)(s.p - raw);
		if (scan_string(&s) < 0)
			goto bad;
		m.kend = (size_t)(s.p - raw);
		skip_ws(&s);
		if (s.p >= s.end || *s.p != ':')
			goto bad;
		s.p++;
		skip_ws(&s);
		m.vstart = (size_t)(s.p - raw);
		if (scan_value(&s) < 0)
			goto bad;
		m.vend = (size_t)(s.p - raw);
		if (lay->n == lay->cap) {
			lay->cap = lay->cap ? 2 * lay->cap : 16;
			lay->m = xrealloc(lay->m, (size_t)lay->cap * sizeof *lay->m);
		}
		lay->m[lay->n++] = m;
		skip_ws(&s);
		if (s.p < s.end && *s.p == '}')
			break;
		if (s.p >= s.end || *s.p != ',')
			goto bad;
		s.p++;
		skip_ws(&s);
	}
closed:
	lay->close = (size_t)(s.p - raw);
	s.p++;
	skip_ws(&s);
	if (s.p != s.end)
		goto bad;
	return 0;
bad:
	free(lay->m);
	lay->m = NULL;
	return -1;
}

static int member_has_key(const char *raw, const struct member *m, const char *key)
{
	return key_equals(raw + m->kstart + 1, m->kend - m->kstart - 2, key, strlen(key));
}

int json_member_span(const char *raw, size_t len, const char *key, size_t *start, size_t *vlen)
{
	struct layout lay;
	if (!raw || !key || scan_object_layout(raw, len, &lay) < 0)
		return -1;
	int found = -1;
	for (int i = 0; i < lay.n; i++)
		if (member_has_key(raw, &lay.m[i], key))
			found = i;  /* the last one: Ruby keeps a repeated key's last value */
	if (found >= 0) {
		*start = lay.m[found].vstart;
		*vlen = lay.m[found].vend - lay.m[found].vstart;
	}
	free(lay.m);
	return found >= 0 ? 0 : -1;
}

/* Index of the last edit naming key, or -1. The last edit for a key is the one that counts. */
static int last_edit_for(const struct json_edit *edits, int nedits, const char *raw,
                         const struct member *m)
{
	for (int j = nedits - 1; j >= 0; j--)
		if (member_has_key(raw, m, edits[j].key))
			return j;
	return -1;
}

static int is_last_edit_of_its_key(const struct json_edit *edits, int nedits, int j)
{
	for (int k = j + 1; k < nedits; k++)
		if (strcmp(edits[k].key, edits[j].key) == 0)
			return 0;
	return 1;
}

/* What happens to each existing member. */
enum { KEEP, REPLACE, DROP };

char *json_edit_object(const char *raw, size_t len, const struct json_edit *edits, int nedits)
{
	struct layout lay;
	if (!raw || nedits < 0 || (nedits > 0 && !edits))
		return NULL;
	for (int j = 0; j < nedits; j++)
		if (!edits[j].key || (edits[j].value &&
		                      !scan_whole(edits[j].value, strlen(edits[j].value), 0)))
			return NULL;
	if (scan_object_layout(raw, len, &lay) < 0)
		return NULL;

	int *action = xcalloc((size_t)lay.n + 1, sizeof *action);
	int *with = xcalloc((size_t)lay.n + 1, sizeof *with);         /* edit index for REPLACE */
	char *matched = xcalloc((size_t)nedits + 1, 1);                /* by last-edit index */
	for (int i = 0; i < lay.n; i++) {
		int j = last_edit_for(edits, nedits, raw, &lay.m[i]);
		if (j < 0) {
			action[i] = KEEP;
		} else if (!edits[j].value || matched[j]) {
			action[i] = DROP;       /* removed, or a later duplicate of an edited key */
		} else {
			action[i] = REPLACE;
			with[i] = j;
		}
		if (j >= 0)
			matched[j] = 1;
	}

	struct sbuf b;
	sb_init(&b);
	sb_add(&b, raw, lay.n ? lay.m[0].kstart : lay.close);
	int prev = -1;              /* last member written */
	for (int i = 0; i < lay.n; i++) {
		const struct member *m = &lay.m[i];
		if (action[i] == DROP)
			continue;
		if (prev >= 0)          /* the separator that followed the previous one */
			sb_add(&b, raw + lay.m[prev].vend, lay.m[prev + 1].kstart - lay.m[prev].vend);
		sb_add(&b, raw + m->kstart, m->vstart - m->kstart);
		if (action[i] == REPLACE)
			sb_adds(&b, edits[with[i]].value);
		else
			sb_add(&b, raw + m->vstart, m->vend - m->vstart);
		prev = i;
	}
	int written = prev >= 0;
	for (int j = 0; j < nedits; j++) {
		if (!edits[j].value || matched[j] || !is_last_edit_of_its_key(edits, nedits, j))
			continue;
		if (written)
			sb_addc(&b, ',');
		char *k = json_quote(edits[j].key, strlen(edits[j].key));
		sb_adds(&b, k);
		free(k);
		sb_addc(&b, ':');
		sb_adds(&b, edits[j].value);
		written = 1;
	}
	size_t tail = lay.n ? lay.m[lay.n - 1].vend : lay.close;
	sb_add(&b, raw + tail, len - tail);

	free(action);
	free(with);
	free(matched);
	free(lay.m);
	return sb_steal(&b);
}

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

/* Append one ASCII byte or code point, escaped the way Ruby's generator escapes it. */
static void put_escaped(struct sbuf *b, uint32_t c)
{
	static const char hex[] = "0123456789abcdef";
	switch (c) {
	case '"': sb_add(b, "\\\"", 2); return;
	case '\\': sb_add(b, "\\\\", 2); return;
	case '\b': sb_add(b, "\\b", 2); return;
	case '\f': sb_add(b, "\\f", 2); return;
	case '\n': sb_add(b, "\\n", 2); return;
	case '\r': sb_add(b, "\\r", 2); return;
	case '\t': sb_add(b, "\\t", 2); return;
	}
	if (c < 0x20) {
		char u[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };
		sb_add(b, u, 6);
	} else {
		utf8_put(b, c);
	}
}

/* Append the valid UTF-8 text s as the inside of a canonical string literal. */
static void put_escaped_utf8(struct sbuf *b, const char *s, size_t len)
{
	size_t run = 0;         /* bytes copied as they are, flushed in one go */
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c != '"' && c != '\\') {
			run++;
			continue;
		}
		sb_add(b, s + i - run, run);
		run = 0;
		put_escaped(b, c);
	}
	sb_add(b, s + len - run, run);
}

char *json_quote(const char *s, size_t len)
{
	struct sbuf clean, b;
	sb_init(&clean);
	utf8_scrub_into(&clean, s ? s : "", s ? len : 0, 0);
	sb_init(&b);
	sb_addc(&b, '"');
	put_escaped_utf8(&b, clean.s, clean.len);
	sb_addc(&b, '"');
	sb_free(&clean);
	return sb_steal(&b);
}

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

/* ------------------------------------------------------------------------------------------
 * Array elements (args_as_argv hands each element's original text to the handler).
 * ---------------------------------------------------------------------------------------- */

int json_array_spans(const char *raw, size_t len, size_t **starts, size_t **lens)
{
	*starts = NULL;
	*lens = NULL;
	if (!raw || !scan_whole(raw, len, 0))
		return -1;
	struct scan s = { raw, raw + len, 0, 0 };
	skip_ws(&s);
	if (*s.p != '[')
		return -1;
	int n = 0, cap = 0;
	s.p++;
	skip_ws(&s);
	while (s.p < s.end && *s.p != ']') {
		const char *begin = s.p;
		if (scan_value(&s) < 0)
			return -1;
		if (n == cap) {
			cap = cap ? cap * 2 : 8;
			*starts = xrealloc(*starts, (size_t)cap * sizeof **starts);
			*lens = xrealloc(*lens, (size_t)cap * sizeof **lens);
		}
		(*starts)[n] = (size_t)(begin - raw);
		(*lens)[n] = (size_t)(s.p - begin);
		n++;
		skip_ws(&s);
		if (s.p < s.end && *s.p == ',') {
			s.p++;
			skip_ws(&s);
		}
	}
	return n;
}
