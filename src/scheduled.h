/* SPDX-License-Identifier: MIT */
/*
 * scheduled.h: the scheduled poller thread (scheduled.c, doc/protocol.md §7.14): key check,
 * orphan check and reconcile, graduation of due schedule/retry entries. Detached and never
 * joined: it is abandoned at stop (lesson 77, doc/protocol.md §10).
 */
#ifndef COGWORKERD_SCHEDULED_H
#define COGWORKERD_SCHEDULED_H

int poller_start(void);
/* Look at the heads of the schedule and retry sets now: one of them was written (a keyspace
 * notification), or quiet ended. */
void poller_kick(void);

#endif
