/* SPDX-License-Identifier: MIT */
/*
 * jobs_types.c: the sets' names and keys, and the helpers over an entry that every part of
 * `cogworkerctl jobs` uses (jobs_types.h says why they sit below the parts).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "jobs_types.h"
#include "keys.h"

const char *const jobs_set_names[S_COUNT] = {
	"queued", "scheduled", "retry", "dead", "running", "waiting", "after", "group",
	"inprogress",
};
const char *const jobs_zset_keys[S_COUNT] = {
	NULL, K_SCHEDULE, K_RETRY, K_DEAD, NULL, NULL, NULL, NULL, NULL,
};

void jobs_entry_free(struct entry *e)
{
	free(e->key);
	free(e->qname);
	free(e->raw);
	free(e->process);
	free(e->handler);
	free(e->summary);
	job_free(&e->j);
}

void jobs_found_free(struct found *f)
{
	for (int i = 0; i < f->n; i++)
		jobs_entry_free(&f->v[i]);
	free(f->v);
	memset(f, 0, sizeof *f);
}

const char *jobs_payload_queue(const struct entry *e)
{
	if (e->qname)
		return e->qname;
	const cJSON *q = e->j.obj ? cJSON_GetObjectItemCaseSensitive(e->j.obj, "queue") : NULL;
	return cJSON_IsString(q) ? q->valuestring : NULL;
}

const char *jobs_entry_class(const struct entry *e)
{
	return e->j.obj ? e->j.cls : "(unparseable)";
}

void jobs_set_list(unsigned sets, char *out, size_t n)
{
	out[0] = '\0';
	for (int s = 0; s < S_COUNT; s++)
		if (sets & BIT(s))
			snprintf(out + strlen(out), n - strlen(out), "%s%s", out[0] ? ", " : "",
			         jobs_set_names[s]);
}

const char *jobs_string_member(const struct entry *e, const char *name)
{
	const cJSON *v = e->j.obj ? cJSON_GetObjectItemCaseSensitive(e->j.obj, name) : NULL;
	return cJSON_IsString(v) ? v->valuestring : NULL;
}
