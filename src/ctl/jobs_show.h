/* SPDX-License-Identifier: MIT */
/* jobs_show.h: `jobs list` and `jobs show` (jobs_show.c), for people and for --json. */
#ifndef COGWORKERD_CTL_JOBS_SHOW_H
#define COGWORKERD_CTL_JOBS_SHOW_H

#include "ctl.h"
#include "jobs_types.h"

int jobs_list(struct ctl *c, unsigned sets, const struct filter *f, int limit);
/* A page of one set (jobs_page) as JSON: {set, total, from, read, next, jobs: [...]}. */
int jobs_list_page(struct ctl *c, int set, const struct filter *f, long from, int limit,
                   long budget);
/* full: args, payload and error in full, not cut at SHOW_CUT characters. With at (a zset
 * and a score, from a list's link), the job is looked for there and among the running
 * ones only. */
struct show_at {
	int set;
	double score;
};
int jobs_show(struct ctl *c, const char *arg, int full, const struct show_at *at);

#endif
