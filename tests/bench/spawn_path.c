/*
 * spawn_path: the daemon's way of running a child, without Redis (tests/bench/bench.py).
 *
 *   spawn_path THREADS TOTAL [PROGRAM]
 *
 * Like spawn_ceiling, THREADS threads share TOTAL runs of PROGRAM (default /bin/true), but
 * each run goes through handler_run, the code a fetcher runs for a job: the PATH lookup,
 * the three pipes with a job-sized payload on stdin, the vfork child's setup (session,
 * death signal, dispositions, descriptors), the pump's poll loop on the pidfd and the
 * pipes, the reaping and the process-group kill. Nothing else of the daemon runs: no
 * fetch, no settlement, no bookkeeping. Set against spawn_ceiling, it splits the daemon's
 * CPU per job into what starting and serving a child costs and what the rest costs.
 * Prints "<runs> <seconds> <runs/s> <self CPU us/run> <children CPU us/run>" like
 * spawn_ceiling; the exit status is 1 when a run did not end with exit status 0.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "config.h"
#include "handler.h"

static atomic_long left;
static atomic_int failures;
static char *program_argv[] = { "/bin/true", NULL };
static struct argv_list program = { .v = program_argv, .n = 1 };
static const char *child_env[] = { "PATH=/usr/local/bin:/usr/bin:/bin",
                                   "COGWORKER_JID=0123456789abcdef01234567",
                                   "COGWORKER_CLASS=True", "COGWORKER_QUEUE=default", NULL };
/* About what a small job's JSON is: what the daemon writes to the child's stdin. */
static char payload[256];

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *loop(void *arg)
{
	(void)arg;
	while (atomic_fetch_sub(&left, 1) > 0) {
		struct run_request rq;
		struct run_result res;
		memset(&rq, 0, sizeof rq);
		rq.command = &program;
		rq.env = child_env;
		rq.stdin_data = payload;
		rq.stdin_len = sizeof payload - 1;
		rq.kill_grace = 10;
		rq.output_tail = 4096;
		rq.rlimit_cpu = rq.rlimit_as = rq.rlimit_nofile = rq.rlimit_nproc = -1;
		rq.log_tag = "jid=0123456789abcdef01234567";
		handler_run(&rq, &res, NULL, NULL);
		if (res.status != RUN_EXITED || res.code != 0)
			atomic_fetch_add(&failures, 1);
		run_result_free(&res);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: spawn_path THREADS TOTAL [PROGRAM]\n");
		return 2;
	}
	int threads = atoi(argv[1]);
	long total = atol(argv[2]);
	if (argc > 3)
		program_argv[0] = argv[3];
	if (threads < 1 || total < 1) {
		fprintf(stderr, "spawn_path: THREADS and TOTAL must be positive\n");
		return 2;
	}
	memset(payload, 'x', sizeof payload - 1);
	/* As in the daemon: SIGPIPE ignored, every signal blocked in every thread. */
	signal(SIGPIPE, SIG_IGN);
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, NULL);
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
	struct rusage self, kids;
	getrusage(RUSAGE_SELF, &self);
	getrusage(RUSAGE_CHILDREN, &kids);
#define US(tv) ((double)(tv).tv_sec * 1e6 + (double)(tv).tv_usec)
	printf("%ld %.6f %.1f %.1f %.1f\n", total, dt, (double)total / dt,
	       (US(self.ru_utime) + US(self.ru_stime)) / (double)total,
	       (US(kids.ru_utime) + US(kids.ru_stime)) / (double)total);
	if (atomic_load(&failures)) {
		fprintf(stderr, "spawn_path: %d runs did not exit 0\n", atomic_load(&failures));
		return 1;
	}
	return 0;
}
