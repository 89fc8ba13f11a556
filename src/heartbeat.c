/* SPDX-License-Identifier: MIT */
/*
 * heartbeat.c: presence (doc/protocol.md §7.12) and the remote-control subscriber (§7.13):
 * quiet, resume, stop, and cancel of a running job.
 *
 * A beat writes the presence hash first and alone decides on it: only that write is
 * mandatory. The registry writes that follow (processes, queues, live_queues, workers TTL,
 * inprogress_identities, last_beat) are each allowed to fail with a command error, which
 * is only logged: one shared key of the wrong type must not stop every process everywhere
 * from starting (lesson 45). last_beat and live_queues use Redis's clock, so that hosts
 * with skewed clocks agree on who is dead (TIME refused: the host clock, lesson 46).
 *
 * The subscriber has its own connection and never blocks without a bound: it polls the
 * socket every 250 ms, so stopping it is quick and it is stopped *before* its connection is
 * closed (closing first hung the stop, lesson 47).
 */
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include "admission.h"
#include "counters.h"
#include "heartbeat.h"
#include "json.h"
#include "keys.h"
#include "recovery.h"
#include "settle.h"
#include "state.h"
#include "util.h"

static struct log_site beat_site = LOG_SITE("Heartbeat");

static long rss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (strncmp(line, "VmRSS:", 6) == 0)
			kb = strtol(line + 6, NULL, 10);
	fclose(f);
	return kb;
}

static char *info_json(const struct conf *c)
{
	struct sbuf b;
	char started[32];
	sb_init(&b);
	char *host = json_quote(D.hostname, strlen(D.hostname));
	snprintf(started, sizeof started, "%.6f", D.started_at);
	sb_printf(&b, "{\"hostname\":%s,\"pid\":%d,\"concurrency\":%d,\"queues\":[", host,
	          (int)getpid(), c->concurrency);
	for (int i = 0; i < c->nqueue_names; i++) {
		char *q = json_quote(c->queue_names[i], strlen(c->queue_names[i]));
		sb_printf(&b, "%s%s", i ? "," : "", q);
		free(q);
	}
	long rss = rss_kb();
	if (rss >= 0)
		sb_printf(&b, "],\"started_at\":%s,\"rss_kb\":%ld", started, rss);
	else
		sb_printf(&b, "],\"started_at\":%s,\"rss_kb\":null", started);
	sb_printf(&b, ",\"warm\":%d}", atomic_load(&warm_processes_live));
	free(host);
	return sb_steal(&b);
}

/* 0 written, 1 written where there was none (HSET added its fields), -1 failed. */
static int presence_write(struct rconn *r, const struct conf *c)
{
	char *key = xasprintf(K_PROCESS "%s", D.identity);
	char *info = info_json(c);
	char busy[16], ttl[32];
	snprintf(busy, sizeof busy, "%d", atomic_load(&D.busy));
	snprintf(ttl, sizeof ttl, "%ld", (long)c->process_ttl);
	const char *quiet = atomic_load(&D.quiet) ? "true" : "false";
	struct rpipe p;
	redisReply *rep[2];
	rpipe_begin(r, &p);
	const char *hset[] = { "HSET", key, "info", info, "busy", busy, "quiet", quiet };
	rpipe_add_argv(r, &p, 8, hset, NULL);
	rpipe_add(r, &p, "EXPIRE %s %s", key, ttl);
	int failures = rpipe_exec(r, &p, rep);
	int created = rep[0] && rep[0]->type == REDIS_REPLY_INTEGER && rep[0]->integer == 3;
	for (int i = 0; i < 2; i++)
		if (rep[i])
			freeReplyObject(rep[i]);
	free(key);
	free(info);
	return failures != 0 ? -1 : created;
}

/* The registry writes; -1 only for an availability error. */
static int registry_write(struct rconn *r, const struct conf *c)
{
	double t = redis_time(r);
	if (t < 0)
		return -1;
	r->err[0] = '\0';
	int reliable = !c->fetch_basic && atomic_load(&D.fetch_mode) != FETCH_BASIC;
	char now[32], cutoff[32], ttl[32];
	snprintf(now, sizeof now, "%ld", (long)t);
	snprintf(cutoff, sizeof cutoff, "%ld", (long)t - 86400);
	snprintf(ttl, sizeof ttl, "%ld", (long)c->process_ttl);
	char *workers = xasprintf(K_WORKERS "%s", D.identity);
	int n = 0;
	redisReply *rep[8];
	struct rpipe p;
	rpipe_begin(r, &p);
	rpipe_add(r, &p, "SADD %s %s", K_PROCESSES, D.identity);
	const char **argv = xcalloc((size_t)c->nqueue_names * 2 + 2, sizeof *argv);
	argv[0] = "SADD";
	argv[1] = K_QUEUES;
	for (int i = 0; i < c->nqueue_names; i++)
		argv[2 + i] = c->queue_names[i];
	rpipe_add_argv(r, &p, 2 + c->nqueue_names, argv, NULL);
	argv[0] = "ZADD";
	argv[1] = K_LIVE_QUEUES;
	for (int i = 0; i < c->nqueue_names; i++) {
		argv[2 + 2 * i] = now;
		argv[3 + 2 * i] = c->queue_names[i];
	}
	rpipe_add_argv(r, &p, 2 + 2 * c->nqueue_names, argv, NULL);
	rpipe_add(r, &p, "ZREMRANGEBYSCORE %s -inf %s", K_LIVE_QUEUES, cutoff);
	rpipe_add(r, &p, "EXPIRE %s %s", workers, ttl);
	if (reliable) {
		rpipe_add(r, &p, "SADD %s %s", K_IDENTITIES, D.identity);
		rpipe_add(r, &p, "HSET %s %s %s", K_LAST_BEAT, D.identity, now);
	}
	n = p.n;
	rpipe_exec(r, &p, rep);
	int unavailable = p.unavailable > 0;
	for (int i = 0; i < n; i++) {
		if (rep[i])
			freeReplyObject(rep[i]);
	}
	if (!unavailable && r->err[0] && !r->unavailable)
		log_error("process registry not written: %s", r->err);
	free(argv);
	free(workers);
	return unavailable ? -1 : 0;
}

/* Is the child of this jid still running? Checked again right before each lock call, so
 * a run that ended since the snapshot is not refreshed (let alone re-taken: that would
 * resurrect the lock its fetcher just released, lesson 64). */
static int still_performing(const char *jid)
{
	int found = 0;
	pthread_mutex_lock(&D.mu);
	for (int i = 0; i < D.nperforming && !found; i++)
		found = D.performing[i].jid && strcmp(D.performing[i].jid, jid) == 0;
	pthread_mutex_unlock(&D.mu);
	return found;
}

/* Keep the running locks of performing periodic jobs alive (lessons 63, 64). */
static void refresh_running_locks(struct rconn *r, const struct conf *c, int retake)
{
	long ttl = conf_active_ttl(c);
	char t[32];
	snprintf(t, sizeof t, "%ld", ttl);
	pthread_mutex_lock(&D.mu);
	int n = D.nperforming;
	struct raw_count *copy = xcalloc((size_t)n + 1, sizeof *copy);
	for (int i = 0; i < n; i++) {
		copy[i].jid = D.performing[i].jid ? xstrdup(D.performing[i].jid) : NULL;
		copy[i].pjid = D.performing[i].pjid ? xstrdup(D.performing[i].pjid) : NULL;
		copy[i].until_executed = D.performing[i].until_executed;
	}
	pthread_mutex_unlock(&D.mu);
	for (int i = 0; i < n; i++) {
		if (copy[i].pjid && copy[i].jid && still_performing(copy[i].jid)) {
			char *key = xasprintf(K_RUNNING "%s", copy[i].pjid);
			if (retake && copy[i].until_executed) {
				const char *keys[] = { key };
				const char *args[] = { copy[i].jid, t };
				redisReply *rep = rscript(r, "retake", 1, keys, 2, args, NULL);
				if (rep)
					freeReplyObject(rep);
				else
					log_error("running lock %s not re-taken: %s", key, r->err);
			} else {
				expire_owned(r, key, copy[i].jid, ttl);
			}
			free(key);
		}
		free(copy[i].jid);
		free(copy[i].pjid);
	}
	free(copy);
}

/*
 * The presence written where there was none, although an earlier beat wrote it: Redis lost
 * this process's keys (restarted without persistence, flushed, a failover to a replica
 * that lagged) or its beats failed for longer than process_ttl. What a beat renews is
 * written again as after a failed beat (locks re-taken, fleet slots re-added), and the jobs
 * running here are filed again (refile_own) until that succeeds. Manager thread only.
 */
static int beaten, refile_owed;

static int keys_lost(int written)
{
	if (written != 1 || !beaten)
		return 0;
	log_warn("this process's presence was gone from Redis (a restart without persistence, "
	         "a flush, or beats failing for longer than process_ttl): written again, and "
	         "the jobs running here are filed again where they are missing");
	refile_owed = 1;
	return 1;
}

int heartbeat_beat(struct rconn *r)
{
	struct conf *c = conf_acquire();
	r->err[0] = '\0';
	int written = presence_write(r, c);
	int ok = written >= 0, lost = keys_lost(written);
	if (ok) {
		r->err[0] = '\0';
		ok = registry_write(r, c) == 0;
	}
	if (ok) {
		int retake = atomic_load(&D.prev_beat_failed) || lost;
		refresh_running_locks(r, c, retake);
		/* Fleet slots live as long as their holder beats (doc/protocol.md §7.30); the
		 * at-most-once classes are for whoever recovers our jobs (§7.32). */
		limits_refresh_leases(r, c->process_ttl, retake);
		at_most_once_publish(r, c);
		waiting_publish(r, 1);
		if (refile_owed && refile_own(r) >= 0)
			refile_owed = 0;
		deferred_releases_retry(r);
		beaten = 1;
	}
	conf_release(c);
	site_result(&beat_site, r, ok, "beat failed");
	atomic_store(&D.prev_beat_failed, !ok);
	return ok ? 0 : -1;
}

/*
 * The waiting jobs live in memory (admission.c); cogworkerctl shows them from this key. Its
 * own key, not a field of the presence hash: the beat tells "Redis came back empty" from a
 * presence hash it has to create whole, which a write between beats must not do. Written
 * when the list changed (within a second, as the workers entries are), and on each beat
 * while jobs wait, so the TTL (process_ttl) outlives no crash and a Redis that came back
 * empty gets it again; DEL when none wait. Only the manager thread calls this.
 */
void waiting_publish(struct rconn *r, int beat)
{
	static unsigned long published = ULONG_MAX;
	unsigned long gen;
	int n;
	char *list = limits_waiting_json(&gen, &n);
	if (gen != published || (beat && n > 0)) {
		struct conf *c = conf_acquire();
		char ttl[32];
		snprintf(ttl, sizeof ttl, "%ld", (long)c->process_ttl);
		conf_release(c);
		char *key = xasprintf(K_WAITING "%s", D.identity);
		const char *set[] = { "SET", key, list, "EX", ttl };
		const char *del[] = { "DEL", key };
		redisReply *rep = n > 0 ? rcmd_argv(r, 5, set, NULL) : rcmd_argv(r, 2, del, NULL);
		if (rep) {
			published = gen;
			freeReplyObject(rep);
		} else if (!r->unavailable) {
			log_error("%s not written: %s", key, r->err);
		}
		free(key);
	}
	free(list);
}

void presence_remove(struct rconn *r)
{
	char *process = xasprintf(K_PROCESS "%s", D.identity);
	char *workers = xasprintf(K_WORKERS "%s", D.identity);
	char *list = xasprintf(K_INPROGRESS "%s", D.identity);
	char *waiting = xasprintf(K_WAITING "%s", D.identity);
	struct rpipe p;
	redisReply *rep[5];
	rpipe_begin(r, &p);
	rpipe_add(r, &p, "DEL %s", process);
	rpipe_add(r, &p, "DEL %s", workers);
	rpipe_add(r, &p, "SREM %s %s", K_PROCESSES, D.identity);
	rpipe_add(r, &p, "LLEN %s", list);
	rpipe_add(r, &p, "DEL %s", waiting);
	rpipe_exec(r, &p, rep);
	free(waiting);
	int empty = rep[3] && rep[3]->type == REDIS_REPLY_INTEGER && rep[3]->integer == 0;
	for (int i = 0; i < 5; i++)
		if (rep[i])
			freeReplyObject(rep[i]);
	if (empty) {
		/* A non-empty list stays registered, so others recover it after the threshold. */
		char *once = xasprintf(K_AT_MOST_ONCE "%s", D.identity);
		redisReply *a = rcmd(r, "SREM %s %s", K_IDENTITIES, D.identity);
		redisReply *b = rcmd(r, "HDEL %s %s", K_LAST_BEAT, D.identity);
		redisReply *d = rcmd(r, "DEL %s", once);
		if (a)
			freeReplyObject(a);
		if (b)
			freeReplyObject(b);
		if (d)
			freeReplyObject(d);
		free(once);
	}
	free(process);
	free(workers);
	free(list);
}

/* ---- subscriber ---- */

static pthread_t sub_thread;
static atomic_int sub_stop;
static atomic_int sub_running;

static void wake_manager(int request)
{
	atomic_store(&D.remote_request, request);
	uint64_t one = 1;
	if (write(D.wake_fd, &one, sizeof one) < 0)
		log_error("couldn't wake the manager");
}

/*
 * "cancel <jid>" or "cancel <jid> discard" (cogworkerctl jobs cancel): a daemon addition
 * to the channel. cogworkerctl sends it only to the process whose workers hash shows the
 * job; a Ruby cogworker process logs an unknown message and carries on, and cogworkerctl,
 * seeing the job still running, says the cancel was not acted on. The fetcher running
 * the job does the stopping and the settling; here the flag is only raised.
 */
static int on_cancel(const char *msg)
{
	char jid[64], how[16] = "";
	if (sscanf(msg, "cancel %63s %15s", jid, how) < 1 || (how[0] && strcmp(how, "discard")))
		return 0;
	int n = cancel_request(jid, how[0] ? CANCEL_DISCARD : CANCEL_DEAD);
	if (n)
		log_warn("cancel: jid=%s: stopping its process group (then %s)", jid,
		         how[0] ? "discarded" : "dead");
	else
		log_info("cancel: jid=%s is not running here (finished already?)", jid);
	return 1;
}

static void on_message(const char *msg)
{
	if (strncmp(msg, "cancel ", 7) == 0 && on_cancel(msg))
		return;
	if (strcmp(msg, "quiet") == 0)
		wake_manager(1);
	else if (strcmp(msg, "resume") == 0)
		wake_manager(2);
	else if (strcmp(msg, "stop") == 0)
		wake_manager(3);
	else
		log_warn("unknown message on %s%s: %s", K_SIGNAL, D.identity, msg);
}

static void on_signal(void *ctx, const char *channel, const char *msg)
{
	(void)ctx;
	(void)channel;
	on_message(msg);
}

static void *subscriber_main(void *arg)
{
	struct rconn *r = arg;
	struct log_site site = LOG_SITE("Subscriber");
	char *channel = xasprintf(K_SIGNAL "%s", D.identity);
	while (!atomic_load(&sub_stop)) {
		redisReply *rep = rcmd(r, "SUBSCRIBE %s", channel);
		if (!rep) {
			site_result(&site, r, 0, "subscribe");
			for (int i = 0; i < 4 && !atomic_load(&sub_stop); i++)
				sleep_seconds(0.25);
			continue;
		}
		freeReplyObject(rep);
		site_result(&site, r, 1, "subscribe");
		/* What came in the same read as the reply (rsub_messages). */
		int lost = rsub_messages(r->link, on_signal, NULL) != 0;
		while (!lost && !atomic_load(&sub_stop)) {
			/* A switch was announced: a demoted primary may keep this connection, but the
			 * messages now go to the new one (Sentinel only). */
			if (rconn_stale(r)) {
				rconn_close(r);
				break;
			}
			struct pollfd pfd = { .fd = rlink_fd(r->link), .events = POLLIN };
			int n = poll(&pfd, 1, 250);
			if (n == 0)
				continue;
			if (n < 0 || rsub_read(r->link, on_signal, NULL) != 0)
				lost = 1;
		}
		if (lost) {
			snprintf(r->err, sizeof r->err, "subscription lost: %s",
			         rlink_error(r->link)[0] ? rlink_error(r->link) : "connection closed");
			r->unavailable = 1;
			site_result(&site, r, 0, "subscribe");
			rconn_close(r);
		}
	}
	free(channel);
	return NULL;
}

static struct rconn sub_conn;

int subscriber_start(void)
{
	struct conf *c = conf_acquire();
	rconn_init(&sub_conn, &c->redis);
	conf_release(c);
	atomic_store(&sub_stop, 0);
	if (thread_start(&sub_thread, NULL, "subscriber", subscriber_main, &sub_conn) != 0)
		return -1;
	atomic_store(&sub_running, 1);
	return 0;
}

void subscriber_stop(void)
{
	if (!atomic_load(&sub_running))
		return;
	atomic_store(&sub_stop, 1);
	/* Bounded: the loop polls every 250 ms, and a reconnect is bounded by its timeouts. */
	pthread_join(sub_thread, NULL);
	rconn_free(&sub_conn);
	atomic_store(&sub_running, 0);
}
