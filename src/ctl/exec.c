/* SPDX-License-Identifier: MIT */
/*
 * exec.c: `cogworkerctl exec [--json-args JSON] [--queue Q] [--retry N|false] [--jid JID]
 * [--timeout S] CLASS [ARG...]`: run the handler configured for CLASS once, locally, the
 * way a fetcher runs it (doc/protocol.md §1.1, §7.28): the job is built as `push` would build it,
 * the child gets it on stdin with the COGWORKER_* environment, its own process group,
 * the handler's timeout, rlimits, cwd and args_as_argv. It reports the exit, stdout, the
 * stderr tail, the timing, and the outcome the handler's exit-code map gives (success,
 * retrying, dead, killed, discarded) with the error_class / error_message the daemon would
 * write. Nothing is enqueued, fetched or filed: exec never connects to Redis. A job longer
 * than max_job_bytes is not run, as no daemon would read it (exec_too_large, BJ-6).
 *
 * The run request, the error class and message and the failure decision are the daemon's
 * own (outcome.c): only the hooks differ (output kept for the report instead of logged,
 * Ctrl-C as the abort flag), plus --timeout and a longer stderr tail to show.
 *
 * Exit status: 0 the handler succeeded, 1 it failed (any other outcome, no handler
 * included), 2 usage error.
 */
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "cgcaps.h"
#include "ctl.h"
#include "handler.h"
#include "jobs_cut.h"
#include "job.h"
#include "json.h"
#include "outcome.h"
#include "producer.h"
#include "usage.h"
#include "warm.h"

#define STDOUT_MAX (1 << 20)            /* stdout kept for the report */
#define STDERR_KEPT (64 << 10)          /* stderr tail kept for the report */

static atomic_int interrupted;

static void on_signal(int sig)
{
	(void)sig;
	atomic_store(&interrupted, 1);
}

struct out {
	struct sbuf b;
	int truncated;
};

static void stdout_line(void *ctx, const char *line, size_t len)
{
	struct out *o = ctx;
	if (o->b.len + len + 1 > STDOUT_MAX) {
		o->truncated = 1;
		return;
	}
	sb_add(&o->b, line, len);
	sb_addc(&o->b, '\n');
}

/*
 * The ARGs as the JSON array push writes: its length in *len, and at most keep of its
 * first bytes kept. A job over max_job_bytes is so measured, never built: each ARG is
 * escaped alone (at most 128 KiB, the kernel's limit of one), counted, and kept only while
 * the array is shorter than keep (0: measured only).
 */
static char *strings_as_json(int n, char **v, size_t keep, size_t *len)
{
	struct sbuf b, one;
	sb_init(&b);
	sb_init(&one);
	sb_addc(&b, '[');
	size_t total = 1;
	for (int i = 0; i < n; i++) {
		one.len = 0;
		if (i)
			sb_addc(&one, ',');
		jstr(&one, v[i]);
		total += one.len;
		if (b.len < keep)
			sb_add(&b, one.s, one.len < keep - b.len ? one.len : keep - b.len);
	}
	total++;
	if (b.len < keep)
		sb_addc(&b, ']');
	sb_free(&one);
	*len = total;
	return sb_steal(&b);
}

/*
 * A job longer than max_job_bytes: a daemon never reads it, and buries it in dead as an
 * invalid job (doc/protocol.md §7.9 7), so exec does not run it either, and says so with
 * the job's size and its first bytes (as `jobs show` shows a cut job), never all of it.
 * skel is the job built with no ARGs, head the first bytes of its args array.
 */
static int exec_too_large(struct ctl *c, const char *cls, const char *jid, const char *skel,
                          const char *head, size_t size)
{
	long long max = c->conf.max_job_bytes;
	size_t cut = max < JOBS_CUT_HEAD ? (size_t)max : JOBS_CUT_HEAD;
	const char *at = strstr(skel, ",\"args\":[]");       /* the args follow ,"args": */
	struct sbuf b;
	sb_init(&b);
	sb_add(&b, skel, (size_t)(at - skel) + strlen(",\"args\":"));
	sb_adds(&b, head);
	sb_adds(&b, at + strlen(",\"args\":[]"));
	size_t shown = b.len < cut ? b.len : cut;
	char *why = job_too_large_why(size, max);
	if (c->json) {
		struct sbuf o;
		sb_init(&o);
		sb_adds(&o, "{\"class\":");
		jstr(&o, cls);
		sb_printf(&o, ",\"jid\":\"%s\",\"job\":null,\"truncated\":true,\"size\":%zu,"
		          "\"raw\":", jid, size);
		jstrn(&o, b.s, shown);
		sb_adds(&o, ",\"status\":\"too_large\",\"exit_code\":null,\"signal\":null,"
		        "\"pid\":null,\"outcome\":\"dead\",\"error_class\":\"Cogworker::InvalidJob\","
		        "\"error_message\":");
		jstr(&o, why);
		sb_addc(&o, '}');
		jprint(&o);
	} else {
		printf("job        %.*s...\n", (int)shown, b.s);
		printf("size       %zu bytes, more than max_job_bytes (%lld): truncated to its first "
		       "%zu bytes\n", size, max, shown);
		printf("exit       not run: a daemon never reads a job larger than max_job_bytes\n");
		printf("outcome    dead: it would go to dead unread, as an invalid job\n");
		printf("error      Cogworker::InvalidJob: %s\n", why);
	}
	free(why);
	sb_free(&b);
	return CTL_NOTHING;
}

struct report {
	const char *status;         /* exited, signaled, timeout, spawn_failed, aborted, no_handler */
	int exit_code, signal;      /* -1 when not applicable */
	const char *outcome;        /* success, retrying, dead, killed, discarded, aborted */
	const char *why;
};

static const char *const status_name[] = {
	[RUN_EXITED] = "exited", [RUN_SIGNALED] = "signaled", [RUN_TIMEOUT] = "timeout",
	[RUN_SPAWN_FAILED] = "spawn_failed", [RUN_ABORTED] = "aborted",
	[RUN_CANCELLED] = "cancelled", [RUN_WARM_BROKEN] = "warm_broken",
};

/*
 * What each failure decision would do to the job: the outcome as the attempts log files
 * it (--json), and in the report's words. "killed" is the attempts log's word for a job
 * cut short to dead; people read "dead (exit code 3 is in dead_exit_codes)".
 */
static const struct {
	const char *outcome, *said, *why;
} decided[] = {
	[DECIDE_RETRY] = { "retrying", "retrying",
	                   "a failure: it would be retried with the default backoff" },
	[DECIDE_DEAD] = { "dead", "dead", "it would go to dead" },
	[DECIDE_KILLED] = { "killed", "dead", "it would go straight to dead, with no retry" },
	[DECIDE_DISCARD] = { "discarded", "discarded", "it would be dropped" },
};

int cmd_exec(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json-args", required_argument, NULL, 'J' },
		{ "queue", required_argument, NULL, 'q' },
		{ "retry", required_argument, NULL, 'r' },
		{ "jid", required_argument, NULL, 'j' },
		{ "timeout", required_argument, NULL, 't' },
		CTL_COMMON_OPTS,
		{ 0, 0, 0, 0 },
	};
	const char *json_args = NULL;
	struct push p = { 0 };
	double timeout = -1;
	char retry[32];
	int ch;
	ctl_getopt_reset();
	/* "+": the handler's own ARGs may look like options; they follow CLASS. */
	while ((ch = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		switch (ch) {
		case 'J': json_args = optarg; break;
		case 'q': p.queue = optarg; break;
		case 'j': p.jid = optarg; break;
		case 'r':
			if (!strcmp(optarg, "false") || !strcmp(optarg, "true")) {
				snprintf(retry, sizeof retry, "%s", optarg);
			} else {
				char *end;
				long n = strtol(optarg, &end, 10);
				if (*end || end == optarg || n < 0) {
					ctl_error("exec: --retry wants a count, true or false, not \"%s\"", optarg);
					return CTL_USAGE;
				}
				snprintf(retry, sizeof retry, "%ld", n);
			}
			p.retry_json = retry;
			break;
		case 't':
			if (ctl_duration_arg("exec --timeout", optarg, NULL, &timeout) != 0)
				return CTL_USAGE;
			break;
		default:
			if (!ctl_common_opt(c, ch, argv))
				return CTL_USAGE;
		}
	}
	if (optind >= argc) {
		ctl_error("usage: cogworkerctl exec [--json-args JSON] CLASS [ARG...]");
		return CTL_USAGE;
	}
	p.cls = argv[optind++];
	if (!*p.cls) {
		ctl_error("exec: CLASS is empty");
		return CTL_USAGE;
	}
	if (json_args && optind < argc) {
		ctl_error("exec: --json-args and plain ARGs don't mix");
		return CTL_USAGE;
	}
	if (p.queue && !ctl_queue_name_ok("exec", p.queue))
		return CTL_USAGE;
	if (!ctl_job_strings_ok("exec", p.cls, p.queue, p.jid, argc - optind, argv + optind))
		return CTL_USAGE;
	/* Of a job over max_job_bytes no more than that is built (exec_too_large). */
	size_t max = c->conf.max_job_bytes ? (size_t)c->conf.max_job_bytes : SIZE_MAX;
	size_t args_len;
	char *args = NULL;
	if (json_args) {
		if (!ctl_args_json_ok("exec: --json-args", json_args))
			return CTL_USAGE;
		args = xstrdup(json_args);
		args_len = strlen(args);
	} else {
		free(strings_as_json(argc - optind, argv + optind, 0, &args_len));
		args = strings_as_json(argc - optind, argv + optind,
		                       args_len > max ? JOBS_CUT_HEAD : SIZE_MAX, &args_len);
	}

	char jid[25];
	if (p.jid)
		snprintf(jid, sizeof jid, "%s", p.jid);
	else
		new_jid(jid);
	double now = now_float();
	char *skel = producer_build(&p, jid, now, 0);  /* with no ARGs: "args":[] */
	size_t size = strlen(skel) - 2 + args_len;     /* exact: push splices the args' text */
	if (size > max) {
		int st = exec_too_large(c, p.cls, jid, skel, args, size);
		free(skel);
		free(args);
		return st;
	}
	free(skel);
	p.args_json = args;
	char *payload = producer_build(&p, jid, now, 0);
	struct job j;
	job_parse(&j, payload, strlen(payload), p.queue ? p.queue : "default");

	const struct handler *h = conf_find_handler(&c->conf, p.cls);
	struct report rep = { .exit_code = -1, .signal = -1 };
	char said[200] = "";                /* the outcome for people, when it differs */
	struct run_outcome o;
	struct run_result res;
	memset(&res, 0, sizeof res);
	struct out out;
	sb_init(&out.b);
	out.truncated = 0;
	struct job_run run;
	memset(&run, 0, sizeof run);
	int ran = 0;
	if (!h) {
		rep.status = "no_handler";
		outcome_no_handler(&o, p.cls);
	} else if (job_run_init(&run, &j, h, &o) != 0) {
		rep.status = "spawn_failed";
	} else {
		if (timeout >= 0)
			run.req.timeout = timeout;
		/* More stderr to show than the error message is built from. */
		if (run.req.output_tail < STDERR_KEPT)
			run.req.output_tail = STDERR_KEPT;
		run.req.log_tag = "exec";
		run.req.on_stdout_line = stdout_line;
		run.req.ctx = &out;
		run.req.abort = &interrupted;
		struct sigaction sa = { .sa_handler = on_signal }, old_int, old_term;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGINT, &sa, &old_int);
		sigaction(SIGTERM, &sa, &old_term);
		if (h->warm) {
			/* One warm process, started for this job and retired after it: what the
			 * daemon would do with it, protocol faults included. */
			struct warm_pool *wp = warm_pool_new();
			warm_pool_run(wp, h, &run.req, j.raw, j.raw_len, &res);
			warm_pool_free(wp, WARM_STOP_GRACE);
		} else {
			handler_run(&run.req, &res, NULL, NULL);
		}
		sigaction(SIGINT, &old_int, NULL);
		sigaction(SIGTERM, &old_term, NULL);
		cgcaps_cleanup();               /* a capped run's cgroups (cgcaps.c) */
		ran = 1;
		outcome_of_run(&o, &run, &res);
		rep.status = status_name[res.status];
		if (res.status == RUN_EXITED)
			rep.exit_code = res.code;
		else if (res.status == RUN_SIGNALED)
			rep.signal = res.code;
	}
	/* The outcome the exit-code map gives, as the daemon's failure routing decides it. */
	if (o.aborted) {
		rep.outcome = "aborted";
		rep.why = "interrupted: the handler's process group was stopped";
	} else if (o.success) {
		rep.outcome = "success";
		rep.why = "exit 0";
	} else {
		enum decision d = decide_failure(&j, h, &o);
		char reason[160];
		decision_reason(d, &j, &o, reason, sizeof reason);
		rep.outcome = decided[d].outcome;
		rep.why = decided[d].why;
		if (*reason)
			snprintf(said, sizeof said, "%s (%s)", decided[d].said, reason);
		else
			snprintf(said, sizeof said, "%s", decided[d].said);
	}
	double duration = ran ? res.finished - res.started : 0;
	struct run_usage cost;              /* what the run cost (usage.h) */
	if (ran)
		cost = res.usage;
	else
		usage_none(&cost);
	char *stderr_text = ran ? utf8_scrub(res.tail, res.tail_len, 0) : xstrdup("");

	if (c->json) {
		struct sbuf b;
		sb_init(&b);
		sb_adds(&b, "{\"class\":");
		jstr(&b, p.cls);
		sb_printf(&b, ",\"jid\":\"%s\",\"queue\":", jid);
		jstr(&b, j.queue);
		sb_adds(&b, ",\"handler\":");
		jstr(&b, h ? h->class_name : NULL);
		sb_adds(&b, ",\"command\":");
		if (h) {
			sb_addc(&b, '[');
			for (int i = 0; i < h->command.n; i++) {
				if (i)
					sb_addc(&b, ',');
				jstr(&b, h->command.v[i]);
			}
			for (int i = 0; i < run.nextra; i++) {
				sb_addc(&b, ',');
				jstr(&b, run.extra[i]);
			}
			sb_addc(&b, ']');
		} else {
			sb_adds(&b, "null");
		}
		sb_printf(&b, ",\"job\":%s,\"status\":\"%s\",\"exit_code\":", payload, rep.status);
		rep.exit_code >= 0 ? sb_printf(&b, "%d", rep.exit_code) : sb_adds(&b, "null");
		sb_adds(&b, ",\"signal\":");
		rep.signal >= 0 ? sb_printf(&b, "%d", rep.signal) : sb_adds(&b, "null");
		sb_adds(&b, ",\"pid\":");
		ran && res.pid > 0 ? sb_printf(&b, "%d", res.pid) : sb_adds(&b, "null");
		sb_adds(&b, ",\"duration\":");
		jnum(&b, round(duration * 1e6) / 1e6);
		usage_json(&cost, &b);
		sb_adds(&b, ",\"stdout\":");
		jstrn(&b, out.b.s, out.b.len);
		sb_adds(&b, ",\"stderr\":");
		jstr(&b, stderr_text);
		sb_printf(&b, ",\"outcome\":\"%s\",\"error_class\":", rep.outcome);
		jstr(&b, o.error_class);
		sb_adds(&b, ",\"error_message\":");
		jstr(&b, o.error_message);
		sb_addc(&b, '}');
		jprint(&b);
	} else {
		printf("job        %s\n", payload);
		if (h) {
			printf("command   ");
			for (int i = 0; i < h->command.n; i++)
				printf(" %s", h->command.v[i]);
			for (int i = 0; i < run.nextra; i++)
				printf(" %s", run.extra[i]);
			printf("\n");
		}
		if (!strcmp(rep.status, "exited"))
			printf("exit       status %d", rep.exit_code);
		else if (!strcmp(rep.status, "signaled"))
			printf("exit       killed by signal %d (SIG%s)", rep.signal,
			       sigabbrev_np(rep.signal) ? sigabbrev_np(rep.signal) : "?");
		else if (!strcmp(rep.status, "no_handler"))
			printf("exit       not run: no handler configured for class %s", p.cls);
		else
			printf("exit       %s", rep.status);
		if (ran)
			printf(" after %.3fs (pid %d)", duration, res.pid);
		printf("\n");
		if (cost.measured) {
			char text[64];
			usage_text(&cost, text, sizeof text);
			printf("cost      %s\n", text);
		}
		printf("outcome    %s: %s\n", said[0] ? said : rep.outcome, rep.why);
		if (o.error_class)
			printf("error      %s: %s\n", o.error_class, o.error_message);
		if (out.b.len) {
			printf("stdout%s:\n", out.truncated ? " (cut at 1 MiB)" : "");
			fwrite(out.b.s, 1, out.b.len, stdout);
		}
		if (*stderr_text) {
			printf("stderr%s:\n", res.tail_len >= STDERR_KEPT ? " (tail)" : "");
			fputs(stderr_text, stdout);
			if (stderr_text[strlen(stderr_text) - 1] != '\n')
				fputc('\n', stdout);
		}
	}
	int status = !strcmp(rep.outcome, "success") ? CTL_OK : CTL_NOTHING;
	free(stderr_text);
	outcome_free(&o);
	run_result_free(&res);
	job_run_free(&run);
	sb_free(&out.b);
	job_free(&j);
	free(payload);
	free(args);
	return status;
}
