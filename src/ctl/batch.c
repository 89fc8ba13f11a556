/* SPDX-License-Identifier: MIT */
/*
 * batch.c: `cogworkerctl batch new|commit|show|list|cancel|settle` (doc/protocol.md §7.34).
 *
 * Each change is one batch script (workflow.c runs it with its common arguments), so this
 * file reads options and prints; what a batch is and when its callbacks fire is
 * lua/lib/batch.lua's. A command run by a handler (COGWORKER_JID in its environment) names
 * that job as the adder of a child batch, so a running member may add to a committed
 * batch. cancel deletes the member jobs the script hands back that are still queued,
 * scheduled or in retry, and cancels the running ones, as `jobs delete` and `jobs cancel`
 * do (batch_cancel.c). settle is the hand for what no daemon settles (a member a Ruby
 * worker ran).
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include "ctl.h"
#include "job.h"
#include "workflow.h"

#define DEFAULT_EXPIRES_IN 86400.0
#define SHOW_MEMBERS 1000       /* jids listed per set by show */

static const char *adder(void)
{
	const char *j = getenv("COGWORKER_JID");
	return j ? j : "";
}

static int batch_new(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "description", required_argument, NULL, 'd' },
		{ "on-success", required_argument, NULL, 's' },
		{ "on-complete", required_argument, NULL, 'c' },
		{ "on-death", required_argument, NULL, 'x' },
		{ "callback-args", required_argument, NULL, 'a' },
		{ "callback-queue", required_argument, NULL, 'q' },
		{ "parent", required_argument, NULL, 'p' },
		{ "expires-in", required_argument, NULL, 'e' },
		CTL_COMMON_OPTS,
		{ 0, 0, 0, 0 },
	};
	const char *desc = "", *on_s = "", *on_c = "", *on_d = "", *cargs = "[]";
	const char *cq = "default", *parent = "";
	double expires_in = DEFAULT_EXPIRES_IN;
	int ch;
	ctl_getopt_reset();
	while ((ch = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		switch (ch) {
		case 'd': desc = optarg; break;
		case 's': on_s = optarg; break;
		case 'c': on_c = optarg; break;
		case 'x': on_d = optarg; break;
		case 'a': cargs = optarg; break;
		case 'q': cq = optarg; break;
		case 'p': parent = optarg; break;
		case 'e':
			if (ctl_duration_arg("batch new --expires-in", optarg,
			                     "would expire it at once", &expires_in) != 0)
				return CTL_USAGE;
			break;
		default:
			if (!ctl_common_opt(c, ch, argv))
				return CTL_USAGE;
		}
	}
	if (optind < argc) {
		ctl_error("batch new: unexpected argument \"%s\"", argv[optind]);
		return CTL_USAGE;
	}
	if (!ctl_args_json_ok("batch new: --callback-args", cargs) ||
	    !ctl_queue_name_ok("batch new --callback-queue", cq) ||
	    !ctl_utf8_ok("batch new: --description", desc, strlen(desc)))
		return CTL_USAGE;
	if (ctl_connect(c) != 0)
		return CTL_USAGE;
	char bid[25], expires[32];
	new_jid(bid);
	job_format_time(now_float() + expires_in, expires);
	const char *args[] = { bid, desc, on_s, on_c, on_d, cargs, cq, expires, parent, adder() };
	redisReply *rep = workflow_script(&c->r, "batch_open", 10, args, NULL);
	if (!rep)
		return ctl_redis_error(c, "batch new");
	freeReplyObject(rep);
	if (c->json)
		printf("{\"bid\":\"%s\"}\n", bid);
	else
		printf("%s\n", bid);
	return CTL_OK;
}

static int batch_commit(struct ctl *c, const char *bid)
{
	const char *args[] = { bid };
	redisReply *rep = workflow_script(&c->r, "batch_commit", 1, args, NULL);
	if (!rep)
		return ctl_redis_error(c, "batch commit");
	int now = rep->type == REDIS_REPLY_ARRAY && rep->elements &&
	          reply_integer(rep->element[0], 0) == 1;
	if (c->json) {
		printf("{\"bid\":\"%s\",\"committed\":%s}\n", bid, now ? "true" : "false");
	} else if (now) {
		printf("committed %s\n", bid);
		ctl_print_fired(c, rep, 1);
	} else {
		ctl_error("batch %s was committed already", bid);
	}
	freeReplyObject(rep);
	return now ? CTL_OK : CTL_NOTHING;
}

static const char *const PARTS[] = { "pending", "succeeded", "dead", "discarded" };

/* The members of one of the batch's sets, as a JSON array and a count; *listed the
 * SRANDMEMBER reply (NULL when unread), kept for children_json. */
static long long add_members(struct ctl *c, struct sbuf *b, const char *bid, const char *part,
                             redisReply **listed)
{
	redisReply *rep = rcmd(&c->r, "SRANDMEMBER " K_BATCH "%s:%s %d", bid, part, SHOW_MEMBERS);
	redisReply *n = rcmd(&c->r, "SCARD " K_BATCH "%s:%s", bid, part);
	long long count = n ? reply_integer(n, 0) : 0;
	sb_printf(b, ",\"%s\":%lld,\"%s_jids\":[", part, count, part);
	for (size_t i = 0; rep && rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++) {
		if (i)
			sb_addc(b, ',');
		jstr(b, rep->element[i]->str);
	}
	sb_addc(b, ']');
	*listed = rep;
	if (n)
		freeReplyObject(n);
	return count;
}

/* "children": the members listed that are batches (a child's bid is a member as a job's
 * jid is), one pipelined EXISTS each; the replies are freed. */
static void children_json(struct ctl *c, struct sbuf *b, redisReply **listed, int nlisted)
{
	struct rpipe p;
	rpipe_begin(&c->r, &p);
	for (int k = 0; k < nlisted; k++)
		for (size_t i = 0; listed[k] && listed[k]->type == REDIS_REPLY_ARRAY &&
		     i < listed[k]->elements; i++)
			rpipe_add(&c->r, &p, "EXISTS " K_BATCH "%s", listed[k]->element[i]->str);
	redisReply **reps = xcalloc((size_t)p.n + 1, sizeof *reps);
	rpipe_exec(&c->r, &p, reps);
	sb_adds(b, ",\"children\":[");
	int at = 0, shown = 0;
	for (int k = 0; k < nlisted; k++)
		for (size_t i = 0; listed[k] && listed[k]->type == REDIS_REPLY_ARRAY &&
		     i < listed[k]->elements; i++, at++)
			if (reps[at] && reply_integer(reps[at], 0) == 1) {
				sb_adds(b, shown++ ? "," : "");
				jstr(b, listed[k]->element[i]->str);
			}
	sb_addc(b, ']');
	for (int i = 0; i < p.n; i++)
		if (reps[i])
			freeReplyObject(reps[i]);
	free(reps);
	for (int k = 0; k < nlisted; k++)
		if (listed[k])
			freeReplyObject(listed[k]);
}

static const char *const FIELDS[] = { "state", "description", "created_at", "committed_at",
	"completed_at", "cancelled_at", "expired_at", "expires_at", "parent", "total",
	"on_success", "on_complete", "on_death", "callback_args", "callback_queue",
	"fired_success", "fired_complete", "fired_death" };
#define NFIELDS (sizeof FIELDS / sizeof *FIELDS)

int ctl_batch_show(struct ctl *c, const char *bid)
{
	redisReply *rep = rcmd(&c->r, "HGETALL " K_BATCH "%s", bid);
	if (!rep)
		return ctl_redis_error(c, "batch show");
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements == 0) {
		freeReplyObject(rep);
		ctl_error("batch %s: no such batch (or it expired, 7 days after it finished)", bid);
		return CTL_NOTHING;
	}
	const char *val[NFIELDS] = { 0 };
	for (size_t i = 0; i + 1 < rep->elements; i += 2)
		for (size_t k = 0; k < NFIELDS; k++)
			if (strcmp(rep->element[i]->str, FIELDS[k]) == 0)
				val[k] = rep->element[i + 1]->str;
	struct sbuf b;
	sb_init(&b);
	sb_adds(&b, "{\"bid\":");
	jstr(&b, bid);
	for (size_t k = 0; k < NFIELDS; k++) {
		sb_printf(&b, ",\"%s\":", FIELDS[k]);
		jstr(&b, val[k]);
	}
	long long counts[4];
	redisReply *listed[4];
	for (int i = 0; i < 4; i++)
		counts[i] = add_members(c, &b, bid, PARTS[i], &listed[i]);
	children_json(c, &b, listed, 4);
	sb_addc(&b, '}');
	if (c->json) {
		jprint(&b);
	} else {
		printf("batch %s: %s%s%s\n", bid, val[0], val[1] && *val[1] ? ": " : "",
		       val[1] ? val[1] : "");
		printf("members: %s total; %lld pending, %lld succeeded, %lld dead, %lld discarded\n",
		       val[9] ? val[9] : "0", counts[0], counts[1], counts[2], counts[3]);
		if (val[8] && *val[8])
			printf("parent: %s\n", val[8]);
		static const char *const kind[] = { "success", "complete", "death" };
		for (int k = 0; k < 3; k++)
			if (val[10 + k] && *val[10 + k])
				printf("on_%s: %s%s%s\n", kind[k], val[10 + k],
				       val[15 + k] ? ", fired, jid " : ", not fired",
				       val[15 + k] ? val[15 + k] : "");
		sb_free(&b);
	}
	freeReplyObject(rep);
	return CTL_OK;
}

/* The fields of a batch list's row, after state, total, created_at and description. */
static const char *const LIST_TIMES[] = { "committed_at", "completed_at", "cancelled_at",
	"expired_at" };
static const char *const LIST_CALLBACKS[] = { "on_success", "on_complete", "on_death",
	"fired_success", "fired_complete", "fired_death" };

/* One batch of a list as JSON (after its "{"), from its HMGET (4 + 4 + 6 fields) and its
 * four SCARDs; the table's row too. */
static void list_row(struct sbuf *b, struct table *t, const char *bid, const redisReply *h,
                     redisReply *const *cards)
{
	const char *st = h->element[0]->str;
	const char *tot = h->element[1]->str ? h->element[1]->str : "0";
	const char *desc = h->element[3]->str ? h->element[3]->str : "";
	double created = h->element[2]->str ? atof(h->element[2]->str) : 0;
	char pend[32], iso[32];
	snprintf(pend, sizeof pend, "%lld", reply_integer(cards[0], 0));
	ctl_iso_time(created, iso);
	const char *row[] = { bid, st, pend, tot, iso, desc };
	table_add(t, row);
	sb_adds(b, "\"bid\":");
	jstr(b, bid);
	sb_adds(b, ",\"state\":");
	jstr(b, st);
	sb_printf(b, ",\"pending\":%s,\"total\":%s,\"created_at\":", pend, tot);
	jnum(b, created);
	sb_adds(b, ",\"description\":");
	jstr(b, desc);
	for (int i = 1; i < 4; i++)
		sb_printf(b, ",\"%s\":%lld", PARTS[i], reply_integer(cards[i], 0));
	for (int i = 0; i < 4; i++) {
		const char *v = h->element[4 + i]->str;
		sb_printf(b, ",\"%s\":", LIST_TIMES[i]);
		v && *v ? jnum(b, atof(v)) : sb_adds(b, "null");
	}
	for (int i = 0; i < 6; i++) {
		sb_printf(b, ",\"%s\":", LIST_CALLBACKS[i]);
		jstr(b, h->element[8 + i]->str);
	}
}

/* The state a batch is shown in: its hash's state, "complete" for a committed one that
 * completed (the state stays committed there, lua/lib/batch.lua). */
static const char *shown_state(const redisReply *h)
{
	const char *st = h->element[0]->str, *done = h->element[5]->str;
	return strcmp(st, "committed") == 0 && done && *done ? "complete" : st;
}

int ctl_batch_state_ok(const char *state)
{
	static const char *const states[] = { "open", "committed", "complete", "cancelled",
	                                      "expired" };
	for (size_t i = 0; i < sizeof states / sizeof *states; i++)
		if (strcmp(states[i], state) == 0)
			return 1;
	return 0;
}

static int batch_matches(const struct batch_filter *f, const redisReply *h)
{
	if (f->state && strcmp(shown_state(h), f->state) != 0)
		return 0;
	const char *desc = h->element[3]->str ? h->element[3]->str : "";
	return !f->text || strstr(desc, f->text);
}

#define LIST_CHUNK 200          /* bids read at once by a filtered list */

/* One chunk of the list: the bids from index at on (n at most), each batch's HMGET and
 * four SCARDs (pipelined) into *reps. The ZREVRANGE reply, or NULL (a Redis error). */
static redisReply *list_chunk(struct ctl *c, long at, long n, redisReply ***reps, int *failed)
{
	redisReply *rep = rcmd(&c->r, "ZREVRANGE " K_BATCH_LIST " %ld %ld", at, at + n - 1);
	if (!rep)
		return NULL;
	size_t nb = rep->type == REDIS_REPLY_ARRAY ? rep->elements : 0;
	struct rpipe p;
	rpipe_begin(&c->r, &p);
	for (size_t i = 0; i < nb; i++) {
		const char *bid = rep->element[i]->str;
		rpipe_add(&c->r, &p, "HMGET " K_BATCH "%s state total created_at description "
		          "committed_at completed_at cancelled_at expired_at on_success on_complete "
		          "on_death fired_success fired_complete fired_death", bid);
		for (int k = 0; k < 4; k++)
			rpipe_add(&c->r, &p, "SCARD " K_BATCH "%s:%s", bid, PARTS[k]);
	}
	*reps = xcalloc((size_t)p.n + 1, sizeof **reps);
	*failed = rpipe_exec(&c->r, &p, *reps);
	return rep;
}

static void chunk_free(redisReply *rep, redisReply **reps)
{
	size_t nb = rep->type == REDIS_REPLY_ARRAY ? rep->elements : 0;
	for (size_t i = 0; i < 5 * nb; i++)
		if (reps[i])
			freeReplyObject(reps[i]);
	free(reps);
	freeReplyObject(rep);
}

/*
 * The batches newest first from index from, at most limit of those that pass the filter
 * (ZREVRANGE of the list, then one pipelined HMGET and four SCARD per batch), reading at
 * most budget bids (0 = no limit), so a filtered page of a list of any size costs the
 * same, as a job list's page does. paged: the dashboard's document {total, from, read,
 * next, batches: [...]}; else the array `batch list --json` prints.
 */
int ctl_batch_list(struct ctl *c, long from, int limit, int paged,
                   const struct batch_filter *f, long budget)
{
	int filtered = f && (f->state || f->text);
	redisReply *card = rcmd(&c->r, "ZCARD " K_BATCH_LIST);
	if (!card)
		return ctl_redis_error(c, "batch list");
	long long total = reply_integer(card, 0);
	freeReplyObject(card);
	static const char *heads[] = { "BID", "STATE", "PENDING", "TOTAL", "CREATED",
	                               "DESCRIPTION" };
	static const int limits[] = { 0, 0, 0, 0, 0, 40 };
	struct table t;
	table_init(&t, 6, heads, limits);
	struct sbuf rows;
	sb_init(&rows);
	long at = from, read = 0;
	int shown = 0, failed = 0, end = 0;
	while (shown < limit && !end && !failed && (!budget || read < budget)) {
		long n = filtered ? LIST_CHUNK : limit - shown;
		if (budget && n > budget - read)
			n = budget - read;
		redisReply **reps = NULL;
		redisReply *rep = list_chunk(c, at, n, &reps, &failed);
		if (!rep) {
			failed = 1;
			break;
		}
		size_t nb = rep->type == REDIS_REPLY_ARRAY ? rep->elements : 0, i;
		for (i = 0; i < nb && shown < limit; i++) {
			const char *bid = rep->element[i]->str;
			const redisReply *h = reps[5 * i];
			at++;
			read++;
			if (h && h->type == REDIS_REPLY_ARRAY && h->elements == 14 &&
			    h->element[0]->type == REDIS_REPLY_STRING) {
				if (!filtered || batch_matches(f, h)) {
					sb_adds(&rows, shown++ ? ",{" : "{");
					list_row(&rows, &t, bid, h, reps + 5 * i + 1);
					sb_addc(&rows, '}');
				}
			} else if (h) {         /* expired: its listing goes too */
				redisReply *z = rcmd(&c->r, "ZREM " K_BATCH_LIST " %s", bid);
				if (z)
					freeReplyObject(z);
			}
		}
		end = i == nb && nb < (size_t)n;       /* read to the list's end */
		chunk_free(rep, reps);
	}
	if (failed) {
		sb_free(&rows);
		table_free(&t);
		return ctl_redis_error(c, "batch list");
	}
	struct sbuf b;
	sb_init(&b);
	if (paged) {
		sb_printf(&b, "{\"total\":%lld,\"from\":%ld,\"read\":%ld,\"next\":", total, from,
		          read);
		at < total && !end ? sb_printf(&b, "%ld", at) : sb_adds(&b, "null");
		sb_adds(&b, ",\"batches\":[");
	} else {
		sb_addc(&b, '[');
	}
	sb_add(&b, rows.s, rows.len);
	sb_adds(&b, paged ? "]}" : "]");
	sb_free(&rows);
	if (c->json)
		jprint(&b);
	else
		sb_free(&b);
	if (!c->json)
		table_print(&t);
	table_free(&t);
	return CTL_OK;
}

static int batch_settle(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "outcome", required_argument, NULL, 'o' },
		CTL_COMMON_OPTS,
		{ 0, 0, 0, 0 },
	};
	const char *outcome = SETTLED_SUCCESS;
	int ch;
	ctl_getopt_reset();
	while ((ch = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		if (ch == 'o')
			outcome = optarg;
		else if (!ctl_common_opt(c, ch, argv))
			return CTL_USAGE;
	}
	if (argc - optind != 2) {
		ctl_error("batch settle: which BID and JID?");
		return CTL_USAGE;
	}
	if (strcmp(outcome, SETTLED_SUCCESS) && strcmp(outcome, SETTLED_DEAD) &&
	    strcmp(outcome, SETTLED_DISCARDED)) {
		ctl_error("batch settle: --outcome is success, dead or discarded, not \"%s\"", outcome);
		return CTL_USAGE;
	}
	if (ctl_connect(c) != 0)
		return CTL_USAGE;
	const char *args[] = { argv[optind + 1], outcome, argv[optind] };
	redisReply *rep = workflow_script(&c->r, "batch_settle", 3, args, NULL);
	if (!rep)
		return ctl_redis_error(c, "batch settle");
	/* Its release goes on in bounded calls (BATCH_SETTLE's more); the callbacks fired
	 * are the first call's: later ones only release. */
	for (int more = rep->type == REDIS_REPLY_ARRAY && rep->elements >= 3 &&
	                reply_integer(rep->element[2], 0); more; ) {
		redisReply *next = workflow_script(&c->r, "batch_settle", 3, args, NULL);
		if (!next)
			return ctl_redis_error(c, "batch settle (its release, left to the poller)");
		more = next->type == REDIS_REPLY_ARRAY && next->elements >= 3 &&
		       reply_integer(next->element[2], 0);
		freeReplyObject(next);
	}
	if (c->json)
		printf("{\"bid\":\"%s\",\"jid\":\"%s\",\"outcome\":\"%s\"}\n", argv[optind],
		       argv[optind + 1], outcome);
	else
		printf("settled %s in %s as %s\n", argv[optind + 1], argv[optind], outcome);
	ctl_print_fired(c, rep, 3);
	freeReplyObject(rep);
	return CTL_OK;
}

int cmd_batch(struct ctl *c, int argc, char **argv)
{
	const char *sub = argc > 1 && argv[1][0] != '-' ? argv[1] : "";
	if (strcmp(sub, "new") == 0)
		return batch_new(c, argc - 1, argv + 1);
	if (strcmp(sub, "settle") == 0)
		return batch_settle(c, argc - 1, argv + 1);
	int list = strcmp(sub, "list") == 0 || !*sub;
	if (!list && strcmp(sub, "commit") && strcmp(sub, "show") && strcmp(sub, "cancel")) {
		ctl_error("batch: new, commit, show, list, cancel or settle, not \"%s\"", sub);
		return CTL_USAGE;
	}
	char **av = argv + (*sub ? 1 : 0);
	int n = ctl_only_common_opts(c, argc - (*sub ? 1 : 0), av, list ? 0 : 1);
	if (n < 0)
		return CTL_USAGE;
	if (!list && n != 1) {
		ctl_error("batch %s: which BID?", sub);
		return CTL_USAGE;
	}
	if (ctl_connect(c) != 0)
		return CTL_USAGE;
	if (list)
		return ctl_batch_list(c, 0, 100, 0, NULL, 0);
	const char *bid = av[optind];
	if (strcmp(sub, "commit") == 0)
		return batch_commit(c, bid);
	if (strcmp(sub, "show") == 0)
		return ctl_batch_show(c, bid);
	return ctl_batch_cancel(c, bid);
}
