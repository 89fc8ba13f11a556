/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the periodic ticker and the deferred releases with injected Redis faults
 * (the [unit] behaviours of doc/behaviours.md PT-8, PT-28 and DR-4, which need exactly one
 * command of a sequence to fail): a real redis-server is started for the suite, and
 * redis_fault_hook fails chosen commands (or scripts, by name) with an availability error.
 */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "cron.h"
#include "heartbeat.h"
#include "keys.h"
#include "settle.h"
#include "state.h"
#include "ticker.h"
#include "job.h"
#include "util.h"
#include "unit_redis.h"

#define CRON "0 0 1 1 *"        /* yearly: one slot for the whole test */

static pid_t server_pid;
static char sock[256];
static redisContext *check_conn;
static char pjid[41];
static long long slot;

static void start_server(void)
{
	check_conn = unit_redis_start("ticker", sock, sizeof sock, &server_pid);
}

static void stop_server(void)
{
	unit_redis_stop(check_conn, server_pid, sock);
}

static void setup(void)
{
	unit_faults_reset();
	redisReply *rep = redisCommand(check_conn, "FLUSHALL");
	freeReplyObject(rep);
}

static long long integer(const char *fmt, const char *arg)
{
	redisReply *rep = redisCommand(check_conn, fmt, arg);
	long long v = rep->type == REDIS_REPLY_INTEGER ? rep->integer : -99;
	freeReplyObject(rep);
	return v;
}

/* GET key: malloc'd, or NULL when absent. */
static char *get(const char *key)
{
	redisReply *rep = redisCommand(check_conn, "GET %s", key);
	char *s = rep->type == REDIS_REPLY_STRING ? xstrdup(rep->str) : NULL;
	freeReplyObject(rep);
	return s;
}

static char *key(const char *prefix)
{
	return xasprintf("%s%s", prefix, pjid);
}

static void assert_key_eq(const char *k, const char *want)
{
	char *v = get(k);
	if (!want)
		ck_assert_msg(v == NULL, "%s = %s, want none", k, v);
	else
		ck_assert_msg(v && strcmp(v, want) == 0, "%s = %s, want %s", k, v ? v : "(none)", want);
	free(v);
}

/* The jid of the one job on the default queue (malloc'd), or NULL. */
static char *queued_jid(void)
{
	redisReply *rep = redisCommand(check_conn, "LRANGE cogworker:queue:default 0 -1");
	char *jid = NULL;
	if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 1) {
		cJSON *j = job_json_parse(rep->element[0]->str, rep->element[0]->len);
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "jid");
		const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "periodic_slot");
		if (cJSON_IsString(v) && cJSON_IsNumber(s) && (long long)s->valuedouble == slot)
			jid = xstrdup(v->valuestring);
		cJSON_Delete(j);
	}
	freeReplyObject(rep);
	return jid;
}

/* PT-28: a release deferred in memory runs at the start of the tick, before the claim, so
 * a slot blocked only by that stale lock fires in the same tick. */
START_TEST(test_deferred_release_before_claim)
{
	char *running = key("periodic:running:");
	redisReply *rep = redisCommand(check_conn, "SET %s old-run EX 86400", running);
	freeReplyObject(rep);
	struct rconn r;
	struct conf *c = conf_acquire();
	rconn_init(&r, &c->redis);
	conf_release(c);
	unit_fail(0, "delete_if_owned", 1);
	release_owned(&r, running, "old-run");             /* fails: deferred */
	assert_key_eq(running, "old-run");
	rconn_free(&r);

	struct ticker *t = ticker_new();
	ticker_tick_once(t);
	char *jid = queued_jid();
	ck_assert_msg(jid != NULL, "the slot did not fire in the first tick");
	assert_key_eq(running, jid);
	free(jid);
	free(running);
	ticker_free(t);
}
END_TEST

/* PT-8: the push fails and the rollback fails too (Redis away): the rollback is retried
 * at the start of every tick without backoff while the error is an availability error,
 * the entry waits for it, and once Redis is back the slot fires. */
START_TEST(test_pending_rollback_retried_then_slot_fires)
{
	char *running = key("periodic:running:");
	char *last = key("periodic:last_slot:");
	char s[32];
	snprintf(s, sizeof s, "%lld", slot);
	unit_fail(0, "LPUSH", -1);
	unit_fail(1, "rollback", -1);
	unit_count(0, "claim");
	unit_count(1, "rollback");
	struct ticker *t = ticker_new();
	ticker_tick_once(t);
	ck_assert_int_eq(unit_calls[0], 1);
	ck_assert_int_eq(unit_calls[1], 1);
	assert_key_eq(last, s);                 /* the claim stands: the rollback is owed */
	char *owner = get(running);
	ck_assert_ptr_nonnull(owner);
	for (int i = 0; i < 3; i++)
		ticker_tick_once(t);
	ck_assert_int_eq(unit_calls[1], 4);          /* once per tick: no backoff while away */
	ck_assert_int_eq(unit_calls[0], 1);          /* the entry waits for its rollback */
	ck_assert_int_eq(integer("LLEN %s", "cogworker:queue:default"), 0);

	unit_fail(0, NULL, 0);                  /* Redis is back */
	unit_fail(1, NULL, 0);
	ticker_tick_once(t);
	ck_assert_int_eq(unit_calls[1], 5);
	ck_assert_int_eq(unit_calls[0], 2);
	char *jid = queued_jid();
	ck_assert_msg(jid != NULL, "the slot did not fire once Redis was back");
	ck_assert_str_ne(jid, owner);
	assert_key_eq(running, jid);
	assert_key_eq(last, s);
	ticker_tick_once(t);                    /* and only once */
	ck_assert_int_eq(integer("LLEN %s", "cogworker:queue:default"), 1);
	free(jid);
	free(owner);
	free(running);
	free(last);
	ticker_free(t);
}
END_TEST

/* DR-4: a beat whose only failures are deferred releases hitting an availability error
 * counts as a successful beat (the next one is not "after a failed beat"). */
START_TEST(test_deferred_release_failure_does_not_fail_the_beat)
{
	char *running = key("periodic:running:");
	redisReply *rep = redisCommand(check_conn, "SET %s old-run EX 86400", running);
	freeReplyObject(rep);
	struct rconn r;
	struct conf *c = conf_acquire();
	rconn_init(&r, &c->redis);
	conf_release(c);
	unit_fail(0, "delete_if_owned", -1);
	unit_count(0, "delete_if_owned");
	release_owned(&r, running, "old-run");             /* deferred */
	atomic_store(&D.prev_beat_failed, 0);
	ck_assert_int_eq(heartbeat_beat(&r), 0);
	ck_assert_int_eq(unit_calls[0], 2);                     /* the beat did retry it */
	ck_assert_int_eq(atomic_load(&D.prev_beat_failed), 0);
	assert_key_eq(running, "old-run");
	unit_fail(0, NULL, 0);
	ck_assert_int_eq(heartbeat_beat(&r), 0);           /* retried, now done */
	assert_key_eq(running, NULL);
	rconn_free(&r);
	free(running);
}
END_TEST

int main(void)
{
	start_server();
	char path[] = "/tmp/cw-unit-ticker-XXXXXX";
	int fd = mkstemp(path);
	char text[512];
	int n = snprintf(text, sizeof text,
	                 "redis = { url = \"unix://%s\"; };\n"
	                 "periodic = ( { cron = \"%s\"; class = \"P\"; unique = \"until_executed\"; } );\n",
	                 sock, CRON);
	if (fd < 0 || write(fd, text, (size_t)n) != n) {
		stop_server();
		return 1;
	}
	close(fd);
	unsetenv("REDIS_URL");
	struct conf c;
	char err[512];
	int rc = conf_load(path, NULL, &c, err, sizeof err);
	unlink(path);
	if (rc != 0) {
		fprintf(stderr, "%s\n", err);
		stop_server();
		return 1;
	}
	state_init(&c);
	snprintf(D.identity, sizeof D.identity, "unit:1:abcdef012345");
	atomic_store(&D.fetch_mode, FETCH_RELIABLE);
	job_pjid(CRON, "P", "[]", pjid);
	struct cron *cr = cron_parse(CRON, err, sizeof err);
	slot = (long long)cron_prev(cr, (int64_t)time(NULL));
	cron_free(cr);
	unit_faults_install();

	Suite *s = suite_create("ticker");
	TCase *tc = tcase_create("faults");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_set_timeout(tc, 20);
	tcase_add_test(tc, test_deferred_release_before_claim);
	tcase_add_test(tc, test_pending_rollback_retried_then_slot_fires);
	tcase_add_test(tc, test_deferred_release_failure_does_not_fail_the_beat);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	stop_server();
	return failed ? 1 : 0;
}
