/* SPDX-License-Identifier: MIT */
/*
 * scripts.c: script lookup and SHA-1.
 *
 * The SHA-1 of each script is computed once, on first use, under a once-guard, so
 * EVALSHA can be tried without asking the server (SCRIPT LOAD would be one more round trip
 * per connection, and a restarted server forgets it anyway: NOSCRIPT then falls back to
 * EVAL, see redis.c).
 *
 * SHA-1 is computed here (FIPS 180-4), not by libcrypto: it is all the daemon wanted of
 * OpenSSL, whose library alone was 1.4 MiB of every daemon's resident memory (the loader
 * touches its pages to relocate it) and a share of its start-up time. Script hashes,
 * unique digests and pjids are short inputs, so the plain loop is plenty.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "scripts.h"

#define MAX_SCRIPTS 64

static struct script table[MAX_SCRIPTS];
static int nscripts;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static uint32_t rol(uint32_t x, int n)
{
	return (x << n) | (x >> (32 - n));
}

static void sha1_block(uint32_t h[5], const unsigned char *p)
{
	uint32_t w[80];
	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
	for (int i = 16; i < 80; i++)
		w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
	uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
	for (int i = 0; i < 80; i++) {
		uint32_t f, k;
		if (i < 20) {
			f = (b & c) | (~b & d);
			k = 0x5a827999;
		} else if (i < 40) {
			f = b ^ c ^ d;
			k = 0x6ed9eba1;
		} else if (i < 60) {
			f = (b & c) | (b & d) | (c & d);
			k = 0x8f1bbcdc;
		} else {
			f = b ^ c ^ d;
			k = 0xca62c1d6;
		}
		uint32_t t = rol(a, 5) + f + e + k + w[i];
		e = d;
		d = c;
		c = rol(b, 30);
		b = a;
		a = t;
	}
	h[0] += a;
	h[1] += b;
	h[2] += c;
	h[3] += d;
	h[4] += e;
}

void sha1_hex(const void *data, size_t len, char out[41])
{
	static const char hex[] = "0123456789abcdef";
	uint32_t h[5] = { 0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0 };
	const unsigned char *p = data;
	size_t left = len;
	for (; left >= 64; left -= 64, p += 64)
		sha1_block(h, p);
	/* The last block(s): the rest, 0x80, zeros, the length in bits (big-endian). */
	unsigned char tail[128];
	memset(tail, 0, sizeof tail);
	memcpy(tail, p, left);
	tail[left] = 0x80;
	size_t n = left < 56 ? 64 : 128;
	uint64_t bits = (uint64_t)len * 8;
	for (int i = 0; i < 8; i++)
		tail[n - 1 - i] = (unsigned char)(bits >> (8 * i));
	sha1_block(h, tail);
	if (n == 128)
		sha1_block(h, tail + 64);
	for (int i = 0; i < 20; i++) {
		unsigned char byte = (unsigned char)(h[i / 4] >> (24 - 8 * (i % 4)));
		out[2 * i] = hex[byte >> 4];
		out[2 * i + 1] = hex[byte & 15];
	}
	out[40] = '\0';
}

static void build_table(void)
{
	for (const struct script_src *s = script_sources; s->name && nscripts < MAX_SCRIPTS; s++) {
		struct script *t = &table[nscripts++];
		t->name = s->name;
		t->src = s->src;
		sha1_hex(s->src, strlen(s->src), t->sha);
		t->plain_eval = strcmp(s->name, "expire_if_owned") == 0 ||
		                strcmp(s->name, "delete_if_owned") == 0;
	}
}

const struct script *script_get(const char *name)
{
	pthread_once(&once, build_table);
	for (int i = 0; i < nscripts; i++)
		if (strcmp(table[i].name, name) == 0)
			return &table[i];
	fprintf(stderr, "cogworkerd: no embedded script lua/%s.lua\n", name);
	abort();
}
