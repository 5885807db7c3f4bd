/* nickv_fanout.c -- Nic-KV's backlog and fan-out threads.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * The backlog is one ring holding the master's stream, by the master's
 * offsets. The upstream link (main thread) appends to it under the write
 * lock. Every replica belongs to one fan-out thread, which writes to the
 * replica's socket straight from the ring, under the read lock: the stream
 * is stored once and never copied per replica in user space.
 *
 * thread-num fan-out threads are started (never more than the machine's
 * cores); a new replica goes to the thread with the fewest, so no more
 * threads carry replicas than there are replicas. Each thread has its own
 * event loop: a pipe wakes it when the stream grew or a replica was handed
 * to it; it reads its replicas' REPLCONF ACKs. It tells the main thread
 * about ACKs and about replicas that are gone through a pipe of the main
 * thread; the main thread relays both to the master.
 *
 * A replica is dropped (and falls back to the master, or resyncs) when it
 * is so far behind that the backlog no longer holds what it needs, when it
 * closes or errs, or when the master's history changes.
 */

#include "nickv.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "anet.h"
#include "zmalloc.h"

#define NK_MAX_THREADS 64
#define NK_WRITE_CHUNK (1024*1024)

typedef struct nkWorker {
    int index;
    pthread_t tid;
    aeEventLoop *el;
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

/* ------------------------------------------------------------ Backlog --- */

static long long ringIndex(long long offset, long long size) { return offset % size; }

int nkBacklogInit(long long size) {
    nkBacklog *b = &nk.backlog;
    pthread_rwlock_init(&b->lock, NULL);
    b->buf = zmalloc(size);
    b->size = size;
    b->first = 1;
    b->last = 0;
    b->last_pub = 0;
    return 0;
}

/* The next byte the master sends has this offset; nothing is held. */
void nkBacklogReset(long long next_offset) {
    nkBacklog *b = &nk.backlog;
    pthread_rwlock_wrlock(&b->lock);
    b->first = next_offset;
    b->last = next_offset - 1;
    b->last_pub = b->last;
    pthread_rwlock_unlock(&b->lock);
}

void nkBacklogAppend(const char *data, size_t len) {
    nkBacklog *b = &nk.backlog;
    pthread_rwlock_wrlock(&b->lock);
    while (len) {
        long long idx = ringIndex(b->last + 1, b->size);
        size_t n = (size_t)(b->size - idx);
        if (n > len) n = len;
        memcpy(b->buf + idx, data, n);
        b->last += n;
        data += n;
        len -= n;
    }
    if (b->last - b->first + 1 > b->size) b->first = b->last - b->size + 1;
    b->last_pub = b->last;
    pthread_rwlock_unlock(&b->lock);
}

int nkBacklogResize(long long size) {
    nkBacklog *b = &nk.backlog;
    char *nb = zmalloc(size);
    pthread_rwlock_wrlock(&b->lock);
    long long keep = b->last - b->first + 1;
    if (keep > size) keep = size;
    for (long long off = b->last - keep + 1; off <= b->last; off++)
        nb[ringIndex(off, size)] = b->buf[ringIndex(off, b->size)];
    zfree(b->buf);
    b->buf = nb;
    b->size = size;
    b->first = b->last - keep + 1;
    pthread_rwlock_unlock(&b->lock);
    nkLog(LL_NOTICE, "Backlog resized to %lld bytes (%lld kept)", size, keep);
    return 0;
}

void nkBacklogRange(long long *first, long long *last) {
    pthread_rwlock_rdlock(&nk.backlog.lock);
    *first = nk.backlog.first;
    *last = nk.backlog.last;
    pthread_rwlock_unlock(&nk.backlog.lock);
}

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
    aeDeleteFileEvent(w->el, r->fd, AE_READABLE | AE_WRITABLE);
    close(r->fd);
    r->fd = -1;
    snprintf(r->why, sizeof(r->why), "%s", why);
    sdsfree(r->inbuf);
    r->inbuf = NULL;
    w->nreplicas--;
    r->state = NK_REPLICA_GONE;      /* last: the main thread frees it */
    wakeMain();
}

static void replicaWritable(aeEventLoop *el, int fd, void *data, int mask);

/* Send the replica what the backlog holds beyond its position. Returns -1
 * when the replica is gone. */
static int replicaPush(nkWorker *w, nkReplica *r) {
    nkBacklog *b = &nk.backlog;
    for (;;) {
        ssize_t n;
        pthread_rwlock_rdlock(&b->lock);
        if (r->pos < b->first) {
            long long first = b->first;
            pthread_rwlock_unlock(&b->lock);
            char why[96];
            snprintf(why, sizeof(why), "fell out of the backlog (needs %lld, backlog starts at %lld)",
                     r->pos, first);
            replicaGone(w, r, why);
            return -1;
        }
        if (r->pos > b->last) {
            pthread_rwlock_unlock(&b->lock);
            break;
        }
        long long idx = ringIndex(r->pos, b->size);
        long long len = b->last - r->pos + 1;
        if (len > b->size - idx) len = b->size - idx;
        if (len > NK_WRITE_CHUNK) len = NK_WRITE_CHUNK;
        n = write(r->fd, b->buf + idx, (size_t)len);
        pthread_rwlock_unlock(&b->lock);
        if (n < 0) {
            if (errno == EAGAIN) break;
            replicaGone(w, r, strerror(errno));
            return -1;
        }
        r->pos += n;
        r->bytes_sent += n;
        r->sends++;
        r->sent_off = r->pos - 1;
        if (n < len) break;                 /* socket full */
    }
    int behind = r->pos <= atomic_load(&b->last_pub);
    if (behind && !r->wait_writable) {
        aeCreateFileEvent(w->el, r->fd, AE_WRITABLE, replicaWritable, r);
        r->wait_writable = 1;
    } else if (!behind && r->wait_writable) {
        aeDeleteFileEvent(w->el, r->fd, AE_WRITABLE);
        r->wait_writable = 0;
    }
    return 0;
}

static void replicaWritable(aeEventLoop *el, int fd, void *data, int mask) {
    (void)el; (void)fd; (void)mask;
    nkReplica *r = data;
    replicaPush(&workers[r->thread], r);
}

/* REPLCONF ACK <offset> [FACK <offset>] from the replica; nothing else is
 * expected from a replica once it streams. */
static void replicaReadable(aeEventLoop *el, int fd, void *data, int mask) {
    (void)el; (void)mask;
    nkReplica *r = data;
    nkWorker *w = &workers[r->thread];
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n == 0 || (n < 0 && errno != EAGAIN)) {
        replicaGone(w, r, n == 0 ? "connection closed by the replica" : strerror(errno));
        return;
    }
    if (n < 0) return;
    r->inbuf = sdscatlen(r->inbuf, buf, n);
    for (;;) {
        int argc;
        sds *argv;
        const char *err = NULL;
        int rv = nkParseCommand(&r->inbuf, &argc, &argv, &err);
        if (rv < 0) {
            char why[96];
            snprintf(why, sizeof(why), "protocol error from the replica: %s", err);
            replicaGone(w, r, why);
            return;
        }
        if (rv == 0) break;
        if (argc >= 3 && !strcasecmp(argv[0], "replconf") && !strcasecmp(argv[1], "ack")) {
            /* Relayed even when the offset did not move: its time is what
             * min-replicas-max-lag looks at on the master. */
            long long off = strtoll(argv[2], NULL, 10);
            if (off > r->ack_off) r->ack_off = off;
            r->ack_time = nkUnixTime();
            r->ack_dirty = 1;
            wakeMain();
        }
        nkFreeArgv(argc, argv);
    }
}

static void workerPipeReadable(aeEventLoop *el, int fd, void *data, int mask) {
    (void)el; (void)mask;
    nkWorker *w = data;
    char buf[256];
    listIter li;
    listNode *ln;
    while (read(fd, buf, sizeof(buf)) > 0) {}
    w->wake_pending = 0;
    /* Adopt new replicas. */
    pthread_mutex_lock(&w->lock);
    while (listLength(w->incoming)) {
        nkReplica *r = listNodeValue(listFirst(w->incoming));
        listDelNode(w->incoming, listFirst(w->incoming));
        listAddNodeTail(w->mine, r);
        aeCreateFileEvent(w->el, r->fd, AE_READABLE, replicaReadable, r);
    }
    pthread_mutex_unlock(&w->lock);
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
        if (!r->wait_writable) {
            replicaPush(w, r);
        } else if (r->pos < nk.backlog.first) {
            /* It does not even read (stopped, or its host is gone): the
             * backlog moved past what it needs while we waited for it. */
            char why[96];
            snprintf(why, sizeof(why), "fell out of the backlog while not reading (needs %lld)", r->pos);
            replicaGone(w, r, why);
        }
    }
}

static void *workerMain(void *arg) {
    nkWorker *w = arg;
    aeMain(w->el);
    return NULL;
}

static void mainPipeReadable(aeEventLoop *el, int fd, void *data, int mask) {
    (void)el; (void)fd; (void)data; (void)mask;
    nkFanoutMainEvents();
}

int nkFanoutStart(int thread_num) {
    int fds[2];
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    nworkers = thread_num < cores ? thread_num : (int)cores;
    if (nworkers > NK_MAX_THREADS) nworkers = NK_MAX_THREADS;
    if (nworkers < 1) nworkers = 1;
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) == -1) return -1;
    main_pipe_rd = fds[0];
    main_pipe_wr = fds[1];
    aeCreateFileEvent(nk.el, main_pipe_rd, AE_READABLE, mainPipeReadable, NULL);
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
        aeCreateFileEvent(w->el, w->pipe_rd, AE_READABLE, workerPipeReadable, w);
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

/* A replica starts streaming from pos, in the least loaded thread. */
nkReplica *nkReplicaStart(int fd, const char *ip, int port, long long pos) {
    nkReplica *r = zcalloc(sizeof(*r));
    nkWorker *w = &workers[0];
    for (int i = 1; i < nworkers; i++)
        if (workers[i].nreplicas < w->nreplicas) w = &workers[i];
    r->id = ++nk.next_replica_id;
    snprintf(r->ip, sizeof(r->ip), "%s", ip);
    r->port = port;
    r->fd = fd;
    r->pos = pos;
    r->sent_off = pos - 1;
    r->ack_off = pos - 1;
    r->ack_time = nkUnixTime();
    r->inbuf = sdsempty();
    r->ctime = time(NULL);
    r->thread = w->index;
    r->state = NK_REPLICA_ONLINE;
    listAddNodeTail(nk.replicas, r);
    w->nreplicas++;
    nkLinkSend("REPLCONF nickv \"add %lld %s %d\"", r->id, r->ip, r->port);
    nkLog(LL_NOTICE, "Replica %s:%d streams from offset %lld (fan-out thread %d)", ip, port, pos,
          w->index);
    pthread_mutex_lock(&w->lock);
    listAddNodeTail(w->incoming, r);
    pthread_mutex_unlock(&w->lock);
    wakeWorker(w);
    return r;
}

void nkReplicasDropAll(const char *why) {
    listIter li;
    listNode *ln;
    listRewind(nk.replicas, &li);
    while ((ln = listNext(&li))) {
        nkReplica *r = listNodeValue(ln);
        if (r->kill) continue;
        snprintf(r->kill_why, sizeof(r->kill_why), "%s", why);
        r->kill = 1;
    }
    for (int i = 0; i < nworkers; i++) wakeWorker(&workers[i]);
}

/* Relay ACKs, tell the master about replicas that are gone, free them.
 * Runs on the main pipe's wakeups and before the main loop sleeps. */
void nkFanoutMainEvents(void) {
    listIter li;
    listNode *ln;
    char buf[256];
    if (main_pipe_rd != -1) while (read(main_pipe_rd, buf, sizeof(buf)) > 0) {}
    main_wake_pending = 0;
    listRewind(nk.replicas, &li);
    while ((ln = listNext(&li))) {
        nkReplica *r = listNodeValue(ln);
        if (r->ack_dirty) {
            r->ack_dirty = 0;
            nkLinkSend("REPLCONF nickv \"ack %lld %lld\"", r->id, (long long)r->ack_off);
        }
        if (r->state == NK_REPLICA_GONE) {
            nkLog(LL_NOTICE, "Replica %s:%d left: %s", r->ip, r->port, r->why);
            nkLinkSend("REPLCONF nickv \"del %lld\"", r->id);
            listDelNode(nk.replicas, ln);
            zfree(r);
        }
    }
}

/* After (re)joining the master: tell it about the replicas we serve. */
void nkReplicasAnnounce(void) {
    listIter li;
    listNode *ln;
    listRewind(nk.replicas, &li);
    while ((ln = listNext(&li))) {
        nkReplica *r = listNodeValue(ln);
        if (r->state != NK_REPLICA_ONLINE || r->kill) continue;
        nkLinkSend("REPLCONF nickv \"add %lld %s %d\"", r->id, r->ip, r->port);
        nkLinkSend("REPLCONF nickv \"ack %lld %lld\"", r->id, (long long)r->ack_off);
    }
}
