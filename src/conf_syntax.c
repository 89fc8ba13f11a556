/* SPDX-License-Identifier: MIT */
/*
 * conf_syntax.c: what a conf syntax error says. libconfig 1.5 reports only "syntax error"
 * and the line where its parser gave up, which is often lines after the mistake: a string
 * with no closing quote runs on (a libconfig string may span lines) until the next quote
 * or the end of the file, and a bracket never closed is noticed only where the next
 * setting cannot be. So the file is scanned once more, with libconfig's lexical rules
 * (strings with backslash escapes; comments #, // and C-style; @include lines), for the
 * likely start: the first string that runs past the end of its line, else the first
 * bracket closed by the wrong one or never closed, else a closer with nothing open. The
 * error then names that line and says what libconfig saw: the line it stopped at, or the
 * end of the file. When the scan finds nothing, libconfig's line stands.
 *
 * Only ever called after libconfig refused the file, so a string that spans lines on
 * purpose is never blamed in a file that loads.
 */
#include <stdio.h>
#include <string.h>

#include "config_int.h"

#define MAX_DEPTH 64            /* brackets tracked; deeper than any conf goes */
#define SHOWN 40                /* characters of a line quoted in the message */

struct suspect {
	unsigned line;              /* 0: none found */
	char what[200];
};

struct opener {
	char c;
	unsigned line;
};

static char closer_of(char c)
{
	return c == '{' ? '}' : c == '(' ? ')' : ']';
}

/* Line n (1-based) of text, cut to SHOWN characters, control bytes as spaces. */
static void quote_line(const char *text, unsigned n, char *out, size_t size)
{
	const char *p = text;
	for (unsigned i = 1; i < n && p; i++) {
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	if (!p || !*p) {
		snprintf(out, size, "the end of the file");
		return;
	}
	p += strspn(p, " \t");
	size_t len = strcspn(p, "\n");
	snprintf(out, size, "'%.*s%s'", (int)(len > SHOWN ? SHOWN : len), p,
	         len > SHOWN ? "..." : "");
}

/* The scan; fills s when it finds a likely start. */
static void scan(const char *t, struct suspect *s)
{
	struct opener open[MAX_DEPTH];
	int depth = 0;
	unsigned line = 1;
	struct suspect stray = { 0 };
	for (const char *p = t; *p; p++) {
		if (*p == '\n') {
			line++;
		} else if (*p == '#' || (p[0] == '/' && p[1] == '/') ||
		           (*p == '@' && (p == t || p[-1] == '\n'))) {
			while (p[1] && p[1] != '\n')
				p++;
		} else if (p[0] == '/' && p[1] == '*') {
			for (p += 2; *p && !(p[0] == '*' && p[1] == '/'); p++)
				line += *p == '\n';
			if (!*p)
				return;
			p++;
		} else if (*p == '"') {
			unsigned from = line;
			const char *q = p + 1;
			for (; *q && *q != '"' && *q != '\n'; q++)
				if (*q == '\\' && q[1] && q[1] != '\n')
					q++;
			if (*q != '"') {
				s->line = from;
				snprintf(s->what, sizeof s->what, "the string that starts here (%.*s) "
				         "runs past the end of its line: a missing closing \"?",
				         (int)(q - p > 24 ? 24 : q - p), p);
				return;
			}
			p = q;
		} else if (*p == '{' || *p == '(' || *p == '[') {
			if (depth < MAX_DEPTH)
				open[depth] = (struct opener){ *p, line };
			depth++;
		} else if (*p == '}' || *p == ')' || *p == ']') {
			if (depth == 0) {
				if (!stray.line) {
					stray.line = line;
					snprintf(stray.what, sizeof stray.what,
					         "this '%c' closes nothing that is open", *p);
				}
				continue;
			}
			depth--;
			if (depth < MAX_DEPTH && closer_of(open[depth].c) != *p) {
				s->line = open[depth].line;
				snprintf(s->what, sizeof s->what, "the '%c' opened here is closed by a '%c' "
				         "on line %u (a '%c' is missing or one too many)", open[depth].c,
				         *p, line, closer_of(open[depth].c));
				return;
			}
		}
	}
	if (depth > 0 && depth <= MAX_DEPTH) {
		s->line = open[depth - 1].line;
		snprintf(s->what, sizeof s->what, "the '%c' opened here is never closed",
		         open[depth - 1].c);
		return;
	}
	*s = stray;
}

/* libconfig blames the including file for a mistake in an @included one: scan those too
 * (relative to the conf's directory, as libconfig resolves them). The first file with a
 * suspect, into *where (malloc'd); 0 when none has one. */
static int scan_includes(const struct loader *L, const char *text, struct suspect *s,
                         char **where)
{
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		char name[1024];
		if (sscanf(p, " @include \"%1023[^\"]\"", name) != 1)
			continue;
		char *path = name[0] == '/' || !L->dir ? xstrdup(name)
		                                         : xasprintf("%s/%s", L->dir, name);
		size_t len;
		char *inc = file_text(path, &len);
		if (inc)
			scan(inc, s);
		free(inc);
		if (s->line) {
			*where = path;
			return 1;
		}
		free(path);
	}
	return 0;
}

void syntax_error(struct loader *L, const char *file, unsigned line, const char *said)
{
	size_t len;
	char *text = file_text(file, &len);
	struct suspect s = { 0 };
	char saw[SHOWN + 32] = "", msg[1024];
	char *inc = NULL;
	if (text) {
		scan(text, &s);
		quote_line(text, line, saw, sizeof saw);
		if (!s.line)
			scan_includes(L, text, &s, &inc);
	}
	free(text);
	if (inc)
		snprintf(msg, sizeof msg, "%s: %s (libconfig stopped at %s:%u, at %s)", said, s.what,
		         file, line, saw);
	else if (s.line && s.line != line)
		snprintf(msg, sizeof msg, "%s: %s (libconfig stopped at line %u, at %s)", said,
		         s.what, line, saw);
	else if (s.line)
		snprintf(msg, sizeof msg, "%s: %s", said, s.what);
	else if (saw[0])
		snprintf(msg, sizeof msg, "%s (libconfig stopped here, at %s; the mistake is there "
		         "or just before)", said, saw);
	else
		snprintf(msg, sizeof msg, "%s", said);
	put_err(L, inc ? inc : file, s.line ? s.line : line, msg);
	free(inc);
}
