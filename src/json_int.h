/* SPDX-License-Identifier: MIT */
/*
 * json_int.h: what the parts of the JSON code share (json.c: the scanner, keys, splicing;
 * json_canon.c: canonical form; utf8.c); nothing else includes it. json.h stays the public
 * header.
 */
#ifndef COGWORKERD_JSON_INT_H
#define COGWORKERD_JSON_INT_H

#include <stddef.h>
#include <stdint.h>
#include "util.h"

#define JSON_MAX_DEPTH 1000     /* deeper nesting is rejected: hostile input, bounded stack */

/* --- utf8.c ------------------------------------------------------------------------------ */

/* The length of the sequence at p (n > 0 bytes), *valid = 0 if it is not valid UTF-8 (then
 * the length of its maximal invalid subpart). */
size_t utf8_next(const unsigned char *p, size_t n, int *valid);
/* Code point cp as UTF-8 into u; returns the length (surrogates are encoded too). */
size_t utf8_encode(uint32_t cp, char u[4]);
void utf8_put(struct sbuf *b, uint32_t cp);
void utf8_scrub_into(struct sbuf *b, const char *s, size_t len, size_t max_chars);

/* --- the scanner (json.c): RFC 8259's grammar checked on raw text, nothing built -------- */

struct scan {
	const char *p, *end;    /* cursor, end of text */
	int depth;
	int strict_utf8;        /* reject invalid UTF-8 inside strings */
};

/* Inline: it runs between every two tokens, in the scanner and the canonical printer. */
static inline void skip_ws(struct scan *s)
{
	while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
		s->p++;
}

/* Each at the cursor: 0 with the cursor past the token, or -1. */
int scan_string(struct scan *s);
int scan_number(struct scan *s, int *is_float);     /* *is_float: fraction or exponent */
int scan_word(struct scan *s, const char *word);

/* The escape at p (already checked by scan_string): the bytes it spans, the code point in
 * *cp (\uD8xx\uDCxx pairs combined; a lone surrogate comes back as itself). */
size_t decode_escape(const char *p, const char *end, uint32_t *cp);

/* --- string literals (json.c) ----------------------------------------------------------- */

/* Append one ASCII byte or code point, escaped the way Ruby's generator escapes it. */
void put_escaped(struct sbuf *b, uint32_t c);
/* Append the valid UTF-8 text s as the inside of a string literal, escaped Ruby's way. */
void put_escaped_utf8(struct sbuf *b, const char *s, size_t len);

#endif
