/* hiredis_rdma.h -- hiredis contexts over RDMA, for redis-cli and redis-benchmark.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * A context made here is an ordinary redisContext (or redisAsyncContext)
 * whose read and write functions move bytes through an rdmaChan
 * (src/rdma_chan.c) instead of a socket: redisCommand(), redisGetReply(),
 * redisAppendCommand(), the async API and its ae adapter all work
 * unchanged. c->fd is the channel's descriptor: poll it for reading.
 *
 * RDMA has no "writable" readiness, and input already buffered does not
 * wake a loop again. A program that drives contexts with an ae event loop
 * (redis-benchmark, skv-rdma-tool) calls redisRdmaAttachAeLoop(el) once per
 * loop, and registers a context's handlers with
 * redisRdmaAeCreateFileEvent() / redisRdmaAeDeleteFileEvent() instead of
 * ae's own calls on c->fd (an async context: redisRdmaAeAttach() instead of
 * hiredis's redisAeAttach()). For a socket context these are ae's calls;
 * for an RDMA one the RDMA event-loop adapter (rdma_ae.h) runs the
 * AE_READABLE handler whenever input, an EOF or an error is there to read,
 * and the AE_WRITABLE handler whenever a write would move bytes, before each
 * sleep as well as on the channel's events.
 */
#ifndef SKV_HIREDIS_RDMA_H
#define SKV_HIREDIS_RDMA_H

#include <sys/time.h>

#include "ae.h"

struct redisContext;
struct redisAsyncContext;

/* Set by --rdma: the redisConnect*Auto() calls below then use RDMA. */
extern int redisRdmaEnabled;

/* Blocking connect (waits up to tv, or 10 s when NULL). Like redisConnect():
 * never NULL unless out of memory; check c->err. */
struct redisContext *redisConnectRdma(const char *ip, int port, const struct timeval *tv);
/* The same, then switched to non-blocking mode (for event loops). */
struct redisContext *redisConnectRdmaNonBlock(const char *ip, int port);
/* An async context over RDMA. The connection is made (blocking) before it
 * returns, so the connect callback is not called; check ac->err. */
struct redisAsyncContext *redisAsyncConnectRdma(const char *ip, int port);

/* redisConnect() / redisConnectNonBlock() over RDMA when redisRdmaEnabled. */
struct redisContext *redisConnectAuto(const char *ip, int port);
struct redisContext *redisConnectNonBlockAuto(const char *ip, int port);

int redisIsRdma(const struct redisContext *c);

/* See above. Sets the loop's before-sleep proc (it may be attached before
 * the options are parsed: a loop with no RDMA context has nothing to do). */
void redisRdmaAttachAeLoop(aeEventLoop *el);
/* aeCreateFileEvent / aeDeleteFileEvent for a context's descriptor: mask is
 * AE_READABLE and/or AE_WRITABLE, one proc per direction, one clientData for
 * both (the last given), as ae has them. An RDMA context is served by one
 * loop, the one it was first registered with (AE_ERR for another, or for a
 * loop not attached). */
int redisRdmaAeCreateFileEvent(aeEventLoop *el, struct redisContext *c, int mask,
                               aeFileProc *proc, void *data);
void redisRdmaAeDeleteFileEvent(aeEventLoop *el, struct redisContext *c, int mask);
/* hiredis's redisAeAttach() for any async context, RDMA or not. */
int redisRdmaAeAttach(aeEventLoop *el, struct redisAsyncContext *ac);

#endif
