/* hiredis_rdma.c -- hiredis contexts over RDMA, for redis-cli and redis-benchmark.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * See hiredis_rdma.h. The context's read/write functions follow hiredis's
 * socket ones (net.c): in blocking mode they wait (up to the command
 * timeout) until bytes move; in non-blocking mode they return 0 for "try
 * again later". Errors set c->err and c->errstr with the channel's reason.
 */

#include "hiredis_rdma.h"
#include "rdma_chan.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ae.h"
#include <hiredis.h>
#include <async.h>

int redisRdmaEnabled = 0;

/* ----------------------------------------------------- Context registry --- */

/* Every live RDMA context by descriptor, for the ae before-sleep hook.
 * Contexts may be made and freed by several threads (redis-benchmark's),
 * hence the lock; it is never contended on a hot path. */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static rdmaChan **registry;
static int registry_size;

static void registryPut(int fd, rdmaChan *ch) {
    pthread_mutex_lock(&registry_lock);
    if (fd >= registry_size) {
        int n = registry_size ? registry_size : 64;
        while (n <= fd) n *= 2;
        rdmaChan **grown = realloc(registry, sizeof(*registry) * n);
        if (grown) {
            memset(grown + registry_size, 0, sizeof(*registry) * (n - registry_size));
            registry = grown;
            registry_size = n;
        }
    }
    if (fd < registry_size) registry[fd] = ch;
    pthread_mutex_unlock(&registry_lock);
}

static void registryDel(int fd) {
    pthread_mutex_lock(&registry_lock);
    if (fd >= 0 && fd < registry_size) registry[fd] = NULL;
    pthread_mutex_unlock(&registry_lock);
}

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
    rdmaChan *ch = privctx;
    if (!ch) return;
    registryDel(rdmaChanFd(ch));
    rdmaChanClose(ch);
}

static ssize_t redisRdmaRead(redisContext *c, char *buf, size_t bufcap) {
    rdmaChan *ch = c->privctx;
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
    rdmaChan *ch = c->privctx;
    size_t len = hi_sdslen(c->obuf);
    for (;;) {
        ssize_t n = rdmaChanWrite(ch, c->obuf, len);
        if (n >= 0) return n;
        if (errno != EAGAIN) {
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
    c = redisConnectFd(rdmaChanFd(ch));
    if (!c) {
        rdmaChanClose(ch);
        return NULL;
    }
    rdmaChanReleaseFd(ch);
    c->funcs = &redisContextRdmaFuncs;
    c->privctx = ch;
    registryPut(rdmaChanFd(ch), ch);
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

/* Registered as an RDMA context's read handler while its owner waits to
 * write (AE_WRITABLE only): wakes the loop when the peer's buffer turns up,
 * and the before-sleep hook then runs the write handler. */
static void rdmaWakeup(aeEventLoop *el, int fd, void *data, int mask) {
    rdmaChan *ch;
    (void)el; (void)data; (void)mask;
    pthread_mutex_lock(&registry_lock);
    ch = fd < registry_size ? registry[fd] : NULL;
    pthread_mutex_unlock(&registry_lock);
    if (ch) rdmaChanHandleEvents(ch);
}

static void rdmaBeforeSleep(aeEventLoop *el) {
    int fd, busy = 0, maxfd = el->maxfd;
    if (!redisRdmaEnabled) return;
    for (fd = 0; fd <= maxfd && fd < el->setsize; fd++) {
        aeFileEvent *fe = &el->events[fd];
        rdmaChan *ch;
        if (fe->mask == AE_NONE) continue;
        pthread_mutex_lock(&registry_lock);
        ch = fd < registry_size ? registry[fd] : NULL;
        pthread_mutex_unlock(&registry_lock);
        if (!ch) continue;
        if (fe->mask & AE_WRITABLE) {
            rdmaChanHandleEvents(ch);
            if (rdmaChanWritable(ch)) {
                fe->wfileProc(el, fd, fe->clientData, AE_WRITABLE);
                busy = 1;
                continue;       /* the handler may have freed the context */
            }
            /* ae keeps one clientData per fd: pass the owner's along. */
            if (!(fe->mask & AE_READABLE))
                aeCreateFileEvent(el, fd, AE_READABLE, rdmaWakeup, fe->clientData);
        }
        if ((fe->mask & AE_READABLE) && fe->rfileProc != rdmaWakeup && rdmaChanReadPending(ch)) {
            fe->rfileProc(el, fd, fe->clientData, AE_READABLE);
            busy = 1;
        }
    }
    aeSetDontWait(el, busy);
}

void redisRdmaAttachAeLoop(aeEventLoop *el) {
    aeSetBeforeSleepProc(el, rdmaBeforeSleep);
}
