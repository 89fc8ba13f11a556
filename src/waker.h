/* SPDX-License-Identifier: MIT */
/*
 * waker.h: the waker thread (waker.c): CLIENT UNBLOCK for parked fetchers, the resume
 * watch of paused queues, keyspace notifications when the server has them on. Detached:
 * abandoned at stop, like the poller and the ticker.
 */
#ifndef COGWORKERD_WAKER_H
#define COGWORKERD_WAKER_H

int waker_start(void);

#endif
