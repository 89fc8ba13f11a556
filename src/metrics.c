/* SPDX-License-Identifier: MIT */
/*
 * metrics.c: the HTTP endpoint on `metrics_listen` (libmicrohttpd).
 *
 *   GET /metrics   cogworker's eight metrics, read from Redis (exporter.c, the same text
 *                  as `cogworkerctl metrics`), then this process's own: jobs by outcome, a
 *                  run-time histogram, handler timeouts, Redis reconnects, orphans
 *                  recovered, keys quarantined, cron slots fired and skipped, and gauges
 *                  (busy, concurrency, quiet, redis_up). While Redis does not answer, the
 *                  eight are left out, cogworkerd_redis_up is 0, and the answer is still
 *                  200, so the process's own counters are never lost to a scrape error.
 *                  Every metric has a # HELP line (added here: the exporter renders
 *                  cogworker's exposition, which has none).
 *   GET /healthz   200 "ok" while Redis answers PING and every tracked thread is alive;
 *                  else 503 with one line per problem. 503 "stopping" during the drain.
 *   GET /          a short index of the two, for whoever opens the address in a browser.
 *   anything else  404 (405 for methods other than GET and HEAD).
 *
 * libmicrohttpd runs one internal polling thread (epoll), so requests are served one at a
 * time; the Redis connection of the endpoint is its own (hiredis contexts are not
 * thread-safe) and is still guarded by a mutex, so that a change to a thread-per-
 * connection mode cannot share it unguarded. The thread inherits the manager's blocked
 * signal mask (it is started after signals_setup).
 *
 * The endpoint starts after the other threads; a failure to listen is logged as an error
 * and the daemon goes on running jobs (its job matters more than its metrics; the failed
 * scrape shows the problem). metrics_listen changes take effect at the next restart.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <microhttpd.h>
#include "admission.h"
#include "counters.h"
#include "exporter.h"
#include "fleetlimits.h"
#include "grouplimits.h"
#include "listen.h"
#include "metrics.h"
#include "state.h"
#include "util.h"
#include "workflow.h"

#define METRICS_TOP_GROUPS 10   /* groups per class named in cogworkerd_group_waiting */

/* ---- the endpoint ---- */

static struct MHD_Daemon *mhd;
static struct rconn mconn;
static pthread_mutex_t mconn_mu = PTHREAD_MUTEX_INITIALIZER;
static struct log_site metrics_site = LOG_SITE("Metrics");

static void own_counter(struct sbuf *b, const char *name, enum metric m)
{
	sb_printf(b, "# TYPE %s counter\n%s %llu\n", name, name, metrics_get(m));
}

/* Warm processes (doc/design.md "Warm handlers"): alive now, started, crashed, recycled. */
/* One histogram of the per-class usage series (counters.h): bucket, sum, count lines. */
static void usage_histogram(struct sbuf *b, const char *name, const struct usage_snapshot *u,
                            const double *bounds, int n, const unsigned long long *cum,
                            unsigned long long count, double sum, int whole)
{
	struct sbuf cls;
	sb_init(&cls);
	exporter_label_value(&cls, u->cls, strlen(u->cls));
	for (int i = 0; i < n; i++)
		sb_printf(b, whole ? "%s_bucket{class=\"%s\",le=\"%.0f\"} %llu\n"
		          : "%s_bucket{class=\"%s\",le=\"%g\"} %llu\n", name, cls.s, bounds[i], cum[i]);
	sb_printf(b, "%s_bucket{class=\"%s\",le=\"+Inf\"} %llu\n", name, cls.s, count);
	sb_printf(b, whole ? "%s_sum{class=\"%s\"} %.0f\n" : "%s_sum{class=\"%s\"} %.6f\n", name,
	          cls.s, sum);
	sb_printf(b, "%s_count{class=\"%s\"} %llu\n", name, cls.s, count);
	sb_free(&cls);
}

/* What runs cost, per handler class: CPU seconds, then peak resident bytes. */
static void usage_metrics(struct sbuf *b)
{
	struct usage_snapshot u;
	sb_adds(b, "# TYPE cogworkerd_job_cpu_seconds histogram\n");
	for (int i = 0; i < METRICS_USAGE_CLASSES; i++)
		if (metrics_usage_snapshot(i, &u))
			usage_histogram(b, "cogworkerd_job_cpu_seconds", &u, metrics_cpu_bounds,
			                METRICS_CPU_BUCKETS, u.cpu, u.cpu_count, u.cpu_sum, 0);
	sb_adds(b, "# TYPE cogworkerd_job_maxrss_bytes histogram\n");
	for (int i = 0; i < METRICS_USAGE_CLASSES; i++)
		if (metrics_usage_snapshot(i, &u))
			usage_histogram(b, "cogworkerd_job_maxrss_bytes", &u, metrics_rss_bounds,
			                METRICS_RSS_BUCKETS, u.rss, u.rss_count, u.rss_sum, 1);
}

static void warm_metrics(struct sbuf *b)
{
	static const struct { const char *reason; enum metric m; } reasons[] = {
		{ "jobs", METRIC_WARM_RECYCLED_JOBS }, { "rss", METRIC_WARM_RECYCLED_RSS },
		{ "age", METRIC_WARM_RECYCLED_AGE }, { "idle", METRIC_WARM_RECYCLED_IDLE },
		{ "asked", METRIC_WARM_RECYCLED_ASKED }, { "reload", METRIC_WARM_RECYCLED_RELOAD },
		{ "cancel", METRIC_WARM_RECYCLED_CANCEL },
	};
	sb_printf(b, "# TYPE cogworkerd_warm_processes gauge\ncogworkerd_warm_processes %d\n",
	          atomic_load(&warm_processes_live));
	own_counter(b, "cogworkerd_warm_starts_total", METRIC_WARM_STARTED);
	own_counter(b, "cogworkerd_warm_crashes_total", METRIC_WARM_CRASHED);
	own_counter(b, "cogworkerd_prefetched_total", METRIC_PREFETCHED);
	own_counter(b, "cogworkerd_prefetch_returned_total", METRIC_PREFETCH_RETURNED);
	sb_adds(b, "# TYPE cogworkerd_warm_recycles_total counter\n");
	for (size_t i = 0; i < sizeof reasons / sizeof *reasons; i++)
		sb_printf(b, "cogworkerd_warm_recycles_total{reason=\"%s\"} %llu\n",
		          reasons[i].reason, metrics_get(reasons[i].m));
}

static void own_metrics(struct sbuf *b, int redis_up)
{
	static const struct { const char *outcome; enum metric m; } outcomes[] = {
		{ "succeeded", METRIC_JOBS_SUCCEEDED }, { "retried", METRIC_JOBS_RETRIED },
		{ "dead", METRIC_JOBS_DEAD }, { "discarded", METRIC_JOBS_DISCARDED },
		{ "interrupted", METRIC_JOBS_INTERRUPTED }, { "expired", METRIC_JOBS_EXPIRED },
	};
	sb_adds(b, "# TYPE cogworkerd_jobs_total counter\n");
	for (size_t i = 0; i < sizeof outcomes / sizeof *outcomes; i++)
		sb_printf(b, "cogworkerd_jobs_total{outcome=\"%s\"} %llu\n", outcomes[i].outcome,
		          metrics_get(outcomes[i].m));

	unsigned long long cum[METRICS_RUN_BUCKETS], count;
	double sum;
	metrics_run_snapshot(cum, &count, &sum);
	sb_adds(b, "# TYPE cogworkerd_job_run_seconds histogram\n");
	for (int i = 0; i < METRICS_RUN_BUCKETS; i++)
		sb_printf(b, "cogworkerd_job_run_seconds_bucket{le=\"%g\"} %llu\n",
		          metrics_run_bounds[i], cum[i]);
	sb_printf(b, "cogworkerd_job_run_seconds_bucket{le=\"+Inf\"} %llu\n", count);
	sb_printf(b, "cogworkerd_job_run_seconds_sum %.6f\n", sum);
	sb_printf(b, "cogworkerd_job_run_seconds_count %llu\n", count);

	usage_metrics(b);
	own_counter(b, "cogworkerd_handler_timeouts_total", METRIC_HANDLER_TIMEOUTS);
	own_counter(b, "cogworkerd_redis_reconnects_total", METRIC_REDIS_RECONNECTS);
	own_counter(b, "cogworkerd_orphans_recovered_total", METRIC_ORPHANS_RECOVERED);
	own_counter(b, "cogworkerd_keys_quarantined_total", METRIC_KEYS_QUARANTINED);
	own_counter(b, "cogworkerd_cron_slots_fired_total", METRIC_CRON_FIRED);
	own_counter(b, "cogworkerd_cron_slots_skipped_total", METRIC_CRON_SKIPPED);
	warm_metrics(b);
	limits_metrics(b);

	struct conf *c = conf_acquire();
	int concurrency = c->concurrency;
	conf_release(c);
	sb_printf(b, "# TYPE cogworkerd_busy gauge\ncogworkerd_busy %d\n", atomic_load(&D.busy));
	sb_printf(b, "# TYPE cogworkerd_concurrency gauge\ncogworkerd_concurrency %d\n",
	          concurrency);
	sb_printf(b, "# TYPE cogworkerd_quiet gauge\ncogworkerd_quiet %d\n",
	          atomic_load(&D.quiet) ? 1 : 0);
	sb_printf(b, "# TYPE cogworkerd_redis_up gauge\ncogworkerd_redis_up %d\n", redis_up);
	sb_printf(b, "# TYPE cogworkerd_start_time_seconds gauge\n"
	          "cogworkerd_start_time_seconds %.3f\n", D.started_at);
	sb_printf(b, "# TYPE cogworkerd_build_info gauge\n"
	          "cogworkerd_build_info{version=\"%s\"} 1\n", COGWORKERD_VERSION);
}

/*
 * # HELP of every metric served, by name. The eight of cogworker are rendered by the
 * exporter exactly as `cogworkerctl metrics` prints them (cogworker's own exposition has no
 * HELP lines); the endpoint adds a HELP line before each TYPE line, so that promtool and
 * people reading a scrape know what each one is. A metric missing here gets a HELP line
 * saying so, which the integration test of the endpoint fails on.
 */
static const char *const metric_help[][2] = {
	{ "cogworker_processed_total", "Jobs processed successfully, fleet-wide." },
	{ "cogworker_failed_total", "Job runs that failed, fleet-wide." },
	{ "cogworker_retry_size", "Jobs waiting in the retry set." },
	{ "cogworker_scheduled_size", "Jobs waiting in the schedule set." },
	{ "cogworker_dead_size", "Jobs in the dead set." },
	{ "cogworker_queue_size", "Jobs waiting on each queue." },
	{ "cogworker_queue_latency_seconds", "Age of the oldest job waiting on each queue." },
	{ "cogworker_busy_workers", "Jobs running now, over the live processes of the fleet." },
	{ "cogworkerd_jobs_total", "Jobs this process finished, by outcome." },
	{ "cogworkerd_job_run_seconds", "How long this process's handler runs took." },
	{ "cogworkerd_job_cpu_seconds",
	  "User + system CPU seconds of this process's handler runs, per handler class." },
	{ "cogworkerd_job_maxrss_bytes",
	  "Peak resident memory of this process's handler runs, per handler class." },
	{ "cogworkerd_handler_timeouts_total", "Handler runs stopped at their timeout." },
	{ "cogworkerd_redis_reconnects_total", "Redis connections made again after losing one." },
	{ "cogworkerd_orphans_recovered_total", "Jobs of dead processes put back on their queues." },
	{ "cogworkerd_keys_quarantined_total", "Keys of the wrong type this process moved aside." },
	{ "cogworkerd_cron_slots_fired_total", "Periodic slots this process claimed and pushed." },
	{ "cogworkerd_cron_slots_skipped_total", "Periodic slots this process skipped." },
	{ "cogworkerd_warm_processes", "Warm handler processes alive now." },
	{ "cogworkerd_warm_starts_total", "Warm handler processes started." },
	{ "cogworkerd_warm_crashes_total",
	  "Warm handler processes that died, broke the protocol or never became ready." },
	{ "cogworkerd_warm_recycles_total", "Warm handler processes retired, by reason." },
	{ "cogworkerd_prefetched_total",
	  "Jobs taken while a warm job ran, to start the moment it ends." },
	{ "cogworkerd_prefetch_returned_total",
	  "Prefetched jobs handed back to their queue: the warm job they waited for ran long." },
	{ "cogworkerd_limit_running", "Jobs of each limited handler class running here." },
	{ "cogworkerd_limit_waiting",
	  "Jobs waiting here for a max_concurrency slot, per handler class." },
	{ "cogworkerd_jobs_limited_total",
	  "Jobs this process turned away by a handler's limit, by class and limit." },
	{ "cogworkerd_fleet_concurrency", "A handler class's fleet_concurrency, fleet-wide." },
	{ "cogworkerd_fleet_slots_held", "Fleet slots of a handler class leased now, fleet-wide." },
	{ "cogworkerd_groups_waiting", "Groups of a handler class with jobs set aside (fair share)." },
	{ "cogworkerd_group_jobs_waiting", "Jobs of a handler class set aside for their group, in "
	  "the groups read (at most 1000 per class; cogworkerd_groups_not_read: the rest)." },
	{ "cogworkerd_groups_not_read", "Groups of a handler class with jobs set aside that a "
	  "scrape did not read (beyond 1000 per class): cogworkerd_group_jobs_waiting leaves out "
	  "their jobs." },
	{ "cogworkerd_group_waiting", "Jobs set aside in one group's line: the 10 groups of each "
	  "class with the most." },
	{ "cogworkerd_limit_waiters",
	  "Jobs a fleet limit turned away that wait for their next try, fleet-wide." },
	{ "cogworkerd_rate_limit", "A handler class's rate_limit: starts allowed per window." },
	{ "cogworkerd_rate_limit_window_seconds", "A handler class's rate_limit window." },
	{ "cogworkerd_rate_limit_window_starts",
	  "Starts of a handler class within the current rate_limit window, fleet-wide." },
	{ "cogworkerd_batches_open", "Batches not committed yet, fleet-wide." },
	{ "cogworkerd_jobs_waiting_for_jobs",
	  "Jobs waiting for other jobs to settle (push --after), fleet-wide." },
	{ "cogworkerd_busy", "Handler children this process runs now." },
	{ "cogworkerd_concurrency", "The most handler children this process runs at once." },
	{ "cogworkerd_quiet", "1 while this process fetches no new jobs (quiet or stopping)." },
	{ "cogworkerd_redis_up", "1 when this scrape could read the fleet-wide metrics from Redis." },
	{ "cogworkerd_start_time_seconds", "When this process started, in seconds since the epoch." },
	{ "cogworkerd_build_info", "The version of this cogworkerd, as a label; always 1." },
};

/* in with a "# HELP name text" line before each "# TYPE name …" line, into out. */
static void add_help(const struct sbuf *in, struct sbuf *out)
{
	const char *p = in->s, *end = in->s + in->len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
		if (len > 7 && memcmp(p, "# TYPE ", 7) == 0) {
			const char *name = p + 7;
			size_t nlen = strcspn(name, " \n");
			const char *help = "(undocumented)";
			for (size_t i = 0; i < sizeof metric_help / sizeof *metric_help; i++)
				if (strlen(metric_help[i][0]) == nlen &&
				    memcmp(metric_help[i][0], name, nlen) == 0)
					help = metric_help[i][1];
			sb_printf(out, "# HELP %.*s %s\n", (int)nlen, name, help);
		}
		sb_add(out, p, len);
		p += len;
	}
}

static void render_metrics(struct sbuf *out)
{
	const char *what = "";
	struct sbuf plain, *b = &plain;
	sb_init(&plain);
	pthread_mutex_lock(&mconn_mu);
	int rc = exporter_render(&mconn, b, &what);
	/* The fleet's limits (doc/protocol.md §7.30), from Redis like the eight; a failure
	 * leaves them out and is logged like theirs. */
	struct fleet_limit *fl = NULL;
	int nfl = 0, frc = rc == 0 ? fleet_limits_read(&mconn, &fl, &nfl, &what) : 0;
	if (rc == 0 && frc == 0)
		fleet_limits_render(fl, nfl, b);
	fleet_limits_free(fl, nfl);
	/* The groups of fair share (§7.35) with jobs set aside: per class, and the
	 * METRICS_TOP_GROUPS most waiting of each by name, so the series stay few however many
	 * tenants there are. */
	struct group_row *gr = NULL;
	int ngr = 0;
	if (rc == 0 && frc == 0 && (frc = group_limits_read(&mconn, NULL, 0, &gr, &ngr, &what)) == 0)
		group_limits_render(gr, ngr, METRICS_TOP_GROUPS, b);
	group_limits_free(gr, ngr);
	/* Batches and jobs waiting for jobs (doc/protocol.md §7.34), the same way. */
	if (rc == 0 && frc == 0 && workflow_metrics(&mconn, b) != 0) {
		frc = -1;
		what = "batch counts";
	}
	if (rc != 0 || frc != 0) {
		if (mconn.unavailable)
			log_site_unavailable(&metrics_site, mconn.err, mono_now());
		else
			log_error("Metrics: %s failed: %s", what, mconn.err);
	} else if (metrics_site.in_episode) {
		log_site_recovered(&metrics_site, mono_now());
	}
	pthread_mutex_unlock(&mconn_mu);
	own_metrics(b, rc == 0);
	add_help(&plain, out);
	sb_free(&plain);
}

/* 1 when healthy; otherwise the reasons, one per line, in why. */
static int healthy(struct sbuf *why)
{
	if (atomic_load(&D.stopping)) {
		sb_adds(why, "stopping\n");
		return 0;
	}
	int ok = 1;
	pthread_mutex_lock(&mconn_mu);
	redisReply *rep = rcmd(&mconn, "PING");
	if (rep) {
		freeReplyObject(rep);
	} else {
		sb_printf(why, "redis: %s\n", mconn.err);
		ok = 0;
	}
	pthread_mutex_unlock(&mconn_mu);
	if (threads_exited(why) > 0)
		ok = 0;
	return ok;
}

static enum MHD_Result respond(struct MHD_Connection *conn, unsigned status, struct sbuf *body,
                               const char *type)
{
	size_t len = body->len;
	struct MHD_Response *res = MHD_create_response_from_buffer(len, sb_steal(body),
	                                                           MHD_RESPMEM_MUST_FREE);
	if (!res)
		return MHD_NO;
	MHD_add_response_header(res, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	MHD_add_response_header(res, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	enum MHD_Result ret = MHD_queue_response(conn, status, res);
	MHD_destroy_response(res);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **req_cls)
{
	(void)cls;
	(void)version;
	(void)upload_data;
	/* The first call per request only announces it (headers read); answer on the second,
	 * once any body has been received (and ignored). */
	if (*req_cls == NULL) {
		*req_cls = (void *)1;
		return MHD_YES;
	}
	if (*upload_data_size) {
		*upload_data_size = 0;
		return MHD_YES;
	}
	struct sbuf body;
	sb_init(&body);
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
		sb_adds(&body, "method not allowed\n");
		return respond(conn, MHD_HTTP_METHOD_NOT_ALLOWED, &body, "text/plain");
	}
	if (strcmp(url, "/metrics") == 0) {
		render_metrics(&body);
		return respond(conn, MHD_HTTP_OK, &body, EXPORTER_CONTENT_TYPE);
	}
	if (strcmp(url, "/healthz") == 0) {
		struct sbuf why;
		sb_init(&why);
		int ok = healthy(&why);
		if (ok)
			sb_adds(&body, "ok\n");
		else
			sb_add(&body, why.s, why.len);
		sb_free(&why);
		return respond(conn, ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, &body,
		               "text/plain");
	}
	if (strcmp(url, "/") == 0) {
		sb_printf(&body, "cogworkerd %s, process %s\n\n"
		          "/metrics  Prometheus metrics: cogworker's eight, read from Redis for the "
		          "whole fleet, and this process's own\n"
		          "/healthz  200 \"ok\" while Redis answers and every thread runs, else 503 "
		          "with the reasons\n", COGWORKERD_VERSION, D.identity);
		return respond(conn, MHD_HTTP_OK, &body, "text/plain; charset=utf-8");
	}
	sb_adds(&body, "not found: try /, /metrics or /healthz\n");
	return respond(conn, MHD_HTTP_NOT_FOUND, &body, "text/plain");
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	char line[512];
	vsnprintf(line, sizeof line, fmt, ap);
	line[strcspn(line, "\n")] = '\0';
	log_debug("Metrics: %s", line);
}

int metrics_start(const struct conf *c)
{
	if (!c->metrics_listen || !*c->metrics_listen)
		return 0;
	char err[512];
	int fd = listen_tcp(c->metrics_listen, NULL, err, sizeof err);
	if (fd < 0) {
		log_error("metrics endpoint: can't listen on %s: %s (running without it)",
		          c->metrics_listen, err);
		return -1;
	}
	rconn_init(&mconn, &c->redis);
	mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO, 0, NULL, NULL,
	                       on_request, NULL,
	                       MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
	                       MHD_OPTION_CONNECTION_LIMIT, (unsigned)64,
	                       MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
	                       MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
	                       MHD_OPTION_END);
	if (!mhd) {
		log_error("metrics endpoint: libmicrohttpd did not start on %s (running without it)",
		          c->metrics_listen);
		close(fd);
		rconn_free(&mconn);
		return -1;
	}
	log_info("metrics endpoint on http://%s/metrics (and /healthz)", c->metrics_listen);
	return 0;
}
