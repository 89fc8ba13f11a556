/* SPDX-License-Identifier: MIT */
/*
 * Unit tests: the unique digest (doc/protocol.md §4.3, §4.5, §7.18) against vectors recorded with
 * cogworker's Ruby client, so that a lock taken by a Ruby producer is found by the daemon
 * and one taken by `cogworkerctl push --unique` is found by Ruby.
 *
 * Each vector was computed by Ruby 3.1.2 with the json gem 2.6.1, as the client computes
 * the digest before it pushes:
 *
 *   Digest::SHA1.hexdigest("#{klass}|#{queue}|" + JSON.generate(args))
 *
 * The "(as written by another producer)" rows give the same args in a spelling Ruby's
 * generator never writes (spaces, \u escapes, "\/", 1E16, 1.00, ...): what the daemon
 * hashes is the canonical form, the bytes JSON.generate(JSON.parse(text)) gives. Ruby
 * checked that each such text parses back to exactly the canonical form shown. The test
 * itself needs no Ruby.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "job.h"
#include "json.h"
#include "scripts.h"

struct vector {
	const char *name;
	const char *cls, *queue;
	const char *args;           /* the args text the daemon reads from the job */
	const char *canonical;      /* JSON.generate(args) */
	const char *digest;         /* Ruby's SHA-1 hex of "<class>|<queue>|<canonical>" */
};

static const struct vector vectors[] = {
	{ "ints", "Counter", "default",
	  "[1,2,3]",
	  "[1,2,3]",
	  "e0abb90f2e9e743c4cbf28e2915609fff178358a" },
	{ "ints (as written by another producer)", "Counter", "default",
	  "[1, 2, 3]",
	  "[1,2,3]",
	  "e0abb90f2e9e743c4cbf28e2915609fff178358a" },
	{ "ints (as written by another producer)", "Counter", "default",
	  "[ 1,2 ,3 ]",
	  "[1,2,3]",
	  "e0abb90f2e9e743c4cbf28e2915609fff178358a" },
	{ "big and negative ints", "Counter", "default",
	  "[0,-1,9007199254740993,12345678901234567890,-98765432109876543210]",
	  "[0,-1,9007199254740993,12345678901234567890,-98765432109876543210]",
	  "66a70f089d1d9ce9a1a0bf51352b302b567592ee" },
	{ "empty args", "Ping", "default",
	  "[]",
	  "[]",
	  "46087c3af459e53264ab4fa6e6abf115446c428d" },
	{ "empty args (as written by another producer)", "Ping", "default",
	  "[ ]",
	  "[]",
	  "46087c3af459e53264ab4fa6e6abf115446c428d" },
	{ "string escapes", "Mailer", "mail",
	  "[\"a\\\"b\\\\c\",\"line1\\nline2\\ttab\\r\\b\\f\",\"\\u0000\\u0001\\u001f\177\",\"/path/to\",\"</script>\"]",
	  "[\"a\\\"b\\\\c\",\"line1\\nline2\\ttab\\r\\b\\f\",\"\\u0000\\u0001\\u001f\177\",\"/path/to\",\"</script>\"]",
	  "f0fffb6f74876e2987166bd044fdc2b70aa73e6e" },
	{ "string escapes (as written by another producer)", "Mailer", "mail",
	  "[\"a\\\"b\\\\c\", \"line1\\nline2\\ttab\\r\\b\\f\", \"\\u0000\\u0001\\u001F\\u007f\", \"\\/path\\/to\", \"<\\/script>\"]",
	  "[\"a\\\"b\\\\c\",\"line1\\nline2\\ttab\\r\\b\\f\",\"\\u0000\\u0001\\u001f\177\",\"/path/to\",\"</script>\"]",
	  "f0fffb6f74876e2987166bd044fdc2b70aa73e6e" },
	{ "non-ascii", "Greeter", "default",
	  "[\"é\",\"日本語\",\"😀\",\"\342\200\250\342\200\251\",\"Ünïcödé\"]",
	  "[\"é\",\"日本語\",\"😀\",\"\342\200\250\342\200\251\",\"Ünïcödé\"]",
	  "3864479b690c43a08a059328e3cc24b2f4c4446e" },
	{ "non-ascii (as written by another producer)", "Greeter", "default",
	  "[\"\\u00e9\", \"\\u65e5\\u672c\\u8a9e\", \"\\ud83d\\ude00\", \"\\u2028\\u2029\", \"\\u00dcn\\u00efc\\u00f6d\\u00e9\"]",
	  "[\"é\",\"日本語\",\"😀\",\"\342\200\250\342\200\251\",\"Ünïcödé\"]",
	  "3864479b690c43a08a059328e3cc24b2f4c4446e" },
	{ "nested objects", "Billing::Invoice", "critical",
	  "[{\"user\":{\"id\":42,\"tags\":[\"a\",\"b\"],\"meta\":{\"z\":1,\"a\":null}}},[[1,[2,[3]]]],{}]",
	  "[{\"user\":{\"id\":42,\"tags\":[\"a\",\"b\"],\"meta\":{\"z\":1,\"a\":null}}},[[1,[2,[3]]]],{}]",
	  "b658ba27680dac7982a2601ba293837c3e84c437" },
	{ "nested objects (as written by another producer)", "Billing::Invoice", "critical",
	  "[{\"user\": {\"id\": 42, \"tags\": [\"a\", \"b\"], \"meta\": {\"z\": 1, \"a\": null}}}, [[1, [2, [3]]]], {}]",
	  "[{\"user\":{\"id\":42,\"tags\":[\"a\",\"b\"],\"meta\":{\"z\":1,\"a\":null}}},[[1,[2,[3]]]],{}]",
	  "b658ba27680dac7982a2601ba293837c3e84c437" },
	{ "floats", "Stats", "default",
	  "[1.0,2.5,0.1,1.0e+16,1.0e-05,100.0,-0.5,1.5e+300,123456789.123]",
	  "[1.0,2.5,0.1,1.0e+16,1.0e-05,100.0,-0.5,1.5e+300,123456789.123]",
	  "82713a320a70666a9853d86f53f85a1e641b7f9c" },
	{ "floats (as written by another producer)", "Stats", "default",
	  "[1.00, 2.5, 0.1, 1E16, 0.00001, 1e2, -5e-1, 1.5e300, 123456789.123]",
	  "[1.0,2.5,0.1,1.0e+16,1.0e-05,100.0,-0.5,1.5e+300,123456789.123]",
	  "82713a320a70666a9853d86f53f85a1e641b7f9c" },
	{ "object keys with escapes and non-ASCII", "Sync", "default",
	  "[{\"ключ\":\"значение\",\"a\\\"b\":\"\\u0007\",\"x/y\":{\"\\t\":[null]}}]",
	  "[{\"ключ\":\"значение\",\"a\\\"b\":\"\\u0007\",\"x/y\":{\"\\t\":[null]}}]",
	  "ba1426729b43bac8632b5d3f676533d952ccc910" },
	{ "object keys with escapes and non-ASCII (as written by another producer)", "Sync", "default",
	  "[{\"\\u043a\\u043b\\u044e\\u0447\": \"\\u0437\\u043d\\u0430\\u0447\\u0435\\u043d\\u0438\\u0435\", \"a\\\"b\": \"\\u0007\", \"x\\/y\": {\"\\t\": [null]}}]",
	  "[{\"ключ\":\"значение\",\"a\\\"b\":\"\\u0007\",\"x/y\":{\"\\t\":[null]}}]",
	  "ba1426729b43bac8632b5d3f676533d952ccc910" },
	{ "float spellings", "Stats", "default",
	  "[-0.0,100000000000000.0,1.0e+15,123456789012345.0,1.234567890123456e+15,0.0001,5.0e-324,1.7976931348623157e+308,0.30000000000000004]",
	  "[-0.0,100000000000000.0,1.0e+15,123456789012345.0,1.234567890123456e+15,0.0001,5.0e-324,1.7976931348623157e+308,0.30000000000000004]",
	  "ae39c10ae1da721586d926e587174682f0e42205" },
	{ "float spellings (as written by another producer)", "Stats", "default",
	  "[-0.00, 1.0E14, 10e14, 123456789012345.000, 1234567890123456.0, 1e-4, 4.9e-324, 1.7976931348623157E308, 0.30000000000000004]",
	  "[-0.0,100000000000000.0,1.0e+15,123456789012345.0,1.234567890123456e+15,0.0001,5.0e-324,1.7976931348623157e+308,0.30000000000000004]",
	  "ae39c10ae1da721586d926e587174682f0e42205" },
	{ "literals", "Flags", "low",
	  "[true,false,null,\"\",[],{}]",
	  "[true,false,null,\"\",[],{}]",
	  "642c3c76dddea21ca5f91baa66cd680a43562f18" },
	{ "UJ-1", "U", "default",
	  "[1,\"a\",{\"b\":null},2.5,\"é/\\n\"]",
	  "[1,\"a\",{\"b\":null},2.5,\"é/\\n\"]",
	  "77f6bc16de2ac76daff5aab483c1ad168f940a8e" },
	{ "UJ-1 (as written by another producer)", "U", "default",
	  "[1, \"a\", {\"b\": null}, 2.5, \"\\u00e9\\/\\n\"]",
	  "[1,\"a\",{\"b\":null},2.5,\"é/\\n\"]",
	  "77f6bc16de2ac76daff5aab483c1ad168f940a8e" },
};
#define NVECTORS (sizeof vectors / sizeof *vectors)

START_TEST(test_ruby_vectors)
{
	const struct vector *v = &vectors[_i];
	char d[41];
	char *canon = json_canonical(v->args, strlen(v->args));
	ck_assert_msg(canon != NULL, "%s: not accepted: %s", v->name, v->args);
	ck_assert_msg(strcmp(canon, v->canonical) == 0, "%s: canonical JSON\n got %s\nwant %s",
	              v->name, canon, v->canonical);
	free(canon);
	ck_assert_int_eq(job_unique_digest(v->cls, v->queue, v->args, d), 0);
	ck_assert_msg(strcmp(d, v->digest) == 0, "%s: digest %s, Ruby's is %s", v->name, d,
	              v->digest);
}
END_TEST

/* The lock key the producer takes is the one the daemon releases: same funnel, and the
 * key names only class, queue and args (jid and timestamps are not in it). */
START_TEST(test_class_and_queue_are_part_of_the_digest)
{
	char a[41], b[41], c[41];
	ck_assert_int_eq(job_unique_digest("Counter", "default", "[1,2,3]", a), 0);
	ck_assert_int_eq(job_unique_digest("Counter", "other", "[1,2,3]", b), 0);
	ck_assert_int_eq(job_unique_digest("Counter2", "default", "[1,2,3]", c), 0);
	ck_assert_str_eq(a, "e0abb90f2e9e743c4cbf28e2915609fff178358a");
	ck_assert_str_ne(a, b);
	ck_assert_str_ne(a, c);
	/* the digest is 40 lowercase hex, as Ruby's hexdigest */
	for (int i = 0; i < 40; i++)
		ck_assert(strchr("0123456789abcdef", b[i]) != NULL);
	ck_assert_int_eq((int)strlen(b), 40);
}
END_TEST

/* Args Ruby would not generate (or not parse) give no digest: no lock is released for
 * them rather than a wrong one. */
START_TEST(test_args_without_a_canonical_form)
{
	static const char *const bad[] = {
		"[1,", "", "[1] x", "[\"\\ud800\"]", "[NaN]", "[Infinity]", "[1e999]",
		"[\"\001\"]", "[01]",
	};
	char d[41];
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		ck_assert_msg(job_unique_digest("U", "default", bad[i], d) == -1,
		              "accepted %s", bad[i]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("digest");
	TCase *tc = tcase_create("ruby");
	tcase_add_loop_test(tc, test_ruby_vectors, 0, (int)NVECTORS);
	tcase_add_test(tc, test_class_and_queue_are_part_of_the_digest);
	tcase_add_test(tc, test_args_without_a_canonical_form);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
