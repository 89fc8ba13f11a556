/*
 * recovery.h: orphan recovery (doc/protocol.md §7.10) and reconcile of the own in-progress
 * list (§7.11), run by the poller's orphan check with the poller's connection.
 */
#ifndef COGWORKERD_RECOVERY_H
#define COGWORKERD_RECOVERY_H

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
/* -1 on an availability error. */
int reconcile_own(struct rconn *r, struct log_site *site);

#endif
