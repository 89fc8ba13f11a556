/* SPDX-License-Identifier: MIT */
/*
 * tls.c: TLS for the Redis connections, with OpenSSL (libssl3; doc/design.md "Redis").
 *
 * - One client context per loaded conf, built by the loader (config.c), so that a CA file
 *   that does not parse or a key that does not match its certificate is a conf error at
 *   start and in --check, not a connect that fails forever. Every connection of the
 *   process makes its sessions from it (OpenSSL contexts are thread-safe for that);
 *   copies of the conf share it by reference count.
 * - TLS 1.2 at least. The server's certificate is checked against redis.tls.ca_file, or the
 *   system's store (/etc/ssl/certs) when it is unset, and must be for the name we reached
 *   it by (server_name, else the host of the url or the address a sentinel gave): a host
 *   name is sent as SNI and matched against the certificate's DNS names, an IP address
 *   against its IP addresses. verify = false turns all of that off (the loader warns).
 * - Errors: OpenSSL's texts ("certificate verify failed", "wrong version number") are
 *   true but do not say what to change; tls_explain turns the usual ones into a sentence
 *   that does, and keeps OpenSSL's words in it for searching.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include "tls.h"

/*
 * OpenSSL's reason for the last error of this thread's queue, and the queue emptied. A failed
 * system call is queued first, as its errno, and followed by "system lib": its errno says
 * what happened ("No such file or directory").
 */
static const char *last_reason(void)
{
	const char *why = NULL, *sys = NULL;
	unsigned long e;
	while ((e = ERR_get_error()) != 0) {
		if (ERR_SYSTEM_ERROR(e) && !sys)
			sys = strerror(ERR_GET_REASON(e));
		else if (!ERR_SYSTEM_ERROR(e))
			why = ERR_reason_error_string(e);
	}
	return sys ? sys : why ? why : "unknown error";
}

/*
 * The system's CAs, as SSL_CTX_set_default_verify_paths finds them (SSL_CERT_DIR and
 * SSL_CERT_FILE win), but without its default file: it parses the whole bundle
 * (/usr/lib/ssl/cert.pem, 140 certificates) at once, 80 ms at every conf load and every
 * cogworkerctl run, where the directory's hashed names (update-ca-certificates makes them)
 * let OpenSSL read the one CA it needs when it needs it. A file named by SSL_CERT_FILE is
 * still read.
 */
static int system_store(SSL_CTX *ctx, char *err, size_t errlen)
{
	const char *file = getenv(X509_get_default_cert_file_env());
	const char *dir = getenv(X509_get_default_cert_dir_env());
	if (file && *file && SSL_CTX_load_verify_file(ctx, file) != 1) {
		snprintf(err, errlen, "TLS: %s '%s' (the system's CAs): %s",
		         X509_get_default_cert_file_env(), file, last_reason());
		return -1;
	}
	if (SSL_CTX_load_verify_dir(ctx, dir && *dir ? dir : X509_get_default_cert_dir()) != 1) {
		snprintf(err, errlen, "TLS: the system's CAs: %s", last_reason());
		return -1;
	}
	return 0;
}

SSL_CTX *tls_ctx_new(const struct tls_settings *t, char *err, size_t errlen)
{
	ERR_clear_error();
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx) {
		snprintf(err, errlen, "TLS: %s", last_reason());
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(ctx, t->verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
	if (t->verify && t->ca_file && SSL_CTX_load_verify_locations(ctx, t->ca_file, NULL) != 1) {
		snprintf(err, errlen, "redis.tls.ca_file '%s': %s", t->ca_file, last_reason());
		goto fail;
	}
	if (t->verify && !t->ca_file && system_store(ctx, err, errlen) < 0)
		goto fail;
	if (t->cert_file && SSL_CTX_use_certificate_chain_file(ctx, t->cert_file) != 1) {
		snprintf(err, errlen, "redis.tls.cert_file '%s': %s", t->cert_file, last_reason());
		goto fail;
	}
	/* OpenSSL checks that the key is the certificate's as it loads it. */
	if (t->key_file && SSL_CTX_use_PrivateKey_file(ctx, t->key_file, SSL_FILETYPE_PEM) != 1) {
		if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH)
			snprintf(err, errlen, "redis.tls.key_file '%s' is not the key of cert_file '%s'",
			         t->key_file, t->cert_file);
		else
			snprintf(err, errlen, "redis.tls.key_file '%s': %s", t->key_file, last_reason());
		ERR_clear_error();
		goto fail;
	}
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

SSL_CTX *tls_ctx_ref(SSL_CTX *ctx)
{
	if (ctx)
		SSL_CTX_up_ref(ctx);
	return ctx;
}

void tls_ctx_unref(SSL_CTX *ctx)
{
	SSL_CTX_free(ctx);
}

int tls_ctx_verifies(SSL_CTX *ctx)
{
	return (SSL_CTX_get_verify_mode(ctx) & SSL_VERIFY_PEER) != 0;
}

int tls_ctx_has_cert(SSL_CTX *ctx)
{
	return SSL_CTX_get0_certificate(ctx) != NULL;
}

static int is_ip(const char *name)
{
	unsigned char buf[16];
	return inet_pton(AF_INET, name, buf) == 1 || inet_pton(AF_INET6, name, buf) == 1;
}

SSL *tls_session(SSL_CTX *ctx, int fd, const char *name)
{
	SSL *ssl = SSL_new(ctx);
	if (!ssl)
		return NULL;
	int ip = is_ip(name), ok = SSL_set_fd(ssl, fd) == 1;
	/* SNI is for host names only (RFC 6066 §3). */
	if (ok && !ip)
		ok = SSL_set_tlsext_host_name(ssl, name) == 1;
	if (ok && tls_ctx_verifies(ctx)) {
		if (ip)
			ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) == 1;
		else {
			SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
			ok = SSL_set1_host(ssl, name) == 1;
		}
	}
	if (!ok) {
		SSL_free(ssl);
		ERR_clear_error();
		return NULL;
	}
	return ssl;
}

/* The server's certificate did not verify: which of the usual reasons, in words. */
static void explain_verify(long v, const char *name, char *err, size_t errlen)
{
	const char *s = X509_verify_cert_error_string(v);
	switch (v) {
	case X509_V_ERR_CERT_HAS_EXPIRED:
		snprintf(err, errlen, "the server's certificate has expired (%s)", s);
		break;
	case X509_V_ERR_CERT_NOT_YET_VALID:
		snprintf(err, errlen, "the server's certificate is not valid yet (%s; is the clock "
		         "right?)", s);
		break;
	case X509_V_ERR_HOSTNAME_MISMATCH:
	case X509_V_ERR_IP_ADDRESS_MISMATCH:
		snprintf(err, errlen, "the server's certificate is not for %s (%s; "
		         "redis.tls.server_name sets the name to expect)", name, s);
		break;
	case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
	case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
	case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
	case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
	case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
		snprintf(err, errlen, "the server's certificate is not signed by a CA we trust (%s; "
		         "redis.tls.ca_file names the CA)", s);
		break;
	default:
		snprintf(err, errlen, "the server's certificate did not verify: %s", s);
	}
}

int tls_describe(SSL *ssl, const char *name, char *err, size_t errlen)
{
	unsigned long e = ERR_peek_last_error();
	int reason = ERR_GET_REASON(e);
	long v = SSL_get_verify_result(ssl);
	int has_cert = tls_ctx_has_cert(SSL_get_SSL_CTX(ssl));
	const char *why = e ? ERR_reason_error_string(e) : NULL;
	int eof = 0;

	if (!why)
		why = "unknown error";
	if (reason == SSL_R_CERTIFICATE_VERIFY_FAILED && v != X509_V_OK) {
		explain_verify(v, name, err, errlen);
	} else if (reason == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED ||
	           (reason == SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE && !has_cert)) {
		snprintf(err, errlen, "the server wants a client certificate (%s; set "
		         "redis.tls.cert_file and key_file)", why);
	} else if (has_cert && (reason == SSL_R_TLSV1_ALERT_UNKNOWN_CA ||
	                        reason == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE ||
	                        reason == SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED ||
	                        reason == SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED ||
	                        reason == SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN ||
	                        reason == SSL_R_TLSV1_ALERT_ACCESS_DENIED)) {
		snprintf(err, errlen, "the server refused our client certificate (%s)", why);
	} else if (reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_PACKET_LENGTH_TOO_LONG ||
	           reason == SSL_R_UNKNOWN_PROTOCOL || reason == SSL_R_BAD_PACKET_LENGTH ||
	           reason == SSL_R_UNEXPECTED_RECORD || reason == SSL_R_HTTP_REQUEST) {
		snprintf(err, errlen, "the server does not answer in TLS (%s; a plaintext port? then "
		         "the url is redis://)", why);
	} else if (reason == SSL_R_UNEXPECTED_EOF_WHILE_READING || !e) {
		snprintf(err, errlen, "the server closed the connection");
		eof = 1;
	} else {
		snprintf(err, errlen, "TLS: %s", why);
	}
	ERR_clear_error();
	return eof ? 0 : 1;
}

void tls_summary(SSL *ssl, char *out, size_t outlen)
{
	char subject[256] = "";
	X509 *peer = SSL_get1_peer_certificate(ssl);
	if (peer) {
		X509_NAME_oneline(X509_get_subject_name(peer), subject, sizeof subject);
		X509_free(peer);
	}
	snprintf(out, outlen, "%s %s%s%s%s", SSL_get_version(ssl), SSL_get_cipher_name(ssl),
	         subject[0] ? ", certificate " : "", subject,
	         tls_ctx_verifies(SSL_get_SSL_CTX(ssl)) ? " (verified)" : " (NOT verified)");
}
