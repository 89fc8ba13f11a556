/* SPDX-License-Identifier: MIT */
/*
 * fuzz_json.c: the JSON surgery of src/json.c, json_canon.c and utf8.c on any bytes, not
 * only on payloads that parse: validity, the canonical form, splicing members in and out,
 * member and element spans, string literals both ways, UTF-8 scrubbing and its tail.
 *
 * What must hold: the canonical form exists only for valid JSON, is valid JSON and is its
 * own canonical form; a splice keeps an object an object and does what the edits say; spans
 * lie inside the text, in order; json_quote makes a valid literal that decodes to the
 * scrubbed text; scrubbing gives valid UTF-8, leaves valid UTF-8 alone, and its tail is a
 * suffix of the whole.
 */
#include <string.h>
#include "fuzz.h"
#include "json.h"
#include "util.h"

static void check_canonical(const char *s, size_t n)
{
	char *c = json_canonical(s, n);
	if (!c)
		return;
	CHECK(json_valid(s, n));
	CHECK(json_valid(c, strlen(c)));
	char *c2 = json_canonical(c, strlen(c));
	CHECK(c2 && strcmp(c, c2) == 0);
	free(c2);
	free(c);
}

static void check_splice(const char *s, size_t n)
{
	struct json_edit e[] = { { "a", "1" }, { "b", NULL }, { "\xc3\xa9", "\"x\"" },
	                         { "a", "[1,{\"k\":null}]" } };
	char *same = json_edit_object(s, n, NULL, 0);
	char *out = json_edit_object(s, n, e, 4);
	CHECK(!same == !out);
	if (same)
		CHECK(strlen(same) == n && memcmp(same, s, n) == 0);  /* no edit, no change */
	if (!out) {
		free(same);
		return;
	}
	size_t olen = strlen(out), start, vlen;
	char *again = json_edit_object(out, olen, NULL, 0);
	CHECK(again);                                   /* still one object */
	free(again);
	CHECK(json_member_span(out, olen, "a", &start, &vlen) == 0);
	CHECK(vlen == 14 && memcmp(out + start, "[1,{\"k\":null}]", 14) == 0);
	CHECK(json_member_span(out, olen, "b", &start, &vlen) != 0);
	CHECK(json_member_span(out, olen, "\xc3\xa9", &start, &vlen) == 0);
	CHECK(vlen == 3 && memcmp(out + start, "\"x\"", 3) == 0);
	/* the same edits again change nothing more */
	char *twice = json_edit_object(out, olen, e, 4);
	CHECK(twice && strcmp(twice, out) == 0);
	free(twice);
	free(out);
	free(same);
}

static void check_spans(const char *s, size_t n)
{
	size_t *starts, *lens;
	int count = json_array_spans(s, n, &starts, &lens);
	for (int i = 0; i < count; i++) {
		CHECK(lens[i] > 0 && starts[i] + lens[i] <= n);
		CHECK(i == 0 || starts[i] >= starts[i - 1] + lens[i - 1]);
	}
	free(starts);
	free(lens);
	size_t start, vlen;
	if (json_member_span(s, n, "class", &start, &vlen) == 0)
		CHECK(vlen > 0 && start + vlen <= n);
	size_t dn;
	char *d = json_string_decode(s, n, &dn);
	if (d)
		CHECK(dn <= n && d[dn] == '\0');
	free(d);
}

static void check_strings(const char *s, size_t n)
{
	size_t sn;
	char *scrubbed = utf8_scrub_len(s, n, 0, &sn);
	CHECK(fuzz_valid_utf8(scrubbed, sn));         /* valid UTF-8 */
	if (json_valid(s, n))           /* ASCII outside strings, strict UTF-8 inside */
		CHECK(sn == n && memcmp(scrubbed, s, n) == 0);
	char *q = json_quote(s, n);
	CHECK(json_valid(q, strlen(q)));
	size_t dn;
	char *d = json_string_decode(q, strlen(q), &dn);
	CHECK(d && dn == sn && memcmp(d, scrubbed, sn) == 0);
	free(d);
	free(q);
	static const size_t tails[] = { 1, 7, 100, 10000 };
	for (size_t i = 0; i < sizeof tails / sizeof *tails; i++) {
		char *t = utf8_scrub_tail(s, n, tails[i]);
		size_t tn = strlen(t);
		/* a suffix of the whole scrub, as far as no NUL cut it short */
		CHECK(memchr(scrubbed, '\0', sn) || (tn <= sn &&
		      memcmp(scrubbed + sn - tn, t, tn) == 0));
		free(t);
	}
	free(scrubbed);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	check_canonical(s, size);
	check_splice(s, size);
	check_spans(s, size);
	check_strings(s, size);
	return 0;
}
