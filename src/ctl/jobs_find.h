/* SPDX-License-Identifier: MIT */
/* jobs_find.h: where a job is (jobs_find.c): the sets, the walk over them, the match. */
#ifndef COGWORKERD_CTL_JOBS_FIND_H
#define COGWORKERD_CTL_JOBS_FIND_H

#include "ctl.h"
#include "jobs_types.h"

/* Scan several sets (a bit mask) in set order, collecting into out. -1 on error (said);
 * with tolerant, a key unreadable for a reason other than availability is skipped. */
int jobs_find(struct ctl *c, unsigned sets, const struct filter *f, int tolerant,
              struct found *out);
/* The entries of a sorted set with one score (a link from a list names the set and the
 * score, as cogworker's Web UI does), so finding a job there reads a few entries. */
int jobs_find_at(struct ctl *c, int set, double score, const struct filter *f,
                 struct found *out);
/* Where a page of a set stands: the set's size, the first index looked at, how many
 * entries were read, and where the next page starts (-1: no more). */
struct page {
	long long total;
	long from, read, next;
};
/*
 * One page of one set, by index (the dashboard's lists): the entries from index from on
 * that pass the filter, at most limit of them, reading at most budget entries (0 = no
 * limit), so a page of a set of any size costs the same. Queued needs f->queue; running is
 * read whole (it is as large as the fleet's concurrency) and cut. 0, or -1 (said).
 */
int jobs_page(struct ctl *c, int set, const struct filter *f, long from, int limit,
              long budget, struct found *out, struct page *pg);

#endif
