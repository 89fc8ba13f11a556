/* SPDX-License-Identifier: MIT */
/*
 * sentinelwatch.h: the thread that watches the sentinels' +switch-master announcements, so
 * that every connection of the daemon follows a new primary at once (sentinelwatch.c).
 */
#ifndef COGWORKERD_SENTINELWATCH_H
#define COGWORKERD_SENTINELWATCH_H

#include "config.h"

/* Start it when c has redis.sentinels (else do nothing); 0, or -1 if the thread failed. */
int sentinel_watch_start(const struct conf *c);
/* Stop and join it (within ~250 ms plus a connect timeout); nothing if not started. */
void sentinel_watch_stop(void);

#endif
