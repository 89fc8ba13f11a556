/* SPDX-License-Identifier: MIT */
/*
 * conf_settings.c: the settings of the conf file outside the handlers: the top level, redis,
 * and each periodic entry: their defaults, what they take, and how they are read. The
 * loader (config.c) walks the file and reports errors at their file:line; this file says
 * what is allowed. The handlers' settings are conf_handler.c's.
 *
 * - Every group (top level, redis, each periodic entry) is walked member by member against
 *   a table of known settings (struct spec, read by apply_group in conf_read.c). A name that
 *   is not in the table is an error: a misspelt setting that silently keeps its default is
 *   the classic conf-file bug.
 * - A table row says what kind of value the setting takes (seconds, integer, bool, string,
 *   argv, exit codes), its bounds and where it lands in the struct, so reading and type
 *   checking is one generic function. The few settings with a grammar of their own (queues,
 *   fetch, log_level, log_format, metrics_listen, on_death, periodic) have a reader here;
 *   handlers is conf_handler.c's reader.
 * - What concerns one periodic entry (a cron that does not parse) is checked once its group
 *   is read, and blames a line inside it. Checks between top-level settings are the
 *   loader's: they run last, after the command line.
 *
 * The tables are also the list of names the man page (man/cogworkerd.conf.5) must document:
 * an integration test (test_service.py) reads the names from every conf_*.c file.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libconfig.h>
#include <cJSON.h>

#include "config.h"
#include "config_int.h"
#include "cron.h"
#include "listen.h"
#include "log.h"
#include "util.h"

#define DEFAULT_REDIS_URL   "redis://127.0.0.1:6379/0"
#define MAX_QUEUE_WEIGHT    100
#define MAX_DAYS            36500
#define MIN_JOB_BYTES       1024                /* a job's own fields take some 200 bytes */
#define MAX_JOB_BYTES       (4LL << 30)

/* --- string checks ---------------------------------------------------------------------- */

static const char *check_sentinel(const char *s)
{
	return redis_addr_parse(s, NULL, NULL)
	       ? "is not a sentinel's address: host[:port] (port 26379 when left out; IPv6 as "
	         "[addr]:port)"
	       : NULL;
}

/* "host:port" or "[v6]:port" (listen.c); "" = off. */
static const char *check_listen(const char *s)
{
	return *s ? listen_spec_check(s) : NULL;
}

/* --- queues ------------------------------------------------------------------------------ */

void queue_set_free(struct queue_set *q)
{
	strv_free(&q->queues, &q->nqueues);
	strv_free(&q->names, &q->nnames);
}

int queue_name_ok(const char *s, size_t len)
{
	if (len == 0)
		return 0;
	for (size_t i = 0; i < len; i++)
		if (isspace((unsigned char)s[i]) || iscntrl((unsigned char)s[i]) || s[i] == ',')
			return 0;
	return 1;
}

int queue_add(struct queue_set *q, const char *spec, char *why, size_t whylen)
{
	const char *comma = strchr(spec, ',');
	size_t nlen = comma ? (size_t)(comma - spec) : strlen(spec);
	long weight = 1;
	char *name;
	int known = 0;

	if (!queue_name_ok(spec, nlen)) {
		snprintf(why, whylen, "queue '%s': %s", spec,
		         nlen ? QUEUE_NAME_RULE : "the name is empty (" QUEUE_NAME_RULE ")");
		return -1;
	}
	if (comma) {
		const char *w = comma + 1;
		char *end;
		if (!isdigit((unsigned char)*w)) {
			weight = 0;
		} else {
			errno = 0;
			weight = strtol(w, &end, 10);
			if (*end || errno)
				weight = 0;
		}
		if (weight < 1 || weight > MAX_QUEUE_WEIGHT) {
			snprintf(why, whylen, "queue '%s': the weight must be an integer from 1 to %d",
			         spec, MAX_QUEUE_WEIGHT);
			return -1;
		}
	}
	name = xstrndup(spec, nlen);
	for (long i = 0; i < weight; i++)
		strv_push(&q->queues, &q->nqueues, name);
	for (int i = 0; i < q->nnames && !known; i++)
		known = strcmp(q->names[i], name) == 0;
	if (!known)
		strv_push(&q->names, &q->nnames, name);
	free(name);
	return 0;
}

void conf_set_queues(struct conf *c, struct queue_set *q)
{
	strv_free(&c->queues, &c->nqueues);
	strv_free(&c->queue_names, &c->nqueue_names);
	c->queues = q->queues;
	c->nqueues = q->nqueues;
	c->queue_names = q->names;
	c->nqueue_names = q->nnames;
	memset(q, 0, sizeof *q);
}

static int read_queues(struct loader *L, const config_setting_t *s, const char *name, void *base)
{
	struct queue_set q = { 0 };
	int t = config_setting_type(s), n;
	char why[512];

	if (t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST)
		return failf(L, s, "%s must be an array of strings, e.g. [ \"critical,3\", \"default\" ]",
		             name);
	n = config_setting_length(s);
	if (n == 0)
		return failf(L, s, "%s must name at least one queue", name);
	for (int i = 0; i < n; i++) {
		const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
		if (config_setting_type(e) != CONFIG_TYPE_STRING) {
			queue_set_free(&q);
			return failf(L, e, "%s must be an array of strings", name);
		}
		if (queue_add(&q, config_setting_get_string(e), why, sizeof why) < 0) {
			queue_set_free(&q);
			return failf(L, e, "%s: %s", name, why);
		}
	}
	conf_set_queues(base, &q);
	return 0;
}

/* --- other top-level settings with a grammar of their own -------------------------------- */

static int read_fetch(struct loader *L, const config_setting_t *s, const char *name, void *base)
{
	const char *v = config_setting_type(s) == CONFIG_TYPE_STRING
	                ? config_setting_get_string(s) : NULL;

	if (v && strcmp(v, "reliable") == 0)
		((struct conf *)base)->fetch_basic = 0;
	else if (v && strcmp(v, "basic") == 0)
		((struct conf *)base)->fetch_basic = 1;
	else
		return failf(L, s, "%s must be one of: reliable, basic", name);
	return 0;
}

static int read_containment(struct loader *L, const config_setting_t *s, const char *name,
                            void *base)
{
	static const char *const names[] = { [JOBCG_AUTO] = "auto", [JOBCG_CGROUP] = "cgroup",
		                             [JOBCG_PGROUP] = "process-group" };
	struct conf *c = base;
	const char *v = config_setting_type(s) == CONFIG_TYPE_STRING
	                ? config_setting_get_string(s) : NULL;

	for (size_t i = 0; v && i < sizeof names / sizeof *names; i++)
		if (strcmp(v, names[i]) == 0) {
			c->containment = (enum jobcg_mode)i;
			free(c->containment_where);
			c->containment_where = setting_where(L, s);
			return 0;
		}
	return failf(L, s, "%s must be one of: auto, cgroup, process-group", name);
}

static int read_log_level(struct loader *L, const config_setting_t *s, const char *name,
                          void *base)
{
	const char *v = config_setting_type(s) == CONFIG_TYPE_STRING
	                ? config_setting_get_string(s) : NULL;

	if (!v || log_level_parse(v, &((struct conf *)base)->log_level) != 0)
		return failf(L, s, "%s must be one of: debug, info, warn, error", name);
	return 0;
}

static int read_log_format(struct loader *L, const config_setting_t *s, const char *name,
                           void *base)
{
	const char *v = config_setting_type(s) == CONFIG_TYPE_STRING
	                ? config_setting_get_string(s) : NULL;

	if (!v || log_format_parse(v, &((struct conf *)base)->log_format) != 0)
		return failf(L, s, "%s must be one of: text, json", name);
	return 0;
}

static int read_metrics_listen(struct loader *L, const config_setting_t *s, const char *name,
                               void *base)
{
	const char *v = NULL, *why;

	if (read_string(L, s, name, &v) < 0)
		return -1;
	if ((why = check_listen(v)))
		return failf(L, s, "%s: '%s' %s", name, v, why);
	set_str(&((struct conf *)base)->metrics_listen, v);
	return 0;
}

/*
 * Global on_death: one command (an array of strings) or several (a list of arrays):
 *   on_death = [ "/usr/local/bin/notify", "--dead" ];
 *   on_death = ( [ "/usr/local/bin/notify" ], [ "/usr/bin/logger", "-t", "dead" ] );
 */
static int read_global_on_death(struct loader *L, const config_setting_t *s, const char *name,
                                 void *base)
{
	struct conf *c = base;
	int t = config_setting_type(s), n, all_strings = 1;

	if (t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST)
		return failf(L, s, "%s must be a command [ \"prog\", \"arg\" ] or a list of commands "
		             "( [ ... ], [ ... ] )", name);
	n = config_setting_length(s);
	for (int i = 0; i < n; i++)
		if (config_setting_type(config_setting_get_elem(s, (unsigned)i)) != CONFIG_TYPE_STRING)
			all_strings = 0;
	for (int i = 0; i < c->non_death; i++)
		argv_free(&c->on_death[i]);
	free(c->on_death);
	c->on_death = NULL;
	c->non_death = 0;
	if (n == 0)
		return 0;
	if (all_strings) {
		c->on_death = xcalloc(1, sizeof *c->on_death);
		c->non_death = 1;
		return read_strings(L, s, name, NULL, &c->on_death[0]);
	}
	c->on_death = xcalloc((size_t)n, sizeof *c->on_death);
	for (int i = 0; i < n; i++) {
		const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
		c->non_death = i + 1;
		if (read_strings(L, e, name, NULL, &c->on_death[i]) < 0)
			return -1;
		if (c->on_death[i].n == 0)
			return failf(L, e, "%s: a command must not be empty", name);
	}
	return 0;
}

/* --- redis ------------------------------------------------------------------------------- */

/* redis.tls: the loader (config.c) checks the files and builds the context. */
static const struct spec tls_specs[] = {
	{ .name = "ca_file", .kind = K_OPTSTR, .off = offsetof(struct redis_tls, ca_file) },
	{ .name = "cert_file", .kind = K_OPTSTR, .off = offsetof(struct redis_tls, cert_file) },
	{ .name = "key_file", .kind = K_OPTSTR, .off = offsetof(struct redis_tls, key_file) },
	{ .name = "server_name", .kind = K_OPTSTR,
	  .off = offsetof(struct redis_tls, server_name) },
	{ .name = "verify", .kind = K_BOOL, .off = offsetof(struct redis_tls, verify) },
};

static int read_tls(struct loader *L, const config_setting_t *s, const char *name, void *base)
{
	struct redis_tls *t = &((struct redis_conf *)base)->tls;
	if (config_setting_type(s) != CONFIG_TYPE_GROUP)
		return failf(L, s, "%s must be a group: tls = { ca_file = \"...\"; };", name);
	if (apply_group(L, s, tls_specs, sizeof tls_specs / sizeof *tls_specs, "redis.tls.", t) < 0)
		return -1;
	const config_setting_t *v = config_setting_get_member(s, "verify");
	if (v && !t->verify) {
		free(t->verify_where);
		t->verify_where = setting_where(L, v);
	}
	return 0;
}

static const struct spec redis_specs[] = {
	{ .name = "url", .kind = K_STRING, .off = offsetof(struct redis_conf, url),
	  .flags = F_NONEMPTY },
	{ .name = "password_file", .kind = K_OPTSTR,
	  .off = offsetof(struct redis_conf, password_file) },
	{ .name = "connect_timeout", .kind = K_SECONDS,
	  .off = offsetof(struct redis_conf, connect_timeout), .max = MAX_SECONDS,
	  .flags = F_EXCL_MIN },
	{ .name = "command_timeout", .kind = K_SECONDS,
	  .off = offsetof(struct redis_conf, command_timeout), .max = MAX_SECONDS,
	  .flags = F_EXCL_MIN },
	/* Sentinel: the loader (config.c) checks that these come together. */
	{ .name = "sentinels", .kind = K_ARGV, .off = offsetof(struct redis_conf, sentinels),
	  .check = check_sentinel },
	{ .name = "master_name", .kind = K_OPTSTR,
	  .off = offsetof(struct redis_conf, master_name) },
	{ .name = "sentinel_password", .kind = K_OPTSTR,
	  .off = offsetof(struct redis_conf, sentinel_password) },
	{ .name = "sentinel_password_file", .kind = K_OPTSTR,
	  .off = offsetof(struct redis_conf, sentinel_password_file) },
	{ .name = "sentinel_tls", .kind = K_BOOL, .off = offsetof(struct redis_conf, sentinel_tls) },
	{ .name = "tls", .kind = K_CUSTOM, .read = read_tls },
};

static int read_redis(struct loader *L, const config_setting_t *s, const char *name, void *base)
{
	if (config_setting_type(s) != CONFIG_TYPE_GROUP)
		return failf(L, s, "%s must be a group: redis = { url = \"...\"; };", name);
	return apply_group(L, s, redis_specs, sizeof redis_specs / sizeof *redis_specs, "redis.",
	                   &((struct conf *)base)->redis);
}

/* --- periodic ---------------------------------------------------------------------------- */

static int read_args(struct loader *L, const config_setting_t *s, const char *name, void *base)
{
	struct periodic_entry *p = base;
	const char *v;
	cJSON *j;
	int is_array;

	if (config_setting_type(s) != CONFIG_TYPE_STRING)
		return failf(L, s, "%s must be a string holding a JSON array, e.g. \"[1, \\\"two\\\"]\"",
		             name);
	v = config_setting_get_string(s);
	/* Only to validate: the text is kept as written (numbers must keep their spelling). */
	j = cJSON_ParseWithLengthOpts(v, strlen(v) + 1, NULL, 1);
	is_array = j && cJSON_IsArray(j);
	cJSON_Delete(j);
	if (!j)
		return failf(L, s, "%s is not valid JSON: %s", name, v);
	if (!is_array)
		return failf(L, s, "%s must be a JSON array, e.g. \"[1, \\\"two\\\"]\"", name);
	set_str(&p->args_json, v);
	return 0;
}

static int read_retry(struct loader *L, const config_setting_t *s, const char *name, void *base)
{
	struct periodic_entry *p = base;
	long long v = 0;

	if (config_setting_type(s) == CONFIG_TYPE_BOOL) {
		set_str(&p->retry_json, config_setting_get_bool(s) ? "true" : "false");
		return 0;
	}
	if (config_setting_type(s) != CONFIG_TYPE_INT && config_setting_type(s) != CONFIG_TYPE_INT64)
		return failf(L, s, "%s must be an integer >= 0, true or false", name);
	if (read_integer(L, s, name, &v) < 0)
		return -1;
	if (v < 0 || v > INT_MAX)
		return failf(L, s, "%s must be an integer >= 0, true or false", name);
	free(p->retry_json);
	p->retry_json = xasprintf("%lld", v);
	return 0;
}

static int read_unique(struct loader *L, const config_setting_t *s, const char *name, void *base)
{
	const char *v = config_setting_type(s) == CONFIG_TYPE_STRING
	                ? config_setting_get_string(s) : NULL;

	if (v && strcmp(v, "until_executed") == 0)
		((struct periodic_entry *)base)->until_executed = 1;
	else if (v && !*v)
		((struct periodic_entry *)base)->until_executed = 0;
	else
		return failf(L, s, "%s must be \"until_executed\" or \"\"", name);
	return 0;
}

/* A queue name as the queues setting spells one, without a weight. */
static const char *check_queue_name(const char *s)
{
	return queue_name_ok(s, strlen(s)) ? NULL : "is not a queue name (" QUEUE_NAME_RULE ")";
}

#define P(f) offsetof(struct periodic_entry, f)
static const struct spec periodic_specs[] = {
	{ .name = "cron", .kind = K_STRING, .off = P(cron), .flags = F_NONEMPTY },
	{ .name = "class", .kind = K_STRING, .off = P(class_name), .flags = F_NONEMPTY },
	{ .name = "queue", .kind = K_STRING, .off = P(queue), .flags = F_NONEMPTY,
	  .check = check_queue_name },
	{ .name = "args", .kind = K_CUSTOM, .read = read_args },
	{ .name = "retry", .kind = K_CUSTOM, .read = read_retry },
	{ .name = "unique", .kind = K_CUSTOM, .read = read_unique },
};
#undef P

void conf_periodic_free(struct periodic_entry *p)
{
	free(p->cron);
	free(p->class_name);
	free(p->args_json);
	free(p->retry_json);
	free(p->queue);
	free(p->where);
	memset(p, 0, sizeof *p);
}

static int read_periodic_entry(struct loader *L, const config_setting_t *g,
                               struct periodic_entry *p)
{
	char why[256] = "";
	struct cron *cr;

	if (apply_group(L, g, periodic_specs, sizeof periodic_specs / sizeof *periodic_specs,
	                "periodic.", p) < 0)
		return -1;
	if (!p->cron)
		return failf(L, g, "periodic entry without cron");
	if (!p->class_name)
		return failf(L, g, "periodic entry without class");
	if (!(cr = cron_parse(p->cron, why, sizeof why)))
		return failf(L, config_setting_get_member(g, "cron"), "invalid cron '%s': %s",
		             p->cron, why[0] ? why : "not understood");
	cron_free(cr);
	return 0;
}

static int read_periodic(struct loader *L, const config_setting_t *s, const char *name,
                         void *base)
{
	struct conf *c = base;
	int t = config_setting_type(s), n = config_setting_length(s);

	if (t != CONFIG_TYPE_LIST && !(t == CONFIG_TYPE_ARRAY && n == 0))
		return failf(L, s, "%s must be a list of groups: ( { cron = \"* * * * *\"; class = "
		             "\"X\"; }, ... )", name);
	for (int i = 0; i < n; i++) {
		const config_setting_t *g = config_setting_get_elem(s, (unsigned)i);
		struct periodic_entry *p;
		if (config_setting_type(g) != CONFIG_TYPE_GROUP)
			return failf(L, g, "each periodic entry must be a group { cron = ...; class = ...; }");
		c->periodic = xrealloc(c->periodic, (size_t)(c->nperiodic + 1) * sizeof *c->periodic);
		p = &c->periodic[c->nperiodic++];
		memset(p, 0, sizeof *p);
		p->args_json = xstrdup("[]");
		p->retry_json = xstrdup("0");
		p->queue = xstrdup("default");
		p->line = (int)config_setting_source_line(g);
		p->where = setting_where(L, g);
		if (read_periodic_entry(L, g, p) < 0)
			return -1;
	}
	return 0;
}

/* --- the top level ----------------------------------------------------------------------- */

/* tick_interval: seconds, and where the file set it, for the notice that its meaning
 * changed (conf_warnings). */
static int read_tick_interval(struct loader *L, const config_setting_t *s, const char *name,
                              void *base)
{
	struct conf *c = base;
	double d;

	if (read_number(L, s, name, &d) < 0)
		return -1;
	if (!(d > 0))
		return failf(L, s, "%s must be a positive number", name);
	if (d > MAX_SECONDS)
		return failf(L, s, "%s must be at most %.15g", name, MAX_SECONDS);
	c->tick_interval = d;
	free(c->tick_interval_where);
	c->tick_interval_where = setting_where(L, s);
	return 0;
}

static int read_max_job_bytes(struct loader *L, const config_setting_t *s, const char *name,
                              void *base)
{
	long long v;

	if (read_integer(L, s, name, &v) < 0)
		return -1;
	if (v != 0 && (v < MIN_JOB_BYTES || v > MAX_JOB_BYTES))
		return failf(L, s, "%s must be 0 (no limit) or from %d to %lld bytes", name,
		             MIN_JOB_BYTES, MAX_JOB_BYTES);
	((struct conf *)base)->max_job_bytes = v;
	return 0;
}

#define C(f) offsetof(struct conf, f)
static const struct spec top_specs[] = {
	{ .name = "redis", .kind = K_CUSTOM, .read = read_redis },
	{ .name = "concurrency", .kind = K_INT, .off = C(concurrency), .min = 1,
	  .max = MAX_CONCURRENCY },
	{ .name = "queues", .kind = K_CUSTOM, .read = read_queues },
	{ .name = "fetch", .kind = K_CUSTOM, .read = read_fetch },
	{ .name = "shutdown_timeout", .kind = K_SECONDS, .off = C(shutdown_timeout),
	  .max = MAX_SECONDS },
	{ .name = "poll_interval", .kind = K_SECONDS, .off = C(poll_interval),
	  .max = MAX_SECONDS, .flags = F_EXCL_MIN },
	{ .name = "heartbeat_interval", .kind = K_SECONDS, .off = C(heartbeat_interval),
	  .max = MAX_SECONDS, .flags = F_EXCL_MIN },
	{ .name = "process_ttl", .kind = K_SECONDS, .off = C(process_ttl),
	  .max = MAX_SECONDS, .flags = F_EXCL_MIN },
	{ .name = "orphan_threshold", .kind = K_SECONDS, .off = C(orphan_threshold),
	  .max = MAX_SECONDS, .flags = F_EXCL_MIN },
	{ .name = "orphan_check_interval", .kind = K_SECONDS, .off = C(orphan_check_interval),
	  .max = MAX_SECONDS, .flags = F_EXCL_MIN },
	{ .name = "max_orphanings", .kind = K_INT, .off = C(max_orphanings), .min = 1,
	  .max = INT_MAX },
	{ .name = "lost_dependency_threshold", .kind = K_SECONDS,
	  .off = C(lost_dependency_threshold), .max = MAX_SECONDS },
	{ .name = "fetch_idle_max_interval", .kind = K_SECONDS, .off = C(fetch_idle_max_interval),
	  .max = MAX_SECONDS, .flags = F_EXCL_MIN },
	{ .name = "max_job_bytes", .kind = K_CUSTOM, .read = read_max_job_bytes },
	{ .name = "unique_lock_ttl", .kind = K_SECONDS, .off = C(unique_lock_ttl),
	  .max = MAX_SECONDS, .flags = F_EXCL_MIN },
	{ .name = "periodic_catch_up", .kind = K_BOOL, .off = C(periodic_catch_up) },
	{ .name = "periodic_replace", .kind = K_BOOL, .off = C(periodic_replace) },
	{ .name = "tick_interval", .kind = K_CUSTOM, .read = read_tick_interval },
	{ .name = "containment", .kind = K_CUSTOM, .read = read_containment },
	{ .name = "log_level", .kind = K_CUSTOM, .read = read_log_level },
	{ .name = "log_format", .kind = K_CUSTOM, .read = read_log_format },
	{ .name = "metrics_listen", .kind = K_CUSTOM, .read = read_metrics_listen },
	{ .name = "status_expiration", .kind = K_SECONDS, .off = C(status_expiration),
	  .max = MAX_SECONDS },
	{ .name = "history_retention_days", .kind = K_SECONDS, .off = C(history_retention_days),
	  .max = MAX_DAYS },
	{ .name = "history_max_entries", .kind = K_INT, .off = C(history_max_entries), .min = 1,
	  .max = INT_MAX },
	{ .name = "history_daily_retention_days", .kind = K_INT,
	  .off = C(history_daily_retention_days), .min = 1, .max = MAX_DAYS },
	{ .name = "output_keep", .kind = K_LLONG, .off = C(output_keep), .max = MAX_OUTPUT_KEEP },
	{ .name = "output_ttl", .kind = K_SECONDS, .off = C(output_ttl), .max = MAX_SECONDS,
	  .flags = F_EXCL_MIN },
	{ .name = "output_runs", .kind = K_INT, .off = C(output_runs), .min = 1, .max = 1000 },
	{ .name = "on_death", .kind = K_CUSTOM, .read = read_global_on_death },
	{ .name = "on_death_timeout", .kind = K_SECONDS, .off = C(on_death_timeout),
	  .max = MAX_SECONDS, .flags = F_EXCL_MIN },
	{ .name = "handlers", .kind = K_CUSTOM, .read = conf_read_handlers },
	{ .name = "periodic", .kind = K_CUSTOM, .read = read_periodic },
};
#undef C

void conf_defaults(struct conf *c)
{
	struct queue_set q = { 0 };
	char why[64];

	memset(c, 0, sizeof *c);
	c->redis.url = xstrdup(DEFAULT_REDIS_URL);
	c->redis.connect_timeout = 2.0;
	c->redis.command_timeout = 5.0;
	c->redis.tls.verify = 1;
	c->concurrency = 10;
	queue_add(&q, "default", why, sizeof why);
	conf_set_queues(c, &q);
	c->fetch_basic = 0;
	c->shutdown_timeout = 25;
	c->poll_interval = 2;
	c->heartbeat_interval = 5;
	c->process_ttl = 60;
	c->orphan_threshold = 300;
	c->orphan_check_interval = 60;
	c->max_orphanings = 3;
	c->lost_dependency_threshold = 3600;
	c->fetch_idle_max_interval = 0.5;
	c->max_job_bytes = 16 * 1024 * 1024;
	c->unique_lock_ttl = 86400;
	c->periodic_catch_up = 1;
	c->periodic_replace = 0;
	c->tick_interval = 1;
	c->log_level = LOG_INFO;
	c->log_format = LOG_FORMAT_TEXT;
	c->metrics_listen = xstrdup("");
	c->status_expiration = 0;
	c->history_retention_days = 0;
	c->history_max_entries = 50000;
	c->history_daily_retention_days = 400;
	c->output_keep = 64 * 1024;
	c->output_ttl = 7 * 86400;
	c->output_runs = 10;
	c->on_death_timeout = 30;
	c->containment = JOBCG_AUTO;
}

int conf_apply_top(struct loader *L, const config_setting_t *root, struct conf *c)
{
	return apply_group(L, root, top_specs, sizeof top_specs / sizeof *top_specs, "", c);
}
