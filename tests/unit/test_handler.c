/* SPDX-License-Identifier: MIT */
/*
 * test_handler.c: handler_run with real child processes (exit codes, signals, timeouts
 * with grandchildren, floods, stdin that is never read, environment, ids, fds, signal
 * state), plus handler_build_env and handler_resolve_ids.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "handler.h"
#include "util.h"

#define ARGV(...) ((char *[]){ __VA_ARGS__, NULL })

static const char *const base_env[] = { "PATH=/usr/local/bin:/usr/bin:/bin", NULL };

static struct argv_list mkargv(char **v)
{
	struct argv_list a = { v, 0, NULL };
	while (v[a.n])
		a.n++;
	return a;
}

static void req_init(struct run_request *r, struct argv_list *cmd)
{
	memset(r, 0, sizeof *r);
	r->command = cmd;
	r->env = base_env;
	r->kill_grace = 2;
	r->abort_grace = 2;
	r->output_tail = 4096;
	r->rlimit_cpu = r->rlimit_as = r->rlimit_nofile = r->rlimit_nproc = -1;
	r->log_tag = "jid=test";
}

/* stdout lines, joined with '\n' */
struct lines {
	struct sbuf text;
	int n;
	size_t bytes;
	size_t maxlen;
};

static void collect(void *ctx, const char *line, size_t len)
{
	struct lines *l = ctx;
	sb_add(&l->text, line, len);
	sb_addc(&l->text, '\n');
	l->n++;
	l->bytes += len;
	if (len > l->maxlen)
		l->maxlen = len;
}

static void count_only(void *ctx, const char *line, size_t len)
{
	struct lines *l = ctx;
	(void)line;
	l->n++;
	l->bytes += len;
	if (len > l->maxlen)
		l->maxlen = len;
}

/* Run cmd with stdout lines collected into *out (initialised here). */
static void run_collect(struct run_request *r, struct run_result *res, struct lines *out)
{
	memset(out, 0, sizeof *out);
	sb_init(&out->text);
	r->on_stdout_line = collect;
	r->ctx = out;
	ck_assert_int_eq(handler_run(r, res, NULL, NULL), 0);
}

static char *tmpdir_new(void)
{
	char *d = xstrdup("/tmp/test_handler.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(d));
	return d;
}

static int read_pidfile(const char *path)
{
	FILE *f = fopen(path, "r");
	int pid = 0;
	ck_assert_msg(f != NULL, "no pid file %s", path);
	ck_assert_int_eq(fscanf(f, "%d", &pid), 1);
	fclose(f);
	return pid;
}

/* Alive = exists and is not a zombie (PID 1 here may not reap orphans). */
static int proc_alive(int pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *rp = strrchr(buf, ')');
	if (!rp || rp[1] != ' ')
		return 1;
	return rp[2] != 'Z' && rp[2] != 'X';
}

static int wait_dead(int pid, double secs)
{
	double end = mono_now() + secs;
	while (proc_alive(pid)) {
		if (mono_now() > end)
			return 0;
		sleep_seconds(0.01);
	}
	return 1;
}

/* Send fd 2 (the log) to /dev/null; returns a copy of the old one for restore_stderr. */
static int quiet_stderr(void)
{
	int saved = dup(2), fd = open("/dev/null", O_WRONLY);
	dup2(fd, 2);
	close(fd);
	return saved;
}

static void restore_stderr(int saved)
{
	dup2(saved, 2);
	close(saved);
}

/* ---- outcomes ---------------------------------------------------------------------- */

static int spawned_pid;
static void on_spawned(void *ctx, int pid)
{
	*(int *)ctx = pid;
}

START_TEST(test_exit_codes)
{
	struct argv_list t = mkargv(ARGV("true"));
	struct argv_list e7 = mkargv(ARGV("sh", "-c", "exit 7"));
	struct run_request r;
	struct run_result res;

	req_init(&r, &t);
	spawned_pid = 0;
	ck_assert_int_eq(handler_run(&r, &res, on_spawned, &spawned_pid), 0);
	ck_assert_int_eq(res.status, RUN_EXITED);
	ck_assert_int_eq(res.code, 0);
	ck_assert_int_gt(res.pid, 0);
	ck_assert_int_eq(spawned_pid, res.pid);
	ck_assert(res.started > 1e9 && res.finished >= res.started);
	ck_assert_ptr_nonnull(res.tail);
	run_result_free(&res);

	req_init(&r, &e7);
	handler_run(&r, &res, NULL, NULL);
	ck_assert_int_eq(res.status, RUN_EXITED);
	ck_assert_int_eq(res.code, 7);
	run_result_free(&res);
}
END_TEST

START_TEST(test_signaled)
{
	struct argv_list c = mkargv(ARGV("sh", "-c", "kill -9 $$"));
	struct run_request r;
	struct run_result res;

	req_init(&r, &c);
	handler_run(&r, &res, NULL, NULL);
	ck_assert_int_eq(res.status, RUN_SIGNALED);
	ck_assert_int_eq(res.code, SIGKILL);
	run_result_free(&res);
}
END_TEST

static void expect_spawn_failed(struct run_request *r, int err)
{
	struct run_result res;
	spawned_pid = 0;
	ck_assert_int_eq(handler_run(r, &res, on_spawned, &spawned_pid), 0);
	ck_assert_int_eq(res.status, RUN_SPAWN_FAILED);
	ck_assert_msg(res.code == err, "code %d (%s), want %d (%s)", res.code, strerror(res.code),
	              err, strerror(err));
	ck_assert_int_eq(spawned_pid, 0);
	ck_assert_ptr_nonnull(res.tail);
	run_result_free(&res);
}

START_TEST(test_spawn_failures)
{
	struct argv_list nosuch = mkargv(ARGV("no-such-command-cogworker"));
	struct argv_list nopath = mkargv(ARGV("/no/such/file"));
	struct argv_list noexec = mkargv(ARGV("/etc/passwd"));
	struct argv_list t = mkargv(ARGV("true"));
	struct argv_list empty = { ARGV(""), 0, NULL };
	const char *const badpath_env[] = { "PATH=/nonexistent", NULL };
	struct run_request r;

	req_init(&r, &nosuch);          /* PATH search in the parent */
	expect_spawn_failed(&r, ENOENT);
	req_init(&r, &nopath);          /* execve in the child */
	expect_spawn_failed(&r, ENOENT);
	req_init(&r, &noexec);
	expect_spawn_failed(&r, EACCES);
	req_init(&r, &t);               /* chdir in the child */
	r.cwd = "/etc/passwd";
	expect_spawn_failed(&r, ENOTDIR);
	req_init(&r, &t);               /* the child's PATH is searched, not the daemon's */
	r.env = badpath_env;
	expect_spawn_failed(&r, ENOENT);
	req_init(&r, &empty);
	expect_spawn_failed(&r, EINVAL);
}
END_TEST

/* ---- stdin ------------------------------------------------------------------------- */

START_TEST(test_stdin_exact)
{
	char *dir = tmpdir_new();
	char *file = xasprintf("%s/in", dir);
	struct argv_list c = mkargv(ARGV("sh", "-c", "cat > \"$0\"", file));
	size_t len = 300000;
	char *data = xmalloc(len);
	for (size_t i = 0; i < len; i++)
		data[i] = (char)(i * 7 + i / 251);     /* NULs, newlines, high bytes; no final \n */
	data[len - 1] = 'x';
	struct run_request r;
	struct run_result res;

	req_init(&r, &c);
	r.stdin_data = data;
	r.stdin_len = len;
	handler_run(&r, &res, NULL, NULL);
	ck_assert_int_eq(res.status, RUN_EXITED);
	ck_assert_int_eq(res.code, 0);
	run_result_free(&res);

	FILE *f = fopen(file, "rb");
	ck_assert_ptr_nonnull(f);
	char *got = xmalloc(len + 1);
	size_t n = fread(got, 1, len + 1, f);
	fclose(f);
	ck_assert_uint_eq(n, len);
	ck_assert(memcmp(got, data, len) == 0);
	unlink(file);
	rmdir(dir);
	free(got);
	free(data);
	free(file);
	free(dir);
}
END_TEST

/* SIGPIPE keeps its default disposition in this test process on purpose: handler_run
 * must not let its writes kill the caller. */
START_TEST(test_stdin_never_read)
{
	struct argv_list c = mkargv(ARGV("sh", "-c", "sleep 0.3; exit 3"));
	size_t len = 1 << 20;
	char *data = xmalloc(len);
	memset(data, '{', len);
	struct run_request r;
	struct run_result res;

	req_init(&r, &c);
	r.stdin_data = data;
	r.stdin_len = len;
	double t0 = mono_now();
	handler_run(&r, &res, NULL, NULL);
	ck_assert_int_eq(res.status, RUN_EXITED);
	ck_assert_int_eq(res.code, 3);
	ck_assert(mono_now() - t0 < 2.0);
	run_result_free(&res);
	free(data);
}
END_TEST

START_TEST(test_stdin_child_exits_at_once)
{
	struct argv_list c = mkargv(ARGV("true"));
	size_t len = 8 << 20;
	char *data = xmalloc(len);
	memset(data, 'x', len);
	struct run_request r;
	struct run_result res;
	sigset_t before, after, pending;

	pthread_sigmask(SIG_SETMASK, NULL, &before);
	req_init(&r, &c);
	r.stdin_data = data;
	r.stdin_len = len;
	for (int i = 0; i < 20; i++) {
		handler_run(&r, &res, NULL, NULL);
		ck_assert_int_eq(res.status, RUN_EXITED);
		ck_assert_int_eq(res.code, 0);
		run_result_free(&res);
	}
	pthread_sigmask(SIG_SETMASK, NULL, &after);
	ck_assert_int_eq(sigismember(&after, SIGPIPE), sigismember(&before, SIGPIPE));
	sigpending(&pending);
	ck_assert(!sigismember(&pending, SIGPIPE));
	free(data);
}
END_TEST

/* ---- timeout, abort, grandchildren ---------------------------------------------- */

START_TEST(test_timeout_kills_grandchild)
{
	char *dir = tmpdir_new();
	char *pidf = xasprintf("%s/gc", dir);
	struct argv_list c = mkargv(ARGV("sh", "-c", "sleep 100 & echo $! > \"$0\"; sleep 100",
	                                 pidf));
	struct run_request r;
	struct run_result res;

	req_init(&r, &c);
	r.timeout = 0.3;
	r.kill_grace = 3;               /* everything dies on TERM: the grace ends early */
	double t0 = mono_now();
	handler_run(&r, &res, NULL, NULL);
	double el = mono_now() - t0;
	ck_assert_int_eq(res.status, RUN_TIMEOUT);
	ck_assert_msg(el >= 0.29 && el < 1.5, "elapsed %.3f", el);
	int gc = read_pidfile(pidf);
	ck_assert_int_gt(gc, 0);
	ck_assert_msg(wait_dead(gc, 1.0), "grandchild %d survived", gc);
	ck_assert(!proc_alive(res.pid));
	run_result_free(&res);
	unlink(pidf);
	rmdir(dir);
	free(pidf);
	free(dir);
}
END_TEST

START_TEST(test_timeout_term_ignored)
{
	char *dir = tmpdir_new();
	char *pidf = xasprintf("%s/gc", dir);
	struct argv_list c = mkargv(ARGV("sh", "-c",
	    "trap '' TERM; sleep 100 & echo $! > \"$0\"; sleep 100", pidf));
	struct run_request r;
	struct run_result res;

	req_init(&r, &c);
	r.timeout = 0.3;
	r.kill_grace = 0.5;
	double t0 = mono_now();
	handler_run(&r, &res, NULL, NULL);
	double el = mono_now() - t0;
	ck_assert_int_eq(res.status, RUN_TIMEOUT);
	ck_assert_msg(el >= 0.79 && el < 2.0, "elapsed %.3f", el);
	int gc = read_pidfile(pidf);
	ck_assert_msg(wait_dead(gc, 1.0), "grandchild %d survived", gc);
	run_result_free(&res);
	unlink(pidf);
	rmdir(dir);
	free(pidf);
	free(dir);
}
END_TEST

/* Exit 0 with a backgrounded grandchild holding stdout: no waiting for its EOF, and the
 * grandchild is killed with the group. */
START_TEST(test_exit_kills_grandchild)
{
	char *dir = tmpdir_new();
	char *pidf = xasprintf("%s/gc", dir);
	struct argv_list c = mkargv(ARGV("sh", "-c", "sleep 100 & echo $! > \"$0\"; echo done",
	                                 pidf));
	struct run_request r;
	struct run_result res;
	struct lines out;

	req_init(&r, &c);
	double t0 = mono_now();
	run_collect(&r, &res, &out);
	ck_assert_int_eq(res.status, RUN_EXITED);
	ck_assert_int_eq(res.code, 0);
	ck_assert(mono_now() - t0 < 1.0);
	ck_assert_str_eq(out.text.s, "done\n");
	int gc = read_pidfile(pidf);
	ck_assert_msg(wait_dead(gc, 1.0), "grandchild %d survived", gc);
	run_result_free(&res);
	sb_free(&out.text);
	unlink(pidf);
	rmdir(dir);
	free(pidf);
	free(dir);
}
END_TEST

/* A grandchild that left the group keeps stdout open: the drain after the exit is bounded. */
START_TEST(test_escaped_grandchild_bounded_drain)
{
	char *dir = tmpdir_new();
	char *pidf = xasprintf("%s/gc", dir);
	struct argv_list c = mkargv(ARGV("sh", "-c", "setsid sleep 100 & echo $! > \"$0\"; exit 4",
	                                 pidf));
	struct run_request r;
	struct run_result res;

	req_init(&r, &c);
	double t0 = mono_now();
	handler_run(&r, &res, NULL, NULL);
	double el = mono_now() - t0;
	int gc = read_pidfile(pidf);
	kill(gc, SIGKILL);
	ck_assert_int_eq(res.status, RUN_EXITED);
	ck_assert_int_eq(res.code, 4);
	ck_assert_msg(el < 1.0, "elapsed %.3f", el);
	run_result_free(&res);
	unlink(pidf);
	rmdir(dir);
	free(pidf);
	free(dir);
}
END_TEST

struct abort_arg {
	atomic_int *flag;
	double after;
};

static void *abort_later(void *a)
{
	struct abort_arg *aa = a;
	sleep_seconds(aa->after);
	atomic_store(aa->flag, 1);
	return NULL;
}

START_TEST(test_abort)
{
	struct argv_list c = mkargv(ARGV("sleep", "100"));
	struct argv_list ign = mkargv(ARGV("sh", "-c", "trap '' TERM; sleep 100"));
	atomic_int flag = 0;
	struct abort_arg aa = { &flag, 0.2 };
	struct run_request r;
	struct run_result res;
	pthread_t th;

	req_init(&r, &c);
	r.abort = &flag;
	r.timeout = 50;
	pthread_create(&th, NULL, abort_later, &aa);
	double t0 = mono_now();
	handler_run(&r, &res, NULL, NULL);
	double el = mono_now() - t0;
	pthread_join(th, NULL);
	ck_assert_int_eq(res.status, RUN_ABORTED);
	ck_assert_msg(el >= 0.19 && el < 0.6, "elapsed %.3f", el);
	run_result_free(&res);

	/* TERM ignored: abort_grace, then KILL */
	atomic_store(&flag, 0);
	req_init(&r, &ign);
	r.abort = &flag;
	r.abort_grace = 0.3;
	pthread_create(&th, NULL, abort_later, &aa);
	t0 = mono_now();
	handler_run(&r, &res, NULL, NULL);
	el = mono_now() - t0;
	pthread_join(th, NULL);
	ck_assert_int_eq(res.status, RUN_ABORTED);
	ck_assert_msg(el >= 0.49 && el < 1.2, "elapsed %.3f", el);
	run_result_free(&res);
}
END_TEST

/* ---- output ------------------------------------------------------------------------ */

START_TEST(test_flood_bounded)
{
	struct argv_list c = mkargv(ARGV("sh", "-c",
	    "head -c 100000000 /dev/zero & head -c 100000000 /dev/zero >&2; wait"));
	struct run_request r;
	struct run_result res;
	struct lines out = { 0 };
	struct rusage ru;

	int saved = quiet_stderr();     /* log_output: ~24k lines of NULs into the log */
	req_init(&r, &c);
	r.log_output = 1;
	r.output_tail = 4096;
	r.on_stdout_line = count_only;
	r.ctx = &out;
	r.timeout = 20;
	handler_run(&r, &res, NULL, NULL);
	restore_stderr(saved);
	ck_assert_int_eq(res.status, RUN_EXITED);
	ck_assert_int_eq(res.code, 0);
	ck_assert_uint_eq(out.bytes, 100000000);
	ck_assert_uint_eq(out.maxlen, 8192);
	ck_assert_uint_eq(res.tail_len, 4096);
	for (size_t i = 0; i < res.tail_len; i++)
		ck_assert_int_eq(res.tail[i], 0);
	getrusage(RUSAGE_SELF, &ru);
	ck_assert_msg(ru.ru_maxrss < 64 * 1024, "max rss %ld KiB", ru.ru_maxrss);
	run_result_free(&res);
}
END_TEST

START_TEST(test_stdout_lines)
{
	struct argv_list c = mkargv(ARGV("printf", "a\\nbb\\n\\nccc"));
	struct argv_list longl = mkargv(ARGV("sh", "-c",
	    "head -c 20000 /dev/zero | tr '\\0' x; echo; head -c 8192 /dev/zero | tr '\\0' y; echo"));
	struct run_request r;
	struct run_result res;
	struct lines out;

	req_init(&r, &c);
	run_collect(&r, &res, &out);
	ck_assert_int_eq(res.status, RUN_EXITED);
	ck_assert_int_eq(out.n, 4);
	ck_assert_str_eq(out.text.s, "a\nbb\n\nccc\n");
	run_result_free(&res);
	sb_free(&out.text);

	req_init(&r, &longl);           /* 20000 = 8192 + 8192 + 3616; 8192 exactly is one */
	run_collect(&r, &res, &out);
	ck_assert_int_eq(out.n, 4);
	ck_assert_uint_eq(out.bytes, 20000 + 8192);
	ck_assert_uint_eq(out.maxlen, 8192);
	ck_assert_int_eq(out.text.s[8192], '\n');
	ck_assert_int_eq(out.text.s[2 * 8193 + 3616], '\n');
	ck_assert_int_eq(out.text.s[2 * 8193 + 3617], 'y');
	run_result_free(&res);
	sb_free(&out.text);
}
END_TEST

START_TEST(test_stderr_tail)
{
	struct argv_list c = mkargv(ARGV("sh", "-c",
	    "i=0; while [ $i -lt 1000 ]; do echo line$i >&2; i=$((i+1)); done; echo out"));
	struct argv_list small = mkargv(ARGV("sh", "-c", "echo oops >&2; exit 1"));
	struct run_request r;
	struct run_result res;
	struct sbuf want;

	sb_init(&want);
	for (int i = 0; i < 1000; i++)
		sb_printf(&want, "line%d\n", i);

	req_init(&r, &c);
	r.output_tail = 100;
	handler_run(&r, &res, NULL, NULL);
	ck_assert_uint_eq(res.tail_len, 100);
	ck_assert_str_eq(res.tail, want.s + want.len - 100);
	run_result_free(&res);

	req_init(&r, &small);
	handler_run(&r, &res, NULL, NULL);
	ck_assert_int_eq(res.code, 1);
	ck_assert_str_eq(res.tail, "oops\n");
	run_result_free(&res);

	req_init(&r, &small);
	r.output_tail = 0;
	handler_run(&r, &res, NULL, NULL);
	ck_assert_uint_eq(res.tail_len, 0);
	ck_assert_str_eq(res.tail, "");
	run_result_free(&res);
	sb_free(&want);
}
END_TEST

START_TEST(test_log_output)
{
	char *dir = tmpdir_new();
	char *logf = xasprintf("%s/log", dir);
	struct argv_list c = mkargv(ARGV("sh", "-c", "echo hello; echo trouble >&2; printf tail"));
	struct run_request r;
	struct run_result res;

	int fd = open(logf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	int saved = dup(2);
	dup2(fd, 2);
	close(fd);
	req_init(&r, &c);
	r.log_output = 1;
	r.log_tag = "jid=abc123";
	handler_run(&r, &res, NULL, NULL);
	dup2(saved, 2);
	close(saved);
	run_result_free(&res);

	FILE *f = fopen(logf, "r");
	char buf[4096];
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	ck_assert_msg(strstr(buf, "jid=abc123 stdout: hello\n"), "log: %s", buf);
	ck_assert_msg(strstr(buf, "jid=abc123 stderr: trouble\n"), "log: %s", buf);
	ck_assert_msg(strstr(buf, "jid=abc123 stdout: tail\n"), "log: %s", buf);
	unlink(logf);
	rmdir(dir);
	free(logf);
	free(dir);
}
END_TEST

/* ---- argv, env, cwd ------------------------------------------------------------- */

START_TEST(test_extra_args)
{
	struct argv_list c = mkargv(ARGV("sh", "-c", "printf '%s|' \"$@\"", "sh", "fixed"));
	const char *extra[] = { "a b", "", "{\"x\":1}", "$HOME;rm -rf /" };
	struct run_request r;
	struct run_result res;
	struct lines out;

	req_init(&r, &c);
	r.extra_args = extra;
	r.nextra = 4;
	run_collect(&r, &res, &out);
	ck_assert_int_eq(res.code, 0);
	ck_assert_str_eq(out.text.s, "fixed|a b||{\"x\":1}|$HOME;rm -rf /|\n");
	run_result_free(&res);
	sb_free(&out.text);
}
END_TEST

START_TEST(test_cwd)
{
	struct argv_list c = mkargv(ARGV("sh", "-c", "pwd"));
	struct run_request r;
	struct run_result res;
	struct lines out;

	req_init(&r, &c);
	r.cwd = "/tmp";
	run_collect(&r, &res, &out);
	ck_assert_int_eq(res.code, 0);
	ck_assert_str_eq(out.text.s, "/tmp\n");
	run_result_free(&res);
	sb_free(&out.text);
}
END_TEST

static struct handler test_handler_conf(void)
{
	static char *env[] = { "FOO=bar", "EMPTY=", "FOO=baz", "COGWORKER_JID=forged",
	                       "LANG=C.UTF-8", NULL };
	static char *pass[] = { "CWT_PASS", "CWT_MISSING", NULL };
	struct handler h;

	memset(&h, 0, sizeof h);
	h.class_name = "T";
	h.env = mkargv(env);
	h.env_passthrough = mkargv(pass);
	h.rlimit_cpu = h.rlimit_as = h.rlimit_nofile = h.rlimit_nproc = -1;
	return h;
}

static int env_count(char **env, const char *entry)
{
	int n = 0;
	for (; *env; env++)
		if (!strcmp(*env, entry))
			n++;
	return n;
}

static int env_has_name(char **env, const char *name)
{
	size_t len = strlen(name);
	for (; *env; env++)
		if (!strncmp(*env, name, len) && (*env)[len] == '=')
			return 1;
	return 0;
}

START_TEST(test_build_env)
{
	struct handler h = test_handler_conf();
	char **env;

	setenv("CWT_PASS", "passed", 1);
	setenv("CWT_SECRET", "leak", 1);
	setenv("LC_TIME", "C", 1);
	setenv("TZ", "UTC", 1);
	setenv("HOME", "/root", 1);
	unsetenv("PATH");
	env = handler_build_env(&h, "jid1", "Cls", "default", NULL, "[1,\"a\"]", NULL);
	ck_assert_int_eq(env_count(env, "PATH=/usr/local/bin:/usr/bin:/bin"), 1);
	ck_assert_int_eq(env_count(env, "CWT_PASS=passed"), 1);
	ck_assert(!env_has_name(env, "CWT_MISSING"));
	ck_assert(!env_has_name(env, "CWT_SECRET"));
	ck_assert(!env_has_name(env, "HOME"));
	ck_assert_int_eq(env_count(env, "LC_TIME=C"), 1);
	ck_assert_int_eq(env_count(env, "TZ=UTC"), 1);
	ck_assert_int_eq(env_count(env, "FOO=baz"), 1);
	ck_assert(!env_count(env, "FOO=bar"));
	ck_assert_int_eq(env_count(env, "EMPTY="), 1);
	ck_assert_int_eq(env_count(env, "LANG=C.UTF-8"), 1);
	ck_assert_int_eq(env_count(env, "COGWORKER_JID=jid1"), 1);
	ck_assert(!env_count(env, "COGWORKER_JID=forged"));
	ck_assert_int_eq(env_count(env, "COGWORKER_CLASS=Cls"), 1);
	ck_assert_int_eq(env_count(env, "COGWORKER_QUEUE=default"), 1);
	ck_assert_int_eq(env_count(env, "COGWORKER_RETRY_COUNT=0"), 1);
	ck_assert_int_eq(env_count(env, "COGWORKER_ARGS=[1,\"a\"]"), 1);
	ck_assert(!env_has_name(env, "COGWORKER_BID"));
	handler_free_env(env);

	setenv("PATH", "/opt/x:/bin", 1);
	env = handler_build_env(&h, "j", "C", "q", "3", "[]", "b0");
	ck_assert_int_eq(env_count(env, "PATH=/opt/x:/bin"), 1);
	ck_assert(!env_count(env, "PATH=/usr/local/bin:/usr/bin:/bin"));
	ck_assert_int_eq(env_count(env, "COGWORKER_RETRY_COUNT=3"), 1);
	ck_assert_int_eq(env_count(env, "COGWORKER_BID=b0"), 1);
	handler_free_env(env);
}
END_TEST

/* The environment as the child sees it. */
START_TEST(test_child_env)
{
	struct handler h = test_handler_conf();
	struct argv_list c = mkargv(ARGV("env"));
	struct run_request r;
	struct run_result res;
	struct lines out;
	char **env;

	setenv("CWT_PASS", "passed", 1);
	setenv("CWT_SECRET", "leak", 1);
	env = handler_build_env(&h, "abcdef0123456789abcdef01", "Mail", "critical", "2",
	                        "[12345678901234567890,\"x\"]", NULL);
	req_init(&r, &c);
	r.env = (const char *const *)env;
	run_collect(&r, &res, &out);
	ck_assert_int_eq(res.code, 0);
	const char *s = out.text.s;
	ck_assert(strstr(s, "COGWORKER_JID=abcdef0123456789abcdef01\n"));
	ck_assert(strstr(s, "COGWORKER_CLASS=Mail\n"));
	ck_assert(strstr(s, "COGWORKER_QUEUE=critical\n"));
	ck_assert(strstr(s, "COGWORKER_RETRY_COUNT=2\n"));
	ck_assert(strstr(s, "COGWORKER_ARGS=[12345678901234567890,\"x\"]\n"));
	ck_assert(strstr(s, "FOO=baz\n"));
	ck_assert(strstr(s, "CWT_PASS=passed\n"));
	ck_assert(!strstr(s, "CWT_SECRET"));
	ck_assert(!strstr(s, "forged"));
	int n = 0;
	for (char **e = env; *e; e++)
		n++;
	ck_assert_int_eq(out.n, n);     /* exactly what was built, nothing inherited */
	run_result_free(&res);
	sb_free(&out.text);
	handler_free_env(env);
}
END_TEST

/* ---- process state: group, fds, signals, ids, rlimits ---------------------------- */

START_TEST(test_process_group)
{
	struct argv_list c = mkargv(ARGV("cat", "/proc/self/stat"));
	struct run_request r;
	struct run_result res;
	struct lines out;
	int pid, ppid, pgrp, sid;
	char state;

	req_init(&r, &c);
	run_collect(&r, &res, &out);
	ck_assert_int_eq(res.code, 0);
	char *rp = strrchr(out.text.s, ')');
	ck_assert_ptr_nonnull(rp);
	ck_assert_int_eq(sscanf(out.text.s, "%d", &pid), 1);
	ck_assert_int_eq(sscanf(rp + 2, "%c %d %d %d", &state, &ppid, &pgrp, &sid), 4);
	ck_assert_int_eq(pid, res.pid);
	ck_assert_int_eq(ppid, getpid());
	ck_assert_int_eq(pgrp, pid);
	ck_assert_int_eq(sid, pid);
	run_result_free(&res);
	sb_free(&out.text);
}
END_TEST

START_TEST(test_only_stdio_fds)
{
	struct argv_list c = mkargv(ARGV("sh", "-c", "ls /proc/$$/fd"));
	struct run_request r;
	struct run_result res;
	struct lines out;

	int fd = open("/dev/null", O_RDONLY);      /* inheritable fds the daemon might hold */
	ck_assert_int_ge(dup2(fd, 9), 0);
	ck_assert_int_ge(dup2(fd, 300), 0);
	req_init(&r, &c);
	run_collect(&r, &res, &out);
	ck_assert_int_eq(res.code, 0);
	ck_assert_str_eq(out.text.s, "0\n1\n2\n");
	run_result_free(&res);
	sb_free(&out.text);
	close(fd);
}
END_TEST

static void status_field(const char *text, const char *name, char *out, size_t outlen)
{
	const char *p = strstr(text, name);
	ck_assert_msg(p != NULL, "no %s", name);
	p += strlen(name);
	while (*p == ' ' || *p == '\t')
		p++;
	size_t n = strcspn(p, "\n");
	snprintf(out, outlen, "%.*s", (int)n, p);
}

START_TEST(test_signal_state_reset)
{
	struct argv_list c = mkargv(ARGV("cat", "/proc/self/status"));
	struct run_request r;
	struct run_result res;
	struct lines out;
	sigset_t all;
	char v[64];

	/* Like the daemon: everything blocked, SIGPIPE (and more) ignored. */
	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGUSR1, SIG_IGN);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, NULL);
	req_init(&r, &c);
	run_collect(&r, &res, &out);
	ck_assert_int_eq(res.code, 0);
	status_field(out.text.s, "SigBlk:", v, sizeof v);
	ck_assert_str_eq(v, "0000000000000000");
	status_field(out.text.s, "SigIgn:", v, sizeof v);
	ck_assert_str_eq(v, "0000000000000000");
	run_result_free(&res);
	sb_free(&out.text);
}
END_TEST

START_TEST(test_rlimits)
{
	struct argv_list c = mkargv(ARGV("sh", "-c", "ulimit -n; ulimit -t"));
	struct run_request r;
	struct run_result res;
	struct lines out;

	req_init(&r, &c);
	r.rlimit_nofile = 64;
	r.rlimit_cpu = 30;
	run_collect(&r, &res, &out);
	ck_assert_int_eq(res.code, 0);
	ck_assert_str_eq(out.text.s, "64\n30\n");
	run_result_free(&res);
	sb_free(&out.text);
}
END_TEST

START_TEST(test_resolve_and_switch_ids)
{
	struct handler h = test_handler_conf();
	struct argv_list c = mkargv(ARGV("sh", "-c", "id -u; id -g; id -G"));
	struct run_request r;
	struct run_result res;
	struct lines out;
	unsigned *groups = NULL;
	char err[256];

	req_init(&r, &c);
	ck_assert_int_eq(handler_resolve_ids(&h, &r, &groups, err, sizeof err), 0);
	ck_assert_int_eq(r.set_ids, 0);
	ck_assert_ptr_null(groups);

	if (geteuid() != 0)
		return;                     /* switching needs root; the errors are tested below */
	h.user = "no-such-user-cwt";
	ck_assert_int_eq(handler_resolve_ids(&h, &r, &groups, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "no-such-user-cwt"), "%s", err);
	h.user = NULL;
	h.group = "no-such-group-cwt";
	ck_assert_int_eq(handler_resolve_ids(&h, &r, &groups, err, sizeof err), -1);

	h.user = "nobody";
	h.group = "nogroup";
	ck_assert_msg(handler_resolve_ids(&h, &r, &groups, err, sizeof err) == 0, "%s", err);
	ck_assert_int_eq(r.set_ids, 1);
	ck_assert_uint_eq(r.uid, 65534);
	ck_assert_uint_eq(r.gid, 65534);
	ck_assert_int_ge(r.ngroups, 1);
	run_collect(&r, &res, &out);
	ck_assert_int_eq(res.status, RUN_EXITED);
	ck_assert_int_eq(res.code, 0);
	ck_assert_str_eq(out.text.s, "65534\n65534\n65534\n");
	run_result_free(&res);
	sb_free(&out.text);
	free(groups);

	/* Not root: a configured user is an error (in a child: this process stays root). */
	pid_t pid = fork();
	if (pid == 0) {
		int ok = setresuid(65534, 65534, 65534) == 0 &&
		         handler_resolve_ids(&h, &r, &groups, err, sizeof err) == -1 &&
		         strstr(err, "root") != NULL;
		_exit(ok ? 0 : 1);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}
END_TEST

/* Spawning stays cheap (vfork): a few hundred short children in well under the timeout. */
START_TEST(test_many_spawns)
{
	struct argv_list c = mkargv(ARGV("/bin/true"));
	struct run_request r;
	struct run_result res;

	req_init(&r, &c);
	r.stdin_data = "{}";
	r.stdin_len = 2;
	double t0 = mono_now();
	for (int i = 0; i < 300; i++) {
		handler_run(&r, &res, NULL, NULL);
		ck_assert_int_eq(res.status, RUN_EXITED);
		ck_assert_int_eq(res.code, 0);
		run_result_free(&res);
	}
	ck_assert_msg(mono_now() - t0 < 10, "300 spawns took %.2fs", mono_now() - t0);
}
END_TEST

/* Fetchers run handlers concurrently: each gets exactly its own stdin back, no pipe end of
 * one job leaks into another's child (which would delay its EOF). */
struct conc_arg {
	int id, ok;
};

static void *conc_worker(void *a)
{
	struct conc_arg *ca = a;
	struct argv_list c = mkargv(ARGV("cat"));
	struct run_request r;
	struct run_result res;
	struct lines out;
	char *payload = xasprintf("worker %d payload", ca->id);

	ca->ok = 1;
	for (int i = 0; i < 40; i++) {
		req_init(&r, &c);
		r.stdin_data = payload;
		r.stdin_len = strlen(payload);
		r.timeout = 10;
		run_collect(&r, &res, &out);
		if (res.status != RUN_EXITED || res.code != 0 || out.n != 1 ||
		    strncmp(out.text.s, payload, strlen(payload)) != 0 ||
		    strcmp(out.text.s + strlen(payload), "\n") != 0)
			ca->ok = 0;
		run_result_free(&res);
		sb_free(&out.text);
	}
	free(payload);
	return NULL;
}

START_TEST(test_concurrent_runs)
{
	pthread_t th[6];
	struct conc_arg args[6];

	double t0 = mono_now();
	for (int i = 0; i < 6; i++) {
		args[i].id = i;
		pthread_create(&th[i], NULL, conc_worker, &args[i]);
	}
	for (int i = 0; i < 6; i++) {
		pthread_join(th[i], NULL);
		ck_assert_msg(args[i].ok, "worker %d got a wrong result", i);
	}
	ck_assert_msg(mono_now() - t0 < 10, "took %.2fs", mono_now() - t0);
}
END_TEST

static Suite *handler_suite(void)
{
	Suite *s = suite_create("handler");
	TCase *tc = tcase_create("run");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_exit_codes);
	tcase_add_test(tc, test_signaled);
	tcase_add_test(tc, test_spawn_failures);
	tcase_add_test(tc, test_stdin_exact);
	tcase_add_test(tc, test_stdin_never_read);
	tcase_add_test(tc, test_stdin_child_exits_at_once);
	tcase_add_test(tc, test_timeout_kills_grandchild);
	tcase_add_test(tc, test_timeout_term_ignored);
	tcase_add_test(tc, test_exit_kills_grandchild);
	tcase_add_test(tc, test_escaped_grandchild_bounded_drain);
	tcase_add_test(tc, test_abort);
	tcase_add_test(tc, test_flood_bounded);
	tcase_add_test(tc, test_stdout_lines);
	tcase_add_test(tc, test_stderr_tail);
	tcase_add_test(tc, test_log_output);
	tcase_add_test(tc, test_extra_args);
	tcase_add_test(tc, test_cwd);
	tcase_add_test(tc, test_build_env);
	tcase_add_test(tc, test_child_env);
	tcase_add_test(tc, test_process_group);
	tcase_add_test(tc, test_only_stdio_fds);
	tcase_add_test(tc, test_signal_state_reset);
	tcase_add_test(tc, test_rlimits);
	tcase_add_test(tc, test_resolve_and_switch_ids);
	tcase_add_test(tc, test_many_spawns);
	tcase_add_test(tc, test_concurrent_runs);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(handler_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
