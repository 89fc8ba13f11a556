/* SPDX-License-Identifier: MIT */
/*
 * config.c: the conf file (libconfig 1.5), loaded and validated in full before anything runs.
 *
 * The conf file is the operator's whole interface, so a mistake in it must be reported when
 * it is loaded (at start, on HUP, by --check) as "<file>:<line>: <what is wrong>", and never
 * be discovered later as odd behaviour. This file is the loader: it reads the file, knows
 * which file and line each setting came from (conf_read.c reports errors there and reads
 * typed scalars), applies the command line and REDIS_URL, and runs the checks between
 * settings last, blaming the line of a setting involved. What each setting is (default,
 * type, bounds, grammar) is in conf_settings.c, a handler's in conf_handler.c; the Redis url
 * in redis_url.c; config_int.h is what they share.
 *
 * libconfig pitfalls handled here (doc/design.md "Pitfalls of our dependencies"):
 * - a relative @include resolves against the working directory unless include_dir is set:
 *   we set it to the conf file's directory (relative password_file paths follow suit);
 * - the other two (wrapped integers, @included file names) are conf_read.c's.
 *
 * Precedence: defaults < conf file < command line (-C, -q) ; REDIS_URL (when set and not
 * empty) replaces redis.url. The Redis url is parsed last, then password_file overrides the
 * url's password, then the Sentinel settings are checked as a whole (they come together or
 * not at all). Error messages never echo the url: it may hold a password.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libconfig.h>

#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "config_int.h"
#include "tls.h"
#include "util.h"

/* ---------------------------------------------------------------------------------------
 * Loading
 * ------------------------------------------------------------------------------------- */

static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		return xstrdup(".");
	if (slash == path)
		return xstrdup("/");
	return xstrndup(path, (size_t)(slash - path));
}

static int read_file(struct loader *L, config_t *cfg)
{
	FILE *f = fopen(L->path, "r");
	const char *ef;

	if (!f)
		return failf(L, NULL, "cannot open: %s", strerror(errno));
	if (fgetc(f) == EOF && ferror(f)) {     /* e.g. a directory: libconfig only says "I/O" */
		int e = errno;
		fclose(f);
		return failf(L, NULL, "cannot read: %s", strerror(e));
	}
	fclose(f);
	if (config_read_file(cfg, L->path) == CONFIG_TRUE)
		return 0;
	if (config_error_type(cfg) == CONFIG_ERR_FILE_IO || !config_error_file(cfg))
		return failf(L, NULL, "%s", config_error_text(cfg));
	ef = config_error_file(cfg);
	char fbuf[PATH_MAX];
	if (ef[0] != '/' && strcmp(ef, L->path) != 0 && strcmp(L->dir, ".") != 0) {
		snprintf(fbuf, sizeof fbuf, "%s/%s", L->dir, ef);
		ef = fbuf;
	}
	/* "syntax error" and a line, often past the mistake: conf_syntax.c looks for it. */
	if (strcmp(config_error_text(cfg), "syntax error") == 0)
		syntax_error(L, ef, (unsigned)config_error_line(cfg), config_error_text(cfg));
	else
		put_err(L, ef, (unsigned)config_error_line(cfg), config_error_text(cfg));
	return -1;
}

/*
 * The first line of a password file (redis.<name>), without its line end, into *password
 * (the secret it replaces is wiped); *file becomes the resolved path.
 */
static int read_password_file(struct loader *L, const char *name, char **file,
                              char **password)
{
	char key[64];
	snprintf(key, sizeof key, "redis.%s", name);
	const config_setting_t *s = L->root ? config_setting_lookup(L->root, key) : NULL;
	char *path, *line = NULL;
	size_t cap = 0;
	ssize_t n;
	FILE *f;
	int e;

	path = ((*file)[0] == '/' || !L->dir) ? xstrdup(*file) : xasprintf("%s/%s", L->dir, *file);
	if (!(f = fopen(path, "r"))) {
		e = errno;
		failf(L, s, "cannot read %s '%s': %s", key, path, strerror(e));
		free(path);
		return -1;
	}
	errno = 0;
	n = getline(&line, &cap, f);
	e = errno;
	fclose(f);
	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		line[--n] = '\0';
	if (n <= 0) {
		if (n < 0 && e)
			failf(L, s, "cannot read %s '%s': %s", key, path, strerror(e));
		else
			failf(L, s, "%s '%s' is empty", key, path);
		free(line);
		free(path);
		return -1;
	}
	if (*password) {
		explicit_bzero(*password, strlen(*password));
		free(*password);
	}
	*password = xstrdup(line);
	explicit_bzero(line, cap);
	free(line);
	set_str(file, path);
	free(path);
	return 0;
}

static int apply_overrides(struct loader *L, struct conf *c, const struct conf_overrides *ov)
{
	if (!ov)
		return 0;
	if (ov->concurrency) {
		if (ov->concurrency < 1 || ov->concurrency > MAX_CONCURRENCY)
			return fail_plain(L, "-C %d: concurrency must be an integer from 1 to %d",
			                  ov->concurrency, MAX_CONCURRENCY);
		c->concurrency = ov->concurrency;
	}
	struct redis_tls *t = &c->redis.tls;
	const char *const *flag[] = { &ov->tls_ca_file, &ov->tls_cert_file, &ov->tls_key_file,
	                              &ov->tls_server_name };
	char **field[] = { &t->ca_file, &t->cert_file, &t->key_file, &t->server_name };
	for (size_t i = 0; i < sizeof flag / sizeof *flag; i++)
		if (*flag[i])
			set_str(field[i], *flag[i]);
	if (ov->tls_no_verify) {
		t->verify = 0;
		set_str(&t->verify_where, "--tls-no-verify");
	}
	if (ov->nqueues > 0) {
		struct queue_set q = { 0 };
		char why[512];
		for (int i = 0; i < ov->nqueues; i++) {
			if (queue_add(&q, ov->queues[i], why, sizeof why) < 0) {
				queue_set_free(&q);
				return fail_plain(L, "-q: %s", why);
			}
		}
		conf_set_queues(c, &q);
	}
	return 0;
}

/* The Sentinel settings come together, or not at all (doc/design.md "Redis"). */
static int apply_sentinel(struct loader *L, struct conf *c)
{
	struct redis_conf *rc = &c->redis;
	char why[512];
	const char *lonely = rc->master_name ? "master_name"
	                     : rc->sentinel_password ? "sentinel_password"
	                     : rc->sentinel_password_file ? "sentinel_password_file"
	                     : rc->sentinel_tls ? "sentinel_tls" : NULL;

	if (rc->sentinels.n == 0) {
		char key[64];
		if (!lonely)
			return 0;
		snprintf(key, sizeof key, "redis.%s", lonely);
		return failf(L, L->root ? config_setting_lookup(L->root, key) : NULL,
		             "%s is only used with redis.sentinels", key);
	}
	if (!rc->master_name)
		return failf(L, L->root ? config_setting_lookup(L->root, "redis.sentinels") : NULL,
		             "redis.sentinels needs redis.master_name (the name the sentinels "
		             "monitor)");
	if (rc->sentinel_password_file &&
	    read_password_file(L, "sentinel_password_file", &rc->sentinel_password_file,
	                       &rc->sentinel_password) < 0)
		return -1;
	if (redis_sentinels_parse(rc, why, sizeof why) < 0) {
		const char *env = getenv("REDIS_URL");
		if (env && *env)
			return fail_plain(L, "REDIS_URL: %s", why);
		return failf(L, L->root ? config_setting_lookup(L->root, "redis.url") : NULL, "%s",
		             why);
	}
	return 0;
}

/* The setting redis.tls.<name> in the file, for the line of an error; NULL when not there. */
static const config_setting_t *tls_setting(const struct loader *L, const char *name)
{
	char key[64];
	snprintf(key, sizeof key, "redis.tls%s%s", name ? "." : "", name ? name : "");
	return L->root ? config_setting_lookup(L->root, key) : NULL;
}

static int tls_given(const struct redis_tls *t)
{
	return t->ca_file || t->cert_file || t->key_file || t->server_name || !t->verify;
}

/*
 * A file of redis.tls: resolved against the conf's directory, readable, and for the key
 * not open to others (a key anyone on the host can read authenticates anyone as us).
 */
static int tls_file(struct loader *L, const char *name, char **file)
{
	if (!*file)
		return 0;
	if ((*file)[0] != '/' && L->dir) {
		char *p = xasprintf("%s/%s", L->dir, *file);
		free(*file);
		*file = p;
	}
	/* stat first: opening a FIFO would wait for a writer. */
	struct stat st;
	FILE *f = NULL;
	int e = stat(*file, &st) < 0 ? errno : 0;
	if (!e && !S_ISREG(st.st_mode))
		return failf(L, tls_setting(L, name), "redis.tls.%s '%s' is not a regular file", name,
		             *file);
	if (e || !(f = fopen(*file, "r")))
		return failf(L, tls_setting(L, name), "cannot read redis.tls.%s '%s': %s", name,
		             *file, strerror(e ? e : errno));
	fclose(f);
	if (strcmp(name, "key_file") == 0 && (st.st_mode & S_IRWXO))
		return failf(L, tls_setting(L, name), "redis.tls.key_file '%s' is open to others "
		             "(mode %04o): chmod o-rwx it, a client key must not be readable by "
		             "every user of the host", *file, (unsigned)(st.st_mode & 07777));
	return 0;
}

/*
 * redis.tls, used by a rediss:// url and by sentinel_tls (doc/design.md "Redis"): its files
 * checked and the context built here, so that a bad CA file or a key that is not the
 * certificate's is a conf error at start and in --check.
 */
static int apply_tls(struct loader *L, struct conf *c)
{
	struct redis_conf *rc = &c->redis;
	struct redis_tls *t = &rc->tls;
	const config_setting_t *grp = tls_setting(L, NULL);
	const char *env = getenv("REDIS_URL");
	char why[512];

	if (!rc->use_tls && !rc->sentinel_tls) {
		if (!grp && !tls_given(t))
			return 0;
		return failf(L, grp, "%s, but %s is not rediss:// (nor is redis.sentinel_tls on): "
		             "the connection would not be encrypted",
		             grp ? "redis.tls is set" : "--tls-* options are given",
		             env && *env ? "REDIS_URL" : "redis.url");
	}
	if (!t->cert_file != !t->key_file)
		return failf(L, tls_setting(L, t->cert_file ? "cert_file" : "key_file"),
		             "redis.tls.cert_file and key_file come together (the client "
		             "certificate and its key)");
	if (tls_file(L, "ca_file", &t->ca_file) < 0 || tls_file(L, "cert_file", &t->cert_file) < 0 ||
	    tls_file(L, "key_file", &t->key_file) < 0)
		return -1;
	struct tls_settings ts = { .ca_file = t->ca_file, .cert_file = t->cert_file,
	                           .key_file = t->key_file, .verify = t->verify };
	if (!(t->ctx = tls_ctx_new(&ts, why, sizeof why)))
		return failf(L, grp, "%s", why);
	return 0;
}

static int apply_redis(struct loader *L, struct conf *c)
{
	const char *env = getenv("REDIS_URL");
	char why[512];

	c->redis.url_in_file = L->root && config_setting_lookup(L->root, "redis.url") != NULL;
	c->redis.url_from_env = env && *env;
	if (env && *env)
		set_str(&c->redis.url, env);
	if (redis_url_parse(c->redis.url, &c->redis, why, sizeof why) < 0) {
		if (env && *env)
			return fail_plain(L, "REDIS_URL: %s", why);
		return failf(L, L->root ? config_setting_lookup(L->root, "redis.url") : NULL,
		             "redis.url: %s", why);
	}
	if (c->redis.password_file &&
	    read_password_file(L, "password_file", &c->redis.password_file, &c->redis.password) < 0)
		return -1;
	if (apply_sentinel(L, c) < 0)
		return -1;
	return apply_tls(L, c);
}

/* Settings checked against each other, so that a live process can never look dead. */
static int cross_check(struct loader *L, struct conf *c)
{
	if (!(c->process_ttl > 2 * c->heartbeat_interval))
		return failf(L, blame(L, "process_ttl", "heartbeat_interval"),
		             "process_ttl (%g) must be more than twice heartbeat_interval (%g), or a "
		             "live process could look dead", c->process_ttl, c->heartbeat_interval);
	if (!(c->orphan_threshold > c->process_ttl))
		return failf(L, blame(L, "orphan_threshold", "process_ttl"),
		             "orphan_threshold (%g) must be more than process_ttl (%g)",
		             c->orphan_threshold, c->process_ttl);
	return 0;
}

/* Fill what is derived from other settings, and make every argv list NULL-terminated. */
static void finish(struct conf *c)
{
	for (int i = 0; i < c->nhandlers; i++) {
		struct handler *h = &c->handlers[i];
		if (h->on_death_timeout < 0)
			h->on_death_timeout = c->on_death_timeout;
		if (h->output_keep < 0)
			h->output_keep = c->output_keep;
		argv_ensure(&h->command);
		argv_ensure(&h->env);
		argv_ensure(&h->env_passthrough);
		argv_ensure(&h->on_death);
	}
	for (int i = 0; i < c->non_death; i++)
		argv_ensure(&c->on_death[i]);
}

int conf_load(const char *path, const struct conf_overrides *ov, struct conf *out,
              char *err, size_t errlen)
{
	struct loader L = { .path = path, .err = err, .errlen = errlen };
	struct conf c;
	config_t cfg;
	int rc = -1;

	if (err && errlen)
		err[0] = '\0';
	conf_defaults(&c);
	if (path) {
		c.path = xstrdup(path);
		L.dir = dir_of(path);
		config_init(&cfg);
		config_set_include_dir(&cfg, L.dir);
		if (read_file(&L, &cfg) < 0)
			goto done;
		L.root = config_root_setting(&cfg);
		if (conf_apply_top(&L, L.root, &c) < 0)
			goto done;
	}
	if (apply_overrides(&L, &c, ov) < 0 || apply_redis(&L, &c) < 0 || cross_check(&L, &c) < 0)
		goto done;
	finish(&c);
	rc = 0;
done:
	if (path)
		config_destroy(&cfg);
	free(L.dir);
	if (rc == 0) {
		*out = c;
	} else {
		conf_free(&c);
		memset(out, 0, sizeof *out);
	}
	return rc;
}

static void strv_copy(char ***dst, int *ndst, char *const *src, int nsrc)
{
	strv_free(dst, ndst);
	for (int i = 0; i < nsrc; i++)
		strv_push(dst, ndst, src[i]);
}

/* A reload keeps what the running threads were built for: the fetchers' number, the
 * queues they park on (park.c sets one waiter per queue at start), the fetch mode and the
 * containment (its cgroups are made at start, jobcg.h). */
void conf_keep_restart_settings(struct conf *fresh, const struct conf *running)
{
	fresh->concurrency = running->concurrency;
	strv_copy(&fresh->queues, &fresh->nqueues, running->queues, running->nqueues);
	strv_copy(&fresh->queue_names, &fresh->nqueue_names, running->queue_names,
	          running->nqueue_names);
	fresh->fetch_basic = running->fetch_basic;
	fresh->containment = running->containment;
}

void conf_free(struct conf *c)
{
	free(c->path);
	redis_conf_clear(&c->redis);
	strv_free(&c->queues, &c->nqueues);
	strv_free(&c->queue_names, &c->nqueue_names);
	free(c->metrics_listen);
	free(c->tick_interval_where);
	free(c->containment_where);
	for (int i = 0; i < c->nhandlers; i++)
		conf_handler_free(&c->handlers[i]);
	free(c->handlers);
	for (int i = 0; i < c->nperiodic; i++)
		conf_periodic_free(&c->periodic[i]);
	free(c->periodic);
	for (int i = 0; i < c->non_death; i++)
		argv_free(&c->on_death[i]);
	free(c->on_death);
	memset(c, 0, sizeof *c);
}

static int reads_queue(const struct conf *c, const char *queue)
{
	for (int i = 0; i < c->nqueue_names; i++)
		if (strcmp(c->queue_names[i], queue) == 0)
			return 1;
	return 0;
}

static void push_owned(char ***v, int *n, char *s)
{
	*v = xrealloc(*v, (size_t)(*n + 1) * sizeof **v);
	(*v)[(*n)++] = s;
}

int conf_warnings(const struct conf *c, char ***out)
{
	int n = 0;
	*out = NULL;
	for (int i = 0; i < c->nperiodic; i++) {
		const struct periodic_entry *p = &c->periodic[i];
		const char *where = p->where ? p->where : (c->path ? c->path : "(conf)");
		if (!conf_find_handler(c, p->class_name))
			push_owned(out, &n, xasprintf("%s: periodic job class %s can't be resolved: no "
			                             "handler for it in this conf (another process may "
			                             "run it)", where, p->class_name));
		if (!reads_queue(c, p->queue)) {
			struct sbuf qs;
			sb_init(&qs);
			for (int k = 0; k < c->nqueue_names; k++)
				sb_printf(&qs, "%s%s", k ? ", " : "", c->queue_names[k]);
			push_owned(out, &n, xasprintf("%s: periodic entry %s (%s) puts its jobs on queue "
			                             "'%s', which this conf does not read (queues: %s): "
			                             "only a process reading it runs them", where,
			                             p->class_name, p->cron, p->queue, qs.s));
			sb_free(&qs);
		}
	}
	for (int i = 0; i < c->nhandlers; i++) {
		const struct handler *h = &c->handlers[i];
		const char *file = c->path ? c->path : "(conf)";
		/* A warm process serves many jobs: its CPU limit is spent over all of them. */
		if (h->warm && h->rlimit_cpu >= 0)
			push_owned(out, &n, xasprintf("%s:%d: handler %s: rlimit_cpu on a warm handler "
			                             "limits each process's CPU over all its jobs, not "
			                             "each job's (use timeout, or warm_max_jobs to "
			                             "recycle it sooner)", file, h->line,
			                             h->class_name));
		/* Root in the job can remount, or join the host's namespaces through /proc. */
		const struct confinement *cf = &h->confine;
		if (geteuid() == 0 && !h->user && (!cf->network || cf->private_tmp || cf->read_only))
			push_owned(out, &n, xasprintf("%s: handler %s: its confinement is no wall "
			                             "against a handler that runs as root (this daemon "
			                             "is root and the handler has no user): root can "
			                             "undo network = false, private_tmp and read_only; "
			                             "set user", cf->at ? cf->at : file,
			                             h->class_name));
		if (h->warm && h->warm_max_rss > 0 && h->rlimit_as >= 0 &&
		    h->warm_max_rss >= h->rlimit_as)
			push_owned(out, &n, xasprintf("%s:%d: handler %s: warm_max_rss (%lld) is not "
			                             "below rlimit_as (%lld): a process hits its address "
			                             "space limit before it is recycled", file, h->line,
			                             h->class_name, h->warm_max_rss, h->rlimit_as));
	}
	if (!c->redis.tls.verify && c->redis.tls.ctx)
		push_owned(out, &n, xasprintf("%s: redis.tls.verify = false: the server's certificate "
		                             "is not checked, so anyone on the way to Redis can read "
		                             "and change what is sent (jobs run as commands here)",
		                             c->redis.tls.verify_where));
	if (c->tick_interval_where)
		push_owned(out, &n, xasprintf("%s: tick_interval no longer paces the periodic slots "
		                             "(each fires on time); it only sets how often the "
		                             "ticker looks again at what failed or was blocked",
		                             c->tick_interval_where));
	return n;
}

void conf_warnings_free(char **v, int n)
{
	strv_free(&v, &n);
}

const struct handler *conf_find_handler(const struct conf *c, const char *class_name)
{
	const struct handler *fallback = NULL;

	for (int i = 0; i < c->nhandlers; i++) {
		if (strcmp(c->handlers[i].class_name, class_name) == 0)
			return &c->handlers[i];
		if (strcmp(c->handlers[i].class_name, "*") == 0)
			fallback = &c->handlers[i];
	}
	return fallback;
}

long conf_queued_ttl(const struct conf *c)
{
	return (long)ceil(c->unique_lock_ttl);
}

long conf_active_ttl(const struct conf *c)
{
	return (long)ceil(c->orphan_threshold + 60 + 60);
}
