/* SPDX-License-Identifier: MIT */
/*
 * deathhook.c: on_death commands (doc/protocol.md §7.19).
 *
 * Called by whoever's write put a job in dead, after the job was settled (a slow hook
 * that held the job on the in-progress list got it re-run, lesson 20). The handler's own
 * on_death runs first, then each global one in conf order; each gets the dead entry on
 * stdin, runs in its own process group with a timeout, and a failure is only logged.
 * With containment, each run has a cgroup of its own (on_death-N, made and removed around
 * it, jobcg.h): what it started is killed when it ends, as a job's is.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include "deathhook.h"
#include "handler.h"
#include "jobcg.h"
#include "state.h"
#include "util.h"

static void run_one(const struct argv_list *cmd, double timeout, const char *jid,
                    const char *entry)
{
	static const char *const env_none[] = { NULL };
	char **env = handler_build_env(NULL, NULL, NULL, NULL, NULL, NULL, NULL);
	char tag[64];
	snprintf(tag, sizeof tag, "on_death jid=%s", jid ? jid : "?");
	struct run_request req = {
		.command = cmd, .env = env ? (const char *const *)env : env_none,
		.stdin_data = entry, .stdin_len = strlen(entry),
		.timeout = timeout > 0 ? timeout : 30, .kill_grace = 2, .output_tail = 2048,
		.rlimit_cpu = -1, .rlimit_as = -1, .rlimit_nofile = -1, .rlimit_nproc = -1,
		.log_tag = tag, .log_output = 1,
	};
	static atomic_uint seq;
	char cgname[32];
	snprintf(cgname, sizeof cgname, "on_death-%u", atomic_fetch_add(&seq, 1));
	req.cgroup = jobcg_new(cgname);
	struct run_result res;
	memset(&res, 0, sizeof res);
	handler_run(&req, &res, NULL, NULL);
	jobcg_free(req.cgroup);
	if (res.status != RUN_EXITED || res.code != 0) {
		const char *what = res.status == RUN_TIMEOUT ? "timed out" :
		                   res.status == RUN_SIGNALED ? "killed by a signal" :
		                   res.status == RUN_SPAWN_FAILED ? "could not be started" : "failed";
		log_error("death handler failed for jid=%s: %s %s (status %d)", jid ? jid : "?",
		          cmd->v[0], what, res.code);
	}
	run_result_free(&res);
	handler_free_env(env);
}

void on_death_run(const char *cls, const char *jid, const char *dead_entry)
{
	struct conf *c = conf_acquire();
	const struct handler *h = cls ? conf_find_handler(c, cls) : NULL;
	if (h && h->on_death.n > 0)
		run_one(&h->on_death, h->on_death_timeout, jid, dead_entry);
	for (int i = 0; i < c->non_death; i++)
		run_one(&c->on_death[i], c->on_death_timeout, jid, dead_entry);
	conf_release(c);
}
