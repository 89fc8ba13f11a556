/* SPDX-License-Identifier: MIT */
/*
 * ticker.h: the periodic ticker thread (ticker.c, doc/protocol.md §7.16).
 */
#ifndef COGWORKERD_TICKER_H
#define COGWORKERD_TICKER_H

int ticker_start(void);
/* Look again now: quiet ended, or a reload may have changed the entries. */
void ticker_kick(void);
/* For the unit tests: a ticker on the current conf (not started), and one pass of its loop
 * (pick up the conf, publish if due, tick unless quiet). */
struct ticker;
struct ticker *ticker_new(void);
void ticker_free(struct ticker *t);
void ticker_tick_once(struct ticker *t);

#endif
