/* SPDX-License-Identifier: MIT */
/*
 * fuzz_warm.c: the warm protocol's parser and writer (src/warm_proto.c) on any bytes: what a
 * warm process sends is untrusted input read for as long as the process lives.
 *
 * What must hold: a line is accepted only if it is valid JSON; an accepted "done" has an
 * exit status from 0 to 255 and its error decodes to what the "error" member holds; an
 * accepted "progress" has a pct that reads as a number; a refusal says why and leaves
 * nothing allocated. The job message of any bytes is one line ending in a newline, starts
 * with the fixed head, and for a valid object is a valid object whose "job" member is the
 * input with its newlines turned into spaces.
 */
#include <math.h>
#include <string.h>
#include "fuzz.h"
#include "util.h"
#include "warm_proto.h"

static void check_parse(const char *s, size_t n)
{
	struct warm_msg m;
	char why[160] = "";

	if (warm_msg_parse(s, n, &m, why, sizeof why) < 0) {
		CHECK(*why);
		CHECK(!m.error && !m.pct && !m.message && !m.jid);
		return;
	}
	CHECK(json_valid(s, n));
	if (m.type == WARM_MSG_DONE) {
		CHECK(m.exit >= 0 && m.exit <= 255);
		if (m.error) {
			size_t at, len, dn;
			CHECK(json_member_span(s, n, "error", &at, &len) == 0);
			char *d = json_string_decode(s + at, len, &dn);
			CHECK(d && dn == m.error_len && memcmp(d, m.error, dn) == 0);
			free(d);
		}
	}
	if (m.type == WARM_MSG_PROGRESS) {
		char *end;
		double v = strtod(m.pct, &end);
		CHECK(m.pct[0] && !*end && isfinite(v));
	}
	warm_msg_free(&m);
}

static void check_job_message(const char *s, size_t n)
{
	static const char head[] = "{\"type\":\"job\",\"job\":";
	size_t len;
	char *msg = warm_job_message(s, n, n % 2 ? 1796176685.5 : 0, &len);

	CHECK(len > n + sizeof head - 1);
	CHECK(memcmp(msg, head, sizeof head - 1) == 0);
	CHECK(msg[len - 1] == '\n' && msg[len] == '\0');
	CHECK(memchr(msg, '\n', len - 1) == NULL);
	/* The member's span is the object without the whitespace around it. */
	size_t lo = 0, hi = n, at, vlen;
	while (lo < n && strchr(" \t\r\n", s[lo]))
		lo++;
	while (hi > lo && strchr(" \t\r\n", s[hi - 1]))
		hi--;
	if (json_valid(s, n) && lo < n && s[lo] == '{') {
		CHECK(json_valid(msg, len - 1));
		CHECK(json_member_span(msg, len - 1, "job", &at, &vlen) == 0);
		CHECK(vlen == hi - lo);
		for (size_t i = lo; i < hi; i++)
			CHECK(msg[at + i - lo] == (s[i] == '\n' ? ' ' : s[i]));
	}
	free(msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_parse((const char *)data, size);
	check_job_message((const char *)data, size);
	return 0;
}
