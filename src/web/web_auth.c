/* SPDX-License-Identifier: MIT */
/*
 * web_auth.c: who may use `cogworkerctl web`: the users file, password hashes and the
 * sessions of logged-in browsers.
 *
 * The users file (--auth-file) holds "name:hash" lines, written by `cogworkerctl web
 * passwd`; the hash is libcrypt's yescrypt ("$y$…", crypt_gensalt's default cost), slow on
 * purpose so that a stolen file costs a guesser dearly, and checked with crypt_r, which
 * needs no lock between threads. The same name:password pair logs a browser in (a form) or
 * stands as a script's token (Authorization: Bearer name:password), which a browser never
 * sends by itself, so it needs no CSRF token.
 *
 * Sessions live in this process's memory only: a restart logs everybody out, which is the
 * safe way to lose them. Each has a random id (the HttpOnly, SameSite=Strict cookie) and
 * a random CSRF token the page sends back on every POST; they end after SESSION_IDLE
 * without a request or SESSION_MAX in all, and the oldest is dropped when the table is
 * full, so no number of logins grows the process.
 */
#include <crypt.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "web.h"

#define SESSION_IDLE (12 * 3600.0)
#define SESSION_MAX (7 * 86400.0)
#define SESSIONS 256

/* ---- the users file ---- */

void web_users_free(struct web_users *u)
{
	for (int i = 0; i < u->n; i++) {
		free(u->names[i]);
		free(u->hashes[i]);
	}
	free(u->names);
	free(u->hashes);
	memset(u, 0, sizeof *u);
}

int web_users_load(const char *path, struct web_users *u, char *err, size_t errlen)
{
	memset(u, 0, sizeof *u);
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	char line[4096];
	int lineno = 0, rc = 0;
	while (fgets(line, sizeof line, f)) {
		lineno++;
		line[strcspn(line, "\r\n")] = '\0';
		if (!line[0] || line[0] == '#')
			continue;
		char *colon = strchr(line, ':');
		if (!colon || colon == line || colon[1] != '$') {
			snprintf(err, errlen, "%s:%d: not a \"name:hash\" line (make one with "
			         "cogworkerctl web passwd)", path, lineno);
			rc = -1;
			break;
		}
		*colon = '\0';
		u->names = xrealloc(u->names, sizeof *u->names * (size_t)(u->n + 1));
		u->hashes = xrealloc(u->hashes, sizeof *u->hashes * (size_t)(u->n + 1));
		u->names[u->n] = xstrdup(line);
		u->hashes[u->n++] = xstrdup(colon + 1);
	}
	fclose(f);
	if (rc == 0 && u->n == 0) {
		snprintf(err, errlen, "%s: no users (add one with cogworkerctl web passwd "
		         "--auth-file %s NAME)", path, path);
		rc = -1;
	}
	if (rc)
		web_users_free(u);
	return rc;
}

int web_users_check(const struct web_users *u, const char *name, const char *password)
{
	/* A hash is computed for an unknown name too, so the answer takes as long either way. */
	const char *hash = NULL;
	for (int i = 0; i < u->n && !hash; i++)
		if (strcmp(u->names[i], name) == 0)
			hash = u->hashes[i];
	struct crypt_data *cd = xcalloc(1, sizeof *cd);
	const char *h = crypt_r(password, hash ? hash : (u->n ? u->hashes[0] : "*"), cd);
	int ok = hash && h && h[0] != '*' && secret_equal(h, hash);
	free(cd);
	return ok;
}

char *web_hash_password(const char *password)
{
	char salt[CRYPT_GENSALT_OUTPUT_SIZE];
	if (!crypt_gensalt_rn("$y$", 0, NULL, 0, salt, sizeof salt))
		return NULL;
	struct crypt_data *cd = xcalloc(1, sizeof *cd);
	const char *h = crypt_r(password, salt, cd);
	char *out = h && h[0] == '$' ? xstrdup(h) : NULL;
	free(cd);
	return out;
}

/* ---- sessions ---- */

static struct web_session table[SESSIONS];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

void web_session_new(const char *user, struct web_session *out)
{
	double now = mono_now();
	pthread_mutex_lock(&mu);
	int slot = 0;
	for (int i = 0; i < SESSIONS; i++) {
		if (!table[i].id[0]) {
			slot = i;
			break;
		}
		if (table[i].last < table[slot].last)
			slot = i;
	}
	struct web_session *s = &table[slot];
	random_hex(s->id, 32);
	random_hex(s->csrf, 32);
	snprintf(s->user, sizeof s->user, "%s", user);
	s->created = s->last = now;
	*out = *s;
	pthread_mutex_unlock(&mu);
}

int web_session_get(const char *id, struct web_session *out)
{
	if (!id || strlen(id) != 64)
		return -1;
	double now = mono_now();
	int rc = -1;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < SESSIONS; i++) {
		struct web_session *s = &table[i];
		if (!s->id[0] || !secret_equal(s->id, id))
			continue;
		if (now - s->last > SESSION_IDLE || now - s->created > SESSION_MAX) {
			memset(s, 0, sizeof *s);
			break;
		}
		s->last = now;
		*out = *s;
		rc = 0;
		break;
	}
	pthread_mutex_unlock(&mu);
	return rc;
}

void web_session_end(const char *id)
{
	if (!id)
		return;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < SESSIONS; i++)
		if (table[i].id[0] && secret_equal(table[i].id, id))
			memset(&table[i], 0, sizeof table[i]);
	pthread_mutex_unlock(&mu);
}
