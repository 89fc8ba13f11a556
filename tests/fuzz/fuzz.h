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

#define CHECK(cond)                                                                     \
	do {                                                                            \
		if (!(cond)) {                                                          \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
			abort();                                                        \
		}                                                                       \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
