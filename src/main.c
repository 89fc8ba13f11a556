/* SPDX-License-Identifier: MIT */
/*
 * main.c: cogworkerd's command line. Everything else happens in manager.c.
 *
 *   cogworkerd [-c FILE] [-C CONCURRENCY] [-q QUEUE[,WEIGHT]]... [-n|--check [--connect]]
 *              [-V] [-h]
 *
 * Exit status: 0 after a clean stop (or a valid --check), 1 on a runtime failure to
 * start (or a --check --connect that could not reach Redis), 2 on a usage or
 * configuration error (naming the file and line).
 *
 * --check --connect also connects to Redis as the daemon would (the sentinels, TLS, AUTH,
 * SELECT) and sends a PING, so that what only a server can refuse (an unknown CA, a name
 * mismatch, a missing client certificate, a wrong password) is found before a start.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "confine.h"
#include "cgcaps.h"
#include "handler.h"
#include "jobcg.h"
#include "manager.h"
#include "redis.h"
#include "util.h"

static void usage(FILE *to)
{
	fprintf(to,
	        "usage: cogworkerd [-c FILE] [-C CONCURRENCY] [-q QUEUE[,WEIGHT]]... "
	        "[--check [--connect]]\n"
	        "  -c FILE         conf file (default " DEFAULT_CONF_PATH ")\n"
	        "  -C N            concurrency: handler children at once\n"
	        "  -q Q[,W]        a queue to read, with an optional weight (repeatable;\n"
	        "                  replaces the conf's queues)\n"
	        "  -n, --check     validate the conf (and that every command can be run) and exit\n"
	        "      --connect   with --check: also connect to Redis and PING it\n"
	        "  -V, --version   print the version\n"
	        "environment: REDIS_URL overrides redis.url\n");
}

static void check_report(void *ctx, const char *problem)
{
	(void)ctx;
	fprintf(stderr, "cogworkerd: %s\n", problem);
}

/*
 * Which containment the daemon would have (jobcg.h), said on stdout; containment =
 * "cgroup" where no cgroup can be had is an error naming its line. 0, or 1.
 */
static int check_containment(const struct conf *conf)
{
	char msg[1024];
	int ok = jobcg_probe(msg, sizeof msg);
	if (!ok && conf->containment == JOBCG_CGROUP) {
		fprintf(stderr, "cogworkerd: %s: containment = \"cgroup\": no cgroup can be had: %s\n",
		        conf->containment_where ? conf->containment_where : "?", msg);
		return 1;
	}
	if (conf->containment == JOBCG_PGROUP)
		printf("containment: process group only (containment = \"process-group\")\n");
	else if (ok)
		printf("containment: cgroup v2, a subtree of its own in %s\n", msg);
	else
		printf("containment: process group only (%s)\n", msg);
	return 0;
}

/* --check --connect: a connection as the daemon makes it, and a PING. 0, or 1. */
static int check_connect(const struct conf *conf)
{
	struct rconn r;
	rconn_init(&r, &conf->redis);
	redisReply *rep = rconn_connect(&r, 1) == 0 ? rcmd(&r, "PING") : NULL;
	int ok = rep != NULL;
	if (ok) {
		char how[512];
		rlink_tls_summary(r.link, how, sizeof how);
		printf("redis: connected to %s (%s), PING answered\n", r.endpoint, how);
		freeReplyObject(rep);
	} else {
		fprintf(stderr, "cogworkerd: redis: %s\n", r.err);
	}
	rconn_free(&r);
	return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "check", no_argument, NULL, 'n' },
		{ "connect", no_argument, NULL, 'k' },
		{ "config", required_argument, NULL, 'c' },
		{ "concurrency", required_argument, NULL, 'C' },
		{ "queue", required_argument, NULL, 'q' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ 0, 0, 0, 0 },
	};
	const char *path = DEFAULT_CONF_PATH;
	struct conf_overrides ov = { 0 };
	int check = 0, connect = 0, ch;
	char *queues[argc + 1];        /* lives as long as main, as the reload needs */
	ov.queues = queues;
	while ((ch = getopt_long(argc, argv, "c:C:q:nVh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			path = optarg;
			break;
		case 'C': {
			char *end;
			long n = strtol(optarg, &end, 10);
			if (*end || n < 1 || n > 10000) {
				fprintf(stderr, "cogworkerd: -C wants a positive integer, not \"%s\"\n", optarg);
				return 2;
			}
			ov.concurrency = (int)n;
			break;
		}
		case 'q':
			ov.queues[ov.nqueues++] = optarg;
			break;
		case 'n':
			check = 1;
			break;
		case 'k':
			connect = 1;
			break;
		case 'V':
			printf("cogworkerd %s\n", COGWORKERD_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (connect && !check) {
		fprintf(stderr, "cogworkerd: --connect goes with --check\n");
		usage(stderr);
		return 2;
	}
	if (optind < argc) {
		fprintf(stderr, "cogworkerd: unexpected argument \"%s\"\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	struct conf conf;
	char err[1024];
	if (conf_load(path, &ov, &conf, err, sizeof err) != 0) {
		fprintf(stderr, "cogworkerd: %s\n", err);
		return 2;
	}
	/* A cap this host can't enforce is a conf error, at --check and at the start alike:
	 * a job must never run uncapped for want of a controller (cgcaps.c). */
	int uncapped = caps_check_conf(&conf, check_report, NULL);
	if (check) {
		int bad = conf_check_commands(&conf, check_report, NULL) + uncapped;
		bad += check_containment(&conf);
		bad += confine_check_conf(&conf, check_report, NULL);
		char **warn;
		int nwarn = conf_warnings(&conf, &warn);
		for (int i = 0; i < nwarn; i++)
			fprintf(stderr, "cogworkerd: warning: %s\n", warn[i]);
		conf_warnings_free(warn, nwarn);
		if (bad == 0)
			printf("%s: configuration OK\n", path);
		int unreachable = bad == 0 && connect ? check_connect(&conf) : 0;
		conf_free(&conf);
		return bad ? 2 : unreachable;
	}
	/* A handler that asks for a confinement this process can't make would fail every job
	 * it runs: as a conf error, not started (a reload is rejected the same way). */
	if (confine_check_conf(&conf, check_report, NULL) || uncapped) {
		conf_free(&conf);
		return 2;
	}
	int status = manager_run(path, &ov, &conf);
	cgcaps_cleanup();
	fflush(stdout);
	fflush(stderr);
	return status;
}
