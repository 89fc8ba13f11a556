/* SPDX-License-Identifier: MIT */
/* Unit tests: what a run cost, as every surface writes it (src/usage.c; doc/behaviours.md
 * AC-1, AC-2, AC-4, AC-7): the log's "cpu=… maxrss=…", the records' members, the JSON log
 * fields, and the per-job readers of a live process (this one) that warm jobs use. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include "usage.h"

static const char *human(long long bytes)
{
	static char out[32];
	usage_bytes_human(bytes, out, sizeof out);
	return out;
}

/* AC-1: the peak as people read it; an unknown one is "?", never 0 */
START_TEST(test_bytes_human)
{
	ck_assert_str_eq(human(-1), "?");
	ck_assert_str_eq(human(0), "0KiB");
	ck_assert_str_eq(human(1), "1KiB");
	ck_assert_str_eq(human(512 * 1024), "512KiB");
	ck_assert_str_eq(human(3354624), "3.2MiB");
	ck_assert_str_eq(human(151LL << 20), "151MiB");
	ck_assert_str_eq(human(10240LL << 20), "10.0GiB");
}
END_TEST

/* AC-1, AC-2, AC-4: the settle line's words, the record's members, the JSON log's fields */
START_TEST(test_text_json_and_fields)
{
	struct run_usage u;
	char t[64];
	struct sbuf b;
	struct log_field f[USAGE_LOG_FIELDS];
	usage_none(&u);                         /* nothing ran: nothing said, null recorded */
	usage_text(&u, t, sizeof t);
	ck_assert_str_eq(t, "");
	ck_assert_int_eq(usage_log_fields(&u, f), 0);
	sb_init(&b);
	usage_json(&u, &b);
	ck_assert_str_eq(b.s, ",\"cpu_s\":null,\"maxrss_bytes\":null");
	sb_free(&b);

	struct rusage ru;
	memset(&ru, 0, sizeof ru);
	ru.ru_utime.tv_usec = 480000;
	ru.ru_stime.tv_sec = 0;
	ru.ru_stime.tv_usec = 30000;
	ru.ru_maxrss = 151 * 1024;              /* KiB */
	usage_from_rusage(&u, &ru);
	usage_text(&u, t, sizeof t);
	ck_assert_str_eq(t, " cpu=0.51s maxrss=151MiB");
	ck_assert_int_eq(usage_log_fields(&u, f), 2);
	ck_assert_str_eq(f[0].key, "cpu_s");
	ck_assert(fabs(f[0].num - 0.51) < 1e-9);
	ck_assert_str_eq(f[1].key, "maxrss_bytes");
	ck_assert(f[1].num == 151.0 * 1024 * 1024);
	sb_init(&b);
	usage_json(&u, &b);
	ck_assert_str_eq(b.s, ",\"cpu_s\":0.510,\"maxrss_bytes\":158334976");
	sb_free(&b);

	/* a cgroup of its own: its four figures too, null where unreadable */
	u.cgroup = 1;
	u.cg_memory_peak = 1 << 20;
	u.cg_io_read_bytes = 10;
	u.cg_io_write_bytes = 20;
	u.cg_oom_kills = -1;
	ck_assert_int_eq(usage_log_fields(&u, f), 6);
	ck_assert(isnan(f[5].num));             /* left out of the JSON line */
	sb_init(&b);
	usage_json(&u, &b);
	ck_assert_str_eq(b.s, ",\"cpu_s\":0.510,\"maxrss_bytes\":158334976,"
	                 "\"memory_peak_bytes\":1048576,\"io_read_bytes\":10,"
	                 "\"io_write_bytes\":20,\"oom_kills\":null");
	sb_free(&b);

	/* read back from a record: cpu_s NAN is no figure */
	usage_of(&u, NAN, 5);
	ck_assert_int_eq(u.measured, 0);
	usage_of(&u, 1.5, -1);
	usage_text(&u, t, sizeof t);
	ck_assert_str_eq(t, " cpu=1.50s maxrss=?");
}
END_TEST

static void spin(double secs)
{
	struct timespec a, n;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
	do
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &n);
	while ((double)(n.tv_sec - a.tv_sec) + (double)(n.tv_nsec - a.tv_nsec) / 1e9 < secs);
}

/* AC-7: a process's CPU and peak over one stretch of its life: the peak is reset at the
 * mark (a small stretch after a big one shows a small peak) and the CPU is the delta */
START_TEST(test_process_marks)
{
	size_t big = 64u << 20;
	char *p = malloc(big);
	ck_assert_ptr_nonnull(p);
	memset(p, 1, big);                      /* touched: resident */
	free(p);                                /* an mmap'd block: returned at once */
	struct usage_mark m;
	struct run_usage u;
	struct usage_proc pf;
	usage_proc_init(&pf, getpid());
	usage_proc_begin(&pf, &m, 1);
	ck_assert_int_eq(m.ok, 1);
	spin(0.2);
	usage_proc_end(&pf, &m, &u, 1);
	ck_assert_int_eq(u.measured, 1);
	ck_assert_msg(usage_cpu(&u) >= 0.15 && usage_cpu(&u) < 5, "cpu %f", usage_cpu(&u));
	ck_assert_msg(u.maxrss_bytes > 0 && u.maxrss_bytes < (48LL << 20),
	              "peak %lld after the reset", u.maxrss_bytes);
	/* a process that is gone: no figures */
	m.ok = 0;
	usage_proc_end(&pf, &m, &u, 1);
	ck_assert_int_eq(u.measured, 0);
	/* the files are kept open from mark to mark: a second stretch reads through them */
	usage_proc_begin(&pf, &m, 1);
	spin(0.1);
	usage_proc_end(&pf, &m, &u, 1);
	ck_assert_int_eq(u.measured, 1);
	ck_assert_msg(usage_cpu(&u) >= 0.05 && usage_cpu(&u) < 5, "cpu %f", usage_cpu(&u));
	/* the peak alone (a cgroup gives the CPU): no CPU figure, the peak still read */
	usage_proc_begin(&pf, &m, 0);
	usage_proc_end(&pf, &m, &u, 0);
	ck_assert_int_eq(u.measured, 0);
	ck_assert_msg(u.maxrss_bytes > 0, "peak %lld", u.maxrss_bytes);
	usage_proc_close(&pf);
	ck_assert_int_eq(pf.stat_fd, -1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("usage");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_bytes_human);
	tcase_add_test(tc, test_text_json_and_fields);
	tcase_add_test(tc, test_process_marks);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
