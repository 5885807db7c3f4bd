/* nickv_backlog.h -- the backlog: the ring, its lock, the RDMA replicas' pins.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 */
#ifndef NICKV_BACKLOG_H
#define NICKV_BACKLOG_H

#include "nickv.h"

/* The upstream link may wait this long for the NIC to finish reading a
 * part of the backlog it would overwrite, before the replica whose sends
 * hold that part is dropped (see nkBacklogAppend()). */
#define NK_PIN_TIMEOUT_MS 2000

/* The stream from the master, as a ring (nickv_backlog.c). Offsets are the
 * master's: the ring holds bytes first..last (empty when last < first). */
typedef struct nkRing {
    char *buf;
    long long size;
    long long first, last;
    long long gen;               /* bumped when a new history restarts it */
} nkRing;

/* Where offset's byte lives in a ring of size bytes. */
static inline long long nkRingIndex(long long offset, long long size) { return offset % size; }

/* Drop a pin's owner (set kill, with why; log it if asked). Returns 1 if it
 * was not being dropped already. Main thread. */
typedef int (*nkPinDropFn)(void *owner, const char *why, int log);

/* nickv_backlog.c: the ring, which it owns; fan-out threads read it in
 * place between nkBacklogReadBegin() and nkBacklogReadEnd() (its read lock:
 * what it returns stays put until then). */
int nkBacklogInit(long long size);
void nkBacklogReset(long long next_offset);
size_t nkBacklogAppend(const char *data, size_t len);
int nkBacklogResize(long long size);
void nkBacklogRange(long long *first, long long *last);
const nkRing *nkBacklogReadBegin(void);
void nkBacklogReadEnd(void);
/* The last offset held, without the lock. */
long long nkBacklogLastPub(void);
/* The last append was cut short by a pin (the link waits for one to move). */
int nkBacklogPinnedOut(void);
/* The ring an RDMA replica's channel registers, and its size [main]. */
char *nkBacklogBuf(long long *size);
long long nkBacklogSize(void);
/* ... and the bytes mapped for rings, old ones pins hold included [main]. */
long long nkBacklogMapped(void);
void nkBacklogPinAdd(nkBacklogPin *p);
/* Forget a pin (its owner is freed); frees the old rings no pin holds. */
void nkBacklogPinRemove(nkBacklogPin *p);
/* Who drops a pin's owner (main wires the replicas in). */
void nkBacklogSetDropper(nkPinDropFn fn);
/* Drop the owners of the pins that keep the backlog from taking the next
 * byte; returns how many. */
int nkBacklogDropPinners(const char *why);
sds nkBacklogInfo(sds s);
/* repl_backlog_* fields of INFO's "Replication" section. */
sds nkBacklogReplicationInfo(sds s);

#endif
