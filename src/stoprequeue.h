/* SPDX-License-Identifier: MIT */
/*
 * stoprequeue.h: the last Redis work of a stop (stoprequeue.c, doc/protocol.md §7.2):
 * settle what is owed, hand over the filings that still fail, and put back on their
 * queues the jobs of our in-progress list that did not finish.
 */
#ifndef COGWORKERD_STOPREQUEUE_H
#define COGWORKERD_STOPREQUEUE_H

#include "redis.h"

void stop_requeue(struct rconn *r);

#endif
