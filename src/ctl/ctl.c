/*
 * ctl.c: cogworkerctl's entry point: global options, the conf (for Redis settings), and
 * the dispatch to one function per command.
 *
 *   cogworkerctl [-c FILE] [--json] [--yes] COMMAND ...
 *
 * The conf file is optional here: without -c, the default path is used when it exists,
 * else built-in defaults; REDIS_URL overrides either.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ctl.h"
#include "log.h"
#include "util.h"

struct command {
	const char *name;
	int (*fn)(struct ctl *c, int argc, char **argv);
	const char *help;
};

static const struct command commands[] = {
	{ "push", cmd_push, "push [--queue Q] [--in S | --at T] [--retry N|false] [--unique]\n"
	  "                [--json-args JSON] [--jid JID] [--stdin] CLASS [ARG...]" },
	{ "stats", cmd_stats, "stats" },
	{ "queues", cmd_queues, "queues [list] | queues pause|resume QUEUE | queues clear QUEUE --yes" },
	{ "jobs", cmd_jobs, "jobs list [--set queued|scheduled|retry|dead|running] [--queue Q]\n"
	  "                [--class C] [--limit N]\n"
	  "  jobs show JID\n"
	  "  jobs retry|delete|kill [--set S] JID...\n"
	  "  jobs retry --all --set retry|dead|scheduled [--queue Q] [--class C]\n"
	  "  jobs delete|kill --all --set S [--queue Q] [--class C] --yes\n"
	  "  jobs reschedule JID MINUTES\n"
	  "  jobs log JID [--run N] [--follow]   (a run's output, kept by output_keep)\n"
	  "  jobs cancel JID [--discard]   (stop a running job: dead as Cogworker::Cancelled)" },
	{ "processes", cmd_processes, "processes [list] | processes quiet|resume|stop IDENTITY...|--all"
	  " (stop --all needs --yes)" },
	{ "periodic", cmd_periodic, "periodic [list] | periodic run|enable|disable PJID" },
	{ "exec", cmd_exec, "exec [--json-args JSON] [--queue Q] [--retry N|false] [--jid JID]\n"
	  "                [--timeout S] CLASS [ARG...]   (runs the handler locally; no Redis)" },
	{ "metrics", cmd_metrics, "metrics   (Prometheus text: cogworker's eight metrics)" },
	{ "history", cmd_history, "history [--class C] [--status success|failed] [--since T] [--limit N]\n"
	  "                (finished runs, newest first; T: epoch, ISO 8601 UTC or 12h / 7d ago)" },
	{ "top", cmd_top, "top   (a live view, refreshed every second; a snapshot when not a terminal)" },
	{ NULL, NULL, NULL },
};

static void usage(FILE *to)
{
	fprintf(to, "usage: cogworkerctl [-c FILE] [--json] [--yes] COMMAND ...\ncommands:\n");
	for (const struct command *cmd = commands; cmd->name; cmd++)
		fprintf(to, "  %s\n", cmd->help);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		{ "yes", no_argument, NULL, 'y' },
		{ "help", no_argument, NULL, 'h' },
		{ 0, 0, 0, 0 },
	};
	const char *path = NULL;
	struct ctl c;
	memset(&c, 0, sizeof c);
	int ch;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "+c:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c': path = optarg; break;
		case 'j': c.json = 1; break;
		case 'y': c.yes = 1; break;
		case 'h': usage(stdout); return CTL_OK;
		default:
			ctl_error("unknown option or missing argument: %s (try --help)",
			          argv[optind - 1]);
			return CTL_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return CTL_USAGE;
	}
	if (!path && access(DEFAULT_CONF_PATH, R_OK) == 0)
		path = DEFAULT_CONF_PATH;
	char err[1024];
	struct conf_overrides ov = { 0 };
	if (conf_load(path, &ov, &c.conf, err, sizeof err) != 0) {
		ctl_error("%s", err);
		return CTL_USAGE;
	}
	log_set_level(LOG_WARN);
	rconn_init(&c.r, &c.conf.redis);
	const char *name = argv[optind];
	int status = CTL_USAGE;
	const struct command *cmd;
	for (cmd = commands; cmd->name; cmd++)
		if (strcmp(cmd->name, name) == 0)
			break;
	if (!cmd->name) {
		ctl_error("unknown command \"%s\" (try --help)", name);
	} else {
		optind++;
		status = cmd->fn(&c, argc - optind + 1, argv + optind - 1);
	}
	rconn_free(&c.r);
	conf_free(&c.conf);
	return status;
}
