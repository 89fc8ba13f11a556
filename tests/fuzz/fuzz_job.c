/* SPDX-License-Identifier: MIT */
/*
 * fuzz_job.c: a fetched payload, read as the fetcher reads it (job_parse), then every entry
 * the daemon may file for it: the retry/dead entry (job_failure_payload, also the interrupt
 * form), the re-stamped graduation, the minimal dead entry, the (unparseable) wrapper, the
 * error message; then its args as the handler gets them (array spans, args_as_argv) and as
 * the digests hash them (canonical form, unique digest, pjid).
 *
 * What must hold, whatever the bytes: every entry is one JSON object that reads back with
 * the same class, jid, queue and validity (the splices touch nothing else); a wrapper and a
 * message are valid UTF-8; the canonical form is valid JSON and its own canonical form; a
 * digest exists exactly when the canonical form does.
 */
#include <string.h>
#include "fuzz.h"
#include "job.h"
#include "json.h"
#include "outcome.h"
#include "util.h"

static const double NOW = 1767225600.123456;

static int same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* The value text of a top-level member, malloc'd, or NULL. */
static char *member(const char *obj, const char *key)
{
	size_t start, len;
	if (json_member_span(obj, strlen(obj), key, &start, &len) != 0)
		return NULL;
	return xstrndup(obj + start, len);
}

/* An entry filed for j reads back as the same job. */
static void check_reads_back(const struct job *j, const char *entry)
{
	struct job k;
	CHECK(entry);
	char *again = json_edit_object(entry, strlen(entry), NULL, 0);     /* one object */
	CHECK(again && strcmp(again, entry) == 0);
	free(again);
	job_parse(&k, entry, strlen(entry), j->fetched_from);
	CHECK(k.obj);
	CHECK(same_str(j->cls, k.cls) && same_str(j->jid, k.jid) && same_str(j->queue, k.queue));
	/* Never makes a job invalid; an invalid one stays so, except one whose only bytes that
	 * are not UTF-8 were in a member the entry replaces (the daemon buries such a job as a
	 * wrapper and never files this entry for it, but the splice must hold all the same). */
	CHECK(!k.invalid || j->invalid);
	CHECK(!j->invalid || k.invalid || utf8_invalid_at(j->raw, j->raw_len) >= 0);
	CHECK(strcmp(j->args_json, k.args_json) == 0);
	job_free(&k);
}

static void check_member(const char *entry, const char *key, const char *want)
{
	char *v = member(entry, key);
	CHECK(same_str(v, want));
	free(v);
}

static void check_entries(const struct job *j)
{
	char *fp = job_failure_payload(j, "Cogworker::HandlerFailed", "exit status 1: \xff", NOW,
	                               j->retry_count + 1, 0, 0);
	check_reads_back(j, fp);
	check_member(fp, "error_class", "\"Cogworker::HandlerFailed\"");
	check_member(fp, "error_message", "\"exit status 1: \xef\xbf\xbd\"");
	check_member(fp, "failure_outcome", NULL);
	struct job k;
	job_parse(&k, fp, strlen(fp), NULL);
	long want = j->retry_count + 1 > 1000000000 ? 1000000000 : j->retry_count + 1;
	CHECK(k.retry_count == want);                   /* counts are capped at 10^9 */
	job_free(&k);
	free(fp);

	fp = job_failure_payload(j, "Cogworker::HandlerTimeout", "timed out", NOW, 1, 1, 2);
	check_reads_back(j, fp);
	check_member(fp, "failed_at", "1767225600.123456");
	check_member(fp, "interrupted_count", "2");
	free(fp);

	char *re = job_restamp_enqueued(j->raw, j->raw_len, NOW);
	check_reads_back(j, re);
	check_member(re, "enqueued_at", "1767225600.123456");
	free(re);

	char *dead = job_minimal_dead_entry(j->raw, j->raw_len, j->jid, "Cogworker::ProcessDied",
	                                    "gone", NOW);
	char *obj = dead ? json_edit_object(dead, strlen(dead), NULL, 0) : NULL;
	CHECK(obj);
	free(obj);
	free(dead);
}

static void check_args(const struct job *j)
{
	size_t len = strlen(j->args_json);
	size_t *starts, *lens;
	int n = json_array_spans(j->args_json, len, &starts, &lens);
	CHECK(n >= 0 || j->invalid);                   /* a job's args are an array */
	for (int i = 0; i < n; i++) {
		CHECK(starts[i] + lens[i] <= len && lens[i] > 0);
		CHECK(i == 0 || starts[i] >= starts[i - 1] + lens[i - 1]);
		if (j->args_json[starts[i]] == '"') {
			size_t dn;
			char *d = json_string_decode(j->args_json + starts[i], lens[i], &dn);
			CHECK(d && dn <= lens[i]);
			free(d);
		}
	}
	int argc, nul_at;
	char **argv = args_as_argv(j->args_json, &argc, &nul_at);
	CHECK(nul_at >= 0 ? argc == 0 && !argv && nul_at < n : argc == (n > 0 ? n : 0));
	for (int i = 0; i < argc; i++)
		free(argv[i]);
	free(argv);
	free(starts);
	free(lens);

	char *canon = json_canonical(j->args_json, len);
	if (canon) {
		CHECK(json_valid(canon, strlen(canon)));
		char *twice = json_canonical(canon, strlen(canon));
		CHECK(twice && strcmp(twice, canon) == 0);
		free(twice);
	}
	char digest[41], pjid[41];
	int rc = job_unique_digest(j->cls ? j->cls : "", j->queue, j->args_json, digest);
	CHECK((rc == 0) == (canon != NULL));
	CHECK(rc != 0 || strlen(digest) == 40);
	rc = job_pjid("* * * * *", j->cls ? j->cls : "", j->args_json, pjid);
	CHECK((rc == 0) == (canon != NULL));
	free(canon);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *raw = (const char *)data;
	struct job j;
	job_parse(&j, raw, size, "default");
	CHECK(j.queue && (!j.obj || j.args_json));
	CHECK(!j.obj == !!j.parse_error);
	CHECK(!j.invalid || j.obj);

	char *w = job_unparseable_wrapper(raw, size, j.fetched_from, j.obj ? "Cogworker::InvalidJob"
	                                  : "JSON::ParserError", j.invalid ? j.invalid :
	                                  j.parse_error ? j.parse_error : "x", NOW);
	CHECK(json_valid(w, strlen(w)));
	char *payload = member(w, "raw_payload");
	size_t pn, sn;
	char *decoded = json_string_decode(payload, strlen(payload), &pn);
	char *scrubbed = utf8_scrub_len(raw, size, MAX_RAW_PAYLOAD, &sn);
	CHECK(decoded && pn == sn && memcmp(decoded, scrubbed, sn) == 0);
	free(decoded);
	free(scrubbed);
	free(payload);
	struct job wj;
	job_parse(&wj, w, strlen(w), NULL);
	CHECK(wj.obj && !wj.invalid && strcmp(wj.cls, JOB_UNPARSEABLE_CLASS) == 0);
	CHECK(!job_gets_on_death(&wj));
	job_free(&wj);
	free(w);

	char *msg = job_error_message("Cogworker::HandlerFailed", "exit status 1", raw, size);
	CHECK(fuzz_valid_utf8(msg, strlen(msg)));
	size_t chars = 0;
	for (const char *p = msg; *p; p++)
		chars += ((unsigned char)*p & 0xC0) != 0x80;
	CHECK(chars <= MAX_ERROR_MESSAGE);
	free(msg);

	char *dead = job_minimal_dead_entry(raw, size, j.jid, "Cogworker::ProcessDied", "gone", NOW);
	char *obj = dead ? json_edit_object(dead, strlen(dead), NULL, 0) : NULL;
	CHECK(obj);                                     /* an object, whatever raw was */
	free(obj);
	free(dead);

	if (j.obj) {
		check_entries(&j);
		check_args(&j);
	}
	job_free(&j);
	return 0;
}
