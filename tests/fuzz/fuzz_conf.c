/* SPDX-License-Identifier: MIT */
/*
 * fuzz_conf.c: the conf loader (src/config.c, conf_read.c, conf_settings.c, conf_handler.c,
 * redis_url.c) on any file. libconfig reads a file, so each input is written to one scratch
 * file first. Words that name other files are defused first: an @include, a password_file
 * or a TLS file could point the loader at /dev/zero or a FIFO, which would test the file
 * system, not the loader.
 *
 * What must hold: a rejected conf gives one line, "<file>:..." with no line break; an
 * accepted one has its invariants (concurrency and queues set, every handler a command, a
 * TLS context exactly when a rediss:// url or sentinel_tls asks for TLS).
 */
#include <ctype.h>
#include <fcntl.h>
#include <unistd.h>
#include "config.h"
#include "fuzz.h"
#include "util.h"

static char path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	unsetenv("REDIS_URL");
	snprintf(path, sizeof path, "%s/cw-fuzz-conf-XXXXXX",
	         access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	close(fd);
	return 0;
}

/* Make every word that names another file another word (libconfig's @include is not
 * case-sensitive): the loader then rejects it as it rejects any unknown setting. */
static void defuse(uint8_t *buf, size_t size)
{
	static const char *const words[] = { "@include", "password_file", "ca_file", "cert_file",
	                                     "key_file" };
	for (size_t w = 0; w < sizeof words / sizeof *words; w++) {
		size_t n = strlen(words[w]);
		for (size_t i = 0; i + n <= size; i++) {
			size_t k = 0;
			while (k < n && tolower(buf[i + k]) == words[w][k])
				k++;
			if (k == n)
				buf[i + 2] = '_';
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *buf = malloc(size + 1);
	memcpy(buf, data, size);
	defuse(buf, size);
	int fd = open(path, O_WRONLY | O_TRUNC);
	CHECK(fd >= 0);
	CHECK(write(fd, buf, size) == (ssize_t)size);
	close(fd);
	free(buf);
	struct conf c;
	char err[1024];
	if (conf_load(path, NULL, &c, err, sizeof err) != 0) {
		CHECK(err[0] && strncmp(err, path, strlen(path)) == 0);
		CHECK(!strchr(err, '\n'));
		return 0;
	}
	CHECK(c.concurrency >= 1 && c.nqueues >= 1 && c.redis.display);
	CHECK(!c.redis.tls.ctx == !(c.redis.use_tls || c.redis.sentinel_tls));
	CHECK(c.redis.tls.verify || c.redis.tls.verify_where);
	for (int i = 0; i < c.nhandlers; i++)
		CHECK(c.handlers[i].class_name && c.handlers[i].command.n > 0 &&
		      c.handlers[i].command.v[c.handlers[i].command.n] == NULL);
	conf_find_handler(&c, "Anything");
	conf_free(&c);
	return 0;
}
