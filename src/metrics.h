/* SPDX-License-Identifier: MIT */
/*
 * metrics.h: the daemon's HTTP endpoint (metrics.c): GET /metrics serves cogworker's eight
 * metrics read from Redis (exporter.h) next to this process's own counters (counters.h),
 * and GET /healthz tells whether Redis answers and every tracked thread (state.h) is alive.
 */
#ifndef COGWORKERD_METRICS_H
#define COGWORKERD_METRICS_H

/* Start the endpoint on the conf's metrics_listen ("" = nothing to do). 0 on success or
 * when off; -1 (logged) when it cannot listen. Daemon only. */
struct conf;
int metrics_start(const struct conf *c);

#endif
