/* SPDX-License-Identifier: MIT */
/*
 * sentinelwatch.c: the switch watcher, a thread that runs only with redis.sentinels set
 * (doc/design.md "Redis").
 *
 * It subscribes to +switch-master on every sentinel at once, so that one dead or slow
 * sentinel delays nothing: the first announcement of a new primary for our master bumps the
 * generation (sentinel.c), and every connection of the daemon reconnects at its next call,
 * to the announced primary. Without it, threads would stay on a primary demoted by SENTINEL
 * FAILOVER until the sentinels reconfigure it (about 10 s), and their writes there would be
 * lost. A connection also re-asks the sentinels on its own whenever it reconnects, so a
 * watcher that sees nothing (no sentinel reachable) costs time, not correctness.
 *
 * Like the subscriber it never blocks without a bound: connects and the SUBSCRIBE reply
 * have the connect timeout, and the sockets are polled every 250 ms, so a stop is quick.
 * A lost sentinel is retried every second; losing and regaining one is logged once each.
 */
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "redis.h"
#include "sentinel.h"
#include "sentinelwatch.h"
#include "state.h"
#include "util.h"

#define RETRY_EVERY 1.0

struct watched {
	struct rlink *c;
	double retry_at;                /* monotonic */
	int warned;                     /* a loss was logged and not yet its return */
};

static pthread_t watch_thread;
static atomic_int watch_stop;
static int watch_running;
static struct redis_conf watch_rc;  /* the watcher's own copy: a reload may free the conf */

static void subscribe(struct watched *w, int i)
{
	char err[512];
	struct rlink *c = sentinel_connect(&watch_rc, i, err, sizeof err);
	redisReply *rep = c ? rlink_command(c, "SUBSCRIBE +switch-master") : NULL;
	if (c && (!rep || rep->type != REDIS_REPLY_ARRAY))
		snprintf(err, sizeof err, "sentinel %s: SUBSCRIBE failed: %s", watch_rc.sentinels.v[i],
		         rep && rep->type == REDIS_REPLY_ERROR ? rep->str : rlink_error(c));
	if (rep && rep->type == REDIS_REPLY_ARRAY) {
		freeReplyObject(rep);
		w->c = c;
		if (w->warned)
			log_info("Redis Sentinel: watching %s again", watch_rc.sentinels.v[i]);
		w->warned = 0;
		return;
	}
	if (rep)
		freeReplyObject(rep);
	rlink_close(c);
	w->retry_at = mono_now() + RETRY_EVERY;
	if (!w->warned)
		log_warn("Redis Sentinel: can't watch for switches of %s: %s (retrying every %gs)",
		         watch_rc.master_name, err, RETRY_EVERY);
	w->warned = 1;
}

static void lose(struct watched *w, int i)
{
	if (!w->warned)
		log_warn("Redis Sentinel: lost the watch on %s: %s (retrying every %gs)",
		         watch_rc.sentinels.v[i], rlink_error(w->c)[0] ? rlink_error(w->c)
		         : "connection closed", RETRY_EVERY);
	w->warned = 1;
	rlink_close(w->c);
	w->c = NULL;
	w->retry_at = mono_now() + RETRY_EVERY;
}

/* A message from sentinel ctx (its address): a +switch-master of our master moves us. */
static void on_switch(void *ctx, const char *channel, const char *msg)
{
	char host[256];
	int port;
	(void)channel;
	if (sentinel_parse_switch(msg, watch_rc.master_name, host, sizeof host, &port) &&
	    sentinel_switched(host, port))
		log_info("Redis Sentinel: +switch-master from %s: the primary of %s is now %s:%d; "
		         "reconnecting", (const char *)ctx, watch_rc.master_name, host, port);
}


static void *watch_main(void *arg)
{
	(void)arg;
	int n = watch_rc.sentinels.n;
	struct watched *w = xcalloc((size_t)n, sizeof *w);
	struct pollfd *pfd = xcalloc((size_t)n, sizeof *pfd);
	int *of = xcalloc((size_t)n, sizeof *of);

	while (!atomic_load(&watch_stop)) {
		int k = 0;
		for (int i = 0; i < n && !atomic_load(&watch_stop); i++) {
			if (!w[i].c && mono_now() >= w[i].retry_at) {
				subscribe(&w[i], i);
				/* What came in the same read as the reply (rsub_messages). */
				if (w[i].c && rsub_messages(w[i].c, on_switch,
				                            (void *)watch_rc.sentinels.v[i]) != 0)
					lose(&w[i], i);
			}
			if (w[i].c) {
				pfd[k] = (struct pollfd){ .fd = rlink_fd(w[i].c), .events = POLLIN };
				of[k++] = i;
			}
		}
		if (k == 0) {
			sleep_seconds(0.25);
			continue;
		}
		if (poll(pfd, (nfds_t)k, 250) <= 0)
			continue;
		for (int j = 0; j < k; j++) {
			int i = of[j];
			if (!(pfd[j].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			if (rsub_read(w[i].c, on_switch, (void *)watch_rc.sentinels.v[i]) != 0)
				lose(&w[i], i);
		}
	}
	for (int i = 0; i < n; i++)
		rlink_close(w[i].c);
	free(w);
	free(pfd);
	free(of);
	return NULL;
}

int sentinel_watch_start(const struct conf *c)
{
	if (c->redis.sentinels.n == 0)
		return 0;
	redis_conf_copy(&watch_rc, &c->redis);
	atomic_store(&watch_stop, 0);
	if (thread_start(&watch_thread, NULL, "sentinel watch", watch_main, NULL) != 0) {
		redis_conf_clear(&watch_rc);
		return -1;
	}
	watch_running = 1;
	return 0;
}

void sentinel_watch_stop(void)
{
	if (!watch_running)
		return;
	atomic_store(&watch_stop, 1);
	/* Bounded: the loop polls every 250 ms, and a connect is bounded by its timeout. */
	pthread_join(watch_thread, NULL);
	redis_conf_clear(&watch_rc);
	watch_running = 0;
}
