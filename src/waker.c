/* SPDX-License-Identifier: MIT */
/*
 * waker.c: the waker thread, which wakes the others when what they wait for happens, so
 * that they can wait long without looking (doc/protocol.md §7.9, §7.14, doc/design.md
 * "Process shape").
 *
 * - Parked fetchers block up to IDLE_BLOCK in BLMOVE/BRPOP. When one must see a change
 *   sooner (quiet, stop, a pause or resume, a queue left unwatched: park.c marks it), this
 *   thread sends CLIENT UNBLOCK to its connection, retrying every 10 ms while the answer is
 *   0 (the blocking call may not have reached Redis yet), so no wake-up is lost. Whether
 *   CLIENT UNBLOCK is allowed is probed (CLIENT UNBLOCK 0: "no such client") on every new
 *   connection; without it park.c keeps blocks short, as they were.
 * - While one of our queues is paused, it reads the paused set every PAUSED_POLL (50 ms
 *   right after a change, doubling), so a resume takes effect within a second without
 *   every fetcher polling.
 * - Keyspace notifications, when the server has them on (read with CONFIG GET every 60 s;
 *   the server's configuration is never changed): with `K` and list events it listens for
 *   pushes on our queues when there are fewer fetchers than queues (one parked fetcher is
 *   unblocked to take a job of a queue nobody watches: milliseconds instead of a rotation);
 *   with zset events for writes to cogworker:schedule and cogworker:retry (the poller looks
 *   at the heads at once, poller_kick); with set and generic events for the paused set (no
 *   polling). Keyspace channels name one key each, so only our keys' events are sent here.
 *   A refused CONFIG GET (ACL, a managed Redis) reads as "off".
 *
 * Two connections of its own: `cmd` for commands, `sub` for the subscription (a subscribed
 * RESP2 connection takes no other command). With Redis Sentinel, a switch of the primary
 * makes it subscribe again, on the new one. The thread is never joined: it must keep
 * unblocking during the stop, and is abandoned with the poller and the ticker.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "keys.h"
#include "park.h"
#include "scheduled.h"
#include "sentinel.h"
#include "state.h"
#include "util.h"
#include "waker.h"

#define CONFIG_EVERY 60.0
#define PAUSED_POLL 0.5
#define PAUSED_POLL_FIRST 0.05  /* right after a change: a quick resume is seen quickly */
#define UNBLOCK_RETRY 0.01

struct waker {
	struct rconn cmd, sub;
	struct log_site site;
	int probed;                 /* cmd.connects at the last CLIENT UNBLOCK probe */
	char flags[64];             /* notify-keyspace-events as last read */
	double next_config, next_paused, retry_at;      /* monotonic */
	double paused_every;        /* the current paused-set poll: doubles up to PAUSED_POLL */
	unsigned paused_gen;        /* park_paused_gen() when it was last set */
	int want_q, want_z, want_s; /* channel groups wanted ... */
	int has_q, has_z, has_s;    /* ... and subscribed */
	int few_fetchers;           /* fewer fetchers than queues: pushes are worth hearing */
	char **queues;
	int nqueues;
	char *prefix;               /* __keyspace@<db>__: */
	int sentinel;               /* redis.sentinels set: follow a switch of the primary */
	unsigned generation;        /* sentinel_generation() the subscription was made at */
};

static struct waker W;

static int flag(const char *flags, char c)
{
	return strchr(flags, c) != NULL;
}

/* What the server's notify-keyspace-events lets us hear (keyspace channels need K; A is
 * every class but key-miss and new-key). */
static void wanted(struct waker *w)
{
	const char *f = w->flags;
	int k = flag(f, 'K'), a = flag(f, 'A');
	w->want_q = k && (a || flag(f, 'l')) && w->few_fetchers;
	w->want_z = k && (a || flag(f, 'z'));
	w->want_s = k && (a || (flag(f, 's') && flag(f, 'g')));
}

/* CLIENT UNBLOCK allowed here, and the notification flags; every CONFIG_EVERY. 0 done,
 * -1 Redis away (probe again soon). */
static int probe(struct waker *w)
{
	redisReply *rep = rcmd(&w->cmd, "CLIENT UNBLOCK 0");
	if (rep || !w->cmd.unavailable) {
		int ok = rep && rep->type == REDIS_REPLY_INTEGER;
		park_set_unblock_ok(ok);
		if (!ok)
			log_info("CLIENT UNBLOCK refused (%s): idle fetchers block %gs at a time",
			         w->cmd.err, FETCH_TIMEOUT);
		w->probed = w->cmd.connects;
	}
	if (rep)
		freeReplyObject(rep);
	rep = rcmd(&w->cmd, "CONFIG GET notify-keyspace-events");
	if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
	    rep->element[1]->type == REDIS_REPLY_STRING)
		snprintf(w->flags, sizeof w->flags, "%s", rep->element[1]->str);
	else if (rep || !w->cmd.unavailable)
		w->flags[0] = '\0';             /* refused: we cannot know, so none */
	if (rep)
		freeReplyObject(rep);
	wanted(w);
	return w->probed == w->cmd.connects && w->cmd.link ? 0 : -1;
}

static void read_paused(struct waker *w)
{
	redisReply *rep = rcmd(&w->cmd, "SMEMBERS %s", K_PAUSED);
	if (rep || !w->cmd.unavailable)
		park_paused_update(rep);
	if (rep)
		freeReplyObject(rep);
}

static void unsubscribed(struct waker *w)
{
	rconn_close(&w->sub);
	w->has_q = w->has_z = w->has_s = 0;
	park_set_notify(0);
}

/* (Re)subscribe to what is wanted: one SUBSCRIBE on a fresh connection. 1 if it did. */
static int subscribe(struct waker *w)
{
	int none = !w->want_q && !w->want_z && !w->want_s;
	if (w->has_q == w->want_q && w->has_z == w->want_z && w->has_s == w->want_s &&
	    (w->sub.link || none))
		return 0;
	unsubscribed(w);
	if (none)
		return 0;
	const char **argv = xcalloc((size_t)w->nqueues + 5, sizeof *argv);
	int n = 0;
	argv[n++] = "SUBSCRIBE";
	for (int i = 0; w->want_q && i < w->nqueues; i++)
		argv[n++] = xasprintf("%s" K_QUEUE "%s", w->prefix, w->queues[i]);
	if (w->want_z) {
		argv[n++] = xasprintf("%s" K_SCHEDULE, w->prefix);
		argv[n++] = xasprintf("%s" K_RETRY, w->prefix);
	}
	if (w->want_s)
		argv[n++] = xasprintf("%s" K_PAUSED, w->prefix);
	redisReply *rep = rcmd_argv(&w->sub, n, argv, NULL);
	for (int i = 1; i < n; i++)
		free((char *)argv[i]);
	free(argv);
	if (!rep) {
		site_result(&w->site, &w->sub, 0, "keyspace subscription");
		rconn_close(&w->sub);
		return 0;
	}
	freeReplyObject(rep);               /* the other confirmations are drained as they come */
	site_result(&w->site, &w->sub, 1, "keyspace subscription");
	w->has_q = w->want_q;
	w->has_z = w->want_z;
	w->has_s = w->want_s;
	park_set_notify(w->has_q);
	log_info("keyspace notifications (%s) used for:%s%s%s", w->flags, w->has_q ? " queues" : "",
	         w->has_z ? " schedule/retry" : "", w->has_s ? " paused queues" : "");
	if (w->has_z)
		poller_kick();                  /* a write since the last look was not heard */
	if (w->has_s)
		w->next_paused = 0;
	return 1;
}

static void on_event(void *ctx, const char *channel, const char *event)
{
	struct waker *w = ctx;
	size_t pl = strlen(w->prefix);
	if (strncmp(channel, w->prefix, pl) != 0)
		return;
	const char *key = channel + pl;
	if (strcmp(key, K_SCHEDULE) == 0 || strcmp(key, K_RETRY) == 0) {
		if (strcmp(event, "zadd") == 0 || strcmp(event, "zincr") == 0)
			poller_kick();
	} else if (strcmp(key, K_PAUSED) == 0) {
		w->next_paused = 0;             /* read it now */
	} else if (strncmp(key, K_QUEUE, strlen(K_QUEUE)) == 0) {
		if (strcmp(event, "lpush") == 0 || strcmp(event, "rpush") == 0 ||
		    strcmp(event, "linsert") == 0)
			park_queue_pushed(key + strlen(K_QUEUE));
	}
}

static void subscription_lost(struct waker *w)
{
	snprintf(w->sub.err, sizeof w->sub.err, "keyspace subscription lost: %s",
	         rlink_error(w->sub.link)[0] ? rlink_error(w->sub.link) : "connection closed");
	w->sub.unavailable = 1;
	site_result(&w->site, &w->sub, 0, "keyspace subscription");
	unsubscribed(w);
}

static void *waker_main(void *arg)
{
	struct waker *w = arg;
	for (;;) {
		double now = mono_now();
		if (now >= w->next_config || (w->cmd.link && w->cmd.connects != w->probed)) {
			w->next_config = now + (probe(w) == 0 ? CONFIG_EVERY : 1.0);
		}
		if (w->sentinel && sentinel_generation() != w->generation) {
			/* A new primary: the subscription was on the old one, and what it allows
			 * may differ; the commands reconnect by themselves at their next call. */
			w->generation = sentinel_generation();
			unsubscribed(w);
			w->next_config = 0;
			continue;
		}
		/* What came in the same read as the SUBSCRIBE's reply (rsub_messages). */
		if (subscribe(w) && rsub_messages(w->sub.link, on_event, w) != 0)
			subscription_lost(w);
		int owed = park_unblock(&w->cmd);
		w->retry_at = owed > 0 ? now + UNBLOCK_RETRY : 1e300;
		if (owed < 0 && !w->cmd.unavailable) {
			park_set_unblock_ok(0);
			log_error("CLIENT UNBLOCK failed: %s", w->cmd.err);
		}
		if (park_paused_gen() != w->paused_gen) {
			w->paused_gen = park_paused_gen();
			w->paused_every = PAUSED_POLL_FIRST;
			if (w->next_paused > mono_now() + PAUSED_POLL_FIRST)
				w->next_paused = mono_now() + PAUSED_POLL_FIRST;
		}
		int paused = park_any_paused() || w->next_paused == 0;
		if (paused && mono_now() >= w->next_paused) {
			w->next_paused = mono_now() + w->paused_every;
			w->paused_every = w->paused_every * 2 < PAUSED_POLL ? w->paused_every * 2
			                  : PAUSED_POLL;
			read_paused(w);
		}
		double wake = w->next_config < w->retry_at ? w->next_config : w->retry_at;
		if (park_any_paused() && !w->has_s && w->next_paused < wake)
			wake = w->next_paused;
		if ((!w->cmd.link || w->sentinel) && wake > mono_now() + 1.0)
			wake = mono_now() + 1.0;    /* Redis away: probe again soon; or a switch */
		struct pollfd pfd[2] = { { park_kick_fd(), POLLIN, 0 }, { -1, POLLIN, 0 } };
		if (w->sub.link)
			pfd[1].fd = rlink_fd(w->sub.link);
		double left = wake - mono_now();
		int ms = left <= 0 ? 0 : left > 60 ? 60000 : (int)(left * 1000) + 1;
		if (poll(pfd, 2, ms) <= 0)
			continue;
		if (pfd[0].revents & POLLIN) {
			uint64_t v;
			if (read(pfd[0].fd, &v, sizeof v) < 0)
				v = 0;
		}
		if (w->sub.link && (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)) &&
		    rsub_read(w->sub.link, on_event, w) != 0)
			subscription_lost(w);
	}
	return NULL;
}

int waker_start(void)
{
	struct conf *c = conf_acquire();
	rconn_init(&W.cmd, &c->redis);
	rconn_init(&W.sub, &c->redis);
	W.site = (struct log_site)LOG_SITE("Waker");
	W.prefix = xasprintf("__keyspace@%d__:", c->redis.db);
	W.queues = xcalloc((size_t)c->nqueue_names + 1, sizeof *W.queues);
	for (int i = 0; i < c->nqueue_names; i++)      /* fixed until the restart */
		W.queues[i] = xstrdup(c->queue_names[i]);
	W.nqueues = c->nqueue_names;
	W.few_fetchers = c->concurrency < c->nqueue_names;
	W.sentinel = c->redis.sentinels.n > 0;
	W.generation = sentinel_generation();
	W.probed = -1;
	W.paused_every = PAUSED_POLL;
	conf_release(c);
	return thread_start_detached("waker", waker_main, &W);
}
