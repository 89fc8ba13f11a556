/* SPDX-License-Identifier: MIT */
/* jobs_cut.h: entries longer than max_job_bytes, as read and acted on (jobs_cut.c). */
#ifndef COGWORKERD_CTL_JOBS_CUT_H
#define COGWORKERD_CTL_JOBS_CUT_H

#include "ctl.h"
#include "jobs_types.h"

#define JOBS_CUT_HEAD 16384     /* the bytes of a cut entry kept (at most max_job_bytes) */
/* A read of entries (argv: LRANGE, ZRANGE, ZREVRANGE, ZRANGEBYSCORE (WITHSCORES), HVALS or
 * HMGET and its arguments after key, at most 12) with an entry over max_job_bytes cut to
 * {length, first bytes, summary}. The reply, or NULL (c->r.err). */
redisReply *jobs_read(struct ctl *c, const char *key, int argc, const char **argv);
/* The same in steps, for a pipeline: begin (the limit on), the commands, take on each reply
 * in order, end (the limit off), then peek on each reply (its summaries). */
void jobs_cut_begin(struct ctl *c);
void jobs_cut_take(struct ctl *c, redisReply *rep);
void jobs_cut_end(struct ctl *c);
void jobs_cut_peek(struct ctl *c, const char *key, int argc, const char **argv, redisReply *rep);
/* Point e's raw (and, cut, size and summary) at an element of such a reply: 1, or 0 when
 * it holds no entry (a nil). */
int jobs_entry_member(struct entry *e, const redisReply *m);
/* job_parse of the entry: its summary when cut. */
void jobs_entry_parse(struct entry *e);
/* Whether the parsed entry has member name. */
int jobs_entry_has(const struct entry *e, const char *name);
/* ACT_CUT on a cut entry: act (retry, delete, kill, reschedule), dest (KEYS[2]: retry's
 * queue key, kill's dead), score (kill, reschedule: the new one), queue (retry's name).
 * 1 done, 0 gone, -1 Redis error (c->r.err), -2 no jid to find it by. */
int jobs_cut_act(struct ctl *c, const struct entry *e, const char *act, const char *dest,
                 const char *score, const char *queue);

#endif
