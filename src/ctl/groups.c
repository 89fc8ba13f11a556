/* SPDX-License-Identifier: MIT */
/*
 * groups.c: `cogworkerctl groups [--handler CLASS]`: the groups of fair share (doc/protocol.md
 * §7.35) per handler class: each group's running jobs (its live slots, a job brought back
 * whose slot waits for it counted), its jobs set aside, its limits and, with a rate, its
 * starts in the window. Read by src/grouplimits.c, the code /metrics, queues, top and the
 * dashboard use too. A class shows up once a job of it has started under group limits.
 * At most GROUPS_READ_MAX groups of a class are read (grouplimits.h): the rows of a class
 * cut so say it, in --json with "cut" (present only then: {groups_waiting, not_read,
 * running_not_read, read_max}), in the table with a line after it.
 */
#include <stdlib.h>
#include <string.h>
#include "ctl.h"
#include "grouplimits.h"

static void json_out(const struct group_row *g, int n)
{
	struct sbuf b;
	sb_init(&b);
	sb_addc(&b, '[');
	for (int i = 0; i < n; i++) {
		sb_adds(&b, i ? ",{\"class\":" : "{\"class\":");
		jstr(&b, g[i].cls);
		sb_adds(&b, ",\"group\":");
		jstr(&b, g[i].group);
		sb_printf(&b, ",\"running\":%lld,\"waiting\":%lld,\"group_concurrency\":", g[i].running,
		          g[i].waiting);
		if (g[i].n)
			sb_printf(&b, "%d", g[i].n);
		else
			sb_adds(&b, "null");
		sb_adds(&b, ",\"group_rate_limit\":");
		if (g[i].rate_n) {
			char rate[64];
			snprintf(rate, sizeof rate, "%d/%gs", g[i].rate_n, g[i].window);
			jstr(&b, rate);
			sb_printf(&b, ",\"window_starts\":%lld", g[i].window_starts);
		} else {
			sb_adds(&b, "null,\"window_starts\":null");
		}
		if (g[i].class_not_read || g[i].running_cut)
			sb_printf(&b, ",\"cut\":{\"groups_waiting\":%lld,\"not_read\":%lld,"
			          "\"running_not_read\":%s,\"read_max\":%d}", g[i].class_groups,
			          g[i].class_not_read, g[i].running_cut ? "true" : "false",
			          GROUPS_READ_MAX);
		sb_addc(&b, '}');
	}
	sb_addc(&b, ']');
	jprint(&b);
}

static void table_out(const struct group_row *g, int n)
{
	static const char *heads[] = { "CLASS", "GROUP", "RUNNING", "WAITING", "LIMIT", "RATE",
	                               "IN WINDOW" };
	struct table t;
	table_init(&t, 7, heads, NULL);
	for (int i = 0; i < n; i++) {
		char running[32], waiting[32], limit[32] = "-", rate[64] = "-", used[32] = "-";
		snprintf(running, sizeof running, "%lld", g[i].running);
		snprintf(waiting, sizeof waiting, "%lld", g[i].waiting);
		if (g[i].n)
			snprintf(limit, sizeof limit, "%d", g[i].n);
		if (g[i].rate_n) {
			snprintf(rate, sizeof rate, "%d/%gs", g[i].rate_n, g[i].window);
			snprintf(used, sizeof used, "%lld", g[i].window_starts);
		}
		const char *row[] = { g[i].cls, *g[i].group ? g[i].group : "\"\"", running, waiting,
		                      limit, rate, used };
		table_add(&t, row);
	}
	table_print(&t);
	table_free(&t);
	/* What the bound left out, per class (grouplimits.h). */
	for (int i = 0; i < n; i++) {
		if (i > 0 && strcmp(g[i].cls, g[i - 1].cls) == 0)
			continue;
		if (g[i].class_not_read)
			printf("%s: … and %lld more groups not read (%lld with jobs set aside; a read "
			       "counts at most %d groups per class)\n", g[i].cls, g[i].class_not_read,
			       g[i].class_groups, GROUPS_READ_MAX);
		else if (g[i].running_cut)
			printf("%s: … and more groups holding slots not read (a read counts at most "
			       "%d groups per class)\n", g[i].cls, GROUPS_READ_MAX);
	}
}

int ctl_groups(struct ctl *c, const char *cls, int with_running)
{
	struct group_row *g;
	int n;
	const char *what;
	if (group_limits_read(&c->r, cls, with_running, &g, &n, &what) != 0)
		return ctl_redis_error(c, what);
	if (c->json)
		json_out(g, n);
	else if (n == 0)
		printf("no groups running or waiting%s%s (a class shows up once a job of it starts "
		       "under group_concurrency or group_rate_limit)\n", cls ? " for " : "",
		       cls ? cls : "");
	else
		table_out(g, n);
	group_limits_free(g, n);
	return CTL_OK;
}

int cmd_groups(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "handler", required_argument, NULL, 'H' },
		CTL_COMMON_OPTS,
		{ 0, 0, 0, 0 },
	};
	const char *cls = NULL;
	int ch;
	ctl_getopt_reset();
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (ch == 'H')
			cls = optarg;
		else if (!ctl_common_opt(c, ch, argv))
			return CTL_USAGE;
	}
	if (optind < argc) {
		ctl_error("groups: unexpected \"%s\"", argv[optind]);
		return CTL_USAGE;
	}
	if (ctl_connect(c) != 0)
		return CTL_USAGE;
	return ctl_groups(c, cls, 1);
}
