/* SPDX-License-Identifier: MIT */
/*
 * scripts.h: the atomic Lua scripts of doc/protocol.md §6, one file each in lua/, embedded into
 * the binary at build time (tools/embed-lua.sh) and addressed by file name.
 */
#ifndef COGWORKERD_SCRIPTS_H
#define COGWORKERD_SCRIPTS_H

#include <stddef.h>

struct script_src {
	const char *name;
	const char *src;
};
extern const struct script_src script_sources[];   /* generated; {0, 0}-terminated */

struct script {
	const char *name;
	const char *src;
	char sha[41];
	int plain_eval;         /* the owned-key scripts always use EVAL (doc/protocol.md §6.0) */
};

/* Look a script up by its lua/ file name ("ack", "requeue", ...); aborts if unknown,
 * since that is a build error, not a runtime condition. Thread-safe. */
const struct script *script_get(const char *name);

/* SHA-1 hex of data (also used for pjids and unique digests). */
void sha1_hex(const void *data, size_t len, char out[41]);

#endif
