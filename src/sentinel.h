/* SPDX-License-Identifier: MIT */
/*
 * sentinel.h: Redis Sentinel, as the connection layer (redis.c) and the daemon's switch
 * watcher use it: asking a sentinel for the primary, checking a server's ROLE, and the
 * process-wide news that the primary moved (doc/design.md "Redis").
 */
#ifndef COGWORKERD_SENTINEL_H
#define COGWORKERD_SENTINEL_H

#include <stddef.h>
#include "config.h"
#include "rlink.h"

/*
 * A new connection to sentinel i of rc, with rc's connect timeout for the connect and every
 * reply (a sentinel answers from memory), and AUTH with sentinel_password when set. NULL
 * with the reason in err.
 */
struct rlink *sentinel_connect(const struct redis_conf *rc, int i, char *err, size_t errlen);

/* SENTINEL GET-MASTER-ADDR-BY-NAME through sentinel i: 0 with *host (malloc'd) and *port,
 * -1 with the reason in err (unreachable, or the master is unknown to it). */
int sentinel_ask(const struct redis_conf *rc, int i, char **host, int *port, char *err,
                 size_t errlen);

/* ROLE on c: 1 when it is a primary, 0 when not (err names its role), -1 on an error
 * (err; a command error such as NOPERM leaves c usable). */
int redis_role_is_primary(struct rlink *c, char *err, size_t errlen);

/*
 * The process's news of a switch: a generation counter, bumped when a +switch-master names
 * a primary other than the last one announced; connections made at an older generation are
 * stale. The announced primary is kept as a hint that the next connect tries first.
 */
unsigned sentinel_generation(void);
/* A +switch-master named host:port: 1 when that is news (the generation moved), else 0. */
int sentinel_switched(const char *host, int port);
/* The primary announced at generation gen: 0 with host and port, -1 when none. */
int sentinel_hint(unsigned gen, char *host, size_t hostlen, int *port);

/* "+switch-master" payload "<name> <old-ip> <old-port> <new-ip> <new-port>": 1 with the new
 * primary when it is about master, else 0. */
int sentinel_parse_switch(const char *msg, const char *master, char *host, size_t hostlen,
                          int *port);

/* Log (once per process and change) which primary the connections of master now use. */
void sentinel_note_primary(const char *master, const char *host, int port);

#endif
