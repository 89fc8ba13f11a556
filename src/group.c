/* SPDX-License-Identifier: MIT */
/*
 * group.c: a job's group for fair share (doc/protocol.md §7.35).
 *
 * The value is read from the job's text as pushed (json.h's spans), never from a cJSON tree:
 * the daemon reads only some members into one (job.h), and the group must be what a reader
 * of the text sees, the last occurrence of a repeated key as Ruby reads it.
 *
 * What is a group. A string (its decoded text) or an integer (its digits as written), so
 * that a tenant id pushed as 42 and as "42" are one group. Anything else is no group and
 * the job goes to the group "" with the jobs that have no value at all: an object, an
 * array, a float, true/false, a string holding NUL, a value over GROUP_MAX_LEN bytes. Why
 * not bury those: group_by is the operator's setting, not the producer's contract; a job
 * that ran yesterday must not die today because a setting was added, and a payload that
 * runs fine must not be lost over a key to count it under. Why not a group of its own per
 * odd value: a 1 MB string would become a 1 MB Redis key name, and floats or objects have
 * no one spelling. In "" the job is still under a group's limits (those of "", shared), so
 * it escapes no limit, and the log line says why it is there.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include "group.h"
#include "json.h"
#include "util.h"

#define STR_(x) #x
#define STR(x) STR_(x)
#define TOO_LONG "longer than " STR(GROUP_MAX_LEN) " bytes"

static int key_char(char c)
{
	return c != '.' && c != '[' && c != ']' && c != '"' && c != '\'' &&
	       !isspace((unsigned char)c) && c != '\0';
}

int group_path_parse(const char *s, struct group_path *p, const char **err)
{
	memset(p, 0, sizeof *p);
	const char *q = s;
	int first = 1;
	while (*q || first) {
		if (p->nsteps == GROUP_MAX_STEPS) {
			*err = "too many steps (at most " STR(GROUP_MAX_STEPS) ")";
			goto fail;
		}
		struct group_step *st = &p->steps[p->nsteps];
		if (*q == '[' && !first) {
			q++;
			if (!isdigit((unsigned char)*q)) {
				*err = "'[' must be followed by an index (digits) and ']'";
				goto fail;
			}
			char *end;
			long v = strtol(q, &end, 10);
			if (*end != ']' || v < 0 || end - q > 9) {
				*err = "'[' must be followed by an index (digits) and ']'";
				goto fail;
			}
			st->index = v;
			q = end + 1;
		} else {
			if (!first) {
				if (*q != '.') {
					*err = "expected '.key' or '[N]'";
					goto fail;
				}
				q++;
			}
			const char *b = q;
			while (key_char(*q))
				q++;
			if (q == b) {
				*err = first ? "must start with a key (tenant, args[0], args[0].account_id)"
				             : "a '.' must be followed by a key";
				goto fail;
			}
			st->key = xstrndup(b, (size_t)(q - b));
		}
		p->nsteps++;
		first = 0;
	}
	return 0;
fail:
	group_path_free(p);
	return -1;
}

void group_path_free(struct group_path *p)
{
	for (int i = 0; i < p->nsteps; i++)
		free(p->steps[i].key);
	memset(p, 0, sizeof *p);
}

/* The value span one step down from [*start, *start + *len), or -1. */
static int step(const char *raw, const struct group_step *st, size_t *start, size_t *len)
{
	size_t s, l;
	if (st->key) {
		if (json_member_span(raw + *start, *len, st->key, &s, &l) != 0)
			return -1;
	} else {
		size_t *ss, *ls;
		int n = json_array_spans(raw + *start, *len, &ss, &ls);
		int ok = n > st->index;
		if (ok) {
			s = ss[st->index];
			l = ls[st->index];
		}
		free(ss);
		free(ls);
		if (!ok)
			return -1;
	}
	*start += s;
	*len = l;
	return 0;
}

static int is_integer(const char *v, size_t n)
{
	size_t i = v[0] == '-' ? 1 : 0;
	if (i == n)
		return 0;
	for (; i < n; i++)
		if (!isdigit((unsigned char)v[i]))
			return 0;
	return 1;
}

enum group_found group_of(const char *raw, size_t len, const struct group_path *p,
                          char **out, const char **why)
{
	*out = NULL;
	*why = NULL;
	size_t start = 0, n = len;
	for (int i = 0; i < p->nsteps; i++)
		if (step(raw, &p->steps[i], &start, &n) != 0) {
			*out = xstrdup("");
			return GROUP_ABSENT;
		}
	const char *v = raw + start;
	if (n == 4 && memcmp(v, "null", 4) == 0) {
		*out = xstrdup("");
		return GROUP_ABSENT;
	}
	if (n > 0 && v[0] == '"') {
		size_t dn;
		char *d = json_string_decode(v, n, &dn);
		if (d && strlen(d) == dn && dn <= GROUP_MAX_LEN) {
			*out = d;
			return GROUP_FOUND;
		}
		*why = !d ? "not a string" : strlen(d) != dn ? "a string holding NUL"
		                                            : TOO_LONG;
		free(d);
	} else if (is_integer(v, n)) {
		if (n <= GROUP_MAX_LEN) {
			*out = xstrndup(v, n);
			return GROUP_FOUND;
		}
		*why = TOO_LONG;
	} else {
		*why = v[0] == '{' ? "an object" : v[0] == '[' ? "an array"
		     : (v[0] == 't' || v[0] == 'f') ? "a boolean" : "a number that is not an integer";
	}
	*out = xstrdup("");
	return GROUP_INVALID;
}
