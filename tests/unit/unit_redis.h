/*
 * unit_redis.h: a private redis-server on a unix socket, for the unit tests that drive
 * real Redis with injected faults (header-only: each test binary is one .c file).
 */
#ifndef COGWORKERD_UNIT_REDIS_H
#define COGWORKERD_UNIT_REDIS_H

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
#include <hiredis.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

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
	for (int i = 0; i < 100; i++) {
		struct stat st;
		if (stat(sock, &st) == 0)
			break;
		usleep(50000);
	}
	return redisConnectUnix(sock);
}

static inline void unit_redis_stop(redisContext *c, pid_t pid, const char *sock)
{
	redisFree(c);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	unlink(sock);
}

#endif
