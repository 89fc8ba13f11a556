/* SPDX-License-Identifier: MIT */
/*
 * jobs.c: `cogworkerctl jobs`: the Web UI's job pages and buttons (doc/protocol.md §7.28).
 *
 *   jobs list [--set S] [--queue Q] [--class C] [--limit N]   (S: waiting too, the jobs a
 *                                                              process holds for a slot)
 *   jobs show [--full] JID
 *   jobs retry [--expires-in D] JID... | jobs retry --all --set retry|dead|scheduled [filters]
 *   jobs delete JID...         | jobs delete --all --set S [filters] --yes
 *   jobs kill JID...           | jobs kill --all --set scheduled|retry [filters] --yes
 *   jobs reschedule JID MINUTES|DURATION
 *   jobs log JID [--run N] [--follow]      | jobs cancel JID [--discard]   (jobs_run.c)
 *
 * This file reads the command line and checks it (which set an action may touch, --all
 * wants --set and, when destructive, --yes) before anything talks to Redis; the work is
 * done by the parts below it, jobs_show.c, jobs_act.c and jobs_run.c, which stand on
 * jobs_find.c and jobs_cut.c, and all of them on jobs_types.h (which says the levels).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "jobs_act.h"
#include "jobs_run.h"
#include "jobs_show.h"

#define MAX_RESCHEDULE_MINUTES 10080

static int parse_set(const char *s)
{
	if (!strcmp(s, "queued") || !strcmp(s, "queue") || !strcmp(s, "enqueued"))
		return S_QUEUED;
	if (!strcmp(s, "scheduled") || !strcmp(s, "schedule"))
		return S_SCHEDULED;
	if (!strcmp(s, "retry") || !strcmp(s, "retries"))
		return S_RETRY;
	if (!strcmp(s, "dead"))
		return S_DEAD;
	if (!strcmp(s, "running") || !strcmp(s, "busy"))
		return S_RUNNING;
	if (!strcmp(s, "waiting"))
		return S_WAITING;
	if (!strcmp(s, "after"))
		return S_AFTER;
	if (!strcmp(s, "group"))
		return S_GROUP;
	return -1;
}

/*
 * reschedule's time from now, in minutes, up to a week: a bare number is whole minutes, as
 * it always was; with a unit it is a duration as every command reads one (90s, 2h, 1d).
 * Out of range is an error, never clamped: a typo must not become a schedule nobody asked
 * for (0 once meant "in a minute", 20000 a week).
 */
static int reschedule_minutes(const char *s, double *minutes)
{
	double secs;
	if (strpbrk(s, "smhdw")) {
		if (ctl_duration_arg("jobs reschedule", s, "would make it due at once", &secs) != 0)
			return -1;
		if (secs > MAX_RESCHEDULE_MINUTES * 60.0) {
			ctl_error("jobs reschedule: \"%s\" is more than a week", s);
			return -1;
		}
		*minutes = secs / 60;
		return 0;
	}
	char *end;
	errno = 0;
	long m = strtol(s, &end, 10);
	if (*end || end == s || errno || m < 1 || m > MAX_RESCHEDULE_MINUTES) {
		ctl_error("jobs reschedule: MINUTES must be a whole number from 1 to %d (a week), or "
		          "a duration with a unit (90s, 2h, 1d), not \"%s\"", MAX_RESCHEDULE_MINUTES,
		          s);
		return -1;
	}
	*minutes = (double)m;
	return 0;
}

int cmd_jobs(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "set", required_argument, NULL, 's' },
		{ "queue", required_argument, NULL, 'q' },
		{ "class", required_argument, NULL, 'C' },
		{ "limit", required_argument, NULL, 'l' },
		{ "all", no_argument, NULL, 'a' },
		{ "full", no_argument, NULL, 'F' },
		{ "expires-in", required_argument, NULL, 'E' },
		CTL_COMMON_OPTS,
		{ 0, 0, 0, 0 },
	};
	int ch, set = -1, all = 0, full = 0;
	long limit = 100;
	double expires_in = 0;
	struct filter f = { 0 };
	/* log and cancel have options of their own (jobs_run.c). */
	for (int i = 1; i < argc; i++)
		if (argv[i][0] != '-') {
			if (!strcmp(argv[i], "log") || !strcmp(argv[i], "cancel"))
				return jobs_run_command(c, argc, argv);
			break;
		}
	ctl_getopt_reset();
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 's':
			if ((set = parse_set(optarg)) < 0) {
				ctl_error("jobs: unknown set \"%s\" (queued, scheduled, retry, dead, running, "
				          "waiting)",
				          optarg);
				return CTL_USAGE;
			}
			break;
		case 'q': f.queue = optarg; break;
		case 'C': f.cls = optarg; break;
		case 'l': {
			char *end;
			limit = strtol(optarg, &end, 10);
			if (*end || end == optarg || limit < 0) {
				ctl_error("jobs: --limit wants a count (0 = no limit), not \"%s\"", optarg);
				return CTL_USAGE;
			}
			break;
		}
		case 'a': all = 1; break;
		case 'F': full = 1; break;
		case 'E':
			if (ctl_duration_arg("jobs --expires-in", optarg,
			                     "would expire the job the moment it is back on its queue",
			                     &expires_in) != 0)
				return CTL_USAGE;
			break;
		default:
			if (!ctl_common_opt(c, ch, argv))
				return CTL_USAGE;
		}
	}
	int nargs = argc - optind;
	char **args = argv + optind;
	const char *sub = nargs ? args[0] : "list";
	if (nargs) {
		nargs--;
		args++;
	}
	if (f.queue && !*f.queue) {
		ctl_error("jobs: --queue wants a name");
		return CTL_USAGE;
	}
	if (!strcmp(sub, "list")) {
		if (nargs || all) {
			ctl_error("usage: cogworkerctl jobs list [--set S] [--queue Q] [--class C] [--limit N]");
			return CTL_USAGE;
		}
		unsigned sets = set >= 0 ? BIT(set) : BIT(S_QUEUED) | ZSETS | BIT(S_RUNNING) |
		                                      BIT(S_WAITING) | BIT(S_AFTER) | BIT(S_GROUP);
		if (ctl_connect(c) != 0)
			return CTL_USAGE;
		return jobs_list(c, sets, &f, (int)limit);
	}
	if (!strcmp(sub, "show")) {
		if (nargs != 1 || all) {
			ctl_error("usage: cogworkerctl jobs show [--full] JID");
			return CTL_USAGE;
		}
		if (ctl_connect(c) != 0)
			return CTL_USAGE;
		return jobs_show(c, args[0], full, NULL);
	}
	enum action a;
	if (!strcmp(sub, "retry"))
		a = A_RETRY;
	else if (!strcmp(sub, "delete"))
		a = A_DELETE;
	else if (!strcmp(sub, "kill"))
		a = A_KILL;
	else if (!strcmp(sub, "reschedule"))
		a = A_RESCHEDULE;
	else {
		ctl_error("jobs: unknown subcommand \"%s\" "
		          "(list, show, retry, delete, kill, reschedule, log, cancel)", sub);
		return CTL_USAGE;
	}
	if (expires_in > 0 && a != A_RETRY) {
		ctl_error("jobs %s: --expires-in is for jobs retry", sub);
		return CTL_USAGE;
	}
	if (set >= 0 && !(jobs_action_sets[a] & BIT(set))) {
		char sl[128];
		jobs_set_list(jobs_action_sets[a], sl, sizeof sl);
		ctl_error("jobs %s works on %s, not %s", sub, sl, jobs_set_names[set]);
		return CTL_USAGE;
	}
	double minutes = 0;
	if (a == A_RESCHEDULE) {
		if (all || nargs != 2) {
			ctl_error("usage: cogworkerctl jobs reschedule JID MINUTES|DURATION");
			return CTL_USAGE;
		}
		if (reschedule_minutes(args[1], &minutes) != 0)
			return CTL_USAGE;
		nargs = 1;
	}
	if (all) {
		if (nargs) {
			ctl_error("jobs %s: give JIDs or --all, not both", sub);
			return CTL_USAGE;
		}
		if (set < 0) {
			char sl[128];
			jobs_set_list(jobs_action_sets[a], sl, sizeof sl);
			ctl_error("jobs %s --all needs --set (%s)", sub, sl);
			return CTL_USAGE;
		}
		if (a != A_RETRY && !c->yes) {
			ctl_error("jobs %s --all --set %s is destructive: add --yes", sub,
			          jobs_set_names[set]);
			return CTL_USAGE;
		}
		if (ctl_connect(c) != 0)
			return CTL_USAGE;
		return jobs_act_on_all(c, a, set, &f, expires_in);
	}
	if (nargs == 0) {
		ctl_error("usage: cogworkerctl jobs %s JID... | --all --set SET", sub);
		return CTL_USAGE;
	}
	if (ctl_connect(c) != 0)
		return CTL_USAGE;
	return jobs_act_on_args(c, a, set >= 0 ? BIT(set) : jobs_action_sets[a], &f, nargs, args,
	                        minutes, expires_in);
}
