/* SPDX-License-Identifier: MIT */
/*
 * counters.h: this process's own counters, shared by every thread of the daemon and
 * linked into cogworkerctl too (the Redis layer counts reconnects), which never serves
 * them. Lock-free atomics (counters.c), so any thread may bump them anywhere:
 *
 *     metrics_inc(METRIC_ORPHANS_RECOVERED);
 *     metrics_add(METRIC_ORPHANS_RECOVERED, n);
 *     metrics_observe_run(seconds);            (the run-time histogram)
 *     metrics_observe_usage(cls, cpu, rss);    (what runs cost, per handler class)
 *
 * The daemon's endpoint (metrics.h) serves them.
 */
#ifndef COGWORKERD_COUNTERS_H
#define COGWORKERD_COUNTERS_H

#include <stdatomic.h>

enum metric {
	/* jobs by outcome: cogworkerd_jobs_total{outcome="..."} */
	METRIC_JOBS_SUCCEEDED,          /* handler exited 0 */
	METRIC_JOBS_RETRIED,            /* failed, filed into the retry set */
	METRIC_JOBS_DEAD,               /* failed, filed into the dead set (or unparseable) */
	METRIC_JOBS_DISCARDED,          /* failed with one of the handler's discard_exit_codes */
	METRIC_JOBS_INTERRUPTED,        /* stopped at shutdown, left for the requeue */
	METRIC_JOBS_EXPIRED,            /* past their deadline: buried or dropped unstarted */
	/* failures by kind (also counted in the outcomes above) */
	METRIC_HANDLER_TIMEOUTS,        /* the handler ran past its timeout */
	/* Redis */
	METRIC_REDIS_RECONNECTS,        /* a connection that had worked connected again */
	/* the scheduled poller (orphan recovery, KeyGuard) */
	METRIC_ORPHANS_RECOVERED,       /* jobs requeued from dead processes' in-progress lists */
	METRIC_KEYS_QUARANTINED,        /* wrong-typed keys moved out of the way */
	/* the ticker */
	METRIC_CRON_FIRED,              /* periodic slots claimed and pushed by this process */
	METRIC_CRON_SKIPPED,            /* slots not pushed: lost the claim, disabled, unique */
	/* warm processes (warm.c): started, ended badly, and retired by reason:
	 * cogworkerd_warm_recycles_total{reason="..."} */
	METRIC_WARM_STARTED,            /* spawned (whether or not they became ready) */
	METRIC_WARM_CRASHED,            /* died, timed out before ready or broke the protocol */
	METRIC_WARM_RECYCLED_JOBS,      /* served warm_max_jobs (less its jitter) */
	METRIC_WARM_RECYCLED_RSS,       /* over warm_max_rss after a job */
	METRIC_WARM_RECYCLED_AGE,       /* older than warm_max_age */
	METRIC_WARM_RECYCLED_IDLE,      /* idle for warm_idle_timeout */
	METRIC_WARM_RECYCLED_ASKED,     /* its "done" said "recycle":true */
	METRIC_WARM_RECYCLED_RELOAD,    /* its handler's command or settings changed */
	METRIC_WARM_RECYCLED_CANCEL,    /* its job was cancelled, timed out or aborted */
	/* prefetch (fetcher.c): jobs taken while a warm job ran, and those of them handed
	 * back to their queue because that job ran long */
	METRIC_PREFETCHED,
	METRIC_PREFETCH_RETURNED,
	METRIC__COUNT
};

extern atomic_ullong metrics_counters[METRIC__COUNT];

static inline void metrics_add(enum metric m, unsigned long long n)
{
	atomic_fetch_add_explicit(&metrics_counters[m], n, memory_order_relaxed);
}

static inline void metrics_inc(enum metric m)
{
	metrics_add(m, 1);
}

static inline unsigned long long metrics_get(enum metric m)
{
	return atomic_load_explicit(&metrics_counters[m], memory_order_relaxed);
}

/* Warm processes alive now (started, not yet reaped): the cogworkerd_warm_processes gauge. */
extern atomic_int warm_processes_live;

/* The run-time histogram of handler runs: upper bounds in seconds (+Inf implied). */
#define METRICS_RUN_BUCKETS 12
extern const double metrics_run_bounds[METRICS_RUN_BUCKETS];
void metrics_observe_run(double seconds);
/* A snapshot: cumulative counts per bound (Prometheus "le"), total count, sum (s). */
void metrics_run_snapshot(unsigned long long cumulative[METRICS_RUN_BUCKETS],
                          unsigned long long *count, double *sum);

/*
 * What runs cost, per handler class (usage.h): a histogram of CPU seconds and one of peak
 * resident bytes, cogworkerd_job_cpu_seconds{class} and cogworkerd_job_maxrss_bytes{class}.
 * The label is the class of the conf's handler block that ran the job ("*" for the
 * fallback), so the set is bounded by the conf; past METRICS_USAGE_CLASSES - 1 classes
 * (reloads may add some) the rest share the last series, METRICS_USAGE_OTHER. A class is
 * given its series on its first run and keeps it for the process's life.
 */
#define METRICS_USAGE_CLASSES 64
#define METRICS_USAGE_OTHER "_other"
#define METRICS_CPU_BUCKETS 8
#define METRICS_RSS_BUCKETS 8
extern const double metrics_cpu_bounds[METRICS_CPU_BUCKETS];
extern const double metrics_rss_bounds[METRICS_RSS_BUCKETS];
/* A run that started a process: cpu_s seconds, maxrss_bytes (< 0: unknown, not counted
 * in the peak's histogram). */
void metrics_observe_usage(const char *cls, double cpu_s, long long maxrss_bytes);
struct usage_snapshot {
	const char *cls;
	unsigned long long cpu[METRICS_CPU_BUCKETS], cpu_count;       /* cumulative */
	double cpu_sum;
	unsigned long long rss[METRICS_RSS_BUCKETS], rss_count;
	double rss_sum;
};
/* Series i (0 … METRICS_USAGE_CLASSES - 1) as now: 1, or 0 when that slot is unused. */
int metrics_usage_snapshot(int i, struct usage_snapshot *out);

#endif
