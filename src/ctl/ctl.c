/* SPDX-License-Identifier: MIT */
/*
 * ctl.c: cogworkerctl's entry point: global options, the conf (for Redis settings), the
 * dispatch to one function per command, and the help of every command.
 *
 *   cogworkerctl [-c FILE] [--json] [--yes] COMMAND ...
 *   cogworkerctl --version | --help | help [COMMAND] | COMMAND --help
 *
 * The conf file is optional here: without -c, the default path is used when it is
 * readable, else built-in defaults. REDIS_URL overrides redis.url of either, as it does
 * for the daemon (and `make run` tells people to set it). Because a wrong Redis is the
 * quiet mistake (an empty queue list, "no job"), the first connection says on stderr
 * where the Redis settings came from whenever something other than the conf's own
 * redis.url decided: REDIS_URL replacing a conf's url, or the built-in default because
 * there is no conf file or it sets no url. REDIS_URL with no url in any conf is not
 * remarked on: it is what the user typed. A connection error names the source too.
 *
 * The help: one table, one row per command: its usage lines, a one-line summary for the
 * overview and a paragraph for `help COMMAND`. A new command is a new row (and its
 * function); the completion scripts (completion/) list the same names, which a test
 * checks.
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
	const char *usage;          /* lines after "cogworkerctl ", '\n'-separated */
	const char *summary;        /* one line, for the overview */
	const char *help;           /* the rest of `help COMMAND` */
};

/* Said in the help of every command that takes one; cogworkerctl(1) "DURATIONS AND TIMES"
 * says it at length. The grammar is src/timearg.c's. */
#define DURATIONS_AND_TIMES \
	"D, a duration: seconds (90), or numbers with units s, m, h, d, w (90s, 5m, 2h, 1h30m).\n" \
	"T, a time: epoch seconds; ISO 8601 (2027-01-01, 2027-01-01T09:30, ...+02:00), UTC\n" \
	"unless a zone follows; or a duration with a unit, from now (5m)."

static const struct command commands[] = {
	{ "push", cmd_push,
	  "push [--queue Q] [--in D | --at T] [--retry N|true|false] [--unique] [--jid JID]\n"
	  "     [--expires-in D | --expires-at T] [--batch BID] [--after JID[,JID...]]\n"
	  "     [--after-any] [--json-args JSON | --stdin] CLASS [ARG...]",
	  "enqueue a job; prints its jid",
	  "ARGs are strings; --json-args gives typed args ('[1, {\"k\": 2}]'), --stdin one args\n"
	  "array per line. --in D or --at T schedules it. --retry false: the first failure goes\n"
	  "to dead (cogworker's rule, not Sidekiq's discard). --unique skips the push while an\n"
	  "identical job is queued or running (exit 1). --expires-in D (after it is due) or\n"
	  "--expires-at T: a deadline; a daemon never starts it later. --batch BID makes it a\n"
	  "member of that batch. --after: it waits until each job named has succeeded, and is\n"
	  "buried as Cogworker::DependencyFailed when one dies or is discarded; with --after-any\n"
	  "it runs once they all settled, however. A jid named must exist (or have settled in\n"
	  "the last 10 minutes); at most 1000 of them.\n"
	  DURATIONS_AND_TIMES },
	{ "stats", cmd_stats, "stats",
	  "processed, failed, queued, scheduled, retry, dead, busy; hourly throughput",
	  "The counters cogworker's dashboard shows, and the last 24 hours of throughput." },
	{ "queues", cmd_queues,
	  "queues [list]\nqueues pause|resume QUEUE\nqueues clear QUEUE --yes",
	  "queues with size, latency, paused; pause, resume, clear",
	  "latency is the age of a queue's oldest job. A paused queue keeps its jobs; no\n"
	  "process takes any from it until it is resumed." },
	{ "jobs", cmd_jobs,
	  "jobs list [--set queued|scheduled|retry|dead|running|waiting|after|group]\n"
	  "          [--queue Q] [--class C] [--limit N]\n"
	  "jobs show [--full] JID\n"
	  "jobs retry [--set S] [--expires-in D] JID...\n"
	  "jobs delete|kill [--set S] JID...\n"
	  "jobs retry --all --set retry|dead|scheduled [--queue Q] [--class C]\n"
	  "           [--expires-in D]\n"
	  "jobs delete|kill --all --set S [--queue Q] [--class C] --yes\n"
	  "jobs reschedule JID MINUTES|D\n"
	  "jobs log JID [--run N] [--follow]\n"
	  "jobs cancel JID [--discard]",
	  "list, show, retry, delete, kill, reschedule, cancel jobs; show a run's output",
	  "show: where the job is (or how it ended), its payload, error, attempts (its runs\n"
	  "in history, each with outcome, run time and cost) and status (with progress);\n"
	  "args and payloads over 2 KiB are cut (their size shown) unless --full.\n"
	  "retry puts retry, dead or scheduled entries back on their queue; one whose own\n"
	  "deadline (expires_at) has passed only with --expires-in D, its new deadline D from\n"
	  "now, as a daemon would bury it again at once. kill moves scheduled or retry entries\n"
	  "to dead; reschedule moves a scheduled or retry entry to MINUTES (a whole number, 1 to\n"
	  "10080) or D (with a unit, up to 1w) from now. A JID may also be an entry's exact\n"
	  "text (for unparseable entries).\n"
	  "log: the output of the job's last run (or run N) as kept by output_keep; --follow\n"
	  "streams a running job's output and ends with its outcome.\n"
	  "cancel: stop a running job's handler (TERM, kill_grace, KILL); it goes to dead as\n"
	  "Cogworker::Cancelled, or is dropped with --discard.\n"
	  DURATIONS_AND_TIMES },
	{ "processes", cmd_processes,
	  "processes [list]\nprocesses quiet|resume|stop IDENTITY|PID...|--all   (stop --all needs --yes)",
	  "live processes; quiet, resume or stop them",
	  "quiet: fetch nothing new, finish what runs; resume undoes it; stop: drain and exit\n"
	  "(exit 0, so systemd leaves it stopped). A process is named by its identity\n"
	  "(host:pid:id, as listed) or by its pid when no other live process has that pid." },
	{ "periodic", cmd_periodic, "periodic [list]\nperiodic run|enable|disable PJID",
	  "periodic (cron) entries; run one now, enable, disable",
	  "A PJID may be abbreviated to an unambiguous prefix. enable and disable act across\n"
	  "the fleet." },
	{ "history", cmd_history,
	  "history [--class C] [--status success|failed] [--since T] [--limit N]",
	  "finished runs, newest first, and per-day counts",
	  "Needs daemons with history_retention_days > 0. A duration T counts back from now.\n"
	  DURATIONS_AND_TIMES },
	{ "exec", cmd_exec,
	  "exec [--json-args JSON] [--queue Q] [--retry N|false] [--jid JID] [--timeout D]\n"
	  "     CLASS [ARG...]",
	  "run CLASS's handler once, locally, as the daemon would (no Redis)",
	  "Shows the exit, stdout, stderr, timing and where the daemon would send the job\n"
	  "(success, retrying, dead, discarded). --timeout D replaces the handler's timeout\n"
	  "(0: none); D is a duration as push takes one (90, 90s, 5m)." },
	{ "limits", cmd_limits, "limits",
	  "fleet_concurrency slots and their holders, waiters, rate_limit windows",
	  "Per handler class, as Redis holds them; a class shows up once a job of it started,\n"
	  "or was turned away, under such a limit. max_concurrency is per process: see each\n"
	  "daemon's /metrics." },
	{ "groups", cmd_groups, "groups [--handler CLASS]",
	  "fair share: each group's running and set-aside jobs, and its limits",
	  "Per handler class with group_by and a group limit; a group shows up while jobs of\n"
	  "it run or wait. WAITING counts the jobs set aside in the group's line (they are in\n"
	  "no queue), RUNNING its slots held (a job brought back to its queue holds one)." },
	{ "metrics", cmd_metrics, "metrics",
	  "cogworker's Prometheus exposition (the eight fleet-wide metrics)",
	  "For a node_exporter textfile collector. The daemon's own /metrics has more." },
	{ "top", cmd_top, "top",
	  "a live view of processes, running jobs, queues and failures",
	  "Refreshed every second, with keys to quiet a process, pause a queue, retry a dead\n"
	  "job or cancel a running one; a one-shot snapshot when stdout is not a terminal." },
	{ "web", cmd_web,
	  "web [--listen ADDR:PORT] [--read-only] [--auth-file FILE]\n"
	  "    [--tls-cert FILE --tls-key FILE | --insecure-http]\n"
	  "web passwd [--auth-file FILE] [--token] USER",
	  "a dashboard in the browser, with its JSON API",
	  "Serves the overview, queues, jobs, processes, periodic, limits and history pages\n"
	  "on ADDR:PORT (default 127.0.0.1:9395) until stopped. An address that is not a\n"
	  "loopback one needs --auth-file: its users log in (passwd adds or replaces one; it\n"
	  "reads the password on standard input; --token makes one for scripts, sent as\n"
	  "Authorization: Bearer USER:TOKEN), and HTTPS: --tls-cert and --tls-key (PEM), or\n"
	  "--insecure-http behind a TLS-terminating proxy. --read-only refuses every action.\n"
	  "Each action is logged on stderr with who did it." },
	{ "batch", cmd_batch,
	  "batch new [--description TEXT] [--on-success CLASS] [--on-complete CLASS]\n"
	  "          [--on-death CLASS] [--callback-args JSON] [--callback-queue Q]\n"
	  "          [--parent BID] [--expires-in D]\n"
	  "batch commit|show|cancel BID   (cancel needs --yes)\n"
	  "batch list\n"
	  "batch settle [--outcome success|dead|discarded] BID JID",
	  "batches of jobs with callbacks: open, commit, show, list, cancel, settle by hand",
	  "new prints the bid; push --batch BID adds jobs; commit closes it to outside additions\n"
	  "(its members still running may add more). Callbacks are jobs pushed once: on_death at\n"
	  "the first member that died, on_complete when every member settled, on_success when\n"
	  "every member succeeded (also after a dead member was retried and succeeded). Not\n"
	  "committed within --expires-in (1 day), it expires and fires nothing. --parent makes it\n"
	  "a member of BID. cancel deletes members not yet run and cancels running ones;\n"
	  "nothing fires. settle counts a member as settled (one a Ruby worker ran).\n"
	  DURATIONS_AND_TIMES },
	{ NULL, NULL, NULL, NULL, NULL },
};

static const char *const global_usage =
	"usage: cogworkerctl [-c FILE] [--tls-* ...] [--json] [--yes] COMMAND ...\n"
	"       cogworkerctl --version | help [COMMAND] | COMMAND --help\n";

static const struct command *find_command(const char *name)
{
	for (const struct command *cmd = commands; cmd->name; cmd++)
		if (strcmp(cmd->name, name) == 0)
			return cmd;
	return NULL;
}

/* Each usage line after "cogworkerctl ", the first after "usage: "; a line that starts
 * with a space goes on the one before it. */
static void print_usage_lines(FILE *to, const char *usage)
{
	const char *p = usage;
	for (int i = 0; *p; i++) {
		size_t n = strcspn(p, "\n");
		if (*p == ' ')
			fprintf(to, "       %13s%.*s\n", "", (int)n, p);
		else
			fprintf(to, "%scogworkerctl %.*s\n", i == 0 ? "usage: " : "       ", (int)n, p);
		p += n + (p[n] == '\n');
	}
}

static void overview(FILE *to)
{
	fputs(global_usage, to);
	fputs("\ncommands:\n", to);
	for (const struct command *cmd = commands; cmd->name; cmd++)
		fprintf(to, "  %-10s %s\n", cmd->name, cmd->summary);
	fputs("\noptions:\n"
	      "  -c FILE    the conf to read the Redis settings from (default " DEFAULT_CONF_PATH
	      "\n             when readable); REDIS_URL, when set, replaces its redis.url\n"
	      "  --tls-ca-file FILE, --tls-cert-file FILE, --tls-key-file FILE,\n"
	      "  --tls-server-name NAME, --tls-no-verify\n"
	      "             replace redis.tls's ca_file, cert_file, key_file, server_name and\n"
	      "             verify, for a rediss:// url\n"
	      "  --json     one JSON document on stdout (also after the command)\n"
	      "  --yes      confirm a destructive action (also after the command)\n"
	      "  --version  print the version\n"
	      "\nexit status: 0 done; 1 not found or nothing done; 2 usage, Redis or conf error.\n"
	      "'cogworkerctl help COMMAND' (or COMMAND --help) for a command's options.\n", to);
}

static void command_help(const char *name)
{
	const struct command *cmd = find_command(name);
	if (!cmd) {
		overview(stdout);
		return;
	}
	print_usage_lines(stdout, cmd->usage);
	printf("\n%s.\n\n%s\n", cmd->summary, cmd->help);
	printf("\n--json and --yes may follow the command; see cogworkerctl(1).\n");
}

static int cmd_help(int argc, char **argv)
{
	if (argc > 2 || (argc == 2 && !find_command(argv[1]))) {
		ctl_error("help: no command \"%s\" (try cogworkerctl help)", argv[argc - 1]);
		return CTL_USAGE;
	}
	if (argc == 2)
		command_help(argv[1]);
	else
		overview(stdout);
	return CTL_OK;
}

/*
 * Where the Redis settings came from, when that is worth a line on stderr (see the top of
 * the file), and the source to name in a connection error.
 */
static void redis_origin(struct ctl *c, const char *path, char *src, size_t n)
{
	const struct redis_conf *rc = &c->conf.redis;
	if (rc->url_from_env) {
		snprintf(src, n, "REDIS_URL");
		if (rc->url_in_file)
			c->notice = xasprintf("using REDIS_URL (%s), not redis.url of %s", rc->display,
			                      path);
	} else if (path && rc->url_in_file) {
		snprintf(src, n, "redis.url of %s", path);
	} else if (path && rc->sentinels.n > 0) {
		/* The sentinels give the address; the default url only its db 0, no password. */
		snprintf(src, n, "redis.sentinels of %s", path);
	} else if (path) {
		snprintf(src, n, "the default url: %s sets no redis.url", path);
		c->notice = xasprintf("%s sets no redis.url and REDIS_URL is unset: using %s",
		                      path, rc->display);
	} else {
		snprintf(src, n, "the default url: no conf file");
		c->notice = xasprintf("no conf file (%s is not readable) and REDIS_URL is unset: "
		                      "using %s", DEFAULT_CONF_PATH, rc->display);
	}
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		{ "yes", no_argument, NULL, 'y' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ "tls-ca-file", required_argument, NULL, 'A' },
		{ "tls-cert-file", required_argument, NULL, 'E' },
		{ "tls-key-file", required_argument, NULL, 'K' },
		{ "tls-server-name", required_argument, NULL, 'N' },
		{ "tls-no-verify", no_argument, NULL, 'I' },
		{ 0, 0, 0, 0 },
	};
	const char *path = NULL;
	struct conf_overrides ov = { 0 };
	struct ctl c;
	memset(&c, 0, sizeof c);
	c.help = command_help;
	int ch;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "+c:hV", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c': path = optarg; break;
		case 'j': c.json = 1; break;
		case 'y': c.yes = 1; break;
		case 'h': overview(stdout); return CTL_OK;
		case 'V': printf("cogworkerctl %s\n", COGWORKERD_VERSION); return CTL_OK;
		case 'A': ov.tls_ca_file = optarg; break;
		case 'E': ov.tls_cert_file = optarg; break;
		case 'K': ov.tls_key_file = optarg; break;
		case 'N': ov.tls_server_name = optarg; break;
		case 'I': ov.tls_no_verify = 1; break;
		default:
			ctl_error("unknown option or missing argument: %s (try --help)",
			          argv[optind - 1]);
			return CTL_USAGE;
		}
	}
	if (optind >= argc) {
		overview(stderr);
		return CTL_USAGE;
	}
	const char *name = argv[optind];
	if (strcmp(name, "help") == 0)
		return cmd_help(argc - optind, argv + optind);
	const struct command *cmd = find_command(name);
	if (!cmd) {
		ctl_error("unknown command \"%s\" (try cogworkerctl help)", name);
		return CTL_USAGE;
	}
	if (!path && access(DEFAULT_CONF_PATH, R_OK) == 0)
		path = DEFAULT_CONF_PATH;
	char err[1024];
	if (conf_load(path, &ov, &c.conf, err, sizeof err) != 0) {
		ctl_error("%s", err);
		return CTL_USAGE;
	}
	char src[4200];
	redis_origin(&c, path, src, sizeof src);
	log_set_level(LOG_WARN);
	rconn_init(&c.r, &c.conf.redis);
	c.origin = src;
	optind++;
	int status = cmd->fn(&c, argc - optind + 1, argv + optind - 1);
	free(c.notice);
	rconn_free(&c.r);
	conf_free(&c.conf);
	return status;
}
