/* SPDX-License-Identifier: MIT */
/*
 * reaper.h: a small process that outlives an abruptly killed daemon just long enough to
 * kill the process groups of its handlers (grandchildren included).
 */
#ifndef COGWORKERD_REAPER_H
#define COGWORKERD_REAPER_H

/* Fork the reaper; call before any thread exists. 0 on success (else it's only logged). */
int reaper_start(void);
/* Tell the reaper a handler's process group began or ended (no-op without a reaper). */
void reaper_track(int pgid);
void reaper_untrack(int pgid);

#endif
