/* SPDX-License-Identifier: MIT */
/*
 * tz.c: time zones for cron, without libc's zone state.
 *
 * A zone is resolved once, when a cron expression is parsed, into a private table: the
 * transitions of the TZif file (/usr/share/zoneinfo/<name>, or /etc/localtime, or the
 * file or POSIX string in $TZ for the process's local zone), plus the POSIX TZ footer
 * rule that the file carries for instants past its table. Evaluation never touches
 * libc's zone state (no setenv/tzset/localtime), so it is thread-safe and any number of
 * zones coexist. Leap-second records ("right/" zones) are ignored: epochs are POSIX.
 *
 * What cron asks of a zone is a segment (struct seg): the stretch of the time line around
 * an instant with one UTC offset, its ends, and the offset just before it (which tells a
 * fall-back repeat from a spring-forward gap). Inside the table, that is a binary search;
 * past it, the footer rule's transitions are computed for the years around the instant.
 *
 * A POSIX TZ string ("CET-1CEST,M3.5.0,M10.5.0/3") gives the offset west of UTC, so its
 * sign is flipped on reading; a rule without dates ("EST5EDT") means the US rule, as glibc
 * assumes. A TZif file is read through its 64-bit block when it has one (version 2 and
 * later): the 32-bit block ends in 2038.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tz.h"

#define TZFILE_MAX (4 << 20)

/* One end of a DST period in a POSIX TZ rule: Jn, n or Mm.w.d, plus a local time. */
struct tzwhen {
	char kind;                      /* 'J', 'N' or 'M' */
	int n, m, w, d;
	int32_t time;                   /* seconds after local midnight, may be < 0 or > 24h */
};

struct tzrule {
	int32_t std_off, dst_off;       /* seconds east of UTC */
	int has_dst;
	struct tzwhen start, end;
};

struct tzone {
	int64_t *at;                    /* transition instants, ascending */
	int32_t *off;                   /* off[i]: UTC offset from at[i] on */
	size_t n;
	int32_t off0;                   /* offset before the first transition */
	int has_rule;                   /* rule applies from at[n-1] (or always if n == 0) */
	struct tzrule rule;
};

void tz_free(struct tzone *z)
{
	if (!z)
		return;
	free(z->at);
	free(z->off);
	free(z);
}

/* ---------------------------------------------------------------------------------------
 * POSIX TZ strings ("CET-1CEST,M3.5.0,M10.5.0/3")
 * ------------------------------------------------------------------------------------- */

static const char *rule_name(const char *s)
{
	const char *p = s;

	if (*s == '<') {
		const char *e = strchr(s, '>');
		return e && e > s + 1 ? e + 1 : NULL;
	}
	while (isalpha((unsigned char)*p))
		p++;
	return p - s >= 3 ? p : NULL;
}

/* [+-]h[h[h]][:mm[:ss]] into seconds; the sign is only allowed if signok. */
static const char *rule_hms(const char *s, int32_t *out, int signok, int maxh)
{
	int32_t v[3] = { 0, 0, 0 };
	int sign = 1;

	if (signok && (*s == '+' || *s == '-'))
		sign = *s++ == '-' ? -1 : 1;
	if (!isdigit((unsigned char)*s))
		return NULL;
	for (int i = 0; i < 3; i++) {
		int digits = 0;
		while (isdigit((unsigned char)*s) && digits < 3) {
			v[i] = v[i] * 10 + (*s++ - '0');
			digits++;
		}
		if (!digits || (i > 0 && v[i] > 59) || (i == 0 && v[i] > maxh))
			return NULL;
		if (*s != ':' || i == 2)
			break;
		s++;
	}
	*out = sign * (v[0] * 3600 + v[1] * 60 + v[2]);
	return s;
}

/* A bounded decimal number; *s advances. */
static int rule_num(const char **s, int lo, int hi, int *out)
{
	int v = 0, n = 0;

	while (isdigit((unsigned char)**s) && n < 4) {
		v = v * 10 + (*(*s)++ - '0');
		n++;
	}
	*out = v;
	return n > 0 && v >= lo && v <= hi ? 0 : -1;
}

static const char *rule_when(const char *s, struct tzwhen *w)
{
	memset(w, 0, sizeof *w);
	w->time = 7200;
	if (*s == 'M') {
		w->kind = 'M';
		s++;
		if (rule_num(&s, 1, 12, &w->m) < 0 || *s++ != '.' ||
		    rule_num(&s, 1, 5, &w->w) < 0 || *s++ != '.' ||
		    rule_num(&s, 0, 6, &w->d) < 0)
			return NULL;
	} else if (*s == 'J') {
		w->kind = 'J';
		s++;
		if (rule_num(&s, 1, 365, &w->n) < 0)
			return NULL;
	} else {
		w->kind = 'N';
		if (rule_num(&s, 0, 365, &w->n) < 0)
			return NULL;
	}
	if (*s == '/')
		s = rule_hms(s + 1, &w->time, 1, 167);
	return s;
}

static int rule_parse(const char *s, struct tzrule *r)
{
	int32_t posix;

	memset(r, 0, sizeof *r);
	if (!(s = rule_name(s)) || !(s = rule_hms(s, &posix, 1, 24)))
		return -1;
	r->std_off = -posix;
	if (!*s)
		return 0;
	if (!(s = rule_name(s)))
		return -1;
	r->has_dst = 1;
	r->dst_off = r->std_off + 3600;
	if (*s && *s != ',') {
		if (!(s = rule_hms(s, &posix, 1, 24)))
			return -1;
		r->dst_off = -posix;
	}
	if (!*s) {                      /* no rule given: the US rule, as glibc assumes */
		r->start = (struct tzwhen){ 'M', 0, 3, 2, 0, 7200 };
		r->end = (struct tzwhen){ 'M', 0, 11, 1, 0, 7200 };
		return 0;
	}
	if (*s != ',' || !(s = rule_when(s + 1, &r->start)))
		return -1;
	if (*s != ',' || !(s = rule_when(s + 1, &r->end)))
		return -1;
	return *s ? -1 : 0;
}

/* The instant at which w happens in year y, given the offset in force before it. */
static int64_t rule_instant(const struct tzwhen *w, int64_t y, int32_t off_before)
{
	int64_t day;

	if (w->kind == 'J') {
		day = days_from_civil(y, 1, 1) + w->n - 1 + (is_leap(y) && w->n >= 60);
	} else if (w->kind == 'N') {
		day = days_from_civil(y, 1, 1) + w->n;
	} else {
		int64_t first = days_from_civil(y, w->m, 1);
		int d = (w->d - weekday(first) + 7) % 7 + 7 * (w->w - 1);
		while (d >= month_days(y, w->m))
			d -= 7;
		day = first + d;
	}
	return day * DAY_S + w->time - off_before;
}

/* ---------------------------------------------------------------------------------------
 * Offsets and transitions: the table, then the rule past it
 * ------------------------------------------------------------------------------------- */

static int in_rule(const struct tzone *z, int64_t u)
{
	return z->has_rule && (z->n == 0 || u >= z->at[z->n - 1]);
}

/* The rule's transitions of the years around u that come after the table, ascending. */
static int rule_cands(const struct tzone *z, int64_t u, int64_t at[6], int32_t off[6])
{
	const struct tzrule *r = &z->rule;
	int64_t y;
	int m, d, k = 0;

	if (!r->has_dst)
		return 0;
	civil_from_days(floordiv(u + r->std_off, DAY_S), &y, &m, &d);
	for (int64_t yy = y - 1; yy <= y + 1; yy++) {
		const int64_t t[2] = { rule_instant(&r->start, yy, r->std_off),
		                       rule_instant(&r->end, yy, r->dst_off) };
		const int32_t o[2] = { r->dst_off, r->std_off };
		for (int i = 0; i < 2; i++) {
			if (z->n && t[i] <= z->at[z->n - 1])
				continue;
			int j = k++;
			for (; j > 0 && at[j - 1] > t[i]; j--) {
				at[j] = at[j - 1];
				off[j] = off[j - 1];
			}
			at[j] = t[i];
			off[j] = o[i];
		}
	}
	return k;
}

/* Index of the last table transition <= u, or -1. */
static long table_idx(const struct tzone *z, int64_t u)
{
	size_t lo = 0, hi = z->n;       /* answer in [lo, hi) + 1 */

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (z->at[mid] <= u)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (long)lo - 1;
}

static int32_t tz_offset(const struct tzone *z, int64_t u)
{
	if (in_rule(z, u)) {
		int64_t at[6];
		int32_t off[6];
		int k = rule_cands(z, u, at, off);
		if (!z->rule.has_dst)
			return z->rule.std_off;
		for (int i = k - 1; i >= 0; i--)
			if (at[i] <= u)
				return off[i];
		return z->n ? z->off[z->n - 1] : z->rule.std_off;
	}
	long i = table_idx(z, u);
	return i < 0 ? z->off0 : z->off[i];
}

/* The last transition <= u. */
static int64_t tz_prev_trans(const struct tzone *z, int64_t u)
{
	if (in_rule(z, u)) {
		int64_t at[6];
		int32_t off[6];
		for (int i = rule_cands(z, u, at, off) - 1; i >= 0; i--)
			if (at[i] <= u)
				return at[i];
	}
	long i = table_idx(z, u);
	return i < 0 ? INT64_MIN : z->at[i];
}

/* The first transition > u. */
static int64_t tz_next_trans(const struct tzone *z, int64_t u)
{
	if (z->n && u < z->at[z->n - 1])
		return z->at[table_idx(z, u) + 1];
	if (z->has_rule) {
		int64_t at[6];
		int32_t off[6];
		int k = rule_cands(z, u, at, off);
		for (int i = 0; i < k; i++)
			if (at[i] > u)
				return at[i];
	}
	return INT64_MAX;
}

void tz_segment(const struct tzone *z, int64_t u, struct seg *g)
{
	g->s = tz_prev_trans(z, u);
	g->e = tz_next_trans(z, u);
	g->off = tz_offset(z, u);
	g->prev_off = g->s == INT64_MIN ? g->off : tz_offset(z, g->s - 1);
}

/* ---------------------------------------------------------------------------------------
 * TZif files (RFC 8536)
 * ------------------------------------------------------------------------------------- */

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int64_t be64(const unsigned char *p)
{
	return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

struct tzif_hdr {
	uint32_t isut, isstd, leap, time, type, chars;
};

static void tzif_header(const unsigned char *p, struct tzif_hdr *h)
{
	h->isut = be32(p + 20);
	h->isstd = be32(p + 24);
	h->leap = be32(p + 28);
	h->time = be32(p + 32);
	h->type = be32(p + 36);
	h->chars = be32(p + 40);
}

static size_t tzif_body_len(const struct tzif_hdr *h, size_t tsize)
{
	return h->time * tsize + h->time + h->type * 6 + h->chars + h->leap * (tsize + 4) +
	       h->isstd + h->isut;
}

static int tzif_parse(const unsigned char *buf, size_t len, struct tzone *z)
{
	const unsigned char *p = buf, *end = buf + len;
	struct tzif_hdr h;
	size_t tsize = 4;

	if (len < 44 || memcmp(buf, "TZif", 4) != 0)
		return -1;
	tzif_header(p, &h);
	if (h.time > 100000 || h.type > 256 || h.leap > 10000 || h.chars > 10000)
		return -1;
	if (buf[4] >= '2') {            /* skip the 32-bit block, use the 64-bit one */
		p += 44 + tzif_body_len(&h, 4);
		if (p + 44 > end || memcmp(p, "TZif", 4) != 0)
			return -1;
		tzif_header(p, &h);
		tsize = 8;
		if (h.time > 100000 || h.type > 256 || h.leap > 10000 || h.chars > 10000)
			return -1;
	}
	const unsigned char *times = p + 44, *idx = times + h.time * tsize, *types = idx + h.time;
	if (h.type == 0 || (size_t)(end - times) < tzif_body_len(&h, tsize))
		return -1;
	z->off0 = (int32_t)be32(types);
	z->n = h.time;
	z->at = malloc((h.time + 1) * sizeof *z->at);
	z->off = malloc((h.time + 1) * sizeof *z->off);
	if (!z->at || !z->off)
		return -1;
	for (size_t i = 0; i < h.time; i++) {
		z->at[i] = tsize == 8 ? be64(times + 8 * i) : (int32_t)be32(times + 4 * i);
		if (idx[i] >= h.type || (i && z->at[i] <= z->at[i - 1]))
			return -1;
		z->off[i] = (int32_t)be32(types + 6 * idx[i]);
	}
	if (tsize == 8) {               /* footer: "\n<POSIX TZ>\n" */
		const unsigned char *f = times + tzif_body_len(&h, tsize);
		if (f < end && *f == '\n') {
			const unsigned char *nl = memchr(f + 1, '\n', (size_t)(end - f - 1));
			if (nl && nl > f + 1 && nl - f < 256) {
				char s[256];
				memcpy(s, f + 1, (size_t)(nl - f - 1));
				s[nl - f - 1] = '\0';
				if (rule_parse(s, &z->rule) == 0)
					z->has_rule = 1;
			}
		}
	}
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * Loading a zone
 * ------------------------------------------------------------------------------------- */

struct tzone *tz_load_file(const char *path)
{
	FILE *fp = fopen(path, "rb");

	if (!fp)
		return NULL;
	unsigned char *buf = malloc(TZFILE_MAX);
	size_t len = buf ? fread(buf, 1, TZFILE_MAX, fp) : 0;
	fclose(fp);
	struct tzone *z = calloc(1, sizeof *z);
	if (!buf || !z || len == TZFILE_MAX || tzif_parse(buf, len, z) != 0) {
		free(buf);
		tz_free(z);
		return NULL;
	}
	free(buf);
	return z;
}

static struct tzone *tz_fixed(int32_t off)
{
	struct tzone *z = calloc(1, sizeof *z);

	if (z)
		z->off0 = off;
	return z;
}

static struct tzone *tz_from_rule(const char *s)
{
	struct tzone *z = calloc(1, sizeof *z);

	if (z && rule_parse(s, &z->rule) == 0) {
		z->has_rule = 1;
		z->off0 = z->rule.std_off;
		return z;
	}
	free(z);
	return NULL;
}

/* The process's local zone, as libc would read it: $TZ (a zone name, a file or a POSIX
 * string; empty = UTC), else /etc/localtime, else UTC. */
struct tzone *tz_local(void)
{
	const char *tz = getenv("TZ");
	struct tzone *z;
	char path[4096];

	if (!tz)
		return (z = tz_load_file("/etc/localtime")) ? z : tz_fixed(0);
	if (*tz == ':')
		tz++;
	if (!*tz)
		return tz_fixed(0);
	if (*tz == '/')
		return (z = tz_load_file(tz)) ? z : tz_fixed(0);
	if (!strstr(tz, "..") &&
	    snprintf(path, sizeof path, ZONEINFO "%s", tz) < (int)sizeof path &&
	    (z = tz_load_file(path)))
		return z;
	return (z = tz_from_rule(tz)) ? z : tz_fixed(0);
}

/* Fugit's zone name syntax: [A-Z][a-zA-Z0-9+-]+ then up to two /[A-Z][a-zA-Z0-9+-_]+ */
int tz_name_ok(const char *s)
{
	for (int part = 0; part < 3; part++) {
		if (!isupper((unsigned char)*s))
			return 0;
		const char *p = ++s;
		while (isalnum((unsigned char)*s) || *s == '+' || *s == '-' || (part && *s == '_'))
			s++;
		if (s == p)
			return 0;
		if (!*s)
			return 1;
		if (*s++ != '/')
			return 0;
	}
	return 0;
}
