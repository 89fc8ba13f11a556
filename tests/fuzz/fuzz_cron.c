/* SPDX-License-Identifier: MIT */
/*
 * fuzz_cron.c: the cron parser (src/cron.c, with tz.c for zone names) on any expression,
 * then the slot arithmetic at a few instants.
 *
 * What must hold: cron_prev(now) is a match strictly before now and cron_next(t) one
 * strictly after t (or -1: nothing within 400 years); nothing lies between a slot and the
 * next match, so the next match after the slot is not before now; and the slot of the
 * second after a match is that match.
 */
#include "cron.h"
#include "fuzz.h"

static void check_at(const struct cron *c, int64_t now)
{
	int64_t p = cron_prev(c, now), n = cron_next(c, now);
	CHECK(p == -1 || p < now);
	CHECK(n == -1 || n > now);
	if (p != -1) {
		int64_t after = cron_next(c, p);
		CHECK(after == -1 || after >= now);     /* -1: DST swallows all that follows */
	}
	if (n != -1 && n < INT64_MAX - 1) {
		int64_t back = cron_prev(c, n + 1);
		CHECK(back == n);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char expr[256], err[256];
	if (size >= sizeof expr)
		return 0;
	memcpy(expr, data, size);
	expr[size] = '\0';
	struct cron *c = cron_parse(expr, err, sizeof err);
	if (!c) {
		CHECK(err[0]);
		return 0;
	}
	/* 2026-01-01, a DST change in Europe (2026-03-29 00:59:59 UTC), 1970, 2100 */
	static const int64_t at[] = { 1767225600, 1774745999, 0, 4102444800 };
	for (size_t i = 0; i < sizeof at / sizeof *at; i++)
		check_at(c, at[i]);
	cron_free(c);
	return 0;
}
