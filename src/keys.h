/*
 * keys.h: the name of every Redis key and key prefix cogworkerd reads or writes, for the
 * daemon and cogworkerctl alike. A key is spelled here once; doc/protocol.md §2 says what
 * each one holds and who writes it. The names are cogworker's wire contract: a Ruby client,
 * the Web UI and Ruby workers in the same fleet use the same names.
 */
#ifndef COGWORKERD_KEYS_H
#define COGWORKERD_KEYS_H

#define K_QUEUE "cogworker:queue:"
#define K_QUEUES "cogworker:queues"
#define K_LIVE_QUEUES "cogworker:live_queues"
#define K_PAUSED "cogworker:paused_queues"
#define K_SCHEDULE "cogworker:schedule"
#define K_RETRY "cogworker:retry"
#define K_DEAD "cogworker:dead"
#define K_PROCESSES "cogworker:processes"
#define K_PROCESS "cogworker:process:"
#define K_WORKERS "cogworker:workers:"
#define K_INPROGRESS "cogworker:inprogress:"
#define K_IDENTITIES "cogworker:inprogress_identities"
#define K_LAST_BEAT "cogworker:last_beat"
#define K_REPEAT_ORPHANS "cogworker:repeat_orphans"
#define K_ORPHANINGS "cogworker:orphanings:"
#define K_UNSETTLED "cogworker:unsettled"
#define K_SIGNAL "cogworker:signal:"
#define K_PROCESSED "cogworker:stats:processed"
#define K_FAILED "cogworker:stats:failed"
#define K_THROUGHPUT "cogworker:throughput:"
#define K_ATTEMPTS "cogworker:job_attempts:"
#define K_UNIQUE "cogworker:unique:"
#define K_RUNNING "periodic:running:"
#define ORPHAN_COUNTER_TTL "604800"

#endif
