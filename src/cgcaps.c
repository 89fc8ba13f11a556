/* SPDX-License-Identifier: MIT */
/*
 * cgcaps.c: a handler's caps (memory_max, cpu_max, pids_max) enforced by the kernel through
 * cgroups, and what a capped run's cgroup measured: its memory peak, its I/O bytes, and
 * whether the kernel killed something in it for memory (doc/design.md "Caps per handler").
 *
 * Where each controller comes from is decided once per process, from /proc/self/cgroup and
 * /proc/self/mountinfo:
 * - cgroup v2, when the cgroup the containment's subtree goes in (jobcg.h) offers the
 *   controller: cgcaps_v2_setup enables it for the subtree at the start, and every run in a
 *   cgroup of its own gets its caps (or "max") written there (cgcaps_v2_apply); the run's
 *   figures are then the accounting's (usage.c reads that cgroup);
 * - else a cgroup v1 hierarchy that has it, in the daemon's own cgroup there, when the daemon
 *   can write that directory (root, and not a read-only mount). A hybrid host (v1 hierarchies
 *   for memory, cpu, pids, with a v2 that has none of them) is the common case where this
 *   matters, and v1 is the one place there that can cap a job;
 * - else none, and a cap that needs it is a conf error (caps_check_conf): at --check, at the
 *   start and at a reload, naming the controller and how to delegate it. Never a job run
 *   uncapped that asked for a cap.
 *
 * v1: a pool of cgroups <own cgroup>/cogworkerd.<pidns>.<pid>/<n> in each hierarchy a cap
 * needs, taken for one child's life and given back after: making and removing a cgroup costs
 * 10 to 100 ms here (memory cgroups most), writing its limits microseconds. A group whose
 * cgroup still holds a process when given back (something escaped the job's process group)
 * is not reused. The child joins by writing "0" into each cgroup.procs, on descriptors opened
 * here, between its fork and exec (spawn.c): no path, no allocation in the child. The
 * pid-namespace inode in the name keeps the sweep of one daemon away from the groups of a
 * daemon it can't see (the v1 roots of pids and cpu are shared by a whole host).
 *
 * Per run (capgroup_begin): memory.max_usage_in_bytes written 0 restarts the peak; the OOM
 * kill count (memory.oom_control's oom_kill) and the I/O bytes (blkio, when that hierarchy
 * is there) are read as baselines and reported as differences. A run that ran out of memory
 * has oom_kills > 0: outcome.c says so in its error. Swap: memory.memsw.limit_in_bytes (when
 * swap accounting is on) gets the same limit, so past memory_max a job is killed, not swapped.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgcaps.h"
#include "jobcg.h"
#include "util.h"

/* The controllers: the caps' three (in enum cap_kind order), then the I/O accounting's. */
enum { H_MEMORY = CAP_MEMORY, H_CPU = CAP_CPU, H_PIDS = CAP_PIDS, H_IO, NHIER };
static const char *const v1_names[NHIER] = { "memory", "cpu", "pids", "blkio" };
static const char *const v2_names[NHIER] = { "memory", "cpu", "pids", "io" };

struct source {
	enum cg_source how;
	char dir[PATH_MAX];             /* v1: the daemon's cgroup in the hierarchy; v2: its */
	char why[2 * PATH_MAX];         /* CG_NONE: why not */
};

static struct source sources[NHIER];
static char pool_name[64];          /* cogworkerd.<pidns>.<pid> */
static pthread_once_t found_once = PTHREAD_ONCE_INIT;

/* ---------------------------------------------------------------------------------------
 * Small file helpers
 * ------------------------------------------------------------------------------------- */

/* The directory standing for /proc/self in discovery: the test hook
 * COGWORKERD_TEST_PROC_SELF (a directory with `cgroup` and `mountinfo` files describing a
 * host) lets a test show the daemon a host without a controller. */
static const char *proc_self(void)
{
	const char *t = getenv("COGWORKERD_TEST_PROC_SELF");
	return t && *t ? t : "/proc/self";
}

static void close_if_open(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static int write_ll(int dirfd, const char *file, long long v)
{
	char text[32];
	snprintf(text, sizeof text, "%lld", v);
	return jobcg_write_at(dirfd, file, text);
}

/* A small cgroup file's text into buf (NUL-terminated, maybe empty): 0, or -1. */
static int read_small(int dirfd, const char *file, char *buf, size_t size)
{
	int fd = openat(dirfd, file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = 0;
	return 0;
}

/* The number after `key` (a line "key N"), or -1. */
static long long read_keyed(int dirfd, const char *file, const char *key)
{
	char buf[4096];
	if (read_small(dirfd, file, buf, sizeof buf) != 0)
		return -1;
	size_t klen = strlen(key);
	for (char *p = buf; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (!strncmp(p, key, klen) && p[klen] == ' ')
			return strtoll(p + klen + 1, NULL, 10);
	return -1;
}

static long long read_ll(int dirfd, const char *file)
{
	char buf[64];
	return read_small(dirfd, file, buf, sizeof buf) == 0 && buf[0] ? strtoll(buf, NULL, 10)
	                                                               : -1;
}

/* ---------------------------------------------------------------------------------------
 * Discovery
 * ------------------------------------------------------------------------------------- */

/* Whether the comma-separated list has word. */
static int has_word(const char *list, const char *word)
{
	size_t n = strlen(word);
	for (const char *p = list; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (!strncmp(p, word, n) && (p[n] == ',' || p[n] == 0 || isspace((unsigned char)p[n])))
			return 1;
	return 0;
}

/* The mount of the v1 hierarchy with controller name (or of cgroup2 when name is NULL):
 * its mount point and the cgroup path it shows (its root). 0, or -1. */
static int find_mount(const char *mountinfo, const char *name, char *point, size_t np,
                      char *root, size_t nr)
{
	for (const char *l = mountinfo; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		char r[PATH_MAX], mp[PATH_MAX], type[32], opts[512];
		const char *dash = strstr(l, " - ");
		const char *eol = strchrnul(l, '\n');
		if (!dash || dash > eol || sscanf(l, "%*s %*s %*s %4095s %4095s", r, mp) != 2 ||
		    sscanf(dash + 3, "%31s %*s %511s", type, opts) != 2)
			continue;
		if (name ? strcmp(type, "cgroup") != 0 || !has_word(opts, name)
		         : strcmp(type, "cgroup2") != 0)
			continue;
		snprintf(point, np, "%s", mp);
		snprintf(root, nr, "%s", r);
		return 0;
	}
	return -1;
}

/* This process's cgroup path in the hierarchy with controller name (NULL: v2's "0::"). */
static int own_path(const char *cgroup, const char *name, char *out, size_t n)
{
	for (const char *l = cgroup; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		const char *c1 = strchr(l, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		const char *eol = strchrnul(l, '\n');
		if (!c2 || c2 > eol)
			continue;
		char ctrls[256];
		snprintf(ctrls, sizeof ctrls, "%.*s", (int)(c2 - c1 - 1), c1 + 1);
		if (name ? !has_word(ctrls, name) : (ctrls[0] || strncmp(l, "0:", 2) != 0))
			continue;
		snprintf(out, n, "%.*s", (int)(eol - c2 - 1), c2 + 1);
		return 0;
	}
	return -1;
}

/* mount point + (path less the mount's root). 0, or -1 when too long. */
static int join_path(char *out, size_t n, const char *point, const char *root,
                      const char *path)
{
	size_t rl = strcmp(root, "/") ? strlen(root) : 0;
	if (rl && !strncmp(path, root, rl))
		path += rl;
	int w = snprintf(out, n, "%s%s%s", point, *path == '/' || !*path ? "" : "/",
	                 strcmp(path, "/") ? path : "");
	return w < 0 || (size_t)w >= n ? -1 : 0;
}

static void find_v1(struct source *s, int k, const char *cgroup, const char *mountinfo)
{
	char point[PATH_MAX], root[PATH_MAX], path[PATH_MAX];
	if (find_mount(mountinfo, v1_names[k], point, sizeof point, root, sizeof root) != 0 ||
	    own_path(cgroup, v1_names[k], path, sizeof path) != 0) {
		snprintf(s->why, sizeof s->why, "neither cgroup v2 nor a cgroup v1 hierarchy of this "
		         "host offers it");
		return;
	}
	if (join_path(s->dir, sizeof s->dir, point, root, path) != 0) {
		snprintf(s->why, sizeof s->why, "its cgroup's path is too long");
		return;
	}
	if (access(s->dir, W_OK) != 0) {
		int e = errno;
		snprintf(s->why, sizeof s->why, "its cgroup v1 hierarchy (%s) can't be written by "
		         "uid %u (%s): a cap there needs the daemon to run as root", s->dir,
		         (unsigned)geteuid(), strerror(e));
		return;
	}
	s->how = CG_V1;
}

/* Whether cgroup v2 has controller k in the daemon's own cgroup (for the message only:
 * caps on v2 go through the per-job cgroups, see find_v2). */
static int on_v2(int k, const char *cgroup, const char *mountinfo, char *dir, size_t n)
{
	char point[PATH_MAX], root[PATH_MAX], path[PATH_MAX], file[PATH_MAX + 32];
	if (find_mount(mountinfo, NULL, point, sizeof point, root, sizeof root) != 0 ||
	    own_path(cgroup, NULL, path, sizeof path) != 0 ||
	    join_path(dir, n, point, root, path) != 0)
		return 0;
	snprintf(file, sizeof file, "%s/cgroup.controllers", dir);
	char *list = file_text(file, NULL);
	int has = 0;
	for (char *w = list ? strtok(list, " \n") : NULL; w && !has; w = strtok(NULL, " \n"))
		has = strcmp(w, v2_names[k]) == 0;
	free(list);
	return has;
}

/* Whether controller k is listed in dir's file (cgroup.controllers, subtree_control). */
static int listed(const char *dir, const char *file, int k)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	char *list = file_text(path, NULL);
	int has = 0;
	for (char *w = list ? strtok(list, " \n") : NULL; w && !has; w = strtok(NULL, " \n"))
		has = strcmp(w, v2_names[k]) == 0;
	free(list);
	return has;
}

/*
 * Before the containment's subtree exists (--check, and the start's first look): cgroup v2
 * will do for k when the cgroup the subtree goes in (jobcg_probe) offers k to its children.
 * cgcaps_v2_setup makes sure of it once the subtree is there.
 */
static int v2_offered(int k, char *dir, size_t n)
{
	if (getenv("COGWORKERD_TEST_PROC_SELF") || !jobcg_probe(dir, n))
		return 0;               /* the test hook shows a host without v2 */
	return listed(dir, "cgroup.controllers", k);
}

static void discover(void)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/cgroup", proc_self());
	char *cgroup = file_text(path, NULL);
	snprintf(path, sizeof path, "%s/mountinfo", proc_self());
	char *mountinfo = file_text(path, NULL);
	struct stat ns;
	snprintf(pool_name, sizeof pool_name, "cogworkerd.%lu.%d",
	         stat("/proc/self/ns/pid", &ns) == 0 ? (unsigned long)ns.st_ino : 0UL,
	         (int)getpid());
	for (int k = 0; k < NHIER; k++) {
		struct source *s = &sources[k];
		s->how = CG_NONE;
		if (!cgroup || !mountinfo) {
			snprintf(s->why, sizeof s->why, "%s can't be read", cgroup ? "mountinfo" :
			         "/proc/self/cgroup");
			continue;
		}
		if (v2_offered(k, s->dir, sizeof s->dir)) {
			s->how = CG_V2;
			continue;
		}
		find_v1(s, k, cgroup, mountinfo);
		char v2dir[PATH_MAX];
		if (s->how == CG_NONE && on_v2(k, cgroup, mountinfo, v2dir, sizeof v2dir))
			snprintf(s->why, sizeof s->why, "cgroup v2 has it in %s, but the cgroup the "
			         "jobs' subtree would go in does not offer it (not delegated)", v2dir);
	}
	free(cgroup);
	free(mountinfo);
}

static void found(void)
{
	pthread_once(&found_once, discover);
}

int cgcaps_v2_setup(void)
{
	found();
	const char *root = jobcg_root();
	for (int k = 0; k < NHIER; k++) {
		struct source *s = &sources[k];
		if (s->how != CG_V2)
			continue;
		char parent[PATH_MAX], plus[16];
		snprintf(parent, sizeof parent, "%s", root ? root : "");
		if (strrchr(parent, '/'))
			*strrchr(parent, '/') = 0;
		snprintf(plus, sizeof plus, "+%s", v2_names[k]);
		int dfd = root ? open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
		int rfd = root ? open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
		int ok = rfd >= 0 && (listed(root, "cgroup.controllers", k) ||
		                      (dfd >= 0 && jobcg_write_at(dfd, "cgroup.subtree_control", plus) == 0))
		         && jobcg_write_at(rfd, "cgroup.subtree_control", plus) == 0;
		int e = errno;
		close_if_open(&dfd);
		close_if_open(&rfd);
		if (ok) {
			snprintf(s->dir, sizeof s->dir, "%s", root);
			continue;
		}
		s->how = CG_NONE;
		snprintf(s->why, sizeof s->why, "cgroup v2 offers it, but it could not be enabled "
		         "for the jobs' cgroups in %s (%s)", root ? root : "(containment off)",
		         root ? strerror(e) : "containment = \"process-group\"");
	}
	return 0;
}

/* The caps written into a v2 cgroup (dirfd), each controller on v2 set: the cap, or "max"
 * (the slot's previous run may have had another handler's). 0, or -1 with errno and the
 * file in *file. */
static int v2_write(int dirfd, const struct handler_caps *caps, const char **file)
{
	long long m[NCAPS] = { 0 };
	if (caps)
		memcpy(m, caps->max, sizeof m);
	char t[48];
	if (sources[H_MEMORY].how == CG_V2) {
		if (m[CAP_MEMORY] > 0)
			snprintf(t, sizeof t, "%lld", m[CAP_MEMORY]);
		else
			snprintf(t, sizeof t, "max");
		if (jobcg_write_at(dirfd, *file = "memory.max", t) != 0)
			return -1;
		/* Past the cap killed, not swapped, and the whole job with it. Best effort: no
		 * swap accounting, an older kernel. */
		jobcg_write_at(dirfd, "memory.swap.max", m[CAP_MEMORY] > 0 ? "0" : "max");
		jobcg_write_at(dirfd, "memory.oom.group", m[CAP_MEMORY] > 0 ? "1" : "0");
	}
	if (sources[H_CPU].how == CG_V2) {
		if (m[CAP_CPU] > 0)
			snprintf(t, sizeof t, "%lld %d", m[CAP_CPU], CAP_CPU_PERIOD_US);
		else
			snprintf(t, sizeof t, "max %d", CAP_CPU_PERIOD_US);
		if (jobcg_write_at(dirfd, *file = "cpu.max", t) != 0)
			return -1;
	}
	if (sources[H_PIDS].how == CG_V2) {
		if (m[CAP_PIDS] > 0)
			snprintf(t, sizeof t, "%lld", m[CAP_PIDS]);
		else
			snprintf(t, sizeof t, "max");
		if (jobcg_write_at(dirfd, *file = "pids.max", t) != 0)
			return -1;
	}
	return 0;
}

int cgcaps_v2_apply(int dirfd, const struct handler_caps *caps, char *err, size_t n)
{
	found();
	int any = 0;
	for (int k = 0; k < NCAPS; k++)
		any |= sources[k].how == CG_V2;
	if (!any)
		return 0;
	const char *file = "?";
	if (dirfd < 0) {
		if (caps && caps_any(caps)) {
			snprintf(err, n, "the caps' controllers are on cgroup v2, and this run has no "
			         "cgroup of its own");
			return -1;
		}
		return 0;
	}
	if (v2_write(dirfd, caps, &file) != 0) {
		snprintf(err, n, "%s: %s", file, strerror(errno));
		return -1;
	}
	return 0;
}

enum cg_source cgcaps_source(enum cap_kind k, char *where, size_t n)
{
	found();
	const struct source *s = &sources[k];
	snprintf(where, n, "%s", s->how == CG_NONE ? s->why : s->dir);
	return s->how;
}

int caps_need_v1(const struct handler_caps *caps)
{
	found();
	for (int k = 0; k < NCAPS; k++)
		if (caps->max[k] > 0 && sources[k].how != CG_V2)
			return 1;
	return 0;
}

int caps_any(const struct handler_caps *caps)
{
	for (int k = 0; k < NCAPS; k++)
		if (caps->max[k] > 0)
			return 1;
	return 0;
}

int caps_check_conf(const struct conf *c, void (*report)(void *ctx, const char *problem),
                    void *ctx)
{
	int bad = 0;
	for (int i = 0; i < c->nhandlers; i++) {
		const struct handler *h = &c->handlers[i];
		for (int k = 0; k < NCAPS; k++) {
			char why[2 * PATH_MAX];
			if (h->caps.max[k] <= 0 || cgcaps_source(k, why, sizeof why) != CG_NONE)
				continue;
			char *line = xasprintf("%s: handler '%s': %s needs the %s controller, but %s; "
			                       "delegate it to the daemon: under systemd, Delegate=%s in "
			                       "a drop-in (systemctl edit cogworkerd), or run it as "
			                       "root (doc/operating.md \"Isolation and accounting\")",
			                       h->caps.where[k] ? h->caps.where[k] : "(conf)",
			                       h->class_name, conf_cap_name(k), v1_names[k], why,
			                       v2_names[k]);
			report(ctx, line);
			free(line);
			bad++;
		}
	}
	return bad;
}

/* ---------------------------------------------------------------------------------------
 * The pool of v1 groups
 * ------------------------------------------------------------------------------------- */

struct capgroup {
	struct capgroup *next;          /* in the free list, or in every */
	struct capgroup *all_next;
	int n;                          /* its number: the directory's name */
	int dirfd[NHIER];               /* each hierarchy's cgroup of it, or -1 */
	int procs[NHIER];               /* its cgroup.procs, for the child; or -1 */
	int joined[NHIER];              /* the current child joins it */
	long long oom_base, io_base[2];
	int broken;                     /* never reused */
};

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct capgroup *free_groups, *all_groups;
static int next_group;

/* The pool's directory in hierarchy k (made when missing): an fd, or -1. Fetchers take
 * groups at once: the first of them makes it, under the lock. */
static int pool_dir(int k)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static int fds[NHIER] = { -1, -1, -1, -1 };
	pthread_mutex_lock(&lock);
	if (fds[k] < 0) {
		char path[PATH_MAX + 64];
		snprintf(path, sizeof path, "%s/%s", sources[k].dir, pool_name);
		if (mkdir(path, 0755) == 0 || errno == EEXIST)
			fds[k] = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	}
	int fd = fds[k];
	pthread_mutex_unlock(&lock);
	return fd;
}

/* g's cgroup in hierarchy k, made when it has none yet. 0, or -1 with errno. */
static int group_dir(struct capgroup *g, int k)
{
	if (g->dirfd[k] >= 0)
		return 0;
	int base = pool_dir(k);
	char name[16];
	snprintf(name, sizeof name, "%d", g->n);
	if (base < 0 || (mkdirat(base, name, 0755) != 0 && errno != EEXIST))
		return -1;
	g->dirfd[k] = openat(base, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (g->dirfd[k] < 0)
		return -1;
	g->procs[k] = openat(g->dirfd[k], "cgroup.procs", O_WRONLY | O_CLOEXEC);
	if (g->procs[k] < 0)
		return -1;
	if (k == H_CPU)
		write_ll(g->dirfd[k], "cpu.cfs_period_us", CAP_CPU_PERIOD_US);
	return 0;
}

static struct capgroup *group_new(void)
{
	struct capgroup *g = xcalloc(1, sizeof *g);
	for (int k = 0; k < NHIER; k++)
		g->dirfd[k] = g->procs[k] = -1;
	g->n = ++next_group;
	g->all_next = all_groups;
	all_groups = g;
	return g;
}

/* Cap k of caps written into g's cgroup. 0, or -1 with errno. */
static int write_cap(struct capgroup *g, int k, long long v)
{
	int d = g->dirfd[k];
	switch (k) {
	case H_MEMORY:
		/* memsw >= limit at every step: memsw opened up, the limit, memsw down to it. */
		jobcg_write_at(d, "memory.memsw.limit_in_bytes", "-1");
		if (write_ll(d, "memory.limit_in_bytes", v) != 0)
			return -1;
		write_ll(d, "memory.memsw.limit_in_bytes", v);
		return 0;
	case H_CPU:
		return write_ll(d, "cpu.cfs_quota_us", v);
	case H_PIDS:
		return write_ll(d, "pids.max", v);
	}
	return 0;
}

/* The bytes read and written (blkio's "Total" of io_service_bytes per op), or -1. */
static int read_io(int dirfd, long long *rd, long long *wr)
{
	char buf[16384];
	*rd = *wr = 0;
	if (read_small(dirfd, "blkio.throttle.io_service_bytes_recursive", buf, sizeof buf) != 0)
		return -1;
	for (char *p = buf; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		char dev[64], op[16];
		long long v;
		if (sscanf(p, "%63s %15s %lld", dev, op, &v) != 3)
			continue;
		if (!strcmp(op, "Read"))
			*rd += v;
		else if (!strcmp(op, "Write"))
			*wr += v;
	}
	return 0;
}

void capgroup_begin(struct capgroup *g)
{
	if (g->joined[H_MEMORY]) {
		jobcg_write_at(g->dirfd[H_MEMORY], "memory.max_usage_in_bytes", "0");
		g->oom_base = read_keyed(g->dirfd[H_MEMORY], "memory.oom_control", "oom_kill");
	}
	if (g->joined[H_IO] && read_io(g->dirfd[H_IO], &g->io_base[0], &g->io_base[1]) != 0)
		g->joined[H_IO] = 0;
}

struct capgroup *capgroup_take(const struct handler_caps *caps, char *err, size_t n)
{
	found();
	pthread_mutex_lock(&pool_lock);
	struct capgroup *g = free_groups;
	if (g)
		free_groups = g->next;
	else
		g = group_new();
	pthread_mutex_unlock(&pool_lock);
	memset(g->joined, 0, sizeof g->joined);
	for (int k = 0; k < NCAPS; k++) {
		if (caps->max[k] <= 0 || sources[k].how == CG_V2)
			continue;           /* v2: written into the run's own cgroup (cgcaps_v2_apply) */
		if (sources[k].how != CG_V1) {
			snprintf(err, n, "%s: the %s controller is not available (%s)", conf_cap_name(k),
			         v1_names[k], sources[k].why);
			capgroup_give(g);
			return NULL;
		}
		if (group_dir(g, k) != 0 || write_cap(g, k, caps->max[k]) != 0) {
			snprintf(err, n, "%s: cgroup %s/%s/%d: %s", conf_cap_name(k), sources[k].dir,
			         pool_name, g->n, strerror(errno));
			g->broken = 1;
			capgroup_give(g);
			return NULL;
		}
		g->joined[k] = 1;
	}
	/* The I/O a memory-capped run did, where blkio is there to count it. */
	if (g->joined[H_MEMORY] && sources[H_IO].how == CG_V1 && group_dir(g, H_IO) == 0)
		g->joined[H_IO] = 1;
	capgroup_begin(g);
	return g;
}

int capgroup_join_fds(const struct capgroup *g, int *fds, int max)
{
	int n = 0;
	for (int k = 0; k < NHIER && n < max; k++)
		if (g->joined[k] && g->procs[k] >= 0)
			fds[n++] = g->procs[k];
	return n;
}

void capgroup_usage(const struct capgroup *g, struct run_usage *u)
{
	if (!g->joined[H_MEMORY] && !g->joined[H_IO])
		return;
	if (!u->cgroup) {
		u->cgroup = 1;
		u->cg_memory_peak = u->cg_oom_kills = -1;
		u->cg_io_read_bytes = u->cg_io_write_bytes = -1;
	}
	if (g->joined[H_MEMORY]) {
		long long peak = read_ll(g->dirfd[H_MEMORY], "memory.max_usage_in_bytes");
		long long ooms = read_keyed(g->dirfd[H_MEMORY], "memory.oom_control", "oom_kill");
		if (peak >= 0 && u->cg_memory_peak < 0)
			u->cg_memory_peak = peak;
		if (ooms >= 0 && g->oom_base >= 0 && u->cg_oom_kills < 0)
			u->cg_oom_kills = ooms - g->oom_base;
	}
	long long rd, wr;
	if (g->joined[H_IO] && u->cg_io_read_bytes < 0 && read_io(g->dirfd[H_IO], &rd, &wr) == 0) {
		u->cg_io_read_bytes = rd - g->io_base[0];
		u->cg_io_write_bytes = wr - g->io_base[1];
	}
}

/* Whether g's cgroups are empty of processes (a reused group must start empty). */
static int group_empty(const struct capgroup *g)
{
	for (int k = 0; k < NHIER; k++) {
		char buf[16];
		int fd = g->dirfd[k] >= 0 ? openat(g->dirfd[k], "cgroup.procs", O_RDONLY | O_CLOEXEC)
		                          : -1;
		if (fd < 0)
			continue;
		ssize_t n = read(fd, buf, sizeof buf);
		close(fd);
		if (n != 0)
			return 0;
	}
	return 1;
}

void capgroup_give(struct capgroup *g)
{
	if (!g)
		return;
	if (!g->broken && !group_empty(g))
		g->broken = 1;
	/* The page cache the run left charged to it would count in the next run's peak. */
	if (!g->broken && g->joined[H_MEMORY])
		jobcg_write_at(g->dirfd[H_MEMORY], "memory.force_empty", "0");
	memset(g->joined, 0, sizeof g->joined);
	if (g->broken)
		return;                 /* kept out of the pool; cgcaps_cleanup tries it at exit */
	pthread_mutex_lock(&pool_lock);
	g->next = free_groups;
	free_groups = g;
	pthread_mutex_unlock(&pool_lock);
}

/* ---------------------------------------------------------------------------------------
 * Cleaning up: ours at exit, dead processes' at start
 * ------------------------------------------------------------------------------------- */

/* Remove the pool directory dir (its numbered cgroups, then itself); what still holds a
 * process stays (rmdir refuses it). */
static void remove_pool(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)))
		if (isdigit((unsigned char)e->d_name[0]))
			unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR);
	closedir(d);
	rmdir(dir);
}

void cgcaps_cleanup(void)
{
	if (!pool_name[0])
		return;
	pthread_mutex_lock(&pool_lock);
	for (struct capgroup *g = all_groups; g; g = g->all_next)
		for (int k = 0; k < NHIER; k++) {
			close_if_open(&g->procs[k]);
			close_if_open(&g->dirfd[k]);
		}
	for (int k = 0; k < NHIER; k++) {
		char path[PATH_MAX + 64];
		if (sources[k].how != CG_V1)
			continue;
		snprintf(path, sizeof path, "%s/%s", sources[k].dir, pool_name);
		remove_pool(path);
	}
	pthread_mutex_unlock(&pool_lock);
}

void cgcaps_sweep(void)
{
	found();
	const char *mine = strchr(pool_name, '.') + 1;        /* "<pidns>.<pid>" */
	size_t nslen = (size_t)(strchr(mine, '.') - mine);
	for (int k = 0; k < NHIER; k++) {
		if (sources[k].how != CG_V1)
			continue;
		DIR *d = opendir(sources[k].dir);
		if (!d)
			continue;
		struct dirent *e;
		while ((e = readdir(d))) {
			const char *ns = e->d_name + strlen("cogworkerd.");
			if (strncmp(e->d_name, "cogworkerd.", strlen("cogworkerd.")) != 0 ||
			    strncmp(ns, mine, nslen) != 0 || ns[nslen] != '.')
				continue;
			int pid = atoi(ns + nslen + 1);
			if (pid <= 0 || pid == (int)getpid() || (kill(pid, 0) != 0 && errno == EPERM) ||
			    kill(pid, 0) == 0)
				continue;               /* ours, or a live process's */
			char path[PATH_MAX + 300];
			snprintf(path, sizeof path, "%s/%s", sources[k].dir, e->d_name);
			remove_pool(path);
		}
		closedir(d);
	}
}

void cgcaps_format_bytes(long long v, long long unit_of, char *out, size_t n)
{
	static const char *const units[] = { "bytes", "KiB", "MiB", "GiB", "TiB" };
	int u = 0;
	long long div = 1;
	while (u < 4 && unit_of % (div * 1024) == 0 && unit_of >= div * 1024) {
		div *= 1024;
		u++;
	}
	snprintf(out, n, "%lld %s", (v + div / 2) / div, units[u]);
}
