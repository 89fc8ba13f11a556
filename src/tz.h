/* SPDX-License-Identifier: MIT */
/*
 * tz.h: time zones as cron evaluation needs them (the UTC offset in force at any instant,
 * and where it changes), and the proleptic Gregorian calendar arithmetic that tz.c and
 * cron.c both do. The calendar functions are inline: cron's search runs them in its inner
 * loops.
 */
#ifndef COGWORKERD_TZ_H
#define COGWORKERD_TZ_H

#include <stdint.h>

#define DAY_S 86400
#define ZONEINFO "/usr/share/zoneinfo/"

/* ---------------------------------------------------------------------------------------
 * Calendar arithmetic (proleptic Gregorian, days since 1970-01-01)
 * ------------------------------------------------------------------------------------- */

static inline int64_t floordiv(int64_t a, int64_t b)
{
	int64_t q = a / b;

	if ((a % b) != 0 && ((a < 0) != (b < 0)))
		q--;
	return q;
}

static inline int is_leap(int64_t y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static inline int month_days(int64_t y, int m)
{
	static const int md[13] = { 0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };

	return m == 2 && is_leap(y) ? 29 : md[m];
}

/* H. Hinnant's days_from_civil / civil_from_days. */
static inline int64_t days_from_civil(int64_t y, int m, int d)
{
	y -= m <= 2;
	int64_t era = floordiv(y, 400);
	int64_t yoe = y - era * 400;
	int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static inline void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
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

/* 0 = sunday; 1970-01-01 was a thursday. */
static inline int weekday(int64_t days)
{
	return (int)(floordiv(days + 4, 7) * -7 + days + 4);
}

/* ---------------------------------------------------------------------------------------
 * Time zones
 * ------------------------------------------------------------------------------------- */

struct tzone;                   /* a zone's private table (tz.c) */

/* A stretch of the time line with one UTC offset: instants [s, e). */
struct seg {
	int64_t s, e;                   /* INT64_MIN / INT64_MAX: no transition that way */
	int32_t off;                    /* seconds east of UTC */
	int32_t prev_off;               /* the offset just before s (off if there is none) */
};

/* A TZif file (RFC 8536); NULL if it cannot be read or is not a valid one. */
struct tzone *tz_load_file(const char *path);
/* The process's local zone, as libc would read it ($TZ, /etc/localtime, else UTC). */
struct tzone *tz_local(void);
/* Is s a zone name as Fugit writes them ("Europe/Berlin", "America/Argentina/Salta")? */
int tz_name_ok(const char *s);
void tz_free(struct tzone *z);
/* The segment of z that holds instant u. */
void tz_segment(const struct tzone *z, int64_t u, struct seg *g);

#endif
