/* nickv_tls.h -- the TLS contexts, from the tls-* options.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 */
#ifndef NICKV_TLS_H
#define NICKV_TLS_H

#include "nickv.h"

/* nickv_tls.c: TLS contexts from the tls-* options (see its top). */
int nkTlsInit(char *err, size_t errlen);
/* Connections to nodes are TLS (tls-replication yes). */
int nkTlsOutgoing(void);
/* A new session (an SSL *) for an accepted (server 1) or a made
 * connection; NULL when that side has no context. */
void *nkTlsSession(int server);
/* OpenSSL's reason for the last failure on this thread, or fallback. */
const char *nkTlsError(const char *fallback);
/* The port replicas reach us on: port, or tls-port when port is 0. */
int nkListeningPort(void);

#endif
