/* SPDX-License-Identifier: MIT */
/*
 * fetcher.h: the processor threads (fetcher.c, doc/protocol.md §7.4), started, stopped and
 * joined by the manager.
 */
#ifndef COGWORKERD_FETCHER_H
#define COGWORKERD_FETCHER_H

int fetchers_start(int n);
/* Stop the handlers still running: TERM to their process groups, the abort grace, KILL. */
void fetchers_abort_all(void);
/* Detach the fetchers still running (stuck in a Redis call at stop): never joined. */
void fetchers_abandon(void);
int fetchers_join(double deadline);     /* 0 when all have exited before the deadline */

#endif
