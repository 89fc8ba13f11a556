/* SPDX-License-Identifier: MIT */
/*
 * handler_env.c: the environment a handler child gets (handler_build_env), built in full by
 * the parent: after vfork the child may not allocate.
 *
 * Nothing of the daemon's environment is inherited wholesale. In order, later entries
 * replacing earlier ones of the same name: a default PATH, the allow-listed daemon
 * variables (PATH, the locale, TZ), the names in env_passthrough that the daemon has, the
 * handler's own env, and last the COGWORKER_* variables, which a conf can therefore never
 * override. The child's PATH found here is also the one its executable is searched in
 * (resolve_exec_path, spawn.c), not the daemon's.
 */
#include <stdlib.h>
#include <string.h>

#include "handler.h"
#include "handler_int.h"
#include "warm_proto.h"
#include "log.h"
#include "util.h"

extern char **environ;

/*
 * The daemon's variables that reach handlers without being asked for: PATH (a default when
 * the daemon has none), the locale (LANG, LANGUAGE, LC_*) and TZ. HOME is deliberately
 * not passed: under systemd it is the service's (or root's) home, wrong for a handler run
 * as another user; a handler that needs it sets it in `env` or lists it in
 * `env_passthrough`.
 */
static int env_allowed(const char *entry)
{
	static const char *const names[] = { "PATH", "LANG", "LANGUAGE", "TZ", NULL };
	size_t nlen = strcspn(entry, "=");

	if (entry[nlen] != '=')
		return 0;
	if (!strncmp(entry, "LC_", 3))
		return 1;
	for (int i = 0; names[i]; i++)
		if (strlen(names[i]) == nlen && !strncmp(entry, names[i], nlen))
			return 1;
	return 0;
}

/*
 * The list is built as (pointer, length) pieces first, pointing into environ, the conf
 * and the caller's strings, and then copied into one allocation (the array and every
 * string): a job's environment used to be a dozen mallocs and five printf calls, a
 * noticeable part of what the daemon does per short job.
 */
struct piece {
	const char *name;               /* "NAME" (not terminated) */
	size_t nlen;
	const char *value;              /* what follows '=' */
	size_t vlen;
};

struct envlist {
	struct piece *v;
	int n, cap;
};

/* Add NAME=value, replacing an earlier entry of the same name (later entries win). */
static void envlist_put(struct envlist *e, const char *name, size_t nlen, const char *value,
                        size_t vlen)
{
	for (int i = 0; i < e->n; i++) {
		if (e->v[i].nlen == nlen && !memcmp(e->v[i].name, name, nlen)) {
			e->v[i].value = value;
			e->v[i].vlen = vlen;
			return;
		}
	}
	if (e->n == e->cap) {
		e->cap = e->cap ? e->cap * 2 : 32;
		e->v = xrealloc(e->v, sizeof *e->v * (size_t)e->cap);
	}
	e->v[e->n++] = (struct piece){ name, nlen, value, vlen };
}

/* An "NAME=value" string. */
static void envlist_entry(struct envlist *e, const char *entry)
{
	size_t nlen = strcspn(entry, "=");
	envlist_put(e, entry, nlen, entry + nlen + 1, strlen(entry + nlen + 1));
}

static void envlist_set(struct envlist *e, const char *name, const char *value)
{
	envlist_put(e, name, strlen(name), value ? value : "", value ? strlen(value) : 0);
}

/* One block: the NULL-terminated array, then the strings. */
static char **envlist_pack(const struct envlist *e)
{
	size_t bytes = sizeof(char *) * ((size_t)e->n + 1);
	for (int i = 0; i < e->n; i++)
		bytes += e->v[i].nlen + e->v[i].vlen + 2;
	char **env = xmalloc(bytes);
	char *s = (char *)(env + e->n + 1);
	for (int i = 0; i < e->n; i++) {
		const struct piece *p = &e->v[i];
		env[i] = s;
		memcpy(s, p->name, p->nlen);
		s += p->nlen;
		*s++ = '=';
		memcpy(s, p->value, p->vlen);
		s += p->vlen;
		*s++ = '\0';
	}
	env[e->n] = NULL;
	return env;
}

char **handler_build_env(const struct handler *h, const char *jid, const char *cls,
                         const char *queue, const char *retry_count, const char *args_json,
                         const char *bid)
{
	struct envlist e = { 0 };

	envlist_entry(&e, "PATH=" HANDLER_DEFAULT_PATH);
	for (char **p = environ; p && *p; p++)
		if (env_allowed(*p))
			envlist_entry(&e, *p);
	if (h) {
		for (int i = 0; i < h->env_passthrough.n; i++) {
			const char *name = h->env_passthrough.v[i];
			const char *val = getenv(name);
			if (val && *name && !strchr(name, '='))
				envlist_set(&e, name, val);
		}
		for (int i = 0; i < h->env.n; i++)
			if (strchr(h->env.v[i], '=') && h->env.v[i][0] != '=')
				envlist_entry(&e, h->env.v[i]);
	}
	if (!jid) {
		/* A warm process serves many jobs: each one's ids come in its job message. */
		envlist_set(&e, "COGWORKER_PROTOCOL", WARM_PROTOCOL_VERSION);
		char **env = envlist_pack(&e);
		free(e.v);
		return env;
	}
	envlist_set(&e, "COGWORKER_JID", jid);
	envlist_set(&e, "COGWORKER_CLASS", cls);
	envlist_set(&e, "COGWORKER_QUEUE", queue);
	envlist_set(&e, "COGWORKER_RETRY_COUNT", retry_count ? retry_count : "0");
	if (bid)
		envlist_set(&e, "COGWORKER_BID", bid);
	/*
	 * execve refuses a single environment string longer than MAX_ARG_STRLEN (32 pages:
	 * 128 KiB with 4 KiB pages) with E2BIG, so a job with bigger args could never run:
	 * COGWORKER_ARGS is then left out, and the handler reads the args from stdin.
	 */
	const char *args = args_json ? args_json : "[]";
	if (strlen(args) + sizeof "COGWORKER_ARGS=" <= 32 * 4096)
		envlist_set(&e, "COGWORKER_ARGS", args);
	else
		log_warn("jid=%s: args too large for COGWORKER_ARGS (%zu bytes), left out: "
		         "the handler gets them on stdin only", jid ? jid : "?", strlen(args));
	char **env = envlist_pack(&e);
	free(e.v);
	return env;
}

/* The array and its strings are one block (envlist_pack). */
void handler_free_env(char **env)
{
	free(env);
}
