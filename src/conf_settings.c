/* SPDX-License-Identifier: MIT */
/*
 * conf_settings.c: every setting of the conf file: its default, what it takes, and how it is
 * read. The loader (config.c) walks the file and reports errors at their file:line; this file
 * says what is allowed.
 *
 * - Every group (top level, redis, each handler, each periodic entry) is walked member by
 *   member against a table of known settings. A name that is not in the table is an error:
 *   a misspelt setting that silently keeps its default is the classic conf-file bug.
 * - A table row says what kind of value the setting takes (seconds, integer, bool, string,
 *   argv, exit codes), its bounds and where it lands in the struct, so reading and type
 *   checking is one generic function (apply_one). The few settings with a grammar of their
 *   own (queues, fetch, log_level, log_format, metrics_listen, on_death, handlers,
 *   periodic) have a reader.
 * - What concerns one handler or one periodic entry (a class named twice, an exit code both
 *   dead and discarded, a cron that does not parse) is checked once its group is read, and
 *   blames a line inside it. Checks between top-level settings are the loader's: they run
 *   last, after the command line.
 *
 * The tables are also the list of names the man page (man/cogworkerd.conf.5) must document:
 * an integration test (test_service.py) reads the names from this file.
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
#define MAX_SECONDS         1e9         /* ~31 years: keeps every conversion to ms in range */
#define MAX_OUTPUT_TAIL     (1024 * 1024)
#define MAX_OUTPUT_KEEP     (16 * 1024 * 1024)
#define MAX_DAYS            36500
#define MIN_JOB_BYTES       1024                /* a job's own fields take some 200 bytes */
#define MAX_JOB_BYTES       (4LL << 30)

/* ---------------------------------------------------------------------------------------
 * The settings tables
 * ------------------------------------------------------------------------------------- */

enum kind {
	K_SECONDS,      /* double; an int or a float in the file */
	K_INT,          /* int */
	K_LLONG,        /* long long (rlimits: may need the L suffix) */
	K_SIZE,         /* size_t */
	K_BOOL,         /* int 0/1 */
	K_STRING,       /* char *; "" kept (rejected with F_NONEMPTY) */
	K_OPTSTR,       /* char *; "" = NULL (unset) */
	K_ARGV,         /* struct argv_list, from an array of strings */
	K_CODES,        /* int * at off, count (int) at off2: exit codes 1..255 */
	K_CUSTOM,       /* its own reader */
};

#define F_EXCL_MIN  1   /* value must be > min (not >=) */
#define F_NONEMPTY  2   /* strings and arrays: must not be empty */

struct spec {
	const char *name;
	enum kind kind;
	size_t off, off2;
	double min, max;                /* numbers: bounds; max 0 = unbounded */
	int flags;
	str_check check;                /* strings, argv elements: extra validation */
	int (*read)(struct loader *L, const config_setting_t *s, const char *name, void *base);
};

#define FIELD(base, sp, type) ((type *)((char *)(base) + (sp)->off))

static int range_error(struct loader *L, const config_setting_t *s, const char *name,
                       const struct spec *sp, double v, int integer)
{
	const char *what = integer ? "integer" : "number";

	if ((sp->flags & F_EXCL_MIN) ? v <= sp->min : v < sp->min) {
		if ((sp->min == 0 && (sp->flags & F_EXCL_MIN)) ||
		    (integer && sp->min == 1 && !(sp->flags & F_EXCL_MIN)))
			return failf(L, s, "%s must be a positive %s", name, what);
		return failf(L, s, "%s must be %s %s %s %.15g", name, integer ? "an" : "a", what,
		             (sp->flags & F_EXCL_MIN) ? ">" : ">=", sp->min);
	}
	if (sp->max && v > sp->max)
		return failf(L, s, "%s must be at most %.15g", name, sp->max);
	return 0;
}

static int read_codes(struct loader *L, const config_setting_t *s, const char *name,
                      int **codes, int *n)
{
	int t = config_setting_type(s), len;

	if (t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST)
		return failf(L, s, "%s must be an array of exit codes, e.g. [ 3, 4 ]", name);
	len = config_setting_length(s);
	free(*codes);
	*codes = xcalloc((size_t)len + 1, sizeof **codes);
	*n = 0;
	for (int i = 0; i < len; i++) {
		const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
		long long v = 0;
		if (read_integer(L, e, name, &v) < 0)
			return -1;
		if (v < 1 || v > 255)
			return failf(L, e, "%s: %lld is not an exit code (1..255)", name, v);
		(*codes)[(*n)++] = (int)v;
	}
	return 0;
}

/* Read setting s, described by sp, into base. */
static int apply_one(struct loader *L, const struct spec *sp, const config_setting_t *s,
                     const char *name, void *base)
{
	double d = 0;
	long long ll = 0;
	const char *str = NULL, *why;

	switch (sp->kind) {
	case K_SECONDS:
		if (read_number(L, s, name, &d) < 0 || range_error(L, s, name, sp, d, 0) < 0)
			return -1;
		/* cppcheck-suppress invalidPointerCast ; sp->off is the offsetof of a double */
		*FIELD(base, sp, double) = d;
		return 0;
	case K_INT:
	case K_LLONG:
	case K_SIZE:
		if (read_integer(L, s, name, &ll) < 0 || range_error(L, s, name, sp, (double)ll, 1) < 0)
			return -1;
		if (sp->kind == K_INT)
			*FIELD(base, sp, int) = (int)ll;
		else if (sp->kind == K_LLONG)
			*FIELD(base, sp, long long) = ll;
		else
			*FIELD(base, sp, size_t) = (size_t)ll;
		return 0;
	case K_BOOL:
		if (config_setting_type(s) != CONFIG_TYPE_BOOL)
			return failf(L, s, "%s must be true or false", name);
		*FIELD(base, sp, int) = config_setting_get_bool(s) ? 1 : 0;
		return 0;
	case K_STRING:
	case K_OPTSTR:
		if (read_string(L, s, name, &str) < 0)
			return -1;
		if (!*str && (sp->flags & F_NONEMPTY))
			return failf(L, s, "%s must not be empty", name);
		if (!*str && sp->kind == K_OPTSTR) {
			set_str(FIELD(base, sp, char *), NULL);
			return 0;
		}
		if (sp->check && (why = sp->check(str)))
			return failf(L, s, "%s: '%s' %s", name, str, why);
		set_str(FIELD(base, sp, char *), str);
		return 0;
	case K_ARGV:
		if (read_strings(L, s, name, sp->check, FIELD(base, sp, struct argv_list)) < 0)
			return -1;
		if ((sp->flags & F_NONEMPTY) && FIELD(base, sp, struct argv_list)->n == 0)
			return failf(L, s, "%s must not be empty", name);
		return 0;
	case K_CODES:
		return read_codes(L, s, name, FIELD(base, sp, int *),
		                  (int *)((char *)base + sp->off2));
	case K_CUSTOM:
		return sp->read(L, s, name, base);
	}
	return failf(L, s, "%s: internal error (unknown kind)", name);
}

/* Walk group grp against tab: unknown names are errors. prefix qualifies names in messages. */
static int apply_group(struct loader *L, const config_setting_t *grp, const struct spec *tab,
                       size_t ntab, const char *prefix, void *base)
{
	int n = config_setting_length(grp);

	for (int i = 0; i < n; i++) {
		const config_setting_t *s = config_setting_get_elem(grp, (unsigned)i);
		const char *nm = config_setting_name(s);
		char full[256];
		size_t k;

		for (k = 0; k < ntab && strcmp(tab[k].name, nm) != 0; k++)
			;
		snprintf(full, sizeof full, "%s%s", prefix, nm);
		if (k == ntab)
			return failf(L, s, "unknown setting '%s'", full);
		if (apply_one(L, &tab[k], s, full, base) < 0)
			return -1;
	}
	return 0;
}

/* --- string checks ---------------------------------------------------------------------- */

static const char *check_env(const char *s)
{
	const char *eq = strchr(s, '=');
	return (!eq || eq == s) ? "is not NAME=value" : NULL;
}

static const char *check_env_name(const char *s)
{
	return (!*s || strchr(s, '=')) ? "is not a variable name" : NULL;
}

static const char *check_abs_path(const char *s)
{
	return s[0] == '/' ? NULL : "is not an absolute path";
}

/* A writable path: absolute, without "." or ".." components (so that what it is under,
 * /tmp for private_tmp, is what it says), and not / itself. */
static const char *check_writable_path(const char *s)
{
	if (s[0] != '/')
		return "is not an absolute path";
	for (const char *p = s; *p; p++)
		if (p[0] == '/' && p[1] == '.' &&
		    (p[2] == '/' || !p[2] || (p[2] == '.' && (p[3] == '/' || !p[3]))))
			return "has a . or .. component (write the path itself)";
	if (strspn(s, "/") == strlen(s))
		return "is the whole file system: leave read_only off instead";
	return NULL;
}

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

/* --- handlers ---------------------------------------------------------------------------- */

int conf_parse_rate(const char *s, int *n, double *window)
{
	char *end;
	errno = 0;
	long count = isdigit((unsigned char)*s) ? strtol(s, &end, 10) : 0;
	if (count < 1 || count > 1000000 || errno || *end != '/' ||
	    !isdigit((unsigned char)end[1]))
		return -1;
	const char *w = end + 1;
	double secs = strtod(w, &end);
	double unit = 1;
	if (*end == 's' || *end == 'm' || *end == 'h') {
		unit = *end == 'm' ? 60 : *end == 'h' ? 3600 : 1;
		end++;
	}
	if (*end || !(secs > 0) || secs * unit > 86400)
		return -1;
	*n = (int)count;
	*window = secs * unit;
	return 0;
}

/* A string that must be one of words (NULL-terminated); *index = its position. */
static int read_word(struct loader *L, const config_setting_t *s, const char *name,
                     const char *const *words, int *index)
{
	const char *v = config_setting_type(s) == CONFIG_TYPE_STRING
	                ? config_setting_get_string(s) : NULL;
	for (int i = 0; v && words[i]; i++)
		if (strcmp(v, words[i]) == 0) {
			*index = i;
			return 0;
		}
	char list[128] = "";
	for (int i = 0; words[i]; i++)
		snprintf(list + strlen(list), sizeof list - strlen(list), "%s\"%s\"", i ? " or " : "",
		         words[i]);
	return failf(L, s, "%s must be %s", name, list);
}

static int read_rate_limit(struct loader *L, const config_setting_t *s, const char *name,
                           void *base)
{
	struct handler *h = base;
	const char *v = NULL;
	if (read_string(L, s, name, &v) < 0)
		return -1;
	if (!*v) {
		h->rate_limit_n = 0;
		h->rate_limit_window = 0;
		return 0;
	}
	if (conf_parse_rate(v, &h->rate_limit_n, &h->rate_limit_window) != 0)
		return failf(L, s, "%s: '%s' is not N/W, starts per window (e.g. \"10/60s\", "
		             "\"100/1m\"; N from 1 to 1000000, W up to a day)", name, v);
	return 0;
}

static int read_expired(struct loader *L, const config_setting_t *s, const char *name,
                        void *base)
{
	static const char *const words[] = { "dead", "discard", NULL };
	return read_word(L, s, name, words, &((struct handler *)base)->expired_discard);
}

static int read_on_orphan(struct loader *L, const config_setting_t *s, const char *name,
                          void *base)
{
	static const char *const words[] = { "requeue", "dead", NULL };
	return read_word(L, s, name, words, &((struct handler *)base)->on_orphan_dead);
}

/* --- caps (doc/design.md "Caps per handler") --------------------------------------------- */

#define MIN_MEMORY_MAX      (1LL << 20)         /* nothing starts in less than a MiB */
#define MAX_PIDS_MAX        4194304             /* the kernel's PID_MAX_LIMIT */
#define MAX_CPUS            1000000             /* cpu_max in CPUs, far above any host */

/* Each cap's setting, in enum cap_kind order (the table rows below spell the same names). */
static const char *const cap_names[NCAPS] = { "memory_max", "cpu_max", "pids_max" };

const char *conf_cap_name(enum cap_kind k)
{
	return k < NCAPS ? cap_names[k] : "?";
}

/* A decimal number at s (digits, an optional fraction); its end in *end, or -1. */
static int read_decimal(const char *s, double *v, const char **end)
{
	const char *p = s;
	while (isdigit((unsigned char)*p))
		p++;
	if (*p == '.' && isdigit((unsigned char)p[1]))
		for (p++; isdigit((unsigned char)*p); p++)
			;
	if (p == s)
		return -1;
	*v = strtod(s, NULL);
	*end = p;
	return 0;
}

int conf_parse_bytes(const char *s, long long *out)
{
	static const char units[] = "KMGT";
	const char *end, *u;
	double v;
	if (read_decimal(s, &v, &end) < 0)
		return -1;
	if (*end == ' ')
		end++;
	double mult = 1;
	if (*end && (u = strchr(units, *end))) {
		for (const char *k = units; k <= u; k++)
			mult *= 1024;
		end++;
		if (*end == 'i' && end[1] == 'B')
			end += 2;
	} else if (*end == 'B') {
		end++;
	}
	/* Whole bytes only, below 2^62 (the kernel's largest limit is about 2^63). */
	if (*end || (mult == 1 && strchr(s, '.')) || v * mult >= 4.6e18)
		return -1;
	*out = (long long)(v * mult);
	return 0;
}

int conf_parse_cpu(const char *s, long long *us)
{
	const char *end;
	double v;
	if (read_decimal(s, &v, &end) < 0)
		return -1;
	if (*end == '%') {
		end++;
		v /= 100;
	}
	if (*end || v > MAX_CPUS)
		return -1;
	*us = (long long)(v * CAP_CPU_PERIOD_US + 0.5);
	return 0;
}

/*
 * memory_max, cpu_max, pids_max: the value and where it was set (the host check blames that
 * line when the controller is missing). memory_max is bytes (an integer) or a size with a
 * unit; cpu_max a share ("50%") or a number of CPUs ("2", 1.5); pids_max an integer.
 */
static int read_cap(struct loader *L, const config_setting_t *s, const char *name, void *base)
{
	struct handler_caps *caps = &((struct handler *)base)->caps;
	const char *short_name = strrchr(name, '.') ? strrchr(name, '.') + 1 : name;
	int k = 0, t = config_setting_type(s);
	while (k < NCAPS && strcmp(cap_names[k], short_name) != 0)
		k++;
	long long v = 0;
	const char *str = t == CONFIG_TYPE_STRING ? config_setting_get_string(s) : NULL;
	switch (k) {
	case CAP_MEMORY:
		if (str ? conf_parse_bytes(str, &v) < 0 : read_integer(L, s, name, &v) < 0)
			return str ? failf(L, s, "%s: \"%s\" is not a size: bytes, or a number with K, "
			                   "M, G or T (powers of 1024), e.g. \"256M\" or \"1G\"", name, str)
			           : -1;
		if (v < MIN_MEMORY_MAX)
			return failf(L, s, "%s must be at least 1M (%lld bytes)", name, MIN_MEMORY_MAX);
		break;
	case CAP_CPU: {
		double d = 0;
		char buf[64] = "";
		if (!str && read_number(L, s, name, &d) == 0)
			snprintf(buf, sizeof buf, "%.6g", d);
		else if (!str)
			return -1;
		if (conf_parse_cpu(str ? str : buf, &v) < 0)
			return failf(L, s, "%s: \"%s\" is not a CPU share: a percentage of one CPU "
			             "(\"50%%\") or a number of CPUs (\"2\", \"0.5\")", name,
			             str ? str : buf);
		if (v < CAP_CPU_PERIOD_US / 100)
			return failf(L, s, "%s must be at least 1%% of a CPU", name);
		break;
	}
	case CAP_PIDS:
		if (read_integer(L, s, name, &v) < 0)
			return -1;
		if (v < 1 || v > MAX_PIDS_MAX)
			return failf(L, s, "%s must be an integer from 1 to %d", name, MAX_PIDS_MAX);
		break;
	default:
		return failf(L, s, "%s: internal error (not a cap)", name);
	}
	caps->max[k] = v;
	free(caps->where[k]);
	caps->where[k] = setting_where(L, s);
	return 0;
}

#define H(f) offsetof(struct handler, f)
static const struct spec handler_specs[] = {
	{ .name = "class", .kind = K_STRING, .off = H(class_name), .flags = F_NONEMPTY },
	{ .name = "command", .kind = K_ARGV, .off = H(command), .flags = F_NONEMPTY },
	{ .name = "args_as_argv", .kind = K_BOOL, .off = H(args_as_argv) },
	{ .name = "timeout", .kind = K_SECONDS, .off = H(timeout), .max = MAX_SECONDS },
	{ .name = "kill_grace", .kind = K_SECONDS, .off = H(kill_grace), .max = MAX_SECONDS },
	{ .name = "env", .kind = K_ARGV, .off = H(env), .check = check_env },
	{ .name = "env_passthrough", .kind = K_ARGV, .off = H(env_passthrough),
	  .check = check_env_name },
	{ .name = "cwd", .kind = K_OPTSTR, .off = H(cwd), .check = check_abs_path },
	{ .name = "user", .kind = K_OPTSTR, .off = H(user) },
	{ .name = "group", .kind = K_OPTSTR, .off = H(group) },
	{ .name = "dead_exit_codes", .kind = K_CODES, .off = H(dead_codes), .off2 = H(ndead) },
	{ .name = "discard_exit_codes", .kind = K_CODES, .off = H(discard_codes),
	  .off2 = H(ndiscard) },
	{ .name = "output_tail", .kind = K_SIZE, .off = H(output_tail), .max = MAX_OUTPUT_TAIL },
	{ .name = "output_keep", .kind = K_LLONG, .off = H(output_keep), .max = MAX_OUTPUT_KEEP },
	{ .name = "rlimit_cpu", .kind = K_LLONG, .off = H(rlimit_cpu) },
	{ .name = "rlimit_as", .kind = K_LLONG, .off = H(rlimit_as) },
	{ .name = "rlimit_nofile", .kind = K_LLONG, .off = H(rlimit_nofile) },
	{ .name = "rlimit_nproc", .kind = K_LLONG, .off = H(rlimit_nproc) },
	{ .name = "on_death", .kind = K_ARGV, .off = H(on_death) },
	{ .name = "on_death_timeout", .kind = K_SECONDS, .off = H(on_death_timeout),
	  .max = MAX_SECONDS, .flags = F_EXCL_MIN },
	{ .name = "max_concurrency", .kind = K_INT, .off = H(max_concurrency),
	  .max = MAX_CONCURRENCY },
	{ .name = "fleet_concurrency", .kind = K_INT, .off = H(fleet_concurrency),
	  .max = 1000000 },
	{ .name = "rate_limit", .kind = K_CUSTOM, .read = read_rate_limit },
	{ .name = "expires_in", .kind = K_SECONDS, .off = H(expires_in), .max = MAX_SECONDS },
	{ .name = "expired", .kind = K_CUSTOM, .read = read_expired },
	{ .name = "on_orphan", .kind = K_CUSTOM, .read = read_on_orphan },
	{ .name = "warm", .kind = K_BOOL, .off = H(warm) },
	{ .name = "warm_start_timeout", .kind = K_SECONDS, .off = H(warm_start_timeout),
	  .max = MAX_SECONDS, .flags = F_EXCL_MIN },
	{ .name = "warm_max_jobs", .kind = K_LLONG, .off = H(warm_max_jobs) },
	{ .name = "warm_max_rss", .kind = K_LLONG, .off = H(warm_max_rss) },
	{ .name = "warm_max_age", .kind = K_SECONDS, .off = H(warm_max_age), .max = MAX_SECONDS },
	{ .name = "warm_idle_timeout", .kind = K_SECONDS, .off = H(warm_idle_timeout),
	  .max = MAX_SECONDS, .flags = F_EXCL_MIN },
	/* Confinement (doc/design.md "Confinement"); checked together in confinement_rules. */
	{ .name = "network", .kind = K_BOOL, .off = H(confine.network) },
	{ .name = "private_tmp", .kind = K_BOOL, .off = H(confine.private_tmp) },
	{ .name = "read_only", .kind = K_BOOL, .off = H(confine.read_only) },
	{ .name = "writable_paths", .kind = K_ARGV, .off = H(confine.writable_paths),
	  .check = check_writable_path },
	{ .name = "no_new_privileges", .kind = K_BOOL, .off = H(confine.no_new_privileges) },
	{ .name = "memory_max", .kind = K_CUSTOM, .read = read_cap },
	{ .name = "cpu_max", .kind = K_CUSTOM, .read = read_cap },
	{ .name = "pids_max", .kind = K_CUSTOM, .read = read_cap },
	{ .name = "dead_on_oom", .kind = K_BOOL, .off = H(caps.dead_on_oom) },
};
#undef H

void conf_handler_free(struct handler *h)
{
	free(h->class_name);
	argv_free(&h->command);
	argv_free(&h->env);
	argv_free(&h->env_passthrough);
	free(h->cwd);
	free(h->user);
	free(h->group);
	free(h->dead_codes);
	free(h->discard_codes);
	argv_free(&h->on_death);
	free(h->confine.at);
	argv_free(&h->confine.writable_paths);
	for (int k = 0; k < NCAPS; k++)
		free(h->caps.where[k]);
	memset(h, 0, sizeof *h);
}

static void handler_defaults(struct handler *h, int line)
{
	memset(h, 0, sizeof *h);
	h->kill_grace = 10;
	h->output_tail = 4096;
	h->rlimit_cpu = h->rlimit_as = h->rlimit_nofile = h->rlimit_nproc = -1;
	h->on_death_timeout = -1;       /* unset: the global on_death_timeout, see finish() */
	h->output_keep = -1;            /* unset: the global output_keep, see finish() */
	h->warm_start_timeout = 30;
	h->warm_max_jobs = 10000;
	h->warm_idle_timeout = 300;
	h->confine.network = 1;
	h->line = line;
}

/* Is path p at or under dir? */
static int path_under(const char *p, const char *dir)
{
	size_t n = strlen(dir);
	return strncmp(p, dir, n) == 0 && (p[n] == '/' || !p[n]);
}

/*
 * The confinement settings of handler h (group g) between themselves; where the first one
 * turned on was written goes into h->confine.at, for what --check finds later
 * (confine_check_conf).
 */
static int confinement_rules(struct loader *L, const config_setting_t *g, struct handler *h)
{
	static const char *const dirs[] = { "/tmp", "/var/tmp", "/dev/shm" };
	struct confinement *cf = &h->confine;
	const config_setting_t *wp = config_setting_get_member(g, "writable_paths");

	if (wp && !cf->read_only)
		return failf(L, wp, "handler '%s': writable_paths needs read_only = true (without "
		             "it every path the user may write is writable)", h->class_name);
	if (cf->writable_paths.n > CONFINE_MAX_WRITABLE)
		return failf(L, wp, "handler '%s': at most %d writable_paths", h->class_name,
		             CONFINE_MAX_WRITABLE);
	for (int i = 0; cf->private_tmp && i < cf->writable_paths.n; i++)
		for (size_t k = 0; k < sizeof dirs / sizeof *dirs; k++)
			if (path_under(cf->writable_paths.v[i], dirs[k]))
				return failf(L, wp, "handler '%s': writable path %s is under %s, which "
				             "private_tmp replaces with the job's own (writable) one",
				             h->class_name, cf->writable_paths.v[i], dirs[k]);
	int n = config_setting_length(g);
	for (int i = 0; i < n && !cf->at; i++) {
		const config_setting_t *s = config_setting_get_elem(g, (unsigned)i);
		const char *nm = config_setting_name(s);
		if ((!strcmp(nm, "network") && !cf->network) ||
		    (!strcmp(nm, "private_tmp") && cf->private_tmp) ||
		    (!strcmp(nm, "read_only") && cf->read_only) ||
		    (!strcmp(nm, "no_new_privileges") && cf->no_new_privileges))
			cf->at = setting_where(L, s);
	}
	return 0;
}

static int read_handler(struct loader *L, const config_setting_t *g, struct conf *c,
                        struct handler *h)
{
	const config_setting_t *cls;

	if (apply_group(L, g, handler_specs, sizeof handler_specs / sizeof *handler_specs,
	                "handler.", h) < 0)
		return -1;
	if (!h->class_name)
		return failf(L, g, "handler without class (use class = \"*\" for a fallback)");
	cls = config_setting_get_member(g, "class");
	if (h->command.n == 0)
		return failf(L, g, "handler '%s' has no command", h->class_name);
	if (!h->command.v[0][0])
		return failf(L, config_setting_get_member(g, "command"),
		             "handler '%s': the command's program must not be empty", h->class_name);
	for (struct handler *o = c->handlers; o < h; o++)
		if (strcmp(o->class_name, h->class_name) == 0)
			return failf(L, cls, "duplicate handler for class '%s' (first at line %d)",
			             h->class_name, o->line);
	for (int i = 0; i < h->ndead; i++)
		for (int j = 0; j < h->ndiscard; j++)
			if (h->dead_codes[i] == h->discard_codes[j])
				return failf(L, config_setting_get_member(g, "discard_exit_codes"),
				             "handler '%s': exit code %d is in both dead_exit_codes and "
				             "discard_exit_codes", h->class_name, h->dead_codes[i]);
	/* One process serves many jobs, so its argv can't carry one job's args. */
	if (h->warm && h->args_as_argv)
		return failf(L, config_setting_get_member(g, "args_as_argv"),
		             "handler '%s': args_as_argv can't apply to a warm handler (its process "
		             "serves many jobs; each gets its args in the job message)",
		             h->class_name);
	return confinement_rules(L, g, h);
}

static int read_handlers(struct loader *L, const config_setting_t *s, const char *name,
                         void *base)
{
	struct conf *c = base;
	int t = config_setting_type(s), n = config_setting_length(s);

	if (t != CONFIG_TYPE_LIST && !(t == CONFIG_TYPE_ARRAY && n == 0))
		return failf(L, s, "%s must be a list of groups: ( { class = \"X\"; command = "
		             "[ \"/path\" ]; }, ... )", name);
	for (int i = 0; i < n; i++) {
		const config_setting_t *g = config_setting_get_elem(s, (unsigned)i);
		struct handler *h;
		if (config_setting_type(g) != CONFIG_TYPE_GROUP)
			return failf(L, g, "each handler must be a group { class = ...; command = [...]; }");
		c->handlers = xrealloc(c->handlers, (size_t)(c->nhandlers + 1) * sizeof *c->handlers);
		h = &c->handlers[c->nhandlers++];
		handler_defaults(h, (int)config_setting_source_line(g));
		if (read_handler(L, g, c, h) < 0)
			return -1;
	}
	return 0;
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
	{ .name = "history_retention_days", .kind = K_INT, .off = C(history_retention_days),
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
	{ .name = "handlers", .kind = K_CUSTOM, .read = read_handlers },
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
