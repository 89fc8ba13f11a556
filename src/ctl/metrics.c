/* SPDX-License-Identifier: MIT */
/*
 * metrics.c: `cogworkerctl metrics`: the Prometheus text exposition of cogworker's
 * exporter (doc/protocol.md §7.26: the eight fleet-wide metrics, exact names and format), for a
 * node_exporter textfile collector. The text comes from src/exporter.c, the one
 * implementation the daemon's /metrics endpoint serves too.
 */
#include <stdlib.h>
#include "ctl.h"
#include "exporter.h"

int cmd_metrics(struct ctl *c, int argc, char **argv)
{
	if (ctl_only_common_opts(c, argc, argv, 0) < 0)
		return CTL_USAGE;
	if (c->json) {
		ctl_error("metrics prints the Prometheus text format only (no --json)");
		return CTL_USAGE;
	}
	if (ctl_connect(c) != 0)
		return CTL_USAGE;
	struct sbuf b;
	sb_init(&b);
	const char *what = NULL;
	if (exporter_render(&c->r, &b, &what) != 0) {
		sb_free(&b);
		return ctl_redis_error(c, what && *what ? what : "metrics");
	}
	fwrite(b.s, 1, b.len, stdout);
	sb_free(&b);
	return CTL_OK;
}
