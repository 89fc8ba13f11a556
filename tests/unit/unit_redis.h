/* SPDX-License-Identifier: MIT */
/*
 * unit_redis.h: a private redis-server on a unix socket, for the unit tests that drive
 * real Redis with injected faults, and the fault hook they inject them with (header-only:
 * each test binary is one .c file, so the hook's state below is that test's own).
 */
#ifndef COGWORKERD_UNIT_REDIS_H
#define COGWORKERD_UNIT_REDIS_H

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <hiredis.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "redis.h"

/* Start the server (socket /tmp/cw-unit-<tag>-<pid>.sock, written into sock) and return a
 * connection to it; *pid is the server's pid. The server dies with the test process. */
static inline redisContext *unit_redis_start(const char *tag, char *sock, size_t socklen,
                                             pid_t *pid)
{
	snprintf(sock, socklen, "/tmp/cw-unit-%s-%d.sock", tag, (int)getpid());
	*pid = fork();
	if (*pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);   /* never outlive a crashed test */
		int devnull = open("/dev/null", O_WRONLY);
		dup2(devnull, 1);
		execlp("redis-server", "redis-server", "--port", "0", "--unixsocket", sock, "--save", "",
		       "--appendonly", "no", (char *)NULL);
		_exit(127);
	}
	/* The socket file exists from its bind, before the server listens on it: a connection
	 * made then is refused, and every command of the test failed on it (a loaded host made
	 * test_settle crash so). So connect until a PING is answered, for up to 10 s. */
	redisContext *c = NULL;
	for (int i = 0; i < 200; i++) {
		struct stat st;
		if (stat(sock, &st) == 0) {
			c = redisConnectUnix(sock);
			redisReply *rep = c && !c->err ? redisCommand(c, "PING") : NULL;
			int up = rep && rep->type == REDIS_REPLY_STATUS;
			if (rep)
				freeReplyObject(rep);
			if (up)
				return c;
			redisFree(c);
			c = NULL;
		}
		usleep(50000);
	}
	fprintf(stderr, "unit_redis_start: redis-server on %s never answered\n", sock);
	return redisConnectUnix(sock);
}

static inline void unit_redis_stop(redisContext *c, pid_t pid, const char *sock)
{
	redisFree(c);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	unlink(sock);
}

/*
 * Injected faults through redis_fault_hook (redis.h): a command, or a script by name, fails
 * as if the connection had been lost. A test arms up to UNIT_FAULTS of them, each for a
 * number of calls (-1: until disarmed), and can count the calls of up to UNIT_FAULTS names
 * (counted whether or not they fail, so "retried twice" reads as 3 calls).
 */
#define UNIT_FAULTS 4
__attribute__((unused)) static const char *unit_fail_name[UNIT_FAULTS];
__attribute__((unused)) static int unit_fail_left[UNIT_FAULTS];
__attribute__((unused)) static const char *unit_count_name[UNIT_FAULTS];
__attribute__((unused)) static int unit_calls[UNIT_FAULTS];

static inline int unit_fault_hook(const char *name)
{
	for (int i = 0; i < UNIT_FAULTS; i++)
		if (unit_count_name[i] && strcmp(name, unit_count_name[i]) == 0)
			unit_calls[i]++;
	for (int i = 0; i < UNIT_FAULTS; i++) {
		if (unit_fail_name[i] && strcmp(unit_fail_name[i], name) == 0 &&
		    unit_fail_left[i] != 0) {
			if (unit_fail_left[i] > 0)
				unit_fail_left[i]--;
			return 1;
		}
	}
	return 0;
}

/* Slot `slot` fails `name` for the next `times` calls (-1: always); NULL disarms it. */
static inline void unit_fail(int slot, const char *name, int times)
{
	unit_fail_name[slot] = name;
	unit_fail_left[slot] = times;
}

/* unit_calls[slot] counts the calls of `name` from now on. */
static inline void unit_count(int slot, const char *name)
{
	unit_count_name[slot] = name;
	unit_calls[slot] = 0;
}

/* Nothing fails and nothing is counted: for each test's setup. */
static inline void unit_faults_reset(void)
{
	for (int i = 0; i < UNIT_FAULTS; i++) {
		unit_fail(i, NULL, 0);
		unit_count(i, NULL);
	}
}

/* Route every Redis command of this process through the hook, nothing armed yet. */
static inline void unit_faults_install(void)
{
	unit_faults_reset();
	redis_fault_hook = unit_fault_hook;
}

#endif
