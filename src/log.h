/* log.h: one line per event on stderr, `<UTC ISO8601> pid=<pid> <LEVEL>: <message>`. */
#ifndef COGWORKERD_LOG_H
#define COGWORKERD_LOG_H

#include <stdarg.h>

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

void log_set_level(enum log_level l);
int log_level_parse(const char *s, enum log_level *out);
void log_msg(enum log_level l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_vmsg(enum log_level l, const char *fmt, va_list ap);
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

/*
 * Per-site summarising of Redis availability errors (doc/protocol.md §7.24): the first
 * "unavailable" error of an episode is logged, later ones counted and summarised at most
 * once a minute, and the first success after errors logs one recovery line.
 */
struct log_site {
	const char *name;
	int in_episode;
	long episode_errors;     /* every error since the episode began */
	long unlogged;           /* errors since the last line */
	double episode_start;    /* monotonic */
	double last_line;        /* monotonic */
};
#define LOG_SITE(n) { .name = (n) }
/* now = monotonic seconds; a parameter so unit tests can drive the clock. */
void log_site_unavailable(struct log_site *s, const char *err, double now);
void log_site_recovered(struct log_site *s, double now);

#endif
