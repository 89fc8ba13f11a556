/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of orphan recovery (src/recovery.c) with injected Redis faults: the [unit]
 * behaviours of doc/behaviours.md that need exactly one command of a pass to fail, which a
 * real server cannot be made to do selectively. A real redis-server is started for the
 * suite; redis_fault_hook fails chosen commands as if the connection had been lost.
 *
 *   RP-9   the swap of a raw-buried repeat orphan fails with a connection error: the raw
 *          entry stays in dead, and the next pass of the same process completes it.
 *   OR-19  the connection is lost inside one identity's recovery: the pass reports
 *          "connection lost", so it does not count as a completed check (the poller then
 *          checks again one poll interval later and keeps the Ticker waiting).
 *   RC-12  two reconcile passes in quick succession (the first held up, as by a DEBUG
 *          SLEEP, so the next is due at once) do not requeue a stray: the two looks of the
 *          two-look rule are half a second apart (half the interval when shorter), as a
 *          job between its fetch and "mark running" needs; a look a second later does.
 */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "keys.h"
#include "recovery.h"
#include "settle.h"
#include "state.h"
#include "util.h"
#include "unit_redis.h"

static pid_t server_pid;
static char sock[256];
static redisContext *check_conn;
static struct rconn R;
static struct log_site site = LOG_SITE("Orphan check");

static void start_server(void)
{
	check_conn = unit_redis_start("recovery", sock, sizeof sock, &server_pid);
}

static void stop_server(void)
{
	unit_redis_stop(check_conn, server_pid, sock);
}

static void cmd(const char *fmt, const char *a, const char *b)
{
	redisReply *rep = redisCommand(check_conn, fmt, a, b);
	freeReplyObject(rep);
}

static long long integer(const char *fmt, const char *arg)
{
	redisReply *rep = redisCommand(check_conn, fmt, arg);
	long long v = rep->type == REDIS_REPLY_INTEGER ? rep->integer : -99;
	freeReplyObject(rep);
	return v;
}

/* The members of cogworker:dead, joined by "\n" (malloc'd). */
static char *dead_members(void)
{
	redisReply *rep = redisCommand(check_conn, "ZRANGE cogworker:dead 0 -1");
	struct sbuf b;
	sb_init(&b);
	for (size_t i = 0; i < rep->elements; i++)
		sb_printf(&b, "%s%s", i ? "\n" : "", rep->element[i]->str);
	freeReplyObject(rep);
	return sb_steal(&b);
}

/* A dead fake process (doc/behaviours.md §0.3): registered, its list, no presence, no stamp. */
static void dead_fake(const char *ident, const char *job)
{
	char key[256];
	snprintf(key, sizeof key, "cogworker:inprogress:%s", ident);
	cmd("RPUSH %s %s", key, job);
	cmd("SADD %s %s", "cogworker:inprogress_identities", ident);
}

static void setup(void)
{
	unit_faults_reset();
	redisReply *rep = redisCommand(check_conn, "FLUSHALL");
	freeReplyObject(rep);
}

static const char *JOB_J = "{\"class\":\"W\",\"args\":[12345678901234567890],"
                           "\"queue\":\"default\",\"jid\":\"cccccccccccccccccccccccc\"}";

/* RP-9 */
START_TEST(test_failed_swap_completed_next_pass)
{
	cmd("SET %s %s", "cogworker:repeat_orphans", "not a list");      /* parking unusable */
	cmd("SET %s %s", "cogworker:orphanings:cccccccccccccccccccccccc", "3");
	dead_fake("dead-host:1:abc", JOB_J);
	unit_fail(0, "swap_dead_entry", 1);
	struct orphan_report rep;
	orphan_recovery(&R, 0, &rep, &site);
	ck_assert_int_eq(rep.conn_lost, 1);
	char *dead = dead_members();
	ck_assert_str_eq(dead, JOB_J);          /* buried raw; the swap failed */
	free(dead);
	ck_assert_int_eq(integer("LLEN %s", "cogworker:inprogress:dead-host:1:abc"), 0);

	orphan_recovery(&R, 0, &rep, &site);    /* the next pass of the same process */
	ck_assert_int_eq(rep.conn_lost, 0);
	ck_assert_int_eq(integer("ZCARD %s", "cogworker:dead"), 1);
	dead = dead_members();
	ck_assert_ptr_nonnull(strstr(dead, "\"error_class\":\"Cogworker::ProcessDied\""));
	ck_assert_ptr_nonnull(strstr(dead, "12345678901234567890"));
	ck_assert_ptr_nonnull(strstr(dead, "more than 3 times"));
	free(dead);
	ck_assert_int_eq(integer("EXISTS %s", "cogworker:orphanings:cccccccccccccccccccccccc"), 0);
	redisReply *r = redisCommand(check_conn, "GET cogworker:stats:failed");
	ck_assert_str_eq(r->str, "1");
	freeReplyObject(r);

	orphan_recovery(&R, 0, &rep, &site);    /* nothing left to swap: no second entry */
	ck_assert_int_eq(integer("ZCARD %s", "cogworker:dead"), 1);
}
END_TEST

/* OR-19 */
START_TEST(test_connection_lost_inside_an_identity)
{
	dead_fake("h:1:a", JOB_J);
	unit_fail(0, "requeue", 1);
	struct orphan_report rep;
	orphan_recovery(&R, 1, &rep, &site);
	ck_assert_int_eq(rep.registry_read, 1);
	ck_assert_int_eq(rep.conn_lost, 1);     /* so the pass does not count */
	ck_assert_int_eq(integer("LLEN %s", "cogworker:inprogress:h:1:a"), 1);
	redisReply *m = redisCommand(check_conn, "SISMEMBER cogworker:inprogress_identities h:1:a");
	ck_assert_int_eq(m->integer, 1);        /* still registered */
	freeReplyObject(m);

	orphan_recovery(&R, 1, &rep, &site);    /* the connection is back */
	ck_assert_int_eq(rep.conn_lost, 0);
	ck_assert_int_eq(rep.registry_read, 1);
	ck_assert_int_eq(rep.scan_done, 1);
	ck_assert_int_eq(integer("LLEN %s", "cogworker:queue:default"), 1);
	ck_assert_int_eq(integer("LLEN %s", "cogworker:inprogress:h:1:a"), 0);
}
END_TEST

/* RC-12 */
START_TEST(test_two_looks_a_second_apart)
{
	char own[400];
	snprintf(own, sizeof own, "cogworker:inprogress:%s", D.identity);
	cmd("RPUSH %s %s", own, JOB_J);
	ck_assert_int_eq(reconcile_own(&R, &site), 0);          /* first look */
	ck_assert_int_eq(reconcile_own(&R, &site), 0);          /* at once: too soon */
	ck_assert_int_eq(integer("LLEN %s", own), 1);
	ck_assert_int_eq(integer("LLEN %s", "cogworker:queue:default"), 0);
	sleep_seconds(1.1);
	ck_assert_int_eq(reconcile_own(&R, &site), 0);          /* a second later: requeued */
	ck_assert_int_eq(integer("LLEN %s", own), 0);
	ck_assert_int_eq(integer("LLEN %s", "cogworker:queue:default"), 1);
}
END_TEST

int main(void)
{
	start_server();
	char url[300];
	snprintf(url, sizeof url, "unix://%s", sock);
	setenv("REDIS_URL", url, 1);
	struct conf c;
	char err[512];
	if (conf_load(NULL, NULL, &c, err, sizeof err) != 0) {
		fprintf(stderr, "%s\n", err);
		stop_server();
		return 1;
	}
	state_init(&c);
	snprintf(D.identity, sizeof D.identity, "unit:1:abcdef012345");
	atomic_store(&D.fetch_mode, FETCH_RELIABLE);
	struct conf *cur = conf_acquire();
	rconn_init(&R, &cur->redis);
	conf_release(cur);
	unit_faults_install();

	Suite *s = suite_create("recovery");
	TCase *tc = tcase_create("faults");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_set_timeout(tc, 20);
	tcase_add_test(tc, test_failed_swap_completed_next_pass);
	tcase_add_test(tc, test_connection_lost_inside_an_identity);
	tcase_add_test(tc, test_two_looks_a_second_apart);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	rconn_free(&R);
	stop_server();
	return failed ? 1 : 0;
}
