/* SPDX-License-Identifier: MIT */
/*
 * warm_noop.c: a warm handler that does nothing (doc/protocol.md §1.2), for the bench's
 * warm figures (tests/bench/bench.py "warm"): what is left of a job's cost is the daemon's
 * own, its Redis round trip and two small socket messages. It says "ready", answers every
 * job message with {"type":"done","exit":0} and exits at EOF on fd 3; a cancel needs no
 * answer (a job here has already been answered). With --sleep S at start it stands for a
 * process whose start-up takes S seconds.
 *
 * Lines are cut from a buffer that grows to fit the longest message, so any job, however
 * big, is read whole; nothing but the message type is looked at.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char READY[] = "{\"type\":\"ready\"}\n";
static const char DONE[] = "{\"type\":\"done\",\"exit\":0}\n";

static int write_all(const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(3, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* 0 to go on, -1 when the daemon can no longer be answered. */
static int on_line(const char *line, size_t len)
{
	static const char job[] = "\"type\":\"job\"";

	if (len >= sizeof job - 1 && memmem(line, len, job, sizeof job - 1))
		return write_all(DONE, sizeof DONE - 1);
	return 0;
}

int main(int argc, char **argv)
{
	size_t cap = 65536, len = 0;
	char *buf = malloc(cap);
	const char *proto = getenv("COGWORKER_PROTOCOL");

	if (!proto || strcmp(proto, "1") != 0) {
		fprintf(stderr, "warm_noop: not started as a warm handler (COGWORKER_PROTOCOL)\n");
		return 2;
	}
	if (argc == 3 && strcmp(argv[1], "--sleep") == 0) {
		double s = atof(argv[2]);
		struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
		nanosleep(&ts, NULL);
	}
	if (!buf || write_all(READY, sizeof READY - 1) < 0)
		return 1;
	for (;;) {
		if (len == cap) {
			char *b = realloc(buf, cap * 2);
			if (!b)
				return 1;
			buf = b;
			cap *= 2;
		}
		ssize_t n = read(3, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return 0;               /* EOF: retired */
		size_t scanned = len, start = 0;
		len += (size_t)n;
		for (char *nl; (nl = memchr(buf + scanned, '\n', len - scanned));) {
			size_t end = (size_t)(nl - buf);
			if (on_line(buf + start, end - start) < 0)
				return 1;
			start = scanned = end + 1;
		}
		memmove(buf, buf + start, len - start);
		len -= start;
	}
}
