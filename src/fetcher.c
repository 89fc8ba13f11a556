/* SPDX-License-Identifier: MIT */
/*
 * fetcher.c: the processor threads (doc/protocol.md §7.4). Each owns one Redis connection and
 * runs one handler child at a time: fetch → execute → settle → (on_death).
 *
 * A fetcher never dies: an error in an iteration is logged (summarised while Redis is
 * away), the thread sleeps 1 s and goes on (lesson 9). Children are forked from these
 * long-lived threads only, because PR_SET_PDEATHSIG fires when the *thread* that forked
 * exits.
 *
 * A job fetched after the stop began is handed back unstarted (lesson 21). When the
 * drain deadline passes, the manager raises each fetcher's abort flag: the handler's
 * process group gets TERM, a short grace and KILL, and the job is left on the in-progress
 * list for the manager's atomic requeue, so the old run never overlaps the new one.
 *
 * Each run's output goes to the output writer as it is read (outkeep.c: a memcpy here, the
 * Redis writes on the writer's own thread), and each run can be cancelled: the fetcher's
 * cancel flag is registered with the jid while the child is pumped (state.h), and a cancel
 * that the pump acted on settles the job as dead (or discarded) with Cogworker::Cancelled,
 * past the retry budget and the exit-code map, without on_death (like every other
 * cogworkerctl action). A cancel that arrives once the child is reaped changes nothing.
 *
 * Prefetch (doc/design.md "Warm handlers"): a warm job is answered in less than a Redis
 * round trip, so waiting for the next fetch after each "done" doubled the sleeps per job.
 * While a warm job runs, once its message is written, the fetcher makes its next try (the
 * last job's ack riding on it, as always) and holds the job it takes: when "done" comes,
 * that job is written at once, and the Redis reply and the handler's work overlapped. The
 * held job is on the in-progress list like a running one (a crash or a stop requeues it)
 * and counted as running here (reconcile leaves it be). Only a fetcher whose last warm job
 * took less than a fifth of its handler's warm_prefetch_hold tries; a job held that long
 * goes back to the head of its queue for another fetcher, so a long job never keeps the
 * next one from starting; a job held past PREFETCH_FRESH has its queue's pause state read
 * again before it starts, so a pause still stops every job taken before it; a cancel of
 * the held job is registered as a run's is, and a job cancelled while held settles as
 * cancelled without starting. Reliable fetch only, never while quiet, stopping, or while
 * jobs wait here for a slot of their handler.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "admission.h"
#include "batch.h"
#include "bookkeeping.h"
#include "counters.h"
#include "deathhook.h"
#include "fetch.h"
#include "fetcher.h"
#include "handler.h"
#include "job.h"
#include "jobcg.h"
#include "json.h"
#include "keys.h"
#include "outcome.h"
#include "outkeep.h"
#include "settle.h"
#include "state.h"
#include "util.h"
#include "warm.h"
#include "workflow.h"

struct fetcher {
	pthread_t thread;
	int index;
	char tid[13];               /* field name in cogworker:workers:<id> */
	atomic_int abort;
	atomic_int cancel;          /* CANCEL_*: a remote cancel of the running job */
	atomic_int exited;
	int batched;                /* this job's workers entry goes through batch.c */
	struct warm_pool *warm;     /* this thread's warm processes (warm.h) */
	struct jobcg *cg;           /* its cold runs' cgroup, one job at a time; or NULL */
	double next_tend;           /* monotonic: when the pool wants tending */
	struct fetched next;        /* prefetch: a job taken while the last one ran; raw NULL */
	double next_taken;          /* monotonic: when it was taken */
	double last_warm;           /* how long the last warm job took, s; -1 the last run was
	                             * cold, or none yet */
	double hold;                /* the running handler's warm_prefetch_hold */
	atomic_int next_cancel;     /* CANCEL_*: a remote cancel of the held job */
	int pre_cancel;             /* CANCEL_*: the job about to run was cancelled while held */
	struct rconn r;
	struct fetch_state fs;
};

/* One site each for all fetchers (doc/protocol.md §7.24 logs per place in the code, not per
 * thread: N fetchers made N identical lines per outage). log.c serialises them. */
static struct log_site fetch_site = LOG_SITE("Fetch");
static struct log_site job_site = LOG_SITE("Processor");

/* ---- bookkeeping around a run ---- */

static void register_worker(struct fetcher *f, const struct job *j)
{
	const char *queue = j->fetched_from ? j->fetched_from : j->queue;
	/* Reliable fetch: written by the next flush if the job still runs then (batch.c).
	 * Basic fetch's shutdown requeue reads the hash, so it is written now. */
	f->batched = atomic_load(&D.fetch_mode) != FETCH_BASIC;
	if (f->batched)
		batch_job_started(f->index, j->raw, j->raw_len, queue, (long)now_float());
	else
		batch_basic_started(&f->r, &job_site, f->index, j->raw, j->raw_len, queue,
		                    (long)now_float());
}

static void deregister_worker(struct fetcher *f)
{
	if (f->batched)
		batch_job_ended(f->index);
	else
		batch_basic_ended(&f->r, &job_site, f->index);
}

/* ---- the job's log lines ---- */

static void log_done(const struct job *j, double took, const struct run_usage *u)
{
	char d[32], cost[64];
	human_duration(took, 2, d, sizeof d);
	usage_text(u, cost, sizeof cost);
	struct log_field f[2 + USAGE_LOG_FIELDS] = { { "duration", NULL, took },
	                                             { "outcome", "success", 0 } };
	int n = 2 + usage_log_fields(u, f + 2);
	log_event(LOG_INFO, "done", f, n, "done: %s jid=%s %s%s", j->cls ? j->cls : "",
	          j->jid ? j->jid : "?", d, cost);
}

/*
 * One line for a failure: what happened and where it went, e.g.
 *   fail: Mailer jid=… 0.51s cpu=0.48s maxrss=151MiB: exit status 4 → retry 3/25 in 47s
 *   fail: Mailer jid=… 0.50s cpu=0.01s maxrss=4.1MiB: exit status 3 → dead (exit code 3
 *   is in dead_exit_codes)
 * (the cost is left out when no process ran: no handler, or it could not be started).
 * The stderr tail is left to the output lines logged before it (and to the error message,
 * which JSON lines carry whole).
 */
static void log_fail(const struct job *j, const struct run_outcome *o, enum decision d,
                     const struct filing *w, double took, const struct run_usage *u)
{
	char dur[32], reason[160], where[256], in[32], cost[64];
	human_duration(took, 2, dur, sizeof dur);
	usage_text(u, cost, sizeof cost);
	decision_reason(d, j, o, reason, sizeof reason);
	const char *outcome = !w->set ? "discarded"
	                      : strcmp(w->set, K_RETRY) == 0 ? "retry" : "dead";
	long attempt = j->retry_count + 1;
	if (!w->set) {
		snprintf(where, sizeof where, "discarded (%s)", reason);
	} else if (strcmp(w->set, K_RETRY) == 0) {
		human_duration(w->delay, 0, in, sizeof in);
		snprintf(where, sizeof where, "retry %ld/%d in %s", attempt, j->max_retries, in);
	} else {
		snprintf(where, sizeof where, "dead (%s)", *reason ? reason
		         : "interrupted too often");
	}
	const char *how = w->owed ? ", not filed yet: Redis failed; kept in memory for reconcile"
	                  : w->gone ? ", not filed: no longer on our in-progress list"
	                  : w->interrupted ? ", filed by the interrupt path" : "";
	struct log_field f[8 + USAGE_LOG_FIELDS] = {
		{ "duration", NULL, took }, { "outcome", outcome, 0 },
		{ "reason", *reason ? reason : NULL, NAN },
		{ "retry_in", NULL, w->set && !strcmp(w->set, K_RETRY) ? w->delay : NAN },
		{ "attempt", NULL, (double)attempt }, { "max_retries", NULL, j->max_retries },
		{ "error_class", o->error_class, 0 }, { "error_message", o->error_message, 0 },
	};
	int n = 8 + usage_log_fields(u, f + 8);
	log_event(LOG_WARN, "fail", f, n, "fail: %s jid=%s %s%s: %s → %s%s",
	          j->cls ? j->cls : "", j->jid ? j->jid : "?", dur, cost,
	          o->detail ? o->detail : o->error_message, where, how);
}

static void shorten_running_lock(struct fetcher *f, const struct job *j)
{
	if (!j->pjid || !j->jid)
		return;
	struct conf *c = conf_acquire();
	long ttl = conf_active_ttl(c);
	conf_release(c);
	char *key = xasprintf(K_RUNNING "%s", j->pjid);
	expire_owned(&f->r, key, j->jid, ttl);
	free(key);
}

/* ---- running the handler ---- */

struct progress_ctx {
	struct fetcher *f;
	const struct conf *c;
	const char *jid;
	int off;                /* Redis was unavailable: no more progress writes this run */
	struct outrun *out;     /* output kept for jobs log, or NULL */
};

static void on_output(void *ctx, const char *data, size_t len)
{
	struct progress_ctx *p = ctx;
	outkeep_add(p->out, data, len);
}

/* Best effort: while Redis is away each write would hold up the handler's output (and
 * its timeout) for the command timeout, so one unavailable write ends them for the run. */
static void on_progress(void *ctx, const char *line, size_t len)
{
	struct progress_ctx *p = ctx;
	if (!p->off && status_progress(&p->f->r, p->c, p->jid, line, len) < 0)
		p->off = 1;
}

/* A warm process's progress comes over fd 3, not stdout: it goes into the kept output as
 * the line a cold handler prints for it, so `jobs log --follow` shows both alike. */
static void on_warm_progress(void *ctx, const char *pct, const char *message)
{
	struct progress_ctx *p = ctx;
	if (p->out) {
		char *line = xasprintf(PROGRESS_LINE "%s%s%s\n", pct, message && *message ? " " : "",
		                       message ? message : "");
		outkeep_add(p->out, line, strlen(line));
		free(line);
	}
	if (!p->off && status_progress_msg(&p->f->r, p->c, p->jid, pct, message) < 0)
		p->off = 1;
}

/* ---- prefetch: the next job taken while a warm one runs ---- */

#define PREFETCH_BELOW 5        /* only after a warm job shorter than hold / this */
#define PREFETCH_FRESH 0.002    /* s: held longer, its queue's pause state is read again */
#define PREFETCH_LOOK 0.25      /* s: how often a held job looks for quiet and stop */

static void next_give_back(struct fetcher *f)
{
	if (!f->next.raw)
		return;
	cancel_withdraw(&f->next_cancel);   /* a cancel now finds it queued, as it is */
	give_back(&f->r, f->next.raw, f->next.len, f->next.queue);
	running_remove(f->next.raw);
	fetched_free(&f->next);
}

/* A run may have a prefetch beside it: a warm job, after a short one, on reliable fetch,
 * with no timeout that a try's round trip (at worst the command timeout, when Redis
 * stalls) could make late. */
static int prefetch_fits(const struct fetcher *f, const struct handler *h,
                         const struct run_request *req)
{
	double rt = rconn_command_timeout(&f->r);
	return h->warm_prefetch_hold > 0 && f->last_warm >= 0 &&
	       f->last_warm < h->warm_prefetch_hold / PREFETCH_BELOW && !f->next.raw &&
	       atomic_load(&D.fetch_mode) == FETCH_RELIABLE &&
	       (req->timeout <= 0 || req->timeout > 2 * rt);
}

/* run_request.beside of a warm job: first the try (the held ack riding on it, or sent
 * alone), then, if a job was taken and the run goes on, a look every PREFETCH_LOOK for
 * quiet and stop, and its hand-back once it was held warm_prefetch_hold. */
static double beside_job(void *ctx)
{
	struct fetcher *f = ((struct progress_ctx *)ctx)->f;
	if (f->next.raw) {
		double now = mono_now(), due = f->next_taken + f->hold;
		int leaving = atomic_load(&D.quiet) || atomic_load(&D.stopping);
		if (now < due && !leaving)
			return due < now + PREFETCH_LOOK ? due : now + PREFETCH_LOOK;
		if (!leaving) {
			log_debug("Fetch: a job held %.0f ms behind a longer one goes back to %s",
			          f->hold * 1000, f->next.queue);
			metrics_inc(METRIC_PREFETCH_RETURNED);
		}
		next_give_back(f);      /* a quiet or stopping process starts nothing new */
		return 0;
	}
	if (atomic_load(&D.quiet) || atomic_load(&D.stopping) || limits_any_held()) {
		ack_held_settle(&f->r, &f->fs.held);
		return 0;
	}
	int got = fetch_try(&f->r, &f->fs, &f->next);
	if (got == -2)
		fetch_mode_fallback();
	if (got != 1) {
		fetched_free(&f->next);
		return 0;               /* an error is the next fetch's to see and log */
	}
	f->next_taken = mono_now();
	running_add(f->next.raw);
	/* jobs cancel finds it on the in-progress list and asks this process: it must be
	 * reached here, or it would start after its cancel was answered "not running". */
	char *jid = json_member_string(f->next.raw, f->next.len, "jid");
	if (jid)
		cancel_register(jid, &f->next_cancel);
	free(jid);
	metrics_inc(METRIC_PREFETCHED);
	return f->next_taken + (f->hold < PREFETCH_LOOK ? f->hold : PREFETCH_LOOK);
}

/* Run job j under handler h; *tail (malloc'd, NULL when empty) is its stderr tail (a warm
 * job's "done" error in its place: run_said), for the history's backtrace; *out its kept
 * output, for outkeep_end; *usage what it cost. */
static void run_handler(struct fetcher *f, const struct conf *c, const struct job *j,
                        const struct handler *h, struct run_outcome *o, char **tail,
                        size_t *tail_len, struct outrun **out, struct run_usage *usage)
{
	struct progress_ctx progress = { f, c, j->jid, 0, NULL };
	struct job_run run;
	*out = outkeep_begin(j->jid, j->cls, j->queue, (size_t)h->output_keep, now_float());
	progress.out = *out;
	if (job_run_init(&run, j, h, o) != 0)
		return;
	char tag[64];
	snprintf(tag, sizeof tag, "jid=%s", j->jid ? j->jid : "?");
	run.req.log_tag = tag;
	run.req.log_output = 1;
	run.req.abort = &f->abort;
	run.req.on_stdout_line = on_progress;
	run.req.on_output = *out ? on_output : NULL;
	run.req.ctx = &progress;
	run.req.cancel = &f->cancel;
	struct run_result res;
	memset(&res, 0, sizeof res);
	atomic_store(&f->cancel, CANCEL_NONE);
	if (j->jid)
		cancel_register(j->jid, &f->cancel);
	performing_add(j->raw, j->jid, j->pjid, j->periodic_until_executed);
	if (f->pre_cancel != CANCEL_NONE) {
		/* Cancelled while held behind the last job (prefetch): never started, it settles
		 * as any cancelled run does, dead or discarded. */
		ack_held_settle(&f->r, &f->fs.held);
		atomic_store(&f->cancel, f->pre_cancel);
		res.status = RUN_CANCELLED;
		usage_none(&res.usage);
		f->last_warm = -1;
	} else if (h->warm) {
		run.req.on_progress = on_warm_progress;
		run.req.stopping = &D.stopping;
		if (prefetch_fits(f, h, &run.req)) {
			run.req.beside = beside_job;
			f->hold = h->warm_prefetch_hold;
		} else    /* an ack is never held across a run: no try to ride on */
			ack_held_settle(&f->r, &f->fs.held);
		double t0 = mono_now();
		warm_pool_run(f->warm, h, &run.req, j->raw, j->raw_len, &res);
		f->last_warm = mono_now() - t0;
		/* Tended before the next park: the pool changed (a process started, or one was
		 * retired), so the longest block it allows did too. */
		f->next_tend = 0;
	} else {
		ack_held_settle(&f->r, &f->fs.held);
		f->last_warm = -1;
		run.req.cgroup = f->cg;
		handler_run(&run.req, &res, NULL, NULL);
	}
	performing_remove(j->raw);
	cancel_withdraw(&f->cancel);
	if (res.status != RUN_CANCELLED && atomic_load(&f->cancel) != CANCEL_NONE)
		log_info("cancel: jid=%s had finished before the cancel reached it",
		         j->jid ? j->jid : "?");
	outcome_of_run(o, &run, &res);
	*usage = res.usage;
	size_t said_len;
	const char *said = run_said(&res, &said_len);
	if (said_len) {
		*tail = xstrndup(said, said_len);
		*tail_len = said_len;
	}
	run_result_free(&res);
	job_run_free(&run);
}

/*
 * Execute one parsed job: run it and route its outcome. Returns the disposition; sets
 * died and dead_entry when on_death is owed. A success with no status, history or lock
 * to write costs Redis nothing here: each of those checks before writing, and in reliable
 * mode the stats and the workers entry are batch.c's; its ack rides on the next fetch
 * (process).
 */
static enum disposition execute(struct fetcher *f, struct job *j, const char *group, int *died,
                                char **dead_entry, const char **settled_as,
                                struct outrun **judge)
{
	*settled_as = NULL;
	*judge = NULL;
	*died = 0;
	*dead_entry = NULL;
	if (!j->obj || j->invalid) {            /* never run, never retried (§7.4) */
		metrics_inc(METRIC_JOBS_DEAD);
		return bury_unparseable(&f->r, j, &job_site);
	}
	register_worker(f, j);
	const char *cls = j->cls ? j->cls : "";
	if (group) {                    /* fair share: its group, quoted (doc/protocol.md §7.35) */
		char *q = json_quote(group, strlen(group));
		log_event(LOG_INFO, "start", NULL, 0, "start: %s jid=%s group=%s", cls,
		          j->jid ? j->jid : "?", q);
		free(q);
	} else {
		log_event(LOG_INFO, "start", NULL, 0, "start: %s jid=%s", cls, j->jid ? j->jid : "?");
	}
	struct conf *c = conf_acquire();
	const struct handler *h = conf_find_handler(c, cls);
	struct run_outcome o;
	struct outrun *out = NULL;
	char *tail = NULL;
	size_t tail_len = 0;
	struct run_usage usage;
	usage_none(&usage);
	double started = now_float();
	status_write(&f->r, c, j, "working", NULL, NULL, NULL);
	if (!h) {
		outcome_no_handler(&o, cls);
	} else {
		shorten_running_lock(f, j);
		double t0 = mono_now();
		run_handler(f, c, j, h, &o, &tail, &tail_len, &out, &usage);
		if (!o.aborted)
			metrics_observe_run(mono_now() - t0);
		if (!o.aborted && usage.measured)
			metrics_observe_usage(h->class_name, usage_cpu(&usage), usage.maxrss_bytes);
	}
	double finished = now_float();
	double took = finished - started;
	enum disposition disp = DISP_ACK;
	if (o.aborted) {
		/* Left in progress (and in the workers hash, for basic mode) for the requeue. */
		const struct log_field sf[] = { { "duration", NULL, took },
		                                { "outcome", "requeue", 0 } };
		log_event(LOG_WARN, "stopped", sf, 2, "stopped: %s jid=%s (left for the shutdown "
		          "requeue)", cls, j->jid ? j->jid : "?");
		metrics_inc(METRIC_JOBS_INTERRUPTED);
		outkeep_end(out, "stopped", NULL, NULL, finished, &usage);
		conf_release(c);
		free(tail);
		return DISP_ABANDON;
	}
	if (o.success) {
		*settled_as = SETTLED_SUCCESS;
		*judge = outkeep_end_success(out, finished, &usage);
		metrics_inc(METRIC_JOBS_SUCCEEDED);
		batch_processed();
		status_write(&f->r, c, j, "complete", NULL, NULL, &usage);
		history_record(&f->r, c, j, "success", started, finished, NULL, NULL, NULL, 0, &usage);
		release_job_locks(&f->r, j->jid, j->pjid, j->unique, j->cls, j->queue, j->args_json);
		log_done(j, took, &usage);
	} else {
		bump_stats(&f->r, 0, &job_site);
		enum decision d = decide_failure(j, h, &o);
		if (o.cancelled)
			d = atomic_load(&f->cancel) == CANCEL_DISCARD ? DECIDE_DISCARD : DECIDE_DEAD;
		outkeep_end(out, attempt_outcome(d), o.error_class, o.error_message, finished,
		            &usage);
		status_write(&f->r, c, j, d == DECIDE_RETRY ? "retrying" : "failed", o.error_class,
		             o.error_message, &usage);
		history_record(&f->r, c, j, attempt_outcome(d), started, finished, o.error_class, o.error_message,
		               tail, tail_len, &usage);
		struct filing where;
		disp = route_failure(&f->r, j, d, o.error_class, o.error_message, &job_site, died,
		                     dead_entry, &where);
		/* A retry settles nothing: its ack must not say it did (doc/protocol.md §7.34). */
		*settled_as = d == DECIDE_RETRY ? NULL : d == DECIDE_DISCARD ? SETTLED_DISCARDED
		              : SETTLED_DEAD;
		if (o.cancelled && *died) {
			*died = 0;      /* no on_death for a cancel */
			free(*dead_entry);
			*dead_entry = NULL;
		}
		log_fail(j, &o, d, &where, took, &usage);
		metrics_inc(d == DECIDE_DISCARD ? METRIC_JOBS_DISCARDED
		            : *died || d != DECIDE_RETRY ? METRIC_JOBS_DEAD : METRIC_JOBS_RETRIED);
		if (strcmp(o.error_class, "Cogworker::HandlerTimeout") == 0)
			metrics_inc(METRIC_HANDLER_TIMEOUTS);
	}
	conf_release(c);
	outcome_free(&o);
	free(tail);
	deregister_worker(f);
	return disp;
}

/* An earlier attempt of j ran and failed (its payload has failed_at): a run of it may be
 * kept (doc/protocol.md §7.29), which a success must follow. */
static int ran_before(const struct job *j)
{
	return j->obj && cJSON_GetObjectItemCaseSensitive(j->obj, "failed_at") != NULL;
}

/* from_held: fj had waited here for its handler (admission.c). */
static void process(struct fetcher *f, struct fetched *fj, int from_held)
{
	/* A blocking fetch begun before quiet or stop may return a job after it: hand it
	 * back unstarted (a quiet process starts nothing new, lesson 21). */
	if (atomic_load(&D.stopping) || atomic_load(&D.quiet)) {
		give_back(&f->r, fj->raw, fj->len, fj->queue);
		return;
	}
	struct job j;
	job_take(&j, fj->raw, fj->len, fj->queue);
	fj->raw = NULL;
	/* Its deadline and its handler's limits: a job that may not start now has been seen
	 * to (doc/protocol.md §7.30, §7.31). */
	log_job_begin(j.cls, j.jid, j.queue);
	struct admission adm;
	if (limits_gate(&f->r, &j, f->tid, from_held, &adm, &job_site) != GATE_RUN) {
		log_job_end();
		job_free(&j);
		return;
	}
	atomic_fetch_add(&D.busy, 1);
	running_add(j.raw);
	int died = 0;
	const char *settled_as;
	char *dead_entry = NULL;
	struct outrun *judge;
	enum disposition disp = execute(f, &j, adm.group, &died, &dead_entry, &settled_as,
	                               &judge);
	int succeeded = settled_as && strcmp(settled_as, SETTLED_SUCCESS) == 0;
	int basic = atomic_load(&D.fetch_mode) == FETCH_BASIC;
	/* A member's success settles in its batch before its ack (settle.c); a plain job's
	 * rides on the ack, which basic fetch does not have. */
	if (succeeded && (j.bid || basic) && settle_flow_first(&f->r, &j, SETTLED_SUCCESS) != 0)
		disp = DISP_SETTLED;    /* owed, with its ack */
	limits_release(&f->r, &adm);
	if (disp == DISP_ABANDON && f->batched)
		batch_job_ended(f->index);      /* its memory goes with the job below */
	else if (disp == DISP_ABANDON)
		batch_basic_forget(f->index);   /* the same; its entry stays for the requeue */
	atomic_fetch_sub(&D.busy, 1);
	if (disp == DISP_ACK && !died && !basic) {
		/* Rides on the next fetch, the running record with it (settle.h). Not past an
		 * on_death hook: that runs for as long as it takes. One ack is held at a time: an
		 * earlier one still held (no run came to carry it) goes first. */
		ack_held_settle(&f->r, &f->fs.held);
		ack_hold(&f->fs.held, j.raw, j.raw_len, j.jid, j.bid, settled_as, judge,
		         ran_before(&j));
		j.raw = NULL;                   /* the held ack has it now */
	} else {
		outkeep_judge(judge, 1);        /* no record's word: the writer asks */
		if (disp == DISP_ACK)
			settle_ack(&f->r, j.raw, j.raw_len, j.jid, j.bid, settled_as);
		running_remove(j.raw);
	}
	if (died && dead_entry)
		on_death_run(j.cls, j.jid, dead_entry);
	log_job_end();
	free(dead_entry);
	job_free(&j);
}

/*
 * The warm pool between jobs (warm_pool_tend): after each warm job, whose pool changed, and
 * otherwise at most every WARM_TEND_EVERY (a process that died idle is found when it is
 * next used anyway), and a park never
 * blocks past the moment the pool wants tending (an idle timeout, a retired process's
 * grace), so a fetcher parked for 30 s does not leave a process lingering.
 */
#define WARM_TEND_EVERY 0.5

static void tend_warm(struct fetcher *f)
{
	double now = mono_now();
	if (now < f->next_tend)
		return;
	struct conf *c = conf_acquire();
	double due = warm_pool_tend(f->warm, c);
	conf_release(c);
	f->fs.max_block = due;
	f->next_tend = now + (due > 0 && due < WARM_TEND_EVERY ? due : WARM_TEND_EVERY);
}

static void *fetcher_main(void *arg)
{
	struct fetcher *f = arg;
	while (!atomic_load(&D.stopping)) {
		tend_warm(f);
		if (atomic_load(&D.quiet)) {
			next_give_back(f);
			ack_held_settle(&f->r, &f->fs.held);    /* no fetch to ride on */
			limits_give_back_held(&f->r);
			park_wait_idle(0.5);        /* resume and stop wake it (park_wake_all) */
			f->fs.hot = 1;
			continue;
		}
		struct fetched fj;
		if (f->next.raw) {              /* taken while the last job ran: it goes first */
			fj = f->next;
			memset(&f->next, 0, sizeof f->next);
			cancel_withdraw(&f->next_cancel);
			f->pre_cancel = atomic_exchange(&f->next_cancel, CANCEL_NONE);
			running_remove(fj.raw);     /* process counts it as its own */
			if (mono_now() - f->next_taken <= PREFETCH_FRESH ||
			    fetch_recheck_paused(&f->r, &fj))
				process(f, &fj, 0);
			f->pre_cancel = CANCEL_NONE;
			fetched_free(&fj);
			continue;
		}
		if (limits_take_held(&fj)) {    /* waiting jobs first: never starved */
			park_took_job();        /* it may have just left its queue's park */
			ack_held_settle(&f->r, &f->fs.held);
			process(f, &fj, 1);
			fetched_free(&fj);
			continue;
		}
		int got = fetch_job(&f->r, &f->fs, &fj);
		if (got == -2) {
			fetch_mode_fallback();
			continue;
		}
		if (got < 0) {
			site_result(&fetch_site, &f->r, 0, "fetch");
			sleep_unless_stopping(1.0);
			continue;
		}
		if (got == FETCH_IDLE)
			continue;               /* waited without Redis: neither success nor failure */
		site_result(&fetch_site, &f->r, 1, "fetch");
		if (got == 1) {
			process(f, &fj, 0);
			fetched_free(&fj);
		}
	}
	next_give_back(f);
	ack_held_settle(&f->r, &f->fs.held);
	limits_give_back_held(&f->r);
	/* Every warm process of this thread ends with it (their PDEATHSIG is tied to it). */
	warm_pool_free(f->warm, WARM_STOP_GRACE);
	f->warm = NULL;
	jobcg_free(f->cg);
	f->cg = NULL;
	atomic_store(&f->exited, 1);
	return NULL;
}

static struct fetcher *all;
static int nall;

int fetchers_start(int n)
{
	struct conf *c = conf_acquire();
	park_init(n, c->queue_names, c->nqueue_names,
	          c->redis.sentinels.n > 0 ? FETCH_TIMEOUT : IDLE_BLOCK);
	all = xcalloc((size_t)n, sizeof *all);
	nall = n;
	char (*fields)[13] = xcalloc((size_t)n, sizeof *fields);
	for (int i = 0; i < n; i++) {
		struct fetcher *f = &all[i];
		f->index = i;
		f->last_warm = -1;
		fetch_state_init(&f->fs, i);
		f->warm = warm_pool_new();
		char cgname[32];
		snprintf(cgname, sizeof cgname, "fetcher-%d", i);
		f->cg = jobcg_new(cgname);
		random_hex(f->tid, 6);
		memcpy(fields[i], f->tid, sizeof f->tid);
		rconn_init(&f->r, &c->redis);
	}
	conf_release(c);
	batch_init(n, fields);
	free(fields);
	for (int i = 0; i < n; i++)
		if (thread_start(&all[i].thread, NULL, "fetcher", fetcher_main, &all[i]) != 0) {
			log_error("couldn't start fetcher thread %d", i);
			return -1;
		}
	return 0;
}

void fetchers_abandon(void)
{
	for (int i = 0; i < nall; i++)
		if (all[i].thread != 0) {
			pthread_detach(all[i].thread);
			all[i].thread = 0;
		}
}

void fetchers_abort_all(void)
{
	for (int i = 0; i < nall; i++)
		atomic_store(&all[i].abort, 1);
}

int fetchers_join(double deadline)
{
	int left = 0;
	for (int i = 0; i < nall; i++) {
		struct fetcher *f = &all[i];
		if (f->thread == 0)
			continue;
		while (!atomic_load(&f->exited) && mono_now() < deadline)
			sleep_seconds(0.02);
		if (atomic_load(&f->exited)) {
			pthread_join(f->thread, NULL);
			f->thread = 0;
			rconn_free(&f->r);
		} else {
			left++;
		}
	}
	if (left == 0) {
		free(all);
		all = NULL;
		nall = 0;
	}
	return left;
}
