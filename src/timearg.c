/* SPDX-License-Identifier: MIT */
/*
 * timearg.c: durations and times typed on a command line (timearg.h).
 *
 * One grammar, written out here rather than left to strtod and strptime, for three
 * reasons. strtod takes what nobody means as a delay ("inf", "nan", "1e3", "0x10", a
 * leading space) and strptime takes days a month does not have (2027-02-30) and ignores a
 * zone; each option used to pick its own subset of them, so `--since 90m` worked where
 * `--in 5m` was refused. And a refusal has to say what was wrong, which neither can.
 *
 * A date becomes epoch seconds by arithmetic on the civil calendar (days_from_civil), not
 * through timegm or mktime: no TZ variable or libc zone state can shift it. A time without
 * a zone is UTC, because every time cogworkerctl prints is UTC ("…Z"): what it shows can
 * be typed back.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "timearg.h"

#define YEAR_10000 253402300800.0   /* 10000-01-01T00:00:00Z: the first moment refused */

static const char duration_forms[] =
	"seconds, or numbers each with a unit s, m, h, d, w (90, 90s, 5m, 2h, 1d, 1h30m)";

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* A decimal number at *p (digits, then optionally a point and digits); advances *p. */
static int read_number(const char **p, double *out)
{
	const char *s = *p;
	char buf[64];
	while (is_digit(*s))
		s++;
	if (s == *p)
		return -1;
	if (*s == '.') {
		if (!is_digit(*++s))
			return -1;
		while (is_digit(*s))
			s++;
	}
	if ((size_t)(s - *p) >= sizeof buf)
		return -1;
	memcpy(buf, *p, (size_t)(s - *p));
	buf[s - *p] = '\0';
	*out = strtod(buf, NULL);   /* only digits and a point: nothing strtod would stretch */
	*p = s;
	return 0;
}

static double unit_seconds(char u)
{
	switch (u) {
	case 's': return 1;
	case 'm': return 60;
	case 'h': return 3600;
	case 'd': return 86400;
	case 'w': return 604800;
	default: return 0;
	}
}

/* The duration grammar alone: 1 with a unit, 0 a bare number of seconds, -1 not one. */
static int scan_duration(const char *s, double *secs)
{
	const char *p = s;
	double total = 0, v;
	int units = 0;
	for (;;) {
		if (read_number(&p, &v) != 0)
			return -1;
		if (*p == '\0' && units == 0) {
			*secs = v;
			return 0;
		}
		double u = unit_seconds(*p);
		if (u == 0)
			return -1;
		total += v * u;
		units++;
		if (*++p == '\0')
			break;
	}
	*secs = total;
	return 1;
}

static int iso_moment(const char *s, double *t, char *why, size_t n);

int timearg_duration(const char *s, double *secs, char *why, size_t n)
{
	if (!s || !*s) {
		snprintf(why, n, "an empty duration: give %s", duration_forms);
		return -1;
	}
	if (*s == '-') {
		snprintf(why, n, "\"%s\" is negative: a duration is 0 or more", s);
		return -1;
	}
	if (scan_duration(s, secs) < 0) {
		double t;
		char ignored[8];
		if (iso_moment(s, &t, ignored, sizeof ignored) == 0)
			snprintf(why, n, "\"%s\" is a time, not a duration (%s)", s, duration_forms);
		else
			snprintf(why, n, "\"%s\" is not a duration: %s", s, duration_forms);
		return -1;
	}
	if (!(*secs <= TIMEARG_MAX_DURATION)) {
		snprintf(why, n, "\"%s\" is more than 100 years", s);
		return -1;
	}
	return 0;
}

/* Exactly k digits at *p as a number; advances *p. */
static int fixed_digits(const char **p, int k, int *out)
{
	int v = 0;
	for (int i = 0; i < k; i++) {
		if (!is_digit((*p)[i]))
			return -1;
		v = v * 10 + ((*p)[i] - '0');
	}
	*p += k;
	*out = v;
	return 0;
}

static int leap(int y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int days_in_month(int y, int m)
{
	static const int dim[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	return m == 2 && leap(y) ? 29 : dim[m - 1];
}

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar (H. Hinnant's
 * days_from_civil). */
static long days_from_civil(int y, int m, int d)
{
	y -= m <= 2;
	long era = (y >= 0 ? y : y - 399) / 400;
	long yoe = y - era * 400;
	long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

/* A zone at *p: Z, or ±hh, ±hhmm, ±hh:mm; its offset east of UTC in seconds. */
static int read_zone(const char **p, double *offset)
{
	const char *s = *p;
	int hh, mm = 0;
	if (*s == 'Z' || *s == 'z') {
		*offset = 0;
		*p = s + 1;
		return 0;
	}
	if (*s != '+' && *s != '-')
		return -1;
	int sign = *s++ == '-' ? -1 : 1;
	if (fixed_digits(&s, 2, &hh) != 0)
		return -1;
	if (*s == ':') {
		s++;
		if (fixed_digits(&s, 2, &mm) != 0)
			return -1;
	} else if (is_digit(*s) && fixed_digits(&s, 2, &mm) != 0) {
		return -1;
	}
	if (hh > 23 || mm > 59)
		return -1;
	*offset = sign * (hh * 3600.0 + mm * 60.0);
	*p = s;
	return 0;
}

/* The time of day after the date's separator: hh:mm[:ss[.fff]]. */
static int read_clock(const char **p, double *secs, int *bad_range)
{
	const char *s = *p;
	int hh, mi, ss = 0;
	double frac = 0;
	if (fixed_digits(&s, 2, &hh) != 0 || *s++ != ':' || fixed_digits(&s, 2, &mi) != 0)
		return -1;
	if (*s == ':') {
		s++;
		if (fixed_digits(&s, 2, &ss) != 0)
			return -1;
		if (*s == '.' || *s == ',') {
			const char *f = ++s;
			double scale = 0.1;
			while (is_digit(*s))
				frac += (*s++ - '0') * scale, scale /= 10;
			if (s == f)
				return -1;
		}
	}
	*bad_range = hh > 23 || mi > 59 || ss > 60;
	*secs = hh * 3600.0 + mi * 60.0 + ss + frac;
	*p = s;
	return 0;
}

/*
 * An ISO 8601 date, or date and time with an optional zone, the whole of s. -1 with why
 * when it is not one, or names no moment (a day past the month's end, hour 24, a year
 * before 1970).
 */
static int iso_moment(const char *s, double *t, char *why, size_t n)
{
	const char *p = s;
	int y, m, d, bad_range = 0;
	double clock = 0, offset = 0;
	if (fixed_digits(&p, 4, &y) != 0 || *p++ != '-' || fixed_digits(&p, 2, &m) != 0 ||
	    *p++ != '-' || fixed_digits(&p, 2, &d) != 0)
		return -1;
	if (*p == 'T' || *p == 't' || *p == ' ') {
		p++;
		if (read_clock(&p, &clock, &bad_range) != 0)
			return -1;
		if (*p && read_zone(&p, &offset) != 0)
			return -1;
	}
	if (*p)
		return -1;
	if (m < 1 || m > 12 || d < 1 || d > days_in_month(y, m)) {
		snprintf(why, n, "\"%s\": there is no such date", s);
		return 1;
	}
	if (bad_range) {
		snprintf(why, n, "\"%s\": there is no such time of day", s);
		return 1;
	}
	*t = (double)days_from_civil(y, m, d) * 86400 + clock - offset;
	if (*t < 0) {
		snprintf(why, n, "\"%s\" is before 1970", s);
		return 1;
	}
	return 0;
}

int timearg_moment(const char *s, double now, int dir, double *t, char *why, size_t n)
{
	double secs;
	int r, relative = 0;
	if (!s || !*s) {
		snprintf(why, n, "an empty time");
		return -1;
	}
	if (*s == '-') {
		snprintf(why, n, "\"%s\": a duration %s now takes no sign (%s)", s,
		         dir < 0 ? "back from" : "from", dir < 0 ? "90m, 12h, 7d" : "5m, 2h, 1d");
		return -1;
	}
	if ((r = iso_moment(s, t, why, n)) > 0)
		return -1;
	if (r < 0) {
		r = scan_duration(s, &secs);
		if (r == 0) {
			*t = secs;          /* a bare number: epoch seconds */
		} else if (r > 0) {
			if (!(secs <= TIMEARG_MAX_DURATION)) {
				snprintf(why, n, "\"%s\" is more than 100 years", s);
				return -1;
			}
			*t = now + (dir < 0 ? -secs : secs);
			relative = 1;
		} else {
			snprintf(why, n, "\"%s\" is not a time: epoch seconds, an ISO 8601 date or "
			         "time, UTC unless a zone follows (2027-01-01, 2027-01-01T09:30:00Z, "
			         "2027-01-01 09:30+02:00), or a duration %s now (%s)", s,
			         dir < 0 ? "back from" : "from", dir < 0 ? "90m, 12h, 7d" : "5m, 2h, 1d");
			return -1;
		}
	}
	if (!(*t < YEAR_10000) || *t < 0) {
		snprintf(why, n, "\"%s\" is not between 1970 and 9999", s);
		return -1;
	}
	return relative;
}
