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
 * RDMA has no "writable" readiness, and a channel may hold data that no fd
 * event will announce again (the reader stopped early). So the channel's
 * descriptor is watched for reading only; its events are handled at once,
 * and the loop's before-sleep step (nkLoopBeforeSleep) calls the read
 * handler of every channel with data or an EOF pending and the write
 * handler of every channel that can take bytes, and keeps the loop from
 * sleeping while one can still progress. A handler that has nothing to do
 * must remove itself (the fan-out does, once a replica is up to date).
 *
 * A connection belongs to the thread of its loop. To move one to another
 * thread (a replica going to its fan-out thread), the old thread detaches
 * it (nkConnDetach) and the new one attaches it (nkConnAttach). The RDMA
 * library may tell a channel's owner about an event from the main thread:
 * its notify callback only wakes the owning loop (nkLoop.wake).
 */

#include "nickv.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "anet.h"
#include "zmalloc.h"

struct nkConn {
    _Atomic(nkLoop *) loop;    /* NULL while detached */
    int fd;                    /* TCP socket, or -1 */
    rdmaChan *ch;              /* RDMA channel, or NULL */
    int chan_fd;               /* its descriptor, watched in the loop, or -1 */
    listNode *node;            /* in loop->rdma */
    nkConnHandler rh, wh;
    void *data;
    int connecting;            /* the write handler reports the connect */
    int ae_mask;               /* TCP: events registered */
    int closed;                /* closed, memory kept until the pass ends */
    unsigned long pass;        /* last before-sleep pass that served it */
    char err[160];
};

/* ------------------------------------------------------------- Loops --- */

nkLoop *nkLoopCreate(aeEventLoop *el) {
    nkLoop *l = zcalloc(sizeof(*l));
    l->el = el;
    l->rdma = listCreate();
    l->garbage = listCreate();
    return l;
}

/* After a handler ran, may we still touch c? Not if it was closed, nor if
 * it was detached (handed to another thread, which owns it from then on;
 * hand-overs are queued until the end of the pass, see nickv_fanout.c). */
static int connStillOurs(nkConn *c, nkLoop *l) {
    return !c->closed && c->loop == l;
}

static void connService(nkConn *c) {
    nkLoop *l = c->loop;
    if (c->closed || !c->ch) return;
    if (c->connecting) {
        rdmaChanState st = rdmaChanGetState(c->ch);
        if (st == RDMA_CHAN_CONNECTING) return;
        c->connecting = 0;
        if (st != RDMA_CHAN_CONNECTED)
            snprintf(c->err, sizeof(c->err), "%s", rdmaChanError(c->ch) ? rdmaChanError(c->ch) : "connect failed");
        if (c->wh) c->wh(c, c->data);
        return;
    }
    if (c->rh && rdmaChanReadPending(c->ch)) c->rh(c, c->data);
    if (!connStillOurs(c, l)) return;
    if (c->wh && rdmaChanWritable(c->ch)) c->wh(c, c->data);
}

static int connNeedsService(nkConn *c) {
    if (c->closed || !c->ch || c->connecting) return 0;
    return (c->rh && rdmaChanReadPending(c->ch)) || (c->wh && rdmaChanWritable(c->ch));
}

/* Serve every RDMA connection of the loop once. A handler may close or
 * detach any connection, so the list is walked again from its head after
 * each one, skipping those this pass already served. */
void nkLoopBeforeSleep(nkLoop *l) {
    listIter li;
    listNode *ln;
    int again = 0;
    l->pass++;
    for (;;) {
        nkConn *c = NULL;
        listRewind(l->rdma, &li);
        while ((ln = listNext(&li))) {
            c = listNodeValue(ln);
            if (c->pass != l->pass) break;
            c = NULL;
        }
        if (!c) break;
        c->pass = l->pass;
        connService(c);
    }
    listRewind(l->rdma, &li);
    while ((ln = listNext(&li)))
        if (connNeedsService(listNodeValue(ln))) again = 1;
    nkLoopCollect(l);
    aeSetDontWait(l->el, again);
}

/* Free what was closed since the last time: nothing refers to it now. */
void nkLoopCollect(nkLoop *l) {
    while (listLength(l->garbage)) {
        zfree(listNodeValue(listFirst(l->garbage)));
        listDelNode(l->garbage, listFirst(l->garbage));
    }
}

void nkLoopCron(nkLoop *l) {
    listIter li;
    listNode *ln;
    listRewind(l->rdma, &li);
    while ((ln = listNext(&li))) {
        nkConn *c = listNodeValue(ln);
        if (!c->connecting) rdmaChanCron(c->ch);
    }
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
    if (!connStillOurs(c, l)) return;
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

static void rdmaEvent(aeEventLoop *el, int fd, void *data, int mask) {
    nkConn *c = data;
    (void)el; (void)fd; (void)mask;
    if (c->closed) return;
    rdmaChanHandleEvents(c->ch);
    connService(c);
}

/* From the RDMA library, perhaps in another thread: wake the owner. */
static void rdmaNotify(rdmaChan *ch, void *data) {
    nkConn *c = data;
    nkLoop *l = c->loop;
    (void)ch;
    if (l && l->wake) l->wake(l->wake_data);
}

/* ---------------------------------------------------- Connections --- */

static nkConn *connNew(void) {
    nkConn *c = zcalloc(sizeof(*c));
    c->fd = -1;
    c->chan_fd = -1;
    return c;
}

nkConn *nkConnFromFd(nkLoop *l, int fd) {
    nkConn *c = connNew();
    c->fd = fd;
    nkConnAttach(c, l);
    return c;
}

nkConn *nkConnFromChan(nkLoop *l, rdmaChan *ch) {
    nkConn *c = connNew();
    c->ch = ch;
    rdmaChanSetNotify(ch, rdmaNotify, c);
    nkConnAttach(c, l);
    return c;
}

nkConn *nkConnConnect(nkLoop *l, const char *host, int port, int rdma, const char *src,
                      size_t rx_size, char *err, size_t errlen) {
    nkConn *c;
    if (rdma) {
        rdmaChan *ch = rdmaChanConnect(host, port, src, rx_size, -1, 5000, err, errlen);
        if (!ch) return NULL;
        c = nkConnFromChan(l, ch);
    } else {
        char aerr[ANET_ERR_LEN];
        int fd = (src && *src) ? anetTcpNonBlockBestEffortBindConnect(aerr, host, port, src) :
                                 anetTcpNonBlockConnect(aerr, host, port);
        if (fd == ANET_ERR) {
            snprintf(err, errlen, "%s", aerr);
            return NULL;
        }
        anetEnableTcpNoDelay(NULL, fd);
        c = nkConnFromFd(l, fd);
    }
    c->connecting = 1;
    if (c->fd != -1) tcpUpdate(c);
    return c;
}

void nkConnAttach(nkConn *c, nkLoop *l) {
    c->loop = l;
    if (c->ch) {
        c->chan_fd = rdmaChanFd(c->ch);
        if (c->chan_fd != -1) aeCreateFileEvent(l->el, c->chan_fd, AE_READABLE, rdmaEvent, c);
        listAddNodeTail(l->rdma, c);
        c->node = listLast(l->rdma);
        if (l->wake) l->wake(l->wake_data);   /* look at it before sleeping */
    } else {
        tcpUpdate(c);
    }
}

void nkConnDetach(nkConn *c) {
    nkLoop *l = c->loop;
    if (!l) return;
    c->rh = c->wh = NULL;
    c->data = NULL;
    if (c->ch) {
        if (c->chan_fd != -1) aeDeleteFileEvent(l->el, c->chan_fd, AE_READABLE);
        if (c->node) listDelNode(l->rdma, c->node);
        c->node = NULL;
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
}

void nkConnSetWriteHandler(nkConn *c, nkConnHandler h) {
    c->wh = h;
    if (c->fd != -1) tcpUpdate(c);
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
int nkConnIsRdma(nkConn *c) { return c->ch != NULL; }
rdmaChan *nkConnChan(nkConn *c) { return c->ch; }
int nkConnFd(nkConn *c) { return c->fd; }

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
