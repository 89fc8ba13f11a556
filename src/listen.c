/* SPDX-License-Identifier: MIT */
/*
 * listen.c: the listening socket of an HTTP endpoint (listen.h). One home for the address
 * grammar (host:port, [v6]:port) and for binding it, so the daemon's /metrics and
 * `cogworkerctl web` accept the same spellings and say the same things about them.
 *
 * Whether the address is a loopback one is read from the socket as bound (getsockname),
 * not from the text: "localhost" may resolve to anything, and a name that resolves to
 * 127.0.0.1 is as loopback as the digits. `cogworkerctl web` refuses any other address
 * without --auth-file.
 */
#include <errno.h>
#define rcmd bsd_rcmd        /* <netdb.h> declares BSD's rcmd(3); ours is redis.h's */
#include <netdb.h>
#undef rcmd
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include "config_int.h"
#include "listen.h"

const char *listen_spec_check(const char *s)
{
	const char *colon;

	if (s[0] == '[') {
		const char *rb = strchr(s, ']');
		if (!rb || rb == s + 1 || rb[1] != ':')
			return "is not host:port (IPv6 as [addr]:port)";
		colon = rb + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon || colon == s || memchr(s, ':', (size_t)(colon - s)))
			return "is not host:port (e.g. 127.0.0.1:9394; IPv6 as [addr]:port)";
	}
	if (parse_port(colon + 1, strlen(colon + 1)) < 0)
		return "has no valid port (1..65535)";
	return NULL;
}

static int bound_to_loopback(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
		return 0;
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
		return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
	}
	if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
		if (IN6_IS_ADDR_LOOPBACK(&a->sin6_addr))
			return 1;
		return IN6_IS_ADDR_V4MAPPED(&a->sin6_addr) && a->sin6_addr.s6_addr[12] == 127;
	}
	return 0;
}

int listen_tcp(const char *spec, int *loopback, char *err, size_t errlen)
{
	char host[256];
	const char *port;
	snprintf(err, errlen, "no usable address");
	if (spec[0] == '[') {
		const char *rb = strchr(spec, ']');
		snprintf(host, sizeof host, "%.*s", (int)(rb - spec - 1), spec + 1);
		port = rb + 2;
	} else {
		const char *colon = strrchr(spec, ':');
		snprintf(host, sizeof host, "%.*s", (int)(colon - spec), spec);
		port = colon + 1;
	}
	struct addrinfo hints, *ai = NULL;
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	int gai = getaddrinfo(host, port, &hints, &ai);
	if (gai != 0) {
		snprintf(err, errlen, "%s: %s", host, gai_strerror(gai));
		return -1;
	}
	int fd = -1;
	for (struct addrinfo *a = ai; a; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
		if (fd < 0)
			continue;
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 64) == 0)
			break;
		snprintf(err, errlen, "%s", strerror(errno));
		close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	if (fd >= 0 && loopback)
		*loopback = bound_to_loopback(fd);
	return fd;
}
