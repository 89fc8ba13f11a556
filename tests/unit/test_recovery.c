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
 *   BT-24  a member buried as ProcessDied (a repeat orphan) whose settle fails right after
 *          the burial (an injected fault, as a crash there): the burial noted the settle,
 *          and the poller's next look (workflow_tend) settles it dead in its batch and
 *          buries the job that waited for it; nothing is left noted.
 *   BT-25  the same for a scheduled member past its deadline, buried by the poller.
 *   DP-15  a release cut between two calls (the daemon dies after the first of 2 500
 *          dependants' calls): the poller's next look releases the rest, each once.
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
#include "deadline.h"
#include "keys.h"
#include "recovery.h"
#include "settle.h"
#include "state.h"
#include "util.h"
#include "workflow.h"
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


/* ---- a burial's settle, and a release cut short, finished by the poller (§7.34) ---- */

static struct workflow_cursor tend_cursor;

static void script_ok(const char *name, int n, const char **args)
{
	redisReply *rep = workflow_script(&R, name, n, args, NULL);
	ck_assert_msg(rep != NULL && rep->type != REDIS_REPLY_ERROR, "%s: %s", name,
	              rep ? rep->str : R.err);
	freeReplyObject(rep);
}

/* A committed batch bid of one member raw (jid), on_death Died onto queue cb; and a job
 * X that waits for the member. */
static void member_waited_for(const char *bid, const char *jid, const char *raw)
{
	const char *open[] = { bid, "", "", "", "Died", "[]", "cb", "9999999999", "", "" };
	script_ok("batch_open", 10, open);
	const char *add[] = { jid, raw, "elsewhere", "", bid, "", "0" };
	script_ok("batch_push", 7, add);
	const char *commit[] = { bid };
	script_ok("batch_commit", 1, commit);
	const char *x[] = { "xxxxxxxxxxxxxxxxxxxxxxxx", "{\"class\":\"X\",\"args\":[],"
	                    "\"jid\":\"xxxxxxxxxxxxxxxxxxxxxxxx\"}", "default", "", "", "", "0",
	                    jid };
	script_ok("batch_push", 8, x);
	cmd("DEL %s %s", "cogworker:queue:elsewhere", "cogworker:schedule");
}

static void assert_settled_by_the_poller(const char *bid)
{
	char key[128];
	snprintf(key, sizeof key, "cogworker:batch:%s:pending", bid);
	ck_assert_int_eq(integer("SCARD %s", key), 1);          /* not settled yet */
	ck_assert_int_eq(integer("HLEN %s", "cogworker:batch:owed"), 1);
	ck_assert_int_eq(workflow_tend(&R, &tend_cursor), 0);
	ck_assert_int_eq(integer("SCARD %s", key), 0);
	snprintf(key, sizeof key, "cogworker:batch:%s:dead", bid);
	ck_assert_int_eq(integer("SCARD %s", key), 1);
	ck_assert_int_eq(integer("LLEN %s", "cogworker:queue:cb"), 1);     /* on_death */
	ck_assert_int_eq(integer("ZCARD %s", "cogworker:batch:waiting"), 0);
	ck_assert_int_eq(integer("ZCARD %s", "cogworker:dead"), 2);        /* and X buried */
	ck_assert_int_eq(integer("EXISTS %s", "cogworker:batch:owed"), 0);
}

static const char *ORPHAN_M = "{\"class\":\"W\",\"args\":[],\"queue\":\"default\","
                              "\"jid\":\"mmmmmmmmmmmmmmmmmmmmmmmm\",\"bid\":\"bo\"}";

/* BT-24 */
START_TEST(test_buried_orphan_settled_after_a_fault)
{
	member_waited_for("bo", "mmmmmmmmmmmmmmmmmmmmmmmm", ORPHAN_M);
	cmd("RPUSH %s %s", "cogworker:repeat_orphans", ORPHAN_M);
	unit_fail(0, "batch_settle", 1);
	struct orphan_report rep;
	orphan_recovery(&R, 0, &rep, &site);
	ck_assert_int_eq(integer("LLEN %s", "cogworker:repeat_orphans"), 0);
	ck_assert_int_eq(integer("ZCARD %s", "cogworker:dead"), 1);
	assert_settled_by_the_poller("bo");
}
END_TEST

static const char *EXPIRED_S = "{\"class\":\"W\",\"args\":[],\"queue\":\"default\","
                               "\"jid\":\"ssssssssssssssssssssssss\",\"bid\":\"bs\","
                               "\"expires_at\":1}";

/* BT-25 */
START_TEST(test_expired_entry_settled_after_a_fault)
{
	member_waited_for("bs", "ssssssssssssssssssssssss", EXPIRED_S);
	cmd("ZADD %s 1 %s", "cogworker:schedule", EXPIRED_S);
	unit_fail(0, "batch_settle", 1);
	ck_assert_int_eq(deadline_settle_entry(&R, "cogworker:schedule", EXPIRED_S,
	                                       strlen(EXPIRED_S)), 1);
	ck_assert_int_eq(integer("ZCARD %s", "cogworker:schedule"), 0);
	ck_assert_int_eq(integer("ZCARD %s", "cogworker:dead"), 1);
	assert_settled_by_the_poller("bs");
}
END_TEST

/* DP-15 */
START_TEST(test_release_cut_between_calls_finished_by_the_poller)
{
	enum { N = 2500 };
	for (int k = 0; k < N; k++) {
		char jid[32], raw[128];
		snprintf(jid, sizeof jid, "w%023d", k);
		snprintf(raw, sizeof raw, "{\"class\":\"W\",\"args\":[],\"jid\":\"%s\"}", jid);
		const char *push[] = { jid, raw, "default", "", "", "", "0",
		                       "aaaaaaaaaaaaaaaaaaaaaaaa" };
		script_ok("batch_push", 8, push);
	}
	/* The first call of the settle, then the daemon is gone. */
	const char *settle[] = { "aaaaaaaaaaaaaaaaaaaaaaaa", "success", "" };
	script_ok("batch_settle", 3, settle);
	ck_assert_int_eq(integer("LLEN %s", "cogworker:queue:default"), 250);   /* its share */
	ck_assert_int_eq(integer("ZCARD %s", "cogworker:batch:waiting"), N - 250);
	ck_assert_int_eq(workflow_tend(&R, &tend_cursor), 0);
	ck_assert_int_eq(integer("LLEN %s", "cogworker:queue:default"), N);
	ck_assert_int_eq(integer("ZCARD %s", "cogworker:batch:waiting"), 0);
	ck_assert_int_eq(integer("EXISTS %s", "cogworker:batch:owed"), 0);
	redisReply *rep = redisCommand(check_conn, "LRANGE cogworker:queue:default 0 -1");
	char seen[N] = { 0 };
	for (size_t i = 0; i < rep->elements; i++) {
		const char *j = strstr(rep->element[i]->str, "\"jid\":\"w");
		ck_assert_ptr_nonnull(j);
		int k = atoi(j + 8);
		ck_assert_int_eq(seen[k], 0);                   /* released once */
		seen[k] = 1;
	}
	freeReplyObject(rep);
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
	tcase_add_test(tc, test_buried_orphan_settled_after_a_fault);
	tcase_add_test(tc, test_expired_entry_settled_after_a_fault);
	tcase_add_test(tc, test_release_cut_between_calls_finished_by_the_poller);
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
