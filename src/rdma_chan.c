/* rdma_chan.c -- RDMA channel: a byte stream over an RC queue pair.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * ------------------------------------------------------------------------
 * The protocol ("Valkey over RDMA", version 1)
 * ------------------------------------------------------------------------
 *
 * A reliable-connected queue pair set up with librdmacm (RDMA_PS_TCP). Each
 * side keeps RDMA_MAX_WRS receive work requests posted, each on a 32-byte
 * slot of its control buffer, and re-posts a slot as soon as it handled the
 * completion that used it.
 *
 * Control messages are exactly 32 bytes, big-endian, sent with IBV_WR_SEND:
 *
 *   offset  0: u16 opcode
 *   opcode 0 GetServerFeature    2: u16 select, 4: 20 reserved, 24: u64 features
 *   opcode 1 SetClientFeature    same layout
 *   opcode 2 Keepalive           2: 30 reserved
 *   opcode 3 RegisterXferMemory  2: 14 reserved, 16: u64 addr, 24: u32 length,
 *                                28: u32 rkey
 *
 * Data. Once connected, each side sends RegisterXferMemory naming its
 * receive buffer. To send n bytes, the writer copies them into its own
 * registered staging buffer and posts RDMA WRITE_WITH_IMM into the peer's
 * buffer at the current offset, with imm_data = htonl(n). The reader gets a
 * RECV_RDMA_WITH_IMM completion and advances its write offset by n. There
 * is no wrap-around: the writer only uses what is left of the peer's
 * buffer; when the reader has consumed the whole buffer it resets its
 * offsets and sends a new RegisterXferMemory (perhaps a different buffer),
 * and only then may the writer start again at offset 0.
 *
 * Our staging buffer is a ring of its own size, not a mirror of the peer's
 * buffer: a peer announcing 16 MiB does not make us pin 16 MiB. A region of
 * the ring is reused once the write that carried it completed; sends are
 * signaled every RDMA_SIGNAL_EVERY, and whenever the ring is more than half
 * in flight, so completions keep both the send queue and the ring moving.
 *
 * Features. A server answers GetServerFeature with features = 0 and refuses
 * a non-zero SetClientFeature: the hook for extensions, none today.
 *
 * Keepalive. RDMA has no transport keepalive and an idle dead peer is never
 * noticed, so each side sends Keepalive when it sent nothing for
 * RDMA_KEEPALIVE_INTERVAL seconds. To a dead peer the SEND fails after the
 * transport's retries, and the failed completion closes the channel.
 *
 * ------------------------------------------------------------------------
 * A channel's life
 * ------------------------------------------------------------------------
 *
 *   client:  rdmaChanConnect()
 *              CONNECTING --ADDR_RESOLVED--> resolve route
 *                         --ROUTE_RESOLVED--> chanCreateQP(), rdma_connect()
 *                         --ESTABLISHED--> send our buffer --> CONNECTED
 *                         --*_ERROR, REJECTED, UNREACHABLE--> ERROR
 *   server:  CONNECT_REQUEST on the listener --> listenerAccept(), after
 *            the other events of its batch (handshakes finish first):
 *              chanCreateQP() with the small pre-auth buffer, rdma_accept()
 *              (the peer left meanwhile: a failed handshake)
 *              HANDSHAKE --ESTABLISHED--> send our buffer
 *                        --peer's first RegisterXferMemory--> (both done)
 *                        --> CONNECTED, handed to the owner (accept callback)
 *                        --RDMA_HANDSHAKE_TIMEOUT--> closed by the listener
 *   both:    CONNECTED --DISCONNECTED--> CLOSED (reads drain, then EOF)
 *            any --bad peer input, failed completion, fatal async event,
 *                  DEVICE_REMOVAL--> ERROR (chanFail(): the reason is kept)
 *
 * Events. A client channel's descriptor is an epoll set over its own
 * rdma_cm event channel and its completion channel. A server channel's
 * descriptor is its completion channel; its rdma_cm events arrive on the
 * listener's event channel (or, after the listener closed, on the
 * library's own channel, polled through rdmaAsyncFd()).
 *
 * Memory. Before the grant (a server connection whose client has not
 * authenticated), the receive buffer is RDMA_RX_SIZE_PREAUTH and the
 * staging ring RDMA_TX_SIZE_PREAUTH; about 120 KiB in all with the control
 * slots. Buffers are mmap()ed, page-aligned and page-sized, with a guard
 * page on each side, and registered with the least access they need: the
 * receive buffer remote-write, control receive slots local-write, staging
 * buffers local only. ibv_fork_init() keeps them out of forked children.
 * Every registration is counted against the pinned-memory cap.
 */

#define _GNU_SOURCE
#include "rdma_chan.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------ Declarations --- */

/* Smallest buffer we let a peer announce: below a page is pointless. */
#define RDMA_PEER_RX_MIN      4096
/* Control messages in flight at once (keepalive, buffer turns, replies). */
#define RDMA_CTRL_TX_SLOTS    16
/* Signal one send in this many, so that the send queue gets reaped. */
#define RDMA_SIGNAL_EVERY     64
/* ACK timeout of our queue pairs: 4.096 us * 2^16 = 268 ms per try, with
 * RDMA_RETRY_COUNT retries: a send to a peer whose NIC answers nothing
 * (power loss, a cut link) fails in about 2 s, and keepalives give an idle
 * channel a send. Set explicitly because rdma_cm leaves it at 0 (wait for
 * ever) on some devices (Soft-RoCE), where a silent peer would never be
 * found. Both queue pairs take the retry count the connecting side asks:
 * we ask 7, as other RDMA clients do.
 *
 * When a peer's NIC answers "receiver not ready" (RNR: its process posts no
 * receives, because it is busy, stopped or slow), ours retries for ever
 * (rnr_retry 7): that is TCP's full window, and like a TCP connection the
 * channel waits; Redis's own limits decide (repl-timeout,
 * client-output-buffer-limit, timeout). tests/rdma/replication.tcl keeps a
 * replica busy 15 s under a write stream. Only after RDMA_PEER_STUCK_SECONDS
 * is such a peer closed: a hung host's NIC may go on answering RNR. */
#define RDMA_ACK_TIMEOUT      16
#define RDMA_RETRY_COUNT      7
/* Soft-RoCE (rdma_rxe, this vendor id) reads a retry count of 7 as "for
 * ever" (the spec gives 7 that meaning for RNR retries only), so there a
 * dead peer is never timed out. A smaller count does not help on it: rxe
 * also spends retries while a busy peer answers RNR, and failed a replica
 * busy for 2 s. So on Soft-RoCE the watchdog stays, and closes a peer busy
 * for 10 s under a stream; real NICs keep it, as TCP does. */
#define RDMA_RXE_VENDOR_ID    0xffffff
/* The watchdog, only where the transport may never time out: a peer that
 * completes none of our sends for this long is taken for dead, as nothing
 * else would notice. It cannot tell a busy peer from a dead one.
 * SKV_RDMA_WATCHDOG=no turns it off, for tests on Soft-RoCE that show what
 * a real NIC does. */
#define RDMA_PEER_DEAD_SECONDS (3 * RDMA_KEEPALIVE_INTERVAL + 1)
/* On every channel: a peer that took nothing we sent for 5 minutes is
 * closed, busy or not. It bounds what a hung host holds here (its NIC may
 * answer RNR for ever; TCP gives up on a hung host after about 15
 * minutes). A replica is closed before that by the default repl-timeout
 * (60 s); one set above 300 s does not hold over RDMA. */
#define RDMA_PEER_STUCK_SECONDS 300
/* Most work requests one rdmaChanWriteRegion() call links into a single
 * ibv_post_send (one doorbell). */
#define RDMA_REGION_BATCH     32
/* Acknowledge completion events in batches of this many. */
#define RDMA_CQ_ACK_BATCH     128
#define RDMA_CQ_POLL_BATCH    32
/* Receive work requests carry this bit in wr_id (with their slot), so that
 * a failed completion, whose opcode is undefined, still says which queue
 * it came from. Send wr_ids are sequence numbers, far below it. */
#define RDMA_WRID_RECV        (1ULL << 63)

typedef struct rdmaBuf {
    void *map;          /* mmap()ed area, guard pages included */
    size_t maplen;
    char *data;         /* usable, page-aligned */
    size_t len;         /* usable length (page multiple) */
    struct ibv_mr *mr;
} rdmaBuf;

typedef struct rdmaDevice {
    struct ibv_context *ctx;
    struct rdmaDevice *next;
} rdmaDevice;

struct rdmaChan {
    rdmaChanState state;
    int server;                    /* accepted by a listener */
    int established;               /* server: ESTABLISHED seen */
    int err_is_flush;              /* err only says "flushed": a real cause may follow */
    int counted;                   /* its failure went to a counter already */
    int unauth;                    /* server: in R.unauth (not granted yet) */
    int lingering;                 /* closed by its owner, sends still draining */
    time_t linger_since;
    char err[192];
    char peer_desc[64];            /* "ip:port", for messages */

    struct rdma_cm_id *id;
    struct rdma_event_channel *cm_ch;   /* client side only */
    struct ibv_pd *pd;
    struct ibv_comp_channel *comp_ch;
    struct ibv_cq *cq;
    int epfd;                      /* client side: cm_ch + comp_ch */
    int epfd_released;             /* the caller closes epfd */
    unsigned cq_unacked;
    int comp_vector;
    size_t rx_size_wanted;         /* client: buffer to create on connect */

    /* Receive side. */
    rdmaBuf ctrl_rx;               /* RDMA_MAX_WRS slots of 32 bytes */
    rdmaBuf rx;                    /* the peer writes here */
    size_t rx_written;             /* bytes the peer wrote this turn */
    size_t rx_read;                /* bytes we consumed this turn */
    size_t rx_next_size;           /* buffer for the next turn */
    int rx_turn_pending;           /* RegisterXferMemory still to send */
    int eof_reported;

    /* Send side. */
    rdmaBuf ctrl_tx;               /* RDMA_CTRL_TX_SLOTS slots */
    uint64_t ctrl_slot_seq[RDMA_CTRL_TX_SLOTS];
    unsigned ctrl_next;
    rdmaBuf tx;                    /* staging ring for data */
    size_t tx_want;                /* staging size wanted (grows on a grant) */
    uint64_t st_in;                /* bytes ever staged */
    uint64_t st_out;               /* bytes ever sent (their write completed) */
    uint64_t st_end[RDMA_MAX_WRS]; /* st_in after send #seq, at seq % MAX */
    size_t tx_off;                 /* where our next write lands in the peer's buffer */
    uint64_t peer_addr;
    uint32_t peer_rkey;
    size_t peer_len;
    int peer_known;
    /* Zero-copy sends from a region of the owner's memory (Nic-KV's
     * backlog), registered in this channel's protection domain. */
    struct ibv_mr *region_mr;
    char *region_base;
    size_t region_len;
    uint64_t zc_in;                /* region bytes ever posted */
    uint64_t zc_out;               /* ... whose writes completed */
    uint64_t zc_end[RDMA_MAX_WRS]; /* zc_in after send #seq, at seq % MAX */
    uint64_t sq_posted;            /* sends posted, ever */
    uint64_t sq_completed;         /* sends known complete */
    unsigned unsignaled;

    time_t created;                /* monotonic seconds */
    time_t last_send;
    time_t sq_progress;            /* last time the send queue moved (or was empty) */
    int watchdog;                  /* the transport may never time out a silent peer
                                    * (in R.watched) */

    rdmaNotifyFn notify;
    void *notify_data;
    int notify_pending;            /* device-wide failure, owner not told yet */
    /* What the library's own events (rdma_cm on a listener's channel, device
     * async events) found out about this channel, possibly in another thread
     * than the owner's: ASYNC_* bits, applied by the owner's next call. */
    unsigned async_flags;          /* atomic */
    int async_event;               /* the ibv_event_type behind ASYNC_QP */
    rdmaListener *listener;        /* while in HANDSHAKE */
    rdmaChan *hs_prev, *hs_next;   /* listener's handshake list */
    rdmaChan *prev, *next;         /* every channel */
};

struct rdmaListener {
    struct rdma_event_channel *cm_ch;
    struct rdma_cm_id *id;
    int epfd;                      /* cm_ch + handshaking channels */
    size_t rx_size;
    int comp_vector;
    int failed;
    char addr[80];
    rdmaChan *hs;                  /* channels in HANDSHAKE */
};

/* Process-wide state. A process may drive channels from several threads
 * (Nic-KV's fan-out threads), each channel from one thread at a time: the
 * counters are updated atomically, and the list of channels, the devices
 * and the library's event channel are guarded by lock. A channel's own
 * fields belong to its owner; the library's event handlers, which may run
 * in another thread, only leave it async_flags, and read its notify pair
 * (set under lock: rdmaChanSetNotify). */
static struct {
    pthread_mutex_t lock;          /* recursive: callbacks may close channels */
    int initialized;
    rdmaLogFn log;
    size_t pinned;                 /* atomic */
    size_t pinned_limit;
    int unauth;                    /* atomic: server channels not granted */
    int watched;                   /* atomic: channels with the watchdog on */
    int unauth_limit;              /* atomic */
    time_t peer_log_window;        /* peer-caused log lines: rlogPeer() */
    int peer_log_lines;
    int peer_log_dropped;
    rdmaLogAllFn peer_log_all;     /* the owner wants every peer line now */
    rdmaStats stats;
    int async_epfd;                /* device async fds + cm_ch below */
    struct rdma_event_channel *cm_ch;   /* orphaned server channels */
    rdmaDevice *devices;
    rdmaChan *chans;
    int nchans;
    unsigned rr_vector;
} R = { .lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP, .async_epfd = -1,
        .unauth_limit = RDMA_UNAUTH_LIMIT_DEFAULT };

#define STAT_ADD(field, n) __atomic_fetch_add(&R.stats.field, (n), __ATOMIC_RELAXED)
#define LOCK() pthread_mutex_lock(&R.lock)
#define UNLOCK() pthread_mutex_unlock(&R.lock)

/* async_flags bits. */
#define ASYNC_DISCONNECTED  (1u<<0)   /* the peer disconnected */
#define ASYNC_REMOVED       (1u<<1)   /* RDMA_CM_EVENT_DEVICE_REMOVAL */
#define ASYNC_QP            (1u<<2)   /* a fatal QP or CQ event (async_event) */
#define ASYNC_DEVICE_FATAL  (1u<<3)   /* IBV_EVENT_DEVICE_FATAL */

static void chanFail(rdmaChan *ch, unsigned long long *counter, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ------------------------------------------------------------ Helpers --- */

static void rlog(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void rlog(int level, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    if (!R.log) return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    R.log(level, msg);
}

static time_t monoSeconds(void);

/* Lines a peer can cause at will (refused, failed or timed-out
 * connections): at NOTICE and WARNING, at most RDMA_PEER_LOG_BURST of them
 * per RDMA_PEER_LOG_WINDOW seconds reach the log, then one line says how
 * many were left out (rdmaCron() says it once the window is over, if no
 * other line did). VERBOSE and DEBUG lines, which an operator asks for,
 * are not limited. The counters in INFO count every failure. */
static void peerLogFlush(time_t now) {
    int dropped = 0;
    LOCK();
    if (now - R.peer_log_window >= RDMA_PEER_LOG_WINDOW) {
        dropped = R.peer_log_dropped;
        R.peer_log_window = now;
        R.peer_log_lines = R.peer_log_dropped = 0;
    }
    UNLOCK();
    if (dropped)
        rlog(RDMA_LOG_NOTICE, "RDMA: %d more lines about failed or refused connections were "
             "left out in the last %d seconds (INFO rdma counts them all)", dropped, RDMA_PEER_LOG_WINDOW);
}

void rdmaSetPeerLogAll(rdmaLogAllFn fn) { R.peer_log_all = fn; }

int rdmaPeerLogAllow(int level) {
    int emit;
    if (level < RDMA_LOG_NOTICE) return 1;
    /* The owner logs at verbose or below: it asked for every line. */
    if (R.peer_log_all && R.peer_log_all()) return 1;
    peerLogFlush(monoSeconds());
    LOCK();
    emit = R.peer_log_lines < RDMA_PEER_LOG_BURST;
    if (emit) R.peer_log_lines++;
    else R.peer_log_dropped++;
    UNLOCK();
    return emit;
}

static void rlogPeer(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void rlogPeer(int level, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    if (!R.log || !rdmaPeerLogAllow(level)) return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    R.log(level, msg);
}

static time_t monoSeconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec;
}

static long long monoMillis(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void seterr(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    if (!err || !errlen) return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static int setNonBlock(int fd) {
    int flags = fcntl(fd, F_GETFL);
    if (flags == -1) return -1;
    return fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}


static void formatAddr(struct sockaddr *sa, char *ip, size_t iplen, int *port) {
    if (ip && iplen) ip[0] = '\0';
    if (port) *port = 0;
    if (!sa) return;
    if (sa->sa_family == AF_INET) {
        struct sockaddr_in *s = (struct sockaddr_in *)sa;
        if (ip) inet_ntop(AF_INET, &s->sin_addr, ip, iplen);
        if (port) *port = ntohs(s->sin_port);
    } else if (sa->sa_family == AF_INET6) {
        struct sockaddr_in6 *s = (struct sockaddr_in6 *)sa;
        if (ip) inet_ntop(AF_INET6, &s->sin6_addr, ip, iplen);
        if (port) *port = ntohs(s->sin6_port);
    }
}

/* Resolve host (numeric or a name) and port into ss. */
static int resolveAddr(const char *host, int port, struct sockaddr_storage *ss,
                       char *err, size_t errlen) {
    struct addrinfo hints, *res;
    char portstr[16];
    int rv;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    snprintf(portstr, sizeof(portstr), "%d", port);
    if (host && (!*host || !strcmp(host, "*"))) host = NULL;
    if (host && !strcmp(host, "0.0.0.0")) host = NULL;
    if (!host) hints.ai_family = AF_INET;
    if ((rv = getaddrinfo(host, portstr, &hints, &res)) != 0) {
        seterr(err, errlen, "cannot resolve '%s': %s", host ? host : "*", gai_strerror(rv));
        return -1;
    }
    memset(ss, 0, sizeof(*ss));
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    return 0;
}

/* --------------------------------------------------- Pinned memory --- */

static size_t pageSize(void) {
    static size_t ps;
    if (!ps) ps = (size_t)sysconf(_SC_PAGESIZE);
    return ps;
}

static size_t roundPages(size_t len) {
    size_t ps = pageSize();
    return (len + ps - 1) / ps * ps;
}

/* Set by the main thread (CONFIG SET), read by any channel's owner: a
 * relaxed atomic, read once per decision. */
static size_t pinnedLimitSet(void) { return __atomic_load_n(&R.pinned_limit, __ATOMIC_RELAXED); }

size_t rdmaEffectivePinnedLimit(void) {
    size_t limit = pinnedLimitSet();
    struct rlimit rl;
    /* Root normally has CAP_IPC_LOCK, which lifts RLIMIT_MEMLOCK. */
    if (geteuid() != 0 && getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        if (limit == 0 || (size_t)rl.rlim_cur < limit) limit = (size_t)rl.rlim_cur;
    }
    return limit;
}

static size_t pinnedNow(void) { return __atomic_load_n(&R.pinned, __ATOMIC_RELAXED); }

/* Reserve len bytes of the pinned-memory budget; 0 if the cap refuses. */
static int pinnedReserve(size_t len) {
    size_t limit = rdmaEffectivePinnedLimit();
    size_t now = __atomic_add_fetch(&R.pinned, len, __ATOMIC_RELAXED);
    if (limit == 0 || now <= limit) return 1;
    __atomic_sub_fetch(&R.pinned, len, __ATOMIC_RELAXED);
    return 0;
}

static void pinnedRelease(size_t len) { __atomic_sub_fetch(&R.pinned, len, __ATOMIC_RELAXED); }

/* Why len more bytes cannot be pinned. */
static void pinnedRefusal(size_t len, char *err, size_t errlen) {
    size_t set = pinnedLimitSet(), limit = rdmaEffectivePinnedLimit();
    if (set == 0 || limit < set)
        seterr(err, errlen, "registering %zu KiB would pass RLIMIT_MEMLOCK (%zu KiB, %zu KiB "
               "in use): raise it (ulimit -l, LimitMEMLOCK= in a systemd unit) or grant "
               "CAP_IPC_LOCK", len / 1024, limit / 1024, pinnedNow() / 1024);
    else
        seterr(err, errlen, "registering %zu KiB would pass the pinned-memory limit "
               "(rdma-max-pinned-memory, %zu KiB, %zu KiB in use)", len / 1024,
               limit / 1024, pinnedNow() / 1024);
}

/* Reserve len bytes, or say why not (0 = reserved, -1 = refused). The
 * caller counts what the refusal cost (a connection refused, or nothing). */
static int pinnedRefuse(size_t len, char *err, size_t errlen) {
    if (pinnedReserve(len)) return 0;
    pinnedRefusal(len, err, errlen);
    return -1;
}

static void memlockHint(char *buf, size_t buflen) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        snprintf(buf, buflen, "; RLIMIT_MEMLOCK is %llu KiB: raise it (ulimit -l, "
                 "LimitMEMLOCK= in a systemd unit) or grant CAP_IPC_LOCK",
                 (unsigned long long)rl.rlim_cur / 1024);
    else
        buf[0] = '\0';
}

/* Map and register len bytes (a page multiple) with the given access; the
 * pinned-memory budget is the caller's business. -1 with err on failure. */
static int bufMap(rdmaBuf *b, struct ibv_pd *pd, size_t len, int access,
                  char *err, size_t errlen) {
    size_t ps = pageSize();
    memset(b, 0, sizeof(*b));
    b->maplen = len + 2 * ps;
    b->map = mmap(NULL, b->maplen, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b->map == MAP_FAILED) {
        b->map = NULL;
        seterr(err, errlen, "mmap of %zu KiB failed: %s", len / 1024, strerror(errno));
        return -1;
    }
    b->data = (char *)b->map + ps;
    b->len = len;
    if (mprotect(b->data, len, PROT_READ | PROT_WRITE) == -1) {
        seterr(err, errlen, "mprotect failed: %s", strerror(errno));
        goto err;
    }
    b->mr = ibv_reg_mr(pd, b->data, len, access);
    if (!b->mr) {
        char hint[200];
        int e = errno;
        hint[0] = '\0';
        if (e == ENOMEM || e == EPERM || e == EAGAIN) memlockHint(hint, sizeof(hint));
        seterr(err, errlen, "ibv_reg_mr of %zu KiB failed: %s%s", len / 1024, strerror(e), hint);
        goto err;
    }
    return 0;

err:
    munmap(b->map, b->maplen);
    memset(b, 0, sizeof(*b));
    return -1;
}

/* Deregister and unmap, leaving the pinned-memory budget alone. */
static void bufUnmap(rdmaBuf *b) {
    if (b->mr) ibv_dereg_mr(b->mr);
    if (b->map) munmap(b->map, b->maplen);
    memset(b, 0, sizeof(*b));
}

/* What a failed allocation was: the pinned-memory cap refused it, or the
 * system did (mmap, ibv_reg_mr: RLIMIT_MEMLOCK), or another resource of
 * the NIC's could not be had. Callers count it (rdmaStats) as such. */
#define RDMA_NO_PINNED   -2
#define RDMA_NO_RESOURCE -1
/* chanCreateQP() on a server channel: the connection request was gone (the
 * peer left while we accepted): a failed handshake, not a resource. */
#define RDMA_PEER_GONE   -3

/* Allocate and register len bytes against the pinned-memory budget: 0, or
 * RDMA_NO_PINNED / RDMA_NO_RESOURCE with err saying why. Counts nothing. */
static int bufAlloc(rdmaBuf *b, struct ibv_pd *pd, size_t len, int access,
                    char *err, size_t errlen) {
    memset(b, 0, sizeof(*b));
    len = roundPages(len);
    if (pinnedRefuse(len, err, errlen)) return RDMA_NO_PINNED;
    if (bufMap(b, pd, len, access, err, errlen) == -1) {
        pinnedRelease(len);
        return RDMA_NO_RESOURCE;
    }
    return 0;
}

/* The counter for a connection that failed with such a code. */
static unsigned long long *noBufCounter(int code) {
    if (code == RDMA_PEER_GONE) return &R.stats.err_handshake;
    return code == RDMA_NO_PINNED ? &R.stats.err_pinned_limit : &R.stats.err_register;
}

static void bufFree(rdmaBuf *b) {
    if (b->mr) pinnedRelease(b->len);
    bufUnmap(b);
}

/* Replace b, which is in use by nothing in flight, with a buffer of len
 * bytes. Only growth is reserved, and a refusal is not an error of anyone's:
 * the connection goes on with the buffer it has (b is left as it was, and
 * -1 returned with err). Counted nowhere: the counters count connections
 * that failed. For a moment both buffers are registered: under a tight
 * RLIMIT_MEMLOCK a growth the cap allowed may still be refused here. */
static int bufReplace(rdmaBuf *b, struct ibv_pd *pd, size_t len, int access,
                      char *err, size_t errlen) {
    rdmaBuf nb;
    size_t grow;
    len = roundPages(len);
    grow = len > b->len ? len - b->len : 0;
    if (grow && !pinnedReserve(grow)) {
        seterr(err, errlen, "growing it to %zu KiB would pass the pinned-memory limit "
               "(%zu KiB, %zu KiB in use)", len / 1024, rdmaEffectivePinnedLimit() / 1024,
               pinnedNow() / 1024);
        return -1;
    }
    if (bufMap(&nb, pd, len, access, err, errlen) == -1) {
        if (grow) pinnedRelease(grow);
        return -1;
    }
    if (len < b->len) pinnedRelease(b->len - len);
    bufUnmap(b);
    *b = nb;
    return 0;
}

/* ----------------------------------------------------------- Library --- */

static void trackDevice(struct ibv_context *ctx) {
    rdmaDevice *d;
    struct epoll_event ev;
    if (!ctx) return;
    LOCK();
    for (d = R.devices; d; d = d->next) if (d->ctx == ctx) break;
    if (!d && (d = calloc(1, sizeof(*d)))) {
        d->ctx = ctx;
        d->next = R.devices;
        R.devices = d;
        setNonBlock(ctx->async_fd);
        memset(&ev, 0, sizeof(ev));
        ev.events = EPOLLIN;
        ev.data.ptr = d;
        if (epoll_ctl(R.async_epfd, EPOLL_CTL_ADD, ctx->async_fd, &ev) == -1)
            rlog(RDMA_LOG_WARNING, "RDMA: cannot watch async events of %s: %s",
                 ibv_get_device_name(ctx->device), strerror(errno));
    }
    UNLOCK();
}

int rdmaSupported(void) { return 1; }

int rdmaInit(rdmaLogFn log, char *err, size_t errlen) {
    if (R.initialized) { R.log = log; return 0; }
    R.log = log;
    /* Before any other verbs call: keep registered pages out of children. */
    if (ibv_fork_init() != 0)
        rlog(RDMA_LOG_WARNING, "RDMA: ibv_fork_init failed (%s): forking with live "
             "RDMA connections relies on the kernel's fork support", strerror(errno));
    R.async_epfd = epoll_create1(EPOLL_CLOEXEC);
    if (R.async_epfd == -1) {
        seterr(err, errlen, "epoll_create1: %s", strerror(errno));
        return -1;
    }
    R.initialized = 1;
    return 0;
}

/* The library's own rdma_cm channel, for server channels whose listener
 * closed. Created on first need. */
static struct rdma_event_channel *libraryCmChannel(void) {
    struct epoll_event ev;
    if (R.cm_ch) return R.cm_ch;
    R.cm_ch = rdma_create_event_channel();
    if (!R.cm_ch) return NULL;
    setNonBlock(R.cm_ch->fd);
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN;
    ev.data.ptr = NULL;            /* NULL tags the cm channel */
    epoll_ctl(R.async_epfd, EPOLL_CTL_ADD, R.cm_ch->fd, &ev);
    return R.cm_ch;
}

void rdmaSetPinnedLimit(size_t bytes) { __atomic_store_n(&R.pinned_limit, bytes, __ATOMIC_RELAXED); }
void rdmaSetUnauthLimit(int n) { __atomic_store_n(&R.unauth_limit, n < 0 ? 0 : n, __ATOMIC_RELAXED); }
int rdmaUnauthCount(void) { return __atomic_load_n(&R.unauth, __ATOMIC_RELAXED); }
int rdmaWatchdogCount(void) { return __atomic_load_n(&R.watched, __ATOMIC_RELAXED); }
size_t rdmaPinnedBytes(void) { return pinnedNow(); }
int rdmaAsyncFd(void) { return R.async_epfd; }
int rdmaChanCount(void) { return __atomic_load_n(&R.nchans, __ATOMIC_RELAXED); }

#define STAT_FIELD(name, field) { name, offsetof(rdmaStats, field) }
const rdmaStatField rdmaStatFields[] = {
    STAT_FIELD("connections_accepted", accepted),
    STAT_FIELD("connections_made", connected),
    STAT_FIELD("bytes_sent", bytes_sent),
    STAT_FIELD("bytes_sent_zero_copy", region_bytes_sent),
    STAT_FIELD("bytes_received", bytes_received),
    STAT_FIELD("writes_posted", writes_posted),
    STAT_FIELD("doorbells", doorbells),
    STAT_FIELD("ctrl_sent", ctrl_sent),
    STAT_FIELD("ctrl_received", ctrl_received),
    STAT_FIELD("keepalives_sent", keepalives_sent),
    STAT_FIELD("errors_protocol", err_protocol),
    STAT_FIELD("errors_bad_imm", err_bad_imm),
    STAT_FIELD("errors_bad_buffer", err_bad_buffer),
    STAT_FIELD("errors_completion", err_completion),
    STAT_FIELD("errors_async", err_async),
    STAT_FIELD("errors_register", err_register),
    STAT_FIELD("errors_pinned_limit", err_pinned_limit),
    STAT_FIELD("errors_unauth_limit", err_unauth_limit),
    STAT_FIELD("errors_handshake", err_handshake),
    STAT_FIELD("errors_connect", err_connect),
    { NULL, 0 }
};

/* rdmaStats is all unsigned long long: read and clear it field by field. */
#define NSTATS (sizeof(rdmaStats) / sizeof(unsigned long long))
void rdmaGetStats(rdmaStats *out) {
    unsigned long long *src = (unsigned long long *)&R.stats, *dst = (unsigned long long *)out;
    for (size_t i = 0; i < NSTATS; i++) dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}
void rdmaResetStats(void) {
    unsigned long long *v = (unsigned long long *)&R.stats;
    for (size_t i = 0; i < NSTATS; i++) __atomic_store_n(&v[i], 0, __ATOMIC_RELAXED);
}

int rdmaProbeMemory(const char *addr, char *err, size_t errlen) {
    struct rdma_event_channel *cmch = NULL;
    struct rdma_cm_id *id = NULL;
    struct ibv_context **list = NULL, *ctx = NULL;
    struct ibv_pd *pd = NULL;
    rdmaBuf b;
    int n, rv = -1;
    /* What listenerAccept() registers: receive buffer, staging ring,
     * control slots both ways (the send slots take a page). */
    size_t need = RDMA_RX_SIZE_PREAUTH + RDMA_TX_SIZE_PREAUTH + RDMA_MAX_WRS * RDMA_CTRL_MSG_SIZE +
                  roundPages(RDMA_CTRL_TX_SLOTS * RDMA_CTRL_MSG_SIZE);

    if (addr && *addr && strcmp(addr, "*") && strcmp(addr, "0.0.0.0")) {
        struct sockaddr_storage ss;
        if (resolveAddr(addr, 0, &ss, err, errlen) == -1) return -1;
        if (!(cmch = rdma_create_event_channel()) ||
            rdma_create_id(cmch, &id, NULL, RDMA_PS_TCP) ||
            rdma_bind_addr(id, (struct sockaddr *)&ss)) {
            seterr(err, errlen, "no RDMA device for %s: %s", addr, strerror(errno));
            goto out;
        }
        ctx = id->verbs;
    } else {
        list = rdma_get_devices(&n);
        if (list && n > 0) ctx = list[0];
    }
    if (!ctx) {
        seterr(err, errlen, "no RDMA device found");
        goto out;
    }
    if (!(pd = ibv_alloc_pd(ctx))) {
        seterr(err, errlen, "ibv_alloc_pd: %s", strerror(errno));
        goto out;
    }
    /* A check, not a connection: nothing is counted (the listener's
     * retries call it once a second while it fails). */
    need = roundPages(need);
    if (!pinnedReserve(need)) {
        pinnedRefusal(need, err, errlen);
        goto out;
    }
    if (bufMap(&b, pd, need, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, err, errlen) == 0) {
        bufUnmap(&b);
        rv = 0;
    }
    pinnedRelease(need);
out:
    if (pd) ibv_dealloc_pd(pd);
    if (list) rdma_free_devices(list);
    if (id) rdma_destroy_id(id);
    if (cmch) rdma_destroy_event_channel(cmch);
    return rv;
}

/* ----------------------------------------------------- Channel setup --- */

static rdmaChan *chanNew(void) {
    rdmaChan *ch = calloc(1, sizeof(*ch));
    if (!ch) return NULL;
    ch->epfd = -1;
    ch->created = ch->last_send = monoSeconds();
    LOCK();
    ch->next = R.chans;
    if (R.chans) R.chans->prev = ch;
    R.chans = ch;
    __atomic_add_fetch(&R.nchans, 1, __ATOMIC_RELAXED);
    UNLOCK();
    return ch;
}

static int postRecv(rdmaChan *ch, uint32_t slot) {
    struct ibv_recv_wr wr, *bad;
    struct ibv_sge sge;
    sge.addr = (uintptr_t)(ch->ctrl_rx.data + (size_t)slot * RDMA_CTRL_MSG_SIZE);
    sge.length = RDMA_CTRL_MSG_SIZE;
    sge.lkey = ch->ctrl_rx.mr->lkey;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = RDMA_WRID_RECV | slot;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    return ibv_post_recv(ch->id->qp, &wr, &bad);
}

/* Create the protection domain, completion channel and queue, queue pair
 * and buffers of a channel whose id has a device, and post the receives.
 * rx_size is the first receive buffer. 0, or RDMA_NO_PINNED /
 * RDMA_NO_RESOURCE (see bufAlloc) with err saying why; counts nothing. */
static int chanCreateQP(rdmaChan *ch, size_t rx_size, int comp_vector, char *err, size_t errlen) {
    struct ibv_context *ctx = ch->id->verbs;
    struct ibv_qp_init_attr qpa;
    int vector, rv;
    uint32_t i;

    trackDevice(ctx);
    if (!(ch->pd = ibv_alloc_pd(ctx))) {
        seterr(err, errlen, "ibv_alloc_pd: %s", strerror(errno));
        return -1;
    }
    if (!(ch->comp_ch = ibv_create_comp_channel(ctx))) {
        seterr(err, errlen, "ibv_create_comp_channel: %s", strerror(errno));
        return -1;
    }
    setNonBlock(ch->comp_ch->fd);
    if (ctx->num_comp_vectors <= 0) vector = 0;
    else if (comp_vector < 0) vector = (int)(R.rr_vector++ % (unsigned)ctx->num_comp_vectors);
    else vector = comp_vector % ctx->num_comp_vectors;
    if (!(ch->cq = ibv_create_cq(ctx, 2 * RDMA_MAX_WRS, ch, ch->comp_ch, vector))) {
        seterr(err, errlen, "ibv_create_cq: %s", strerror(errno));
        return -1;
    }
    if (ibv_req_notify_cq(ch->cq, 0)) {
        seterr(err, errlen, "ibv_req_notify_cq: %s", strerror(errno));
        return -1;
    }
    memset(&qpa, 0, sizeof(qpa));
    qpa.qp_context = ch;
    qpa.send_cq = ch->cq;
    qpa.recv_cq = ch->cq;
    qpa.qp_type = IBV_QPT_RC;
    qpa.cap.max_send_wr = RDMA_MAX_WRS;
    qpa.cap.max_recv_wr = RDMA_MAX_WRS;
    qpa.cap.max_send_sge = 1;
    qpa.cap.max_recv_sge = 1;
    qpa.sq_sig_all = 0;
    if (rdma_create_qp(ch->id, ch->pd, &qpa)) {
        int e = errno;
        /* The kernel moves the new queue pair to INIT with the attributes
         * of the connection request, which it refuses (EINVAL) once the
         * request is no longer pending: the peer rejected, disconnected or
         * destroyed its id while we were accepting. */
        if (ch->server && e == EINVAL) {
            seterr(err, errlen, "the peer left during the accept (rdma_create_qp: %s)", strerror(e));
            return RDMA_PEER_GONE;
        }
        seterr(err, errlen, "rdma_create_qp: %s", strerror(e));
        return -1;
    }
    if ((rv = bufAlloc(&ch->ctrl_rx, ch->pd, RDMA_MAX_WRS * RDMA_CTRL_MSG_SIZE,
                       IBV_ACCESS_LOCAL_WRITE, err, errlen)) != 0) return rv;
    if ((rv = bufAlloc(&ch->ctrl_tx, ch->pd, RDMA_CTRL_TX_SLOTS * RDMA_CTRL_MSG_SIZE, 0, err, errlen)) != 0)
        return rv;
    if ((rv = bufAlloc(&ch->rx, ch->pd, rx_size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
                       err, errlen)) != 0) return rv;
    if (!ch->rx_next_size) ch->rx_next_size = ch->rx.len;
    /* A server's staging ring is reserved now, with the rest: a connection
     * we accept can always answer (a client's is made on its first write,
     * once the server's buffer size is known). */
    if (ch->server && (rv = bufAlloc(&ch->tx, ch->pd, ch->tx_want, 0, err, errlen)) != 0) return rv;
    for (i = 0; i < RDMA_MAX_WRS; i++) {
        if (postRecv(ch, i)) {
            seterr(err, errlen, "ibv_post_recv: %s", strerror(errno));
            return -1;
        }
    }
    return 0;
}

static void chanDestroyQP(rdmaChan *ch) {
    if (ch->id && ch->id->qp) rdma_destroy_qp(ch->id);
    if (ch->cq) {
        if (ch->cq_unacked) ibv_ack_cq_events(ch->cq, ch->cq_unacked);
        ch->cq_unacked = 0;
        ibv_destroy_cq(ch->cq);
        ch->cq = NULL;
    }
    if (ch->comp_ch) {
        ibv_destroy_comp_channel(ch->comp_ch);
        ch->comp_ch = NULL;
    }
    bufFree(&ch->ctrl_rx);
    bufFree(&ch->ctrl_tx);
    bufFree(&ch->rx);
    bufFree(&ch->tx);
    if (ch->region_mr) {
        ibv_dereg_mr(ch->region_mr);
        pinnedRelease(ch->region_len);
        ch->region_mr = NULL;
    }
    if (ch->pd) {
        ibv_dealloc_pd(ch->pd);
        ch->pd = NULL;
    }
}

static void chanSetAckTimeout(rdmaChan *ch) {
    uint8_t timeout = RDMA_ACK_TIMEOUT;
    if (rdma_set_option(ch->id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout, sizeof(timeout)))
        rlog(RDMA_LOG_VERBOSE, "RDMA: cannot set the ACK timeout: %s", strerror(errno));
}

/* Once connected (called once per channel): does the transport time out a
 * silent peer by itself? If the queue pair cannot say, the watchdog stays
 * on. */
static void chanCheckTimers(rdmaChan *ch) {
    static int watchdog_off = -1;
    struct ibv_qp_attr attr;
    struct ibv_qp_init_attr init;
    struct ibv_device_attr dev;
    int on = 1;
    int off = __atomic_load_n(&watchdog_off, __ATOMIC_RELAXED);
    if (off == -1) {                /* owners' threads may race: same value */
        const char *env = getenv("SKV_RDMA_WATCHDOG");
        off = env && !strcmp(env, "no");
        __atomic_store_n(&watchdog_off, off, __ATOMIC_RELAXED);
    }
    if (ch->id->qp && ibv_query_qp(ch->id->qp, &attr, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT, &init) == 0 &&
        attr.timeout != 0)
        on = attr.retry_cnt >= 7 &&
             (ibv_query_device(ch->id->verbs, &dev) || dev.vendor_id == RDMA_RXE_VENDOR_ID);
    ch->watchdog = on && !off;
    if (ch->watchdog) __atomic_add_fetch(&R.watched, 1, __ATOMIC_RELAXED);
}

static void chanSetPeerDesc(rdmaChan *ch) {
    char ip[INET6_ADDRSTRLEN];
    int port;
    if (rdmaChanPeerAddr(ch, ip, sizeof(ip), &port) == 0 && ip[0])
        snprintf(ch->peer_desc, sizeof(ch->peer_desc), strchr(ip, ':') ? "[%s]:%d" : "%s:%d", ip, port);
}

/* Put the channel in the error state and remember why. The first failure
 * wins: later ones (flushed work requests) are consequences. */
static void chanFail(rdmaChan *ch, unsigned long long *counter, const char *fmt, ...) {
    va_list ap;
    if (ch->state == RDMA_CHAN_ERROR && !ch->err_is_flush) return;
    if (ch->state == RDMA_CHAN_CLOSED && !counter) return;
    va_start(ap, fmt);
    vsnprintf(ch->err, sizeof(ch->err), fmt, ap);
    va_end(ap);
    ch->state = RDMA_CHAN_ERROR;
    ch->err_is_flush = 0;
    /* One failure, one count: under the first cause found (a flush the
     * owner already learned of, chanSettleFlush, keeps its count). */
    if (counter && !ch->counted) {
        __atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
        ch->counted = 1;
    }
    rlogPeer(RDMA_LOG_VERBOSE, "RDMA: connection %s failed: %s",
             ch->peer_desc[0] ? ch->peer_desc : "(unconnected)", ch->err);
}

/* The queue pair went to the error state and only flushed work requests
 * said so: nothing we did and no completion gave a cause. Soft-RoCE does
 * this on the peer's RDMA READ or atomic on our buffer (registered for
 * remote writes only: the NIC refuses the request and fails the queue
 * pair); a real NIC may raise IBV_EVENT_QP_ACCESS_ERR instead (counted as
 * async). Counted as a completion error, once, when the owner learns of it
 * (after the async events it was told of: a device removal found by then is
 * the cause instead). */
static void chanSettleFlush(rdmaChan *ch) {
    if (ch->state != RDMA_CHAN_ERROR || !ch->err_is_flush || ch->counted) return;
    snprintf(ch->err, sizeof(ch->err), "the queue pair failed with no completion saying why "
             "(on Soft-RoCE: the peer's RDMA READ or atomic on our buffer, which we refuse)");
    STAT_ADD(err_completion, 1);
    ch->counted = 1;
    ch->err_is_flush = 0;       /* the cause, now: final */
    rlogPeer(RDMA_LOG_VERBOSE, "RDMA: connection %s failed: %s",
             ch->peer_desc[0] ? ch->peer_desc : "(unconnected)", ch->err);
}

/* -------------------------------------------------------- Send queue --- */

static uint64_t sqOutstanding(rdmaChan *ch) { return ch->sq_posted - ch->sq_completed; }

#ifdef SKV_DEBUG
void rdmaInvariantFailed(const char *cond, const char *file, int line) {
    rlog(RDMA_LOG_WARNING, "RDMA: invariant broken at %s:%d: %s", file, line, cond);
    fprintf(stderr, "RDMA: invariant broken at %s:%d: %s\n", file, line, cond);
    abort();
}
#endif

/* The channel's counters, as they must be after any change (debug builds;
 * see rdmaInvariant in rdma_chan.h). All of them are our own bookkeeping:
 * what the peer sent was validated before it moved any of them. */
static void chanCheck(rdmaChan *ch) {
    rdmaInvariant(ch->sq_completed <= ch->sq_posted);
    rdmaInvariant(ch->sq_posted - ch->sq_completed <= RDMA_MAX_WRS);
    rdmaInvariant(ch->rx_read <= ch->rx_written);
    rdmaInvariant(ch->rx_written <= ch->rx.len);
    rdmaInvariant(ch->st_out <= ch->st_in);
    rdmaInvariant(ch->st_in - ch->st_out <= ch->tx.len);
    rdmaInvariant(ch->zc_out <= ch->zc_in);
    rdmaInvariant(!ch->peer_known || ch->tx_off <= ch->peer_len);
    (void)ch;
}

static void chanPollCQ(rdmaChan *ch);

/* Room for one more send work request; reaps completions if needed. */
static int sqHasRoom(rdmaChan *ch) {
    if (sqOutstanding(ch) < RDMA_MAX_WRS - 1) return 1;
    chanPollCQ(ch);
    return sqOutstanding(ch) < RDMA_MAX_WRS - 1;
}

/* Account for one send work request just posted, carrying zc region bytes:
 * a completion of it (or of a later one) releases everything up to it. */
static void sqPosted(rdmaChan *ch, size_t zc) {
    if (ch->sq_posted == ch->sq_completed) ch->sq_progress = monoSeconds();
    ch->sq_posted++;
    ch->zc_in += zc;
    ch->st_end[ch->sq_posted % RDMA_MAX_WRS] = ch->st_in;
    ch->zc_end[ch->sq_posted % RDMA_MAX_WRS] = ch->zc_in;
    ch->last_send = monoSeconds();
    chanCheck(ch);
}

/* Post one send work request. Signals it when asked to or every
 * RDMA_SIGNAL_EVERY sends, so completions keep the send queue moving. */
static int sqPost(rdmaChan *ch, struct ibv_send_wr *wr, int force_signal) {
    struct ibv_send_wr *bad;
    ch->unsignaled++;
    wr->wr_id = ch->sq_posted + 1;
    if (force_signal || ch->unsignaled >= RDMA_SIGNAL_EVERY ||
        (ch->st_in - ch->st_out) * 2 > ch->tx.len) {
        wr->send_flags |= IBV_SEND_SIGNALED;
        ch->unsignaled = 0;
    }
    if (ibv_post_send(ch->id->qp, wr, &bad)) {
        chanFail(ch, &R.stats.err_completion, "ibv_post_send: %s", strerror(errno));
        return -1;
    }
    sqPosted(ch, 0);
    return 0;
}

/* Send a 32-byte control message. -1 with errno EAGAIN when no slot is
 * free yet (the caller retries later), other errno when the channel failed. */
static int chanSendCtrl(rdmaChan *ch, const rdmaCtrlMsg *msg) {
    unsigned slot = ch->ctrl_next % RDMA_CTRL_TX_SLOTS;
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    char *p;

    if (ch->state == RDMA_CHAN_ERROR || ch->state == RDMA_CHAN_CLOSED || !ch->id->qp) {
        errno = ECONNRESET;
        return -1;
    }
    if (ch->ctrl_slot_seq[slot] > ch->sq_completed) chanPollCQ(ch);
    if (ch->ctrl_slot_seq[slot] > ch->sq_completed || !sqHasRoom(ch)) {
        errno = EAGAIN;
        return -1;
    }
    p = ch->ctrl_tx.data + (size_t)slot * RDMA_CTRL_MSG_SIZE;
    memcpy(p, msg, sizeof(*msg));
    sge.addr = (uintptr_t)p;
    sge.length = RDMA_CTRL_MSG_SIZE;
    sge.lkey = ch->ctrl_tx.mr->lkey;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = IBV_WR_SEND;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    if (sqPost(ch, &wr, 1) == -1) {
        errno = ECONNRESET;
        return -1;
    }
    ch->ctrl_slot_seq[slot] = ch->sq_posted;
    ch->ctrl_next++;
    STAT_ADD(ctrl_sent, 1);
    return 0;
}

/* Tell the peer where to write: our receive buffer, from offset 0. */
static int chanSendBuffer(rdmaChan *ch) {
    rdmaCtrlMsg msg;
    rdmaCtrlXfer(&msg, (uintptr_t)ch->rx.data, (uint32_t)ch->rx.len, ch->rx.mr->rkey);
    if (chanSendCtrl(ch, &msg) == -1) {
        if (errno == EAGAIN) ch->rx_turn_pending = 1;
        return -1;
    }
    ch->rx_turn_pending = 0;
    return 0;
}

/* The peer filled our buffer and we read all of it: start a new turn, on a
 * buffer of the size now wanted if that differs (and is allowed). */
static void chanRxTurn(rdmaChan *ch) {
    ch->rx_written = ch->rx_read = 0;
    chanCheck(ch);
    if (ch->rx_next_size && roundPages(ch->rx_next_size) != ch->rx.len) {
        char err[256];
        /* Nothing is in flight on it now: the peer wrote all of it and
         * waits for our RegisterXferMemory. */
        if (bufReplace(&ch->rx, ch->pd, ch->rx_next_size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
                       err, sizeof(err)) == -1) {
            rlogPeer(RDMA_LOG_NOTICE, "RDMA: connection %s keeps its %zu KiB receive buffer: %s",
                     ch->peer_desc, ch->rx.len / 1024, err);
            ch->rx_next_size = ch->rx.len;
        }
    }
    chanSendBuffer(ch);
}

/* ----------------------------------------------------- Completions --- */

/* A control message from the peer, in a receive slot. It is copied out
 * first (the slot is re-posted, and the copy is aligned whatever the slot). */
static void chanHandleCtrl(rdmaChan *ch, const void *slot) {
    rdmaCtrlMsg m;
    uint16_t op;
    memcpy(&m, slot, sizeof(m));
    op = rdmaCtrlOpcode(&m);
    STAT_ADD(ctrl_received, 1);
    switch (op) {
    case RDMA_OP_GET_SERVER_FEATURE:
        if (ch->server) {
            rdmaCtrlMsg reply;
            rdmaCtrlFeature(&reply, RDMA_OP_GET_SERVER_FEATURE, rdmaBe16(m.feature.select),
                            0);            /* no extensions */
            chanSendCtrl(ch, &reply);
        }
        break;
    case RDMA_OP_SET_CLIENT_FEATURE: {
        uint64_t features = rdmaBe64(m.feature.features);
        if (features != 0)
            chanFail(ch, &R.stats.err_protocol, "peer asked for features 0x%llx; none are supported",
                     (unsigned long long)features);
        break;
    }
    case RDMA_OP_KEEPALIVE:
        break;
    case RDMA_OP_REGISTER_XFER_MEMORY: {
        uint64_t addr = rdmaBe64(m.xfer.addr);
        uint32_t len = rdmaBe32(m.xfer.length);
        uint32_t rkey = rdmaBe32(m.xfer.rkey);
        if (len < RDMA_PEER_RX_MIN || len > RDMA_RX_SIZE_MAX) {
            chanFail(ch, &R.stats.err_bad_buffer, "peer announced a %u byte buffer "
                     "(allowed: %d to %d)", len, RDMA_PEER_RX_MIN, RDMA_RX_SIZE_MAX);
            break;
        }
        ch->peer_addr = addr;
        ch->peer_len = len;
        ch->peer_rkey = rkey;
        ch->tx_off = 0;
        ch->peer_known = 1;
        chanCheck(ch);
        break;
    }
    default:
        chanFail(ch, &R.stats.err_protocol, "unknown control message opcode %u", op);
        break;
    }
}

/* A receive failed: always on what the peer sent. Named by its status:
 * only a length error is about the size of control messages. */
static void chanFailRecv(rdmaChan *ch, enum ibv_wc_status st) {
    const char *what = ibv_wc_status_str(st);
    switch (st) {
    case IBV_WC_LOC_LEN_ERR:
        /* A SEND larger than our 32-byte slot. */
        chanFail(ch, &R.stats.err_protocol, "a message no control slot could take (%s): "
                 "control messages are %d bytes", what, RDMA_CTRL_MSG_SIZE);
        break;
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_LOC_ACCESS_ERR:
    case IBV_WC_LOC_PROT_ERR:
        /* A write with imm_data outside the buffer we gave, or with a key
         * we never gave: refused by our NIC, which used up a receive. */
        chanFail(ch, &R.stats.err_protocol, "the peer's write was refused by our NIC (%s): "
                 "outside the buffer we gave it, or with a key we never gave", what);
        break;
    default:
        /* Soft-RoCE fails a SEND too long for the slot with
         * LOC_QP_OP_ERR, which other causes give too. */
        chanFail(ch, &R.stats.err_protocol, "a receive failed on what the peer sent (%s): a message "
                 "longer than our %d-byte control slots, or a request our NIC refused", what,
                 RDMA_CTRL_MSG_SIZE);
        break;
    }
}

static void chanHandleWC(rdmaChan *ch, struct ibv_wc *wc) {
    if (wc->status != IBV_WC_SUCCESS) {
        /* Flushes follow an earlier failure or our own disconnect. */
        if (wc->status == IBV_WC_WR_FLUSH_ERR) {
            /* A consequence: the completion that says why may come later
             * (send and receive completions share the queue, unordered). */
            if (ch->state != RDMA_CHAN_ERROR && ch->state != RDMA_CHAN_CLOSED) {
                chanFail(ch, NULL, "queue pair flushed (peer gone)");
                ch->err_is_flush = 1;
            }
        } else if (wc->wr_id & RDMA_WRID_RECV)
            chanFailRecv(ch, wc->status);
        else
            chanFail(ch, &R.stats.err_completion, "work completion failed: %s",
                     ibv_wc_status_str(wc->status));
        return;
    }
    if (wc->opcode & IBV_WC_RECV) {
        uint64_t slot = wc->wr_id & ~RDMA_WRID_RECV;
        if (!(wc->wr_id & RDMA_WRID_RECV) || slot >= RDMA_MAX_WRS) return;  /* not ours: cannot happen */
        if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
            uint32_t n = ntohl(wc->imm_data);
            if (!ch->rx.data || n > ch->rx.len - ch->rx_written) {
                chanFail(ch, &R.stats.err_bad_imm, "peer wrote %u bytes past our buffer "
                         "(%zu of %zu bytes used)", n, ch->rx_written, ch->rx.len);
                return;
            }
            ch->rx_written += n;
            chanCheck(ch);
            STAT_ADD(bytes_received, n);
        } else if (wc->opcode == IBV_WC_RECV) {
            if (wc->byte_len != RDMA_CTRL_MSG_SIZE) {
                chanFail(ch, &R.stats.err_protocol, "control message of %u bytes (must be %d)",
                         wc->byte_len, RDMA_CTRL_MSG_SIZE);
                return;
            }
            chanHandleCtrl(ch, ch->ctrl_rx.data + (size_t)slot * RDMA_CTRL_MSG_SIZE);
        }
        if (ch->state != RDMA_CHAN_ERROR && postRecv(ch, (uint32_t)slot))
            chanFail(ch, &R.stats.err_completion, "ibv_post_recv: %s", strerror(errno));
        return;
    }
    /* A signaled send: every send up to it is complete (in order on RC),
     * and so is the staging they carried. */
    if (wc->wr_id > ch->sq_completed && wc->wr_id <= ch->sq_posted) {
        ch->sq_completed = wc->wr_id;
        ch->sq_progress = monoSeconds();
        ch->st_out = ch->st_end[wc->wr_id % RDMA_MAX_WRS];
        ch->zc_out = ch->zc_end[wc->wr_id % RDMA_MAX_WRS];
        chanCheck(ch);
    }
}

static void chanPollCQ(rdmaChan *ch) {
    struct ibv_wc wc[RDMA_CQ_POLL_BATCH];
    int n, i;
    if (!ch->cq) return;
    while ((n = ibv_poll_cq(ch->cq, RDMA_CQ_POLL_BATCH, wc)) > 0) {
        for (i = 0; i < n; i++) chanHandleWC(ch, &wc[i]);
        if (n < RDMA_CQ_POLL_BATCH) break;
    }
    if (n < 0) chanFail(ch, &R.stats.err_completion, "ibv_poll_cq failed");
}

/* Consume completion-channel events, re-arm, drain the queue. */
static void chanHandleCompChannel(rdmaChan *ch) {
    struct ibv_cq *cq;
    void *ctx;
    if (!ch->comp_ch) return;
    while (ibv_get_cq_event(ch->comp_ch, &cq, &ctx) == 0) {
        if (++ch->cq_unacked >= RDMA_CQ_ACK_BATCH) {
            ibv_ack_cq_events(ch->cq, ch->cq_unacked);
            ch->cq_unacked = 0;
        }
    }
    if (ibv_req_notify_cq(ch->cq, 0))
        chanFail(ch, &R.stats.err_completion, "ibv_req_notify_cq: %s", strerror(errno));
    chanPollCQ(ch);
}

/* ------------------------------------------------- rdma_cm events --- */

/* What the rdma_cm event said, copied so that the event can be acked before
 * we act (acting may destroy the id, which waits for acks). */
typedef struct cmEvent {
    enum rdma_cm_event_type type;
    int status;
    struct rdma_cm_id *id;
    struct rdma_cm_id *listen_id;
    void *context;                 /* id->context, read before the ack */
    char reason[RDMA_REJECT_REASON_MAX + 1];   /* REJECTED: the server's why, or "" */
} cmEvent;

/* A listener that refuses a connection says why in the reject's private
 * data: RDMA_REJECT_TAG then a short text. Peers that do not know this (a
 * Valkey client) see a plain reject. What a peer sent is only ever shown:
 * non-printable bytes become '?', and the text stops at the first NUL. */
static void cmRejectReason(const struct rdma_cm_event *ev, char *out) {
    const char *p = ev->param.conn.private_data;
    size_t len = ev->param.conn.private_data_len, tag = strlen(RDMA_REJECT_TAG), i;
    out[0] = '\0';
    if (!p || len <= tag || memcmp(p, RDMA_REJECT_TAG, tag)) return;
    p += tag;
    len -= tag;
    for (i = 0; i < len && i < RDMA_REJECT_REASON_MAX && p[i]; i++)
        out[i] = (p[i] >= 32 && p[i] < 127) ? p[i] : '?';
    out[i] = '\0';
}

static int getCmEvent(struct rdma_event_channel *cmch, cmEvent *out) {
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(cmch, &ev)) return -1;
    out->type = ev->event;
    out->status = ev->status;
    out->id = ev->id;
    out->listen_id = ev->listen_id;
    out->context = ev->id ? ev->id->context : NULL;
    out->reason[0] = '\0';
    if (ev->event == RDMA_CM_EVENT_REJECTED) cmRejectReason(ev, out->reason);
    rdma_ack_cm_event(ev);
    return 0;
}

static void chanNotify(rdmaChan *ch) {
    if (ch->notify) ch->notify(ch, ch->notify_data);
}

static void chanMarkAsync(rdmaChan *ch, unsigned flag) {
    __atomic_fetch_or(&ch->async_flags, flag, __ATOMIC_RELEASE);
}

/* A connected channel's cm event (server channels: delivered by the
 * listener or the library channel, perhaps in another thread than the
 * owner's). Returns 1 when the owner must look. */
static int chanHandleCmEvent(rdmaChan *ch, cmEvent *e) {
    switch (e->type) {
    case RDMA_CM_EVENT_DISCONNECTED:
        chanMarkAsync(ch, ASYNC_DISCONNECTED);
        return 1;
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
        chanMarkAsync(ch, ASYNC_REMOVED);
        return 1;
    default:
        return 0;
    }
}

/* In the owner's thread: act on what the library's events marked. */
static void chanApplyAsyncSlow(rdmaChan *ch) {
    unsigned f = __atomic_exchange_n(&ch->async_flags, 0, __ATOMIC_ACQUIRE);
    if (f & ASYNC_REMOVED) chanFail(ch, &R.stats.err_async, "RDMA device removed");
    if (f & ASYNC_DEVICE_FATAL) chanFail(ch, &R.stats.err_async, "device fatal error");
    if (f & ASYNC_QP)
        chanFail(ch, &R.stats.err_async, "async event: %s",
                 ibv_event_type_str((enum ibv_event_type)ch->async_event));
    if ((f & ASYNC_DISCONNECTED) && ch->state != RDMA_CHAN_ERROR) {
        /* What the peer did before it left (a bad message, a failed
         * write) is on the completion queue already: see it first, so
         * that it is counted whichever event is handled first. */
        chanPollCQ(ch);
        if (ch->state != RDMA_CHAN_ERROR) ch->state = RDMA_CHAN_CLOSED;
    }
}

static inline void chanApplyAsync(rdmaChan *ch) {
    if (__atomic_load_n(&ch->async_flags, __ATOMIC_RELAXED)) chanApplyAsyncSlow(ch);
}

/* --------------------------------------------------------- Listener --- */

static void listenerRemoveHandshake(rdmaListener *l, rdmaChan *ch) {
    if (ch->comp_ch) epoll_ctl(l->epfd, EPOLL_CTL_DEL, ch->comp_ch->fd, NULL);
    if (ch->hs_prev) ch->hs_prev->hs_next = ch->hs_next;
    else l->hs = ch->hs_next;
    if (ch->hs_next) ch->hs_next->hs_prev = ch->hs_prev;
    ch->hs_prev = ch->hs_next = NULL;
    ch->listener = NULL;
}

rdmaListener *rdmaListen(const char *addr, int port, size_t rx_size, int comp_vector,
                         char *err, size_t errlen) {
    rdmaListener *l;
    struct sockaddr_storage ss;
    struct epoll_event ev;

    if (!R.initialized) {
        seterr(err, errlen, "rdmaInit() was not called");
        return NULL;
    }
    if (resolveAddr(addr, port, &ss, err, errlen) == -1) return NULL;
    if (!(l = calloc(1, sizeof(*l)))) {
        seterr(err, errlen, "out of memory");
        return NULL;
    }
    l->epfd = -1;
    l->rx_size = rx_size;
    l->comp_vector = comp_vector;
    snprintf(l->addr, sizeof(l->addr), (addr && strchr(addr, ':')) ? "[%s]:%d" : "%s:%d",
             (addr && *addr) ? addr : "*", port);
    if (!(l->cm_ch = rdma_create_event_channel())) {
        seterr(err, errlen, "rdma_create_event_channel: %s (no RDMA device or rdma_cm?)", strerror(errno));
        goto err;
    }
    setNonBlock(l->cm_ch->fd);
    if (rdma_create_id(l->cm_ch, &l->id, l, RDMA_PS_TCP)) {
        seterr(err, errlen, "rdma_create_id: %s", strerror(errno));
        goto err;
    }
    if (rdma_bind_addr(l->id, (struct sockaddr *)&ss)) {
        seterr(err, errlen, "rdma_bind_addr(%s): %s", l->addr, strerror(errno));
        goto err;
    }
    if (rdma_listen(l->id, 128)) {
        seterr(err, errlen, "rdma_listen(%s): %s", l->addr, strerror(errno));
        goto err;
    }
    trackDevice(l->id->verbs);
    if ((l->epfd = epoll_create1(EPOLL_CLOEXEC)) == -1) {
        seterr(err, errlen, "epoll_create1: %s", strerror(errno));
        goto err;
    }
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN;
    ev.data.ptr = l;
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->cm_ch->fd, &ev) == -1) {
        seterr(err, errlen, "epoll_ctl: %s", strerror(errno));
        goto err;
    }
    return l;

err:
    rdmaListenerClose(l);
    return NULL;
}

int rdmaListenerFd(rdmaListener *l) { return l->epfd; }
int rdmaListenerFailed(rdmaListener *l) { return l->failed; }
const char *rdmaListenerAddr(rdmaListener *l) { return l->addr; }
void rdmaListenerSetRxSize(rdmaListener *l, size_t rx_size) { l->rx_size = rx_size; }

/* Refuse a connection request, telling the client why (see cmRejectReason). */
static void listenerReject(struct rdma_cm_id *id, const char *why) {
    char msg[sizeof(RDMA_REJECT_TAG) + RDMA_REJECT_REASON_MAX];
    int n = snprintf(msg, sizeof(msg), "%s%s", RDMA_REJECT_TAG, why);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof(msg)) n = (int)sizeof(msg) - 1;
    rdma_reject(id, msg, (uint8_t)n);
}

static void listenerAccept(rdmaListener *l, struct rdma_cm_id *id) {
    struct rdma_conn_param param;
    struct epoll_event ev;
    char err[256];
    size_t preauth = l->rx_size < RDMA_RX_SIZE_PREAUTH ? l->rx_size : RDMA_RX_SIZE_PREAUTH;
    int limit = __atomic_load_n(&R.unauth_limit, __ATOMIC_RELAXED), rv;
    rdmaChan *ch;

    /* Before anything is allocated: what a connection costs until its
     * client authenticates is bounded by this cap. */
    if (limit > 0 && __atomic_load_n(&R.unauth, __ATOMIC_RELAXED) >= limit) {
        char ip[INET6_ADDRSTRLEN];
        int port;
        STAT_ADD(err_unauth_limit, 1);
        snprintf(err, sizeof(err), "%d RDMA connections are not authenticated yet "
                 "(rdma-max-unauthenticated %d): try again later", limit, limit);
        formatAddr(rdma_get_peer_addr(id), ip, sizeof(ip), &port);
        rlogPeer(RDMA_LOG_WARNING, "RDMA: refusing connection from %s:%d on %s: %s",
                 ip[0] ? ip : "?", port, l->addr, err);
        listenerReject(id, err);
        rdma_destroy_id(id);
        return;
    }
    if (!(ch = chanNew())) {
        rdma_reject(id, NULL, 0);
        rdma_destroy_id(id);
        return;
    }
    ch->server = 1;
    ch->unauth = 1;
    __atomic_add_fetch(&R.unauth, 1, __ATOMIC_RELAXED);
    ch->id = id;
    id->context = ch;
    ch->state = RDMA_CHAN_HANDSHAKE;
    ch->rx_next_size = preauth;
    ch->tx_want = RDMA_TX_SIZE_PREAUTH;
    chanSetPeerDesc(ch);
    chanSetAckTimeout(ch);
    if ((rv = chanCreateQP(ch, preauth, l->comp_vector, err, sizeof(err))) != 0) {
        __atomic_fetch_add(noBufCounter(rv), 1, __ATOMIC_RELAXED);
        if (rv == RDMA_PEER_GONE) {
            /* Nobody to refuse: logged as the failed handshake it is. */
            rlogPeer(RDMA_LOG_VERBOSE, "RDMA: handshake with %s failed: %s",
                     ch->peer_desc[0] ? ch->peer_desc : "?", err);
            rdmaChanClose(ch);
            return;
        }
        goto refuse;
    }
    memset(&param, 0, sizeof(param));
    param.responder_resources = 1;
    param.initiator_depth = 1;
    param.rnr_retry_count = 7;
    if (rdma_accept(id, &param)) {
        /* Typically a peer that gave up already: a failed handshake. */
        snprintf(err, sizeof(err), "rdma_accept: %s", strerror(errno));
        STAT_ADD(err_handshake, 1);
        goto refuse;
    }
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN;
    ev.data.ptr = ch;
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, ch->comp_ch->fd, &ev) == -1) {
        snprintf(err, sizeof(err), "epoll_ctl: %s", strerror(errno));
        STAT_ADD(err_register, 1);
        goto refuse;
    }
    ch->listener = l;
    ch->hs_next = l->hs;
    if (l->hs) l->hs->hs_prev = ch;
    l->hs = ch;
    return;

refuse:
    rlogPeer(RDMA_LOG_WARNING, "RDMA: refusing connection from %s on %s: %s",
             ch->peer_desc[0] ? ch->peer_desc : "?", l->addr, err);
    listenerReject(id, err);
    rdmaChanClose(ch);
}

/* Close a handshaking channel that failed or whose peer left. Counted
 * once: under its own cause when it has one (a protocol error), else as a
 * failed handshake (the peer left, or its queue pair failed, before the
 * handshake was done). Returns 1 if it was closed. */
static int listenerDropFailed(rdmaChan *ch) {
    if (ch->state != RDMA_CHAN_ERROR && ch->state != RDMA_CHAN_CLOSED) return 0;
    if (!ch->counted) {
        STAT_ADD(err_handshake, 1);
        ch->counted = 1;
    }
    rlogPeer(RDMA_LOG_VERBOSE, "RDMA: handshake with %s failed: %s", ch->peer_desc,
             ch->err[0] ? ch->err : "peer disconnected");
    rdmaChanClose(ch);
    return 1;
}

/* A handshaking channel is done when the connection is established and the
 * peer told us where to write. */
static void listenerMaybeReady(rdmaListener *l, rdmaChan *ch, rdmaAcceptFn accept, void *data) {
    rdmaInvariant(ch->listener == l);
    if (ch->listener != l) return;      /* accepted (or dropped) already */
    chanApplyAsync(ch);
    if (listenerDropFailed(ch)) return;
    if (!ch->established || !ch->peer_known) return;
    listenerRemoveHandshake(l, ch);
    ch->state = RDMA_CHAN_CONNECTED;
    chanCheckTimers(ch);
    STAT_ADD(accepted, 1);
    accept(ch, data);
}

/* Whether ch is still one of l's handshaking channels (an accept callback
 * may have closed or taken it since it was seen). */
static int listenerHasHandshake(rdmaListener *l, rdmaChan *ch) {
    rdmaChan *h;
    for (h = l->hs; h && h != ch; h = h->hs_next);
    return h != NULL;
}

/* Finish every handshake that can finish now: completions that arrived
 * since the last look (the peer's RegisterXferMemory) are handled, and
 * the channels that are done handed to the owner. What counts against
 * rdma-max-unauthenticated is then only handshakes really in progress
 * (and clients that have to authenticate), not ones the listener had not
 * got round to: a client pool that keeps connects in progress would
 * otherwise fill the cap with handshakes done but not yet seen. */
static void listenerSettle(rdmaListener *l, rdmaAcceptFn accept, void *data) {
    rdmaChan **all;
    int n = 0, i;
    rdmaChan *h;
    for (h = l->hs; h; h = h->hs_next) n++;
    if (!n || !(all = malloc(sizeof(*all) * (size_t)n))) return;
    n = 0;
    for (h = l->hs; h; h = h->hs_next) all[n++] = h;
    for (i = 0; i < n; i++) {
        if (!listenerHasHandshake(l, all[i])) continue;
        chanHandleCompChannel(all[i]);
        if (all[i]->rx_turn_pending) chanSendBuffer(all[i]);
        listenerMaybeReady(l, all[i], accept, data);
    }
    free(all);
}

/* A connect request, once the handshakes of the same batch of events were
 * handled: if the cap on unauthenticated connections would refuse it,
 * handshakes that are done are first finished, and the cap asked again. */
static void listenerTakeRequest(rdmaListener *l, struct rdma_cm_id *id, rdmaAcceptFn accept, void *data) {
    int limit = __atomic_load_n(&R.unauth_limit, __ATOMIC_RELAXED);
    if (limit > 0 && __atomic_load_n(&R.unauth, __ATOMIC_RELAXED) >= limit) listenerSettle(l, accept, data);
    listenerAccept(l, id);
}

void rdmaListenerHandleEvents(rdmaListener *l, rdmaAcceptFn accept, void *data) {
    struct epoll_event evs[64];
    struct rdma_cm_id **reqs = NULL;   /* connect requests, taken last */
    int n, i, nreqs = 0, reqcap = 0;

    n = epoll_wait(l->epfd, evs, 64, 0);
    LOCK();       /* server channels' cm events: their owners may close them */
    for (i = 0; i < n; i++) {
        if (evs[i].data.ptr == l) {
            cmEvent e;
            while (getCmEvent(l->cm_ch, &e) == 0) {
                rdmaChan *ch;
                if (e.type == RDMA_CM_EVENT_CONNECT_REQUEST) {
                    if (nreqs == reqcap) {
                        int cap = reqcap ? reqcap * 2 : 16;
                        struct rdma_cm_id **r = realloc(reqs, sizeof(*reqs) * (size_t)cap);
                        if (!r) {
                            rdma_reject(e.id, NULL, 0);
                            rdma_destroy_id(e.id);
                            continue;
                        }
                        reqs = r;
                        reqcap = cap;
                    }
                    reqs[nreqs++] = e.id;
                    continue;
                }
                if (e.id == l->id) {
                    if (e.type == RDMA_CM_EVENT_DEVICE_REMOVAL) {
                        l->failed = 1;
                        rlog(RDMA_LOG_WARNING, "RDMA: the device behind %s was removed", l->addr);
                    }
                    continue;
                }
                ch = e.context;
                if (!ch) continue;
                if (ch->state == RDMA_CHAN_HANDSHAKE) {
                    if (e.type == RDMA_CM_EVENT_ESTABLISHED) {
                        ch->established = 1;
                        chanSetPeerDesc(ch);
                        if (chanSendBuffer(ch) == -1 && errno != EAGAIN)
                            chanFail(ch, NULL, "cannot send our buffer");
                        /* The peer's buffer may be in already: done now. */
                        else chanHandleCompChannel(ch);
                    } else if (e.type == RDMA_CM_EVENT_DISCONNECTED ||
                               e.type == RDMA_CM_EVENT_REJECTED ||
                               e.type == RDMA_CM_EVENT_DEVICE_REMOVAL ||
                               e.type == RDMA_CM_EVENT_CONNECT_ERROR ||
                               e.type == RDMA_CM_EVENT_UNREACHABLE) {
                        chanFail(ch, NULL, "%s during the handshake", rdma_event_str(e.type));
                    }
                    listenerMaybeReady(l, ch, accept, data);
                } else if (chanHandleCmEvent(ch, &e)) {
                    chanNotify(ch);      /* may close ch: touch it no more */
                }
            }
        } else {
            rdmaChan *ch = evs[i].data.ptr;
            /* An earlier event of this batch (its ESTABLISHED, its peer's
             * DISCONNECTED) may have handed it over or closed it: then it
             * is no longer ours, or no longer at all. */
            if (!listenerHasHandshake(l, ch)) continue;
            chanHandleCompChannel(ch);
            if (ch->rx_turn_pending) chanSendBuffer(ch);
            listenerMaybeReady(l, ch, accept, data);
        }
    }
    /* New connections last: the handshakes above finished first. */
    for (i = 0; i < nreqs; i++) listenerTakeRequest(l, reqs[i], accept, data);
    free(reqs);
    UNLOCK();
}

void rdmaListenerCron(rdmaListener *l) {
    time_t now = monoSeconds();
    rdmaChan *ch = l->hs, *next;
    while (ch) {
        next = ch->hs_next;
        chanApplyAsync(ch);
        if (listenerDropFailed(ch)) {
            /* An async event failed it: closed now, not at the timeout. */
        } else if (now - ch->created > RDMA_HANDSHAKE_TIMEOUT) {
            STAT_ADD(err_handshake, 1);
            rlogPeer(RDMA_LOG_NOTICE, "RDMA: closing connection from %s: no handshake within %d seconds",
                     ch->peer_desc[0] ? ch->peer_desc : "?", RDMA_HANDSHAKE_TIMEOUT);
            rdmaChanClose(ch);
        }
        ch = next;
    }
}

static void notifyMarked(void);

void rdmaListenerClose(rdmaListener *l) {
    rdmaChan *ch;
    if (!l) return;
    while (l->hs) rdmaChanClose(l->hs);
    /* Channels accepted through this listener get their rdma_cm events on
     * its event channel: move them to the library's before destroying it. */
    if (l->cm_ch) {
        LOCK();
        for (ch = R.chans; ch; ch = ch->next) {
            if (ch->server && ch->id && ch->id->channel == l->cm_ch) {
                struct rdma_event_channel *lib = libraryCmChannel();
                if (!lib || rdma_migrate_id(ch->id, lib)) {
                    chanMarkAsync(ch, ASYNC_DISCONNECTED);
                    ch->notify_pending = 1;
                }
            }
        }
        notifyMarked();
        UNLOCK();
    }
    if (l->id) rdma_destroy_id(l->id);
    if (l->cm_ch) rdma_destroy_event_channel(l->cm_ch);
    if (l->epfd != -1) close(l->epfd);
    free(l);
}

/* ----------------------------------------------------- Async events --- */

static int isFatalQpEvent(enum ibv_event_type t) {
    return t == IBV_EVENT_QP_FATAL || t == IBV_EVENT_QP_REQ_ERR ||
           t == IBV_EVENT_QP_ACCESS_ERR || t == IBV_EVENT_PATH_MIG_ERR;
}

/* Tell every owner whose channel got marked, one at a time: an owner's
 * callback may close any channel, so the list is rescanned each time. */
static void notifyMarked(void) {
    rdmaChan *ch;
    for (;;) {
        for (ch = R.chans; ch; ch = ch->next)
            if (ch->notify_pending) break;
        if (!ch) return;
        ch->notify_pending = 0;
        chanNotify(ch);
    }
}

void rdmaHandleAsyncEvents(void) {
    struct epoll_event evs[16];
    int n, i;

    if (R.async_epfd == -1) return;
    n = epoll_wait(R.async_epfd, evs, 16, 0);
    LOCK();
    for (i = 0; i < n; i++) {
        if (evs[i].data.ptr == NULL) {
            cmEvent e;
            while (R.cm_ch && getCmEvent(R.cm_ch, &e) == 0) {
                rdmaChan *ch = e.context;
                if (ch && chanHandleCmEvent(ch, &e)) ch->notify_pending = 1;
            }
            continue;
        }
        rdmaDevice *d = evs[i].data.ptr;
        struct ibv_async_event ae;
        while (ibv_get_async_event(d->ctx, &ae) == 0) {
            enum ibv_event_type t = ae.event_type;
            struct ibv_qp *qp = ae.element.qp;
            struct ibv_cq *cq = ae.element.cq;
            int port = ae.element.port_num;
            rdmaChan *ch;
            /* Ack before acting: destroying a QP waits for its acks. */
            ibv_ack_async_event(&ae);
            if (isFatalQpEvent(t) || t == IBV_EVENT_CQ_ERR) {
                for (ch = R.chans; ch; ch = ch->next) {
                    if ((t == IBV_EVENT_CQ_ERR && ch->cq == cq) ||
                        (t != IBV_EVENT_CQ_ERR && ch->id && ch->id->qp == qp)) {
                        ch->async_event = (int)t;
                        chanMarkAsync(ch, ASYNC_QP);
                        ch->notify_pending = 1;
                    }
                }
            } else if (t == IBV_EVENT_DEVICE_FATAL) {
                rlog(RDMA_LOG_WARNING, "RDMA: device %s failed (DEVICE_FATAL): closing its connections",
                     ibv_get_device_name(d->ctx->device));
                for (ch = R.chans; ch; ch = ch->next) {
                    if (ch->id && ch->id->verbs == d->ctx) {
                        chanMarkAsync(ch, ASYNC_DEVICE_FATAL);
                        ch->notify_pending = 1;
                    }
                }
            } else if (t == IBV_EVENT_PORT_ERR || t == IBV_EVENT_PORT_ACTIVE) {
                rlog(RDMA_LOG_NOTICE, "RDMA: %s port %d: %s", ibv_get_device_name(d->ctx->device),
                     port, ibv_event_type_str(t));
            }
        }
    }
    notifyMarked();
    UNLOCK();
}

/* ----------------------------------------------------- Client connect --- */

rdmaChan *rdmaChanConnect(const char *addr, int port, const char *src, size_t rx_size,
                          int comp_vector, long timeout_ms, char *err, size_t errlen) {
    struct sockaddr_storage dst, srcss;
    struct epoll_event ev;
    rdmaChan *ch;

    if (!R.initialized && rdmaInit(NULL, err, errlen) == -1) return NULL;
    if (resolveAddr(addr, port, &dst, err, errlen) == -1) return NULL;
    if (src && *src && resolveAddr(src, 0, &srcss, err, errlen) == -1) return NULL;
    if (!(ch = chanNew())) {
        seterr(err, errlen, "out of memory");
        return NULL;
    }
    snprintf(ch->peer_desc, sizeof(ch->peer_desc), strchr(addr, ':') ? "[%s]:%d" : "%s:%d", addr, port);
    ch->state = RDMA_CHAN_CONNECTING;
    ch->comp_vector = comp_vector;
    ch->rx_size_wanted = rx_size ? rx_size : RDMA_RX_SIZE_DEFAULT;
    if (ch->rx_size_wanted < RDMA_RX_SIZE_MIN) ch->rx_size_wanted = RDMA_RX_SIZE_MIN;
    if (ch->rx_size_wanted > RDMA_RX_SIZE_MAX) ch->rx_size_wanted = RDMA_RX_SIZE_MAX;
    ch->tx_want = ch->rx_size_wanted;
    if (timeout_ms <= 0) timeout_ms = 5000;
    if (!(ch->cm_ch = rdma_create_event_channel())) {
        seterr(err, errlen, "rdma_create_event_channel: %s (no RDMA device or rdma_cm?)", strerror(errno));
        goto err;
    }
    setNonBlock(ch->cm_ch->fd);
    if (rdma_create_id(ch->cm_ch, &ch->id, ch, RDMA_PS_TCP)) {
        seterr(err, errlen, "rdma_create_id: %s", strerror(errno));
        goto err;
    }
    if ((ch->epfd = epoll_create1(EPOLL_CLOEXEC)) == -1) {
        seterr(err, errlen, "epoll_create1: %s", strerror(errno));
        goto err;
    }
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN;
    ev.data.u32 = 1;
    if (epoll_ctl(ch->epfd, EPOLL_CTL_ADD, ch->cm_ch->fd, &ev) == -1) {
        seterr(err, errlen, "epoll_ctl: %s", strerror(errno));
        goto err;
    }
    if (rdma_resolve_addr(ch->id, (src && *src) ? (struct sockaddr *)&srcss : NULL,
                          (struct sockaddr *)&dst, (int)timeout_ms)) {
        seterr(err, errlen, "rdma_resolve_addr(%s): %s", ch->peer_desc, strerror(errno));
        goto err;
    }
    ch->created = monoSeconds();
    return ch;

err:
    STAT_ADD(err_connect, 1);
    rdmaChanClose(ch);
    return NULL;
}

/* Client channel: one step of the connect state machine, or a later cm
 * event. Returns RDMA_EV_CONNECTED when the connect finished either way. */
static int chanHandleClientCm(rdmaChan *ch) {
    cmEvent e;
    int ev = 0;
    while (getCmEvent(ch->cm_ch, &e) == 0) {
        if (ch->state != RDMA_CHAN_CONNECTING) {
            chanHandleCmEvent(ch, &e);
            chanApplyAsync(ch);
            ev |= RDMA_EV_READABLE;
            continue;
        }
        switch (e.type) {
        case RDMA_CM_EVENT_ADDR_RESOLVED:
            if (rdma_resolve_route(ch->id, 5000))
                chanFail(ch, &R.stats.err_connect, "rdma_resolve_route: %s", strerror(errno));
            break;
        case RDMA_CM_EVENT_ROUTE_RESOLVED: {
            struct rdma_conn_param param;
            struct epoll_event pev;
            char err[256];
            int rv;
            chanSetAckTimeout(ch);
            if ((rv = chanCreateQP(ch, ch->rx_size_wanted, ch->comp_vector, err, sizeof(err))) != 0) {
                chanFail(ch, rv == RDMA_NO_PINNED ? &R.stats.err_pinned_limit : &R.stats.err_connect,
                         "%s", err);
                break;
            }
            memset(&pev, 0, sizeof(pev));
            pev.events = EPOLLIN;
            pev.data.u32 = 2;
            epoll_ctl(ch->epfd, EPOLL_CTL_ADD, ch->comp_ch->fd, &pev);
            memset(&param, 0, sizeof(param));
            param.responder_resources = 1;
            param.initiator_depth = 1;
            param.retry_count = RDMA_RETRY_COUNT;
            param.rnr_retry_count = 7;          /* for ever: a busy peer is alive */
            if (rdma_connect(ch->id, &param))
                chanFail(ch, &R.stats.err_connect, "rdma_connect: %s", strerror(errno));
            break;
        }
        case RDMA_CM_EVENT_ESTABLISHED:
            ch->state = RDMA_CHAN_CONNECTED;
            chanCheckTimers(ch);
            if (chanSendBuffer(ch) == -1 && errno != EAGAIN) {
                chanFail(ch, &R.stats.err_connect, "cannot send our buffer");
            } else {
                STAT_ADD(connected, 1);
            }
            break;
        case RDMA_CM_EVENT_REJECTED:
            if (e.reason[0])
                chanFail(ch, &R.stats.err_connect, "connection refused by %s: %s",
                         ch->peer_desc, e.reason);
            else
                chanFail(ch, &R.stats.err_connect, "connection refused (no RDMA listener on %s?)",
                         ch->peer_desc);
            break;
        default:
            chanFail(ch, &R.stats.err_connect, "%s (status %d)", rdma_event_str(e.type), e.status);
            break;
        }
        if (ch->state != RDMA_CHAN_CONNECTING) ev |= RDMA_EV_CONNECTED;
    }
    return ev;
}

/* ----------------------------------------------------------- Channel --- */

int rdmaChanFd(rdmaChan *ch) {
    if (!ch->server) return ch->epfd;
    return ch->comp_ch ? ch->comp_ch->fd : -1;
}

int rdmaChanReadPending(rdmaChan *ch) {
    chanApplyAsync(ch);
    if (ch->rx_written > ch->rx_read) return 1;
    return (ch->state == RDMA_CHAN_CLOSED || ch->state == RDMA_CHAN_ERROR) && !ch->eof_reported;
}

/* Bytes that fit in the staging ring at once (contiguously). */
static size_t stagingRoom(rdmaChan *ch) {
    size_t used, pos;
    if (!ch->tx.data) return ch->tx_want;      /* made on first write */
    used = (size_t)(ch->st_in - ch->st_out);
    pos = (size_t)(ch->st_in % ch->tx.len);
    if (used >= ch->tx.len) return 0;
    return (ch->tx.len - pos) < (ch->tx.len - used) ? (ch->tx.len - pos) : (ch->tx.len - used);
}

int rdmaChanWritable(rdmaChan *ch) {
    chanApplyAsync(ch);
    if (ch->state == RDMA_CHAN_ERROR || ch->state == RDMA_CHAN_CLOSED) return 1;
    if (ch->state != RDMA_CHAN_CONNECTED || !ch->peer_known) return 0;
    return ch->tx_off < ch->peer_len && sqOutstanding(ch) < RDMA_MAX_WRS - 1 && stagingRoom(ch) > 0;
}

int rdmaChanHandleEvents(rdmaChan *ch) {
    int ev = 0;
    int could_write = rdmaChanWritable(ch);   /* applies async marks */

    if (!ch->server && ch->epfd != -1) {
        struct epoll_event evs[2];
        /* Drain the epoll set's readiness; the channels are non-blocking
         * and are polled below in any case. */
        epoll_wait(ch->epfd, evs, 2, 0);
        if (ch->cm_ch) ev |= chanHandleClientCm(ch);
    }
    chanHandleCompChannel(ch);
    if (ch->rx_turn_pending && ch->state == RDMA_CHAN_CONNECTED) chanSendBuffer(ch);
    if (rdmaChanReadPending(ch)) ev |= RDMA_EV_READABLE;
    if (!could_write && rdmaChanWritable(ch)) ev |= RDMA_EV_WRITABLE;
    return ev;
}

ssize_t rdmaChanRead(rdmaChan *ch, void *buf, size_t len) {
    size_t avail = ch->rx_written - ch->rx_read;
    size_t n;

    chanApplyAsync(ch);
    if (ch->state == RDMA_CHAN_ERROR) {
        chanSettleFlush(ch);
        ch->eof_reported = 1;
        errno = ECONNRESET;
        return -1;
    }
    if (avail == 0) {
        if (ch->state == RDMA_CHAN_CLOSED) {
            ch->eof_reported = 1;
            return 0;
        }
        errno = (ch->state == RDMA_CHAN_CONNECTED) ? EAGAIN : ENOTCONN;
        if (ch->state == RDMA_CHAN_HANDSHAKE || ch->state == RDMA_CHAN_CONNECTING) errno = EAGAIN;
        return -1;
    }
    n = len < avail ? len : avail;
    memcpy(buf, ch->rx.data + ch->rx_read, n);
    ch->rx_read += n;
    chanCheck(ch);
    if (ch->rx_read == ch->rx.len && ch->state == RDMA_CHAN_CONNECTED) chanRxTurn(ch);
    return (ssize_t)n;
}

/* Make the staging ring the size wanted, if nothing is in flight on it.
 * Never larger than the peer can take in one turn. */
static int stagingResize(rdmaChan *ch) {
    size_t want = ch->tx_want < ch->peer_len ? ch->tx_want : ch->peer_len;
    char err[256];
    want = roundPages(want);
    if (ch->tx.data && (ch->tx.len >= want || ch->st_in != ch->st_out)) return 0;
    if (!ch->tx.data) {
        /* A client's first write (a server's ring exists from the accept). */
        int rv = bufAlloc(&ch->tx, ch->pd, want, 0, err, sizeof(err));
        if (rv != 0) {
            chanFail(ch, noBufCounter(rv), "no staging buffer: %s", err);
            return -1;
        }
    } else if (bufReplace(&ch->tx, ch->pd, want, 0, err, sizeof(err)) == -1) {
        /* Growing after a grant: keep going on the ring we have. */
        rlogPeer(RDMA_LOG_NOTICE, "RDMA: connection %s keeps its %zu KiB staging ring: %s",
                 ch->peer_desc, ch->tx.len / 1024, err);
        ch->tx_want = ch->tx.len;
    }
    /* The ring is empty (st_in == st_out), so any position in it will do:
     * st_in and st_out go on from where they are, as the st_end[] of sends
     * still in flight (a control message) expect. */
    return 0;
}

/* How many bytes can be written now (0 with errno set when none). */
static size_t chanWriteRoom(rdmaChan *ch) {
    size_t room, peer_room;
    chanApplyAsync(ch);
    if (ch->state == RDMA_CHAN_ERROR || ch->state == RDMA_CHAN_CLOSED) {
        errno = (ch->state == RDMA_CHAN_CLOSED) ? EPIPE : ECONNRESET;
        return 0;
    }
    if (ch->state != RDMA_CHAN_CONNECTED || !ch->peer_known || ch->tx_off >= ch->peer_len) {
        errno = EAGAIN;
        return 0;
    }
    if (stagingResize(ch) == -1) {
        errno = ECONNRESET;
        return 0;
    }
    if (!sqHasRoom(ch)) {
        errno = (ch->state == RDMA_CHAN_ERROR) ? ECONNRESET : EAGAIN;
        return 0;
    }
    if ((room = stagingRoom(ch)) == 0) {
        chanPollCQ(ch);             /* completions free the ring */
        room = stagingRoom(ch);
    }
    peer_room = ch->peer_len - ch->tx_off;
    if (room > peer_room) room = peer_room;
    if (room == 0) errno = EAGAIN;
    return room;
}

static char *stagingHead(rdmaChan *ch) {
    return ch->tx.data + (size_t)(ch->st_in % ch->tx.len);
}

/* Post the n bytes just copied at the ring's head to tx_off of the peer's
 * buffer. */
static ssize_t chanPostStaged(rdmaChan *ch, size_t n) {
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    sge.addr = (uintptr_t)stagingHead(ch);
    sge.length = (uint32_t)n;
    sge.lkey = ch->tx.mr->lkey;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.imm_data = htonl((uint32_t)n);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = ch->peer_addr + ch->tx_off;
    wr.wr.rdma.rkey = ch->peer_rkey;
    ch->st_in += n;                 /* before sqPost: it records st_in */
    if (sqPost(ch, &wr, 0) == -1) {
        ch->st_in -= n;
        errno = ECONNRESET;
        return -1;
    }
    ch->tx_off += n;
    chanCheck(ch);
    STAT_ADD(writes_posted, 1);
    STAT_ADD(doorbells, 1);
    STAT_ADD(bytes_sent, n);
    return (ssize_t)n;
}

/* Writes go out in as few work requests as the ring allows: one, or two
 * when the data wraps around the ring's end. */
ssize_t rdmaChanWrite(rdmaChan *ch, const void *buf, size_t len) {
    size_t done = 0;
    while (done < len) {
        size_t n = chanWriteRoom(ch);
        if (n == 0) break;
        if (n > len - done) n = len - done;
        memcpy(stagingHead(ch), (const char *)buf + done, n);
        if (chanPostStaged(ch, n) == -1) break;
        done += n;
    }
    if (done) return (ssize_t)done;
    return len ? -1 : 0;
}

ssize_t rdmaChanWritev(rdmaChan *ch, const struct iovec *iov, int iovcnt) {
    size_t done = 0;
    int i = 0;
    size_t ioff = 0;                /* offset inside iov[i] */
    while (i < iovcnt) {
        size_t room = chanWriteRoom(ch), n = 0;
        char *dst;
        if (room == 0) break;
        dst = stagingHead(ch);
        while (i < iovcnt && n < room) {
            size_t take = iov[i].iov_len - ioff;
            if (take > room - n) take = room - n;
            memcpy(dst + n, (const char *)iov[i].iov_base + ioff, take);
            n += take;
            ioff += take;
            if (ioff == iov[i].iov_len) { i++; ioff = 0; }
        }
        if (n == 0) break;
        if (chanPostStaged(ch, n) == -1) break;
        done += n;
    }
    if (done) return (ssize_t)done;
    for (; i < iovcnt; i++) if (iov[i].iov_len) return -1;
    return 0;
}

/* ------------------------------------------------ Zero-copy sends --- */

int rdmaChanAttachRegion(rdmaChan *ch, void *base, size_t len, char *err, size_t errlen) {
    if (ch->region_mr) {
        seterr(err, errlen, "a region is already attached");
        return -1;
    }
    if (!ch->pd || ch->state != RDMA_CHAN_CONNECTED) {
        seterr(err, errlen, "the connection is not established");
        return -1;
    }
    if (pinnedRefuse(len, err, errlen)) {
        STAT_ADD(err_pinned_limit, 1);
        return -1;
    }
    /* Local access only: no peer can touch it. LOCAL_WRITE although only
     * our own sends read it: a read-only registration of pages never
     * written may pin the shared zero page on some kernels, and the NIC
     * would go on reading zeros after the owner writes them; asking for
     * write access makes the kernel pin private pages. */
    if (!(ch->region_mr = ibv_reg_mr(ch->pd, base, len, IBV_ACCESS_LOCAL_WRITE))) {
        char hint[200];
        int e = errno;
        pinnedRelease(len);
        STAT_ADD(err_register, 1);
        hint[0] = '\0';
        if (e == ENOMEM || e == EPERM || e == EAGAIN) memlockHint(hint, sizeof(hint));
        seterr(err, errlen, "ibv_reg_mr of %zu KiB failed: %s%s", len / 1024, strerror(e), hint);
        return -1;
    }
    ch->region_base = base;
    ch->region_len = len;
    return 0;
}

size_t rdmaChanRegionInFlight(rdmaChan *ch) {
    return (size_t)(ch->zc_in - ch->zc_out);
}

ssize_t rdmaChanWriteRegion(rdmaChan *ch, const struct iovec *iov, int iovcnt, size_t chunk) {
    struct ibv_send_wr wrs[RDMA_REGION_BATCH], *bad;
    struct ibv_sge sges[RDMA_REGION_BATCH];
    size_t total = 0, ioff = 0, room;
    uint64_t outstanding;
    int n = 0, i = 0;

    chanApplyAsync(ch);
    if (ch->state == RDMA_CHAN_ERROR || ch->state == RDMA_CHAN_CLOSED) {
        errno = (ch->state == RDMA_CHAN_CLOSED) ? EPIPE : ECONNRESET;
        return -1;
    }
    if (!ch->region_mr) {
        errno = EINVAL;
        return -1;
    }
    if (ch->state != RDMA_CHAN_CONNECTED || !ch->peer_known || ch->tx_off >= ch->peer_len ||
        !sqHasRoom(ch)) {
        errno = (ch->state == RDMA_CHAN_ERROR) ? ECONNRESET : EAGAIN;
        return -1;
    }
    if (chunk == 0) chunk = ch->peer_len;
    outstanding = sqOutstanding(ch);
    room = ch->peer_len - ch->tx_off;
    while (i < iovcnt && n < RDMA_REGION_BATCH && room > 0 &&
           outstanding + (uint64_t)n < RDMA_MAX_WRS - 1) {
        const char *p = (const char *)iov[i].iov_base + ioff;
        size_t take = iov[i].iov_len - ioff;
        if (take == 0) { i++; ioff = 0; continue; }
        if (p < ch->region_base || p + take > ch->region_base + ch->region_len) {
            if (n > 0) break;           /* post what came before it */
            errno = EINVAL;             /* the caller's bug, not the peer's */
            return -1;
        }
        if (take > chunk) take = chunk;
        if (take > room) take = room;
        sges[n].addr = (uintptr_t)p;
        sges[n].length = (uint32_t)take;
        sges[n].lkey = ch->region_mr->lkey;
        memset(&wrs[n], 0, sizeof(wrs[n]));
        wrs[n].wr_id = ch->sq_posted + 1 + (uint64_t)n;
        wrs[n].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
        wrs[n].imm_data = htonl((uint32_t)take);
        wrs[n].sg_list = &sges[n];
        wrs[n].num_sge = 1;
        wrs[n].wr.rdma.remote_addr = ch->peer_addr + ch->tx_off + total;
        wrs[n].wr.rdma.rkey = ch->peer_rkey;
        if (n > 0) wrs[n - 1].next = &wrs[n];
        total += take;
        room -= take;
        ioff += take;
        if (ioff == iov[i].iov_len) { i++; ioff = 0; }
        n++;
    }
    if (n == 0) {
        errno = EAGAIN;
        return -1;
    }
    /* Signal the last one: its completion releases all of them (RC sends
     * complete in order), so the owner learns promptly which part of its
     * region the NIC no longer reads. */
    wrs[n - 1].send_flags = IBV_SEND_SIGNALED;
    if (ibv_post_send(ch->id->qp, &wrs[0], &bad)) {
        /* Those before bad were posted and may be read by the NIC until the
         * channel is closed, which the caller must now do. */
        chanFail(ch, &R.stats.err_completion, "ibv_post_send: %s", strerror(errno));
        errno = ECONNRESET;
        return -1;
    }
    for (int k = 0; k < n; k++) sqPosted(ch, sges[k].length);
    ch->unsignaled = 0;
    ch->tx_off += total;
    chanCheck(ch);
    STAT_ADD(writes_posted, (unsigned long long)n);
    STAT_ADD(bytes_sent, total);
    STAT_ADD(region_bytes_sent, total);
    STAT_ADD(doorbells, 1);
    return (ssize_t)total;
}

/* The watchdog's verdict (chanCheckTimers), or the stuck-peer limit's,
 * with what an operator needs to tell a stalled peer (our queue pair still
 * ready to send: the peer's NIC refuses our writes for want of posted
 * receives, or never answers) from a local stall (our queue pair already
 * failed, its completion not yet seen). */
static void chanFailSilentPeer(rdmaChan *ch, int limit) {
    struct ibv_qp_attr attr;
    struct ibv_qp_init_attr init;
    const char *qps = "unknown";
    static const char *const names[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
    if (ibv_query_qp(ch->id->qp, &attr, IBV_QP_STATE, &init) == 0 &&
        (unsigned)attr.qp_state < sizeof(names) / sizeof(names[0]))
        qps = names[attr.qp_state];
    chanFail(ch, &R.stats.err_completion, "the peer acknowledged nothing for %d seconds "
             "(%llu sends outstanding, last completion %llds ago, queue pair %s)",
             limit, (unsigned long long)sqOutstanding(ch),
             (long long)(monoSeconds() - ch->sq_progress), qps);
}

void rdmaChanCron(rdmaChan *ch) {
    rdmaCtrlMsg msg;
    chanApplyAsync(ch);
    if (ch->state != RDMA_CHAN_CONNECTED) return;
    if (ch->rx_turn_pending) chanSendBuffer(ch);
    rdmaCtrlInit(&msg, RDMA_OP_KEEPALIVE);
    if (sqOutstanding(ch) > 0) chanPollCQ(ch);
    if (ch->state != RDMA_CHAN_CONNECTED) return;
    if (sqOutstanding(ch) > 0) {
        int limit = ch->watchdog ? RDMA_PEER_DEAD_SECONDS : RDMA_PEER_STUCK_SECONDS;
        if (monoSeconds() - ch->sq_progress > limit) {
            chanFailSilentPeer(ch, limit);
            return;
        }
        /* The last sends unsignaled: nothing would ever report their
         * completion, nor free the staging they hold. A signaled keepalive
         * completes them all (RC sends complete in order). Otherwise the
         * sends in flight are the transport's to time out: a keepalive
         * queued behind them would tell nothing more. */
        if (ch->unsignaled > 0 && chanSendCtrl(ch, &msg) == 0) STAT_ADD(keepalives_sent, 1);
        return;
    }
    if (monoSeconds() - ch->last_send < RDMA_KEEPALIVE_INTERVAL) return;
    if (chanSendCtrl(ch, &msg) == 0) STAT_ADD(keepalives_sent, 1);
}

static void chanUnauthDone(rdmaChan *ch) {
    if (!ch->unauth) return;
    ch->unauth = 0;
    __atomic_sub_fetch(&R.unauth, 1, __ATOMIC_RELAXED);
}

void rdmaChanSetRxSize(rdmaChan *ch, size_t rx_size) {
    chanUnauthDone(ch);
    if (rx_size < RDMA_RX_SIZE_MIN) rx_size = RDMA_RX_SIZE_MIN;
    if (rx_size > RDMA_RX_SIZE_MAX) rx_size = RDMA_RX_SIZE_MAX;
    ch->rx_next_size = rx_size;
    ch->tx_want = rx_size;
}

void rdmaChanReleaseFd(rdmaChan *ch) { ch->epfd_released = 1; }

/* Under the lock: chanNotify reads the pair under it, from the thread that
 * polls the library's events, and must never see a new callback with old
 * data (or the reverse): on a weakly ordered CPU (aarch64) the two stores
 * could be seen in either order. */
void rdmaChanSetNotify(rdmaChan *ch, rdmaNotifyFn fn, void *data) {
    LOCK();
    ch->notify = fn;
    ch->notify_data = data;
    UNLOCK();
}

rdmaChanState rdmaChanGetState(rdmaChan *ch) {
    chanApplyAsync(ch);
    return ch->state;
}

const char *rdmaChanError(rdmaChan *ch) {
    chanApplyAsync(ch);
    chanSettleFlush(ch);
    if (ch->err[0]) return ch->err;
    if (ch->state == RDMA_CHAN_CLOSED) return "connection closed by peer";
    return NULL;
}

int rdmaChanPeerAddr(rdmaChan *ch, char *ip, size_t iplen, int *port) {
    if (!ch->id) return -1;
    formatAddr(rdma_get_peer_addr(ch->id), ip, iplen, port);
    return 0;
}

int rdmaChanLocalAddr(rdmaChan *ch, char *ip, size_t iplen, int *port) {
    if (!ch->id) return -1;
    formatAddr(rdma_get_local_addr(ch->id), ip, iplen, port);
    return 0;
}

size_t rdmaChanPinnedBytes(rdmaChan *ch) {
    return ch->ctrl_rx.len + ch->ctrl_tx.len + ch->rx.len + ch->tx.len;
}

/* ----------------------------------------------------- Blocking waits --- */

/* Wait until cond(ch) holds, handling events, for up to timeout_ms. */
static int chanWait(rdmaChan *ch, int (*cond)(rdmaChan *), long timeout_ms) {
    long long deadline = timeout_ms < 0 ? -1 : monoMillis() + timeout_ms;
    for (;;) {
        struct pollfd pfd;
        int wait;
        rdmaChanHandleEvents(ch);
        if (cond(ch)) return 0;
        if (deadline >= 0 && monoMillis() >= deadline) {
            errno = ETIMEDOUT;
            return -1;
        }
        pfd.fd = rdmaChanFd(ch);
        pfd.events = POLLIN;
        pfd.revents = 0;
        wait = 100;         /* re-check at least this often */
        if (deadline >= 0 && deadline - monoMillis() < wait) wait = (int)(deadline - monoMillis());
        if (wait < 0) wait = 0;
        if (pfd.fd == -1) {
            errno = ENOTCONN;
            return -1;
        }
        if (poll(&pfd, 1, wait) == -1 && errno != EINTR) return -1;
    }
}

static int condConnected(rdmaChan *ch) { return ch->state != RDMA_CHAN_CONNECTING; }
static int condReadable(rdmaChan *ch) { return rdmaChanReadPending(ch); }
static int condWritable(rdmaChan *ch) { return rdmaChanWritable(ch); }

int rdmaChanWaitConnected(rdmaChan *ch, long timeout_ms) {
    if (chanWait(ch, condConnected, timeout_ms) == -1) return -1;
    if (ch->state != RDMA_CHAN_CONNECTED) {
        errno = ECONNREFUSED;
        return -1;
    }
    return 0;
}

int rdmaChanWaitReadable(rdmaChan *ch, long timeout_ms) {
    return chanWait(ch, condReadable, timeout_ms);
}

int rdmaChanWaitWritable(rdmaChan *ch, long timeout_ms) {
    if (chanWait(ch, condWritable, timeout_ms) == -1) return -1;
    if (ch->state == RDMA_CHAN_ERROR || ch->state == RDMA_CHAN_CLOSED) {
        errno = ECONNRESET;
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ Close --- */

/* Under the lock from start to end: the library's event handlers (perhaps
 * in another thread) look at every channel on the list, and at the ids
 * their events name, only while they hold it. */
static void chanFree(rdmaChan *ch) {
    LOCK();
    chanUnauthDone(ch);
    if (ch->watchdog) __atomic_sub_fetch(&R.watched, 1, __ATOMIC_RELAXED);
    if (ch->listener) listenerRemoveHandshake(ch->listener, ch);
    if (ch->id && (ch->state == RDMA_CHAN_CONNECTED || ch->state == RDMA_CHAN_HANDSHAKE ||
                   ch->state == RDMA_CHAN_CLOSED || ch->state == RDMA_CHAN_ERROR))
        rdma_disconnect(ch->id);
    chanDestroyQP(ch);
    if (ch->id) rdma_destroy_id(ch->id);
    if (ch->cm_ch) rdma_destroy_event_channel(ch->cm_ch);
    if (ch->epfd != -1 && !ch->epfd_released) close(ch->epfd);
    if (ch->prev) ch->prev->next = ch->next;
    else R.chans = ch->next;
    if (ch->next) ch->next->prev = ch->prev;
    __atomic_sub_fetch(&R.nchans, 1, __ATOMIC_RELAXED);
    UNLOCK();
    free(ch);
}

/* A server channel closed right after a write (an error reply before
 * refusing a client, the reply to QUIT) must not disconnect before that
 * write arrived: disconnecting flushes the send queue. Such a channel
 * lingers, owner-less, until its sends complete (rdmaCron() checks), at
 * most RDMA_LINGER_SECONDS. */
#define RDMA_LINGER_SECONDS 2

void rdmaChanClose(rdmaChan *ch) {
    if (!ch || ch->lingering) return;
    chanApplyAsync(ch);
    chanSettleFlush(ch);
    /* Under the lock (see rdmaChanSetNotify): a lingering channel passes
     * from its owner's thread to rdmaCron's, and the lock's release and
     * acquire carry every field its owner wrote (the send queue's
     * counters, linger_since) to that thread. */
    LOCK();
    ch->notify = NULL;
    /* A channel that sends from its owner's region never lingers: once
     * this returns, the NIC reads nothing more from that memory. */
    if (ch->server && ch->state == RDMA_CHAN_CONNECTED && ch->id && ch->id->qp &&
        sqOutstanding(ch) > 0 && !ch->region_mr) {
        rdmaCtrlMsg msg;
        /* The last send must be signaled for its completion to show. */
        rdmaCtrlInit(&msg, RDMA_OP_KEEPALIVE);
        if (ch->unsignaled == 0 || chanSendCtrl(ch, &msg) == 0) {
            ch->linger_since = monoSeconds();
            ch->lingering = 1;
            UNLOCK();
            return;
        }
    }
    UNLOCK();
    chanFree(ch);
}

void rdmaCron(void) {
    rdmaChan *ch, *next;
    time_t now = monoSeconds();
    peerLogFlush(now);
    LOCK();
    ch = R.chans;
    while (ch) {
        next = ch->next;
        if (ch->lingering) {
            chanPollCQ(ch);
            if (sqOutstanding(ch) == 0 || ch->state != RDMA_CHAN_CONNECTED ||
                now - ch->linger_since >= RDMA_LINGER_SECONDS)
                chanFree(ch);
        }
        ch = next;
    }
    UNLOCK();
}
