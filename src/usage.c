/* SPDX-License-Identifier: MIT */
/*
 * usage.c: the cost of a run, read and written (usage.h says what and from where).
 *
 * Formatting lives here so that every surface says the same thing: the log's
 * "cpu=0.48s maxrss=151MiB", the members "cpu_s" and "maxrss_bytes" of the JSON records.
 * A figure that is unknown is left out of the log line and null in a record, never 0: a
 * run that spawned nothing used no CPU, but it did not use "0 bytes" of memory either.
 *
 * The warm readers open /proc/<pid> files by path once, at a process's first job, and keep
 * them for its life: the pid is a child this thread has not reaped yet (warm.c reaps only
 * after a job), so the path cannot name another process, and a descriptor stays bound to
 * the process it was opened for (reads fail once it is gone, never read another's).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "usage.h"

void usage_none(struct run_usage *u)
{
	memset(u, 0, sizeof *u);
	u->maxrss_bytes = -1;
	u->cg_memory_peak = u->cg_io_read_bytes = u->cg_io_write_bytes = u->cg_oom_kills = -1;
}

void usage_of(struct run_usage *u, double cpu_s, long long maxrss_bytes)
{
	usage_none(u);
	if (isnan(cpu_s))
		return;
	u->measured = 1;
	u->user_s = cpu_s;
	u->maxrss_bytes = maxrss_bytes;
}

static double tv_seconds(const struct timeval *tv)
{
	return (double)tv->tv_sec + (double)tv->tv_usec / 1e6;
}

void usage_from_rusage(struct run_usage *u, const struct rusage *ru)
{
	usage_none(u);
	u->measured = 1;
	u->user_s = tv_seconds(&ru->ru_utime);
	u->sys_s = tv_seconds(&ru->ru_stime);
	u->maxrss_bytes = (long long)ru->ru_maxrss * 1024;    /* Linux: KiB */
}

void usage_bytes_human(long long bytes, char *out, size_t n)
{
	double mib = (double)bytes / (1024.0 * 1024.0);
	if (bytes < 0)
		snprintf(out, n, "?");
	else if (bytes < 1024 * 1024)
		snprintf(out, n, "%lldKiB", (bytes + 1023) / 1024);
	else if (mib < 10)
		snprintf(out, n, "%.1fMiB", mib);
	else if (mib < 10240)
		snprintf(out, n, "%.0fMiB", mib);
	else
		snprintf(out, n, "%.1fGiB", mib / 1024.0);
}

void usage_text(const struct run_usage *u, char *out, size_t n)
{
	char rss[32];
	if (!u->measured) {
		if (n)
			out[0] = '\0';
		return;
	}
	usage_bytes_human(u->maxrss_bytes, rss, sizeof rss);
	snprintf(out, n, " cpu=%.2fs maxrss=%s", usage_cpu(u), rss);
}

static double num_or_nan(long long v)
{
	return v < 0 ? NAN : (double)v;
}

int usage_log_fields(const struct run_usage *u, struct log_field *f)
{
	if (!u->measured)
		return 0;
	int n = 0;
	f[n++] = (struct log_field){ "cpu_s", NULL, usage_cpu(u) };
	f[n++] = (struct log_field){ "maxrss_bytes", NULL, num_or_nan(u->maxrss_bytes) };
	if (u->cgroup) {
		f[n++] = (struct log_field){ "memory_peak_bytes", NULL, num_or_nan(u->cg_memory_peak) };
		f[n++] = (struct log_field){ "io_read_bytes", NULL, num_or_nan(u->cg_io_read_bytes) };
		f[n++] = (struct log_field){ "io_write_bytes", NULL, num_or_nan(u->cg_io_write_bytes) };
		f[n++] = (struct log_field){ "oom_kills", NULL, num_or_nan(u->cg_oom_kills) };
	}
	return n;
}

static void json_bytes(struct sbuf *b, const char *name, long long v)
{
	if (v < 0)
		sb_printf(b, ",\"%s\":null", name);
	else
		sb_printf(b, ",\"%s\":%lld", name, v);
}

void usage_json(const struct run_usage *u, struct sbuf *b)
{
	if (!u->measured) {
		sb_adds(b, ",\"cpu_s\":null,\"maxrss_bytes\":null");
		return;
	}
	sb_printf(b, ",\"cpu_s\":%.3f", usage_cpu(u));
	json_bytes(b, "maxrss_bytes", u->maxrss_bytes);
	if (!u->cgroup)
		return;
	json_bytes(b, "memory_peak_bytes", u->cg_memory_peak);
	json_bytes(b, "io_read_bytes", u->cg_io_read_bytes);
	json_bytes(b, "io_write_bytes", u->cg_io_write_bytes);
	json_bytes(b, "oom_kills", u->cg_oom_kills);
}

/* ---- a warm process, per job ---- */

/* The whole (small) file open at fd into buf, NUL-terminated, read from its start (procfs
 * and cgroupfs make it anew for each read at 0): its length, or -1. These files are made
 * whole by one show() and a read takes all of it that fits, so a read shorter than asked
 * is the end: no second read for the 0 that says so (half of the reads a job cost). */
static ssize_t read_small(int fd, char *buf, size_t n)
{
	if (fd < 0)
		return -1;
	ssize_t got = 0, r;
	while ((size_t)got < n - 1 &&
	       (r = pread(fd, buf + got, n - 1 - (size_t)got, (off_t)got)) != 0) {
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		got += r;
		if ((size_t)r < n - 1 - (size_t)(got - r))
			break;
	}
	buf[got] = '\0';
	return got;
}

/* utime + cutime and stime + cstime (fields 14-17 of /proc/<pid>/stat, after the command
 * in parentheses, which may itself hold spaces and parentheses): 0, or -1. */
static int proc_cpu(int fd, double *user, double *sys)
{
	char buf[1024];
	if (read_small(fd, buf, sizeof buf) <= 0)
		return -1;
	const char *p = strrchr(buf, ')');
	unsigned long long ut, st;
	long long cut, cst;
	/* After ")": state(3) ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
	 * cmajflt utime(14) stime cutime cstime. */
	if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld",
	                 &ut, &st, &cut, &cst) != 4)
		return -1;
	double tick = (double)sysconf(_SC_CLK_TCK);
	if (tick <= 0)
		tick = 100;
	*user = (double)(ut + (unsigned long long)(cut > 0 ? cut : 0)) / tick;
	*sys = (double)(st + (unsigned long long)(cst > 0 ? cst : 0)) / tick;
	return 0;
}

/* VmHWM in bytes from /proc/<pid>/status, -1 unknown. */
static long long proc_hwm(int fd)
{
	char buf[4096];
	if (read_small(fd, buf, sizeof buf) <= 0)
		return -1;
	const char *p = strstr(buf, "\nVmHWM:");
	long long kb;
	if (!p || sscanf(p + 7, " %lld", &kb) != 1)
		return -1;
	return kb * 1024;
}

static int open_proc(pid_t pid, const char *name, int flags)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
	return open(path, flags | O_CLOEXEC);
}

void usage_proc_init(struct usage_proc *p, pid_t pid)
{
	p->pid = pid;
	p->opened = 0;
	p->stat_fd = p->status_fd = p->refs_fd = -1;
}

/* Opened at the first mark, not at the spawn: by then the process has exec'd its command
 * (it said "ready"), so the files are those of the program for its whole life. */
static void proc_open(struct usage_proc *p)
{
	if (p->opened)
		return;
	p->opened = 1;
	p->stat_fd = open_proc(p->pid, "stat", O_RDONLY);
	p->status_fd = open_proc(p->pid, "status", O_RDONLY);
	p->refs_fd = open_proc(p->pid, "clear_refs", O_WRONLY);
}

/* Only what proc_open opened: a zeroed struct (a process that failed to start) holds
 * no descriptor, its zeros are not fd 0. */
void usage_proc_close(struct usage_proc *p)
{
	if (!p->opened)
		return;
	if (p->stat_fd >= 0)
		close(p->stat_fd);
	if (p->status_fd >= 0)
		close(p->status_fd);
	if (p->refs_fd >= 0)
		close(p->refs_fd);
	p->stat_fd = p->status_fd = p->refs_fd = -1;
	p->opened = 0;
}

void usage_proc_begin(struct usage_proc *p, struct usage_mark *m, int cpu)
{
	proc_open(p);
	/* "5": reset the peak resident set size to the current one (proc(5)). Best effort:
	 * the peak is then the process's since it started. */
	if (p->refs_fd >= 0 && pwrite(p->refs_fd, "5", 1, 0) < 0) {
		/* as said */
	}
	m->ok = !cpu || proc_cpu(p->stat_fd, &m->user_s, &m->sys_s) == 0;
	m->cpu = cpu;
}

void usage_proc_end(struct usage_proc *p, const struct usage_mark *m, struct run_usage *u,
                    int cpu)
{
	double user, sys;
	usage_none(u);
	if (!m->ok)
		return;
	if (cpu && m->cpu) {
		if (proc_cpu(p->stat_fd, &user, &sys) != 0)
			return;
		u->measured = 1;
		u->user_s = user > m->user_s ? user - m->user_s : 0;
		u->sys_s = sys > m->sys_s ? sys - m->sys_s : 0;
	}
	u->maxrss_bytes = proc_hwm(p->status_fd);
}

/* ---- a run's own cgroup ---- */

/* name in the cgroup dirfd into buf (NUL-terminated): its length, or -1. */
static ssize_t read_at(int dirfd, const char *name, char *buf, size_t n)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t got = pread(fd, buf, n - 1, 0);
	close(fd);
	if (got < 0)
		return -1;
	buf[got] = '\0';
	return got;
}

/* The value of "key N" lines in a flat-keyed file (cpu.stat, memory.events), -1 absent. */
static long long keyed(const char *text, const char *key)
{
	size_t k = strlen(key);
	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (strncmp(p, key, k) == 0 && p[k] == ' ')
			return strtoll(p + k + 1, NULL, 10);
	return -1;
}

/* io.stat: "MAJ:MIN rbytes=N wbytes=N …" per device; the sums. */
static void io_sums(const char *text, long long *r, long long *w)
{
	*r = *w = 0;
	for (const char *p = text; (p = strstr(p, "bytes=")) != NULL; p += 6) {
		if (p >= text + 1 && p[-1] == 'r')
			*r += strtoll(p + 6, NULL, 10);
		else if (p >= text + 1 && p[-1] == 'w')
			*w += strtoll(p + 6, NULL, 10);
	}
}

/*
 * The files of a controller that is not enabled in the jobs' subtree (io, memory) are
 * absent, and each look costs a failed openat() per run, twice: once one is found absent
 * (ENOENT), this process stops looking (the subtree's controllers are set at the start;
 * a restart looks again). Measured: the reads are the per-job cost of this file.
 */
enum { CG_IO, CG_EVENTS, CG_PEAK, CG_FILES };
static atomic_int cg_absent[CG_FILES];

static ssize_t read_cg(int dirfd, int which, const char *name, char *buf, size_t n)
{
	if (atomic_load_explicit(&cg_absent[which], memory_order_relaxed))
		return -1;
	ssize_t got = read_at(dirfd, name, buf, n);
	if (got < 0 && errno == ENOENT)
		atomic_store_explicit(&cg_absent[which], 1, memory_order_relaxed);
	return got;
}

static void cg_counters(int dirfd, int cpu_fd, struct usage_cg_mark *m)
{
	char buf[4096];
	m->user_us = m->sys_us = m->rbytes = m->wbytes = m->oom_kills = -1;
	if ((cpu_fd >= 0 ? read_small(cpu_fd, buf, sizeof buf)
	     : read_at(dirfd, "cpu.stat", buf, sizeof buf)) > 0) {
		m->user_us = keyed(buf, "user_usec");
		m->sys_us = keyed(buf, "system_usec");
	}
	if (read_cg(dirfd, CG_IO, "io.stat", buf, sizeof buf) >= 0)
		io_sums(buf, &m->rbytes, &m->wbytes);
	if (read_cg(dirfd, CG_EVENTS, "memory.events", buf, sizeof buf) > 0)
		m->oom_kills = keyed(buf, "oom_kill");
}

void usage_cg_begin(int dirfd, int cpu_fd, struct usage_cg_mark *m)
{
	cg_counters(dirfd, cpu_fd, m);
	m->peak_fd = -1;
	if (atomic_load_explicit(&cg_absent[CG_PEAK], memory_order_relaxed))
		return;
	m->peak_fd = openat(dirfd, "memory.peak", O_RDWR | O_CLOEXEC);
	if (m->peak_fd < 0 && errno == ENOENT)
		atomic_store_explicit(&cg_absent[CG_PEAK], 1, memory_order_relaxed);
	if (m->peak_fd >= 0 && write(m->peak_fd, "reset\n", 6) != 6) {
		close(m->peak_fd);          /* before 6.12: a peak since the cgroup was made */
		m->peak_fd = -1;
	}
}

static long long delta(long long now, long long then)
{
	return now < 0 || then < 0 ? -1 : now > then ? now - then : 0;
}

void usage_cg_end(int dirfd, int cpu_fd, struct usage_cg_mark *m, struct run_usage *u)
{
	struct usage_cg_mark e;
	cg_counters(dirfd, cpu_fd, &e);
	u->cgroup = 1;
	long long user = delta(e.user_us, m->user_us), sys = delta(e.sys_us, m->sys_us);
	if (user >= 0 && sys >= 0) {        /* everything that ran in it, escaped or not */
		u->measured = 1;
		u->user_s = (double)user / 1e6;
		u->sys_s = (double)sys / 1e6;
	}
	u->cg_io_read_bytes = delta(e.rbytes, m->rbytes);
	u->cg_io_write_bytes = delta(e.wbytes, m->wbytes);
	u->cg_oom_kills = delta(e.oom_kills, m->oom_kills);
	u->cg_memory_peak = -1;
	if (m->peak_fd >= 0) {
		char buf[64];
		ssize_t got = pread(m->peak_fd, buf, sizeof buf - 1, 0);
		if (got > 0) {
			buf[got] = '\0';
			u->cg_memory_peak = strtoll(buf, NULL, 10);
		}
		close(m->peak_fd);
		m->peak_fd = -1;
	}
}
