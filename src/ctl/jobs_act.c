/* SPDX-License-Identifier: MIT */
/*
 * jobs_act.c: the Web UI's job buttons, one JID at a time or --all of a set. Every action
 * works on the exact member string as read (never a re-encoded copy), so an entry changed
 * or taken meanwhile is left alone and reported as gone:
 *
 *   retry       CLAIM_AND_REQUEUE (lua/claim_and_requeue.lua) with enqueued_at re-stamped
 *               by byte-preserving surgery; the claim gate makes a second retry do nothing.
 *               A dead batch member goes through BATCH_REVIVE instead, which has the same
 *               gate and makes it pending in its batch in the same step.
 *               An entry with no usable queue, or an (unparseable) wrapper, stays put, and
 *               so does one whose own expires_at has passed (a daemon would bury it again
 *               at once, doc/protocol.md §7.31) unless --expires-in gives it a new one.
 *   delete      LREM queue 0 raw | ZREM set raw, then DEL cogworker:job_attempts:<jid>
 *               for retry and dead entries, and the job's unique and periodic running
 *               locks, owner-checked (producer_release_locks); --all without filters DELs
 *               the whole key (and, for retry/dead, every attempts log of the entries it
 *               held; locks are left to their TTL there: the entries are not read).
 *   kill        KILL (lua/kill.lua): ZSCORE check → ZADD dead now → ZREM; the locks go
 *               as for delete, as a daemon releases them when a job dies.
 *   reschedule  ZADD set XX now+minutes·60 raw (jobs.c clamps minutes to 1…10080).
 *
 * None of them runs on_death.
 */
#include <stdlib.h>
#include <string.h>
#include "jobs_act.h"
#include "jobs_cut.h"
#include "jobs_find.h"
#include "json.h"
#include "producer.h"
#include "workflow.h"

const unsigned jobs_action_sets[] = {
	[A_RETRY] = ZSETS,
	[A_DELETE] = BIT(S_QUEUED) | ZSETS,
	[A_KILL] = BIT(S_SCHEDULED) | BIT(S_RETRY),
	[A_RESCHEDULE] = BIT(S_SCHEDULED) | BIT(S_RETRY),
};
static const char *const action_names[] = { "retry", "delete", "kill", "reschedule" };

struct act {
	struct ctl *c;
	enum action a;
	double minutes;
	double expires_in;          /* retry: a new deadline this far from now; 0 = none */
	struct sbuf json;           /* results, when --json */
	int nresults;
	int done;
	int quiet_gone;             /* --all: a vanished entry is not worth a line */
	int released;               /* locks the last delete or kill gave back (result says) */
};

/* at: reschedule's new time, or retry's new expires_at. */
static void result(struct act *x, const struct entry *e, const char *arg, const char *what,
                   const char *reason, const char *queue, double at)
{
	if (!x->c->json)
		return;
	struct sbuf *b = &x->json;
	if (x->nresults++)
		sb_addc(b, ',');
	sb_adds(b, "{\"jid\":");
	jstr(b, e && e->j.obj ? e->j.jid : (e ? NULL : arg));
	sb_adds(b, ",\"set\":");
	jstr(b, e ? jobs_set_names[e->set] : NULL);
	sb_printf(b, ",\"result\":\"%s\"", what);
	if (reason) {
		sb_adds(b, ",\"reason\":");
		jstr(b, reason);
	}
	if (queue) {
		sb_adds(b, ",\"queue\":");
		jstr(b, queue);
	}
	if (at > 0) {
		sb_printf(b, ",\"%s\":", x->a == A_RETRY ? "expires_at" : "at");
		jnum(b, at);
	}
	if (x->released > 0)
		sb_printf(b, ",\"locks_released\":%d", x->released);
	x->released = 0;
	sb_addc(b, '}');
}

static const char *label(const struct entry *e)
{
	return e->j.obj && e->j.jid ? e->j.jid : "(entry without jid)";
}

/* A daemon judges a job's own expires_at before it runs (doc/protocol.md §7.31): one that
 * has passed would go straight back to dead, after a "retried" that meant nothing. */
static int refuse_expired(struct act *x, const struct entry *e, double expires_at)
{
	char iso[32], why[160];
	ctl_iso_time(expires_at, iso);
	snprintf(why, sizeof why, "expired at %s (its expires_at)", iso);
	ctl_error("%s in %s %s: retrying it would bury it again at once: give it a new deadline "
	          "with --expires-in D", label(e), jobs_set_names[e->set], why);
	result(x, e, NULL, "refused", why, NULL, 0);
	return CTL_NOTHING;
}

/* The payload put back: enqueued_at re-stamped and, with expires_in, expires_at set to
 * that far from now, by byte-preserving surgery. NULL when it does not parse. */
static char *retry_payload(const struct entry *e, double now, double expires_in)
{
	if (expires_in <= 0)
		return job_restamp_enqueued(e->raw, e->raw_len, now);
	char when[32], until[32];
	job_format_time(now, when);
	job_format_time(now + expires_in, until);
	const struct json_edit ed[] = { { "enqueued_at", when }, { "expires_at", until } };
	return json_edit_object(e->raw, e->raw_len, ed, 2);
}

/* An action on an entry read cut (jobs_cut.c), through ACT_CUT: 1 done (reschedule:
 * changed), 0 gone, -1 error (r->err). */
static int cut_act(struct act *x, const struct entry *e, const char *dest, const char *score,
                   const char *queue)
{
	int r = jobs_cut_act(x->c, e, action_names[x->a], dest, score, queue);
	if (r == -2) {          /* do_* refused it before: not reached */
		snprintf(x->c->r.err, sizeof x->c->r.err, "an entry too large to read, without a jid");
		return -1;
	}
	return r;
}

/* Why a cut entry can't be retried, or NULL. */
static const char *cut_refusal(const struct act *x, const struct entry *e)
{
	if (!e->size)
		return NULL;
	if (!e->j.obj || !e->j.jid)
		return "too large to read, and no jid to find it by";
	if (x->a == A_RETRY && x->expires_in > 0)
		return "too large to read: its expires_at can't be set (retry it without --expires-in)";
	if (x->a == A_RETRY && e->set == S_DEAD && e->j.bid)
		return "a batch member too large to read (BATCH_REVIVE takes it whole)";
	return NULL;
}

/*
 * Put the entry back on queue q as payload: CLAIM_AND_REQUEUE, or for a dead batch member
 * BATCH_REVIVE, which also makes it pending in its batch again (up the tree) in the same
 * step, so the batch waits for it and its success fires on_success (doc/protocol.md
 * §7.34): revived after the requeue, a run that died again in between left it pending for
 * good. 1 requeued, 0 gone, -1 error (r->err).
 */
static int requeue(struct act *x, const struct entry *e, const char *payload, const char *q)
{
	if (e->size) {          /* cut (jobs_cut.c): ACT_CUT puts it back as it is */
		char *qkey = xasprintf(K_QUEUE "%s", q);
		int r = cut_act(x, e, qkey, NULL, q);
		free(qkey);
		return r;
	}
	size_t plen = strlen(payload), qlen = strlen(q);
	int member = e->set == S_DEAD && e->j.bid && e->j.jid;
	redisReply *rep;
	if (member) {
		const char *args[] = { e->j.bid, e->j.jid, e->raw, payload, q };
		size_t lens[] = { strlen(e->j.bid), strlen(e->j.jid), e->raw_len, plen, qlen };
		rep = workflow_script(&x->c->r, "batch_revive", 5, args, lens);
	} else {
		char *qkey = xasprintf(K_QUEUE "%s", q);
		const char *keys[] = { e->key, K_QUEUES, qkey };
		const char *args[] = { e->raw, payload, q };
		size_t lens[] = { e->raw_len, plen, qlen };
		rep = rscript(&x->c->r, "claim_and_requeue", 3, keys, 3, args, lens);
		free(qkey);
	}
	if (!rep)
		return -1;
	long long r = reply_integer(rep, -1);
	freeReplyObject(rep);
	return member ? r >= 0 : r == 1;      /* BATCH_REVIVE: -1 gone, else revived in r */
}

/* A job taken out by hand settled for good (deleted: discarded; killed: dead): its batch
 * counts it and the jobs that wait for it are buried, as a daemon's settle does. An entry
 * of dead had settled already. */
static void settle_taken(struct act *x, const struct entry *e, const char *outcome)
{
	if (e->set == S_DEAD || !e->j.obj || !e->j.jid)
		return;
	if (workflow_settle(&x->c->r, e->j.jid, e->j.bid, outcome) != 0)
		ctl_error("warning: %s not settled in its batch or for the jobs waiting for it "
		          "(cogworkerctl batch settle does it): %s", label(e), x->c->r.err);
}

static int do_retry(struct act *x, const struct entry *e)
{
	struct ctl *c = x->c;
	const char *q = e->j.obj ? jobs_string_member(e, "queue") : NULL;
	const char *why = NULL;
	if (!e->j.obj)
		why = "not a JSON object";
	else if (e->j.cls && strcmp(e->j.cls, "(unparseable)") == 0)
		why = "an (unparseable) wrapper";
	else if (!q || !q[0])
		why = "no queue";
	else
		why = cut_refusal(x, e);
	if (why) {
		ctl_error("%s in %s can't be put back on a queue (%s)", label(e),
		          jobs_set_names[e->set], why);
		result(x, e, NULL, "refused", why, NULL, 0);
		return CTL_NOTHING;
	}
	double now = now_float();
	const cJSON *own = cJSON_GetObjectItemCaseSensitive(e->j.obj, "expires_at");
	if (x->expires_in <= 0 && cJSON_IsNumber(own) && own->valuedouble > 0 &&
	    own->valuedouble <= now)
		return refuse_expired(x, e, own->valuedouble);
	char *payload = e->size ? xstrdup("") : retry_payload(e, now, x->expires_in);
	if (!payload) {
		ctl_error("%s in %s can't be put back on a queue (unreadable payload)", label(e),
		          jobs_set_names[e->set]);
		result(x, e, NULL, "refused", "unreadable payload", NULL, 0);
		return CTL_NOTHING;
	}
	int r = requeue(x, e, payload, q);
	free(payload);
	if (r < 0) {
		char *what = xasprintf("retry of %s", label(e));
		int s = ctl_redis_error(c, what);
		free(what);
		return s;
	}
	if (r == 0) {
		if (!x->quiet_gone)
			ctl_error("%s: gone from %s (someone else took it)", label(e),
			          jobs_set_names[e->set]);
		result(x, e, NULL, "gone", NULL, NULL, 0);
		return CTL_NOTHING;
	}
	x->done++;
	double until = x->expires_in > 0 ? now + x->expires_in : 0;
	if (!c->json && until > 0) {
		char iso[32];
		ctl_iso_time(until, iso);
		printf("retried %s: %s -> queue %s, expires_at %s\n", label(e),
		       jobs_set_names[e->set], q, iso);
	} else if (!c->json) {
		printf("retried %s: %s -> queue %s\n", label(e), jobs_set_names[e->set], q);
	}
	result(x, e, NULL, "retried", NULL, q, until);
	return CTL_OK;
}

/*
 * A deleted or killed job gives back its unique (and periodic running) lock, owner-checked,
 * as a daemon does when a job dies: left, it refused the same push for 24 h with no hint.
 * A failure only warns: the entry is gone either way, and the lock's TTL still applies.
 * What to add to the line printed.
 */
static const char *release_locks(struct act *x, const struct entry *e)
{
	x->released = producer_release_locks(&x->c->r, &e->j);
	if (x->released < 0)
		ctl_error("warning: the locks of %s not released (they expire by their TTL): %s",
		          label(e), x->c->r.err);
	return x->released > 0 ? "; its lock released" : "";
}

static int do_delete(struct act *x, const struct entry *e)
{
	struct ctl *c = x->c;
	long long n_cut = 0;
	redisReply *rep;
	const char *why = cut_refusal(x, e);
	if (why) {
		ctl_error("can't delete %s from %s: %s", label(e), jobs_set_names[e->set], why);
		result(x, e, NULL, "refused", why, NULL, 0);
		return CTL_NOTHING;
	}
	if (e->size) {
		int r = cut_act(x, e, NULL, NULL, NULL);
		if (r < 0)
			return ctl_redis_error(c, e->key);
		rep = NULL;
		n_cut = r;
	} else if (e->set == S_QUEUED) {
		const char *argv[] = { "LREM", e->key, "0", e->raw };
		size_t lens[] = { 4, strlen(e->key), 1, e->raw_len };
		rep = rcmd_argv(&c->r, 4, argv, lens);
	} else {
		const char *argv[] = { "ZREM", e->key, e->raw };
		size_t lens[] = { 4, strlen(e->key), e->raw_len };
		rep = rcmd_argv(&c->r, 3, argv, lens);
	}
	if (!rep && !e->size)
		return ctl_redis_error(c, e->key);
	long long n = e->size ? n_cut : reply_integer(rep, 0);
	if (rep)
		freeReplyObject(rep);
	if (n == 0) {
		if (!x->quiet_gone)
			ctl_error("%s: gone from %s", label(e), jobs_set_names[e->set]);
		result(x, e, NULL, "gone", NULL, NULL, 0);
		return CTL_NOTHING;
	}
	if ((e->set == S_RETRY || e->set == S_DEAD) && e->j.obj && e->j.jid) {
		rep = rcmd(&c->r, "DEL " K_ATTEMPTS "%s", e->j.jid);
		if (rep)
			freeReplyObject(rep);
		else
			ctl_error("warning: " K_ATTEMPTS "%s not deleted: %s", e->j.jid, c->r.err);
	}
	x->done++;
	settle_taken(x, e, SETTLED_DISCARDED);
	const char *released = release_locks(x, e);
	if (!c->json)
		printf("deleted %s from %s%s\n", label(e),
		       e->set == S_QUEUED ? e->key : jobs_set_names[e->set], released);
	result(x, e, NULL, "deleted", NULL, NULL, 0);
	return CTL_OK;
}

static int do_kill(struct act *x, const struct entry *e)
{
	struct ctl *c = x->c;
	double now = ctl_now(c);
	if (now < 0)
		return ctl_redis_error(c, "TIME");
	char score[32];
	job_format_time(now, score);
	const char *why = cut_refusal(x, e);
	if (why) {
		ctl_error("can't kill %s in %s: %s", label(e), jobs_set_names[e->set], why);
		result(x, e, NULL, "refused", why, NULL, 0);
		return CTL_NOTHING;
	}
	const char *keys[] = { e->key, K_DEAD };
	const char *args[] = { e->raw, score, e->raw };
	size_t lens[] = { e->raw_len, strlen(score), e->raw_len };
	redisReply *rep = e->size ? NULL : rscript(&c->r, "kill", 2, keys, 3, args, lens);
	long long r = e->size ? cut_act(x, e, K_DEAD, score, NULL) : rep ? reply_integer(rep, 0) : -1;
	if (rep)
		freeReplyObject(rep);
	if (r < 0) {
		char *what = xasprintf("kill of %s", label(e));
		int s = ctl_redis_error(c, what);
		free(what);
		return s;
	}
	if (r != 1) {
		if (!x->quiet_gone)
			ctl_error("%s: gone from %s", label(e), jobs_set_names[e->set]);
		result(x, e, NULL, "gone", NULL, NULL, 0);
		return CTL_NOTHING;
	}
	x->done++;
	settle_taken(x, e, SETTLED_DEAD);
	const char *released = release_locks(x, e);
	if (!c->json)
		printf("killed %s: %s -> dead%s\n", label(e), jobs_set_names[e->set], released);
	result(x, e, NULL, "killed", NULL, NULL, 0);
	return CTL_OK;
}

static int do_reschedule(struct act *x, const struct entry *e)
{
	struct ctl *c = x->c;
	double now = ctl_now(c);
	if (now < 0)
		return ctl_redis_error(c, "TIME");
	double at = now + x->minutes * 60.0;
	char score[32];
	job_format_time(at, score);
	/* XX: an entry someone took meanwhile is not re-added; same member, no duplicate. */
	const char *argv[] = { "ZADD", e->key, "XX", "CH", score, e->raw };
	size_t lens[] = { 4, strlen(e->key), 2, 2, strlen(score), e->raw_len };
	const char *why = cut_refusal(x, e);
	if (why) {
		ctl_error("can't reschedule %s in %s: %s", label(e), jobs_set_names[e->set], why);
		result(x, e, NULL, "refused", why, NULL, 0);
		return CTL_NOTHING;
	}
	redisReply *rep = e->size ? NULL : rcmd_argv(&c->r, 6, argv, lens);
	long long changed = e->size ? cut_act(x, e, NULL, score, NULL) : rep ? reply_integer(rep, 0)
	                                                                     : -1;
	if (rep)
		freeReplyObject(rep);
	if (changed < 0)
		return ctl_redis_error(c, e->key);
	if (!changed) {         /* taken meanwhile: nothing re-added, and that is fine */
		result(x, e, NULL, "gone", NULL, NULL, 0);
		return CTL_OK;
	}
	x->done++;
	if (!c->json) {
		char iso[32], rel[48];
		ctl_iso_time(at, iso);
		ctl_relative(at, now, rel, sizeof rel);
		printf("rescheduled %s (%s) to %s (%s)\n", label(e), jobs_set_names[e->set], iso, rel);
	}
	result(x, e, NULL, "rescheduled", NULL, NULL, at);
	return CTL_OK;
}

/* Why action a can't be done on an entry of set s (a chain of ifs: cppcheck misreads the
 * chained ternary as always false). */
static const char *refusal(int a, int s)
{
	if (s == S_DEAD && a == A_KILL)
		return "already dead";
	if (s == S_RUNNING)
		return "it is running: stop it with cogworkerctl jobs cancel JID [--discard]";
	if (s == S_WAITING)
		return "it is waiting in its process for a max_concurrency slot, and runs when one "
		       "frees";
	if (s == S_AFTER)
		return "it is waiting for other jobs (doc/protocol.md §7.34), and is queued when they "
		       "settle; batch cancel discards it";
	if (s == S_QUEUED && a == A_KILL)
		return "it is queued (delete it instead)";
	if (s == S_QUEUED && a == A_RETRY)
		return "gone from retry and dead: it is queued already";
	if (s == S_QUEUED)
		return "it is queued already";
	return "not possible in this set";
}

static int apply(struct act *x, const struct entry *e)
{
	if (!(jobs_action_sets[x->a] & BIT(e->set))) {
		const char *why = refusal(x->a, e->set);
		ctl_error("can't %s %s in %s: %s", action_names[x->a], label(e),
		          jobs_set_names[e->set], why);
		result(x, e, NULL, "refused", why, NULL, 0);
		return CTL_NOTHING;
	}
	switch (x->a) {
	case A_RETRY: return do_retry(x, e);
	case A_DELETE: return do_delete(x, e);
	case A_KILL: return do_kill(x, e);
	case A_RESCHEDULE: return do_reschedule(x, e);
	}
	return CTL_USAGE;
}

static void act_finish(struct act *x)
{
	if (x->c->json) {
		sb_addc(&x->json, ']');
		sb_printf(&x->json, ",\"done\":%d}", x->done);
		jprint(&x->json);
	} else {
		sb_free(&x->json);
	}
}

static void act_init(struct act *x, struct ctl *c, enum action a)
{
	memset(x, 0, sizeof *x);
	x->c = c;
	x->a = a;
	sb_init(&x->json);
	sb_printf(&x->json, "{\"action\":\"%s\",\"results\":[", action_names[a]);
}

int jobs_act_on_args(struct ctl *c, enum action a, unsigned sets, const struct filter *base,
                       int nargs, char **args, double minutes, double expires_in)
{
	struct act x;
	act_init(&x, c, a);
	x.minutes = minutes;
	x.expires_in = expires_in;
	int status = CTL_OK;
	/* Look in every set where the entry could be, so a refusal can say where it is. */
	unsigned look = sets;
	if (sets == jobs_action_sets[a])
		look |= BIT(S_QUEUED) | ZSETS | BIT(S_RUNNING) | BIT(S_WAITING) | BIT(S_AFTER);
	for (int i = 0; i < nargs && status != CTL_USAGE; i++) {
		struct filter f = *base;
		f.arg = args[i];
		struct found fd = { 0 };
		if (jobs_find(c, look, &f, 1, &fd) < 0) {
			jobs_found_free(&fd);
			status = CTL_USAGE;
			break;
		}
		if (fd.n == 0) {
			char sl[128];
			jobs_set_list(sets, sl, sizeof sl);
			ctl_error("no job %s in %s (gone?)", args[i], sl);
			result(&x, NULL, args[i], "not_found", NULL, NULL, 0);
			status = ctl_worse(status, CTL_NOTHING);
		}
		for (int k = 0; k < fd.n && status != CTL_USAGE; k++)
			status = ctl_worse(status, apply(&x, &fd.v[k]));
		jobs_found_free(&fd);
	}
	act_finish(&x);
	return status;
}

int jobs_act_on_members(struct ctl *c, enum action a, int set, const char *queue, int n,
                        char *const *raws, const size_t *lens, double minutes)
{
	struct act x;
	act_init(&x, c, a);
	x.minutes = minutes;
	int status = n ? CTL_OK : CTL_NOTHING;
	char *qkey = queue ? xasprintf(K_QUEUE "%s", queue) : NULL;
	const char *key = set == S_QUEUED ? qkey : jobs_zset_keys[set];
	if (!key) {
		ctl_error("%s: not a set of entries to act on%s", jobs_set_names[set],
		          set == S_QUEUED ? " without a queue" : "");
		status = CTL_USAGE;
	}
	for (int i = 0; i < n && status != CTL_USAGE; i++) {
		struct entry e = { .set = set, .key = (char *)key, .qname = (char *)queue,
		                   .raw = raws[i], .raw_len = lens[i] };
		job_parse(&e.j, e.raw, e.raw_len, e.qname);
		status = ctl_worse(status, apply(&x, &e));
		job_free(&e.j);
	}
	free(qkey);
	if (status == CTL_USAGE)
		sb_free(&x.json);
	else
		act_finish(&x);
	return status;
}

/* DEL a whole set (delete --all without filters). */
static int delete_whole(struct ctl *c, int set, const char *queue)
{
	struct act x;
	act_init(&x, c, A_DELETE);
	int status = CTL_OK;
	long long deleted = 0;
	if (set == S_QUEUED) {
		char **qs = NULL;
		size_t nq = 0;
		if (queue) {
			qs = xcalloc(2, sizeof *qs);
			qs[nq++] = xstrdup(queue);
		} else {
			struct queue_info *qi;
			int nqi;
			if (ctl_queue_names(c, 1, 1, &qi, &nqi) != 0) {
				sb_free(&x.json);
				return CTL_USAGE;
			}
			qs = xcalloc((size_t)nqi + 1, sizeof *qs);
			for (int i = 0; i < nqi; i++)
				qs[nq++] = xstrdup(qi[i].name);
			ctl_free_queues(qi, nqi);
		}
		for (size_t i = 0; i < nq && status == CTL_OK; i++) {
			struct rpipe p;
			rpipe_begin(&c->r, &p);
			rpipe_add(&c->r, &p, "MULTI");
			rpipe_add(&c->r, &p, "LLEN " K_QUEUE "%s", qs[i]);
			rpipe_add(&c->r, &p, "DEL " K_QUEUE "%s", qs[i]);
			rpipe_add(&c->r, &p, "EXEC");
			redisReply *reps[4];
			rpipe_exec(&c->r, &p, reps);
			redisReply *ex = reps[3];
			if (!ex || ex->type != REDIS_REPLY_ARRAY || ex->elements != 2) {
				char *what = xasprintf(K_QUEUE "%s", qs[i]);
				status = ctl_redis_error(c, what);
				free(what);
			} else if (ex->element[0]->type == REDIS_REPLY_INTEGER) {
				deleted += ex->element[0]->integer;
				if (!c->json && ex->element[0]->integer > 0)
					printf("deleted %lld job(s) from queue %s\n", ex->element[0]->integer, qs[i]);
			}
			for (int k = 0; k < 4; k++)
				if (reps[k])
					freeReplyObject(reps[k]);
		}
		for (size_t i = 0; i < nq; i++)
			free(qs[i]);
		free(qs);
	} else {
		/* Read every member and DEL the key in one transaction, so no entry slips by
		 * without its attempts log being found. */
		const char *key = jobs_zset_keys[set];
		redisReply *type = rcmd(&c->r, "TYPE %s", key);
		if (!type) {
			sb_free(&x.json);
			return ctl_redis_error(c, key);
		}
		int wrong = strcmp(type->str, "zset") != 0 && strcmp(type->str, "none") != 0;
		if (wrong)
			snprintf(c->r.err, sizeof c->r.err, "holds a %s, not a zset: left alone", type->str);
		freeReplyObject(type);
		if (wrong) {
			sb_free(&x.json);
			return ctl_redis_error(c, key);
		}
		struct rpipe p;
		rpipe_begin(&c->r, &p);
		rpipe_add(&c->r, &p, "MULTI");
		rpipe_add(&c->r, &p, "ZRANGE %s 0 -1", key);
		rpipe_add(&c->r, &p, "DEL %s", key);
		rpipe_add(&c->r, &p, "EXEC");
		redisReply *reps[4];
		rpipe_exec(&c->r, &p, reps);
		redisReply *ex = reps[3];
		if (!ex || ex->type != REDIS_REPLY_ARRAY || ex->elements != 2 ||
		    ex->element[0]->type != REDIS_REPLY_ARRAY) {
			if (ex && ex->type == REDIS_REPLY_ARRAY && ex->elements == 2 &&
			    ex->element[0]->type == REDIS_REPLY_ERROR)
				snprintf(c->r.err, sizeof c->r.err, "%s", ex->element[0]->str);
			status = ctl_redis_error(c, key);
		} else {
			const redisReply *m = ex->element[0];
			deleted = (long long)m->elements;
			if (set == S_RETRY || set == S_DEAD) {
				struct rpipe d;
				rpipe_begin(&c->r, &d);
				int nd = 0;
				for (size_t i = 0; i < m->elements; i++) {
					struct job j;
					job_parse(&j, m->element[i]->str, m->element[i]->len, NULL);
					if (j.obj && j.jid) {
						rpipe_add(&c->r, &d, "DEL " K_ATTEMPTS "%s", j.jid);
						nd++;
					}
					job_free(&j);
				}
				redisReply **dr = xcalloc((size_t)nd + 1, sizeof *dr);
				if (rpipe_exec(&c->r, &d, dr) > 0)
					ctl_error("warning: some attempts logs not deleted: %s", c->r.err);
				for (int i = 0; i < nd; i++)
					if (dr[i])
						freeReplyObject(dr[i]);
				free(dr);
			}
			if (!c->json && deleted > 0)
				printf("deleted %lld job(s) from %s\n", deleted, jobs_set_names[set]);
		}
		for (int k = 0; k < 4; k++)
			if (reps[k])
				freeReplyObject(reps[k]);
	}
	if (status != CTL_OK) {
		sb_free(&x.json);
		return status;
	}
	sb_free(&x.json);
	if (c->json) {
		struct sbuf b;
		sb_init(&b);
		sb_printf(&b, "{\"action\":\"delete\",\"set\":\"%s\",\"results\":[],\"done\":%lld}",
		          jobs_set_names[set], deleted);
		jprint(&b);
	}
	if (deleted == 0) {
		ctl_error("nothing to delete in %s", jobs_set_names[set]);
		return CTL_NOTHING;
	}
	return CTL_OK;
}

int jobs_act_on_all(struct ctl *c, enum action a, int set, const struct filter *f,
                    double expires_in)
{
	if (a == A_DELETE && !f->cls && (set == S_QUEUED || !f->queue))
		return delete_whole(c, set, f->queue);
	struct found fd = { 0 };
	if (jobs_find(c, BIT(set), f, 0, &fd) < 0) {
		jobs_found_free(&fd);
		return CTL_USAGE;
	}
	struct act x;
	act_init(&x, c, a);
	x.quiet_gone = 1;
	x.expires_in = expires_in;
	int status = CTL_OK;
	for (int i = 0; i < fd.n && status != CTL_USAGE; i++)
		status = ctl_worse(status, apply(&x, &fd.v[i]));
	if (fd.n == 0)
		ctl_error("no matching jobs in %s", jobs_set_names[set]);
	if (!c->json && fd.n > 0)
		printf("%s: %d of %d job(s) done\n", action_names[a], x.done, fd.n);
	if (x.done == 0)
		status = ctl_worse(status, CTL_NOTHING);
	act_finish(&x);
	jobs_found_free(&fd);
	return status;
}
