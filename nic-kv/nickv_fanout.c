/* nickv_fanout.c -- Nic-KV's fan-out threads.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * Every replica belongs to one fan-out thread, which writes to the
 * replica's socket straight from the backlog's ring (nickv_backlog.c),
 * under its read lock: the stream is stored once and never copied per
 * replica in user space.
 *
 * thread-num fan-out threads are started (never more than the machine's
 * cores); a new replica goes to the thread with the fewest, so no more
 * threads carry replicas than there are replicas. Each thread has its own
 * event loop: a pipe wakes it when the stream grew or a replica was handed
 * to it; it reads its replicas' REPLCONF ACKs. It tells the main thread
 * about ACKs and about replicas that are gone through a pipe of the main
 * thread; the main thread relays both to the master (nickv_replica.c,
 * through the hooks main() sets: this file calls no layer above it).
 *
 * A replica is dropped (and falls back to the master, or resyncs) when it
 * is so far behind that the backlog no longer holds what it needs, when it
 * closes or errs, or when the master's history changes.
 *
 * RDMA replicas get the stream without any copy at all: each replica's
 * channel registers the backlog ring (local access only, in its own
 * thread: replicaRegister), and the
 * thread posts RDMA WRITE_WITH_IMMs whose scatter entries point into the
 * ring, every piece a replica is due in one ibv_post_send (one doorbell per
 * replica per wakeup, the off-path SmartNIC study's advice #4). Since the
 * NIC reads the ring after the post returns, a replica "pins" the oldest
 * offset it may still be reading (nkReplica.pin, registered with the
 * backlog: nickv_backlog.c) until its writes
 * complete, and the upstream link never overwrites a pinned byte: it waits
 * (stops reading the master) and, after NK_PIN_TIMEOUT_MS, drops the
 * replica that holds the pin. A replica's in-flight bytes are at most its
 * receive buffer (16 MiB), far less than the backlog, so this only happens
 * to a replica whose NIC stopped acknowledging.
 *
 * ========================================================================
 * Memory ordering (written for aarch64, whose stores and loads may be seen
 * out of order where x86 would keep them in order)
 * ========================================================================
 *
 * The ring's bytes and fields are ordered by the backlog's rwlock, a
 * thread's incoming list by its mutex, the RDMA library's shared lists by
 * its lock: a lock's release and acquire carry everything written before.
 * The rest is C11 atomics (nickv.h: nkReplica, nkBacklogPin; nkWorker
 * here). They all use the default order, memory_order_seq_cst, on purpose:
 *
 * - Three wake-up handshakes need it: each side stores one variable, then
 *   loads the other's, and acquire/release would let both loads see the
 *   old values (a lost wake-up: a replica never dropped, a link never
 *   resumed). They are
 *     wake_pending = 0, then load kill / stop   (the thread, below)
 *        against kill = 1 / stop = 1, then CAS wake_pending  (main);
 *     main_wake_pending = 0, then load ack_dirty / state / pin.off  (main)
 *        against store those, then CAS main_wake_pending  (the thread);
 *     the backlog's pinned_out and a pin's off (nickv_backlog.c: the link
 *        paused for a pin, and the thread that releases it).
 * - Publications need release/acquire, which seq_cst includes: kill_why
 *   before kill; why, conn = NULL and pin.off before state = GONE (the main
 *   thread frees the replica once it reads GONE: the thread must not touch
 *   it after set_state); ack_off before ack_dirty.
 * - Counters and hints would do with relaxed (bytes_sent, sends,
 *   sent_off, ack_time, nreplicas, the backlog's last_pub): seq_cst costs
 *   a barrier per send on aarch64, which the fan-out's batching amortises.
 * - A pin's gen is plain: written under the backlog's read lock before the
 *   pin's off (a seq_cst store), read under its write lock.
 *
 * Known benign races, left as they are: nk.cfg.verbosity (nkLog in a
 * thread against CONFIG SET loglevel: a level read late), an RDMA
 * channel's state and async_event read for a log line by the library's
 * event thread. Checked by a review for issue 10 (aarch64); what it found
 * was fixed: the library's (notify, data) pair and a lingering channel's
 * hand-over to rdmaCron now go under its lock, a replica freed by the
 * main thread is no longer read after replicaRegister drops it, the
 * pinned-memory cap is a relaxed atomic, nkBacklogDropPinners reads the
 * pins' gen under the write lock.
 */

#include "nickv.h"
#include "nickv_resp.h"
#include "nickv_conn.h"
#include "nickv_backlog.h"
#include "nickv_fanout.h"
#include "monotonic.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "anet.h"
#include "util.h"
#include "zmalloc.h"

#define NK_MAX_THREADS 64
#define NK_WRITE_CHUNK (1024*1024)

/* What the main thread does with the threads' events, and how a thread
 * marks a replica gone: the replica lifecycle's, which main wires in
 * (nkFanoutOnEvents, nkFanoutOnState). */
static void (*on_events)(void);
static void (*set_state)(nkReplica *r, nkReplicaState to);

void nkFanoutOnEvents(void (*fn)(void)) { on_events = fn; }
void nkFanoutOnState(void (*fn)(nkReplica *r, nkReplicaState to)) { set_state = fn; }

typedef struct nkWorker {
    int index;
    pthread_t tid;
    aeEventLoop *el;
    nkLoop *loop;
    int pipe_rd, pipe_wr;
    pthread_mutex_t lock;
    list *incoming;            /* handed over, not yet adopted [lock] */
    list *mine;                /* [thread] */
    _Atomic int wake_pending;
    _Atomic int nreplicas;
    _Atomic int stop;
} nkWorker;

static nkWorker workers[NK_MAX_THREADS];
static int nworkers;
static int main_pipe_rd = -1, main_pipe_wr = -1;
static _Atomic int main_wake_pending;
static list *handovers;            /* nkReplica to give to their threads [main] */

/* ------------------------------------------------ Thread notifications --- */

static void wakeWorker(nkWorker *w) {
    int expected = 0;
    if (atomic_compare_exchange_strong(&w->wake_pending, &expected, 1)) {
        if (write(w->pipe_wr, "x", 1) == -1) { /* pipe full: already awake */ }
    }
}

void nkFanoutWake(void) {
    for (int i = 0; i < nworkers; i++)
        if (workers[i].nreplicas > 0) wakeWorker(&workers[i]);
}

static void wakeMain(void) {
    int expected = 0;
    if (atomic_compare_exchange_strong(&main_wake_pending, &expected, 1)) {
        if (write(main_pipe_wr, "x", 1) == -1) { /* already awake */ }
    }
}

/* ----------------------------------------------------- Fan-out thread --- */

static void replicaGone(nkWorker *w, nkReplica *r, const char *why) {
    listNode *ln = listSearchKey(w->mine, r);
    if (ln) listDelNode(w->mine, ln);
    nkConnClose(r->conn);              /* RDMA: the NIC reads no more of the ring */
    r->conn = NULL;
    r->pin.off = NK_NO_PIN;
    snprintf(r->why, sizeof(r->why), "%s", why);
    sdsfree(r->inbuf);
    r->inbuf = NULL;
    w->nreplicas--;
    set_state(r, NK_REPLICA_GONE);   /* last: the main thread frees it */
    wakeMain();
}

static void replicaWritable(nkConn *conn, void *data);

/* TCP: write(2) from the ring; the kernel copies. Returns bytes written,
 * 0 when the socket is full, -1 (with why) when the replica is gone. */
static ssize_t pushTcp(nkReplica *r, const char *p, size_t len, char *why, size_t whylen) {
    ssize_t n = nkConnWrite(r->conn, p, len);
    if (n >= 0) return n;
    if (errno == EAGAIN) return 0;
    snprintf(why, whylen, "%s", nkConnError(r->conn) ? nkConnError(r->conn) : strerror(errno));
    return -1;
}

/* RDMA: post straight from the ring, both pieces (the ring may wrap) in one
 * doorbell. Pins the first byte before posting. */
static ssize_t pushRdma(nkReplica *r, const nkRing *b, struct iovec *iov, int iovcnt,
                        char *why, size_t whylen) {
    ssize_t n;
    if (r->pin.region != b->buf) {
        snprintf(why, whylen, "the backlog was resized");
        return -1;
    }
    if (atomic_load(&r->pin.off) == NK_NO_PIN) {
        r->pin.gen = b->gen;
        r->pin.off = r->pos;
    }
    n = rdmaChanWriteRegion(nkConnChan(r->conn), iov, iovcnt, NK_RDMA_CHUNK);
    if (n >= 0) return n;
    if (errno == EAGAIN) return 0;
    snprintf(why, whylen, "%s", rdmaChanError(nkConnChan(r->conn)) ?
             rdmaChanError(nkConnChan(r->conn)) : strerror(errno));
    return -1;
}

/* After completions: the NIC is done with everything but the last
 * in-flight bytes. Only ever lowers what the upstream link must keep. */
static void replicaUpdatePin(nkReplica *r) {
    size_t inflight;
    long long pin, old;
    if (!r->rdma || !r->conn) return;
    inflight = rdmaChanRegionInFlight(nkConnChan(r->conn));
    pin = inflight ? r->pos - (long long)inflight : NK_NO_PIN;
    old = atomic_exchange(&r->pin.off, pin);
    /* The master link may be waiting for exactly this. */
    if (pin != old && nkBacklogPinnedOut()) wakeMain();
}

/* Send the replica what the backlog holds beyond its position. Returns -1
 * when the replica is gone. */
static int replicaPush(nkWorker *w, nkReplica *r) {
    char why[160];
    for (;;) {
        ssize_t n;
        long long len, idx, avail;
        const nkRing *b = nkBacklogReadBegin();
        if (r->pos < b->first) {
            long long first = b->first;
            nkBacklogReadEnd();
            snprintf(why, sizeof(why), "fell out of the backlog (needs %lld, backlog starts at %lld)",
                     r->pos, first);
            replicaGone(w, r, why);
            return -1;
        }
        if (r->pos > b->last) {
            nkBacklogReadEnd();
            break;
        }
        idx = nkRingIndex(r->pos, b->size);
        avail = b->last - r->pos + 1;
        len = avail < b->size - idx ? avail : b->size - idx;
        if (r->rdma) {
            struct iovec iov[2];
            int iovcnt = 1;
            iov[0].iov_base = b->buf + idx;
            iov[0].iov_len = (size_t)len;
            if (avail > len) {              /* the rest, from the ring's start */
                iov[1].iov_base = b->buf;
                iov[1].iov_len = (size_t)(avail - len);
                iovcnt = 2;
            }
            len = avail;
            n = pushRdma(r, b, iov, iovcnt, why, sizeof(why));
        } else {
            if (len > NK_WRITE_CHUNK) len = NK_WRITE_CHUNK;
            n = pushTcp(r, b->buf + idx, (size_t)len, why, sizeof(why));
        }
        nkBacklogReadEnd();
        if (n < 0) {
            replicaGone(w, r, why);
            return -1;
        }
        if (n == 0) break;
        r->pos += n;
        r->bytes_sent += n;
        r->sends++;
        r->sent_off = r->pos - 1;
        if (n < len) break;                 /* full: wait for room */
    }
    int behind = r->pos <= nkBacklogLastPub();
    if (behind && !r->wait_writable) {
        nkConnSetWriteHandler(r->conn, replicaWritable);
        r->wait_writable = 1;
    } else if (!behind && r->wait_writable) {
        nkConnSetWriteHandler(r->conn, NULL);
        r->wait_writable = 0;
    }
    return 0;
}

static void replicaWritable(nkConn *conn, void *data) {
    nkReplica *r = data;
    (void)conn;
    replicaPush(&workers[r->thread], r);
}

/* REPLCONF ACK <offset> [FACK <aof-offset>], parsed as the master parses it
 * (replconfCommand: getLongLongFromObject, i.e. string2ll on the exact
 * argument, and an odd number of arguments). Returns 1 and sets *off for a
 * well-formed ACK, 0 for anything else, which the caller ignores as the
 * master would. */
static int replicaParseAck(int argc, sds *argv, long long *off) {
    if (argc < 3 || (argc % 2) == 0) return 0;
    if (strcasecmp(argv[0], "replconf") || strcasecmp(argv[1], "ack")) return 0;
    return string2ll(argv[2], sdslen(argv[2]), off) != 0;
}

/* Record an ACK for the main thread to relay. The replica cannot have
 * received more than we wrote to it: a larger offset, a lie or a bug, is
 * lowered to what we sent, so that WAIT never counts bytes the replica
 * has not got. Relayed even when the offset did not move: its time is what
 * min-replicas-max-lag looks at on the master. [thread] */
static void replicaAck(nkReplica *r, long long off) {
    long long sent = atomic_load(&r->sent_off);
    if (off > sent) off = sent;
    if (off > r->ack_off) r->ack_off = off;
    r->ack_time = nkUnixTime();
    r->ack_dirty = 1;
    wakeMain();
}

/* Nothing but REPLCONF ACKs is expected from a replica once it streams;
 * anything else, malformed ACKs included, is ignored (a protocol error in
 * the framing itself closes the replica's link). */
static void replicaReadable(nkConn *conn, void *data) {
    nkReplica *r = data;
    nkWorker *w = &workers[r->thread];
    char buf[4096];
    ssize_t n = nkConnRead(conn, buf, sizeof(buf));
    if (n == 0 || (n < 0 && errno != EAGAIN)) {
        replicaGone(w, r, n == 0 ? "connection closed by the replica" :
                    (nkConnError(conn) ? nkConnError(conn) : strerror(errno)));
        return;
    }
    if (n < 0) return;
    r->inbuf = sdscatlen(r->inbuf, buf, n);
    for (;;) {
        int argc;
        sds *argv;
        long long off;
        const char *err = NULL;
        int rv = nkParseCommand(&r->inbuf, &argc, &argv, &err);
        if (rv < 0) {
            char why[96];
            snprintf(why, sizeof(why), "protocol error from the replica: %s", err);
            replicaGone(w, r, why);
            return;
        }
        if (rv == 0) break;
        if (replicaParseAck(argc, argv, &off)) {
            replicaAck(r, off);
        } else if (argc >= 2 && !strcasecmp(argv[0], "replconf") && !strcasecmp(argv[1], "ack")) {
            nkLog(LL_VERBOSE, "Replica %s:%d: ignoring a malformed REPLCONF ACK", r->ip, r->port);
        }
        nkFreeArgv(argc, argv);
    }
}

/* An RDMA replica's channel registers the ring it was given (r->pin.region: the
 * backlog when it started; a resize since then has marked it to be killed,
 * and keeps that ring mapped while r refers to it) before anything is sent
 * from it. Here, in the replica's own thread: the registration pins every
 * page of the ring, tens of milliseconds for 128 MB. If it cannot (the
 * pinned-memory limit), the replica is dropped: it goes back to the master
 * or to Nic-KV on its own. [thread] */
/* 0 when registered; -1 when the replica is gone: replicaGone handed it
 * to the main thread, which may free it at once, so the caller must not
 * touch r again. */
static int replicaRegister(nkWorker *w, nkReplica *r) {
    char err[256];
    long long start, took;
    if (!r->rdma || r->registered) return 0;
    start = (long long)getMonotonicUs();
    if (rdmaChanAttachRegion(nkConnChan(r->conn), r->pin.region, (size_t)r->pin.region_size,
                             err, sizeof(err)) == -1) {
        char why[320];
        snprintf(why, sizeof(why), "cannot register the backlog for zero-copy sends: %s", err);
        nkLog(LL_WARNING, "Replica %s:%d: %s", r->ip, r->port, why);
        replicaGone(w, r, why);
        return -1;
    }
    took = (long long)getMonotonicUs() - start;
    r->registered = 1;
    nkLog(LL_VERBOSE, "Replica %s:%d: registered the %lld KiB backlog in %lld us (fan-out thread %d)",
          r->ip, r->port, r->pin.region_size / 1024, took, w->index);
    return 0;
}

static void workerPipeReadable(aeEventLoop *el, int fd, void *data, int mask) {
    (void)el; (void)mask;
    nkWorker *w = data;
    char buf[256];
    listIter li;
    listNode *ln;
    list *adopted = NULL;
    while (read(fd, buf, sizeof(buf)) > 0) {}
    w->wake_pending = 0;
    /* Adopt new replicas: the list taken whole under the lock (rare: a
     * wake-up for the stream finds it empty and allocates nothing), the
     * replicas attached outside it. */
    pthread_mutex_lock(&w->lock);
    if (listLength(w->incoming)) {
        adopted = w->incoming;
        w->incoming = listCreate();
    }
    pthread_mutex_unlock(&w->lock);
    while (adopted && listLength(adopted)) {
        nkReplica *r = listNodeValue(listFirst(adopted));
        listDelNode(adopted, listFirst(adopted));
        listAddNodeTail(w->mine, r);
        if (nkConnAttach(r->conn, w->loop) == -1) {
            replicaGone(w, r, nkConnError(r->conn));
            continue;
        }
        nkConnSetData(r->conn, r);
        nkConnSetReadHandler(r->conn, replicaReadable);
    }
    if (adopted) listRelease(adopted);
    if (w->stop) {
        aeStop(w->el);
        return;
    }
    listRewind(w->mine, &li);
    while ((ln = listNext(&li))) {
        nkReplica *r = listNodeValue(ln);
        if (r->state != NK_REPLICA_ONLINE) continue;
        if (r->kill) {
            replicaGone(w, r, r->kill_why);
            continue;
        }
        /* Before anything is sent. Gone, r may be freed already (the main
         * thread frees it once replicaGone published it): not read again. */
        if (r->rdma && !r->registered && replicaRegister(w, r) == -1) continue;
        long long first, last;
        nkBacklogRange(&first, &last);
        if (!r->wait_writable) {
            replicaPush(w, r);
        } else if (r->pos < first) {
            /* It does not even read (stopped, or its host is gone): the
             * backlog moved past what it needs while we waited for it. */
            char why[96];
            snprintf(why, sizeof(why), "fell out of the backlog while not reading (needs %lld)", r->pos);
            replicaGone(w, r, why);
        }
    }
}

/* The fan-out thread's own worker (ae's before-sleep hook has no data
 * argument; scanning workers[] instead raced with nkFanoutStart() still
 * filling in the later ones). */
static __thread nkWorker *self;

static void workerBeforeSleep(aeEventLoop *el) {
    nkWorker *w = self;
    listIter li;
    listNode *ln;
    (void)el;
    if (!w) return;
    nkLoopBeforeSleep(w->loop);
    listRewind(w->mine, &li);
    while ((ln = listNext(&li))) replicaUpdatePin(listNodeValue(ln));
}

static int workerCron(aeEventLoop *el, long long id, void *data) {
    nkWorker *w = data;
    (void)el; (void)id;
    nkLoopCron(w->loop);
    return 1000;
}

static void workerWake(void *data) {
    wakeWorker(data);
}

static void *workerMain(void *arg) {
    nkWorker *w = arg;
    self = w;
    aeMain(w->el);
    return NULL;
}

static void mainPipeReadable(aeEventLoop *el, int fd, void *data, int mask) {
    (void)el; (void)fd; (void)data; (void)mask;
    if (on_events) on_events();
    else nkFanoutEventsTaken();
}

/* The main thread is about to look at every replica's events: the wakeups
 * until now are consumed. [main] */
void nkFanoutEventsTaken(void) {
    char buf[256];
    if (main_pipe_rd != -1) while (read(main_pipe_rd, buf, sizeof(buf)) > 0) {}
    main_wake_pending = 0;
}

int nkFanoutStart(aeEventLoop *main_el, int thread_num) {
    int fds[2];
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    nworkers = thread_num < cores ? thread_num : (int)cores;
    if (nworkers > NK_MAX_THREADS) nworkers = NK_MAX_THREADS;
    if (nworkers < 1) nworkers = 1;
    handovers = listCreate();
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) == -1) return -1;
    main_pipe_rd = fds[0];
    main_pipe_wr = fds[1];
    aeCreateFileEvent(main_el, main_pipe_rd, AE_READABLE, mainPipeReadable, NULL);
    for (int i = 0; i < nworkers; i++) {
        nkWorker *w = &workers[i];
        w->index = i;
        w->el = aeCreateEventLoop(65536);
        if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) == -1) return -1;
        w->pipe_rd = fds[0];
        w->pipe_wr = fds[1];
        pthread_mutex_init(&w->lock, NULL);
        w->incoming = listCreate();
        w->mine = listCreate();
        w->loop = nkLoopCreate(w->el);
        w->loop->wake = workerWake;
        w->loop->wake_data = w;
        aeCreateFileEvent(w->el, w->pipe_rd, AE_READABLE, workerPipeReadable, w);
        aeSetBeforeSleepProc(w->el, workerBeforeSleep);
        aeCreateTimeEvent(w->el, 1000, workerCron, w, NULL);
        if (pthread_create(&w->tid, NULL, workerMain, w) != 0) {
            nkLog(LL_WARNING, "Cannot start fan-out thread %d", i);
            return -1;
        }
    }
    if (nworkers < thread_num)
        nkLog(LL_NOTICE, "thread-num %d: using %d fan-out threads (this machine has %ld cores)",
              thread_num, nworkers, cores);
    return 0;
}

void nkFanoutStop(void) {
    for (int i = 0; i < nworkers; i++) {
        workers[i].stop = 1;
        workers[i].wake_pending = 0;
        wakeWorker(&workers[i]);
        pthread_join(workers[i].tid, NULL);
    }
    nworkers = 0;
}

int nkFanoutThreads(void) {
    int busy = 0;
    for (int i = 0; i < nworkers; i++) if (workers[i].nreplicas > 0) busy++;
    return busy;
}

/* ------------------------------------------------------ Main thread side --- */

/* A replica goes to the thread with the fewest; an RDMA replica's channel
 * registers the backlog ring in that thread (replicaRegister), not here:
 * pinning a 128 MB ring takes tens of milliseconds, which the main loop
 * (the master link, every admin client) must not wait for. [main] */
void nkFanoutAdd(nkReplica *r) {
    nkWorker *w = &workers[0];
    for (int i = 1; i < nworkers; i++)
        if (workers[i].nreplicas < w->nreplicas) w = &workers[i];
    r->thread = w->index;
    w->nreplicas++;
    listAddNodeTail(handovers, r);
}

void nkFanoutFlushHandovers(void) {
    while (handovers && listLength(handovers)) {
        nkReplica *r = listNodeValue(listFirst(handovers));
        nkWorker *w = &workers[r->thread];
        listDelNode(handovers, listFirst(handovers));
        pthread_mutex_lock(&w->lock);
        listAddNodeTail(w->incoming, r);
        pthread_mutex_unlock(&w->lock);
        wakeWorker(w);
    }
}
