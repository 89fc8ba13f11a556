/* SPDX-License-Identifier: MIT */
/*
 * redis.h: one Redis connection, owned by one thread (hiredis contexts are not
 * thread-safe). Connects lazily, re-applies timeouts, AUTH and SELECT after every
 * reconnect, backs off between failed connects, and classifies errors as doc/protocol.md §7.24
 * says: "unavailable" (connection trouble, READONLY, LOADING, MASTERDOWN, NOREPLICAS,
 * UNBLOCKED, TRYAGAIN, BUSY, and those wrapped in a script error) versus a command error.
 * With redis.sentinels, each connect finds the primary through the sentinels (sentinel.h).
 */
#ifndef COGWORKERD_REDIS_H
#define COGWORKERD_REDIS_H

#include <stddef.h>
#include <hiredis.h>
#include "config.h"
#include "log.h"
#include "rlink.h"

struct rconn {
	struct rlink *link;         /* NULL while not connected */
	struct redis_conf rc;       /* a private copy: a reload may replace the conf */
	double backoff;             /* seconds until the next connect attempt may be made */
	double next_attempt;        /* monotonic */
	int unavailable;            /* classification of the last error */
	int connects;               /* successful connects, for metrics and tests */
	double last_reply;          /* monotonic time of the last reply read */
	char err[512];              /* text of the last error */
	char endpoint[300];         /* what the link is to, as errors name it */
	size_t bulk_max, bulk_head; /* rconn_limit_bulk, for the links to come */
	/* Sentinel only */
	int sentinel_first;         /* the sentinel asked first: the last one that answered */
	unsigned generation;        /* sentinel_generation() at the last connect attempt */
};

void rconn_init(struct rconn *r, const struct redis_conf *rc);
void rconn_close(struct rconn *r);
/* New connect and command timeouts (seconds), applied now and after every reconnect. */
/* The conf's command timeout, or the default of 5 s when it is 0 (not set). */
double rconn_command_timeout(const struct rconn *r);
void rconn_set_timeouts(struct rconn *r, double connect, double command);
void rconn_free(struct rconn *r);
/* Strings longer than max bytes in the replies to come are dropped unread and come back
 * as integers, their lengths (rlink.h rlink_limit_bulk), on this link and the next;
 * rconn_skipped takes what was seen of each, in order (0 when none). A connection lost
 * meanwhile loses its records. */
void rconn_limit_bulk(struct rconn *r, size_t max, size_t head);
int rconn_skipped(struct rconn *r, struct rskip *out);
/* Connect now if not connected (ignoring the backoff when force). 0 on success. */
int rconn_connect(struct rconn *r, int force);
/* True when a switch of the primary was announced since r connected (Sentinel only): the
 * next call reconnects. For loops that wait on r's socket without calling (SUBSCRIBE). */
int rconn_stale(const struct rconn *r);

/*
 * Run one command. Returns the reply (free with freeReplyObject), or NULL on any error,
 * an error reply included; then r->err holds the text and r->unavailable says whether it
 * was an availability error. A connection-level error drops the context, so the next call
 * reconnects.
 */
redisReply *rcmd(struct rconn *r, const char *fmt, ...);
redisReply *rcmd_argv(struct rconn *r, int argc, const char **argv, const size_t *lens);
/* Like rcmd_argv, with the socket timeout raised above a server-side blocking timeout. */
redisReply *rcmd_blocking(struct rconn *r, double block, int argc, const char **argv,
                          const size_t *lens);

/*
 * Pipelining: queue commands with rpipe_add*, then rpipe_exec collects every reply into
 * replies[] (NULL for a failed one). Returns the number of failures; on a connection
 * error all of them fail. Error texts of failed replies go to the log site's caller
 * through r->err (the last one).
 */
struct rpipe {
	int n;
	int next;                /* replies read so far (rpipe_read) */
	int failed_conn;
	int unavailable;         /* failures classified "unavailable" */
};
void rpipe_begin(struct rconn *r, struct rpipe *p);
void rpipe_add(struct rconn *r, struct rpipe *p, const char *fmt, ...);
void rpipe_add_argv(struct rconn *r, struct rpipe *p, int argc, const char **argv,
                    const size_t *lens);
/* An argv whose argument i is made of npieces[i] consecutive pieces (rlink.h). */
void rpipe_add_pieces(struct rconn *r, struct rpipe *p, int argc, const int *npieces,
                      const char **pieces, const size_t *plens);
/* An embedded script (EVALSHA, or EVAL for a plain_eval one); a NOSCRIPT reply comes back
 * as a failed reply with r->err "NOSCRIPT ...": the caller runs rscript then. */
void rpipe_add_script(struct rconn *r, struct rpipe *p, const char *name, int nkeys,
                      const char **keys, int nargs, const char **args,
                      const size_t *arglens);
/* Read the replies still unread (rpipe_exec), or only the next n of them (rpipe_read), so
 * that r->err after each part is the error of that part. Both return the failures. */
int rpipe_exec(struct rconn *r, struct rpipe *p, redisReply **replies);
int rpipe_read(struct rconn *r, struct rpipe *p, int n, redisReply **replies);

/*
 * Run an embedded script by name (lua/<name>.lua): EVALSHA, and EVAL when the server
 * answers NOSCRIPT. keys and args are NUL-terminated strings unless lens given (args only).
 */
redisReply *rscript(struct rconn *r, const char *name, int nkeys, const char **keys,
                    int nargs, const char **args, const size_t *arglens);

/*
 * Fault injection for the unit tests of the [unit] behaviours (doc/behaviours.md): when set,
 * it is asked before every command with the command name (the script name for rscript);
 * a non-zero answer fails the command as if the connection had been lost. NULL in the
 * daemon.
 */
extern int (*redis_fault_hook)(const char *name);

/*
 * A WRONGTYPE reply, on any connection of the process, means a key of the wrong type,
 * which fails every command on it until KeyGuard moves it away (doc/protocol.md §7.15):
 * it is noted here, and the poller, which owns the key check, takes the note to run the
 * check at once instead of at its next minute. Pending: a note is there; take: read and
 * clear it.
 */
int redis_wrongtype_pending(void);
int redis_wrongtype_take(void);

/* True if an error reply's text means "Redis unavailable" (doc/protocol.md §7.24). */
int redis_error_is_unavailable(const char *msg);
/* True if it is a demoted primary's (READONLY, MASTERDOWN, NOREPLICAS, UNBLOCKED). */
int redis_error_is_demoted(const char *msg);

/* Redis TIME in seconds (float); the host clock when TIME is refused by a command error.
 * Returns -1 only when Redis is unreachable. */
double redis_time(struct rconn *r);
/* s with the glob metacharacters of SCAN MATCH escaped (malloc'd). */
char *redis_glob_escape(const char *s);

/* Helpers for replies. */
long long reply_integer(const redisReply *rep, long long dflt);

/* Report a call's result to its log site (doc/protocol.md §7.24): a success ends an
 * outage summary, an availability error is summarised, any other error is logged as is.
 * Returns ok; a site is per place in the code, so one outage logs once per place. */
int site_result(struct log_site *site, struct rconn *r, int ok, const char *what);

#endif
