/* SPDX-License-Identifier: MIT */
/* jobs_run.h: `jobs log` and `jobs cancel` (jobs_run.c), and the dashboard's stream of a run. */
#ifndef COGWORKERD_CTL_JOBS_RUN_H
#define COGWORKERD_CTL_JOBS_RUN_H

#include "ctl.h"

/* jobs log (want: a run number, 0 = the newest) and jobs cancel. */
int jobs_log(struct ctl *c, const char *jid, long long want, int follow);
int jobs_cancel(struct ctl *c, const char *jid, int discard);
/* The same for a job known to run on identity (its class cls gives the wait: its
 * kill_grace), found by the caller: asked, waited for and judged as jobs cancel does. */
int jobs_cancel_on(struct ctl *c, const char *jid, const char *identity, const char *cls,
                   int discard);
/* A followed run as server-sent events (the dashboard's stream of `jobs log --follow`):
 * each call looks once and appends to ev what is new: "waiting" (no run kept yet, the job
 * on its way), "run" (which run, its class, process, start), "output" ({text, skipped}),
 * "error" (Redis did not answer; the next call tries again) and, last, "end" ({state:
 * ended|gone|died|none, outcome, error_class, error_message, message}). 1 after "end". */
struct follow_state {
	const char *jid;
	long long run;              /* the run asked for (0 = the newest), then followed */
	unsigned long long pos;     /* output bytes sent */
	double next_check;          /* monotonic: the next look at the job or its process */
	int on_its_way;             /* the job was last seen queued, scheduled, retrying or running */
	int following, announced, waiting_said;
};
int jobs_follow_events(struct ctl *c, struct follow_state *st, struct sbuf *ev);
/* `jobs log|cancel ...`: their own options, then the work. */
int jobs_run_command(struct ctl *c, int argc, char **argv);

#endif
