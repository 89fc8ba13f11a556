/*
 * reaper.c: no handler outlives the daemon.
 *
 * A handler child is armed with PR_SET_PDEATHSIG, so it dies when the daemon is killed
 * with SIGKILL; but its own children (a shell's `sleep`, a worker pool) are not, and they
 * would go on running beside the copy of the job that orphan recovery starts elsewhere.
 * Under systemd the control-group kill covers this; everywhere else this reaper does.
 *
 * At boot, before any thread exists, the daemon forks the reaper and keeps the write end
 * of a pipe to it. Each handler's process group is announced ("+pgid") when it starts and
 * withdrawn ("-pgid") once it is gone. When the pipe reaches end of file, the daemon has
 * exited, however it died, and the reaper sends SIGKILL to every group still announced,
 * then exits. It ignores the terminal's and systemd's signals, so it always gets to do
 * that, and it holds nothing else of the daemon (every other fd closed).
 *
 * The daemon's writes are non-blocking: a record is 8 bytes, atomic below PIPE_BUF, and
 * if the reaper ever fell so far behind that the pipe is full, an announcement is dropped
 * (logged) rather than stalling a fetcher.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include "log.h"
#include "reaper.h"

struct record {
	int op;                 /* '+' or '-' */
	int pgid;
};

static int reaper_fd = -1;

static void reaper_loop(int fd)
{
	int cap = 64, n = 0;
	int *groups = malloc((size_t)cap * sizeof *groups);
	struct record rec;
	ssize_t got;
	while ((got = read(fd, &rec, sizeof rec)) != 0) {
		if (got < 0 && errno == EINTR)
			continue;
		if (got != (ssize_t)sizeof rec)
			break;
		if (rec.op == '+') {
			if (n == cap) {
				int *more = realloc(groups, (size_t)(cap *= 2) * sizeof *groups);
				if (!more)
					continue;
				groups = more;
			}
			groups[n++] = rec.pgid;
		} else {
			for (int i = 0; i < n; i++)
				if (groups[i] == rec.pgid) {
					groups[i] = groups[--n];
					break;
				}
		}
	}
	for (int i = 0; i < n; i++)
		kill(-groups[i], SIGKILL);
	_exit(0);
}

int reaper_start(void)
{
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) != 0) {
		log_error("reaper: pipe: %s", strerror(errno));
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		log_error("reaper: fork: %s", strerror(errno));
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (pid == 0) {
		static const int ignored[] = { SIGINT, SIGTERM, SIGHUP, SIGTSTP, SIGQUIT, SIGPIPE,
		                               SIGUSR1, SIGUSR2 };
		for (size_t i = 0; i < sizeof ignored / sizeof *ignored; i++)
			signal(ignored[i], SIG_IGN);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		prctl(PR_SET_NAME, "cogworkerd-reap", 0, 0, 0);
		if (dup2(fds[0], 3) < 0)
			_exit(1);
		syscall(SYS_close_range, 4, ~0U, 0);
		int devnull = open("/dev/null", O_RDWR);
		if (devnull >= 0) {
			dup2(devnull, 0);
			dup2(devnull, 1);
			if (devnull > 3)
				close(devnull);
		}
		if (chdir("/") != 0)
			_exit(1);
		reaper_loop(3);
	}
	close(fds[0]);
	fcntl(fds[1], F_SETFL, O_NONBLOCK);
	reaper_fd = fds[1];
	return 0;
}

static void announce(int op, int pgid)
{
	if (reaper_fd < 0 || pgid <= 0)
		return;
	struct record rec = { op, pgid };
	if (write(reaper_fd, &rec, sizeof rec) != (ssize_t)sizeof rec)
		log_warn("reaper: couldn't announce process group %d: %s", pgid, strerror(errno));
}

void reaper_track(int pgid)
{
	announce('+', pgid);
}

void reaper_untrack(int pgid)
{
	announce('-', pgid);
}
