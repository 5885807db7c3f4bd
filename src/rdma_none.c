/* rdma_none.c -- the RDMA channel library of a build without RDMA.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * `make BUILD_RDMA=no` links this file instead of rdma_chan.c, so that SKV
 * builds where rdma-core is not installed, the way upstream builds without
 * OpenSSL when BUILD_TLS is not set. Everything that would start RDMA
 * (rdmaInit, rdmaListen, rdmaChanConnect, rdmaProbeMemory) fails with
 * RDMA_NOT_BUILT, which the callers already pass on to the operator: the
 * server's rdma-port refuses with it, redis-cli --rdma prints it, Nic-KV
 * logs it and serves TCP. No channel or listener can therefore exist, and
 * the calls that take one are never reached; they fail the same way.
 *
 * The configuration still parses (rdma-port, rdma-bind, ...), so a config
 * file stays valid across both builds. INFO rdma lists no counters.
 */

#include "rdma_chan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RDMA_NOT_BUILT "RDMA support was not built (SKV was built with BUILD_RDMA=no)"

static int notBuilt(char *err, size_t errlen) {
    if (err && errlen) snprintf(err, errlen, "%s", RDMA_NOT_BUILT);
    errno = ENOTSUP;
    return -1;
}

#ifdef SKV_DEBUG
void rdmaInvariantFailed(const char *cond, const char *file, int line) {
    fprintf(stderr, "RDMA: invariant broken at %s:%d: %s\n", file, line, cond);
    abort();
}
#endif

/* ----------------------------------------------------------- Library --- */

int rdmaSupported(void) { return 0; }

int rdmaInit(rdmaLogFn log, char *err, size_t errlen) {
    (void)log;
    return notBuilt(err, errlen);
}

void rdmaSetPinnedLimit(size_t bytes) { (void)bytes; }
size_t rdmaPinnedBytes(void) { return 0; }
size_t rdmaEffectivePinnedLimit(void) { return 0; }
void rdmaSetUnauthLimit(int n) { (void)n; }
int rdmaUnauthCount(void) { return 0; }
int rdmaWatchdogCount(void) { return 0; }
int rdmaPeerLogAllow(int level) { (void)level; return 1; }
void rdmaSetPeerLogAll(rdmaLogAllFn fn) { (void)fn; }
int rdmaProbeMemory(const char *addr, char *err, size_t errlen) {
    (void)addr;
    return notBuilt(err, errlen);
}
int rdmaAsyncFd(void) { return -1; }
void rdmaHandleAsyncEvents(void) {}
void rdmaCron(void) {}
void rdmaGetStats(rdmaStats *out) { memset(out, 0, sizeof(*out)); }
void rdmaResetStats(void) {}
const rdmaStatField rdmaStatFields[] = { { NULL, 0 } };
int rdmaChanCount(void) { return 0; }

/* ---------------------------------------------------------- Listener --- */

rdmaListener *rdmaListen(const char *addr, int port, size_t rx_size,
                         int comp_vector, char *err, size_t errlen) {
    (void)addr; (void)port; (void)rx_size; (void)comp_vector;
    notBuilt(err, errlen);
    return NULL;
}
int rdmaListenerFd(rdmaListener *l) { (void)l; return -1; }
void rdmaListenerHandleEvents(rdmaListener *l, rdmaAcceptFn accept, void *data) {
    (void)l; (void)accept; (void)data;
}
void rdmaListenerCron(rdmaListener *l) { (void)l; }
void rdmaListenerClose(rdmaListener *l) { (void)l; }
int rdmaListenerFailed(rdmaListener *l) { (void)l; return 1; }
const char *rdmaListenerAddr(rdmaListener *l) { (void)l; return ""; }
void rdmaListenerSetRxSize(rdmaListener *l, size_t rx_size) { (void)l; (void)rx_size; }

/* ----------------------------------------------------------- Channel --- */

rdmaChan *rdmaChanConnect(const char *addr, int port, const char *src,
                          size_t rx_size, int comp_vector, long timeout_ms,
                          char *err, size_t errlen) {
    (void)addr; (void)port; (void)src; (void)rx_size; (void)comp_vector; (void)timeout_ms;
    notBuilt(err, errlen);
    return NULL;
}

int rdmaChanWaitConnected(rdmaChan *ch, long timeout_ms) { (void)ch; (void)timeout_ms; return notBuilt(NULL, 0); }
int rdmaChanWaitReadable(rdmaChan *ch, long timeout_ms) { (void)ch; (void)timeout_ms; return notBuilt(NULL, 0); }
int rdmaChanWaitWritable(rdmaChan *ch, long timeout_ms) { (void)ch; (void)timeout_ms; return notBuilt(NULL, 0); }
int rdmaChanFd(rdmaChan *ch) { (void)ch; return -1; }
int rdmaChanHandleEvents(rdmaChan *ch) { (void)ch; return 0; }
ssize_t rdmaChanRead(rdmaChan *ch, void *buf, size_t len) { (void)ch; (void)buf; (void)len; return notBuilt(NULL, 0); }
ssize_t rdmaChanWrite(rdmaChan *ch, const void *buf, size_t len) { (void)ch; (void)buf; (void)len; return notBuilt(NULL, 0); }
ssize_t rdmaChanWritev(rdmaChan *ch, const struct iovec *iov, int iovcnt) {
    (void)ch; (void)iov; (void)iovcnt;
    return notBuilt(NULL, 0);
}
int rdmaChanReadPending(rdmaChan *ch) { (void)ch; return 0; }
int rdmaChanWritable(rdmaChan *ch) { (void)ch; return 0; }
int rdmaChanAttachRegion(rdmaChan *ch, void *base, size_t len, char *err, size_t errlen) {
    (void)ch; (void)base; (void)len;
    return notBuilt(err, errlen);
}
ssize_t rdmaChanWriteRegion(rdmaChan *ch, const struct iovec *iov, int iovcnt, size_t chunk) {
    (void)ch; (void)iov; (void)iovcnt; (void)chunk;
    return notBuilt(NULL, 0);
}
size_t rdmaChanRegionInFlight(rdmaChan *ch) { (void)ch; return 0; }
void rdmaChanCron(rdmaChan *ch) { (void)ch; }
void rdmaChanSetRxSize(rdmaChan *ch, size_t rx_size) { (void)ch; (void)rx_size; }
void rdmaChanSetNotify(rdmaChan *ch, rdmaNotifyFn fn, void *data) { (void)ch; (void)fn; (void)data; }
rdmaChanState rdmaChanGetState(rdmaChan *ch) { (void)ch; return RDMA_CHAN_ERROR; }
const char *rdmaChanError(rdmaChan *ch) { (void)ch; return RDMA_NOT_BUILT; }
int rdmaChanPeerAddr(rdmaChan *ch, char *ip, size_t iplen, int *port) {
    (void)ch; (void)ip; (void)iplen; (void)port;
    return notBuilt(NULL, 0);
}
int rdmaChanLocalAddr(rdmaChan *ch, char *ip, size_t iplen, int *port) {
    (void)ch; (void)ip; (void)iplen; (void)port;
    return notBuilt(NULL, 0);
}
size_t rdmaChanPinnedBytes(rdmaChan *ch) { (void)ch; return 0; }
void rdmaChanReleaseFd(rdmaChan *ch) { (void)ch; }
void rdmaChanClose(rdmaChan *ch) { (void)ch; }
