/* rdma_ae.h -- drive RDMA channels from an ae event loop.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * An RDMA channel (rdma_chan.h) is not a socket in two ways that matter to
 * an event loop: it has no "writable" readiness, and it may hold received
 * data (or an EOF, or an error) that no further event on its descriptor
 * will announce, once its reader stopped early. Every program that runs
 * channels in an aeEventLoop needs the same answer, and this is it, used by
 * the server's connection type (rdma.c), the hiredis contexts of redis-cli
 * and redis-benchmark (hiredis_rdma.c) and Nic-KV (nic-kv/nickv_conn.c):
 *
 * - The channel's descriptor is watched for reading for as long as the
 *   channel is registered. Its event takes in what the completion queue
 *   holds (rdmaChanHandleEvents) and then serves the channel.
 * - Serving a channel calls its read proc when READABLE is wanted and the
 *   channel has input (or an EOF, or an error) to report, and its write proc
 *   when WRITABLE is wanted and a write would move bytes now; the write proc
 *   runs first with RDMA_AE_BARRIER, as with ae's AE_BARRIER. While the
 *   channel connects, no proc runs; when the connect ends (either way), the
 *   write proc runs once if WRITABLE is wanted, as a socket turns writable.
 * - Before the loop sleeps, rdmaAeBeforeSleep() serves every channel that can
 *   progress without an event, and keeps the loop from sleeping (aeSetDontWait)
 *   while one still can.
 *
 * A proc may add, change or remove any registration of the loop, its own
 * included, and may free the channel after removing it: a removed
 * registration is never served again, and its memory is kept until the
 * loop's next before-sleep pass ends.
 *
 * One rdmaAe per event loop, used by that loop's thread only; nothing here
 * is shared between loops. The only thing other threads do is what the
 * RDMA library does for them: a channel's notify callback (a peer gone, a
 * device failed, seen by the library's own handlers in another thread)
 * asks the owning loop to look at all its channels again, and wakes it
 * through the wake function given to rdmaAeSetWake().
 */
#ifndef SKV_RDMA_AE_H
#define SKV_RDMA_AE_H

struct aeEventLoop;
typedef struct rdmaChan rdmaChan;

typedef struct rdmaAe rdmaAe;
typedef struct rdmaAeChan rdmaAeChan;

/* What a registration wants served. */
#define RDMA_AE_NONE     0
#define RDMA_AE_READABLE (1<<0)
#define RDMA_AE_WRITABLE (1<<1)
#define RDMA_AE_BARRIER  (1<<2)   /* with WRITABLE: write proc first */

typedef void rdmaAeProc(rdmaAeChan *e, void *data);

rdmaAe *rdmaAeCreate(struct aeEventLoop *el);
/* Every registration must have been removed. */
void rdmaAeFree(rdmaAe *ra);
/* A loop driven by another thread than the RDMA library's handlers: how to
 * wake it (thread-safe, e.g. a write to a pipe it watches). */
void rdmaAeSetWake(rdmaAe *ra, void (*wake)(void *data), void *data);

/* Register ch with its procs and their data, wanting nothing yet. Its
 * descriptor is watched from now on. Returns NULL (errno set) when the loop
 * cannot watch it (the descriptor is past the loop's setsize). The
 * registration takes over the channel's notify callback. */
rdmaAeChan *rdmaAeAdd(rdmaAe *ra, rdmaChan *ch, rdmaAeProc *rproc, rdmaAeProc *wproc,
                      void *data);
/* What to serve from now on: RDMA_AE_READABLE, RDMA_AE_WRITABLE (with
 * RDMA_AE_BARRIER or not), both, or RDMA_AE_NONE. */
void rdmaAeSetMask(rdmaAeChan *e, int mask);
int rdmaAeGetMask(rdmaAeChan *e);
/* Stop watching and serving the channel, which stays open (the caller
 * closes it, or registers it with another loop). Forget e afterwards. */
void rdmaAeDel(rdmaAeChan *e);
/* Look at this channel before sleeping: the owner knows it can progress
 * (it read less than was buffered, say). */
void rdmaAeMarkPending(rdmaAeChan *e);

/* The before-sleep pass: serve each channel that can progress (at most once
 * each), free what was removed, and tell the loop whether to sleep.
 * rdmaAeServePending() is the pass without the last step, for an owner that
 * decides about sleeping itself (the server also asks TLS); it returns how
 * many channels it served. rdmaAeHasPending() says whether one can still
 * progress. */
void rdmaAeBeforeSleep(rdmaAe *ra);
int rdmaAeServePending(rdmaAe *ra);
int rdmaAeHasPending(rdmaAe *ra);

/* About once a second: keepalives (rdmaChanCron) of every connected
 * channel, and a look at the ones that failed meanwhile. */
void rdmaAeCron(rdmaAe *ra);

/* How many channels are registered. */
int rdmaAeCount(rdmaAe *ra);

#endif
