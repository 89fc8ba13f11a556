/* SPDX-License-Identifier: MIT */
/*
 * warm_proto.h: the warm handler protocol, version 1, as text (doc/protocol.md §1.2): the
 * messages a warm process may send, read and checked, and the ones the daemon sends,
 * written. A pure helper: no I/O, no state.
 */
#ifndef COGWORKERD_WARM_PROTO_H
#define COGWORKERD_WARM_PROTO_H

#include <stddef.h>

#define WARM_PROTOCOL_VERSION "1"
/* The longest line a warm process may send: a "done" carries at most an error message,
 * which is cut to the handler's output_tail anyway; a longer line is a broken process. */
#define WARM_LINE_MAX (1 << 20)
#define WARM_CANCEL_LINE "{\"type\":\"cancel\"}\n"

enum warm_msg_type { WARM_MSG_READY, WARM_MSG_PROGRESS, WARM_MSG_DONE };

struct warm_msg {
	enum warm_msg_type type;
	int exit;               /* done: 0..255 */
	int recycle;            /* done: "recycle":true */
	char *error;            /* done: the "error" string decoded (may hold NUL), or NULL */
	char *jid;              /* done: the optional "jid" of the job it answers, or NULL */
	size_t error_len;
	char *pct;              /* progress: the number as written ("40", "12.5") */
	char *message;          /* progress: the "message" string decoded, or NULL */
};

/*
 * Read one line (without its newline) sent by a warm process. 0 with *m filled (free it
 * with warm_msg_free), or -1 with why ("not a JSON object", "unknown type \"x\"", …) and
 * *m empty. Members it does not know are ignored, so a later version may add some.
 */
int warm_msg_parse(const char *line, size_t len, struct warm_msg *m, char *why, size_t whylen);
void warm_msg_free(struct warm_msg *m);

/*
 * The job message for the job JSON raw: {"type":"job","job":RAW,"deadline":D}, newline
 * terminated; D is deadline (epoch seconds) or null when deadline <= 0. raw is spliced
 * byte for byte but for newlines, which can only be whitespace between its tokens (a
 * string can't hold one unescaped) and become spaces: one message, one line. malloc'd,
 * its length in *len.
 */
char *warm_job_message(const char *raw, size_t rawlen, double deadline, size_t *len);

#endif
