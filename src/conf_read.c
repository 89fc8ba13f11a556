/* SPDX-License-Identifier: MIT */
/*
 * conf_read.c: the bottom of the conf code: errors at a file and line, typed reads of one
 * libconfig setting, and the walk of a group against a table of settings (apply_group: a
 * row says a setting's kind, bounds and place in the struct). The loader (config.c) and the
 * settings (conf_settings.c, conf_handler.c) all stand on it, so none needs another's
 * internals to report an error or read a table.
 *
 * libconfig pitfalls handled here (doc/design.md "Pitfalls of our dependencies"):
 * - an integer above 2^31-1 written without the L suffix is stored wrapped, without a word
 *   (5000000000 reads as 705032704): integer settings are compared with their source text;
 * - settings read from an @included file report that file's name as written in the
 *   @include line, so messages join it with the include directory.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libconfig.h>

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

void put_err(struct loader *L, const char *loc, unsigned line, const char *msg)
{
	if (!L->err || !L->errlen)
		return;
	if (loc && line)
		snprintf(L->err, L->errlen, "%s:%u: %s", loc, line, msg);
	else if (loc)
		snprintf(L->err, L->errlen, "%s: %s", loc, msg);
	else
		snprintf(L->err, L->errlen, "%s", msg);
	/* One error, one line: a value quoted in it (a queue name with a line break, found by
	 * tests/fuzz/fuzz_conf) must not break the line --check and the log print. */
	for (char *p = L->err; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
}

/* "<file>:<line>: <msg>" for setting s (or "<file>: <msg>" without one). Returns -1. */
__attribute__((format(printf, 3, 4)))
int failf(struct loader *L, const config_setting_t *s, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (s) {
		char fbuf[PATH_MAX];
		put_err(L, setting_file(L, s, fbuf, sizeof fbuf), config_setting_source_line(s), msg);
	} else
		put_err(L, L->path, 0, msg);
	return -1;
}

char *setting_where(const struct loader *L, const config_setting_t *s)
{
	char fbuf[PATH_MAX];
	return xasprintf("%s:%u", setting_file(L, s, fbuf, sizeof fbuf),
	                 config_setting_source_line(s));
}

/* An error with no place in the file (command line, environment). Returns -1. */
int fail_plain(struct loader *L, const char *fmt, ...)
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
config_setting_t *blame(const struct loader *L, const char *a, const char *b)
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
 * comments) found at or after from, or NULL. */
static const char *value_text(const char *line, const char *from, const char *name)
{
	size_t nl = strlen(name);

	for (const char *p = from; *p; p++) {
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

/* 1 if the text at v reads as the int libconfig kept, -1 if it is a number beyond 32
 * bits, 0 otherwise (text that is no number is not ours to judge: 1). libconfig reads
 * decimal and 0x hex; a leading 0 is not octal to it. */
static int int_text_agrees(const char *v, int kept, const char **end)
{
	char *e;
	errno = 0;
	long long x = strtoll(v, &e, (v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) ? 16 : 10);
	*end = e;
	if (e == v || (errno == 0 && x == (long long)kept))
		return 1;
	return errno == ERANGE || x > INT_MAX || x < INT_MIN ? -1 : 0;
}

/*
 * libconfig 1.5 keeps an integer written without the L suffix in an int, wrapping what
 * does not fit (3000000000 reads as -1294967296, 8589934592 as 0). The text is still in
 * the file: read the setting's line back and compare. A line may hold the name more than
 * once (two handlers on one line): the setting is fine when one of them reads as kept,
 * and wrapped when none does and one of them is beyond 32 bits.
 */
static int check_int_wrap(struct loader *L, const config_setting_t *s, const char *name)
{
	char fbuf[PATH_MAX], line[4096];
	const char *v, *file, *end, *bad = NULL, *bad_end = NULL;

	if (config_setting_type(s) != CONFIG_TYPE_INT || !config_setting_name(s))
		return 0;
	file = setting_file(L, s, fbuf, sizeof fbuf);
	if (read_source_line(file, config_setting_source_line(s), line, sizeof line) < 0)
		return 0;
	for (v = value_text(line, line, config_setting_name(s)); v;
	     v = value_text(line, end, config_setting_name(s))) {
		int agrees = int_text_agrees(v, config_setting_get_int(s), &end);
		if (agrees > 0)
			return 0;
		if (agrees < 0 && !bad) {
			bad = v;
			bad_end = end;
		}
	}
	if (!bad)
		return 0;
	return failf(L, s, "%s = %.*s does not fit in 32 bits: libconfig needs the L suffix "
	             "(%.*sL) for integers above 2147483647", name, (int)(bad_end - bad), bad,
	             (int)(bad_end - bad), bad);
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
	char fbuf[PATH_MAX];

	if (t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST)
		return failf(L, s, "%s must be an array of strings, e.g. [ \"a\", \"b\" ]", name);
	argv_free(out);
	argv_ensure(out);
	out->at = xasprintf("%s:%u", setting_file(L, s, fbuf, sizeof fbuf),
	                    config_setting_source_line(s));
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
 * A group against a table of settings (struct spec in config_int.h)
 * ------------------------------------------------------------------------------------- */

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

int apply_group(struct loader *L, const config_setting_t *grp, const struct spec *tab,
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
