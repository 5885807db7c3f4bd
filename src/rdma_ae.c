/* rdma_ae.c -- drive RDMA channels from an ae event loop.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * See rdma_ae.h for what a registration promises. Inside:
 *
 * - Every registration is on the loop's "all" list, for the cron and for a
 *   rescan after a notify. The ones that may progress without an event are
 *   also on the "pending" list, which the before-sleep pass walks: a
 *   server with ten thousand idle connections does not look at each of
 *   them before every sleep.
 * - A channel goes on the pending list when its owner asks for something
 *   the channel may already offer (rdmaAeSetMask), when serving it left it
 *   still able to progress, when its connect ended, when the owner says so
 *   (rdmaAeMarkPending), and when a rescan finds it able to progress.
 * - A removed registration leaves both lists at once and waits on the
 *   garbage list, flagged, until the end of the next pass that runs with no
 *   proc on the stack: the proc that removed it, and the code that called
 *   that proc, may still look at it (a proc may run a nested loop, as the
 *   server's processEventsWhileBlocked does).
 *
 * Like rdma_chan.c this file uses libc's allocator and no list library, so
 * that every program that links the channel library can link this too.
 */

#include "rdma_ae.h"
#include "rdma_chan.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "ae.h"

struct rdmaAeChan {
    rdmaAe *ra;
    rdmaChan *ch;
    int fd;                      /* rdmaChanFd(ch), watched in ra->el */
    rdmaAeProc *rproc, *wproc;
    void *data;
    int mask;                    /* RDMA_AE_* wanted */
    int connecting;              /* the connect has not ended yet */
    int removed;                 /* rdmaAeDel() was called: never serve */
    int pending;                 /* on ra's pending list */
    rdmaAeChan *prev, *next;     /* ra's all list */
    rdmaAeChan *pprev, *pnext;   /* ra's pending list */
    rdmaAeChan *gnext;           /* ra's garbage list */
};

struct rdmaAe {
    aeEventLoop *el;
    rdmaAeChan *all;
    rdmaAeChan *phead, *ptail;   /* pending, served in order */
    int npending;
    int count;
    rdmaAeChan *garbage;
    int depth;                   /* procs running (a proc may run a nested
                                  * loop: processEventsWhileBlocked) */
    atomic_int rescan;           /* a notify came: look at every channel */
    void (*wake)(void *data);
    void *wake_data;
};

/* ------------------------------------------------------------- Lists --- */

static void markPending(rdmaAeChan *e) {
    rdmaAe *ra = e->ra;
    if (e->pending || e->removed) return;
    e->pending = 1;
    e->pnext = NULL;
    e->pprev = ra->ptail;
    if (ra->ptail) ra->ptail->pnext = e;
    else ra->phead = e;
    ra->ptail = e;
    ra->npending++;
}

static void unmarkPending(rdmaAeChan *e) {
    rdmaAe *ra = e->ra;
    if (!e->pending) return;
    if (e->pprev) e->pprev->pnext = e->pnext;
    else ra->phead = e->pnext;
    if (e->pnext) e->pnext->pprev = e->pprev;
    else ra->ptail = e->pprev;
    e->pprev = e->pnext = NULL;
    e->pending = 0;
    ra->npending--;
}

static void collectGarbage(rdmaAe *ra) {
    if (ra->depth) return;
    while (ra->garbage) {
        rdmaAeChan *e = ra->garbage;
        ra->garbage = e->gnext;
        free(e);
    }
}

/* ----------------------------------------------------------- Serving --- */

/* Can a proc of e make progress without an event on its descriptor? */
static int needsService(rdmaAeChan *e) {
    if (e->removed || e->connecting) return 0;
    if ((e->mask & RDMA_AE_READABLE) && e->rproc && rdmaChanReadPending(e->ch)) return 1;
    if ((e->mask & RDMA_AE_WRITABLE) && e->wproc && rdmaChanWritable(e->ch)) return 1;
    return 0;
}

/* Call e's read proc if it can progress. Returns 0 when e was removed. */
static int serveRead(rdmaAeChan *e) {
    if ((e->mask & RDMA_AE_READABLE) && e->rproc && rdmaChanReadPending(e->ch))
        e->rproc(e, e->data);
    return !e->removed;
}

static int serveWrite(rdmaAeChan *e) {
    if ((e->mask & RDMA_AE_WRITABLE) && e->wproc && rdmaChanWritable(e->ch))
        e->wproc(e, e->data);
    return !e->removed;
}

/* Run the procs that can progress now; what can still progress afterwards
 * goes (back) on the pending list. */
static void serve(rdmaAeChan *e) {
    if (e->removed) return;
    if (e->connecting) {
        if (rdmaChanGetState(e->ch) == RDMA_CHAN_CONNECTING) return;
        e->connecting = 0;
        if ((e->mask & RDMA_AE_WRITABLE) && e->wproc) {
            e->wproc(e, e->data);
            if (e->removed) return;
        }
        markPending(e);         /* input may have come with the connect */
        return;
    }
    if (e->mask & RDMA_AE_BARRIER) {
        if (!serveWrite(e) || !serveRead(e)) return;
    } else {
        if (!serveRead(e) || !serveWrite(e)) return;
    }
    if (needsService(e)) markPending(e);
}

static void fdEvent(aeEventLoop *el, int fd, void *data, int mask) {
    rdmaAeChan *e = data;
    (void)el; (void)fd; (void)mask;
    if (e->removed) return;
    rdmaChanHandleEvents(e->ch);
    e->ra->depth++;
    serve(e);
    e->ra->depth--;
}

/* From the RDMA library, perhaps in another thread: only flag and wake.
 * The data is the loop, which outlives its registrations, so a notify that
 * races with rdmaAeDel() touches nothing freed; the library sets and reads
 * the (callback, data) pair under its lock, so it never pairs this
 * callback with rdmaAeDel's NULL data. */
static void chanNotify(rdmaChan *ch, void *data) {
    rdmaAe *ra = data;
    (void)ch;
    atomic_store(&ra->rescan, 1);
    if (ra->wake) ra->wake(ra->wake_data);
}

static void rescanIfNotified(rdmaAe *ra) {
    if (!atomic_exchange(&ra->rescan, 0)) return;
    for (rdmaAeChan *e = ra->all; e; e = e->next)
        if (needsService(e)) markPending(e);
}

int rdmaAeServePending(rdmaAe *ra) {
    int served = 0, budget;
    rescanIfNotified(ra);
    /* Each channel pending when the pass starts is served at most once (one
     * served again goes to the tail). A proc may remove any channel, which
     * takes it off the list: so the head is read again every time. */
    budget = ra->npending;
    ra->depth++;
    while (budget-- > 0 && ra->phead) {
        rdmaAeChan *e = ra->phead;
        unmarkPending(e);
        if (e->connecting) continue;
        served++;
        serve(e);
    }
    ra->depth--;
    collectGarbage(ra);
    return served;
}

int rdmaAeHasPending(rdmaAe *ra) {
    for (rdmaAeChan *e = ra->phead; e; e = e->pnext)
        if (needsService(e)) return 1;
    return 0;
}

void rdmaAeBeforeSleep(rdmaAe *ra) {
    rdmaAeServePending(ra);
    aeSetDontWait(ra->el, rdmaAeHasPending(ra));
}

void rdmaAeCron(rdmaAe *ra) {
    for (rdmaAeChan *e = ra->all; e; e = e->next) {
        if (e->connecting) continue;
        rdmaChanCron(e->ch);
        if (rdmaChanGetState(e->ch) == RDMA_CHAN_ERROR) markPending(e);
    }
}

/* ----------------------------------------------------- Registrations --- */

rdmaAe *rdmaAeCreate(aeEventLoop *el) {
    rdmaAe *ra = calloc(1, sizeof(*ra));
    if (!ra) return NULL;
    ra->el = el;
    atomic_init(&ra->rescan, 0);
    return ra;
}

void rdmaAeFree(rdmaAe *ra) {
    if (!ra) return;
    rdmaInvariant(ra->all == NULL);
    collectGarbage(ra);
    free(ra);
}

void rdmaAeSetWake(rdmaAe *ra, void (*wake)(void *data), void *data) {
    ra->wake = wake;
    ra->wake_data = data;
}

rdmaAeChan *rdmaAeAdd(rdmaAe *ra, rdmaChan *ch, rdmaAeProc *rproc, rdmaAeProc *wproc,
                      void *data) {
    rdmaAeChan *e;
    int fd = rdmaChanFd(ch);
    if (fd == -1) { errno = EBADF; return NULL; }
    e = calloc(1, sizeof(*e));
    if (!e) { errno = ENOMEM; return NULL; }
    e->ra = ra;
    e->ch = ch;
    e->fd = fd;
    e->rproc = rproc;
    e->wproc = wproc;
    e->data = data;
    e->connecting = rdmaChanGetState(ch) == RDMA_CHAN_CONNECTING;
    if (aeCreateFileEvent(ra->el, fd, AE_READABLE, fdEvent, e) == AE_ERR) {
        free(e);
        errno = ERANGE;
        return NULL;
    }
    e->next = ra->all;
    if (ra->all) ra->all->prev = e;
    ra->all = e;
    ra->count++;
    rdmaChanSetNotify(ch, chanNotify, ra);
    /* Input that came with the handshake announces itself no more. */
    markPending(e);
    return e;
}

void rdmaAeSetMask(rdmaAeChan *e, int mask) {
    int added = mask & ~e->mask & (RDMA_AE_READABLE | RDMA_AE_WRITABLE);
    e->mask = mask;
    if (added) markPending(e);
}

int rdmaAeGetMask(rdmaAeChan *e) { return e->mask; }
void rdmaAeMarkPending(rdmaAeChan *e) { markPending(e); }
int rdmaAeCount(rdmaAe *ra) { return ra->count; }

void rdmaAeDel(rdmaAeChan *e) {
    rdmaAe *ra;
    if (!e || e->removed) return;
    ra = e->ra;
    rdmaChanSetNotify(e->ch, NULL, NULL);
    aeDeleteFileEvent(ra->el, e->fd, AE_READABLE);
    unmarkPending(e);
    if (e->prev) e->prev->next = e->next;
    else ra->all = e->next;
    if (e->next) e->next->prev = e->prev;
    ra->count--;
    e->removed = 1;
    e->ch = NULL;
    e->gnext = ra->garbage;
    ra->garbage = e;
}
