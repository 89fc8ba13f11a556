/* SPDX-License-Identifier: MIT */
/*
 * batch.h: the per-job bookkeeping that is kept in memory and written to Redis by one
 * flush a second (batch.c): the processed counter with its hourly throughput field, and the
 * workers-hash entries of running jobs. The manager flushes; the fetchers only record.
 */
#ifndef COGWORKERD_BATCH_H
#define COGWORKERD_BATCH_H

#include <stddef.h>
#include "redis.h"

/* The flush interval, seconds: what a kill -9 may lose of the processed counter, and how
 * long a job runs at most before its workers entry is written. */
#define BATCH_INTERVAL 1.0

/* One slot per fetcher: nslots of them, slot i's field in the workers hash is fields[i]
 * (copied). Called once, before the fetchers start. */
void batch_init(int nslots, char (*fields)[13]);
/* Slot i runs a job from now on: raw (the payload as fetched) and queue must stay valid
 * until batch_job_ended(i), which the fetcher calls before it frees them. run_at is the
 * start time written into the entry. */
void batch_job_started(int i, const char *raw, size_t len, const char *queue, long run_at);
void batch_job_ended(int i);
/* Redis lost the workers hash (a restart without persistence, or beats failing for longer
 * than its TTL): the next flush writes the entry of every job running now again. */
void batch_rewrite(void);
/* Basic fetch: slot i's entry is written (HSET) at once, and deleted (HDEL) at once when
 * its job ends, over the fetcher's own connection r, since the shutdown requeue reads the
 * hash to know which jobs to put back; the slot still records the job, so that
 * batch_basic_rewrite can write it again. A failed write is logged with site. */
void batch_basic_started(struct rconn *r, struct log_site *site, int i, const char *raw,
                         size_t len, const char *queue, long run_at);
void batch_basic_ended(struct rconn *r, struct log_site *site, int i);
/* Basic fetch, a job left for the shutdown requeue: the slot forgets it (its memory is
 * about to go), its entry stays in Redis for the requeue to read. */
void batch_basic_forget(int i);
/* Basic fetch, Redis lost the workers hash: the entry of every job running now is written
 * again at once (over the caller's connection). -1 when Redis was unavailable, else 0. */
int batch_basic_rewrite(struct rconn *r);
/* One more success, counted in stats:processed and the current hour's throughput. */
void batch_processed(void);
/* Write what changed since the last flush in one pipeline (nothing at all when nothing
 * changed). Counts that Redis did not take for want of a connection are kept for the
 * next flush; a command error is logged and the counts dropped (best effort, lesson 71). */
int batch_flush(struct rconn *r);       /* -1 when Redis was unavailable, else 0 */

#endif
