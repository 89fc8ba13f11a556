/* SPDX-License-Identifier: MIT */
/*
 * timearg.h: the durations and times people type on a command line (cogworkerctl's --in,
 * --at, --since, --expires-in, --expires-at, --timeout, jobs reschedule), read by one
 * grammar so that what one option takes, every option of its kind takes.
 */
#ifndef COGWORKERD_TIMEARG_H
#define COGWORKERD_TIMEARG_H

#include <stddef.h>

/* The longest duration taken: 100 years. Past it, a typo is likelier than a plan. */
#define TIMEARG_MAX_DURATION (36500.0 * 86400)

/*
 * A duration: seconds ("90", "0.5"), or numbers each with a unit s, m, h, d or w ("90s",
 * "5m", "2h", "1d", "1h30m", "1.5h"). 0 and the seconds in *secs, or -1 with why (one
 * phrase that names s) in why[n]: a sign, an unknown unit, garbage, more than
 * TIMEARG_MAX_DURATION.
 */
int timearg_duration(const char *s, double *secs, char *why, size_t n);

/*
 * A moment, as epoch seconds in *t: epoch seconds ("1767225600", "1767225600.5"); an ISO
 * 8601 date or date and time ("2027-01-01", "2027-01-01T09:30", "2027-01-01 09:30:15.25"),
 * in UTC unless it ends in a zone ("Z", "+02:00", "-0530", "+02"), UTC because that is how
 * cogworkerctl prints every time; or a duration with a unit counted from now, forward
 * (dir > 0: "5m" is in five minutes) or back (dir < 0: "90m" is ninety minutes ago).
 * 0 for a time, 1 for a duration from now, or -1 with why as timearg_duration: no such
 * date (2027-02-30), a year outside 1970…9999, garbage.
 */
int timearg_moment(const char *s, double now, int dir, double *t, char *why, size_t n);

#endif
