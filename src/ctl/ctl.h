/* ctl.h: what cogworkerctl's commands share (one file per command group in src/ctl/). */
#ifndef COGWORKERD_CTL_H
#define COGWORKERD_CTL_H

#include "config.h"
#include "redis.h"

/* Exit statuses (cogworkerctl(1)). */
#define CTL_OK 0
#define CTL_NOTHING 1           /* not found / nothing done */
#define CTL_USAGE 2             /* usage or connection error */

struct ctl {
	struct conf conf;
	struct rconn r;
	int json;                   /* --json output */
	int yes;                    /* --yes given */
};

/* One line on stderr: "cogworkerctl: <message>". */
void ctl_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Connect (exit status 2 with a message when Redis is unreachable). */
int ctl_connect(struct ctl *c);

int cmd_push(struct ctl *c, int argc, char **argv);

#endif
