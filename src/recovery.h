/* SPDX-License-Identifier: MIT */
/*
 * recovery.h: orphan recovery (doc/protocol.md §7.10) and reconcile of the own in-progress
 * list (§7.11), run by the poller's orphan check with the poller's connection.
 */
#ifndef COGWORKERD_RECOVERY_H
#define COGWORKERD_RECOVERY_H

#include "config.h"
#include "log.h"
#include "redis.h"

/* The report decides whether the pass counts as a real check (§7.14). */
struct orphan_report {
	int registry_read;      /* SMEMBERS cogworker:inprogress_identities worked */
	int scan_done;          /* the SCAN ran to its end */
	int conn_lost;          /* an availability error happened during the pass */
};

/* One orphan recovery pass. scan = also SCAN for unregistered lists. */
void orphan_recovery(struct rconn *r, int scan, struct orphan_report *rep,
                     struct log_site *site);
/* The heartbeat's write of cogworker:at_most_once:<self>, the classes this process runs at
 * most once (doc/protocol.md §7.32), which whoever recovers its jobs reads; best effort. */
void at_most_once_publish(struct rconn *r, const struct conf *c);
/* -1 on an availability error. */
int reconcile_own(struct rconn *r, struct log_site *site);
/* The beat found this process's presence gone: Redis may have lost its keys. The jobs it
 * runs or holds that its in-progress list lacks are pushed onto it again and the workers
 * entries are rewritten by the next flush (reliable mode). Returns how many were filed,
 * -1 when Redis was unavailable (the next beat that finds the presence gone tries again). */
int refile_own(struct rconn *r);

#endif
