/* SPDX-License-Identifier: MIT */
/*
 * json.c: JSON worked on as text.
 *
 * cJSON is fine for *reading* a field, but it keeps every number as a double: integers past
 * 2^53 come back wrong, and even exact values are respelled (9007199254740991 prints as
 * 9.00719925474099e+15). A job is written by Ruby and read back by Ruby, so whatever the
 * daemon writes must keep every byte it did not mean to change (doc/protocol.md §4.5). Hence this
 * code never builds a tree. It has one small scanner (in this file) that walks the raw text
 * and checks the grammar of RFC 8259, and three things built on it:
 *
 * - Splicing (json_edit_object, json_member_span), in this file: the scanner records where
 *   each top-level member's key and value start and end; the new text is the old text with
 *   some value spans swapped, some members cut out (with the right comma) and new members
 *   appended before the closing brace. Nothing else moves, so numbers, escapes and even
 *   whitespace survive byte for byte.
 *
 * - Canonical JSON (json_canonical), in json_canon.c: the digests of unique jobs and
 *   periodic entries hash args as Ruby prints them, so we print the same way while scanning.
 *
 * - UTF-8 scrubbing (utf8_scrub*), in utf8.c: error messages and raw payloads come from
 *   anywhere and must be valid UTF-8 before they go into JSON. Each maximal invalid subpart
 *   becomes one U+FFFD, as Ruby's String#scrub does.
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
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "json.h"
#include "json_int.h"
#include "util.h"

/* ------------------------------------------------------------------------------------------
 * The scanner: checks RFC 8259 grammar on raw text without building anything.
 * ---------------------------------------------------------------------------------------- */

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
int scan_string(struct scan *s)
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
int scan_number(struct scan *s, int *is_float)
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

int scan_word(struct scan *s, const char *word)
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

long json_invalid_at(const char *raw, size_t len)
{
	struct scan s = { raw, raw + len, 0, 1 };
	skip_ws(&s);
	if (scan_value(&s) == 0) {
		skip_ws(&s);
		if (s.p == s.end)
			return -1;
	}
	return (long)(s.p - raw);
}

/* ------------------------------------------------------------------------------------------
 * String literals, escaped the way Ruby's generator escapes them (splicing writes them, and
 * the canonical printer too).
 * ---------------------------------------------------------------------------------------- */

/* Append one ASCII byte or code point, escaped the way Ruby's generator escapes it. */
void put_escaped(struct sbuf *b, uint32_t c)
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
void put_escaped_utf8(struct sbuf *b, const char *s, size_t len)
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

/* ------------------------------------------------------------------------------------------
 * Keys: decoding escapes, comparing a raw key with a plain one.
 * ---------------------------------------------------------------------------------------- */

/*
 * Decode the escape at p (p[0] == '\\', already checked by scan_string). Returns the bytes
 * it spans and the code point in *cp; \uD8xx\uDCxx pairs are combined. A surrogate that is
 * not part of a pair comes back as itself (0xD800..0xDFFF) for the caller to judge.
 */
size_t decode_escape(const char *p, const char *end, uint32_t *cp)
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

char *json_string_decode(const char *lit, size_t len, size_t *n)
{
	if (!lit || len < 2 || lit[0] != '"')
		return NULL;
	struct scan s = { lit, lit + len, 0, 0 };
	if (scan_string(&s) < 0 || s.p != s.end)
		return NULL;
	struct sbuf b;
	sb_init(&b);
	const char *p = lit + 1, *end = lit + len - 1;
	while (p < end) {
		const char *run = p;
		while (p < end && *p != '\\')
			p++;
		sb_add(&b, run, (size_t)(p - run));
		if (p == end)
			break;
		uint32_t cp;
		p += decode_escape(p, end, &cp);
		utf8_put(&b, cp);
	}
	*n = b.len;
	return sb_steal(&b);
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

char *json_member_string(const char *raw, size_t len, const char *key)
{
	size_t at, n;
	if (json_member_span(raw, len, key, &at, &n) != 0)
		return NULL;
	return json_string_decode(raw + at, n, &n);
}

int json_member_spans(const char *raw, size_t len, const char *const *keys, int nkeys,
                      size_t *starts, size_t *lens)
{
	struct layout lay;
	if (!raw || scan_object_layout(raw, len, &lay) < 0)
		return -1;
	for (int k = 0; k < nkeys; k++) {
		starts[k] = lens[k] = 0;
		for (int i = 0; i < lay.n; i++)
			if (member_has_key(raw, &lay.m[i], keys[k])) {
				/* the last one: Ruby keeps a repeated key's last value */
				starts[k] = lay.m[i].vstart;
				lens[k] = lay.m[i].vend - lay.m[i].vstart;
			}
	}
	free(lay.m);
	return 0;
}

int json_member_span(const char *raw, size_t len, const char *key, size_t *start, size_t *vlen)
{
	size_t s, n;
	if (!key || json_member_spans(raw, len, &key, 1, &s, &n) < 0 || n == 0)
		return -1;
	*start = s;
	*vlen = n;
	return 0;
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
