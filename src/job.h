/* SPDX-License-Identifier: MIT */
/*
 * job.h: a fetched job and the rules that read it: the retry budget and terminal rule
 * (doc/protocol.md §4.2), the backoff, the failure fields a retry/dead entry gets, and the
 * (unparseable) wrapper (§4.6). All payload changes are byte-preserving (json.h).
 */
#ifndef COGWORKERD_JOB_H
#define COGWORKERD_JOB_H

#include <stddef.h>
#include <cJSON.h>

#define MAX_ERROR_MESSAGE 10000
#define MAX_RAW_PAYLOAD 100000

/*
 * The string fields are read from the text, the way Ruby reads them (a repeated key counts
 * with its last value; a key or value holding "\u0000" keeps it), not from cJSON, which
 * takes a repeated key's first value and cuts a string at a NUL: a payload must not be
 * able to run one handler while the rest of the fleet reads another class.
 */
struct job {
	char *raw;              /* exactly as fetched */
	size_t raw_len;
	char *fetched_from;     /* queue name it was fetched from (NULL if unknown) */
	cJSON *obj;             /* NULL if raw is not a JSON object */
	char *cls;              /* "class" string, or NULL */
	char *jid;              /* "jid" string, or NULL */
	char *queue;            /* "queue" if a non-empty string, else "default" */
	char *args_json;        /* original text of "args", or "[]" */
	long retry_count;       /* absent or unusable = 0 */
	long interrupted_count;
	int max_retries;
	char *pjid;             /* periodic_pjid, or NULL */
	char *bid;              /* the batch it is a member of (doc/protocol.md §7.34), or NULL */
	int periodic_until_executed;
	int unique;             /* unique == "until_executed" */
	char *parse_error;      /* why obj is NULL */
	char *invalid;          /* why an object is not a job that can run, or NULL (job_parse) */
};

/* The class of the (unparseable) wrapper (doc/protocol.md §4.6). */
#define JOB_UNPARSEABLE_CLASS "(unparseable)"
/* The error classes of a job cancelled on request (§7.13) and of one past its deadline
 * (§7.31): the daemon files them, cogworkerctl explains them. */
#define JOB_CANCELLED "Cogworker::Cancelled"
#define JOB_EXPIRED "Cogworker::JobExpired"
/* The error class of a run the kernel killed something of past its memory_max (§1.1). */
#define JOB_OUT_OF_MEMORY "Cogworker::HandlerOutOfMemory"

/* cJSON parse of NUL-terminated text, strict and serialised (cJSON's global error
 * pointer is written by every parse). NULL if invalid. */
cJSON *job_json_parse(const char *s, size_t len);

/*
 * Parse raw (copied). Always succeeds; an unparseable payload has obj == NULL. An object
 * that is no job the daemon may run has invalid set, saying why: no class, a class that is
 * not a non-empty string, args present but not an array, no jid (or not a non-empty
 * string), or a class, queue or jid holding NUL (which no handler lookup, environment or
 * Redis key built from it could carry faithfully).
 */
void job_parse(struct job *j, const char *raw, size_t len, const char *fetched_from);
/*
 * The same for a job the caller hands over: raw (malloc'd, len bytes and a NUL after them)
 * becomes j->raw, not a copy, and j->obj holds only the members the daemon reads, listed
 * in JOB_READ_MEMBERS (every occurrence of each). A large job was held as its text, a
 * copy of it and cJSON's tree of it (a string arg once more, an args array of small
 * numbers about 60 bytes a number) while it ran. A member read from obj must be listed.
 */
#define JOB_READ_MEMBERS "retry", "retry_count", "interrupted_count", \
	"periodic_until_executed", "expires_at", "enqueued_at", "at", "created_at", "failed_at"
void job_take(struct job *j, char *raw, size_t len, const char *fetched_from);
void job_free(struct job *j);
/* When the job was last enqueued (enqueued_at, else created_at; epoch seconds), 0 unknown:
 * its place in its group's line (doc/protocol.md §7.35). */
double job_enqueued(const struct job *j);

/* Does an entry put in dead get on_death? Not an unparseable or invalid payload, nor an
 * (unparseable) wrapper filed later (doc/protocol.md §4.6, §7.19). */
int job_gets_on_death(const struct job *j);

/*
 * max_retries(retry) from the member's JSON text (len 0: absent), doc/protocol.md §4.2:
 * false → 0; true/absent/null → 25; a number truncated; a string read as Ruby's Integer()
 * reads it ("1_000" → 1000, "1e3" → 0); anything else 0. Zero or less → 0, capped at 10⁹.
 */
int job_max_retries(const char *v, size_t len);

/*
 * A job's deadline (doc/protocol.md §7.31), epoch seconds, 0 = none: its own expires_at when
 * that is a positive number (*from_job = 1); else, with expires_in > 0 (the handler's),
 * expires_in after its enqueued_at, or after its at (a scheduled entry has no
 * enqueued_at yet), or after its created_at.
 */
double job_deadline(const cJSON *obj, double expires_in, int *from_job);

/* n⁴ + 15 + rand(0..29)·(n + 1) seconds, n = the new retry_count. */
double job_backoff(long n);

/*
 * The payload for a retry or dead entry: the raw payload plus error_class, error_message,
 * failed_at (only if absent, unless overwrite_failed_at), retry_count, and optionally
 * interrupted_count; failure_outcome removed. NULL if raw is not an object.
 */
char *job_failure_payload(const struct job *j, const char *error_class, const char *error_message,
                          double now, long new_retry_count, int overwrite_failed_at,
                          long interrupted_count);

/* Why a job longer than max_job_bytes is buried unread (doc/protocol.md §7.9 7), in the
 * words the daemon files and `cogworkerctl exec` shows. */
char *job_too_large_why(size_t len, long long max);

/* The (unparseable) wrapper (doc/protocol.md §4.6); queue may be NULL (JSON null). */
char *job_unparseable_wrapper(const char *raw, size_t len, const char *queue,
                              const char *error_class, const char *error_message, double now);

/* Minimal dead entry (§4.6): the original fields when raw parses, else raw_payload; plus
 * jid, error_class, error_message, failed_at. */
char *job_minimal_dead_entry(const char *raw, size_t len, const char *jid,
                             const char *error_class, const char *error_message, double now);

/* The payload with enqueued_at re-stamped (graduation, cogworkerctl retry). */
char *job_restamp_enqueued(const char *raw, size_t len, double now);

/* A float epoch as the daemon writes it: microseconds, e.g. 1767225600.123456. */
void job_format_time(double t, char out[32]);

/* Error message: "<detail>: <scrubbed stderr tail>", valid UTF-8, ≤ 10 000 characters;
 * "#<error_class>" if it cannot be built. */
char *job_error_message(const char *error_class, const char *detail, const char *tail,
                        size_t tail_len);

/* SHA-1 digests of doc/protocol.md §4.3 (40 hex + NUL); -1 when args is not valid JSON. */
int job_unique_digest(const char *cls, const char *queue, const char *args_json, char out[41]);
/* The unique lock's key, cogworker:unique:<digest> (args NULL = "[]"), malloc'd; NULL
 * without a class or with args that are not valid JSON. */
char *job_unique_key(const char *cls, const char *queue, const char *args_json);
int job_pjid(const char *cron, const char *cls, const char *args_json, char out[41]);

#endif
