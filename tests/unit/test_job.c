/* SPDX-License-Identifier: MIT */
/* Unit tests: the job rules of src/job.c (retry budget, backoff, failure entries,
 * wrappers, error messages, digests) and error classification / log sites. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "job.h"
#include "json.h"
#include "log.h"
#include "redis.h"
#include "scripts.h"
#include "sentinel.h"
#include "util.h"

static int budget(const char *json)
{
	return job_max_retries(json, strlen(json));
}

START_TEST(test_retry_budget)
{
	ck_assert_int_eq(budget("false"), 0);
	ck_assert_int_eq(budget("true"), 25);
	ck_assert_int_eq(budget("null"), 25);
	ck_assert_int_eq(job_max_retries(NULL, 0), 25);
	ck_assert_int_eq(budget("3"), 3);
	ck_assert_int_eq(budget("2.0"), 2);
	ck_assert_int_eq(budget("2.9"), 2);
	ck_assert_int_eq(budget("1e3"), 1000);      /* a JSON number: a Float to Ruby, truncated */
	ck_assert_int_eq(budget("1e300"), 1000000000);
	ck_assert_int_eq(budget("\"4\""), 4);
	ck_assert_int_eq(budget("{}"), 0);
	ck_assert_int_eq(budget("\"lots\""), 0);
	ck_assert_int_eq(budget("[]"), 0);
	ck_assert_int_eq(budget("-3"), 0);
}
END_TEST

/* FR-4: a string retry is read as the cogworker gem reads it, Integer(s, exception: false)
 * || 0, so the budget does not depend on which process files the failure. Each value was
 * checked against Ruby 3's Integer(). */
START_TEST(test_retry_string_as_ruby_integer)
{
	static const struct { const char *json; int want; } cases[] = {
		{ "\"1e3\"", 0 }, { "\"2.5\"", 0 }, { "\"1_000\"", 1000 },
		{ "\"4\"", 4 }, { "\" 7 \"", 7 }, { "\"\\t\\n7\\r\\f\\u000b\"", 7 },
		{ "\"+5\"", 5 }, { "\"-5\"", 0 }, { "\"-0\"", 0 }, { "\"0\"", 0 }, { "\"00\"", 0 },
		{ "\"010\"", 8 }, { "\"0_10\"", 8 }, { "\"08\"", 0 }, { "\"0_8\"", 0 },
		{ "\"0x1f\"", 31 }, { "\"0X1F\"", 31 }, { "\"0x1_f\"", 31 }, { "\"0x_1\"", 0 },
		{ "\"0x0_f\"", 15 }, { "\"0x\"", 0 }, { "\"0b101\"", 5 }, { "\"0b102\"", 0 },
		{ "\"0o17\"", 15 }, { "\"0d19\"", 19 }, { "\"0d0x1\"", 0 }, { "\"1__0\"", 0 },
		{ "\"_1\"", 0 }, { "\"1_\"", 0 }, { "\"1_ \"", 0 }, { "\"1_0 \"", 10 },
		{ "\"0__1\"", 0 }, { "\"0_\"", 0 }, { "\"\"", 0 }, { "\" \"", 0 }, { "\"+\"", 0 },
		{ "\"- 1\"", 0 }, { "\"+-1\"", 0 }, { "\"1 2\"", 0 }, { "\"0 7\"", 0 },
		{ "\"07 \"", 7 }, { "\"0.5\"", 0 }, { "\"12abc\"", 0 }, { "\"\\u00a012\"", 0 },
		{ "\"12\\u0000\"", 0 }, { "\"1_0\\u0000x\"", 10 },      /* Ruby's second scan ends at NUL */
		{ "\"99999999999999999999999\"", 1000000000 }, { "\"1_000_000_000_000\"", 1000000000 },
		{ "\"0x7fffffff\"", 1000000000 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
		ck_assert_msg(budget(cases[i].json) == cases[i].want, "retry %s: %d, not %d",
		              cases[i].json, budget(cases[i].json), cases[i].want);
	/* through job_parse, from the text (a NUL inside the string is not cut off, as cJSON
	 * would cut it) */
	struct job j;
	const char *raw = "{\"class\":\"R\",\"jid\":\"a\",\"retry\":\"12\\u0000\"}";
	job_parse(&j, raw, strlen(raw), NULL);
	ck_assert_int_eq(j.max_retries, 0);
	job_free(&j);
	raw = "{\"class\":\"R\",\"jid\":\"a\",\"retry\":\"1_000\"}";
	job_parse(&j, raw, strlen(raw), NULL);
	ck_assert_int_eq(j.max_retries, 1000);
	job_free(&j);
}
END_TEST

static double deadline(const char *json, double expires_in, int *from_job)
{
	cJSON *v = cJSON_Parse(json);
	double d = job_deadline(v, expires_in, from_job);
	cJSON_Delete(v);
	return d;
}

/* DL: the deadline (doc/protocol.md §7.31): expires_at wins; else expires_in after
 * enqueued_at, at, created_at; a non-number expires_at is no deadline. */
START_TEST(test_deadline)
{
	int own;
	ck_assert_double_eq(deadline("{\"expires_at\":1700000000.5}", 0, &own), 1700000000.5);
	ck_assert_int_eq(own, 1);
	ck_assert_double_eq(deadline("{\"expires_at\":1700000000,\"enqueued_at\":1}", 60, &own),
	                    1700000000);
	ck_assert_double_eq(deadline("{\"enqueued_at\":1700000000,\"at\":5,\"created_at\":7}",
	                             60, &own), 1700000060);
	ck_assert_int_eq(own, 0);
	ck_assert_double_eq(deadline("{\"at\":1700000000,\"created_at\":7}", 60, &own),
	                    1700000060);
	ck_assert_double_eq(deadline("{\"created_at\":1700000000}", 60, &own), 1700000060);
	ck_assert_double_eq(deadline("{\"enqueued_at\":1700000000}", 0, &own), 0);
	ck_assert_double_eq(deadline("{\"expires_at\":\"soon\",\"enqueued_at\":1700000000}", 10,
	                             &own), 1700000010);
	ck_assert_double_eq(deadline("{\"expires_at\":-1}", 0, &own), 0);
	ck_assert_double_eq(deadline("{}", 60, &own), 0);
	ck_assert_double_eq(deadline("[1]", 60, &own), 0);
	ck_assert_double_eq(job_deadline(NULL, 60, &own), 0);
}
END_TEST

START_TEST(test_backoff_bounds)
{
	for (long n = 1; n <= 5; n++) {
		double lo = (double)(n * n * n * n) + 15, hi = lo + 29.0 * (double)(n + 1);
		for (int i = 0; i < 500; i++) {
			double d = job_backoff(n);
			ck_assert(d >= lo && d <= hi);
			ck_assert(d == floor(d));
		}
	}
}
END_TEST

START_TEST(test_parse_fields)
{
	struct job j;
	const char *raw = "{\"class\":\"R\",\"args\":[1, 12345678901234567890],\"queue\":\"q\","
	                  "\"jid\":\"abc\",\"retry\":\"4\",\"retry_count\":3,"
	                  "\"periodic_pjid\":\"pj\",\"periodic_until_executed\":true,"
	                  "\"unique\":\"until_executed\"}";
	job_parse(&j, raw, strlen(raw), "q");
	ck_assert_ptr_nonnull(j.obj);
	ck_assert_str_eq(j.cls, "R");
	ck_assert_str_eq(j.queue, "q");
	ck_assert_str_eq(j.args_json, "[1, 12345678901234567890]");
	ck_assert_int_eq(j.retry_count, 3);
	ck_assert_int_eq(j.max_retries, 4);
	ck_assert_str_eq(j.pjid, "pj");
	ck_assert_int_eq(j.periodic_until_executed, 1);
	ck_assert_int_eq(j.unique, 1);
	job_free(&j);

	job_parse(&j, "{not json", 9, "default");
	ck_assert_ptr_null(j.obj);
	ck_assert_ptr_nonnull(j.parse_error);
	job_free(&j);
	job_parse(&j, "{\"a\":1} x", 9, "default");
	ck_assert_ptr_null(j.obj);
	job_free(&j);
	job_parse(&j, "[1]", 3, "default");
	ck_assert_ptr_null(j.obj);
	job_free(&j);
	/* counts too big for a long are capped (found by tests/fuzz/fuzz_job: 1e300 was cast) */
	raw = "{\"class\":\"R\",\"jid\":\"j\",\"retry_count\":1e300,"
	      "\"interrupted_count\":\"99999999999999999999999\"}";
	job_parse(&j, raw, strlen(raw), "q");
	ck_assert_int_eq(j.retry_count, 1000000000);
	ck_assert_int_eq(j.interrupted_count, 1000000000);
	job_free(&j);
	/* a queue that is not a usable string falls back to default */
	job_parse(&j, "{\"class\":\"X\",\"queue\":null}", 26, NULL);
	ck_assert_str_eq(j.queue, "default");
	job_free(&j);
}
END_TEST

/* The reason job_parse gives for raw, or NULL for a job that may run. */
static char *invalid_of(const char *raw)
{
	struct job j;
	job_parse(&j, raw, strlen(raw), "default");
	ck_assert_ptr_nonnull(j.obj);
	char *why = j.invalid ? xstrdup(j.invalid) : NULL;
	job_free(&j);
	return why;
}

#define ck_invalid(raw, reason)                                                         \
	do {                                                                            \
		char *why_ = invalid_of(raw);                                           \
		ck_assert_msg(why_ && strcmp(why_, reason) == 0, "%s: %s", raw,         \
		              why_ ? why_ : "(valid)");                                 \
		free(why_);                                                             \
	} while (0)

/* HD-1, HD-3: an object that is no job is invalid, with the reason its burial gives. */
START_TEST(test_invalid_jobs)
{
	const char *ok = "{\"class\":\"R\",\"args\":[],\"jid\":\"j\"}";
	char *why = invalid_of(ok);
	ck_assert_ptr_null(why);
	why = invalid_of("{\"class\":\"R\",\"jid\":\"j\"}");        /* args default to [] */
	ck_assert_ptr_null(why);
	ck_invalid("{\"args\":[],\"jid\":\"j\"}", "not a job: no class");
	ck_invalid("{\"class\":7,\"args\":[],\"jid\":\"j\"}", "not a job: class is not a string");
	ck_invalid("{\"class\":[\"R\"],\"jid\":\"j\"}", "not a job: class is not a string");
	ck_invalid("{\"class\":\"\",\"jid\":\"j\"}", "not a job: class is an empty string");
	ck_invalid("{\"class\":\"R\",\"args\":{},\"jid\":\"j\"}", "not a job: args is not an array");
	ck_invalid("{\"class\":\"R\",\"args\":\"[1]\",\"jid\":\"j\"}",
	           "not a job: args is not an array");
	ck_invalid("{\"class\":\"R\",\"args\":null,\"jid\":\"j\"}", "not a job: args is not an array");
	ck_invalid("{\"class\":\"R\",\"args\":[]}", "not a job: no jid");
	ck_invalid("{\"class\":\"R\",\"jid\":5}", "not a job: jid is not a non-empty string");
	ck_invalid("{\"class\":\"R\",\"jid\":\"\"}", "not a job: jid is not a non-empty string");
	/* NUL inside: cJSON would read "Rec", and the handler of Rec ran */
	ck_invalid("{\"class\":\"Rec\\u0000X\",\"jid\":\"j\"}",
	           "not a job: class holds a NUL character (\\u0000)");
	ck_invalid("{\"class\":\"\\u0000\",\"jid\":\"j\"}",
	           "not a job: class holds a NUL character (\\u0000)");
	ck_invalid("{\"class\":\"R\",\"jid\":\"j\\u0000k\"}",
	           "not a job: jid holds a NUL character (\\u0000)");
	ck_invalid("{\"class\":\"R\",\"jid\":\"j\",\"queue\":\"a\\u0000b\"}",
	           "not a job: queue holds a NUL character (\\u0000)");
	/* "\\u0000" is a backslash and "u0000", no NUL */
	why = invalid_of("{\"class\":\"R\\\\u0000\",\"jid\":\"j\"}");
	ck_assert_ptr_null(why);
	/* HD-10: bytes that are not UTF-8, anywhere in the text, even where a field is also
	 * wrong (a cut sequence, an overlong '/', a surrogate); escapes and valid UTF-8 pass */
	ck_invalid("{\"class\":\"R\",\"args\":[\"caf\xe9\"],\"jid\":\"j\"}",
	           "not a job: its JSON is not UTF-8 (byte 26 is \\xE9)");
	ck_invalid("{\"class\":\"R\xc3\",\"jid\":\"j\"}",
	           "not a job: its JSON is not UTF-8 (byte 12 is \\xC3)");
	ck_invalid("{\"class\":\"R\",\"jid\":\"j\",\"x\":\"\xc0\xaf\"}",
	           "not a job: its JSON is not UTF-8 (byte 29 is \\xC0)");
	ck_invalid("{\"jid\":\"j\",\"x\":\"\xed\xa0\x80\"}",
	           "not a job: its JSON is not UTF-8 (byte 17 is \\xED)");
	why = invalid_of("{\"class\":\"R\",\"args\":[\"caf\xc3\xa9\",\"\\u00e9\"],\"jid\":\"j\"}");
	ck_assert_ptr_null(why);
}
END_TEST

/* HD-5: a repeated key counts with its last value, as Ruby reads it (cJSON takes the
 * first): the daemon must not run another handler than the class the fleet sees. Escaped
 * keys too. */
START_TEST(test_fields_read_as_ruby_does)
{
	struct job j;
	const char *raw = "{\"class\":\"First\",\"jid\":\"a\",\"queue\":\"q1\",\"retry\":false,"
	                  "\"cl\\u0061ss\":\"Last\",\"jid\":\"b\",\"queue\":\"q2\",\"retry\":3}";
	job_parse(&j, raw, strlen(raw), NULL);
	ck_assert_ptr_null(j.invalid);
	ck_assert_str_eq(j.cls, "Last");
	ck_assert_str_eq(j.jid, "b");
	ck_assert_str_eq(j.queue, "q2");
	ck_assert_int_eq(j.max_retries, 3);
	job_free(&j);
	/* a key holding NUL is another key: "class\u0000" is not "class" */
	raw = "{\"class\":\"Ok\",\"class\\u0000\":\"Evil\",\"jid\":\"a\"}";
	job_parse(&j, raw, strlen(raw), NULL);
	ck_assert_ptr_null(j.invalid);
	ck_assert_str_eq(j.cls, "Ok");
	job_free(&j);
	raw = "{\"class\":\"\\u00e9t\\u00e9\\ud83d\\ude00\",\"jid\":\"a\"}";
	job_parse(&j, raw, strlen(raw), NULL);
	ck_assert_str_eq(j.cls, "\xc3\xa9t\xc3\xa9\xf0\x9f\x98\x80");
	job_free(&j);
}
END_TEST

START_TEST(test_failure_payload_byte_exact)
{
	const char *raw = "{\"class\":\"F\",\"args\":[9007199254740993, 12345678901234567890, "
	                  "1.5e300, 0.1, \"\xc3\xa9\\n\\u0001\"],\"retry\":3,\"failure_outcome\":\"x\","
	                  "\"jid\":\"j1\"}";
	struct job j;
	job_parse(&j, raw, strlen(raw), "default");
	char *p = job_failure_payload(&j, "Cogworker::HandlerFailed", "exit status 1: kaboom",
	                              1767225600.25, 1, 0, 0);
	ck_assert_ptr_nonnull(p);
	ck_assert_str_eq(p, "{\"class\":\"F\",\"args\":[9007199254740993, 12345678901234567890, "
	                    "1.5e300, 0.1, \"\xc3\xa9\\n\\u0001\"],\"retry\":3,\"jid\":\"j1\","
	                    "\"error_class\":\"Cogworker::HandlerFailed\","
	                    "\"error_message\":\"exit status 1: kaboom\","
	                    "\"failed_at\":1767225600.250000,\"retry_count\":1}");
	free(p);
	job_free(&j);

	/* failed_at keeps the first failure; retry_count is replaced in place */
	const char *again = "{\"class\":\"F\",\"retry_count\":1,\"failed_at\":1.5,\"jid\":\"j\"}";
	job_parse(&j, again, strlen(again), "default");
	p = job_failure_payload(&j, "E", "m", 99.0, 2, 0, 0);
	ck_assert_str_eq(p, "{\"class\":\"F\",\"retry_count\":2,\"failed_at\":1.5,\"jid\":\"j\","
	                    "\"error_class\":\"E\",\"error_message\":\"m\"}");
	free(p);
	/* the interrupt path overwrites failed_at and counts interrupts */
	p = job_failure_payload(&j, "E", "m", 99.0, 2, 1, 1);
	ck_assert_str_eq(p, "{\"class\":\"F\",\"retry_count\":2,\"failed_at\":99.000000,\"jid\":\"j\","
	                    "\"error_class\":\"E\",\"error_message\":\"m\",\"interrupted_count\":1}");
	free(p);
	job_free(&j);
}
END_TEST

START_TEST(test_unparseable_wrapper)
{
	char *w = job_unparseable_wrapper("{not json", 9, "default", "JSON::ParserError",
	                                  "unexpected token at '{not json'", 10.0);
	cJSON *v = cJSON_Parse(w);
	ck_assert_ptr_nonnull(v);
	ck_assert_str_eq(cJSON_GetObjectItem(v, "class")->valuestring, "(unparseable)");
	ck_assert_str_eq(cJSON_GetObjectItem(v, "queue")->valuestring, "default");
	ck_assert_str_eq(cJSON_GetObjectItem(v, "raw_payload")->valuestring, "{not json");
	ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(v, "retry")));
	ck_assert_int_eq(strlen(cJSON_GetObjectItem(v, "jid")->valuestring), 24);
	ck_assert(cJSON_IsArray(cJSON_GetObjectItem(v, "args")));
	cJSON_Delete(v);
	free(w);
	/* schedule/retry entries have no queue: null; raw bytes are scrubbed to UTF-8 */
	w = job_unparseable_wrapper("bad \xff", 5, NULL, "Cogworker::InvalidJob", "x", 10.0);
	ck_assert(json_valid(w, strlen(w)));
	ck_assert_ptr_nonnull(strstr(w, "\"queue\":null"));
	ck_assert_ptr_nonnull(strstr(w, "bad \xef\xbf\xbd"));
	free(w);
}
END_TEST

START_TEST(test_error_message)
{
	char *m = job_error_message("Cogworker::HandlerFailed", "exit status 1", "kaboom\n", 7);
	ck_assert_str_eq(m, "exit status 1: kaboom");
	free(m);
	m = job_error_message("Cogworker::HandlerFailed", "exit status 1", "bad \xff", 5);
	ck_assert_str_eq(m, "exit status 1: bad \xef\xbf\xbd");
	free(m);
	m = job_error_message("Cogworker::HandlerFailed", "exit status 2", NULL, 0);
	ck_assert_str_eq(m, "exit status 2");
	free(m);
	/* FR-15: a message that cannot be built is #<ErrorClass> */
	m = job_error_message("Cogworker::HandlerFailed", NULL, "x", 1);
	ck_assert_str_eq(m, "#<Cogworker::HandlerFailed>");
	free(m);
	/* PX-7: at most 10 000 characters, starts with the status, ends with the output */
	size_t n = 50000;
	char *big = xmalloc(n);
	for (size_t i = 0; i < n; i++)
		big[i] = (char)('a' + i % 26);
	m = job_error_message("Cogworker::HandlerFailed", "exit status 1", big, n);
	ck_assert_uint_eq(strlen(m), 10000);
	ck_assert(strncmp(m, "exit status 1: ", 15) == 0);
	ck_assert(memcmp(m + strlen(m) - 26, big + n - 26, 26) == 0);
	free(m);
	free(big);
}
END_TEST

START_TEST(test_restamp_and_minimal_entry)
{
	const char *raw = "{\"class\":\"A\",\"args\":[12345678901234567890],\"enqueued_at\":1.0}";
	char *p = job_restamp_enqueued(raw, strlen(raw), 5.5);
	ck_assert_str_eq(p, "{\"class\":\"A\",\"args\":[12345678901234567890],\"enqueued_at\":5.500000}");
	free(p);
	p = job_minimal_dead_entry("{not json", 9, "j", "E", "m", 2.0);
	ck_assert(json_valid(p, strlen(p)));
	ck_assert_ptr_nonnull(strstr(p, "\"raw_payload\":\"{not json\""));
	free(p);
}
END_TEST

START_TEST(test_digests)
{
	/* UJ-1: SHA-1 of U|default|<canonical args> */
	char d[41], expect[41];
	ck_assert_int_eq(job_unique_digest("U", "default", "[1, \"a\", {\"b\": null}, 2.5, \"\\u00e9\\/\\n\"]", d), 0);
	const char *canon = "U|default|[1,\"a\",{\"b\":null},2.5,\"\xc3\xa9/\\n\"]";
	sha1_hex(canon, strlen(canon), expect);
	ck_assert_str_eq(d, expect);
	/* the PT fixture's pjid */
	ck_assert_int_eq(job_pjid("* * * * *", "P", "[{\"k\":\"v\"}]", d), 0);
	const char *text = "* * * * *|P|[{\"k\":\"v\"}]";
	sha1_hex(text, strlen(text), expect);
	ck_assert_str_eq(d, expect);
	ck_assert_int_eq(job_pjid("x", "P", "[oops", d), -1);
}
END_TEST

START_TEST(test_error_classification)
{
	ck_assert(redis_error_is_unavailable("READONLY You can't write against a read only replica."));
	ck_assert(redis_error_is_unavailable("LOADING Redis is loading the dataset in memory"));
	ck_assert(redis_error_is_unavailable("MASTERDOWN Link with MASTER is down"));
	ck_assert(redis_error_is_unavailable("TRYAGAIN Multiple keys request during rehashing"));
	ck_assert(redis_error_is_unavailable("BUSY Redis is busy running a script."));
	ck_assert(redis_error_is_unavailable("ERR Error running script (call to f_x): @user_script:1: "
	                                     "-READONLY You can't write against a read only replica."));
	ck_assert(!redis_error_is_unavailable("WRONGTYPE Operation against a key holding the wrong kind of value"));
	ck_assert(!redis_error_is_unavailable("BUSYKEY Target key name already exists."));
	ck_assert(!redis_error_is_unavailable("BUSYGROUP Consumer Group name already exists"));
	ck_assert(!redis_error_is_unavailable("OOM command not allowed when used memory > 'maxmemory'."));
	ck_assert(!redis_error_is_unavailable("NOPERM this user has no permissions"));
	ck_assert(!redis_error_is_unavailable("ERR Error running script: -BUSYKEY x"));
	/* A demoted primary's replies: unavailable, and with Sentinel a reason to ask again. */
	ck_assert(redis_error_is_unavailable("NOREPLICAS Not enough good replicas to write."));
	ck_assert(redis_error_is_unavailable("UNBLOCKED force unblock from blocking operation, "
	                                     "instance state changed (master -> replica?)"));
	ck_assert(redis_error_is_demoted("READONLY You can't write against a read only replica."));
	ck_assert(redis_error_is_demoted("MASTERDOWN Link with MASTER is down"));
	ck_assert(redis_error_is_demoted("NOREPLICAS Not enough good replicas to write."));
	ck_assert(redis_error_is_demoted("UNBLOCKED force unblock"));
	ck_assert(redis_error_is_demoted("ERR Error running script (call to f_x): @user_script:1: "
	                                 "-READONLY You can't write against a read only replica."));
	ck_assert(!redis_error_is_demoted("LOADING Redis is loading the dataset in memory"));
	ck_assert(!redis_error_is_demoted("BUSY Redis is busy running a script."));
	ck_assert(!redis_error_is_demoted("READONLYX"));
	ck_assert(!redis_error_is_demoted(NULL));
}
END_TEST

/* SN-4: +switch-master payloads, and the generation they move (sentinel.c). */
START_TEST(test_sentinel_switch_message)
{
	char host[64];
	int port = 0;
	ck_assert(sentinel_parse_switch("mymaster 127.0.0.1 6379 10.0.0.2 6380", "mymaster", host,
	                                sizeof host, &port));
	ck_assert_str_eq(host, "10.0.0.2");
	ck_assert_int_eq(port, 6380);
	ck_assert(!sentinel_parse_switch("other 127.0.0.1 6379 10.0.0.2 6380", "mymaster", host,
	                                 sizeof host, &port));
	ck_assert(!sentinel_parse_switch("mymaster 127.0.0.1 6379", "mymaster", host, sizeof host,
	                                 &port));
	/* The generation moves for a new primary only: every sentinel announces the same one. */
	unsigned g = sentinel_generation();
	ck_assert_int_eq(sentinel_hint(g, host, sizeof host, &port), -1);
	ck_assert_int_eq(sentinel_switched("10.0.0.2", 6380), 1);
	ck_assert_int_eq(sentinel_switched("10.0.0.2", 6380), 0);
	ck_assert_uint_eq(sentinel_generation(), g + 1);
	ck_assert_int_eq(sentinel_hint(g + 1, host, sizeof host, &port), 0);
	ck_assert_str_eq(host, "10.0.0.2");
	ck_assert_int_eq(sentinel_hint(g, host, sizeof host, &port), -1);
	ck_assert_int_eq(sentinel_switched("10.0.0.1", 6379), 1);
	ck_assert_uint_eq(sentinel_generation(), g + 2);
}
END_TEST

/* RE-2 [unit]: exact counts of the outage summaries, by capturing stderr. */
static char *capture(void (*fn)(void))
{
	char path[] = "/tmp/cw-logXXXXXX";
	int fd = mkstemp(path);
	int saved = dup(2);
	dup2(fd, 2);
	fn();
	dup2(saved, 2);
	close(saved);
	lseek(fd, 0, SEEK_SET);
	char *buf = xcalloc(1, 65536);
	ssize_t n = read(fd, buf, 65535);
	(void)n;
	close(fd);
	unlink(path);
	return buf;
}

static void outage(void)
{
	struct log_site s = LOG_SITE("Fetch");
	for (int i = 0; i < 100; i++)
		log_site_unavailable(&s, "connection refused", 1000.0 + i * 0.1);
	log_site_unavailable(&s, "connection refused", 1070.0);
	log_site_recovered(&s, 1071.0);
	log_site_recovered(&s, 1072.0);
}

static int count(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

START_TEST(test_log_site_summary)
{
	char *out = capture(outage);
	ck_assert_int_eq(count(out, "Fetch: Redis unavailable"), 1);
	ck_assert_int_eq(count(out, "(repeats summarized every 60s)"), 1);
	ck_assert_int_eq(count(out, "Fetch: still unavailable — 100 more error(s)"), 1);
	ck_assert_int_eq(count(out, "Fetch: Redis available again after 101 error(s) over 71s"), 1);
	ck_assert_int_eq(count(out, "\n"), 3);
	free(out);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("job");
	TCase *tc = tcase_create("rules");
	tcase_add_test(tc, test_retry_budget);
	tcase_add_test(tc, test_retry_string_as_ruby_integer);
	tcase_add_test(tc, test_deadline);
	tcase_add_test(tc, test_backoff_bounds);
	tcase_add_test(tc, test_parse_fields);
	tcase_add_test(tc, test_invalid_jobs);
	tcase_add_test(tc, test_fields_read_as_ruby_does);
	tcase_add_test(tc, test_failure_payload_byte_exact);
	tcase_add_test(tc, test_unparseable_wrapper);
	tcase_add_test(tc, test_error_message);
	tcase_add_test(tc, test_restamp_and_minimal_entry);
	tcase_add_test(tc, test_digests);
	tcase_add_test(tc, test_error_classification);
	tcase_add_test(tc, test_sentinel_switch_message);
	tcase_add_test(tc, test_log_site_summary);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
