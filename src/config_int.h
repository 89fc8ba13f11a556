/* SPDX-License-Identifier: MIT */
/*
 * config_int.h: what the three parts of the conf code share, and nothing else includes.
 *
 * conf_read.c reports errors at a file and line, reads typed scalars, and walks a group
 * against a table of settings (struct spec); config.c is the loader (reading the file, the
 * command line and REDIS_URL, checks between settings); conf_settings.c holds the top-level,
 * redis and periodic settings, conf_handler.c the handlers' (defaults, tables, the readers
 * with a grammar of their own); redis_url.c the Redis url. config.h stays the public
 * header; the names below are internal to those files.
 */
#ifndef COGWORKERD_CONFIG_INT_H
#define COGWORKERD_CONFIG_INT_H

#include <stddef.h>
#include <stdlib.h>
#include <libconfig.h>

#include "config.h"
#include "util.h"

#define MAX_CONCURRENCY     1000        /* conf file and -C */

/* --- small owned-string helpers (inline: both sides use them, and they are tiny) -------- */

static inline void argv_free(struct argv_list *a)
{
	for (int i = 0; i < a->n; i++)
		free(a->v[i]);
	free(a->v);
	free(a->at);
	a->v = NULL;
	a->n = 0;
	a->at = NULL;
}

static inline void argv_push(struct argv_list *a, const char *s)
{
	a->v = xrealloc(a->v, (size_t)(a->n + 2) * sizeof *a->v);
	a->v[a->n++] = xstrdup(s);
	a->v[a->n] = NULL;
}

/* A loaded conf's argv lists always have a NULL-terminated v, even when empty. */
static inline void argv_ensure(struct argv_list *a)
{
	if (!a->v)
		a->v = xcalloc(1, sizeof *a->v);
}

static inline void set_str(char **dst, const char *s)
{
	free(*dst);
	*dst = s ? xstrdup(s) : NULL;
}

static inline void strv_push(char ***v, int *n, const char *s)
{
	*v = xrealloc(*v, (size_t)(*n + 1) * sizeof **v);
	(*v)[(*n)++] = xstrdup(s);
}

static inline void strv_free(char ***v, int *n)
{
	for (int i = 0; i < *n; i++)
		free((*v)[i]);
	free(*v);
	*v = NULL;
	*n = 0;
}

/* --- where we are, and how errors are reported (conf_read.c) ----------------------------- */

struct loader {
	const char *path;               /* the conf file as given, NULL for defaults only */
	char *dir;                      /* its directory: base of @include and password_file */
	config_setting_t *root;         /* the parsed file, NULL for defaults only */
	char *err;
	size_t errlen;
};

/* libconfig's "syntax error" at line of file, said with the likely start of the mistake
 * and what libconfig saw there (conf_syntax.c). */
void syntax_error(struct loader *L, const char *file, unsigned line, const char *said);

/* "<file>:<line>: <msg>" for setting s (or "<file>: <msg>" without one). Returns -1. */
__attribute__((format(printf, 3, 4)))
int failf(struct loader *L, const config_setting_t *s, const char *fmt, ...);

/* "<loc>:<line>: <msg>" (or "<loc>: <msg>", or "<msg>") into the loader's error buffer. */
void put_err(struct loader *L, const char *loc, unsigned line, const char *msg);
/* An error with no place in the file (command line, environment). Returns -1. */
__attribute__((format(printf, 2, 3)))
int fail_plain(struct loader *L, const char *fmt, ...);
/* "<file>:<line>" of setting s, as errors name it (malloc'd), for later warnings. */
char *setting_where(const struct loader *L, const config_setting_t *s);
/* The first of the named top-level settings present in the file, for cross-check blame. */
config_setting_t *blame(const struct loader *L, const char *a, const char *b);

/* Typed reads of one setting; a wrong type is reported at its line. 0 or -1. */
int read_number(struct loader *L, const config_setting_t *s, const char *name, double *out);
int read_integer(struct loader *L, const config_setting_t *s, const char *name,
                 long long *out);
int read_string(struct loader *L, const config_setting_t *s, const char *name,
                const char **out);

/* Validates one string of a setting: NULL when fine, else what is wrong with it. */
typedef const char *(*str_check)(const char *s);

/* An array or list of strings ([ "a", "b" ] or ( "a", "b" )), each passing check. */
int read_strings(struct loader *L, const config_setting_t *s, const char *name,
                 str_check check, struct argv_list *out);

/* --- the settings tables, and reading a group against one (conf_read.c) ------------------ */

#define MAX_SECONDS         1e9         /* ~31 years: keeps every conversion to ms in range */
#define MAX_OUTPUT_KEEP     (16 * 1024 * 1024)      /* output_keep, global and per handler */

enum kind {
	K_SECONDS,      /* double; an int or a float in the file */
	K_INT,          /* int */
	K_LLONG,        /* long long (rlimits: may need the L suffix) */
	K_SIZE,         /* size_t */
	K_BOOL,         /* int 0/1 */
	K_STRING,       /* char *; "" kept (rejected with F_NONEMPTY) */
	K_OPTSTR,       /* char *; "" = NULL (unset) */
	K_ARGV,         /* struct argv_list, from an array of strings */
	K_CODES,        /* int * at off, count (int) at off2: exit codes 1..255 */
	K_CUSTOM,       /* its own reader */
};

#define F_EXCL_MIN  1   /* value must be > min (not >=) */
#define F_NONEMPTY  2   /* strings and arrays: must not be empty */

struct spec {
	const char *name;
	enum kind kind;
	size_t off, off2;
	double min, max;                /* numbers: bounds; max 0 = unbounded */
	int flags;
	str_check check;                /* strings, argv elements: extra validation */
	int (*read)(struct loader *L, const config_setting_t *s, const char *name, void *base);
};

#define FIELD(base, sp, type) ((type *)((char *)(base) + (sp)->off))

/* Walk group grp against tab: unknown names are errors. prefix qualifies names in messages. */
int apply_group(struct loader *L, const config_setting_t *grp, const struct spec *tab,
                size_t ntab, const char *prefix, void *base);

/* --- the handlers' settings (conf_handler.c) --------------------------------------------- */

/* The handlers list (a K_CUSTOM reader of the top-level table): each group read against the
 * handler table, then checked as one handler. */
int conf_read_handlers(struct loader *L, const config_setting_t *s, const char *name,
                       void *base);
void conf_handler_free(struct handler *h);

/* --- the other settings (conf_settings.c) ------------------------------------------------ */

void conf_defaults(struct conf *c);
/* The top-level group of the file, every setting in it checked against the tables. */
int conf_apply_top(struct loader *L, const config_setting_t *root, struct conf *c);
void conf_periodic_free(struct periodic_entry *p);

/* Queues as -q and the conf's queues list write them ("name" or "name,weight"). */
struct queue_set {
	char **queues;                  /* weight-expanded */
	int nqueues;
	char **names;                   /* distinct, in order */
	int nnames;
};

void queue_set_free(struct queue_set *q);
/* Add "name" or "name,weight"; on error returns -1 with the reason in why. */
int queue_add(struct queue_set *q, const char *spec, char *why, size_t whylen);
/* Make q the conf's queues (q is emptied). */
void conf_set_queues(struct conf *c, struct queue_set *q);

/* --- redis_url.c ------------------------------------------------------------------------- */

/* s[0..n) as a port 1..65535, else -1 (also used for metrics_listen). */
int parse_port(const char *s, size_t n);

#endif
