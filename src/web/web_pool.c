/* SPDX-License-Identifier: MIT */
/*
 * web_pool.c: the Redis connections of `cogworkerctl web`. Pooled, not one per thread: a
 * request takes a connection, with its own struct ctl (the state the commands' code
 * expects), for the time it runs, and gives it back, so the connections to Redis are as
 * many as the requests running at once, at most the pool's size, and each is used by one
 * thread at a time (hiredis contexts are not thread-safe). A request that finds every one
 * in use waits for one, up to POOL_WAIT, then is told the server is busy.
 */
#include <stdlib.h>
#include <time.h>
#include "web.h"

#define POOL_WAIT 10.0          /* seconds a request waits for a Redis connection */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct web_ctx *free_list;
static int made, max_made;
static const struct ctl *base_ctl;

void web_pool_init(const struct ctl *base, int max)
{
	base_ctl = base;
	max_made = max;
}

struct web_ctx *web_ctx_take(void)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += (time_t)POOL_WAIT;
	pthread_mutex_lock(&mu);
	while (!free_list && made >= max_made)
		if (pthread_cond_timedwait(&cv, &mu, &until) != 0)
			break;
	struct web_ctx *x = free_list;
	if (x) {
		free_list = x->next;
	} else if (made < max_made) {
		made++;
	} else {
		pthread_mutex_unlock(&mu);
		return NULL;
	}
	pthread_mutex_unlock(&mu);
	if (!x) {
		x = xcalloc(1, sizeof *x);
		x->c = *base_ctl;           /* the conf is shared, read only */
		x->c.notice = NULL;
		x->c.json = 1;
		rconn_init(&x->c.r, &base_ctl->conf.redis);
	}
	x->c.yes = 1;               /* the page asked for the confirmation already */
	x->c.r.err[0] = '\0';
	x->c.r.unavailable = 0;
	return x;
}

void web_ctx_give(struct web_ctx *x)
{
	if (!x)
		return;
	pthread_mutex_lock(&mu);
	x->next = free_list;
	free_list = x;
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
}
