/* nickv_tls.c -- TLS for Nic-KV's connections: the OpenSSL contexts.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * Nic-KV speaks TLS as Redis does, with Redis's option names:
 *
 *   tls-port            a listener for replicas and admins (0: none); port 0
 *                       leaves TCP off: TLS only
 *   tls-replication     every connection Nic-KV makes to a node (the link to
 *                       the master, the probes, promotion and repointing,
 *                       proxied full syncs, the master's watch) is TLS
 *   tls-cert-file, tls-key-file          Nic-KV's certificate, for both
 *   tls-client-cert-file, -key-file      ... or this one for what it connects
 *   tls-ca-cert-file, tls-ca-cert-dir    the CA that signs every member's
 *   tls-auth-clients    yes (default): a client of tls-port must show a
 *                       certificate the CA signed; optional; no
 *
 * A node's certificate is verified against the CA during the handshake,
 * before a byte of Redis protocol goes (nickv_conn.c): a peer at a member's
 * address without a certificate the CA signed is sent nothing, no AUTH,
 * no key (NIC-KV.md, "Security model"). Names are not checked against the
 * certificate (as Redis's replication does not): the CA is the trust, so
 * give it to the deployment's nodes alone. TLS 1.2 or later. RDMA
 * connections are not encrypted (rdma_chan.c has no TLS): say so, and keep
 * the RDMA network closed.
 *
 * The contexts are made once, at start (nkTlsInit); sessions are made per
 * connection (nkTlsSession), used by one thread at a time as the
 * connection is (a replica's moves to its fan-out thread).
 */

#include "nickv.h"
#include "nickv_tls.h"

#include <stdio.h>
#include <string.h>

#ifdef USE_OPENSSL
#include <openssl/err.h>
#include <openssl/ssl.h>

static SSL_CTX *server_ctx;      /* tls-port's */
static SSL_CTX *client_ctx;      /* what Nic-KV connects with, tls-replication yes */

/* OpenSSL's reason for the last failure on this thread, or fallback. */
const char *nkTlsError(const char *fallback) {
    static __thread char buf[256];
    unsigned long code = ERR_peek_last_error();
    const char *why = code ? ERR_reason_error_string(code) : NULL;
    if (why) return why;
    if (!code) return fallback;
    ERR_error_string_n(code, buf, sizeof(buf));
    return buf;
}

/* A context: TLS 1.2 or later, the peer verified against the CA (a
 * client's only as tls-auth-clients says), cert/key loaded. NULL and err. */
static SSL_CTX *tlsContext(int server, const char *cert, const char *key, char *err, size_t errlen) {
    SSL_CTX *ctx;
    const char *ca = nk.cfg.tls_ca_cert_file, *cadir = nk.cfg.tls_ca_cert_dir;
    ERR_clear_error();
    if (!(ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method()))) {
        snprintf(err, errlen, "TLS: SSL_CTX_new: %s", nkTlsError("failed"));
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* The fan-out writes what its ring holds, where it is: a write retried
     * may start at another address, and go on further. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
    /* A peer that closes without close_notify has closed: an EOF. */
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
#endif
    if (!server) SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    else if (nk.cfg.tls_auth_clients == NK_TLS_AUTH_YES)
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    else if (nk.cfg.tls_auth_clients == NK_TLS_AUTH_OPTIONAL) SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    else SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    if (!ca && !cadir) {
        snprintf(err, errlen, "TLS: tls-ca-cert-file (or tls-ca-cert-dir) is needed: the CA that signs the "
                 "nodes' certificates");
        goto err;
    }
    if (SSL_CTX_load_verify_locations(ctx, ca, cadir) != 1) {
        snprintf(err, errlen, "TLS: the CA (%s%s%s): %s", ca ? ca : "", ca && cadir ? ", " : "",
                 cadir ? cadir : "", nkTlsError("cannot load"));
        goto err;
    }
    if (!cert || !key) {
        snprintf(err, errlen, "TLS: tls-cert-file and tls-key-file are needed");
        goto err;
    }
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        snprintf(err, errlen, "TLS: the certificate file %s: %s", cert, nkTlsError("cannot load"));
        goto err;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        snprintf(err, errlen, "TLS: the key file %s: %s", key, nkTlsError("cannot load"));
        goto err;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        snprintf(err, errlen, "TLS: the key file %s does not match the certificate %s", key, cert);
        goto err;
    }
    if (server) {
        /* One context, one session id space: resumption within this process. */
        static const unsigned char sid[] = "nic-kv";
        SSL_CTX_set_session_id_context(ctx, sid, sizeof(sid) - 1);
    }
    return ctx;
err:
    SSL_CTX_free(ctx);
    return NULL;
}

int nkTlsInit(char *err, size_t errlen) {
    const char *ccert = nk.cfg.tls_client_cert_file ? nk.cfg.tls_client_cert_file : nk.cfg.tls_cert_file;
    const char *ckey = nk.cfg.tls_client_cert_file ? nk.cfg.tls_client_key_file : nk.cfg.tls_key_file;
    if (!!nk.cfg.tls_client_cert_file != !!nk.cfg.tls_client_key_file) {
        snprintf(err, errlen, "TLS: tls-client-cert-file and tls-client-key-file go together");
        return -1;
    }
    if (nk.cfg.tls_port && !(server_ctx = tlsContext(1, nk.cfg.tls_cert_file, nk.cfg.tls_key_file, err, errlen)))
        return -1;
    if (nk.cfg.tls_replication && !(client_ctx = tlsContext(0, ccert, ckey, err, errlen))) return -1;
    return 0;
}

int nkTlsOutgoing(void) {
    return client_ctx != NULL;
}

void *nkTlsSession(int server) {
    SSL_CTX *ctx = server ? server_ctx : client_ctx;
    SSL *ssl;
    if (!ctx || !(ssl = SSL_new(ctx))) return NULL;
    if (server) SSL_set_accept_state(ssl);
    else SSL_set_connect_state(ssl);
    return ssl;
}

#else /* !USE_OPENSSL */

const char *nkTlsError(const char *fallback) {
    return fallback;
}

int nkTlsInit(char *err, size_t errlen) {
    if (!nk.cfg.tls_port && !nk.cfg.tls_replication) return 0;
    snprintf(err, errlen, "TLS: tls-port or tls-replication, but TLS support was not built (BUILD_TLS=no)");
    return -1;
}

int nkTlsOutgoing(void) {
    return 0;
}

void *nkTlsSession(int server) {
    (void)server;
    return NULL;
}

#endif

/* The port replicas reach us on (REPLCONF listening-port): port, or
 * tls-port when port is 0. */
int nkListeningPort(void) {
    return nk.cfg.port ? nk.cfg.port : nk.cfg.tls_port;
}
