/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of src/bookkeeping.c against a real redis-server (started for the suite),
 * with redis_fault_hook failing chosen commands: the status hash and its TTL, progress
 * lines, the history entry and its backtrace. The daemon-level behaviours (SH group) are
 * in tests/integration/test_bookkeeping.py.
 */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "bookkeeping.h"
#include "util.h"
#include "unit_redis.h"

static pid_t server_pid;
static char sock[256];
static redisContext *cc;
static struct rconn R;
static struct conf C;
static void start_server(void)
{
	cc = unit_redis_start("bk", sock, sizeof sock, &server_pid);
}

static void setup(void)
{
	unit_faults_reset();
	freeReplyObject(redisCommand(cc, "FLUSHALL"));
	C.status_expiration = 1800;
	C.history_retention_days = 30;
	C.history_max_entries = 50000;
	C.history_daily_retention_days = 400;
}

static char *hget(const char *key, const char *field)
{
	redisReply *rep = redisCommand(cc, "HGET %s %s", key, field);
	char *s = rep->type == REDIS_REPLY_STRING ? xstrdup(rep->str) : NULL;
	freeReplyObject(rep);
	return s;
}

static long long ttl(const char *key)
{
	redisReply *rep = redisCommand(cc, "TTL %s", key);
	long long v = rep->integer;
	freeReplyObject(rep);
	return v;
}

#define JID "0123456789abcdef01234567"
static const char *RAW = "{\"class\":\"K\",\"args\":[12345678901234567890,1.10],"
                         "\"queue\":\"q\",\"jid\":\"" JID "\"}";

static void line(const char *s, int expect)
{
	ck_assert_int_eq(status_progress(&R, &C, JID, s, strlen(s)), expect);
}

START_TEST(test_status_fields_and_fractional_ttl)
{
	struct job j;
	job_parse(&j, RAW, strlen(RAW), "q");
	C.status_expiration = 0.2;      /* rounded up, never EXPIRE 0 (which deletes) */
	struct run_usage cost;
	usage_none(&cost);
	cost.measured = 1;
	cost.user_s = 0.5;
	cost.maxrss_bytes = 4096;
	status_write(&R, &C, &j, "retrying", "E", "m", &cost);
	char *cpu = hget("status:" JID, "cpu_s"), *rss = hget("status:" JID, "maxrss_bytes");
	ck_assert_str_eq(cpu, "0.500");     /* the run's cost, in the same HSET */
	ck_assert_str_eq(rss, "4096");
	free(cpu), free(rss);
	char *s = hget("status:" JID, "status"), *q = hget("status:" JID, "queue");
	char *k = hget("status:" JID, "class"), *e = hget("status:" JID, "error_message");
	ck_assert_str_eq(s, "retrying");
	ck_assert_str_eq(q, "q");
	ck_assert_str_eq(k, "K");
	ck_assert_str_eq(e, "m");
	ck_assert_int_eq(ttl("status:" JID), 1);
	free(s), free(q), free(k), free(e);
	job_free(&j);
}
END_TEST

START_TEST(test_progress_lines)
{
	line("cogworker:progress 42 half way", 0);
	char *p = hget("status:" JID, "pct"), *m = hget("status:" JID, "message");
	ck_assert_str_eq(p, "42");
	ck_assert_str_eq(m, "half way");
	ck_assert(ttl("status:" JID) > 1700);
	free(p), free(m);
	line("cogworker:progress 12.50\r", 0);          /* as written; the message stays */
	p = hget("status:" JID, "pct");
	m = hget("status:" JID, "message");
	ck_assert_str_eq(p, "12.50");
	ck_assert_str_eq(m, "half way");
	free(p), free(m);
	static const char *const ignored[] = {
		"cogworker:progress lots", "cogworker:progress nan x", "cogworker:progress ",
		"cogworker:progress", "cogworker:progress42", "other 50", "cogworker:progress 5x y",
	};
	for (size_t i = 0; i < sizeof ignored / sizeof *ignored; i++)
		line(ignored[i], 0);
	p = hget("status:" JID, "pct");
	ck_assert_str_eq(p, "12.50");
	free(p);
	/* Redis unavailable: -1, so the caller stops writing progress for that run */
	unit_fail(0, "HSET", -1);
	line("cogworker:progress 60 x", -1);
	unit_fail(0, NULL, 0);
	C.status_expiration = 0;        /* status off: nothing written, nothing to report */
	line("cogworker:progress 70 y", 0);
	p = hget("status:" JID, "pct");
	ck_assert_str_eq(p, "12.50");
	free(p);
}
END_TEST

static char *history_member(const char *key)
{
	redisReply *rep = redisCommand(cc, "ZRANGE %s 0 -1", key);
	char *s = rep->elements == 1 ? xstrdup(rep->element[0]->str) : NULL;
	freeReplyObject(rep);
	return s;
}

START_TEST(test_history_entries)
{
	struct job j;
	job_parse(&j, RAW, strlen(RAW), "q");
	/* what the run cost (usage.h): the figures, or null when nothing was measured */
	struct run_usage none, cost;
	usage_none(&none);
	usage_none(&cost);
	cost.measured = 1;
	cost.user_s = 0.25;
	cost.sys_s = 0.23;
	cost.maxrss_bytes = 151LL << 20;
	history_record(&R, &C, &j, "success", 100.5, 101.25, NULL, NULL, "ignored\n", 8, &cost);
	char *e = history_member("cogworker:history:success");
	ck_assert_str_eq(e, "{\"jid\":\"" JID "\",\"class\":\"K\",\"queue\":\"q\","
	                 "\"args\":[12345678901234567890,1.10],\"status\":\"success\","
	                 "\"started_at\":100.500000,\"finished_at\":101.250000,\"error_class\":null,"
	                 "\"error_message\":null,\"backtrace\":null,\"cpu_s\":0.480,"
	                 "\"maxrss_bytes\":158334976}");
	free(e);
	/* a failure: the stderr lines, blank ones and a trailing newline skipped, bad bytes
	 * scrubbed; the age trim (30 days before finished_at) removed the 1970 success */
	double now = now_float();
	const char tail[] = "first\n\nbad \xff byte\r\nlast\n";
	history_record(&R, &C, &j, "dead", now - 1, now, "E", "exit status 1: last", tail,
	               sizeof tail - 1, &none);
	e = history_member("cogworker:history:failed");
	ck_assert_ptr_nonnull(strstr(e, "\"status\":\"failed\""));
	ck_assert_ptr_nonnull(strstr(e, "\"error_class\":\"E\",\"error_message\":\"exit status 1: last\""));
	ck_assert_ptr_nonnull(strstr(e, "\"backtrace\":[\"first\",\"bad \xef\xbf\xbd byte\",\"last\"],"
	                                 "\"cpu_s\":null,\"maxrss_bytes\":null}"));
	free(e);
	e = history_member("cogworker:history:all");     /* the only one left */
	ck_assert_ptr_nonnull(e);
	ck_assert_ptr_nonnull(strstr(e, "\"status\":\"failed\""));
	free(e);
	/* nothing on stderr: the message alone */
	freeReplyObject(redisCommand(cc, "DEL cogworker:history:failed"));
	history_record(&R, &C, &j, "dead", now, now, "E", "exec failed: Permission denied", "", 0, &none);
	e = history_member("cogworker:history:failed");
	ck_assert_ptr_nonnull(strstr(e, "\"backtrace\":[\"exec failed: Permission denied\"],"));
	free(e);
	/* a failing history write is only logged */
	unit_fail(0, "ZADD", -1);
	history_record(&R, &C, &j, "success", now, now, NULL, NULL, NULL, 0, &none);
	unit_fail(0, NULL, 0);
	job_free(&j);
}
END_TEST

int main(void)
{
	start_server();
	char url[300];
	snprintf(url, sizeof url, "unix://%s", sock);
	setenv("REDIS_URL", url, 1);
	char err[512];
	if (conf_load(NULL, NULL, &C, err, sizeof err) != 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	rconn_init(&R, &C.redis);
	unit_faults_install();
	log_set_level(LOG_ERROR);

	Suite *s = suite_create("bookkeeping");
	TCase *tc = tcase_create("records");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_status_fields_and_fractional_ttl);
	tcase_add_test(tc, test_progress_lines);
	tcase_add_test(tc, test_history_entries);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	rconn_free(&R);
	unit_redis_stop(cc, server_pid, sock);
	return failed ? 1 : 0;
}
