/* SPDX-License-Identifier: MIT */
/*
 * admission.c: what stands between a fetched job and its run (doc/protocol.md §7.30, §7.31):
 * its deadline, its handler's max_concurrency in this process, and its handler's
 * fleet-wide fleet_concurrency and rate_limit. The fetcher asks limits_gate() once per job
 * and, for a job that ran, gives back what it took with limits_release().
 *
 * max_concurrency (this process). A job of a handler already running N jobs here is not
 * run by its fetcher, and the fetcher goes on fetching: other handlers' jobs are never
 * held up behind it. Up to N such jobs wait here, in memory and still on the in-progress
 * list (so orphan recovery and the shutdown requeue cover them, and reconcile, which sees
 * them in the running record, leaves them alone); a fetcher whose job ended takes a
 * waiting one before it fetches anything new, oldest first, so the saturated handler is
 * never starved. A job beyond those N is given back to the BACK of its queue: this process
 * does not hoard what it can't run, another process may run it, and it can't block the jobs
 * behind it (at the front, every free fetcher would take it again at once). The fetcher
 * that gave one back pauses (0.05 s doubling to 1 s) before its next fetch, so a queue
 * holding only such jobs is not spun through. Quiet and stop hand the waiting jobs back.
 * The waiting jobs are listed for the heartbeat to publish (limits_waiting_json), so that
 * cogworkerctl can show them as waiting for a slot rather than not at all.
 *
 * fleet_concurrency and rate_limit (every process sharing the Redis). One ADMIT script per
 * start counts the leases (a sorted set scored by expiry on Redis's clock) and the starts
 * in the sliding window, takes a lease and counts the start, or moves the job from the
 * in-progress list to the schedule set, due when the window has room (rate) or shortly
 * (fleet: about a poll_interval, the poller's rhythm), later by one window or interval per
 * N jobs already waiting: it is tried again then, never counted as a failure, its
 * retry_count untouched. Leases are refreshed by the heartbeat (limits_refresh_leases) and expire
 * process_ttl after the last beat of their holder, so a process that died frees its slots
 * within process_ttl; a release (RELEASE_SLOT) that fails needs no retry for the same
 * reason. The script also records each class's declared limits in cogworker:limits, where
 * a differing declaration by another process shows up: that is logged, at most once a
 * minute per class (each process enforces its own N on the shared count).
 *
 * Fair share (group_by with group_concurrency or group_rate_limit, doc/protocol.md §7.35): the
 * same ADMIT call first counts the job's group (its leases, its starts, whether jobs of it
 * are set aside already) and, without room, moves the job from the in-progress list into
 * its group's line in Redis, where no process holds it; the fetcher goes on fetching. A
 * run's end gives its group slot back through RELEASE_GROUP_SLOT, which moves the group's
 * oldest set-aside job to the front of its queue with the slot reserved for it; the
 * poller's sweep (limits_group_sweep) does it for slots that expired and windows that
 * opened. Group leases are leases like the fleet's: in the same list, refreshed by the
 * same beat, through REFRESH_GROUP_LEASE (doc/protocol.md §6.38), which moves their key's
 * TTL on with them: a group's slots key expires by itself once all its leases have.
 *
 * State: per handler class (the handler block's class, so a "*" handler counts every class
 * it serves together) the running count and the waiting jobs, and the list of leases this
 * process holds; all under one mutex, never held across a Redis call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "deadline.h"
#include "exporter.h"
#include "group.h"
#include "job.h"
#include "json.h"
#include "keys.h"
#include "admission.h"
#include "settle.h"
#include "state.h"
#include "util.h"

#define CONFLICT_LOG_EVERY 60.0
#define GIVE_BACK_PAUSE_MIN 0.05
#define GIVE_BACK_PAUSE_MAX 1.0

enum { LIMITED_LOCAL, LIMITED_FLEET, LIMITED_RATE, LIMITED_GROUP, LIMITED_GROUP_RATE,
       LIMITED__COUNT };
static const char *const limited_names[] = { "max_concurrency", "fleet_concurrency",
                                             "rate_limit", "group_concurrency",
                                             "group_rate_limit" };

struct held {
	char *raw;
	size_t len;
	char *queue;
	char *jid, *cls;                /* as the job says (NULL: none), for the published list */
	int limit;                      /* the max_concurrency it waits under */
	double since;                   /* epoch seconds */
};

struct local {
	char *cls;
	int running;                    /* jobs of this handler running here */
	struct held *held;              /* waiting here, oldest first */
	int nheld, capheld;
	unsigned long long limited[LIMITED__COUNT];     /* jobs turned away, by limit */
	double conflict_logged;         /* monotonic; 0 = never */
};

/* What a group's release needs besides the lease (RELEASE_GROUP_SLOT's other keys and
 * arguments), as the group's limits were when the slot was taken. */
struct group_lease {
	char *rate, *jobs, *index, *group;
	int n, rate_n;
	double window, ttl;
};

struct lease {
	struct lease *next;
	char *key, *member;
	struct group_lease *g;          /* NULL: a fleet slot */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct local **locals;
static int nlocals;
static struct lease *leases;
static unsigned long waiting_gen;       /* changes of the waiting jobs, for their publisher */

/* How many jobs this fetcher thread gave back in a row (its pause). */
static __thread int give_backs;

static struct log_site limits_site = LOG_SITE("Limits");

static struct local *local_of(const char *cls)          /* under mu */
{
	for (int i = 0; i < nlocals; i++)
		if (strcmp(locals[i]->cls, cls) == 0)
			return locals[i];
	locals = xrealloc(locals, (size_t)(nlocals + 1) * sizeof *locals);
	struct local *l = xcalloc(1, sizeof *l);
	l->cls = xstrdup(cls);
	locals[nlocals++] = l;
	return l;
}

static void local_done(const char *cls)
{
	pthread_mutex_lock(&mu);
	struct local *l = local_of(cls);
	if (l->running > 0)
		l->running--;
	pthread_mutex_unlock(&mu);
}

static void count_limited(const char *cls, int which)
{
	pthread_mutex_lock(&mu);
	local_of(cls)->limited[which]++;
	pthread_mutex_unlock(&mu);
}

/* ---- max_concurrency ---- */

enum local_gate { LOCAL_RUN, LOCAL_HELD, LOCAL_EXCESS };

/* Take a local slot, else keep the job waiting if there is room for it, in one critical
 * section: a slot freed in between can't be missed. A new job never takes a slot ahead of
 * the jobs waiting for one (from_held: the job is the oldest of them). */
static enum local_gate local_gate(const struct handler *h, const struct job *j, int from_held)
{
	enum local_gate g;
	pthread_mutex_lock(&mu);
	struct local *l = local_of(h->class_name);
	if (l->running < h->max_concurrency && (from_held || l->nheld == 0)) {
		l->running++;
		g = LOCAL_RUN;
	} else if (l->nheld < h->max_concurrency) {
		if (l->nheld == l->capheld) {
			l->capheld = l->capheld ? l->capheld * 2 : 4;
			l->held = xrealloc(l->held, (size_t)l->capheld * sizeof *l->held);
		}
		struct held *w = &l->held[l->nheld++];
		w->raw = xstrndup(j->raw, j->raw_len);
		w->len = j->raw_len;
		w->queue = xstrdup(j->fetched_from ? j->fetched_from : j->queue);
		w->jid = j->jid ? xstrdup(j->jid) : NULL;
		w->cls = j->cls ? xstrdup(j->cls) : NULL;
		w->limit = h->max_concurrency;
		w->since = now_float();
		waiting_gen++;
		running_add(j->raw);    /* not a stray for reconcile */
		g = LOCAL_HELD;
	} else {
		l->limited[LIMITED_LOCAL]++;
		g = LOCAL_EXCESS;
	}
	pthread_mutex_unlock(&mu);
	return g;
}

/* Give a job this process won't run now back to the back of its queue (reliable:
 * REQUEUE_ONE "back", basic: LPUSH), where it blocks none of the jobs behind it. A failure
 * leaves it on the in-progress list, for reconcile or the shutdown requeue. */
static void requeue_last(struct rconn *r, const struct job *j)
{
	const char *queue = j->fetched_from ? j->fetched_from : j->queue;
	redisReply *rep;
	if (atomic_load(&D.fetch_mode) == FETCH_BASIC) {
		char *key = xasprintf(K_QUEUE "%s", queue);
		const char *argv[] = { "LPUSH", key, j->raw };
		size_t lens[] = { 5, strlen(key), j->raw_len };
		rep = rcmd_argv(r, 3, argv, lens);
		free(key);
	} else {
		rep = requeue_one_at(r, j->raw, j->raw_len, 1);
	}
	site_result(&limits_site, r, rep != NULL,
	            "couldn't give a job back to its queue (left in progress for reconcile)");
	if (rep)
		freeReplyObject(rep);
}

/* requeue_last for a job of a saturated handler, then a pause of this fetcher, a little
 * longer each time in a row. */
static void give_back_last(struct rconn *r, const struct job *j)
{
	requeue_last(r, j);
	double pause = GIVE_BACK_PAUSE_MIN;
	for (int i = 0; i < give_backs && pause < GIVE_BACK_PAUSE_MAX; i++)
		pause *= 2;
	give_backs++;
	sleep_unless_stopping(pause < GIVE_BACK_PAUSE_MAX ? pause : GIVE_BACK_PAUSE_MAX);
}

int limits_any_held(void)
{
	int any = 0;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < nlocals && !any; i++)
		any = locals[i]->nheld > 0;
	pthread_mutex_unlock(&mu);
	return any;
}

int limits_take_held(struct fetched *out)
{
	int got = 0;
	struct conf *c = conf_acquire();
	pthread_mutex_lock(&mu);
	for (int i = 0; i < nlocals && !got; i++) {
		struct local *l = locals[i];
		if (l->nheld == 0)
			continue;
		int max = 0;
		for (int k = 0; k < c->nhandlers; k++)
			if (strcmp(c->handlers[k].class_name, l->cls) == 0)
				max = c->handlers[k].max_concurrency;
		if (max > 0 && l->running >= max)
			continue;
		/* No slot is reserved: a slot taken meanwhile by another fetcher makes the gate
		 * keep this job waiting again, and no reservation can leak. */
		struct held w = l->held[0];
		memmove(l->held, l->held + 1, (size_t)--l->nheld * sizeof *l->held);
		waiting_gen++;
		running_remove(w.raw);
		out->raw = w.raw;
		out->len = w.len;
		out->queue = w.queue;
		free(w.jid);
		free(w.cls);
		got = 1;
	}
	pthread_mutex_unlock(&mu);
	conf_release(c);
	return got;
}

void limits_give_back_held(struct rconn *r)
{
	struct held *all = NULL;
	int n = 0;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < nlocals; i++) {
		struct local *l = locals[i];
		if (l->nheld == 0)
			continue;
		all = xrealloc(all, (size_t)(n + l->nheld) * sizeof *all);
		memcpy(all + n, l->held, (size_t)l->nheld * sizeof *all);
		n += l->nheld;
		l->nheld = 0;
	}
	if (n)
		waiting_gen++;
	pthread_mutex_unlock(&mu);
	/* Newest first: each goes to the front of its queue, so the oldest ends up first. */
	for (int i = n - 1; i >= 0; i--) {
		give_back(r, all[i].raw, all[i].len, all[i].queue);
		running_remove(all[i].raw);
		free(all[i].raw);
		free(all[i].queue);
		free(all[i].jid);
		free(all[i].cls);
	}
	free(all);
}

char *limits_waiting_json(unsigned long *gen, int *n)
{
	struct sbuf b;
	sb_init(&b);
	sb_addc(&b, '[');
	*n = 0;
	pthread_mutex_lock(&mu);
	*gen = waiting_gen;
	for (int i = 0; i < nlocals; i++)
		for (int k = 0; k < locals[i]->nheld; k++) {
			const struct held *w = &locals[i]->held[k];
			char *jid = w->jid ? json_quote(w->jid, strlen(w->jid)) : xstrdup("null");
			char *cls = w->cls ? json_quote(w->cls, strlen(w->cls)) : xstrdup("null");
			char *q = json_quote(w->queue, strlen(w->queue));
			char *h = json_quote(locals[i]->cls, strlen(locals[i]->cls));
			sb_printf(&b, "%s{\"jid\":%s,\"class\":%s,\"queue\":%s,\"handler\":%s,"
			          "\"limit\":%d,\"since\":%.3f}", (*n)++ ? "," : "", jid, cls, q, h,
			          w->limit, w->since);
			free(jid);
			free(cls);
			free(q);
			free(h);
		}
	pthread_mutex_unlock(&mu);
	sb_addc(&b, ']');
	return sb_steal(&b);
}

void limits_each_held(void (*fn)(void *ctx, const char *raw, size_t len), void *ctx)
{
	pthread_mutex_lock(&mu);
	for (int i = 0; i < nlocals; i++)
		for (int k = 0; k < locals[i]->nheld; k++)
			fn(ctx, locals[i]->held[k].raw, locals[i]->held[k].len);
	pthread_mutex_unlock(&mu);
}

/* ---- fleet_concurrency and rate_limit, and the groups' limits ---- */

/* Job j's group under h's group_by (malloc'd; "" without a value, doc/protocol.md §7.35). */
static char *job_group(const struct job *j, const struct handler *h)
{
	char *out;
	const char *why;
	if (group_of(j->raw, j->raw_len, &h->group_path, &out, &why) == GROUP_INVALID)
		log_warn("%s jid=%s: its group_by value (%s) is %s: it goes to the group \"\"",
		         j->cls ? j->cls : "", j->jid ? j->jid : "?", h->group_by, why);
	return out;
}

/* The class's limits as this process declares them in cogworker:limits (JSON). */
static char *declaration(const struct handler *h)
{
	struct sbuf b;
	sb_init(&b);
	const char *sep = "";
	sb_addc(&b, '{');
	if (h->fleet_concurrency > 0) {
		sb_printf(&b, "\"fleet_concurrency\":%d", h->fleet_concurrency);
		sep = ",";
	}
	if (h->rate_limit_n > 0) {
		sb_printf(&b, "%s\"rate_limit\":\"%d/%gs\"", sep, h->rate_limit_n,
		          h->rate_limit_window);
		sep = ",";
	}
	if (limits_grouped(h)) {
		char *by = json_quote(h->group_by, strlen(h->group_by));
		sb_printf(&b, "%s\"group_by\":%s", sep, by);
		free(by);
		if (h->group_concurrency > 0)
			sb_printf(&b, ",\"group_concurrency\":%d", h->group_concurrency);
		if (h->group_rate_n > 0)
			sb_printf(&b, ",\"group_rate_limit\":\"%d/%gs\"", h->group_rate_n,
			          h->group_rate_window);
	}
	sb_addc(&b, '}');
	return sb_steal(&b);
}

static void warn_conflict(const struct handler *h, const char *mine, const char *theirs)
{
	double now = mono_now();
	int log_it = 0;
	pthread_mutex_lock(&mu);
	struct local *l = local_of(h->class_name);
	if (l->conflict_logged == 0 || now - l->conflict_logged >= CONFLICT_LOG_EVERY) {
		l->conflict_logged = now;
		log_it = 1;
	}
	pthread_mutex_unlock(&mu);
	if (log_it)
		log_warn("handler %s: limits %s here, but %s in another process sharing this Redis; "
		         "each process enforces its own on the shared count: give every process the "
		         "same", h->class_name, mine, theirs);
}

static const char *str_elem(const redisReply *rep, size_t i)
{
	return i < rep->elements && rep->element[i]->type == REDIS_REPLY_STRING
	       ? rep->element[i]->str : "";
}

int limits_grouped(const struct handler *h)
{
	return h->group_by && (h->group_concurrency > 0 || h->group_rate_n > 0);
}

/* The keys of a group of handler class cls (doc/protocol.md §2): "" for each without
 * group limits. */
struct group_keys {
	char *slots, *rate, *jobs, *index;
};

static void group_keys_of(const struct handler *h, const char *group, struct group_keys *k)
{
	int on = group && limits_grouped(h);
	k->slots = on ? xasprintf(K_GROUP_SLOTS "%s:%s", h->class_name, group) : xstrdup("");
	k->rate = on && h->group_rate_n > 0 ? xasprintf(K_GROUP_RATE "%s:%s", h->class_name, group)
	                                    : xstrdup("");
	k->jobs = on ? xasprintf(K_GROUP_JOBS "%s:%s", h->class_name, group) : xstrdup("");
	k->index = on ? xasprintf(K_GROUPS "%s", h->class_name) : xstrdup("");
}

static void group_keys_free(struct group_keys *k)
{
	free(k->slots);
	free(k->rate);
	free(k->jobs);
	free(k->index);
}

static struct lease *lease_new(char **key, char **member, struct group_lease *g)
{
	struct lease *l = xcalloc(1, sizeof *l);
	l->key = *key;
	l->member = *member;
	*key = *member = NULL;
	l->g = g;
	pthread_mutex_lock(&mu);
	l->next = leases;
	leases = l;
	pthread_mutex_unlock(&mu);
	return l;
}

/* The group lease ADMIT took (a group_concurrency slot): its release's keys and limits. */
static struct lease *group_lease_new(const struct handler *h, const char *group,
                                     struct group_keys *k, const char *holder, double ttl)
{
	struct group_lease *g = xcalloc(1, sizeof *g);
	g->rate = k->rate;
	g->jobs = k->jobs;
	g->index = k->index;
	k->rate = k->jobs = k->index = NULL;
	g->group = xstrdup(group);
	g->n = h->group_concurrency;
	g->rate_n = h->group_rate_n;
	g->window = h->group_rate_window;
	g->ttl = ttl;
	char *member = xstrdup(holder);
	return lease_new(&k->slots, &member, g);
}

static void count_turned_away(const struct handler *h, const struct job *j, const char *why,
                              const char *at, const char *group)
{
	static const char *const whys[] = { "fleet", "rate", "group", "group_rate" };
	static const int which[] = { LIMITED_FLEET, LIMITED_RATE, LIMITED_GROUP,
	                             LIMITED_GROUP_RATE };
	int k = 0;
	for (int i = 0; i < 4; i++)
		if (strcmp(why, whys[i]) == 0)
			k = i;
	count_limited(h->class_name, which[k]);
	if (k >= 2)
		log_debug("set aside: %s jid=%s group=%s: %s reached; back when the group has room",
		          j->cls ? j->cls : "", j->jid ? j->jid : "?", group ? group : "",
		          limited_names[which[k]]);
	else
		log_debug("waiting: %s jid=%s: %s reached; tried again at %s", j->cls ? j->cls : "",
		          j->jid ? j->jid : "?", limited_names[which[k]], at);
}

/* ADMIT: 1 admitted (a->lease set with a fleet limit, a->glease with a group one), 0 turned
 * away, set aside or no longer ours, -1 error (the job was given back). group: the job's
 * group when its handler has group limits, else NULL. */
static int admit(struct rconn *r, const struct job *j, const struct handler *h,
                 const char *group, const char *tid, double process_ttl,
                 double poll_interval, struct admission *a)
{
	int basic = atomic_load(&D.fetch_mode) == FETCH_BASIC;
	char *slots = h->fleet_concurrency > 0 ? xasprintf(K_SLOTS "%s", h->class_name)
	                                       : xstrdup("");
	char *starts = h->rate_limit_n > 0 ? xasprintf(K_RATE "%s", h->class_name) : xstrdup("");
	char *waiters = xasprintf(K_WAITERS "%s", h->class_name);
	char *list = basic ? xstrdup("") : xasprintf(K_INPROGRESS "%s", D.identity);
	char *decl = declaration(h);
	char *holder = xasprintf("%s %s %s", D.identity, tid, j->jid ? j->jid : "-");
	struct group_keys gk;
	group_keys_of(h, group, &gk);
	char fleet_n[16], ttl[32], rate_n[16], window[32], delay[32], now[32];
	char group_n[16], group_rate_n[16], group_window[32], place[32];
	snprintf(fleet_n, sizeof fleet_n, "%d", h->fleet_concurrency);
	snprintf(ttl, sizeof ttl, "%.3f", process_ttl);
	snprintf(rate_n, sizeof rate_n, "%d", h->rate_limit_n);
	snprintf(window, sizeof window, "%.6f", h->rate_limit_window);
	snprintf(group_n, sizeof group_n, "%d", h->group_concurrency);
	snprintf(group_rate_n, sizeof group_rate_n, "%d", h->group_rate_n);
	snprintf(group_window, sizeof group_window, "%.6f", h->group_rate_window);
	/* The poller puts a due job back on its queue every poll_interval: waiting less would
	 * be waiting for the poller. Jittered, so that jobs turned away together spread. */
	snprintf(delay, sizeof delay, "%.3f", poll_interval * (1 + 0.5 * random_unit()));
	job_format_time(now_float(), now);
	double enqueued = job_enqueued(j);
	snprintf(place, sizeof place, "%.6f", enqueued > 0 ? enqueued : now_float());
	const char *keys[] = { slots, starts, waiters, K_LIMITS, list, K_SCHEDULE,
	                       gk.slots, gk.rate, gk.jobs, gk.index };
	const char *args[] = { j->raw, h->class_name, decl, fleet_n, holder, ttl, rate_n, window,
	                       j->jid ? j->jid : "", delay, now, group ? group : "", group_n,
	                       group_rate_n, group_window, K_QUEUE, "default", place, K_PAUSED };
	size_t lens[19];
	for (int i = 0; i < 19; i++)
		lens[i] = strlen(args[i]);
	lens[0] = j->raw_len;
	redisReply *rep = rscript(r, "admit", 10, keys, 19, args, lens);
	int rc = -1;
	if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements < 4) {
		site_result(&limits_site, r, 0, "admission failed; job given back");
		requeue_last(r, j);
		sleep_unless_stopping(1.0);
	} else {
		site_result(&limits_site, r, 1, "admission");
		long long status = reply_integer(rep->element[0], -1);
		if (*str_elem(rep, 3))
			warn_conflict(h, decl, str_elem(rep, 3));
		if (status == 1) {
			rc = 1;
			if (h->fleet_concurrency > 0) {
				char *member = xstrdup(holder);
				a->lease = lease_new(&slots, &member, NULL);
			}
			if (group && h->group_concurrency > 0)
				a->glease = group_lease_new(h, group, &gk, holder, process_ttl);
		} else if (status == 0) {
			rc = 0;
			count_turned_away(h, j, str_elem(rep, 2), str_elem(rep, 1), group);
		} else {
			rc = 0;
			log_warn("%s jid=%s was no longer in progress here; not started",
			         j->cls ? j->cls : "", j->jid ? j->jid : "?");
		}
	}
	if (rep)
		freeReplyObject(rep);
	free(slots);
	free(starts);
	free(waiters);
	free(list);
	free(decl);
	free(holder);
	group_keys_free(&gk);
	return rc;
}

static void lease_free(struct lease *l)
{
	if (l->g) {
		free(l->g->rate);
		free(l->g->jobs);
		free(l->g->index);
		free(l->g->group);
		free(l->g);
	}
	free(l->key);
	free(l->member);
	free(l);
}

/* Out of the list the heartbeat refreshes: no refresh from now on, whatever the release
 * does. */
static void lease_unlist(struct lease *l)
{
	pthread_mutex_lock(&mu);
	for (struct lease **p = &leases; *p; p = &(*p)->next)
		if (*p == l) {
			*p = l->next;
			break;
		}
	pthread_mutex_unlock(&mu);
}

static void release_fleet(struct rconn *r, struct lease *l)
{
	char now[32];
	job_format_time(now_float(), now);
	const char *keys[] = { l->key };
	const char *args[] = { l->member, now };
	redisReply *rep = rscript(r, "release_slot", 1, keys, 2, args, NULL);
	if (!rep)
		log_warn("fleet slot %s of %s not released (it expires within process_ttl): %s",
		         l->member, l->key, r->err);
	else if (reply_integer(rep, 1) == 0)
		log_warn("fleet slot %s of %s had expired before its release (beats failing for "
		         "longer than process_ttl?)", l->member, l->key);
	if (rep)
		freeReplyObject(rep);
}

/* RELEASE_GROUP_SLOT: the slot back, and the group's oldest set-aside job to the front of
 * its queue. A failure needs no retry: the lease expires within process_ttl and the
 * poller's sweep then brings the job back. */
static void release_group(struct rconn *r, struct lease *l)
{
	const struct group_lease *g = l->g;
	char n[16], rate_n[16], window[32], ttl[32], now[32];
	snprintf(n, sizeof n, "%d", g->n);
	snprintf(rate_n, sizeof rate_n, "%d", g->rate_n);
	snprintf(window, sizeof window, "%.6f", g->window);
	snprintf(ttl, sizeof ttl, "%.3f", g->ttl);
	job_format_time(now_float(), now);
	const char *keys[] = { l->key, g->rate, g->jobs, g->index };
	const char *args[] = { l->member, g->group, n, rate_n, window, ttl, K_QUEUE, "default",
	                       now, K_PAUSED };
	redisReply *rep = rscript(r, "release_group_slot", 4, keys, 10, args, NULL);
	if (!rep)
		log_warn("group slot %s of %s not released (it expires within process_ttl, and "
		         "the poller brings the group's next job back then): %s", l->member, l->key,
		         r->err);
	else if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
	         reply_integer(rep->element[0], 1) == 0)
		log_warn("group slot %s of %s had expired before its release (beats failing for "
		         "longer than process_ttl?)", l->member, l->key);
	if (rep)
		freeReplyObject(rep);
}

void limits_release(struct rconn *r, struct admission *a)
{
	if (a->local_cls) {
		local_done(a->local_cls);
		free(a->local_cls);
		a->local_cls = NULL;
	}
	struct lease *ls[] = { a->lease, a->glease };
	a->lease = a->glease = NULL;
	for (int i = 0; i < 2; i++) {
		if (!ls[i])
			continue;
		lease_unlist(ls[i]);
		if (ls[i]->g)
			release_group(r, ls[i]);
		else
			release_fleet(r, ls[i]);
		lease_free(ls[i]);
	}
	free(a->group);
	a->group = NULL;
}

enum gate limits_gate(struct rconn *r, const struct job *j, const char *tid, int from_held,
                      struct admission *a, struct log_site *site)
{
	memset(a, 0, sizeof *a);
	struct conf *c = conf_acquire();
	const struct handler *h = j->obj ? conf_find_handler(c, j->cls ? j->cls : "") : NULL;
	double process_ttl = c->process_ttl, poll_interval = c->poll_interval;
	int from_job = 0;
	double deadline = j->obj ? deadline_of(j, h, &from_job) : 0;
	enum gate g = GATE_RUN;
	if (deadline > 0 && now_float() > deadline) {
		deadline_settle_fetched(r, c, j, h, deadline, from_job, site);
		g = GATE_DONE;
	} else if (h && h->max_concurrency > 0) {
		enum local_gate lg = local_gate(h, j, from_held);
		if (lg == LOCAL_RUN)
			a->local_cls = xstrdup(h->class_name);
		if (lg == LOCAL_EXCESS)
			give_back_last(r, j);
		if (lg != LOCAL_RUN)
			g = GATE_DONE;
	}
	if (g == GATE_RUN && h && h->group_by)
		a->group = job_group(j, h);
	if (g == GATE_RUN && h && (h->fleet_concurrency > 0 || h->rate_limit_n > 0 ||
	                           limits_grouped(h)) &&
	    admit(r, j, h, limits_grouped(h) ? a->group : NULL, tid, process_ttl, poll_interval,
	          a) != 1) {
		limits_release(r, a);
		g = GATE_DONE;
	}
	conf_release(c);
	if (g == GATE_RUN)
		give_backs = 0;
	return g;
}

/* Groups looked at per class and call, and jobs per group: the rest at the next poll. */
#define SWEEP_GROUPS "100"
#define SWEEP_JOBS_PER_GROUP "100"

void limits_group_sweep(struct rconn *r, struct log_site *site)
{
	struct conf *c = conf_acquire();
	char ttl[32];
	snprintf(ttl, sizeof ttl, "%.3f", c->process_ttl);
	for (int i = 0; i < c->nhandlers; i++) {
		const struct handler *h = &c->handlers[i];
		if (!limits_grouped(h))
			continue;
		char *index = xasprintf(K_GROUPS "%s", h->class_name);
		char *slots = xasprintf(K_GROUP_SLOTS "%s:", h->class_name);
		char *rate = xasprintf(K_GROUP_RATE "%s:", h->class_name);
		char *jobs = xasprintf(K_GROUP_JOBS "%s:", h->class_name);
		char n[16], rate_n[16], window[32], now[32];
		snprintf(n, sizeof n, "%d", h->group_concurrency);
		snprintf(rate_n, sizeof rate_n, "%d", h->group_rate_n);
		snprintf(window, sizeof window, "%.6f", h->group_rate_window);
		job_format_time(now_float(), now);
		const char *keys[] = { index };
		const char *args[] = { slots, rate, jobs, n, rate_n, window, ttl, K_QUEUE, "default",
		                       SWEEP_GROUPS, SWEEP_JOBS_PER_GROUP, now, K_PAUSED };
		redisReply *rep = rscript(r, "group_sweep", 1, keys, 13, args, NULL);
		site_result(site, r, rep != NULL, "the look at the groups' set-aside jobs failed");
		if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
		    reply_integer(rep->element[1], 0) > 0)
			log_debug("handler %s: %lld set-aside jobs back on their queues",
			          h->class_name, reply_integer(rep->element[1], 0));
		if (rep)
			freeReplyObject(rep);
		free(index);
		free(slots);
		free(rate);
		free(jobs);
	}
	conf_release(c);
}

void limits_refresh_leases(struct rconn *r, double process_ttl, int retake)
{
	pthread_mutex_lock(&mu);
	int n = 0;
	for (struct lease *l = leases; l; l = l->next)
		n++;
	char **keys = xcalloc((size_t)n + 1, sizeof *keys);
	char **members = xcalloc((size_t)n + 1, sizeof *members);
	int *grouped = xcalloc((size_t)n + 1, sizeof *grouped);
	n = 0;
	for (struct lease *l = leases; l; l = l->next, n++) {
		keys[n] = xstrdup(l->key);
		members[n] = xstrdup(l->member);
		grouped[n] = l->g != NULL;
	}
	pthread_mutex_unlock(&mu);
	double t = n > 0 ? redis_time(r) : -1;
	if (t >= 0) {
		char score[32], ttl[32];
		job_format_time(t + process_ttl, score);
		snprintf(ttl, sizeof ttl, "%.6f", process_ttl);
		struct rpipe p;
		rpipe_begin(r, &p);
		/* XX: a lease released meanwhile is not brought back. After a failed beat the
		 * lease may have expired and been trimmed: then it is taken again, as the job it
		 * counts is still running (doc/protocol.md §7.30). A group lease's key has a TTL
		 * (§2), moved on with the lease by REFRESH_GROUP_LEASE in the same step. */
		for (int i = 0; i < n; i++) {
			if (grouped[i]) {
				const char *k[] = { keys[i] };
				const char *a[] = { score, members[i], retake ? "1" : "0", ttl };
				rpipe_add_script(r, &p, "refresh_group_lease", 1, k, 4, a, NULL);
				continue;
			}
			const char *argv[] = { "ZADD", keys[i], "XX", score, members[i] };
			if (retake) {
				argv[2] = score;        /* no XX: ZADD key score member */
				argv[3] = members[i];
			}
			rpipe_add_argv(r, &p, retake ? 4 : 5, argv, NULL);
		}
		redisReply **rep = xcalloc((size_t)n, sizeof *rep);
		int failed = 0;
		/* One reply at a time, so a NOSCRIPT (a fresh server) is told apart from a lost
		 * connection; every reply is read before the EVALs go out (see outkeep.c). */
		int *noscript = xcalloc((size_t)n + 1, sizeof *noscript);
		for (int i = 0; i < n; i++) {
			if (rpipe_read(r, &p, 1, &rep[i]) == 0)
				continue;
			if (grouped[i] && !r->unavailable && strncmp(r->err, "NOSCRIPT", 8) == 0)
				noscript[i] = 1;
			else
				failed = 1;
		}
		for (int i = 0; i < n && !failed; i++) {
			if (!noscript[i])
				continue;
			const char *k[] = { keys[i] };
			const char *a[] = { score, members[i], retake ? "1" : "0", ttl };
			if (!(rep[i] = rscript(r, "refresh_group_lease", 1, k, 4, a, NULL)))
				failed = 1;
		}
		if (failed)
			log_error("fleet slots not refreshed: %s", r->err);
		for (int i = 0; i < n; i++)
			if (rep[i])
				freeReplyObject(rep[i]);
		free(rep);
		free(noscript);
	}
	for (int i = 0; i < n; i++) {
		free(keys[i]);
		free(members[i]);
	}
	free(keys);
	free(members);
	free(grouped);
}

void limits_metrics(struct sbuf *b)
{
	pthread_mutex_lock(&mu);
	sb_adds(b, "# TYPE cogworkerd_limit_running gauge\n");
	for (int i = 0; i < nlocals; i++) {
		sb_adds(b, "cogworkerd_limit_running{class=\"");
		exporter_label_value(b, locals[i]->cls, strlen(locals[i]->cls));
		sb_printf(b, "\"} %d\n", locals[i]->running);
	}
	sb_adds(b, "# TYPE cogworkerd_limit_waiting gauge\n");
	for (int i = 0; i < nlocals; i++) {
		sb_adds(b, "cogworkerd_limit_waiting{class=\"");
		exporter_label_value(b, locals[i]->cls, strlen(locals[i]->cls));
		sb_printf(b, "\"} %d\n", locals[i]->nheld);
	}
	sb_adds(b, "# TYPE cogworkerd_jobs_limited_total counter\n");
	for (int i = 0; i < nlocals; i++)
		for (int k = 0; k < LIMITED__COUNT; k++) {
			sb_adds(b, "cogworkerd_jobs_limited_total{class=\"");
			exporter_label_value(b, locals[i]->cls, strlen(locals[i]->cls));
			sb_printf(b, "\",limit=\"%s\"} %llu\n", limited_names[k], locals[i]->limited[k]);
		}
	pthread_mutex_unlock(&mu);
}
