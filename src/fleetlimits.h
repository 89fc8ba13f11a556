/* SPDX-License-Identifier: MIT */
/*
 * fleetlimits.h: the fleet-wide limits as Redis holds them (fleetlimits.c, doc/protocol.md
 * §7.30), for `cogworkerctl limits` and the daemon's /metrics.
 */
#ifndef COGWORKERD_FLEETLIMITS_H
#define COGWORKERD_FLEETLIMITS_H

#include "redis.h"
#include "util.h"

struct fleet_limit {
	char *cls;                      /* the handler class */
	char *decl;                     /* its declaration in cogworker:limits (JSON) */
	int fleet_n;                    /* fleet_concurrency, 0 = none */
	int rate_n;                     /* rate_limit starts per window, 0 = none */
	double window;                  /* seconds */
	char **holders;                 /* "<identity> <fetcher> <jid>" of each live lease */
	double *expires;                /* its expiry (epoch, Redis clock) */
	int nholders;
	long long waiters;              /* jobs turned away, waiting for their next try */
	long long window_starts;        /* starts within the last window */
	double next_room;               /* epoch when the full window has room again; 0 = now */
};

/* Every class in cogworker:limits, sorted by name: 0, or -1 with r->err and *what. */
int fleet_limits_read(struct rconn *r, struct fleet_limit **out, int *n, const char **what);
void fleet_limits_free(struct fleet_limit *l, int n);
/* Prometheus gauges per class: cogworkerd_fleet_concurrency, _fleet_slots_held,
 * cogworkerd_limit_waiters, cogworkerd_rate_limit, _window_seconds, _window_starts. */
void fleet_limits_render(const struct fleet_limit *l, int n, struct sbuf *b);

#endif
