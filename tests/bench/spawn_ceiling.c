/* SPDX-License-Identifier: MIT */
/*
 * spawn_ceiling: the baseline of the throughput benchmark (tests/bench/bench.py).
 *
 *   spawn_ceiling THREADS TOTAL [PROGRAM]
 *
 * THREADS threads share TOTAL spawns of PROGRAM (default /bin/true): each thread loops
 * posix_spawn + waitpid (its own child only) until the shared counter is used up. Prints
 * "<spawns> <seconds> <spawns/s> <self CPU us/spawn> <children CPU us/spawn>" on stdout. This is what the machine can do with nothing
 * else in the way: no Redis, no pipes, no process group, no bookkeeping.
 *
 * Built with -DSPAWN_PATH (and the daemon's library) it is spawn_path: each run goes
 * through handler_run instead, the code a fetcher runs for a job (the PATH lookup, the
 * three pipes with a job-sized payload on stdin, the vfork child's setup, the pump's poll
 * loop on the pidfd and the pipes, the reaping and the group kill), and nothing else of
 * the daemon: no fetch, no settlement, no bookkeeping. Set against the ceiling, it splits
 * the daemon's CPU per job into starting and serving a child, and the rest.
 *
 *   spawn_ceiling --stamp FILE [SECONDS]
 *
 * The handler of the latency and recovery figures: appends "<COGWORKER_JID> <epoch>\n"
 * (CLOCK_REALTIME, the moment the handler runs) to FILE in one O_APPEND write, then sleeps
 * SECONDS (default 0) and exits 0.
 */
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef SPAWN_PATH
#include <signal.h>
#include "config.h"
#include "handler.h"
#endif

extern char **environ;

static atomic_long left;
static const char *program = "/bin/true";
static atomic_int failures;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#ifdef SPAWN_PATH
static const char *child_env[] = { "PATH=/usr/local/bin:/usr/bin:/bin",
                                   "COGWORKER_JID=0123456789abcdef01234567",
                                   "COGWORKER_CLASS=True", "COGWORKER_QUEUE=default", NULL };
static char payload[256];       /* about a small job's JSON, the child's stdin */

/* One run as a fetcher does it; 0 when it exited 0. */
static int run_once(char **argv)
{
	struct argv_list cmd = { .v = argv, .n = 1 };
	struct run_request rq;
	struct run_result res;
	memset(&rq, 0, sizeof rq);
	rq.command = &cmd;
	rq.env = child_env;
	rq.stdin_data = payload;
	rq.stdin_len = sizeof payload - 1;
	rq.kill_grace = 10;
	rq.output_tail = 4096;
	rq.rlimit_cpu = rq.rlimit_as = rq.rlimit_nofile = rq.rlimit_nproc = -1;
	rq.log_tag = "jid=0123456789abcdef01234567";
	handler_run(&rq, &res, NULL, NULL);
	int failed = res.status != RUN_EXITED || res.code != 0;
	run_result_free(&res);
	return failed;
}

/* As in the daemon: SIGPIPE ignored, every signal blocked in every thread. */
static void setup(void)
{
	memset(payload, 'x', sizeof payload - 1);
	signal(SIGPIPE, SIG_IGN);
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, NULL);
}
#else
static int run_once(char **argv)
{
	pid_t pid;
	int st;
	if (posix_spawn(&pid, program, NULL, NULL, argv, environ) != 0)
		return 1;
	while (waitpid(pid, &st, 0) < 0)
		;
	return 0;
}

static void setup(void)
{
}
#endif

static void *loop(void *arg)
{
	(void)arg;
	char *argv[] = { (char *)program, NULL };
	while (atomic_fetch_sub(&left, 1) > 0)
		if (run_once(argv))
			atomic_fetch_add(&failures, 1);
	return NULL;
}

static int stamp(const char *file, double seconds)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	const char *jid = getenv("COGWORKER_JID");
	char line[256];
	int n = snprintf(line, sizeof line, "%s %lld.%09ld\n", jid ? jid : "-",
	                 (long long)ts.tv_sec, ts.tv_nsec);
	int fd = open(file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, line, (size_t)n) != n) {
		perror(file);
		return 1;
	}
	close(fd);
	if (seconds > 0) {
		struct timespec d = { (time_t)seconds,
		                      (long)((seconds - (double)(time_t)seconds) * 1e9) };
		while (nanosleep(&d, &d) != 0)
			;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "--stamp") == 0)
		return stamp(argv[2], argc > 3 ? atof(argv[3]) : 0);
	if (argc < 3) {
		fprintf(stderr, "usage: spawn_ceiling THREADS TOTAL [PROGRAM]\n"
		                "       spawn_ceiling --stamp FILE [SECONDS]\n");
		return 2;
	}
	int threads = atoi(argv[1]);
	long total = atol(argv[2]);
	if (argc > 3)
		program = argv[3];
	if (threads < 1 || total < 1) {
		fprintf(stderr, "spawn_ceiling: THREADS and TOTAL must be positive\n");
		return 2;
	}
	setup();
	atomic_store(&left, total);
	pthread_t *t = calloc((size_t)threads, sizeof *t);
	if (!t)
		return 1;
	double t0 = now();
	for (int i = 0; i < threads; i++)
		if (pthread_create(&t[i], NULL, loop, NULL) != 0) {
			perror("pthread_create");
			return 1;
		}
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	double dt = now() - t0;
	free(t);
	long done = total - atomic_load(&failures);
	if (atomic_load(&failures))
		fprintf(stderr, "spawn_ceiling: %d spawns failed\n", atomic_load(&failures));
	struct rusage self, kids;
	getrusage(RUSAGE_SELF, &self);
	getrusage(RUSAGE_CHILDREN, &kids);
#define US(tv) ((double)(tv).tv_sec * 1e6 + (double)(tv).tv_usec)
	printf("%ld %.6f %.1f %.1f %.1f\n", done, dt, (double)done / dt,
	       (US(self.ru_utime) + US(self.ru_stime)) / (double)done,
	       (US(kids.ru_utime) + US(kids.ru_stime)) / (double)done);
	return atomic_load(&failures) ? 1 : 0;
}
