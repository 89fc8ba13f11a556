/* SPDX-License-Identifier: MIT */
/*
 * log.h: one line per event on stderr.
 *
 *   text (default)   <UTC ISO8601> pid=<pid> <LEVEL>: <message, escaped (utf8_escape_text)>
 *   text, journal    <N><LEVEL>: <message>            (stderr is the journal: JOURNAL_STREAM)
 *   json             {"time":…,"level":…,"event":…,"msg":…, the job's fields, …}
 *
 * Under journald the line starts with the sd-daemon priority <N> (journald strips it and
 * files the line at that priority, so `journalctl -p warning` works) and leaves out the
 * time and pid, which the journal records itself. JSON lines get the same prefix there.
 */
#ifndef COGWORKERD_LOG_H
#define COGWORKERD_LOG_H

#include <stdarg.h>
#include <stddef.h>

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };
enum log_format { LOG_FORMAT_TEXT, LOG_FORMAT_JSON };

void log_set_level(enum log_level l);
int log_level_parse(const char *s, enum log_level *out);
void log_set_format(enum log_format f);
int log_format_parse(const char *s, enum log_format *out);

/* Both return the bytes the line took in the log (0 below the level), whichever the
 * format: what a caller that budgets its lines counts (pump.c). */
size_t log_msg(enum log_level l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
size_t log_vmsg(enum log_level l, const char *fmt, va_list ap);
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

/*
 * The job the calling thread is running: every line the thread logs until log_job_end
 * (the handler's output, warnings about it) carries its class, jid and queue in JSON.
 * The strings are borrowed: they must outlive the log_job_end.
 */
void log_job_begin(const char *cls, const char *jid, const char *queue);
void log_job_end(void);

/*
 * One named event with fields of its own (JSON only; the text line is the message). A
 * field is a string (str) or, with str NULL, a number; nothing is printed for a number
 * that is NaN, so optional fields can be left NAN. Returns the bytes written, as log_msg.
 */
struct log_field {
	const char *key;
	const char *str;
	double num;
};
size_t log_event(enum log_level l, const char *event, const struct log_field *fields, int n,
                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* log_event whose message ends with len bytes of data, as they are (a handler's output
 * line: NULs included), written only if the whole line takes at most room bytes of log;
 * else nothing is written and LOG_NO_ROOM returned. */
#define LOG_NO_ROOM ((size_t)-1)
size_t log_data_within(size_t room, enum log_level l, const char *event,
                       const struct log_field *fields, int n, const char *data, size_t len,
                       const char *fmt, ...) __attribute__((format(printf, 8, 9)));

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
