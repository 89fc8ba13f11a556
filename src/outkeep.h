/* SPDX-License-Identifier: MIT */
/*
 * outkeep.h: every run's output, kept in Redis for `cogworkerctl jobs log`
 * (doc/protocol.md §7.29): the last output_keep bytes of the combined stdout and stderr of
 * each run, with a record of the run, written by one writer thread of its own.
 *
 * A fetcher only copies bytes into memory (outkeep_add, from the pump's on_output hook) and
 * hands the finished run over (outkeep_end); it never waits for Redis on its account, so
 * keeping output can neither slow a job down nor hold up its settlement. Memory is bounded:
 * each run holds at most its output_keep bytes, and a run that would take the buffered
 * total past OUTKEEP_MAX_BUFFERED is not kept at all (outkeep_begin returns NULL).
 */
#ifndef COGWORKERD_OUTKEEP_H
#define COGWORKERD_OUTKEEP_H

#include <stddef.h>
#include "usage.h"

struct outrun;

/* Start keeping a run of jid, at most keep bytes (0, or no jid: NULL, nothing kept). */
struct outrun *outkeep_begin(const char *jid, const char *cls, const char *queue,
                             size_t keep, double started);
/* Bytes the run printed (stdout and stderr as read). o may be NULL. */
void outkeep_add(struct outrun *o, const char *data, size_t len);
/*
 * The run is over: outcome is "success", "retrying", "dead", "killed", "discarded" or
 * "stopped" (left for the shutdown requeue); error_class and error_message NULL on success;
 * usage what the run cost (usage.h), for the record. The writer owns o from here on. o may
 * be NULL.
 */
void outkeep_end(struct outrun *o, const char *outcome, const char *error_class,
                 const char *error_message, double finished, const struct run_usage *usage);
/*
 * The same for a success whose ack will say whether its job may have runs kept or a
 * follower (settle.h, held_ack): a run that has no record yet and printed nothing is then
 * returned, and waits for outkeep_judge, which the caller owes it exactly once; any other
 * run is the writer's at once (NULL). look = 0: nothing to show and no one to show it to,
 * the run goes without a word to Redis; 1: the writer asks, as for outkeep_end.
 */
struct outrun *outkeep_end_success(struct outrun *o, double finished,
                                   const struct run_usage *usage);
void outkeep_judge(struct outrun *o, int look);

/* The writer thread. outkeep_stop asks it for a last pass over the finished runs still
 * buffered (when flush; else they are dropped) and waits for it until deadline
 * (monotonic): 0 when it ended, 1 when it was left behind inside a Redis call. */
int outkeep_start(void);
int outkeep_stop(int flush, double deadline);

#endif
