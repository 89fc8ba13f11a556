/*
 * scripts.c: script lookup and SHA-1.
 *
 * The SHA-1 of each script is computed once, on first use, under a once-guard, so
 * EVALSHA can be tried without asking the server (SCRIPT LOAD would be one more round trip
 * per connection, and a restarted server forgets it anyway: NOSCRIPT then falls back to
 * EVAL, see redis.c).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/evp.h>
#include "scripts.h"

#define MAX_SCRIPTS 64

static struct script table[MAX_SCRIPTS];
static int nscripts;
static pthread_once_t once = PTHREAD_ONCE_INIT;

void sha1_hex(const void *data, size_t len, char out[41])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	static const char hex[] = "0123456789abcdef";
	EVP_Digest(data, len, md, &mdlen, EVP_sha1(), NULL);
	for (unsigned i = 0; i < 20; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
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
