/* rdma_chan.h -- RDMA channel: a byte stream over an RC queue pair.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * One implementation of SKV's RDMA transport, shared by the server (src/rdma.c,
 * a ConnectionType), the client library (src/hiredis_rdma.c, for redis-cli
 * and redis-benchmark) and Nic-KV. It depends on rdma-core (libibverbs,
 * librdmacm) and libc only: no event loop, no allocator, no logger of its
 * own. The caller polls the file descriptors it hands out, in whatever loop
 * it has, and calls back in when they are readable.
 *
 * The wire protocol is "Valkey over RDMA" version 1, so that existing RDMA
 * clients can talk to SKV; it is written down at the top of rdma_chan.c.
 *
 * Threads: a process may drive channels from several threads, each channel
 * from one thread at a time (its owner). The library's own event handlers
 * (rdmaListenerHandleEvents, rdmaHandleAsyncEvents, rdmaCron) may run in
 * another thread: what they learn about a channel is applied by its owner's
 * next call, and its notify callback (which must then be thread-safe) says
 * so. Counters and the pinned-memory account are atomic.
 *
 * Everything a peer sends is checked. A peer that breaks the protocol (a
 * control message of the wrong size, an unknown opcode, an imm_data that
 * points past our buffer, a buffer length out of range, a non-zero feature
 * request) puts its channel into the error state with a message saying what
 * it did; the caller closes that channel and nothing else is affected.
 */
#ifndef SKV_RDMA_CHAN_H
#define SKV_RDMA_CHAN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "rdma_proto.h"   /* control messages, RDMA_CTRL_MSG_SIZE */

/* ------------------------------------------------------------ Limits --- */

/* Receive buffer sizes a peer may announce, and we may use. */
/* Debug-build invariants. Built with SKV_DEBUG defined (`make SKV_DEBUG=yes`
 * after `make clean`, see RDMA.md "Testing"), the library checks its own
 * counters where they change: sends completed <= sends posted, bytes read
 * <= bytes written <= the receive buffer, staged bytes sent <= staged,
 * region bytes completed <= posted, our write offset <= the peer's buffer.
 * A failed check is a bug here, never a peer's doing: it logs and aborts.
 * Nothing a peer sent is ever checked this way (that closes only its
 * connection, with a log line). Without SKV_DEBUG, the checks compile to
 * nothing. */
#ifdef SKV_DEBUG
void rdmaInvariantFailed(const char *cond, const char *file, int line) __attribute__((noreturn));
#define rdmaInvariant(cond) ((cond) ? (void)0 : rdmaInvariantFailed(#cond, __FILE__, __LINE__))
#else
#define rdmaInvariant(cond) ((void)0)
#endif

#define RDMA_RX_SIZE_MIN        (64*1024)
#define RDMA_RX_SIZE_MAX        (16*1024*1024)
#define RDMA_RX_SIZE_DEFAULT    (1024*1024)
/* Receive buffer of a server connection before the client authenticated:
 * small, so that a flood of idle unauthenticated connections pins little. */
#define RDMA_RX_SIZE_PREAUTH    RDMA_RX_SIZE_MIN
/* Our staging buffer for data we send, before the grant: replies to an
 * unauthenticated client are short. After the grant it is as large as the
 * receive buffer (and never larger than what the peer can take). */
#define RDMA_TX_SIZE_PREAUTH    (16*1024)
/* Work requests per queue (send and receive), as the protocol says. */
#define RDMA_MAX_WRS            1024
/* A control message is exactly this many bytes. */
/* A refused connection request carries RDMA_REJECT_TAG and up to this many
 * bytes of text in the reject's private data (rdma_cm allows 148 on IB/RoCE). */
#define RDMA_REJECT_TAG         "skv:"
#define RDMA_REJECT_REASON_MAX  136
/* Seconds a server connection may take to finish its handshake. */
#define RDMA_HANDSHAKE_TIMEOUT  10
/* Seconds between keepalives on an otherwise idle connection. */
#define RDMA_KEEPALIVE_INTERVAL 3

/* ------------------------------------------------------------- Types --- */

typedef struct rdmaChan rdmaChan;
typedef struct rdmaListener rdmaListener;

typedef enum rdmaChanState {
    RDMA_CHAN_CONNECTING = 0, /* client: resolving, connecting */
    RDMA_CHAN_HANDSHAKE,      /* server: established, waiting for the
                               * peer's first RegisterXferMemory */
    RDMA_CHAN_CONNECTED,      /* data may flow */
    RDMA_CHAN_CLOSED,         /* the peer disconnected (EOF) */
    RDMA_CHAN_ERROR           /* failed: rdmaChanError() says why */
} rdmaChanState;

/* What rdmaChanHandleEvents() found. */
#define RDMA_EV_READABLE  (1<<0)  /* data to read, or EOF, or error */
#define RDMA_EV_WRITABLE  (1<<1)  /* room to write opened up */
#define RDMA_EV_CONNECTED (1<<2)  /* a client connect completed (or failed) */

/* Counters of the whole process; see rdmaGetStats(). Errors are counted by
 * kind so that an operator can tell a misbehaving client from a network
 * problem. Every field is an unsigned long long (rdmaGetStats relies on it). */
typedef struct rdmaStats {
    unsigned long long bytes_sent;        /* payload written to peers */
    unsigned long long bytes_received;    /* payload written to us */
    unsigned long long writes_posted;     /* RDMA WRITE_WITH_IMM posted */
    unsigned long long doorbells;         /* ibv_post_send calls carrying them */
    unsigned long long region_bytes_sent; /* of bytes_sent, sent without a copy */
    unsigned long long ctrl_sent;         /* control messages sent */
    unsigned long long ctrl_received;     /* control messages received */
    unsigned long long keepalives_sent;
    unsigned long long accepted;          /* server connections accepted */
    unsigned long long connected;         /* client connections made */
    unsigned long long err_protocol;      /* bad size, opcode, feature */
    unsigned long long err_bad_imm;       /* imm_data past our buffer */
    unsigned long long err_bad_buffer;    /* RegisterXferMemory out of range */
    unsigned long long err_completion;    /* failed work completion */
    unsigned long long err_async;         /* fatal async event (QP, CQ, device) */
    unsigned long long err_register;      /* ibv_reg_mr failed (memlock?) */
    unsigned long long err_pinned_limit;  /* refused: pinned-memory cap */
    unsigned long long err_unauth_limit;  /* refused: too many unauthenticated */
    unsigned long long err_handshake;     /* handshake timed out or failed */
    unsigned long long err_connect;       /* outgoing connect failed */
} rdmaStats;

/* Log hook: level is one of the RDMA_LOG_* below. */
#define RDMA_LOG_DEBUG   0
#define RDMA_LOG_VERBOSE 1
#define RDMA_LOG_NOTICE  2
#define RDMA_LOG_WARNING 3
/* Lines a peer can cause (a refused or failed connection) at NOTICE and
 * above are rate limited: at most RDMA_PEER_LOG_BURST in
 * RDMA_PEER_LOG_WINDOW seconds, then one line saying how many were left
 * out. rdmaPeerLogAllow() says whether the owner may log such a line of
 * its own at that level now (and counts it). */
#define RDMA_PEER_LOG_BURST  20
#define RDMA_PEER_LOG_WINDOW 10
typedef void (*rdmaLogFn)(int level, const char *msg);
int rdmaPeerLogAllow(int level);
/* fn, when set, says whether the owner logs at its verbose level now (an
 * operator asked for every line): then no peer line is rate limited. */
typedef int (*rdmaLogAllFn)(void);
void rdmaSetPeerLogAll(rdmaLogAllFn fn);

/* Called when a channel's state changed outside of its own fd events (the
 * peer disconnected, a fatal async event): the owner should look at it. */
typedef void (*rdmaNotifyFn)(rdmaChan *ch, void *data);

/* Called by rdmaListenerHandleEvents() for each connection that finished its
 * handshake. The owner takes the channel (and must close it eventually). */
typedef void (*rdmaAcceptFn)(rdmaChan *ch, void *data);

/* ----------------------------------------------------------- Library --- */

/* 1 in a build with RDMA; 0 in one made with `make BUILD_RDMA=no`, where
 * rdma_none.c stands in for this library and every call that would start
 * RDMA fails with "RDMA support was not built". */
int rdmaSupported(void);

/* Initialise once per process, before any other call and before any fork:
 * calls ibv_fork_init() so that registered memory is not shared with
 * children (BGSAVE, full sync). Returns 0, or -1 with a message in err. */
int rdmaInit(rdmaLogFn log, char *err, size_t errlen);

/* Cap on the bytes all channels together may register (pin). 0 = only the
 * process's RLIMIT_MEMLOCK. New connections and buffer growth past the cap
 * are refused with a clear error. */
void rdmaSetPinnedLimit(size_t bytes);
size_t rdmaPinnedBytes(void);
size_t rdmaEffectivePinnedLimit(void);

/* Cap on accepted connections that are not granted yet (rdmaChanSetRxSize()
 * was not called: their client has not authenticated), handshaking ones
 * included; 0 = no cap. A connection request past it is refused at connect
 * time, with the reason in the reject. Each such connection costs its
 * queue pair's rings (RDMA_MAX_WRS work requests each way, kernel or
 * provider memory that the pinned-memory cap does not see) on top of its
 * registered buffers: this is what bounds that. */
#define RDMA_UNAUTH_LIMIT_DEFAULT 128
void rdmaSetUnauthLimit(int n);
int rdmaUnauthCount(void);
/* Connected channels whose transport may never time out a silent peer
 * (Soft-RoCE with retry count 7; a device without an ACK timeout): those
 * fall back to the 10 s watchdog. */
int rdmaWatchdogCount(void);

/* Check that one connection's worth of memory can be registered on the
 * device behind addr (NULL = the first device). On failure returns -1 with
 * a message that names RLIMIT_MEMLOCK when that is the cause. */
int rdmaProbeMemory(const char *addr, char *err, size_t errlen);

/* One descriptor for every device's asynchronous events (QP or CQ errors,
 * port changes, device fatal): poll it for reading and call
 * rdmaHandleAsyncEvents() when readable. -1 before any device is in use. */
int rdmaAsyncFd(void);
void rdmaHandleAsyncEvents(void);

/* Once a second: finish closing server channels that were closed with
 * sends still in flight (see rdmaChanClose()). */
void rdmaCron(void);

void rdmaGetStats(rdmaStats *out);
void rdmaResetStats(void);
/* The counters by the names INFO shows them under (after "rdma_"), in
 * INFO's order; the list ends with a NULL name. */
typedef struct rdmaStatField {
    const char *name;
    size_t offset;                        /* in rdmaStats */
} rdmaStatField;
extern const rdmaStatField rdmaStatFields[];
#define rdmaStatValue(st, f) (*(const unsigned long long *)((const char *)(st) + (f)->offset))
/* Live counts. */
int rdmaChanCount(void);

/* ---------------------------------------------------------- Listener --- */

/* Listen on addr:port (addr NULL or "" = every address). rx_size is the
 * receive buffer of an accepted connection once rdmaChanSetRxSize() allows
 * it (until then it is RDMA_RX_SIZE_PREAUTH); comp_vector < 0 spreads
 * connections over the device's completion vectors. */
rdmaListener *rdmaListen(const char *addr, int port, size_t rx_size,
                         int comp_vector, char *err, size_t errlen);
/* Poll this for reading; then call rdmaListenerHandleEvents(). */
int rdmaListenerFd(rdmaListener *l);
void rdmaListenerHandleEvents(rdmaListener *l, rdmaAcceptFn accept, void *data);
/* Close handshakes that took too long; call about once a second. */
void rdmaListenerCron(rdmaListener *l);
/* Stop listening. Accepted channels stay open. */
void rdmaListenerClose(rdmaListener *l);
/* The listener's device went away (DEVICE_REMOVAL): it must be closed. */
int rdmaListenerFailed(rdmaListener *l);
const char *rdmaListenerAddr(rdmaListener *l);
void rdmaListenerSetRxSize(rdmaListener *l, size_t rx_size);

/* ----------------------------------------------------------- Channel --- */

/* Start connecting to addr:port (source address src, may be NULL). Returns
 * a channel in RDMA_CHAN_CONNECTING, or NULL with a message in err. Poll
 * rdmaChanFd() and call rdmaChanHandleEvents(): RDMA_EV_CONNECTED says the
 * connect finished; rdmaChanState() says how. */
rdmaChan *rdmaChanConnect(const char *addr, int port, const char *src,
                          size_t rx_size, int comp_vector, long timeout_ms,
                          char *err, size_t errlen);

/* Blocking helpers: wait until connected / readable / writable, or until
 * timeout_ms passes (< 0 = no limit). Return 0, or -1 with errno set
 * (ETIMEDOUT, ECONNRESET, ...). */
int rdmaChanWaitConnected(rdmaChan *ch, long timeout_ms);
int rdmaChanWaitReadable(rdmaChan *ch, long timeout_ms);
int rdmaChanWaitWritable(rdmaChan *ch, long timeout_ms);

/* The descriptor to poll for reading. It never changes during the life of
 * the channel. There is no "writable" readiness in RDMA: a caller with
 * output pending asks rdmaChanWritable() after each event and before it
 * sleeps. */
int rdmaChanFd(rdmaChan *ch);
int rdmaChanHandleEvents(rdmaChan *ch);

/* Like read(2)/write(2): return bytes moved, 0 on EOF (read), or -1 with
 * errno EAGAIN (nothing now) or another errno (the channel failed; see
 * rdmaChanError()). Writes may be short. */
ssize_t rdmaChanRead(rdmaChan *ch, void *buf, size_t len);
ssize_t rdmaChanWrite(rdmaChan *ch, const void *buf, size_t len);
ssize_t rdmaChanWritev(rdmaChan *ch, const struct iovec *iov, int iovcnt);

/* Data buffered and not yet read, or an EOF/error not yet reported by a
 * read: the owner must call its read handler even without an fd event. */
int rdmaChanReadPending(rdmaChan *ch);
/* A write would move at least one byte now (or fail at once). */
int rdmaChanWritable(rdmaChan *ch);

/* Zero-copy sends, for an owner that sends the same bytes to many peers
 * (Nic-KV's backlog): the region [base, base+len) of the owner's memory is
 * registered in this channel's protection domain, with local access only
 * (no peer can read or write it).
 * Call once the channel is connected; counted against the pinned-memory
 * cap; released when the channel closes. Returns 0, or -1 with a message. */
int rdmaChanAttachRegion(rdmaChan *ch, void *base, size_t len, char *err, size_t errlen);

/* Post RDMA WRITE_WITH_IMMs straight from the attached region: one work
 * request per at most chunk bytes (0 = no limit) of the iovecs, which must
 * lie inside the region, all linked into one ibv_post_send (one doorbell).
 * Like rdmaChanWrite it may move fewer bytes than asked (the peer's buffer
 * or the send queue is full) and returns -1 with EAGAIN when it moves none;
 * -1 with another errno means the channel failed (some requests may have
 * been posted: the NIC may read the region until the channel is closed).
 * The bytes must stay unchanged until rdmaChanRegionInFlight() says the NIC
 * is done with them; the channel never lingers after rdmaChanClose(), so
 * once that returns the region may change too. */
ssize_t rdmaChanWriteRegion(rdmaChan *ch, const struct iovec *iov, int iovcnt, size_t chunk);

/* Bytes sent from the region whose writes have not completed: the last
 * this many bytes posted may still be read by the NIC. */
size_t rdmaChanRegionInFlight(rdmaChan *ch);

/* Send a keepalive if nothing was sent for RDMA_KEEPALIVE_INTERVAL
 * seconds; call about once a second. A dead peer then shows up as a failed
 * completion, within the transport's retry time. */
void rdmaChanCron(rdmaChan *ch);

/* The grant: the receive buffer used from the next buffer turn on, and the
 * staging buffer from the next time nothing is in flight (a server raises
 * both once the client authenticated). Bounded to [MIN, MAX]. */
void rdmaChanSetRxSize(rdmaChan *ch, size_t rx_size);

void rdmaChanSetNotify(rdmaChan *ch, rdmaNotifyFn fn, void *data);
rdmaChanState rdmaChanGetState(rdmaChan *ch);
const char *rdmaChanError(rdmaChan *ch);
/* "ip:port" of the peer / of our end; 0 on success. */
int rdmaChanPeerAddr(rdmaChan *ch, char *ip, size_t iplen, int *port);
int rdmaChanLocalAddr(rdmaChan *ch, char *ip, size_t iplen, int *port);
/* Bytes this channel has registered (its share of rdmaPinnedBytes()). */
size_t rdmaChanPinnedBytes(rdmaChan *ch);

/* The caller takes over the descriptor of a client channel and will close
 * it itself (hiredis does, in redisFree()); rdmaChanClose() leaves it. */
void rdmaChanReleaseFd(rdmaChan *ch);

/* Disconnect and free everything. Safe in any state. A server channel
 * with sends in flight finishes them first (at most 2 s, in rdmaCron()):
 * the caller must forget the channel and its descriptor either way. */
void rdmaChanClose(rdmaChan *ch);

#endif
