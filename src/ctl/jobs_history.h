/* SPDX-License-Identifier: MIT */
/* jobs_history.h: a job's runs as history keeps them (jobs_history.c), for `jobs show`. */
#ifndef COGWORKERD_CTL_JOBS_HISTORY_H
#define COGWORKERD_CTL_JOBS_HISTORY_H

#include <cJSON.h>
#include "ctl.h"

/* One run of a job as history keeps it: its place in the job's index (1 = the oldest
 * indexed), the outcome the index gives, and its entry (times, error, cost). */
struct hist_run {
	int n;
	char *outcome;
	cJSON *entry;
	char *raw;                  /* the entry as stored */
};
struct hist_runs {
	struct hist_run *v;
	int n;                      /* runs found in history, oldest first */
	int indexed;                /* pointers in the index (trimmed ones are not shown) */
};
/* The runs of jid through its history index: 0 (none is not an error), -1 when Redis is
 * unavailable. */
int jobs_history_read(struct ctl *c, const char *jid, struct hist_runs *out);
void jobs_history_free(struct hist_runs *h);
const struct hist_run *jobs_history_last(const struct hist_runs *h);        /* or NULL */
double jobs_history_finished(const struct hist_run *r);
const char *jobs_history_field(const struct hist_run *r, const char *name); /* a string */
void jobs_history_json(struct sbuf *b, const struct hist_runs *h);  /* ,"history":[…] */
/* The start, run time and cost (" cpu=… maxrss=…", usage.h) of a run, as its history
 * entry or kept record (started_at, finished_at, cpu_s, maxrss_bytes) gives them. */
struct run_cells {
	char iso[32], took[32], cost[64];
};
void jobs_run_cells(const cJSON *o, struct run_cells *out);
void jobs_history_human(const struct hist_runs *h);                 /* the attempts rows */

#endif
