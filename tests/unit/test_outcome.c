/* SPDX-License-Identifier: MIT */
/* Unit tests: src/outcome.c, the run path the daemon and `cogworkerctl exec` share: args as
 * argv, the error class and message of each kind of run result, the failure decision.
 * tests/integration/test_outcome.py checks that both callers agree on real runs. */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include "outcome.h"
#include "util.h"

static void free_argv(char **v, int n)
{
	for (int i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

START_TEST(test_args_as_argv)
{
	int n = -1, nul_at = 0;
	char **v = args_as_argv("[1,\"two\",12345678901234567890,{\"a\":[1, 2]},null,\"\\u00e9\"]",
	                        &n, &nul_at);
	ck_assert_int_eq(nul_at, -1);
	ck_assert_int_eq(n, 6);
	ck_assert_str_eq(v[0], "1");
	ck_assert_str_eq(v[1], "two");
	ck_assert_str_eq(v[2], "12345678901234567890");     /* the original digits */
	ck_assert_str_eq(v[3], "{\"a\":[1, 2]}");          /* the original text */
	ck_assert_str_eq(v[4], "null");
	ck_assert_str_eq(v[5], "\xc3\xa9");                 /* strings decoded */
	free_argv(v, n);
	n = -1;
	ck_assert_ptr_null(args_as_argv("[]", &n, &nul_at));
	ck_assert_int_eq(n, 0);
	n = -1;
	ck_assert_ptr_null(args_as_argv("{\"a\":1}", &n, &nul_at));
	ck_assert_int_eq(n, 0);
}
END_TEST

/* Many args: the walk is linear (a quadratic one takes seconds here, not milliseconds). */
START_TEST(test_args_as_argv_many)
{
	int count = 200000;
	struct sbuf b;
	sb_init(&b);
	sb_addc(&b, '[');
	for (int i = 0; i < count; i++)
		sb_printf(&b, "%s\"%d\"", i ? "," : "", i);
	sb_addc(&b, ']');
	int n = 0, nul_at;
	double t0 = mono_now();
	char **v = args_as_argv(b.s, &n, &nul_at);
	double took = mono_now() - t0;
	ck_assert_int_eq(n, count);
	ck_assert_str_eq(v[count - 1], "199999");
	ck_assert_msg(took < 2.0, "args_as_argv took %gs for %d args", took, count);
	free_argv(v, n);
	sb_free(&b);
}
END_TEST

/* HD-4: an argv element can't hold NUL: such args are refused, never passed truncated
 * (cJSON's reading cut "a\u0000b" to "a"). */
START_TEST(test_args_as_argv_nul)
{
	int n = -1, nul_at = -1;
	ck_assert_ptr_null(args_as_argv("[\"ok\",\"a\\u0000b\",\"\\u0000\"]", &n, &nul_at));
	ck_assert_int_eq(n, 0);
	ck_assert_int_eq(nul_at, 1);
	char **v = args_as_argv("[\"a\\\\u0000b\",\"\\u0001\"]", &n, &nul_at);
	ck_assert_int_eq(nul_at, -1);
	ck_assert_int_eq(n, 2);
	ck_assert_str_eq(v[0], "a\\u0000b");              /* an escaped backslash: no NUL */
	ck_assert_str_eq(v[1], "\x01");
	free_argv(v, n);

	/* the run: a failed exec that no retry can mend, cut short to dead */
	char *cmd[] = { "/bin/true", NULL };
	struct handler h = { .class_name = "A", .command = { cmd, 1 }, .args_as_argv = 1,
	                     .output_tail = 4096, .rlimit_cpu = -1, .rlimit_as = -1,
	                     .rlimit_nofile = -1, .rlimit_nproc = -1 };
	char raw[] = "{\"class\":\"A\",\"args\":[\"x\",\"a\\u0000b\"],\"jid\":\"abc\"}";
	struct job j = { .raw = raw, .raw_len = strlen(raw), .cls = "A", .jid = "abc",
	                 .queue = "default", .args_json = "[\"x\",\"a\\u0000b\"]",
	                 .max_retries = 25 };
	struct job_run run;
	struct run_outcome o;
	ck_assert_int_eq(job_run_init(&run, &j, &h, &o), -1);
	ck_assert_str_eq(o.error_class, "Cogworker::HandlerSpawnFailed");
	ck_assert_str_eq(o.error_message, "exec failed: args[1] holds a NUL character (\\u0000), "
	                                  "which can't be passed on a command line");
	ck_assert_int_eq(o.permanent, 1);
	ck_assert_int_eq(decide_failure(&j, &h, &o), DECIDE_KILLED);
	char why[160];
	decision_reason(DECIDE_KILLED, &j, &o, why, sizeof why);
	ck_assert_str_eq(why, "an arg holds a NUL character, which no argv can carry: no retry "
	                      "can succeed");
	j.retry_count = 25;                 /* the budget still comes first */
	ck_assert_int_eq(decide_failure(&j, &h, &o), DECIDE_DEAD);
	j.retry_count = 0;
	outcome_free(&o);
	/* without args_as_argv the args go on stdin and in COGWORKER_ARGS, NUL and all */
	h.args_as_argv = 0;
	ck_assert_int_eq(job_run_init(&run, &j, &h, &o), 0);
	job_run_free(&run);
}
END_TEST

static struct job_run run_of(double timeout, size_t message_tail)
{
	struct job_run run;
	memset(&run, 0, sizeof run);
	run.req.timeout = timeout;
	run.message_tail = message_tail;
	return run;
}

static void check(enum run_status status, int code, const char *tail, size_t message_tail,
                  const char *error_class, const char *error_message, int exit_code)
{
	struct job_run run = run_of(0.5, message_tail);
	struct run_result res = { .status = status, .code = code, .tail = (char *)tail,
	                          .tail_len = strlen(tail) };
	struct run_outcome o;
	outcome_of_run(&o, &run, &res);
	ck_assert_int_eq(o.success, 0);
	ck_assert_int_eq(o.aborted, 0);
	ck_assert_int_eq(o.exit_code, exit_code);
	ck_assert_str_eq(o.error_class, error_class);
	ck_assert_str_eq(o.error_message, error_message);
	outcome_free(&o);
}

START_TEST(test_messages)
{
	check(RUN_EXITED, 5, "", 4096, "Cogworker::HandlerFailed", "exit status 5", 5);
	check(RUN_EXITED, 1, "kaboom\n", 4096, "Cogworker::HandlerFailed",
	      "exit status 1: kaboom", 1);
	check(RUN_EXITED, 1, "0123456789", 4, "Cogworker::HandlerFailed", "exit status 1: 6789", 1);
	check(RUN_SIGNALED, SIGKILL, "", 4096, "Cogworker::HandlerSignaled",
	      "killed by signal 9 (SIGKILL)", -1);
	check(RUN_TIMEOUT, 0, "", 4096, "Cogworker::HandlerTimeout", "timed out after 0.5s", -1);

	struct job_run run = run_of(0, 4096);
	struct run_result res = { .status = RUN_EXITED, .code = 0, .tail = "noise" };
	res.tail_len = strlen(res.tail);
	struct run_outcome o;
	outcome_of_run(&o, &run, &res);
	ck_assert_int_eq(o.success, 1);
	ck_assert_int_eq(o.exit_code, -1);
	ck_assert_ptr_null(o.error_class);
	ck_assert_ptr_null(o.error_message);
	res.status = RUN_ABORTED;
	outcome_of_run(&o, &run, &res);
	ck_assert_int_eq(o.aborted, 1);
	ck_assert_ptr_null(o.error_class);

	outcome_no_handler(&o, "Nope");
	ck_assert_str_eq(o.error_class, "Cogworker::NoHandler");
	ck_assert_str_eq(o.error_message, "no handler configured for class Nope");
	ck_assert_int_eq(o.exit_code, -1);
	outcome_free(&o);
}
END_TEST

/* A failed spawn names what failed (the program as resolved, or the cwd) and its errno. */
static char *spawn_message(enum spawn_step step, int err, const char *exec_path,
                           const char *search_path, const char *cwd)
{
	char *cmd[] = { "prog", NULL };
	struct argv_list command = { cmd, 1, NULL };
	struct job_run run = run_of(0, 4096);
	run.req.command = &command;
	run.req.cwd = cwd;
	struct run_result res = { .status = RUN_SPAWN_FAILED, .code = err, .tail = "",
	                          .spawn_step = step, .exec_path = (char *)exec_path,
	                          .search_path = search_path };
	struct run_outcome o;
	outcome_of_run(&o, &run, &res);
	ck_assert_str_eq(o.error_class, "Cogworker::HandlerSpawnFailed");
	ck_assert_int_eq(o.spawn_errno, err);
	ck_assert_str_eq(o.detail, o.error_message);        /* no tail */
	char *m = xstrdup(o.error_message);
	outcome_free(&o);
	return m;
}

START_TEST(test_spawn_messages)
{
	char *m = spawn_message(SPAWN_STEP_RESOLVE, ENOENT, "prog", "/usr/bin:/bin", NULL);
	ck_assert_str_eq(m, "exec failed: prog not found in PATH /usr/bin:/bin: "
	                    "No such file or directory (ENOENT)");
	free(m);
	m = spawn_message(SPAWN_STEP_RESOLVE, ENOENT, "/opt/x", NULL, NULL);
	ck_assert_str_eq(m, "exec failed: /opt/x: No such file or directory (ENOENT)");
	free(m);
	m = spawn_message(SPAWN_STEP_EXEC, EACCES, "/opt/x", NULL, NULL);
	ck_assert_str_eq(m, "exec failed: /opt/x: Permission denied (EACCES)");
	free(m);
	m = spawn_message(SPAWN_STEP_CWD, ENOENT, "/bin/true", NULL, "/gone");
	ck_assert_str_eq(m, "exec failed: chdir /gone: No such file or directory (ENOENT)");
	free(m);
	m = spawn_message(SPAWN_STEP_EXEC, E2BIG, "/bin/true", NULL, NULL);
	ck_assert_str_eq(m, "exec failed: /bin/true: Argument list too long (E2BIG)");
	free(m);
}
END_TEST

START_TEST(test_unresolvable_user_is_a_failed_exec)
{
	char user[] = "cw-no-such-user-here";
	char *cmd[] = { "/bin/true", NULL };
	struct handler h = { .class_name = "U", .command = { cmd, 1, NULL }, .user = user,
	                     .output_tail = 4096, .rlimit_cpu = -1, .rlimit_as = -1,
	                     .rlimit_nofile = -1, .rlimit_nproc = -1 };
	char raw[] = "{\"class\":\"U\",\"args\":[],\"jid\":\"abc\"}";
	struct job j = { .raw = raw, .raw_len = strlen(raw), .cls = "U", .jid = "abc",
	                 .queue = "default", .args_json = "[]" };
	struct job_run run;
	struct run_outcome o;
	ck_assert_int_eq(job_run_init(&run, &j, &h, &o), -1);
	ck_assert_str_eq(o.error_class, "Cogworker::HandlerSpawnFailed");
	ck_assert_msg(!strncmp(o.error_message, "exec failed: ", 13), "%s", o.error_message);
	outcome_free(&o);
}
END_TEST

static enum decision decide(const struct job *j, const struct handler *h, int exit_code,
                            int spawn_errno)
{
	struct run_outcome o = { .exit_code = exit_code, .spawn_errno = spawn_errno };
	return decide_failure(j, h, &o);
}

static void reason_is(enum decision d, const struct job *j, int exit_code, int spawn_errno,
                      const char *want)
{
	struct run_outcome o = { .exit_code = exit_code, .spawn_errno = spawn_errno };
	char got[160];
	decision_reason(d, j, &o, got, sizeof got);
	ck_assert_str_eq(got, want);
}

/* CAP-1, CAP-2: a failed run whose cgroup counted an OOM kill past memory_max fails out of
 * memory, whatever its exit said; a success, a timeout and a run without a kill stay what
 * they are; dead_on_oom cuts it short. */
static struct run_outcome oom_outcome(enum run_status status, int code, long long kills,
                                      long long peak, const struct handler_caps *caps)
{
	struct job_run run = run_of(1, 4096);
	run.req.caps = caps;
	struct run_result res = { .status = status, .code = code, .tail = "Killed\n" };
	res.tail_len = strlen(res.tail);
	res.usage.cgroup = 1;
	res.usage.cg_oom_kills = kills;
	res.usage.cg_memory_peak = peak;
	struct run_outcome o;
	outcome_of_run(&o, &run, &res);
	return o;
}

START_TEST(test_out_of_memory)
{
	struct handler h = { .caps = { .max = { 256LL << 20 } } };
	struct run_outcome o = oom_outcome(RUN_EXITED, 137, 1, (256LL << 20) - 4096, &h.caps);
	ck_assert_str_eq(o.error_class, "Cogworker::HandlerOutOfMemory");
	ck_assert_str_eq(o.error_message,
	                 "out of memory (memory_max 256 MiB, peak 256 MiB): Killed");
	ck_assert_int_eq(o.oom, 1);
	ck_assert_int_eq(o.exit_code, -1);          /* no exit code for the maps */
	struct job j = { .retry_count = 0, .max_retries = 25 };
	ck_assert_int_eq(decide_failure(&j, &h, &o), DECIDE_RETRY);
	h.caps.dead_on_oom = 1;
	ck_assert_int_eq(decide_failure(&j, &h, &o), DECIDE_KILLED);
	char why[256];
	decision_reason(DECIDE_KILLED, &j, &o, why, sizeof why);
	ck_assert_str_eq(why, "out of memory, and the handler has dead_on_oom");
	j.retry_count = 25;                         /* the budget still comes first */
	ck_assert_int_eq(decide_failure(&j, &h, &o), DECIDE_DEAD);
	outcome_free(&o);

	h.caps.max[CAP_MEMORY] = 1LL << 30;         /* a cap in GiB, a peak in GiB */
	o = oom_outcome(RUN_SIGNALED, SIGKILL, 2, (1LL << 30) - (1 << 20), &h.caps);
	ck_assert_str_eq(o.detail, "out of memory (memory_max 1 GiB, peak 1 GiB)");
	outcome_free(&o);
	o = oom_outcome(RUN_EXITED, 0, 1, 1 << 20, &h.caps);
	ck_assert_int_eq(o.success, 1);             /* it survived the kill of a child */
	o = oom_outcome(RUN_TIMEOUT, 0, 1, 1 << 20, &h.caps);
	ck_assert_str_eq(o.error_class, "Cogworker::HandlerTimeout");
	outcome_free(&o);
	o = oom_outcome(RUN_EXITED, 1, 0, 1 << 20, &h.caps);
	ck_assert_str_eq(o.error_class, "Cogworker::HandlerFailed");
	outcome_free(&o);
	h.caps.max[CAP_MEMORY] = 0;                 /* killed by a global OOM, no cap of ours */
	o = oom_outcome(RUN_SIGNALED, SIGKILL, 1, 1 << 20, &h.caps);
	ck_assert_str_eq(o.error_class, "Cogworker::HandlerSignaled");
	outcome_free(&o);
}
END_TEST

START_TEST(test_decide_failure)
{
	int dead[] = { 3 }, discard[] = { 4, 0 };
	struct handler h = { .dead_codes = dead, .ndead = 1, .discard_codes = discard,
	                     .ndiscard = 2 };
	struct job j = { .retry_count = 0, .max_retries = 3 };
	ck_assert_int_eq(decide(&j, &h, 5, 0), DECIDE_RETRY);
	ck_assert_int_eq(decide(&j, &h, 3, 0), DECIDE_KILLED);
	ck_assert_int_eq(decide(&j, &h, 4, 0), DECIDE_DISCARD);
	ck_assert_int_eq(decide(&j, &h, -1, 0), DECIDE_RETRY);      /* not an exit */
	ck_assert_int_eq(decide(&j, &h, 0, 0), DECIDE_RETRY);       /* 0 is never mapped */
	ck_assert_int_eq(decide(&j, NULL, 3, 0), DECIDE_RETRY);
	ck_assert_int_eq(decide(&j, &h, -1, ENOENT), DECIDE_RETRY); /* may be installed later */
	ck_assert_int_eq(decide(&j, &h, -1, E2BIG), DECIDE_KILLED); /* never fits */
	ck_assert_int_eq(decide(&j, NULL, -1, E2BIG), DECIDE_KILLED);
	reason_is(DECIDE_KILLED, &j, 3, 0, "exit code 3 is in dead_exit_codes");
	reason_is(DECIDE_DISCARD, &j, 4, 0, "exit code 4 is in discard_exit_codes");
	reason_is(DECIDE_KILLED, &j, -1, E2BIG,
	          "the arguments do not fit in an argv (E2BIG): no retry can succeed");
	reason_is(DECIDE_RETRY, &j, 5, 0, "");
	j.retry_count = 3;                  /* the retries are spent: the budget wins */
	ck_assert_int_eq(decide(&j, &h, 3, 0), DECIDE_DEAD);
	ck_assert_int_eq(decide(&j, &h, 4, 0), DECIDE_DEAD);
	ck_assert_int_eq(decide(&j, NULL, -1, 0), DECIDE_DEAD);
	ck_assert_int_eq(decide(&j, NULL, -1, E2BIG), DECIDE_DEAD);
	reason_is(DECIDE_DEAD, &j, 1, 0, "retries exhausted");
	j.max_retries = 0;
	j.retry_count = 0;
	reason_is(DECIDE_DEAD, &j, 1, 0, "retry is 0: no retries");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("outcome");
	TCase *tc = tcase_create("run path");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_args_as_argv);
	tcase_add_test(tc, test_args_as_argv_many);
	tcase_add_test(tc, test_args_as_argv_nul);
	tcase_add_test(tc, test_messages);
	tcase_add_test(tc, test_spawn_messages);
	tcase_add_test(tc, test_unresolvable_user_is_a_failed_exec);
	tcase_add_test(tc, test_decide_failure);
	tcase_add_test(tc, test_out_of_memory);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
