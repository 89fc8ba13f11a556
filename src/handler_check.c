/* SPDX-License-Identifier: MIT */
/*
 * handler_check.c: every command of a conf resolved as the daemon will run it, before any
 * job needs it (conf_check_commands): `cogworkerd --check` fails on a problem, the daemon
 * warns about each one at start and on reload.
 *
 * The mistakes this is for are the ones that pass a syntax check and then fail every job
 * of a class, 25 times over three weeks: a typo in the path, a script without its x bit,
 * a program that is in the admin's PATH but not in the daemon's, a relative path that
 * worked from the source tree and means nothing from / under systemd.
 *
 * "As the daemon will": the program is searched in the child's PATH (handler_build_env:
 * the daemon's, or the handler's own env), relative to cwd when one is set, with the same
 * resolve_exec_path the run uses; then the file must be executable by the user the child
 * runs as (the handler's user and group, else this process's). The x bits are judged from
 * the mode and ids, since a --check run as root says nothing about another user's access.
 * The directories above the file are not checked for search permission.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handler.h"
#include "handler_int.h"
#include "util.h"

/* The x bit that applies to uid/groups (root: any x bit; see execve(2)). */
static int may_exec(const struct stat *st, unsigned uid, const unsigned *groups, int ngroups)
{
	if (uid == 0)
		return (st->st_mode & (S_IXUSR | S_IXGRP | S_IXOTH)) != 0;
	if (st->st_uid == uid)
		return (st->st_mode & S_IXUSR) != 0;
	for (int i = 0; i < ngroups; i++)
		if (st->st_gid == groups[i])
			return (st->st_mode & S_IXGRP) != 0;
	return (st->st_mode & S_IXOTH) != 0;
}

/* Whom the child runs as, in words and ids. 0, or -1 with why (the user doesn't exist). */
static int child_ids(const struct handler *h, unsigned *uid, unsigned **groups, int *ngroups,
                     char *who, size_t nwho, char *why, size_t nwhy)
{
	unsigned gid;
	if (h && (h->user || h->group)) {
		if (handler_lookup_ids(h, uid, &gid, groups, ngroups, why, nwhy) != 0)
			return -1;
		snprintf(who, nwho, "user %s", h->user ? h->user : "(the daemon's)");
		return 0;
	}
	*uid = (unsigned)geteuid();
	*ngroups = getgroups(0, NULL);
	if (*ngroups < 0)
		*ngroups = 0;
	*groups = xcalloc((size_t)*ngroups + 1, sizeof **groups);
	*ngroups = getgroups(*ngroups, (gid_t *)*groups);
	if (*ngroups < 0)
		*ngroups = 0;
	(*groups)[(*ngroups)++] = (unsigned)getegid();
	snprintf(who, nwho, "this user (uid %u)", *uid);
	return 0;
}

/* What is wrong with running cmd under handler h's settings (NULL: an on_death, which
 * runs with the daemon's environment, directory and user), into why; 0 when nothing is. */
static int check_one(const struct handler *h, const struct argv_list *cmd, char *why,
                     size_t n)
{
	const char *prog = cmd->v[0];
	const char *cwd = h ? h->cwd : NULL;
	struct stat st;

	if (cwd && stat(cwd, &st) != 0) {
		snprintf(why, n, "cwd %s: %s", cwd, strerror(errno));
		return -1;
	}
	if (cwd && !S_ISDIR(st.st_mode)) {
		snprintf(why, n, "cwd %s: not a directory", cwd);
		return -1;
	}
	if (strchr(prog, '/') && prog[0] != '/' && !cwd) {
		snprintf(why, n, "%s is a relative path and the handler has no cwd: it would be "
		         "looked up from wherever the daemon was started (/ under systemd); write "
		         "it absolute, or set cwd", prog);
		return -1;
	}
	char **env = handler_build_env(h, "", h ? h->class_name : "", "default", "0", "[]", NULL);
	char *path = NULL;
	int err = resolve_exec_path(prog, (const char *const *)env, cwd, &path);
	if (err && !strchr(prog, '/')) {
		snprintf(why, n, "%s %s in PATH %s", prog,
		         err == EACCES ? "is not executable" : "is not found",
		         exec_search_path((const char *const *)env));
		handler_free_env(env);
		return -1;
	}
	handler_free_env(env);
	char *full = path && path[0] != '/' && cwd ? xasprintf("%s/%s", cwd, path)
	             : xstrdup(path ? path : prog);
	free(path);
	int rc = -1;
	unsigned uid, *groups = NULL;
	int ngroups = 0;
	char who[128], idwhy[256];
	if (stat(full, &st) != 0) {
		snprintf(why, n, "%s: %s", full, strerror(errno));
	} else if (!S_ISREG(st.st_mode)) {
		snprintf(why, n, "%s: not a regular file", full);
	} else if (child_ids(h, &uid, &groups, &ngroups, who, sizeof who, idwhy,
	                     sizeof idwhy) != 0) {
		snprintf(why, n, "%s", idwhy);
	} else if (!may_exec(&st, uid, groups, ngroups)) {
		snprintf(why, n, "%s: not executable by %s (mode %04o, owner %u:%u)", full, who,
		         (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid, (unsigned)st.st_gid);
	} else {
		rc = 0;
	}
	free(groups);
	free(full);
	return rc;
}

/* cmd run under runas's settings (NULL: the daemon's), reported as a command of h. */
static int report_one(const struct handler *h, const struct handler *runas, const char *what,
                      const struct argv_list *cmd,
                      void (*report)(void *ctx, const char *problem), void *ctx)
{
	char why[1024];
	if (cmd->n < 1 || check_one(runas, cmd, why, sizeof why) == 0)
		return 0;
	char *line = h ? xasprintf("%s: handler '%s': %s: %s", cmd->at ? cmd->at : "(conf)",
	                           h->class_name, what, why)
	             : xasprintf("%s: %s: %s", cmd->at ? cmd->at : "(conf)", what, why);
	report(ctx, line);
	free(line);
	return 1;
}

int conf_check_commands(const struct conf *c, void (*report)(void *ctx, const char *problem),
                        void *ctx)
{
	int bad = 0;
	for (int i = 0; i < c->nhandlers; i++) {
		const struct handler *h = &c->handlers[i];
		bad += report_one(h, h, "command", &h->command, report, ctx);
		/* deathhook.c runs it with the daemon's environment, directory and user */
		bad += report_one(h, NULL, "on_death", &h->on_death, report, ctx);
	}
	for (int i = 0; i < c->non_death; i++)
		bad += report_one(NULL, NULL, "on_death", &c->on_death[i], report, ctx);
	return bad;
}
