/*
 * config.c: the conf file (libconfig 1.5), validated in full before anything runs.
 *
 * The conf file is the operator's whole interface, so a mistake in it must be reported when
 * it is loaded (at start, on HUP, by --check) as "<file>:<line>: <what is wrong>", and never
 * be discovered later as odd behaviour. Hence:
 *
 * - Every group (top level, redis, each handler, each periodic entry) is walked member by
 *   member against a table of known settings. A name that is not in the table is an error:
 *   a misspelt setting that silently keeps its default is the classic conf-file bug.
 * - A table row says what kind of value the setting takes (seconds, integer, bool, string,
 *   argv, exit codes), its bounds and where it lands in the struct, so reading and type
 *   checking is one generic function. The few settings with a grammar of their own
 *   (queues, fetch, log_level, metrics_listen, on_death, handlers, periodic) have a reader.
 * - Checks between settings run last and blame the line of a setting involved.
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
#include <strings.h>
#include <libconfig.h>
#include <cJSON.h>

#include "config.h"
#include "cron.h"
#include "log.h"
#include "util.h"

#define DEFAULT_REDIS_URL   "redis://127.0.0.1:6379/0"
#define MAX_CONCURRENCY     1000
#define MAX_QUEUE_WEIGHT    100
#define MAX_SECONDS         1e9         /* ~31 years: keeps every conversion to ms in range */
#define MAX_OUTPUT_TAIL     (1024 * 1024)
#define MAX_DAYS            36500

/* ---------------------------------------------------------------------------------------
 * Small owned-string helpers
 * ------------------------------------------------------------------------------------- */

static void argv_free(struct argv_list *a)
{
	for (int i = 0; i < a->n; i++)
		free(a->v[i]);
	free(a->v);
	a->v = NULL;
	a->n = 0;
}

static void argv_push(struct argv_list *a, const char *s)
{
	a->v = xrealloc(a->v, (size_t)(a->n + 2) * sizeof *a->v);
	a->v[a->n++] = xstrdup(s);
	a->v[a->n] = NULL;
}

/* A loaded conf's argv lists always have a NULL-terminated v, even when empty. */
static void argv_ensure(struct argv_list *a)
{
	if (!a->v)
		a->v = xcalloc(1, sizeof *a->v);
}

static void set_str(char **dst, const char *s)
{
	free(*dst);
	*dst = s ? xstrdup(s) : NULL;
}

static void strv_push(char ***v, int *n, const char *s)
{
	*v = xrealloc(*v, (size_t)(*n + 1) * sizeof **v);
	(*v)[(*n)++] = xstrdup(s);
}

static void strv_free(char ***v, int *n)
{
	for (int i = 0; i < *n; i++)
		free((*v)[i]);
	free(*v);
	*v = NULL;
	*n = 0;
}

/* ---------------------------------------------------------------------------------------
 * The loader: where we are, and how errors are reported
 * ------------------------------------------------------------------------------------- */

struct loader {
	const char *path;               /* the conf file as given, NULL for defaults only */
	char *dir;                      /* its directory: base of @include and password_file */
	config_setting_t *root;         /* the parsed file, NULL for defaults only */
	char *err;
	size_t errlen;
};

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
static int failf(struct loader *L, const config_setting_t *s, const char *fmt, ...)
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
static int read_number(struct loader *L, const config_setting_t *s, const char *name,
                       double *out)
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
static int read_integer(struct loader *L, const config_setting_t *s, const char *name,
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

static int read_string(struct loader *L, const config_setting_t *s, const char *name,
                       const char **out)
{
	if (config_setting_type(s) != CONFIG_TYPE_STRING)
		return failf(L, s, "%s must be a string", name);
	*out = config_setting_get_string(s);
	return 0;
}

/* Validates one string of a setting: NULL when fine, else what is wrong with it. */
typedef const char *(*str_check)(const char *s);

/* An array or list of strings ([ "a", "b" ] or ( "a", "b" )), each passing check. */
static int read_strings(struct loader *L, const config_setting_t *s, const char *name,
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

static int parse_port(const char *s, size_t n)
{
	int port = 0;

	if (n == 0 || n > 5)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -1;
		port = port * 10 + (s[i] - '0');
	}
	return (port >= 1 && port <= 65535) ? port : -1;
}

/* "host:port" or "[v6]:port"; "" = off. */
static const char *check_listen(const char *s)
{
	const char *colon;

	if (!*s)
		return NULL;
	if (s[0] == '[') {
		const char *rb = strchr(s, ']');
		if (!rb || rb == s + 1 || rb[1] != ':')
			return "is not host:port (IPv6 as [addr]:port)";
		colon = rb + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon || colon == s || memchr(s, ':', (size_t)(colon - s)))
			return "is not host:port (e.g. 127.0.0.1:9394; IPv6 as [addr]:port)";
	}
	if (parse_port(colon + 1, strlen(colon + 1)) < 0)
		return "has no valid port (1..65535)";
	return NULL;
}

/* --- queues ------------------------------------------------------------------------------ */

struct queue_set {
	char **queues;                  /* weight-expanded */
	int nqueues;
	char **names;                   /* distinct, in order */
	int nnames;
};

static void queue_set_free(struct queue_set *q)
{
	strv_free(&q->queues, &q->nqueues);
	strv_free(&q->names, &q->nnames);
}

/* Add "name" or "name,weight"; on error returns -1 with the reason in why. */
static int queue_add(struct queue_set *q, const char *spec, char *why, size_t whylen)
{
	const char *comma = strchr(spec, ',');
	size_t nlen = comma ? (size_t)(comma - spec) : strlen(spec);
	long weight = 1;
	char *name;
	int known = 0;

	if (nlen == 0) {
		snprintf(why, whylen, "queue '%s': the name is empty", spec);
		return -1;
	}
	for (size_t i = 0; i < nlen; i++) {
		if (isspace((unsigned char)spec[i]) || iscntrl((unsigned char)spec[i])) {
			snprintf(why, whylen, "queue '%s': names cannot contain spaces", spec);
			return -1;
		}
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

static void conf_set_queues(struct conf *c, struct queue_set *q)
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

static int read_log_level(struct loader *L, const config_setting_t *s, const char *name,
                          void *base)
{
	const char *v = config_setting_type(s) == CONFIG_TYPE_STRING
	                ? config_setting_get_string(s) : NULL;

	if (!v || log_level_parse(v, &((struct conf *)base)->log_level) != 0)
		return failf(L, s, "%s must be one of: debug, info, warn, error", name);
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
};

static int read_redis(struct loader *L, const config_setting_t *s, const char *name, void *base)
{
	if (config_setting_type(s) != CONFIG_TYPE_GROUP)
		return failf(L, s, "%s must be a group: redis = { url = \"...\"; };", name);
	return apply_group(L, s, redis_specs, sizeof redis_specs / sizeof *redis_specs, "redis.",
	                   &((struct conf *)base)->redis);
}

/* --- handlers ---------------------------------------------------------------------------- */

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
	{ .name = "rlimit_cpu", .kind = K_LLONG, .off = H(rlimit_cpu) },
	{ .name = "rlimit_as", .kind = K_LLONG, .off = H(rlimit_as) },
	{ .name = "rlimit_nofile", .kind = K_LLONG, .off = H(rlimit_nofile) },
	{ .name = "rlimit_nproc", .kind = K_LLONG, .off = H(rlimit_nproc) },
	{ .name = "on_death", .kind = K_ARGV, .off = H(on_death) },
	{ .name = "on_death_timeout", .kind = K_SECONDS, .off = H(on_death_timeout),
	  .max = MAX_SECONDS, .flags = F_EXCL_MIN },
};
#undef H

static void handler_free(struct handler *h)
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
	memset(h, 0, sizeof *h);
}

static void handler_defaults(struct handler *h, int line)
{
	memset(h, 0, sizeof *h);
	h->kill_grace = 10;
	h->output_tail = 4096;
	h->rlimit_cpu = h->rlimit_as = h->rlimit_nofile = h->rlimit_nproc = -1;
	h->on_death_timeout = -1;       /* unset: the global on_death_timeout, see finish() */
	h->line = line;
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
	return 0;
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

#define P(f) offsetof(struct periodic_entry, f)
static const struct spec periodic_specs[] = {
	{ .name = "cron", .kind = K_STRING, .off = P(cron), .flags = F_NONEMPTY },
	{ .name = "class", .kind = K_STRING, .off = P(class_name), .flags = F_NONEMPTY },
	{ .name = "args", .kind = K_CUSTOM, .read = read_args },
	{ .name = "retry", .kind = K_CUSTOM, .read = read_retry },
	{ .name = "unique", .kind = K_CUSTOM, .read = read_unique },
};
#undef P

static void periodic_free(struct periodic_entry *p)
{
	free(p->cron);
	free(p->class_name);
	free(p->args_json);
	free(p->retry_json);
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
		p->line = (int)config_setting_source_line(g);
		if (read_periodic_entry(L, g, p) < 0)
			return -1;
	}
	return 0;
}

/* --- the top level ----------------------------------------------------------------------- */

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
	{ .name = "fetch_idle_max_interval", .kind = K_SECONDS, .off = C(fetch_idle_max_interval),
	  .max = MAX_SECONDS, .flags = F_EXCL_MIN },
	{ .name = "unique_lock_ttl", .kind = K_SECONDS, .off = C(unique_lock_ttl),
	  .max = MAX_SECONDS, .flags = F_EXCL_MIN },
	{ .name = "periodic_catch_up", .kind = K_BOOL, .off = C(periodic_catch_up) },
	{ .name = "periodic_replace", .kind = K_BOOL, .off = C(periodic_replace) },
	{ .name = "tick_interval", .kind = K_SECONDS, .off = C(tick_interval),
	  .max = MAX_SECONDS, .flags = F_EXCL_MIN },
	{ .name = "log_level", .kind = K_CUSTOM, .read = read_log_level },
	{ .name = "metrics_listen", .kind = K_CUSTOM, .read = read_metrics_listen },
	{ .name = "status_expiration", .kind = K_SECONDS, .off = C(status_expiration),
	  .max = MAX_SECONDS },
	{ .name = "history_retention_days", .kind = K_INT, .off = C(history_retention_days),
	  .max = MAX_DAYS },
	{ .name = "history_max_entries", .kind = K_INT, .off = C(history_max_entries), .min = 1,
	  .max = INT_MAX },
	{ .name = "history_daily_retention_days", .kind = K_INT,
	  .off = C(history_daily_retention_days), .min = 1, .max = MAX_DAYS },
	{ .name = "on_death", .kind = K_CUSTOM, .read = read_global_on_death },
	{ .name = "on_death_timeout", .kind = K_SECONDS, .off = C(on_death_timeout),
	  .max = MAX_SECONDS, .flags = F_EXCL_MIN },
	{ .name = "handlers", .kind = K_CUSTOM, .read = read_handlers },
	{ .name = "periodic", .kind = K_CUSTOM, .read = read_periodic },
};
#undef C

static void conf_defaults(struct conf *c)
{
	struct queue_set q = { 0 };
	char why[64];

	memset(c, 0, sizeof *c);
	c->redis.url = xstrdup(DEFAULT_REDIS_URL);
	c->redis.connect_timeout = 2.0;
	c->redis.command_timeout = 5.0;
	c->concurrency = 10;
	queue_add(&q, "default", why, sizeof why);
	conf_set_queues(c, &q);
	c->fetch_basic = 0;
	c->shutdown_timeout = 25;
	c->poll_interval = 5;
	c->heartbeat_interval = 5;
	c->process_ttl = 60;
	c->orphan_threshold = 300;
	c->orphan_check_interval = 60;
	c->max_orphanings = 3;
	c->fetch_idle_max_interval = 1.0;
	c->unique_lock_ttl = 86400;
	c->periodic_catch_up = 1;
	c->periodic_replace = 0;
	c->tick_interval = 5;
	c->log_level = LOG_INFO;
	c->metrics_listen = xstrdup("");
	c->status_expiration = 0;
	c->history_retention_days = 0;
	c->history_max_entries = 50000;
	c->history_daily_retention_days = 400;
	c->on_death_timeout = 30;
}

/* ---------------------------------------------------------------------------------------
 * Redis url
 * ------------------------------------------------------------------------------------- */

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	return (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
}

/* Percent-decode s[0..n) into a new string; NULL on a bad escape or an encoded NUL. */
static char *pct_decode(const char *s, size_t n)
{
	char *out = xmalloc(n + 1), *o = out;

	for (size_t i = 0; i < n; i++) {
		if (s[i] != '%') {
			*o++ = s[i];
			continue;
		}
		int a = i + 2 < n ? hexval((unsigned char)s[i + 1]) : -1;
		int b = i + 2 < n ? hexval((unsigned char)s[i + 2]) : -1;
		if (a < 0 || b < 0 || (a == 0 && b == 0)) {
			free(out);
			return NULL;
		}
		*o++ = (char)(a * 16 + b);
		i += 2;
	}
	*o = '\0';
	return out;
}

static int parse_db(const char *s, size_t n, int *db)
{
	long v = 0;

	if (n == 0) {
		*db = 0;
		return 0;
	}
	if (n > 9)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	*db = (int)v;
	return 0;
}

/* redis://[user[:password]@]host[:port][/db] (rest = after "redis://"). */
static const char *parse_tcp_url(const char *rest, struct redis_conf *t)
{
	const char *at = strrchr(rest, '@'), *hp = at ? at + 1 : rest;
	const char *slash = strchr(hp, '/'), *hend, *colon, *hs;
	size_t hlen;

	if (strchr(hp, '?') || strchr(hp, '#'))
		return "query parameters are not supported in redis:// urls (the db is the path: /N)";
	if (at) {
		const char *c = memchr(rest, ':', (size_t)(at - rest));
		const char *uend = c ? c : at;
		if (uend > rest && !(t->user = pct_decode(rest, (size_t)(uend - rest))))
			return "bad percent-encoding in the url's user";
		if (c && at > c + 1 && !(t->password = pct_decode(c + 1, (size_t)(at - c - 1))))
			return "bad percent-encoding in the url's password";
	}
	hend = slash ? slash : hp + strlen(hp);
	if (hp[0] == '[') {
		const char *rb = memchr(hp, ']', (size_t)(hend - hp));
		if (!rb || rb == hp + 1)
			return "bad IPv6 address (write it as [addr])";
		hs = hp + 1;
		hlen = (size_t)(rb - hs);
		colon = rb + 1 < hend ? rb + 1 : NULL;
		if (colon && *colon != ':')
			return "unexpected text after the IPv6 address";
	} else {
		colon = memchr(hp, ':', (size_t)(hend - hp));
		hs = hp;
		hlen = (size_t)((colon ? colon : hend) - hp);
		if (colon && memchr(colon + 1, ':', (size_t)(hend - colon - 1)))
			return "IPv6 addresses must be written in brackets: redis://[::1]:6379";
	}
	if (hlen == 0)
		return "the url has no host";
	for (size_t i = 0; i < hlen; i++)
		if (isspace((unsigned char)hs[i]) || hs[i] == '%')
			return "the url's host is not valid";
	t->port = 6379;
	if (colon && (t->port = parse_port(colon + 1, (size_t)(hend - colon - 1))) < 0)
		return "the url's port is not a number from 1 to 65535";
	if (slash && parse_db(slash + 1, strlen(slash + 1), &t->db) < 0)
		return "the url's database (after the /) is not a number";
	t->host = xstrndup(hs, hlen);
	t->display = xasprintf("redis://%s%s%s:%d/%d", hp[0] == '[' ? "[" : "", t->host,
	                       hp[0] == '[' ? "]" : "", t->port, t->db);
	return NULL;
}

/* unix:///path/to/sock[?db=N] (rest = after "unix://"). */
static const char *parse_unix_url(const char *rest, struct redis_conf *t)
{
	const char *q = strchr(rest, '?'), *pend = q ? q : rest + strlen(rest);

	if (rest[0] != '/' || pend - rest < 2)
		return "the unix socket path must be absolute: unix:///path/to/redis.sock";
	if (q) {
		if (strncmp(q + 1, "db=", 3) != 0)
			return "the only parameter of a unix:// url is db=N";
		if (parse_db(q + 4, strlen(q + 4), &t->db) < 0 || !q[4])
			return "the url's db parameter is not a number";
	}
	t->path = xstrndup(rest, (size_t)(pend - rest));
	t->port = 0;
	t->display = xasprintf("unix://%s?db=%d", t->path, t->db);
	return NULL;
}

static void redis_parsed_free(struct redis_conf *rc)
{
	free(rc->host);
	free(rc->path);
	free(rc->user);
	if (rc->password)
		explicit_bzero(rc->password, strlen(rc->password));
	free(rc->password);
	free(rc->display);
	rc->host = rc->path = rc->user = rc->password = rc->display = NULL;
	rc->port = rc->db = 0;
}

void redis_conf_clear(struct redis_conf *rc)
{
	redis_parsed_free(rc);
	free(rc->url);
	free(rc->password_file);
	memset(rc, 0, sizeof *rc);
}

int redis_url_parse(const char *url, struct redis_conf *rc, char *err, size_t errlen)
{
	struct redis_conf t = { 0 };
	const char *why;

	if (!url || !*url)
		why = "the redis url is empty";
	else if (strncasecmp(url, "redis://", 8) == 0)
		why = parse_tcp_url(url + 8, &t);
	else if (strncasecmp(url, "unix://", 7) == 0)
		why = parse_unix_url(url + 7, &t);
	else if (strncasecmp(url, "rediss://", 9) == 0)
		why = "TLS is not supported by hiredis 0.14 (use redis:// or unix://)";
	else
		why = "unsupported url scheme (use redis://host:port/db or unix:///path?db=N)";
	if (why) {
		redis_parsed_free(&t);
		if (err && errlen)
			snprintf(err, errlen, "invalid redis url: %s", why);
		return -1;
	}
	redis_parsed_free(rc);
	rc->host = t.host;
	rc->port = t.port;
	rc->path = t.path;
	rc->db = t.db;
	rc->user = t.user;
	rc->password = t.password;
	rc->display = t.display;
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
		if (apply_group(&L, L.root, top_specs, sizeof top_specs / sizeof *top_specs, "",
		                &c) < 0)
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
		handler_free(&c->handlers[i]);
	free(c->handlers);
	for (int i = 0; i < c->nperiodic; i++)
		periodic_free(&c->periodic[i]);
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
