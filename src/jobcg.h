/* SPDX-License-Identifier: MIT */
/*
 * jobcg.h: containment (doc/design.md "Containment"): a cgroup v2 per job slot, so that
 * nothing a job starts outlives it, escaped processes included (setsid, double fork, a
 * changed process group, SIGTERM ignored). Where no cgroup can be had, the daemon keeps
 * the process group (pump.c's grandchild rule) and says so once.
 *
 * The layout: this daemon's jobs live in one subtree of its own, JOBCG_PREFIX<pid>.<start>
 * beside the daemon in the cgroup it was started in (under systemd with Delegate=yes the
 * daemon first moves itself into a leaf of its unit, JOBCG_SELF, so controllers can be
 * enabled below the unit). In that subtree: one cgroup per fetcher slot, reused from job
 * to job (a slot runs one job at a time: no mkdir/rmdir per job), one per warm process
 * and per on_death run. Nothing of the daemon is ever in the subtree, so one write to its
 * cgroup.kill ends every job's processes at once: the reaper's (reaper.c) when the daemon
 * died, the daemon's own at its stop, and a later daemon's start-up sweep for a subtree
 * whose daemon is gone.
 *
 * Thread safety: jobcg_init and jobcg_shutdown run alone (start, stop); everything else
 * touches only the struct jobcg it is given, or reads what init set.
 */
#ifndef COGWORKERD_JOBCG_H
#define COGWORKERD_JOBCG_H

#include <stddef.h>

#define JOBCG_PREFIX "cogworkerd."      /* a daemon's subtree: cogworkerd.<pid>.<start> */
#define JOBCG_SELF "daemon"             /* the daemon's own leaf, when delegated */
#define JOBCG_WAIT_SECS 5.0             /* longest wait for a killed cgroup to empty */

/* The conf's top-level "containment" (conf_settings.c reads the names). */
enum jobcg_mode {
	JOBCG_AUTO,             /* a cgroup where one can be had, else the process group */
	JOBCG_CGROUP,           /* a cgroup, or the daemon does not start (--check says why) */
	JOBCG_PGROUP,           /* the process group only, as before containment */
};

/*
 * Can a cgroup be had here? Looks, changes nothing (for --check): 1 with, in msg, the
 * cgroup the subtree would go in; or 0 with the reason ("no cgroup v2 mounted", "<dir>:
 * Permission denied (not root, ...)", ...).
 */
int jobcg_probe(char *msg, size_t len);

/*
 * At the daemon's start, before any thread and before the reaper's fork: find the cgroup
 * v2 mount and the daemon's own cgroup, sweep the subtrees of daemons no longer alive,
 * make this daemon's subtree. Logs the mechanism in force once. -1 with err only for
 * JOBCG_CGROUP where none can be had; otherwise 0 (falling back to process groups).
 */
int jobcg_init(enum jobcg_mode mode, char *err, size_t errlen);
int jobcg_enabled(void);                /* cgroups in force */
/* This daemon's subtree ("/sys/fs/cgroup/.../cogworkerd.<pid>.<start>"), NULL when off. */
const char *jobcg_root(void);
/* One line for the start-up log and --check: "cgroup v2, jobs in <dir>" or "process
 * group only: <why>". */
const char *jobcg_describe(void);
/* Under systemd's Delegate=yes: the daemon sits in its own leaf, so the unit's cgroup
 * may enable controllers (cgroup.subtree_control) for the subtree. */
int jobcg_delegated(void);

struct jobcg;

/* A cgroup named name in the subtree, made (or emptied, if it was there). NULL when
 * containment is off, or on failure (logged): the run then has its process group only. */
struct jobcg *jobcg_new(const char *name);
const char *jobcg_path(const struct jobcg *g);
/* A directory fd of the cgroup (O_RDONLY | O_DIRECTORY, CLOEXEC), for openat() of its
 * files (cpu.stat, memory.max, ...). Owned by g. */
int jobcg_dir_fd(const struct jobcg *g);
/* Its cpu.stat, open for reading from the start (pread at 0), kept for g's life: read
 * twice per run, an openat() each was most of what accounting cost a run. -1 none. */
int jobcg_cpu_stat_fd(struct jobcg *g);
/* Its cgroup.procs, open for writing (CLOEXEC): the child of a spawn writes "0" into it
 * between fork and exec (one write(2), async-signal-safe). Owned by g. */
int jobcg_procs_fd(const struct jobcg *g);
/* Anything left in it? 1, 0, or -1 when its cgroup.events can't be read. */
int jobcg_populated(const struct jobcg *g);
/* SIGKILL to everything in it (cgroup.kill) when it is populated: 1 if something was,
 * else 0. Does not wait. */
int jobcg_kill(struct jobcg *g);
/* After jobcg_kill: wait for it to be empty (cgroup.events "populated 0"), at most timeout
 * seconds: 0, or -1 (logged) when something is still in it then. At once 0 when no kill
 * was sent since it was last seen empty. */
int jobcg_wait_empty(struct jobcg *g, double timeout);
/* Both: what a job's end does. 0 when empty (at once or within timeout), else -1. */
int jobcg_kill_and_wait(struct jobcg *g, double timeout);
/* Kill, wait (JOBCG_WAIT_SECS), remove the cgroup and free g. NULL is a no-op. */
void jobcg_free(struct jobcg *g);

/* At the daemon's stop, after its threads: what is left of the subtree killed and the
 * subtree removed. */
void jobcg_shutdown(void);
/* In the reaper, once the daemon has died: the same, with no allocation and no log. */
void jobcg_reap(void);
/* Write text to file in the cgroup directory dirfd (one write, as the kernel wants a
 * control file written): 0, or -1 with errno. cgcaps.c writes its limits with it too. */
int jobcg_write_at(int dirfd, const char *file, const char *text);

#endif
