/* SPDX-License-Identifier: MIT */
/* util.h: small helpers every part uses: clocks, random ids, a growable string buffer. */
#ifndef COGWORKERD_UTIL_H
#define COGWORKERD_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>

double now_float(void);             /* wall clock, epoch seconds with microseconds */
double mono_now(void);              /* CLOCK_MONOTONIC seconds */
void sleep_seconds(double s);
void random_bytes(void *buf, size_t n);
void random_hex(char *out, size_t nbytes);   /* writes 2*nbytes hex chars + NUL */
void new_jid(char out[25]);
double random_unit(void);           /* uniform in [0, 1) */
/* A duration for people: "1.24s" (decimals 2) or "12s" under a minute, then "4m 05s",
 * "3h 02m", "2d 04h". A negative one is shown as its size. */
void human_duration(double secs, int decimals, char *out, size_t n);

/* A growable, always NUL-terminated byte buffer. */
struct sbuf {
	char *s;
	size_t len, cap;
};
void sb_init(struct sbuf *b);
void sb_free(struct sbuf *b);
void sb_add(struct sbuf *b, const char *s, size_t n);
void sb_adds(struct sbuf *b, const char *s);
void sb_addc(struct sbuf *b, char c);
void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_vprintf(struct sbuf *b, const char *fmt, va_list ap);
char *sb_steal(struct sbuf *b);     /* the buffer's string, ownership to the caller */
/* A whole file's text, NUL-terminated and malloc'd (*len its length; len may be NULL), or
 * NULL with errno when it can't be read. */
char *file_text(const char *path, size_t *len);

char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t m);
void *xrealloc(void *p, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* a followed by b, malloc'd: a key name (K_QUEUE, name) without printf's cost. */
char *xstrcat2(const char *a, const char *b);

/* A 64-bit digest of n bytes, never 0: for telling payloads apart in memory, not against
 * an adversary. Eight bytes a step, so a 200 MB job costs tens of milliseconds. */
uint64_t bytes_digest(const void *p, size_t n);

#endif
