/* SPDX-License-Identifier: MIT */
/*
 * counters.c: storage of this process's own counters (counters.h). Lock-free: every update
 * is one relaxed atomic add, so a counter can be bumped from any thread, in any path.
 * Linked into cogworkerctl too (the Redis layer counts reconnects), which never serves them.
 */
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
