/* SPDX-License-Identifier: MIT */
/* Unit tests: the one reading of durations and times typed on cogworkerctl's command line
 * (src/timearg.c; doc/behaviours.md PU-5, PU-6). Epochs were checked with GNU date -u. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "timearg.h"

static char why[256];

static double dur(const char *s)
{
	double v = -1;
	ck_assert_msg(timearg_duration(s, &v, why, sizeof why) == 0, "%s refused: %s", s, why);
	return v;
}

static void dur_refused(const char *s, const char *says)
{
	double v = -1;
	why[0] = '\0';
	ck_assert_msg(timearg_duration(s, &v, why, sizeof why) < 0, "%s taken as %g", s, v);
	ck_assert_msg(strstr(why, says), "%s: \"%s\" does not say \"%s\"", s, why, says);
}

#define NOW 1800000000.0

static double at(const char *s, int dir)
{
	double t = -1;
	int r = timearg_moment(s, NOW, dir, &t, why, sizeof why);
	ck_assert_msg(r >= 0, "%s refused: %s", s, why);
	int relative = !strchr(s, '-') && strpbrk(s, "smhdw") != NULL;     /* "5m", not "…-01" */
	ck_assert_msg(r == relative, "%s: %d, as if it were a %s", s, r, r ? "duration" : "time");
	return t;
}

static void at_refused(const char *s, const char *says)
{
	double t = -1;
	why[0] = '\0';
	ck_assert_msg(timearg_moment(s, NOW, 1, &t, why, sizeof why) < 0, "%s taken as %f", s, t);
	ck_assert_msg(strstr(why, says), "%s: \"%s\" does not say \"%s\"", s, why, says);
}

/* PU-5: every form of a duration, and what is refused, with the reason. */
START_TEST(test_durations)
{
	ck_assert_double_eq(dur("90"), 90);
	ck_assert_double_eq(dur("0"), 0);
	ck_assert_double_eq(dur("0.5"), 0.5);
	ck_assert_double_eq(dur("90s"), 90);
	ck_assert_double_eq(dur("5m"), 300);
	ck_assert_double_eq(dur("2h"), 7200);
	ck_assert_double_eq(dur("1d"), 86400);
	ck_assert_double_eq(dur("2w"), 1209600);
	ck_assert_double_eq(dur("1h30m"), 5400);
	ck_assert_double_eq(dur("1d2h3m4s"), 93784);
	ck_assert_double_eq(dur("1.5h"), 5400);
	ck_assert_double_eq(dur("36500d"), 36500.0 * 86400);
	dur_refused("", "empty");
	dur_refused("-5", "negative");
	dur_refused("-5m", "negative");
	dur_refused("5x", "not a duration");
	dur_refused("5 m", "not a duration");
	dur_refused(" 5", "not a duration");
	dur_refused("5m ", "not a duration");
	dur_refused("1h30", "not a duration");
	dur_refused("m", "not a duration");
	dur_refused("1.", "not a duration");
	dur_refused(".5", "not a duration");
	dur_refused("+5", "not a duration");
	dur_refused("1e3", "not a duration");
	dur_refused("0x10", "not a duration");
	dur_refused("inf", "not a duration");
	dur_refused("nan", "not a duration");
	dur_refused("5M", "not a duration");
	dur_refused("36501d", "more than 100 years");
	dur_refused("99999999999999999999", "more than 100 years");
	dur_refused("2027-01-01", "is a time, not a duration");
	dur_refused("2027-01-01T00:00:00Z", "is a time, not a duration");
}
END_TEST

/* PU-6: epochs, ISO 8601 dates and times with and without a zone, durations from now
 * (forward or back); what names no moment is refused, with the reason. */
START_TEST(test_moments)
{
	ck_assert_double_eq(at("1767225600", 1), 1767225600);
	ck_assert_double_eq(at("1767225600.25", 1), 1767225600.25);
	ck_assert_double_eq(at("0", 1), 0);
	ck_assert_double_eq(at("2027-01-01", 1), 1798761600);          /* date -ud 2027-01-01 */
	ck_assert_double_eq(at("2027-01-01T09:30", 1), 1798795800);
	ck_assert_double_eq(at("2027-01-01t09:30:15", 1), 1798795815);
	ck_assert_double_eq(at("2027-01-01 09:30:15", 1), 1798795815);
	ck_assert_double_eq(at("2027-01-01T09:30:15Z", 1), 1798795815);
	ck_assert_double_eq(at("2027-01-01T09:30:15z", 1), 1798795815);
	ck_assert_double_eq(at("2027-01-01T09:30:15.25Z", 1), 1798795815.25);
	ck_assert_double_eq(at("2027-01-01T09:30:15,5", 1), 1798795815.5);
	ck_assert_double_eq(at("2027-01-01T09:30:15+02:00", 1), 1798795815 - 7200);
	ck_assert_double_eq(at("2027-01-01T09:30:15+0200", 1), 1798795815 - 7200);
	ck_assert_double_eq(at("2027-01-01T09:30:15+02", 1), 1798795815 - 7200);
	ck_assert_double_eq(at("2027-01-01T09:30-05:30", 1), 1798795800 + 19800);
	ck_assert_double_eq(at("2027-01-01T09:30:15+00:00", 1), 1798795815);
	ck_assert_double_eq(at("2028-02-29", 1), 1835395200);          /* a leap day */
	ck_assert_double_eq(at("2000-02-29", 1), 951782400);
	ck_assert_double_eq(at("1970-01-01", 1), 0);
	ck_assert_double_eq(at("9999-12-31T23:59:59Z", 1), 253402300799.0);
	ck_assert_double_eq(at("5m", 1), NOW + 300);
	ck_assert_double_eq(at("90m", -1), NOW - 5400);
	ck_assert_double_eq(at("1h30m", -1), NOW - 5400);
	ck_assert_double_eq(at("7d", -1), NOW - 604800);
	at_refused("", "empty");
	at_refused("2027-02-29", "no such date");
	at_refused("1900-02-29", "no such date");
	at_refused("2027-13-01", "no such date");
	at_refused("2027-00-10", "no such date");
	at_refused("2027-04-31", "no such date");
	at_refused("2027-01-01T24:00", "no such time of day");
	at_refused("2027-01-01T12:60", "no such time of day");
	at_refused("2027-01-01T12:00:61", "no such time of day");
	at_refused("2027-01-01T12", "not a time");
	at_refused("2027-01-01T12:00+25:00", "not a time");
	at_refused("2027-01-01T12:00 UTC", "not a time");
	at_refused("2027-01-01Z", "not a time");
	at_refused("2027-1-1", "not a time");
	at_refused("27-01-01", "not a time");
	at_refused("2027/01/01", "not a time");
	at_refused("tomorrow", "not a time");
	at_refused("1e9", "not a time");
	at_refused("-5m", "takes no sign");
	at_refused("1969-12-31", "before 1970");
	at_refused("1970-01-01T00:30+01:00", "before 1970");
	at_refused("253402300800", "between 1970 and 9999");
	at_refused("36501d", "more than 100 years");
	double t;
	ck_assert_int_eq(timearg_moment("90m", NOW, -1, &t, why, sizeof why), 1);
	ck_assert_int_lt(timearg_moment("soon", NOW, -1, &t, why, sizeof why), 0);
	ck_assert_ptr_nonnull(strstr(why, "back from now (90m, 12h, 7d)"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("timearg");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_durations);
	tcase_add_test(tc, test_moments);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
