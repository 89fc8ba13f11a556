/* SPDX-License-Identifier: MIT */
/*
 * json.h: JSON done on the original text. cJSON reads values, but a job's JSON is never
 * re-encoded (numbers beyond 2^53 and float spellings must survive byte for byte), so
 * changes are made by splicing member values into the original text.
 */
#ifndef COGWORKERD_JSON_H
#define COGWORKERD_JSON_H

#include <stddef.h>

struct sbuf;

struct json_edit {
	const char *key;
	const char *value;      /* JSON text of the new value; NULL = remove the member */
};

/*
 * Apply edits to the top-level members of the JSON object in raw: an existing member keeps
 * its place and gets the new value text; a new one is appended at the end; NULL removes it.
 * Every other byte of raw is kept. Returns a malloc'd string, or NULL if raw is not a
 * well-formed JSON object.
 */
char *json_edit_object(const char *raw, size_t len, const struct json_edit *edits, int nedits);

/* Locate the value text of a top-level member; 0 and the span on success, -1 if absent
 * or raw is not an object. */
int json_member_span(const char *raw, size_t len, const char *key, size_t *start, size_t *vlen);
/* The same for several keys in one scan: the span of keys[i] in starts[i] and lens[i]
 * (lens[i] = 0: absent). 0, or -1 if raw is not an object. */
int json_member_spans(const char *raw, size_t len, const char *const *keys, int nkeys,
                      size_t *starts, size_t *lens);

/*
 * The JSON string literal lit (quotes included, as json_member_span and json_array_spans
 * give it) decoded: malloc'd and NUL-terminated, its length in *n. The text may hold NUL
 * bytes (written "\u0000"), which is why the length is there: compare it with strlen to
 * tell. NULL if lit is not exactly one string literal.
 */
char *json_string_decode(const char *lit, size_t len, size_t *n);
/* The top-level member key of the object raw, decoded as a string (json_string_decode):
 * malloc'd, NULL when absent, not a string, or raw not an object. */
char *json_member_string(const char *raw, size_t len, const char *key);

/* True if raw is one well-formed JSON value with nothing but whitespace around it. */
int json_valid(const char *raw, size_t len);
/* Where raw stops being JSON, for an error message: -1 when json_valid; else the offset of
 * the token the grammar could not take (len: the text ended too soon). */
long json_invalid_at(const char *raw, size_t len);

/*
 * Canonical cogworker JSON (doc/protocol.md §4.5) of the JSON value text in raw: compact, keys in
 * their order, strings escaped as Ruby's generator does, integers as their digits, floats as
 * Ruby prints them. Returns malloc'd text, NULL if raw is not valid JSON.
 */
char *json_canonical(const char *raw, size_t len);

/* s as a JSON string literal (with quotes), in canonical style; invalid UTF-8 is scrubbed. */
char *json_quote(const char *s, size_t len);

/* Ruby's Float#to_s for a finite double: shortest round-trip, always with a fraction. */
void json_ruby_float(double d, char out[40]);

/*
 * Where the first of len bytes at s that is not UTF-8 is (0-based): a byte that starts no
 * character, a cut sequence, an overlong form, a surrogate, a code point past U+10FFFF.
 * -1 when all of it is UTF-8. The one test of "is UTF-8" that refusals use (push, the
 * daemon's reading of a job), so that they agree with each other and with utf8_scrub.
 */
long utf8_invalid_at(const char *s, size_t len);

/*
 * Valid UTF-8 copy of s: every invalid byte sequence becomes U+FFFD, and the result is cut
 * to at most max_chars characters (0 = no limit). Never fails.
 */
char *utf8_scrub(const char *s, size_t len, size_t max_chars);
/* The same, with the length of the result (which may hold NUL bytes: s may). */
char *utf8_scrub_len(const char *s, size_t len, size_t max_chars, size_t *out_len);
/* The last max_chars characters of a scrubbed copy (for output tails). */
char *utf8_scrub_tail(const char *s, size_t len, size_t max_chars);
/*
 * s appended to b as a text log line shows it: valid UTF-8 as it is, but a control
 * character (C0 but tab, DEL, C1) as \xNN (C1: \u00NN) and each byte of invalid UTF-8 as
 * \xNN; a line break becomes a space. NUL bytes in s are escaped like any control byte.
 */
void utf8_escape_text(struct sbuf *b, const char *s, size_t len);

/* The value spans of the elements of the JSON array in raw: returns the count (arrays
 * malloc'd into *starts and *lens), or -1 if raw is not an array. */
int json_array_spans(const char *raw, size_t len, size_t **starts, size_t **lens);

#endif
