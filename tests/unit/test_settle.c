/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the settle paths with injected Redis faults (the [unit] behaviours of
 * doc/behaviours.md that need exactly one command of a sequence to fail): a real
 * redis-server is started for the suite, and redis_fault_hook fails chosen commands.
 */
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "fetch.h"
#include "keys.h"
#include "recovery.h"
#include "settle.h"
#include "state.h"
#include "job.h"
#include "util.h"
#include "workflow.h"
#include "unit_redis.h"

static pid_t server_pid;
static char sock[256];
static redisContext *check_conn;
static struct rconn R;

static void start_server(void)
{
	check_conn = unit_redis_start("settle", sock, sizeof sock, &server_pid);
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
	struct log_site s = LOG_SITE("test");
	settle_pending_all(&R, &s);     /* forget what an earlier test left */
}

static long long integer(const char *fmt, const char *arg)
{
	redisReply *rep = redisCommand(check_conn, fmt, arg);
	long long v = rep->type == REDIS_REPLY_INTEGER ? rep->integer : -99;
	freeReplyObject(rep);
	return v;
}

static char *string(const char *fmt, const char *arg)
{
	redisReply *rep = redisCommand(check_conn, fmt, arg);
	const redisReply *v = rep->type == REDIS_REPLY_ARRAY && rep->elements > 0 ? rep->element[0] : rep;
	char *s = v->type == REDIS_REPLY_STRING ? xstrdup(v->str) : NULL;
	freeReplyObject(rep);
	return s;
}

static char inprogress[400];

static void put_in_progress(const char *raw)
{
	redisReply *rep = redisCommand(check_conn, "LPUSH %s %s", inprogress, raw);
	freeReplyObject(rep);
}

/* Run fn with stderr captured; returns what was logged. */
static char *capture_log(void (*fn)(void *), void *arg)
{
	char path[] = "/tmp/cw-unit-logXXXXXX";
	int fd = mkstemp(path);
	int saved = dup(2);
	dup2(fd, 2);
	fn(arg);
	dup2(saved, 2);
	close(saved);
	lseek(fd, 0, SEEK_SET);
	char *buf = xcalloc(1, 1 << 16);
	ssize_t n = read(fd, buf, (1 << 16) - 1);
	(void)n;
	close(fd);
	unlink(path);
	return buf;
}

static const char *ACK_JOB = "{\"class\":\"A\",\"args\":[],\"queue\":\"default\",\"jid\":\"aaaaaaaaaaaaaaaaaaaaaaaa\"}";
static int ack_result;
static double ack_elapsed;

static void do_ack(void *arg)
{
	(void)arg;
	double t = mono_now();
	ack_result = settle_ack(&R, ACK_JOB, strlen(ACK_JOB), "aaaaaaaaaaaaaaaaaaaaaaaa", NULL,
	                        NULL);
	ack_elapsed = mono_now() - t;
}

/* RC-5: an ack that fails twice and then succeeds: 3 attempts, 0.1 s and 0.2 s apart. */
START_TEST(test_ack_retried)
{
	put_in_progress(ACK_JOB);
	unit_fail(0, "ack", 2);
	unit_count(0, "ack");
	char *log = capture_log(do_ack, NULL);
	ck_assert_int_eq(ack_result, 0);
	ck_assert_int_eq(unit_calls[0], 3);
	ck_assert(ack_elapsed >= 0.29 && ack_elapsed < 2.0);
	ck_assert_int_eq(integer("LLEN %s", inprogress), 0);
	ck_assert_ptr_null(strstr(log, "couldn't acknowledge"));
	ck_assert(!pending_has(ACK_JOB));
	free(log);
}
END_TEST

static void do_settle_pending(void *arg)
{
	(void)arg;
	struct log_site s = LOG_SITE("Reconcile");
	settle_pending_all(&R, &s);
}

/* RC-3's unit half: 3 failures leave a pending ack (a warning: it is not final), which a
 * later settle completes and logs (RE-8). */
START_TEST(test_ack_pending)
{
	put_in_progress(ACK_JOB);
	redisReply *rep = redisCommand(check_conn, "SET cogworker:orphanings:aaaaaaaaaaaaaaaaaaaaaaaa 2");
	freeReplyObject(rep);
	unit_fail(0, "ack", -1);
	char *log = capture_log(do_ack, NULL);
	ck_assert_int_eq(ack_result, -1);
	ck_assert_ptr_nonnull(strstr(log, "WARN: couldn't acknowledge finished job "
	                                  "jid=aaaaaaaaaaaaaaaaaaaaaaaa yet (3 attempts failed"));
	ck_assert(pending_has(ACK_JOB));
	ck_assert_int_eq(integer("LLEN %s", inprogress), 1);
	ck_assert_ptr_null(strstr(log, "ERROR"));
	unit_fail(0, NULL, 0);
	free(log);
	log = capture_log(do_settle_pending, NULL);
	ck_assert(!pending_has(ACK_JOB));
	ck_assert_int_eq(integer("LLEN %s", inprogress), 0);
	ck_assert_int_eq(integer("EXISTS %s", "cogworker:orphanings:aaaaaaaaaaaaaaaaaaaaaaaa"), 0);
	ck_assert_ptr_nonnull(strstr(log, "INFO: acknowledged finished job "
	                                  "jid=aaaaaaaaaaaaaaaaaaaaaaaa "));
	free(log);
}
END_TEST

static const char *LOST_JOB = "{\"class\":\"A\",\"args\":[],\"queue\":\"default\","
                               "\"jid\":\"dddddddddddddddddddddddd\"}";
static const char *STRAY_JOB = "{\"class\":\"A\",\"args\":[],\"queue\":\"default\","
                                "\"jid\":\"eeeeeeeeeeeeeeeeeeeeeeee\"}";

/* Two reconcile passes, their looks apart as two passes are (RC-12: at least 0.5 s). */
static void reconcile_twice(void *arg)
{
	(void)arg;
	struct log_site s = LOG_SITE("Reconcile");
	reconcile_own(&R, &s);
	sleep_seconds(0.6);
	reconcile_own(&R, &s);
}

/* RC-11: a confirmed ack that a failover lost: the job is back on the own list, and two
 * reconciles ack it again instead of requeueing it; a stray never acked is requeued. */
START_TEST(test_lost_ack_not_rerun)
{
	put_in_progress(LOST_JOB);
	ck_assert_int_eq(settle_ack(&R, LOST_JOB, strlen(LOST_JOB), "dddddddddddddddddddddddd",
	                            NULL, NULL), 0);
	ck_assert_int_eq(integer("LLEN %s", inprogress), 0);
	ck_assert(finished_here(LOST_JOB, strlen(LOST_JOB), NULL));
	ck_assert(!finished_here(STRAY_JOB, strlen(STRAY_JOB), NULL));
	put_in_progress(LOST_JOB);      /* what the new primary still holds */
	put_in_progress(STRAY_JOB);
	char *log = capture_log(reconcile_twice, NULL);
	ck_assert_int_eq(integer("LLEN %s", inprogress), 0);
	ck_assert_int_eq(integer("LLEN %s", "cogworker:queue:default"), 1);
	char *queued = string("LRANGE %s 0 0", "cogworker:queue:default");
	ck_assert_str_eq(queued, STRAY_JOB);
	ck_assert_ptr_nonnull(strstr(log, "dropped stray in-progress job "
	                                  "jid=dddddddddddddddddddddddd: it finished here"));
	ck_assert_ptr_nonnull(strstr(log, "requeued stray in-progress job "
	                                  "jid=eeeeeeeeeeeeeeeeeeeeeeee"));
	free(queued);
	free(log);
}
END_TEST

static const char *UNIQUE_JOB =
	"{\"class\":\"U\",\"args\":[1],\"queue\":\"default\",\"jid\":\"bbbbbbbbbbbbbbbbbbbbbbbb\","
	"\"retry\":3,\"unique\":\"until_executed\"}";

static char *unique_lock_key(void)
{
	char digest[41];
	job_unique_digest("U", "default", "[1]", digest);
	return xasprintf("cogworker:unique:%s", digest);
}

/* FR-14: an interrupt into retry (count 1) extends the unique lock to 30 + unique_lock_ttl. */
START_TEST(test_interrupt_extends_lock)
{
	put_in_progress(UNIQUE_JOB);
	char *key = unique_lock_key();
	redisReply *rep = redisCommand(check_conn, "SET %s bbbbbbbbbbbbbbbbbbbbbbbb EX 5", key);
	freeReplyObject(rep);
	struct job j;
	job_parse(&j, UNIQUE_JOB, strlen(UNIQUE_JOB), "default");
	unit_fail(0, "ZADD", -1);
	struct log_site s = LOG_SITE("Processor");
	int died = 0;
	char *dead = NULL;
	double t = now_float();
	struct filing w;
	enum disposition d = route_failure(&R, &j, DECIDE_RETRY, "Cogworker::HandlerFailed",
	                                   "exit status 1", &s, &died, &dead, &w);
	ck_assert_int_eq(d, DISP_SETTLED);
	ck_assert_int_eq(died, 0);
	ck_assert_int_eq(w.interrupted, 1);         /* what the log line says */
	ck_assert_int_eq(w.owed, 0);
	ck_assert_str_eq(w.set, K_RETRY);
	ck_assert_int_eq(integer("LLEN %s", inprogress), 0);
	ck_assert_int_eq(integer("ZCARD %s", "cogworker:retry"), 1);
	char *entry = string("ZRANGE %s 0 0", "cogworker:retry");
	ck_assert_ptr_nonnull(strstr(entry, "\"interrupted_count\":1"));
	ck_assert_ptr_nonnull(strstr(entry, "\"retry_count\":1"));
	redisReply *sc = redisCommand(check_conn, "ZSCORE cogworker:retry %s", entry);
	double score = atof(sc->str);
	freeReplyObject(sc);
	ck_assert(score >= t + 29 && score <= t + 32);
	ck_assert(integer("TTL %s", key) > 30);
	free(entry);
	free(key);
	job_free(&j);
}
END_TEST

/* RC-9 / FR-10 (unit half): the filing and the interrupt write both fail: the filing is
 * remembered in memory (never a stray to re-run) and a later settle files it. */
START_TEST(test_interrupt_pending_then_filed)
{
	const char *raw = "{\"class\":\"F\",\"args\":[],\"queue\":\"default\","
	                  "\"jid\":\"cccccccccccccccccccccccc\",\"retry\":false}";
	put_in_progress(raw);
	struct job j;
	job_parse(&j, raw, strlen(raw), "default");
	unit_fail(0, "ZADD", -1);
	unit_fail(1, "interrupt", -1);
	struct log_site s = LOG_SITE("Processor");
	int died = 0;
	char *dead = NULL;
	struct filing w;
	enum disposition d = route_failure(&R, &j, DECIDE_DEAD, "Cogworker::HandlerFailed",
	                                   "exit status 1: kaboom", &s, &died, &dead, &w);
	ck_assert_int_eq(d, DISP_SETTLED);
	ck_assert_int_eq(died, 0);                  /* no on_death while it isn't filed */
	ck_assert_int_eq(w.owed, 1);
	ck_assert(pending_has(raw));
	ck_assert_int_eq(integer("LLEN %s", inprogress), 1);
	ck_assert_int_eq(integer("ZCARD %s", "cogworker:dead"), 0);
	unit_fail(0, NULL, 0);
	unit_fail(1, NULL, 0);
	settle_pending_all(&R, &s);
	ck_assert(!pending_has(raw));
	ck_assert_int_eq(integer("LLEN %s", inprogress), 0);
	ck_assert_int_eq(integer("ZCARD %s", "cogworker:dead"), 1);
	char *entry = string("ZRANGE %s 0 0", "cogworker:dead");
	ck_assert_ptr_nonnull(strstr(entry, "\"error_class\":\"Cogworker::HandlerFailed\""));
	ck_assert_ptr_nonnull(strstr(entry, "\"retry_count\":1"));
	ck_assert_ptr_nonnull(strstr(entry, "\"jid\":\"cccccccccccccccccccccccc\""));
	free(entry);
	job_free(&j);
}
END_TEST

/* §7.18: an interrupt into retry that could only be filed later (a pending filing) gets
 * its unique lock extended once it is filed: until due, plus unique_lock_ttl. */
START_TEST(test_pending_retry_filing_extends_lock)
{
	put_in_progress(UNIQUE_JOB);
	char *key = unique_lock_key();
	redisReply *rep = redisCommand(check_conn, "SET %s bbbbbbbbbbbbbbbbbbbbbbbb EX 5", key);
	freeReplyObject(rep);
	struct job j;
	job_parse(&j, UNIQUE_JOB, strlen(UNIQUE_JOB), "default");
	unit_fail(0, "ZADD", -1);
	unit_fail(1, "interrupt", -1);
	struct log_site s = LOG_SITE("Processor");
	int died = 0;
	char *dead = NULL;
	enum disposition d = route_failure(&R, &j, DECIDE_RETRY, "Cogworker::HandlerFailed",
	                                   "exit status 1", &s, &died, &dead, NULL);
	ck_assert_int_eq(d, DISP_SETTLED);
	ck_assert(pending_has(UNIQUE_JOB));
	ck_assert(integer("TTL %s", key) <= 5);
	unit_fail(0, NULL, 0);
	unit_fail(1, NULL, 0);
	settle_pending_all(&R, &s);
	ck_assert(!pending_has(UNIQUE_JOB));
	ck_assert_int_eq(integer("ZCARD %s", "cogworker:retry"), 1);
	long long ttl = integer("TTL %s", key);     /* default unique_lock_ttl 86400, + ~30 s */
	ck_assert_msg(ttl > 86400 && ttl <= 86431, "TTL %lld", ttl);
	char *owner = string("GET %s", key);
	ck_assert_str_eq(owner, "bbbbbbbbbbbbbbbbbbbbbbbb");
	free(owner);
	free(key);
	job_free(&j);
}
END_TEST

/* PX-15 / OR-23: a job fetched after stop began is handed back to the front of its queue,
 * and an until_executed run gets its lapsed running lock back. */
START_TEST(test_give_back)
{
	const char *raw = "{\"class\":\"P\",\"args\":[],\"queue\":\"default\","
	                  "\"jid\":\"dddddddddddddddddddddddd\",\"periodic_pjid\":\"pj\","
	                  "\"periodic_until_executed\":true}";
	redisReply *rep = redisCommand(check_conn, "LPUSH cogworker:queue:default older");
	freeReplyObject(rep);
	put_in_progress(raw);
	ck_assert_int_eq(give_back(&R, raw, strlen(raw), "default"), 0);
	ck_assert_int_eq(integer("LLEN %s", inprogress), 0);
	char *front = string("LINDEX %s -1", "cogworker:queue:default");
	ck_assert_str_eq(front, raw);
	char *lock = string("GET %s", "periodic:running:pj");
	ck_assert_str_eq(lock, "dddddddddddddddddddddddd");
	ck_assert(integer("TTL %s", "periodic:running:pj") > 420);
	free(front);
	free(lock);
}
END_TEST

/* Install a conf whose global on_death appends the dead entry to file. */
static void install_on_death(const char *file)
{
	char path[] = "/tmp/cw-unit-confXXXXXX";
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");
	fprintf(f, "on_death = [ \"/bin/sh\", \"-c\", \"cat >> %s\" ];\n", file);
	fclose(f);
	struct conf c;
	char err[512];
	ck_assert_msg(conf_load(path, NULL, &c, err, sizeof err) == 0, "%s", err);
	unlink(path);
	conf_install(&c);
}

/*
 * HD-2: an invalid job whose burial can't be written at once is owed as a pending filing;
 * when reconcile files it, no on_death runs (once ran the global ones with no class).
 */
START_TEST(test_pending_burial_runs_no_on_death)
{
	char out[] = "/tmp/cw-unit-deathXXXXXX";
	close(mkstemp(out));
	install_on_death(out);
	const char *raw = "{\"args\":[],\"queue\":\"default\",\"jid\":\"eeeeeeeeeeeeeeeeeeeeeeee\"}";
	put_in_progress(raw);
	struct job j;
	job_parse(&j, raw, strlen(raw), "default");
	ck_assert_str_eq(j.invalid, "not a job: no class");
	unit_fail(0, "ZADD", -1);
	struct log_site s = LOG_SITE("Processor");
	ck_assert_int_eq(bury_unparseable(&R, &j, &s), DISP_SETTLED);
	ck_assert(pending_has(raw));
	unit_fail(0, NULL, 0);
	settle_pending_all(&R, &s);
	ck_assert(!pending_has(raw));
	ck_assert_int_eq(integer("LLEN %s", inprogress), 0);
	char *entry = string("ZRANGE %s 0 0", "cogworker:dead");
	ck_assert_ptr_nonnull(strstr(entry, "\"class\":\"(unparseable)\""));
	ck_assert_ptr_nonnull(strstr(entry, "\"error_class\":\"Cogworker::InvalidJob\""));
	ck_assert_ptr_nonnull(strstr(entry, "\"error_message\":\"not a job: no class\""));
	struct stat st;
	ck_assert_int_eq(stat(out, &st), 0);
	ck_assert_msg(st.st_size == 0, "on_death ran for a burial (%lld bytes)", (long long)st.st_size);
	unlink(out);
	free(entry);
	job_free(&j);
}
END_TEST

/*
 * FE-12: fetchers whose tries share a round trip that fails (the connection lost under the
 * leader's pipeline) each retry their own held ack, on their own connection, at once. On
 * the leader, the retries' pauses (0.1 s each) ran in a row while every other fetcher of
 * the round, and of the rounds queued behind it, waited: 8 fetchers took 1.1 s.
 */
#define COMB_N 8

struct comb {
	int i;
	struct rconn r;
	struct fetch_state fs;
	struct fetched fj;
	int got;
	double took;
};

static pthread_barrier_t comb_start;
static atomic_int comb_lrems;

/* The first held ack's LREM holds its round 0.3 s, so that the other fetchers queue their
 * tries behind it; every later one fails its round (each fails one pipeline: the rest of a
 * failed pipeline is not sent). The acks' retries are the ACK script: they go through. */
static int comb_hook(const char *name)
{
	if (strcmp(name, "LREM") != 0)
		return 0;
	if (atomic_fetch_add(&comb_lrems, 1) == 0) {
		usleep(300000);
		return 0;
	}
	return 1;
}

static void *comb_fetch(void *arg)
{
	struct comb *t = arg;
	pthread_barrier_wait(&comb_start);
	double t0 = mono_now();
	t->got = fetch_job(&t->r, &t->fs, &t->fj);
	t->took = mono_now() - t0;
	return NULL;
}

START_TEST(test_combined_tries_retry_their_acks_each_on_its_own)
{
	struct comb t[COMB_N];
	pthread_t th[COMB_N];
	struct conf *c = conf_acquire();
	park_init(COMB_N, c->queue_names, c->nqueue_names, 30);
	redisReply *rep = redisCommand(check_conn, "SADD cogworker:paused_queues none");
	freeReplyObject(rep);
	for (int i = 0; i < COMB_N; i++) {
		char raw[128];
		snprintf(raw, sizeof raw, "{\"class\":\"C\",\"args\":[%d],\"jid\":\"c%023d\"}", i, i);
		put_in_progress(raw);
		rep = redisCommand(check_conn, "LPUSH cogworker:queue:default %s", raw);
		freeReplyObject(rep);
		t[i].i = i;
		rconn_init(&t[i].r, &c->redis);
		fetch_state_init(&t[i].fs, i);
		char jid[32];
		snprintf(jid, sizeof jid, "c%023d", i);
		ack_hold(&t[i].fs.held, xstrdup(raw), strlen(raw), jid, NULL, SETTLED_SUCCESS, NULL,
		         0);
	}
	conf_release(c);
	pthread_barrier_init(&comb_start, NULL, COMB_N);
	atomic_store(&comb_lrems, 0);
	redis_fault_hook = comb_hook;
	for (int i = 0; i < COMB_N; i++)
		pthread_create(&th[i], NULL, comb_fetch, &t[i]);
	double slowest = 0;
	for (int i = 0; i < COMB_N; i++) {
		pthread_join(th[i], NULL);
		if (t[i].took > slowest)
			slowest = t[i].took;
	}
	redis_fault_hook = unit_fault_hook;
	pthread_barrier_destroy(&comb_start);
	int failed = 0;
	for (int i = 0; i < COMB_N; i++) {
		failed += t[i].got == -1;
		if (t[i].got == 1)
			fetched_free(&t[i].fj);
		ck_assert_ptr_null(t[i].fs.held.raw);
		rconn_free(&t[i].r);
	}
	ck_assert_int_ge(failed, 2);
	ck_assert_int_eq(integer("LLEN %s", inprogress), COMB_N - failed);
	ck_assert_msg(slowest < 0.8, "the slowest fetch took %.2fs", slowest);
}
END_TEST

/*
 * BT-12 [unit]: a member's success whose batch settle fails is owed with its ack, settle
 * first: the job stays on the in-progress list (a crash now runs it again, to be settled
 * again) until reconcile's pass settles it in its batch, then acks it. A pass whose settle
 * fails again acks nothing.
 */
static const char *MEMBER = "{\"class\":\"A\",\"args\":[],\"queue\":\"default\","
                            "\"jid\":\"bbbbbbbbbbbbbbbbbbbbbbbb\",\"bid\":\"b1\"}";

START_TEST(test_member_settle_owed_before_its_ack)
{
	const char *open[] = { "b1", "", "Done", "", "", "[]", "default", "9999999999", "", "" };
	redisReply *rep = workflow_script(&R, "batch_open", 10, open, NULL);
	ck_assert_ptr_nonnull(rep);
	freeReplyObject(rep);
	const char *add[] = { "bbbbbbbbbbbbbbbbbbbbbbbb", MEMBER, "default", "", "b1", "", "0" };
	rep = workflow_script(&R, "batch_push", 7, add, NULL);
	ck_assert_ptr_nonnull(rep);
	freeReplyObject(rep);
	const char *commit[] = { "b1" };
	rep = workflow_script(&R, "batch_commit", 1, commit, NULL);
	freeReplyObject(rep);
	redisReply *q = redisCommand(check_conn, "DEL cogworker:queue:default");
	freeReplyObject(q);
	put_in_progress(MEMBER);
	struct job j;
	job_parse(&j, MEMBER, strlen(MEMBER), "default");
	unit_fail(0, "batch_settle", 2);
	ck_assert_int_eq(settle_flow_first(&R, &j, SETTLED_SUCCESS), -1);
	ck_assert(pending_has(MEMBER));
	ck_assert_int_eq(integer("LLEN %s", inprogress), 1);
	ck_assert_int_eq(integer("SCARD %s", "cogworker:batch:b1:pending"), 1);
	struct log_site site = LOG_SITE("test");
	settle_pending_all(&R, &site);          /* the second failure: nothing acked */
	ck_assert(pending_has(MEMBER));
	ck_assert_int_eq(integer("LLEN %s", inprogress), 1);
	settle_pending_all(&R, &site);
	ck_assert(!pending_has(MEMBER));
	ck_assert_int_eq(integer("LLEN %s", inprogress), 0);
	ck_assert_int_eq(integer("SCARD %s", "cogworker:batch:b1:pending"), 0);
	ck_assert_int_eq(integer("SCARD %s", "cogworker:batch:b1:succeeded"), 1);
	ck_assert_int_eq(integer("LLEN %s", "cogworker:queue:default"), 1);    /* on_success */
	job_free(&j);
}
END_TEST

/*
 * BT-13 [unit]: a member that finished here, whose ack and batch settle a failover lost
 * (back on the own list, still pending in its batch): reconcile settles it in its batch
 * before it acks it again, never runs it again.
 */
static const char *LOST_MEMBER = "{\"class\":\"A\",\"args\":[],\"queue\":\"default\","
                                 "\"jid\":\"cccccccccccccccccccccccc\",\"bid\":\"b2\"}";

START_TEST(test_lost_member_settled_before_its_ack_again)
{
	put_in_progress(LOST_MEMBER);
	ck_assert_int_eq(settle_ack(&R, LOST_MEMBER, strlen(LOST_MEMBER),
	                            "cccccccccccccccccccccccc", "b2", SETTLED_SUCCESS), 0);
	const char *open[] = { "b2", "", "Done", "", "", "[]", "default", "9999999999", "", "" };
	redisReply *rep = workflow_script(&R, "batch_open", 10, open, NULL);
	freeReplyObject(rep);
	const char *add[] = { "cccccccccccccccccccccccc", LOST_MEMBER, "elsewhere", "", "b2", "",
	                      "0" };
	rep = workflow_script(&R, "batch_push", 7, add, NULL);
	freeReplyObject(rep);
	const char *commit[] = { "b2" };
	rep = workflow_script(&R, "batch_commit", 1, commit, NULL);
	freeReplyObject(rep);
	put_in_progress(LOST_MEMBER);   /* what the new primary still holds */
	char *log = capture_log(reconcile_twice, NULL);
	ck_assert_int_eq(integer("LLEN %s", inprogress), 0);
	ck_assert_int_eq(integer("SCARD %s", "cogworker:batch:b2:pending"), 0);
	ck_assert_int_eq(integer("SCARD %s", "cogworker:batch:b2:succeeded"), 1);
	ck_assert_int_eq(integer("LLEN %s", "cogworker:queue:default"), 1);    /* on_success */
	ck_assert_ptr_nonnull(strstr(log, "dropped stray in-progress job "
	                                  "jid=cccccccccccccccccccccccc: it finished here"));
	free(log);
}
END_TEST


/* ---- late acks settle as the first would have (doc/protocol.md §7.7, §7.34) ---- */

static const char *DEP_A = "{\"class\":\"A\",\"args\":[],\"queue\":\"default\","
                           "\"jid\":\"a1a1a1a1a1a1a1a1a1a1a1a1\"}";
static const char *WAITER = "{\"class\":\"W\",\"args\":[],\"queue\":\"default\","
                            "\"jid\":\"f1f1f1f1f1f1f1f1f1f1f1f1\"}";


/* Acks as the fetcher makes them. */
static void settle_held_member3(void *arg)
{
	const struct job *j = arg;
	settle_ack(&R, j->raw, j->raw_len, j->jid, j->bid, SETTLED_SUCCESS);
}

static int do_settle_ack_dead(const struct job *j)
{
	return settle_ack(&R, j->raw, j->raw_len, j->jid, j->bid, SETTLED_DEAD);
}

static int do_settle_ack_success_a(void)
{
	return settle_ack(&R, DEP_A, strlen(DEP_A), "a1a1a1a1a1a1a1a1a1a1a1a1", NULL,
	                  SETTLED_SUCCESS);
}

/* WAITER waits for DEP_A (BATCH_PUSH's waiting records), DEP_A on the own list. */
static void waiter_for_a(void)
{
	const char *push[] = { "f1f1f1f1f1f1f1f1f1f1f1f1", WAITER, "default", "", "", "", "0",
	                       "a1a1a1a1a1a1a1a1a1a1a1a1" };
	redisReply *rep = workflow_script(&R, "batch_push", 8, push, NULL);
	ck_assert_ptr_nonnull(rep);
	freeReplyObject(rep);
	ck_assert_int_eq(integer("ZCARD %s", "cogworker:batch:waiting"), 1);
	put_in_progress(DEP_A);
}

static void assert_waiter_released(void)
{
	ck_assert_int_eq(integer("LLEN %s", inprogress), 0);
	ck_assert_int_eq(integer("ZCARD %s", "cogworker:batch:waiting"), 0);
	ck_assert_int_eq(integer("LLEN %s", "cogworker:queue:default"), 1);
	char *rec = string("GET %s", "cogworker:batch:settled:a1a1a1a1a1a1a1a1a1a1a1a1");
	ck_assert_ptr_nonnull(rec);
	ck_assert_str_eq(rec, "success");
	free(rec);
}

/* DP-10 [unit]: a success whose ack and settled record could not ride on a fetch (a Redis
 * blip) and are made on their own: the record is written and the job that waits released,
 * as the first attempt would have. */
START_TEST(test_late_success_ack_releases_dependants)
{
	waiter_for_a();
	struct held_ack a;
	ack_hold(&a, xstrdup(DEP_A), strlen(DEP_A), "a1a1a1a1a1a1a1a1a1a1a1a1", NULL,
	         SETTLED_SUCCESS, NULL, 0);
	unit_fail(0, "SET", 1);
	ack_held_settle(&R, &a);
	assert_waiter_released();
}
END_TEST

static void settle_held_ack_a(void *arg)
{
	(void)arg;
	struct held_ack a;
	ack_hold(&a, xstrdup(DEP_A), strlen(DEP_A), "a1a1a1a1a1a1a1a1a1a1a1a1", NULL,
	         SETTLED_SUCCESS, NULL, 0);
	ack_held_settle(&R, &a);
}

/* DP-10 [unit]: the same ack owed (three attempts failed): reconcile's late ack writes the
 * record and releases the job that waits before it acks. */
START_TEST(test_owed_success_ack_releases_dependants)
{
	waiter_for_a();
	unit_fail(0, "SET", 1);
	unit_fail(1, "batch_settle", 3);
	unit_fail(2, "ack", 3);
	char *log = capture_log(settle_held_ack_a, NULL);
	ck_assert(pending_has(DEP_A));
	ck_assert_int_eq(integer("ZCARD %s", "cogworker:batch:waiting"), 1);
	unit_faults_reset();
	struct log_site site = LOG_SITE("test");
	settle_pending_all(&R, &site);
	ck_assert(!pending_has(DEP_A));
	assert_waiter_released();
	free(log);
}
END_TEST

static const char *MEMBER3 = "{\"class\":\"A\",\"args\":[],\"queue\":\"default\","
                             "\"jid\":\"b3b3b3b3b3b3b3b3b3b3b3b3\",\"bid\":\"b3\"}";

/* A committed batch bid of one member, raw, with on_success / on_death classes. */
static void batch_of_one(const char *bid, const char *raw, const char *jid,
                         const char *on_success, const char *on_death)
{
	const char *open[] = { bid, "", on_success, "", on_death, "[]", "cb", "9999999999", "",
	                       "" };
	redisReply *rep = workflow_script(&R, "batch_open", 10, open, NULL);
	ck_assert_ptr_nonnull(rep);
	freeReplyObject(rep);
	const char *add[] = { jid, raw, "elsewhere", "", bid, "", "0" };
	rep = workflow_script(&R, "batch_push", 7, add, NULL);
	ck_assert_ptr_nonnull(rep);
	freeReplyObject(rep);
	const char *commit[] = { bid };
	rep = workflow_script(&R, "batch_commit", 1, commit, NULL);
	freeReplyObject(rep);
	put_in_progress(raw);
}

/* BT-17 [unit]: a member settled in its batch, then its ack owed; a failover loses the
 * settle with the old primary; reconcile's late ack on the new one settles it again first,
 * so the batch completes. */
START_TEST(test_owed_member_ack_settles_again)
{
	batch_of_one("b3", MEMBER3, "b3b3b3b3b3b3b3b3b3b3b3b3", "Done", "");
	struct job j;
	job_parse(&j, MEMBER3, strlen(MEMBER3), "default");
	ck_assert_int_eq(settle_flow_first(&R, &j, SETTLED_SUCCESS), 0);
	ck_assert_int_eq(integer("SCARD %s", "cogworker:batch:b3:succeeded"), 1);
	unit_fail(0, "ack", 3);
	char *log = capture_log(settle_held_member3, &j);
	ck_assert(pending_has(MEMBER3));
	/* The failover: the new primary never got the settle. */
	redisReply *rep = redisCommand(check_conn, "SMOVE cogworker:batch:b3:succeeded "
	                               "cogworker:batch:b3:pending b3b3b3b3b3b3b3b3b3b3b3b3");
	freeReplyObject(rep);
	rep = redisCommand(check_conn, "HDEL cogworker:batch:b3 fired_success fired_complete "
	                   "completed_at");
	freeReplyObject(rep);
	rep = redisCommand(check_conn, "DEL cogworker:queue:cb cogworker:batch:settled:"
	                   "b3b3b3b3b3b3b3b3b3b3b3b3");
	freeReplyObject(rep);
	struct log_site site = LOG_SITE("test");
	settle_pending_all(&R, &site);
	ck_assert(!pending_has(MEMBER3));
	ck_assert_int_eq(integer("LLEN %s", inprogress), 0);
	ck_assert_int_eq(integer("SCARD %s", "cogworker:batch:b3:pending"), 0);
	ck_assert_int_eq(integer("SCARD %s", "cogworker:batch:b3:succeeded"), 1);
	ck_assert_int_eq(integer("LLEN %s", "cogworker:queue:cb"), 1);    /* on_success */
	job_free(&j);
	free(log);
}
END_TEST

static const char *MEMBER4 = "{\"class\":\"A\",\"args\":[],\"queue\":\"default\","
                             "\"jid\":\"b4b4b4b4b4b4b4b4b4b4b4b4\",\"bid\":\"b4\"}";

/* BT-18 [unit]: a member that died here, whose ack a failover lost: reconcile drops the
 * stray and settles it as what it was, dead: it stays dead in its batch and on_success
 * never fires (it did fire, after on_death, when every finished stray was a success). */
START_TEST(test_lost_dead_member_stays_dead)
{
	batch_of_one("b4", MEMBER4, "b4b4b4b4b4b4b4b4b4b4b4b4", "Done", "Died");
	struct job j;
	job_parse(&j, MEMBER4, strlen(MEMBER4), "default");
	ck_assert_int_eq(settle_flow_first(&R, &j, SETTLED_DEAD), 0);
	ck_assert_int_eq(do_settle_ack_dead(&j), 0);
	ck_assert_int_eq(integer("LLEN %s", inprogress), 0);
	put_in_progress(MEMBER4);       /* the ack the failover lost */
	char *log = capture_log(reconcile_twice, NULL);
	ck_assert_int_eq(integer("LLEN %s", inprogress), 0);
	ck_assert_int_eq(integer("SCARD %s", "cogworker:batch:b4:dead"), 1);
	ck_assert_int_eq(integer("SCARD %s", "cogworker:batch:b4:succeeded"), 0);
	ck_assert_int_eq(integer("HEXISTS cogworker:batch:b4 %s", "fired_success"), 0);
	ck_assert_int_eq(integer("LLEN %s", "cogworker:queue:cb"), 1);    /* on_death only */
	ck_assert_ptr_nonnull(strstr(log, "dropped stray in-progress job "
	                                  "jid=b4b4b4b4b4b4b4b4b4b4b4b4: it finished here"));
	job_free(&j);
	free(log);
}
END_TEST

/* DP-10 [unit]: a plain job that succeeded here, whose ack and settled record a failover
 * lost: reconcile drops the stray, writes the record and releases the job that waits. */
START_TEST(test_lost_success_stray_releases_dependants)
{
	waiter_for_a();
	ck_assert_int_eq(do_settle_ack_success_a(), 0);
	ck_assert_int_eq(integer("LLEN %s", inprogress), 0);
	redisReply *rep = redisCommand(check_conn, "DEL cogworker:batch:settled:"
	                               "a1a1a1a1a1a1a1a1a1a1a1a1");
	freeReplyObject(rep);
	put_in_progress(DEP_A);         /* the ack and the record the failover lost */
	char *log = capture_log(reconcile_twice, NULL);
	assert_waiter_released();
	free(log);
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
	snprintf(inprogress, sizeof inprogress, "cogworker:inprogress:%s", D.identity);
	atomic_store(&D.fetch_mode, FETCH_RELIABLE);
	struct conf *cur = conf_acquire();
	rconn_init(&R, &cur->redis);
	conf_release(cur);
	unit_faults_install();

	Suite *s = suite_create("settle");
	TCase *tc = tcase_create("faults");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_set_timeout(tc, 20);
	tcase_add_test(tc, test_ack_retried);
	tcase_add_test(tc, test_ack_pending);
	tcase_add_test(tc, test_interrupt_extends_lock);
	tcase_add_test(tc, test_interrupt_pending_then_filed);
	tcase_add_test(tc, test_pending_retry_filing_extends_lock);
	tcase_add_test(tc, test_give_back);
	tcase_add_test(tc, test_lost_ack_not_rerun);
	tcase_add_test(tc, test_pending_burial_runs_no_on_death);
	tcase_add_test(tc, test_combined_tries_retry_their_acks_each_on_its_own);
	tcase_add_test(tc, test_member_settle_owed_before_its_ack);
	tcase_add_test(tc, test_lost_member_settled_before_its_ack_again);
	tcase_add_test(tc, test_late_success_ack_releases_dependants);
	tcase_add_test(tc, test_owed_success_ack_releases_dependants);
	tcase_add_test(tc, test_owed_member_ack_settles_again);
	tcase_add_test(tc, test_lost_dead_member_stays_dead);
	tcase_add_test(tc, test_lost_success_stray_releases_dependants);
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
