/* SPDX-License-Identifier: MIT */
/*
 * heartbeat.h: the beat (presence, workers, lock refresh; doc/protocol.md §7.12), run by
 * the manager on its own connection, and the subscriber thread that listens for remote
 * quiet/resume/stop (§7.13).
 */
#ifndef COGWORKERD_HEARTBEAT_H
#define COGWORKERD_HEARTBEAT_H

#include "redis.h"

int heartbeat_beat(struct rconn *r);
int subscriber_start(void);
void subscriber_stop(void);
void presence_remove(struct rconn *r);
/* Publish the jobs waiting here for a max_concurrency slot in cogworker:waiting:<id> when
 * they changed since the last publication (the manager asks once a second), and on a beat
 * renew the key's TTL too. */
void waiting_publish(struct rconn *r, int beat);

#endif
