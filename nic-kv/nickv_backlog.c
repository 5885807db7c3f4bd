/* nickv_backlog.c -- Nic-KV's backlog: the master's stream, as a ring.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * The backlog is one ring holding the master's stream, by the master's
 * offsets: it holds bytes first..last (empty when last < first). The
 * upstream link (main thread) appends to it under the write lock. Fan-out
 * threads send from the ring in place, under the read lock
 * (nkBacklogReadBegin / nkBacklogReadEnd): the stream is stored once and
 * never copied per replica in user space.
 *
 * RDMA replicas' NICs read the ring after the post that named the bytes
 * has returned, so each RDMA replica registers a pin here (nkBacklogPin):
 * the oldest offset its NIC may still be reading. An append never
 * overwrites a pinned byte: it takes fewer bytes (the link waits and tries
 * again), and after NK_PIN_TIMEOUT_MS the link asks the backlog to drop
 * whoever holds the pin (nkBacklogDropPinners, through the dropper main()
 * wired in: the backlog knows no replicas).
 *
 * Invariants, checked after every append, reset and resize in a debug
 * build (nkBacklogCheck): when non-empty, last - first + 1 <= size;
 * last_pub == last; and an append never overwrote a byte pinned in the
 * same generation of the ring.
 *
 * This file's state is its own: every other part goes through nkBacklog*().
 */

#include "nickv.h"
#include "nickv_backlog.h"

#include <string.h>
#include <stdio.h>
#include <sys/mman.h>

#include "zmalloc.h"

/* The backlog. ring is read by fan-out threads under lock (read), written
 * by the main thread under lock (write); the rest is the main thread's
 * unless marked. */
static struct {
    pthread_rwlock_t lock;
    nkRing ring;
    _Atomic long long last_pub;  /* ring.last, readable without the lock */
    _Atomic int pinned_out;      /* the last append was cut short by a pin:
                                  * fan-out threads wake the main thread
                                  * when a pin moves */
    list *pins;                  /* nkBacklogPin: RDMA replicas' [main] */
    list *retired;               /* old rings pins still refer to [main] */
    nkPinDropFn dropper;         /* drops a pin's owner [main] */
} B;

typedef struct retiredBuf { char *buf; long long size; } retiredBuf;

static void freeRetired(void);

void nkBacklogSetDropper(nkPinDropFn fn) { B.dropper = fn; }

/* --------------------------------------------------------------- Ring --- */

/* The ring is mmap()ed: page-aligned, as memory an RDMA NIC reads should be,
 * and given back to the system whole when it is replaced. Its pages are
 * not touched here: a 128 MB ring costs nothing until the stream fills it,
 * and Nic-KV listens at once (replicas redirected to a Nic-KV that is
 * restarting must find it). */
static char *ringAlloc(long long size) {
    void *p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Copy the bytes of offsets [from, to] from one ring to another. */
static void ringCopy(char *dst, long long dsize, const char *src, long long ssize,
                     long long from, long long to) {
    while (from <= to) {
        long long si = nkRingIndex(from, ssize), di = nkRingIndex(from, dsize);
        long long n = to - from + 1;
        if (n > ssize - si) n = ssize - si;
        if (n > dsize - di) n = dsize - di;
        memcpy(dst + di, src + si, (size_t)n);
        from += n;
    }
}

static void ringFree(char *buf, long long size) {
    if (buf) munmap(buf, (size_t)size);
}

/* ---------------------------------------------------------- Invariants --- */

#ifdef NK_DEBUG
/* The ring's own invariants (under the write lock). overwritten_to: the
 * last offset whose slot an append just overwrote (-1: none); no pin of
 * this generation of the ring may be at or below it. */
static void nkBacklogCheck(const char *op, long long overwritten_to) {
    nkRing *r = &B.ring;
    listIter li;
    listNode *ln;
    if (r->last >= r->first && r->last - r->first + 1 > r->size)
        nkBug("backlog %s: holds %lld..%lld, more than its %lld bytes", op, r->first, r->last,
              r->size);
    if (r->last < r->first - 1)
        nkBug("backlog %s: last %lld is before first %lld - 1", op, r->last, r->first);
    if (atomic_load(&B.last_pub) != r->last)
        nkBug("backlog %s: last_pub %lld, last %lld", op, (long long)atomic_load(&B.last_pub),
              r->last);
    if (overwritten_to < 0 || !B.pins) return;
    listRewind(B.pins, &li);
    while ((ln = listNext(&li))) {
        nkBacklogPin *p = listNodeValue(ln);
        long long pin = atomic_load(&p->off);
        if (p->region != r->buf || pin == NK_NO_PIN || p->gen != r->gen) continue;
        if (pin <= overwritten_to)
            nkBug("backlog %s: overwrote offsets up to %lld, pinned from %lld", op,
                  overwritten_to, pin);
    }
}
#else
#define nkBacklogCheck(op, overwritten_to) ((void)0)
#endif

/* ----------------------------------------------------------- Backlog --- */

int nkBacklogInit(long long size) {
    pthread_rwlockattr_t attr;
    /* The upstream link (the only writer) must not wait behind a stream of
     * fan-out readers: glibc prefers readers unless told otherwise. */
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&B.lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    B.pins = listCreate();
    if (!(B.ring.buf = ringAlloc(size))) return -1;
    B.ring.size = size;
    B.ring.first = 1;
    B.ring.last = 0;
    B.last_pub = 0;
    return 0;
}

/* The next byte the master sends has this offset; nothing is held. */
void nkBacklogReset(long long next_offset) {
    pthread_rwlock_wrlock(&B.lock);
    B.ring.first = next_offset;
    B.ring.last = next_offset - 1;
    B.last_pub = B.ring.last;
    B.ring.gen++;             /* pins taken before mean other ring slots now */
    nkBacklogCheck("reset", -1);
    pthread_rwlock_unlock(&B.lock);
}

/* How many bytes may be appended before the ring overwrites what this pin
 * holds: -1 for no limit. Appending n bytes overwrites the slots of
 * offsets up to last + n - size, which must stay below the pin. A pin
 * taken in an earlier history (the ring restarted at another offset since)
 * says nothing about today's slots: nothing may be appended until its
 * owner, which is being dropped, is gone. A pin on a ring that was
 * replaced holds nothing in this one. Under the lock, main thread. */
static long long pinRoom(nkBacklogPin *p) {
    long long pin, room;
    if (p->region != B.ring.buf) return -1;
    pin = atomic_load(&p->off);
    if (pin == NK_NO_PIN) return -1;
    if (p->gen != B.ring.gen) return 0;
    room = pin + B.ring.size - 1 - B.ring.last;
    return room < 0 ? 0 : room;
}

/* How many of len bytes may be appended without overwriting a pinned
 * byte. Under the write lock, main thread. */
static size_t appendRoom(size_t len) {
    listIter li;
    listNode *ln;
    listRewind(B.pins, &li);
    while ((ln = listNext(&li))) {
        long long room = pinRoom(listNodeValue(ln));
        if (room >= 0 && (long long)len > room) len = (size_t)room;
    }
    return len;
}

void nkBacklogPinAdd(nkBacklogPin *p) {
    listAddNodeTail(B.pins, p);
}

void nkBacklogPinRemove(nkBacklogPin *p) {
    listNode *ln = listSearchKey(B.pins, p);
    if (ln) listDelNode(B.pins, ln);
    freeRetired();
}

int nkBacklogDropPinners(const char *why) {
    listIter li;
    listNode *ln;
    int n = 0;
    /* The write lock: pinRoom reads each pin's gen, which its fan-out
     * thread writes under the read lock (pushRdma). The dropper only sets
     * a flag and wakes the thread; it takes no backlog lock. */
    pthread_rwlock_wrlock(&B.lock);
    listRewind(B.pins, &li);
    while ((ln = listNext(&li))) {
        nkBacklogPin *p = listNodeValue(ln);
        if (pinRoom(p) != 0) continue;
        if (B.dropper && B.dropper(p->owner, why, 1)) n++;
    }
    pthread_rwlock_unlock(&B.lock);
    return n;
}

/* Append the master's stream; returns the bytes taken, fewer than len when
 * an RDMA replica's in-flight sends pin the part of the ring they would
 * overwrite (the caller keeps the rest and tries again later). */
size_t nkBacklogAppend(const char *data, size_t len) {
    nkRing *r = &B.ring;
    size_t taken, want = len;
    pthread_rwlock_wrlock(&B.lock);
    len = taken = appendRoom(len);
    while (len) {
        long long idx = nkRingIndex(r->last + 1, r->size);
        size_t n = (size_t)(r->size - idx);
        if (n > len) n = len;
        memcpy(r->buf + idx, data, n);
        r->last += n;
        data += n;
        len -= n;
    }
    if (r->last - r->first + 1 > r->size) r->first = r->last - r->size + 1;
    B.last_pub = r->last;
    atomic_store(&B.pinned_out, taken < want);
    nkBacklogCheck("append", taken ? r->last - r->size : -1);
    pthread_rwlock_unlock(&B.lock);
    return taken;
}

/* The RDMA replicas' channels registered the old ring: they are dropped
 * (they reconnect and continue from the new one), and the old ring is
 * freed once the last of their pins is gone (freeRetired). */
int nkBacklogResize(long long size) {
    nkRing *r = &B.ring;
    char *nb = ringAlloc(size), *old;
    long long oldsize;
    int rdma = 0;
    listIter li;
    listNode *ln;
    if (!nb) return -1;
    pthread_rwlock_wrlock(&B.lock);
    long long keep = r->last - r->first + 1;
    if (keep > size) keep = size;
    ringCopy(nb, size, r->buf, r->size, r->last - keep + 1, r->last);
    old = r->buf;
    oldsize = r->size;
    r->buf = nb;
    r->size = size;
    r->first = r->last - keep + 1;
    nkBacklogCheck("resize", -1);
    pthread_rwlock_unlock(&B.lock);
    listRewind(B.pins, &li);
    while ((ln = listNext(&li))) {
        nkBacklogPin *p = listNodeValue(ln);
        if (p->region != old) continue;
        rdma++;
        if (B.dropper) B.dropper(p->owner, "the backlog was resized", 0);
    }
    if (rdma) {
        retiredBuf *rb = zmalloc(sizeof(*rb));
        rb->buf = old;
        rb->size = oldsize;
        if (!B.retired) B.retired = listCreate();
        listAddNodeTail(B.retired, rb);
    } else {
        ringFree(old, oldsize);
    }
    nkLog(LL_NOTICE, "Backlog resized to %lld bytes (%lld kept%s)", size, keep,
          rdma ? "; RDMA replicas reconnect to use the new one" : "");
    return 0;
}

/* Free the old rings no pin refers to any more. */
static void freeRetired(void) {
    listIter li, pi;
    listNode *ln, *pn;
    if (!B.retired) return;
    listRewind(B.retired, &li);
    while ((ln = listNext(&li))) {
        retiredBuf *rb = listNodeValue(ln);
        int used = 0;
        listRewind(B.pins, &pi);
        while ((pn = listNext(&pi)))
            if (((nkBacklogPin *)listNodeValue(pn))->region == rb->buf) used = 1;
        if (used) continue;
        ringFree(rb->buf, rb->size);
        zfree(rb);
        listDelNode(B.retired, ln);
    }
}

void nkBacklogRange(long long *first, long long *last) {
    pthread_rwlock_rdlock(&B.lock);
    *first = B.ring.first;
    *last = B.ring.last;
    pthread_rwlock_unlock(&B.lock);
}

const nkRing *nkBacklogReadBegin(void) {
    pthread_rwlock_rdlock(&B.lock);
    return &B.ring;
}

void nkBacklogReadEnd(void) {
    pthread_rwlock_unlock(&B.lock);
}

long long nkBacklogLastPub(void) { return atomic_load(&B.last_pub); }

int nkBacklogPinnedOut(void) { return atomic_load(&B.pinned_out); }

/* The ring, as an RDMA replica's channel registers it. Main thread (the
 * only one that replaces it). */
char *nkBacklogBuf(long long *size) {
    *size = B.ring.size;
    return B.ring.buf;
}

long long nkBacklogSize(void) { return B.ring.size; }

/* Bytes mapped for rings: the ring, and the old ones pins still hold
 * (mmap()ed, so not in zmalloc_used_memory). Main thread. */
long long nkBacklogMapped(void) {
    long long n = B.ring.size;
    listIter li;
    listNode *ln;
    if (!B.retired) return n;
    listRewind(B.retired, &li);
    while ((ln = listNext(&li))) n += ((retiredBuf *)listNodeValue(ln))->size;
    return n;
}

/* The backlog's fields of INFO's "Replication" section, named and meant
 * as a Redis master's (the "Backlog" section has them under our names). */
sds nkBacklogReplicationInfo(sds s) {
    long long first, last;
    nkBacklogRange(&first, &last);
    return sdscatprintf(s,
        "repl_backlog_active:%d\r\n"
        "repl_backlog_size:%lld\r\n"
        "repl_backlog_first_byte_offset:%lld\r\n"
        "repl_backlog_histlen:%lld\r\n",
        B.ring.size > 0, B.ring.size, first, last >= first ? last - first + 1 : 0);
}

/* INFO's "Backlog" section. */
sds nkBacklogInfo(sds s) {
    long long first, last;
    nkBacklogRange(&first, &last);
    return sdscatprintf(s,
        "# Backlog\r\n"
        "backlog_size:%lld\r\n"
        "backlog_first_byte_offset:%lld\r\n"
        "backlog_last_byte_offset:%lld\r\n"
        "backlog_histlen:%lld\r\n\r\n",
        B.ring.size, first, last, last >= first ? last - first + 1 : 0);
}
