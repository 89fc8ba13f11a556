/* SPDX-License-Identifier: MIT */
/*
 * counters.c: storage of this process's own counters (counters.h). Lock-free: every update
 * is one relaxed atomic add, so a counter can be bumped from any thread, in any path.
 * Linked into cogworkerctl too (the Redis layer counts reconnects), which never serves them.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "counters.h"

atomic_ullong metrics_counters[METRIC__COUNT];
atomic_int warm_processes_live;

/* From a fast no-op to a long batch job. */
const double metrics_run_bounds[METRICS_RUN_BUCKETS] = {
	0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600,
};

static atomic_ullong run_buckets[METRICS_RUN_BUCKETS + 1];     /* last: above every bound */
static atomic_ullong run_count;
static atomic_ullong run_sum_us;                                /* microseconds */

void metrics_observe_run(double seconds)
{
	if (!(seconds >= 0))
		seconds = 0;
	int i = 0;
	while (i < METRICS_RUN_BUCKETS && seconds > metrics_run_bounds[i])
		i++;
	atomic_fetch_add_explicit(&run_buckets[i], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&run_sum_us, (unsigned long long)(seconds * 1e6 + 0.5),
	                          memory_order_relaxed);
	atomic_fetch_add_explicit(&run_count, 1, memory_order_relaxed);
}

void metrics_run_snapshot(unsigned long long cumulative[METRICS_RUN_BUCKETS],
                          unsigned long long *count, double *sum)
{
	unsigned long long acc = 0;
	for (int i = 0; i < METRICS_RUN_BUCKETS; i++) {
		acc += atomic_load_explicit(&run_buckets[i], memory_order_relaxed);
		cumulative[i] = acc;
	}
	acc += atomic_load_explicit(&run_buckets[METRICS_RUN_BUCKETS], memory_order_relaxed);
	/* The count is at least every bucket's sum, so +Inf >= every "le" bucket even while
	 * observations land during the snapshot. */
	unsigned long long n = atomic_load_explicit(&run_count, memory_order_relaxed);
	*count = n > acc ? n : acc;
	*sum = (double)atomic_load_explicit(&run_sum_us, memory_order_relaxed) / 1e6;
}

/* ---- what runs cost, per handler class ---- */

/* From a no-op to a long batch job; from a shell script to a large JVM. */
const double metrics_cpu_bounds[METRICS_CPU_BUCKETS] = {
	0.01, 0.1, 0.5, 1, 5, 30, 300, 3600,
};
const double metrics_rss_bounds[METRICS_RSS_BUCKETS] = {
	16777216.0, 67108864.0, 134217728.0, 268435456.0, 536870912.0,
	1073741824.0, 4294967296.0, 17179869184.0,
};

struct usage_series {
	_Atomic(const char *) cls;          /* set once (under claim_mu), then only read */
	atomic_ullong cpu[METRICS_CPU_BUCKETS + 1], cpu_count, cpu_sum_us;
	atomic_ullong rss[METRICS_RSS_BUCKETS + 1], rss_count, rss_sum;
};

static struct usage_series series[METRICS_USAGE_CLASSES];
static pthread_mutex_t claim_mu = PTHREAD_MUTEX_INITIALIZER;

/* The series named cls among the first n, or the first free slot (*free_at), or NULL. */
static struct usage_series *find(const char *cls, int *free_at)
{
	*free_at = -1;
	for (int i = 0; i < METRICS_USAGE_CLASSES - 1; i++) {
		const char *c = atomic_load_explicit(&series[i].cls, memory_order_acquire);
		if (!c) {
			*free_at = i;
			return NULL;
		}
		if (strcmp(c, cls) == 0)
			return &series[i];
	}
	return NULL;
}

/* cls's series: found without a lock (a name is written once, before it is published, and
 * slots fill in order), claimed under claim_mu on the class's first run. */
static struct usage_series *series_of(const char *cls)
{
	int free_at;
	struct usage_series *s = find(cls, &free_at);
	if (s)
		return s;
	pthread_mutex_lock(&claim_mu);
	s = find(cls, &free_at);
	char *name = !s && free_at >= 0 ? strdup(cls) : NULL;
	if (name) {
		s = &series[free_at];
		atomic_store_explicit(&s->cls, name, memory_order_release);
	}
	pthread_mutex_unlock(&claim_mu);
	if (s)
		return s;
	/* all taken: the shared last series */
	s = &series[METRICS_USAGE_CLASSES - 1];
	const char *none = NULL;
	atomic_compare_exchange_strong(&s->cls, &none, METRICS_USAGE_OTHER);
	return s;
}

static void observe(atomic_ullong *buckets, const double *bounds, int n, double v)
{
	int i = 0;
	while (i < n && v > bounds[i])
		i++;
	atomic_fetch_add_explicit(&buckets[i], 1, memory_order_relaxed);
}

void metrics_observe_usage(const char *cls, double cpu_s, long long maxrss_bytes)
{
	struct usage_series *s = series_of(cls ? cls : "");
	if (!(cpu_s >= 0))
		cpu_s = 0;
	observe(s->cpu, metrics_cpu_bounds, METRICS_CPU_BUCKETS, cpu_s);
	atomic_fetch_add_explicit(&s->cpu_sum_us, (unsigned long long)(cpu_s * 1e6 + 0.5),
	                          memory_order_relaxed);
	atomic_fetch_add_explicit(&s->cpu_count, 1, memory_order_relaxed);
	if (maxrss_bytes < 0)
		return;
	observe(s->rss, metrics_rss_bounds, METRICS_RSS_BUCKETS, (double)maxrss_bytes);
	atomic_fetch_add_explicit(&s->rss_sum, (unsigned long long)maxrss_bytes,
	                          memory_order_relaxed);
	atomic_fetch_add_explicit(&s->rss_count, 1, memory_order_relaxed);
}

/* Cumulative counts per bound and the total, at least every bucket's sum (as the run
 * histogram's snapshot: +Inf never below a bucket while runs land during it). */
static unsigned long long cumulate(atomic_ullong *buckets, int n, atomic_ullong *count,
                                   unsigned long long *out)
{
	unsigned long long acc = 0;
	for (int i = 0; i < n; i++) {
		acc += atomic_load_explicit(&buckets[i], memory_order_relaxed);
		out[i] = acc;
	}
	acc += atomic_load_explicit(&buckets[n], memory_order_relaxed);
	unsigned long long c = atomic_load_explicit(count, memory_order_relaxed);
	return c > acc ? c : acc;
}

int metrics_usage_snapshot(int i, struct usage_snapshot *out)
{
	/* A slot without a name is unused (the shared last one has one once a run landed in it). */
	if (i < 0 || i >= METRICS_USAGE_CLASSES)
		return 0;
	struct usage_series *s = &series[i];
	out->cls = atomic_load_explicit(&s->cls, memory_order_acquire);
	if (!out->cls)
		return 0;
	out->cpu_count = cumulate(s->cpu, METRICS_CPU_BUCKETS, &s->cpu_count, out->cpu);
	out->cpu_sum = (double)atomic_load_explicit(&s->cpu_sum_us, memory_order_relaxed) / 1e6;
	out->rss_count = cumulate(s->rss, METRICS_RSS_BUCKETS, &s->rss_count, out->rss);
	out->rss_sum = (double)atomic_load_explicit(&s->rss_sum, memory_order_relaxed);
	return 1;
}
