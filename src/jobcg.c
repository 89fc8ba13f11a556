/* SPDX-License-Identifier: MIT */
/*
 * jobcg.c: containment by cgroup v2 (jobcg.h; doc/design.md "Containment").
 *
 * Discovery: the cgroup v2 mount is /sys/fs/cgroup when that is cgroup2 (a pure v2 host,
 * systemd's default since Debian 11), else /sys/fs/cgroup/unified (the hybrid layout,
 * where v1 holds the controllers and v2 has none, but cgroup.kill and cgroup.events work
 * all the same, which is all containment needs). The daemon's own cgroup is the "0::"
 * line of /proc/self/cgroup. cgroup.kill needs Linux 5.14; writing needs root, or a
 * cgroup delegated to the daemon's user.
 *
 * Where the subtree goes: beside the daemon, JOBCG_PREFIX<pid>.<start> in the daemon's
 * cgroup (<start> is the process's start time in clock ticks, from /proc/<pid>/stat, so a
 * reused pid is not taken for the daemon that made the subtree). Under systemd with
 * Delegate=yes (systemd marks the unit's cgroup with the xattr trusted.delegate) the
 * daemon first moves into the leaf JOBCG_SELF of its unit: cgroup v2 lets a cgroup
 * enable controllers for its children only when it has no process of its own, and the
 * caps (memory_max, ...) need them. Run by hand as root it stays where it was started.
 *
 * A job's end: the pump (pump.c) writes cgroup.kill once the job's leader has exited
 * (after a timeout's, cancel's or abort's grace, or at once after a normal exit) when the
 * cgroup's cgroup.events says it is still populated; handler_run then waits for
 * "populated 0", woken by poll(POLLPRI) on that file, bounded by JOBCG_WAIT_SECS. The
 * common job leaves nothing behind, and costs one pread of cgroup.events here, plus the
 * child's one write to cgroup.procs (spawn.c).
 *
 * The daemon's death: the reaper (reaper.c) outlives it, and calls jobcg_reap(), which
 * kills the subtree and removes it. If the reaper died too (a kill -9 of both, an OOM
 * kill), the next daemon started in the same cgroup sweeps the subtree at its start;
 * under systemd, the unit's stop kills the whole unit cgroup.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "jobcg.h"
#include "log.h"
#include "util.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

#define JOBCG_POLL_MS 50        /* re-read cgroup.events at least this often while waiting */
#define JOBCG_DEPTH 8           /* cgroups a job may make below its own, removed at the end */

static struct {
	int enabled, delegated;
	char base[PATH_MAX];        /* the cgroup the daemon was started in */
	char root[PATH_MAX];        /* this daemon's subtree */
	char describe[PATH_MAX + 128];
} S;

struct jobcg {
	char *path;
	int dir, procs, events;
	int cpu_stat;               /* cpu.stat, opened at the first ask; -1 not yet or none */
	int killed;                 /* a kill was sent and its emptying not yet seen */
};

/* ---- small file helpers ---- */

int jobcg_write_at(int dirfd, const char *file, const char *s)
{
	int fd = openat(dirfd, file, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, s, strlen(s));
	int e = errno;
	close(fd);
	errno = e;
	return n == (ssize_t)strlen(s) ? 0 : -1;
}

/* "populated N" of a cgroup.events fd: 1, 0, or -1. */
static int events_populated(int fd)
{
	char buf[256];
	ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	const char *p = strstr(buf, "populated ");
	return p ? p[10] == '1' : -1;
}

/* Wait for "populated 0" on an events fd, at most timeout seconds: 0, or -1. */
static int events_wait_empty(int fd, double timeout)
{
	double until = mono_now() + timeout;
	for (;;) {
		int pop = events_populated(fd);
		if (pop == 0)
			return 0;
		double left = until - mono_now();
		if (left <= 0)
			return -1;
		int ms = (int)(left * 1000.0) + 1;
		struct pollfd p = { .fd = fd, .events = POLLPRI };
		poll(&p, 1, ms < JOBCG_POLL_MS ? ms : JOBCG_POLL_MS);
	}
}

/* The process's start time in clock ticks (field 22 of /proc/<pid>/stat), 0 if gone. */
static unsigned long long start_time(long pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%ld/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	/* Fields 3..21 after the comm, then the start time. */
	for (int field = 2; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

/* ---- removing a subtree (the sweep, the stop, the reaper) ---- */

/* Remove path's child cgroups depth first, then path; depth bounds a job's own nesting. */
static void remove_tree(const char *path, int depth)
{
	DIR *d = depth < JOBCG_DEPTH ? opendir(path) : NULL;
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		char sub[PATH_MAX];
		if (snprintf(sub, sizeof sub, "%s/%s", path, de->d_name) < (int)sizeof sub)
			remove_tree(sub, depth + 1);
	}
	if (d)
		closedir(d);
	rmdir(path);
}

/* Kill everything in the subtree at path, wait for it to be empty (bounded), remove it.
 * 0, or -1 when something is still there (then the cgroups are left for a later sweep). */
static int kill_tree(const char *path)
{
	int dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return errno == ENOENT ? 0 : -1;
	int events = openat(dir, "cgroup.events", O_RDONLY | O_CLOEXEC);
	int rc = 0;
	if (events >= 0 && events_populated(events) != 0) {
		jobcg_write_at(dir, "cgroup.kill", "1");
		rc = events_wait_empty(events, JOBCG_WAIT_SECS);
	}
	if (events >= 0)
		close(events);
	close(dir);
	if (rc == 0)
		remove_tree(path, 0);
	return rc;
}

/* The subtrees of daemons that are gone, in the cgroup we start in: killed, removed. */
static void sweep(void)
{
	DIR *d = opendir(S.base);
	struct dirent *de;
	size_t plen = strlen(JOBCG_PREFIX);
	while (d && (de = readdir(d))) {
		long pid;
		unsigned long long st;
		char rest;
		if (strncmp(de->d_name, JOBCG_PREFIX, plen) != 0 ||
		    sscanf(de->d_name + plen, "%ld.%llu%c", &pid, &st, &rest) != 2)
			continue;
		if (start_time(pid) == st)
			continue;               /* its daemon still runs */
		char path[PATH_MAX];
		if (snprintf(path, sizeof path, "%s/%s", S.base, de->d_name) >= (int)sizeof path)
			continue;
		if (kill_tree(path) == 0)
			log_info("containment: removed %s, left by a daemon that is gone (its jobs' "
			         "processes killed)", path);
		else
			log_warn("containment: %s, left by a daemon that is gone, is still populated "
			         "%.0f s after cgroup.kill; left for the next start", path,
			         JOBCG_WAIT_SECS);
	}
	if (d)
		closedir(d);
}

/* ---- discovery ---- */

static int v2_mount(char *out, size_t len)
{
	static const char *const cands[] = { "/sys/fs/cgroup", "/sys/fs/cgroup/unified" };
	for (size_t i = 0; i < sizeof cands / sizeof *cands; i++) {
		struct statfs sf;
		if (statfs(cands[i], &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC) {
			snprintf(out, len, "%s", cands[i]);
			return 0;
		}
	}
	return -1;
}

/* The "0::" line of /proc/self/cgroup: the path in the v2 hierarchy. */
static int own_cgroup(char *out, size_t len)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[PATH_MAX + 64];
	int rc = -1;
	while (f && fgets(line, sizeof line, f)) {
		if (strncmp(line, "0::", 3) != 0)
			continue;
		line[strcspn(line, "\n")] = '\0';
		rc = snprintf(out, len, "%s", line + 3) < (int)len ? 0 : -1;
		break;
	}
	if (f)
		fclose(f);
	return rc;
}

static int kernel_has_kill(void)
{
	struct utsname u;
	int major = 0, minor = 0;
	if (uname(&u) != 0 || sscanf(u.release, "%d.%d", &major, &minor) != 2)
		return 0;
	return major > 5 || (major == 5 && minor >= 14);
}

/* Fill base; 1 when a subtree can be made there, else 0 with why. */
static int discover(char *base, size_t blen, char *why, size_t wlen)
{
	char mnt[PATH_MAX], rel[PATH_MAX];
	if (v2_mount(mnt, sizeof mnt) != 0) {
		snprintf(why, wlen, "no cgroup v2 mounted at /sys/fs/cgroup or /sys/fs/cgroup/unified");
		return 0;
	}
	if (!kernel_has_kill()) {
		snprintf(why, wlen, "the kernel has no cgroup.kill (Linux 5.14 or later)");
		return 0;
	}
	if (own_cgroup(rel, sizeof rel) != 0) {
		snprintf(why, wlen, "no cgroup v2 entry in /proc/self/cgroup");
		return 0;
	}
	if ((size_t)snprintf(base, blen, "%s%s", mnt, strcmp(rel, "/") ? rel : "") >= blen) {
		snprintf(why, wlen, "cgroup path too long");
		return 0;
	}
	if (access(base, W_OK) != 0) {
		snprintf(why, wlen, "%s: %s%s", base, strerror(errno),
		         geteuid() ? " (not root, and the cgroup is not delegated to this user)" : "");
		return 0;
	}
	return 1;
}

int jobcg_probe(char *why, size_t len)
{
	char base[PATH_MAX];
	if (!discover(base, sizeof base, why, len))
		return 0;
	snprintf(why, len, "%s", base);
	return 1;
}

/*
 * systemd's Delegate=yes marks the unit's cgroup (systemd 251 and later) with an xattr in
 * the trusted namespace, which only root may read; to a service user it hands the
 * cgroup's ownership instead, which says the same.
 */
static int is_delegated(const char *dir)
{
	char v[8];
	ssize_t n = getxattr(dir, "trusted.delegate", v, sizeof v);
	if (n <= 0)
		n = getxattr(dir, "user.delegate", v, sizeof v);
	if (n > 0)
		return v[0] == '1';
	struct stat st;
	return geteuid() != 0 && stat(dir, &st) == 0 && st.st_uid == geteuid();
}

/* Move this process (no thread exists yet) into base's leaf JOBCG_SELF. */
static int move_self_to_leaf(void)
{
	char leaf[PATH_MAX + 16];
	snprintf(leaf, sizeof leaf, "%s/%s", S.base, JOBCG_SELF);
	if (mkdir(leaf, 0755) != 0 && errno != EEXIST)
		return -1;
	int dir = open(leaf, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return -1;
	int rc = jobcg_write_at(dir, "cgroup.procs", "0");
	close(dir);
	return rc;
}

static void fall_back(const char *why)
{
	if (snprintf(S.describe, sizeof S.describe, "process group only (%s): a process a job "
	             "moves out of its group can outlive it", why) >= (int)sizeof S.describe)
		S.describe[sizeof S.describe - 1] = '\0';
}

int jobcg_init(enum jobcg_mode mode, char *err, size_t errlen)
{
	char why[PATH_MAX + 64];
	memset(&S, 0, sizeof S);
	if (mode == JOBCG_PGROUP) {
		fall_back("containment = \"process-group\"");
		log_info("containment: %s", S.describe);
		return 0;
	}
	if (!discover(S.base, sizeof S.base, why, sizeof why)) {
		if (mode == JOBCG_CGROUP) {
			snprintf(err, errlen, "containment = \"cgroup\": no cgroup can be had: %s", why);
			return -1;
		}
		fall_back(why);
		log_warn("containment: %s", S.describe);
		return 0;
	}
	if (is_delegated(S.base)) {
		if (move_self_to_leaf() == 0)
			S.delegated = 1;
		else
			log_warn("containment: couldn't move into %s/%s (%s): no controllers for the "
			         "jobs", S.base, JOBCG_SELF, strerror(errno));
	}
	sweep();
	int long_path = snprintf(S.root, sizeof S.root, "%s/%s%ld.%llu", S.base, JOBCG_PREFIX,
	                         (long)getpid(), start_time((long)getpid())) >= (int)sizeof S.root;
	if (long_path)
		errno = ENAMETOOLONG;
	if (long_path || (mkdir(S.root, 0755) != 0 && errno != EEXIST)) {
		snprintf(why, sizeof why, "mkdir %s: %s", S.root, strerror(errno));
		S.root[0] = '\0';
		if (mode == JOBCG_CGROUP) {
			snprintf(err, errlen, "containment = \"cgroup\": %s", why);
			return -1;
		}
		fall_back(why);
		log_warn("containment: %s", S.describe);
		return 0;
	}
	S.enabled = 1;
	snprintf(S.describe, sizeof S.describe, "cgroup v2, jobs in %s%s", S.root,
	         S.delegated ? " (delegated by systemd)" : "");
	log_info("containment: %s", S.describe);
	return 0;
}

int jobcg_enabled(void)
{
	return S.enabled;
}

const char *jobcg_root(void)
{
	return S.enabled ? S.root : NULL;
}

const char *jobcg_describe(void)
{
	return S.describe[0] ? S.describe : "process group only (not set up)";
}

int jobcg_delegated(void)
{
	return S.delegated;
}

/* ---- one cgroup ---- */

static void jobcg_close(struct jobcg *g)
{
	if (g->dir >= 0)
		close(g->dir);
	if (g->procs >= 0)
		close(g->procs);
	if (g->events >= 0)
		close(g->events);
	if (g->cpu_stat >= 0)
		close(g->cpu_stat);
	free(g->path);
	free(g);
}

struct jobcg *jobcg_new(const char *name)
{
	if (!S.enabled)
		return NULL;
	struct jobcg *g = xcalloc(1, sizeof *g);
	g->path = xasprintf("%s/%s", S.root, name);
	g->procs = g->events = g->cpu_stat = -1;
	if (mkdir(g->path, 0755) != 0 && errno != EEXIST)
		g->dir = -1;
	else
		g->dir = open(g->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (g->dir >= 0) {
		g->procs = openat(g->dir, "cgroup.procs", O_WRONLY | O_CLOEXEC);
		g->events = openat(g->dir, "cgroup.events", O_RDONLY | O_CLOEXEC);
	}
	if (g->dir < 0 || g->procs < 0 || g->events < 0) {
		log_warn("containment: %s: %s; its jobs have their process group only", g->path,
		         strerror(errno));
		jobcg_close(g);
		return NULL;
	}
	jobcg_kill_and_wait(g, JOBCG_WAIT_SECS);        /* a leftover of the same name */
	return g;
}

const char *jobcg_path(const struct jobcg *g)
{
	return g->path;
}

int jobcg_dir_fd(const struct jobcg *g)
{
	return g->dir;
}

int jobcg_cpu_stat_fd(struct jobcg *g)
{
	if (g->cpu_stat < 0)
		g->cpu_stat = openat(g->dir, "cpu.stat", O_RDONLY | O_CLOEXEC);
	return g->cpu_stat;
}

int jobcg_procs_fd(const struct jobcg *g)
{
	return g->procs;
}

int jobcg_populated(const struct jobcg *g)
{
	return events_populated(g->events);
}

int jobcg_kill(struct jobcg *g)
{
	if (events_populated(g->events) == 0)
		return 0;
	if (jobcg_write_at(g->dir, "cgroup.kill", "1") != 0)
		log_warn("containment: %s/cgroup.kill: %s", g->path, strerror(errno));
	g->killed = 1;
	return 1;
}

/* Without a kill since it was last seen empty, it is empty: the pump's kill, which every
 * run ends with, found it so (one read of cgroup.events per job, not two). */
int jobcg_wait_empty(struct jobcg *g, double timeout)
{
	if (!g->killed)
		return 0;
	if (events_wait_empty(g->events, timeout) == 0) {
		g->killed = 0;
		return 0;
	}
	log_warn("containment: %s still populated %.1f s after cgroup.kill (a process stuck "
	         "in the kernel?)", g->path, timeout);
	return -1;
}

int jobcg_kill_and_wait(struct jobcg *g, double timeout)
{
	if (!jobcg_kill(g))
		return 0;
	return jobcg_wait_empty(g, timeout);
}

void jobcg_free(struct jobcg *g)
{
	if (!g)
		return;
	if (jobcg_kill_and_wait(g, JOBCG_WAIT_SECS) == 0)
		remove_tree(g->path, 0);
	jobcg_close(g);
}

/* ---- the end of the daemon ---- */

void jobcg_shutdown(void)
{
	if (!S.enabled)
		return;
	if (kill_tree(S.root) != 0)
		log_warn("containment: %s still populated %.0f s after cgroup.kill; the next start "
		         "removes it", S.root, JOBCG_WAIT_SECS);
	S.enabled = 0;
}

void jobcg_reap(void)
{
	if (S.enabled)
		kill_tree(S.root);
}
