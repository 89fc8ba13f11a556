/* SPDX-License-Identifier: MIT */
/*
 * bookkeeping.h: cogworker's opt-in records of a run (doc/protocol.md §7.21, §7.22): job status
 * (status:<jid>) and run history (cogworker:history:*). Best effort, always: a failure
 * here is logged and never changes a job's outcome (lesson 71).
 */
#ifndef COGWORKERD_BOOKKEEPING_H
#define COGWORKERD_BOOKKEEPING_H

#include "config.h"
#include "job.h"
#include "log.h"
#include "redis.h"
#include "usage.h"

/* status:<jid> = status (queued|working|complete|retrying|failed) and the error fields;
 * with usage (NULL: none, or nothing measured), what the run cost: cpu_s, maxrss_bytes. */
void status_write(struct rconn *r, const struct conf *c, const struct job *j,
                  const char *status, const char *error_class, const char *error_message,
                  const struct run_usage *usage);
/* A handler's stdout line PROGRESS_LINE "PCT MESSAGE": pct and message. -1 when
 * Redis is unavailable (the caller stops reporting progress for that run). */
int status_progress(struct rconn *r, const struct conf *c, const char *jid,
                    const char *line, size_t len);
/* A warm handler's "progress" message: pct as written (a number), message or NULL. */
int status_progress_msg(struct rconn *r, const struct conf *c, const char *jid,
                        const char *pct, const char *message);
/* One history entry per finished run, indexed by its jid (lua/history_write.lua); outcome
 * is "success" or the attempt's word (retrying, dead, killed, discarded: what the index
 * keeps, the entry says "failed"); stderr_tail feeds the backtrace of a failure, usage
 * (never NULL) the run's cost. */
void history_record(struct rconn *r, const struct conf *c, const struct job *j,
                    const char *outcome, double started, double finished,
                    const char *error_class, const char *error_message,
                    const char *stderr_tail, size_t tail_len, const struct run_usage *usage);

#endif
