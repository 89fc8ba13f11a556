/* SPDX-License-Identifier: MIT */
/* jobs_act.h: retry, delete, kill, reschedule (jobs_act.c), the Web UI's job buttons. */
#ifndef COGWORKERD_CTL_JOBS_ACT_H
#define COGWORKERD_CTL_JOBS_ACT_H

#include "ctl.h"
#include "jobs_types.h"

enum action { A_RETRY, A_DELETE, A_KILL, A_RESCHEDULE };
extern const unsigned jobs_action_sets[];              /* the sets each action works on */
/* Act on each JID argument wherever it is found within sets; minutes: reschedule's;
 * expires_in: retry's new deadline, seconds from now (0 = none). */
int jobs_act_on_args(struct ctl *c, enum action a, unsigned sets, const struct filter *base,
                     int nargs, char **args, double minutes, double expires_in);
/* Act on members of one set given as read (the dashboard's selection: the exact text of
 * each, so an entry changed or taken meanwhile is left alone and reported as gone); queue
 * names the list for the queued set. */
int jobs_act_on_members(struct ctl *c, enum action a, int set, const char *queue, int n,
                        char *const *raws, const size_t *lens, double minutes);
/* --all: act on every entry of one set that passes the filter. */
int jobs_act_on_all(struct ctl *c, enum action a, int set, const struct filter *f,
                    double expires_in);

#endif
