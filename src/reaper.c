/* SPDX-License-Identifier: MIT */
/*
 * reaper.c: no handler outlives the daemon.
 *
 * A handler child is armed with PR_SET_PDEATHSIG, so it dies when the daemon is killed
 * with SIGKILL; but its own children (a shell's `sleep`, a worker pool) are not, and they
 * would go on running beside the copy of the job that orphan recovery starts elsewhere.
 * Under systemd the control-group kill covers this; everywhere else this reaper does. With
 * cgroup containment (jobcg.h) it also kills the daemon's job subtree, which reaches the
 * processes that left their group too, and removes it.
 *
 * At boot, before any thread exists, the daemon forks the reaper. The two share a table of
 * process groups (an anonymous shared mapping made before the fork) and a pipe whose write
 * end only the daemon holds. Each handler's process group is written into a free slot of
 * the table when it starts and cleared once it is gone: two atomic stores, no system call,
 * and the reaper is not woken. It sleeps in read() on the pipe; when the pipe reaches end
 * of file, the daemon has exited, however it died, and the reaper sends SIGKILL to every
 * group still in the table, then exits. It ignores the terminal's and systemd's signals,
 * so it always gets to do that, and it holds nothing else of the daemon (every other fd
 * closed).
 *
 * Why a table and not messages: the first version wrote "+pgid" and "-pgid" records on
 * the pipe, two writes per job that each woke the reaper, a context switch on a machine
 * that has none to spare at a few thousand jobs a second. A full table (more handlers at
 * once than REAPER_SLOTS, far beyond the largest concurrency) drops the announcement,
 * logged, as a full pipe did.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include "jobcg.h"
#include "log.h"
#include "reaper.h"

#define REAPER_SLOTS 4096           /* > the largest concurrency plus on_death runs */

/* Shared with the reaper: 0 = free, else a process group to kill if the daemon dies. */
static atomic_int *table;
static int reaper_fd = -1;
static __thread int hint;           /* this thread's last slot: usually free again */

static void reaper_loop(int fd)
{
	char c;
	ssize_t got;
	while ((got = read(fd, &c, 1)) != 0)
		if (got < 0 && errno != EINTR)
			break;
	for (int i = 0; i < REAPER_SLOTS; i++) {
		int pgid = atomic_load(&table[i]);
		if (pgid > 0)
			kill(-pgid, SIGKILL);
	}
	jobcg_reap();
	_exit(0);
}

int reaper_start(void)
{
	int fds[2];
	table = mmap(NULL, REAPER_SLOTS * sizeof *table, PROT_READ | PROT_WRITE,
	             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (table == MAP_FAILED) {
		table = NULL;
		log_error("reaper: mmap: %s", strerror(errno));
		return -1;
	}
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
	reaper_fd = fds[1];
	return 0;
}

void reaper_track(int pgid)
{
	if (reaper_fd < 0 || pgid <= 0)
		return;
	for (int k = 0; k < REAPER_SLOTS; k++) {
		int i = (hint + k) % REAPER_SLOTS, free_slot = 0;
		if (atomic_compare_exchange_strong(&table[i], &free_slot, pgid)) {
			hint = i;
			return;
		}
	}
	log_warn("reaper: couldn't announce process group %d: table full", pgid);
}

void reaper_untrack(int pgid)
{
	if (reaper_fd < 0 || pgid <= 0)
		return;
	int expect = pgid;
	if (atomic_compare_exchange_strong(&table[hint], &expect, 0))
		return;
	for (int i = 0; i < REAPER_SLOTS; i++) {
		expect = pgid;
		if (atomic_compare_exchange_strong(&table[i], &expect, 0))
			return;
	}
}
