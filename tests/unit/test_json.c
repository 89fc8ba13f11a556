/* SPDX-License-Identifier: MIT */
/*
 * test_json.c: src/json.c — splicing members into raw JSON byte for byte, strict
 * validation, Ruby-compatible canonical JSON and Float#to_s, UTF-8 scrubbing and the text
 * log's escaping.
 *
 * The canonical and float vectors were checked against Ruby 3.1 (json 2.6.1):
 * JSON.generate(JSON.parse(text)) and Float#to_s.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "json.h"
#include "util.h"

/* ---------------------------------------------------------------------------------------
 * helpers
 * ------------------------------------------------------------------------------------- */

static char *edit1(const char *raw, const char *key, const char *value)
{
	struct json_edit e = { key, value };
	return json_edit_object(raw, strlen(raw), &e, 1);
}

#define ck_edit1(raw, key, value, want)                                           \
	do {                                                                      \
		char *got_ = edit1(raw, key, value);                              \
		ck_assert_ptr_nonnull(got_);                                      \
		ck_assert_str_eq(got_, want);                                     \
		free(got_);                                                       \
	} while (0)

#define ck_edit1_rejected(raw, key, value)                                        \
	do {                                                                      \
		char *got_ = edit1(raw, key, value);                              \
		ck_assert_msg(got_ == NULL, "accepted %s -> %s", raw, got_);      \
	} while (0)

#define ck_canon(raw, want)                                                       \
	do {                                                                      \
		char *got_ = json_canonical(raw, strlen(raw));                    \
		ck_assert_msg(got_ != NULL, "rejected %s", raw);                  \
		ck_assert_str_eq(got_, want);                                     \
		free(got_);                                                       \
	} while (0)

#define ck_canon_rejected(raw)                                                    \
	do {                                                                      \
		char *got_ = json_canonical(raw, strlen(raw));                    \
		ck_assert_msg(got_ == NULL, "accepted %s -> %s", raw, got_);      \
	} while (0)

#define ck_float(d, want)                                                         \
	do {                                                                      \
		char out_[40];                                                    \
		json_ruby_float(d, out_);                                         \
		ck_assert_str_eq(out_, want);                                     \
	} while (0)

#define ck_scrub(in, max, want)                                                   \
	do {                                                                      \
		char *got_ = utf8_scrub(in, sizeof(in) - 1, max);                 \
		ck_assert_str_eq(got_, want);                                     \
		free(got_);                                                       \
	} while (0)

static size_t count_chars(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		n += ((unsigned char)*s & 0xC0) != 0x80;
	return n;
}

/* ---------------------------------------------------------------------------------------
 * json_edit_object
 * ------------------------------------------------------------------------------------- */

START_TEST(edit_keeps_every_other_byte)
{
	const char *raw = "{\"class\":\"X\",\"args\":[9007199254740993,12345678901234567890,"
	                  "1.5e300,0.1,1E2,-0,\"\xC3\xA9\\n\\u0001\\/\"],\"retry\":true}";
	char *got = edit1(raw, "retry_count", "1");
	ck_assert_str_eq(got, "{\"class\":\"X\",\"args\":[9007199254740993,12345678901234567890,"
	                      "1.5e300,0.1,1E2,-0,\"\xC3\xA9\\n\\u0001\\/\"],\"retry\":true,"
	                      "\"retry_count\":1}");
	free(got);
}
END_TEST

START_TEST(edit_replaces_in_place)
{
	ck_edit1("{\"a\":1,\"b\":2,\"c\":3}", "b", "\"x\"", "{\"a\":1,\"b\":\"x\",\"c\":3}");
	ck_edit1("{\"a\":1,\"b\":2,\"c\":3}", "a", "[1,2]", "{\"a\":[1,2],\"b\":2,\"c\":3}");
	ck_edit1("{\"a\":1,\"b\":2,\"c\":3}", "c", "null", "{\"a\":1,\"b\":2,\"c\":null}");
	ck_edit1("{ \"a\" : {\"deep\":[1,{\"x\":\"}\"}]} , \"b\" : 2 }", "a", "0",
	         "{ \"a\" : 0 , \"b\" : 2 }");
	/* a nested "a" is not the top-level one */
	ck_edit1("{\"x\":{\"a\":1}}", "a", "2", "{\"x\":{\"a\":1},\"a\":2}");
}
END_TEST

START_TEST(edit_removes_first_middle_last_only)
{
	ck_edit1("{\"a\":1,\"b\":2,\"c\":3}", "a", NULL, "{\"b\":2,\"c\":3}");
	ck_edit1("{\"a\":1,\"b\":2,\"c\":3}", "b", NULL, "{\"a\":1,\"c\":3}");
	ck_edit1("{\"a\":1,\"b\":2,\"c\":3}", "c", NULL, "{\"a\":1,\"b\":2}");
	ck_edit1("{\"a\":1}", "a", NULL, "{}");
	ck_edit1("{\"a\":1}", "zz", NULL, "{\"a\":1}");
	ck_edit1("{}", "zz", NULL, "{}");
}
END_TEST

START_TEST(edit_removes_with_whitespace)
{
	ck_edit1("{ \"a\" : 1 , \"b\" : 2 , \"c\" : 3 }", "a", NULL, "{ \"b\" : 2 , \"c\" : 3 }");
	ck_edit1("{ \"a\" : 1 , \"b\" : 2 , \"c\" : 3 }", "b", NULL, "{ \"a\" : 1 , \"c\" : 3 }");
	ck_edit1("{ \"a\" : 1 , \"b\" : 2 , \"c\" : 3 }", "c", NULL, "{ \"a\" : 1 , \"b\" : 2 }");
	ck_edit1("{\n  \"a\": 1,\n  \"b\": 2\n}\n", "b", NULL, "{\n  \"a\": 1\n}\n");
	ck_edit1("{ \"a\" : 1 }", "a", NULL, "{  }");
}
END_TEST

START_TEST(edit_appends)
{
	ck_edit1("{}", "k", "\"v\"", "{\"k\":\"v\"}");
	ck_edit1("{ }", "k", "1", "{ \"k\":1}");
	ck_edit1("{\"a\":1}", "k", "true", "{\"a\":1,\"k\":true}");
	ck_edit1("{\n  \"a\": 1\n}", "k", "2", "{\n  \"a\": 1,\"k\":2\n}");
	ck_edit1("  {\"a\":1}  \n", "b", "2", "  {\"a\":1,\"b\":2}  \n");
	/* the new key is written as a JSON string */
	ck_edit1("{}", "q\"\\\n", "0", "{\"q\\\"\\\\\\n\":0}");
}
END_TEST

START_TEST(edit_many_at_once)
{
	const char *raw = "{\"class\":\"W\",\"failure_outcome\":\"x\",\"retry_count\":1,\"args\":[]}";
	struct json_edit e[] = {
		{ "failure_outcome", NULL },
		{ "error_class", "\"RuntimeError\"" },
		{ "retry_count", "2" },
		{ "failed_at", "1767225600.123456" },
	};
	char *got = json_edit_object(raw, strlen(raw), e, 4);
	ck_assert_str_eq(got, "{\"class\":\"W\",\"retry_count\":2,\"args\":[],"
	                      "\"error_class\":\"RuntimeError\",\"failed_at\":1767225600.123456}");
	free(got);

	/* everything removed, something appended */
	struct json_edit f[] = { { "a", NULL }, { "b", NULL }, { "c", "3" } };
	got = json_edit_object("{\"a\":1,\"b\":2}", 13, f, 3);
	ck_assert_str_eq(got, "{\"c\":3}");
	free(got);

	/* no edits: a plain copy */
	got = json_edit_object("{\"a\":1} ", 8, NULL, 0);
	ck_assert_str_eq(got, "{\"a\":1} ");
	free(got);
}
END_TEST

START_TEST(edit_last_edit_of_a_key_wins)
{
	struct json_edit e[] = { { "a", "1" }, { "a", "2" }, { "n", "1" }, { "n", NULL },
	                         { "m", NULL }, { "m", "3" } };
	char *got = json_edit_object("{\"a\":0}", 7, e, 6);
	ck_assert_str_eq(got, "{\"a\":2,\"m\":3}");
	free(got);
}
END_TEST

START_TEST(edit_duplicate_keys)
{
	/* edited: the value goes to the first occurrence, later ones are dropped */
	ck_edit1("{\"a\":1,\"b\":2,\"a\":3}", "a", "9", "{\"a\":9,\"b\":2}");
	/* removed: every occurrence goes */
	ck_edit1("{\"a\":1,\"b\":2,\"a\":3}", "a", NULL, "{\"b\":2}");
	/* untouched: left as it is */
	ck_edit1("{\"a\":1,\"a\":3}", "b", "2", "{\"a\":1,\"a\":3,\"b\":2}");
}
END_TEST

START_TEST(edit_matches_decoded_keys)
{
	ck_edit1("{\"\\u0061\":1}", "a", "2", "{\"\\u0061\":2}");
	ck_edit1("{\"caf\\u00e9\":1}", "caf\xC3\xA9", NULL, "{}");
	ck_edit1("{\"\\ud83d\\ude00\":1}", "\xF0\x9F\x98\x80", "2", "{\"\\ud83d\\ude00\":2}");
	ck_edit1("{\"a\\\"b\":1}", "a\"b", "2", "{\"a\\\"b\":2}");
	ck_edit1("{\"ab\":1}", "a", "2", "{\"ab\":1,\"a\":2}");
	ck_edit1("{\"a\":1}", "ab", "2", "{\"a\":1,\"ab\":2}");
}
END_TEST

START_TEST(edit_keeps_invalid_utf8_bytes)
{
	/* Ruby's parser and cJSON accept them; a job must not turn unparseable over one byte */
	ck_edit1("{\"a\":\"\xff\xfe\"}", "b", "1", "{\"a\":\"\xff\xfe\",\"b\":1}");
}
END_TEST

START_TEST(edit_rejects_malformed)
{
	ck_edit1_rejected("{not json", "a", "1");
	ck_edit1_rejected("[1]", "a", "1");
	ck_edit1_rejected("{\"a\":1} x", "a", "1");
	ck_edit1_rejected("{\"a\":1}{}", "a", "1");
	ck_edit1_rejected("", "a", "1");
	ck_edit1_rejected("   ", "a", "1");
	ck_edit1_rejected("\"str\"", "a", "1");
	ck_edit1_rejected("null", "a", "1");
	ck_edit1_rejected("{\"a\":1,}", "a", "1");
	ck_edit1_rejected("{,\"a\":1}", "a", "1");
	ck_edit1_rejected("{\"a\":01}", "a", "1");
	ck_edit1_rejected("{\"a\" 1}", "a", "1");
	ck_edit1_rejected("{a:1}", "a", "1");
	ck_edit1_rejected("{\"a\":\"x\ty\"}", "a", "1");
	ck_edit1_rejected("{\"a\":\"\\x\"}", "a", "1");
	ck_edit1_rejected("{\"a\":\"\\u12\"}", "a", "1");
	ck_edit1_rejected("{\"a\":[1,2}", "a", "1");
	ck_edit1_rejected("{\"a\":tru}", "a", "1");
	ck_edit1_rejected("{\"a\":1", "a", "1");
	ck_edit1_rejected("{\"a\":\"1}", "a", "1");
	/* an invalid new value is refused too */
	ck_edit1_rejected("{\"a\":1}", "a", "1 2");
	ck_edit1_rejected("{\"a\":1}", "a", "{");
	ck_edit1_rejected("{\"a\":1}", "a", "");
	/* embedded NUL: len covers it, so it is garbage */
	struct json_edit e = { "a", "1" };
	ck_assert_ptr_null(json_edit_object("{}\0", 3, &e, 1));
	/* len shorter than the string: only the prefix counts */
	ck_assert_ptr_null(json_edit_object("{\"a\":1}", 6, &e, 1));
}
END_TEST

START_TEST(edit_deep_nesting)
{
	size_t n = 5000;
	char *deep = xmalloc(2 * n + 16);
	strcpy(deep, "{\"a\":");
	memset(deep + 5, '[', n);
	memset(deep + 5 + n, ']', n);
	strcpy(deep + 5 + 2 * n, "}");
	ck_assert_ptr_null(edit1(deep, "b", "1"));      /* refused, not a stack overflow */
	free(deep);
	ck_edit1("{\"a\":[[[[[[[[[[{}]]]]]]]]]]}", "b", "1", "{\"a\":[[[[[[[[[[{}]]]]]]]]]],\"b\":1}");
}
END_TEST

/* ---------------------------------------------------------------------------------------
 * json_member_span
 * ------------------------------------------------------------------------------------- */

static char *span_of(const char *raw, const char *key)
{
	size_t start, vlen;
	if (json_member_span(raw, strlen(raw), key, &start, &vlen) < 0)
		return NULL;
	return xstrndup(raw + start, vlen);
}

#define ck_span(raw, key, want)                                                   \
	do {                                                                      \
		char *got_ = span_of(raw, key);                                   \
		ck_assert_ptr_nonnull(got_);                                      \
		ck_assert_str_eq(got_, want);                                     \
		free(got_);                                                       \
	} while (0)

START_TEST(span_finds_top_level_values)
{
	ck_span("{\"class\":\"X\",\"args\":[12345678901234567890, 1.5e300] ,\"q\":1}", "args",
	        "[12345678901234567890, 1.5e300]");
	ck_span("{ \"a\" :\n \"x\\\"y\" }", "a", "\"x\\\"y\"");
	ck_span("{\"a\":{\"b\":1}}", "a", "{\"b\":1}");
	ck_span("{\"\\u0061rgs\":[]}", "args", "[]");
	ck_span("{\"a\":1,\"a\":2}", "a", "2");                /* Ruby keeps the last */
	ck_span("{\"\":null}", "", "null");
}
END_TEST

START_TEST(span_reports_absent_and_malformed)
{
	ck_assert_ptr_null(span_of("{\"x\":{\"args\":1}}", "args"));
	ck_assert_ptr_null(span_of("{}", "args"));
	ck_assert_ptr_null(span_of("[{\"args\":1}]", "args"));
	ck_assert_ptr_null(span_of("{\"args\":1", "args"));
	ck_assert_ptr_null(span_of("{\"args\":1} x", "args"));
	ck_assert_ptr_null(span_of("{\"args\":[1,]}", "args"));
}
END_TEST

/* ---------------------------------------------------------------------------------------
 * json_array_spans
 * ------------------------------------------------------------------------------------- */

START_TEST(array_spans_give_each_element_text)
{
	const char *raw = " [ 12345678901234567890 , \"a,]\" ,[2, 3],{\"k\":[]} ] ";
	size_t *st, *ln;
	int n = json_array_spans(raw, strlen(raw), &st, &ln);
	ck_assert_int_eq(n, 4);
	const char *want[] = { "12345678901234567890", "\"a,]\"", "[2, 3]", "{\"k\":[]}" };
	for (int i = 0; i < n; i++) {
		ck_assert_uint_eq(ln[i], strlen(want[i]));
		ck_assert(memcmp(raw + st[i], want[i], ln[i]) == 0);
	}
	free(st);
	free(ln);
	ck_assert_int_eq(json_array_spans("[]", 2, &st, &ln), 0);
	free(st);
	free(ln);
	ck_assert_int_eq(json_array_spans("{}", 2, &st, &ln), -1);
	ck_assert_int_eq(json_array_spans("[1,]", 4, &st, &ln), -1);
	ck_assert_int_eq(json_array_spans("[1] 2", 5, &st, &ln), -1);
}
END_TEST

/* ---------------------------------------------------------------------------------------
 * json_valid
 * ------------------------------------------------------------------------------------- */

#define ck_valid(text) ck_assert_msg(json_valid(text, strlen(text)), "rejected %s", text)
#define ck_invalid(text) ck_assert_msg(!json_valid(text, strlen(text)), "accepted %s", text)

START_TEST(valid_accepts_rfc8259)
{
	ck_valid("0");
	ck_valid("-0");
	ck_valid("-0.0e-0");
	ck_valid("1E+2");
	ck_valid("12345678901234567890123456789");
	ck_valid("\"\"");
	ck_valid("\"\\u00e9\\ud83d\\ude00\\\"\\\\\\/\\b\\f\\n\\r\\t\"");
	ck_valid("\"\xC3\xA9\xF0\x9F\x98\x80\x7f\"");
	ck_valid(" \t\r\n[ ] ");
	ck_valid("{}");
	ck_valid("[true,false,null,{\"a\":[1,{\"b\":{}}]}]");
	ck_valid("\"\\ud800\"");    /* grammatical, if unwise */
}
END_TEST

START_TEST(valid_rejects_the_rest)
{
	ck_invalid("");
	ck_invalid(" ");
	ck_invalid("01");
	ck_invalid("-");
	ck_invalid("+1");
	ck_invalid("1.");
	ck_invalid(".5");
	ck_invalid("1e");
	ck_invalid("1e+");
	ck_invalid("0x10");
	ck_invalid("NaN");
	ck_invalid("Infinity");
	ck_invalid("[1,]");
	ck_invalid("{\"a\":1,}");
	ck_invalid("[1 2]");
	ck_invalid("1 2");
	ck_invalid("'a'");
	ck_invalid("\"a");
	ck_invalid("\"a\tb\"");
	ck_invalid("\"\\a\"");
	ck_invalid("\"\\u00g0\"");
	ck_invalid("\"\xff\"");
	ck_invalid("\"\xC0\xAF\"");
	ck_invalid("\"\xED\xA0\x80\"");
	ck_invalid("[1]/*c*/");
	ck_invalid("True");
	ck_invalid("nul");
	ck_assert(!json_valid("1\0", 2));
	ck_assert(json_valid("1\0", 1));
	ck_assert(!json_valid(NULL, 0));
}
END_TEST

/* Where the text stops being JSON: what cogworkerctl's "not valid JSON" messages point at. */
START_TEST(invalid_at_points_at_the_trouble)
{
	ck_assert_int_eq(json_invalid_at("[1]", 3), -1);
	ck_assert_int_eq(json_invalid_at(" {\"a\":1} ", 9), -1);
	ck_assert_int_eq(json_invalid_at("[1,2", 4), 4);           /* ends too soon */
	ck_assert_int_eq(json_invalid_at("", 0), 0);
	ck_assert_int_eq(json_invalid_at("[1,x]", 5), 3);
	ck_assert_int_eq(json_invalid_at("[1] x", 5), 4);          /* trailing garbage */
	ck_assert_int_eq(json_invalid_at("{\"a\" 1}", 8), 5);
}
END_TEST

/* ---------------------------------------------------------------------------------------
 * json_canonical
 * ------------------------------------------------------------------------------------- */

START_TEST(canonical_vectors)
{
	/* the escape \n decodes to a newline, which is written back as \n */
	ck_canon("[1,\"a\",{\"b\":null},2.5,\"\xC3\xA9/\\n\"]", "[1,\"a\",{\"b\":null},2.5,\"\xC3\xA9/\\n\"]");
	ck_canon("[1,\"a\",{\"b\":null},2.5,\"\\u00e9\\/\\u000a\"]",
	         "[1,\"a\",{\"b\":null},2.5,\"\xC3\xA9/\\n\"]");
	ck_canon("[ 1 , \"\\u00e9\\/\" ]", "[1,\"\xC3\xA9/\"]");
	ck_canon("\"\\u0001\"", "\"\\u0001\"");
	ck_canon(" {\n \"a\" : [ true , false , null ] ,\t\"b\" : { } } ",
	         "{\"a\":[true,false,null],\"b\":{}}");
	ck_canon("[[],{},\"\",[[]]]", "[[],{},\"\",[[]]]");
	ck_canon("{\"\":{}}", "{\"\":{}}");
}
END_TEST

START_TEST(canonical_strings)
{
	/* the short escapes, the rest of the controls as lowercase \u00xx */
	ck_canon("\"\\b\\f\\n\\r\\t\\u0000\\u001F\\u001b\\u000B\"",
	         "\"\\b\\f\\n\\r\\t\\u0000\\u001f\\u001b\\u000b\"");
	ck_canon("\"\\u0008\\u000c\\u000A\\u000d\\u0009\"", "\"\\b\\f\\n\\r\\t\"");
	ck_canon("\"\\\"\\\\\\/\"", "\"\\\"\\\\/\"");
	ck_canon("\"\\u0022\\u005c\\u002f\"", "\"\\\"\\\\/\"");
	/* DEL, U+0080, U+2028 and friends are written raw */
	ck_canon("\"\\u007f\\u0080\\u2028\\uFFFF\"", "\"\x7f\xC2\x80\xE2\x80\xA8\xEF\xBF\xBF\"");
	ck_canon("\"\x7f\xC3\xA9\"", "\"\x7f\xC3\xA9\"");
	/* surrogate pairs become one 4-byte character */
	ck_canon("\"\\ud83d\\ude00\\uD83D\\uDE00\"", "\"\xF0\x9F\x98\x80\xF0\x9F\x98\x80\"");
	ck_canon("\"\\udbff\\udfff\"", "\"\xF4\x8F\xBF\xBF\"");
	ck_canon("\"\\u0041\\u00e9\\u4e2d\"", "\"A\xC3\xA9\xE4\xB8\xAD\"");
	/* no canonical form: Ruby raises on these */
	ck_canon_rejected("\"\\ud800\"");
	ck_canon_rejected("\"\\udc00\"");
	ck_canon_rejected("\"\\ud800x\"");
	ck_canon_rejected("\"\\ud800\\u0041\"");
	ck_canon_rejected("\"\xff\"");
	ck_canon_rejected("\"\xE2\x82\"");
}
END_TEST

START_TEST(canonical_numbers)
{
	ck_canon("[9007199254740993,12345678901234567890,-12345678901234567890123]",
	         "[9007199254740993,12345678901234567890,-12345678901234567890123]");
	ck_canon("[0,-1,100]", "[0,-1,100]");
	ck_canon("-0", "0");            /* Ruby reads -0 as the Integer 0 */
	ck_canon("[-0,-0.0,0.0]", "[0,-0.0,0.0]");
	ck_canon("[1E2,1e2,1.0e+2,10e1,100.000,10e0]", "[100.0,100.0,100.0,100.0,100.0,10.0]");
	ck_canon("[2.5,0.1,1.5e300,1.50E+300]", "[2.5,0.1,1.5e+300,1.5e+300]");
	ck_canon("[0.00001,1e-5,0.0001,1e15,1e16]", "[1.0e-05,1.0e-05,0.0001,1.0e+15,1.0e+16]");
	ck_canon("[-1.5E-7,123e-20,0.1000000000000000055511151231257827]",
	         "[-1.5e-07,1.23e-18,0.1]");
	ck_canon("[1e-400,-1e-400]", "[0.0,-0.0]");
	ck_canon_rejected("1e400");     /* Infinity: Ruby's generator refuses it */
	ck_canon_rejected("[-1E400]");
	/* ...unless a repeated key replaced it before printing */
	ck_canon("{\"a\":1e400,\"a\":1}", "{\"a\":1}");
}
END_TEST

START_TEST(canonical_duplicate_keys)
{
	/* Ruby's Hash: the first key's place, the last value */
	ck_canon("{\"a\":1,\"b\":2,\"a\":3,\"\\u0061\":4}", "{\"a\":4,\"b\":2}");
	ck_canon("{\"x\":{\"a\":1,\"a\":[1,{\"c\":1,\"c\":2}]},\"y\":0,\"x\":{\"b\":0,\"b\":5}}",
	         "{\"x\":{\"b\":5},\"y\":0}");
	ck_canon("[{\"a\":1},{\"a\":2}]", "[{\"a\":1},{\"a\":2}]");
	ck_canon("{\"ab\":1,\"a\":2,\"\":3,\"\":4}", "{\"ab\":1,\"a\":2,\"\":4}");
}
END_TEST

START_TEST(canonical_rejects_invalid)
{
	ck_canon_rejected("");
	ck_canon_rejected("[1,]");
	ck_canon_rejected("[1] x");
	ck_canon_rejected("{\"a\" 1}");
	ck_canon_rejected("\"\\e\"");
	ck_canon_rejected("[01]");
	ck_canon_rejected("\"a\nb\"");  /* a raw newline in a string: Ruby refuses it too */
	ck_canon_rejected("NaN");
	ck_assert_ptr_null(json_canonical(NULL, 0));
}
END_TEST

START_TEST(canonical_is_idempotent)
{
	const char *in[] = {
		"[ 1 , \"\\u00e9\\/\\u0001\" , { \"k\" : [ 1e5 , -0 , 0.5 ] } ]",
		"{\"a\":\"\\ud83d\\ude00\\t\",\"b\":[1.0e+16,12345678901234567890]}",
	};
	for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
		char *once = json_canonical(in[i], strlen(in[i]));
		ck_assert_ptr_nonnull(once);
		ck_assert(json_valid(once, strlen(once)));
		char *twice = json_canonical(once, strlen(once));
		ck_assert_str_eq(once, twice);
		free(once);
		free(twice);
	}
}
END_TEST

/* ---------------------------------------------------------------------------------------
 * json_ruby_float
 * ------------------------------------------------------------------------------------- */

START_TEST(ruby_float_vectors)
{
	ck_float(1.0, "1.0");
	ck_float(0.0, "0.0");
	ck_float(-0.0, "-0.0");
	ck_float(2.5, "2.5");
	ck_float(-2.5, "-2.5");
	ck_float(0.1, "0.1");
	ck_float(0.1 + 0.2, "0.30000000000000004");
	ck_float(100.0, "100.0");
	ck_float(0.001, "0.001");
	ck_float(0.0001, "0.0001");
	ck_float(0.00012, "0.00012");
	ck_float(0.00001, "1.0e-05");
	ck_float(9.999e-05, "9.999e-05");
	ck_float(1e14, "100000000000000.0");
	ck_float(1e15, "1.0e+15");
	ck_float(1e16, "1.0e+16");
	ck_float(1e20, "1.0e+20");
	ck_float(1e22, "1.0e+22");
	ck_float(1e23, "1.0e+23");
	ck_float(123456789012345.0, "123456789012345.0");
	ck_float(999999999999999.0, "999999999999999.0");
	ck_float(1234567890123456.0, "1.234567890123456e+15");
	ck_float(1234567890123456.7, "1234567890123456.8");
	ck_float(1000000000000000.2, "1000000000000000.2");
	ck_float(9007199254740992.0, "9.007199254740992e+15");
	ck_float(10000000000000002.0, "1.0000000000000002e+16");
	ck_float(1.5e300, "1.5e+300");
	ck_float(-1.5e-7, "-1.5e-07");
	ck_float(1.23e-18, "1.23e-18");
	ck_float(1767225600.123456, "1767225600.123456");
	ck_float(5e-324, "5.0e-324");
	ck_float(2.2250738585072014e-308, "2.2250738585072014e-308");
	ck_float(1.7976931348623157e308, "1.7976931348623157e+308");
}
END_TEST

START_TEST(ruby_float_round_trips)
{
	/* whatever it prints reads back as the same double */
	unsigned long long seed = 88172645463325252ULL;
	for (int i = 0; i < 20000; i++) {
		seed ^= seed << 13;
		seed ^= seed >> 7;
		seed ^= seed << 17;
		double d;
		memcpy(&d, &seed, sizeof d);
		if (d != d || d - d != 0)
			continue;       /* NaN, infinities */
		char out[40];
		json_ruby_float(d, out);
		ck_assert_msg(strtod(out, NULL) == d, "%s does not read back as %a", out, d);
		ck_assert_msg(strchr(out, '.') != NULL, "%s has no fraction", out);
	}
}
END_TEST

/* ---------------------------------------------------------------------------------------
 * json_quote
 * ------------------------------------------------------------------------------------- */

#define ck_quote(in, want)                                                        \
	do {                                                                      \
		char *got_ = json_quote(in, sizeof(in) - 1);                      \
		ck_assert_str_eq(got_, want);                                     \
		free(got_);                                                       \
	} while (0)

START_TEST(quote_escapes_like_ruby)
{
	ck_quote("", "\"\"");
	ck_quote("plain", "\"plain\"");
	ck_quote("a\"b\\c/d", "\"a\\\"b\\\\c/d\"");
	ck_quote("\b\f\n\r\t\x01\x1f\x7f", "\"\\b\\f\\n\\r\\t\\u0001\\u001f\x7f\"");
	ck_quote("caf\xC3\xA9 \xF0\x9F\x98\x80", "\"caf\xC3\xA9 \xF0\x9F\x98\x80\"");
	ck_quote("nul\0byte", "\"nul\\u0000byte\"");
	ck_quote("bad \xff", "\"bad \xEF\xBF\xBD\"");
	char *q = json_quote("x\xC3", 2);
	ck_assert_str_eq(q, "\"x\xEF\xBF\xBD\"");
	ck_assert(json_valid(q, strlen(q)));
	free(q);
}
END_TEST

/* ---------------------------------------------------------------------------------------
 * utf8_scrub, utf8_scrub_tail
 * ------------------------------------------------------------------------------------- */

#define FFFD "\xEF\xBF\xBD"

START_TEST(scrub_replaces_invalid_sequences)
{
	ck_scrub("bad \xff", 0, "bad " FFFD);
	ck_scrub("ok caf\xC3\xA9 \xF0\x9F\x98\x80 \xE4\xB8\xAD", 0,
	         "ok caf\xC3\xA9 \xF0\x9F\x98\x80 \xE4\xB8\xAD");
	ck_scrub("\x80\xBF", 0, FFFD FFFD);                     /* stray continuations */
	ck_scrub("\xC0\xAF", 0, FFFD FFFD);                     /* overlong '/' */
	ck_scrub("\xE0\x80\xAF", 0, FFFD FFFD FFFD);            /* overlong, 3 bytes */
	ck_scrub("\xF0\x80\x80\xAF", 0, FFFD FFFD FFFD FFFD);   /* overlong, 4 bytes */
	ck_scrub("\xED\xA0\x80", 0, FFFD FFFD FFFD);            /* surrogate U+D800 */
	ck_scrub("\xF4\x90\x80\x80", 0, FFFD FFFD FFFD FFFD);   /* past U+10FFFF */
	ck_scrub("\xF5\xFE\xFF", 0, FFFD FFFD FFFD);
	ck_scrub("\xF4\x8F\xBF\xBF", 0, "\xF4\x8F\xBF\xBF");    /* U+10FFFF itself */
	ck_scrub("\xEF\xBF\xBD", 0, FFFD);
}
END_TEST

START_TEST(scrub_truncated_sequences)
{
	ck_scrub("a\xC3", 0, "a" FFFD);
	ck_scrub("a\xE2\x82", 0, "a" FFFD);                     /* one per maximal subpart */
	ck_scrub("a\xF0\x9F\x98", 0, "a" FFFD);
	ck_scrub("\xE2\x82z", 0, FFFD "z");
	ck_scrub("\xF0\x9F\x98\xE2\x82\xAC", 0, FFFD "\xE2\x82\xAC");
	ck_scrub("\xC3\xC3\xA9", 0, FFFD "\xC3\xA9");
}
END_TEST

START_TEST(scrub_limits_characters)
{
	size_t n = 20000;
	char *big = xmalloc(2 * n + 1);
	for (size_t i = 0; i < n; i++)
		memcpy(big + 2 * i, "\xC3\xA9", 2);
	big[2 * n] = '\0';
	char *s = utf8_scrub(big, 2 * n, 10000);
	ck_assert_uint_eq(strlen(s), 20000);                    /* 10000 two-byte characters */
	ck_assert_uint_eq(count_chars(s), 10000);
	free(s);
	s = utf8_scrub(big, 2 * n, 0);
	ck_assert_str_eq(s, big);
	free(s);
	free(big);

	ck_scrub("ab\xff\xC3\xA9" "cd", 3, "ab" FFFD);
	ck_scrub("ab\xff\xC3\xA9" "cd", 4, "ab" FFFD "\xC3\xA9");
	ck_scrub("abc", 10, "abc");
	ck_scrub("\xF0\x9F\x98\x80\xF0\x9F\x98\x80", 1, "\xF0\x9F\x98\x80");
}
END_TEST

START_TEST(scrub_tail_keeps_the_end)
{
	char *t = utf8_scrub_tail("hello world", 11, 5);
	ck_assert_str_eq(t, "world");
	free(t);
	t = utf8_scrub_tail("hi", 2, 5);
	ck_assert_str_eq(t, "hi");
	free(t);
	t = utf8_scrub_tail("abc\xff", 4, 0);
	ck_assert_str_eq(t, "abc" FFFD);
	free(t);
	t = utf8_scrub_tail("x\xF0\x9F\x98\x80\xF0\x9F\x98\x80\xff", 10, 2);
	ck_assert_str_eq(t, "\xF0\x9F\x98\x80" FFFD);
	free(t);
	t = utf8_scrub_tail("", 0, 3);
	ck_assert_str_eq(t, "");
	free(t);

	/* a long output: the last 10000 characters, whole characters only */
	size_t n = 30001;
	char *big = xmalloc(3 * n + 1);
	for (size_t i = 0; i < n; i++)
		memcpy(big + 3 * i, "\xE4\xB8\xAD", 3);
	big[0] = 'A';               /* a broken first character, far from the tail */
	t = utf8_scrub_tail(big, 3 * n, 10000);
	ck_assert_uint_eq(strlen(t), 30000);
	ck_assert_uint_eq(count_chars(t), 10000);
	ck_assert(memcmp(t, "\xE4\xB8\xAD", 3) == 0);
	free(t);
	free(big);
}
END_TEST

/* The tail must equal the end of a full scrub, wherever the window starts. */
START_TEST(scrub_tail_agrees_with_full_scrub)
{
	static const unsigned char alphabet[] = {
		'a', 0x80, 0xBF, 0xC2, 0xC3, 0xA9, 0xE0, 0xA0, 0xE2, 0x82, 0xAC, 0xED, 0x9F,
		0xF0, 0x90, 0x9F, 0x98, 0xF4, 0x8F, 0xFF,
	};
	unsigned int seed = 12345;
	char buf[64];
	for (int iter = 0; iter < 20000; iter++) {
		size_t len = (size_t)(rand_r(&seed) % 48);
		for (size_t i = 0; i < len; i++)
			buf[i] = (char)alphabet[rand_r(&seed) % sizeof alphabet];
		size_t max = 1 + (size_t)(rand_r(&seed) % 8);
		char *full = utf8_scrub(buf, len, 0);
		size_t cut = strlen(full), chars = 0;
		while (cut > 0 && chars < max) {
			cut--;
			if (((unsigned char)full[cut] & 0xC0) != 0x80)
				chars++;
		}
		char *tail = utf8_scrub_tail(buf, len, max);
		ck_assert_str_eq(tail, full + cut);
		free(full);
		free(tail);
	}
}
END_TEST

/* What the text log makes of a handler's bytes (log.c): the literal in escaped is want. */
#define CHECK_ESCAPED(in, want)                                             \
	do {                                                                \
		struct sbuf b_;                                             \
		sb_init(&b_);                                               \
		utf8_escape_text(&b_, in, sizeof(in) - 1);                  \
		ck_assert_str_eq(b_.s, want);                               \
		sb_free(&b_);                                               \
	} while (0)

START_TEST(escape_text_shows_what_a_terminal_would_act_on)
{
	CHECK_ESCAPED("x\033[2J\b\377\0after", "x\\x1b[2J\\x08\\xff\\x00after");
	/* valid UTF-8 and tab kept; DEL and C1 (here CSI) escaped; line breaks are spaces */
	CHECK_ESCAPED("caf\xc3\xa9 \xf0\x9f\x98\x80\t|", "caf\xc3\xa9 \xf0\x9f\x98\x80\t|");
	CHECK_ESCAPED("a\x7f" "b\xc2\x9b" "c\xc2\xa0", "a\\x7fb\\u009bc\xc2\xa0");
	CHECK_ESCAPED("one\r\ntwo\n", "one  two ");
	/* an invalid sequence: each of its bytes; a truncated one at the end likewise */
	CHECK_ESCAPED("\xe2\x82(\xed\xa0\x80\xf0\x9f\x98", "\\xe2\\x82(\\xed\\xa0\\x80\\xf0\\x9f\\x98");
	CHECK_ESCAPED("\\x1b stays", "\\x1b stays");
	CHECK_ESCAPED("", "");
}
END_TEST

/* ---------------------------------------------------------------------------------------
 * suite
 * ------------------------------------------------------------------------------------- */

static Suite *json_suite(void)
{
	Suite *s = suite_create("json");
	TCase *tc;

	tc = tcase_create("edit");
	tcase_add_test(tc, edit_keeps_every_other_byte);
	tcase_add_test(tc, edit_replaces_in_place);
	tcase_add_test(tc, edit_removes_first_middle_last_only);
	tcase_add_test(tc, edit_removes_with_whitespace);
	tcase_add_test(tc, edit_appends);
	tcase_add_test(tc, edit_many_at_once);
	tcase_add_test(tc, edit_last_edit_of_a_key_wins);
	tcase_add_test(tc, edit_duplicate_keys);
	tcase_add_test(tc, edit_matches_decoded_keys);
	tcase_add_test(tc, edit_keeps_invalid_utf8_bytes);
	tcase_add_test(tc, edit_rejects_malformed);
	tcase_add_test(tc, edit_deep_nesting);
	suite_add_tcase(s, tc);

	tc = tcase_create("span");
	tcase_add_test(tc, span_finds_top_level_values);
	tcase_add_test(tc, span_reports_absent_and_malformed);
	tcase_add_test(tc, array_spans_give_each_element_text);
	suite_add_tcase(s, tc);

	tc = tcase_create("valid");
	tcase_add_test(tc, valid_accepts_rfc8259);
	tcase_add_test(tc, valid_rejects_the_rest);
	tcase_add_test(tc, invalid_at_points_at_the_trouble);
	suite_add_tcase(s, tc);

	tc = tcase_create("canonical");
	tcase_add_test(tc, canonical_vectors);
	tcase_add_test(tc, canonical_strings);
	tcase_add_test(tc, canonical_numbers);
	tcase_add_test(tc, canonical_duplicate_keys);
	tcase_add_test(tc, canonical_rejects_invalid);
	tcase_add_test(tc, canonical_is_idempotent);
	suite_add_tcase(s, tc);

	tc = tcase_create("float");
	/* ruby_float_round_trips is 20 000 conversions of up to 17 snprintf each: 1.1 s of
	 * CPU under TSan, past Check's default 4 s of wall clock on a loaded host. */
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, ruby_float_vectors);
	tcase_add_test(tc, ruby_float_round_trips);
	suite_add_tcase(s, tc);

	tc = tcase_create("quote");
	tcase_add_test(tc, quote_escapes_like_ruby);
	suite_add_tcase(s, tc);

	tc = tcase_create("utf8");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, scrub_replaces_invalid_sequences);
	tcase_add_test(tc, scrub_truncated_sequences);
	tcase_add_test(tc, scrub_limits_characters);
	tcase_add_test(tc, scrub_tail_keeps_the_end);
	tcase_add_test(tc, scrub_tail_agrees_with_full_scrub);
	tcase_add_test(tc, escape_text_shows_what_a_terminal_would_act_on);
	suite_add_tcase(s, tc);

	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(json_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
