/* SPDX-License-Identifier: MIT */
/* test_cron.c: cron parsing and slot arithmetic (doc/behaviours.md §26, CR-1..CR-9).
 *
 * The expected instants were worked out by hand and checked with `date -u -d @EPOCH` and
 * `TZ=<zone> date -d @EPOCH`; they are written as UTC wall times, with the local time in
 * the comment where a zone is involved. Reference DST changes used below:
 *   Europe/Berlin     2024-03-31 01:00 UTC  02:00 CET  -> 03:00 CEST (gap 02:00-03:00)
 *                     2024-10-27 01:00 UTC  03:00 CEST -> 02:00 CET  (02:00-03:00 twice)
 *   America/New_York  2024-03-10 07:00 UTC  02:00 EST  -> 03:00 EDT
 *                     2024-11-03 06:00 UTC  02:00 EDT  -> 01:00 EST  (01:00-02:00 twice)
 *   Australia/Sydney  2024-04-06 16:00 UTC  03:00 AEDT -> 02:00 AEST (02:00-03:00 twice)
 *   Australia/Lord_Howe 2024-10-05 15:30 UTC 02:00 +1030 -> 02:30 +11 (30 min gap)
 */
#include "cron.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* "YYYY-MM-DD HH:MM:SS" in UTC to an epoch; NULL means "no match" (-1). */
static int64_t utc(const char *s) {
	struct tm tm;
	if (!s) return -1;
	memset(&tm, 0, sizeof(tm));
	const char *end = strptime(s, "%Y-%m-%d %H:%M:%S", &tm);
	ck_assert_msg(end && !*end, "bad test time '%s'", s);
	return (int64_t)timegm(&tm);
}

/* The process zone a row is evaluated in (TZ is read by cron_parse). */
static struct cron *parse_in(const char *tz, const char *expr) {
	char err[256] = "";
	setenv("TZ", tz ? tz : "UTC", 1);
	struct cron *c = cron_parse(expr, err, sizeof(err));
	ck_assert_msg(c != NULL, "'%s' rejected: %s", expr, err);
	return c;
}

struct row {
	const char *expr;
	const char *tz;     /* process TZ for expressions without a zone (NULL: UTC) */
	const char *now;
	const char *prev;   /* cron_prev(now), NULL = none */
	const char *next;   /* cron_next(now), NULL = none */
};

static const struct row ROWS[] = {
	/* CR-8: strictly before the current whole second. */
	{"0 12 * * *", NULL, "2024-05-10 12:00:00", "2024-05-09 12:00:00", "2024-05-11 12:00:00"},
	{"0 12 * * *", NULL, "2024-05-10 12:00:01", "2024-05-10 12:00:00", "2024-05-11 12:00:00"},
	{"0 12 * * *", NULL, "2024-05-10 11:59:59", "2024-05-09 12:00:00", "2024-05-10 12:00:00"},
	/* CR-1: six fields, leading seconds. */
	{"*/15 * * * * *", NULL, "2024-05-10 12:00:15", "2024-05-10 12:00:00", "2024-05-10 12:00:30"},
	{"*/15 * * * * *", NULL, "2024-05-10 12:00:16", "2024-05-10 12:00:15", "2024-05-10 12:00:30"},
	{"*/15 * * * * *", NULL, "2024-05-10 12:59:50", "2024-05-10 12:59:45", "2024-05-10 13:00:00"},
	{"* * * * * *", NULL, "2024-05-10 12:00:00", "2024-05-10 11:59:59", "2024-05-10 12:00:01"},
	{"30 */10 9 * * *", NULL, "2024-05-10 09:59:00", "2024-05-10 09:50:30", "2024-05-11 09:00:30"},
	{"0 0 0 1 1 *", NULL, "2024-05-10 09:59:00", "2024-01-01 00:00:00", "2025-01-01 00:00:00"},
	/* CR-1: lists, ranges, steps, wrapping ranges. */
	{"5,10-20/5,50 * * * *", NULL, "2024-05-10 12:12:00", "2024-05-10 12:10:00", "2024-05-10 12:15:00"},
	{"5,10-20/5,50 * * * *", NULL, "2024-05-10 12:50:00", "2024-05-10 12:20:00", "2024-05-10 13:05:00"},
	{"0 0 1-10/3 * *", NULL, "2024-05-05 00:00:00", "2024-05-04 00:00:00", "2024-05-07 00:00:00"},
	{"0 22-2/2 * * *", NULL, "2024-05-10 12:00:00", "2024-05-10 02:00:00", "2024-05-10 22:00:00"},
	{"0 0 * * fri-mon", NULL, "2024-05-08 12:00:00", "2024-05-06 00:00:00", "2024-05-10 00:00:00"},
	{"0 0 * * 1-5/2", NULL, "2024-05-08 12:00:00", "2024-05-08 00:00:00", "2024-05-10 00:00:00"},
	{"*/20 9-17 * * *", NULL, "2024-05-10 17:45:00", "2024-05-10 17:40:00", "2024-05-11 09:00:00"},
	/* CR-2: names, any case; 0 and 7 are both sunday. */
	{"0 9 * jan-mar mon-fri", NULL, "2024-03-29 10:00:00", "2024-03-29 09:00:00", "2025-01-01 09:00:00"},
	{"0 0 * * 7", NULL, "2024-05-10 12:00:00", "2024-05-05 00:00:00", "2024-05-12 00:00:00"},
	{"0 0 * * SUN", NULL, "2024-05-10 12:00:00", "2024-05-05 00:00:00", "2024-05-12 00:00:00"},
	{"0 0 1 Feb,AUG *", NULL, "2024-05-10 12:00:00", "2024-02-01 00:00:00", "2024-08-01 00:00:00"},
	/* Leap days: 2100 is not a leap year. */
	{"0 0 29 2 *", NULL, "2025-06-01 00:00:00", "2024-02-29 00:00:00", "2028-02-29 00:00:00"},
	{"0 0 29 2 *", NULL, "2024-02-29 00:00:00", "2020-02-29 00:00:00", "2028-02-29 00:00:00"},
	{"0 0 29 2 *", NULL, "2099-01-01 00:00:00", "2096-02-29 00:00:00", "2104-02-29 00:00:00"},
	/* CR-3: L, February leap and not. */
	{"0 0 L 2 *", NULL, "2024-02-15 00:00:00", "2023-02-28 00:00:00", "2024-02-29 00:00:00"},
	{"0 0 L 2 *", NULL, "2025-03-01 00:00:00", "2025-02-28 00:00:00", "2026-02-28 00:00:00"},
	{"0 0 L * *", NULL, "2024-04-15 00:00:00", "2024-03-31 00:00:00", "2024-04-30 00:00:00"},
	{"0 0 l,15 * *", NULL, "2024-02-20 00:00:00", "2024-02-15 00:00:00", "2024-02-29 00:00:00"},
	/* CR-4: dow#n. Feb 2024 has four Fridays (2..23); Dec 2023 and Mar 2024 have five. */
	{"0 0 * * fri#5", NULL, "2024-02-10 00:00:00", "2023-12-29 00:00:00", "2024-03-29 00:00:00"},
	{"0 0 * * tue#2", NULL, "2024-05-01 00:00:00", "2024-04-09 00:00:00", "2024-05-14 00:00:00"},
	{"0 0 * * 0#1,sat", NULL, "2024-05-10 00:00:00", "2024-05-05 00:00:00", "2024-05-11 00:00:00"},
	/* A fifth Friday in February needs Feb 29 on a Friday: 2008, then 2036. */
	{"0 0 * 2 fri#5", NULL, "2024-01-01 00:00:00", "2008-02-29 00:00:00", "2036-02-29 00:00:00"},
	/* CR-5: macros (2024-05-10 is a Friday). */
	{"@yearly", NULL, "2024-05-10 12:34:56", "2024-01-01 00:00:00", "2025-01-01 00:00:00"},
	{"@annually", NULL, "2024-05-10 12:34:56", "2024-01-01 00:00:00", "2025-01-01 00:00:00"},
	{"@monthly", NULL, "2024-05-10 12:34:56", "2024-05-01 00:00:00", "2024-06-01 00:00:00"},
	{"@weekly", NULL, "2024-05-10 12:34:56", "2024-05-05 00:00:00", "2024-05-12 00:00:00"},
	{"@daily", NULL, "2024-05-10 12:34:56", "2024-05-10 00:00:00", "2024-05-11 00:00:00"},
	{"@midnight", NULL, "2024-05-10 12:34:56", "2024-05-10 00:00:00", "2024-05-11 00:00:00"},
	{"@hourly", NULL, "2024-05-10 12:34:56", "2024-05-10 12:00:00", "2024-05-10 13:00:00"},
	{"@daily Europe/Berlin", NULL, "2024-05-10 12:34:56", "2024-05-09 22:00:00", "2024-05-10 22:00:00"},
	/* CR-7: both day fields restricted -> either. The 13th or a Friday. */
	{"0 0 13 * fri", NULL, "2024-05-10 12:00:00", "2024-05-10 00:00:00", "2024-05-13 00:00:00"},
	/* Day-of-month `*\/1` is not restricted (Fugit): Fridays only. */
	{"0 0 */1 * fri", NULL, "2024-05-10 12:00:00", "2024-05-10 00:00:00", "2024-05-17 00:00:00"},
	/* Day-of-week `*\/1` is restricted (Fugit): ORed with the 1st, every day. */
	{"0 0 1 * */1", NULL, "2024-05-10 12:00:00", "2024-05-10 00:00:00", "2024-05-11 00:00:00"},
	/* Fugit drops February from `31 2,3` (no Feb 31st), so February Mondays don't match. */
	{"0 0 31 2,3 mon", NULL, "2024-02-10 00:00:00", "2023-03-31 00:00:00", "2024-03-04 00:00:00"},
	/* CR-6: trailing zone; DST gap in Berlin: 02:30 does not exist on 2024-03-31. */
	{"30 2 * * * Europe/Berlin", NULL, "2024-03-31 03:00:00", "2024-03-30 01:30:00", "2024-04-01 00:30:00"},
	{"0 2 * * * Europe/Berlin", NULL, "2024-03-31 12:00:00", "2024-03-30 01:00:00", "2024-04-01 00:00:00"},
	{"0 3 * * * Europe/Berlin", NULL, "2024-03-31 12:00:00", "2024-03-31 01:00:00", "2024-04-01 01:00:00"},
	/* Across the gap, a frequent entry keeps its real-time rhythm: 01:45 CET, 03:15 CEST. */
	{"*/15 * * * * Europe/Berlin", NULL, "2024-03-31 01:00:00", "2024-03-31 00:45:00", "2024-03-31 01:15:00"},
	/* Berlin repeat: 02:30 happens at 00:30 UTC (CEST) and 01:30 UTC (CET); only the first runs. */
	{"30 2 * * * Europe/Berlin", NULL, "2024-10-27 02:00:00", "2024-10-27 00:30:00", "2024-10-28 01:30:00"},
	{"30 2 * * * Europe/Berlin", NULL, "2024-10-27 00:30:00", "2024-10-26 00:30:00", "2024-10-28 01:30:00"},
	{"30 2 * * * Europe/Berlin", NULL, "2024-10-27 00:45:00", "2024-10-27 00:30:00", "2024-10-28 01:30:00"},
	{"0 2 * * * Europe/Berlin", NULL, "2024-10-27 12:00:00", "2024-10-27 00:00:00", "2024-10-28 01:00:00"},
	{"*/5 2 * * * Europe/Berlin", NULL, "2024-10-27 01:30:00", "2024-10-27 00:55:00", "2024-10-28 01:00:00"},
	/* ... but an every-hour entry runs in both passes: 02:00 CEST, 02:00 CET, 03:00 CET. */
	{"0 * * * * Europe/Berlin", NULL, "2024-10-27 01:30:00", "2024-10-27 01:00:00", "2024-10-27 02:00:00"},
	{"0 * * * * Europe/Berlin", NULL, "2024-10-27 00:30:00", "2024-10-27 00:00:00", "2024-10-27 01:00:00"},
	{"* * * * * * Europe/Berlin", NULL, "2024-10-27 01:00:00", "2024-10-27 00:59:59", "2024-10-27 01:00:01"},
	/* New York: gap (02:30 EST Mar 9 = 07:30 UTC; 02:30 EDT Mar 11 = 06:30 UTC) and repeat. */
	{"30 2 * * * America/New_York", NULL, "2024-03-10 12:00:00", "2024-03-09 07:30:00", "2024-03-11 06:30:00"},
	{"30 1 * * * America/New_York", NULL, "2024-11-03 07:00:00", "2024-11-03 05:30:00", "2024-11-04 06:30:00"},
	{"30 1 * * * America/New_York", NULL, "2024-11-03 05:45:00", "2024-11-03 05:30:00", "2024-11-04 06:30:00"},
	{"0 9 * * 1-5 America/New_York", NULL, "2024-03-08 15:00:00", "2024-03-08 14:00:00", "2024-03-11 13:00:00"},
	/* The process's zone when the expression names none: a zone name and a POSIX TZ string. */
	{"30 1 * * *", "America/New_York", "2024-11-03 07:00:00", "2024-11-03 05:30:00", "2024-11-04 06:30:00"},
	{"30 2 * * *", ":America/New_York", "2024-03-10 12:00:00", "2024-03-09 07:30:00", "2024-03-11 06:30:00"},
	{"30 2 * * *", "EST5EDT,M3.2.0,M11.1.0", "2024-03-10 12:00:00", "2024-03-09 07:30:00", "2024-03-11 06:30:00"},
	{"0 9 * * *", "Europe/Berlin", "2024-05-10 12:00:00", "2024-05-10 07:00:00", "2024-05-11 07:00:00"},
	{"0 9 * * *", "", "2024-05-10 12:00:00", "2024-05-10 09:00:00", "2024-05-11 09:00:00"},
	/* Southern hemisphere repeat: 02:30 AEDT = 15:30 UTC runs, 02:30 AEST = 16:30 UTC not. */
	{"30 2 * * * Australia/Sydney", NULL, "2024-04-06 17:00:00", "2024-04-06 15:30:00", "2024-04-07 16:30:00"},
	/* A 30-minute gap: 02:15 does not exist on 2024-10-06 at Lord Howe. */
	{"15 2 * * * Australia/Lord_Howe", NULL, "2024-10-06 00:00:00", "2024-10-04 15:45:00", "2024-10-06 15:15:00"},
	/* Past the zone file's table: the POSIX rule in its footer (CEST in July, CET in January). */
	{"0 12 * * * Europe/Berlin", NULL, "2100-07-01 00:00:00", "2100-06-30 10:00:00", "2100-07-01 10:00:00"},
	{"0 12 * * * Europe/Berlin", NULL, "2100-01-15 00:00:00", "2100-01-14 11:00:00", "2100-01-15 11:00:00"},
	/* Never matches again: the 5th Sunday of March is always the spring-forward day in
	 * Berlin (the last one before DST began here was 1980-03-30 02:30 CET). */
	{"30 2 * 3 sun#5 Europe/Berlin", NULL, "2024-01-01 00:00:00", "1980-03-30 01:30:00", NULL},
};

START_TEST(test_prev_next) {
	const struct row *r = &ROWS[_i];
	struct cron *c = parse_in(r->tz, r->expr);
	int64_t now = utc(r->now), want_prev = utc(r->prev), want_next = utc(r->next);
	int64_t prev = cron_prev(c, now), next = cron_next(c, now);
	ck_assert_msg(prev == want_prev, "row %d '%s' now %s: prev %lld, want %lld (%s)", _i, r->expr, r->now,
	              (long long)prev, (long long)want_prev, r->prev ? r->prev : "none");
	ck_assert_msg(next == want_next, "row %d '%s' now %s: next %lld, want %lld (%s)", _i, r->expr, r->now,
	              (long long)next, (long long)want_next, r->next ? r->next : "none");
	cron_free(c);
}
END_TEST

/* prev and next agree with each other: nothing matches strictly between prev(t) and t,
 * and next(t) is a match whose prev, one second later, is itself. */
static const char *const CONSISTENT[] = {
	"*/7 * * * * Europe/Berlin", "30 2 * * * Europe/Berlin", "0 * * * * America/New_York",
	"*/13 1,2 * * * America/New_York", "0 0 L * *", "15 */3 * * sat#5", "0 0 13 * fri",
	"*/30 * * * * * Australia/Lord_Howe", "0 2 * * * Australia/Sydney",
};

START_TEST(test_consistency) {
	struct cron *c = parse_in(NULL, CONSISTENT[_i]);
	int64_t t0 = utc("2024-03-01 00:00:00");
	for (int64_t t = t0; t < t0 + 300 * 86400; t += 3607 * 5) {
		int64_t p = cron_prev(c, t), n = cron_next(c, t);
		ck_assert_msg(p >= 0 && p < t && n > t, "'%s' at %lld: prev %lld next %lld", CONSISTENT[_i], (long long)t,
		              (long long)p, (long long)n);
		ck_assert_msg(cron_next(c, p) >= t, "'%s': a match between prev(%lld)=%lld and t", CONSISTENT[_i],
		              (long long)t, (long long)p);
		ck_assert_msg(cron_prev(c, n + 1) == n, "'%s': prev(next(%lld)+1) != next", CONSISTENT[_i], (long long)t);
		ck_assert_msg(cron_prev(c, n) == cron_prev(c, t + 1), "'%s': a match between %lld and next", CONSISTENT[_i],
		              (long long)t);
	}
	cron_free(c);
}
END_TEST

/* A slot series: every matching instant of a day in a repeat, in order, each once. */
START_TEST(test_fall_back_series) {
	struct cron *c = parse_in(NULL, "0,30 1,2,3 * * * Europe/Berlin");
	static const char *const want[] = {
		"2024-10-26 23:00:00", "2024-10-26 23:30:00",    /* 01:00, 01:30 CEST */
		"2024-10-27 00:00:00", "2024-10-27 00:30:00",    /* 02:00, 02:30 CEST (not again in CET) */
		"2024-10-27 02:00:00", "2024-10-27 02:30:00",    /* 03:00, 03:30 CET */
		"2024-10-28 00:00:00",                           /* 01:00 CET the next day */
	};
	int64_t t = utc("2024-10-26 22:00:00");
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		t = cron_next(c, t);
		ck_assert_msg(t == utc(want[i]), "step %zu: %lld, want %s", i, (long long)t, want[i]);
	}
	cron_free(c);
}
END_TEST

/* The cost is the thread's CPU time, not the wall clock: on a loaded host (or under TSan
 * with other work beside it) the wall clock counts the time others ran, and the test
 * failed there at 1.3 s for 75 ms of CPU. A search stepping by the minute would take
 * minutes of CPU. */
START_TEST(test_never_matching_is_cheap) {
	struct cron *c = parse_in(NULL, "30 2 * 3 sun#5 Europe/Berlin");
	struct timespec a, b;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
	for (int i = 0; i < 20; i++) ck_assert_int_eq(cron_next(c, utc("2024-01-01 00:00:00") + i), -1);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
	double ms = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
	ck_assert_msg(ms < 1000, "20 exhaustive searches took %.0f ms of CPU", ms);
	cron_free(c);
}
END_TEST

/* CR-9 and friends: rejected, with a message naming the problem. */
static const struct {
	const char *expr, *msg;
} BAD[] = {
	{"61 * * * *", "61"},
	{"60 * * * *", "minute"},
	{"* 24 * * *", "hour"},
	{"0 0 0 * *", "day-of-month"},
	{"0 0 32 * *", "day-of-month"},
	{"0 0 * 13 *", "month"},
	{"0 0 * 0 *", "month"},
	{"0 0 * * 8", "day-of-week"},
	{"0 0 1-7 * mon&", "mon&"},
	{"0 0 * * sun%2", "sun%2"},
	{"0 0 * * fri#6", "#1 to #5"},
	{"0 0 * * fri#L", "#1 to #5"},
	{"0 0 * * fri#1,fri#3", "fri#3"},
	{"0 0 * * 5L", "5L"},
	{"0 0 L-2 * *", "L-2"},
	{"0 0 last * *", "last"},
	{"0 0 -1 * *", "-1"},
	{"0 L * * *", "hour"},
	{"0 0 ? * *", "?"},
	{"*/0 * * * *", "step"},
	{"1-5/0 * * * *", "step"},
	{"*/100 * * * *", "step"},
	{"5/15 * * * *", "step"},
	{"/15 * * * *", "minute"},
	{"001 * * * *", "001"},
	/* found by tests/fuzz/fuzz_cron: these once overflowed an int while being read */
	{"0 0555555555555555555555555555 L 2 *", "at most 2 digits"},
	{"*/99999999999999999999 * * * *", "step"},
	{"1,,2 * * * *", "empty"},
	{"*,5 * * * *", "alone"},
	{"0 0 * * fri-mon/2", "wrapping"},
	{"0 0 * * monday", "monday"},
	{"0 0 30 2 *", "never occurs"},
	{"0 0 31 4,6 *", "never occurs"},
	{"* * * *", "5 or 6 fields"},
	{"* * * * * * * *", "5 or 6 fields"},
	{"garbage", "5 or 6 fields"},
	{"", "5 or 6 fields"},
	{"@noon", "@noon"},
	{"@reboot", "@reboot"},
	{"@DAILY", "@DAILY"},
	{"@daily Europe/Berlin x", "unexpected"},
	{"0 9 * * * Europe/Nowhere", "Europe/Nowhere"},
	{"0 9 * * * europe/berlin", "europe/berlin"},
	{"0 9 * * * +01:00", "+01:00"},
	{"0 9 * * * ../../etc/passwd", "time zone"},
	{"0 0 9 * * * Bad/Zone", "Bad/Zone"},
};

START_TEST(test_rejected) {
	char err[256] = "";
	setenv("TZ", "UTC", 1);
	struct cron *c = cron_parse(BAD[_i].expr, err, sizeof(err));
	ck_assert_msg(c == NULL, "'%s' accepted", BAD[_i].expr);
	ck_assert_msg(strstr(err, BAD[_i].msg) != NULL, "'%s': message '%s' lacks '%s'", BAD[_i].expr, err,
	              BAD[_i].msg);
	/* A NULL or tiny buffer is fine too. */
	ck_assert_ptr_null(cron_parse(BAD[_i].expr, NULL, 0));
	ck_assert_ptr_null(cron_parse(BAD[_i].expr, err, 1));
	ck_assert_str_eq(err, "");
}
END_TEST

/* Accepted spellings: whitespace, case, leading zeros, every zone form. */
static const char *const GOOD[] = {
	"  0\t12  * * *  ", "07 * * * *", "0 0 * JAN,Dec *", "0 0 * * Mon-FRI", "0 0 * * 0-7",
	"59 59 23 31 12 7", "0 0 * * sat-sun", "0 0 * nov-feb *", "0 0 * * * UTC",
	"0 9 * * * Etc/GMT+5", "0 9 * * * America/Argentina/Buenos_Aires", "@hourly UTC",
	"0 0 * * * America/North_Dakota/New_Salem", "*/99 * * * *", "0 0 L,1 * *", "0 0 * * fri,fri#3",
};

START_TEST(test_accepted) {
	char err[256] = "";
	setenv("TZ", "UTC", 1);
	struct cron *c = cron_parse(GOOD[_i], err, sizeof(err));
	ck_assert_msg(c != NULL, "'%s' rejected: %s", GOOD[_i], err);
	ck_assert_int_ge(cron_prev(c, utc("2024-05-10 12:00:00")), 0);
	cron_free(c);
}
END_TEST

/* 6 tokens: a sixth token that reads as a weekday is a seconds field, else a zone. */
START_TEST(test_six_tokens) {
	struct cron *c = parse_in(NULL, "0 9 * * * Europe/Berlin");    /* 09:00 Berlin */
	ck_assert_int_eq(cron_prev(c, utc("2024-05-10 12:00:00")), utc("2024-05-10 07:00:00"));
	cron_free(c);
	c = parse_in(NULL, "0 9 * * * Sat");    /* second 0, minute 9, saturdays */
	ck_assert_int_eq(cron_next(c, utc("2024-05-10 12:00:00")), utc("2024-05-11 00:09:00"));
	cron_free(c);
	c = parse_in(NULL, "30 0 9 * * * Europe/Berlin");    /* 09:00:30 Berlin */
	ck_assert_int_eq(cron_next(c, utc("2024-05-10 12:00:00")), utc("2024-05-11 07:00:30"));
	cron_free(c);
}
END_TEST

START_TEST(test_free_null) {
	cron_free(NULL);
}
END_TEST

static Suite *cron_suite(void) {
	Suite *s = suite_create("cron");
	TCase *tc = tcase_create("slots");
	tcase_set_timeout(tc, 30);
	tcase_add_loop_test(tc, test_prev_next, 0, (int)(sizeof(ROWS) / sizeof(ROWS[0])));
	tcase_add_loop_test(tc, test_consistency, 0, (int)(sizeof(CONSISTENT) / sizeof(CONSISTENT[0])));
	tcase_add_test(tc, test_fall_back_series);
	tcase_add_test(tc, test_never_matching_is_cheap);
	suite_add_tcase(s, tc);
	tc = tcase_create("parse");
	tcase_add_loop_test(tc, test_rejected, 0, (int)(sizeof(BAD) / sizeof(BAD[0])));
	tcase_add_loop_test(tc, test_accepted, 0, (int)(sizeof(GOOD) / sizeof(GOOD[0])));
	tcase_add_test(tc, test_six_tokens);
	tcase_add_test(tc, test_free_null);
	suite_add_tcase(s, tc);
	return s;
}

int main(void) {
	SRunner *sr = srunner_create(cron_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
