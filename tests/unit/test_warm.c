/* SPDX-License-Identifier: MIT */
/*
 * test_warm.c: src/warm_proto.c — the warm protocol's messages (doc/protocol.md §1.2): what
 * a warm process may send, each refusal with its reason, and the job message the daemon
 * writes (the job spliced byte for byte, one line).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "json.h"
#include "warm_proto.h"

static int parse(const char *line, struct warm_msg *m, char *why)
{
	return warm_msg_parse(line, strlen(line), m, why, 200);
}

#define ck_refused(line, reason)                                                  \
	do {                                                                      \
		struct warm_msg m_;                                               \
		char why_[200] = "";                                              \
		ck_assert_int_eq(parse(line, &m_, why_), -1);                     \
		ck_assert_str_eq(why_, reason);                                   \
		ck_assert_ptr_null(m_.error);                                     \
		ck_assert_ptr_null(m_.pct);                                       \
	} while (0)

START_TEST(test_ready)
{
	struct warm_msg m;
	char why[200];
	ck_assert_int_eq(parse("{\"type\":\"ready\"}", &m, why), 0);
	ck_assert_int_eq(m.type, WARM_MSG_READY);
	/* whitespace and members of a later version are fine */
	ck_assert_int_eq(parse(" { \"v\" : 2 , \"type\" : \"ready\" } ", &m, why), 0);
	ck_assert_int_eq(m.type, WARM_MSG_READY);
	warm_msg_free(&m);
}
END_TEST

START_TEST(test_done)
{
	struct warm_msg m;
	char why[200];
	ck_assert_int_eq(parse("{\"type\":\"done\",\"exit\":0}", &m, why), 0);
	ck_assert_int_eq(m.type, WARM_MSG_DONE);
	ck_assert_int_eq(m.exit, 0);
	ck_assert_int_eq(m.recycle, 0);
	ck_assert_ptr_null(m.error);
	ck_assert_ptr_null(m.jid);
	warm_msg_free(&m);
	ck_assert_int_eq(parse("{\"type\":\"done\",\"exit\":255,\"error\":\"a\\u0000b \\u00e9\","
	                       "\"recycle\":true,\"jid\":\"abc\"}", &m, why), 0);
	ck_assert_int_eq(m.exit, 255);
	ck_assert_int_eq(m.recycle, 1);
	ck_assert_uint_eq(m.error_len, 6);
	ck_assert_mem_eq(m.error, "a\0b \xc3\xa9", 6);
	ck_assert_str_eq(m.jid, "abc");
	warm_msg_free(&m);
	ck_assert_int_eq(parse("{\"type\":\"done\",\"exit\":1,\"error\":null,\"recycle\":false}",
	                       &m, why), 0);
	ck_assert_ptr_null(m.error);
	ck_assert_int_eq(m.recycle, 0);
	warm_msg_free(&m);
}
END_TEST

START_TEST(test_progress)
{
	struct warm_msg m;
	char why[200];
	ck_assert_int_eq(parse("{\"type\":\"progress\",\"pct\":12.5,\"message\":\"half\"}", &m,
	                       why), 0);
	ck_assert_int_eq(m.type, WARM_MSG_PROGRESS);
	ck_assert_str_eq(m.pct, "12.5");
	ck_assert_str_eq(m.message, "half");
	warm_msg_free(&m);
	ck_assert_int_eq(parse("{\"type\":\"progress\",\"pct\":-3e2}", &m, why), 0);
	ck_assert_str_eq(m.pct, "-3e2");
	ck_assert_ptr_null(m.message);
	warm_msg_free(&m);
}
END_TEST

START_TEST(test_refusals)
{
	ck_refused("", "not a JSON object");
	ck_refused("this is not json", "not a JSON object");
	ck_refused("[1,2]", "not a JSON object");
	ck_refused("{\"type\":\"ready\"} trailing", "not a JSON object");
	ck_refused("{\"type\":\"ready\"", "not a JSON object");
	ck_refused("{}", "no \"type\" string");
	ck_refused("{\"type\":3}", "no \"type\" string");
	ck_refused("{\"type\":\"readyx\"}", "unknown type \"readyx\"");
	ck_refused("{\"type\":\"ready\\u0000\"}", "unknown type \"ready\\u0000\"");
	ck_refused("{\"type\":\"done\"}", "\"done\" needs \"exit\", an integer from 0 to 255");
	ck_refused("{\"type\":\"done\",\"exit\":256}",
	           "\"done\" needs \"exit\", an integer from 0 to 255");
	ck_refused("{\"type\":\"done\",\"exit\":-1}",
	           "\"done\" needs \"exit\", an integer from 0 to 255");
	ck_refused("{\"type\":\"done\",\"exit\":1.0}",
	           "\"done\" needs \"exit\", an integer from 0 to 255");
	ck_refused("{\"type\":\"done\",\"exit\":\"0\"}",
	           "\"done\" needs \"exit\", an integer from 0 to 255");
	ck_refused("{\"type\":\"done\",\"exit\":0,\"recycle\":1}",
	           "\"recycle\" must be true or false");
	ck_refused("{\"type\":\"done\",\"exit\":0,\"error\":[]}", "\"error\" must be a string");
	ck_refused("{\"type\":\"done\",\"exit\":0,\"jid\":7}", "\"jid\" must be a string");
	ck_refused("{\"type\":\"progress\"}", "\"progress\" needs \"pct\", a number");
	ck_refused("{\"type\":\"progress\",\"pct\":\"40\"}", "\"progress\" needs \"pct\", a number");
	/* Kept as written, so bounded: it goes to status:<jid> as it is. */
	ck_refused("{\"type\":\"progress\",\"pct\":0.0000000000000000000000000000000000000000"
	           "00000000000000000000001}", "\"pct\" is a number of at most 64 characters");
	ck_refused("{\"type\":\"progress\",\"pct\":40,\"message\":5}",
	           "\"message\" must be a string");
}
END_TEST

START_TEST(test_job_message)
{
	const char *raw = "{\"class\":\"X\",\n\"args\":[9007199254740993,1.50,\"a\\nb\"]}";
	size_t len;
	char *m = warm_job_message(raw, strlen(raw), 0, &len);
	ck_assert_str_eq(m, "{\"type\":\"job\",\"job\":{\"class\":\"X\", \"args\":"
	                 "[9007199254740993,1.50,\"a\\nb\"]},\"deadline\":null}\n");
	ck_assert_uint_eq(len, strlen(m));
	ck_assert(json_valid(m, len - 1));
	free(m);
	m = warm_job_message("{}", 2, 1796176685.25, &len);
	ck_assert_str_eq(m, "{\"type\":\"job\",\"job\":{},\"deadline\":1796176685.250}\n");
	free(m);
}
END_TEST

static Suite *warm_suite(void)
{
	Suite *s = suite_create("warm");
	TCase *tc = tcase_create("protocol");
	tcase_add_test(tc, test_ready);
	tcase_add_test(tc, test_done);
	tcase_add_test(tc, test_progress);
	tcase_add_test(tc, test_refusals);
	tcase_add_test(tc, test_job_message);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(warm_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
