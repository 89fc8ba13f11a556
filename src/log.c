/* SPDX-License-Identifier: MIT */
/*
 * log.c: the daemon's log, one line per event on stderr (log.h has the three forms).
 *
 * Each line is formatted into one buffer and written with a single write(2), so lines
 * from different threads never interleave and nothing sits in a stdio buffer when the
 * process exits (journald reads a pipe; lesson 49, doc/protocol.md §10).
 *
 * Journal: systemd sets JOURNAL_STREAM to "<device>:<inode>" of the stream it connected
 * to stderr. It is only believed when stderr still is that stream (sd_journal_stream_fd(3)
 * asks the same of its users): a daemon started from a shell inside a service inherits the
 * variable with its stderr pointing elsewhere, and `<6>` in a file helps nobody.
 *
 * JSON: the message stays the human text ("msg"); what a log shipper filters on is in
 * fields of its own: "event" (start, done, fail, output, … or "log" for the rest), the
 * job's class, jid and queue (from the thread's job context, so the handler's output lines
 * carry them too) and the event's fields (duration, outcome, …).
 *
 * The site functions implement the outage summarising of doc/protocol.md §7.24: during a
 * Redis outage every thread fails every few hundred milliseconds, and one line per failure
 * buried everything else (lesson 73).
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <stdatomic.h>
#include "json.h"
#include "log.h"
#include "util.h"

static atomic_int current_level = LOG_INFO;
static atomic_int current_format = LOG_FORMAT_TEXT;
static const char *level_names[] = { "DEBUG", "INFO", "WARN", "ERROR" };
static const char *level_json[] = { "debug", "info", "warn", "error" };
/* sd-daemon(3) priorities: debug, info, warning, err. */
static const char level_prio[] = { '7', '6', '4', '3' };

void log_set_level(enum log_level l)
{
	atomic_store(&current_level, (int)l);
}

int log_level_parse(const char *s, enum log_level *out)
{
	for (int i = 0; i < 4; i++) {
		if (strcasecmp(s, level_json[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	return -1;
}

void log_set_format(enum log_format f)
{
	atomic_store(&current_format, (int)f);
}

int log_format_parse(const char *s, enum log_format *out)
{
	if (strcmp(s, "text") == 0)
		*out = LOG_FORMAT_TEXT;
	else if (strcmp(s, "json") == 0)
		*out = LOG_FORMAT_JSON;
	else
		return -1;
	return 0;
}

static int journal;
static pthread_once_t journal_once = PTHREAD_ONCE_INIT;

static void journal_detect(void)
{
	const char *v = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	char tail;

	if (!v || sscanf(v, "%llu:%llu%c", &dev, &ino, &tail) != 2)
		return;
	if (fstat(STDERR_FILENO, &st) == 0 && (unsigned long long)st.st_dev == dev &&
	    (unsigned long long)st.st_ino == ino)
		journal = 1;
}

static int to_journal(void)
{
	pthread_once(&journal_once, journal_detect);
	return journal;
}

static __thread const char *job_cls, *job_jid, *job_queue;

void log_job_begin(const char *cls, const char *jid, const char *queue)
{
	job_cls = cls;
	job_jid = jid;
	job_queue = queue;
}

void log_job_end(void)
{
	job_cls = job_jid = job_queue = NULL;
}

/* The bytes written: what a caller that budgets its lines counts (pump.c). */
static size_t write_all(const char *s, size_t len)
{
	size_t off = 0;
	while (off < len) {
		ssize_t w = write(STDERR_FILENO, s + off, len - off);
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	return off;
}

/*
 * The time up to the second is remade only when the second changes, and the pid is read
 * once (a system call per line otherwise; a fork makes it anew): at log_level info a
 * short job logs two lines, and the daemon runs thousands a second.
 */
static __thread time_t second = -1;
static __thread char second_text[40];
static pid_t pid;
static pthread_once_t pid_once = PTHREAD_ONCE_INIT;

static void pid_read(void)
{
	pid = getpid();
}

static void pid_init(void)
{
	pid_read();
	pthread_atfork(NULL, NULL, pid_read);
}

static int log_pid(void)
{
	pthread_once(&pid_once, pid_init);
	return (int)pid;
}

static void iso_now(char out[64])
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (ts.tv_sec != second) {
		struct tm tm;
		gmtime_r(&ts.tv_sec, &tm);
		snprintf(second_text, sizeof second_text, "%04d-%02d-%02dT%02d:%02d:%02d",
		         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
		         tm.tm_sec);
		second = ts.tv_sec;
	}
	snprintf(out, 64, "%s.%03ldZ", second_text, ts.tv_nsec / 1000000);
}

/* The message is escaped (utf8.c): a handler's bytes must not act on the terminal that
 * tails the log, nor make grep call the file binary. */
static size_t text_line(enum log_level l, size_t room, const char *msg, size_t len)
{
	struct sbuf b;
	sb_init(&b);
	if (to_journal()) {
		sb_printf(&b, "<%c>%s: ", level_prio[l], level_names[l]);
	} else {
		char t[64];
		iso_now(t);
		sb_printf(&b, "%s pid=%d %s: ", t, log_pid(), level_names[l]);
	}
	utf8_escape_text(&b, msg, len);
	sb_addc(&b, '\n');
	size_t wrote = b.len > room ? LOG_NO_ROOM : write_all(b.s, b.len);
	sb_free(&b);
	return wrote;
}

static void json_strn(struct sbuf *b, const char *key, const char *v, size_t len)
{
	char *q = json_quote(v, len);
	sb_printf(b, ",\"%s\":%s", key, q);
	free(q);
}

static void json_str(struct sbuf *b, const char *key, const char *v)
{
	json_strn(b, key, v, strlen(v));
}

static void json_num(struct sbuf *b, const char *key, double v)
{
	if (isnan(v))
		return;
	if (v == floor(v) && fabs(v) < 1e15)
		sb_printf(b, ",\"%s\":%.0f", key, v);
	else
		sb_printf(b, ",\"%s\":%.3f", key, v);
}

static size_t json_line(enum log_level l, size_t room, const char *event,
                        const struct log_field *f, int nf, const char *msg, size_t len)
{
	char t[64];
	struct sbuf b;
	iso_now(t);
	sb_init(&b);
	if (to_journal())
		sb_printf(&b, "<%c>", level_prio[l]);
	sb_printf(&b, "{\"time\":\"%s\",\"level\":\"%s\",\"pid\":%d", t, level_json[l],
	          log_pid());
	json_str(&b, "event", event ? event : "log");
	if (job_cls)
		json_str(&b, "class", job_cls);
	if (job_jid)
		json_str(&b, "jid", job_jid);
	if (job_queue)
		json_str(&b, "queue", job_queue);
	for (int i = 0; i < nf; i++) {
		if (f[i].str)
			json_str(&b, f[i].key, f[i].str);
		else
			json_num(&b, f[i].key, f[i].num);
	}
	json_strn(&b, "msg", msg, len);
	sb_adds(&b, "}\n");
	size_t wrote = b.len > room ? LOG_NO_ROOM : write_all(b.s, b.len);
	sb_free(&b);
	return wrote;
}

/*
 * The message is fmt's text followed by dlen bytes of data taken as they are (a handler's
 * line: a NUL in it must not end it, as %s would). A line is measured whole before it is
 * written: a byte of the message can take four in text and six in JSON, so no estimate
 * from its length holds (pump.c budgets by room).
 */
static size_t log_line(enum log_level l, size_t room, const char *event,
                       const struct log_field *f, int nf, const char *data, size_t dlen,
                       const char *fmt, va_list ap)
{
	if ((int)l < atomic_load(&current_level))
		return 0;
	struct sbuf m;
	sb_init(&m);
	sb_vprintf(&m, fmt, ap);
	sb_add(&m, data, dlen);
	size_t wrote = atomic_load(&current_format) == LOG_FORMAT_JSON
	               ? json_line(l, room, event, f, nf, m.s, m.len)
	               : text_line(l, room, m.s, m.len);
	sb_free(&m);
	return wrote;
}

size_t log_vmsg(enum log_level l, const char *fmt, va_list ap)
{
	return log_line(l, SIZE_MAX, NULL, NULL, 0, "", 0, fmt, ap);
}

size_t log_msg(enum log_level l, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	size_t n = log_line(l, SIZE_MAX, NULL, NULL, 0, "", 0, fmt, ap);
	va_end(ap);
	return n;
}

size_t log_event(enum log_level l, const char *event, const struct log_field *fields, int n,
                 const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	size_t wrote = log_line(l, SIZE_MAX, event, fields, n, "", 0, fmt, ap);
	va_end(ap);
	return wrote;
}

size_t log_data_within(size_t room, enum log_level l, const char *event,
                       const struct log_field *fields, int n, const char *data, size_t len,
                       const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	size_t wrote = log_line(l, room, event, fields, n, data, len, fmt, ap);
	va_end(ap);
	return wrote;
}

/* Sites may be shared by threads (the fetchers'): one lock for all, rarely contended. */
static pthread_mutex_t site_mu = PTHREAD_MUTEX_INITIALIZER;

static void site_unavailable(struct log_site *s, const char *err, double now);
static void site_recovered(struct log_site *s, double now);

void log_site_unavailable(struct log_site *s, const char *err, double now)
{
	pthread_mutex_lock(&site_mu);
	site_unavailable(s, err, now);
	pthread_mutex_unlock(&site_mu);
}

void log_site_recovered(struct log_site *s, double now)
{
	pthread_mutex_lock(&site_mu);
	site_recovered(s, now);
	pthread_mutex_unlock(&site_mu);
}

static void site_unavailable(struct log_site *s, const char *err, double now)
{
	if (!s->in_episode) {
		s->in_episode = 1;
		s->episode_errors = 1;
		s->unlogged = 0;
		s->episode_start = now;
		s->last_line = now;
		log_warn("%s: Redis unavailable — %s (repeats summarized every 60s)", s->name, err);
		return;
	}
	s->episode_errors++;
	s->unlogged++;
	if (now - s->last_line >= 60.0) {
		log_warn("%s: still unavailable — %ld more error(s) since the last report: %s",
		         s->name, s->unlogged, err);
		s->unlogged = 0;
		s->last_line = now;
	}
}

static void site_recovered(struct log_site *s, double now)
{
	if (!s->in_episode)
		return;
	log_info("%s: Redis available again after %ld error(s) over %.0fs", s->name,
	         s->episode_errors, now - s->episode_start);
	s->in_episode = 0;
	s->episode_errors = s->unlogged = 0;
}
