/* SPDX-License-Identifier: MIT */
/*
 * test_config.c: the conf file loader (src/config.c).
 *
 * Each test writes its conf into a fresh mkdtemp directory under /tmp and loads it. Errors
 * are checked for their exact location prefix "<file>:<line>: " and a telling part of the
 * message, since operators act on both. REDIS_URL is cleared before every test so that the
 * caller's environment cannot change the outcome. Tests run from the repo root (the sample
 * conf is read as conf/cogworkerd.conf).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

static char tmpdir[64];
static char errbuf[1024];

static void setup(void)
{
	strcpy(tmpdir, "/tmp/test_config.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	unsetenv("REDIS_URL");
	errbuf[0] = '\0';
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb; (void)flag; (void)ftw;
	return remove(p);
}

static void teardown(void)
{
	nftw(tmpdir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* Write tmpdir/name; returns its path (static buffer per call site is not needed: strdup). */
static char *write_file(const char *name, const char *text)
{
	char *path;
	FILE *f;

	ck_assert_int_gt(asprintf(&path, "%s/%s", tmpdir, name), 0);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	return path;
}

static int load_ov(const char *text, const struct conf_overrides *ov, struct conf *c)
{
	char *path = write_file("cogworkerd.conf", text);
	int rc = conf_load(path, ov, c, errbuf, sizeof errbuf);
	free(path);
	return rc;
}

static int load(const char *text, struct conf *c)
{
	return load_ov(text, NULL, c);
}

/* The conf must load; returns it for inspection. */
#define LOAD_OK(text, c) do { \
	int rc_ = load((text), (c)); \
	ck_assert_msg(rc_ == 0, "unexpected error: %s", errbuf); \
} while (0)

/* The conf must fail at line `line` of file `file` (relative to tmpdir), mentioning needle. */
static void expect_error_in(const char *text, const char *file, int line, const char *needle)
{
	struct conf c;
	char prefix[256];

	ck_assert_msg(load(text, &c) == -1, "loaded, expected an error about '%s'", needle);
	snprintf(prefix, sizeof prefix, "%s/%s:%d: ", tmpdir, file, line);
	ck_assert_msg(strncmp(errbuf, prefix, strlen(prefix)) == 0,
	              "error '%s' does not start with '%s'", errbuf, prefix);
	ck_assert_msg(strstr(errbuf, needle) != NULL, "error '%s' does not mention '%s'",
	              errbuf, needle);
	ck_assert_ptr_null(c.handlers);
	ck_assert_ptr_null(c.queues);
}

static void expect_error(const char *text, int line, const char *needle)
{
	expect_error_in(text, "cogworkerd.conf", line, needle);
}

/* --- defaults ------------------------------------------------------------------------- */

static void check_defaults(const struct conf *c)
{
	ck_assert_str_eq(c->redis.url, "redis://127.0.0.1:6379/0");
	ck_assert_str_eq(c->redis.host, "127.0.0.1");
	ck_assert_int_eq(c->redis.port, 6379);
	ck_assert_int_eq(c->redis.db, 0);
	ck_assert_ptr_null(c->redis.path);
	ck_assert_ptr_null(c->redis.user);
	ck_assert_ptr_null(c->redis.password);
	ck_assert_ptr_null(c->redis.password_file);
	ck_assert_str_eq(c->redis.display, "redis://127.0.0.1:6379/0");
	ck_assert_double_eq(c->redis.connect_timeout, 2.0);
	ck_assert_double_eq(c->redis.command_timeout, 5.0);
	ck_assert_int_eq(c->concurrency, 10);
	ck_assert_int_eq(c->nqueues, 1);
	ck_assert_str_eq(c->queues[0], "default");
	ck_assert_int_eq(c->nqueue_names, 1);
	ck_assert_str_eq(c->queue_names[0], "default");
	ck_assert_int_eq(c->fetch_basic, 0);
	ck_assert_int_eq(c->containment, JOBCG_AUTO);
	ck_assert_ptr_null(c->containment_where);
	ck_assert_double_eq(c->shutdown_timeout, 25);
	ck_assert_double_eq(c->poll_interval, 2);          /* issue 12: was 5 */
	ck_assert_double_eq(c->heartbeat_interval, 5);
	ck_assert_double_eq(c->process_ttl, 60);
	ck_assert_double_eq(c->orphan_threshold, 300);
	ck_assert_double_eq(c->orphan_check_interval, 60);
	ck_assert_int_eq(c->max_orphanings, 3);
	ck_assert_double_eq(c->lost_dependency_threshold, 3600);
	ck_assert_double_eq(c->fetch_idle_max_interval, 0.5);  /* issue 12: was 1.0 */
	ck_assert_int_eq(c->max_job_bytes, 16 * 1024 * 1024);
	ck_assert_double_eq(c->unique_lock_ttl, 86400);
	ck_assert_int_eq(c->periodic_catch_up, 1);
	ck_assert_int_eq(c->periodic_replace, 0);
	ck_assert_double_eq(c->tick_interval, 1);          /* issue 12: only the catch-up look */
	ck_assert_ptr_null(c->tick_interval_where);
	ck_assert_int_eq(c->log_level, LOG_INFO);
	ck_assert_str_eq(c->metrics_listen, "");
	ck_assert_double_eq(c->status_expiration, 0);
	ck_assert_int_eq(c->history_retention_days, 0);
	ck_assert_int_eq(c->history_max_entries, 50000);
	ck_assert_int_eq(c->history_daily_retention_days, 400);
	ck_assert(c->output_keep == 65536);
	ck_assert_double_eq(c->output_ttl, 604800);
	ck_assert_int_eq(c->output_runs, 10);
	ck_assert_int_eq(c->nhandlers, 0);
	ck_assert_int_eq(c->nperiodic, 0);
	ck_assert_int_eq(c->non_death, 0);
	ck_assert_double_eq(c->on_death_timeout, 30);
	ck_assert_int_eq(conf_queued_ttl(c), 86400);
	ck_assert_int_eq(conf_active_ttl(c), 420);
}

START_TEST(test_defaults_without_file)
{
	struct conf c;

	ck_assert_int_eq(conf_load(NULL, NULL, &c, errbuf, sizeof errbuf), 0);
	ck_assert_ptr_null(c.path);
	check_defaults(&c);
	conf_free(&c);
}
END_TEST

START_TEST(test_defaults_empty_file)
{
	struct conf c;

	LOAD_OK("# nothing\n", &c);
	ck_assert_ptr_nonnull(c.path);
	check_defaults(&c);
	conf_free(&c);
}
END_TEST

START_TEST(test_all_settings)
{
	struct conf c;

	LOAD_OK("redis = { url = \"redis://10.0.0.5:6380/3\"; connect_timeout = 1; "
	        "command_timeout = 2.5; };\n"
	        "concurrency = 25;\n"
	        "queues = [ \"critical,2\", \"low\" ];\n"
	        "fetch = \"basic\";\n"
	        "shutdown_timeout = 0;\n"
	        "poll_interval = 0.5;\n"
	        "heartbeat_interval = 2;\n"
	        "process_ttl = 30;\n"
	        "orphan_threshold = 900;\n"
	        "orphan_check_interval = 30.5;\n"
	        "max_orphanings = 5;\n"
	        "lost_dependency_threshold = 0;\n"
	        "fetch_idle_max_interval = 2;\n"
	        "unique_lock_ttl = 3600.5;\n"
	        "periodic_catch_up = false;\n"
	        "periodic_replace = true;\n"
	        "log_level = \"debug\";\n"
	        "metrics_listen = \"127.0.0.1:9394\";\n"
	        "status_expiration = 1800;\n"
	        "history_retention_days = 30;\n"
	        "history_max_entries = 1000;\n"
	        "history_daily_retention_days = 90;\n"
	        "output_keep = 0;\n"
	        "output_ttl = 3600;\n"
	        "output_runs = 3;\n"
	        "on_death_timeout = 12;\n", &c);
	ck_assert(c.output_keep == 0);
	ck_assert_double_eq(c.output_ttl, 3600);
	ck_assert_int_eq(c.output_runs, 3);
	ck_assert_str_eq(c.redis.host, "10.0.0.5");
	ck_assert_int_eq(c.redis.port, 6380);
	ck_assert_int_eq(c.redis.db, 3);
	ck_assert_double_eq(c.redis.connect_timeout, 1.0);
	ck_assert_double_eq(c.redis.command_timeout, 2.5);
	ck_assert_int_eq(c.concurrency, 25);
	ck_assert_int_eq(c.nqueues, 3);
	ck_assert_int_eq(c.fetch_basic, 1);
	ck_assert_double_eq(c.shutdown_timeout, 0);
	ck_assert_double_eq(c.poll_interval, 0.5);
	ck_assert_double_eq(c.heartbeat_interval, 2);
	ck_assert_double_eq(c.process_ttl, 30);
	ck_assert_double_eq(c.orphan_threshold, 900);
	ck_assert_double_eq(c.orphan_check_interval, 30.5);
	ck_assert_int_eq(c.max_orphanings, 5);
	ck_assert_double_eq(c.lost_dependency_threshold, 0);
	ck_assert_double_eq(c.fetch_idle_max_interval, 2);
	ck_assert_double_eq(c.unique_lock_ttl, 3600.5);
	ck_assert_int_eq(c.periodic_catch_up, 0);
	ck_assert_int_eq(c.periodic_replace, 1);
	ck_assert_int_eq(c.log_level, LOG_DEBUG);
	ck_assert_str_eq(c.metrics_listen, "127.0.0.1:9394");
	ck_assert_double_eq(c.status_expiration, 1800);
	ck_assert_int_eq(c.history_retention_days, 30);
	ck_assert_int_eq(c.history_max_entries, 1000);
	ck_assert_int_eq(c.history_daily_retention_days, 90);
	ck_assert_double_eq(c.on_death_timeout, 12);
	/* Derived TTLs round up (doc/protocol.md §7.17). */
	ck_assert_int_eq(conf_queued_ttl(&c), 3601);
	ck_assert_int_eq(conf_active_ttl(&c), 1020);
	conf_free(&c);
}
END_TEST

START_TEST(test_sample_conf_loads)
{
	struct conf c;
	int rc = conf_load("conf/cogworkerd.conf", NULL, &c, errbuf, sizeof errbuf);

	ck_assert_msg(rc == 0, "conf/cogworkerd.conf: %s", errbuf);
	/* The sample documents the defaults: it must not change any. */
	ck_assert_int_eq(c.concurrency, 10);
	ck_assert_int_eq(c.nqueues, 1);
	ck_assert_str_eq(c.queues[0], "default");
	ck_assert_int_eq(c.fetch_basic, 0);
	ck_assert_double_eq(c.shutdown_timeout, 25);
	ck_assert_double_eq(c.process_ttl, 60);
	ck_assert_double_eq(c.orphan_threshold, 300);
	ck_assert_int_eq(c.max_orphanings, 3);
	ck_assert_double_eq(c.lost_dependency_threshold, 3600);
	ck_assert_double_eq(c.unique_lock_ttl, 86400);
	ck_assert_str_eq(c.redis.display, "redis://127.0.0.1:6379/0");
	ck_assert_ptr_null(c.redis.password_file);
	ck_assert_int_eq(c.non_death, 0);
	ck_assert_double_eq(c.status_expiration, 0);
	ck_assert_int_eq(c.history_retention_days, 0);
	ck_assert_int_eq(c.history_max_entries, 50000);
	ck_assert_int_eq(c.history_daily_retention_days, 400);
	ck_assert_int_ge(c.nhandlers, 1);
	conf_free(&c);
}
END_TEST

/* --- queues --------------------------------------------------------------------------- */

START_TEST(test_queue_weights)
{
	struct conf c;
	static const char *want[] = { "critical", "critical", "critical", "default", "critical" };

	LOAD_OK("queues = [ \"critical,3\", \"default\", \"critical\" ];\n", &c);
	ck_assert_int_eq(c.nqueues, 5);
	for (int i = 0; i < 5; i++)
		ck_assert_str_eq(c.queues[i], want[i]);
	ck_assert_int_eq(c.nqueue_names, 2);
	ck_assert_str_eq(c.queue_names[0], "critical");
	ck_assert_str_eq(c.queue_names[1], "default");
	conf_free(&c);

	/* CF-7: "default,3" then "low" → [default, default, default, low]; a list works too. */
	LOAD_OK("queues = ( \"default,3\", \"low\" );\n", &c);
	ck_assert_int_eq(c.nqueues, 4);
	ck_assert_str_eq(c.queues[2], "default");
	ck_assert_str_eq(c.queues[3], "low");
	conf_free(&c);

	/* CF-6: repeats are kept. */
	LOAD_OK("queues = [ \"default\", \"critical\", \"critical\" ];\n", &c);
	ck_assert_int_eq(c.nqueues, 3);
	ck_assert_int_eq(c.nqueue_names, 2);
	conf_free(&c);
}
END_TEST

START_TEST(test_queue_errors)
{
	expect_error("\nqueues = [ \"a,0\" ];\n", 2, "weight");
	expect_error("queues = [ \"a,x\" ];\n", 1, "weight");
	expect_error("queues = [ \"a,101\" ];\n", 1, "weight");
	expect_error("queues = [ \"a,\" ];\n", 1, "weight");
	expect_error("queues = [ \"a,-1\" ];\n", 1, "weight");
	expect_error("queues = [ \"a,2,3\" ];\n", 1, "weight");
	expect_error("queues = [ \",2\" ];\n", 1, "empty");
	expect_error("queues = [ \"\" ];\n", 1, "empty");
	expect_error("queues = [ \"my queue\" ];\n", 1, "spaces");
	expect_error("queues = [ ];\n", 1, "at least one");
	expect_error("queues = \"default\";\n", 1, "array of strings");
	expect_error("queues = [ 1, 2 ];\n", 1, "array of strings");
	expect_error("queues = (\n \"a\",\n 2 );\n", 3, "array of strings");
}
END_TEST

/* --- the CF rules ----------------------------------------------------------------------- */

START_TEST(test_fetch)
{
	struct conf c;

	LOAD_OK("fetch = \"reliable\";\n", &c);
	ck_assert_int_eq(c.fetch_basic, 0);
	conf_free(&c);
	LOAD_OK("fetch = \"basic\";\n", &c);
	ck_assert_int_eq(c.fetch_basic, 1);
	conf_free(&c);
	expect_error("\n\nfetch = \"fast\";\n", 3, "reliable, basic");
	expect_error("fetch = \"\";\n", 1, "reliable, basic");
	expect_error("fetch = 1;\n", 1, "reliable, basic");
}
END_TEST

/* CT-7: the three names, with the line of the setting kept for --check's error. */
START_TEST(test_containment)
{
	struct conf c;

	LOAD_OK("containment = \"cgroup\";\n", &c);
	ck_assert_int_eq(c.containment, JOBCG_CGROUP);
	ck_assert_ptr_nonnull(strstr(c.containment_where, ":1"));
	conf_free(&c);
	LOAD_OK("\ncontainment = \"process-group\";\n", &c);
	ck_assert_int_eq(c.containment, JOBCG_PGROUP);
	ck_assert_ptr_nonnull(strstr(c.containment_where, ":2"));
	conf_free(&c);
	LOAD_OK("containment = \"auto\";\n", &c);
	ck_assert_int_eq(c.containment, JOBCG_AUTO);
	conf_free(&c);
	expect_error("\n\ncontainment = \"jail\";\n", 3, "auto, cgroup, process-group");
	expect_error("containment = true;\n", 1, "auto, cgroup, process-group");
}
END_TEST

START_TEST(test_max_orphanings)
{
	struct conf c;

	LOAD_OK("max_orphanings = 1;\n", &c);
	ck_assert_int_eq(c.max_orphanings, 1);
	conf_free(&c);
	expect_error("max_orphanings = 0;\n", 1, "max_orphanings must be a positive integer");
	expect_error("max_orphanings = 2.5;\n", 1, "max_orphanings must be an integer");
	expect_error("max_orphanings = \"3\";\n", 1, "max_orphanings must be an integer");
}
END_TEST

static void expect_max_job_bytes(const char *text, long long want)
{
	struct conf c;

	LOAD_OK(text, &c);
	ck_assert_int_eq(c.max_job_bytes, want);
	conf_free(&c);
}

START_TEST(test_max_job_bytes)
{
	expect_max_job_bytes("max_job_bytes = 1024;\n", 1024);
	expect_max_job_bytes("max_job_bytes = 0;\n", 0);
	expect_max_job_bytes("max_job_bytes = 4294967296L;\n", 4294967296LL);
	expect_error("max_job_bytes = 1023;\n", 1,
	             "max_job_bytes must be 0 (no limit) or from 1024 to 4294967296 bytes");
	expect_error("max_job_bytes = -1;\n", 1, "max_job_bytes must be 0 (no limit)");
	expect_error("max_job_bytes = 4294967297L;\n", 1, "max_job_bytes must be 0 (no limit)");
	expect_error("max_job_bytes = 1e6;\n", 1, "max_job_bytes must be an integer");
	expect_error("max_job_bytes = \"16M\";\n", 1, "max_job_bytes must be an integer");
}
END_TEST

START_TEST(test_orphan_threshold)
{
	expect_error("orphan_threshold = -1;\n", 1, "orphan_threshold must be a positive number");
	expect_error("orphan_threshold = \"\";\n", 1, "orphan_threshold must be a number");
	/* An empty value is a syntax error in libconfig: reported with its line too. */
	expect_error("concurrency = 2;\norphan_threshold = ;\n", 2, "syntax error");
}
END_TEST

START_TEST(test_fetch_idle_max_interval)
{
	struct conf c;

	LOAD_OK("fetch_idle_max_interval = 0.25;\n", &c);
	ck_assert_double_eq(c.fetch_idle_max_interval, 0.25);
	conf_free(&c);
	expect_error("fetch_idle_max_interval = 0;\n", 1, "must be a positive number");
	expect_error("fetch_idle_max_interval = \"1\";\n", 1,
	             "fetch_idle_max_interval must be a number");
	expect_error("fetch_idle_max_interval = true;\n", 1, "must be a number");
}
END_TEST

START_TEST(test_unique_lock_ttl)
{
	struct conf c;

	LOAD_OK("unique_lock_ttl = 0.5;\n", &c);
	ck_assert_int_eq(conf_queued_ttl(&c), 1);
	conf_free(&c);
	expect_error("unique_lock_ttl = 0;\n", 1, "positive");
}
END_TEST

START_TEST(test_concurrency)
{
	struct conf c;

	LOAD_OK("concurrency = 1000;\n", &c);
	ck_assert_int_eq(c.concurrency, 1000);
	conf_free(&c);
	expect_error("concurrency = 0;\n", 1, "concurrency must be a positive integer");
	expect_error("concurrency = 1001;\n", 1, "at most 1000");
	expect_error("concurrency = \"10\";\n", 1, "concurrency must be an integer");
	expect_error("concurrency = 10.0;\n", 1, "concurrency must be an integer");
}
END_TEST

START_TEST(test_intervals_positive)
{
	expect_error("poll_interval = 0;\n", 1, "poll_interval must be a positive number");
	expect_error("heartbeat_interval = 0;\n", 1, "heartbeat_interval must be a positive");
	expect_error("process_ttl = 0;\n", 1, "process_ttl must be a positive");
	expect_error("orphan_check_interval = -5;\n", 1, "orphan_check_interval must be a positive");
	expect_error("on_death_timeout = 0;\n", 1, "on_death_timeout must be a positive");
	expect_error("shutdown_timeout = -1;\n", 1, "shutdown_timeout must be a number >= 0");
	expect_error("status_expiration = -1;\n", 1, "status_expiration must be a number >= 0");
	expect_error("lost_dependency_threshold = -1;\n", 1,
	             "lost_dependency_threshold must be a number >= 0");
	expect_error("redis = {\n connect_timeout = 0; };\n", 2, "redis.connect_timeout must be a positive");
	expect_error("redis = { command_timeout = \"5\"; };\n", 1, "redis.command_timeout must be a number");
	expect_error("history_max_entries = 0;\n", 1, "history_max_entries must be");
	expect_error("history_retention_days = -1;\n", 1, "history_retention_days must be");
}
END_TEST

START_TEST(test_cross_checks)
{
	struct conf c;

	expect_error("heartbeat_interval = 5;\n\nprocess_ttl = 10;\n", 3,
	             "process_ttl (10) must be more than twice heartbeat_interval (5)");
	/* Only the heartbeat was changed: it is the one blamed. */
	expect_error("\nheartbeat_interval = 40;\n", 2, "twice heartbeat_interval");
	expect_error("orphan_threshold = 50;\n", 1,
	             "orphan_threshold (50) must be more than process_ttl (60)");
	expect_error("\n\nprocess_ttl = 400;\n", 3, "orphan_threshold (300) must be more than");
	LOAD_OK("heartbeat_interval = 1; process_ttl = 2.5; orphan_threshold = 3;\n", &c);
	conf_free(&c);
}
END_TEST

START_TEST(test_types)
{
	struct conf c;

	/* Seconds accept integers and floats alike. */
	LOAD_OK("redis = { connect_timeout = 3; command_timeout = 0.75; };\nshutdown_timeout = 2.5;\n",
	        &c);
	ck_assert_double_eq(c.redis.connect_timeout, 3.0);
	ck_assert_double_eq(c.redis.command_timeout, 0.75);
	ck_assert_double_eq(c.shutdown_timeout, 2.5);
	conf_free(&c);
	expect_error("periodic_catch_up = 1;\n", 1, "periodic_catch_up must be true or false");
	expect_error("periodic_replace = \"yes\";\n", 1, "periodic_replace must be true or false");
	expect_error("tick_interval = 0;\n", 1, "tick_interval must be a positive number");
	expect_error("redis = \"redis://x\";\n", 1, "redis must be a group");
	expect_error("redis = { url = 5; };\n", 1, "redis.url must be a string");
	expect_error("redis = { url = \"\"; };\n", 1, "redis.url must not be empty");
	expect_error("metrics_listen = 9394;\n", 1, "metrics_listen must be a string");
	expect_error("handlers = { class = \"X\"; };\n", 1, "handlers must be a list");
	expect_error("periodic = [ \"x\" ];\n", 1, "periodic must be a list");
}
END_TEST

START_TEST(test_int_wrap_detected)
{
	struct conf c;

	/* libconfig wraps 8589934592 (2^33) to 0 without the L suffix: refuse it. */
	expect_error("handlers = (\n  { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "    rlimit_as = 8589934592; }\n);\n", 3, "L suffix");
	expect_error("history_max_entries = 3000000000;\n", 1, "L suffix");
	LOAD_OK("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	        "  rlimit_as = 8589934592L; rlimit_cpu = 60; rlimit_nofile = 0x400; } );\n", &c);
	ck_assert(c.handlers[0].rlimit_as == 8589934592LL);
	ck_assert(c.handlers[0].rlimit_cpu == 60);
	ck_assert(c.handlers[0].rlimit_nofile == 1024);
	ck_assert(c.handlers[0].rlimit_nproc == -1);
	conf_free(&c);
	/* No false alarms: a leading 0 is decimal to libconfig; names inside strings and
	 * comments are not the setting. */
	LOAD_OK("concurrency = 010;\n"
	        "handlers = ( { command = [ \"x\", \"rlimit_cpu = 1\" ]; class = \"A\"; "
	        "rlimit_cpu = 2; } ); # rlimit_cpu = 3\n", &c);
	ck_assert_int_eq(c.concurrency, 10);
	ck_assert(c.handlers[0].rlimit_cpu == 2);
	conf_free(&c);
	/* Two handlers on one line: each setting is read against its own text, the wrapped
	 * one is still refused. */
	LOAD_OK("handlers = ( { class = \"A\"; command = [ \"x\" ]; rlimit_cpu = 5; }, "
	        "{ class = \"B\"; command = [ \"x\" ]; rlimit_cpu = 7; } );\n", &c);
	ck_assert(c.handlers[0].rlimit_cpu == 5);
	ck_assert(c.handlers[1].rlimit_cpu == 7);
	conf_free(&c);
	expect_error("handlers = ( { class = \"A\"; command = [ \"x\" ]; rlimit_as = 5; }, "
	             "{ class = \"B\"; command = [ \"x\" ]; rlimit_as = 8589934592; } );\n", 1,
	             "rlimit_as = 8589934592 does not fit");
}
END_TEST

START_TEST(test_log_level)
{
	struct conf c;

	LOAD_OK("log_level = \"warn\";\n", &c);
	ck_assert_int_eq(c.log_level, LOG_WARN);
	conf_free(&c);
	LOAD_OK("log_level = \"error\";\n", &c);
	ck_assert_int_eq(c.log_level, LOG_ERROR);
	conf_free(&c);
	expect_error("log_level = \"loud\";\n", 1, "debug, info, warn, error");
	expect_error("log_level = 1;\n", 1, "debug, info, warn, error");
}
END_TEST

START_TEST(test_metrics_listen)
{
	struct conf c;

	LOAD_OK("metrics_listen = \"[::1]:9394\";\n", &c);
	ck_assert_str_eq(c.metrics_listen, "[::1]:9394");
	conf_free(&c);
	LOAD_OK("metrics_listen = \"localhost:9394\";\n", &c);
	conf_free(&c);
	expect_error("metrics_listen = \"9394\";\n", 1, "host:port");
	expect_error("metrics_listen = \":9394\";\n", 1, "host:port");
	expect_error("metrics_listen = \"host:0\";\n", 1, "port");
	expect_error("metrics_listen = \"host:\";\n", 1, "port");
	expect_error("metrics_listen = \"host:70000\";\n", 1, "port");
	expect_error("metrics_listen = \"::1:9394\";\n", 1, "host:port");
}
END_TEST

/* --- unknown settings --------------------------------------------------------------------- */

START_TEST(test_unknown_settings)
{
	expect_error("concurrency = 5;\nconcurrancy = 5;\n", 2, "unknown setting 'concurrancy'");
	expect_error("redis = {\n  url = \"redis://h\";\n  pasword = \"x\";\n};\n", 3,
	             "unknown setting 'redis.pasword'");
	expect_error("handlers = (\n  { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "    timout = 5; }\n);\n", 3, "unknown setting 'handler.timout'");
	expect_error("periodic = (\n  { cron = \"* * * * *\"; class = \"A\";\n"
	             "    quue = \"low\"; }\n);\n", 3, "unknown setting 'periodic.quue'");
}
END_TEST

START_TEST(test_syntax_error)
{
	/* libconfig says "syntax error" at the line where it gave up; the error points at the
	 * likely start of the mistake and says what libconfig saw. */
	expect_error("concurrency = 5;\nqueues = [ \"a\" \n", 2,
	             "syntax error: the '[' opened here is never closed (libconfig stopped at "
	             "line 3, at the end of the file)");
	/* An unclosed string on line 5 that libconfig reads on to the quote of line 7. */
	expect_error("concurrency = 4;\nqueues = [\"default\"];\nlog_level = \"info\";\n\n"
	             "log_format = \"text;\nheartbeat_interval = 5;\n"
	             "metrics_listen = \"127.0.0.1:9394\";\nprocess_ttl = 60;\n", 5,
	             "syntax error: the string that starts here (\"text;) runs past the end of "
	             "its line: a missing closing \"? (libconfig stopped at line 7, at "
	             "'metrics_listen = \"127.0.0.1:9394\";')");
	expect_error("handlers = (\n  { class = \"A\"; command = [ \"/bin/true\" ]; ]\n);\n", 2,
	             "syntax error: the '{' opened here is closed by a ']' on line 2 (a '}' is "
	             "missing or one too many)");
	expect_error("# a } in a comment, and \"one\n/* { */\nconcurrency = 2;\n}\n", 4,
	             "syntax error: this '}' closes nothing that is open");
	/* Nothing found: libconfig's own line, and what is on it. */
	expect_error("concurrency = 2;\na = 1 2;\n", 2,
	             "syntax error (libconfig stopped here, at 'a = 1 2;'; the mistake is there "
	             "or just before)");
	expect_error("a = 1;\na = 2;\n", 2, "duplicate setting");
	/* In an included file: that file, its line. */
	free(write_file("quote.conf", "# included\nlog_level = \"warn;\nconcurrency = 2;\n"));
	expect_error_in("concurrency = 3;\n@include \"quote.conf\"\n", "quote.conf", 2,
	                "the string that starts here (\"warn;) runs past the end of its line");
}
END_TEST

START_TEST(test_missing_file)
{
	struct conf c;
	char path[128];

	snprintf(path, sizeof path, "%s/nope.conf", tmpdir);
	ck_assert_int_eq(conf_load(path, NULL, &c, errbuf, sizeof errbuf), -1);
	ck_assert_msg(strncmp(errbuf, path, strlen(path)) == 0 && strstr(errbuf, "No such file"),
	              "%s", errbuf);
}
END_TEST

START_TEST(test_include_dir)
{
	struct conf c;
	char *main_path;
	char cwd[512];

	/* The include is found next to the conf, not in the working directory (repo root). */
	ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
	free(write_file("extra.conf", "concurrency = 7;\nqueues = [ \"x,2\" ];\n"));
	main_path = write_file("main.conf", "log_level = \"warn\";\n@include \"extra.conf\"\n");
	ck_assert_int_eq(conf_load(main_path, NULL, &c, errbuf, sizeof errbuf), 0);
	ck_assert_int_eq(c.concurrency, 7);
	ck_assert_int_eq(c.nqueues, 2);
	ck_assert_int_eq(c.log_level, LOG_WARN);
	conf_free(&c);
	free(main_path);

	/* An error in the included file names that file and its line. */
	free(write_file("bad.conf", "# comment\nconcurrency = 0;\n"));
	expect_error_in("log_level = \"warn\";\n@include \"bad.conf\"\n", "bad.conf", 2,
	                "concurrency must be a positive integer");
	expect_error("@include \"missing.conf\"\n", 1, "include");
}
END_TEST

/* --- handlers ------------------------------------------------------------------------------- */

START_TEST(test_handler_settings)
{
	struct conf c;
	const struct handler *h;

	LOAD_OK("on_death_timeout = 45;\noutput_keep = 1024;\n"
	        "handlers = (\n"
	        "  { class = \"Resize\";\n"
	        "    command = [ \"/usr/local/bin/resize\", \"--quality\", \"80\" ];\n"
	        "    args_as_argv = true; timeout = 300; kill_grace = 2.5;\n"
	        "    env = [ \"TMPDIR=/var/tmp\", \"EMPTY=\" ]; env_passthrough = [ \"PATH\" ];\n"
	        "    cwd = \"/var/lib/resize\"; user = \"resize\"; group = \"media\";\n"
	        "    dead_exit_codes = [ 3, 5 ]; discard_exit_codes = [ 4 ]; output_tail = 1048576;\n"
	        "    rlimit_cpu = 600; rlimit_nofile = 1024; rlimit_nproc = 64;\n"
	        "    output_keep = 16777216;\n"
	        "    on_death = [ \"/bin/notify\", \"resize\" ]; on_death_timeout = 5; },\n"
	        "  { class = \"*\"; command = [ \"/usr/local/libexec/dispatch\" ]; }\n"
	        ");\n", &c);
	ck_assert_int_eq(c.nhandlers, 2);
	h = &c.handlers[0];
	ck_assert_str_eq(h->class_name, "Resize");
	ck_assert_int_eq(h->command.n, 3);
	ck_assert_str_eq(h->command.v[0], "/usr/local/bin/resize");
	ck_assert_str_eq(h->command.v[2], "80");
	ck_assert_ptr_null(h->command.v[3]);
	ck_assert_int_eq(h->args_as_argv, 1);
	ck_assert_double_eq(h->timeout, 300);
	ck_assert_double_eq(h->kill_grace, 2.5);
	ck_assert_int_eq(h->env.n, 2);
	ck_assert_str_eq(h->env.v[1], "EMPTY=");
	ck_assert_int_eq(h->env_passthrough.n, 1);
	ck_assert_str_eq(h->cwd, "/var/lib/resize");
	ck_assert_str_eq(h->user, "resize");
	ck_assert_str_eq(h->group, "media");
	ck_assert_int_eq(h->ndead, 2);
	ck_assert_int_eq(h->dead_codes[1], 5);
	ck_assert_int_eq(h->ndiscard, 1);
	ck_assert_int_eq(h->discard_codes[0], 4);
	ck_assert_uint_eq(h->output_tail, 1048576);
	ck_assert(h->rlimit_cpu == 600 && h->rlimit_nofile == 1024 && h->rlimit_nproc == 64);
	ck_assert(h->rlimit_as == -1);
	ck_assert_int_eq(h->on_death.n, 2);
	ck_assert_double_eq(h->on_death_timeout, 5);
	ck_assert(h->output_keep == 16777216);
	ck_assert_int_eq(h->line, 4);

	/* Defaults of the second one; its on_death_timeout is the global one. */
	h = &c.handlers[1];
	ck_assert_int_eq(h->args_as_argv, 0);
	ck_assert_double_eq(h->timeout, 0);
	ck_assert_double_eq(h->kill_grace, 10);
	ck_assert_uint_eq(h->output_tail, 4096);
	ck_assert(h->output_keep == 1024);     /* the global one */
	ck_assert_int_eq(h->env.n, 0);
	ck_assert_ptr_nonnull(h->env.v);
	ck_assert_ptr_null(h->env.v[0]);
	ck_assert_ptr_nonnull(h->on_death.v);
	ck_assert_int_eq(h->on_death.n, 0);
	ck_assert_ptr_null(h->cwd);
	ck_assert_ptr_null(h->user);
	ck_assert_int_eq(h->ndead, 0);
	ck_assert(h->rlimit_cpu == -1 && h->rlimit_as == -1);
	ck_assert_double_eq(h->on_death_timeout, 45);

	ck_assert_ptr_eq(conf_find_handler(&c, "Resize"), &c.handlers[0]);
	ck_assert_ptr_eq(conf_find_handler(&c, "Other"), &c.handlers[1]);
	conf_free(&c);

	LOAD_OK("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ]; } );\n", &c);
	ck_assert_ptr_nonnull(conf_find_handler(&c, "A"));
	ck_assert_ptr_null(conf_find_handler(&c, "B"));
	ck_assert_double_eq(c.handlers[0].on_death_timeout, 30);
	conf_free(&c);
	LOAD_OK("handlers = ();\nperiodic = ();\n", &c);
	ck_assert_int_eq(c.nhandlers, 0);
	conf_free(&c);
}
END_TEST

/* Limits, deadlines and at-most-once (doc/protocol.md §7.30-§7.32): defaults and values. */
/* Caps (doc/design.md "Caps per handler"): the units, where each was set, the rejections. */
START_TEST(test_handler_caps)
{
	struct conf c;
	const struct handler *h;

	LOAD_OK("handlers = (\n"
	        "  { class = \"A\"; command = [ \"/bin/true\" ];\n"
	        "    memory_max = \"256M\"; cpu_max = \"50%\"; pids_max = 64; dead_on_oom = true; },\n"
	        "  { class = \"B\"; command = [ \"/bin/true\" ]; memory_max = 268435456;\n"
	        "    cpu_max = \"2\"; },\n"
	        "  { class = \"C\"; command = [ \"/bin/true\" ]; memory_max = \"1.5GiB\"; cpu_max = 0.25; },\n"
	        "  { class = \"D\"; command = [ \"/bin/true\" ]; memory_max = \"2 GiB\"; },\n"
	        "  { class = \"E\"; command = [ \"/bin/true\" ]; }\n"
	        ");\n", &c);
	h = &c.handlers[0];
	ck_assert_int_eq(h->caps.max[CAP_MEMORY], 256LL << 20);
	ck_assert_int_eq(h->caps.max[CAP_CPU], 50000);
	ck_assert_int_eq(h->caps.max[CAP_PIDS], 64);
	ck_assert_int_eq(h->caps.dead_on_oom, 1);
	char where[512];
	snprintf(where, sizeof where, "%s/cogworkerd.conf:3", tmpdir);
	for (int k = 0; k < NCAPS; k++)
		ck_assert_str_eq(h->caps.where[k], where);
	h = &c.handlers[1];
	ck_assert_int_eq(h->caps.max[CAP_MEMORY], 256LL << 20);
	ck_assert_int_eq(h->caps.max[CAP_CPU], 200000);
	ck_assert_int_eq(h->caps.max[CAP_PIDS], 0);
	ck_assert_ptr_null(h->caps.where[CAP_PIDS]);
	ck_assert_int_eq(h->caps.dead_on_oom, 0);
	ck_assert_int_eq(c.handlers[2].caps.max[CAP_MEMORY], 3LL << 29);
	ck_assert_int_eq(c.handlers[2].caps.max[CAP_CPU], 25000);
	ck_assert_int_eq(c.handlers[3].caps.max[CAP_MEMORY], 2LL << 30);
	/* The default: no cap at all. */
	for (int k = 0; k < NCAPS; k++) {
		ck_assert_int_eq(c.handlers[4].caps.max[k], 0);
		ck_assert_ptr_null(c.handlers[4].caps.where[k]);
	}
	conf_free(&c);
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  memory_max = \"512 KiB\"; } );\n", 2, "memory_max must be at least 1M");

	static const char *const bad_sizes[] = { "256MB", "256m", "256 M B", "1.5", "M", "",
	                                         "-1G", "256X", "1e9", "99999999T", NULL };
	for (int i = 0; bad_sizes[i]; i++) {
		char *text;
		ck_assert_int_gt(asprintf(&text, "handlers = ( { class = \"A\"; command = "
		                          "[ \"/bin/true\" ];\n  memory_max = \"%s\"; } );\n",
		                          bad_sizes[i]), 0);
		expect_error(text, 2, "handler.memory_max: \"");
		expect_error(text, 2, "is not a size");
		free(text);
	}
	static const char *const bad_cpus[] = { "half", "50 %", "%", "-1", "0.001",
	                                        "0%", "2CPU", NULL };
	for (int i = 0; bad_cpus[i]; i++) {
		char *text;
		ck_assert_int_gt(asprintf(&text, "handlers = ( { class = \"A\"; command = "
		                          "[ \"/bin/true\" ];\n  cpu_max = \"%s\"; } );\n",
		                          bad_cpus[i]), 0);
		expect_error(text, 2, "handler.cpu_max");
		free(text);
	}
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  pids_max = 0; } );\n", 2, "handler.pids_max must be an integer from 1");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  pids_max = \"64\"; } );\n", 2, "handler.pids_max must be an integer");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  memory_max = 1.5; } );\n", 2, "handler.memory_max must be an integer");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  dead_on_oom = 1; } );\n", 2, "handler.dead_on_oom must be true or false");
}
END_TEST

START_TEST(test_handler_limits)
{
	struct conf c;
	const struct handler *h;

	LOAD_OK("handlers = (\n"
	        "  { class = \"A\"; command = [ \"/bin/true\" ]; max_concurrency = 2;\n"
	        "    fleet_concurrency = 3; rate_limit = \"10/60s\"; expires_in = 90.5;\n"
	        "    expired = \"discard\"; on_orphan = \"dead\"; },\n"
	        "  { class = \"B\"; command = [ \"/bin/true\" ]; rate_limit = \"100/1m\"; },\n"
	        "  { class = \"C\"; command = [ \"/bin/true\" ]; rate_limit = \"5/2.5s\";\n"
	        "    expired = \"dead\"; on_orphan = \"requeue\"; },\n"
	        "  { class = \"D\"; command = [ \"/bin/true\" ]; rate_limit = \"1/1h\"; },\n"
	        "  { class = \"E\"; command = [ \"/bin/true\" ]; rate_limit = \"\"; }\n"
	        ");\n", &c);
	h = &c.handlers[0];
	ck_assert_int_eq(h->max_concurrency, 2);
	ck_assert_int_eq(h->fleet_concurrency, 3);
	ck_assert_int_eq(h->rate_limit_n, 10);
	ck_assert_double_eq(h->rate_limit_window, 60);
	ck_assert_double_eq(h->expires_in, 90.5);
	ck_assert_int_eq(h->expired_discard, 1);
	ck_assert_int_eq(h->on_orphan_dead, 1);
	ck_assert_int_eq(c.handlers[1].rate_limit_n, 100);
	ck_assert_double_eq(c.handlers[1].rate_limit_window, 60);
	ck_assert_double_eq(c.handlers[2].rate_limit_window, 2.5);
	ck_assert_double_eq(c.handlers[3].rate_limit_window, 3600);
	/* The defaults: no limit, no deadline, buried when expired, requeued when orphaned. */
	for (int i = 2; i < 5; i++) {
		h = &c.handlers[i];
		ck_assert_int_eq(h->max_concurrency, 0);
		ck_assert_int_eq(h->fleet_concurrency, 0);
		ck_assert_double_eq(h->expires_in, 0);
		ck_assert_int_eq(h->expired_discard, 0);
		ck_assert_int_eq(h->on_orphan_dead, 0);
	}
	ck_assert_int_eq(c.handlers[4].rate_limit_n, 0);
	conf_free(&c);

	static const char *const bad_rates[] = { "10", "10/", "/60s", "0/60s", "10/0s", "10/60x",
	                                         "10/-1s", "1000001/1s", "10/2d", "10/90000s",
	                                         "ten/60s", "10/60s ", NULL };
	for (int i = 0; bad_rates[i]; i++) {
		char *text;
		ck_assert_int_gt(asprintf(&text, "handlers = ( { class = \"A\"; command = "
		                          "[ \"/bin/true\" ];\n  rate_limit = \"%s\"; } );\n",
		                          bad_rates[i]), 0);
		expect_error(text, 2, "handler.rate_limit: ");
		free(text);
	}
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  max_concurrency = -1; } );\n", 2, "handler.max_concurrency must be an integer");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  max_concurrency = 1001; } );\n", 2, "at most 1000");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  fleet_concurrency = 1.5; } );\n", 2, "must be an integer");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  rate_limit = 10; } );\n", 2, "handler.rate_limit must be a string");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  expires_in = -5; } );\n", 2, "handler.expires_in must be a number >= 0");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  expired = \"drop\"; } );\n", 2,
	             "handler.expired must be \"dead\" or \"discard\"");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  on_orphan = true; } );\n", 2,
	             "handler.on_orphan must be \"requeue\" or \"dead\"");
}
END_TEST

/* Fair share (doc/protocol.md §7.35): group_by's grammar, the group limits, and a job's
 * group as read from its text. */
START_TEST(test_handler_groups)
{
	struct conf c;
	const struct handler *h;

	LOAD_OK("handlers = (\n"
	        "  { class = \"A\"; command = [ \"/bin/true\" ]; group_by = \"args[0].account_id\";\n"
	        "    group_concurrency = 2; group_rate_limit = \"5/2s\"; },\n"
	        "  { class = \"B\"; command = [ \"/bin/true\" ]; group_by = \"tenant\"; },\n"
	        "  { class = \"C\"; command = [ \"/bin/true\" ]; }\n"
	        ");\n", &c);
	h = &c.handlers[0];
	ck_assert_str_eq(h->group_by, "args[0].account_id");
	ck_assert_int_eq(h->group_path.nsteps, 3);
	ck_assert_str_eq(h->group_path.steps[0].key, "args");
	ck_assert_ptr_null(h->group_path.steps[1].key);
	ck_assert_int_eq(h->group_path.steps[1].index, 0);
	ck_assert_str_eq(h->group_path.steps[2].key, "account_id");
	ck_assert_int_eq(h->group_concurrency, 2);
	ck_assert_int_eq(h->group_rate_n, 5);
	ck_assert_double_eq(h->group_rate_window, 2);
	ck_assert_str_eq(c.handlers[1].group_by, "tenant");
	ck_assert_int_eq(c.handlers[1].group_concurrency, 0);
	/* The defaults: no groups. */
	ck_assert_ptr_null(c.handlers[2].group_by);
	ck_assert_int_eq(c.handlers[2].group_concurrency, 0);
	ck_assert_int_eq(c.handlers[2].group_rate_n, 0);

	struct { const char *raw, *want; enum group_found found; } jobs[] = {
		{ "{\"args\":[{\"account_id\":\"acme\"}]}", "acme", GROUP_FOUND },
		{ "{\"args\":[{\"account_id\":42}]}", "42", GROUP_FOUND },
		{ "{\"args\":[{\"account_id\":-7 }]}", "-7", GROUP_FOUND },
		{ "{\"args\":[{\"account_id\":1,\"account_id\":\"last\"}]}", "last", GROUP_FOUND },
		{ "{\"args\":[{\"account_id\":\"\\u00e9t\\u00e9\"}]}", "\xc3\xa9t\xc3\xa9",
		  GROUP_FOUND },
		{ "{\"args\":[]}", "", GROUP_ABSENT },
		{ "{\"args\":[{\"other\":1}]}", "", GROUP_ABSENT },
		{ "{\"args\":[{\"account_id\":null}]}", "", GROUP_ABSENT },
		{ "{\"args\":[\"acme\"]}", "", GROUP_ABSENT },
		{ "{\"args\":[{\"account_id\":{\"a\":1}}]}", "", GROUP_INVALID },
		{ "{\"args\":[{\"account_id\":[1]}]}", "", GROUP_INVALID },
		{ "{\"args\":[{\"account_id\":1.5}]}", "", GROUP_INVALID },
		{ "{\"args\":[{\"account_id\":1e3}]}", "", GROUP_INVALID },
		{ "{\"args\":[{\"account_id\":true}]}", "", GROUP_INVALID },
		{ "{\"args\":[{\"account_id\":\"a\\u0000b\"}]}", "", GROUP_INVALID },
	};
	for (size_t i = 0; i < sizeof jobs / sizeof *jobs; i++) {
		char *out;
		const char *why;
		enum group_found f = group_of(jobs[i].raw, strlen(jobs[i].raw), &h->group_path,
		                              &out, &why);
		ck_assert_msg(f == jobs[i].found, "%s: %d", jobs[i].raw, f);
		ck_assert_str_eq(out, jobs[i].want);
		ck_assert(f != GROUP_INVALID || why);
		free(out);
	}
	char big[GROUP_MAX_LEN + 40];
	snprintf(big, sizeof big, "{\"args\":[{\"account_id\":\"%0*d\"}]}", GROUP_MAX_LEN + 1, 0);
	char *out;
	const char *why;
	ck_assert_int_eq(group_of(big, strlen(big), &h->group_path, &out, &why), GROUP_INVALID);
	ck_assert_str_eq(why, "longer than 200 bytes");
	free(out);
	conf_free(&c);

	static const struct { const char *path, *why; } bad[] = {
		{ "args[x]", "'[' must be followed by an index" },
		{ "args[0", "'[' must be followed by an index" },
		{ "args[-1]", "'[' must be followed by an index" },
		{ "[0]", "must start with a key" },
		{ "args[0].", "a '.' must be followed by a key" },
		{ "a b", "expected '.key' or '[N]'" },
		{ "a.b.c.d.e.f.g.h.i", "too many steps (at most 8)" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		char *text;
		ck_assert_int_gt(asprintf(&text, "handlers = ( { class = \"A\"; command = "
		                          "[ \"/bin/true\" ];\n  group_by = \"%s\"; } );\n",
		                          bad[i].path), 0);
		expect_error(text, 2, bad[i].why);
		free(text);
	}
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  group_rate_limit = \"5/2x\"; } );\n", 2, "handler.group_rate_limit: ");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  group_concurrency = 2; } );\n", 2, "a limit per group needs group_by");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  group_rate_limit = \"1/1s\"; } );\n", 2, "a limit per group needs group_by");
}
END_TEST

START_TEST(test_handler_warm)
{
	struct conf c;
	const struct handler *h;

	LOAD_OK("handlers = (\n"
	        "  { class = \"A\"; command = [ \"/bin/true\" ]; warm = true;\n"
	        "    warm_start_timeout = 2.5; warm_max_jobs = 50; warm_max_rss = 4294967296L;\n"
	        "    warm_max_age = 3600; warm_idle_timeout = 60; warm_prefetch_hold = 0; },\n"
	        "  { class = \"B\"; command = [ \"/bin/true\" ]; }\n"
	        ");\n", &c);
	h = &c.handlers[0];
	ck_assert_int_eq(h->warm, 1);
	ck_assert_double_eq(h->warm_start_timeout, 2.5);
	ck_assert_int_eq(h->warm_max_jobs, 50);
	ck_assert_int_eq(h->warm_max_rss, 4294967296LL);
	ck_assert_double_eq(h->warm_max_age, 3600);
	ck_assert_double_eq(h->warm_idle_timeout, 60);
	ck_assert_double_eq(h->warm_prefetch_hold, 0);
	/* The defaults: cold; 30 s to start, 10 000 jobs, no RSS or age limit, 300 s idle. */
	h = &c.handlers[1];
	ck_assert_int_eq(h->warm, 0);
	ck_assert_double_eq(h->warm_start_timeout, 30);
	ck_assert_int_eq(h->warm_max_jobs, 10000);
	ck_assert_int_eq(h->warm_max_rss, 0);
	ck_assert_double_eq(h->warm_max_age, 0);
	ck_assert_double_eq(h->warm_idle_timeout, 300);
	ck_assert_double_eq(h->warm_prefetch_hold, 0.05);
	conf_free(&c);

	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ]; warm = true;\n"
	             "  args_as_argv = true; } );\n", 2,
	             "handler 'A': args_as_argv can't apply to a warm handler");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  warm = 1; } );\n", 2, "handler.warm must be true or false");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  warm_start_timeout = 0; } );\n", 2, "handler.warm_start_timeout must be");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  warm_max_jobs = -1; } );\n", 2, "handler.warm_max_jobs must be");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  warm_max_rss = 1.5; } );\n", 2, "must be an integer");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  warm_idle_timeout = 0; } );\n", 2, "handler.warm_idle_timeout must be");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  warm_prefetch_hold = 61; } );\n", 2, "handler.warm_prefetch_hold must be");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  warm_prefetch_hold = -1; } );\n", 2, "handler.warm_prefetch_hold must be");
}
END_TEST

START_TEST(test_handler_confinement)
{
	struct conf c;
	const struct handler *h;

	LOAD_OK("handlers = (\n"
	        "  { class = \"A\"; command = [ \"/bin/true\" ];\n"
	        "    no_new_privileges = true; network = false; private_tmp = true;\n"
	        "    read_only = true; writable_paths = [ \"/srv/out\", \"/var/lib/x/\" ]; },\n"
	        "  { class = \"B\"; command = [ \"/bin/true\" ]; network = true; }\n"
	        ");\n", &c);
	h = &c.handlers[0];
	ck_assert_int_eq(h->confine.network, 0);
	ck_assert_int_eq(h->confine.private_tmp, 1);
	ck_assert_int_eq(h->confine.read_only, 1);
	ck_assert_int_eq(h->confine.no_new_privileges, 1);
	ck_assert_int_eq(h->confine.writable_paths.n, 2);
	ck_assert_str_eq(h->confine.writable_paths.v[1], "/var/lib/x/");
	/* The line of the first setting turned on, for what the probe finds. */
	ck_assert_ptr_nonnull(strstr(h->confine.at, "/cogworkerd.conf:3"));
	/* The defaults: nothing confined; network = true turns nothing on. */
	h = &c.handlers[1];
	ck_assert_int_eq(h->confine.network, 1);
	ck_assert_int_eq(h->confine.private_tmp, 0);
	ck_assert_int_eq(h->confine.read_only, 0);
	ck_assert_int_eq(h->confine.no_new_privileges, 0);
	ck_assert_int_eq(h->confine.writable_paths.n, 0);
	ck_assert_ptr_null(h->confine.at);
	conf_free(&c);

#define CONFINED(body) "handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n" body " } );\n"
	expect_error(CONFINED("  network = \"off\";"), 2, "handler.network must be true or false");
	expect_error(CONFINED("  private_tmp = 1;"), 2, "handler.private_tmp must be true or false");
	expect_error(CONFINED("  writable_paths = [ \"/srv\" ];"), 2,
	             "handler 'A': writable_paths needs read_only = true");
	expect_error(CONFINED("  read_only = true;\n  writable_paths = [ \"srv\" ];"), 3,
	             "'srv' is not an absolute path");
	expect_error(CONFINED("  read_only = true;\n  writable_paths = [ \"/srv/./x\" ];"), 3,
	             "has a . or .. component");
	expect_error(CONFINED("  read_only = true;\n  writable_paths = [ \"/a/..\" ];"), 3,
	             "has a . or .. component");
	expect_error(CONFINED("  read_only = true;\n  writable_paths = [ \"//\" ];"), 3,
	             "is the whole file system");
	expect_error(CONFINED("  read_only = true;\n  writable_paths = [ 1 ];"), 3,
	             "handler.writable_paths must be an array of strings");
	expect_error(CONFINED("  read_only = true; private_tmp = true;\n"
	                      "  writable_paths = [ \"/srv\", \"/dev/shm/x\" ];"), 3,
	             "writable path /dev/shm/x is under /dev/shm");
	/* /tmpfoo is not under /tmp */
	LOAD_OK(CONFINED("  read_only = true; private_tmp = true; writable_paths = [ \"/tmpfoo\" ];"),
	        &c);
	conf_free(&c);
#undef CONFINED
}
END_TEST

START_TEST(test_handler_errors)
{
	expect_error("handlers = (\n  { class = \"A\"; timeout = 5; }\n);\n", 2,
	             "handler 'A' has no command");
	expect_error("handlers = (\n  { class = \"A\";\n    command = [ ]; }\n);\n", 3,
	             "handler.command must not be empty");
	expect_error("handlers = ( { class = \"A\"; command = [ \"\" ]; } );\n", 1,
	             "program must not be empty");
	expect_error("handlers = ( { class = \"A\"; command = \"/bin/true\"; } );\n", 1,
	             "handler.command must be an array of strings");
	expect_error("handlers = ( { class = \"A\"; command = [ 1 ]; } );\n", 1,
	             "handler.command must be an array of strings");
	expect_error("handlers = (\n  { command = [ \"/bin/true\" ]; }\n);\n", 2,
	             "handler without class");
	expect_error("handlers = ( { class = \"\"; command = [ \"/bin/true\" ]; } );\n", 1,
	             "handler.class must not be empty");
	expect_error("handlers = (\n  { class = \"A\"; command = [ \"/bin/true\" ]; },\n"
	             "  { class = \"B\"; command = [ \"/bin/true\" ]; },\n"
	             "  { class = \"A\"; command = [ \"/bin/false\" ]; }\n);\n", 4,
	             "duplicate handler for class 'A' (first at line 2)");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  dead_exit_codes = [ 0 ]; } );\n", 2, "not an exit code");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  discard_exit_codes = [ 256 ]; } );\n", 2, "not an exit code");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  dead_exit_codes = 3; } );\n", 2, "array of exit codes");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  dead_exit_codes = [ 3 ];\n  discard_exit_codes = [ 4, 3 ]; } );\n", 3,
	             "exit code 3 is in both");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  env = [ \"NOEQUALS\" ]; } );\n", 2, "NAME=value");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  env = [ \"=x\" ]; } );\n", 2, "NAME=value");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  env_passthrough = [ \"A=B\" ]; } );\n", 2, "variable name");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  cwd = \"relative/dir\"; } );\n", 2, "absolute path");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  output_tail = 1048577; } );\n", 2, "at most 1048576");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  output_keep = 16777217; } );\n", 2, "at most 16777216");
	expect_error("output_keep = -1;\n", 1, "output_keep must be an integer >= 0");
	expect_error("output_ttl = 0;\n", 1, "output_ttl must be a positive number");
	expect_error("output_runs = 0;\n", 1, "output_runs must be a positive integer");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  timeout = -1; } );\n", 2, "handler.timeout must be a number >= 0");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  timeout = \"60\"; } );\n", 2, "handler.timeout must be a number");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  rlimit_nofile = -2; } );\n", 2, "handler.rlimit_nofile must be an integer >= 0");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  args_as_argv = \"yes\"; } );\n", 2, "true or false");
	expect_error("handlers = ( { class = \"A\"; command = [ \"/bin/true\" ];\n"
	             "  on_death = \"/bin/notify\"; } );\n", 2, "handler.on_death must be an array");
	expect_error("handlers = ( \"A\" );\n", 1, "each handler must be a group");
}
END_TEST

START_TEST(test_global_on_death)
{
	struct conf c;

	LOAD_OK("on_death = [ \"/bin/notify\", \"--dead\" ];\n", &c);
	ck_assert_int_eq(c.non_death, 1);
	ck_assert_int_eq(c.on_death[0].n, 2);
	ck_assert_str_eq(c.on_death[0].v[1], "--dead");
	ck_assert_ptr_null(c.on_death[0].v[2]);
	conf_free(&c);

	LOAD_OK("on_death = ( [ \"/bin/a\" ], [ \"/bin/b\", \"x\" ], ( \"/bin/c\" ) );\n", &c);
	ck_assert_int_eq(c.non_death, 3);
	ck_assert_str_eq(c.on_death[0].v[0], "/bin/a");
	ck_assert_str_eq(c.on_death[1].v[1], "x");
	ck_assert_str_eq(c.on_death[2].v[0], "/bin/c");
	conf_free(&c);

	LOAD_OK("on_death = [ ];\n", &c);
	ck_assert_int_eq(c.non_death, 0);
	conf_free(&c);

	expect_error("on_death = \"/bin/notify\";\n", 1, "on_death must be a command");
	expect_error("on_death = ( [ \"/bin/a\" ],\n  [ ] );\n", 2, "must not be empty");
	expect_error("on_death = ( [ \"/bin/a\" ],\n  5 );\n", 2, "array of strings");
}
END_TEST

/* --- periodic --------------------------------------------------------------------------------- */

START_TEST(test_periodic)
{
	struct conf c;
	const struct periodic_entry *p;

	LOAD_OK("periodic = (\n"
	        "  { cron = \"*/5 * * * *\"; class = \"Report\";\n"
	        "    args = \"[{\\\"section\\\": \\\"digest\\\"}, 12345678901234567890, 1.50]\";\n"
	        "    retry = 3; unique = \"until_executed\"; },\n"
	        "  { cron = \"0 4 * * *\"; class = \"Nightly\"; retry = true; },\n"
	        "  { cron = \"0 5 * * *\"; class = \"Other\"; retry = false; unique = \"\"; }\n"
	        ");\n", &c);
	ck_assert_int_eq(c.nperiodic, 3);
	p = &c.periodic[0];
	ck_assert_str_eq(p->cron, "*/5 * * * *");
	ck_assert_str_eq(p->class_name, "Report");
	/* The text is kept as written: big integers and float spellings survive. */
	ck_assert_str_eq(p->args_json,
	                 "[{\"section\": \"digest\"}, 12345678901234567890, 1.50]");
	ck_assert_str_eq(p->retry_json, "3");
	ck_assert_int_eq(p->until_executed, 1);
	ck_assert_int_eq(p->line, 2);
	p = &c.periodic[1];
	ck_assert_str_eq(p->args_json, "[]");
	ck_assert_str_eq(p->retry_json, "true");
	ck_assert_int_eq(p->until_executed, 0);
	ck_assert_str_eq(c.periodic[2].retry_json, "false");
	conf_free(&c);

	LOAD_OK("periodic = ( { cron = \"* * * * *\"; class = \"A\"; } );\n", &c);
	ck_assert_str_eq(c.periodic[0].retry_json, "0");
	ck_assert_str_eq(c.periodic[0].queue, "default");
	conf_free(&c);

	LOAD_OK("periodic = (\n  { cron = \"* * * * *\"; class = \"A\"; queue = \"reports\"; }\n);\n",
	        &c);
	ck_assert_str_eq(c.periodic[0].queue, "reports");
	ck_assert_ptr_nonnull(strstr(c.periodic[0].where, "cogworkerd.conf:2"));
	conf_free(&c);
}
END_TEST

/* --check's warnings (issue 12): a class without a handler, a queue this conf does not
 * read, tick_interval set; none of them an error. */
START_TEST(test_conf_warnings)
{
	struct conf c;
	char **w;
	int n;

	LOAD_OK("queues = [ \"mail\", \"reports\" ];\n"
	        "handlers = ( { class = \"A\"; command = [ \"/bin/true\" ]; } );\n"
	        "periodic = (\n"
	        "  { cron = \"* * * * *\"; class = \"A\"; queue = \"reports\"; },\n"
	        "  { cron = \"* * * * *\"; class = \"A\"; },\n"
	        "  { cron = \"0 * * * *\"; class = \"B\"; queue = \"mail\"; }\n"
	        ");\n", &c);
	n = conf_warnings(&c, &w);
	ck_assert_int_eq(n, 2);
	ck_assert_ptr_nonnull(strstr(w[0], "cogworkerd.conf:5: periodic entry A (* * * * *) puts "
	                             "its jobs on queue 'default', which this conf does not read "
	                             "(queues: mail, reports)"));
	ck_assert_ptr_nonnull(strstr(w[1], "cogworkerd.conf:6: periodic job class B can't be "
	                             "resolved"));
	conf_warnings_free(w, n);
	conf_free(&c);

	LOAD_OK("handlers = ( { class = \"*\"; command = [ \"/bin/true\" ]; } );\n"
	        "periodic = ( { cron = \"* * * * *\"; class = \"A\"; } );\n", &c);
	ck_assert_int_eq(conf_warnings(&c, &w), 0);
	conf_free(&c);

	LOAD_OK("poll_interval = 1;\ntick_interval = 0.2;\n", &c);
	ck_assert_double_eq(c.tick_interval, 0.2);
	n = conf_warnings(&c, &w);
	ck_assert_int_eq(n, 1);
	ck_assert_ptr_nonnull(strstr(w[0], "cogworkerd.conf:2: tick_interval no longer paces"));
	conf_warnings_free(w, n);
	conf_free(&c);
}
END_TEST

START_TEST(test_periodic_errors)
{
	expect_error("periodic = (\n  { cron = \"* * * * *\"; class = \"A\";\n"
	             "    args = \"[1, 2\"; }\n);\n", 3, "periodic.args is not valid JSON");
	expect_error("periodic = ( { cron = \"* * * * *\"; class = \"A\";\n"
	             "    args = \"{\\\"a\\\": 1}\"; } );\n", 2, "must be a JSON array");
	expect_error("periodic = ( { cron = \"* * * * *\"; class = \"A\";\n"
	             "    args = \"[1] x\"; } );\n", 2, "not valid JSON");
	expect_error("periodic = ( { cron = \"* * * * *\"; class = \"A\";\n"
	             "    args = [ 1, 2 ]; } );\n", 2, "must be a string holding a JSON array");
	expect_error("periodic = ( { cron = \"* * * * *\"; class = \"A\";\n"
	             "    retry = -1; } );\n", 2, "periodic.retry must be");
	expect_error("periodic = ( { cron = \"* * * * *\"; class = \"A\";\n"
	             "    retry = \"3\"; } );\n", 2, "periodic.retry must be");
	expect_error("periodic = ( { cron = \"* * * * *\"; class = \"A\";\n"
	             "    unique = \"until_and_while_executing\"; } );\n", 2, "until_executed");
	expect_error("periodic = (\n  { class = \"A\";\n"
	             "    cron = \"every day\"; }\n);\n", 3, "invalid cron 'every day'");
	expect_error("periodic = (\n  { class = \"A\"; }\n);\n", 2, "without cron");
	expect_error("periodic = (\n  { cron = \"* * * * *\"; }\n);\n", 2, "without class");
	expect_error("periodic = ( { cron = \"\"; class = \"A\"; } );\n", 1,
	             "periodic.cron must not be empty");
	expect_error("periodic = ( { cron = \"* * * * *\"; class = \"A\"; queue = \"\"; } );\n", 1,
	             "periodic.queue must not be empty");
	expect_error("periodic = ( { cron = \"* * * * *\"; class = \"A\"; queue = \"a b\"; } );\n",
	             1, "is not a queue name");
	expect_error("periodic = ( { cron = \"* * * * *\"; class = \"A\"; queue = 5; } );\n", 1,
	             "periodic.queue must be a string");
}
END_TEST

/* --- overrides ---------------------------------------------------------------------------------- */

START_TEST(test_overrides)
{
	struct conf c;
	char *qs[] = { "critical,2", "low" };
	struct conf_overrides ov = { .concurrency = 3, .queues = qs, .nqueues = 2 };
	struct conf_overrides none = { 0 };

	ck_assert_int_eq(load_ov("concurrency = 20;\nqueues = [ \"default\" ];\n", &ov, &c), 0);
	ck_assert_int_eq(c.concurrency, 3);
	ck_assert_int_eq(c.nqueues, 3);
	ck_assert_str_eq(c.queues[0], "critical");
	ck_assert_str_eq(c.queues[1], "critical");
	ck_assert_str_eq(c.queues[2], "low");
	ck_assert_int_eq(c.nqueue_names, 2);
	conf_free(&c);

	/* Nothing given: the file's values stay. */
	ck_assert_int_eq(load_ov("concurrency = 20;\nqueues = [ \"a\" ];\n", &none, &c), 0);
	ck_assert_int_eq(c.concurrency, 20);
	ck_assert_str_eq(c.queues[0], "a");
	conf_free(&c);

	/* Overrides apply to the defaults too. */
	ck_assert_int_eq(conf_load(NULL, &ov, &c, errbuf, sizeof errbuf), 0);
	ck_assert_int_eq(c.concurrency, 3);
	ck_assert_int_eq(c.nqueues, 3);
	conf_free(&c);

	ov.concurrency = 2000;
	ck_assert_int_eq(conf_load(NULL, &ov, &c, errbuf, sizeof errbuf), -1);
	ck_assert_msg(strncmp(errbuf, "-C 2000:", 8) == 0, "%s", errbuf);
	ov.concurrency = 0;
	qs[1] = "low,0";
	ck_assert_int_eq(conf_load(NULL, &ov, &c, errbuf, sizeof errbuf), -1);
	ck_assert_msg(strncmp(errbuf, "-q: ", 4) == 0 && strstr(errbuf, "low,0"), "%s", errbuf);
}
END_TEST

START_TEST(test_redis_url_env)
{
	struct conf c;

	setenv("REDIS_URL", "redis://envhost:7000/4", 1);
	LOAD_OK("redis = { url = \"redis://filehost:6379/0\"; };\n", &c);
	ck_assert_str_eq(c.redis.url, "redis://envhost:7000/4");
	ck_assert_str_eq(c.redis.host, "envhost");
	ck_assert_int_eq(c.redis.port, 7000);
	ck_assert_int_eq(c.redis.db, 4);
	conf_free(&c);

	ck_assert_int_eq(conf_load(NULL, NULL, &c, errbuf, sizeof errbuf), 0);
	ck_assert_str_eq(c.redis.host, "envhost");
	conf_free(&c);

	/* Set but empty: ignored. */
	setenv("REDIS_URL", "", 1);
	LOAD_OK("redis = { url = \"redis://filehost:6379/0\"; };\n", &c);
	ck_assert_str_eq(c.redis.host, "filehost");
	conf_free(&c);

	setenv("REDIS_URL", "http://secret@x", 1);
	ck_assert_int_eq(conf_load(NULL, NULL, &c, errbuf, sizeof errbuf), -1);
	ck_assert_msg(strncmp(errbuf, "REDIS_URL: ", 11) == 0, "%s", errbuf);
	ck_assert_ptr_null(strstr(errbuf, "secret"));
	unsetenv("REDIS_URL");
}
END_TEST

/* --- redis url ------------------------------------------------------------------------------------ */

START_TEST(test_url_tcp)
{
	struct redis_conf rc = { 0 };

	ck_assert_int_eq(redis_url_parse("redis://localhost", &rc, errbuf, sizeof errbuf), 0);
	ck_assert_str_eq(rc.host, "localhost");
	ck_assert_int_eq(rc.port, 6379);
	ck_assert_int_eq(rc.db, 0);
	ck_assert_ptr_null(rc.path);
	ck_assert_ptr_null(rc.user);
	ck_assert_ptr_null(rc.password);
	ck_assert_str_eq(rc.display, "redis://localhost:6379/0");

	ck_assert_int_eq(redis_url_parse("redis://10.1.2.3:6390/", &rc, errbuf, sizeof errbuf), 0);
	ck_assert_str_eq(rc.host, "10.1.2.3");
	ck_assert_int_eq(rc.port, 6390);
	ck_assert_int_eq(rc.db, 0);

	ck_assert_int_eq(redis_url_parse("redis://[::1]:6380/2", &rc, errbuf, sizeof errbuf), 0);
	ck_assert_str_eq(rc.host, "::1");
	ck_assert_int_eq(rc.port, 6380);
	ck_assert_int_eq(rc.db, 2);
	ck_assert_str_eq(rc.display, "redis://[::1]:6380/2");
	redis_conf_clear(&rc);
}
END_TEST

START_TEST(test_url_credentials)
{
	struct redis_conf rc = { 0 };

	ck_assert_int_eq(redis_url_parse("redis://app:s3cret@db.example:6379/1", &rc,
	                                 errbuf, sizeof errbuf), 0);
	ck_assert_str_eq(rc.user, "app");
	ck_assert_str_eq(rc.password, "s3cret");
	ck_assert_str_eq(rc.host, "db.example");
	ck_assert_int_eq(rc.db, 1);
	ck_assert_str_eq(rc.display, "redis://db.example:6379/1");

	/* Empty user: a password alone (requirepass). */
	ck_assert_int_eq(redis_url_parse("redis://:pw@h", &rc, errbuf, sizeof errbuf), 0);
	ck_assert_ptr_null(rc.user);
	ck_assert_str_eq(rc.password, "pw");

	/* Percent-encoding in user and password; the last @ ends the credentials. */
	ck_assert_int_eq(redis_url_parse("redis://us%40er:p%3Ass%2Fw%25@h:1/2", &rc,
	                                 errbuf, sizeof errbuf), 0);
	ck_assert_str_eq(rc.user, "us@er");
	ck_assert_str_eq(rc.password, "p:ss/w%");
	ck_assert_str_eq(rc.host, "h");
	ck_assert_int_eq(rc.port, 1);
	ck_assert_int_eq(rc.db, 2);
	ck_assert_str_eq(rc.display, "redis://h:1/2");

	ck_assert_int_eq(redis_url_parse("redis://:a@b@h", &rc, errbuf, sizeof errbuf), 0);
	ck_assert_str_eq(rc.password, "a@b");
	ck_assert_str_eq(rc.host, "h");

	ck_assert_int_eq(redis_url_parse("redis://:p%zz@h", &rc, errbuf, sizeof errbuf), -1);
	ck_assert_ptr_nonnull(strstr(errbuf, "percent-encoding"));
	ck_assert_int_eq(redis_url_parse("redis://:p%4@h", &rc, errbuf, sizeof errbuf), -1);
	/* A failed parse leaves the earlier result alone. */
	ck_assert_str_eq(rc.password, "a@b");
	redis_conf_clear(&rc);
	ck_assert_ptr_null(rc.host);
}
END_TEST

START_TEST(test_url_unix)
{
	struct redis_conf rc = { 0 };

	ck_assert_int_eq(redis_url_parse("unix:///run/redis/redis.sock?db=5", &rc,
	                                 errbuf, sizeof errbuf), 0);
	ck_assert_str_eq(rc.path, "/run/redis/redis.sock");
	ck_assert_ptr_null(rc.host);
	ck_assert_int_eq(rc.db, 5);
	ck_assert_str_eq(rc.display, "unix:///run/redis/redis.sock?db=5");

	ck_assert_int_eq(redis_url_parse("unix:///tmp/r.sock", &rc, errbuf, sizeof errbuf), 0);
	ck_assert_str_eq(rc.path, "/tmp/r.sock");
	ck_assert_int_eq(rc.db, 0);
	ck_assert_str_eq(rc.display, "unix:///tmp/r.sock?db=0");

	ck_assert_int_eq(redis_url_parse("unix://tmp/r.sock", &rc, errbuf, sizeof errbuf), -1);
	ck_assert_ptr_nonnull(strstr(errbuf, "absolute"));
	ck_assert_int_eq(redis_url_parse("unix:///tmp/r.sock?db=x", &rc, errbuf, sizeof errbuf), -1);
	ck_assert_int_eq(redis_url_parse("unix:///tmp/r.sock?timeout=1", &rc, errbuf, sizeof errbuf), -1);
	redis_conf_clear(&rc);
}
END_TEST

START_TEST(test_url_errors)
{
	struct redis_conf rc = { 0 };
	static const struct { const char *url, *needle; } bad[] = {
		{ "rediss://h:6379/0?x=1", "query" },
		{ "http://h", "scheme" },
		{ "h:6379", "scheme" },
		{ "", "empty" },
		{ "redis://", "no host" },
		{ "redis://:pw@", "no host" },
		{ "redis://h:0", "port" },
		{ "redis://h:65536", "port" },
		{ "redis://h:abc", "port" },
		{ "redis://h:6379/x", "database" },
		{ "redis://h:6379/0?x=1", "query" },
		{ "redis://::1:6379", "brackets" },
	};

	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		ck_assert_msg(redis_url_parse(bad[i].url, &rc, errbuf, sizeof errbuf) == -1,
		              "'%s' accepted", bad[i].url);
		ck_assert_msg(strstr(errbuf, bad[i].needle) != NULL, "'%s': %s", bad[i].url, errbuf);
	}
	ck_assert_ptr_null(rc.host);
	ck_assert_ptr_null(rc.display);
}
END_TEST

START_TEST(test_url_in_conf)
{
	expect_error("redis = {\n  url = \"rediss://x:6379/0?ssl=1\";\n};\n", 2, "query parameters");
	expect_error("redis = {\n  connect_timeout = 1;\n  url = \"redis://:topsecret@h:99999\";\n};\n",
	             3, "port");
	ck_assert_ptr_null(strstr(errbuf, "topsecret"));
}
END_TEST

START_TEST(test_password_file)
{
	struct conf c;
	char *pw = write_file("pw", "from-file\nsecond line\n");
	char *text;

	/* It overrides the url's password; the user stays. */
	ck_assert_int_gt(asprintf(&text, "redis = { url = \"redis://app:inurl@h/0\";\n"
	                          "password_file = \"%s\"; };\n", pw), 0);
	LOAD_OK(text, &c);
	ck_assert_str_eq(c.redis.password, "from-file");
	ck_assert_str_eq(c.redis.user, "app");
	conf_free(&c);
	free(text);

	/* A relative path is taken from the conf's directory; CRLF is stripped. */
	free(write_file("pw2", "crlf\r\n"));
	LOAD_OK("redis = { password_file = \"pw2\"; };\n", &c);
	ck_assert_str_eq(c.redis.password, "crlf");
	ck_assert_ptr_nonnull(strstr(c.redis.password_file, tmpdir));
	conf_free(&c);

	/* No line end at all. */
	free(write_file("pw3", "bare"));
	LOAD_OK("redis = { password_file = \"pw3\"; };\n", &c);
	ck_assert_str_eq(c.redis.password, "bare");
	conf_free(&c);

	expect_error("redis = {\n  password_file = \"/nonexistent/pw\";\n};\n", 2,
	             "cannot read redis.password_file '/nonexistent/pw'");
	free(write_file("empty", "\n"));
	expect_error("redis = {\n\n  password_file = \"empty\";\n};\n", 3, "is empty");
	free(pw);
}
END_TEST

/* SN-1 (the conf half): the Sentinel settings come together; the url gives user, password
 * and db. */
START_TEST(test_sentinel_settings)
{
	struct conf c, copy;
	char *spw = write_file("spw", "sentinel-pw\n");
	char *text;

	ck_assert_int_gt(asprintf(&text, "redis = { url = \"redis://app:datapw@mymaster/2\";\n"
	                          "sentinels = [ \"10.0.0.1:26379\", \"10.0.0.2\", \"[::1]:26380\" ];\n"
	                          "master_name = \"mymaster\"; sentinel_password_file = \"%s\"; };\n",
	                          spw), 0);
	LOAD_OK(text, &c);
	free(text);
	ck_assert_int_eq(c.redis.sentinels.n, 3);
	ck_assert_str_eq(c.redis.sentinel[0].host, "10.0.0.1");
	ck_assert_int_eq(c.redis.sentinel[0].port, 26379);
	ck_assert_str_eq(c.redis.sentinel[1].host, "10.0.0.2");
	ck_assert_int_eq(c.redis.sentinel[1].port, 26379);
	ck_assert_str_eq(c.redis.sentinel[2].host, "::1");
	ck_assert_int_eq(c.redis.sentinel[2].port, 26380);
	ck_assert_str_eq(c.redis.master_name, "mymaster");
	ck_assert_str_eq(c.redis.sentinel_password, "sentinel-pw");
	ck_assert_str_eq(c.redis.user, "app");
	ck_assert_str_eq(c.redis.password, "datapw");
	ck_assert_int_eq(c.redis.db, 2);
	ck_assert_str_eq(c.redis.display,
	                 "sentinel://10.0.0.1:26379,10.0.0.2,[::1]:26380/mymaster/2");
	/* Each connection keeps a deep copy. */
	redis_conf_copy(&copy.redis, &c.redis);
	conf_free(&c);
	ck_assert_str_eq(copy.redis.sentinel[2].host, "::1");
	ck_assert_str_eq(copy.redis.sentinels.v[1], "10.0.0.2");
	ck_assert_str_eq(copy.redis.sentinel_password, "sentinel-pw");
	redis_conf_clear(&copy.redis);

	LOAD_OK("redis = { sentinels = [ \"h\" ]; master_name = \"m\"; "
	        "sentinel_password = \"p\"; };\n", &c);
	ck_assert_str_eq(c.redis.sentinel_password, "p");
	ck_assert_str_eq(c.redis.display, "sentinel://h/m/0");
	conf_free(&c);

	expect_error("redis = {\n  sentinels = [ \"h:1\" ];\n};\n", 2,
	             "redis.sentinels needs redis.master_name");
	expect_error("redis = {\n  master_name = \"m\";\n};\n", 2,
	             "redis.master_name is only used with redis.sentinels");
	expect_error("redis = {\n\n  sentinel_password = \"x\";\n};\n", 3,
	             "redis.sentinel_password is only used with redis.sentinels");
	expect_error("redis = { sentinels = [\n \"h:0\" ]; master_name = \"m\"; };\n", 2,
	             "redis.sentinels: 'h:0' is not a sentinel's address");
	expect_error("redis = { sentinels = [ \"::1\" ]; master_name = \"m\"; };\n", 1,
	             "is not a sentinel's address");
	expect_error("redis = {\n  url = \"unix:///tmp/r.sock\";\n  sentinels = [ \"h\" ]; "
	             "master_name = \"m\"; };\n", 2, "with redis.sentinels the url must be redis[s]://");
	expect_error("redis = {\n sentinels = [ \"h\" ]; master_name = \"m\";\n"
	             " sentinel_password_file = \"/nonexistent/spw\"; };\n", 3,
	             "cannot read redis.sentinel_password_file '/nonexistent/spw'");
	free(spw);
}
END_TEST

/* An error quoting a value holds no control character: one error, one line (a queue name
 * with a line break once split the message; found by tests/fuzz/fuzz_conf). */
START_TEST(test_error_is_one_line)
{
	expect_error("queues = [ \"a\\nb c\" ];\n", 1, "queue 'a?b c'");
	ck_assert_ptr_null(strchr(errbuf, '\n'));
}
END_TEST

/* --- redis.tls ----------------------------------------------------------------------- */

/* A CA, a certificate it signed for localhost and its key, in tmpdir (openssl). */
static void make_pki(void)
{
	char *cmd;
	ck_assert_int_gt(asprintf(&cmd, "cd %s && "
	    "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
	    "-keyout ca.key -out ca.crt -days 2 -subj /CN=ca 2>/dev/null && "
	    "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
	    "-keyout c.key -out c.csr -subj /CN=client 2>/dev/null && "
	    "openssl x509 -req -in c.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 "
	    "-out c.crt 2>/dev/null && chmod 600 c.key ca.key", tmpdir), 0);
	ck_assert_int_eq(system(cmd), 0);
	free(cmd);
}

/* TL-1: rediss:// urls, and the context built only when TLS is used. */
START_TEST(test_tls_url)
{
	struct conf c;
	struct redis_conf rc = { 0 };

	ck_assert_int_eq(redis_url_parse("rediss://u:pw@cache.example:6380/3", &rc, errbuf,
	                                 sizeof errbuf), 0);
	ck_assert_int_eq(rc.use_tls, 1);
	ck_assert_str_eq(rc.host, "cache.example");
	ck_assert_int_eq(rc.port, 6380);
	ck_assert_int_eq(rc.db, 3);
	ck_assert_str_eq(rc.display, "rediss://cache.example:6380/3");
	ck_assert_int_eq(redis_url_parse("redis://h", &rc, errbuf, sizeof errbuf), 0);
	ck_assert_int_eq(rc.use_tls, 0);
	redis_conf_clear(&rc);

	/* rediss:// alone: the system's CA store, the certificate checked. */
	LOAD_OK("redis = { url = \"rediss://h:6380/0\"; };\n", &c);
	ck_assert_int_eq(c.redis.use_tls, 1);
	ck_assert_int_eq(c.redis.tls.verify, 1);
	ck_assert_ptr_nonnull(c.redis.tls.ctx);
	ck_assert_ptr_null(c.redis.tls.ca_file);
	conf_free(&c);
	/* Plain text builds no context. */
	LOAD_OK("concurrency = 2;\n", &c);
	ck_assert_int_eq(c.redis.use_tls, 0);
	ck_assert_int_eq(c.redis.tls.verify, 1);
	ck_assert_ptr_null(c.redis.tls.ctx);
	conf_free(&c);
	/* With sentinels: the data nodes in TLS, the display says so. */
	LOAD_OK("redis = { url = \"rediss://mymaster/1\"; sentinels = [ \"s1\" ];\n"
	        "master_name = \"mymaster\"; sentinel_tls = true; };\n", &c);
	ck_assert_str_eq(c.redis.display, "sentinel+tls://s1/mymaster/1");
	ck_assert_int_eq(c.redis.sentinel_tls, 1);
	conf_free(&c);
}
END_TEST

/* TL-1: relative paths, and the context shared by each connection's copy. */
START_TEST(test_tls_files)
{
	struct conf c;
	struct redis_conf copy;
	make_pki();
	/* Relative paths are the conf's directory's. */
	LOAD_OK("redis = { url = \"rediss://h/0\";\n tls = { ca_file = \"ca.crt\"; "
	        "cert_file = \"c.crt\"; key_file = \"c.key\"; server_name = \"redis.example\"; };\n"
	        "};\n", &c);
	char *want;
	ck_assert_int_gt(asprintf(&want, "%s/ca.crt", tmpdir), 0);
	ck_assert_str_eq(c.redis.tls.ca_file, want);
	free(want);
	ck_assert_str_eq(c.redis.tls.server_name, "redis.example");
	ck_assert_ptr_nonnull(c.redis.tls.ctx);
	/* Each connection's copy shares the context and outlives the conf. */
	redis_conf_copy(&copy, &c.redis);
	conf_free(&c);
	ck_assert_ptr_nonnull(copy.tls.ctx);
	ck_assert_str_eq(copy.tls.server_name, "redis.example");
	redis_conf_clear(&copy);
}
END_TEST

/* TL-1: each refusal of redis.tls at its line. */
START_TEST(test_tls_errors)
{
	make_pki();
	expect_error("redis = {\n tls = { ca_file = \"ca.crt\"; };\n};\n", 2,
	             "redis.tls is set, but redis.url is not rediss://");
	expect_error("redis = { url = \"unix:///r.sock\";\n tls = { verify = false; }; };\n", 2,
	             "would not be encrypted");
	expect_error("redis = { url = \"rediss://h/0\";\n tls = 1; };\n", 2, "must be a group");
	expect_error("redis = { url = \"rediss://h/0\"; tls = {\n cafile = \"x\"; }; };\n", 2,
	             "unknown setting 'redis.tls.cafile'");
	expect_error("redis = { url = \"rediss://h/0\"; tls = {\n cert_file = \"c.crt\"; }; };\n",
	             2, "cert_file and key_file come together");
	expect_error("redis = { url = \"rediss://h/0\"; tls = {\n ca_file = \"none.crt\"; }; };\n",
	             2, "cannot read redis.tls.ca_file");
	expect_error("redis = { url = \"rediss://h/0\"; tls = {\n ca_file = \"/dev/null\"; }; };\n",
	             2, "redis.tls.ca_file '/dev/null' is not a regular file");
	free(write_file("junk.crt", "not a certificate\n"));
	expect_error("redis = { url = \"rediss://h/0\";\n tls = { ca_file = \"junk.crt\"; }; };\n",
	             2, "redis.tls.ca_file");
	/* A key others can read is refused, whatever else is right. */
	char *key;
	ck_assert_int_gt(asprintf(&key, "%s/c.key", tmpdir), 0);
	ck_assert_int_eq(chmod(key, 0644), 0);
	expect_error("redis = { url = \"rediss://h/0\"; tls = { cert_file = \"c.crt\";\n"
	             " key_file = \"c.key\"; }; };\n", 2, "is open to others (mode 0644)");
	ck_assert_int_eq(chmod(key, 0640), 0);
	free(key);
	expect_error("redis = { url = \"rediss://h/0\";\n tls = { cert_file = \"c.crt\"; "
	             "key_file = \"ca.key\"; }; };\n", 2, "is not the key of cert_file");
	expect_error("redis = {\n sentinel_tls = true; };\n", 2,
	             "redis.sentinel_tls is only used with redis.sentinels");
}
END_TEST

/* TL-1: verify = false loads with a warning naming its line. */
START_TEST(test_tls_no_verify)
{
	struct conf c;
	char **w;
	LOAD_OK("redis = { url = \"rediss://h/0\";\n tls = {\n verify = false; }; };\n", &c);
	ck_assert_int_eq(c.redis.tls.verify, 0);
	int n = conf_warnings(&c, &w);
	ck_assert_int_eq(n, 1);
	char *want;
	ck_assert_int_gt(asprintf(&want, "%s/cogworkerd.conf:3: redis.tls.verify = false: the "
	                          "server's certificate is not checked", tmpdir), 0);
	ck_assert_msg(strncmp(w[0], want, strlen(want)) == 0, "warning: %s", w[0]);
	free(want);
	conf_warnings_free(w, n);
	conf_free(&c);
	/* Verified: no warning. */
	LOAD_OK("redis = { url = \"rediss://h/0\"; };\n", &c);
	ck_assert_int_eq(conf_warnings(&c, &w), 0);
	conf_warnings_free(w, 0);
	conf_free(&c);
}
END_TEST

/* TL-1: cogworkerctl's --tls-* flags. */
START_TEST(test_tls_overrides)
{
	struct conf c;
	char **w;
	make_pki();
	char *ca, *crt, *key;
	ck_assert_int_gt(asprintf(&ca, "%s/ca.crt", tmpdir), 0);
	ck_assert_int_gt(asprintf(&crt, "%s/c.crt", tmpdir), 0);
	ck_assert_int_gt(asprintf(&key, "%s/c.key", tmpdir), 0);
	/* cogworkerctl's --tls-* flags replace the file's settings. */
	struct conf_overrides ov = { .tls_ca_file = ca, .tls_cert_file = crt, .tls_key_file = key,
	                             .tls_server_name = "n.example", .tls_no_verify = 1 };
	ck_assert_int_eq(load_ov("redis = { url = \"rediss://h/0\";\n"
	                         " tls = { server_name = \"file.example\"; }; };\n", &ov, &c), 0);
	ck_assert_str_eq(c.redis.tls.ca_file, ca);
	ck_assert_str_eq(c.redis.tls.key_file, key);
	ck_assert_str_eq(c.redis.tls.server_name, "n.example");
	ck_assert_int_eq(c.redis.tls.verify, 0);
	int n = conf_warnings(&c, &w);
	ck_assert_int_eq(n, 1);
	ck_assert_msg(strncmp(w[0], "--tls-no-verify: redis.tls.verify = false", 41) == 0, "%s",
	              w[0]);
	conf_warnings_free(w, n);
	conf_free(&c);
	/* Flags with a plain url are refused like the group. */
	struct conf_overrides ov2 = { .tls_ca_file = ca };
	ck_assert_int_eq(load_ov("concurrency = 1;\n", &ov2, &c), -1);
	ck_assert_msg(strstr(errbuf, "would not be encrypted") != NULL, "%s", errbuf);
	free(ca);
	free(crt);
	free(key);
}
END_TEST

static Suite *config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 20);
	tcase_add_test(tc, test_defaults_without_file);
	tcase_add_test(tc, test_defaults_empty_file);
	tcase_add_test(tc, test_all_settings);
	tcase_add_test(tc, test_sample_conf_loads);
	tcase_add_test(tc, test_queue_weights);
	tcase_add_test(tc, test_queue_errors);
	tcase_add_test(tc, test_error_is_one_line);
	tcase_add_test(tc, test_fetch);
	tcase_add_test(tc, test_containment);
	tcase_add_test(tc, test_max_orphanings);
	tcase_add_test(tc, test_max_job_bytes);
	tcase_add_test(tc, test_orphan_threshold);
	tcase_add_test(tc, test_fetch_idle_max_interval);
	tcase_add_test(tc, test_unique_lock_ttl);
	tcase_add_test(tc, test_concurrency);
	tcase_add_test(tc, test_intervals_positive);
	tcase_add_test(tc, test_cross_checks);
	tcase_add_test(tc, test_types);
	tcase_add_test(tc, test_int_wrap_detected);
	tcase_add_test(tc, test_log_level);
	tcase_add_test(tc, test_metrics_listen);
	tcase_add_test(tc, test_unknown_settings);
	tcase_add_test(tc, test_syntax_error);
	tcase_add_test(tc, test_missing_file);
	tcase_add_test(tc, test_include_dir);
	tcase_add_test(tc, test_handler_settings);
	tcase_add_test(tc, test_handler_limits);
	tcase_add_test(tc, test_handler_groups);
	tcase_add_test(tc, test_handler_caps);
	tcase_add_test(tc, test_handler_warm);
	tcase_add_test(tc, test_handler_confinement);
	tcase_add_test(tc, test_handler_errors);
	tcase_add_test(tc, test_global_on_death);
	tcase_add_test(tc, test_periodic);
	tcase_add_test(tc, test_periodic_errors);
	tcase_add_test(tc, test_conf_warnings);
	tcase_add_test(tc, test_overrides);
	tcase_add_test(tc, test_redis_url_env);
	tcase_add_test(tc, test_url_tcp);
	tcase_add_test(tc, test_url_credentials);
	tcase_add_test(tc, test_url_unix);
	tcase_add_test(tc, test_url_errors);
	tcase_add_test(tc, test_url_in_conf);
	tcase_add_test(tc, test_password_file);
	tcase_add_test(tc, test_sentinel_settings);
	tcase_add_test(tc, test_tls_url);
	tcase_add_test(tc, test_tls_files);
	tcase_add_test(tc, test_tls_errors);
	tcase_add_test(tc, test_tls_no_verify);
	tcase_add_test(tc, test_tls_overrides);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(config_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
