/* SPDX-License-Identifier: MIT */
/*
 * exporter.h: cogworker's Prometheus exposition (doc/protocol.md §7.26), read from Redis: the
 * same eight metric names, types and format as cogworker's exporter, cluster-wide values.
 * One implementation for the daemon's /metrics and `cogworkerctl metrics`.
 */
#ifndef COGWORKERD_EXPORTER_H
#define COGWORKERD_EXPORTER_H

#include <stddef.h>
#include "redis.h"
#include "util.h"

#define EXPORTER_CONTENT_TYPE "text/plain; version=0.0.4"

/*
 * Append the exposition to out. 0 on success; -1 when a Redis call failed, with r->err
 * set, *what naming the key or command that failed, and out left as it was.
 */
int exporter_render(struct rconn *r, struct sbuf *out, const char **what);

/* Queue latency (§4.1) of a queue whose oldest element is raw: now − (enqueued_at, else
 * created_at), floored at 0; 0 when raw is not an object with either as a number. */
double exporter_latency(const char *raw, size_t len, double now);

/* Append s as a Prometheus label value (backslash, double quote and newline escaped). */
void exporter_label_value(struct sbuf *out, const char *s, size_t len);

#endif
