/* SPDX-License-Identifier: MIT */
/*
 * jobs_cut.c: jobs longer than max_job_bytes, for every `cogworkerctl jobs` subcommand and
 * the dashboard (doc/protocol.md §7.9 7; what a daemon does with one it fetches).
 *
 * A job pushed with hundreds of MB was read whole by every list and show: the reply, a copy
 * and cJSON's tree of it (327 MiB for a 40 MB dead job). So each read of entries runs with
 * the link's bulk limit at the conf's max_job_bytes (rlink.h, as a fetch does): a longer
 * entry is dropped as it arrives, its first JOBS_CUT_HEAD and last bytes kept, and then
 * PEEK_CUT (lua/peek_cut.lua) reads its summary in Redis: its small top-level members
 * (class, jid, queue, error, times), which stand in for the job when it is parsed. A cut
 * entry is listed and shown with its size; a search looks at its head and summary only.
 * The reads themselves are the plain commands they were (no script: they still run while
 * writes are paused, and on any server); max_job_bytes = 0 reads every entry whole.
 *
 * An action on a cut entry can't hand the exact member back to Redis (ZREM raw,
 * CLAIM_AND_REQUEUE): ACT_CUT (lua/act_cut.lua) finds it there by its place, length, head
 * and the jid decoded from the member itself, and acts on it in the same call.
 */
#include <stdlib.h>
#include <string.h>
#include "jobs_cut.h"

/* The reads run with the link's bulk limit (rlink.h): a string over max_job_bytes comes as
 * an integer, its length, and what was seen of it (its first bytes, its last) is kept. */
void jobs_cut_begin(struct ctl *c)
{
	size_t max = (size_t)c->conf.max_job_bytes;
	if (max)
		rconn_limit_bulk(&c->r, max, max < JOBS_CUT_HEAD ? max : JOBS_CUT_HEAD);
}

void jobs_cut_end(struct ctl *c)
{
	if (c->conf.max_job_bytes)
		rconn_limit_bulk(&c->r, 0, 0);
}

/*
 * PEEK_CUT and ACT_CUT copy a cut entry into Lua, and ACT_CUT writes it again: for 40 MB that
 * took Redis 1 to 7 s on a loaded machine (2 cores, load 15), past the command timeout, after
 * which the reply came to a link given up. So they get CUT_TIMEOUT.
 */
#define CUT_TIMEOUT 60.0
static redisReply *cut_script(struct ctl *c, const char *name, int nkeys, const char **keys,
                              int nargs, const char **args, const size_t *lens)
{
	double conn = c->r.rc.connect_timeout, cmd = c->r.rc.command_timeout;
	int raise = (cmd > 0 ? cmd : 5.0) < CUT_TIMEOUT;
	if (raise)
		rconn_set_timeouts(&c->r, conn, CUT_TIMEOUT);
	redisReply *rep = rscript(&c->r, name, nkeys, keys, nargs, args, lens);
	if (raise)
		rconn_set_timeouts(&c->r, conn, cmd);
	return rep;
}

static redisReply *new_reply(int type)
{
	redisReply *r = xcalloc(1, sizeof *r);
	r->type = type;
	return r;
}

static redisReply *string_reply(const char *s, size_t n)
{
	redisReply *r = new_reply(REDIS_REPLY_STRING);
	r->str = xmalloc(n + 1);
	memcpy(r->str, s, n);
	r->str[n] = '\0';
	r->len = n;
	return r;
}

/* Each integer element of a reply of entries is a string the limit dropped (no command read
 * here answers an integer in its place): it becomes {length, first bytes, last bytes}. */
void jobs_cut_take(struct ctl *c, redisReply *rep)
{
	for (size_t k = 0; rep && rep->type == REDIS_REPLY_ARRAY && k < rep->elements; k++) {
		struct rskip seen;
		if (rep->element[k]->type != REDIS_REPLY_INTEGER || !rconn_skipped(&c->r, &seen))
			continue;
		redisReply *cut = new_reply(REDIS_REPLY_ARRAY);
		cut->elements = 3;
		cut->element = xcalloc(3, sizeof *cut->element);
		cut->element[0] = new_reply(REDIS_REPLY_INTEGER);
		cut->element[0]->integer = (long long)seen.len;
		cut->element[1] = string_reply(seen.head ? seen.head : "", seen.head_len);
		cut->element[2] = string_reply(seen.tail, seen.tail_len);
		rskip_free(&seen);
		freeReplyObject(rep->element[k]);
		rep->element[k] = cut;
	}
}

/* Where element k of a reply of argv stands, for PEEK_CUT: its kind and place. */
static const char *place_of(const redisReply *rep, size_t k, int argc, const char **argv,
                            char *buf, size_t n)
{
	if (strcmp(argv[0], "LRANGE") == 0) {
		snprintf(buf, n, "%lld", (argc > 1 ? atoll(argv[1]) : 0) + (long long)k);
		return "l";
	}
	if (strcmp(argv[0], "HMGET") == 0 && (int)k + 1 < argc) {
		snprintf(buf, n, "%s", argv[k + 1]);
		return "f";
	}
	if (argv[0][0] == 'Z' && k + 1 < rep->elements &&
	    rep->element[k + 1]->type == REDIS_REPLY_STRING) {          /* WITHSCORES */
		snprintf(buf, n, "%s", rep->element[k + 1]->str);
		return "z";
	}
	buf[0] = '\0';
	return "h";
}

/* Each cut element's last bytes become its summary (PEEK_CUT; "" when it has none, or is
 * gone). Run with the limit off: a summary of many members may be longer than it. */
void jobs_cut_peek(struct ctl *c, const char *key, int argc, const char **argv, redisReply *rep)
{
	for (size_t k = 0; rep && rep->type == REDIS_REPLY_ARRAY && k < rep->elements; k++) {
		redisReply *cut = rep->element[k];
		if (cut->type != REDIS_REPLY_ARRAY || cut->elements != 3)
			continue;
		char where[128], len[32];
		const char *kind = place_of(rep, k, argc, argv, where, sizeof where);
		snprintf(len, sizeof len, "%lld", cut->element[0]->integer);
		const char *args[] = { kind, where, len, cut->element[1]->str, cut->element[2]->str };
		size_t lens[] = { 1, strlen(where), strlen(len),
		                  cut->element[1]->len < 256 ? cut->element[1]->len : 256,
		                  cut->element[2]->len };
		redisReply *sum = cut_script(c, "peek_cut", 1, &key, 5, args, lens);
		freeReplyObject(cut->element[2]);
		cut->element[2] = sum && sum->type == REDIS_REPLY_STRING ? sum : string_reply("", 0);
		if (sum && cut->element[2] != sum)
			freeReplyObject(sum);
	}
}

redisReply *jobs_read(struct ctl *c, const char *key, int argc, const char **argv)
{
	const char *full[16];
	if (argc > 12)
		return NULL;
	full[0] = argv[0];
	full[1] = key;
	for (int i = 1; i < argc; i++)
		full[i + 1] = argv[i];
	jobs_cut_begin(c);
	redisReply *rep = rcmd_argv(&c->r, argc + 1, full, NULL);
	jobs_cut_take(c, rep);
	jobs_cut_end(c);
	jobs_cut_peek(c, key, argc, argv, rep);
	return rep;
}

int jobs_entry_member(struct entry *e, const redisReply *m)
{
	e->size = 0;
	e->summary = NULL;
	e->summary_len = 0;
	if (m->type == REDIS_REPLY_STRING) {
		e->raw = m->str;
		e->raw_len = m->len;
		return 1;
	}
	if (m->type != REDIS_REPLY_ARRAY || m->elements != 3 ||
	    m->element[0]->type != REDIS_REPLY_INTEGER || m->element[1]->type != REDIS_REPLY_STRING ||
	    m->element[2]->type != REDIS_REPLY_STRING)
		return 0;
	e->size = (size_t)m->element[0]->integer;
	e->raw = m->element[1]->str;
	e->raw_len = m->element[1]->len;
	e->summary = m->element[2]->str;
	e->summary_len = m->element[2]->len;
	return 1;
}

void jobs_entry_parse(struct entry *e)
{
	if (!e->size) {
		job_parse(&e->j, e->raw, e->raw_len, e->qname);
		return;
	}
	job_parse(&e->j, e->summary_len ? e->summary : "", e->summary_len, e->qname);
	if (!e->j.obj) {
		free(e->j.parse_error);
		e->j.parse_error = xasprintf("a job of %zu bytes, larger than max_job_bytes, that "
		                             "is no JSON object", e->size);
	}
}

int jobs_entry_has(const struct entry *e, const char *name)
{
	return e->j.obj && cJSON_GetObjectItemCaseSensitive(e->j.obj, name) != NULL;
}

int jobs_cut_act(struct ctl *c, const struct entry *e, const char *act, const char *dest,
                 const char *score, const char *queue)
{
	if (!e->j.obj || !e->j.jid)
		return -2;
	char where[32], len[32];
	snprintf(where, sizeof where, "%.6f", e->score);
	snprintf(len, sizeof len, "%zu", e->size);
	const char *keys[] = { e->key, dest ? dest : e->key, K_QUEUES };
	const char *args[] = { act, e->set == S_QUEUED ? "l" : "z", where, len, e->j.jid, e->raw,
	                       score ? score : "", queue ? queue : "" };
	size_t lens[] = { strlen(act), 1, strlen(where), strlen(len), strlen(e->j.jid),
	                  e->raw_len < 256 ? e->raw_len : 256, strlen(args[6]), strlen(args[7]) };
	redisReply *rep = cut_script(c, "act_cut", 3, keys, 8, args, lens);
	if (!rep)
		return -1;
	long long r = reply_integer(rep, 0);
	freeReplyObject(rep);
	return r > 0;
}
