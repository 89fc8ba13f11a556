/* SPDX-License-Identifier: MIT */
/*
 * sentinel.c: Redis Sentinel for the connection layer (doc/design.md "Redis").
 *
 * With redis.sentinels set, no address of the primary is configured: every new connection
 * (redis.c) asks the sentinels in turn for the primary of redis.master_name, connects
 * there and checks with ROLE that it really is a primary (a sentinel can name a demoted
 * one for a moment during a failover), as the Sentinel client guidelines ask. A sentinel
 * is a small server answering from memory, so its connection uses the connect timeout for
 * every reply too: a dead or frozen sentinel costs at most that before the next is asked.
 *
 * How the threads learn of a switch: each connection asks again whenever it reconnects
 * (a lost connection, or a READONLY or MASTERDOWN reply: redis.c drops the connection
 * then). That alone leaves threads on a primary that was demoted by SENTINEL FAILOVER but
 * keeps accepting writes until the sentinels reconfigure it, about 10 s later; writes
 * there are lost. So the daemon also watches +switch-master (sentinelwatch.c), and each
 * announcement of a new primary bumps a generation here: every connection made before is
 * stale and reconnects at its next call, trying the announced primary first (verified by
 * ROLE like any other answer).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "sentinel.h"
#include "util.h"

struct rlink *sentinel_connect(const struct redis_conf *rc, int i, char *err, size_t errlen)
{
	const struct redis_addr *a = &rc->sentinel[i];
	struct rlink_target t = {
		.host = a->host, .port = a->port,
		.connect_timeout = rc->connect_timeout > 0 ? rc->connect_timeout : 2.0,
		.tls = rc->sentinel_tls ? rc->tls.ctx : NULL, .server_name = rc->tls.server_name,
	};
	char why[256];
	struct rlink *c = rlink_open(&t, why, sizeof why);

	if (!c) {
		snprintf(err, errlen, "sentinel %s: %s", rc->sentinels.v[i], why);
		return NULL;
	}
	if (rc->sentinel_password) {
		redisReply *rep = rlink_command(c, "AUTH %s", rc->sentinel_password);
		if (!rep || rep->type == REDIS_REPLY_ERROR) {
			snprintf(err, errlen, "sentinel %s: AUTH failed: %s", rc->sentinels.v[i],
			         rep ? rep->str : rlink_error(c));
			if (rep)
				freeReplyObject(rep);
			rlink_close(c);
			return NULL;
		}
		freeReplyObject(rep);
	}
	return c;
}

int sentinel_ask(const struct redis_conf *rc, int i, char **host, int *port, char *err,
                 size_t errlen)
{
	struct rlink *c = sentinel_connect(rc, i, err, errlen);
	if (!c)
		return -1;
	redisReply *rep = rlink_command(c, "SENTINEL GET-MASTER-ADDR-BY-NAME %s", rc->master_name);
	int ok = -1;
	if (!rep)
		snprintf(err, errlen, "sentinel %s: %s", rc->sentinels.v[i], rlink_error(c));
	else if (rep->type == REDIS_REPLY_ERROR)
		snprintf(err, errlen, "sentinel %s: %s", rc->sentinels.v[i], rep->str);
	else if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
	         rep->element[0]->type != REDIS_REPLY_STRING ||
	         rep->element[1]->type != REDIS_REPLY_STRING)
		snprintf(err, errlen, "sentinel %s: no master named %s", rc->sentinels.v[i],
		         rc->master_name);
	else if ((*port = atoi(rep->element[1]->str)) < 1 || *port > 65535)
		snprintf(err, errlen, "sentinel %s: bad port for %s", rc->sentinels.v[i],
		         rc->master_name);
	else {
		*host = xstrdup(rep->element[0]->str);
		ok = 0;
	}
	if (rep)
		freeReplyObject(rep);
	rlink_close(c);
	return ok;
}

int redis_role_is_primary(struct rlink *c, char *err, size_t errlen)
{
	redisReply *rep = rlink_command(c, "ROLE");
	int res = -1;
	if (!rep)
		snprintf(err, errlen, "ROLE: %s", rlink_error(c));
	else if (rep->type == REDIS_REPLY_ERROR)
		snprintf(err, errlen, "ROLE: %s", rep->str);
	else if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 1 ||
	         rep->element[0]->type != REDIS_REPLY_STRING)
		snprintf(err, errlen, "ROLE: unexpected reply");
	else if (strcmp(rep->element[0]->str, "master") == 0)
		res = 1;
	else {
		snprintf(err, errlen, "its role is %s, not master", rep->element[0]->str);
		res = 0;
	}
	if (rep)
		freeReplyObject(rep);
	return res;
}

/* ---- the news of a switch ---- */

static atomic_uint generation;
static pthread_mutex_t news_lock = PTHREAD_MUTEX_INITIALIZER;
static char hint_host[256];         /* under news_lock */
static int hint_port;
static unsigned hint_gen;

unsigned sentinel_generation(void)
{
	return atomic_load(&generation);
}

int sentinel_switched(const char *host, int port)
{
	int news = 0;
	pthread_mutex_lock(&news_lock);
	/* Every sentinel announces the same switch: only a new primary is news. */
	if (hint_port != port || strcmp(hint_host, host) != 0) {
		snprintf(hint_host, sizeof hint_host, "%s", host);
		hint_port = port;
		hint_gen = atomic_fetch_add(&generation, 1) + 1;
		news = 1;
	}
	pthread_mutex_unlock(&news_lock);
	return news;
}

int sentinel_hint(unsigned gen, char *host, size_t hostlen, int *port)
{
	int found = -1;
	pthread_mutex_lock(&news_lock);
	if (hint_port && hint_gen == gen) {
		snprintf(host, hostlen, "%s", hint_host);
		*port = hint_port;
		found = 0;
	}
	pthread_mutex_unlock(&news_lock);
	return found;
}

int sentinel_parse_switch(const char *msg, const char *master, char *host, size_t hostlen,
                          int *port)
{
	char name[256], oldh[256], newh[256];
	int oldp, newp;

	if (sscanf(msg, "%255s %255s %d %255s %d", name, oldh, &oldp, newh, &newp) != 5 ||
	    strcmp(name, master) != 0 || newp < 1 || newp > 65535)
		return 0;
	snprintf(host, hostlen, "%s", newh);
	*port = newp;
	return 1;
}

static char noted_host[256];        /* under news_lock */
static int noted_port;

void sentinel_note_primary(const char *master, const char *host, int port)
{
	int changed = 0;
	pthread_mutex_lock(&news_lock);
	if (noted_port != port || strcmp(noted_host, host) != 0) {
		snprintf(noted_host, sizeof noted_host, "%s", host);
		noted_port = port;
		changed = 1;
	}
	pthread_mutex_unlock(&news_lock);
	if (changed)
		log_info("Redis Sentinel: the primary of %s is %s:%d", master, host, port);
}
