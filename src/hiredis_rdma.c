/* hiredis_rdma.c -- hiredis contexts over RDMA, for redis-cli and redis-benchmark.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * See hiredis_rdma.h. The context's read/write functions follow hiredis's
 * socket ones (net.c): in blocking mode they wait (up to the command
 * timeout) until bytes move; in non-blocking mode they return 0 for "try
 * again later". Errors set c->err and c->errstr with the channel's reason.
 *
 * In an ae event loop, a context's handlers are registered here (not with
 * aeCreateFileEvent on c->fd) and the RDMA event-loop adapter (rdma_ae.c)
 * runs them: one adapter per loop, made by redisRdmaAttachAeLoop(), found
 * again by the loop's address.
 */

#include "hiredis_rdma.h"
#include "rdma_chan.h"
#include "rdma_ae.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis.h>
#include <async.h>

int redisRdmaEnabled = 0;

/* ------------------------------------------------------------ Loops --- */

/* The adapter of each loop redisRdmaAttachAeLoop() was given. Loops may be
 * made by one thread and run by another (redis-benchmark's), hence the
 * lock; each thread remembers the last loop it asked about, so the lock is
 * not taken on a hot path. */
typedef struct aeLoopAdapter {
    aeEventLoop *el;
    rdmaAe *ra;
} aeLoopAdapter;

static pthread_mutex_t loops_lock = PTHREAD_MUTEX_INITIALIZER;
static aeLoopAdapter *loops;
static int nloops;
static __thread aeLoopAdapter last_loop;

static rdmaAe *loopAdapter(aeEventLoop *el) {
    rdmaAe *ra = NULL;
    if (last_loop.el == el) return last_loop.ra;
    pthread_mutex_lock(&loops_lock);
    for (int i = 0; i < nloops; i++)
        if (loops[i].el == el) ra = loops[i].ra;
    pthread_mutex_unlock(&loops_lock);
    if (ra) {
        last_loop.el = el;
        last_loop.ra = ra;
    }
    return ra;
}

/* What an RDMA context keeps (c->privctx): its channel, and the ae-style
 * handlers its owner registered, with their one clientData as ae keeps. */
typedef struct rdmaCtx {
    rdmaChan *ch;
    int fd;                   /* rdmaChanFd(ch), what the handlers are told */
    aeEventLoop *el;          /* the loop of ae, or NULL */
    rdmaAeChan *ae;           /* registration in el's adapter, or NULL */
    aeFileProc *rproc, *wproc;
    void *data;
} rdmaCtx;

/* --------------------------------------------------- Context functions --- */

static void setError(redisContext *c, int type, const char *what, rdmaChan *ch) {
    const char *why = ch ? rdmaChanError(ch) : NULL;
    c->err = type;
    snprintf(c->errstr, sizeof(c->errstr), "%s%s%s", what, why ? ": " : "", why ? why : "");
}

static long commandTimeoutMs(redisContext *c) {
    if (!c->command_timeout) return -1;
    return c->command_timeout->tv_sec * 1000 + c->command_timeout->tv_usec / 1000;
}

static void redisRdmaFree(void *privctx) {
    rdmaCtx *ctx = privctx;
    if (!ctx) return;
    rdmaAeDel(ctx->ae);
    rdmaChanClose(ctx->ch);
    free(ctx);
}

static ssize_t redisRdmaRead(redisContext *c, char *buf, size_t bufcap) {
    rdmaChan *ch = ((rdmaCtx *)c->privctx)->ch;
    for (;;) {
        ssize_t n = rdmaChanRead(ch, buf, bufcap);
        if (n > 0) return n;
        if (n == 0) {
            setError(c, REDIS_ERR_EOF, "Server closed the connection", NULL);
            return -1;
        }
        if (errno != EAGAIN) {
            setError(c, REDIS_ERR_IO, "RDMA read failed", ch);
            return -1;
        }
        /* Nothing buffered: take in what the completion queue holds. */
        rdmaChanHandleEvents(ch);
        if (rdmaChanReadPending(ch)) continue;
        if (!(c->flags & REDIS_BLOCK)) return 0;
        if (rdmaChanWaitReadable(ch, commandTimeoutMs(c)) == -1) {
            if (errno == ETIMEDOUT) setError(c, REDIS_ERR_TIMEOUT, "recv timeout", NULL);
            else setError(c, REDIS_ERR_IO, "RDMA read failed", ch);
            return -1;
        }
    }
}

static ssize_t redisRdmaWrite(redisContext *c) {
    rdmaChan *ch = ((rdmaCtx *)c->privctx)->ch;
    size_t len = hi_sdslen(c->obuf);
    for (;;) {
        ssize_t n = rdmaChanWrite(ch, c->obuf, len);
        if (n >= 0) return n;
        if (errno != EAGAIN) {
            /* The server may have closed right after its last words (a
             * client over maxclients gets its error, then the close, before
             * its first command goes out). As over TCP, where that write
             * succeeds, the command is dropped and the reply is read:
             * those words, then "Server closed the connection". */
            rdmaChanHandleEvents(ch);
            if (rdmaChanReadPending(ch)) return (ssize_t)len;
            setError(c, REDIS_ERR_IO, "RDMA write failed", ch);
            return -1;
        }
        rdmaChanHandleEvents(ch);
        if (rdmaChanWritable(ch)) continue;
        if (!(c->flags & REDIS_BLOCK)) return 0;
        if (rdmaChanWaitWritable(ch, commandTimeoutMs(c)) == -1) {
            if (errno == ETIMEDOUT) setError(c, REDIS_ERR_TIMEOUT, "send timeout", NULL);
            else setError(c, REDIS_ERR_IO, "RDMA write failed", ch);
            return -1;
        }
    }
}

static void redisRdmaAsyncRead(redisAsyncContext *ac) { redisAsyncRead(ac); }
static void redisRdmaAsyncWrite(redisAsyncContext *ac) { redisAsyncWrite(ac); }

static const redisContextFuncs redisContextRdmaFuncs = {
    .free_privctx = redisRdmaFree,
    .async_read = redisRdmaAsyncRead,
    .async_write = redisRdmaAsyncWrite,
    .read = redisRdmaRead,
    .write = redisRdmaWrite,
};

/* ----------------------------------------------------------- Connect --- */

/* A context carrying an error, as hiredis returns for failed connects
 * (the caller prints "Could not connect to <ip>:<port>: " before it). */
static redisContext *errorContext(const char *why) {
    redisContext *c = redisConnectFd(REDIS_INVALID_FD);
    size_t len;
    if (!c) return NULL;
    c->err = REDIS_ERR_IO;
    len = strlen(why);
    if (len >= sizeof(c->errstr)) len = sizeof(c->errstr) - 1;
    memcpy(c->errstr, why, len);
    c->errstr[len] = '\0';
    return c;
}

redisContext *redisConnectRdma(const char *ip, int port, const struct timeval *tv) {
    char err[256];
    long timeout_ms = tv ? tv->tv_sec * 1000 + tv->tv_usec / 1000 : 10000;
    rdmaChan *ch;
    rdmaCtx *ctx;
    redisContext *c;

    if (rdmaInit(NULL, err, sizeof(err)) == -1)
        return errorContext(err);
    ch = rdmaChanConnect(ip, port, NULL, RDMA_RX_SIZE_DEFAULT, -1, timeout_ms, err, sizeof(err));
    if (!ch) return errorContext(err);
    if (rdmaChanWaitConnected(ch, timeout_ms) == -1) {
        const char *why = rdmaChanError(ch);
        c = errorContext(why ? why : (errno == ETIMEDOUT ? "RDMA connect timeout" : strerror(errno)));
        rdmaChanClose(ch);
        return c;
    }
    /* hiredis owns the descriptor from here: redisFree() closes it. */
    ctx = calloc(1, sizeof(*ctx));
    c = ctx ? redisConnectFd(rdmaChanFd(ch)) : NULL;
    if (!c) {
        free(ctx);
        rdmaChanClose(ch);
        return NULL;
    }
    rdmaChanReleaseFd(ch);
    ctx->ch = ch;
    ctx->fd = rdmaChanFd(ch);
    c->funcs = &redisContextRdmaFuncs;
    c->privctx = ctx;
    return c;
}

redisContext *redisConnectRdmaNonBlock(const char *ip, int port) {
    redisContext *c = redisConnectRdma(ip, port, NULL);
    if (c) c->flags &= ~REDIS_BLOCK;
    return c;
}

redisAsyncContext *redisAsyncConnectRdma(const char *ip, int port) {
    redisOptions options = {0};
    redisContext *probe;
    redisAsyncContext *ac;

    /* Connect first (blocking), then wrap the descriptor as a user fd. */
    probe = redisConnectRdma(ip, port, NULL);
    if (!probe) return NULL;
    options.type = REDIS_CONN_USERFD;
    if (probe->err) {
        options.endpoint.fd = REDIS_INVALID_FD;
        ac = redisAsyncConnectWithOptions(&options);
        if (ac) {
            ac->err = ac->c.err = probe->err;
            memcpy(ac->c.errstr, probe->errstr, sizeof(ac->c.errstr));
            ac->errstr = ac->c.errstr;
        }
        redisFree(probe);
        return ac;
    }
    options.endpoint.fd = probe->fd;
    ac = redisAsyncConnectWithOptions(&options);
    if (!ac) {
        redisFree(probe);
        return NULL;
    }
    /* Move the channel from the probe context to the async one. */
    ac->c.funcs = &redisContextRdmaFuncs;
    ac->c.privctx = probe->privctx;
    probe->privctx = NULL;
    probe->fd = REDIS_INVALID_FD;
    redisFree(probe);
    /* Already connected: hiredis's socket connect check must not run. */
    ac->c.flags |= REDIS_CONNECTED;
    return ac;
}

redisContext *redisConnectAuto(const char *ip, int port) {
    return redisRdmaEnabled ? redisConnectRdma(ip, port, NULL) : redisConnect(ip, port);
}

redisContext *redisConnectNonBlockAuto(const char *ip, int port) {
    return redisRdmaEnabled ? redisConnectRdmaNonBlock(ip, port) : redisConnectNonBlock(ip, port);
}

int redisIsRdma(const redisContext *c) {
    return c && c->funcs == &redisContextRdmaFuncs;
}

/* ------------------------------------------------------ ae integration --- */

static void ctxReadProc(rdmaAeChan *e, void *data) {
    rdmaCtx *ctx = data;
    (void)e;
    ctx->rproc(ctx->el, ctx->fd, ctx->data, AE_READABLE);
}

static void ctxWriteProc(rdmaAeChan *e, void *data) {
    rdmaCtx *ctx = data;
    (void)e;
    ctx->wproc(ctx->el, ctx->fd, ctx->data, AE_WRITABLE);
}

int redisRdmaAeCreateFileEvent(aeEventLoop *el, redisContext *c, int mask,
                               aeFileProc *proc, void *data) {
    rdmaCtx *ctx;
    int want;
    if (!redisIsRdma(c)) return aeCreateFileEvent(el, c->fd, mask, proc, data);
    ctx = c->privctx;
    if (ctx->ae && ctx->el != el) { errno = EINVAL; return AE_ERR; }
    if (!ctx->ae) {
        rdmaAe *ra = loopAdapter(el);
        if (!ra) { errno = EINVAL; return AE_ERR; }    /* not attached */
        ctx->ae = rdmaAeAdd(ra, ctx->ch, ctxReadProc, ctxWriteProc, ctx);
        if (!ctx->ae) return AE_ERR;
        ctx->el = el;
    }
    if (mask & AE_READABLE) ctx->rproc = proc;
    if (mask & AE_WRITABLE) ctx->wproc = proc;
    ctx->data = data;
    want = rdmaAeGetMask(ctx->ae);
    if (mask & AE_READABLE) want |= RDMA_AE_READABLE;
    if (mask & AE_WRITABLE) want |= RDMA_AE_WRITABLE;
    rdmaAeSetMask(ctx->ae, want);
    return AE_OK;
}

void redisRdmaAeDeleteFileEvent(aeEventLoop *el, redisContext *c, int mask) {
    rdmaCtx *ctx;
    int want;
    if (!redisIsRdma(c)) {
        aeDeleteFileEvent(el, c->fd, mask);
        return;
    }
    ctx = c->privctx;
    if (!ctx->ae || ctx->el != el) return;
    want = rdmaAeGetMask(ctx->ae);
    if (mask & AE_READABLE) want &= ~RDMA_AE_READABLE;
    if (mask & AE_WRITABLE) want &= ~RDMA_AE_WRITABLE;
    rdmaAeSetMask(ctx->ae, want);
}

/* The async API's event hooks, as hiredis's adapters/ae.h has them for
 * sockets, registering through the functions above. */
typedef struct asyncAeEvents {
    aeEventLoop *el;
    redisAsyncContext *ac;
} asyncAeEvents;

static void asyncReadEvent(aeEventLoop *el, int fd, void *data, int mask) {
    (void)el; (void)fd; (void)mask;
    redisAsyncHandleRead(((asyncAeEvents *)data)->ac);
}

static void asyncWriteEvent(aeEventLoop *el, int fd, void *data, int mask) {
    (void)el; (void)fd; (void)mask;
    redisAsyncHandleWrite(((asyncAeEvents *)data)->ac);
}

/* One proc per direction, one clientData (ev) for both, as with ae. */
static void asyncWatch(asyncAeEvents *ev, int mask, int on) {
    if (on) redisRdmaAeCreateFileEvent(ev->el, &ev->ac->c, mask,
                                       mask == AE_READABLE ? asyncReadEvent : asyncWriteEvent, ev);
    else redisRdmaAeDeleteFileEvent(ev->el, &ev->ac->c, mask);
}
static void asyncAddRead(void *data) { asyncWatch(data, AE_READABLE, 1); }
static void asyncDelRead(void *data) { asyncWatch(data, AE_READABLE, 0); }
static void asyncAddWrite(void *data) { asyncWatch(data, AE_WRITABLE, 1); }
static void asyncDelWrite(void *data) { asyncWatch(data, AE_WRITABLE, 0); }
static void asyncCleanup(void *data) {
    asyncWatch(data, AE_READABLE | AE_WRITABLE, 0);
    free(data);
}

int redisRdmaAeAttach(aeEventLoop *el, redisAsyncContext *ac) {
    asyncAeEvents *ev;
    if (ac->ev.data != NULL) return REDIS_ERR;
    if (!(ev = calloc(1, sizeof(*ev)))) return REDIS_ERR;
    ev->el = el;
    ev->ac = ac;
    ac->ev.addRead = asyncAddRead;
    ac->ev.delRead = asyncDelRead;
    ac->ev.addWrite = asyncAddWrite;
    ac->ev.delWrite = asyncDelWrite;
    ac->ev.cleanup = asyncCleanup;
    ac->ev.data = ev;
    return REDIS_OK;
}

static void rdmaBeforeSleep(aeEventLoop *el) {
    rdmaAe *ra = loopAdapter(el);
    if (ra) rdmaAeBeforeSleep(ra);
}

void redisRdmaAttachAeLoop(aeEventLoop *el) {
    aeLoopAdapter *grown;
    rdmaAe *ra;
    /* A loop made where a deleted one was (redis-benchmark makes its
     * threads' loops again for every test) keeps that address's adapter,
     * whose clients are all gone by then: a thread's cached lookup
     * (last_loop) must not lead to an adapter that no loop serves. */
    if (loopAdapter(el)) {
        aeSetBeforeSleepProc(el, rdmaBeforeSleep);
        return;
    }
    if (!(ra = rdmaAeCreate(el))) return;
    pthread_mutex_lock(&loops_lock);
    grown = realloc(loops, sizeof(*loops) * (nloops + 1));
    if (grown) {
        loops = grown;
        loops[nloops].el = el;
        loops[nloops].ra = ra;
        nloops++;
    }
    pthread_mutex_unlock(&loops_lock);
    if (!grown) {
        rdmaAeFree(ra);
        return;
    }
    aeSetBeforeSleepProc(el, rdmaBeforeSleep);
}
