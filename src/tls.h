/* SPDX-License-Identifier: MIT */
/*
 * tls.h: TLS for the Redis connections (OpenSSL): the client context built from the
 * redis.tls settings, and what went wrong with a handshake or a TLS read, in words that
 * say what to change (tls.c's opening comment).
 */
#ifndef COGWORKERD_TLS_H
#define COGWORKERD_TLS_H

#include <stddef.h>

struct ssl_ctx_st;
struct ssl_st;

/* What a context is built from (the paths resolved, the files readable). */
struct tls_settings {
	const char *ca_file;            /* NULL: the system's store */
	const char *cert_file, *key_file;       /* both or neither */
	int verify;
};

/*
 * A client context: TLS 1.2 at least, the server's certificate checked against ca_file (or
 * the system's store) unless verify is 0, the client certificate loaded and checked against
 * its key. NULL with the reason in err ("ca_file '/x': no certificate in it").
 * Reference-counted, shared by threads: tls_ctx_ref for each copy, tls_ctx_unref for each.
 */
struct ssl_ctx_st *tls_ctx_new(const struct tls_settings *t, char *err, size_t errlen);
struct ssl_ctx_st *tls_ctx_ref(struct ssl_ctx_st *ctx);
void tls_ctx_unref(struct ssl_ctx_st *ctx);
/* Whether ctx checks the server's certificate. */
int tls_ctx_verifies(struct ssl_ctx_st *ctx);
/* Whether ctx has a client certificate. */
int tls_ctx_has_cert(struct ssl_ctx_st *ctx);

/*
 * A session on fd for a server reached as name (an IP address or a host name): SNI for a
 * host name, and the name (or address) the certificate must be for when ctx verifies.
 * NULL only when OpenSSL is out of memory.
 */
struct ssl_st *tls_session(struct ssl_ctx_st *ctx, int fd, const char *name);

/*
 * Why an OpenSSL call on ssl failed with SSL_ERROR_SSL, as a sentence for the log: a
 * certificate that did not verify (unknown CA, expired, not for name), a server that does
 * not speak TLS, a client certificate that is missing or refused. Takes (and empties)
 * OpenSSL's error queue of this thread. Returns 0 when it was only the server closing the
 * connection, 1 otherwise.
 */
int tls_describe(struct ssl_st *ssl, const char *name, char *err, size_t errlen);

/* "TLSv1.3 TLS_AES_256_GCM_SHA384" and the certificate's subject, for --check --connect. */
void tls_summary(struct ssl_st *ssl, char *out, size_t outlen);

#endif
