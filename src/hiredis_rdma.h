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
 * RDMA has no "writable" readiness. A program that drives contexts with an
 * ae event loop (redis-benchmark, the async API's ae adapter) calls
 * redisRdmaAttachAeLoop(el) once per loop: before each sleep, it runs the
 * AE_WRITABLE handler of every RDMA context that can write, and the
 * AE_READABLE handler of every one with input already buffered.
 */
#ifndef SKV_HIREDIS_RDMA_H
#define SKV_HIREDIS_RDMA_H

#include <sys/time.h>

struct redisContext;
struct redisAsyncContext;
struct aeEventLoop;

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

/* See above. The hook returns at once unless redisRdmaEnabled (it may be
 * attached before the options are parsed). */
void redisRdmaAttachAeLoop(struct aeEventLoop *el);

#endif
