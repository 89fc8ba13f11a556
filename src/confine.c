/* SPDX-License-Identifier: MIT */
/*
 * confine.c: a handler's confinement (doc/design.md "Confinement"): network = false,
 * private_tmp, read_only with writable_paths, no_new_privileges, made by the child itself
 * between the fork and execve, out of the kernel's namespaces and one prctl.
 *
 * The child is a vfork child (spawn.c): it may only make raw system calls on memory the
 * parent prepared, so the parent fills a struct confine_child (confine_prepare) and the
 * child runs through it (confine_enter). In the child, in order:
 *
 * 1. unshare() the namespaces in one call: CLONE_NEWNET for network = false, CLONE_NEWNS
 *    for private_tmp and read_only; and CLONE_NEWUSER with them when the daemon is not
 *    root: the job's user namespace is what grants the right to make the others. Its id
 *    maps (written by the child into its own /proc/self/{setgroups,uid_map,gid_map}) map
 *    the daemon's uid and gid to themselves, so files keep their owners and the job runs
 *    as the daemon's user, without capabilities once it execs. A root daemon needs no user
 *    namespace, and the handler's user/group ids are applied after this step (spawn.c):
 *    making namespaces takes the privileges that dropping the ids gives up.
 * 2. network = false: the new network namespace has only a loopback, down; it is brought
 *    up (SIOCSIFFLAGS), so the job can still talk to itself on 127.0.0.1.
 * 3. The mounts. Everything is made private first (MS_REC | MS_PRIVATE), so nothing done
 *    here reaches the host's mounts and no mount the host makes later appears in the job
 *    (a slave mount would bring new host mounts in writable). read_only: a clone of each
 *    mount tree to keep (/dev, /proc, /sys as systemd's ProtectSystem=strict keeps them,
 *    then the writable paths) is taken with open_tree(OPEN_TREE_CLONE | AT_RECURSIVE),
 *    every mount is made read-only in one mount_setattr(AT_RECURSIVE), and the clones are
 *    moved back on top (move_mount). A clone keeps the flags the host gave each mount, so
 *    a path the host mounted read-only stays so: nothing is ever made writable that was
 *    not. private_tmp: a new tmpfs on /tmp, /var/tmp and /dev/shm (those that exist), after
 *    the remount so they are writable; it is gone when the last process of the job's
 *    mount namespace is.
 * 4. no_new_privileges: PR_SET_NO_NEW_PRIVS. It does not stop the ids being dropped after.
 *
 * Under ThreadSanitizer the child is a fork() (spawn.c), in which TSan starts a thread of
 * its own again, and the kernel refuses a user namespace to a threaded process (EINVAL):
 * there only a root daemon can confine.
 *
 * A failing step returns which part failed, errno beside it; the spawn reports it as the
 * job's "exec failed: ..." (doc/design.md "Handlers"). The daemon's --check, start and
 * reload run the same steps once per handler in a probe child (confine_check_conf), so a
 * kernel, sandbox or daemon user that can't confine as asked is a conf error there, with
 * the file and line, rather than every job's spawn failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "confine.h"
#include "util.h"

/* What read_only keeps as it was, and where private_tmp mounts a tmpfs. */
static const char *const kept_api[] = { "/dev", "/proc", "/sys" };
static const char *const tmp_dirs[] = { "/tmp", "/var/tmp", "/dev/shm" };
_Static_assert(sizeof kept_api / sizeof *kept_api == CONFINE_NKEEP - CONFINE_MAX_WRITABLE,
               "CONFINE_NKEEP counts kept_api");

int confine_wanted(const struct confinement *cf)
{
	return cf && (!cf->network || cf->private_tmp || cf->read_only || cf->no_new_privileges);
}

/* ---------------------------------------------------------------------------------------
 * The parent's side
 * ------------------------------------------------------------------------------------- */

/* A daemon that is not root maps its own ids into the job's user namespace. */
static char uid_map[48], gid_map[48];
static size_t uid_map_len, gid_map_len;
static int euid_root;
static char *daemon_cwd;
static pthread_once_t ids_once = PTHREAD_ONCE_INIT;

static void ids_init(void)
{
	uid_t u = geteuid();
	gid_t g = getegid();
	euid_root = u == 0;
	uid_map_len = (size_t)snprintf(uid_map, sizeof uid_map, "%u %u 1\n", (unsigned)u,
	                               (unsigned)u);
	gid_map_len = (size_t)snprintf(gid_map, sizeof gid_map, "%u %u 1\n", (unsigned)g,
	                               (unsigned)g);
	daemon_cwd = getcwd(NULL, 0);
}

const char *confine_daemon_cwd(void)
{
	pthread_once(&ids_once, ids_init);
	return daemon_cwd;
}

void confine_prepare(const struct confinement *cf, struct confine_child *out)
{
	memset(out, 0, sizeof *out);
	if (!confine_wanted(cf))
		return;
	pthread_once(&ids_once, ids_init);
	out->no_new_privs = cf->no_new_privileges;
	out->read_only = cf->read_only;
	out->private_tmp = cf->private_tmp;
	if (!cf->network) {
		out->unshare_flags |= CLONE_NEWNET;
		out->loopback = 1;
		strcpy(out->lo.ifr_name, "lo");
		out->lo.ifr_flags = IFF_UP | IFF_RUNNING;
	}
	if (cf->read_only || cf->private_tmp)
		out->unshare_flags |= CLONE_NEWNS;
	if (out->unshare_flags && !euid_root) {
		out->unshare_flags |= CLONE_NEWUSER;
		out->uid_map = uid_map;
		out->uid_map_len = uid_map_len;
		out->gid_map = gid_map;
		out->gid_map_len = gid_map_len;
	}
	if (cf->read_only) {
		for (size_t i = 0; i < sizeof kept_api / sizeof *kept_api; i++)
			out->keep[out->nkeep++] = kept_api[i];
		out->nkeep_optional = out->nkeep;
		for (int i = 0; i < cf->writable_paths.n && i < CONFINE_MAX_WRITABLE; i++)
			out->keep[out->nkeep++] = cf->writable_paths.v[i];
	}
}

int confine_remounts(const struct confine_child *c)
{
	return (c->unshare_flags & CLONE_NEWNS) != 0;
}

/* ---------------------------------------------------------------------------------------
 * The child's side: raw system calls on the prepared struct only
 * ------------------------------------------------------------------------------------- */

static int write_file(const char *path, const char *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t w = write(fd, data, len);
	int e = errno;
	close(fd);
	if (w == (ssize_t)len)
		return 0;
	errno = w < 0 ? e : EIO;
	return -1;
}

static int id_maps(const struct confine_child *c)
{
	if (write_file("/proc/self/setgroups", "deny", 4) < 0 && errno != ENOENT)
		return -1;
	if (write_file("/proc/self/uid_map", c->uid_map, c->uid_map_len) < 0)
		return -1;
	return write_file("/proc/self/gid_map", c->gid_map, c->gid_map_len);
}

static int loopback_up(const struct confine_child *c)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	int rc = ioctl(s, SIOCSIFFLAGS, &c->lo);
	int e = errno;
	close(s);
	errno = e;
	return rc;
}

/* Everything read-only but the kept trees (/dev, /proc, /sys, the writable paths), which
 * come back as clones taken before, with the flags the host gave them. */
static int remount_read_only(const struct confine_child *c)
{
	int fds[CONFINE_NKEEP];
	struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY };

	for (int i = 0; i < c->nkeep; i++) {
		fds[i] = open_tree(AT_FDCWD, c->keep[i],
		                   OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
		if (fds[i] < 0 && !(errno == ENOENT && i < c->nkeep_optional))
			return -1;
	}
	if (mount_setattr(AT_FDCWD, "/", AT_RECURSIVE, &ro, sizeof ro) < 0)
		return -1;
	for (int i = 0; i < c->nkeep; i++) {
		if (fds[i] < 0)
			continue;
		if (move_mount(fds[i], "", AT_FDCWD, c->keep[i], MOVE_MOUNT_F_EMPTY_PATH) < 0)
			return -1;
		close(fds[i]);
	}
	return 0;
}

static int private_tmp(void)
{
	for (size_t i = 0; i < sizeof tmp_dirs / sizeof *tmp_dirs; i++)
		if (mount("tmpfs", tmp_dirs[i], "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") < 0 &&
		    !(errno == ENOENT && i > 0))
			return -1;
	return 0;
}

enum confine_part confine_enter(const struct confine_child *c)
{
	if (c->unshare_flags) {
		if (unshare(c->unshare_flags) < 0)
			return CONFINE_NAMESPACES;
		if (c->uid_map && id_maps(c) < 0)
			return CONFINE_NAMESPACES;
	}
	if (c->loopback && loopback_up(c) < 0)
		return CONFINE_LOOPBACK;
	if (c->unshare_flags & CLONE_NEWNS) {
		if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			return CONFINE_MOUNTS;
		if (c->read_only && remount_read_only(c) < 0)
			return CONFINE_MOUNTS;
		if (c->private_tmp && private_tmp() < 0)
			return CONFINE_MOUNTS;
	}
	if (c->no_new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return CONFINE_NO_NEW_PRIVS;
	return CONFINE_OK;
}

const char *confine_part_what(enum confine_part p)
{
	switch (p) {
	case CONFINE_OK:
		break;
	case CONFINE_NAMESPACES:
		return "confinement: creating the namespaces";
	case CONFINE_LOOPBACK:
		return "confinement: network = false: bringing up the loopback";
	case CONFINE_MOUNTS:
		return "confinement: the mounts of read_only/private_tmp";
	case CONFINE_NO_NEW_PRIVS:
		return "confinement: no_new_privileges";
	}
	return "confinement";
}

/* ---------------------------------------------------------------------------------------
 * The probe, for --check, the start and a reload
 * ------------------------------------------------------------------------------------- */

/* Make cf's confinement in a child that then exits: CONFINE_OK, or the part that failed
 * with *err its errno. */
static enum confine_part probe(const struct confinement *cf, int *err)
{
	struct confine_child c;
	int p[2];
	int msg[2] = { CONFINE_OK, 0 };

	confine_prepare(cf, &c);
	*err = 0;
	if (pipe2(p, O_CLOEXEC) < 0) {
		*err = errno;
		return CONFINE_NAMESPACES;
	}
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		msg[0] = (int)confine_enter(&c);
		msg[1] = errno;
		if (write(p[1], msg, sizeof msg) < 0)
			_exit(1);
		_exit(0);
	}
	close(p[1]);
	if (pid < 0) {
		*err = errno;
		close(p[0]);
		return CONFINE_NAMESPACES;
	}
	ssize_t r;
	do
		r = read(p[0], msg, sizeof msg);
	while (r < 0 && errno == EINTR);
	close(p[0]);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	if (r != (ssize_t)sizeof msg) {
		*err = EIO;
		return CONFINE_NAMESPACES;
	}
	*err = msg[1];
	return (enum confine_part)msg[0];
}

/* What the host must give for part p to work, for the message. */
static const char *probe_hint(enum confine_part p)
{
	pthread_once(&ids_once, ids_init);
	if (p == CONFINE_NO_NEW_PRIVS)
		return "the kernel refuses PR_SET_NO_NEW_PRIVS";
	if (!euid_root)
		return "the daemon is not root, so each confined job gets a user namespace of its "
		       "own: the kernel must allow them (sysctl user.max_user_namespaces above 0, "
		       "kernel.unprivileged_userns_clone = 1 where it exists) and, under systemd, "
		       "RestrictNamespaces= must allow user, mnt and net, and SystemCallFilter= "
		       "mount, mount_setattr, open_tree and move_mount, as the packaged unit "
		       "does (doc/operating.md, \"Confinement\")";
	return "the kernel, a container around the daemon or its service's sandbox "
	       "(RestrictNamespaces=, SystemCallFilter=) refuses it (doc/operating.md, "
	       "\"Confinement\")";
}

static int check_handler(const struct handler *h, const char *file,
                         void (*report)(void *ctx, const char *problem), void *ctx)
{
	const struct confinement *cf = &h->confine;
	int bad = 0;

	for (int i = 0; i < cf->writable_paths.n; i++) {
		struct statvfs sv;
		const char *why;
		if (statvfs(cf->writable_paths.v[i], &sv) != 0)
			why = strerror(errno);
		else if (sv.f_flag & ST_RDONLY)
			why = "read-only for the daemon itself, so for its jobs too (under systemd, "
			      "whose ProtectSystem=strict makes it so: ReadWritePaths= in a drop-in)";
		else
			continue;
		char *line = xasprintf("%s: handler '%s': writable path %s: %s",
		                       cf->writable_paths.at ? cf->writable_paths.at : file,
		                       h->class_name, cf->writable_paths.v[i], why);
		report(ctx, line);
		free(line);
		bad++;
	}
	if (bad)
		return bad;
	int err;
	enum confine_part p = probe(cf, &err);
	if (p == CONFINE_OK)
		return 0;
	char *line = xasprintf("%s: handler '%s': can't be confined as asked: %s: %s (%s); %s",
	                       cf->at ? cf->at : file, h->class_name, confine_part_what(p),
	                       strerror(err), strerrorname_np(err) ? strerrorname_np(err) : "?",
	                       probe_hint(p));
	report(ctx, line);
	free(line);
	return 1;
}

int confine_check_conf(const struct conf *c, void (*report)(void *ctx, const char *problem),
                       void *ctx)
{
	int bad = 0;
	for (int i = 0; i < c->nhandlers; i++)
		if (confine_wanted(&c->handlers[i].confine))
			bad += check_handler(&c->handlers[i], c->path ? c->path : "(conf)", report,
			                     ctx);
	return bad;
}
