/* SPDX-License-Identifier: MIT */
/*
 * push.c: `cogworkerctl push`: enqueue a job by the producer rules (doc/protocol.md §5).
 *
 * Args are strings by default (`push Echo a b` → ["a","b"]); --json-args gives typed
 * ones verbatim (their text is kept byte for byte, big integers included). --stdin pushes
 * one job per input line: each line is a JSON array of args (sequential single
 * pushes, as the protocol has bulk pushes). --in D / --at T schedule it; --expires-in D /
 * --expires-at T give it a deadline (the member expires_at, doc/protocol.md §7.31): D counts
 * from when the job is due (now, or its --in / --at time). D and T are read as every
 * command reads them (src/timearg.h).
 *
 * --batch BID and --after JID,... (doc/protocol.md §7.34) go through BATCH_PUSH. Each
 * dependency is looked up first: settled lately (its settled record), or found in a queue,
 * a set, a process or the waiting set; one found nowhere is refused as unknown, a dead one
 * unless --after-any (with it, a dead one is met, its settled record written again if it
 * had expired); more than PUSH_MAX_AFTER of them are refused before any look. Run by
 * a handler, the push names its job (COGWORKER_JID) as the adder, so a running member may
 * add to its committed batch.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ctl.h"
#include "job.h"
#include "json.h"
#include "producer.h"
#include "util.h"
#include "workflow.h"

/* The time options as given; resolved together, since each bounds the others. */
struct when {
	const char *in, *at, *expires_in, *expires_at;
};

/*
 * When the job is due (p->at: 0 = now, else an epoch) and its deadline (the member
 * expires_at, into expires), read by the grammar of every time argument (src/timearg.h).
 * Refused with a line that says why: what cannot make sense, like an --at before 2001 (the
 * producer would take it for a delay, and it is long past), a deadline of 0 or one that
 * comes before the job is due (the job would be buried unrun, as expired).
 */
static int resolve_times(const struct when *w, struct push *p, char expires[64])
{
	double now = now_float(), in, at = 0, exp_in, exp_at = 0;
	char iso[32];
	if (w->in && w->at) {
		ctl_error("push: --in and --at don't mix");
		return -1;
	}
	if (w->expires_in && w->expires_at) {
		ctl_error("push: --expires-in and --expires-at don't mix");
		return -1;
	}
	if (w->in) {
		if (ctl_duration_arg("push --in", w->in, NULL, &in) != 0)
			return -1;
		at = now + in;
	}
	if (w->at) {
		if (ctl_time_arg("push --at", w->at, now, 1, &at) < 0)
			return -1;
		if (at < 1e9) {
			ctl_iso_time(at, iso);
			ctl_error("push --at: \"%s\" is %s; for a delay give --in %s", w->at, iso, w->at);
			return -1;
		}
	}
	p->at = at;
	double due = at > 0 ? at : now;
	if (w->expires_in) {
		if (ctl_duration_arg("push --expires-in", w->expires_in,
		                     "would expire the job the moment it is due", &exp_in) != 0)
			return -1;
		exp_at = due + exp_in;
	}
	if (w->expires_at) {
		if (ctl_time_arg("push --expires-at", w->expires_at, now, 1, &exp_at) < 0)
			return -1;
		if (exp_at <= due) {
			ctl_iso_time(exp_at, iso);
			ctl_error("push --expires-at: \"%s\" (%s) is not after the job is due (%s): "
			          "it would be buried unrun, as expired", w->expires_at, iso,
			          at > 0 ? "its --in or --at" : "now");
			return -1;
		}
	}
	if (exp_at > 0) {
		char t[32];
		job_format_time(exp_at, t);
		snprintf(expires, 64, "\"expires_at\":%s", t);
		p->extra = expires;
	}
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

/*
 * A unique push refused: say which job holds the lock and where it is, since that is what
 * to act on (delete it, wait for it), or that it is nowhere (a job lost with its process:
 * the lock lasts its TTL). Read after the refusal, so it may already have gone.
 */
static void say_lock_holder(struct ctl *c, const struct push *p)
{
	char *key = job_unique_key(p->cls, p->queue ? p->queue : "default", p->args_json);
	redisReply *rep = key ? rcmd(&c->r, "GET %s", key) : NULL;
	char *holder = rep && rep->type == REDIS_REPLY_STRING ? xstrdup(rep->str) : NULL;
	char where[256] = "", ttl[32] = "";
	if (rep)
		freeReplyObject(rep);
	int found = holder ? ctl_job_whereabouts(c, holder, where, sizeof where) : -1;
	if (holder && found == 0) {
		rep = rcmd(&c->r, "TTL %s", key);
		ctl_duration(rep && rep->type == REDIS_REPLY_INTEGER ? (double)rep->integer : 0, ttl,
		             sizeof ttl);
		if (rep)
			freeReplyObject(rep);
		snprintf(where, sizeof where, "in no queue or set (lost with its process?)");
	}
	if (c->json) {
		struct sbuf b;
		sb_init(&b);
		sb_adds(&b, "{\"jid\":null,\"skipped\":\"unique lock held\",\"held_by\":");
		jstr(&b, holder);
		sb_adds(&b, ",\"held_where\":");
		jstr(&b, where[0] ? where : NULL);
		sb_addc(&b, '}');
		jprint(&b);
	} else if (!holder) {
		ctl_error("not pushed: an identical unique job held its lock a moment ago, and it is "
		          "free now: push again");
	} else if (found == 0) {
		ctl_error("not pushed: an identical unique job holds its lock (%s): jid %s, %s; the "
		          "lock expires in %s, or DEL it", key, holder, where, ttl);
	} else {
		ctl_error("not pushed: an identical unique job holds its lock: jid %s%s%s; deleting "
		          "it (cogworkerctl jobs delete %s) releases the lock", holder,
		          where[0] ? ", " : "", where, holder);
	}
	free(holder);
	free(key);
}

/*
 * A dependency found in dead whose settled record expired (it died over SETTLED_TTL ago):
 * its record again (SET NX, a record written meanwhile wins), so that BATCH_PUSH counts it
 * as what it is, settled dead: met with --after-any. Without the record it counted unmet,
 * and the job waited for a settle that had happened long ago.
 */
static int restore_dead_record(struct ctl *c, const char *dep)
{
	redisReply *rep = rcmd(&c->r, "SET " K_SETTLED "%s " SETTLED_DEAD " EX " SETTLED_TTL " NX",
	                       dep);
	if (!rep)
		return ctl_redis_error(c, "push --after-any");
	freeReplyObject(rep);
	return CTL_OK;
}

/*
 * Where a dependency is now: 1 somewhere (`where` says where, "" when settled or waiting),
 * 0 nowhere, -1 on an error (said). A job moves only forward through waiting (after) ->
 * queued -> fetched/running -> settled, so the places are looked at in that order: a job
 * that moves on while we look is found in the place it moved to. A look at the queues
 * before it left the waiting set and one at the waiting set after it came back would
 * both miss it (DP-2 refused a parent released mid-look). Scheduled and retry jobs move
 * back to a queue, which the search has looked at already; the caller looks twice.
 */
static int dependency_whereabouts(struct ctl *c, const char *dep, char *where, size_t n)
{
	where[0] = '\0';
	redisReply *rep = rcmd(&c->r, "ZSCORE " K_BATCH_WAITING " %s", dep);
	if (!rep) {
		ctl_redis_error(c, "push --after");
		return -1;
	}
	int found = rep->type == REDIS_REPLY_STRING;
	freeReplyObject(rep);
	if (found)
		return 1;
	found = ctl_job_whereabouts(c, dep, where, n);
	if (found != 0)
		return found;
	rep = rcmd(&c->r, "GET " K_SETTLED "%s", dep);
	if (!rep) {
		ctl_redis_error(c, "push --after");
		return -1;
	}
	found = rep->type == REDIS_REPLY_STRING && strcmp(rep->str, SETTLED_WAITED) != 0;
	freeReplyObject(rep);
	return found;
}

/* 0 when every dependency exists (settled lately, or somewhere), else refused (said). */
static int dependencies_ok(struct ctl *c, const struct push *p)
{
	for (int i = 0; i < p->nafter; i++) {
		const char *dep = p->after[i];
		redisReply *rep = rcmd(&c->r, "GET " K_SETTLED "%s", dep);
		if (!rep)
			return ctl_redis_error(c, "push --after");
		int settled = rep->type == REDIS_REPLY_STRING && strcmp(rep->str, SETTLED_WAITED) != 0;
		freeReplyObject(rep);
		if (settled)
			continue;       /* BATCH_PUSH judges the outcome */
		char where[256];
		int found = dependency_whereabouts(c, dep, where, sizeof where);
		if (found == 0)
			found = dependency_whereabouts(c, dep, where, sizeof where);
		if (found < 0)
			return CTL_USAGE;
		if (!found) {
			ctl_error("push --after: no job %s: not queued, scheduled, retrying, dead, "
			          "running or waiting, nor settled in the last 10 minutes", dep);
			return CTL_USAGE;
		}
		if (strncmp(where, "in dead", 7) == 0 && !p->after_any) {
			ctl_error("push --after: %s is %s: this job would be buried at once (with "
			          "--after-any it runs once the others settled)", dep, where);
			return CTL_USAGE;
		}
		if (strncmp(where, "in dead", 7) == 0 && restore_dead_record(c, dep) != CTL_OK)
			return CTL_USAGE;
	}
	return CTL_OK;
}

static int push_one(struct ctl *c, struct push *p)
{
	char jid[25], err[512];
	int waiting = 0;
	if (p->nafter && dependencies_ok(c, p) != CTL_OK)
		return CTL_USAGE;
	int r = producer_push_flow(&c->r, p, jid, err, sizeof err, &waiting);
	if (r < 0) {
		ctl_error("push failed: %s", err);
		return CTL_USAGE;
	}
	if (r == 0) {
		say_lock_holder(c, p);
		return CTL_NOTHING;
	}
	if (c->json && (p->nafter || p->bid))
		printf("{\"jid\":\"%s\",\"waiting\":%s}\n", jid, waiting ? "true" : "false");
	else if (c->json)
		printf("{\"jid\":\"%s\"}\n", jid);
	else
		printf("%s\n", jid);
	return CTL_OK;
}

/* --after's list, split at commas into p (the strings point into list, which is kept). */
static int read_after(char *list, struct push *p, const char ***out)
{
	int n = 1;
	for (const char *s = list; *s; s++)
		n += *s == ',';
	const char **v = xcalloc((size_t)n, sizeof *v);
	int k = 0;
	for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
		if (*t)
			v[k++] = t;
	char err[160];
	if (k == 0 || producer_after_ok(k, err, sizeof err) != 0) {
		free(v);
		if (k == 0)
			ctl_error("push --after: which jids? (JID[,JID...])");
		else
			ctl_error("push --after: %s", err);
		return -1;
	}
	p->after = v;
	p->nafter = k;
	*out = v;
	return 0;
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
		{ "batch", required_argument, NULL, 'B' },
		{ "after", required_argument, NULL, 'A' },
		{ "after-any", no_argument, NULL, 'Y' },
		CTL_COMMON_OPTS,
		{ 0, 0, 0, 0 },
	};
	struct push p = { .unique_lock_ttl = c->conf.unique_lock_ttl,
	                  .status_expiration = c->conf.status_expiration };
	const char *json_args = NULL;
	struct when w = { 0 };
	int from_stdin = 0, ch;
	char retry[32], expires[64], *after = NULL;
	const char **after_v = NULL;
	ctl_getopt_reset();
	while ((ch = getopt_long(argc, argv, "+q:", opts, NULL)) != -1) {
		switch (ch) {
		case 'q': p.queue = optarg; break;
		case 'i': w.in = optarg; break;
		case 'a': w.at = optarg; break;
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
		case 'E': w.expires_in = optarg; break;
		case 'X': w.expires_at = optarg; break;
		case 'B': p.bid = optarg; break;
		case 'A': after = optarg; break;
		case 'Y': p.after_any = 1; break;
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
	if (!ctl_job_strings_ok("push", p.cls, p.queue, p.jid, from_stdin ? 0 : argc - optind,
	                        argv + optind))
		return CTL_USAGE;
	if (p.queue && !ctl_queue_name_ok("push", p.queue))
		return CTL_USAGE;
	if (json_args && (optind < argc || from_stdin)) {
		ctl_error("push: --json-args and plain ARGs (or --stdin) don't mix");
		return CTL_USAGE;
	}
	if (resolve_times(&w, &p, expires) != 0)
		return CTL_USAGE;
	if (p.after_any && !after) {
		ctl_error("push: --after-any goes with --after JID[,JID...]");
		return CTL_USAGE;
	}
	if (p.bid && !*p.bid) {
		ctl_error("push --batch: the bid is empty");
		return CTL_USAGE;
	}
	if (p.bid || after)
		p.adder = getenv("COGWORKER_JID");
	if (after && read_after(after, &p, &after_v) != 0)
		return CTL_USAGE;
	if (json_args && !ctl_args_json_ok("push: --json-args", json_args))
		return CTL_USAGE;
	if (ctl_connect(c) != 0)
		return CTL_USAGE;
	if (p.queue)
		ctl_warn_unread_queue(c, p.queue);
	int status;
	if (from_stdin) {
		status = push_stdin(c, &p);
	} else {
		char *args = json_args ? NULL : strings_as_json(argc - optind, argv + optind);
		p.args_json = json_args ? json_args : args;
		status = push_one(c, &p);
		free(args);
	}
	free(after_v);
	return status;
}
