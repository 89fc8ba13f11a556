/* SPDX-License-Identifier: MIT */
/*
 * handler_user.c: a handler's user and group turned into numeric ids and a supplementary
 * group list (handler_resolve_ids), before any fork.
 *
 * This has to happen in the parent: NSS lookups (getpwnam_r, getgrouplist) allocate, take
 * locks and may talk to daemons (nscd, sssd, LDAP), none of which a vfork child may do. The
 * child only applies the result, with raw setgroups/setresgid/setresuid (spawn.c).
 * Switching identity needs root; a conf that asks for it in a daemon that is not root is
 * an error for that job, not a silent run as the daemon's own user.
 */
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "handler.h"
#include "handler_int.h"
#include "util.h"

static int parse_id(const char *s, unsigned *out)
{
	char *end;
	unsigned long v;

	if (!*s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v > UINT_MAX - 1)
		return -1;
	*out = (unsigned)v;
	return 0;
}

/* 1 found, 0 no such user, -1 lookup error (errno). */
static int lookup_user(const char *name, uid_t *uid, gid_t *gid, char **pw_name)
{
	struct passwd pw, *res = NULL;
	size_t cap = 1024;
	unsigned num;
	int rc;

	for (;;) {
		char *buf = xmalloc(cap);
		if (parse_id(name, &num) == 0)
			rc = getpwuid_r((uid_t)num, &pw, buf, cap, &res);
		else
			rc = getpwnam_r(name, &pw, buf, cap, &res);
		if (rc == ERANGE && cap < (1 << 20)) {
			free(buf);
			cap *= 4;
			continue;
		}
		if (rc == 0 && res) {
			*uid = pw.pw_uid;
			*gid = pw.pw_gid;
			*pw_name = xstrdup(pw.pw_name);
		}
		free(buf);
		if (rc) {
			errno = rc;
			return -1;
		}
		return res != NULL;
	}
}

static int lookup_group(const char *name, gid_t *gid)
{
	struct group gr, *res = NULL;
	size_t cap = 1024;
	unsigned num;
	int rc;

	for (;;) {
		char *buf = xmalloc(cap);
		if (parse_id(name, &num) == 0)
			rc = getgrgid_r((gid_t)num, &gr, buf, cap, &res);
		else
			rc = getgrnam_r(name, &gr, buf, cap, &res);
		if (rc == ERANGE && cap < (1 << 20)) {
			free(buf);
			cap *= 4;
			continue;
		}
		if (rc == 0 && res)
			*gid = gr.gr_gid;
		free(buf);
		if (rc) {
			errno = rc;
			return -1;
		}
		return res != NULL;
	}
}

/* The supplementary groups of user (with gid among them), malloc'd. */
static unsigned *user_groups(const char *user, gid_t gid, int *n)
{
	int cap = 32;

	for (;;) {
		gid_t *g = xmalloc(sizeof(gid_t) * (size_t)cap);
		int cnt = cap;
		if (getgrouplist(user, gid, g, &cnt) >= 0) {
			*n = cnt;
			return (unsigned *)g;
		}
		free(g);
		cap = cnt > cap ? cnt : cap * 2;
		if (cap > 65536) {
			g = xmalloc(sizeof(gid_t));
			g[0] = gid;
			*n = 1;
			return (unsigned *)g;
		}
	}
}

/*
 * user set: its uid, its primary gid (or `group`), its supplementary groups.
 * Only group set: the daemon's uid, that gid, no other supplementary group.
 * Numeric names are accepted when they exist in the user/group database.
 */
int handler_lookup_ids(const struct handler *h, unsigned *uid_out, unsigned *gid_out,
                       unsigned **groups_out, int *ngroups, char *err, size_t errlen)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();
	char *pw_name = NULL;
	int rc;

	*groups_out = NULL;
	*ngroups = 0;
	if (h->user) {
		rc = lookup_user(h->user, &uid, &gid, &pw_name);
		if (rc <= 0) {
			snprintf(err, errlen, "user %s: %s", h->user,
			         rc < 0 ? strerror(errno) : "no such user");
			return -1;
		}
	}
	if (h->group) {
		rc = lookup_group(h->group, &gid);
		if (rc <= 0) {
			snprintf(err, errlen, "group %s: %s", h->group,
			         rc < 0 ? strerror(errno) : "no such group");
			free(pw_name);
			return -1;
		}
	}
	if (pw_name) {
		*groups_out = user_groups(pw_name, gid, ngroups);
	} else {
		*groups_out = xmalloc(sizeof(unsigned));
		(*groups_out)[0] = gid;
		*ngroups = 1;
	}
	free(pw_name);
	*uid_out = uid;
	*gid_out = gid;
	return 0;
}

int handler_resolve_ids(const struct handler *h, struct run_request *req, unsigned **groups_out,
                        char *err, size_t errlen)
{
	*groups_out = NULL;
	req->set_ids = 0;
	req->groups = NULL;
	req->ngroups = 0;
	if (!h->user && !h->group)
		return 0;
	if (geteuid() != 0) {
		snprintf(err, errlen, "user/group set for class %s but the daemon is not running as root",
		         h->class_name ? h->class_name : "?");
		return -1;
	}
	if (handler_lookup_ids(h, &req->uid, &req->gid, groups_out, &req->ngroups, err,
	                       errlen) != 0)
		return -1;
	req->set_ids = 1;
	req->groups = *groups_out;
	return 0;
}
