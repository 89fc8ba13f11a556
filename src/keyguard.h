/* SPDX-License-Identifier: MIT */
/*
 * keyguard.h: one key check (keyguard.c, doc/protocol.md §7.15): wrong-typed keys moved out
 * of the way. Runs on the poller thread with the poller's connection.
 */
#ifndef COGWORKERD_KEYGUARD_H
#define COGWORKERD_KEYGUARD_H

#include "log.h"
#include "redis.h"

/* The number of keys moved when Redis answered, -1 on an availability error. */
int keyguard_check(struct rconn *r, struct log_site *site);

#endif
