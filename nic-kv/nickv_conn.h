/* nickv_conn.h -- connections: TCP sockets (TLS among them) and RDMA
 * channels alike.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 */
#ifndef NICKV_CONN_H
#define NICKV_CONN_H

#include "nickv.h"

/* An event loop (the main thread's, or a fan-out thread's) with what its
 * RDMA connections need: nickv_conn.c. */
struct nkLoop {
    aeEventLoop *el;
    struct rdmaAe *rdma;        /* drives its RDMA connections (rdma_ae.h) */
    list *garbage;              /* closed connections, freed by nkLoopCollect */
    list *tls_pending;          /* TLS connections whose session holds read bytes */
    void (*wake)(void *data);   /* wakes its thread (from any thread) */
    void *wake_data;
};

typedef void (*nkConnHandler)(nkConn *conn, void *data);

nkLoop *nkLoopCreate(aeEventLoop *el);
void nkLoopBeforeSleep(nkLoop *l);
void nkLoopCron(nkLoop *l);
void nkLoopCollect(nkLoop *l);
nkConn *nkConnFromFd(nkLoop *l, int fd);
/* An accepted socket that speaks TLS (tls-port): the handshake runs
 * first; the handlers see only what follows it. NULL without a context. */
nkConn *nkConnFromFdTls(nkLoop *l, int fd);
int nkConnIsTls(nkConn *c);
nkConn *nkConnFromChan(nkLoop *l, rdmaChan *ch);
/* Start connecting; the write handler is called once it is done, and
 * nkConnError() then says whether it failed. A host name is resolved off
 * the loop (nkResolve): until it is, NULL with errno EAGAIN and
 * "resolving ..." in err, and the caller tries again later (a name that
 * cannot be resolved: ENOENT). Main thread. */
nkConn *nkConnConnect(nkLoop *l, const char *host, int port, int rdma, const char *src,
                      size_t rx_size, char *err, size_t errlen);
/* -1 when the loop cannot watch its RDMA channel: it is closed then. */
int nkConnAttach(nkConn *c, nkLoop *l);
void nkConnDetach(nkConn *c);
void nkConnSetData(nkConn *c, void *data);
void nkConnSetReadHandler(nkConn *c, nkConnHandler h);
void nkConnSetWriteHandler(nkConn *c, nkConnHandler h);
int nkConnHasWriteHandler(nkConn *c);
ssize_t nkConnRead(nkConn *c, void *buf, size_t len);
ssize_t nkConnWrite(nkConn *c, const void *buf, size_t len);
const char *nkConnError(nkConn *c);
int nkConnIsRdma(nkConn *c);
int nkConnFd(nkConn *c);
rdmaChan *nkConnChan(nkConn *c);
void nkConnClose(nkConn *c);

#endif
