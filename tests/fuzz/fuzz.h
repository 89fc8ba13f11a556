/* SPDX-License-Identifier: MIT */
/*
 * fuzz.h: what the libFuzzer harnesses of tests/fuzz/ share. A harness checks properties,
 * not only the absence of crashes: a broken one aborts through CHECK with the line, so the
 * fuzzer keeps the input as a crash.
 */
#ifndef COGWORKERD_FUZZ_H
#define COGWORKERD_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "json.h"

#define CHECK(cond)                                                                     \
	do {                                                                            \
		if (!(cond)) {                                                          \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
			abort();                                                        \
		}                                                                       \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* s (n bytes) is valid UTF-8: scrubbing it changes nothing. */
static inline int fuzz_valid_utf8(const char *s, size_t n)
{
	size_t m;
	char *t = utf8_scrub_len(s, n, 0, &m);
	int ok = m == n && memcmp(s, t, n) == 0;
	free(t);
	return ok;
}

#endif
