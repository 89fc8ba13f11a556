/* SPDX-License-Identifier: MIT */
/*
 * push.c: `cogworkerctl push`: enqueue a job by the producer rules (doc/protocol.md §5).
 *
 * Args are strings by default (`push Echo a b` → ["a","b"]); --json-args gives typed
 * ones verbatim (their text is kept byte for byte, big integers included). --stdin pushes
 * one job per input line: each line is a JSON array of args (sequential single
 * pushes, as the protocol has bulk pushes). --expires-in S / --expires-at T give the job a
 * deadline (the member expires_at, doc/protocol.md §7.31): S counts from when the job is due
 * (now, or its --in / --at time).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "ctl.h"
#include "job.h"
#include "json.h"
#include "producer.h"
#include "util.h"

static int parse_time(const char *s, double *out)
{
	char *end;
	double d = strtod(s, &end);
	if (*end == '\0' && end != s) {
		*out = d;
		return 0;
	}
	struct tm tm;
	memset(&tm, 0, sizeof tm);
	const char *rest = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!rest)
		rest = strptime(s, "%Y-%m-%d %H:%M:%S", &tm);
	if (!rest || (*rest && strcmp(rest, "Z") != 0 && strcmp(rest, "+00:00") != 0))
		return -1;
	*out = (double)timegm(&tm);
	return 0;
}

static char *strings_as_json(int n, char **v)
{
	struct sbuf b;
	sb_init(&b);
	sb_addc(&b, '[');
	for (int i = 0; i < n; i++) {
		char *q = json_quote(v[i], strlen(v[i]));
		sb_printf(&b, "%s%s", i ? "," : "", q);
		free(q);
	}
	sb_addc(&b, ']');
	return sb_steal(&b);
}

static int push_one(struct ctl *c, struct push *p)
{
	char jid[25], err[512];
	int r = producer_push(&c->r, p, jid, err, sizeof err);
	if (r < 0) {
		ctl_error("push failed: %s", err);
		return CTL_USAGE;
	}
	if (r == 0) {
		if (c->json)
			printf("{\"jid\":null,\"skipped\":\"unique lock held\"}\n");
		else
			ctl_error("not pushed: an identical unique job holds its lock");
		return CTL_NOTHING;
	}
	if (c->json)
		printf("{\"jid\":\"%s\"}\n", jid);
	else
		printf("%s\n", jid);
	return CTL_OK;
}

static int push_stdin(struct ctl *c, struct push *p)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int status = CTL_OK, lineno = 0;
	while ((n = getline(&line, &cap, stdin)) > 0) {
		lineno++;
		while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			line[--n] = '\0';
		if (n == 0)
			continue;
		char what[48];
		snprintf(what, sizeof what, "stdin line %d", lineno);
		if (!ctl_args_json_ok(what, line)) {
			status = CTL_USAGE;
			continue;
		}
		p->args_json = line;
		int s = push_one(c, p);
		if (s == CTL_USAGE) {
			free(line);
			return s;
		}
		if (s != CTL_OK)
			status = s;
	}
	free(line);
	return status;
}

int cmd_push(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "queue", required_argument, NULL, 'q' },
		{ "in", required_argument, NULL, 'i' },
		{ "at", required_argument, NULL, 'a' },
		{ "retry", required_argument, NULL, 'r' },
		{ "unique", no_argument, NULL, 'u' },
		{ "json-args", required_argument, NULL, 'J' },
		{ "jid", required_argument, NULL, 'j' },
		{ "stdin", no_argument, NULL, 's' },
		{ "expires-in", required_argument, NULL, 'E' },
		{ "expires-at", required_argument, NULL, 'X' },
		CTL_COMMON_OPTS,
		{ 0, 0, 0, 0 },
	};
	struct push p = { .unique_lock_ttl = c->conf.unique_lock_ttl,
	                  .status_expiration = c->conf.status_expiration };
	const char *json_args = NULL;
	int from_stdin = 0, ch;
	char retry[32], expires[64];
	double expires_in = -1, expires_at = 0;
	ctl_getopt_reset();
	while ((ch = getopt_long(argc, argv, "+q:", opts, NULL)) != -1) {
		switch (ch) {
		case 'q': p.queue = optarg; break;
		case 'i': {
			char *end;
			double s = strtod(optarg, &end);
			if (*end || s < 0) {
				ctl_error("--in wants seconds, not \"%s\"", optarg);
				return CTL_USAGE;
			}
			p.at = now_float() + s;
			break;
		}
		case 'a':
			if (parse_time(optarg, &p.at) != 0) {
				ctl_error("--at wants an epoch or an ISO 8601 UTC time, not \"%s\"", optarg);
				return CTL_USAGE;
			}
			break;
		case 'r':
			if (strcmp(optarg, "false") == 0 || strcmp(optarg, "true") == 0) {
				snprintf(retry, sizeof retry, "%s", optarg);
			} else {
				char *end;
				long n = strtol(optarg, &end, 10);
				if (*end || n < 0) {
					ctl_error("--retry wants a count, true or false, not \"%s\"", optarg);
					return CTL_USAGE;
				}
				snprintf(retry, sizeof retry, "%ld", n);
			}
			p.retry_json = retry;
			break;
		case 'u': p.unique = 1; break;
		case 'J': json_args = optarg; break;
		case 'j': p.jid = optarg; break;
		case 's': from_stdin = 1; break;
		case 'E': {
			char *end;
			expires_in = strtod(optarg, &end);
			if (*end || end == optarg || !(expires_in >= 0)) {
				ctl_error("--expires-in wants seconds, not \"%s\"", optarg);
				return CTL_USAGE;
			}
			break;
		}
		case 'X':
			if (parse_time(optarg, &expires_at) != 0 || !(expires_at > 0)) {
				ctl_error("--expires-at wants an epoch or an ISO 8601 UTC time, not \"%s\"",
				          optarg);
				return CTL_USAGE;
			}
			break;
		default:
			if (!ctl_common_opt(c, ch, argv))
				return CTL_USAGE;
		}
	}
	if (optind >= argc) {
		ctl_error("push: which CLASS?");
		return CTL_USAGE;
	}
	p.cls = argv[optind++];
	if (!*p.cls) {
		ctl_error("push: CLASS is empty: a job needs the name of its class");
		return CTL_USAGE;
	}
	if (p.queue && (!*p.queue || strchr(p.queue, ' '))) {
		ctl_error("push: bad queue name \"%s\"", p.queue);
		return CTL_USAGE;
	}
	if (json_args && (optind < argc || from_stdin)) {
		ctl_error("push: --json-args and plain ARGs (or --stdin) don't mix");
		return CTL_USAGE;
	}
	if (expires_in >= 0 && expires_at > 0) {
		ctl_error("push: --expires-in and --expires-at don't mix");
		return CTL_USAGE;
	}
	if (expires_in >= 0)
		expires_at = (p.at <= 0 ? now_float() : p.at < 1e9 ? now_float() + p.at : p.at) +
		             expires_in;
	if (expires_at > 0) {
		char t[32];
		job_format_time(expires_at, t);
		snprintf(expires, sizeof expires, "\"expires_at\":%s", t);
		p.extra = expires;
	}
	if (json_args && !ctl_args_json_ok("push: --json-args", json_args))
		return CTL_USAGE;
	if (ctl_connect(c) != 0)
		return CTL_USAGE;
	if (from_stdin)
		return push_stdin(c, &p);
	char *args = json_args ? NULL : strings_as_json(argc - optind, argv + optind);
	p.args_json = json_args ? json_args : args;
	int status = push_one(c, &p);
	free(args);
	return status;
}
