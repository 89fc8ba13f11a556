/* SPDX-License-Identifier: MIT */
/*
 * util.c: clocks, randomness and a string buffer.
 *
 * Allocation failure is not something a job runner can recover from in a useful way (a
 * half-built payload is worse than a restart by systemd), so the x* allocators abort with
 * a message instead of returning NULL; callers never check.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/random.h>
#include "util.h"

double now_float(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)(ts.tv_nsec / 1000) / 1e6;
}

double mono_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void sleep_seconds(double s)
{
	if (s <= 0)
		return;
	struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

void random_bytes(void *buf, size_t n)
{
	unsigned char *p = buf;
	while (n > 0) {
		ssize_t r = getrandom(p, n, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "getrandom: %s\n", strerror(errno));
			abort();
		}
		p += r;
		n -= (size_t)r;
	}
}

void random_hex(char *out, size_t nbytes)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char b[64];
	if (nbytes > sizeof b)
		nbytes = sizeof b;
	random_bytes(b, nbytes);
	for (size_t i = 0; i < nbytes; i++) {
		out[2 * i] = hex[b[i] >> 4];
		out[2 * i + 1] = hex[b[i] & 15];
	}
	out[2 * nbytes] = '\0';
}

void new_jid(char out[25])
{
	random_hex(out, 12);
}

double random_unit(void)
{
	uint64_t r;
	random_bytes(&r, sizeof r);
	return (double)(r >> 11) / 9007199254740992.0;
}

static void oom(void)
{
	fputs("out of memory\n", stderr);
	abort();
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		oom();
	return p;
}

void *xcalloc(size_t n, size_t m)
{
	void *p = calloc(n ? n : 1, m ? m : 1);
	if (!p)
		oom();
	return p;
}

void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		oom();
	return p;
}

char *xstrdup(const char *s)
{
	return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
	char *p = xmalloc(n + 1);
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

char *xasprintf(const char *fmt, ...)
{
	struct sbuf b;
	va_list ap;
	sb_init(&b);
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	b.s = xrealloc(b.s, (size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(b.s, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return b.s;
}

void sb_init(struct sbuf *b)
{
	b->cap = 64;
	b->len = 0;
	b->s = xmalloc(b->cap);
	b->s[0] = '\0';
}

void sb_free(struct sbuf *b)
{
	free(b->s);
	b->s = NULL;
	b->len = b->cap = 0;
}

static void sb_reserve(struct sbuf *b, size_t extra)
{
	if (b->len + extra + 1 <= b->cap)
		return;
	while (b->len + extra + 1 > b->cap)
		b->cap *= 2;
	b->s = xrealloc(b->s, b->cap);
}

void sb_add(struct sbuf *b, const char *s, size_t n)
{
	sb_reserve(b, n);
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = '\0';
}

void sb_adds(struct sbuf *b, const char *s)
{
	sb_add(b, s, strlen(s));
}

void sb_addc(struct sbuf *b, char c)
{
	sb_add(b, &c, 1);
}

void sb_vprintf(struct sbuf *b, const char *fmt, va_list ap)
{
	va_list aq;
	va_copy(aq, ap);
	int n = vsnprintf(NULL, 0, fmt, aq);
	va_end(aq);
	if (n <= 0)
		return;
	sb_reserve(b, (size_t)n);
	vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
}

void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	sb_vprintf(b, fmt, ap);
	va_end(ap);
}

char *sb_steal(struct sbuf *b)
{
	char *s = b->s;
	b->s = NULL;
	b->len = b->cap = 0;
	return s;
}

char *file_text(const char *path, size_t *len)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	struct sbuf b;
	sb_init(&b);
	char chunk[4096];
	size_t n;
	while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
		sb_add(&b, chunk, n);
	fclose(f);
	if (len)
		*len = b.len;
	char *s = sb_steal(&b);
	return s ? s : xstrdup("");
}

void human_duration(double secs, int decimals, char *out, size_t n)
{
	if (secs < 0)
		secs = -secs;
	long long s = (long long)(secs + 0.5);
	if (decimals > 0 && secs < 59.995)
		snprintf(out, n, "%.*fs", decimals, secs);
	else if (s < 60)
		snprintf(out, n, "%llds", s);
	else if (s < 3600)
		snprintf(out, n, "%lldm %02llds", s / 60, s % 60);
	else if (s < 86400)
		snprintf(out, n, "%lldh %02lldm", s / 3600, s % 3600 / 60);
	else
		snprintf(out, n, "%lldd %02lldh", s / 86400, s % 86400 / 3600);
}

char *xstrcat2(const char *a, const char *b)
{
	size_t na = strlen(a), nb = strlen(b);
	char *s = xmalloc(na + nb + 1);
	memcpy(s, a, na);
	memcpy(s + na, b, nb + 1);
	return s;
}

/* FNV-1a over 64-bit words (the tail bytes as a last, shorter word), then a murmur3
 * finaliser so that every input bit reaches every output bit. */
uint64_t bytes_digest(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = 14695981039346656037ULL ^ (uint64_t)n;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, b + i, 8);
		h = (h ^ w) * 1099511628211ULL;
		h ^= h >> 29;
	}
	uint64_t w = 0;
	for (size_t k = 0; i + k < n; k++)
		w |= (uint64_t)b[i + k] << (8 * k);
	h = (h ^ w) * 1099511628211ULL;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h ? h : 1;
}
