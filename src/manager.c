/* SPDX-License-Identifier: MIT */
/*
 * manager.c: the main thread (doc/protocol.md §7.1-§7.3, doc/design.md "Process shape").
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
 * Stop: quiet, wait for running jobs up to shutdown_timeout (a second stop signal cuts the
 * wait short), then abort the children still running (TERM to their group, a grace, KILL),
 * and requeue whatever is left on our in-progress list (stoprequeue.c). The poller and ticker are abandoned, not joined
 * (lesson 77).
 *
 * The conf is reference-counted (state.c): a reload swaps in a new one while running jobs
 * keep the handler they started with.
 */
#include <errno.h>
#include <malloc.h>
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
#include "batch.h"
#include "confine.h"
#include "cgcaps.h"
#include "fetch.h"
#include "fetcher.h"
#include "handler.h"
#include "heartbeat.h"
#include "jobcg.h"
#include "keys.h"
#include "manager.h"
#include "metrics.h"
#include "outcome.h"
#include "outkeep.h"
#include "park.h"
#include "reaper.h"
#include "scheduled.h"
#include "sentinelwatch.h"
#include "settle.h"
#include "state.h"
#include "stoprequeue.h"
#include "ticker.h"
#include "util.h"
#include "waker.h"

/* How often the drain looks for a second stop signal: what "at once" costs a stop. */
#define DRAIN_SLICE 0.25

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

/* What --check warns about, logged at start and after each reload (§7.1 step 4). */
static void log_conf_warnings(const struct conf *c)
{
	char **warn;
	int n = conf_warnings(c, &warn);
	for (int i = 0; i < n; i++)
		log_warn("%s", warn[i]);
	conf_warnings_free(warn, n);
}

static const char *conf_path;
static struct conf_overrides overrides;

static void warn_command(void *ctx, const char *problem)
{
	(void)ctx;
	log_warn("%s (its jobs will fail until it is fixed)", problem);
}

static void confine_problem(void *ctx, const char *problem)
{
	(void)ctx;
	log_error("reload rejected, the running conf stays in force: %s", problem);
}

static int same_str(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

/* The connections keep the TLS context they were made with (redis_conf_copy). */
static int same_tls(const struct redis_conf *a, const struct redis_conf *b)
{
	return a->sentinel_tls == b->sentinel_tls && a->tls.verify == b->tls.verify &&
	       same_str(a->tls.ca_file, b->tls.ca_file) &&
	       same_str(a->tls.cert_file, b->tls.cert_file) &&
	       same_str(a->tls.key_file, b->tls.key_file) &&
	       same_str(a->tls.server_name, b->tls.server_name);
}

static void reject_caps(void *ctx, const char *problem)
{
	(void)ctx;
	log_error("reload rejected, the running conf stays in force: %s", problem);
}

static void reject_start(void *ctx, const char *problem)
{
	(void)ctx;
	log_error("%s", problem);
}

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
	if (confine_check_conf(&fresh, confine_problem, NULL)) {
		conf_free(&fresh);
		sd_notify(0, "READY=1");
		return;
	}
	if (caps_check_conf(&fresh, reject_caps, NULL) > 0) {
		conf_free(&fresh);
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
	if (!same_tls(&fresh.redis, &old->redis))
		log_warn("reload: the Redis TLS settings changed; they take effect at the next "
		         "restart");
	if (fresh.fetch_basic != old->fetch_basic)
		log_warn("reload: fetch changed; it takes effect at the next restart");
	if (fresh.containment != old->containment)
		log_warn("reload: containment changed; it takes effect at the next restart");
	if (strcmp(fresh.metrics_listen, old->metrics_listen) != 0)
		log_warn("reload: metrics_listen changed; it takes effect at the next restart");
	/* Settings that need a restart keep their running values. */
	conf_keep_restart_settings(&fresh, old);
	conf_release(old);
	log_set_level(fresh.log_level);
	log_set_format(fresh.log_format);
	conf_check_commands(&fresh, warn_command, NULL);
	conf_install(&fresh);
	log_info("reloaded %s: %d handler(s), %d periodic entr%s", conf_path ? conf_path : "(defaults)",
	         fresh.nhandlers, fresh.nperiodic, fresh.nperiodic == 1 ? "y" : "ies");
	struct conf *now = conf_acquire();
	log_conf_warnings(now);
	conf_release(now);
	ticker_kick();                  /* the entries may have changed */
	sd_notify(0, "READY=1");
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

/*
 * RLIMIT_NPROC counts every process and thread of the child's real user, and the kernel
 * does not enforce it for root: without `user` the child is the daemon's user, so the
 * limit does nothing for a root daemon and counts the daemon's own threads otherwise.
 * Valid, so not a conf error; but it rarely does what was meant, so it is said at start.
 */
static void check_nproc_limits(const struct conf *c)
{
	for (int i = 0; i < c->nhandlers; i++) {
		const struct handler *h = &c->handlers[i];
		if (h->rlimit_nproc < 0 || h->user)
			continue;
		if (geteuid() == 0)
			log_warn("handler %s: rlimit_nproc does nothing here: the handler runs as root "
			         "(no user set), and the kernel does not apply it to root",
			         h->class_name);
		else
			log_warn("handler %s: rlimit_nproc counts every process and thread of the "
			         "daemon's own user (no user set), the daemon's threads included",
			         h->class_name);
	}
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

/*
 * The drain: wait for the running jobs until *deadline, beating meanwhile so the fleet sees
 * us quiet, not dead; but never waiting on a Redis that failed the last beat. The batched
 * counts go with these beats (a flush a second could hang the drain on a Redis that stopped
 * answering: the beat is the one Redis call allowed here), and with the last flush after.
 *
 * A second stop (TERM, INT, a remote stop) cuts it short: whoever sends it wants the
 * process gone now, as a second Ctrl-C under `make run` does, so *deadline becomes now and
 * the jobs are stopped and requeued as when a drain runs out; *cut says so. Returns the
 * number of fetchers still running.
 */
static int drain(double *deadline, int *cut)
{
	double next_beat = mono_now() + beat_interval();
	int left;
	*cut = 0;
	while ((left = fetchers_join(fmin(*deadline, mono_now() + DRAIN_SLICE))) > 0 &&
	       mono_now() < *deadline) {
		if (wait_event(0) == EV_STOP) {
			log_warn("stopping: stopped again: stopping the handlers of %d running job(s) "
			         "now; their jobs go back to their queues", atomic_load(&D.busy));
			*deadline = mono_now();
			*cut = 1;
			break;
		}
		if (mono_now() >= next_beat) {
			if (!atomic_load(&D.prev_beat_failed) && heartbeat_beat(&mconn) == 0)
				batch_flush(&mconn);
			next_beat = mono_now() + beat_interval();
		}
	}
	return left;
}

static int shutdown_daemon(void)
{
	struct conf *c = conf_acquire();
	double timeout = c->shutdown_timeout;
	conf_release(c);
	atomic_store(&D.quiet, 1);
	atomic_store(&D.stopping, 1);
	park_wake_all();                /* parked fetchers are unblocked, not waited for */
	sd_notify(0, "STOPPING=1");
	int running = atomic_load(&D.busy);
	if (running > 0)
		log_info("stopping: waiting up to %gs for %d running job(s)", timeout, running);
	else
		log_info("stopping: no job running");
	double deadline = mono_now() + timeout;
	int cut, left = drain(&deadline, &cut);
	if (left > 0 && atomic_load(&D.busy) > 0) {
		if (!cut)
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
	if (left > 0) {
		park_unblock(&mconn);       /* in case the waker's connection is the one in trouble */
		left = fetchers_join(fmax(mono_now(), deadline + FETCH_TIMEOUT + 1.0));
	}
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
	/* Kept output is best effort: a second at most, and none when Redis is away. */
	abandoned += outkeep_stop(reachable, mono_now() + (reachable ? 1.0 : 0.0));
	if (reachable) {
		batch_flush(&mconn);            /* the last counts: nothing runs any more */
		deferred_releases_retry(&mconn);
		stop_requeue(&mconn);
	} else {
		log_error("stopping without the shutdown requeue: Redis unreachable (%s); unfinished "
		          "jobs stay in " K_INPROGRESS "%s for recovery", mconn.err, D.identity);
		struct pending *owed = pending_take_all();
		pending_acks_lost(owed, mconn.err);
		while (owed) {
			struct pending *p = owed;
			owed = p->next;
			pending_free(p);
		}
	}
	subscriber_stop();
	sentinel_watch_stop();
	if (reachable)
		presence_remove(&mconn);
	jobcg_shutdown();               /* whatever a job left: killed, its cgroups removed */
	log_info("stopped");
	if (abandoned) {
		/* Threads still sit in Redis calls: leave without running exit handlers under
		 * them (the log is unbuffered; nothing else is owed). */
		fflush(NULL);
		_exit(0);
	}
	return 0;
}

/*
 * glibc raises its mmap threshold up to 32 MiB each time a mapped block is freed, so after a
 * few large jobs their buffers came from the heap arenas (one per fetcher thread), and an
 * arena keeps what is freed: six 10 MB jobs left 150 MB behind. A fixed threshold (the
 * default's starting value, 128 KiB) keeps every block that large mapped and unmapped
 * again on free; the daemon's own steady allocations are all smaller (doc/performance.md).
 */
static void memory_setup(void)
{
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
}

int manager_run(const char *path, const struct conf_overrides *ov, struct conf *conf)
{
	memory_setup();
	conf_path = path;
	overrides = *ov;
	state_init(conf);
	struct conf *c = conf_acquire();
	log_set_level(c->log_level);
	log_set_format(c->log_format);
	make_identity();
	D.started_at = now_float();
	char cgerr[1024];
	if (jobcg_init(c->containment, cgerr, sizeof cgerr) != 0) {   /* before the reaper */
		log_error("%s: %s", c->containment_where ? c->containment_where : "?", cgerr);
		conf_release(c);
		return 2;
	}
	/* The caps' controllers on v2 enabled for the jobs' cgroups, and checked again: what
	 * --check could only judge from the controllers offered (cgcaps.c). */
	cgcaps_v2_setup();
	if (caps_check_conf(c, reject_start, NULL) > 0) {
		conf_release(c);
		return 2;
	}
	reaper_start();                 /* before any thread: it is a fork */
	if (signals_setup() != 0) {
		log_error("couldn't set up signal handling: %s", strerror(errno));
		return 1;
	}
	log_conf_warnings(c);
	conf_check_commands(c, warn_command, NULL);
	check_nproc_limits(c);
	cgcaps_sweep();                 /* the caps' cgroups a killed daemon left */
	rconn_init(&mconn, &c->redis);
	double beat_every = c->heartbeat_interval;
	int concurrency = c->concurrency;
	conf_release(c);

	if (first_beat() != 0) {
		log_info("stopped before the first heartbeat");
		return 0;
	}
	c = conf_acquire();
	int watch = sentinel_watch_start(c);
	conf_release(c);
	if (watch != 0 || subscriber_start() != 0 || outkeep_start() != 0 ||
	    fetchers_start(concurrency) != 0 || poller_start() != 0 || ticker_start() != 0 ||
	    waker_start() != 0) {          /* the waker last: it kicks the others */
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
	double next_flush = mono_now() + BATCH_INTERVAL;
	for (;;) {
		enum event ev = wait_event(fmin(next_beat, next_flush) - mono_now());
		switch (ev) {
		case EV_STOP:
			return shutdown_daemon();
		case EV_QUIET:
			if (!atomic_exchange(&D.quiet, 1)) {
				park_wake_all();        /* parked fetchers stop watching at once */
				log_info("quiet: no new jobs will be fetched");
			}
			break;
		case EV_RESUME:
			if (atomic_exchange(&D.quiet, 0)) {
				park_wake_all();
				poller_kick();
				ticker_kick();
				log_info("resumed: fetching again");
			}
			break;
		case EV_RELOAD:
			reload();
			break;
		case EV_NONE:
			break;
		}
		if (mono_now() >= next_flush) {
			/* Nothing to send: no Redis call. After a failed beat the counts wait in
			 * memory for the beat that finds Redis back: a flush per second into an
			 * outage would hold up this loop (signals, the stop) in Redis timeouts. */
			if (!atomic_load(&D.prev_beat_failed)) {
				batch_flush(&mconn);
				waiting_publish(&mconn, 0);
			}
			next_flush = mono_now() + BATCH_INTERVAL;
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
