/* SPDX-License-Identifier: MIT */
/*
 * limits.c: `cogworkerctl limits`: the fleet-wide limits of each handler class as Redis
 * holds them (doc/protocol.md §7.30): fleet_concurrency with its slots in use and their
 * holders (process identity, fetcher, jid, lease expiry), the jobs waiting to be tried
 * again, and the rate_limit window's use. Read by src/fleetlimits.c, the code the daemon's
 * /metrics uses too. A class shows up once a job of it has been started, or turned away,
 * under a limit. max_concurrency is per process and lives in memory: each daemon's
 * /metrics has it (cogworkerd_limit_running, cogworkerd_limit_waiting).
 */
#include <stdlib.h>
#include <string.h>
#include "ctl.h"
#include "fleetlimits.h"

/* "<identity> <fetcher> <jid>" into its three parts (malloc'd): the identity may hold
 * spaces, the other two never do. */
struct holder {
	char *identity, *fetcher, *jid;
};

static void split_holder(const char *h, struct holder *out)
{
	const char *b = strrchr(h, ' ');
	const char *a = b;
	while (a && a > h && a[-1] != ' ')
		a--;
	if (!b || !a || a == h) {
		out->identity = xstrdup(h);
		out->fetcher = xstrdup("");
		out->jid = xstrdup("");
		return;
	}
	out->identity = xstrndup(h, (size_t)(a - 1 - h));
	out->fetcher = xstrndup(a, (size_t)(b - a));
	out->jid = xstrdup(b + 1);
}

static void holder_free(struct holder *h)
{
	free(h->identity);
	free(h->fetcher);
	free(h->jid);
}

static void json_out(const struct fleet_limit *l, int n)
{
	struct sbuf b;
	sb_init(&b);
	sb_addc(&b, '[');
	for (int i = 0; i < n; i++) {
		sb_adds(&b, i ? ",{\"class\":" : "{\"class\":");
		jstr(&b, l[i].cls);
		sb_adds(&b, ",\"fleet_concurrency\":");
		if (l[i].fleet_n)
			sb_printf(&b, "%d", l[i].fleet_n);
		else
			sb_adds(&b, "null");
		sb_adds(&b, ",\"holders\":[");
		for (int k = 0; k < l[i].nholders; k++) {
			struct holder h;
			split_holder(l[i].holders[k], &h);
			sb_adds(&b, k ? ",{\"identity\":" : "{\"identity\":");
			jstr(&b, h.identity);
			sb_adds(&b, ",\"fetcher\":");
			jstr(&b, h.fetcher);
			sb_adds(&b, ",\"jid\":");
			jstr(&b, h.jid);
			sb_adds(&b, ",\"expires_at\":");
			jnum(&b, l[i].expires[k]);
			sb_addc(&b, '}');
			holder_free(&h);
		}
		sb_printf(&b, "],\"waiters\":%lld,\"rate_limit\":", l[i].waiters);
		if (l[i].rate_n) {
			char rate[64];
			snprintf(rate, sizeof rate, "%d/%gs", l[i].rate_n, l[i].window);
			jstr(&b, rate);
			sb_printf(&b, ",\"window_seconds\":%.15g,\"window_starts\":%lld,\"next_room\":",
			          l[i].window, l[i].window_starts);
			if (l[i].next_room > 0)
				jnum(&b, l[i].next_room);
			else
				sb_adds(&b, "null");
		} else {
			sb_adds(&b, "null,\"window_seconds\":null,\"window_starts\":null,\"next_room\":null");
		}
		sb_addc(&b, '}');
	}
	sb_addc(&b, ']');
	jprint(&b);
}

static void table_out(const struct fleet_limit *l, int n, double now)
{
	static const char *heads[] = { "CLASS", "FLEET", "WAITING", "RATE", "IN WINDOW",
	                               "ROOM" };
	struct table t;
	table_init(&t, 6, heads, NULL);
	for (int i = 0; i < n; i++) {
		char fleet[32] = "-", waiting[32], rate[64] = "-", used[32] = "-", room[64] = "-";
		if (l[i].fleet_n)
			snprintf(fleet, sizeof fleet, "%d/%d", l[i].nholders, l[i].fleet_n);
		snprintf(waiting, sizeof waiting, "%lld", l[i].waiters);
		if (l[i].rate_n) {
			snprintf(rate, sizeof rate, "%d/%gs", l[i].rate_n, l[i].window);
			snprintf(used, sizeof used, "%lld", l[i].window_starts);
			if (l[i].next_room > now)
				ctl_relative(l[i].next_room, now, room, sizeof room);
			else
				snprintf(room, sizeof room, "now");
		}
		const char *row[] = { l[i].cls, fleet, waiting, rate, used, room };
		table_add(&t, row);
	}
	table_print(&t);
	table_free(&t);
	for (int i = 0; i < n; i++) {
		if (l[i].nholders == 0)
			continue;
		printf("\nholders of %s:\n", l[i].cls);
		static const char *hh[] = { "PROCESS", "FETCHER", "JID", "LEASE" };
		struct table ht;
		table_init(&ht, 4, hh, NULL);
		for (int k = 0; k < l[i].nholders; k++) {
			struct holder h;
			char lease[64];
			split_holder(l[i].holders[k], &h);
			ctl_relative(l[i].expires[k], now, lease, sizeof lease);
			const char *row[] = { h.identity, h.fetcher, h.jid, lease };
			table_add(&ht, row);
			holder_free(&h);
		}
		table_print(&ht);
		table_free(&ht);
	}
}

int cmd_limits(struct ctl *c, int argc, char **argv)
{
	if (ctl_only_common_opts(c, argc, argv, 0) < 0)
		return CTL_USAGE;
	if (ctl_connect(c) != 0)
		return CTL_USAGE;
	return ctl_limits(c);
}

int ctl_limits(struct ctl *c)
{
	double now = ctl_now(c);
	if (now < 0)
		return ctl_redis_error(c, "TIME");
	struct fleet_limit *l;
	int n;
	const char *what;
	if (fleet_limits_read(&c->r, &l, &n, &what) != 0)
		return ctl_redis_error(c, what);
	if (c->json)
		json_out(l, n);
	else if (n == 0)
		printf("no limits seen yet (a class shows up once a job of it starts under "
		       "fleet_concurrency or rate_limit)\n");
	else
		table_out(l, n, now);
	fleet_limits_free(l, n);
	return CTL_OK;
}
