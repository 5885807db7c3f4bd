/* rdma.c -- RDMA connection type for the server, over src/rdma_chan.c.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * CT_RDMA is a ConnectionType like upstream's CT_Socket and CT_TLS: the rest
 * of the server reads, writes and closes RDMA connections through
 * connRead()/connWrite()/connClose() without knowing. What differs:
 *
 * - The channel is driven from server.el by the RDMA event-loop adapter
 *   (rdma_ae.c), which watches its descriptor for reading for the whole
 *   life of the connection: completions of every kind (data, the peer's
 *   buffer turns, keepalives, errors) arrive there. conn->fd stays -1, so
 *   upstream's anet helpers never touch it.
 * - There is no "writable" readiness in RDMA, and buffered input may not
 *   announce itself again. The adapter keeps the connections whose handlers
 *   can progress without an event; beforeSleep() calls
 *   rdmaProcessPendingData(), which runs them, and keeps the event loop
 *   from sleeping while any can.
 * - An accepted connection starts with a small receive buffer and gets the
 *   configured rdma-rx-size once its client has authenticated, so that
 *   unauthenticated connections pin little memory.
 * - Peer addresses come from rdma_cm (the "addr" hook of ConnectionType), so
 *   protected mode, CLIENT LIST and replication see real addresses.
 *
 * Clients and replicas reach the server on rdma-port; a replica with
 * rdma-replication yes connects to its master over RDMA (replicaof names
 * the master's rdma-port). AUTH, ACLs, protected mode, maxclients and the
 * client output buffer limits apply exactly as for TCP.
 */

#include "server.h"
#include "connhelpers.h"
#include "rdma.h"
#include "rdma_chan.h"
#include "rdma_ae.h"

#include <sys/resource.h>

rdmaServerConfig rdmaConf;

typedef struct rdmaConnection {
    connection c;
    rdmaChan *ch;
    rdmaAeChan *ae;           /* its registration in rdmaServer.ae, or NULL */
    int full_rx;              /* rdma-rx-size granted (client authenticated) */
} rdmaConnection;

static struct {
    int initialized;
    char init_err[256];       /* why rdmaInit() failed */
    rdmaListener *listeners[CONFIG_BINDADDR_MAX];
    int nlisteners;
    char status[320];         /* "off", "on", or "error: why not" */
    int retry;                /* not listening, but worth retrying */
    int open_port;            /* what the listeners were opened with */
    char *open_bind;
    int open_vector;
    rdmaAe *ae;               /* drives the connections' channels from server.el */
} rdmaServer = { .status = "off" };

ConnectionType CT_RDMA;

/* ----------------------------------------------------------- Helpers --- */

static void rdmaLogHook(int level, const char *msg) {
    int ll = level == RDMA_LOG_WARNING ? LL_WARNING :
             level == RDMA_LOG_NOTICE ? LL_NOTICE :
             level == RDMA_LOG_VERBOSE ? LL_VERBOSE : LL_DEBUG;
    serverLog(ll, "%s", msg);
}

/* At loglevel verbose (or debug) an operator asked for every line: the
 * library then rate limits no line about refused or failed connections. */
static int rdmaLogAll(void) {
    return server.verbosity <= LL_VERBOSE;
}

static void rdmaAsyncEventHandler(aeEventLoop *el, int fd, void *data, int mask) {
    UNUSED(el); UNUSED(fd); UNUSED(data); UNUSED(mask);
    rdmaHandleAsyncEvents();
}

/* The adapter exists even when the library could not start, so that a
 * connection object can always be made (and fail cleanly). */
static void rdmaEnsureAe(void) {
    if (rdmaServer.ae) return;
    rdmaServer.ae = rdmaAeCreate(server.el);
    if (!rdmaServer.ae) serverPanic("RDMA: out of memory");
}

/* Initialise the RDMA library once, on first use, and watch its async
 * events. Returns C_OK or C_ERR (logged). */
static int rdmaEnsureInit(void) {
    char err[256];
    rdmaEnsureAe();
    if (rdmaServer.initialized) return C_OK;
    if (rdmaInit(rdmaLogHook, err, sizeof(err)) == -1) {
        serverLog(LL_WARNING, "RDMA: cannot initialise: %s", err);
        snprintf(rdmaServer.init_err, sizeof(rdmaServer.init_err), "%s", err);
        return C_ERR;
    }
    if (aeCreateFileEvent(server.el, rdmaAsyncFd(), AE_READABLE, rdmaAsyncEventHandler, NULL) == AE_ERR) {
        snprintf(rdmaServer.init_err, sizeof(rdmaServer.init_err),
                 "cannot watch async events: %s", strerror(errno));
        serverLog(LL_WARNING, "RDMA: %s", rdmaServer.init_err);
        return C_ERR;
    }
    rdmaSetPinnedLimit(rdmaConf.max_pinned);
    rdmaSetUnauthLimit(rdmaConf.max_unauth);
    rdmaSetPeerLogAll(rdmaLogAll);
    rdmaServer.initialized = 1;
    return C_OK;
}


/* A client that authenticated gets the full receive buffer from its next
 * buffer turn on. */
static void rdmaMaybeGrantRx(rdmaConnection *rc) {
    client *c;
    if (rc->full_rx || !rc->ch) return;
    c = connGetPrivateData(&rc->c);
    if (c && c->authenticated) {
        rdmaChanSetRxSize(rc->ch, rdmaConf.rx_size);
        rc->full_rx = 1;
    }
}

/* Update conn state after a channel call failed; errno is the channel's. */
static void rdmaConnSetError(connection *conn, int err) {
    conn->last_errno = err;
    if (conn->state == CONN_STATE_CONNECTED) conn->state = CONN_STATE_ERROR;
}

/* ------------------------------------------------------ Connection I/O --- */

static connection *rdmaConnNew(rdmaChan *ch) {
    rdmaConnection *rc = zcalloc(sizeof(*rc));
    rdmaEnsureAe();
    rc->c.type = &CT_RDMA;
    rc->c.fd = -1;
    rc->ch = ch;
    return &rc->c;
}

/* What the adapter serves follows the connection's handlers: a connect in
 * progress is reported to the write side, as with a socket. */
static void rdmaConnUpdateMask(rdmaConnection *rc) {
    connection *conn = &rc->c;
    int mask = 0;
    if (!rc->ae) return;
    if (conn->read_handler) mask |= RDMA_AE_READABLE;
    if (conn->write_handler || conn->state == CONN_STATE_CONNECTING) mask |= RDMA_AE_WRITABLE;
    if (conn->flags & CONN_FLAG_WRITE_BARRIER) mask |= RDMA_AE_BARRIER;
    rdmaAeSetMask(rc->ae, mask);
}

static void rdmaConnReadProc(rdmaAeChan *e, void *data) {
    rdmaConnection *rc = data;
    UNUSED(e);
    if (!callHandler(&rc->c, rc->c.read_handler)) return;
    rdmaMaybeGrantRx(rc);
}

static void rdmaConnWriteProc(rdmaAeChan *e, void *data) {
    rdmaConnection *rc = data;
    connection *conn = &rc->c;
    UNUSED(e);
    if (conn->state == CONN_STATE_CONNECTING) {
        if (rdmaChanGetState(rc->ch) == RDMA_CHAN_CONNECTED) {
            conn->state = CONN_STATE_CONNECTED;
        } else {
            conn->state = CONN_STATE_ERROR;
            conn->last_errno = ECONNREFUSED;
        }
        rdmaConnUpdateMask(rc);
        if (conn->conn_handler) {
            ConnectionCallbackFunc handler = conn->conn_handler;
            conn->conn_handler = NULL;
            callHandler(conn, handler);
        }
        return;
    }
    callHandler(conn, conn->write_handler);
}

/* Drive the channel from the event loop for the rest of the connection's
 * life. */
static int rdmaConnWatch(rdmaConnection *rc) {
    rc->ae = rdmaAeAdd(rdmaServer.ae, rc->ch, rdmaConnReadProc, rdmaConnWriteProc, rc);
    if (!rc->ae) return C_ERR;
    rdmaConnUpdateMask(rc);
    return C_OK;
}

static void rdmaConnUnwatch(rdmaConnection *rc) {
    if (!rc->ae) return;
    rdmaAeDel(rc->ae);
    rc->ae = NULL;
}

static int connRdmaConnect(connection *conn, const char *addr, int port, const char *src_addr,
                           ConnectionCallbackFunc connect_handler) {
    rdmaConnection *rc = (rdmaConnection *)conn;
    char err[256];

    if (!rdmaServer.initialized) {
        snprintf(err, sizeof(err), "%s", rdmaServer.init_err[0] ? rdmaServer.init_err :
                 "RDMA is not available (see the log at startup)");
        rc->ch = NULL;
    } else {
        rc->ch = rdmaChanConnect(addr, port, src_addr, rdmaConf.rx_size, rdmaConf.completion_vector,
                                 server.repl_timeout * 1000, err, sizeof(err));
    }
    if (!rc->ch) {
        serverLog(LL_WARNING, "RDMA: cannot connect to %s:%d: %s", addr, port, err);
        conn->state = CONN_STATE_ERROR;
        conn->last_errno = ECONNREFUSED;
        return C_ERR;
    }
    conn->state = CONN_STATE_CONNECTING;
    conn->conn_handler = connect_handler;
    if (rdmaConnWatch(rc) == C_ERR) {
        conn->state = CONN_STATE_ERROR;
        conn->last_errno = errno;
        conn->conn_handler = NULL;
        return C_ERR;
    }
    return C_OK;
}

static int connRdmaBlockingConnect(connection *conn, const char *addr, int port, long long timeout) {
    rdmaConnection *rc = (rdmaConnection *)conn;
    char err[256];

    rc->ch = rdmaServer.initialized ?
        rdmaChanConnect(addr, port, NULL, rdmaConf.rx_size, rdmaConf.completion_vector,
                        timeout, err, sizeof(err)) : NULL;
    if (!rc->ch || rdmaChanWaitConnected(rc->ch, timeout) == -1) {
        conn->state = CONN_STATE_ERROR;
        conn->last_errno = ETIMEDOUT;
        return C_ERR;
    }
    conn->state = CONN_STATE_CONNECTED;
    if (rdmaConnWatch(rc) == C_ERR) {
        conn->state = CONN_STATE_ERROR;
        conn->last_errno = errno;
        return C_ERR;
    }
    return C_OK;
}

static int connRdmaWrite(connection *conn, const void *data, size_t data_len) {
    rdmaConnection *rc = (rdmaConnection *)conn;
    ssize_t n;
    if (!rc->ch) { rdmaConnSetError(conn, ENOTCONN); return -1; }
    n = rdmaChanWrite(rc->ch, data, data_len);
    if (n < 0 && errno != EAGAIN) rdmaConnSetError(conn, errno);
    return (int)n;
}

static int connRdmaWritev(connection *conn, const struct iovec *iov, int iovcnt) {
    rdmaConnection *rc = (rdmaConnection *)conn;
    ssize_t n;
    if (!rc->ch) { rdmaConnSetError(conn, ENOTCONN); return -1; }
    n = rdmaChanWritev(rc->ch, iov, iovcnt);
    if (n < 0 && errno != EAGAIN) rdmaConnSetError(conn, errno);
    return (int)n;
}

static int connRdmaRead(connection *conn, void *buf, size_t buf_len) {
    rdmaConnection *rc = (rdmaConnection *)conn;
    ssize_t n;
    if (!rc->ch) { rdmaConnSetError(conn, ENOTCONN); return -1; }
    n = rdmaChanRead(rc->ch, buf, buf_len);
    if (n == 0) {
        conn->state = CONN_STATE_CLOSED;
    } else if (n < 0 && errno != EAGAIN) {
        rdmaConnSetError(conn, errno);
    } else if (n > 0 && rdmaChanReadPending(rc->ch)) {
        /* The caller read less than is buffered: no fd event will come
         * for the rest. */
        if (rc->ae) rdmaAeMarkPending(rc->ae);
    }
    return (int)n;
}

static void connRdmaClose(connection *conn) {
    rdmaConnection *rc = (rdmaConnection *)conn;
    rdmaConnUnwatch(rc);
    if (rc->ch) {
        const char *why = rdmaChanError(rc->ch);
        if (rdmaChanGetState(rc->ch) == RDMA_CHAN_ERROR && why && rdmaPeerLogAllow(RDMA_LOG_NOTICE)) {
            char ip[NET_IP_STR_LEN];
            int port;
            rdmaChanPeerAddr(rc->ch, ip, sizeof(ip), &port);
            serverLog(LL_NOTICE, "RDMA: closing connection with %s:%d: %s", ip, port, why);
        }
        rdmaChanClose(rc->ch);
        rc->ch = NULL;
    }
    if (connHasRefs(conn)) {
        conn->flags |= CONN_FLAG_CLOSE_SCHEDULED;
        return;
    }
    zfree(rc);
}

static int connRdmaAccept(connection *conn, ConnectionCallbackFunc accept_handler) {
    int ret = C_OK;
    if (conn->state != CONN_STATE_ACCEPTING) return C_ERR;
    conn->state = CONN_STATE_CONNECTED;
    connIncrRefs(conn);
    if (!callHandler(conn, accept_handler)) ret = C_ERR;
    connDecrRefs(conn);
    /* A client that needs no AUTH (the default user has no password) is
     * granted at once: it no longer counts against rdma-max-unauthenticated. */
    if (ret == C_OK) rdmaMaybeGrantRx((rdmaConnection *)conn);
    return ret;
}

static int connRdmaSetWriteHandler(connection *conn, ConnectionCallbackFunc func, int barrier) {
    rdmaConnection *rc = (rdmaConnection *)conn;
    conn->write_handler = func;
    if (barrier) conn->flags |= CONN_FLAG_WRITE_BARRIER;
    else conn->flags &= ~CONN_FLAG_WRITE_BARRIER;
    rdmaConnUpdateMask(rc);
    return C_OK;
}

static int connRdmaSetReadHandler(connection *conn, ConnectionCallbackFunc func) {
    rdmaConnection *rc = (rdmaConnection *)conn;
    conn->read_handler = func;
    rdmaConnUpdateMask(rc);
    return C_OK;
}

static const char *connRdmaGetLastError(connection *conn) {
    rdmaConnection *rc = (rdmaConnection *)conn;
    const char *why = rc->ch ? rdmaChanError(rc->ch) : NULL;
    return why ? why : strerror(conn->last_errno);
}

/* ------------------------------------------------- Synchronous I/O --- */

/* Used by the replica's handshake with its master. Same contracts as
 * syncio.c: all size bytes moved within the timeout, or -1. One loop for
 * both directions: wait until the channel can move bytes, move what it
 * takes, until all are moved or the time is up. */
static ssize_t rdmaSyncIo(connection *conn, char *ptr, ssize_t size, long long timeout, int writing) {
    rdmaConnection *rc = (rdmaConnection *)conn;
    long long deadline = mstime() + timeout;
    ssize_t done = 0;
    while (done < size) {
        ssize_t n;
        long long left = deadline - mstime();
        if (!rc->ch || left <= 0) { errno = ETIMEDOUT; return -1; }
        if ((writing ? rdmaChanWaitWritable(rc->ch, left) : rdmaChanWaitReadable(rc->ch, left)) == -1)
            return -1;
        n = writing ? rdmaChanWrite(rc->ch, ptr + done, size - done)
                    : rdmaChanRead(rc->ch, ptr + done, size - done);
        if (n == 0 && !writing) { conn->state = CONN_STATE_CLOSED; return -1; }
        if (n < 0 && errno != EAGAIN) { rdmaConnSetError(conn, errno); return -1; }
        if (n > 0) done += n;
    }
    /* What the channel holds beyond the bytes asked for, no event announces. */
    if (!writing && rc->ae && rdmaChanReadPending(rc->ch)) rdmaAeMarkPending(rc->ae);
    return size;
}

static ssize_t connRdmaSyncWrite(connection *conn, char *ptr, ssize_t size, long long timeout) {
    return rdmaSyncIo(conn, ptr, size, timeout, 1);
}

static ssize_t connRdmaSyncRead(connection *conn, char *ptr, ssize_t size, long long timeout) {
    return rdmaSyncIo(conn, ptr, size, timeout, 0);
}

/* Read a line ending in \n, which is dropped (and a \r before it), within
 * the timeout. Returns the line's length, or -1. */
static ssize_t connRdmaSyncReadLine(connection *conn, char *ptr, ssize_t size, long long timeout) {
    ssize_t nread = 0;
    size--;
    while (size) {
        char c;
        if (connRdmaSyncRead(conn, &c, 1, timeout) == -1) return -1;
        if (c == '\n') {
            *ptr = '\0';
            if (nread && *(ptr - 1) == '\r') *(ptr - 1) = '\0';
            return nread;
        }
        *ptr++ = c;
        *ptr = '\0';
        nread++;
        size--;
    }
    return nread;
}

static int connRdmaGetType(connection *conn) {
    UNUSED(conn);
    return CONN_TYPE_RDMA;
}

static int connRdmaAddr(connection *conn, char *ip, size_t ip_len, int *port, int remote) {
    rdmaConnection *rc = (rdmaConnection *)conn;
    if (!rc->ch) return C_ERR;
    if ((remote ? rdmaChanPeerAddr : rdmaChanLocalAddr)(rc->ch, ip, ip_len, port) == -1)
        return C_ERR;
    return C_OK;
}

/* No ae_handler: rdma_ae.c watches the channel's descriptor. */
ConnectionType CT_RDMA = {
    .connect = connRdmaConnect,
    .write = connRdmaWrite,
    .writev = connRdmaWritev,
    .read = connRdmaRead,
    .close = connRdmaClose,
    .accept = connRdmaAccept,
    .set_write_handler = connRdmaSetWriteHandler,
    .set_read_handler = connRdmaSetReadHandler,
    .get_last_error = connRdmaGetLastError,
    .blocking_connect = connRdmaBlockingConnect,
    .sync_write = connRdmaSyncWrite,
    .sync_read = connRdmaSyncRead,
    .sync_readline = connRdmaSyncReadLine,
    .get_type = connRdmaGetType,
    .addr = connRdmaAddr,
};

/* Never NULL: when RDMA cannot start, connecting fails (and is logged),
 * which replication handles like any failed connect. */
connection *connCreateRdma(void) {
    rdmaEnsureInit();
    return rdmaConnNew(NULL);
}

/* --------------------------------------------- Pending-data handling --- */

/* Run the handlers of connections that can progress without an fd event
 * (buffered input, room to write): rdma_ae.c's before-sleep pass. */
int rdmaProcessPendingData(void) {
    return rdmaServer.ae ? rdmaAeServePending(rdmaServer.ae) : 0;
}

int rdmaHasPendingData(void) {
    return rdmaServer.ae ? rdmaAeHasPending(rdmaServer.ae) : 0;
}

/* ------------------------------------------------------------ Listener --- */

static void rdmaAcceptHandler(rdmaChan *ch, void *data) {
    UNUSED(data);
    char ip[NET_IP_STR_LEN];
    int port;
    connection *conn = rdmaConnNew(ch);
    rdmaConnection *rc = (rdmaConnection *)conn;

    conn->state = CONN_STATE_ACCEPTING;
    if (rdmaConnWatch(rc) == C_ERR) {
        serverLog(LL_WARNING, "RDMA: cannot watch a new connection: %s", strerror(errno));
        connClose(conn);
        return;
    }
    rdmaChanPeerAddr(ch, ip, sizeof(ip), &port);
    serverLog(LL_VERBOSE, "Accepted RDMA %s:%d", ip, port);
    acceptCommonHandler(conn, 0, ip);
}

static void rdmaListenerHandler(aeEventLoop *el, int fd, void *data, int mask) {
    UNUSED(el); UNUSED(fd); UNUSED(mask);
    rdmaListenerHandleEvents(data, rdmaAcceptHandler, NULL);
}

static void rdmaCloseListeners(void) {
    for (int i = 0; i < rdmaServer.nlisteners; i++) {
        aeDeleteFileEvent(server.el, rdmaListenerFd(rdmaServer.listeners[i]), AE_READABLE);
        rdmaListenerClose(rdmaServer.listeners[i]);
    }
    rdmaServer.nlisteners = 0;
    zfree(rdmaServer.open_bind);
    rdmaServer.open_bind = NULL;
}

/* The listeners are up with the configuration they have now. */
static int rdmaListenersCurrent(void) {
    return rdmaServer.nlisteners > 0 && rdmaServer.open_port == rdmaConf.port &&
           rdmaServer.open_vector == rdmaConf.completion_vector && rdmaServer.open_bind &&
           !strcmp(rdmaServer.open_bind, rdmaConf.bind ? rdmaConf.bind : "");
}

/* (Re)open the listeners rdma-port and rdma-bind ask for. On failure,
 * status says why, nothing listens, and C_ERR is returned. */
static int rdmaOpenListeners(void) {
    char err[256];
    int count = 0;
    sds *addrs;

    rdmaCloseListeners();
    if (rdmaConf.port == 0) {
        snprintf(rdmaServer.status, sizeof(rdmaServer.status), "off");
        return C_OK;
    }
    rdmaServer.retry = 0;
    if (server.io_threads_num > 1) {
        snprintf(rdmaServer.status, sizeof(rdmaServer.status),
                 "error: io-threads > 1 is not supported with RDMA");
        return C_ERR;
    }
    if (rdmaEnsureInit() == C_ERR) {
        snprintf(rdmaServer.status, sizeof(rdmaServer.status), "error: %s", rdmaServer.init_err);
        return C_ERR;
    }
    addrs = sdssplitargs(rdmaConf.bind ? rdmaConf.bind : "", &count);
    if (!addrs) count = 0;
    if (count == 0) {
        if (addrs) sdsfreesplitres(addrs, count);
        addrs = zmalloc(sizeof(sds));
        addrs[0] = sdsnew("*");
        count = 1;
    }
    if (count > CONFIG_BINDADDR_MAX) count = CONFIG_BINDADDR_MAX;
    /* One registration of a connection's worth of memory, so that a low
     * RLIMIT_MEMLOCK is one clear error here rather than a refusal per
     * connection later. */
    if (rdmaProbeMemory(addrs[0], err, sizeof(err)) == -1) goto fail;
    for (int i = 0; i < count; i++) {
        rdmaListener *l = rdmaListen(addrs[i], rdmaConf.port, rdmaConf.rx_size,
                                     rdmaConf.completion_vector, err, sizeof(err));
        if (!l) goto fail;
        rdmaServer.listeners[rdmaServer.nlisteners++] = l;
        if (aeCreateFileEvent(server.el, rdmaListenerFd(l), AE_READABLE, rdmaListenerHandler, l) == AE_ERR) {
            snprintf(err, sizeof(err), "aeCreateFileEvent: %s", strerror(errno));
            goto fail;
        }
    }
    sdsfreesplitres(addrs, count);
    snprintf(rdmaServer.status, sizeof(rdmaServer.status), "on");
    rdmaServer.open_port = rdmaConf.port;
    rdmaServer.open_vector = rdmaConf.completion_vector;
    rdmaServer.open_bind = zstrdup(rdmaConf.bind ? rdmaConf.bind : "");
    {
        sds where = sdsempty();
        for (int i = 0; i < rdmaServer.nlisteners; i++)
            where = sdscatfmt(where, "%s%s", i ? " " : "", rdmaListenerAddr(rdmaServer.listeners[i]));
        serverLog(LL_NOTICE, "RDMA: listening on %s (rx buffer %zu KiB per connection)",
                  where, rdmaConf.rx_size / 1024);
        sdsfree(where);
    }
    return C_OK;

fail:
    sdsfreesplitres(addrs, count);
    rdmaCloseListeners();
    snprintf(rdmaServer.status, sizeof(rdmaServer.status), "error: %s", err);
    rdmaServer.retry = 1;
    return C_ERR;
}

void rdmaServerInit(void) {
    if (rdmaConf.port == 0) return;
    if (rdmaOpenListeners() == C_ERR)
        serverLog(LL_WARNING, "RDMA: not listening on port %d: %s. "
                  "TCP keeps serving; fix the cause and CONFIG SET rdma-port to retry.",
                  rdmaConf.port, rdmaServer.status + strlen("error: "));
}

/* The listeners that were up while new ones are tried: kept listening, and
 * put back if the new ones cannot listen. */
typedef struct rdmaSavedListeners {
    rdmaListener *listeners[CONFIG_BINDADDR_MAX];
    int n, port, vector;
    char *bind;
} rdmaSavedListeners;

static void rdmaSaveListeners(rdmaSavedListeners *sv) {
    memcpy(sv->listeners, rdmaServer.listeners, sizeof(sv->listeners));
    sv->n = rdmaServer.nlisteners;
    sv->port = rdmaServer.open_port;
    sv->vector = rdmaServer.open_vector;
    sv->bind = rdmaServer.open_bind;
    rdmaServer.nlisteners = 0;
    rdmaServer.open_bind = NULL;
}

static void rdmaRestoreListeners(rdmaSavedListeners *sv) {
    rdmaCloseListeners();
    memcpy(rdmaServer.listeners, sv->listeners, sizeof(sv->listeners));
    rdmaServer.nlisteners = sv->n;
    rdmaServer.open_port = sv->port;
    rdmaServer.open_vector = sv->vector;
    rdmaServer.open_bind = sv->bind;
    rdmaServer.retry = 0;
    snprintf(rdmaServer.status, sizeof(rdmaServer.status), "on");
}

static void rdmaDropSavedListeners(rdmaSavedListeners *sv) {
    for (int i = 0; i < sv->n; i++) {
        aeDeleteFileEvent(server.el, rdmaListenerFd(sv->listeners[i]), AE_READABLE);
        rdmaListenerClose(sv->listeners[i]);
    }
    zfree(sv->bind);
}

/* CONFIG SET rdma-port / rdma-bind / rdma-completion-vector. The new
 * listeners are opened while the old ones still listen (if the new port is
 * the old one, the old ones are closed first: they would hold its address).
 * On failure the old ones go on listening, untouched with their
 * connections, and the error says why the new ones could not listen:
 * upstream's restore of the old values then finds them current and has
 * nothing to redo. A listener that was down stays down, retried by the
 * cron: the restore right after the failure does not try it again, which
 * would only log the same failure a second time. */
int rdmaApplyListener(const char **err) {
    static char msg[400];
    static int restoring;            /* the next call restores a listener that was down */
    rdmaSavedListeners sv;
    int keep_old, was_down = rdmaServer.nlisteners == 0;

    if (!server.el) return 1;        /* startup: rdmaServerInit() opens them */
    if (restoring) {
        restoring = 0;
        if (rdmaServer.nlisteners == 0 && rdmaConf.port != 0) return 1;
    }
    /* CONFIG SET rdma-port <its value>: nothing to do if listening. */
    if (rdmaListenersCurrent()) return 1;
    keep_old = rdmaServer.nlisteners > 0 && rdmaConf.port != 0 && rdmaConf.port != rdmaServer.open_port;
    if (keep_old) rdmaSaveListeners(&sv);
    if (rdmaOpenListeners() == C_ERR) {
        snprintf(msg, sizeof(msg), "Unable to listen on the RDMA port: %s",
                 rdmaServer.status + strlen("error: "));
        *err = msg;
        if (keep_old) rdmaRestoreListeners(&sv);
        else if (was_down) restoring = 1;
        return 0;
    }
    if (keep_old) rdmaDropSavedListeners(&sv);
    return 1;
}

int rdmaApplyPinnedLimit(const char **err) {
    UNUSED(err);
    rdmaSetPinnedLimit(rdmaConf.max_pinned);
    return 1;
}

int rdmaApplyUnauthLimit(const char **err) {
    UNUSED(err);
    rdmaSetUnauthLimit(rdmaConf.max_unauth);
    return 1;
}

int rdmaApplyRxSize(const char **err) {
    UNUSED(err);
    /* New connections get it; existing ones at their next grant. */
    for (int i = 0; i < rdmaServer.nlisteners; i++)
        rdmaListenerSetRxSize(rdmaServer.listeners[i], rdmaConf.rx_size);
    return 1;
}

/* Once a second: keepalives, handshake timeouts, a listener whose device
 * went away, a listener that could not open (retried each time). */
void rdmaServerCron(void) {
    int failed = 0;
    if (!rdmaServer.initialized) return;
    rdmaCron();
    for (int i = 0; i < rdmaServer.nlisteners; i++) {
        rdmaListenerCron(rdmaServer.listeners[i]);
        if (rdmaListenerFailed(rdmaServer.listeners[i])) failed = 1;
    }
    if (failed) {
        serverLog(LL_WARNING, "RDMA: a listener lost its device; reopening");
        if (rdmaOpenListeners() == C_ERR)
            serverLog(LL_WARNING, "RDMA: cannot listen again: %s", rdmaServer.status);
    } else if (rdmaConf.port && rdmaServer.nlisteners == 0 && rdmaServer.retry) {
        /* Not listening though configured to: retry once a second (a
         * device came up, the memlock limit was raised with prlimit).
         * Quietly: the first failure was logged, and INFO says why. */
        rdmaOpenListeners();
        if (rdmaServer.nlisteners) serverLog(LL_NOTICE, "RDMA: listener is up again");
    }
    if (rdmaServer.ae) rdmaAeCron(rdmaServer.ae);
}

/* ---------------------------------------------------------------- INFO --- */

sds rdmaInfoString(sds info) {
    rdmaStats st;
    sds where = sdsempty();
    if (rdmaServer.initialized) rdmaGetStats(&st);
    else memset(&st, 0, sizeof(st));
    for (int i = 0; i < rdmaServer.nlisteners; i++)
        where = sdscatfmt(where, "%s%s", i ? "," : "", rdmaListenerAddr(rdmaServer.listeners[i]));
    info = sdscatprintf(info,
        "# RDMA\r\n"
        "rdma_built:%s\r\n"
        "rdma_listener:%s\r\n"
        "rdma_listen_addresses:%s\r\n"
        "rdma_port:%d\r\n"
        "rdma_rx_size:%zu\r\n"
        "rdma_replication:%d\r\n"
        "rdma_connections:%d\r\n"
        "rdma_connections_unauthenticated:%d\r\n"
        "rdma_connections_watchdog:%d\r\n"
        "rdma_pinned_bytes:%zu\r\n"
        "rdma_pinned_limit:%zu\r\n",
        rdmaSupported() ? "yes" : "no", rdmaServer.status, where, rdmaConf.port, rdmaConf.rx_size, rdmaConf.replication,
        rdmaServer.ae ? rdmaAeCount(rdmaServer.ae) : 0,
        rdmaServer.initialized ? rdmaUnauthCount() : 0,
        rdmaServer.initialized ? rdmaWatchdogCount() : 0,
        rdmaServer.initialized ? rdmaPinnedBytes() : 0,
        rdmaServer.initialized ? rdmaEffectivePinnedLimit() : (size_t)rdmaConf.max_pinned);
    for (const rdmaStatField *f = rdmaStatFields; f->name; f++)
        info = sdscatprintf(info, "rdma_%s:%llu\r\n", f->name, rdmaStatValue(&st, f));
    sdsfree(where);
    return info;
}

void rdmaServerResetStats(void) {
    if (rdmaServer.initialized) rdmaResetStats();
}
