/* cron.c: cron expressions as cogworker (Fugit) reads them, and slot arithmetic.
 *
 * Syntax (PROTOCOL.md §7.16, the subset of Fugit that cogworker entries may use):
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
 * Time zones. The zone is resolved once, at parse time, into a private table: the
 * transitions of the TZif file (/usr/share/zoneinfo/<name>, or /etc/localtime, or the
 * file or POSIX string in $TZ for the process's local zone), plus the POSIX TZ footer
 * rule that the file carries for instants past its table. Evaluation never touches
 * libc's zone state (no setenv/tzset/localtime), so it is thread-safe and any number of
 * zones coexist. Leap-second records ("right/" zones) are ignored: epochs are POSIX.
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

#define DAY_S 86400
#define SEARCH_YEARS 401
#define SEARCH_SPAN ((int64_t)SEARCH_YEARS * 366 * DAY_S)
#define INSTANT_MAX ((int64_t)1 << 52)    /* beyond any sane epoch; keeps arithmetic safe */
#define NONE INT64_MIN
#define ZONEINFO "/usr/share/zoneinfo/"
#define TZFILE_MAX (4 << 20)

/* ------------------------------------------------------------------------ */
/* Calendar arithmetic (proleptic Gregorian, days since 1970-01-01)          */
/* ------------------------------------------------------------------------ */

static int64_t floordiv(int64_t a, int64_t b) {
	int64_t q = a / b;
	if ((a % b) != 0 && ((a < 0) != (b < 0))) q--;
	return q;
}

static int is_leap(int64_t y) {
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int month_days(int64_t y, int m) {
	static const int md[13] = {0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	return m == 2 && is_leap(y) ? 29 : md[m];
}

/* H. Hinnant's days_from_civil / civil_from_days. */
static int64_t days_from_civil(int64_t y, int m, int d) {
	y -= m <= 2;
	int64_t era = floordiv(y, 400);
	int64_t yoe = y - era * 400;
	int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d) {
	z += 719468;
	int64_t era = floordiv(z, 146097);
	int64_t doe = z - era * 146097;
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	int64_t mp = (5 * doy + 2) / 153;
	*d = (int)(doy - (153 * mp + 2) / 5 + 1);
	*m = (int)(mp < 10 ? mp + 3 : mp - 9);
	*y = yoe + era * 400 + (*m <= 2);
}

static int weekday(int64_t days) {    /* 0 = sunday; 1970-01-01 was a thursday */
	return (int)(floordiv(days + 4, 7) * -7 + days + 4);
}

/* A wall-clock time broken down. Wall times are "local epoch seconds": seconds since
 * 1970-01-01 00:00 on the zone's wall clock, i.e. instant + UTC offset. */
struct civ {
	int64_t y;
	int mon, day, hour, min, sec;
};

static void civ_from(int64_t w, struct civ *t) {
	int64_t days = floordiv(w, DAY_S);
	int sod = (int)(w - days * DAY_S);
	civil_from_days(days, &t->y, &t->mon, &t->day);
	t->hour = sod / 3600;
	t->min = sod / 60 % 60;
	t->sec = sod % 60;
}

static int64_t civ_to(const struct civ *t) {
	return days_from_civil(t->y, t->mon, t->day) * DAY_S + t->hour * 3600 + t->min * 60 + t->sec;
}

/* ------------------------------------------------------------------------ */
/* Time zones: TZif table + POSIX TZ rule                                     */
/* ------------------------------------------------------------------------ */

/* One end of a DST period in a POSIX TZ rule: Jn, n or Mm.w.d, plus a local time. */
struct tzwhen {
	char kind;                /* 'J', 'N' or 'M' */
	int n, m, w, d;
	int32_t time;             /* seconds after local midnight, may be < 0 or > 24h */
};

struct tzrule {
	int32_t std_off, dst_off; /* seconds east of UTC */
	int has_dst;
	struct tzwhen start, end;
};

struct tzone {
	int64_t *at;              /* transition instants, ascending */
	int32_t *off;             /* off[i]: UTC offset from at[i] on */
	size_t n;
	int32_t off0;             /* offset before the first transition */
	int has_rule;             /* rule applies from at[n-1] (or always if n == 0) */
	struct tzrule rule;
};

/* A stretch of the time line with one UTC offset: instants [s, e). */
struct seg {
	int64_t s, e;
	int32_t off, prev_off;
};

static void tz_free(struct tzone *z) {
	if (!z) return;
	free(z->at);
	free(z->off);
	free(z);
}

/* --- POSIX TZ strings ("CET-1CEST,M3.5.0,M10.5.0/3") --- */

static const char *rule_name(const char *s) {
	if (*s == '<') {
		const char *e = strchr(s, '>');
		return e && e > s + 1 ? e + 1 : NULL;
	}
	const char *p = s;
	while (isalpha((unsigned char)*p)) p++;
	return p - s >= 3 ? p : NULL;
}

/* [+-]h[h[h]][:mm[:ss]] into seconds; the sign is only allowed if signok. */
static const char *rule_hms(const char *s, int32_t *out, int signok, int maxh) {
	int sign = 1;
	if (signok && (*s == '+' || *s == '-')) sign = *s++ == '-' ? -1 : 1;
	if (!isdigit((unsigned char)*s)) return NULL;
	int32_t v[3] = {0, 0, 0};
	for (int i = 0; i < 3; i++) {
		int digits = 0;
		while (isdigit((unsigned char)*s) && digits < 3) v[i] = v[i] * 10 + (*s++ - '0'), digits++;
		if (!digits || (i > 0 && v[i] > 59) || (i == 0 && v[i] > maxh)) return NULL;
		if (*s != ':' || i == 2) break;
		s++;
	}
	*out = sign * (v[0] * 3600 + v[1] * 60 + v[2]);
	return s;
}

/* A bounded decimal number; *s advances. */
static int rule_num(const char **s, int lo, int hi, int *out) {
	int v = 0, n = 0;
	while (isdigit((unsigned char)**s) && n < 4) v = v * 10 + (*(*s)++ - '0'), n++;
	*out = v;
	return n > 0 && v >= lo && v <= hi ? 0 : -1;
}

static const char *rule_when(const char *s, struct tzwhen *w) {
	memset(w, 0, sizeof(*w));
	w->time = 7200;
	if (*s == 'M') {
		w->kind = 'M';
		s++;
		if (rule_num(&s, 1, 12, &w->m) < 0 || *s++ != '.' || rule_num(&s, 1, 5, &w->w) < 0 ||
		    *s++ != '.' || rule_num(&s, 0, 6, &w->d) < 0)
			return NULL;
	} else if (*s == 'J') {
		w->kind = 'J';
		s++;
		if (rule_num(&s, 1, 365, &w->n) < 0) return NULL;
	} else {
		w->kind = 'N';
		if (rule_num(&s, 0, 365, &w->n) < 0) return NULL;
	}
	if (*s == '/') s = rule_hms(s + 1, &w->time, 1, 167);
	return s;
}

static int rule_parse(const char *s, struct tzrule *r) {
	int32_t posix;
	memset(r, 0, sizeof(*r));
	if (!(s = rule_name(s)) || !(s = rule_hms(s, &posix, 1, 24))) return -1;
	r->std_off = -posix;
	if (!*s) return 0;
	if (!(s = rule_name(s))) return -1;
	r->has_dst = 1;
	r->dst_off = r->std_off + 3600;
	if (*s && *s != ',') {
		if (!(s = rule_hms(s, &posix, 1, 24))) return -1;
		r->dst_off = -posix;
	}
	if (!*s) {    /* no rule given: the US rule, as glibc assumes */
		r->start = (struct tzwhen){'M', 0, 3, 2, 0, 7200};
		r->end = (struct tzwhen){'M', 0, 11, 1, 0, 7200};
		return 0;
	}
	if (*s != ',' || !(s = rule_when(s + 1, &r->start))) return -1;
	if (*s != ',' || !(s = rule_when(s + 1, &r->end))) return -1;
	return *s ? -1 : 0;
}

/* The instant at which w happens in year y, given the offset in force before it. */
static int64_t rule_instant(const struct tzwhen *w, int64_t y, int32_t off_before) {
	int64_t day;
	if (w->kind == 'J') {
		day = days_from_civil(y, 1, 1) + w->n - 1 + (is_leap(y) && w->n >= 60);
	} else if (w->kind == 'N') {
		day = days_from_civil(y, 1, 1) + w->n;
	} else {
		int64_t first = days_from_civil(y, w->m, 1);
		int d = (w->d - weekday(first) + 7) % 7 + 7 * (w->w - 1);
		while (d >= month_days(y, w->m)) d -= 7;
		day = first + d;
	}
	return day * DAY_S + w->time - off_before;
}

static int in_rule(const struct tzone *z, int64_t u) {
	return z->has_rule && (z->n == 0 || u >= z->at[z->n - 1]);
}

/* The rule's transitions of the years around u that come after the table, ascending. */
static int rule_cands(const struct tzone *z, int64_t u, int64_t at[6], int32_t off[6]) {
	const struct tzrule *r = &z->rule;
	int64_t y;
	int m, d, k = 0;
	if (!r->has_dst) return 0;
	civil_from_days(floordiv(u + r->std_off, DAY_S), &y, &m, &d);
	for (int64_t yy = y - 1; yy <= y + 1; yy++) {
		int64_t t[2] = {rule_instant(&r->start, yy, r->std_off), rule_instant(&r->end, yy, r->dst_off)};
		int32_t o[2] = {r->dst_off, r->std_off};
		for (int i = 0; i < 2; i++) {
			if (z->n && t[i] <= z->at[z->n - 1]) continue;
			int j = k++;
			for (; j > 0 && at[j - 1] > t[i]; j--) at[j] = at[j - 1], off[j] = off[j - 1];
			at[j] = t[i], off[j] = o[i];
		}
	}
	return k;
}

/* Index of the last table transition <= u, or -1. */
static long table_idx(const struct tzone *z, int64_t u) {
	size_t lo = 0, hi = z->n;    /* answer in [lo, hi) + 1 */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (z->at[mid] <= u) lo = mid + 1;
		else hi = mid;
	}
	return (long)lo - 1;
}

static int32_t tz_offset(const struct tzone *z, int64_t u) {
	if (in_rule(z, u)) {
		int64_t at[6];
		int32_t off[6];
		int k = rule_cands(z, u, at, off);
		if (!z->rule.has_dst) return z->rule.std_off;
		for (int i = k - 1; i >= 0; i--)
			if (at[i] <= u) return off[i];
		return z->n ? z->off[z->n - 1] : z->rule.std_off;
	}
	long i = table_idx(z, u);
	return i < 0 ? z->off0 : z->off[i];
}

static int64_t tz_prev_trans(const struct tzone *z, int64_t u) {    /* last transition <= u */
	if (in_rule(z, u)) {
		int64_t at[6];
		int32_t off[6];
		for (int i = rule_cands(z, u, at, off) - 1; i >= 0; i--)
			if (at[i] <= u) return at[i];
	}
	long i = table_idx(z, u);
	return i < 0 ? INT64_MIN : z->at[i];
}

static int64_t tz_next_trans(const struct tzone *z, int64_t u) {    /* first transition > u */
	if (z->n && u < z->at[z->n - 1]) return z->at[table_idx(z, u) + 1];
	if (z->has_rule) {
		int64_t at[6];
		int32_t off[6];
		int k = rule_cands(z, u, at, off);
		for (int i = 0; i < k; i++)
			if (at[i] > u) return at[i];
	}
	return INT64_MAX;
}

static void tz_segment(const struct tzone *z, int64_t u, struct seg *g) {
	g->s = tz_prev_trans(z, u);
	g->e = tz_next_trans(z, u);
	g->off = tz_offset(z, u);
	g->prev_off = g->s == INT64_MIN ? g->off : tz_offset(z, g->s - 1);
}

/* --- TZif files (RFC 8536) --- */

static uint32_t be32(const unsigned char *p) {
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int64_t be64(const unsigned char *p) {
	return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

struct tzif_hdr {
	uint32_t isut, isstd, leap, time, type, chars;
};

static void tzif_header(const unsigned char *p, struct tzif_hdr *h) {
	h->isut = be32(p + 20), h->isstd = be32(p + 24), h->leap = be32(p + 28);
	h->time = be32(p + 32), h->type = be32(p + 36), h->chars = be32(p + 40);
}

static size_t tzif_body_len(const struct tzif_hdr *h, size_t tsize) {
	return h->time * tsize + h->time + h->type * 6 + h->chars + h->leap * (tsize + 4) + h->isstd + h->isut;
}

static int tzif_parse(const unsigned char *buf, size_t len, struct tzone *z) {
	struct tzif_hdr h;
	size_t tsize = 4;
	const unsigned char *p = buf, *end = buf + len;
	if (len < 44 || memcmp(buf, "TZif", 4) != 0) return -1;
	tzif_header(p, &h);
	if (h.time > 100000 || h.type > 256 || h.leap > 10000 || h.chars > 10000) return -1;
	if (buf[4] >= '2') {    /* skip the 32-bit block, use the 64-bit one */
		p += 44 + tzif_body_len(&h, 4);
		if (p + 44 > end || memcmp(p, "TZif", 4) != 0) return -1;
		tzif_header(p, &h);
		tsize = 8;
		if (h.time > 100000 || h.type > 256 || h.leap > 10000 || h.chars > 10000) return -1;
	}
	const unsigned char *times = p + 44, *idx = times + h.time * tsize, *types = idx + h.time;
	if (h.type == 0 || (size_t)(end - times) < tzif_body_len(&h, tsize)) return -1;
	z->off0 = (int32_t)be32(types);
	z->n = h.time;
	z->at = malloc((h.time + 1) * sizeof(*z->at));
	z->off = malloc((h.time + 1) * sizeof(*z->off));
	if (!z->at || !z->off) return -1;
	for (size_t i = 0; i < h.time; i++) {
		z->at[i] = tsize == 8 ? be64(times + 8 * i) : (int32_t)be32(times + 4 * i);
		if (idx[i] >= h.type || (i && z->at[i] <= z->at[i - 1])) return -1;
		z->off[i] = (int32_t)be32(types + 6 * idx[i]);
	}
	if (tsize == 8) {    /* footer: "\n<POSIX TZ>\n" */
		const unsigned char *f = times + tzif_body_len(&h, tsize);
		if (f < end && *f == '\n') {
			const unsigned char *nl = memchr(f + 1, '\n', (size_t)(end - f - 1));
			if (nl && nl > f + 1 && nl - f < 256) {
				char s[256];
				memcpy(s, f + 1, (size_t)(nl - f - 1));
				s[nl - f - 1] = '\0';
				if (rule_parse(s, &z->rule) == 0) z->has_rule = 1;
			}
		}
	}
	return 0;
}

static struct tzone *tz_load_file(const char *path) {
	FILE *fp = fopen(path, "rb");
	if (!fp) return NULL;
	unsigned char *buf = malloc(TZFILE_MAX);
	size_t len = buf ? fread(buf, 1, TZFILE_MAX, fp) : 0;
	fclose(fp);
	struct tzone *z = calloc(1, sizeof(*z));
	if (!buf || !z || len == TZFILE_MAX || tzif_parse(buf, len, z) != 0) {
		free(buf);
		tz_free(z);
		return NULL;
	}
	free(buf);
	return z;
}

static struct tzone *tz_fixed(int32_t off) {
	struct tzone *z = calloc(1, sizeof(*z));
	if (z) z->off0 = off;
	return z;
}

static struct tzone *tz_from_rule(const char *s) {
	struct tzone *z = calloc(1, sizeof(*z));
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
static struct tzone *tz_local(void) {
	const char *tz = getenv("TZ");
	struct tzone *z;
	char path[4096];
	if (!tz) return (z = tz_load_file("/etc/localtime")) ? z : tz_fixed(0);
	if (*tz == ':') tz++;
	if (!*tz) return tz_fixed(0);
	if (*tz == '/') return (z = tz_load_file(tz)) ? z : tz_fixed(0);
	if (!strstr(tz, "..") && snprintf(path, sizeof(path), ZONEINFO "%s", tz) < (int)sizeof(path) &&
	    (z = tz_load_file(path)))
		return z;
	return (z = tz_from_rule(tz)) ? z : tz_fixed(0);
}

/* Fugit's zone name syntax: [A-Z][a-zA-Z0-9+-]+ then up to two /[A-Z][a-zA-Z0-9+-_]+ */
static int tz_name_ok(const char *s) {
	for (int part = 0; part < 3; part++) {
		if (!isupper((unsigned char)*s)) return 0;
		const char *p = ++s;
		while (isalnum((unsigned char)*s) || *s == '+' || *s == '-' || (part && *s == '_')) s++;
		if (s == p) return 0;
		if (!*s) return 1;
		if (*s++ != '/') return 0;
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Expressions                                                               */
/* ------------------------------------------------------------------------ */

struct cron {
	uint64_t sec, min;
	uint32_t hour, dom;       /* dom: bits 1..31 */
	uint16_t mon;             /* bits 1..12 */
	uint8_t dow;              /* bits 0..6, 0 = sunday */
	uint8_t nth[6];           /* nth[k] bit d: weekday d#k */
	int dom_last;             /* L */
	int dom_star, dow_star, mon_star;    /* not restricted, in Fugit's sense */
	struct tzone *tz;
};

struct field {
	const char *name;
	int lo, hi, digits;
	const char *const *names; /* 3-letter names for values lo.., or NULL */
};

static const char *const MONTHS[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                     "jul", "aug", "sep", "oct", "nov", "dec", NULL};
static const char *const DAYS[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat", NULL};

static const struct field F_SEC = {"second", 0, 59, 2, NULL};
static const struct field F_MIN = {"minute", 0, 59, 2, NULL};
static const struct field F_HOUR = {"hour", 0, 23, 2, NULL};
static const struct field F_DOM = {"day-of-month", 1, 31, 2, NULL};
static const struct field F_MON = {"month", 1, 12, 2, MONTHS};
static const struct field F_DOW = {"day-of-week", 0, 7, 1, DAYS};

/* Parse state of one field. */
struct fparse {
	const struct field *f;
	uint64_t mask;
	int star, last;
	uint8_t nth[6];
	char *err;
	size_t errlen;
};

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...) {
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
static int parse_value(struct fparse *fp, const char **s, int *out) {
	const struct field *f = fp->f;
	const char *p = *s;
	if (isdigit((unsigned char)*p)) {
		int v = 0, n = 0;
		while (isdigit((unsigned char)*p)) v = v * 10 + (*p++ - '0'), n++;
		if (n > f->digits)
			return FAIL(fp, "bad %s '%.*s': at most %d digits", f->name, (int)(p - *s), *s, f->digits);
		if (v < f->lo || v > f->hi)
			return FAIL(fp, "%s '%.*s' out of range (%d-%d)", f->name, (int)(p - *s), *s, f->lo, f->hi);
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

static int parse_step(struct fparse *fp, const char **s, int *step) {
	const char *p = *s;
	int v = 0, n = 0;
	if (*p != '/') { *step = 1; return 0; }
	for (p++; isdigit((unsigned char)*p); p++) v = v * 10 + (*p - '0'), n++;
	if (n == 0 || n > 2 || v == 0) return FAIL(fp, "bad step '%s' in %s (1-99)", *s, fp->f->name);
	*s = p, *step = v;
	return 0;
}

/* Every step-th value walking from a to b, wrapping past hi to lo (Fugit's ranges). */
static void add_range(struct fparse *fp, int a, int b, int step) {
	for (int v = a, i = 0;; i++) {
		if (i % step == 0) fp->mask |= (uint64_t)1 << v;
		if (v == b) break;
		v = v == fp->f->hi ? fp->f->lo : v + 1;
	}
}

static int parse_elem(struct fparse *fp, const char *e, int alone) {
	const struct field *f = fp->f;
	const char *s = e;
	int a, b, step;
	if (*s == '*') {
		s++;
		if (parse_step(fp, &s, &step) < 0) return -1;
		if (*s) return FAIL(fp, "bad %s '%s'", f->name, e);
		if (!alone) return FAIL(fp, "'*' must stand alone in the %s field", f->name);
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
	if (parse_value(fp, &s, &a) < 0) return -1;
	if (*s == '#' && f == &F_DOW) {
		if (s[1] < '1' || s[1] > '5' || s[2]) return FAIL(fp, "bad '%s': only #1 to #5 are supported", e);
		int n = s[1] - '0', d = a % 7;
		for (int k = 1; k <= 5; k++)
			if (k != n && fp->nth[k] >> d & 1)
				return FAIL(fp, "bad '%s': only one #n per weekday is supported", e);
		fp->nth[n] |= (uint8_t)(1 << d);
		return 0;
	}
	b = a;
	if (*s == '-') {
		s++;
		if (parse_value(fp, &s, &b) < 0) return -1;
		if (parse_step(fp, &s, &step) < 0) return -1;
	} else if (*s == '/') {
		return FAIL(fp, "bad %s '%s': a step needs '*' or a range (a-b/n)", f->name, e);
	} else {
		step = 1;
	}
	if (*s) return FAIL(fp, "bad %s '%s'", f->name, e);
	if (f == &F_DOW && a > b && step > 1)
		return FAIL(fp, "bad %s '%s': a wrapping weekday range cannot have a step", f->name, e);
	add_range(fp, a, b, step);
	return 0;
}

static int parse_field(struct fparse *fp, const char *tok) {
	char buf[256];
	size_t len = strlen(tok);
	if (len >= sizeof(buf)) return FAIL(fp, "%s field too long", fp->f->name);
	memcpy(buf, tok, len + 1);
	int alone = strchr(buf, ',') == NULL;
	for (char *e = buf, *next; e; e = next) {
		if ((next = strchr(e, ',')) != NULL) *next++ = '\0';
		if (!*e) return FAIL(fp, "empty list element in %s field '%s'", fp->f->name, tok);
		if (parse_elem(fp, e, alone) < 0) return -1;
	}
	if (fp->f == &F_DOW && (fp->mask >> 7 & 1)) fp->mask = (fp->mask & 0x7f) | 1;    /* 7 = sunday */
	return 0;
}

/* Fugit's compact_month_days: drop the months where none of the listed days exist. */
static int compact_month_days(struct cron *c, char *err, size_t errlen) {
	static const int maxdays[13] = {0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	uint16_t mon = 0;
	uint32_t dom = 0;
	if (c->mon_star || c->dom_star) return 0;
	for (int m = 1; m <= 12; m++) {
		if (!(c->mon >> m & 1)) continue;
		uint32_t fits = c->dom & (uint32_t)((2ULL << maxdays[m]) - 1);
		if (fits || c->dom_last) mon |= (uint16_t)(1 << m);
		dom |= fits;
	}
	if (!mon) return fail(err, errlen, "day-of-month never occurs in the selected months");
	c->mon = mon, c->dom = dom;
	return 0;
}

static const struct {
	const char *name, *expr;
} MACROS[] = {
	{"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
	{"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},    {"@midnight", "0 0 * * *"},
	{"@hourly", "0 * * * *"},
};

#define MAXTOK 8

static int split(char *s, char **tok) {
	char *save = NULL;
	int n = 0;
	for (char *p = strtok_r(s, " \t", &save); p; p = strtok_r(NULL, " \t", &save)) {
		if (n == MAXTOK) return MAXTOK + 1;
		tok[n++] = p;
	}
	return n;
}

/* Does tok parse as a day-of-week field? (decides "6 fields" vs "5 fields + zone") */
static int is_dow_field(const char *tok) {
	struct fparse fp = {.f = &F_DOW};
	return parse_field(&fp, tok) == 0;
}

static int parse_fields(struct cron *c, char **tok, int ntok, char *err, size_t errlen) {
	static const struct field *const F[6] = {&F_SEC, &F_MIN, &F_HOUR, &F_DOM, &F_MON, &F_DOW};
	struct fparse fp[6];
	int first = ntok == 6 ? 0 : 1;
	if (ntok == 5) c->sec = 1;    /* second 0 */
	for (int i = first; i < 6; i++) {
		fp[i] = (struct fparse){.f = F[i], .err = err, .errlen = errlen};
		if (parse_field(&fp[i], tok[i - first]) < 0) return -1;
	}
	if (first == 0) c->sec = fp[0].mask;
	c->min = fp[1].mask, c->hour = (uint32_t)fp[2].mask;
	c->dom = (uint32_t)fp[3].mask, c->dom_last = fp[3].last, c->dom_star = fp[3].star;
	c->mon = (uint16_t)fp[4].mask, c->mon_star = fp[4].star;
	c->dow = (uint8_t)fp[5].mask, c->dow_star = fp[5].star;
	memcpy(c->nth, fp[5].nth, sizeof(c->nth));
	return compact_month_days(c, err, errlen);
}

static int parse_zone(struct cron *c, const char *name, char *err, size_t errlen) {
	char path[512];
	if (!name) {
		c->tz = tz_local();
		return c->tz ? 0 : fail(err, errlen, "out of memory");
	}
	if (!tz_name_ok(name) || strlen(name) > 200) return fail(err, errlen, "bad time zone name '%s'", name);
	snprintf(path, sizeof(path), ZONEINFO "%s", name);
	if (!(c->tz = tz_load_file(path))) return fail(err, errlen, "unknown time zone '%s'", name);
	return 0;
}

/* Expands a macro in place: tok[0..n) becomes its five fields, the zone kept. */
static int expand_macro(char **tok, int *n, char *mbuf, size_t mlen, char **zone, char *err, size_t errlen) {
	size_t i, nm = sizeof(MACROS) / sizeof(MACROS[0]);
	for (i = 0; i < nm && strcmp(tok[0], MACROS[i].name) != 0; i++);
	if (i == nm) return fail(err, errlen, "unknown cron macro '%s'", tok[0]);
	if (*n > 2) return fail(err, errlen, "unexpected '%s' after %s", tok[2], tok[0]);
	*zone = *n == 2 ? tok[1] : NULL;
	snprintf(mbuf, mlen, "%s", MACROS[i].expr);
	*n = split(mbuf, tok);
	return 0;
}

struct cron *cron_parse(const char *expr, char *err, size_t errlen) {
	char buf[512], mbuf[32], *tok[MAXTOK + 1], *zone = NULL;
	struct cron *c;
	int n;
	if (err && errlen) err[0] = '\0';
	if (!expr || strlen(expr) >= sizeof(buf)) {
		fail(err, errlen, "cron expression missing or too long");
		return NULL;
	}
	memcpy(buf, expr, strlen(expr) + 1);
	n = split(buf, tok);
	if (n >= 1 && tok[0][0] == '@') {
		if (expand_macro(tok, &n, mbuf, sizeof(mbuf), &zone, err, errlen) < 0) return NULL;
	} else if (n == 7 || (n == 6 && !is_dow_field(tok[5]))) {
		zone = tok[--n];
	}
	if (n != 5 && n != 6) {
		fail(err, errlen, "expected 5 or 6 fields and an optional time zone, got '%s'", expr);
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

void cron_free(struct cron *c) {
	if (!c) return;
	tz_free(c->tz);
	free(c);
}

/* ------------------------------------------------------------------------ */
/* Matching and searching on the wall clock                                  */
/* ------------------------------------------------------------------------ */

static int bit_next(uint64_t mask, int from, int max) {    /* smallest set bit in [from, max] */
	if (from > max || from > 63) return -1;
	uint64_t m = mask & (~0ULL << from);
	if (!m) return -1;
	int v = __builtin_ctzll(m);
	return v <= max ? v : -1;
}

static int bit_prev(uint64_t mask, int from) {    /* largest set bit in [0, from] */
	if (from < 0) return -1;
	uint64_t m = from >= 63 ? mask : mask & ((2ULL << from) - 1);
	return m ? 63 - __builtin_clzll(m) : -1;
}

static int day_ok(const struct cron *c, const struct civ *t) {
	int dom_ok = (c->dom >> t->day & 1) || (c->dom_last && t->day == month_days(t->y, t->mon));
	if (c->dow_star) return c->dom_star || dom_ok;
	int wd = weekday(days_from_civil(t->y, t->mon, t->day));
	int dow_ok = (c->dow >> wd & 1) || (c->nth[(t->day - 1) / 7 + 1] >> wd & 1);
	return c->dom_star ? dow_ok : dom_ok || dow_ok;
}

/* Forward moves: to the first second of the next month/day/hour/minute. */
static void day_fwd(struct civ *t) {
	if (++t->day > month_days(t->y, t->mon)) {
		t->day = 1;
		if (++t->mon > 12) t->mon = 1, t->y++;
	}
	t->hour = t->min = t->sec = 0;
}

static void hour_fwd(struct civ *t) {
	if (++t->hour == 24) day_fwd(t);
	else t->min = t->sec = 0;
}

static void min_fwd(struct civ *t) {
	if (++t->min == 60) hour_fwd(t);
	else t->sec = 0;
}

static void month_fwd(const struct cron *c, struct civ *t) {
	int m = bit_next(c->mon, t->mon + 1, 12);
	if (m < 0) t->y++, m = bit_next(c->mon, 1, 12);
	t->mon = m, t->day = 1;
	t->hour = t->min = t->sec = 0;
}

/* Backward moves: to the last second of the previous month/day/hour/minute. */
static void day_back(struct civ *t) {
	if (--t->day == 0) {
		if (--t->mon == 0) t->mon = 12, t->y--;
		t->day = month_days(t->y, t->mon);
	}
	t->hour = 23, t->min = t->sec = 59;
}

static void hour_back(struct civ *t) {
	if (--t->hour < 0) day_back(t);
	else t->min = t->sec = 59;
}

static void min_back(struct civ *t) {
	if (--t->min < 0) hour_back(t);
	else t->sec = 59;
}

static void month_back(const struct cron *c, struct civ *t) {
	int m = bit_prev(c->mon, t->mon - 1);
	if (m < 1) t->y--, m = bit_prev(c->mon, 12);
	t->mon = m, t->day = month_days(t->y, m);
	t->hour = 23, t->min = t->sec = 59;
}

/* The first matching wall time in [w, wmax], or NONE. Each step jumps to the next
 * candidate of the first field that does not match, so time only moves forward. */
static int64_t civil_next(const struct cron *c, int64_t w, int64_t wmax) {
	struct civ t;
	int v;
	civ_from(w, &t);
	for (;;) {
		int64_t x = civ_to(&t);
		if (x > wmax) return NONE;
		if (!(c->mon >> t.mon & 1)) {
			month_fwd(c, &t);
		} else if (!day_ok(c, &t)) {
			day_fwd(&t);
		} else if (!(c->hour >> t.hour & 1)) {
			if ((v = bit_next(c->hour, t.hour + 1, 23)) < 0) day_fwd(&t);
			else t.hour = v, t.min = t.sec = 0;
		} else if (!(c->min >> t.min & 1)) {
			if ((v = bit_next(c->min, t.min + 1, 59)) < 0) hour_fwd(&t);
			else t.min = v, t.sec = 0;
		} else if (!(c->sec >> t.sec & 1)) {
			if ((v = bit_next(c->sec, t.sec + 1, 59)) < 0) min_fwd(&t);
			else t.sec = v;
		} else {
			return x;
		}
	}
}

/* The last matching wall time in [wmin, w], or NONE: civil_next mirrored. */
static int64_t civil_prev(const struct cron *c, int64_t w, int64_t wmin) {
	struct civ t;
	int v;
	civ_from(w, &t);
	for (;;) {
		int64_t x = civ_to(&t);
		if (x < wmin) return NONE;
		if (!(c->mon >> t.mon & 1)) {
			month_back(c, &t);
		} else if (!day_ok(c, &t)) {
			day_back(&t);
		} else if (!(c->hour >> t.hour & 1)) {
			if ((v = bit_prev(c->hour, t.hour - 1)) < 0) day_back(&t);
			else t.hour = v, t.min = t.sec = 59;
		} else if (!(c->min >> t.min & 1)) {
			if ((v = bit_prev(c->min, t.min - 1)) < 0) hour_back(&t);
			else t.min = v, t.sec = 59;
		} else if (!(c->sec >> t.sec & 1)) {
			if ((v = bit_prev(c->sec, t.sec - 1)) < 0) min_back(&t);
			else t.sec = v;
		} else {
			return x;
		}
	}
}

/* Instants [g->s, result) of a segment that repeat wall times of the previous segment
 * (fall back) and so never match, unless the expression runs every hour (see top). */
static int64_t repeat_end(const struct cron *c, const struct seg *g) {
	if (c->hour == 0xffffff || g->s == INT64_MIN || g->prev_off <= g->off) return g->s;
	int64_t r = g->s + (g->prev_off - g->off);
	return r < g->e ? r : g->e;
}

int64_t cron_prev(const struct cron *c, int64_t now) {
	if (!c || now > INSTANT_MAX || now < -INSTANT_MAX) return -1;
	int64_t u = now - 1, lo = now - SEARCH_SPAN;
	while (u >= lo) {
		struct seg g;
		tz_segment(c->tz, u, &g);
		int64_t a = repeat_end(c, &g);
		if (a < lo) a = lo;
		if (u >= a) {
			int64_t x = civil_prev(c, u + g.off, a + g.off);
			if (x != NONE) return x - g.off;
		}
		if (g.s == INT64_MIN) break;
		u = g.s - 1;
	}
	return -1;
}

int64_t cron_next(const struct cron *c, int64_t t) {
	if (!c || t > INSTANT_MAX || t < -INSTANT_MAX) return -1;
	int64_t u = t + 1, hi = t + SEARCH_SPAN;
	while (u <= hi) {
		struct seg g;
		tz_segment(c->tz, u, &g);
		int64_t r = repeat_end(c, &g), b = g.e - 1 < hi ? g.e - 1 : hi;
		if (u < r) u = r;
		if (u <= b) {
			int64_t x = civil_next(c, u + g.off, b + g.off);
			if (x != NONE) return x - g.off;
		}
		if (g.e == INT64_MAX) break;
		u = g.e;
	}
	return -1;
}
