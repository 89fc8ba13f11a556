/*
 * manager.c: the main thread (PROTOCOL §7.1-§7.3, DESIGN.md "Process shape").
 *
 * Boot order matters: conf, identity, signals blocked in every thread (so they are only
 * ever seen here, through a signalfd), then the first heartbeat, *synchronously*, retried
 * every second until it succeeds: fetching without a presence key made a live process
 * look dead (lesson 29). A TERM during that wait exits cleanly. Only then do the
 * subscriber, the fetchers, the poller and the ticker start.
 *
 * The loop waits on the signalfd and an eventfd the subscriber writes to, with a timeout
 * that is the next beat: a beat can never be starved by jobs, which are child processes.
 *
 * Stop: quiet, wait for running jobs up to shutdown_timeout, then abort the children still
 * running (TERM to their group, a grace, KILL), and requeue whatever is left on our
 * in-progress list in one atomic script that also drops finished-but-unacked jobs (a
 * separate ack pass that failed used to requeue finished jobs, lesson 23). The poller and
 * ticker are abandoned, not joined (lesson 77).
 *
 * The conf is reference-counted: a reload swaps in a new one while running jobs keep the
 * handler they started with.
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <systemd/sd-daemon.h>
#include "daemon.h"
#include "job.h"
#include "reaper.h"
#include "json.h"
#include "metrics.h"
#include "util.h"

struct daemon D;

/* ---- the conf, reference-counted ---- */

struct conf_ref {
	struct conf c;              /* first: a struct conf * is a struct conf_ref * */
	int refs;
};
static struct conf_ref *current_conf;
static pthread_mutex_t conf_mu = PTHREAD_MUTEX_INITIALIZER;

struct conf *conf_acquire(void)
{
	pthread_mutex_lock(&conf_mu);
	struct conf_ref *r = current_conf;
	r->refs++;
	pthread_mutex_unlock(&conf_mu);
	return &r->c;
}

void conf_release(struct conf *c)
{
	struct conf_ref *r = (struct conf_ref *)c;
	pthread_mutex_lock(&conf_mu);
	int gone = --r->refs == 0;
	pthread_mutex_unlock(&conf_mu);
	if (gone) {
		conf_free(&r->c);
		free(r);
	}
}

static void conf_install(struct conf *c)
{
	struct conf_ref *r = xcalloc(1, sizeof *r);
	r->c = *c;
	r->refs = 1;                /* the "current" reference */
	pthread_mutex_lock(&conf_mu);
	struct conf_ref *old = current_conf;
	current_conf = r;
	pthread_mutex_unlock(&conf_mu);
	if (old)
		conf_release(&old->c);
}

int sleep_unless_stopping(double s)
{
	double end = mono_now() + s;
	while (!atomic_load(&D.stopping)) {
		double left = end - mono_now();
		if (left <= 0)
			return 0;
		sleep_seconds(left < 0.1 ? left : 0.1);
	}
	return 1;
}

/* ---- in-memory records ---- */

static struct raw_count *find(struct raw_count *v, int n, const char *raw)
{
	for (int i = 0; i < n; i++)
		if (strcmp(v[i].raw, raw) == 0)
			return &v[i];
	return NULL;
}

static void count_add(struct raw_count **v, int *n, int *cap, const char *raw, const char *jid,
                      const char *pjid, int until_executed)
{
	pthread_mutex_lock(&D.mu);
	struct raw_count *e = find(*v, *n, raw);
	if (e) {
		e->count++;
	} else {
		if (*n == *cap) {
			*cap = *cap ? *cap * 2 : 16;
			*v = xrealloc(*v, (size_t)*cap * sizeof **v);
		}
		e = &(*v)[(*n)++];
		memset(e, 0, sizeof *e);
		e->raw = xstrdup(raw);
		e->count = 1;
		e->jid = jid ? xstrdup(jid) : NULL;
		e->pjid = pjid ? xstrdup(pjid) : NULL;
		e->until_executed = until_executed;
	}
	pthread_mutex_unlock(&D.mu);
}

static void count_remove(struct raw_count *v, int *n, const char *raw)
{
	pthread_mutex_lock(&D.mu);
	struct raw_count *e = find(v, *n, raw);
	if (e && --e->count == 0) {
		free(e->raw);
		free(e->jid);
		free(e->pjid);
		*e = v[--(*n)];
	}
	pthread_mutex_unlock(&D.mu);
}

void running_add(const char *raw)
{
	count_add(&D.running, &D.nrunning, &D.caprunning, raw, NULL, NULL, 0);
}

void running_remove(const char *raw)
{
	count_remove(D.running, &D.nrunning, raw);
}

int running_has(const char *raw)
{
	pthread_mutex_lock(&D.mu);
	int has = find(D.running, D.nrunning, raw) != NULL;
	pthread_mutex_unlock(&D.mu);
	return has;
}

void performing_add(const char *raw, const char *jid, const char *pjid, int until_executed)
{
	count_add(&D.performing, &D.nperforming, &D.capperforming, raw, jid, pjid, until_executed);
}

void performing_remove(const char *raw)
{
	count_remove(D.performing, &D.nperforming, raw);
}

void pending_add(struct pending *p)
{
	pthread_mutex_lock(&D.mu);
	p->next = D.pending;
	D.pending = p;
	pthread_mutex_unlock(&D.mu);
}

struct pending *pending_take(const char *raw)
{
	pthread_mutex_lock(&D.mu);
	for (struct pending **pp = &D.pending; *pp; pp = &(*pp)->next) {
		if (strcmp((*pp)->raw, raw) == 0) {
			struct pending *p = *pp;
			*pp = p->next;
			p->next = NULL;
			pthread_mutex_unlock(&D.mu);
			return p;
		}
	}
	pthread_mutex_unlock(&D.mu);
	return NULL;
}

int pending_has(const char *raw)
{
	pthread_mutex_lock(&D.mu);
	int has = 0;
	for (struct pending *p = D.pending; p && !has; p = p->next)
		has = strcmp(p->raw, raw) == 0;
	pthread_mutex_unlock(&D.mu);
	return has;
}

/* ---- identity ---- */

static void make_identity(void)
{
	const char *dyno = getenv("DYNO");
	if (dyno && *dyno)
		snprintf(D.hostname, sizeof D.hostname, "%s", dyno);
	else if (gethostname(D.hostname, sizeof D.hostname - 1) != 0)
		snprintf(D.hostname, sizeof D.hostname, "localhost");
	char suffix[13];
	random_hex(suffix, 6);
	snprintf(D.identity, sizeof D.identity, "%s:%d:%s", D.hostname, (int)getpid(), suffix);
}

/* ---- signals ---- */

static int signal_fd = -1;

static int signals_setup(void)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTSTP);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	/* Blocked before any thread starts, so every thread inherits the mask. */
	if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0)
		return -1;
	signal(SIGPIPE, SIG_IGN);
	signal_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	D.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	return signal_fd >= 0 && D.wake_fd >= 0 ? 0 : -1;
}

enum event { EV_NONE, EV_STOP, EV_QUIET, EV_RESUME, EV_RELOAD };

/* Wait up to timeout seconds for a signal or a remote request. */
static enum event wait_event(double timeout)
{
	struct pollfd pfd[2] = { { signal_fd, POLLIN, 0 }, { D.wake_fd, POLLIN, 0 } };
	int ms = timeout <= 0 ? 0 : (int)(timeout * 1000) + 1;
	if (poll(pfd, 2, ms) <= 0)
		return EV_NONE;
	if (pfd[0].revents & POLLIN) {
		struct signalfd_siginfo si;
		if (read(signal_fd, &si, sizeof si) == sizeof si) {
			switch (si.ssi_signo) {
			case SIGTERM: case SIGINT: return EV_STOP;
			case SIGTSTP: return EV_QUIET;
			case SIGHUP: return EV_RELOAD;
			default:
				log_info("ignoring signal %u", si.ssi_signo);
				return EV_NONE;
			}
		}
	}
	if (pfd[1].revents & POLLIN) {
		uint64_t v;
		if (read(D.wake_fd, &v, sizeof v) < 0)
			return EV_NONE;
		switch (atomic_exchange(&D.remote_request, 0)) {
		case 1: return EV_QUIET;
		case 2: return EV_RESUME;
		case 3: return EV_STOP;
		}
	}
	return EV_NONE;
}

/* ---- reload ---- */

static const char *conf_path;
static struct conf_overrides overrides;

static void reload(void)
{
	char err[1024];
	struct conf fresh;
	sd_notify(0, "RELOADING=1");
	if (conf_load(conf_path, &overrides, &fresh, err, sizeof err) != 0) {
		log_error("reload rejected, the running conf stays in force: %s", err);
		sd_notify(0, "READY=1");
		return;
	}
	struct conf *old = conf_acquire();
	if (fresh.concurrency != old->concurrency)
		log_warn("reload: concurrency changed; it takes effect at the next restart");
	if (fresh.nqueues != old->nqueues)
		log_warn("reload: queues changed; they take effect at the next restart");
	else
		for (int i = 0; i < fresh.nqueues; i++)
			if (strcmp(fresh.queues[i], old->queues[i]) != 0) {
				log_warn("reload: queues changed; they take effect at the next restart");
				break;
			}
	if (strcmp(fresh.redis.display, old->redis.display) != 0)
		log_warn("reload: the Redis endpoint changed; it takes effect at the next restart");
	if (fresh.fetch_basic != old->fetch_basic)
		log_warn("reload: fetch changed; it takes effect at the next restart");
	if (strcmp(fresh.metrics_listen, old->metrics_listen) != 0)
		log_warn("reload: metrics_listen changed; it takes effect at the next restart");
	/* Settings that need a restart keep their running values. */
	int concurrency = old->concurrency;
	conf_release(old);
	fresh.concurrency = concurrency;
	log_set_level(fresh.log_level);
	conf_install(&fresh);
	log_info("reloaded %s: %d handler(s), %d periodic entr%s", conf_path ? conf_path : "(defaults)",
	         fresh.nhandlers, fresh.nperiodic, fresh.nperiodic == 1 ? "y" : "ies");
	sd_notify(0, "READY=1");
}

/* ---- the shutdown requeue ---- */

static char *unsettled_record(const struct pending *p)
{
	char *payload = json_quote(p->payload, strlen(p->payload));
	char *rec = xasprintf("{\"set\":\"%s\",\"score\":%.6f,\"payload\":%s}", p->set, p->score,
	                      payload);
	free(payload);
	return rec;
}

static int park_unsettled(struct rconn *r, const struct pending *p)
{
	char *list = xasprintf(K_INPROGRESS "%s", D.identity);
	char *rec = unsettled_record(p);
	const char *keys[] = { list, K_UNSETTLED };
	const char *args[] = { p->raw, rec };
	redisReply *rep = rscript(r, "park_unsettled", 2, keys, 2, args, NULL);
	free(list);
	free(rec);
	if (!rep)
		return -1;
	freeReplyObject(rep);
	return 0;
}

static void requeue_reliable(struct rconn *r, const struct conf *c)
{
	struct log_site site = LOG_SITE("Shutdown");
	settle_pending_all(r, &site);
	pthread_mutex_lock(&D.mu);
	struct pending *left = D.pending;
	D.pending = NULL;
	pthread_mutex_unlock(&D.mu);
	int nmarks = 0, cap = 16;
	char **marks = xcalloc((size_t)cap, sizeof *marks);
	for (struct pending *p = left; p; p = p->next) {
		char kind = 'd';
		if (!p->is_ack && park_unsettled(r, p) == 0)
			continue;
		if (!p->is_ack) {
			log_error("couldn't hand over the filing of jid=%s: %s", p->jid ? p->jid : "?",
			          r->err);
			kind = 'k';
		}
		if (nmarks == cap)
			marks = xrealloc(marks, (size_t)(cap *= 2) * sizeof *marks);
		marks[nmarks++] = xasprintf("%c:%s", kind, p->raw);
	}
	char *list = xasprintf(K_INPROGRESS "%s", D.identity);
	char *presence = xasprintf(K_PROCESS "%s", D.identity);
	char ttl[32], now[32], maxo[16];
	snprintf(ttl, sizeof ttl, "%ld", conf_queued_ttl(c));
	snprintf(now, sizeof now, "%ld", (long)now_float());
	snprintf(maxo, sizeof maxo, "%d", c->max_orphanings);
	const char *keys[] = { list, presence, K_LAST_BEAT, K_REPEAT_ORPHANS, K_DEAD, K_QUEUES,
	                       K_LIVE_QUEUES };
	const char **args = xcalloc((size_t)nmarks + 10, sizeof *args);
	const char *fixed[] = { K_QUEUE, "default", K_RUNNING, ttl, D.identity, "", now,
	                        K_ORPHANINGS, ORPHAN_COUNTER_TTL, maxo };
	memcpy(args, fixed, sizeof fixed);
	for (int i = 0; i < nmarks; i++)
		args[10 + i] = marks[i];
	redisReply *rep = rscript(r, "requeue", 7, keys, 10 + nmarks, args, NULL);
	if (!rep) {
		log_error("shutdown requeue failed (the jobs stay in %s for recovery): %s", list,
		          r->err);
	} else {
		if (rep->type == REDIS_REPLY_ARRAY && rep->elements >= 2 && rep->element[0]->integer > 0)
			log_info("requeued %lld unfinished job(s)", rep->element[0]->integer);
		freeReplyObject(rep);
	}
	for (int i = 0; i < nmarks; i++)
		free(marks[i]);
	free(marks);
	while (left) {
		struct pending *p = left;
		left = p->next;
		pending_free(p);
	}
	free(args);
	free(list);
	free(presence);
}

static void requeue_basic(struct rconn *r, const struct conf *c)
{
	char *workers = xasprintf(K_WORKERS "%s", D.identity);
	redisReply *rep = rcmd(r, "HVALS %s", workers);
	char ttl[32];
	snprintf(ttl, sizeof ttl, "%ld", conf_queued_ttl(c));
	for (size_t i = 0; rep && rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++) {
		const char *entry = rep->element[i]->str;
		cJSON *e = job_json_parse(entry, strlen(entry));
		const cJSON *q = cJSON_GetObjectItemCaseSensitive(e, "queue");
		size_t start, len;
		if (!cJSON_IsString(q) || json_member_span(entry, strlen(entry), "payload", &start,
		                                           &len) != 0) {
			log_error("unreadable workers entry skipped at shutdown: %.200s", entry);
			cJSON_Delete(e);
			continue;
		}
		char *payload = xstrndup(entry + start, len);
		struct job j;
		job_parse(&j, payload, len, q->valuestring);
		char *qkey = xasprintf(K_QUEUE "%s", q->valuestring);
		char *lock = xasprintf(K_RUNNING "%s", j.pjid ? j.pjid : "");
		const char *keys[] = { qkey, lock };
		const char *args[] = { payload, j.jid ? j.jid : "", ttl,
		                       j.periodic_until_executed && j.pjid ? "1" : "" };
		redisReply *ok = rscript(r, "requeue_entry", 2, keys, 4, args, NULL);
		if (ok)
			freeReplyObject(ok);
		else
			log_error("couldn't requeue jid=%s at shutdown: %s", j.jid ? j.jid : "?", r->err);
		job_free(&j);
		free(qkey);
		free(lock);
		free(payload);
		cJSON_Delete(e);
	}
	if (rep)
		freeReplyObject(rep);
	free(workers);
}

void stop_requeue(struct rconn *r)
{
	struct conf *c = conf_acquire();
	if (atomic_load(&D.fetch_mode) == FETCH_BASIC)
		requeue_basic(r, c);
	else
		requeue_reliable(r, c);
	conf_release(c);
}

/* ---- boot, loop, stop ---- */

static struct rconn mconn;

static int first_beat(void)
{
	for (;;) {
		if (heartbeat_beat(&mconn) == 0)
			return 0;
		double until = mono_now() + 1.0;
		while (mono_now() < until) {
			enum event ev = wait_event(until - mono_now());
			if (ev == EV_STOP)
				return -1;
			if (ev == EV_QUIET)
				atomic_store(&D.quiet, 1);
			if (ev == EV_RESUME)
				atomic_store(&D.quiet, 0);
		}
	}
}

static void check_periodic_classes(const struct conf *c)
{
	for (int i = 0; i < c->nperiodic; i++)
		if (!conf_find_handler(c, c->periodic[i].class_name))
			log_warn("periodic job class %s can't be resolved", c->periodic[i].class_name);
}

static void notify_status(const struct conf *c)
{
	sd_notifyf(0, "STATUS=%d/%d busy%s, redis %s", atomic_load(&D.busy), c->concurrency,
	           atomic_load(&D.quiet) ? ", quiet" : "",
	           atomic_load(&D.prev_beat_failed) ? "unreachable" : "ok");
}

static double beat_interval(void)
{
	struct conf *c = conf_acquire();
	double every = c->heartbeat_interval;
	conf_release(c);
	return every;
}

static int shutdown_daemon(void)
{
	struct conf *c = conf_acquire();
	double timeout = c->shutdown_timeout;
	conf_release(c);
	atomic_store(&D.quiet, 1);
	atomic_store(&D.stopping, 1);
	sd_notify(0, "STOPPING=1");
	log_info("stopping: waiting up to %gs for %d running job(s)", timeout, atomic_load(&D.busy));
	double deadline = mono_now() + timeout;
	/* Keep beating while draining, so the fleet sees us quiet, not dead; but never wait
	 * on a Redis that failed the last beat. */
	int left;
	while ((left = fetchers_join(fmin(deadline, mono_now() + beat_interval()))) > 0 &&
	       mono_now() < deadline)
		if (!atomic_load(&D.prev_beat_failed))
			heartbeat_beat(&mconn);
	if (left > 0 && atomic_load(&D.busy) > 0) {
		log_warn("stopping: %d job(s) still running after %gs; stopping their handlers",
		         atomic_load(&D.busy), timeout);
		fetchers_abort_all();
		left = fetchers_join(mono_now() + ABORT_GRACE + 0.5);
	}
	/*
	 * Idle fetchers return from a blocking fetch within FETCH_TIMEOUT, so waiting until
	 * deadline + FETCH_TIMEOUT + 1 means none pops a job after the requeue (lesson 22).
	 * One stuck on an unreachable Redis is abandoned: a job it might still pop stays in
	 * our in-progress list, which stays registered for recovery.
	 */
	if (left > 0)
		left = fetchers_join(fmax(mono_now(), deadline + FETCH_TIMEOUT + 1.0));
	int abandoned = left;
	if (left > 0) {
		log_error("stopping: %d fetcher(s) stuck in Redis calls are abandoned", left);
		fetchers_abandon();
	}
	/* The rest must fit in shutdown_timeout + 5 s even with Redis away: short timeouts,
	 * and nothing more once Redis has failed to answer. */
	rconn_set_timeouts(&mconn, 1.0, 1.0);
	redisReply *pong = rcmd(&mconn, "PING");
	int reachable = pong != NULL;
	if (pong)
		freeReplyObject(pong);
	if (reachable) {
		deferred_releases_retry(&mconn);
		stop_requeue(&mconn);
	} else {
		log_error("stopping without the shutdown requeue: Redis unreachable (%s); unfinished "
		          "jobs stay in " K_INPROGRESS "%s for recovery", mconn.err, D.identity);
	}
	subscriber_stop();
	if (reachable)
		presence_remove(&mconn);
	log_info("stopped");
	if (abandoned) {
		/* Threads still sit in Redis calls: leave without running exit handlers under
		 * them (the log is unbuffered; nothing else is owed). */
		fflush(NULL);
		_exit(0);
	}
	return 0;
}

void daemon_init(struct conf *conf)
{
	pthread_mutex_init(&D.mu, NULL);
	pthread_mutex_init(&D.mode_lock, NULL);
	conf_install(conf);
}

int manager_run(const char *path, const struct conf_overrides *ov, struct conf *conf)
{
	conf_path = path;
	overrides = *ov;
	daemon_init(conf);
	struct conf *c = conf_acquire();
	log_set_level(c->log_level);
	make_identity();
	D.started_at = now_float();
	reaper_start();                 /* before any thread: it is a fork */
	if (signals_setup() != 0) {
		log_error("couldn't set up signal handling: %s", strerror(errno));
		return 1;
	}
	check_periodic_classes(c);
	rconn_init(&mconn, &c->redis);
	double beat_every = c->heartbeat_interval;
	int concurrency = c->concurrency;
	conf_release(c);

	if (first_beat() != 0) {
		log_info("stopped before the first heartbeat");
		return 0;
	}
	if (subscriber_start() != 0 || fetchers_start(concurrency) != 0 || poller_start() != 0 ||
	    ticker_start() != 0) {
		log_error("couldn't start the daemon's threads");
		return 1;
	}
	c = conf_acquire();
	metrics_start(c);       /* optional; a failure to listen is logged, the daemon runs on */
	struct sbuf qs;
	sb_init(&qs);
	for (int i = 0; i < c->nqueue_names; i++)
		sb_printf(&qs, "%s%s", i ? "," : "", c->queue_names[i]);
	log_info("cogworkerd %s started, identity=%s pid=%d concurrency=%d queues=%s redis=%s",
	         COGWORKERD_VERSION, D.identity, (int)getpid(), c->concurrency, qs.s,
	         c->redis.display);
	sb_free(&qs);
	sd_notify(0, "READY=1");
	notify_status(c);
	conf_release(c);

	double next_beat = mono_now() + beat_every;
	for (;;) {
		enum event ev = wait_event(next_beat - mono_now());
		switch (ev) {
		case EV_STOP:
			return shutdown_daemon();
		case EV_QUIET:
			if (!atomic_exchange(&D.quiet, 1))
				log_info("quiet: no new jobs will be fetched");
			break;
		case EV_RESUME:
			if (atomic_exchange(&D.quiet, 0))
				log_info("resumed: fetching again");
			break;
		case EV_RELOAD:
			reload();
			break;
		case EV_NONE:
			break;
		}
		if (mono_now() >= next_beat) {
			c = conf_acquire();
			beat_every = c->heartbeat_interval;
			conf_release(c);
			/* The watchdog watches this loop, not Redis: a beat that failed (Redis away)
			 * feeds it too, so an outage never gets the running jobs killed (§9). */
			heartbeat_beat(&mconn);
			sd_notify(0, "WATCHDOG=1");
			c = conf_acquire();
			notify_status(c);
			conf_release(c);
			next_beat = mono_now() + beat_every;
		}
	}
}
