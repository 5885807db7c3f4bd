/* nickv_conn.c -- Nic-KV's connections: TCP sockets and RDMA channels alike.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * Every link Nic-KV has (admin clients, replicas, the link to the master)
 * is an nkConn: a TCP socket or an RDMA channel (src/rdma_chan.c) with a
 * read handler and a write handler, in one event loop (nkLoop) at a time.
 *
 * TCP is plain ae: the handlers are AE_READABLE / AE_WRITABLE events.
 *
 * TLS (nickv_tls.c) is TCP with an OpenSSL session on it, made by
 * nkConnFromFdTls (tls-port) or nkConnConnect (tls-replication). The
 * handshake runs here, first, on the socket's events; the handlers see a
 * connection only once it is done (a connect's write handler is called
 * then, with nkConnError set if the handshake failed: the peer's
 * certificate not signed by the CA, no certificate from a client that
 * needs one). So no byte of Redis protocol, no AUTH, goes to a peer that
 * has not shown a certificate the CA signed. After it, nkConnRead and
 * nkConnWrite are SSL_read and SSL_write, with their EAGAINs; a read that
 * must write first (or a write that must read) waits for the other event.
 * A session may hold decrypted bytes the socket no longer signals: such a
 * connection goes on the loop's tls_pending list, and its read handler is
 * called again before the loop sleeps (nkLoopBeforeSleep).
 *
 * RDMA channels are driven by the RDMA event-loop adapter (src/rdma_ae.c),
 * one per nkLoop: it watches the channel's descriptor for reading, and the
 * loop's before-sleep step (nkLoopBeforeSleep) calls the read handler of
 * every channel with data or an EOF pending and the write handler of every
 * channel that can take bytes, and keeps the loop from sleeping while one
 * can still progress. A handler that has nothing to do must remove itself
 * (the fan-out does, once a replica is up to date).
 *
 * A connection belongs to the thread of its loop. To move one to another
 * thread (a replica going to its fan-out thread), the old thread detaches
 * it (nkConnDetach) and the new one attaches it (nkConnAttach). The RDMA
 * library may tell a channel's owner about an event from the main thread:
 * the adapter then only wakes the owning loop (nkLoop.wake).
 */

#include "nickv.h"
#include "nickv_conn.h"
#include "nickv_tls.h"
#include "nickv_resolve.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "anet.h"
#include "rdma_ae.h"
#include "zmalloc.h"

#ifdef USE_OPENSSL
#include <openssl/err.h>
#include <openssl/ssl.h>
#endif

struct nkConn {
    _Atomic(nkLoop *) loop;    /* NULL while detached */
    int fd;                    /* TCP socket, or -1 */
    rdmaChan *ch;              /* RDMA channel, or NULL */
    rdmaAeChan *ae;            /* its registration in loop->rdma, or NULL */
    nkConnHandler rh, wh;
    void *data;
    int connecting;            /* the write handler reports the connect */
    int ae_mask;               /* TCP: events registered */
    int closed;                /* closed, memory kept until the pass ends */
    char err[160];
    void *ssl;                 /* TLS: its SSL session, or NULL */
    int tls_hs;                /* TLS: the handshake is under way */
    int tls_hs_want;           /* ... and waits for this event */
    int tls_read_wants_write;  /* TLS: SSL_read must write first */
    int tls_write_wants_read;  /* TLS: SSL_write must read first */
    int tls_pending;           /* on its loop's tls_pending list */
    int tls_client;            /* TLS: we connected (else we accepted) */
};

/* ------------------------------------------------------------- Loops --- */

/* The adapter's wake: nkLoop.wake is set after creation, by the fan-out. */
static void loopWake(void *data) {
    nkLoop *l = data;
    if (l->wake) l->wake(l->wake_data);
}

nkLoop *nkLoopCreate(aeEventLoop *el) {
    nkLoop *l = zcalloc(sizeof(*l));
    l->el = el;
    l->rdma = rdmaAeCreate(el);
    if (!l->rdma) {
        nkLog(LL_WARNING, "Out of memory creating an event loop's RDMA adapter");
        abort();
    }
    rdmaAeSetWake(l->rdma, loopWake, l);
    l->garbage = listCreate();
    l->tls_pending = listCreate();
    return l;
}

static void tlsServePending(nkLoop *l);

/* Serve the RDMA connections that can progress, and decide whether the
 * loop may sleep (rdma_ae.c); the TLS connections whose session holds
 * bytes; then free what was closed. */
void nkLoopBeforeSleep(nkLoop *l) {
    rdmaAeBeforeSleep(l->rdma);
    tlsServePending(l);
    nkLoopCollect(l);
}

/* Free what was closed since the last time: nothing refers to it now. */
void nkLoopCollect(nkLoop *l) {
    while (listLength(l->garbage)) {
        zfree(listNodeValue(listFirst(l->garbage)));
        listDelNode(l->garbage, listFirst(l->garbage));
    }
}

void nkLoopCron(nkLoop *l) {
    rdmaAeCron(l->rdma);
}

/* --------------------------------------------------------------- TLS --- */

#ifdef USE_OPENSSL
/* One step of the handshake: 1 done, 0 under way (tls_hs_want says for
 * which event), -1 failed (err says why: a certificate the CA did not
 * sign is named so). */
static int tlsHandshake(nkConn *c) {
    SSL *ssl = c->ssl;
    ERR_clear_error();
    errno = 0;
    int r = SSL_do_handshake(ssl);
    if (r == 1) {
        c->tls_hs = 0;
        return 1;
    }
    int e = SSL_get_error(ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        c->tls_hs_want = e == SSL_ERROR_WANT_READ ? AE_READABLE : AE_WRITABLE;
        return 0;
    }
    long v = SSL_get_verify_result(ssl);
    const char *why = v != X509_V_OK ? X509_verify_cert_error_string(v) :
                      (e == SSL_ERROR_SYSCALL ? (errno ? strerror(errno) : "the peer closed the connection") :
                       nkTlsError("failed"));
    snprintf(c->err, sizeof(c->err), "TLS handshake: %s", why);
    c->tls_hs = 0;
    return -1;
}

/* The session holds bytes the socket will not signal: read them before
 * the loop sleeps (tlsServePending). */
static void tlsNotePending(nkConn *c) {
    nkLoop *l = c->loop;
    if (!c->ssl || c->tls_pending || c->closed || c->tls_hs || !c->rh || !l || SSL_pending(c->ssl) <= 0) return;
    c->tls_pending = 1;
    listAddNodeTail(l->tls_pending, c);
}

static void tlsForgetPending(nkConn *c, nkLoop *l) {
    listNode *ln;
    if (!c->tls_pending || !l) return;
    if ((ln = listSearchKey(l->tls_pending, c))) listDelNode(l->tls_pending, ln);
    c->tls_pending = 0;
}

/* A reader that leaves bytes in its session (it reads less than a record
 * at a time) is called again, a few rounds, then the loop does not sleep
 * while some remain. */
static void tlsServePending(nkLoop *l) {
    for (int round = 0; round < 8 && listLength(l->tls_pending); round++) {
        list *now = l->tls_pending;
        l->tls_pending = listCreate();
        while (listLength(now)) {
            nkConn *c = listNodeValue(listFirst(now));
            listDelNode(now, listFirst(now));
            c->tls_pending = 0;
            if (c->closed || c->loop != l || !c->rh || SSL_pending(c->ssl) <= 0) continue;
            c->rh(c, c->data);
            if (!c->closed && c->loop == l) tlsNotePending(c);
        }
        listRelease(now);
    }
    if (listLength(l->tls_pending)) aeSetDontWait(l->el, 1);
}

static void tlsFree(nkConn *c) {
    if (!c->ssl) return;
    if (!c->tls_hs) SSL_shutdown(c->ssl);    /* a close_notify, if it fits: best effort */
    SSL_free(c->ssl);
    c->ssl = NULL;
}
#else
static int tlsHandshake(nkConn *c) { (void)c; return -1; }
static void tlsNotePending(nkConn *c) { (void)c; }
static void tlsForgetPending(nkConn *c, nkLoop *l) { (void)c; (void)l; }
static void tlsServePending(nkLoop *l) { (void)l; }
static void tlsFree(nkConn *c) { (void)c; }
#endif

/* ---------------------------------------------------------- Handlers --- */

static void tcpUpdate(nkConn *c);

static void tcpEvent(aeEventLoop *el, int fd, void *data, int mask) {
    nkConn *c = data;
    (void)el; (void)fd;
    if (c->connecting && (mask & AE_WRITABLE)) {
        int err = 0;
        socklen_t len = sizeof(err);
        c->connecting = 0;
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1) err = errno;
        if (err) snprintf(c->err, sizeof(c->err), "%s", strerror(err));
        else if (c->ssl) {
            /* Connected: the handshake, before the caller hears of it. */
            c->tls_hs = 1;
            if (tlsHandshake(c) == 0) {
                tcpUpdate(c);
                return;
            }
        }
        tcpUpdate(c);
        if (c->wh) c->wh(c, c->data);
        return;
    }
    if (c->tls_hs) {
        int r = tlsHandshake(c);
        tcpUpdate(c);
        if (r == 0) return;
        /* A connect ends with its write handler, as TCP's; an accepted
         * connection's reader sees the failure (its read fails) or the
         * bytes that came with the end of the handshake. */
        if (c->tls_client) {
            if (c->wh) c->wh(c, c->data);
            return;
        }
        mask = AE_READABLE;
    }
    nkLoop *l = c->loop;
    int call_r = c->rh && ((mask & AE_READABLE) || ((mask & AE_WRITABLE) && c->tls_read_wants_write));
    int call_w = (mask & AE_WRITABLE) || ((mask & AE_READABLE) && c->tls_write_wants_read);
    if (call_r) c->rh(c, c->data);
    if (c->closed || c->loop != l) return;    /* closed, or handed over */
    tlsNotePending(c);
    if (call_w && c->wh) c->wh(c, c->data);
}

static void tcpUpdate(nkConn *c) {
    nkLoop *l = c->loop;
    int want;
    if (c->tls_hs) {
        want = c->tls_hs_want;
    } else {
        want = (c->rh ? AE_READABLE : 0) | ((c->wh || c->connecting) ? AE_WRITABLE : 0);
        if (c->rh && c->tls_read_wants_write) want |= AE_WRITABLE;
        if (c->wh && c->tls_write_wants_read) want |= AE_READABLE;
    }
    if (!l || c->fd == -1) return;
    if (c->ae_mask & ~want) aeDeleteFileEvent(l->el, c->fd, c->ae_mask & ~want);
    if (want & ~c->ae_mask) aeCreateFileEvent(l->el, c->fd, want & ~c->ae_mask, tcpEvent, c);
    c->ae_mask = want;
}

/* RDMA: the adapter calls these; it stops once the connection is detached
 * or closed. A connect in progress ends with the write handler, as TCP's. */
static void rdmaUpdate(nkConn *c) {
    if (!c->ae) return;
    rdmaAeSetMask(c->ae, (c->rh ? RDMA_AE_READABLE : 0) |
                         ((c->wh || c->connecting) ? RDMA_AE_WRITABLE : 0));
}

static void rdmaReadProc(rdmaAeChan *e, void *data) {
    nkConn *c = data;
    (void)e;
    if (c->rh) c->rh(c, c->data);
}

static void rdmaWriteProc(rdmaAeChan *e, void *data) {
    nkConn *c = data;
    (void)e;
    if (c->connecting) {
        c->connecting = 0;
        if (rdmaChanGetState(c->ch) != RDMA_CHAN_CONNECTED)
            snprintf(c->err, sizeof(c->err), "%s", rdmaChanError(c->ch) ? rdmaChanError(c->ch) : "connect failed");
        rdmaUpdate(c);
    }
    if (c->wh) c->wh(c, c->data);
}

/* ---------------------------------------------------- Connections --- */

static nkConn *connNew(void) {
    nkConn *c = zcalloc(sizeof(*c));
    c->fd = -1;
    return c;
}

nkConn *nkConnFromFd(nkLoop *l, int fd) {
    nkConn *c = connNew();
    c->fd = fd;
    nkConnAttach(c, l);
    return c;
}

nkConn *nkConnFromFdTls(nkLoop *l, int fd) {
#ifdef USE_OPENSSL
    SSL *ssl = nkTlsSession(1);
    if (!ssl) return NULL;
    if (SSL_set_fd(ssl, fd) != 1) {
        SSL_free(ssl);
        return NULL;
    }
    nkConn *c = connNew();
    c->fd = fd;
    c->ssl = ssl;
    c->tls_hs = 1;
    c->tls_hs_want = AE_READABLE;      /* the client speaks first */
    nkConnAttach(c, l);
    return c;
#else
    (void)l; (void)fd;
    return NULL;
#endif
}

int nkConnIsTls(nkConn *c) { return c->ssl != NULL; }

/* NULL when the loop cannot watch the channel (closed then, and logged). */
nkConn *nkConnFromChan(nkLoop *l, rdmaChan *ch) {
    nkConn *c = connNew();
    c->ch = ch;
    if (nkConnAttach(c, l) == -1) {
        zfree(c);
        return NULL;
    }
    return c;
}

/* One address, numeric. */
static nkConn *connectTo(nkLoop *l, const char *ip, int port, int rdma, const char *src,
                         size_t rx_size, char *err, size_t errlen) {
    nkConn *c;
    if (rdma) {
        rdmaChan *ch = rdmaChanConnect(ip, port, src, rx_size, -1, 5000, err, errlen);
        if (!ch) return NULL;
        if (!(c = nkConnFromChan(l, ch))) {
            snprintf(err, errlen, "cannot watch the RDMA channel");
            return NULL;
        }
    } else {
        char aerr[ANET_ERR_LEN];
        int fd = (src && *src) ? anetTcpNonBlockBestEffortBindConnect(aerr, ip, port, src) :
                                 anetTcpNonBlockConnect(aerr, ip, port);
        if (fd == ANET_ERR) {
            snprintf(err, errlen, "%s", aerr);
            return NULL;
        }
        anetEnableTcpNoDelay(NULL, fd);
        c = nkConnFromFd(l, fd);
#ifdef USE_OPENSSL
        if (nkTlsOutgoing()) {
            SSL *ssl = nkTlsSession(0);
            if (!ssl || SSL_set_fd(ssl, fd) != 1) {
                if (ssl) SSL_free(ssl);
                snprintf(err, errlen, "TLS: cannot make a session: %s", nkTlsError("failed"));
                nkConnClose(c);
                return NULL;
            }
            c->ssl = ssl;
            c->tls_client = 1;
        }
#endif
    }
    c->connecting = 1;
    if (c->fd != -1) tcpUpdate(c);
    else rdmaUpdate(c);
    return c;
}

nkConn *nkConnConnect(nkLoop *l, const char *host, int port, int rdma, const char *src,
                      size_t rx_size, char *err, size_t errlen) {
    char ip[NK_RESOLVE_ADDRS][NK_RESOLVE_IP];
    nkConn *c = NULL;
    int n = nkResolve(host, ip, err, errlen);
    if (n <= 0) {
        errno = n == 0 ? EAGAIN : ENOENT;
        return NULL;
    }
    /* The addresses in turn, until one can be started (as anet does with
     * what getaddrinfo gives): the last one's error stands. */
    for (int i = 0; i < n && !c; i++) c = connectTo(l, ip[i], port, rdma, src, rx_size, err, errlen);
    /* (EAGAIN and ENOENT say "the name": not what a connect says.) */
    if (!c && (errno == EAGAIN || errno == ENOENT)) errno = EIO;
    return c;
}

int nkConnAttach(nkConn *c, nkLoop *l) {
    c->loop = l;
    if (c->ch) {
        c->ae = rdmaAeAdd(l->rdma, c->ch, rdmaReadProc, rdmaWriteProc, c);
        if (!c->ae) {
            /* No handler of it would ever run: the channel is closed, and
             * the caller drops the connection (nkConnClose, or zfree for
             * one that was never handed out). */
            snprintf(c->err, sizeof(c->err), "cannot watch the RDMA channel: %s", strerror(errno));
            nkLog(LL_WARNING, "%s", c->err);
            rdmaChanClose(c->ch);
            c->ch = NULL;
            return -1;
        }
        rdmaUpdate(c);
        if (l->wake) l->wake(l->wake_data);   /* look at it before sleeping */
    } else {
        tcpUpdate(c);
        tlsNotePending(c);
    }
    return 0;
}

void nkConnDetach(nkConn *c) {
    nkLoop *l = c->loop;
    if (!l) return;
    tlsForgetPending(c, l);
    c->rh = c->wh = NULL;
    c->data = NULL;
    if (c->ae) {
        rdmaAeDel(c->ae);
        c->ae = NULL;
    } else if (c->ae_mask) {
        aeDeleteFileEvent(l->el, c->fd, c->ae_mask);
        c->ae_mask = 0;
    }
    c->loop = NULL;
}

void nkConnSetData(nkConn *c, void *data) { c->data = data; }

void nkConnSetReadHandler(nkConn *c, nkConnHandler h) {
    c->rh = h;
    if (c->fd != -1) tcpUpdate(c);
    else rdmaUpdate(c);
    tlsNotePending(c);          /* bytes the session held while nobody read */
}

void nkConnSetWriteHandler(nkConn *c, nkConnHandler h) {
    c->wh = h;
    if (c->fd != -1) tcpUpdate(c);
    else rdmaUpdate(c);
}

int nkConnHasWriteHandler(nkConn *c) { return c->wh != NULL; }

#ifdef USE_OPENSSL
/* SSL_read / SSL_write as read(2) / write(2): bytes, 0 on EOF (read), -1
 * with errno EAGAIN (the session waits for an event: registered) or an
 * error (err says which). A failed handshake fails every read. */
static ssize_t tlsIo(nkConn *c, void *buf, size_t len, int writing) {
    int want_other = 0;
    ssize_t n;
    if (c->tls_hs) {
        errno = EAGAIN;
        return -1;
    }
    if (!strncmp(c->err, "TLS handshake", 13)) {
        errno = EIO;
        return -1;
    }
    ERR_clear_error();
    errno = 0;
    int r = writing ? SSL_write(c->ssl, buf, len > INT_MAX ? INT_MAX : (int)len)
                    : SSL_read(c->ssl, buf, len > INT_MAX ? INT_MAX : (int)len);
    if (r > 0) {
        n = r;
    } else {
        int e = SSL_get_error(c->ssl, r);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
            want_other = writing ? e == SSL_ERROR_WANT_READ : e == SSL_ERROR_WANT_WRITE;
            errno = EAGAIN;
            n = -1;
        } else if (e == SSL_ERROR_ZERO_RETURN && !writing) {
            n = 0;
        } else {
            snprintf(c->err, sizeof(c->err), "TLS: %s", e == SSL_ERROR_SYSCALL && errno ? strerror(errno) :
                     (e == SSL_ERROR_ZERO_RETURN ? "closed by the peer" : nkTlsError("failed")));
            errno = EIO;
            n = -1;
        }
    }
    int *flag = writing ? &c->tls_write_wants_read : &c->tls_read_wants_write;
    if (*flag != want_other) {
        *flag = want_other;
        tcpUpdate(c);
    }
    return n;
}
#endif

ssize_t nkConnRead(nkConn *c, void *buf, size_t len) {
#ifdef USE_OPENSSL
    if (c->ssl) return tlsIo(c, buf, len, 0);
#endif
    ssize_t n = c->ch ? rdmaChanRead(c->ch, buf, len) : read(c->fd, buf, len);
    if (n < 0 && errno != EAGAIN) {
        snprintf(c->err, sizeof(c->err), "%s",
                 (c->ch && rdmaChanError(c->ch)) ? rdmaChanError(c->ch) : strerror(errno));
    }
    return n;
}

ssize_t nkConnWrite(nkConn *c, const void *buf, size_t len) {
#ifdef USE_OPENSSL
    if (c->ssl) return tlsIo(c, (void *)buf, len, 1);
#endif
    ssize_t n = c->ch ? rdmaChanWrite(c->ch, buf, len) : write(c->fd, buf, len);
    if (n < 0 && errno != EAGAIN) {
        snprintf(c->err, sizeof(c->err), "%s",
                 (c->ch && rdmaChanError(c->ch)) ? rdmaChanError(c->ch) : strerror(errno));
    }
    return n;
}

const char *nkConnError(nkConn *c) { return c->err[0] ? c->err : NULL; }
/* Its socket, for CLIENT LIST; -1 for RDMA. */
int nkConnFd(nkConn *c) {
    return c->fd;
}

int nkConnIsRdma(nkConn *c) { return c->ch != NULL; }
rdmaChan *nkConnChan(nkConn *c) { return c->ch; }

/* Close. The memory stays until the loop's next nkLoopCollect(): the
 * caller's callers may still look at c (they see closed set). A detached
 * connection is only ever closed by the main thread (a hand-over that
 * failed), so it waits in the main loop's garbage. */
void nkConnClose(nkConn *c) {
    nkLoop *l;
    if (!c || c->closed) return;
    l = c->loop ? c->loop : nk.loop;
    nkConnDetach(c);
    tlsFree(c);
    if (c->fd != -1) close(c->fd);
    if (c->ch) rdmaChanClose(c->ch);      /* after this, no notify for c */
    c->fd = -1;
    c->ch = NULL;
    c->closed = 1;
    listAddNodeTail(l->garbage, c);
}
