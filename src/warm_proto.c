/* SPDX-License-Identifier: MIT */
/*
 * warm_proto.c: the warm protocol's messages as text (doc/protocol.md §1.2).
 *
 * A warm process is code we do not control that talks to the daemon for as long as it
 * lives, so what it sends is read like any other untrusted input: the whole line must be
 * one well-formed JSON object (json_valid, our own scanner: cJSON would accept trailing
 * garbage and parses under a global lock), its members are located on the original text
 * (json_member_spans) and each value is checked for its type. Anything that does not fit
 * is refused with a reason that the daemon logs when it replaces the process: a broken
 * process is told apart from a broken daemon by that line.
 *
 * The job message is the job's JSON spliced in as it came from Redis, so numbers past 2^53
 * and the spelling of every string reach the handler exactly as pushed (cJSON would
 * re-encode them, doc/design.md "Pitfalls"); only newlines, necessarily whitespace, are
 * turned into spaces so that one message stays one line.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "util.h"
#include "warm_proto.h"

enum { M_TYPE, M_EXIT, M_ERROR, M_RECYCLE, M_PCT, M_MESSAGE, M_JID, M__N };
static const char *const member_names[M__N] = {
	"type", "exit", "error", "recycle", "pct", "message", "jid",
};

static int refuse(char *why, size_t n, const char *reason)
{
	snprintf(why, n, "%s", reason);
	return -1;
}

/* A JSON number's text: an integer in [lo, hi] (no fraction, no exponent). */
static int span_integer(const char *s, size_t n, long lo, long hi, int *out)
{
	char buf[24];
	char *end;

	if (n == 0 || n >= sizeof buf)
		return -1;
	memcpy(buf, s, n);
	buf[n] = '\0';
	long v = strtol(buf, &end, 10);
	if (*end || v < lo || v > hi)
		return -1;
	*out = (int)v;
	return 0;
}

/* A "pct" is kept as written and goes to status:<jid> as it is: no longer than this (a
 * double needs 24 characters), where a hostile line could have put a megabyte. */
#define WARM_PCT_MAX 64

/* A JSON number's text as written, if it is a finite number. */
static char *span_number(const char *s, size_t n)
{
	char *text = xstrndup(s, n);
	char *end;
	double d = strtod(text, &end);

	if (end == text || *end || !isfinite(d) || (s[0] != '-' && (s[0] < '0' || s[0] > '9'))) {
		free(text);
		return NULL;
	}
	return text;
}

static int is_literal(const char *s, size_t n, const char *lit)
{
	return n == strlen(lit) && memcmp(s, lit, n) == 0;
}

static int read_done(const char *line, const size_t *st, const size_t *ln, struct warm_msg *m,
                     char *why, size_t whylen)
{
	if (!ln[M_EXIT] || span_integer(line + st[M_EXIT], ln[M_EXIT], 0, 255, &m->exit) < 0)
		return refuse(why, whylen, "\"done\" needs \"exit\", an integer from 0 to 255");
	if (ln[M_RECYCLE]) {
		if (is_literal(line + st[M_RECYCLE], ln[M_RECYCLE], "true"))
			m->recycle = 1;
		else if (!is_literal(line + st[M_RECYCLE], ln[M_RECYCLE], "false"))
			return refuse(why, whylen, "\"recycle\" must be true or false");
	}
	if (ln[M_ERROR] && !is_literal(line + st[M_ERROR], ln[M_ERROR], "null")) {
		m->error = json_string_decode(line + st[M_ERROR], ln[M_ERROR], &m->error_len);
		if (!m->error)
			return refuse(why, whylen, "\"error\" must be a string");
	}
	if (ln[M_JID]) {
		size_t n;
		m->jid = json_string_decode(line + st[M_JID], ln[M_JID], &n);
		if (!m->jid || strlen(m->jid) != n)
			return refuse(why, whylen, "\"jid\" must be a string");
	}
	return 0;
}

static int read_progress(const char *line, const size_t *st, const size_t *ln,
                         struct warm_msg *m, char *why, size_t whylen)
{
	if (ln[M_PCT] > WARM_PCT_MAX) {
		snprintf(why, whylen, "\"pct\" is a number of at most %d characters", WARM_PCT_MAX);
		return -1;
	}
	if (!ln[M_PCT] || !(m->pct = span_number(line + st[M_PCT], ln[M_PCT])))
		return refuse(why, whylen, "\"progress\" needs \"pct\", a number");
	if (ln[M_MESSAGE] && !is_literal(line + st[M_MESSAGE], ln[M_MESSAGE], "null")) {
		size_t n;
		m->message = json_string_decode(line + st[M_MESSAGE], ln[M_MESSAGE], &n);
		if (!m->message)
			return refuse(why, whylen, "\"message\" must be a string");
	}
	return 0;
}

int warm_msg_parse(const char *line, size_t len, struct warm_msg *m, char *why, size_t whylen)
{
	size_t st[M__N], ln[M__N];
	char *type;
	size_t tlen;
	int rc;

	memset(m, 0, sizeof *m);
	if (!json_valid(line, len) ||
	    json_member_spans(line, len, member_names, M__N, st, ln) < 0)
		return refuse(why, whylen, "not a JSON object");
	if (!ln[M_TYPE] || !(type = json_string_decode(line + st[M_TYPE], ln[M_TYPE], &tlen)))
		return refuse(why, whylen, "no \"type\" string");
	if (strcmp(type, "ready") == 0 && tlen == 5) {
		m->type = WARM_MSG_READY;
		rc = 0;
	} else if (strcmp(type, "done") == 0 && tlen == 4) {
		m->type = WARM_MSG_DONE;
		rc = read_done(line, st, ln, m, why, whylen);
	} else if (strcmp(type, "progress") == 0 && tlen == 8) {
		m->type = WARM_MSG_PROGRESS;
		rc = read_progress(line, st, ln, m, why, whylen);
	} else {
		char *shown = json_quote(type, tlen > 40 ? 40 : tlen);
		snprintf(why, whylen, "unknown type %s", shown);
		free(shown);
		rc = -1;
	}
	free(type);
	if (rc < 0)
		warm_msg_free(m);
	return rc;
}

void warm_msg_free(struct warm_msg *m)
{
	free(m->error);
	free(m->jid);
	free(m->pct);
	free(m->message);
	memset(m, 0, sizeof *m);
}

char *warm_job_message(const char *raw, size_t rawlen, double deadline, size_t *len)
{
	static const char head[] = "{\"type\":\"job\",\"job\":";
	char tail[64];
	int tn = deadline > 0 ? snprintf(tail, sizeof tail, ",\"deadline\":%.3f}\n", deadline)
	                      : snprintf(tail, sizeof tail, ",\"deadline\":null}\n");
	size_t hn = sizeof head - 1;
	char *s = xmalloc(hn + rawlen + (size_t)tn + 1);

	memcpy(s, head, hn);
	memcpy(s + hn, raw, rawlen);
	for (char *p = s + hn, *end = s + hn + rawlen; (p = memchr(p, '\n', (size_t)(end - p)));)
		*p++ = ' ';
	memcpy(s + hn + rawlen, tail, (size_t)tn + 1);
	*len = hn + rawlen + (size_t)tn;
	return s;
}
