/* nickv_etcd.h -- a small etcd v3 client: leases, a leader key, a record.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * Blocking calls, for the coordinator's thread only (nickv_coord.c): never
 * call them from the event loop. They speak etcd's JSON gateway (HTTP/1.1
 * POST /v3/..., keys and values in base64, 64-bit numbers as strings), which
 * Debian's etcd-server 3.4 serves on its client port, so Nic-KV needs no
 * gRPC library. Each call tries the current endpoint and, when it cannot be
 * reached or does not answer in time, the next ones, within one deadline
 * (timeout_ms of nkEtcdNew). On failure a call returns -1 and says in err
 * which endpoint failed and why; an answer that does not parse is a failure
 * (what etcd says is read as strictly as INFO is: nickv_info.c).
 */

#ifndef NICKV_ETCD_H
#define NICKV_ETCD_H

#include <stddef.h>
#include "sds.h"

typedef struct nkEtcd nkEtcd;

/* urls: "etcd://h1:2379,h2:2379" or "http://h1:2379,http://h2:2379" (numeric
 * addresses or names; names are resolved at each connect); "etcds://h1:2379,
 * h2:2379" or "https://h1:2379,https://h2:2379" for TLS, which until
 * nkEtcdSetTls says otherwise verifies etcd's certificate against the
 * system's CAs. One scheme for the whole list. NULL and err on a malformed
 * list, or TLS endpoints in a build without TLS (BUILD_TLS=no). */
nkEtcd *nkEtcdNew(const char *urls, int timeout_ms, char *err, size_t errlen);
/* Also overwrites the password and token before freeing them. */
void nkEtcdFree(nkEtcd *e);

/* Authenticate as user with password (etcd's auth enabled); user NULL: no
 * authentication (the default). Copies both. Every later call sends a token
 * from POST /v3/auth/authenticate, fetched before the first request and
 * again, transparently, whenever etcd says the token is invalid (expired,
 * --auth-token-ttl) or stale; a call authenticates at most twice. Refused
 * credentials fail the call with "etcd <h:p>: authentication as user '<u>'
 * failed: HTTP <status>: <etcd's message>", and every call in the second
 * that follows fails with the same error without asking etcd again. -1 when
 * user is empty or password NULL, else 0. */
int nkEtcdSetAuth(nkEtcd *e, const char *user, const char *password);
/* With a user set and no token held: authenticate now, rotating over the
 * endpoints within timeout_ms (not the calls' timeout). C_OK when a token
 * is held (or no user is set). */
int nkEtcdAuthenticate(nkEtcd *e, int timeout_ms, char *err, size_t errlen);
/* How many times e has authenticated (a renewed token counts again). */
long long nkEtcdAuthentications(nkEtcd *e);

/* TLS settings for etcds:// or https:// endpoints: etcd's certificate must
 * chain to ca_file (PEM; NULL: the system's CAs) and name the endpoint's
 * host (its IP address for a numeric host, else its DNS name); cert_file
 * and key_file (PEM, both or neither) are sent to etcds that require a
 * client certificate (--client-cert-auth). Files are read now; on failure
 * (a file that does not load, a key that does not match, endpoints that are
 * not TLS, a build without TLS) returns -1 with err naming the file and
 * OpenSSL's reason, and the previous settings stay. The handshake happens at
 * each connect, within the call's deadline; a failed one (certificate not
 * trusted, wrong host, not a TLS server) counts as an unreachable endpoint,
 * and the call's error gives each endpoint's reason. The process must
 * ignore SIGPIPE. */
int nkEtcdSetTls(nkEtcd *e, const char *ca_file, const char *cert_file, const char *key_file, char *err,
                 size_t errlen);
/* The endpoint the last call used ("h:p"). */
const char *nkEtcdEndpoint(nkEtcd *e);
/* The raft term in the header of the last call's answer: the answering
 * member's (0 when the call failed or the answer had none). */
long long nkEtcdLastTerm(nkEtcd *e);

/* A lease of ttl seconds; *granted: the TTL etcd gave (it raises a TTL below
 * its minimum). */
int nkEtcdLeaseGrant(nkEtcd *e, long long ttl, long long *id, long long *granted, char *err, size_t errlen);
/* One keep-alive; *ttl: the TTL left, 0 when the lease has expired. */
int nkEtcdLeaseKeepAlive(nkEtcd *e, long long id, long long *ttl, char *err, size_t errlen);
int nkEtcdLeaseRevoke(nkEtcd *e, long long id, char *err, size_t errlen);

/* key = val attached to lease, only if key does not exist: *won = 1. Else
 * *won = 0 and *cur (when not NULL) is the key's value (an sds the caller
 * frees). */
int nkEtcdCreate(nkEtcd *e, const char *key, const char *val, long long lease, int *won, sds *cur,
                 char *err, size_t errlen);
/* *val: the key's value (sds, caller frees) or NULL when it does not exist;
 * *mod_rev (when not NULL): its mod_revision. */
int nkEtcdGet(nkEtcd *e, const char *key, sds *val, long long *mod_rev, char *err, size_t errlen);
/* ... and the lease the key is attached to (0: none). */
int nkEtcdGetLease(nkEtcd *e, const char *key, sds *val, long long *mod_rev, long long *lease, char *err,
                   size_t errlen);
/* The keys under prefix, at most max, into keys (sds each, the caller
 * frees them), *n of them. */
int nkEtcdList(nkEtcd *e, const char *prefix, sds *keys, int max, int *n, char *err, size_t errlen);
/* *exists: etcd still has the lease (not yet expired and revoked). */
int nkEtcdLeaseExists(nkEtcd *e, long long id, int *exists, char *err, size_t errlen);
/* Its whole seconds left (0: less than one, or past its time and not yet
 * revoked; -1: gone) and the TTL it was granted with. */
int nkEtcdLeaseTTL(nkEtcd *e, long long id, long long *ttl, long long *granted, char *err, size_t errlen);
/* key = val (no lease), only if guard's value is guard_val: *ok = 1; else
 * *ok = 0 and nothing changed. */
int nkEtcdPutIf(nkEtcd *e, const char *guard, const char *guard_val, const char *key, const char *val,
                int *ok, char *err, size_t errlen);
/* key, only if its value is val and it is attached to lease from, attached
 * to lease to instead (the same value): *ok = 1 when moved. */
int nkEtcdMoveLease(nkEtcd *e, const char *key, const char *val, long long from, long long to, int *ok, char *err,
                    size_t errlen);
/* Delete key only if its value is val: *ok = 1 when deleted. */
int nkEtcdDeleteIf(nkEtcd *e, const char *key, const char *val, int *ok, char *err, size_t errlen);

#endif
