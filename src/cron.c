/* SPDX-License-Identifier: MIT */
/* cron.c: cron expressions as cogworker (Fugit) reads them, and slot arithmetic.
 *
 * Syntax (doc/protocol.md §7.16, the subset of Fugit that cogworker entries may use):
 *
 *   [sec] min hour dom mon dow [Zone/Name]        or        @macro [Zone/Name]
 *
 * Each field is `*` or a comma list of `v`, `a-b`, `a-b/n`, `*` / `*\/n` (a `*` must
 * stand alone in its field); months take jan..dec, weekdays sun..sat (any case) and 0-7
 * (7 = sunday); day-of-month takes `L` (last day); day-of-week takes `dow#n`, n = 1..5.
 * A range whose start is after its end wraps (`22-2`, `fri-mon`) as in Fugit. Macros are
 * @yearly @annually @monthly @weekly @daily @midnight @hourly. Everything else Fugit (or
 * Quartz, or vixie) would accept — `a/n`, `&`, `%`, `#L`, negative days, hour 24, `@noon`,
 * `+01:00` zones, 3+ digit numbers — is rejected: a conf entry must never be evaluated
 * differently from cogworker, so what we cannot be sure of is an error, not a guess.
 *
 * Fugit details we reproduce on purpose (read off fugit 1.5.2's cron.rb, and checked by
 * comparing thousands of random expressions and instants with fugit 1.5.2 itself):
 *
 * - dom/dow OR rule: when both day fields are restricted, a day matches if either
 *   matches. "Restricted" is Fugit's notion: day-of-month `*` and `*\/1` are not
 *   restricted; day-of-week is restricted unless it is exactly `*` (so `*\/1` there means
 *   "every weekday", and ORed with a day-of-month it matches every day).
 * - Month/day compaction: when both months and day-of-month are restricted, months in
 *   which none of the listed days can exist are dropped (`31 2,3` keeps only March, which
 *   matters once the OR rule brings weekdays in), and if no month is left the expression
 *   is rejected (`0 0 30 2 *`).
 *
 * Time zones (tz.c) are resolved once, at parse time, into a private table, so evaluation
 * never touches libc's zone state: it is thread-safe and any number of zones coexist.
 *
 * Search. The UTC time line is cut into segments of constant UTC offset (between two
 * transitions). Inside one segment local wall time = instant + offset is a bijection, so
 * the search is done on the wall clock with plain calendar arithmetic, field by field
 * (month, day, hour, minute, second: each mismatch jumps to the next candidate of that
 * field), bounded by the segment's ends; if nothing matches, the neighbouring segment is
 * tried. The cost is a few dozen steps per month of calendar, never per second. The
 * search gives up after SEARCH_YEARS (401: the Gregorian calendar repeats every 400
 * years, so an expression that matches at all — even `0 0 * 2 fri#5`, about once in 28
 * years — is found) and returns -1. Only DST can make an accepted expression never
 * match (`30 2 * 3 sun#5 Europe/Berlin`: the fifth Sunday of March is always the spring
 * forward day); such a scan costs well under a millisecond.
 *
 * DST semantics:
 *
 * - Gap (spring forward): a wall time that does not exist does not match; the run is
 *   skipped that day, not moved. Same as Fugit.
 * - Repeat (fall back): a wall time that occurs twice matches only at its FIRST
 *   occurrence (the earlier instant, still in summer time), so a job pinned to a wall
 *   time runs exactly once: `30 2 * * *` runs once on the fall-back night. The exception
 *   is an expression whose hour field covers all 24 hours (`0 * * * *`, `*\/5 * * * *`,
 *   `* * * * * *`): its period is elapsed time, not a wall time, so it also runs in the
 *   repeated hour (02:00 CEST and 02:00 CET both run for `0 * * * *`) instead of pausing
 *   for an hour. This is the classic cron rule (vixie/cronie: fixed-time jobs are not
 *   re-run when the clock goes back, wildcard jobs run normally). Fugit's previous_time
 *   matches both occurrences; in a mixed fleet cogworker may therefore also fire the
 *   second one, but our slots are a subset of Fugit's, so we never fire a slot cogworker
 *   would not (the per-slot claim stays consistent).
 *
 * Slots are integer epoch seconds. cron_prev(now) is the latest match <= now - 1 (a match
 * exactly at now is stepped back, CR-8); cron_next(t) is the first match >= t + 1.
 */

#include "cron.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tz.h"

#define SEARCH_YEARS 401
#define SEARCH_SPAN ((int64_t)SEARCH_YEARS * 366 * DAY_S)
#define INSTANT_MAX ((int64_t)1 << 52) /* beyond any sane epoch; keeps arithmetic safe */
#define NONE INT64_MIN

/* ------------------------------------------------------------------------ */
/* Wall-clock times (the day arithmetic is in tz.h)                          */
/* ------------------------------------------------------------------------ */

/* A wall-clock time broken down. Wall times are "local epoch seconds": seconds since
 * 1970-01-01 00:00 on the zone's wall clock, i.e. instant + UTC offset. */
struct civ {
	int64_t y;
	int mon, day, hour, min, sec;
};

static void civ_from(int64_t w, struct civ *t)
{
	int64_t days = floordiv(w, DAY_S);
	int sod = (int)(w - days * DAY_S);
	civil_from_days(days, &t->y, &t->mon, &t->day);
	t->hour = sod / 3600;
	t->min = sod / 60 % 60;
	t->sec = sod % 60;
}

static int64_t civ_to(const struct civ *t)
{
	return days_from_civil(t->y, t->mon, t->day) * DAY_S + t->hour * 3600 + t->min * 60 +
	       t->sec;
}

/* ------------------------------------------------------------------------ */
/* Expressions                                                               */
/* ------------------------------------------------------------------------ */

struct cron {
	uint64_t sec, min;
	uint32_t hour, dom;               /* dom: bits 1..31 */
	uint16_t mon;                     /* bits 1..12 */
	uint8_t dow;                      /* bits 0..6, 0 = sunday */
	uint8_t nth[6];                   /* nth[k] bit d: weekday d#k */
	int dom_last;                     /* L */
	int dom_star, dow_star, mon_star; /* not restricted, in Fugit's sense */
	struct tzone *tz;
};

struct field {
	const char *name;
	int lo, hi, digits;
	const char *const *names; /* 3-letter names for values lo.., or NULL */
};

static const char *const MONTHS[] = { "jan", "feb", "mar", "apr", "may", "jun", "jul",
	                              "aug", "sep", "oct", "nov", "dec", NULL };
static const char *const DAYS[] = { "sun", "mon", "tue", "wed", "thu", "fri", "sat", NULL };

static const struct field F_SEC = { "second", 0, 59, 2, NULL };
static const struct field F_MIN = { "minute", 0, 59, 2, NULL };
static const struct field F_HOUR = { "hour", 0, 23, 2, NULL };
static const struct field F_DOM = { "day-of-month", 1, 31, 2, NULL };
static const struct field F_MON = { "month", 1, 12, 2, MONTHS };
static const struct field F_DOW = { "day-of-week", 0, 7, 1, DAYS };

/* Parse state of one field. */
struct fparse {
	const struct field *f;
	uint64_t mask;
	int star, last;
	uint8_t nth[6];
	char *err;
	size_t errlen;
};

static int fail(char *err, size_t errlen, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

#define FAIL(fp, ...) fail((fp)->err, (fp)->errlen, __VA_ARGS__)

/* A number (at most f->digits digits) or a name; *s advances. */
static int parse_value(struct fparse *fp, const char **s, int *out)
{
	const struct field *f = fp->f;
	const char *p = *s;
	if (isdigit((unsigned char)*p)) {
		int v = 0, n = 0;
		for (; isdigit((unsigned char)*p); p++, n++)
			if (n < f->digits)      /* past that it is refused: no overflow on the way */
				v = v * 10 + (*p - '0');
		if (n > f->digits)
			return FAIL(fp, "bad %s '%.*s': at most %d digits", f->name, (int)(p - *s),
			            *s, f->digits);
		if (v < f->lo || v > f->hi)
			return FAIL(fp, "%s '%.*s' out of range (%d-%d)", f->name, (int)(p - *s),
			            *s, f->lo, f->hi);
		*s = p, *out = v;
		return 0;
	}
	for (int i = 0; f->names && f->names[i]; i++) {
		if (strncasecmp(p, f->names[i], 3) == 0 && !isalpha((unsigned char)p[3])) {
			*s = p + 3, *out = f->lo + i;
			return 0;
		}
	}
	return FAIL(fp, "bad %s '%s'", f->name, *s);
}

static int parse_step(struct fparse *fp, const char **s, int *step)
{
	const char *p = *s;
	int v = 0, n = 0;
	if (*p != '/') {
		*step = 1;
		return 0;
	}
	for (p++; isdigit((unsigned char)*p); p++, n++)
		if (n < 2)
			v = v * 10 + (*p - '0');
	if (n == 0 || n > 2 || v == 0)
		return FAIL(fp, "bad step '%s' in %s (1-99)", *s, fp->f->name);
	*s = p, *step = v;
	return 0;
}

/* Every step-th value walking from a to b, wrapping past hi to lo (Fugit's ranges). */
static void add_range(struct fparse *fp, int a, int b, int step)
{
	for (int v = a, i = 0;; i++) {
		if (i % step == 0)
			fp->mask |= (uint64_t)1 << v;
		if (v == b)
			break;
		v = v == fp->f->hi ? fp->f->lo : v + 1;
	}
}

static int parse_elem(struct fparse *fp, const char *e, int alone)
{
	const struct field *f = fp->f;
	const char *s = e;
	int a, b, step;
	if (*s == '*') {
		s++;
		if (parse_step(fp, &s, &step) < 0)
			return -1;
		if (*s)
			return FAIL(fp, "bad %s '%s'", f->name, e);
		if (!alone)
			return FAIL(fp, "'*' must stand alone in the %s field", f->name);
		/* Fugit: `*` (and `*\/1` except in day-of-week) leaves the field unrestricted;
		 * day-of-week steps walk 0..6. */
		fp->star = step == 1 && (f != &F_DOW || e[1] == '\0');
		add_range(fp, f->lo, f == &F_DOW ? 6 : f->hi, step);
		return 0;
	}
	if (f == &F_DOM && (*s == 'L' || *s == 'l') && s[1] == '\0') {
		fp->last = 1;
		return 0;
	}
	if (parse_value(fp, &s, &a) < 0)
		return -1;
	if (*s == '#' && f == &F_DOW) {
		if (s[1] < '1' || s[1] > '5' || s[2])
			return FAIL(fp, "bad '%s': only #1 to #5 are supported", e);
		int n = s[1] - '0', d = a % 7;
		for (int k = 1; k <= 5; k++)
			if (k != n && fp->nth[k] >> d & 1)
				return FAIL(fp, "bad '%s': only one #n per weekday is supported",
				            e);
		fp->nth[n] |= (uint8_t)(1 << d);
		return 0;
	}
	b = a;
	if (*s == '-') {
		s++;
		if (parse_value(fp, &s, &b) < 0)
			return -1;
		if (parse_step(fp, &s, &step) < 0)
			return -1;
	} else if (*s == '/') {
		return FAIL(fp, "bad %s '%s': a step needs '*' or a range (a-b/n)", f->name, e);
	} else {
		step = 1;
	}
	if (*s)
		return FAIL(fp, "bad %s '%s'", f->name, e);
	if (f == &F_DOW && a > b && step > 1)
		return FAIL(fp, "bad %s '%s': a wrapping weekday range cannot have a step", f->name,
		            e);
	add_range(fp, a, b, step);
	return 0;
}

static int parse_field(struct fparse *fp, const char *tok)
{
	char buf[256];
	size_t len = strlen(tok);
	if (len >= sizeof(buf))
		return FAIL(fp, "%s field too long", fp->f->name);
	memcpy(buf, tok, len + 1);
	int alone = strchr(buf, ',') == NULL;
	for (char *e = buf, *next; e; e = next) {
		if ((next = strchr(e, ',')) != NULL)
			*next++ = '\0';
		if (!*e)
			return FAIL(fp, "empty list element in %s field '%s'", fp->f->name, tok);
		if (parse_elem(fp, e, alone) < 0)
			return -1;
	}
	if (fp->f == &F_DOW && (fp->mask >> 7 & 1))
		fp->mask = (fp->mask & 0x7f) | 1; /* 7 = sunday */
	return 0;
}

/* Fugit's compact_month_days: drop the months where none of the listed days exist. */
static int compact_month_days(struct cron *c, char *err, size_t errlen)
{
	static const int maxdays[13] = { 0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	uint16_t mon = 0;
	uint32_t dom = 0;
	if (c->mon_star || c->dom_star)
		return 0;
	for (int m = 1; m <= 12; m++) {
		if (!(c->mon >> m & 1))
			continue;
		uint32_t fits = c->dom & (uint32_t)((2ULL << maxdays[m]) - 1);
		if (fits || c->dom_last)
			mon |= (uint16_t)(1 << m);
		dom |= fits;
	}
	if (!mon)
		return fail(err, errlen, "day-of-month never occurs in the selected months");
	c->mon = mon, c->dom = dom;
	return 0;
}

static const struct {
	const char *name, *expr;
} MACROS[] = {
	{ "@yearly", "0 0 1 1 *" }, { "@annually", "0 0 1 1 *" }, { "@monthly", "0 0 1 * *" },
	{ "@weekly", "0 0 * * 0" }, { "@daily", "0 0 * * *" },    { "@midnight", "0 0 * * *" },
	{ "@hourly", "0 * * * *" },
};

#define MAXTOK 8

static int split(char *s, char **tok)
{
	char *save = NULL;
	int n = 0;
	for (char *p = strtok_r(s, " \t", &save); p; p = strtok_r(NULL, " \t", &save)) {
		if (n == MAXTOK)
			return MAXTOK + 1;
		tok[n++] = p;
	}
	return n;
}

/* Does tok parse as a day-of-week field? (decides "6 fields" vs "5 fields + zone") */
static int is_dow_field(const char *tok)
{
	struct fparse fp = { .f = &F_DOW };
	return parse_field(&fp, tok) == 0;
}

static int parse_fields(struct cron *c, char **tok, int ntok, char *err, size_t errlen)
{
	static const struct field *const F[6] = { &F_SEC, &F_MIN, &F_HOUR, &F_DOM, &F_MON, &F_DOW };
	struct fparse fp[6] = { 0 };
	int first = ntok == 6 ? 0 : 1;
	if (ntok == 5)
		c->sec = 1; /* second 0 */
	for (int i = first; i < 6; i++) {
		fp[i] = (struct fparse){ .f = F[i], .err = err, .errlen = errlen };
		if (parse_field(&fp[i], tok[i - first]) < 0)
			return -1;
	}
	if (first == 0)
		c->sec = fp[0].mask;
	c->min = fp[1].mask, c->hour = (uint32_t)fp[2].mask;
	c->dom = (uint32_t)fp[3].mask, c->dom_last = fp[3].last, c->dom_star = fp[3].star;
	c->mon = (uint16_t)fp[4].mask, c->mon_star = fp[4].star;
	c->dow = (uint8_t)fp[5].mask, c->dow_star = fp[5].star;
	memcpy(c->nth, fp[5].nth, sizeof(c->nth));
	return compact_month_days(c, err, errlen);
}

static int parse_zone(struct cron *c, const char *name, char *err, size_t errlen)
{
	char path[512];
	if (!name) {
		c->tz = tz_local();
		return c->tz ? 0 : fail(err, errlen, "out of memory");
	}
	if (!tz_name_ok(name) || strlen(name) > 200)
		return fail(err, errlen, "bad time zone name '%s'", name);
	snprintf(path, sizeof(path), ZONEINFO "%s", name);
	if (!(c->tz = tz_load_file(path)))
		return fail(err, errlen, "unknown time zone '%s'", name);
	return 0;
}

/* Expands a macro in place: tok[0..n) becomes its five fields, the zone kept. */
static int expand_macro(char **tok, int *n, char *mbuf, size_t mlen, char **zone, char *err,
                        size_t errlen)
{
	size_t i, nm = sizeof(MACROS) / sizeof(MACROS[0]);
	for (i = 0; i < nm && strcmp(tok[0], MACROS[i].name) != 0; i++)
		;
	if (i == nm)
		return fail(err, errlen, "unknown cron macro '%s'", tok[0]);
	if (*n > 2)
		return fail(err, errlen, "unexpected '%s' after %s", tok[2], tok[0]);
	*zone = *n == 2 ? tok[1] : NULL;
	snprintf(mbuf, mlen, "%s", MACROS[i].expr);
	*n = split(mbuf, tok);
	return 0;
}

struct cron *cron_parse(const char *expr, char *err, size_t errlen)
{
	/* cppcheck-suppress variableScope ; after a macro expands, tok[] points into mbuf */
	char buf[512], mbuf[32], *tok[MAXTOK + 1], *zone = NULL;
	struct cron *c;
	int n;
	if (err && errlen)
		err[0] = '\0';
	if (!expr || strlen(expr) >= sizeof(buf)) {
		fail(err, errlen, "cron expression missing or too long");
		return NULL;
	}
	memcpy(buf, expr, strlen(expr) + 1);
	n = split(buf, tok);
	if (n >= 1 && tok[0][0] == '@') {
		if (expand_macro(tok, &n, mbuf, sizeof(mbuf), &zone, err, errlen) < 0)
			return NULL;
	} else if (n == 7 || (n == 6 && !is_dow_field(tok[5]))) {
		zone = tok[--n];
	}
	if (n != 5 && n != 6) {
		fail(err, errlen, "expected 5 or 6 fields and an optional time zone, got '%s'",
		     expr);
		return NULL;
	}
	if (!(c = calloc(1, sizeof(*c)))) {
		fail(err, errlen, "out of memory");
		return NULL;
	}
	if (parse_fields(c, tok, n, err, errlen) < 0 || parse_zone(c, zone, err, errlen) < 0) {
		cron_free(c);
		return NULL;
	}
	return c;
}

void cron_free(struct cron *c)
{
	if (!c)
		return;
	tz_free(c->tz);
	free(c);
}

/* ------------------------------------------------------------------------ */
/* Matching and searching on the wall clock                                  */
/* ------------------------------------------------------------------------ */

static int bit_next(uint64_t mask, int from, int max)
{ /* smallest set bit in [from, max] */
	if (from > max || from > 63)
		return -1;
	uint64_t m = mask & (~0ULL << from);
	if (!m)
		return -1;
	int v = __builtin_ctzll(m);
	return v <= max ? v : -1;
}

static int bit_prev(uint64_t mask, int from)
{ /* largest set bit in [0, from] */
	if (from < 0)
		return -1;
	uint64_t m = from >= 63 ? mask : mask & ((2ULL << from) - 1);
	return m ? 63 - __builtin_clzll(m) : -1;
}

static int day_ok(const struct cron *c, const struct civ *t)
{
	int dom_ok = (c->dom >> t->day & 1) || (c->dom_last && t->day == month_days(t->y, t->mon));
	if (c->dow_star)
		return c->dom_star || dom_ok;
	int wd = weekday(days_from_civil(t->y, t->mon, t->day));
	int dow_ok = (c->dow >> wd & 1) || (c->nth[(t->day - 1) / 7 + 1] >> wd & 1);
	return c->dom_star ? dow_ok : dom_ok || dow_ok;
}

/* Forward moves: to the first second of the next month/day/hour/minute. */
static void day_fwd(struct civ *t)
{
	if (++t->day > month_days(t->y, t->mon)) {
		t->day = 1;
		if (++t->mon > 12)
			t->mon = 1, t->y++;
	}
	t->hour = t->min = t->sec = 0;
}

static void hour_fwd(struct civ *t)
{
	if (++t->hour == 24)
		day_fwd(t);
	else
		t->min = t->sec = 0;
}

static void min_fwd(struct civ *t)
{
	if (++t->min == 60)
		hour_fwd(t);
	else
		t->sec = 0;
}

static void month_fwd(const struct cron *c, struct civ *t)
{
	int m = bit_next(c->mon, t->mon + 1, 12);
	if (m < 0)
		t->y++, m = bit_next(c->mon, 1, 12);
	t->mon = m, t->day = 1;
	t->hour = t->min = t->sec = 0;
}

/* Backward moves: to the last second of the previous month/day/hour/minute. */
static void day_back(struct civ *t)
{
	if (--t->day == 0) {
		if (--t->mon == 0)
			t->mon = 12, t->y--;
		t->day = month_days(t->y, t->mon);
	}
	t->hour = 23, t->min = t->sec = 59;
}

static void hour_back(struct civ *t)
{
	if (--t->hour < 0)
		day_back(t);
	else
		t->min = t->sec = 59;
}

static void min_back(struct civ *t)
{
	if (--t->min < 0)
		hour_back(t);
	else
		t->sec = 59;
}

static void month_back(const struct cron *c, struct civ *t)
{
	int m = bit_prev(c->mon, t->mon - 1);
	if (m < 1)
		t->y--, m = bit_prev(c->mon, 12);
	t->mon = m, t->day = month_days(t->y, m);
	t->hour = 23, t->min = t->sec = 59;
}

/* The first matching wall time in [w, wmax], or NONE. Each step jumps to the next
 * candidate of the first field that does not match, so time only moves forward. */
static int64_t civil_next(const struct cron *c, int64_t w, int64_t wmax)
{
	struct civ t;
	int v;
	civ_from(w, &t);
	for (;;) {
		int64_t x = civ_to(&t);
		if (x > wmax)
			return NONE;
		if (!(c->mon >> t.mon & 1)) {
			month_fwd(c, &t);
		} else if (!day_ok(c, &t)) {
			day_fwd(&t);
		} else if (!(c->hour >> t.hour & 1)) {
			if ((v = bit_next(c->hour, t.hour + 1, 23)) < 0)
				day_fwd(&t);
			else
				t.hour = v, t.min = t.sec = 0;
		} else if (!(c->min >> t.min & 1)) {
			if ((v = bit_next(c->min, t.min + 1, 59)) < 0)
				hour_fwd(&t);
			else
				t.min = v, t.sec = 0;
		} else if (!(c->sec >> t.sec & 1)) {
			if ((v = bit_next(c->sec, t.sec + 1, 59)) < 0)
				min_fwd(&t);
			else
				t.sec = v;
		} else {
			return x;
		}
	}
}

/* The last matching wall time in [wmin, w], or NONE: civil_next mirrored. */
static int64_t civil_prev(const struct cron *c, int64_t w, int64_t wmin)
{
	struct civ t;
	int v;
	civ_from(w, &t);
	for (;;) {
		int64_t x = civ_to(&t);
		if (x < wmin)
			return NONE;
		if (!(c->mon >> t.mon & 1)) {
			month_back(c, &t);
		} else if (!day_ok(c, &t)) {
			day_back(&t);
		} else if (!(c->hour >> t.hour & 1)) {
			if ((v = bit_prev(c->hour, t.hour - 1)) < 0)
				day_back(&t);
			else
				t.hour = v, t.min = t.sec = 59;
		} else if (!(c->min >> t.min & 1)) {
			if ((v = bit_prev(c->min, t.min - 1)) < 0)
				hour_back(&t);
			else
				t.min = v, t.sec = 59;
		} else if (!(c->sec >> t.sec & 1)) {
			if ((v = bit_prev(c->sec, t.sec - 1)) < 0)
				min_back(&t);
			else
				t.sec = v;
		} else {
			return x;
		}
	}
}

/* Instants [g->s, result) of a segment that repeat wall times of the previous segment
 * (fall back) and so never match, unless the expression runs every hour (see top). */
static int64_t repeat_end(const struct cron *c, const struct seg *g)
{
	if (c->hour == 0xffffff || g->s == INT64_MIN || g->prev_off <= g->off)
		return g->s;
	int64_t r = g->s + (g->prev_off - g->off);
	return r < g->e ? r : g->e;
}

int64_t cron_prev(const struct cron *c, int64_t now)
{
	if (!c || now > INSTANT_MAX || now < -INSTANT_MAX)
		return -1;
	int64_t u = now - 1, lo = now - SEARCH_SPAN;
	while (u >= lo) {
		struct seg g;
		tz_segment(c->tz, u, &g);
		int64_t a = repeat_end(c, &g);
		if (a < lo)
			a = lo;
		if (u >= a) {
			int64_t x = civil_prev(c, u + g.off, a + g.off);
			if (x != NONE)
				return x - g.off;
		}
		if (g.s == INT64_MIN)
			break;
		u = g.s - 1;
	}
	return -1;
}

int64_t cron_next(const struct cron *c, int64_t t)
{
	if (!c || t > INSTANT_MAX || t < -INSTANT_MAX)
		return -1;
	int64_t u = t + 1, hi = t + SEARCH_SPAN;
	while (u <= hi) {
		struct seg g;
		tz_segment(c->tz, u, &g);
		int64_t r = repeat_end(c, &g), b = g.e - 1 < hi ? g.e - 1 : hi;
		if (u < r)
			u = r;
		if (u <= b) {
			int64_t x = civil_next(c, u + g.off, b + g.off);
			if (x != NONE)
				return x - g.off;
		}
		if (g.e == INT64_MAX)
			break;
		u = g.e;
	}
	return -1;
}
