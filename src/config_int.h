/* SPDX-License-Identifier: MIT */
/*
 * config_int.h: what the three parts of the conf code share, and nothing else includes.
 *
 * conf_read.c reports errors at a file and line and reads typed scalars; config.c is the
 * loader (reading the file, the command line and REDIS_URL, checks between settings);
 * conf_settings.c holds the settings (defaults, tables, the readers with a grammar of their
 * own); redis_url.c the Redis url. config.h stays the public header; the names below are
 * internal to those four files.
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

/* --- the settings (conf_settings.c) ------------------------------------------------------ */

void conf_defaults(struct conf *c);
/* The top-level group of the file, every setting in it checked against the tables. */
int conf_apply_top(struct loader *L, const config_setting_t *root, struct conf *c);
void conf_handler_free(struct handler *h);
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
