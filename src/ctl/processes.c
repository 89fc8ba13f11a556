/* SPDX-License-Identifier: MIT */
/*
 * processes.c: `cogworkerctl processes` (identity, host, pid, busy/concurrency, queues,
 * quiet, last beat, started, RSS) and `processes quiet|resume|stop ID...|--all`, which
 * PUBLISH quiet / resume / stop on cogworker:signal:<id> (doc/protocol.md §7.13, §7.28);
 * an ID is an identity, or the pid of a live process when no other live one has it.
 *
 * A process is live while its presence hash cogworker:process:<id> exists. Busy is
 * counted from cogworker:workers:<id> (HLEN), not from the `busy` field, which is only as
 * fresh as the last beat. The last beat's age is process_ttl − TTL of the presence hash
 * (60 s unless the conf says otherwise). Listing prunes members of cogworker:processes
 * whose presence hash is gone, as cogworker's Web UI does.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "ctl.h"
#include "job.h"

#define PER_PROCESS 5             /* commands read per process */

void ctl_free_processes(struct process_info *p, int n)
{
	for (int i = 0; i < n; i++) {
		free(p[i].waiting);
		free(p[i].identity);
		free(p[i].info);
		free(p[i].hostname);
		for (int k = 0; k < p[i].nqueues; k++)
			free(p[i].queues[k]);
		free(p[i].queues);
	}
	free(p);
}

static void parse_info(struct process_info *p)
{
	cJSON *o = p->info ? job_json_parse(p->info, strlen(p->info)) : NULL;
	const cJSON *v;
	if (o && cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(o, "hostname")))
		p->hostname = xstrdup(v->valuestring);
	else
		p->hostname = xstrndup(p->identity, strcspn(p->identity, ":"));
	if (o && cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(o, "pid")))
		p->pid = (long long)v->valuedouble;
	if (o && cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(o, "concurrency")))
		p->concurrency = (long long)v->valuedouble;
	if (o && cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(o, "started_at")))
		p->started_at = v->valuedouble;
	if (o && cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(o, "rss_kb")))
		p->rss_kb = (long long)v->valuedouble;
	if (o && cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(o, "warm")))
		p->warm = (long long)v->valuedouble;
	if (o && cJSON_IsArray(v = cJSON_GetObjectItemCaseSensitive(o, "queues"))) {
		int n = cJSON_GetArraySize(v);
		p->queues = xcalloc((size_t)n + 1, sizeof *p->queues);
		const cJSON *e;
		cJSON_ArrayForEach(e, v)
			if (cJSON_IsString(e))
				p->queues[p->nqueues++] = xstrdup(e->valuestring);
	}
	if (o)
		cJSON_Delete(o);
}

static int by_identity(const void *a, const void *b)
{
	return strcmp(((const struct process_info *)a)->identity,
	              ((const struct process_info *)b)->identity);
}

int ctl_read_processes(struct ctl *c, int prune, struct process_info **out, int *n)
{
	*out = NULL;
	*n = 0;
	redisReply *ids = rcmd(&c->r, "SMEMBERS " K_PROCESSES);
	if (!ids)
		return ctl_redis_error(c, K_PROCESSES);
	size_t m = ids->elements;
	struct rpipe p;
	rpipe_begin(&c->r, &p);
	for (size_t i = 0; i < m; i++) {
		const redisReply *e = ids->element[i];
		rpipe_add(&c->r, &p, "EXISTS " K_PROCESS "%b", e->str, e->len);
		rpipe_add(&c->r, &p, "HMGET " K_PROCESS "%b info busy quiet", e->str, e->len);
		rpipe_add(&c->r, &p, "TTL " K_PROCESS "%b", e->str, e->len);
		rpipe_add(&c->r, &p, "HLEN " K_WORKERS "%b", e->str, e->len);
		rpipe_add(&c->r, &p, "GET " K_WAITING "%b", e->str, e->len);
	}
	redisReply **reps = xcalloc((size_t)p.n + 1, sizeof *reps);
	rpipe_exec(&c->r, &p, reps);
	struct process_info *list = xcalloc(m + 1, sizeof *list);
	int count = 0, status = 0;
	char **gone = xcalloc(m + 1, sizeof *gone);
	size_t *gone_len = xcalloc(m + 1, sizeof *gone_len);
	int ngone = 0;
	for (size_t i = 0; i < m && !status; i++) {
		const redisReply *id = ids->element[i];
		redisReply **r = reps + PER_PROCESS * i;
		char *name = xstrndup(id->str, id->len);
		for (int k = 0; k < 4; k++)
			if (!r[k]) {
				char *what = xasprintf(k == 3 ? K_WORKERS "%s" : K_PROCESS "%s", name);
				status = ctl_redis_error(c, what);
				free(what);
				break;
			}
		if (status) {
			free(name);
			break;
		}
		if (reply_integer(r[0], 0) == 0) {
			gone[ngone] = name;
			gone_len[ngone++] = id->len;
			continue;
		}
		struct process_info *pi = &list[count++];
		pi->identity = name;
		pi->pid = pi->concurrency = pi->rss_kb = pi->warm = -1;
		const redisReply *h = r[1];
		if (h->type == REDIS_REPLY_ARRAY && h->elements == 3) {
			if (h->element[0]->type == REDIS_REPLY_STRING)
				pi->info = xstrndup(h->element[0]->str, h->element[0]->len);
			pi->busy_field = h->element[1]->type == REDIS_REPLY_STRING
			                 ? strtoll(h->element[1]->str, NULL, 10) : 0;
			pi->quiet = h->element[2]->type == REDIS_REPLY_STRING &&
			            strcmp(h->element[2]->str, "true") == 0;
		}
		pi->ttl = reply_integer(r[2], -1);
		pi->busy = reply_integer(r[3], 0);
		/* Best effort, like any view of a damaged key elsewhere: none shown. */
		if (r[4] && r[4]->type == REDIS_REPLY_STRING)
			pi->waiting = xstrndup(r[4]->str, r[4]->len);
		parse_info(pi);
	}
	for (int i = 0; i < p.n; i++)
		if (reps[i])
			freeReplyObject(reps[i]);
	free(reps);
	freeReplyObject(ids);
	if (!status && prune)
		for (int i = 0; i < ngone; i++) {
			redisReply *rep = rcmd(&c->r, "SREM " K_PROCESSES " %b", gone[i], gone_len[i]);
			if (rep)
				freeReplyObject(rep);
		}
	for (int i = 0; i < ngone; i++)
		free(gone[i]);
	free(gone);
	free(gone_len);
	if (status) {
		ctl_free_processes(list, count);
		return status;
	}
	qsort(list, (size_t)count, sizeof *list, by_identity);
	*out = list;
	*n = count;
	return 0;
}

static char *member_string(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	return cJSON_IsString(v) ? xstrdup(v->valuestring) : NULL;
}

static int by_since(const void *a, const void *b)
{
	double x = ((const struct waiting_job *)a)->since, y = ((const struct waiting_job *)b)->since;
	return x < y ? -1 : x > y;
}

void ctl_waiting_jobs(const struct process_info *p, int n, struct waiting_job **out, int *nout)
{
	struct waiting_job *v = NULL;
	int count = 0;
	for (int i = 0; i < n; i++) {
		cJSON *a = p[i].waiting ? job_json_parse(p[i].waiting, strlen(p[i].waiting)) : NULL;
		const cJSON *e;
		if (a && !cJSON_IsArray(a)) {
			cJSON_Delete(a);
			a = NULL;
		}
		cJSON_ArrayForEach(e, a) {
			if (!cJSON_IsObject(e))
				continue;
			v = xrealloc(v, sizeof *v * (size_t)(count + 1));
			struct waiting_job *w = &v[count++];
			const cJSON *limit = cJSON_GetObjectItemCaseSensitive(e, "limit");
			const cJSON *since = cJSON_GetObjectItemCaseSensitive(e, "since");
			*w = (struct waiting_job){
				.identity = p[i].identity, .jid = member_string(e, "jid"),
				.cls = member_string(e, "class"), .queue = member_string(e, "queue"),
				.handler = member_string(e, "handler"),
				.limit = cJSON_IsNumber(limit) ? (int)limit->valuedouble : 0,
				.since = cJSON_IsNumber(since) ? since->valuedouble : 0,
			};
		}
		if (a)
			cJSON_Delete(a);
	}
	if (count)
		qsort(v, (size_t)count, sizeof *v, by_since);
	*out = v;
	*nout = count;
}

void ctl_free_waiting(struct waiting_job *w, int n)
{
	for (int i = 0; i < n; i++) {
		free(w[i].jid);
		free(w[i].cls);
		free(w[i].queue);
		free(w[i].handler);
	}
	free(w);
}

/* Jobs the process holds for a max_concurrency slot. */
static int waiting_count(const struct process_info *p)
{
	struct waiting_job *w;
	int n;
	ctl_waiting_jobs(p, 1, &w, &n);
	ctl_free_waiting(w, n);
	return n;
}

static double beat_age(const struct ctl *c, const struct process_info *p)
{
	if (p->ttl < 0)
		return -1;
	double age = c->conf.process_ttl - (double)p->ttl;
	return age < 0 ? 0 : age;
}

int ctl_processes_list(struct ctl *c)
{
	struct process_info *p;
	int n;
	int s = ctl_read_processes(c, 1, &p, &n);
	if (s)
		return s;
	double now = now_float();
	if (c->json) {
		struct sbuf b;
		sb_init(&b);
		sb_addc(&b, '[');
		for (int i = 0; i < n; i++) {
			sb_adds(&b, i ? ",{\"identity\":" : "{\"identity\":");
			jstr(&b, p[i].identity);
			sb_adds(&b, ",\"hostname\":");
			jstr(&b, p[i].hostname);
			sb_adds(&b, ",\"pid\":");
			p[i].pid >= 0 ? sb_printf(&b, "%lld", p[i].pid) : sb_adds(&b, "null");
			sb_adds(&b, ",\"concurrency\":");
			p[i].concurrency >= 0 ? sb_printf(&b, "%lld", p[i].concurrency)
			                      : sb_adds(&b, "null");
			sb_printf(&b, ",\"busy\":%lld,\"queues\":[", p[i].busy);
			for (int k = 0; k < p[i].nqueues; k++) {
				if (k)
					sb_addc(&b, ',');
				jstr(&b, p[i].queues[k]);
			}
			sb_printf(&b, "],\"quiet\":%s,\"beat_age\":", p[i].quiet ? "true" : "false");
			double age = beat_age(c, &p[i]);
			age >= 0 ? jnum(&b, age) : sb_adds(&b, "null");
			sb_adds(&b, ",\"started_at\":");
			p[i].started_at > 0 ? jnum(&b, p[i].started_at) : sb_adds(&b, "null");
			sb_adds(&b, ",\"rss_kb\":");
			p[i].rss_kb >= 0 ? sb_printf(&b, "%lld", p[i].rss_kb) : sb_adds(&b, "null");
			sb_printf(&b, ",\"waiting\":%d", waiting_count(&p[i]));
			sb_adds(&b, ",\"warm\":");
			p[i].warm >= 0 ? sb_printf(&b, "%lld", p[i].warm) : sb_adds(&b, "null");
			sb_addc(&b, '}');
		}
		sb_addc(&b, ']');
		jprint(&b);
	} else if (n == 0) {
		printf("no live processes\n");
	} else {
		static const char *heads[] = { "IDENTITY", "HOST", "PID", "BUSY", "QUEUES", "STATE",
		                               "LAST BEAT", "STARTED", "RSS", "WARM" };
		static const int limits[] = { 0, 0, 0, 0, 40, 0, 0, 0, 0, 0 };
		struct table t;
		table_init(&t, 10, heads, limits);
		for (int i = 0; i < n; i++) {
			char pid[32] = "?", busy[64], beat[48] = "?", started[48] = "?", rss[32] = "?",
			     warm[32] = "-";
			if (p[i].warm >= 0)
				snprintf(warm, sizeof warm, "%lld", p[i].warm);
			if (p[i].pid >= 0)
				snprintf(pid, sizeof pid, "%lld", p[i].pid);
			if (p[i].concurrency >= 0)
				snprintf(busy, sizeof busy, "%lld / %lld", p[i].busy, p[i].concurrency);
			else
				snprintf(busy, sizeof busy, "%lld / ?", p[i].busy);
			int waiting = waiting_count(&p[i]);
			if (waiting)
				snprintf(busy + strlen(busy), sizeof busy - strlen(busy), " +%d waiting",
				         waiting);
			double age = beat_age(c, &p[i]);
			if (age >= 0)
				ctl_relative(now - age, now, beat, sizeof beat);
			if (p[i].started_at > 0)
				ctl_relative(p[i].started_at, now, started, sizeof started);
			if (p[i].rss_kb >= 0)
				snprintf(rss, sizeof rss, "%.1f MB", (double)p[i].rss_kb / 1024.0);
			struct sbuf q;
			sb_init(&q);
			for (int k = 0; k < p[i].nqueues; k++)
				sb_printf(&q, "%s%s", k ? "," : "", p[i].queues[k]);
			const char *row[] = { p[i].identity, p[i].hostname, pid, busy, q.s,
			                      p[i].quiet ? "Quiet" : "Active", beat, started, rss, warm };
			table_add(&t, row);
			sb_free(&q);
		}
		table_print(&t);
		table_free(&t);
	}
	ctl_free_processes(p, n);
	return CTL_OK;
}

/* PUBLISH one signal; 0 sent (and received), CTL_NOTHING when nobody listened. */
static int send_signal(struct ctl *c, const char *id, const char *msg, struct sbuf *json, int *first)
{
	redisReply *rep = rcmd(&c->r, "PUBLISH " K_SIGNAL "%s %s", id, msg);
	if (!rep)
		return ctl_redis_error(c, "PUBLISH");
	long long receivers = reply_integer(rep, 0);
	freeReplyObject(rep);
	if (c->json) {
		sb_adds(json, *first ? "{\"identity\":" : ",{\"identity\":");
		jstr(json, id);
		sb_printf(json, ",\"signal\":\"%s\",\"received\":%s}", msg,
		          receivers > 0 ? "true" : "false");
	}
	*first = 0;
	if (receivers == 0) {
		ctl_error("%s: sent %s, but no subscriber received it", id, msg);
		return CTL_NOTHING;
	}
	if (!c->json)
		printf("sent %s to %s\n", msg, id);
	return CTL_OK;
}

/* The live process an argument names: its identity, or its pid when that is unambiguous
 * among the live processes (what ps and the log's pid= show). NULL after the message, with
 * *status worsened: a pid on two hosts, or nothing live by that name (the message shows
 * what an identity looks like, with some of the live ones); nothing is sent for it. */
static const char *resolve_process(const struct process_info *p, int n, const char *arg,
                                   int *status)
{
	for (int i = 0; i < n; i++)
		if (strcmp(p[i].identity, arg) == 0)
			return p[i].identity;
	char *end;
	long long pid = strtoll(arg, &end, 10);
	int is_pid = *arg >= '0' && *arg <= '9' && *end == '\0';
	const char *found = NULL;
	struct sbuf some, same;         /* live identities; those with the pid */
	sb_init(&some);
	sb_init(&same);
	int matches = 0;
	for (int i = 0; i < n; i++) {
		if (some.len < 160)
			sb_printf(&some, "%s%s", some.len ? ", " : "", p[i].identity);
		if (!is_pid || p[i].pid != pid)
			continue;
		if (matches++ == 0)
			found = p[i].identity;
		sb_printf(&same, "%s%s", same.len ? ", " : "", p[i].identity);
	}
	if (matches == 1) {
		sb_free(&some);
		sb_free(&same);
		return found;
	}
	if (matches > 1) {
		ctl_error("pid %s is live on %d hosts (%s): give the identity", arg, matches, same.s);
		*status = ctl_worse(*status, CTL_NOTHING);
	} else if (n == 0) {
		ctl_error("no live process %s (there are none)", arg);
		*status = ctl_worse(*status, CTL_NOTHING);
	} else {
		ctl_error("no live process %s: give an identity (host:pid:id, as `cogworkerctl "
		          "processes` lists them: %s) or the pid of one", arg, some.s);
		*status = ctl_worse(*status, CTL_NOTHING);
	}
	sb_free(&some);
	sb_free(&same);
	return NULL;
}

int ctl_processes_signal(struct ctl *c, const char *msg, int all, int nids, char **ids)
{
	if (all && nids) {
		ctl_error("processes %s: give identities or --all, not both", msg);
		return CTL_USAGE;
	}
	if (!all && !nids) {
		ctl_error("usage: cogworkerctl processes %s IDENTITY... | --all%s", msg,
		          strcmp(msg, "stop") == 0 ? " --yes" : "");
		return CTL_USAGE;
	}
	if (all && strcmp(msg, "stop") == 0 && !c->yes) {
		ctl_error("processes stop --all stops every live process: add --yes");
		return CTL_USAGE;
	}
	if (ctl_connect(c) != 0)
		return CTL_USAGE;
	struct process_info *p;
	int n;
	int s = ctl_read_processes(c, 0, &p, &n);
	if (s)
		return s;
	struct sbuf json;
	sb_init(&json);
	sb_addc(&json, '[');
	int first = 1, status = CTL_OK;
	if (all) {
		if (n == 0) {
			ctl_error("no live processes");
			status = CTL_NOTHING;
		}
		for (int i = 0; i < n && status != CTL_USAGE; i++)
			status = ctl_worse(status, send_signal(c, p[i].identity, msg, &json, &first));
	} else {
		for (int k = 0; k < nids && status != CTL_USAGE; k++) {
			const char *id = resolve_process(p, n, ids[k], &status);
			if (id)
				status = ctl_worse(status, send_signal(c, id, msg, &json, &first));
		}
	}
	sb_addc(&json, ']');
	if (c->json && status != CTL_USAGE)
		jprint(&json);
	else
		sb_free(&json);
	ctl_free_processes(p, n);
	return status;
}

int cmd_processes(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "all", no_argument, NULL, 'a' }, CTL_COMMON_OPTS, { 0, 0, 0, 0 },
	};
	int ch, all = 0;
	ctl_getopt_reset();
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (ch == 'a')
			all = 1;
		else if (!ctl_common_opt(c, ch, argv))
			return CTL_USAGE;
	}
	int nargs = argc - optind;
	char **args = argv + optind;
	if (nargs == 0 || strcmp(args[0], "list") == 0) {
		if (nargs > 1 || all) {
			ctl_error("processes: unexpected arguments");
			return CTL_USAGE;
		}
		if (ctl_connect(c) != 0)
			return CTL_USAGE;
		return ctl_processes_list(c);
	}
	const char *sub = args[0];
	if (strcmp(sub, "quiet") != 0 && strcmp(sub, "resume") != 0 && strcmp(sub, "stop") != 0) {
		ctl_error("processes: unknown subcommand \"%s\" (list, quiet, resume, stop)", sub);
		return CTL_USAGE;
	}
	return ctl_processes_signal(c, sub, all, nargs - 1, args + 1);
}
