/*
 * config.c: the conf file (libconfig 1.5), loaded and validated in full before anything runs.
 *
 * The conf file is the operator's whole interface, so a mistake in it must be reported when
 * it is loaded (at start, on HUP, by --check) as "<file>:<line>: <what is wrong>", and never
 * be discovered later as odd behaviour. This file is the loader: it reads the file, knows
 * which file and line each setting came from and reports errors there (failf), reads typed
 * scalars out of libconfig settings, applies the command line and REDIS_URL, and runs the
 * checks between settings last, blaming the line of a setting involved. What each setting
 * is (default, type, bounds, grammar) is in conf_settings.c; the Redis url in redis_url.c;
 * config_int.h is what the three share.
 *
 * libconfig pitfalls handled here (DESIGN.md, "Pitfalls of our dependencies"):
 * - a relative @include resolves against the working directory unless include_dir is set:
 *   we set it to the conf file's directory (relative password_file paths follow suit);
 * - an integer above 2^31-1 written without the L suffix is stored wrapped, without a word
 *   (5000000000 reads as 705032704): integer settings are compared with their source text;
 * - settings read from an @included file report that file's name as written in the
 *   @include line, so messages join it with the include directory.
 *
 * Precedence: defaults < conf file < command line (-C, -q) ; REDIS_URL (when set and not
 * empty) replaces redis.url. The Redis url is parsed last, then password_file overrides the
 * url's password. Error messages never echo the url: it may hold a password.
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

#include "config.h"
#include "config_int.h"
#include "util.h"

/* ---------------------------------------------------------------------------------------
 * The loader: where we are, and how errors are reported
 * ------------------------------------------------------------------------------------- */

/* The file a setting came from: an @included file is reported as written, so join it. */
static const char *setting_file(const struct loader *L, const config_setting_t *s,
                                char *buf, size_t n)
{
	const char *f = config_setting_source_file(s);

	if (!f)
		return L->path ? L->path : "(conf)";
	if (f[0] != '/' && L->dir && strcmp(L->dir, ".") != 0 && (!L->path || strcmp(f, L->path))) {
		snprintf(buf, n, "%s/%s", L->dir, f);
		return buf;
	}
	return f;
}

static void put_err(struct loader *L, const char *loc, unsigned line, const char *msg)
{
	if (!L->err || !L->errlen)
		return;
	if (loc && line)
		snprintf(L->err, L->errlen, "%s:%u: %s", loc, line, msg);
	else if (loc)
		snprintf(L->err, L->errlen, "%s: %s", loc, msg);
	else
		snprintf(L->err, L->errlen, "%s", msg);
}

/* "<file>:<line>: <msg>" for setting s (or "<file>: <msg>" without one). Returns -1. */
__attribute__((format(printf, 3, 4)))
int failf(struct loader *L, const config_setting_t *s, const char *fmt, ...)
{
	char msg[1024], fbuf[PATH_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (s)
		put_err(L, setting_file(L, s, fbuf, sizeof fbuf), config_setting_source_line(s), msg);
	else
		put_err(L, L->path, 0, msg);
	return -1;
}

/* An error with no place in the file (command line, environment). Returns -1. */
__attribute__((format(printf, 2, 3)))
static int fail_plain(struct loader *L, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	put_err(L, NULL, 0, msg);
	return -1;
}

/* The first of the named top-level settings present in the file, for cross-check blame. */
static config_setting_t *blame(const struct loader *L, const char *a, const char *b)
{
	config_setting_t *s = NULL;

	if (L->root && !(s = config_setting_get_member(L->root, a)))
		s = config_setting_get_member(L->root, b);
	return s;
}

/* ---------------------------------------------------------------------------------------
 * Scalars: numbers, integers (with the wrap check), strings, string arrays
 * ------------------------------------------------------------------------------------- */

/* Line n (1-based) of file into buf; -1 if unreadable. */
static int read_source_line(const char *file, unsigned n, char *buf, size_t len)
{
	FILE *f = fopen(file, "r");
	unsigned i = 0;
	int rc = -1;

	if (!f)
		return -1;
	while (fgets(buf, (int)len, f)) {
		size_t l = strlen(buf);
		if (l && buf[l - 1] == '\n')
			i++;
		else if (feof(f))
			i++;
		else
			continue;           /* the rest of an over-long line */
		if (i == n) {
			rc = 0;
			break;
		}
	}
	fclose(f);
	return rc;
}

static int name_char(int c)
{
	return isalnum(c) || c == '_' || c == '-' || c == '*';
}

/* In a source line, the text right after "name =" or "name :" (outside strings and
 * comments), or NULL. */
static const char *value_text(const char *line, const char *name)
{
	size_t nl = strlen(name);

	for (const char *p = line; *p; p++) {
		if (*p == '"') {
			for (p++; *p && *p != '"'; p++)
				if (*p == '\\' && p[1])
					p++;
			if (!*p)
				return NULL;
			continue;
		}
		if (*p == '#' || (p[0] == '/' && (p[1] == '/' || p[1] == '*')))
			return NULL;
		if (strncmp(p, name, nl) != 0 || (p > line && name_char((unsigned char)p[-1])))
			continue;
		const char *q = p + nl;
		while (*q == ' ' || *q == '\t')
			q++;
		if (*q != '=' && *q != ':')
			continue;
		q++;
		while (*q == ' ' || *q == '\t')
			q++;
		return q;
	}
	return NULL;
}

/*
 * libconfig 1.5 keeps an integer written without the L suffix in an int, wrapping what
 * does not fit (3000000000 reads as -1294967296, 8589934592 as 0). The text is still in
 * the file: read the setting's line back and compare.
 */
static int check_int_wrap(struct loader *L, const config_setting_t *s, const char *name)
{
	char fbuf[PATH_MAX], line[4096];
	const char *v, *file;
	char *end;
	long long x;

	if (config_setting_type(s) != CONFIG_TYPE_INT || !config_setting_name(s))
		return 0;
	file = setting_file(L, s, fbuf, sizeof fbuf);
	if (read_source_line(file, config_setting_source_line(s), line, sizeof line) < 0)
		return 0;
	if (!(v = value_text(line, config_setting_name(s))))
		return 0;
	/* libconfig reads decimal and 0x hex; a leading 0 is not octal to it. */
	errno = 0;
	x = strtoll(v, &end, (v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) ? 16 : 10);
	if (end == v || (errno == 0 && x == (long long)config_setting_get_int(s)))
		return 0;
	return failf(L, s, "%s = %.*s does not fit in 32 bits: libconfig needs the L suffix "
	             "(%.*sL) for integers above 2147483647", name, (int)(end - v), v,
	             (int)(end - v), v);
}

/* Any number (int, int64 or float) as a double; a string or a bool is an error. */
int read_number(struct loader *L, const config_setting_t *s, const char *name, double *out)
{
	switch (config_setting_type(s)) {
	case CONFIG_TYPE_INT:
	case CONFIG_TYPE_INT64:
		if (check_int_wrap(L, s, name) < 0)
			return -1;
		*out = (double)config_setting_get_int64(s);
		return 0;
	case CONFIG_TYPE_FLOAT:
		*out = config_setting_get_float(s);
		if (!isfinite(*out))
			return failf(L, s, "%s must be a finite number", name);
		return 0;
	default:
		return failf(L, s, "%s must be a number", name);
	}
}

/* An integer (int or int64); a float, even 3.0, is an error. */
int read_integer(struct loader *L, const config_setting_t *s, const char *name,
                 long long *out)
{
	switch (config_setting_type(s)) {
	case CONFIG_TYPE_INT:
	case CONFIG_TYPE_INT64:
		if (check_int_wrap(L, s, name) < 0)
			return -1;
		*out = config_setting_get_int64(s);
		return 0;
	default:
		return failf(L, s, "%s must be an integer", name);
	}
}

int read_string(struct loader *L, const config_setting_t *s, const char *name,
                const char **out)
{
	if (config_setting_type(s) != CONFIG_TYPE_STRING)
		return failf(L, s, "%s must be a string", name);
	*out = config_setting_get_string(s);
	return 0;
}

/* An array or list of strings ([ "a", "b" ] or ( "a", "b" )), each passing check. */
int read_strings(struct loader *L, const config_setting_t *s, const char *name,
                 str_check check, struct argv_list *out)
{
	int t = config_setting_type(s), n;

	if (t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST)
		return failf(L, s, "%s must be an array of strings, e.g. [ \"a\", \"b\" ]", name);
	argv_free(out);
	argv_ensure(out);
	n = config_setting_length(s);
	for (int i = 0; i < n; i++) {
		const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
		const char *why, *v;
		if (config_setting_type(e) != CONFIG_TYPE_STRING)
			return failf(L, e, "%s must be an array of strings", name);
		v = config_setting_get_string(e);
		if (check && (why = check(v)))
			return failf(L, e, "%s: '%s' %s", name, v, why);
		argv_push(out, v);
	}
	return 0;
}
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
	char fbuf[PATH_MAX];
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
	if (ef[0] != '/' && strcmp(ef, L->path) != 0 && strcmp(L->dir, ".") != 0) {
		snprintf(fbuf, sizeof fbuf, "%s/%s", L->dir, ef);
		ef = fbuf;
	}
	put_err(L, ef, (unsigned)config_error_line(cfg), config_error_text(cfg));
	return -1;
}

/* The first line of a password file, without its line end. */
static int read_password_file(struct loader *L, struct conf *c)
{
	const config_setting_t *s = L->root ? config_setting_lookup(L->root, "redis.password_file")
	                                    : NULL;
	const char *file = c->redis.password_file;
	char *path, *line = NULL;
	size_t cap = 0;
	ssize_t n;
	FILE *f;
	int e;

	path = (file[0] == '/' || !L->dir) ? xstrdup(file) : xasprintf("%s/%s", L->dir, file);
	if (!(f = fopen(path, "r"))) {
		e = errno;
		failf(L, s, "cannot read redis.password_file '%s': %s", path, strerror(e));
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
			failf(L, s, "cannot read redis.password_file '%s': %s", path, strerror(e));
		else
			failf(L, s, "redis.password_file '%s' is empty", path);
		free(line);
		free(path);
		return -1;
	}
	if (c->redis.password) {
		explicit_bzero(c->redis.password, strlen(c->redis.password));
		free(c->redis.password);
	}
	c->redis.password = xstrdup(line);
	explicit_bzero(line, cap);
	free(line);
	set_str(&c->redis.password_file, path);
	free(path);
	return 0;
}

static int apply_overrides(struct loader *L, struct conf *c, const struct conf_overrides *ov)
{
	char why[512];

	if (!ov)
		return 0;
	if (ov->concurrency) {
		if (ov->concurrency < 1 || ov->concurrency > MAX_CONCURRENCY)
			return fail_plain(L, "-C %d: concurrency must be an integer from 1 to %d",
			                  ov->concurrency, MAX_CONCURRENCY);
		c->concurrency = ov->concurrency;
	}
	if (ov->nqueues > 0) {
		struct queue_set q = { 0 };
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

static int apply_redis(struct loader *L, struct conf *c)
{
	const char *env = getenv("REDIS_URL");
	char why[512];

	if (env && *env)
		set_str(&c->redis.url, env);
	if (redis_url_parse(c->redis.url, &c->redis, why, sizeof why) < 0) {
		if (env && *env)
			return fail_plain(L, "REDIS_URL: %s", why);
		return failf(L, L->root ? config_setting_lookup(L->root, "redis.url") : NULL,
		             "redis.url: %s", why);
	}
	if (c->redis.password_file && read_password_file(L, c) < 0)
		return -1;
	return 0;
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

void conf_free(struct conf *c)
{
	free(c->path);
	redis_conf_clear(&c->redis);
	strv_free(&c->queues, &c->nqueues);
	strv_free(&c->queue_names, &c->nqueue_names);
	free(c->metrics_listen);
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
