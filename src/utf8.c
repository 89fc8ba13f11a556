/* SPDX-License-Identifier: MIT */
/*
 * utf8.c: UTF-8 decoding, encoding, checking (utf8_invalid_at) and scrubbing (utf8_scrub*).
 *
 * Error messages and raw payloads come from anywhere and must be valid UTF-8 before they go
 * into JSON. Each maximal invalid subpart becomes one U+FFFD, as Ruby's String#scrub does,
 * so what the daemon writes is what a Ruby process would have written. The JSON scanner
 * (json.c) decodes with the same function (utf8_next) where it rejects invalid UTF-8, so
 * "valid" means one thing everywhere.
 *
 * The text log is read on terminals and with grep, so what a handler prints must not act
 * there (an ESC clears a tail -f, a backspace hides what precedes it) nor make the file
 * binary: utf8_escape_text shows such bytes as escapes instead of scrubbing them, so that
 * what was printed can still be read off the line. A backslash is kept as it is: the text
 * line is for people, a printed "\x1b" and an escaped ESC read alike there, and the JSON
 * format is the exact one.
 */
#include <stdint.h>
#include <string.h>
#include "json.h"
#include "json_int.h"
#include "util.h"

/*
 * Look at the sequence starting at p (n > 0 bytes available). Returns its length if it is a
 * valid UTF-8 character (*valid = 1), otherwise the length of its maximal invalid subpart
 * (*valid = 0): the lead byte plus any continuation bytes that could still have belonged to
 * it (Unicode 15, section 3.9, "U+FFFD substitution of maximal subparts"). Overlong forms, surrogates
 * and code points past U+10FFFF are invalid.
 */
size_t utf8_next(const unsigned char *p, size_t n, int *valid)
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
size_t utf8_encode(uint32_t cp, char u[4])
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

void utf8_put(struct sbuf *b, uint32_t cp)
{
	char u[4];
	sb_add(b, u, utf8_encode(cp, u));
}

long utf8_invalid_at(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	for (size_t i = 0; i < len;) {
		int valid;
		size_t n = utf8_next(p + i, len - i, &valid);
		if (!valid)
			return (long)i;
		i += n;
	}
	return -1;
}

static const char replacement_char[] = "\xEF\xBF\xBD";   /* U+FFFD */

/* Append a scrubbed copy of s to b, at most max_chars characters (0 = all). */
void utf8_scrub_into(struct sbuf *b, const char *s, size_t len, size_t max_chars)
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

static const char hex_digits[] = "0123456789abcdef";

static void put_hex_byte(struct sbuf *b, const char *prefix, unsigned char c)
{
	char e[6];
	size_t n = strlen(prefix);

	memcpy(e, prefix, n);
	e[n] = hex_digits[c >> 4];
	e[n + 1] = hex_digits[c & 15];
	sb_add(b, e, n + 2);
}

/* The character of n bytes at p is one a terminal acts on: C0 but tab, DEL, C1. */
static int is_control(const unsigned char *p, size_t n)
{
	if (n == 1)
		return (p[0] < 0x20 && p[0] != '\t') || p[0] == 0x7F;
	return n == 2 && p[0] == 0xC2 && p[1] < 0xA0;
}

void utf8_escape_text(struct sbuf *b, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, run = 0;          /* bytes kept as they are, added in one go */

	while (i < len) {
		int valid = 1;
		size_t n = p[i] >= 0x20 && p[i] < 0x7F ? 1 : utf8_next(p + i, len - i, &valid);

		if (valid && !is_control(p + i, n)) {
			run += n;
			i += n;
			continue;
		}
		sb_add(b, s + i - run, run);
		run = 0;
		if (!valid)
			for (size_t k = 0; k < n; k++)
				put_hex_byte(b, "\\x", p[i + k]);
		else if (p[i] == '\n' || p[i] == '\r')
			sb_addc(b, ' ');        /* one event, one line */
		else if (n == 1)
			put_hex_byte(b, "\\x", p[i]);
		else
			put_hex_byte(b, "\\u00", p[i + 1]);
		i += n;
	}
	sb_add(b, s + len - run, run);
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
