/* nickv_fanout.h -- the fan-out threads: sending, ACKs, RDMA registration.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 */
#ifndef NICKV_FANOUT_H
#define NICKV_FANOUT_H

#include "nickv.h"

/* Largest RDMA work request the fan-out posts: a replica's share of the
 * stream goes out in pieces of this size, all in one doorbell, so that the
 * replica starts on the first piece while the rest is on the wire. */
#define NK_RDMA_CHUNK (64*1024)

/* nickv_fanout.c: the fan-out threads. */
int nkFanoutStart(aeEventLoop *main_el, int thread_num);
void nkFanoutStop(void);
int nkFanoutThreads(void);
/* Give a new replica (its connection detached) to the least loaded thread:
 * sets r->thread; the hand-over happens in nkFanoutFlushHandovers. */
void nkFanoutAdd(nkReplica *r);
/* Hand-overs queued by nkFanoutAdd go to their threads (main, before
 * sleeping: nothing in the main thread's stack refers to them then). */
void nkFanoutFlushHandovers(void);
void nkFanoutWake(void);
/* The threads' events for the main thread (an ACK to relay, a replica
 * gone): fn runs on the main pipe's wakeups; it calls nkFanoutEventsTaken
 * first. */
void nkFanoutOnEvents(void (*fn)(void));
void nkFanoutEventsTaken(void);
/* How a fan-out thread marks its replica GONE (main wires in the lifecycle's
 * checked setter, nkReplicaSetState); the thread then wakes the main thread. */
void nkFanoutOnState(void (*fn)(nkReplica *r, nkReplicaState to));

#endif
