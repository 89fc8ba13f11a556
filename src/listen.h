/* SPDX-License-Identifier: MIT */
/*
 * listen.h: a listening TCP socket from "host:port" or "[v6]:port", for the HTTP
 * endpoints: the daemon's metrics_listen (metrics.c) and `cogworkerctl web --listen`.
 */
#ifndef COGWORKERD_LISTEN_H
#define COGWORKERD_LISTEN_H

#include <stddef.h>

/* NULL when s is "host:port" or "[v6]:port" with a port 1..65535, else what is wrong. */
const char *listen_spec_check(const char *s);
/* A bound, listening, non-blocking, close-on-exec socket for a checked spec; -1 with err.
 * *loopback (when not NULL) says whether the address bound is a loopback one. */
int listen_tcp(const char *spec, int *loopback, char *err, size_t errlen);

#endif
