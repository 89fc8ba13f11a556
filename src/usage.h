/* SPDX-License-Identifier: MIT */
/*
 * usage.h: what one run of a handler cost (issue 28 item 2): user + system CPU and peak
 * resident memory, and, where the run had a cgroup of its own, that cgroup's memory peak,
 * I/O bytes and out-of-memory kills. One record, the same for a cold child and a warm
 * job, carried in the run's result (handler.h) to every place that shows it: the settle
 * line of the log, the history entry, the kept output's run record, /metrics and
 * `cogworkerctl exec` (doc/protocol.md §4.9, §7.25).
 *
 * Where the figures come from (doc/operating.md "Isolation and accounting"):
 * - a cold child: wait4()'s rusage when the pump reaps it: the CPU of the child and of the
 *   descendants it waited for, and the largest resident set among them (ru_maxrss);
 * - a warm job: the delta of the process's utime + stime + cutime + cstime across the job
 *   (/proc/<pid>/stat), and its VmHWM at "done" after the high-water mark was reset at the
 *   job's start ("5" into /proc/<pid>/clear_refs): each job its own peak;
 * - a cgroup in force (the job's own): its cpu.stat usage replaces the CPU (it includes
 *   processes that escaped the group or were never waited for), and its memory.peak, io.stat
 *   and memory.events fill the cg_ fields. Whoever owns the cgroup fills them.
 *
 * Pure helper (level 1): no Redis, no daemon state. The readers of /proc take a pid and
 * read only that process's files.
 */
#ifndef COGWORKERD_USAGE_H
#define COGWORKERD_USAGE_H

#include <stddef.h>
#include <sys/types.h>
#include "log.h"
#include "util.h"

struct rusage;

struct run_usage {
	int measured;               /* 0: nothing was measured (no process ran); the rest unset */
	double user_s, sys_s;       /* CPU seconds; their sum is "cpu" */
	long long maxrss_bytes;     /* peak resident set of the largest process, -1 unknown */
	/* The run's own cgroup, where one was in force: cgroup = 1, and then its cpu.stat
	 * usage is user_s + sys_s. Each -1 when that file could not be read. */
	int cgroup;
	long long cg_memory_peak;   /* memory.peak, bytes */
	long long cg_io_read_bytes; /* io.stat rbytes, summed over devices */
	long long cg_io_write_bytes;/* io.stat wbytes */
	long long cg_oom_kills;     /* memory.events oom_kill during the run */
};

/* Nothing measured. */
void usage_none(struct run_usage *u);
/* The figures as a record read back holds them (cpu_s NAN: not measured; maxrss -1). */
void usage_of(struct run_usage *u, double cpu_s, long long maxrss_bytes);
/* From wait4()'s rusage of a reaped child. */
void usage_from_rusage(struct run_usage *u, const struct rusage *ru);

static inline double usage_cpu(const struct run_usage *u)
{
	return u->user_s + u->sys_s;
}

/*
 * For the settle line: " cpu=0.48s maxrss=151MiB" (a leading space), "" when nothing
 * was measured. The peak as read by people: KiB below 1 MiB, MiB with one decimal below
 * 10 MiB, whole MiB below 10 GiB, then GiB.
 */
void usage_text(const struct run_usage *u, char *out, size_t n);
void usage_bytes_human(long long bytes, char *out, size_t n);
/* The JSON log format's fields: cpu_s, maxrss_bytes, and with a cgroup memory_peak_bytes,
 * io_read_bytes, io_write_bytes, oom_kills. Fills at most USAGE_LOG_FIELDS of f (NAN for
 * what is unknown, which the log leaves out); returns how many. */
#define USAGE_LOG_FIELDS 6
int usage_log_fields(const struct run_usage *u, struct log_field *f);
/* The record's members, each preceded by a comma: "cpu_s" and "maxrss_bytes" always (null
 * when unknown), the cgroup's four only with one. For the history entry, the kept
 * output's run record and exec's --json (doc/protocol.md §4.9). */
void usage_json(const struct run_usage *u, struct sbuf *b);

/*
 * A warm process, per job. usage_proc_begin resets pid's high-water mark and notes its CPU
 * so far; usage_proc_end fills u with the CPU since then and the peak since the reset.
 * Best effort: what cannot be read is left unknown (maxrss -1; no CPU: measured = 0).
 */
struct usage_mark {
	int ok;                     /* 0: /proc/<pid>/stat could not be read */
	int cpu;                    /* the CPU was noted (usage_proc_begin's cpu) */
	double user_s, sys_s;       /* utime + cutime, stime + cstime at the mark */
};
/* The process's /proc files, opened at its first mark and kept for its life (a job paid
 * four opens and closes of them): usage_proc_init before, usage_proc_close after. */
struct usage_proc {
	pid_t pid;
	int opened;
	int stat_fd, status_fd, refs_fd;    /* -1: could not be opened */
};
void usage_proc_init(struct usage_proc *p, pid_t pid);
void usage_proc_close(struct usage_proc *p);
/* cpu 0: the peak only (a cgroup's cpu.stat gives the CPU, escaped processes included:
 * two reads of /proc/<pid>/stat per job would be thrown away). */
void usage_proc_begin(struct usage_proc *p, struct usage_mark *m, int cpu);
void usage_proc_end(struct usage_proc *p, const struct usage_mark *m, struct run_usage *u,
                    int cpu);

/*
 * A run's own cgroup (jobcg.h), reused from run to run: usage_cg_begin notes its counters
 * (cpu.stat, io.stat, memory.events) and resets its memory.peak for the run (Linux 6.12:
 * the peak seen through the descriptor that wrote to it); usage_cg_end, once the cgroup is
 * empty, fills u's CPU from the cpu.stat delta (escaped processes included) and its cg_
 * fields, and closes what begin opened. dirfd: the cgroup's directory; cpu_fd: its
 * cpu.stat kept open (jobcg_cpu_stat_fd), or -1 to open it by name. A file that is absent
 * (its controller not enabled: memory, io) leaves its figure unknown.
 */
struct usage_cg_mark {
	long long user_us, sys_us;  /* cpu.stat; -1 unreadable */
	long long rbytes, wbytes;   /* io.stat summed; -1 unreadable */
	long long oom_kills;        /* memory.events oom_kill; -1 unreadable */
	int peak_fd;                /* memory.peak, reset for this run; -1 none */
};
void usage_cg_begin(int dirfd, int cpu_fd, struct usage_cg_mark *m);
void usage_cg_end(int dirfd, int cpu_fd, struct usage_cg_mark *m, struct run_usage *u);

#endif
