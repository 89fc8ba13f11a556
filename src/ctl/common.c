/* SPDX-License-Identifier: MIT */
/*
 * common.c: helpers every cogworkerctl command uses: errors and the connection, common
 * options, time formatting, JSON output and human tables. They live below the commands,
 * not in ctl.c, which dispatches to the commands and so sits above them.
 *
 * A command's two outputs, its --json document (jprint) and its error lines (ctl_error),
 * go to stdout and stderr, or, in a thread that set a capture (ctl_capture_begin), into
 * that capture's buffers: `cogworkerctl web` runs the very commands behind its JSON API
 * that way, one request per thread, and answers with what they would have printed.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "ctl.h"
#include "json.h"
#include "timearg.h"

static __thread struct ctl_capture *capture;

void ctl_capture_begin(struct ctl_capture *cap)
{
	sb_init(&cap->out);
	sb_init(&cap->err);
	cap->documents = 0;
	capture = cap;
}

void ctl_capture_end(const struct ctl_capture *cap)
{
	if (capture == cap)
		capture = NULL;
}

void ctl_capture_free(struct ctl_capture *cap)
{
	ctl_capture_end(cap);
	sb_free(&cap->out);
	sb_free(&cap->err);
}

void ctl_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (capture) {
		/* One message per line, without the program's name: the caller frames it. */
		char line[2048];
		vsnprintf(line, sizeof line, fmt, ap);
		if (capture->err.len)
			sb_addc(&capture->err, '\n');
		sb_adds(&capture->err, line);
	} else {
		fputs("cogworkerctl: ", stderr);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
	}
	va_end(ap);
}

int ctl_connect(struct ctl *c)
{
	if (c->notice) {
		ctl_error("%s", c->notice);
		free(c->notice);
		c->notice = NULL;
	}
	const struct redis_tls *t = &c->conf.redis.tls;
	if (t->ctx && !t->verify)
		ctl_error("warning: %s: redis.tls.verify = false: the server's certificate is not "
		          "checked", t->verify_where);
	if (rconn_connect(&c->r, 1) != 0) {
		if (c->origin)
			ctl_error("%s (Redis from %s)", c->r.err, c->origin);
		else
			ctl_error("%s", c->r.err);
		return -1;
	}
	return 0;
}

int ctl_redis_error(struct ctl *c, const char *what)
{
	ctl_error("%s: %s", what, c->r.err[0] ? c->r.err : "Redis error");
	return CTL_USAGE;
}

int ctl_redis_error_family(struct ctl *c, const char *prefix)
{
	char *what = xstrndup(prefix, strlen(prefix) - 1);
	int rc = ctl_redis_error(c, what);
	free(what);
	return rc;
}

int ctl_common_opt(struct ctl *c, int ch, char **argv)
{
	if (ch == CTL_OPT_JSON) {
		c->json = 1;
		return 1;
	}
	if (ch == CTL_OPT_YES) {
		c->yes = 1;
		return 1;
	}
	if (ch == CTL_OPT_HELP && c->help) {
		c->help(argv[0]);
		fflush(stdout);
		exit(CTL_OK);
	}
	const char *bad = optind > 0 ? argv[optind - 1] : "?";
	if (optopt && ch == '?' && bad[0] == '-' && bad[1] != '-')
		ctl_error("%s: unknown option -%c (or missing argument)", argv[0], optopt);
	else
		ctl_error("%s: unknown option or missing argument: %s", argv[0], bad);
	return 0;
}

void ctl_getopt_reset(void)
{
	optind = 0;         /* glibc: 0 reinitialises getopt's internal state */
	opterr = 0;         /* one line of our own instead of getopt's */
}

int ctl_only_common_opts(struct ctl *c, int argc, char **argv, int max_args)
{
	static const struct option opts[] = { CTL_COMMON_OPTS, { 0, 0, 0, 0 } };
	int ch;
	ctl_getopt_reset();
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1)
		if (!ctl_common_opt(c, ch, argv))
			return -1;
	if (argc - optind > max_args) {
		ctl_error("%s: unexpected \"%s\"", argv[0], argv[optind + max_args]);
		return -1;
	}
	return argc - optind;
}

int ctl_toggle_member(struct ctl *c, const char *set, const char *member, int add,
                      const char *key, const char *flag, int flag_value,
                      const char *unchanged, const char *done)
{
	redisReply *rep = rcmd(&c->r, add ? "SADD %s %s" : "SREM %s %s", set, member);
	if (!rep)
		return ctl_redis_error(c, set);
	long long changed = reply_integer(rep, 0);
	freeReplyObject(rep);
	if (c->json) {
		struct sbuf b;
		sb_init(&b);
		sb_printf(&b, "{\"%s\":", key);
		jstr(&b, member);
		sb_printf(&b, ",\"%s\":%s,\"changed\":%s}", flag, flag_value ? "true" : "false",
		          changed ? "true" : "false");
		jprint(&b);
	}
	if (!changed) {
		ctl_error("%s", unchanged);
		return CTL_NOTHING;
	}
	if (!c->json)
		printf("%s\n", done);
	return CTL_OK;
}

double ctl_now(struct ctl *c)
{
	return redis_time(&c->r);
}

void ctl_iso_time(double t, char out[32])
{
	time_t s = (time_t)floor(t);
	struct tm tm;
	if (!gmtime_r(&s, &tm)) {
		snprintf(out, 32, "?");
		return;
	}
	strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void ctl_duration(double secs, char *out, size_t n)
{
	human_duration(secs, 2, out, n);
}

void ctl_relative(double t, double now, char *out, size_t n)
{
	char d[32];
	human_duration(t - now, 0, d, sizeof d);
	if (t > now + 0.5)
		snprintf(out, n, "in %s", d);
	else
		snprintf(out, n, "%s ago", d);
}

int ctl_utf8_ok(const char *what, const char *s, size_t len)
{
	long at = utf8_invalid_at(s, len);
	if (at < 0)
		return 1;
	ctl_error("%s is not UTF-8: byte %ld is \\x%02X (a job's JSON takes UTF-8 only)", what,
	          at + 1, (unsigned char)s[at]);
	return 0;
}

int ctl_job_strings_ok(const char *cmd, const char *cls, const char *queue, const char *jid,
                       int nargs, char **args)
{
	char what[64];
	snprintf(what, sizeof what, "%s: CLASS", cmd);
	if (!ctl_utf8_ok(what, cls, strlen(cls)))
		return 0;
	snprintf(what, sizeof what, "%s: --queue", cmd);
	if (queue && !ctl_utf8_ok(what, queue, strlen(queue)))
		return 0;
	snprintf(what, sizeof what, "%s: --jid", cmd);
	if (jid && !ctl_utf8_ok(what, jid, strlen(jid)))
		return 0;
	for (int i = 0; i < nargs; i++) {
		snprintf(what, sizeof what, "%s: ARG %d", cmd, i + 1);
		if (!ctl_utf8_ok(what, args[i], strlen(args[i])))
			return 0;
	}
	return 1;
}

int ctl_args_json_ok(const char *what, const char *json)
{
	size_t len = strlen(json), *starts = NULL, *lens = NULL;
	if (!ctl_utf8_ok(what, json, len))
		return 0;
	int n = json_array_spans(json, len, &starts, &lens);
	free(starts);
	free(lens);
	if (n >= 0)
		return 1;
	long at = json_invalid_at(json, len);
	char *shown = ctl_oneline(json, len, 60);
	if (at < 0) {
		const char *p = json + strspn(json, " \t\r\n");
		const char *kind = *p == '{' ? "an object" : *p == '"' ? "a string"
		                 : *p == 't' || *p == 'f' ? "a boolean" : *p == 'n' ? "null"
		                 : "a number";
		ctl_error("%s must be a JSON array of args, not %s: %s", what, kind, shown);
	} else if (json[strspn(json, " \t\r\n")] == '\0') {
		ctl_error("%s is empty: give a JSON array of args ('[]' for none)", what);
	} else if ((size_t)at >= len) {
		ctl_error("%s is not valid JSON: it ends too soon (%s)", what, shown);
	} else {
		unsigned char b = (unsigned char)json[at];
		char byte[8];
		snprintf(byte, sizeof byte, b > 0x20 && b < 0x7f ? "'%c'" : "\\x%02X", b);
		ctl_error("%s is not valid JSON: %s at byte %ld (%s)", what, byte, at + 1, shown);
	}
	free(shown);
	return 0;
}

int ctl_duration_arg(const char *what, const char *s, const char *if_zero, double *secs)
{
	char why[512];
	if (timearg_duration(s, secs, why, sizeof why) != 0) {
		ctl_error("%s: %s", what, why);
		return -1;
	}
	if (if_zero && *secs == 0) {
		ctl_error("%s: \"%s\" %s; give a duration above 0", what, s, if_zero);
		return -1;
	}
	return 0;
}

int ctl_time_arg(const char *what, const char *s, double now, int dir, double *t)
{
	char why[512];
	int r = timearg_moment(s, now, dir, t, why, sizeof why);
	if (r < 0)
		ctl_error("%s: %s", what, why);
	return r;
}

/* ---- JSON output ---- */

void jstr(struct sbuf *b, const char *s)
{
	if (!s) {
		sb_adds(b, "null");
		return;
	}
	jstrn(b, s, strlen(s));
}

void jstrn(struct sbuf *b, const char *s, size_t len)
{
	char *q = json_quote(s, len);
	sb_adds(b, q);
	free(q);
}

void jnum(struct sbuf *b, double d)
{
	if (!isfinite(d)) {
		sb_adds(b, "null");
		return;
	}
	if (d == floor(d) && fabs(d) < 1e15) {
		sb_printf(b, "%.0f", d);
		return;
	}
	char t[64];
	snprintf(t, sizeof t, "%.6f", d);
	size_t n = strlen(t);
	while (n > 1 && t[n - 1] == '0')
		t[--n] = '\0';
	if (t[n - 1] == '.')
		t[n++] = '0', t[n] = '\0';
	sb_adds(b, t);
}

void jbool(struct sbuf *b, int v)
{
	sb_adds(b, v ? "true" : "false");
}

void jprint(struct sbuf *b)
{
	if (capture) {
		/* A command prints one document; a second one would be a bug the API must not
		 * pass on as half of an array. */
		if (capture->documents++ == 0)
			sb_add(&capture->out, b->s, b->len);
	} else {
		fwrite(b->s, 1, b->len, stdout);
		fputc('\n', stdout);
	}
	sb_free(b);
}

/* ---- text ---- */

static size_t utf8_chars(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		n += ((unsigned char)*s & 0xC0) != 0x80;
	return n;
}

/* Cut s to max characters (the last one "…" when cut); s must be valid UTF-8. */
static char *cut(const char *s, size_t max)
{
	if (max == 0 || utf8_chars(s) <= max)
		return xstrdup(s);
	size_t chars = 0, i = 0;
	for (; s[i]; i++) {
		if (((unsigned char)s[i] & 0xC0) != 0x80) {
			if (chars == max - 1)
				break;
			chars++;
		}
	}
	char *out = xmalloc(i + 4);
	memcpy(out, s, i);
	memcpy(out + i, "\xe2\x80\xa6", 4);
	return out;
}

char *ctl_oneline(const char *s, size_t len, size_t max)
{
	char *t = utf8_scrub(s, len, 0);
	for (char *p = t; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = ' ';
	char *out = cut(t, max);
	free(t);
	return out;
}

/* ---- tables ---- */

void table_init(struct table *t, int ncols, const char **heads, const int *limits)
{
	memset(t, 0, sizeof *t);
	t->ncols = ncols;
	t->heads = heads;
	t->limits = limits;
}

void table_add(struct table *t, const char *const *row)
{
	if (t->nrows == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 16;
		t->cells = xrealloc(t->cells, sizeof(char *) * (size_t)t->cap * (size_t)t->ncols);
	}
	for (int i = 0; i < t->ncols; i++) {
		const char *s = row[i] ? row[i] : "";
		t->cells[t->nrows * t->ncols + i] =
			ctl_oneline(s, strlen(s), t->limits ? (size_t)t->limits[i] : 0);
	}
	t->nrows++;
}

void table_print(struct table *t)
{
	size_t *w = xcalloc((size_t)t->ncols, sizeof *w);
	for (int i = 0; i < t->ncols; i++)
		w[i] = utf8_chars(t->heads[i]);
	for (int r = 0; r < t->nrows; r++)
		for (int i = 0; i < t->ncols; i++) {
			size_t n = utf8_chars(t->cells[r * t->ncols + i]);
			if (n > w[i])
				w[i] = n;
		}
	for (int r = -1; r < t->nrows; r++) {
		for (int i = 0; i < t->ncols; i++) {
			const char *s = r < 0 ? t->heads[i] : t->cells[r * t->ncols + i];
			fputs(s, stdout);
			if (i < t->ncols - 1)
				for (size_t k = utf8_chars(s); k < w[i] + 2; k++)
					fputc(' ', stdout);
		}
		fputc('\n', stdout);
	}
	free(w);
}

void table_free(struct table *t)
{
	for (int i = 0; i < t->nrows * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	memset(t, 0, sizeof *t);
}

void ctl_print_fired(struct ctl *c, const redisReply *rep, size_t first)
{
	if (c->json || !rep || rep->type != REDIS_REPLY_ARRAY)
		return;
	for (size_t i = first; i < rep->elements; i++)
		if (rep->element[i]->type == REDIS_REPLY_STRING)
			printf("fired: %s\n", rep->element[i]->str);
}
