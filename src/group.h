/* SPDX-License-Identifier: MIT */
/*
 * group.h: a job's group for fair share (group.c, doc/protocol.md §7.35): the grammar of
 * a handler's group_by path and the reading of its value from a job as pushed.
 */
#ifndef COGWORKERD_GROUP_H
#define COGWORKERD_GROUP_H

#include <stddef.h>

/* The longest group value taken as it is (bytes); a longer one is not a group (below). */
#define GROUP_MAX_LEN 200
#define GROUP_MAX_STEPS 8

struct group_step {
	char *key;              /* a member of an object, or NULL for an index */
	long index;             /* an element of an array (key NULL) */
};

struct group_path {
	int nsteps;
	struct group_step steps[GROUP_MAX_STEPS];
};

/*
 * Parse a group_by path: a top-level key, then any of "[N]" (an element of an array) and
 * ".key" (a member of an object), at most GROUP_MAX_STEPS in all: "tenant", "args[0]",
 * "args[0].account_id". A key is one or more characters but '.', '[', ']', whitespace and
 * quotes. 0 and *p filled, or -1 with *err saying what is wrong (static text).
 */
int group_path_parse(const char *s, struct group_path *p, const char **err);
void group_path_free(struct group_path *p);

enum group_found {
	GROUP_FOUND,            /* *out is the value: a string's text or an integer's digits */
	GROUP_ABSENT,           /* no such member or element (or null): the group "" */
	GROUP_INVALID,          /* something else there: the group "", *why says what */
};

/* The group of the job in raw (len bytes) under path p: *out malloc'd (the text, possibly
 * "", no NUL byte inside), *why static text for GROUP_INVALID. */
enum group_found group_of(const char *raw, size_t len, const struct group_path *p,
                          char **out, const char **why);

#endif
