/* SPDX-License-Identifier: MIT */
/*
 * keyguard.c: the KeyGuard (doc/protocol.md §7.15), run by the scheduled poller on its first poll
 * and then every 60 s.
 *
 * Why it exists: a key of the wrong type (a string where cogworker keeps a zset, say)
 * fails every command on it, deterministically and forever: every failure filing, every
 * beat, every fetch of that queue (lesson 74). Nothing in the fleet fixes itself unless
 * someone moves the damaged key out of the way. So every key the protocol knows the type
 * of is checked, and a wrong one is *renamed* (never deleted: an operator may want its
 * content) to cogworker:quarantine:<key>:<epoch ms>:<8 hex>, kept 30 days. The next write
 * creates a fresh key of the right type and the system heals itself.
 *
 * How:
 * 1. The watched keys: the fixed ones, plus the computed ones read from the listings
 *    (queues, in-progress registry, processes, periodic schedule). A listing key that is
 *    itself of the wrong type answers WRONGTYPE and contributes nothing this round; its
 *    own TYPE check quarantines it.
 * 2. One pipeline of TYPE for all of them: a few hundred keys cost one round trip.
 * 3. A wrong one goes through the QUARANTINE script, which re-checks the type atomically
 *    (a key fixed or recreated meanwhile is left alone). The name carries milliseconds
 *    and randomness, so two quarantines in one second never overwrite each other.
 * 4. Older copies of that key beyond the 5 newest are deleted. They are found by a SCAN of
 *    the glob-escaped prefix, keeping only names that are exactly <prefix><digits>:<8 hex>,
 *    so copies of cogworker:queue:a:b are not taken for copies of cogworker:queue:a, nor
 *    the unsettled-records list for a copy of cogworker:unsettled.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "counters.h"
#include "keyguard.h"
#include "keys.h"
#include "state.h"
#include "util.h"

#define QUARANTINE_TTL "2592000"
#define MAX_COPIES 5

struct watched {
	char *key;
	const char *type;
};

struct watchlist {
	struct watched *v;
	int n, cap;
};

static const struct {
	const char *key, *type;
} fixed_keys[] = {
	{ K_SCHEDULE, "zset" }, { K_RETRY, "zset" }, { K_DEAD, "zset" },
	{ K_LIVE_QUEUES, "zset" },
	{ K_QUEUES, "set" }, { K_PROCESSES, "set" }, { K_PAUSED, "set" },
	{ K_IDENTITIES, "set" }, { K_DISABLED, "set" },
	{ K_LAST_BEAT, "hash" }, { K_PERIODIC_SCHEDULE, "hash" },
	{ K_REPEAT_ORPHANS, "list" }, { K_UNSETTLED, "list" },
	{ K_LIMITS, "hash" }, { K_AT_MOST_ONCE_ORPHANS, "list" },
	{ K_PROCESSED, "string" }, { K_FAILED, "string" },
};

static void watch(struct watchlist *w, const char *prefix, const char *name, const char *type)
{
	char *key = xasprintf("%s%s", prefix, name);
	if (w->n == w->cap) {
		w->cap = w->cap ? w->cap * 2 : 64;
		w->v = xrealloc(w->v, (size_t)w->cap * sizeof *w->v);
	}
	w->v[w->n].key = key;
	w->v[w->n].type = type;
	w->n++;
}

static void watchlist_free(struct watchlist *w)
{
	for (int i = 0; i < w->n; i++)
		free(w->v[i].key);
	free(w->v);
}

static int in_names(char **names, int n, const char *s)
{
	for (int i = 0; i < n; i++)
		if (strcmp(names[i], s) == 0)
			return 1;
	return 0;
}

/* Every member of a listing reply, each as prefix + member, with one type; members in
 * skip (the configured queues, already watched) are left out. */
static void watch_members(struct watchlist *w, const redisReply *rep, const char *prefix,
                          const char *type, char **skip, int nskip)
{
	if (!rep || rep->type != REDIS_REPLY_ARRAY)
		return;                 /* wrong-typed listing: contributes nothing this round */
	for (size_t i = 0; i < rep->elements; i++)
		if (rep->element[i]->type == REDIS_REPLY_STRING &&
		    !in_names(skip, nskip, rep->element[i]->str))
			watch(w, prefix, rep->element[i]->str, type);
}

/* Build the list of watched keys; -1 on an availability error. */
static int build_watchlist(struct rconn *r, struct watchlist *w)
{
	for (size_t i = 0; i < sizeof fixed_keys / sizeof *fixed_keys; i++)
		watch(w, "", fixed_keys[i].key, fixed_keys[i].type);
	struct conf *c = conf_acquire();
	for (int i = 0; i < c->nqueue_names; i++)
		watch(w, K_QUEUE, c->queue_names[i], "list");
	struct rpipe p;
	redisReply *rep[4];
	rpipe_begin(r, &p);
	rpipe_add(r, &p, "SMEMBERS %s", K_QUEUES);
	rpipe_add(r, &p, "SMEMBERS %s", K_IDENTITIES);
	rpipe_add(r, &p, "SMEMBERS %s", K_PROCESSES);
	rpipe_add(r, &p, "HKEYS %s", K_PERIODIC_SCHEDULE);
	rpipe_exec(r, &p, rep);
	watch_members(w, rep[0], K_QUEUE, "list", c->queue_names, c->nqueue_names);
	watch_members(w, rep[1], K_INPROGRESS, "list", NULL, 0);
	watch_members(w, rep[2], K_PROCESS, "hash", NULL, 0);
	watch_members(w, rep[2], K_WORKERS, "hash", NULL, 0);
	watch_members(w, rep[3], K_RUNNING, "string", NULL, 0);
	watch_members(w, rep[3], K_LAST_SLOT, "string", NULL, 0);
	conf_release(c);
	for (int i = 0; i < 4; i++)
		if (rep[i])
			freeReplyObject(rep[i]);
	return p.unavailable ? -1 : 0;
}

/* The ms stamp of name if it is exactly <prefix><digits>:<8 hex>, else -1. */
static long long copy_stamp(const char *name, const char *prefix)
{
	size_t pl = strlen(prefix);
	if (strncmp(name, prefix, pl) != 0)
		return -1;
	const char *s = name + pl, *d = s;
	while (*d >= '0' && *d <= '9')
		d++;
	if (d == s || *d != ':' || strlen(d + 1) != 8)
		return -1;
	for (const char *h = d + 1; *h; h++)
		if (!((*h >= '0' && *h <= '9') || (*h >= 'a' && *h <= 'f')))
			return -1;
	return strtoll(s, NULL, 10);
}

struct copy {
	char *name;
	long long stamp;
};

static int newest_first(const void *a, const void *b)
{
	const struct copy *x = a, *y = b;
	if (x->stamp != y->stamp)
		return x->stamp < y->stamp ? 1 : -1;
	return -strcmp(x->name, y->name);
}

/* Keep the MAX_COPIES newest quarantined copies of key, delete the others. */
static void prune_copies(struct rconn *r, const char *key)
{
	char *prefix = xasprintf(K_QUARANTINE "%s:", key);
	char *esc = redis_glob_escape(prefix);
	char *match = xasprintf("%s*", esc);
	struct copy *v = NULL;
	int n = 0, cap = 0;
	char cursor[32] = "0";
	do {
		redisReply *rep = rcmd(r, "SCAN %s MATCH %s COUNT 1000", cursor, match);
		if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != 2) {
			if (rep)
				freeReplyObject(rep);
			log_error("Key check: couldn't prune old copies of %s: %s", key, r->err);
			goto out;
		}
		snprintf(cursor, sizeof cursor, "%s", rep->element[0]->str);
		const redisReply *keys = rep->element[1];
		for (size_t i = 0; i < keys->elements; i++) {
			long long stamp = copy_stamp(keys->element[i]->str, prefix);
			if (stamp < 0)
				continue;
			if (n == cap)
				v = xrealloc(v, (size_t)(cap = cap ? cap * 2 : 16) * sizeof *v);
			v[n].name = xstrdup(keys->element[i]->str);
			v[n++].stamp = stamp;
		}
		freeReplyObject(rep);
	} while (strcmp(cursor, "0") != 0);
	qsort(v, (size_t)n, sizeof *v, newest_first);
	for (int i = MAX_COPIES; i < n; i++) {
		const char *argv[] = { "DEL", v[i].name };
		redisReply *rep = rcmd_argv(r, 2, argv, NULL);
		if (rep)
			freeReplyObject(rep);
		else
			log_error("Key check: couldn't delete old copy %s: %s", v[i].name, r->err);
	}
out:
	for (int i = 0; i < n; i++)
		free(v[i].name);
	free(v);
	free(match);
	free(esc);
	free(prefix);
}

/* Quarantine one wrong-typed key: 1 moved, 0 not (fixed meanwhile, or an error logged),
 * -1 on an availability error. */
static int quarantine(struct rconn *r, const struct watched *w, const char *actual,
                      struct log_site *site)
{
	char hex[9];
	random_hex(hex, 4);
	char *target = xasprintf(K_QUARANTINE "%s:%lld:%s", w->key,
	                         (long long)(now_float() * 1000.0), hex);
	const char *keys[] = { w->key, target };
	const char *args[] = { w->type, QUARANTINE_TTL };
	redisReply *rep = rscript(r, "quarantine", 2, keys, 2, args, NULL);
	int rc = 0;
	if (!rep && r->unavailable) {
		rc = -1;                /* logged, summarised, by the caller */
	} else if (!rep) {
		log_error("%s: couldn't quarantine %s (held a %s, not a %s): %s", site->name, w->key,
		          actual, w->type, r->err);
	} else if (reply_integer(rep, 0) == 1) {
		log_warn("%s held a %s, not a %s: moved to %s (kept 30 days)", w->key, actual, w->type,
		         target);
		metrics_inc(METRIC_KEYS_QUARANTINED);
		prune_copies(r, w->key);
		rc = 1;
	}
	if (rep)
		freeReplyObject(rep);
	free(target);
	return rc;
}

int keyguard_check(struct rconn *r, struct log_site *site)
{
	struct watchlist w = { 0 };
	int rc = build_watchlist(r, &w);
	redisReply **types = NULL;
	if (rc == 0) {
		struct rpipe p;
		types = xcalloc((size_t)w.n, sizeof *types);
		rpipe_begin(r, &p);
		for (int i = 0; i < w.n; i++) {
			const char *argv[] = { "TYPE", w.v[i].key };
			rpipe_add_argv(r, &p, 2, argv, NULL);
		}
		rpipe_exec(r, &p, types);
		rc = p.unavailable ? -1 : 0;
	}
	int moved = 0;
	for (int i = 0; rc == 0 && i < w.n; i++) {
		const redisReply *t = types[i];
		if (!t || (t->type != REDIS_REPLY_STATUS && t->type != REDIS_REPLY_STRING))
			continue;
		if (strcmp(t->str, "none") != 0 && strcmp(t->str, w.v[i].type) != 0) {
			int q = quarantine(r, &w.v[i], t->str, site);
			if (q < 0)
				rc = -1;
			moved += q > 0;
		}
	}
	for (int i = 0; types && i < w.n; i++)
		if (types[i])
			freeReplyObject(types[i]);
	free(types);
	watchlist_free(&w);
	if (rc == 0)
		site_result(site, r, 1, "key check");
	else
		site_result(site, r, 0, "key check");
	return rc == 0 ? moved : -1;
}
