/* SPDX-License-Identifier: MIT */
/*
 * web.c: `cogworkerctl web`, the dashboard in a browser, and `web passwd`, which makes the
 * lines of its users file.
 *
 *   web [--listen ADDR:PORT] [--read-only] [--auth-file FILE]
 *       [--tls-cert FILE --tls-key FILE | --insecure-http]
 *   web passwd [--auth-file FILE] [--token] USER
 *
 * Safe by default: it listens on 127.0.0.1 (DEFAULT_LISTEN) and refuses an address that
 * is not a loopback one unless --auth-file names the users who may log in, since anybody
 * who reaches the port could otherwise clear queues, and unless it speaks HTTPS
 * (--tls-cert, --tls-key: libmicrohttpd's TLS), since passwords and session cookies would
 * otherwise cross the network in the clear. --insecure-http lifts the second rule for a
 * TLS-terminating proxy in front, and says so at start and in every page's footer. The
 * check is made on the socket as bound (listen.c), so a host name that resolves elsewhere
 * is caught too. The key must not be readable by others, as for Redis TLS. The Redis
 * settings are every command's: the conf, or REDIS_URL.
 *
 * passwd reads the password from the terminal (twice, without echo) or one line of
 * standard input, hashes it (web_auth.c) and adds or replaces the user's line in FILE
 * (written beside it and renamed over it, mode 0640 for a new file), or prints the line
 * without --auth-file. --token makes a random password and prints it once: scripts send
 * "Authorization: Bearer USER:TOKEN".
 */
#include <errno.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>
#include <sys/stat.h>
#include "listen.h"
#include "log.h"
#include "web.h"

#define DEFAULT_LISTEN "127.0.0.1:9395"
#define MAX_REDIS 8             /* Redis connections of the dashboard at most */

static int valid_user(const char *u)
{
	if (!*u || strlen(u) >= 128)
		return 0;
	for (const char *p = u; *p; p++)
		if (*p == ':' || (unsigned char)*p <= ' ' || *p == 0x7f)
			return 0;
	return 1;
}

/* One line from stdin, without its newline (echo off on a terminal); NULL at EOF. */
static char *read_secret(const char *prompt)
{
	int tty = isatty(0);
	struct termios old, quiet;
	if (tty) {
		fprintf(stderr, "%s", prompt);
		tcgetattr(0, &old);
		quiet = old;
		quiet.c_lflag &= ~(tcflag_t)ECHO;
		tcsetattr(0, TCSAFLUSH, &quiet);
	}
	char *line = NULL;
	size_t cap = 0;
	ssize_t n = getline(&line, &cap, stdin);
	if (tty) {
		tcsetattr(0, TCSAFLUSH, &old);
		fputc('\n', stderr);
	}
	if (n < 0) {
		free(line);
		return NULL;
	}
	line[strcspn(line, "\r\n")] = '\0';
	return line;
}

/* FILE with user's line set to "user:hash" (added, or replacing the old one). */
static int write_users_file(const char *path, const char *user, const char *hash)
{
	struct sbuf b;
	sb_init(&b);
	int replaced = 0;
	mode_t mode = 0640;
	FILE *f = fopen(path, "r");
	if (f) {
		struct stat st;
		if (fstat(fileno(f), &st) == 0)
			mode = st.st_mode & 07777;
		char line[4096];
		size_t ulen = strlen(user);
		while (fgets(line, sizeof line, f)) {
			if (strncmp(line, user, ulen) == 0 && line[ulen] == ':') {
				if (!replaced++)
					sb_printf(&b, "%s:%s\n", user, hash);
				continue;
			}
			sb_adds(&b, line);
			if (b.len && b.s[b.len - 1] != '\n')
				sb_addc(&b, '\n');
		}
		fclose(f);
	} else if (errno != ENOENT) {
		ctl_error("web passwd: %s: %s", path, strerror(errno));
		sb_free(&b);
		return CTL_USAGE;
	}
	if (!replaced)
		sb_printf(&b, "%s:%s\n", user, hash);
	char *tmp = xasprintf("%s.tmp.%d", path, (int)getpid());
	int rc = CTL_OK;
	FILE *o = fopen(tmp, "w");
	if (!o || fchmod(fileno(o), mode) != 0 || fwrite(b.s, 1, b.len, o) != b.len ||
	    fflush(o) != 0 || fsync(fileno(o)) != 0) {
		ctl_error("web passwd: %s: %s", tmp, strerror(errno));
		rc = CTL_USAGE;
	}
	if (o && fclose(o) != 0 && rc == CTL_OK) {
		ctl_error("web passwd: %s: %s", tmp, strerror(errno));
		rc = CTL_USAGE;
	}
	if (rc == CTL_OK && rename(tmp, path) != 0) {
		ctl_error("web passwd: %s: %s", path, strerror(errno));
		rc = CTL_USAGE;
	}
	if (rc != CTL_OK)
		unlink(tmp);
	else
		fprintf(stderr, "%s user %s in %s\n", replaced ? "replaced" : "added", user, path);
	free(tmp);
	sb_free(&b);
	return rc;
}

static int cmd_passwd(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "auth-file", required_argument, NULL, 'a' },
		{ "token", no_argument, NULL, 't' },
		CTL_COMMON_OPTS,
		{ 0, 0, 0, 0 },
	};
	const char *file = NULL;
	int token = 0, ch;
	ctl_getopt_reset();
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (ch == 'a')
			file = optarg;
		else if (ch == 't')
			token = 1;
		else if (!ctl_common_opt(c, ch, argv))
			return CTL_USAGE;
	}
	if (argc - optind != 1) {
		ctl_error("usage: cogworkerctl web passwd [--auth-file FILE] [--token] USER");
		return CTL_USAGE;
	}
	const char *user = argv[optind];
	if (!valid_user(user)) {
		ctl_error("web passwd: a user name is 1 to 127 characters without ':', spaces or "
		          "control characters, not \"%s\"", user);
		return CTL_USAGE;
	}
	if (token && !file) {
		ctl_error("web passwd --token writes the token's hash into a file: add --auth-file");
		return CTL_USAGE;
	}
	char *pw;
	if (token) {
		pw = xmalloc(49);
		random_hex(pw, 24);
	} else {
		pw = read_secret("password: ");
		if (pw && isatty(0)) {
			char *again = read_secret("again: ");
			if (!again || strcmp(again, pw) != 0) {
				ctl_error("web passwd: the two passwords differ");
				free(again);
				free(pw);
				return CTL_USAGE;
			}
			free(again);
		}
		if (!pw || strlen(pw) < 8) {
			ctl_error("web passwd: a password of at least 8 characters, on standard input");
			free(pw);
			return CTL_USAGE;
		}
	}
	char *hash = web_hash_password(pw);
	int rc = CTL_OK;
	if (!hash) {
		ctl_error("web passwd: libcrypt could not hash the password (yescrypt)");
		rc = CTL_USAGE;
	} else if (file) {
		rc = write_users_file(file, user, hash);
		if (rc == CTL_OK && token)
			printf("%s:%s\n", user, pw);
	} else {
		printf("%s:%s\n", user, hash);
	}
	free(hash);
	free(pw);
	return rc;
}

/* A PEM file of --tls-cert or --tls-key, whole (libmicrohttpd takes them in memory), or
 * NULL with why in err. The key must not be open to others. */
static char *read_pem(const char *opt, const char *path, int is_key, char *err, size_t n)
{
	struct stat st;
	if (stat(path, &st) < 0) {
		snprintf(err, n, "%s %s: %s", opt, path, strerror(errno));
		return NULL;
	}
	if (!S_ISREG(st.st_mode)) {        /* a FIFO would block the read */
		snprintf(err, n, "%s %s: not a regular file", opt, path);
		return NULL;
	}
	if (is_key && (st.st_mode & S_IRWXO)) {
		snprintf(err, n, "%s %s is open to others (mode %04o): chmod o-rwx it, a server key "
		         "must not be readable by every user of the host", opt, path,
		         (unsigned)(st.st_mode & 07777));
		return NULL;
	}
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(err, n, "%s %s: %s", opt, path, strerror(errno));
		return NULL;
	}
	struct sbuf b;
	sb_init(&b);
	char buf[4096];
	size_t got;
	while ((got = fread(buf, 1, sizeof buf, f)) > 0 && b.len < (1 << 20))
		sb_add(&b, buf, got);
	fclose(f);
	if (!strstr(b.s ? b.s : "", "-----BEGIN ")) {
		snprintf(err, n, "%s %s: not a PEM file", opt, path);
		sb_free(&b);
		return NULL;
	}
	return b.s;
}

/* The TLS files and the rules of who may listen where; CTL_OK or CTL_USAGE (said). */
static int web_tls_opts(struct web_opts *o, const char *cert, const char *key)
{
	char err[512];
	if (!cert != !key) {
		ctl_error("web: --tls-cert and --tls-key go together (the certificate and its key)");
		return CTL_USAGE;
	}
	if (cert && o->insecure_http) {
		ctl_error("web: --insecure-http and --tls-cert contradict each other");
		return CTL_USAGE;
	}
	if (!cert)
		return CTL_OK;
	if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
		ctl_error("web: this libmicrohttpd was built without TLS");
		return CTL_USAGE;
	}
	if (!(o->tls_cert = read_pem("--tls-cert", cert, 0, err, sizeof err)) ||
	    !(o->tls_key = read_pem("--tls-key", key, 1, err, sizeof err))) {
		ctl_error("web: %s", err);
		return CTL_USAGE;
	}
	return CTL_OK;
}

int cmd_web(struct ctl *c, int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "passwd") == 0)
		return cmd_passwd(c, argc - 1, argv + 1);
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "read-only", no_argument, NULL, 'r' },
		{ "auth-file", required_argument, NULL, 'a' },
		{ "tls-cert", required_argument, NULL, 'C' },
		{ "tls-key", required_argument, NULL, 'K' },
		{ "insecure-http", no_argument, NULL, 'I' },
		CTL_COMMON_OPTS,
		{ 0, 0, 0, 0 },
	};
	struct web_opts o = { .listen = DEFAULT_LISTEN, .max_redis = MAX_REDIS };
	const char *cert = NULL, *key = NULL;
	int ch;
	ctl_getopt_reset();
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 'l': o.listen = optarg; break;
		case 'r': o.read_only = 1; break;
		case 'a': o.auth_file = optarg; break;
		case 'C': cert = optarg; break;
		case 'K': key = optarg; break;
		case 'I': o.insecure_http = 1; break;
		default:
			if (!ctl_common_opt(c, ch, argv))
				return CTL_USAGE;
		}
	}
	if (optind < argc) {
		ctl_error("web: unexpected \"%s\" (web [--listen ADDR:PORT] [--read-only] "
		          "[--auth-file FILE] [--tls-cert FILE --tls-key FILE | --insecure-http], or "
		          "web passwd)", argv[optind]);
		return CTL_USAGE;
	}
	if (web_tls_opts(&o, cert, key) != CTL_OK)
		goto usage;
	const char *why = listen_spec_check(o.listen);
	if (why) {
		ctl_error("web: --listen %s %s", o.listen, why);
		return CTL_USAGE;
	}
	char err[1024];
	if (o.auth_file && web_users_load(o.auth_file, &o.users, err, sizeof err) != 0) {
		ctl_error("web: --auth-file %s", err);
		goto usage;
	}
	int fd = listen_tcp(o.listen, &o.loopback, err, sizeof err);
	if (fd < 0) {
		ctl_error("web: can't listen on %s: %s", o.listen, err);
		goto usage;
	}
	if (!o.loopback && !o.auth_file) {
		ctl_error("web: %s is not a loopback address: anybody who reaches it could act on "
		          "the fleet; give --auth-file (users made with cogworkerctl web passwd)",
		          o.listen);
		close(fd);
		goto usage;
	}
	if (!o.loopback && !o.tls_cert && !o.insecure_http) {
		ctl_error("web: %s is not a loopback address: passwords and session cookies would "
		          "cross the network in the clear; give --tls-cert FILE --tls-key FILE, or "
		          "--insecure-http behind a TLS-terminating proxy", o.listen);
		close(fd);
		goto usage;
	}
	if (o.insecure_http)
		ctl_error("web: warning: --insecure-http: plain HTTP%s; only behind a proxy that "
		          "speaks TLS to the browsers", o.loopback ? "" : " off loopback");
	if (c->notice) {
		ctl_error("%s", c->notice);
		free(c->notice);
		c->notice = NULL;
	}
	log_set_level(LOG_INFO);
	int rc = web_serve(c, &o, fd);
	web_users_free(&o.users);
	free(o.tls_cert);
	free(o.tls_key);
	return rc;
usage:
	web_users_free(&o.users);
	free(o.tls_cert);
	free(o.tls_key);
	return CTL_USAGE;
}
