/* SPDX-License-Identifier: MIT */
/*
 * job.c: reading a job and building the entries the daemon files for it.
 *
 * Two rules shape this file (doc/protocol.md §4.5):
 *
 * - A job's JSON is never re-encoded. cJSON is used to *read* fields; every entry the
 *   daemon writes (a retry or dead entry, a re-stamped graduation) is the original text
 *   with members spliced in by json_edit_object, so `args` with integers beyond 2^53 or
 *   float spellings like 1.5e300 come back byte for byte.
 * - There is one reading of the retry budget (job_max_retries), shared by failure routing,
 *   status, lock release and the interrupt path; cogworker once had three diverging copies
 *   and a literal `retry: false` crashed one of them (lesson 26).
 *
 * cJSON writes a global error pointer on every parse; parses are serialised by a mutex so
 * that concurrent fetchers do not race on it (doc/design.md "Pitfalls").
 */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "job.h"
#include "json.h"
#include "keys.h"
#include "scripts.h"
#include "util.h"

static pthread_mutex_t parse_lock = PTHREAD_MUTEX_INITIALIZER;

/* Parse NUL-terminated text of length len strictly (no trailing garbage). */
static cJSON *parse_strict(const char *s, size_t len, size_t *err_at)
{
	const char *end = NULL;
	pthread_mutex_lock(&parse_lock);
	/* cJSON wants the terminating NUL inside the length to accept "nothing follows". */
	cJSON *v = cJSON_ParseWithLengthOpts(s, len + 1, &end, 1);
	pthread_mutex_unlock(&parse_lock);
	if (!v && err_at)
		*err_at = end && end >= s && end <= s + len ? (size_t)(end - s) : 0;
	return v;
}

cJSON *job_json_parse(const char *s, size_t len)
{
	return parse_strict(s, len, NULL);
}

/* Ruby's ISSPACE: what Integer() skips around the digits. */
static int rb_space(int c)
{
	return c == ' ' || (c >= '\t' && c <= '\r');
}

/* A digit's value in bases up to 36 (as Ruby's conv_digit), or -1. */
static int digit_value(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'Z')
		return c - 'A' + 10;
	return -1;
}

/* v * base + d, saturating (a budget is capped far below any overflow anyway). */
static unsigned long long accumulate(unsigned long long v, int base, int d)
{
	if (v > (ULLONG_MAX - (unsigned)d) / (unsigned)base)
		return ULLONG_MAX;
	return v * (unsigned)base + (unsigned)d;
}

/*
 * Skip the leading zeros (and single underscores after them) of the digits at p, as Ruby
 * does before it reads them: p is left on the first digit to read, which is a zero when
 * nothing else follows. A double underscore leaves p on the second one, which no base reads.
 */
static const char *skip_leading_zeros(const char *p, const char *end)
{
	int us = 0, c;
	if (*p != '0' || end - p == 1)
		return p;
	for (;;) {
		c = ++p < end ? *p : 0;
		if (c == '0')
			us = 0;
		else if (c != '_' || ++us >= 2)
			break;
	}
	return c == 0 || rb_space(c) ? p - 1 : p;
}

/*
 * The digits from p on, in base: without an underscore, only whitespace may follow them;
 * with one (Ruby's second scan, also taken on overflow), underscores must stand single
 * between digits, and a NUL ends the text. -1 when that does not hold.
 */
static int read_digits(const char *p, const char *end, int base, unsigned long long *v)
{
	const char *q = p;
	int d, underscore = 0;
	*v = 0;
	while (q < end && (d = digit_value(*q)) >= 0 && d < base)
		*v = accumulate(*v, base, d), q++;
	if (*v != ULLONG_MAX && !(q < end && *q == '_')) {
		while (q < end)
			if (!rb_space(*q++))
				return -1;
		return 0;
	}
	for (q = p, *v = 0; q < end && *q; q++) {
		if (*q == '_') {
			if (underscore++)
				return -1;
			continue;
		}
		if ((d = digit_value(*q)) < 0 || d >= base)
			break;
		underscore = 0;
		*v = accumulate(*v, base, d);
	}
	if (underscore)
		return -1;
	while (q < end && *q && rb_space(*q))
		q++;
	return q < end && *q ? -1 : 0;
}

/*
 * Ruby's Integer(s, exception: false) on the n bytes at s, which is how the cogworker gem
 * reads a string retry (doc/protocol.md §4.2): whitespace around, a sign, a base prefix
 * (0x, 0b, 0o, 0d; a leading 0 alone means octal), single underscores between digits.
 * 0 and the value (saturated) in *out, or -1 where Ruby's gives nil: "1e3", "2.5", "08".
 */
static int ruby_integer(const char *s, size_t n, long long *out)
{
	const char *p = s, *end = s + n;
	int neg = 0, base = 10;
	unsigned long long v;

	while (p < end && rb_space(*p))
		p++;
	if (p < end && (*p == '+' || *p == '-'))
		neg = *p++ == '-';
	if (p < end - 1 && *p == '0') {
		const char *prefixes = "xXbBoOdD", *at = strchr(prefixes, p[1]);
		static const int bases[] = { 16, 16, 2, 2, 8, 8, 10, 10 };
		base = at && p[1] ? bases[at - prefixes] : 8;
		p += at && p[1] ? 2 : 0;
	}
	if (p == end)
		return -1;
	p = skip_leading_zeros(p, end);
	int d = digit_value(*p);
	if (d < 0 || d >= base || read_digits(p, end, base, &v) != 0)
		return -1;
	if (v > LLONG_MAX)
		v = LLONG_MAX;
	*out = neg ? -(long long)v : (long long)v;
	return 0;
}

/* A budget from a count: zero or less → 0, capped at 10⁹. */
static int budget_of(double d)
{
	if (!isfinite(d) || d <= 0)
		return 0;
	return d > 1e9 ? 1000000000 : (int)d;
}

int job_max_retries(const char *v, size_t len)
{
	if (len == 0 || v[0] == 't' || v[0] == 'n')
		return 25;
	if (v[0] == '"') {
		size_t n;
		long long k;
		char *s = json_string_decode(v, len, &n);
		int ok = s && ruby_integer(s, n, &k) == 0;
		free(s);
		return ok ? budget_of((double)k) : 0;
	}
	if (v[0] == '-' || (v[0] >= '0' && v[0] <= '9'))
		return budget_of(strtod(v, NULL));
	return 0;                   /* false, an object, an array */
}

/*
 * The member that counts for name (a repeated key: the last one, as Ruby reads it), among
 * the members cJSON decoded. cJSON_GetObjectItemCaseSensitive would give the first.
 */
static const cJSON *member(const cJSON *obj, const char *name)
{
	const cJSON *found = NULL;
	for (const cJSON *c = obj->child; c; c = c->next)
		if (c->string && strcmp(c->string, name) == 0)
			found = c;
	return found;
}

/* A count field: absent or unusable 0, capped like the retry budget, so that neither the
 * cast from a double (1e300) nor the daemon's count + 1 can overflow. */
#define COUNT_MAX 1000000000L

static long int_field(const cJSON *obj, const char *name)
{
	const cJSON *v = member(obj, name);
	double d = 0;
	if (cJSON_IsNumber(v))
		d = v->valuedouble;
	else if (cJSON_IsString(v))
		d = (double)strtol(v->valuestring, NULL, 10);
	if (!isfinite(d) || d <= 0)
		return 0;
	return d >= (double)COUNT_MAX ? COUNT_MAX : (long)d;
}

/* What a top-level member of the text is (the strings decoded here, not by cJSON). */
enum field_kind { F_ABSENT, F_STRING, F_ARRAY, F_OTHER };

struct field {
	enum field_kind kind;
	char *s;                /* F_STRING: decoded, malloc'd */
	int nul;                /* F_STRING: it holds a NUL byte */
};

/* The member at raw[start], vlen bytes (0: absent). */
static struct field text_field(const char *raw, size_t start, size_t vlen)
{
	struct field f = { F_ABSENT, NULL, 0 };
	size_t n;
	if (vlen == 0)
		return f;
	f.kind = raw[start] == '"' ? F_STRING : raw[start] == '[' ? F_ARRAY : F_OTHER;
	if (f.kind == F_STRING) {
		f.s = json_string_decode(raw + start, vlen, &n);
		f.nul = f.s && strlen(f.s) != n;
		if (!f.s)
			f.kind = F_OTHER;
	}
	return f;
}

/* A string field as the job keeps it: NULL unless a string. */
static char *take_string(struct field *f)
{
	return f->kind == F_STRING ? f->s : NULL;
}

/* Why the object j is not a job that can run (malloc'd), or NULL. */
static char *invalid_reason(const struct field *cls, const struct field *jid, int queue_nul,
                            enum field_kind args)
{
	if (cls->kind == F_ABSENT)
		return xstrdup("not a job: no class");
	if (cls->kind != F_STRING)
		return xstrdup("not a job: class is not a string");
	if (!cls->s[0] && !cls->nul)
		return xstrdup("not a job: class is an empty string");
	if (cls->nul)
		return xstrdup("not a job: class holds a NUL character (\\u0000)");
	if (jid->kind == F_ABSENT)
		return xstrdup("not a job: no jid");
	if (jid->kind != F_STRING || (!jid->s[0] && !jid->nul))
		return xstrdup("not a job: jid is not a non-empty string");
	if (jid->nul)
		return xstrdup("not a job: jid holds a NUL character (\\u0000)");
	if (queue_nul)
		return xstrdup("not a job: queue holds a NUL character (\\u0000)");
	if (args != F_ABSENT && args != F_ARRAY)
		return xstrdup("not a job: args is not an array");
	return NULL;
}

static char *parse_error_text(const char *raw, size_t len, size_t at)
{
	if (at >= len)
		return xstrdup("unexpected end of input");
	size_t n = len - at > 200 ? 200 : len - at;
	char *frag = utf8_scrub(raw + at, n, 0);
	char *msg = xasprintf("unexpected token at '%s'", frag);
	free(frag);
	return msg;
}

static int is_read_member(const char *name)
{
	static const char *const names[] = { JOB_READ_MEMBERS };
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (strcmp(name, names[i]) == 0)
			return 1;
	return 0;
}

/* The members of v the daemon reads (every occurrence, in order: some are read first-wins,
 * some last-wins), moved into a new object; v is deleted. */
static cJSON *read_members_only(cJSON *v)
{
	cJSON *lean = cJSON_CreateObject();
	if (!lean)
		abort();                /* out of memory, as the x* allocators */
	for (cJSON *c = v->child, *next; c; c = next) {
		next = c->next;
		if (c->string && is_read_member(c->string))
			cJSON_AddItemToObject(lean, c->string, cJSON_DetachItemViaPointer(v, c));
	}
	cJSON_Delete(v);
	return lean;
}

/* j->raw (j->raw_len bytes) read into j; lean: j->obj keeps only JOB_READ_MEMBERS. */
static void parse_raw(struct job *j, const char *fetched_from, int lean)
{
	const char *raw = j->raw;
	size_t len = j->raw_len;
	j->fetched_from = fetched_from ? xstrdup(fetched_from) : NULL;
	size_t at = 0;
	cJSON *v = parse_strict(raw, len, &at);
	if (!v) {
		j->parse_error = parse_error_text(raw, len, at);
		j->queue = xstrdup("default");
		return;
	}
	if (!cJSON_IsObject(v)) {
		cJSON_Delete(v);
		j->parse_error = xstrdup("not a JSON object");
		j->queue = xstrdup("default");
		return;
	}
	/* cJSON is laxer than JSON (leading zeros, raw control characters in strings), which
	 * Ruby's parser rejects; such a payload could not be filed byte-preservingly either
	 * (json_edit_object is as strict as this scan), so it is unparseable here too. One
	 * scan checks that and finds the members read from the text. */
	static const char *const names[] = { "class", "jid", "queue", "periodic_pjid", "unique",
	                                     "args", "retry", "bid" };
	size_t st[8], ln[8];
	if (json_member_spans(j->raw, len, names, 8, st, ln) != 0) {
		cJSON_Delete(v);
		j->parse_error = xstrdup("unexpected token: not valid JSON (RFC 8259)");
		j->queue = xstrdup("default");
		return;
	}
	j->obj = v;
	struct field cls = text_field(j->raw, st[0], ln[0]);
	struct field jid = text_field(j->raw, st[1], ln[1]);
	struct field queue = text_field(j->raw, st[2], ln[2]);
	struct field pjid = text_field(j->raw, st[3], ln[3]);
	struct field unique = text_field(j->raw, st[4], ln[4]);
	struct field args = text_field(j->raw, st[5], ln[5]);
	struct field bid = text_field(j->raw, st[7], ln[7]);
	free(args.s);
	j->invalid = invalid_reason(&cls, &jid, queue.kind == F_STRING && queue.nul, args.kind);
	long bad = utf8_invalid_at(j->raw, len);
	if (bad >= 0) {             /* first: no field of it can be trusted to mean one thing */
		free(j->invalid);
		j->invalid = xasprintf("not a job: its JSON is not UTF-8 (byte %ld is \\x%02X)",
		                       bad + 1, (unsigned char)j->raw[bad]);
	}
	j->cls = take_string(&cls);
	j->jid = take_string(&jid);
	j->queue = take_string(&queue);
	if (!j->queue || !j->queue[0]) {
		free(j->queue);
		j->queue = xstrdup("default");
	}
	j->pjid = take_string(&pjid);
	j->bid = take_string(&bid);
	if (j->bid && (!j->bid[0] || bid.nul)) {        /* no key can be built from it */
		free(j->bid);
		j->bid = NULL;
	}
	j->unique = unique.kind == F_STRING && strcmp(unique.s, "until_executed") == 0 &&
	            !unique.nul;
	free(unique.s);
	j->args_json = ln[5] ? xstrndup(j->raw + st[5], ln[5]) : xstrdup("[]");
	j->retry_count = int_field(v, "retry_count");
	j->interrupted_count = int_field(v, "interrupted_count");
	j->max_retries = job_max_retries(j->raw + st[6], ln[6]);
	j->periodic_until_executed = cJSON_IsTrue(member(v, "periodic_until_executed"));
	if (lean)
		j->obj = read_members_only(v);
}

void job_parse(struct job *j, const char *raw, size_t len, const char *fetched_from)
{
	memset(j, 0, sizeof *j);
	j->raw = xstrndup(raw, len);
	j->raw_len = len;
	parse_raw(j, fetched_from, 0);
}

void job_take(struct job *j, char *raw, size_t len, const char *fetched_from)
{
	memset(j, 0, sizeof *j);
	j->raw = raw;
	j->raw_len = len;
	parse_raw(j, fetched_from, 1);
}

int job_gets_on_death(const struct job *j)
{
	return j->obj && !j->invalid && j->cls && strcmp(j->cls, JOB_UNPARSEABLE_CLASS) != 0;
}

/* A positive finite number field, else 0. */
static double time_field(const cJSON *obj, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
	return cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble > 0
	       ? v->valuedouble : 0;
}

double job_enqueued(const struct job *j)
{
	if (!cJSON_IsObject(j->obj))
		return 0;
	double t = time_field(j->obj, "enqueued_at");
	return t > 0 ? t : time_field(j->obj, "created_at");
}

double job_deadline(const cJSON *obj, double expires_in, int *from_job)
{
	*from_job = 0;
	if (!cJSON_IsObject(obj))
		return 0;
	double at = time_field(obj, "expires_at");
	if (at > 0) {
		*from_job = 1;
		return at;
	}
	if (!(expires_in > 0))
		return 0;
	double base = time_field(obj, "enqueued_at");
	if (base == 0)
		base = time_field(obj, "at");
	if (base == 0)
		base = time_field(obj, "created_at");
	return base > 0 ? base + expires_in : 0;
}

void job_free(struct job *j)
{
	free(j->raw);
	free(j->fetched_from);
	free(j->cls);
	free(j->jid);
	free(j->queue);
	free(j->pjid);
	free(j->bid);
	free(j->args_json);
	free(j->parse_error);
	free(j->invalid);
	if (j->obj)
		cJSON_Delete(j->obj);
	memset(j, 0, sizeof *j);
}

double job_backoff(long n)
{
	double dn = (double)n;
	return dn * dn * dn * dn + 15.0 + floor(random_unit() * 30.0) * (dn + 1.0);
}

void job_format_time(double t, char out[32])
{
	snprintf(out, 32, "%.6f", t);
}

char *job_failure_payload(const struct job *j, const char *error_class, const char *error_message,
                          double now, long new_retry_count, int overwrite_failed_at,
                          long interrupted_count)
{
	char when[32], count[32], icount[32];
	job_format_time(now, when);
	snprintf(count, sizeof count, "%ld", new_retry_count);
	snprintf(icount, sizeof icount, "%ld", interrupted_count);
	char *qc = json_quote(error_class, strlen(error_class));
	char *qm = json_quote(error_message, strlen(error_message));
	int has_failed_at = j->obj && cJSON_GetObjectItemCaseSensitive(j->obj, "failed_at");
	struct json_edit e[6];
	int n = 0;
	e[n++] = (struct json_edit){ "failure_outcome", NULL };
	e[n++] = (struct json_edit){ "error_class", qc };
	e[n++] = (struct json_edit){ "error_message", qm };
	if (!has_failed_at || overwrite_failed_at)
		e[n++] = (struct json_edit){ "failed_at", when };
	e[n++] = (struct json_edit){ "retry_count", count };
	if (interrupted_count > 0)
		e[n++] = (struct json_edit){ "interrupted_count", icount };
	char *out = json_edit_object(j->raw, j->raw_len, e, n);
	free(qc);
	free(qm);
	return out;
}

char *job_too_large_why(size_t len, long long max)
{
	return xasprintf("job of %zu bytes is larger than max_job_bytes (%lld)", len, max);
}

char *job_unparseable_wrapper(const char *raw, size_t len, const char *queue,
                              const char *error_class, const char *error_message, double now)
{
	char jid[25], when[32];
	new_jid(jid);
	job_format_time(now, when);
	char *qq = queue ? json_quote(queue, strlen(queue)) : xstrdup("null");
	char *qc = json_quote(error_class, strlen(error_class));
	char *msg = utf8_scrub(error_message, strlen(error_message), MAX_ERROR_MESSAGE);
	char *qm = json_quote(msg, strlen(msg));
	size_t blen;
	char *body = utf8_scrub_len(raw, len, MAX_RAW_PAYLOAD, &blen);     /* NULs kept */
	char *qr = json_quote(body, blen);
	char *out = xasprintf("{\"class\":\"(unparseable)\",\"args\":[],\"queue\":%s,\"jid\":\"%s\","
	                      "\"retry\":false,\"retry_count\":0,\"enqueued_at\":%s,\"failed_at\":%s,"
	                      "\"error_class\":%s,\"error_message\":%s,\"raw_payload\":%s}",
	                      qq, jid, when, when, qc, qm, qr);
	free(qq);
	free(qc);
	free(msg);
	free(qm);
	free(body);
	free(qr);
	return out;
}

char *job_minimal_dead_entry(const char *raw, size_t len, const char *jid,
                             const char *error_class, const char *error_message, double now)
{
	char when[32];
	job_format_time(now, when);
	char *qj = json_quote(jid ? jid : "", jid ? strlen(jid) : 0);
	char *qc = json_quote(error_class, strlen(error_class));
	char *qm = json_quote(error_message, strlen(error_message));
	struct json_edit e[] = {
		{ "jid", qj }, { "error_class", qc }, { "error_message", qm }, { "failed_at", when },
	};
	char *out = json_edit_object(raw, len, e, 4);
	if (!out) {
		size_t blen;
		char *body = utf8_scrub_len(raw, len, MAX_RAW_PAYLOAD, &blen);
		char *qr = json_quote(body, blen);
		out = xasprintf("{\"raw_payload\":%s,\"jid\":%s,\"error_class\":%s,"
		                "\"error_message\":%s,\"failed_at\":%s}", qr, qj, qc, qm, when);
		free(body);
		free(qr);
	}
	free(qj);
	free(qc);
	free(qm);
	return out;
}

char *job_restamp_enqueued(const char *raw, size_t len, double now)
{
	char when[32];
	job_format_time(now, when);
	struct json_edit e = { "enqueued_at", when };
	return json_edit_object(raw, len, &e, 1);
}

char *job_error_message(const char *error_class, const char *detail, const char *tail,
                        size_t tail_len)
{
	if (!detail)
		return xasprintf("#<%s>", error_class);
	while (tail_len > 0 && (tail[tail_len - 1] == '\n' || tail[tail_len - 1] == '\r' ||
	                        tail[tail_len - 1] == ' '))
		tail_len--;
	char *d = utf8_scrub(detail, strlen(detail), MAX_ERROR_MESSAGE);
	size_t dchars = 0;
	for (const char *p = d; *p; p++)
		dchars += ((unsigned char)*p & 0xC0) != 0x80;
	if (tail_len == 0 || dchars + 2 >= MAX_ERROR_MESSAGE)
		return d;
	/* A NUL in the output would end the message there (losing its end, the part that
	 * matters): it becomes U+FFFD like an invalid byte. */
	char *nonul = NULL;
	if (memchr(tail, '\0', tail_len)) {
		nonul = xstrndup(tail, tail_len);
		for (size_t i = 0; i < tail_len; i++)
			if (nonul[i] == '\0')
				nonul[i] = (char)0xFF;
		tail = nonul;
	}
	char *t = utf8_scrub_tail(tail, tail_len, MAX_ERROR_MESSAGE - dchars - 2);
	char *msg = xasprintf("%s: %s", d, t);
	free(d);
	free(t);
	free(nonul);
	return msg;
}

static int digest_of(const char *a, const char *b, const char *args_json, char out[41])
{
	char *canon = json_canonical(args_json, strlen(args_json));
	if (!canon)
		return -1;
	char *text = xasprintf("%s|%s|%s", a, b, canon);
	sha1_hex(text, strlen(text), out);
	free(text);
	free(canon);
	return 0;
}

char *job_unique_key(const char *cls, const char *queue, const char *args_json)
{
	char digest[41];
	if (!cls || job_unique_digest(cls, queue, args_json ? args_json : "[]", digest) != 0)
		return NULL;
	return xstrcat2(K_UNIQUE, digest);
}

int job_unique_digest(const char *cls, const char *queue, const char *args_json, char out[41])
{
	return digest_of(cls, queue, args_json, out);
}

int job_pjid(const char *cron, const char *cls, const char *args_json, char out[41])
{
	return digest_of(cron, cls, args_json, out);
}
