/* SPDX-License-Identifier: MIT */
/*
 * confine.h: a handler's confinement (network, private_tmp, read_only + writable_paths,
 * no_new_privileges), made in the child between the fork and execve (confine.c;
 * doc/design.md "Confinement").
 */
#ifndef COGWORKERD_CONFINE_H
#define COGWORKERD_CONFINE_H

#include <stddef.h>
#include <net/if.h>

#include "config.h"

/* read_only keeps these as they were (as systemd's ProtectSystem=strict does), then the
 * writable paths. */
#define CONFINE_NKEEP (3 + CONFINE_MAX_WRITABLE)

/* Everything the child does, prepared by the parent: the child only reads it. */
struct confine_child {
	int unshare_flags;              /* CLONE_NEWUSER / CLONE_NEWNS / CLONE_NEWNET; 0 = none */
	int loopback;                   /* bring lo up (network = false) */
	struct ifreq lo;                /* its request, filled in */
	int read_only, private_tmp, no_new_privs;
	const char *keep[CONFINE_NKEEP];    /* read_only: mounts kept as they were */
	int nkeep, nkeep_optional;      /* the first nkeep_optional may be missing */
	/* A daemon that is not root: its own ids mapped in the job's user namespace. */
	const char *uid_map, *gid_map;
	size_t uid_map_len, gid_map_len;
};

/* Which part of the confinement failed in the child (its errno beside it). */
enum confine_part {
	CONFINE_OK,
	CONFINE_NAMESPACES,     /* unshare, and a user namespace's id maps */
	CONFINE_LOOPBACK,       /* bringing up the network namespace's lo */
	CONFINE_MOUNTS,         /* read_only's remount, private_tmp's tmpfs */
	CONFINE_NO_NEW_PRIVS,
};

/* Anything to do for cf (NULL = nothing)? */
int confine_wanted(const struct confinement *cf);

/* In the parent, before the fork: what the child will do for cf (NULL = nothing). */
void confine_prepare(const struct confinement *cf, struct confine_child *out);

/* Whether the child's mounts change, so that a cwd left to inherit must be entered again
 * by its path after them (confine_daemon_cwd). */
int confine_remounts(const struct confine_child *c);
/* The daemon's working directory (looked up once), or NULL if it can't be. */
const char *confine_daemon_cwd(void);

/*
 * In the child, between the fork and execve, before the ids change (making namespaces
 * needs the privileges the ids drop): raw system calls on c only. CONFINE_OK, or the part
 * that failed with errno set.
 */
enum confine_part confine_enter(const struct confine_child *c);

/* What a part is, for messages: "creating the namespaces", ... */
const char *confine_part_what(enum confine_part p);

/*
 * Whether this process can give every handler of c the confinement it asks for: each
 * writable path exists and is writable for this process's mounts, and a child makes the
 * confinement as a job's would (a probe per handler). report(ctx, "<file>:<line>: handler 'X': ...") for each that can't; returns
 * how many. For --check, the start and a reload: a daemon that can't confine as asked
 * does not run the jobs.
 */
int confine_check_conf(const struct conf *c, void (*report)(void *ctx, const char *problem),
                       void *ctx);

#endif
