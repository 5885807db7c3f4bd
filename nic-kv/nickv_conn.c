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

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "anet.h"
#include "rdma_ae.h"
#include "zmalloc.h"

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
    return l;
}

/* Serve the RDMA connections that can progress, and decide whether the
 * loop may sleep (rdma_ae.c); then free what was closed. */
void nkLoopBeforeSleep(nkLoop *l) {
    rdmaAeBeforeSleep(l->rdma);
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
        tcpUpdate(c);
        if (c->wh) c->wh(c, c->data);
        return;
    }
    nkLoop *l = c->loop;
    if ((mask & AE_READABLE) && c->rh) c->rh(c, c->data);
    if (c->closed || c->loop != l) return;    /* closed, or handed over */
    if ((mask & AE_WRITABLE) && c->wh) c->wh(c, c->data);
}

static void tcpUpdate(nkConn *c) {
    nkLoop *l = c->loop;
    int want = (c->rh ? AE_READABLE : 0) | ((c->wh || c->connecting) ? AE_WRITABLE : 0);
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
    }
    return 0;
}

void nkConnDetach(nkConn *c) {
    nkLoop *l = c->loop;
    if (!l) return;
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
}

void nkConnSetWriteHandler(nkConn *c, nkConnHandler h) {
    c->wh = h;
    if (c->fd != -1) tcpUpdate(c);
    else rdmaUpdate(c);
}

int nkConnHasWriteHandler(nkConn *c) { return c->wh != NULL; }

ssize_t nkConnRead(nkConn *c, void *buf, size_t len) {
    ssize_t n = c->ch ? rdmaChanRead(c->ch, buf, len) : read(c->fd, buf, len);
    if (n < 0 && errno != EAGAIN) {
        snprintf(c->err, sizeof(c->err), "%s",
                 (c->ch && rdmaChanError(c->ch)) ? rdmaChanError(c->ch) : strerror(errno));
    }
    return n;
}

ssize_t nkConnWrite(nkConn *c, const void *buf, size_t len) {
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
    if (c->fd != -1) close(c->fd);
    if (c->ch) rdmaChanClose(c->ch);      /* after this, no notify for c */
    c->fd = -1;
    c->ch = NULL;
    c->closed = 1;
    listAddNodeTail(l->garbage, c);
}
