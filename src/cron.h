/* SPDX-License-Identifier: MIT */
/* cron.h: cron expressions as cogworker (Fugit) reads them, and slot arithmetic. */
#ifndef COGWORKERD_CRON_H
#define COGWORKERD_CRON_H

#include <stdint.h>
#include <stddef.h>

struct cron;

/* NULL and a message in err on a bad expression. */
struct cron *cron_parse(const char *expr, char *err, size_t errlen);
void cron_free(struct cron *c);
/* The most recent matching instant strictly before the whole second of now (the slot). */
int64_t cron_prev(const struct cron *c, int64_t now);
/* The first matching instant strictly after t. */
int64_t cron_next(const struct cron *c, int64_t t);
/* Both return -1 when nothing matches within about 400 years (only possible when DST
 * swallows every candidate); both are thread-safe on a parsed cron. */

#endif
