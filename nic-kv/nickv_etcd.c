/* nickv_etcd.c -- a small etcd v3 client over etcd's JSON gateway.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * The protocol, one exchange per call, on a connection of its own:
 *
 *   client                                       etcd member
 *   connect (non-blocking, poll()ed)      --->
 *   [TLS handshake, when the endpoints
 *    are etcds:// or https://]           <-->
 *   POST /v3/<service>/<method> HTTP/1.1
 *   Host, Content-Type: application/json,
 *   Content-Length, Connection: close,
 *   [Authorization: <token>]
 *   <JSON request>                        --->
 *                                         <---   HTTP/1.1 <status>
 *                                         <---   headers (usually
 *                                                Transfer-Encoding: chunked)
 *                                         <---   <JSON answer>, then close
 *
 * The requests (64-bit numbers are JSON strings, keys and values base64):
 *
 *   /v3/auth/authenticate {"name":u,"password":p} -> {"token":".."}
 *   /v3/lease/grant     {"TTL":"n","ID":"0"}   -> {"ID":"..","TTL":".."}
 *   /v3/lease/keepalive {"ID":"n"}             -> {"result":{"ID":"..",
 *                                                 "TTL":".."}}; no TTL: the
 *                                                 lease has expired
 *   /v3/lease/revoke    {"ID":"n"}             -> {"header":{..}}
 *   /v3/kv/range        {"key":k}              -> {"kvs":[{"value":..,
 *                                                 "mod_revision":".."}]};
 *                                                 no "kvs": no such key
 *   /v3/kv/txn          {"compare":[..],"success":[..],"failure":[..]}
 *                                              -> {"succeeded":true,
 *                                                 "responses":[..]};
 *                                                 "succeeded" is left out
 *                                                 when false
 *
 * Fields equal to their protobuf default (0, "", false) are left out of an
 * answer: an absent number is 0, an absent value is empty. An error is an
 * HTTP status other than 200 with {"error":"..","code":n,"message":".."},
 * or, from the keep-alive stream, {"error":{"message":"..",..}}.
 *
 * Rotation. A call has one deadline, timeout_ms after it starts. It tries
 * the current endpoint first, and the next ones in turn when an endpoint
 * cannot be reached, does not answer in time, answers what is not HTTP or
 * JSON, or says it cannot serve now (a 5xx status: no leader, a timeout).
 * Each attempt gets an equal share of the time left among the endpoints not
 * yet tried, so that one silent member cannot use up the whole deadline.
 * An endpoint that answered stays the current one for the next call. An
 * answer that is a refusal (a 4xx status, e.g. an unknown lease) ends the
 * call at once: another member would say the same. A call retried after a
 * timeout may find its own earlier effect (a create that did happen then
 * "loses" to its own value): callers compare what they find.
 *
 * Authentication (nkEtcdSetAuth). With a user set, an attempt made without
 * a token authenticates first, on the endpoint it is about to use (an
 * authentication goes through raft, so its token serves every member), and
 * every request carries the token. When etcd answers that the token is
 * invalid (it expired: --auth-token-ttl after its last use, or the members
 * restarted) or that the auth store changed since it was issued, the attempt
 * authenticates again and repeats the request once. (etcd 3.4 does not check
 * the token of a lease keep-alive, so a keep-alive alone never renews it.) A refused authentication (wrong
 * password, unknown user, authentication not enabled) ends the call like any
 * refusal, and for NK_ETCD_AUTH_HOLD_MS afterwards calls fail at once with
 * the same error instead of asking again: each authentication costs etcd a
 * bcrypt and a raft round, and a caller retrying a failed call must not turn
 * into a flood of them. That bcrypt takes tens of milliseconds on an idle
 * member and can take seconds on a loaded one: longer than a call's short
 * deadline, so that a caller that only ever authenticated inside its calls
 * could retry for ever. nkEtcdAuthenticate gets a token under a deadline of
 * its own, for callers to use before their short calls when they have none.
 *
 *   no token --authenticate--> token --request--> answer
 *                                 ^                  | "invalid auth token",
 *                                 |                  | "auth store is old"
 *                                 +--authenticate----+ (once per attempt)
 *
 * TLS (nkEtcdSetTls, USE_OPENSSL builds only). The server's certificate must
 * chain to the CA file (the system's CAs when none is given) and name the
 * endpoint's host: its IP address for a numeric host, else its DNS name. A
 * client certificate is sent when one is set (etcd's --client-cert-auth).
 * The handshake is non-blocking, bounded by the attempt's share of the
 * deadline like connect(); a handshake that fails counts as an endpoint
 * that cannot be reached, so the error lists each endpoint's reason. OpenSSL
 * writes with write(2): the process must ignore SIGPIPE (nic-kv does).
 *
 * Names are resolved with getaddrinfo() at each connect, which poll() does
 * not bound; use numeric addresses where a slow resolver matters.
 *
 * Threads: nothing here is static and mutable; an nkEtcd belongs to the one
 * thread that uses it. This file logs nothing and uses only upstream's sds,
 * zmalloc and string2ll, so it links without the rest of nic-kv.
 */

#include "fmacros.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "nickv_etcd.h"
#include "sds.h"
#include "util.h"
#include "zmalloc.h"

#ifdef USE_OPENSSL
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#endif

#define C_OK 0
#define C_ERR -1

/* Refuse answers larger than this (headers included): etcd's answers to the
 * calls above are a few hundred bytes plus one value. */
#define NK_ETCD_ANSWER_MAX (1024 * 1024)
#define NK_ETCD_HOST_MAX 256
#define NK_ETCD_NAME_MAX (NK_ETCD_HOST_MAX + 8)
#define NK_ETCD_JSON_DEPTH 32
/* After a refused authentication, calls fail at once for this long. */
#define NK_ETCD_AUTH_HOLD_MS 1000

typedef struct nkEtcdPeer {
    char host[NK_ETCD_HOST_MAX]; /* as given, without IPv6 brackets */
    char port[6];
    char name[NK_ETCD_NAME_MAX]; /* "host:port", "[v6]:port" */
} nkEtcdPeer;

struct nkEtcd {
    nkEtcdPeer *peers;
    int npeers;
    int cur;  /* the endpoint the next call tries first */
    int last; /* the endpoint the last attempt used */
    int timeout_ms;
    int tls; /* etcds:// or https:// */
#ifdef USE_OPENSSL
    SSL_CTX *ssl_ctx; /* set by nkEtcdNew when tls, replaced by nkEtcdSetTls */
#endif
    sds user, password;      /* NULL: no authentication */
    sds token;               /* NULL until authenticated */
    long long auths;         /* successful authentications */
    sds auth_refusal;        /* the last refused authentication's error */
    long long auth_hold_end; /* ms: until then, calls fail with auth_refusal */
    long long last_term;     /* the raft term the last answer's header gave (0: none) */
};

static int etcdTlsContext(nkEtcd *e, const char *ca_file, const char *cert_file, const char *key_file, char *err,
                          size_t errlen);

/* ------------------------------ Endpoints -------------------------------- */

/* One "host:port" (IPv6 as "[addr]:port") into p. */
static int etcdParsePeer(const char *s, size_t len, nkEtcdPeer *p, char *err, size_t errlen) {
    const char *host, *port;
    size_t hostlen, portlen;
    long long n;

    if (len && s[len - 1] == '/') len--; /* "http://h:2379/" */
    if (len && s[0] == '[') {
        const char *close = memchr(s, ']', len);
        if (!close || close + 1 >= s + len || close[1] != ':') goto bad;
        host = s + 1;
        hostlen = close - host;
        port = close + 2;
    } else {
        const char *colon = memchr(s, ':', len);
        if (!colon || memchr(colon + 1, ':', s + len - colon - 1)) goto bad;
        host = s;
        hostlen = colon - s;
        port = colon + 1;
    }
    portlen = s + len - port;
    if (hostlen == 0 || hostlen >= sizeof(p->host)) goto bad;
    for (size_t i = 0; i < hostlen; i++) {
        unsigned char c = host[i];
        if (c <= ' ' || c >= 127 || c == '/' || c == '@' || c == '[' || c == ']' || c == ',') goto bad;
    }
    if (!string2ll(port, portlen, &n) || n < 1 || n > 65535) goto bad;
    memcpy(p->host, host, hostlen);
    p->host[hostlen] = '\0';
    snprintf(p->port, sizeof(p->port), "%lld", n);
    snprintf(p->name, sizeof(p->name), s[0] == '[' ? "[%s]:%s" : "%s:%s", p->host, p->port);
    return C_OK;

bad:
    snprintf(err, errlen, "etcd: bad endpoint '%.*s' (want host:port)", (int)(len > 200 ? 200 : len), s);
    return C_ERR;
}

nkEtcd *nkEtcdNew(const char *urls, int timeout_ms, char *err, size_t errlen) {
    nkEtcd *e;
    const char *s, *end, *item_scheme;
    int list_scheme, tls, count = 1;

    if (!urls || !*urls) {
        snprintf(err, errlen, "etcd: no endpoints given");
        return NULL;
    }
    if (timeout_ms <= 0) {
        snprintf(err, errlen, "etcd: the timeout must be positive, not %d ms", timeout_ms);
        return NULL;
    }
    /* "etcd://h1:p1,h2:p2" (or etcds:// for TLS): one scheme for the list.
     * Otherwise each item is "http://h:p", or each is "https://h:p". */
    list_scheme = !strncmp(urls, "etcd://", 7) || !strncmp(urls, "etcds://", 8);
    tls = !strncmp(urls, "etcds://", 8) || !strncmp(urls, "https://", 8);
    item_scheme = list_scheme ? NULL : tls ? "https://" : "http://";
    s = list_scheme ? strstr(urls, "://") + 3 : urls;
    for (const char *c = s; *c; c++) count += *c == ',';

    e = zcalloc(sizeof(*e));
    e->peers = zcalloc(sizeof(nkEtcdPeer) * count);
    e->timeout_ms = timeout_ms;
    e->tls = tls;
    while (1) {
        end = strchr(s, ',');
        if (!end) end = s + strlen(s);
        if (item_scheme) {
            if (strncmp(s, item_scheme, strlen(item_scheme))) {
                snprintf(err, errlen,
                         "etcd: bad endpoint '%.*s' (want etcd://h:p,h:p, etcds://h:p,h:p, "
                         "http://h:p,http://h:p or https://h:p,https://h:p)",
                         (int)(end - s > 200 ? 200 : end - s), s);
                goto err;
            }
            s += strlen(item_scheme);
        }
        if (etcdParsePeer(s, end - s, &e->peers[e->npeers], err, errlen) == C_ERR) goto err;
        e->npeers++;
        if (!*end) break;
        s = end + 1;
    }
    /* TLS until told otherwise verifies against the system's CAs. */
    if (tls && etcdTlsContext(e, NULL, NULL, NULL, err, errlen) == C_ERR) goto err;
    return e;

err:
    nkEtcdFree(e);
    return NULL;
}

/* Overwrite a secret before its memory goes back to the allocator. */
static void etcdForget(sds s) {
    if (!s) return;
    memset(s, 0, sdslen(s));
    sdsfree(s);
}

void nkEtcdFree(nkEtcd *e) {
    if (!e) return;
#ifdef USE_OPENSSL
    if (e->ssl_ctx) SSL_CTX_free(e->ssl_ctx);
#endif
    sdsfree(e->user);
    etcdForget(e->password);
    etcdForget(e->token);
    sdsfree(e->auth_refusal);
    zfree(e->peers);
    zfree(e);
}

int nkEtcdSetAuth(nkEtcd *e, const char *user, const char *password) {
    if (user && (!*user || !password)) return C_ERR;
    sdsfree(e->user);
    etcdForget(e->password);
    etcdForget(e->token);
    sdsfree(e->auth_refusal);
    e->user = user ? sdsnew(user) : NULL;
    e->password = user ? sdsnew(password) : NULL;
    e->token = NULL;
    e->auth_refusal = NULL;
    e->auth_hold_end = 0;
    return C_OK;
}

long long nkEtcdAuthentications(nkEtcd *e) {
    return e->auths;
}

/* --------------------------------- TLS ----------------------------------- */

#ifdef USE_OPENSSL
/* OpenSSL's reason for the last failure on this thread, or fallback. */
static const char *etcdTlsError(const char *fallback, char *buf, size_t len) {
    unsigned long code = ERR_peek_last_error();
    const char *why = code ? ERR_reason_error_string(code) : NULL;
    if (why) return why;
    if (code) {
        ERR_error_string_n(code, buf, len);
        return buf;
    }
    return fallback;
}

/* A client context: TLS 1.2 or later, the peer verified against ca_file (the
 * system's CAs when NULL), cert_file/key_file sent when given. Replaces
 * e->ssl_ctx only when all of it loaded. */
static int etcdTlsContext(nkEtcd *e, const char *ca_file, const char *cert_file, const char *key_file, char *err,
                          size_t errlen) {
    SSL_CTX *ctx;
    char eb[256];

    ERR_clear_error();
    if (!(ctx = SSL_CTX_new(TLS_client_method()))) {
        snprintf(err, errlen, "etcd: SSL_CTX_new: %s", etcdTlsError("failed", eb, sizeof(eb)));
        return C_ERR;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
    /* A close without close_notify ends the answer; httpParse still
     * refuses an answer cut short of its length or its last chunk. */
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
#endif
    if (ca_file) {
        if (SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1) {
            snprintf(err, errlen, "etcd: TLS CA file '%s': %s", ca_file, etcdTlsError("cannot load", eb, sizeof(eb)));
            goto err;
        }
    } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
        snprintf(err, errlen, "etcd: TLS: the system's CAs: %s", etcdTlsError("cannot load", eb, sizeof(eb)));
        goto err;
    }
    if (!cert_file != !key_file) {
        snprintf(err, errlen, "etcd: TLS: a client certificate needs both a certificate and a key file");
        goto err;
    }
    if (cert_file) {
        if (SSL_CTX_use_certificate_chain_file(ctx, cert_file) != 1) {
            snprintf(err, errlen, "etcd: TLS certificate file '%s': %s", cert_file,
                     etcdTlsError("cannot load", eb, sizeof(eb)));
            goto err;
        }
        if (SSL_CTX_use_PrivateKey_file(ctx, key_file, SSL_FILETYPE_PEM) != 1) {
            snprintf(err, errlen, "etcd: TLS key file '%s': %s", key_file,
                     etcdTlsError("cannot load", eb, sizeof(eb)));
            goto err;
        }
        if (SSL_CTX_check_private_key(ctx) != 1) {
            snprintf(err, errlen, "etcd: TLS key file '%s' does not match certificate '%s'", key_file, cert_file);
            goto err;
        }
    }
    if (e->ssl_ctx) SSL_CTX_free(e->ssl_ctx);
    e->ssl_ctx = ctx;
    return C_OK;

err:
    SSL_CTX_free(ctx);
    return C_ERR;
}
#else
static int etcdTlsContext(nkEtcd *e, const char *ca_file, const char *cert_file, const char *key_file, char *err,
                          size_t errlen) {
    (void)e;
    (void)ca_file;
    (void)cert_file;
    (void)key_file;
    snprintf(err, errlen, "etcd: TLS endpoints, but TLS support was not built (BUILD_TLS=no)");
    return C_ERR;
}
#endif

int nkEtcdSetTls(nkEtcd *e, const char *ca_file, const char *cert_file, const char *key_file, char *err,
                 size_t errlen) {
    if (!e->tls) {
        snprintf(err, errlen, "etcd: TLS files given, but the endpoints are not etcds:// or https://");
        return C_ERR;
    }
    return etcdTlsContext(e, ca_file, cert_file, key_file, err, errlen);
}

const char *nkEtcdEndpoint(nkEtcd *e) {
    return e->peers[e->last].name;
}

/* ------------------------- Time and the socket --------------------------- */

static long long etcdNowMs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *etcdStrerror(int errnum, char *buf, size_t len) {
#if defined(__GLIBC__) && defined(_GNU_SOURCE)
    return strerror_r(errnum, buf, len);
#else
    if (strerror_r(errnum, buf, len)) snprintf(buf, len, "error %d", errnum);
    return buf;
#endif
}

/* Wait until fd is ready for events or the deadline passes: 1 ready, 0 timed
 * out, -1 poll() failed (errno). */
static int etcdWait(int fd, short events, long long deadline) {
    while (1) {
        long long left = deadline - etcdNowMs();
        struct pollfd pfd = {.fd = fd, .events = events};
        if (left <= 0) return 0;
        int n = poll(&pfd, 1, left > 1000000 ? 1000000 : (int)left);
        if (n > 0) return 1;
        if (n == 0) continue; /* re-check the deadline */
        if (errno != EINTR) return -1;
    }
}

/* A connected non-blocking socket to p, or -1 and why in reason. */
static int etcdConnect(const nkEtcdPeer *p, long long deadline, char *reason, size_t rlen) {
    struct addrinfo hints = {0}, *res, *ai;
    char eb[128];
    int fd = -1, rv;

    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    if ((rv = getaddrinfo(p->host, p->port, &hints, &res)) != 0) {
        snprintf(reason, rlen, "resolve: %s", gai_strerror(rv));
        return -1;
    }
    snprintf(reason, rlen, "connect: no address");
    for (ai = res; ai; ai = ai->ai_next) {
        int soerr = 0;
        socklen_t slen = sizeof(soerr);

        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd == -1) {
            snprintf(reason, rlen, "socket: %s", etcdStrerror(errno, eb, sizeof(eb)));
            continue;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
        if (errno != EINPROGRESS) {
            snprintf(reason, rlen, "connect: %s", etcdStrerror(errno, eb, sizeof(eb)));
        } else if ((rv = etcdWait(fd, POLLOUT, deadline)) == 0) {
            snprintf(reason, rlen, "connect: timed out");
        } else if (rv < 0) {
            snprintf(reason, rlen, "poll: %s", etcdStrerror(errno, eb, sizeof(eb)));
        } else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &slen) == -1) {
            snprintf(reason, rlen, "getsockopt: %s", etcdStrerror(errno, eb, sizeof(eb)));
        } else if (soerr) {
            snprintf(reason, rlen, "connect: %s", etcdStrerror(soerr, eb, sizeof(eb)));
        } else {
            break;
        }
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    return fd;
}

/* One exchange's connection: a socket, and its TLS session when the
 * endpoints are TLS. */
typedef struct etcdConn {
    int fd;
#ifdef USE_OPENSSL
    SSL *ssl;
#endif
} etcdConn;

static void etcdConnClose(etcdConn *c) {
#ifdef USE_OPENSSL
    if (c->ssl) SSL_free(c->ssl);
    c->ssl = NULL;
#endif
    if (c->fd != -1) close(c->fd);
    c->fd = -1;
}

#ifdef USE_OPENSSL
/* After an SSL_* call returned rv <= 0: wait for what it wants (1), or say
 * why it failed in reason (0). what names the call ("TLS handshake"). */
static int etcdTlsRetry(etcdConn *c, int rv, const char *what, long long deadline, char *reason, size_t rlen) {
    char eb[256];
    int want = SSL_get_error(c->ssl, rv), saved = errno;

    if (want == SSL_ERROR_WANT_READ || want == SSL_ERROR_WANT_WRITE) {
        int w = etcdWait(c->fd, want == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline);
        if (w > 0) return 1;
        snprintf(reason, rlen, w == 0 ? "%s: timed out" : "%s: poll failed", what);
        return 0;
    }
    /* A close (with SSL_OP_IGNORE_UNEXPECTED_EOF, even one without
     * close_notify) reads as ZERO_RETURN: during a handshake, typically a
     * peer that does not speak TLS. */
    if (want == SSL_ERROR_ZERO_RETURN || (want == SSL_ERROR_SYSCALL && !ERR_peek_last_error())) {
        if (want == SSL_ERROR_SYSCALL && saved)
            snprintf(reason, rlen, "%s: %s", what, etcdStrerror(saved, eb, sizeof(eb)));
        else snprintf(reason, rlen, "%s: connection closed by the peer", what);
        return 0;
    }
    snprintf(reason, rlen, "%s: %s", what, etcdTlsError("failed", eb, sizeof(eb)));
    return 0;
}

/* TLS on c's connected socket to p: the handshake, the peer's certificate
 * checked against the CA and p's host (address or name). */
static int etcdTlsStart(nkEtcd *e, const nkEtcdPeer *p, etcdConn *c, long long deadline, char *reason,
                        size_t rlen) {
    unsigned char addr[sizeof(struct in6_addr)];
    char eb[256];
    int numeric = inet_pton(AF_INET, p->host, addr) == 1 || inet_pton(AF_INET6, p->host, addr) == 1;

    ERR_clear_error();
    if (!(c->ssl = SSL_new(e->ssl_ctx)) || SSL_set_fd(c->ssl, c->fd) != 1) {
        snprintf(reason, rlen, "SSL_new: %s", etcdTlsError("failed", eb, sizeof(eb)));
        return C_ERR;
    }
    if (numeric) {
        if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), p->host) != 1) {
            snprintf(reason, rlen, "TLS: cannot check the certificate against address %s", p->host);
            return C_ERR;
        }
    } else if (SSL_set_tlsext_host_name(c->ssl, p->host) != 1 || SSL_set1_host(c->ssl, p->host) != 1) {
        snprintf(reason, rlen, "TLS: cannot check the certificate against name %s", p->host);
        return C_ERR;
    }
    while (1) {
        ERR_clear_error();
        errno = 0;
        int rv = SSL_connect(c->ssl);
        if (rv == 1) return C_OK;
        if (etcdTlsRetry(c, rv, "TLS handshake", deadline, reason, rlen)) continue;
        long vr = SSL_get_verify_result(c->ssl);
        if (vr != X509_V_OK)
            snprintf(reason, rlen, "TLS handshake: certificate verify failed: %s", X509_verify_cert_error_string(vr));
        return C_ERR;
    }
}
#endif

static int etcdSendAll(etcdConn *c, const char *buf, size_t len, long long deadline, char *reason, size_t rlen) {
    char eb[128];
    while (len) {
#ifdef USE_OPENSSL
        if (c->ssl) {
            ERR_clear_error();
            errno = 0;
            int n = SSL_write(c->ssl, buf, len > 1 << 30 ? 1 << 30 : (int)len);
            if (n > 0) {
                buf += n;
                len -= n;
            } else if (!etcdTlsRetry(c, n, "TLS send", deadline, reason, rlen)) {
                return C_ERR;
            }
            continue;
        }
#endif
        ssize_t n = send(c->fd, buf, len, MSG_NOSIGNAL);
        if (n > 0) {
            buf += n;
            len -= n;
            continue;
        }
        if (n == -1 && errno == EINTR) continue;
        if (n == -1 && errno != EAGAIN && errno != EWOULDBLOCK) {
            snprintf(reason, rlen, "send: %s", etcdStrerror(errno, eb, sizeof(eb)));
            return C_ERR;
        }
        int rv = etcdWait(c->fd, POLLOUT, deadline);
        if (rv <= 0) {
            snprintf(reason, rlen, rv == 0 ? "send: timed out" : "send: poll failed");
            return C_ERR;
        }
    }
    return C_OK;
}

/* Everything the peer sends until it closes, at most NK_ETCD_ANSWER_MAX. */
static sds etcdRecvAll(etcdConn *c, long long deadline, char *reason, size_t rlen) {
    sds buf = sdsempty();
    char eb[128];
    while (1) {
        buf = sdsMakeRoomFor(buf, 16384);
        size_t room = sdsavail(buf);
        ssize_t n;
        if (sdslen(buf) + room > NK_ETCD_ANSWER_MAX + 1) room = NK_ETCD_ANSWER_MAX + 1 - sdslen(buf);
#ifdef USE_OPENSSL
        if (c->ssl) {
            ERR_clear_error();
            errno = 0;
            n = SSL_read(c->ssl, buf + sdslen(buf), (int)room);
            if (n <= 0) {
                if (SSL_get_error(c->ssl, (int)n) == SSL_ERROR_ZERO_RETURN) return buf;
                if (etcdTlsRetry(c, (int)n, "TLS recv", deadline, reason, rlen)) continue;
                goto err;
            }
        } else
#endif
            n = recv(c->fd, buf + sdslen(buf), room, 0);
        if (n > 0) {
            sdsIncrLen(buf, n);
            if (sdslen(buf) > NK_ETCD_ANSWER_MAX) {
                snprintf(reason, rlen, "answer larger than %d bytes", NK_ETCD_ANSWER_MAX);
                goto err;
            }
            continue;
        }
        if (n == 0) return buf;
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            snprintf(reason, rlen, "recv: %s", etcdStrerror(errno, eb, sizeof(eb)));
            goto err;
        }
        int rv = etcdWait(c->fd, POLLIN, deadline);
        if (rv <= 0) {
            snprintf(reason, rlen, rv == 0 ? "no answer in time (%zu bytes read)" : "recv: poll failed",
                     sdslen(buf));
            goto err;
        }
    }

err:
    sdsfree(buf);
    return NULL;
}

/* --------------------------------- HTTP ---------------------------------- */

/* The next line of [*p, end) without its CRLF; NULL when there is none. */
static const char *httpLine(const char **p, const char *end, size_t *len) {
    const char *s = *p;
    for (const char *c = s; c + 1 < end; c++) {
        if (c[0] == '\r' && c[1] == '\n') {
            *len = c - s;
            *p = c + 2;
            return s;
        }
    }
    return NULL;
}

static int httpHex(const char *s, size_t len, size_t *out) {
    size_t v = 0;
    /* Seven digits are 256 MB, well past any answer we keep. */
    if (len == 0 || len > 7) return 0;
    for (size_t i = 0; i < len; i++) {
        int d;
        if (s[i] >= '0' && s[i] <= '9') d = s[i] - '0';
        else if (s[i] >= 'a' && s[i] <= 'f') d = s[i] - 'a' + 10;
        else if (s[i] >= 'A' && s[i] <= 'F') d = s[i] - 'A' + 10;
        else return 0;
        v = v * 16 + d;
    }
    *out = v;
    return 1;
}

/* Split an HTTP/1.x answer into its status and its body (de-chunked). */
static int httpParse(const char *msg, size_t len, int *status, sds *body, char *reason, size_t rlen) {
    const char *p = msg, *end = msg + len, *line;
    size_t llen;
    long long n, clen = -1;
    int chunked = 0;

    line = httpLine(&p, end, &llen);
    if (!line || llen < 12 || memcmp(line, "HTTP/1.", 7) || line[8] != ' ' ||
        !string2ll(line + 9, 3, &n) || n < 100 || n > 599 || (llen > 12 && line[12] != ' ')) {
        snprintf(reason, rlen, "not an HTTP/1.x answer");
        return C_ERR;
    }
    *status = (int)n;
    while (1) {
        const char *colon, *v, *vend;
        if (!(line = httpLine(&p, end, &llen))) {
            snprintf(reason, rlen, "HTTP headers cut short");
            return C_ERR;
        }
        if (llen == 0) break;
        if (!(colon = memchr(line, ':', llen))) {
            snprintf(reason, rlen, "bad HTTP header line");
            return C_ERR;
        }
        v = colon + 1;
        vend = line + llen;
        while (v < vend && (*v == ' ' || *v == '\t')) v++;
        while (vend > v && (vend[-1] == ' ' || vend[-1] == '\t')) vend--;
        if (colon - line == 17 && !strncasecmp(line, "Transfer-Encoding", 17)) {
            if (vend - v == 7 && !strncasecmp(v, "chunked", 7)) chunked = 1;
            else if (!(vend - v == 8 && !strncasecmp(v, "identity", 8))) {
                snprintf(reason, rlen, "unsupported Transfer-Encoding '%.*s'", (int)(vend - v), v);
                return C_ERR;
            }
        } else if (colon - line == 14 && !strncasecmp(line, "Content-Length", 14)) {
            if (!string2ll(v, vend - v, &clen) || clen < 0) {
                snprintf(reason, rlen, "bad Content-Length");
                return C_ERR;
            }
        }
    }

    if (!chunked) {
        size_t have = end - p;
        if (clen >= 0) {
            if ((size_t)clen > have) {
                snprintf(reason, rlen, "body cut short (%zu of %lld bytes)", have, clen);
                return C_ERR;
            }
            have = clen;
        }
        *body = sdsnewlen(p, have);
        return C_OK;
    }

    /* size-in-hex[;extension] CRLF data CRLF ... 0 CRLF [trailers] CRLF */
    *body = sdsempty();
    while (1) {
        size_t size;
        const char *semi;
        if (!(line = httpLine(&p, end, &llen))) goto cut;
        semi = memchr(line, ';', llen);
        if (semi) llen = semi - line;
        if (!httpHex(line, llen, &size)) {
            snprintf(reason, rlen, "bad chunk size");
            goto err;
        }
        if (size == 0) break;
        if ((size_t)(end - p) < size + 2) goto cut;
        if (p[size] != '\r' || p[size + 1] != '\n') {
            snprintf(reason, rlen, "chunk not followed by CRLF");
            goto err;
        }
        *body = sdscatlen(*body, p, size);
        p += size + 2;
    }
    /* Trailers, up to the empty line that ends the message. */
    while (1) {
        if (!(line = httpLine(&p, end, &llen))) goto cut;
        if (llen == 0) break;
    }
    return C_OK;

cut:
    snprintf(reason, rlen, "chunked body cut short");
err:
    sdsfree(*body);
    *body = NULL;
    return C_ERR;
}

/* ------------------------------ JSON reader ------------------------------ */

/* A reader for the answers above: the whole document is checked against
 * JSON's grammar first (jsonCheck), then fields are looked up by path
 * (jsonFind). Strings are decoded (escapes, \u with surrogate pairs, into
 * UTF-8); raw control characters are refused. */

static const char *jsonWs(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}

static int jsonHex4(const char *p, const char *end, unsigned *out) {
    size_t v;
    if (end - p < 4 || !httpHex(p, 4, &v)) return 0;
    *out = (unsigned)v;
    return 1;
}

/* Decode the string at *p (its opening quote) into *out when out is not
 * NULL; *p moves past the closing quote. 0 when malformed. */
static int jsonString(const char **p, const char *end, sds *out) {
    const char *s = *p;
    if (s >= end || *s != '"') return 0;
    s++;
    while (1) {
        const char *run = s;
        while (s < end && *s != '"' && *s != '\\' && (unsigned char)*s >= 0x20) s++;
        if (out && s > run) *out = sdscatlen(*out, run, s - run);
        if (s >= end || (unsigned char)*s < 0x20) return 0;
        if (*s == '"') break;
        /* An escape. */
        if (++s >= end) return 0;
        char c = *s++, one;
        switch (c) {
        case '"': one = '"'; break;
        case '\\': one = '\\'; break;
        case '/': one = '/'; break;
        case 'b': one = '\b'; break;
        case 'f': one = '\f'; break;
        case 'n': one = '\n'; break;
        case 'r': one = '\r'; break;
        case 't': one = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            char u8[4];
            int n;
            if (!jsonHex4(s, end, &cp)) return 0;
            s += 4;
            if (cp >= 0xDC00 && cp <= 0xDFFF) return 0;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (end - s < 6 || s[0] != '\\' || s[1] != 'u' || !jsonHex4(s + 2, end, &lo) || lo < 0xDC00 ||
                    lo > 0xDFFF)
                    return 0;
                s += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (cp < 0x80) {
                u8[0] = cp;
                n = 1;
            } else if (cp < 0x800) {
                u8[0] = 0xC0 | (cp >> 6);
                u8[1] = 0x80 | (cp & 0x3F);
                n = 2;
            } else if (cp < 0x10000) {
                u8[0] = 0xE0 | (cp >> 12);
                u8[1] = 0x80 | ((cp >> 6) & 0x3F);
                u8[2] = 0x80 | (cp & 0x3F);
                n = 3;
            } else {
                u8[0] = 0xF0 | (cp >> 18);
                u8[1] = 0x80 | ((cp >> 12) & 0x3F);
                u8[2] = 0x80 | ((cp >> 6) & 0x3F);
                u8[3] = 0x80 | (cp & 0x3F);
                n = 4;
            }
            if (out) *out = sdscatlen(*out, u8, n);
            continue;
        }
        default: return 0;
        }
        if (out) *out = sdscatlen(*out, &one, 1);
    }
    *p = s + 1;
    return 1;
}

static int jsonDigits(const char **p, const char *end) {
    const char *s = *p;
    while (*p < end && **p >= '0' && **p <= '9') (*p)++;
    return *p > s;
}

/* Move *p past one value (and the blanks before it), checking its grammar. */
static int jsonSkip(const char **p, const char *end, int depth) {
    const char *s = jsonWs(*p, end);
    if (s >= end || depth > NK_ETCD_JSON_DEPTH) return 0;
    switch (*s) {
    case '"':
        if (!jsonString(&s, end, NULL)) return 0;
        break;
    case '{':
    case '[': {
        char close = *s == '{' ? '}' : ']';
        int object = *s == '{';
        s = jsonWs(s + 1, end);
        if (s < end && *s == close) {
            s++;
            break;
        }
        while (1) {
            if (object) {
                s = jsonWs(s, end);
                if (!jsonString(&s, end, NULL)) return 0;
                s = jsonWs(s, end);
                if (s >= end || *s++ != ':') return 0;
            }
            if (!jsonSkip(&s, end, depth + 1)) return 0;
            s = jsonWs(s, end);
            if (s >= end) return 0;
            if (*s == ',') {
                s++;
                continue;
            }
            if (*s++ != close) return 0;
            break;
        }
        break;
    }
    case 't':
        if (end - s < 4 || memcmp(s, "true", 4)) return 0;
        s += 4;
        break;
    case 'f':
        if (end - s < 5 || memcmp(s, "false", 5)) return 0;
        s += 5;
        break;
    case 'n':
        if (end - s < 4 || memcmp(s, "null", 4)) return 0;
        s += 4;
        break;
    default:
        /* -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
        if (*s == '-') s++;
        if (s < end && *s == '0') s++;
        else if (!jsonDigits(&s, end)) return 0;
        if (s < end && *s == '.') {
            s++;
            if (!jsonDigits(&s, end)) return 0;
        }
        if (s < end && (*s == 'e' || *s == 'E')) {
            s++;
            if (s < end && (*s == '+' || *s == '-')) s++;
            if (!jsonDigits(&s, end)) return 0;
        }
    }
    *p = s;
    return 1;
}

/* The document is one JSON object, and nothing but blanks follows it. */
static int jsonCheck(const char *doc, size_t len) {
    const char *p = jsonWs(doc, doc + len);
    if (p >= doc + len || *p != '{') return 0;
    if (!jsonSkip(&p, doc + len, 0)) return 0;
    return jsonWs(p, doc + len) == doc + len;
}

/* Find the value at path in a checked document: member names and array
 * indexes separated by dots ("responses.0.response_range.kvs.0.value").
 * 1 and *at at the value's first byte; 0 when a step is absent; -1 when a
 * step meets a value of the wrong kind (a name on a non-object, an index on
 * a non-array). The first of duplicate names is the one found. */
static int jsonFind(const char *doc, size_t len, const char *path, const char **at) {
    const char *p = jsonWs(doc, doc + len), *end = doc + len;

    while (*path) {
        const char *dot = strchr(path, '.');
        size_t slen = dot ? (size_t)(dot - path) : strlen(path);
        long long index;
        int found = 0;

        if (string2ll(path, slen, &index) && index >= 0) {
            if (*p != '[') return -1;
            p = jsonWs(p + 1, end);
            if (*p == ']') return 0;
            for (long long i = 0;; i++) {
                p = jsonWs(p, end);
                if (i == index) {
                    found = 1;
                    break;
                }
                if (!jsonSkip(&p, end, 0)) return -1;
                p = jsonWs(p, end);
                if (*p++ != ',') return 0;
            }
        } else {
            if (*p != '{') return -1;
            p = jsonWs(p + 1, end);
            if (*p == '}') return 0;
            while (1) {
                sds name = sdsempty();
                int ok = jsonString(&p, end, &name);
                int match = ok && sdslen(name) == slen && !memcmp(name, path, slen);
                sdsfree(name);
                if (!ok) return -1;
                p = jsonWs(p, end);
                p++; /* ':' */
                p = jsonWs(p, end);
                if (match) {
                    found = 1;
                    break;
                }
                if (!jsonSkip(&p, end, 0)) return -1;
                p = jsonWs(p, end);
                if (*p++ != ',') return 0;
                p = jsonWs(p, end);
            }
        }
        if (!found) return 0;
        path += slen;
        if (*path == '.') path++;
    }
    *at = p;
    return 1;
}

/* ------------------------------- Base64 ---------------------------------- */

static const char etcdB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static sds b64Encode(sds out, const unsigned char *s, size_t len) {
    char q[4];
    for (size_t i = 0; i < len; i += 3) {
        unsigned v = s[i] << 16;
        if (i + 1 < len) v |= s[i + 1] << 8;
        if (i + 2 < len) v |= s[i + 2];
        q[0] = etcdB64[(v >> 18) & 63];
        q[1] = etcdB64[(v >> 12) & 63];
        q[2] = i + 1 < len ? etcdB64[(v >> 6) & 63] : '=';
        q[3] = i + 2 < len ? etcdB64[v & 63] : '=';
        out = sdscatlen(out, q, 4);
    }
    return out;
}

static int b64Value(char c) {
    const char *at = c ? strchr(etcdB64, c) : NULL;
    return at ? (int)(at - etcdB64) : -1;
}

/* Standard base64 with padding, as Go's encoding/json writes []byte. NULL
 * when malformed. */
static sds b64Decode(const char *s, size_t len) {
    sds out;
    if (len % 4) return NULL;
    out = sdsempty();
    for (size_t i = 0; i < len; i += 4) {
        int v[4], pad = 0;
        for (int j = 0; j < 4; j++) {
            if (s[i + j] == '=' && i + 4 == len && j >= 2) {
                v[j] = 0;
                pad++;
            } else if (pad || (v[j] = b64Value(s[i + j])) < 0) {
                sdsfree(out);
                return NULL;
            }
        }
        unsigned w = (v[0] << 18) | (v[1] << 12) | (v[2] << 6) | v[3];
        unsigned char b[3] = {w >> 16, (w >> 8) & 0xFF, w & 0xFF};
        out = sdscatlen(out, b, 3 - pad);
    }
    return out;
}

/* --------------------------- Fields of answers --------------------------- */

/* An answer: the body of a 200, checked as JSON, and where it came from. */
typedef struct etcdAnswer {
    sds doc;
    const char *peer;
    const char *path;
} etcdAnswer;

static void etcdBad(const etcdAnswer *a, const char *field, const char *why, char *err, size_t errlen) {
    snprintf(err, errlen, "etcd %s: POST %s: bad answer: %s %s", a->peer, a->path, field, why);
}

/* A 64-bit number, which the gateway writes as a string. Absent: 0, unless
 * required. */
static int etcdInt(const etcdAnswer *a, const char *field, int required, long long *v, char *err, size_t errlen) {
    const char *at;
    int rv = jsonFind(a->doc, sdslen(a->doc), field, &at);
    sds s;

    if (rv == 0 && !required) {
        *v = 0;
        return C_OK;
    }
    if (rv != 1 || *at != '"') {
        etcdBad(a, field, rv == 0 ? "is missing" : "is not a string", err, errlen);
        return C_ERR;
    }
    s = sdsempty();
    jsonString(&at, a->doc + sdslen(a->doc), &s);
    rv = string2ll(s, sdslen(s), v);
    sdsfree(s);
    if (!rv) {
        etcdBad(a, field, "is not a number", err, errlen);
        return C_ERR;
    }
    return C_OK;
}

/* A string field; NULL in *out when absent. */
static int etcdText(const etcdAnswer *a, const char *field, sds *out, char *err, size_t errlen) {
    const char *at;
    int rv = jsonFind(a->doc, sdslen(a->doc), field, &at);
    *out = NULL;
    if (rv == 0) return C_OK;
    if (rv < 0 || *at != '"') {
        etcdBad(a, field, "is not a string", err, errlen);
        return C_ERR;
    }
    *out = sdsempty();
    jsonString(&at, a->doc + sdslen(a->doc), out);
    return C_OK;
}

/* A bytes field (base64); absent: empty. */
static int etcdBytes(const etcdAnswer *a, const char *field, sds *out, char *err, size_t errlen) {
    sds text;
    if (etcdText(a, field, &text, err, errlen) == C_ERR) return C_ERR;
    if (!text) {
        *out = sdsempty();
        return C_OK;
    }
    *out = b64Decode(text, sdslen(text));
    sdsfree(text);
    if (!*out) {
        etcdBad(a, field, "is not base64", err, errlen);
        return C_ERR;
    }
    return C_OK;
}

/* A boolean; absent: false. */
static int etcdBool(const etcdAnswer *a, const char *field, int *b, char *err, size_t errlen) {
    const char *at;
    int rv = jsonFind(a->doc, sdslen(a->doc), field, &at);
    if (rv == 0) {
        *b = 0;
        return C_OK;
    }
    if (rv < 0 || (*at != 't' && *at != 'f')) {
        etcdBad(a, field, "is not a boolean", err, errlen);
        return C_ERR;
    }
    *b = *at == 't';
    return C_OK;
}

/* Is there an object at field? 1 yes, 0 absent, -1 something else. */
static int etcdHas(const etcdAnswer *a, const char *field) {
    const char *at;
    int rv = jsonFind(a->doc, sdslen(a->doc), field, &at);
    if (rv <= 0) return rv;
    return *at == '{' ? 1 : -1;
}

/* What etcd says in an error answer: "message", or "error" when it is a
 * string, or the stream's {"error":{"message":..}}. NULL when it says no
 * error. */
static sds etcdErrorText(const etcdAnswer *a) {
    char ignore[8];
    sds msg = NULL;
    etcdText(a, "message", &msg, ignore, sizeof(ignore));
    if (msg && sdslen(msg)) return msg;
    sdsfree(msg);
    msg = NULL;
    if (etcdHas(a, "error") == 1) {
        etcdText(a, "error.message", &msg, ignore, sizeof(ignore));
        if (!msg) msg = sdsnew("an error without a message");
        return msg;
    }
    etcdText(a, "error", &msg, ignore, sizeof(ignore));
    if (msg && sdslen(msg)) return msg;
    sdsfree(msg);
    return NULL;
}

/* ------------------------------- Exchange -------------------------------- */

/* What one attempt on one endpoint ended with. */
typedef enum {
    ETCD_ANSWERED,
    ETCD_REFUSED,
    ETCD_UNAVAILABLE,
    ETCD_TOKEN_REJECTED, /* the token expired or is stale: authenticate again */
    ETCD_AUTH_REFUSED,   /* the credentials were refused */
} etcdOutcome;

/* Does etcd's refusal (reason) say the token is no longer good? */
static int etcdTokenRejected(const char *reason) {
    return strstr(reason, "invalid auth token") != NULL || strstr(reason, "revision of auth store is old") != NULL;
}

/* POST body to path on p, with the token (when not NULL), before deadline.
 * ETCD_ANSWERED: *doc is a 200's JSON object without an error. ETCD_REFUSED
 * or ETCD_TOKEN_REJECTED: etcd said no (reason says what it said).
 * ETCD_UNAVAILABLE: try another endpoint (reason says why). */
static etcdOutcome etcdExchange(nkEtcd *e, const nkEtcdPeer *p, const char *path, const char *body,
                                const char *token, long long deadline, sds *doc, char *reason, size_t rlen) {
    sds req = NULL, raw = NULL, resp = NULL, msg;
    int status;
    etcdOutcome out = ETCD_UNAVAILABLE;
    etcdAnswer a = {NULL, p->name, path};
    etcdConn c = {.fd = -1};

    *doc = NULL;
    if ((c.fd = etcdConnect(p, deadline, reason, rlen)) == -1) return ETCD_UNAVAILABLE;
#ifdef USE_OPENSSL
    if (e->tls && etcdTlsStart(e, p, &c, deadline, reason, rlen) == C_ERR) goto done;
#else
    (void)e;
#endif
    req = sdscatprintf(sdsempty(),
                       "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                       "Content-Length: %zu\r\nConnection: close\r\n",
                       path, p->name, strlen(body));
    if (token) req = sdscatprintf(req, "Authorization: %s\r\n", token);
    req = sdscatprintf(req, "\r\n%s", body);
    if (etcdSendAll(&c, req, sdslen(req), deadline, reason, rlen) == C_ERR) goto done;
    if (!(raw = etcdRecvAll(&c, deadline, reason, rlen))) goto done;
    if (httpParse(raw, sdslen(raw), &status, &resp, reason, rlen) == C_ERR) goto done;
    if (!jsonCheck(resp, sdslen(resp))) {
        snprintf(reason, rlen, "HTTP %d with a body that is not a JSON object: '%.80s'", status, resp);
        /* A proxy's or a dying member's page: another member may do. */
        out = status >= 400 && status < 500 ? ETCD_REFUSED : ETCD_UNAVAILABLE;
        goto done;
    }
    a.doc = resp;
    msg = etcdErrorText(&a);
    if (status == 200 && !msg) {
        *doc = resp;
        resp = NULL;
        out = ETCD_ANSWERED;
        goto done;
    }
    snprintf(reason, rlen, "HTTP %d: %s", status, msg ? msg : "(no message)");
    sdsfree(msg);
    out = status >= 500 ? ETCD_UNAVAILABLE : ETCD_REFUSED;
    if (out == ETCD_REFUSED && token && etcdTokenRejected(reason)) out = ETCD_TOKEN_REJECTED;

done:
    etcdConnClose(&c);
    if (req) {
        memset(req, 0, sdslen(req)); /* the token, or a password */
        sdsfree(req);
    }
    sdsfree(raw);
    sdsfree(resp);
    return out;
}

/* "name":"s" with JSON's escapes. */
static sds jsonStringField(sds out, const char *name, const char *s) {
    out = sdscatprintf(out, "\"%s\":\"", name);
    for (; *s; s++) {
        unsigned char ch = *s;
        if (ch == '"' || ch == '\\') out = sdscatprintf(out, "\\%c", ch);
        else if (ch < 0x20) out = sdscatprintf(out, "\\u%04x", ch);
        else out = sdscatlen(out, s, 1);
    }
    return sdscatlen(out, "\"", 1);
}

/* Authenticate with e's user and password on p, for a token in e->token.
 * ETCD_AUTH_REFUSED: the credentials were refused (reason says so, with
 * etcd's words); ETCD_UNAVAILABLE: p could not answer. */
static etcdOutcome etcdAuthenticate(nkEtcd *e, const nkEtcdPeer *p, long long deadline, char *reason, size_t rlen) {
    const char *path = "/v3/auth/authenticate";
    sds body = jsonStringField(sdsnew("{"), "name", e->user), doc = NULL, token = NULL;
    char why[512];
    etcdOutcome out;

    body = sdscat(body, ",");
    body = jsonStringField(body, "password", e->password);
    body = sdscat(body, "}");
    why[0] = '\0';
    out = etcdExchange(e, p, path, body, NULL, deadline, &doc, why, sizeof(why));
    etcdForget(body);
    if (out == ETCD_UNAVAILABLE) {
        snprintf(reason, rlen, "authenticate: %s", why);
        return out;
    }
    if (out != ETCD_ANSWERED) {
        snprintf(reason, rlen, "authentication as user '%s' failed: %s", e->user, why);
        return ETCD_AUTH_REFUSED;
    }
    etcdAnswer a = {doc, p->name, path};
    if (etcdText(&a, "token", &token, why, sizeof(why)) == C_ERR || !token || !sdslen(token)) {
        snprintf(reason, rlen, "authenticate: an answer without a token");
        out = ETCD_UNAVAILABLE;
    } else {
        /* It goes into a header line: printable ASCII only. */
        for (size_t i = 0; i < sdslen(token); i++) {
            if (token[i] <= ' ' || token[i] >= 127) {
                snprintf(reason, rlen, "authenticate: a token that cannot be sent in a header");
                out = ETCD_UNAVAILABLE;
                break;
            }
        }
    }
    if (out == ETCD_ANSWERED) {
        etcdForget(e->token);
        e->token = token;
        token = NULL;
        e->auths++;
    }
    etcdForget(token);
    sdsfree(doc);
    return out;
}

/* One attempt on p: authenticate when there is no token yet, the request,
 * and once more after authenticating again when etcd says the token is no
 * longer good. */
static etcdOutcome etcdAttempt(nkEtcd *e, const nkEtcdPeer *p, const char *path, const char *body, long long deadline,
                               sds *doc, char *reason, size_t rlen) {
    etcdOutcome out;
    int fresh = 0;

    if (e->user && !e->token) {
        if ((out = etcdAuthenticate(e, p, deadline, reason, rlen)) != ETCD_ANSWERED) return out;
        fresh = 1;
    }
    if (!path) return ETCD_ANSWERED; /* nkEtcdAuthenticate: the token is all */
    out = etcdExchange(e, p, path, body, e->token, deadline, doc, reason, rlen);
    if (out == ETCD_TOKEN_REJECTED && !fresh) {
        etcdForget(e->token);
        e->token = NULL;
        if ((out = etcdAuthenticate(e, p, deadline, reason, rlen)) != ETCD_ANSWERED) return out;
        out = etcdExchange(e, p, path, body, e->token, deadline, doc, reason, rlen);
    }
    if (out == ETCD_TOKEN_REJECTED) {
        /* Even a token just issued: refuse the call, start afresh next time. */
        etcdForget(e->token);
        e->token = NULL;
        out = ETCD_REFUSED;
    }
    return out;
}

/* POST body to path, rotating over the endpoints within the call's deadline
 * (see the top of this file). C_OK and the answer in *a (a->doc the caller
 * frees), or C_ERR and err naming the endpoints and what each said. */
static int etcdCallWithin(nkEtcd *e, const char *path, const char *body, int timeout_ms, etcdAnswer *a, char *err,
                          size_t errlen) {
    long long start = etcdNowMs(), deadline = start + timeout_ms;
    const char *what = path ? path : "/v3/auth/authenticate";
    sds tried = sdsempty();
    char reason[512];

    if (e->auth_refusal && start < e->auth_hold_end) {
        snprintf(err, errlen, "%s (not asked again for %lld ms)", e->auth_refusal, e->auth_hold_end - start);
        sdsfree(tried);
        return C_ERR;
    }
    for (int n = 0; n < e->npeers; n++) {
        long long now = etcdNowMs();
        if (now >= deadline) break;
        nkEtcdPeer *p = &e->peers[e->cur];
        /* An authentication (path NULL) is slow by design (a bcrypt): the
         * endpoint tried gets all the time left, the next one only if it
         * failed before that. */
        long long share = path ? (deadline - now) / (e->npeers - n) : deadline - now;
        if (share < 1) share = 1;

        e->last = e->cur;
        reason[0] = '\0';
        etcdOutcome out = etcdAttempt(e, p, path, body, now + share, &a->doc, reason, sizeof(reason));
        if (out == ETCD_ANSWERED) {
            a->peer = p->name;
            a->path = path;
            sdsfree(tried);
            return C_OK;
        }
        if (out == ETCD_AUTH_REFUSED) {
            snprintf(err, errlen, "etcd %s: %s", p->name, reason);
            sdsfree(e->auth_refusal);
            e->auth_refusal = sdsnew(err);
            e->auth_hold_end = etcdNowMs() + NK_ETCD_AUTH_HOLD_MS;
            sdsfree(tried);
            return C_ERR;
        }
        if (out == ETCD_REFUSED) {
            /* etcd 3.4's words for a request without a token. */
            int anonymous = !e->user && strstr(reason, "user name is empty");
            snprintf(err, errlen, "etcd %s: POST %s: %s%s", p->name, what, reason,
                     anonymous ? " (etcd requires authentication: no user and password were given)" : "");
            sdsfree(tried);
            return C_ERR;
        }
        tried = sdscatprintf(tried, "%s%s: %s", sdslen(tried) ? "; " : "", p->name, reason);
        e->cur = (e->cur + 1) % e->npeers;
    }
    snprintf(err, errlen, "etcd: POST %s: no endpoint answered in %lld ms (timeout %d ms): %s", what,
             etcdNowMs() - start, timeout_ms, sdslen(tried) ? tried : "no time left");
    sdsfree(tried);
    return C_ERR;
}

static int etcdCall(nkEtcd *e, const char *path, const char *body, etcdAnswer *a, char *err, size_t errlen) {
    char terr[16];
    int rv = etcdCallWithin(e, path, body, e->timeout_ms, a, err, errlen);
    e->last_term = 0;
    if (rv == C_OK && etcdInt(a, "header.raft_term", 0, &e->last_term, terr, sizeof(terr)) == C_ERR)
        e->last_term = 0;
    return rv;
}

long long nkEtcdLastTerm(nkEtcd *e) {
    return e->last_term;
}

int nkEtcdAuthenticate(nkEtcd *e, int timeout_ms, char *err, size_t errlen) {
    etcdAnswer a = {NULL, NULL, NULL};
    if (!e->user || e->token) return C_OK;
    if (etcdCallWithin(e, NULL, NULL, timeout_ms, &a, err, errlen) == C_ERR) return C_ERR;
    sdsfree(a.doc);
    return C_OK;
}

/* ------------------------------- Requests -------------------------------- */

/* "name":"<base64 of s>" */
static sds jsonBytesField(sds out, const char *name, const char *s) {
    out = sdscatprintf(out, "\"%s\":\"", name);
    out = b64Encode(out, (const unsigned char *)s, strlen(s));
    return sdscatlen(out, "\"", 1);
}

int nkEtcdLeaseGrant(nkEtcd *e, long long ttl, long long *id, long long *granted, char *err, size_t errlen) {
    char body[64];
    etcdAnswer a;
    int rv;

    snprintf(body, sizeof(body), "{\"TTL\":\"%lld\",\"ID\":\"0\"}", ttl);
    if (etcdCall(e, "/v3/lease/grant", body, &a, err, errlen) == C_ERR) return C_ERR;
    rv = etcdInt(&a, "ID", 1, id, err, errlen);
    if (rv == C_OK) rv = etcdInt(&a, "TTL", 1, granted, err, errlen);
    if (rv == C_OK && (*id == 0 || *granted <= 0)) {
        etcdBad(&a, "ID/TTL", "are not a lease", err, errlen);
        rv = C_ERR;
    }
    sdsfree(a.doc);
    return rv;
}

int nkEtcdLeaseKeepAlive(nkEtcd *e, long long id, long long *ttl, char *err, size_t errlen) {
    char body[64];
    etcdAnswer a;
    long long got;
    int rv;

    snprintf(body, sizeof(body), "{\"ID\":\"%lld\"}", id);
    if (etcdCall(e, "/v3/lease/keepalive", body, &a, err, errlen) == C_ERR) return C_ERR;
    /* A stream's message comes wrapped in "result". */
    rv = etcdInt(&a, "result.ID", 1, &got, err, errlen);
    if (rv == C_OK) rv = etcdInt(&a, "result.TTL", 0, ttl, err, errlen);
    if (rv == C_OK && got != id) {
        etcdBad(&a, "result.ID", "is another lease", err, errlen);
        rv = C_ERR;
    }
    if (rv == C_OK && *ttl < 0) *ttl = 0;
    sdsfree(a.doc);
    return rv;
}

int nkEtcdLeaseRevoke(nkEtcd *e, long long id, char *err, size_t errlen) {
    char body[64];
    etcdAnswer a;

    snprintf(body, sizeof(body), "{\"ID\":\"%lld\"}", id);
    if (etcdCall(e, "/v3/lease/revoke", body, &a, err, errlen) == C_ERR) return C_ERR;
    sdsfree(a.doc);
    return C_OK;
}

/* A txn's request: key = val attached to lease. */
static sds jsonPutLeased(sds out, const char *key, const char *val, long long lease) {
    out = jsonBytesField(sdscat(out, "{\"request_put\":{"), "key", key);
    out = jsonBytesField(sdscat(out, ","), "value", val);
    return sdscatprintf(out, ",\"lease\":\"%lld\"}}", lease);
}

int nkEtcdCreate(nkEtcd *e, const char *key, const char *val, long long lease, int *won, sds *cur, char *err,
                 size_t errlen) {
    etcdAnswer a;
    sds body = sdsnew("{\"compare\":[{\"target\":\"CREATE\",\"result\":\"EQUAL\",\"create_revision\":\"0\",");
    int rv;

    body = jsonBytesField(body, "key", key);
    body = jsonPutLeased(sdscat(body, "}],\"success\":["), key, val, lease);
    body = sdscat(body, "],\"failure\":[{\"request_range\":{");
    body = jsonBytesField(body, "key", key);
    body = sdscat(body, "}}]}");
    rv = etcdCall(e, "/v3/kv/txn", body, &a, err, errlen);
    sdsfree(body);
    if (rv == C_ERR) return C_ERR;

    if (cur) *cur = NULL;
    rv = etcdBool(&a, "succeeded", won, err, errlen);
    if (rv == C_OK && !*won) {
        /* The failure branch read the key in the same revision. */
        if (etcdHas(&a, "responses.0.response_range.kvs.0") != 1) {
            etcdBad(&a, "responses.0.response_range.kvs.0", "is missing", err, errlen);
            rv = C_ERR;
        } else if (cur) {
            rv = etcdBytes(&a, "responses.0.response_range.kvs.0.value", cur, err, errlen);
        }
    }
    sdsfree(a.doc);
    return rv;
}

int nkEtcdGet(nkEtcd *e, const char *key, sds *val, long long *mod_rev, char *err, size_t errlen) {
    return nkEtcdGetLease(e, key, val, mod_rev, NULL, err, errlen);
}

int nkEtcdGetLease(nkEtcd *e, const char *key, sds *val, long long *mod_rev, long long *lease, char *err,
                   size_t errlen) {
    etcdAnswer a;
    sds body = jsonBytesField(sdsnew("{"), "key", key);
    long long rev = 0, id = 0;
    int rv, has;

    body = sdscat(body, "}");
    rv = etcdCall(e, "/v3/kv/range", body, &a, err, errlen);
    sdsfree(body);
    if (rv == C_ERR) return C_ERR;

    *val = NULL;
    has = etcdHas(&a, "kvs.0");
    if (has < 0) {
        etcdBad(&a, "kvs.0", "is not a key", err, errlen);
        rv = C_ERR;
    } else if (has == 1) {
        rv = etcdInt(&a, "kvs.0.mod_revision", 1, &rev, err, errlen);
        /* Absent when the key has no lease (JSON leaves zeros out). */
        if (rv == C_OK) rv = etcdInt(&a, "kvs.0.lease", 0, &id, err, errlen);
        if (rv == C_OK) rv = etcdBytes(&a, "kvs.0.value", val, err, errlen);
    }
    if (rv == C_OK && mod_rev) *mod_rev = rev;
    if (rv == C_OK && lease) *lease = id;
    sdsfree(a.doc);
    return rv;
}

int nkEtcdList(nkEtcd *e, const char *prefix, sds *keys, int max, int *n, char *err, size_t errlen) {
    etcdAnswer a;
    size_t plen = strlen(prefix);
    sds end = sdsnewlen(prefix, plen), body;
    int rv = C_OK;

    /* range_end: the prefix with its last byte one higher (etcd's own
     * "prefix" range); keys_only: the values are not needed. */
    if (!plen || (unsigned char)end[plen - 1] == 0xff) {
        sdsfree(end);
        snprintf(err, errlen, "etcd: a list needs a prefix that does not end in 0xff");
        return C_ERR;
    }
    end[plen - 1]++;
    body = jsonBytesField(sdsnew("{"), "key", prefix);
    body = sdscat(body, ",");
    body = jsonBytesField(body, "range_end", end);
    body = sdscatprintf(body, ",\"limit\":\"%d\",\"keys_only\":true}", max);
    sdsfree(end);
    rv = etcdCall(e, "/v3/kv/range", body, &a, err, errlen);
    sdsfree(body);
    if (rv == C_ERR) return C_ERR;
    *n = 0;
    for (int i = 0; i < max && rv == C_OK; i++) {
        char field[48];
        snprintf(field, sizeof(field), "kvs.%d", i);
        int has = etcdHas(&a, field);
        if (has == 0) break;
        if (has < 0) {
            etcdBad(&a, field, "is not a key", err, errlen);
            rv = C_ERR;
            break;
        }
        snprintf(field, sizeof(field), "kvs.%d.key", i);
        if ((rv = etcdBytes(&a, field, &keys[*n], err, errlen)) == C_OK) (*n)++;
    }
    if (rv == C_ERR) {
        for (int i = 0; i < *n; i++) sdsfree(keys[i]);
        *n = 0;
    }
    sdsfree(a.doc);
    return rv;
}

int nkEtcdLeaseTTL(nkEtcd *e, long long id, long long *ttl, long long *granted, char *err, size_t errlen) {
    char body[64];
    etcdAnswer a;
    int rv;

    snprintf(body, sizeof(body), "{\"ID\":\"%lld\"}", id);
    if (etcdCall(e, "/v3/lease/timetolive", body, &a, err, errlen) == C_ERR) return C_ERR;
    /* TTL: -1 for a lease etcd no longer has (expired and revoked, or
     * revoked); else the whole seconds left, truncated: 0 (left out of
     * the JSON) for less than one, or for one less than a second past its
     * time that etcd has not revoked yet, -1 for one 1-2 s past it (then
     * expired all the same: etcd renews no expired lease). */
    rv = etcdInt(&a, "TTL", 0, ttl, err, errlen);
    if (rv == C_OK) rv = etcdInt(&a, "grantedTTL", 0, granted, err, errlen);
    sdsfree(a.doc);
    return rv;
}

int nkEtcdLeaseExists(nkEtcd *e, long long id, int *exists, char *err, size_t errlen) {
    long long ttl, granted;
    if (nkEtcdLeaseTTL(e, id, &ttl, &granted, err, errlen) == C_ERR) return C_ERR;
    *exists = ttl != -1;
    return C_OK;
}

/* The compare "ckey's value is cval", after out's "[" or ",". */
static sds jsonValueIs(sds out, const char *ckey, const char *cval) {
    out = jsonBytesField(sdscat(out, "{\"target\":\"VALUE\",\"result\":\"EQUAL\","), "key", ckey);
    return sdscat(jsonBytesField(sdscat(out, ","), "value", cval), "}");
}

/* A txn of compares (a JSON list's items) and one request if they hold:
 * *ok = 1 when they held. */
static int etcdTxnIf(nkEtcd *e, const char *compares, const char *request, int *ok, char *err, size_t errlen) {
    etcdAnswer a;
    sds body = sdscatprintf(sdsempty(), "{\"compare\":[%s],\"success\":[%s]}", compares, request);
    int rv;

    rv = etcdCall(e, "/v3/kv/txn", body, &a, err, errlen);
    sdsfree(body);
    if (rv == C_ERR) return C_ERR;
    rv = etcdBool(&a, "succeeded", ok, err, errlen);
    sdsfree(a.doc);
    return rv;
}

/* request, only if ckey's value is cval. */
static int etcdValueTxn(nkEtcd *e, const char *ckey, const char *cval, sds request, int *ok, char *err,
                        size_t errlen) {
    sds cmp = jsonValueIs(sdsempty(), ckey, cval);
    int rv = etcdTxnIf(e, cmp, request, ok, err, errlen);
    sdsfree(cmp);
    return rv;
}

int nkEtcdPutIf(nkEtcd *e, const char *guard, const char *guard_val, const char *key, const char *val, int *ok,
                char *err, size_t errlen) {
    sds req = jsonBytesField(sdsnew("{\"request_put\":{"), "key", key);
    int rv;

    req = sdscat(req, ",");
    req = jsonBytesField(req, "value", val);
    req = sdscat(req, "}}");
    rv = etcdValueTxn(e, guard, guard_val, req, ok, err, errlen);
    sdsfree(req);
    return rv;
}

int nkEtcdMoveLease(nkEtcd *e, const char *key, const char *val, long long from, long long to, int *ok, char *err,
                    size_t errlen) {
    sds cmp = jsonValueIs(sdsempty(), key, val), req = jsonPutLeased(sdsempty(), key, val, to);
    int rv;

    cmp = jsonBytesField(sdscat(cmp, ",{\"target\":\"LEASE\",\"result\":\"EQUAL\","), "key", key);
    cmp = sdscatprintf(cmp, ",\"lease\":\"%lld\"}", from);
    rv = etcdTxnIf(e, cmp, req, ok, err, errlen);
    sdsfree(cmp);
    sdsfree(req);
    return rv;
}

int nkEtcdDeleteIf(nkEtcd *e, const char *key, const char *val, int *ok, char *err, size_t errlen) {
    sds req = jsonBytesField(sdsnew("{\"request_delete_range\":{"), "key", key);
    int rv;

    req = sdscat(req, "}}");
    rv = etcdValueTxn(e, key, val, req, ok, err, errlen);
    sdsfree(req);
    return rv;
}
