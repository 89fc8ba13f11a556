/* SPDX-License-Identifier: MIT */
/*
 * cgcaps.h: a handler's caps (memory_max, cpu_max, pids_max) enforced through cgroups, and
 * what the cgroup of a capped run measured (doc/design.md "Caps per handler"). cgcaps.c
 * says how each controller is found and why.
 *
 * Library code: the daemon, `cogworkerctl exec` and --check use it; no thread, no Redis.
 */
#ifndef COGWORKERD_CGCAPS_H
#define COGWORKERD_CGCAPS_H

#include <stddef.h>
#include "config.h"
#include "usage.h"

/* Where a cap's controller comes from on this host. */
enum cg_source { CG_NONE, CG_V2, CG_V1 };

/*
 * Where cap k's controller can be had (looked for once per process): CG_V1 with the
 * hierarchy's directory in where, CG_V2 with the cgroup v2 directory, or CG_NONE with why
 * not and how to delegate it.
 */
enum cg_source cgcaps_source(enum cap_kind k, char *where, size_t n);

/*
 * Each cap of c's handlers that this host can't enforce, reported as "<file>:<line>: handler
 * 'X': memory_max needs the memory controller, which …: <how to delegate it>". For
 * --check (an error), the start (exit 2) and a reload (rejected). Returns how many.
 */
int caps_check_conf(const struct conf *c, void (*report)(void *ctx, const char *problem),
                    void *ctx);

/*
 * After jobcg_init (the containment's subtree exists): each controller judged to be on
 * cgroup v2 is enabled for the jobs' cgroups (cgroup.subtree_control of the subtree, and of
 * its parent when delegated); one that can't be is no longer available, and the start's
 * second caps_check_conf refuses a cap that needs it. Returns 0.
 */
int cgcaps_v2_setup(void);
/*
 * Every run in a cgroup of its own (jobcg.h) on a host whose controllers are on v2: the
 * caps written into it, or "max" where caps (may be NULL) sets none. 0, or -1 with why in
 * err. A no-op where no controller is on v2.
 */
int cgcaps_v2_apply(int dirfd, const struct handler_caps *caps, char *err, size_t n);
/* Whether caps needs a group of the v1 pool (capgroup_take). */
int caps_need_v1(const struct handler_caps *caps);

/* Whether caps sets any cap. */
int caps_any(const struct handler_caps *caps);

/*
 * A cgroup set for one capped child, from a pool of this process's (reused: creating and
 * removing a cgroup costs tens of milliseconds). Taken before the spawn with the caps
 * written and the counters' baselines read; the child joins it through the descriptors
 * capgroup_join_fds gives (spawn.c writes "0" into each); given back once the child and its
 * group are gone.
 */
struct capgroup;
/* NULL with why in err when a cgroup can't be made or written. */
struct capgroup *capgroup_take(const struct handler_caps *caps, char *err, size_t n);
/* Its cgroup.procs descriptors (owned by g), up to max: how many. */
int capgroup_join_fds(const struct capgroup *g, int *fds, int max);
/* A new run begins in g (a warm process's next job): the peak and the counters restart. */
void capgroup_begin(struct capgroup *g);
/* What g measured since it was taken or last begun, into u's cgroup figures (usage.h:
 * the memory peak, the OOM kills, the I/O bytes) where the run's own cgroup v2 left them
 * unknown; u->cgroup is then set (its CPU stays what it was). */
void capgroup_usage(const struct capgroup *g, struct run_usage *u);
void capgroup_give(struct capgroup *g);

/* The cgroups of this process's pool removed (at exit), and those that dead processes of
 * this host left (at start; never one of a live process). */
void cgcaps_cleanup(void);
void cgcaps_sweep(void);

/* "256 MiB", "1 GiB", "512 KiB": v in the largest binary unit that divides unit_of exactly
 * (v itself rounded), as the out-of-memory message says a cap and a peak. */
void cgcaps_format_bytes(long long v, long long unit_of, char *out, size_t n);

#endif
