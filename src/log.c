/*
 * log.c: the daemon's log, one line per event on stderr.
 *
 * Each line is formatted into one buffer and written with a single write(2), so lines
 * from different threads never interleave and nothing sits in a stdio buffer when the
 * process exits (journald reads a pipe; lesson 49, doc/protocol.md §10).
 *
 * The site functions implement the outage summarising of doc/protocol.md §7.24: during a Redis
 * outage every thread fails every few hundred milliseconds, and one line per failure
 * buried everything else (lesson 73).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <stdatomic.h>
#include "log.h"

static atomic_int current_level = LOG_INFO;
static const char *level_names[] = { "DEBUG", "INFO", "WARN", "ERROR" };

void log_set_level(enum log_level l)
{
	atomic_store(&current_level, (int)l);
}

int log_level_parse(const char *s, enum log_level *out)
{
	static const char *names[] = { "debug", "info", "warn", "error" };
	for (int i = 0; i < 4; i++) {
		if (strcasecmp(s, names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	return -1;
}

void log_vmsg(enum log_level l, const char *fmt, va_list ap)
{
	if ((int)l < atomic_load(&current_level))
		return;
	char line[16384];
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ pid=%d %s: ",
	                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
	                 tm.tm_sec, ts.tv_nsec / 1000000, (int)getpid(), level_names[l]);
	int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
	size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
	if (len > sizeof line - 2)
		len = sizeof line - 2;
	/* One event, one line: a message must not break the line format. */
	for (size_t i = (size_t)n; i < len; i++)
		if (line[i] == '\n' || line[i] == '\r')
			line[i] = ' ';
	line[len++] = '\n';
	size_t off = 0;
	while (off < len) {
		ssize_t w = write(STDERR_FILENO, line + off, len - off);
		if (w <= 0)
			break;
		off += (size_t)w;
	}
}

void log_msg(enum log_level l, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vmsg(l, fmt, ap);
	va_end(ap);
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
