/* nickv.c -- Nic-KV: the replication fan-out daemon of SKV.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * Nic-KV runs on the DPU (BlueField ARM cores) in the master's server. The
 * master sends its replication stream once, to Nic-KV; Nic-KV keeps a
 * backlog of it and sends it on to every replica. The master's CPU per
 * write then no longer grows with the number of replicas.
 *
 * ========================================================================
 * The protocol: master, Nic-KV, replicas
 * ========================================================================
 *
 * Everything is Redis's own replication protocol (RESP commands, PSYNC,
 * REPLCONF, the byte stream with the master's offsets), plus REPLCONF
 * extensions that a plain Redis ignores or refuses harmlessly.
 *
 * 1. Nic-KV joins the master (nickv_upstream.c), as a replica would:
 *
 *      Nic-KV -> master   AUTH [masteruser] masterauth           (if set)
 *                         REPLCONF listening-port <our port>
 *                         REPLCONF capa eof capa psync2
 *                         REPLCONF nickv "hello <announce-ip|?> <port> <rdma-port>"
 *      master -> Nic-KV   +<replid> <master_repl_offset>
 *                         (or -NICKV refused: <why>: we are not its
 *                         nickv-user, another daemon is healthy, or it is
 *                         a replica now; Nic-KV closes and retries a
 *                         second later, and its probes follow a master
 *                         that moved: nickv_probe.c)
 *      Nic-KV -> master   PSYNC <replid> <offset+1>
 *      master -> Nic-KV   +CONTINUE <replid>, then the stream
 *
 *    Nic-KV holds no data, so it joins at the master's current offset with
 *    a partial resync: no BGSAVE for it. (After a short disconnection it
 *    PSYNCs from where its own backlog ends instead.) A master that is not
 *    SKV answers "hello" with an error: Nic-KV then PSYNCs "? -1", drops
 *    the RDB, and still serves replicas pointed at it, without the
 *    master knowing about them.
 *
 *    While streaming, Nic-KV sends every NICKV_HEARTBEAT_MS (200 ms)
 *      REPLCONF ACK <last offset>                   (keeps its link alive)
 *      REPLCONF nickv "backlog <first> <last> <free-client-slots>"
 *                              (what it can serve; also its heartbeat)
 *    and, for the replicas it serves,
 *      REPLCONF nickv "add <id> <ip> <listening-port>"   when one starts
 *      REPLCONF nickv "ack <id> <offset>"                each ACK it sends us
 *      REPLCONF nickv "del <id>"                         when one goes
 *    so that WAIT, min-replicas-to-write and INFO on the master count real
 *    replicas with their real acknowledgements; and what its probes find
 *      REPLCONF nickv "health <min-slaves> <n> <addr> <port>..."
 *                              (the valid replicas: nickv_probe.c)
 *    The master never answers these (a reply on a replica's link gets it
 *    dropped). The daemon's own link
 *    counts as no replica. Every word, reply prefix and timer of this
 *    protocol is defined once, in src/nickv_proto.h, for both sides.
 *
 * 2. A replica finds Nic-KV through the master. An SKV replica configured
 *    with "replicaof <master>" advertises REPLCONF capa nickv. When the
 *    master has a healthy Nic-KV whose backlog holds the offset the
 *    replica's PSYNC asks for, it answers the PSYNC with
 *
 *      +NICKV <host> <port> <rdma-port>
 *
 *    and closes; the replica's next connect goes to Nic-KV with the same
 *    PSYNC. A direct replica with that capa is handed over the same way:
 *    once it is online and within Nic-KV's backlog, the master closes its
 *    link; it reconnects and is redirected. The hand-off point is exact:
 *    the replica's own offset, which Nic-KV continues from.
 *
 * 3. A replica at Nic-KV (redirected, or configured "replicaof <nickv>",
 *    even an upstream Redis):
 *
 *      replica -> Nic-KV  [AUTH ...] REPLCONF ... PSYNC <replid> <offset>
 *      Nic-KV -> replica  +CONTINUE <replid>, then the stream from <offset>
 *                         (if <replid> is the master's and <offset> is in
 *                         the backlog, or just past its end; an offset
 *                         further ahead, which the master produced but
 *                         whose bytes are still on their way to us, waits
 *                         up to NICKV_PSYNC_WAIT_MS for the stream)
 *                         -NICKV <why>     (a redirected SKV replica, which
 *                         says "REPLCONF capa nickv-via", that it cannot
 *                         serve: it goes back to the master, which serves
 *                         it directly, with a full sync if need be)
 *                         +FULLRESYNC ... RDB ...   (any other replica it
 *                         cannot serve, upstream Redis or an SKV replica
 *                         whose configured master is Nic-KV itself: sending
 *                         that one "back" would bring it straight back
 *                         here. Nic-KV opens a connection of its
 *                         own to the master, asks for a full sync, passes
 *                         the reply and the RDB through unchanged, then
 *                         goes on from its backlog at the RDB's offset)
 *      replica -> Nic-KV  REPLCONF ACK <offset>   (relayed to the master)
 *
 *    Full syncs of SKV replicas come straight from the master's host: the
 *    RDB's bulk never crosses the DPU's cores (the SKV paper's choice; see
 *    NIC-KV.md for the numbers). Only replicas that cannot be redirected
 *    get theirs through Nic-KV.
 *
 * 4. Transports. Every link above is TCP or RDMA (SKV's RDMA transport,
 *    src/rdma_chan.c: the same RESP bytes carried by RDMA WRITE_WITH_IMM).
 *    With master-rdma-port set, Nic-KV's link to the master is an RDMA
 *    connection to the master's rdma-port: the master posts one
 *    WRITE_WITH_IMM per flush of its replication buffer to us, whatever the
 *    number of replicas. With rdma-port set, Nic-KV announces it in its
 *    hello; the master redirects replicas that replicate over RDMA
 *    (rdma-replication yes) there, and TCP replicas to the TCP port. An
 *    RDMA replica's stream is sent without any copy: its channel registers
 *    the backlog ring, and each wakeup posts what it is due as 64 KB work
 *    requests pointing into the ring, linked into one ibv_post_send (one
 *    doorbell). The ring is never overwritten where a replica's NIC may
 *    still read (nickv_backlog.c). Proxied full syncs always read the RDB
 *    from the master over TCP (master-port); the replica may be on either.
 *
 * 5. Failure. If Nic-KV dies, its replicas lose their link and reconnect
 *    to their configured master, which no longer redirects them (Nic-KV is
 *    not healthy): a partial resync from the master's backlog. If it hangs
 *    (SIGSTOP), its heartbeat stops: after NICKV_DAEMON_TIMEOUT_MS the
 *    master closes its link and forgets its replicas; the master PINGs an
 *    idle stream every NICKV_PING_MS while a healthy daemon carries it, so
 *    an SKV replica behind Nic-KV that hears nothing for
 *    NICKV_VIA_TIMEOUT_MS knows Nic-KV is hung (not idle) and goes back to
 *    the master, which by then serves it directly (src/nickv_server.c).
 *    When Nic-KV returns, the master hands them over again. If Nic-KV
 *    loses the master for longer than a few seconds it closes its
 *    replicas' links, so that they fall back too.
 *
 * A replica's state in Nic-KV, from its connection to its last byte, is
 * drawn at the top of nickv_replica.c, which makes every move of it. The
 * master link's states are in nickv_upstream.c.
 */

#include "nickv_int.h"
#include "nickv_resp.h"
#include "nickv_conn.h"
#include "nickv_tls.h"
#include "nickv_backlog.h"
#include "nickv_fanout.h"
#include "nickv_upstream.h"
#include "nickv_coord.h"
#include "nickv_member.h"
#include "nickv_probe.h"
#include "nickv_failover.h"
#include "nickv_client.h"
#include "nickv_replica.h"
#include "nickv_fullsync.h"
#include "nickv_sentinel.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/time.h>
#include <unistd.h>

#include "anet.h"
#include "monotonic.h"
#include "util.h"
#include "zmalloc.h"
#include "skv_version.h"

void getRandomHexChars(char *p, size_t len);   /* util.c (declared in server.h) */

nkServer nk;

/* The stats the server counts (struct nkServerStats, nickv_int.h): here,
 * in nickv_cmd.c and nickv_config.c. The replicas', the link's and the RDMA
 * transport's are their files'. */
struct nkServerStats stats;

/* ------------------------------------------------------------- Clients --- */

static void nkClientWritable(nkConn *conn, void *data);
static void nkClientReadable(nkConn *conn, void *data);

size_t nkClientPending(nkClient *c) { return sdslen(c->outbuf); }

void nkClientFree(nkClient *c) {
    listNode *ln = listSearchKey(nk.clients, c);
    nkClientLeaving(c);
    if (ln) listDelNode(nk.clients, ln);
    if (c->conn) {
        nkConnClose(c->conn);
        c->conn = NULL;
    }
    if (c->fs) nkProxyFullSync(c);   /* with no conn: tears the sync down */
    nkPubsubClientFree(c);
    nkMonitorForget(c);
    sdsfree(c->name);
    sdsfree(c->user);
    sdsfree(c->querybuf);
    sdsfree(c->outbuf);
    zfree(c);
}

/* Send what is queued. Returns -1 when the client was freed. */
static int nkClientFlush(nkClient *c) {
    while (sdslen(c->outbuf)) {
        ssize_t n = nkConnWrite(c->conn, c->outbuf, sdslen(c->outbuf));
        if (n <= 0) {
            if (n < 0 && errno == EAGAIN) break;
            nkClientFree(c);
            return -1;
        }
        sdsrange(c->outbuf, n, -1);
    }
    if (c->obuf_soft_since && (long long)sdslen(c->outbuf) <= nk.cfg.obuf_soft) c->obuf_soft_since = 0;
    if (c->fs) nkProxyFullSync(c);   /* read more of the RDB if it keeps up */
    if (sdslen(c->outbuf) && !nkConnHasWriteHandler(c->conn))
        nkConnSetWriteHandler(c->conn, nkClientWritable);
    else if (!sdslen(c->outbuf) && nkConnHasWriteHandler(c->conn))
        nkConnSetWriteHandler(c->conn, NULL);
    if (!sdslen(c->outbuf)) {
        if (c->state == NK_CLIENT_CLOSING) {
            nkClientFree(c);
            return -1;
        }
        if (c->state == NK_CLIENT_HANDOVER && !c->stream_on_ack) {
            /* The +CONTINUE (or the RDB) is out: the stream starts. */
            nkClientHandOver(c);
            return -1;
        }
    }
    return 0;
}

void nkClientFlushSoon(nkClient *c) {
    nkClientFlush(c);
}

void nkClientWriteRaw(nkClient *c, const char *buf, size_t len) {
    c->outbuf = sdscatlen(c->outbuf, buf, len);
}

void nkClientReply(nkClient *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    c->outbuf = sdscatvprintf(c->outbuf, fmt, ap);
    va_end(ap);
}

void replyBulk(nkClient *c, const char *s, size_t len) {
    nkClientReply(c, "$%zu\r\n", len);
    nkClientWriteRaw(c, s, len);
    nkClientWriteRaw(c, "\r\n", 2);
}

static void nkClientWritable(nkConn *conn, void *data) {
    (void)conn;
    nkClientFlush(data);
}

static void protocolError(nkClient *c, const char *what) {
    stats.protocol_errors++;
    nkLog(LL_VERBOSE, "Protocol error (%s) from client %s:%d: closing it", what, c->ip, c->port);
    nkClientReply(c, "-ERR Protocol error: %s\r\n", what);
    nkClientSetState(c, NK_CLIENT_CLOSING);
}

/* An authenticated RDMA client gets its full receive buffer (and a staging
 * ring to match, for a proxied RDB) from its next buffer turn on. */
static void nkClientMaybeGrant(nkClient *c) {
    if (c->rx_granted || !c->conn || !nkConnIsRdma(c->conn)) return;
    if (requiredPassword() && !c->authenticated) return;
    rdmaChanSetRxSize(nkConnChan(c->conn), (size_t)nk.cfg.rdma_rx_size);
    c->rx_granted = 1;
}

/* HANDOVER after an EOF-marked RDB (nickv_fullsync.c, fsDone): the
 * replica's first REPLCONF ACK starts the stream; anything else it sends
 * before is dropped, as a master drops a loading replica's input. */
static void handoverAwaitAck(nkClient *c, const char *buf, size_t len) {
    c->ack_wait_io = nkMstime();    /* a loading replica sends "\n" each second */
    c->querybuf = sdscatlen(c->querybuf, buf, len);
    for (;;) {
        int argc, ack;
        sds *argv;
        const char *err = NULL;
        int r = nkParseCommand(&c->querybuf, &argc, &argv, &err);
        if (r < 0) {
            /* HANDOVER goes to no other state: the replica is closed. */
            stats.protocol_errors++;
            nkLog(LL_NOTICE, "Replica %s:%d: protocol error (%s) while it loads its RDB: closing it", c->ip,
                  c->listening_port, err);
            nkClientFree(c);
            return;
        }
        if (r == 0) return;
        ack = argc >= 2 && !strcasecmp(argv[0], "replconf") && !strcasecmp(argv[1], "ack");
        nkFreeArgv(argc, argv);
        if (ack) break;
    }
    c->stream_on_ack = 0;
    sdsclear(c->querybuf);
    nkClientFlush(c);    /* hands over once the output is out */
}

static void nkClientReadable(nkConn *conn, void *data) {
    nkClient *c = data;
    char buf[16 * 1024];
    ssize_t n = nkConnRead(conn, buf, sizeof(buf));
    if (n == 0 || (n < 0 && errno != EAGAIN)) {
        nkClientFree(c);
        return;
    }
    if (n < 0) return;
    if (c->state == NK_CLIENT_HANDOVER && c->stream_on_ack) {
        handoverAwaitAck(c, buf, n);
        return;
    }
    /* Not listening any more (or, waiting for the stream, not yet). */
    if (c->state != NK_CLIENT_CONNECTED) return;
    c->querybuf = sdscatlen(c->querybuf, buf, n);
    for (;;) {
        int argc, r;
        sds *argv;
        if (c->state != NK_CLIENT_CONNECTED) break;
        if (sdslen(c->outbuf) > NK_OUTBUF_MAX) {
            nkLog(LL_NOTICE, "Client %s:%d does not read its replies: closing it", c->ip, c->port);
            nkClientFree(c);
            return;
        }
        const char *err = NULL;
        r = nkParseCommand(&c->querybuf, &argc, &argv, &err);
        if (r < 0) protocolError(c, err);
        if (r <= 0) break;
        if (argc > 0) execCommand(c, argc, argv);
        nkFreeArgv(argc, argv);
    }
    nkClientMaybeGrant(c);
    nkClientFlush(c);
}

/* A new client, on TCP or RDMA. */
static void nkClientCreate(nkConn *conn, const char *ip, int port) {
    nkClient *c = zcalloc(sizeof(*c));
    int full = nkClientSlotsFree() == 0;
    stats.connections++;
    c->id = ++nk.next_client_id;
    c->conn = conn;
    snprintf(c->ip, sizeof(c->ip), "%s", ip);
    c->port = port;
    c->querybuf = sdsempty();
    c->outbuf = sdsempty();
    c->ctime = time(NULL);
    c->ctime_ms = nkMstime();
    c->last_cmd_ms = c->ctime_ms;
    c->resp = 2;
    listAddNodeTail(nk.clients, c);
    nkConnSetData(conn, c);
    if (full) {
        /* As redis-server: told why, and closed. */
        stats.rejected_conn++;
        nkLog(LL_VERBOSE, "Refusing %s:%d: max number of clients reached", ip, port);
        nkClientReply(c, "-ERR max number of clients reached\r\n");
        nkClientSetState(c, NK_CLIENT_CLOSING);
        nkClientFlush(c);
        return;
    }
    if (nk.cfg.protected_mode && !requiredPassword() && !isLoopback(ip)) {
        nkLog(LL_NOTICE, "Refusing %s:%d: protected mode, no password set", ip, port);
        nkClientReply(c, "-DENIED Nic-KV is running in protected mode: no password is set "
                      "(requirepass or masterauth), so only loopback clients are served.\r\n");
        nkClientSetState(c, NK_CLIENT_CLOSING);
        nkClientFlush(c);
        return;
    }
    nkConnSetReadHandler(conn, nkClientReadable);
    nkClientMaybeGrant(c);
}

/* Clients and replicas Nic-KV holds: each is a connection. */
static long nkClientsConnected(void) {
    return (long)listLength(nk.clients) + (long)nkReplicaCount();
}

int nkClientSlotsFree(void) {
    long n = nk.cfg.maxclients - nkClientsConnected();
    if (nk.accept_paused_until) return 0;
    return n > 0 ? (int)n : 0;
}

/* Log an accept error, at most once a second (with how many were not). */
static void nkAcceptError(const char *err) {
    long long now = nkMstime();
    if (now - nk.accept_err_logged < 1000) {
        nk.accept_err_unlogged++;
        return;
    }
    if (nk.accept_err_unlogged)
        nkLog(LL_WARNING, "Accepting a client: %s (and %lld more errors since the last report)",
              err, nk.accept_err_unlogged);
    else
        nkLog(LL_WARNING, "Accepting a client: %s", err);
    nk.accept_err_logged = now;
    nk.accept_err_unlogged = 0;
}

static void nkAcceptHandler(aeEventLoop *el, int lfd, void *data, int mask);

/* Out of file descriptors: the connection waiting on a listener cannot be
 * taken, and the listener stays readable. Stop polling the listeners for a
 * while (nkAcceptResumeCron resumes) rather than spin. */
static void nkAcceptPause(void) {
    for (int i = 0; i < nk.ipcount; i++) aeDeleteFileEvent(nk.el, nk.ipfd[i], AE_READABLE);
    for (int i = 0; i < nk.tlscount; i++) aeDeleteFileEvent(nk.el, nk.tlsfd[i], AE_READABLE);
    nk.accept_paused_until = nkMstime() + 100;
}

static void nkAcceptResumeCron(void) {
    if (!nk.accept_paused_until || nkMstime() < nk.accept_paused_until) return;
    nk.accept_paused_until = 0;
    for (int i = 0; i < nk.ipcount; i++)
        aeCreateFileEvent(nk.el, nk.ipfd[i], AE_READABLE, nkAcceptHandler, NULL);
    for (int i = 0; i < nk.tlscount; i++)
        aeCreateFileEvent(nk.el, nk.tlsfd[i], AE_READABLE, nkAcceptHandler, (void *)1);
}

/* data: non-NULL for tls-port's listeners. */
static void nkAcceptHandler(aeEventLoop *el, int lfd, void *data, int mask) {
    (void)el; (void)mask;
    char ip[64], err[ANET_ERR_LEN];
    int port, fd, max = 100;
    while (max--) {
        fd = anetTcpAccept(err, lfd, ip, sizeof(ip), &port);
        if (fd == ANET_ERR) {
            int e = errno;
            if (e == EAGAIN || e == EWOULDBLOCK) return;
            nkAcceptError(err);
            if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
                nkAcceptPause();
                return;
            }
            continue;
        }
        anetNonBlock(NULL, fd);
        anetEnableTcpNoDelay(NULL, fd);
        anetKeepAlive(NULL, fd, 300);
        if (data) {
            nkConn *conn = nkConnFromFdTls(nk.loop, fd);
            if (!conn) {
                nkLog(LL_WARNING, "TLS: cannot make a session for %s:%d: %s", ip, port, nkTlsError("failed"));
                close(fd);
                continue;
            }
            nkClientCreate(conn, ip, port);
        } else {
            nkClientCreate(nkConnFromFd(nk.loop, fd), ip, port);
        }
    }
}

/* port's listeners (tls: tls-port's) on every bind address: -1 if one
 * cannot listen. */
static int nkListen(int port, int tls) {
    for (int i = 0; port && i < nk.cfg.bindcount; i++) {
        char err[ANET_ERR_LEN];
        int fd = strchr(nk.cfg.bind[i], ':') ? anetTcp6Server(err, port, nk.cfg.bind[i], 511) :
                                               anetTcpServer(err, port, nk.cfg.bind[i], 511);
        if (fd == ANET_ERR) {
            nkLog(LL_WARNING, "Cannot listen on %s:%d%s: %s", nk.cfg.bind[i], port, tls ? " (TLS)" : "", err);
            return -1;
        }
        anetNonBlock(NULL, fd);
        if (tls) nk.tlsfd[nk.tlscount++] = fd;
        else nk.ipfd[nk.ipcount++] = fd;
        aeCreateFileEvent(nk.el, fd, AE_READABLE, nkAcceptHandler, tls ? (void *)1 : NULL);
    }
    return 0;
}

/* ------------------------------------------------------------------ RDMA --- */

static void nkRdmaLog(int level, const char *msg) {
    nkLog(level, "%s", msg);
}

static void nkRdmaAccept(rdmaChan *ch, void *data) {
    char ip[64];
    int port = 0;
    (void)data;
    nkConn *conn;
    if (rdmaChanPeerAddr(ch, ip, sizeof(ip), &port) == -1) snprintf(ip, sizeof(ip), "?");
    if (!(conn = nkConnFromChan(nk.loop, ch))) return;   /* closed, logged */
    nkClientCreate(conn, ip, port);
}

static void nkRdmaListenerEvent(aeEventLoop *el, int fd, void *data, int mask) {
    (void)el; (void)fd; (void)mask;
    rdmaListenerHandleEvents(data, nkRdmaAccept, NULL);
}

static void nkRdmaAsyncEvent(aeEventLoop *el, int fd, void *data, int mask) {
    (void)el; (void)fd; (void)data; (void)mask;
    rdmaHandleAsyncEvents();
}

/* RDMA, when rdma-port or master-rdma-port asks for it: the library, the
 * listeners (one per rdma-bind address), the device events. A machine
 * without an RDMA device keeps serving TCP, and INFO says why not RDMA. */
static void nkRdmaStart(void) {
    char err[256];
    int fd;
    snprintf(nk.rdma_status, sizeof(nk.rdma_status), "off");
    if (!nk.cfg.rdma_port && !nk.cfg.master_rdma_port) return;
    if (rdmaInit(nkRdmaLog, err, sizeof(err)) == -1) {
        snprintf(nk.rdma_status, sizeof(nk.rdma_status), "error: %s", err);
        nkLog(LL_WARNING, "RDMA: %s", err);
        return;
    }
    rdmaSetPinnedLimit((size_t)nk.cfg.rdma_max_pinned);
    rdmaSetUnauthLimit(nk.cfg.rdma_max_unauth);
    if ((fd = rdmaAsyncFd()) != -1) aeCreateFileEvent(nk.el, fd, AE_READABLE, nkRdmaAsyncEvent, NULL);
    if (!nk.cfg.rdma_port) return;
    for (int i = 0; i < (nk.cfg.rdma_bindcount ? nk.cfg.rdma_bindcount : 1); i++) {
        const char *addr = nk.cfg.rdma_bindcount ? nk.cfg.rdma_bind[i] : NULL;
        rdmaListener *l = rdmaListen(addr, nk.cfg.rdma_port, (size_t)nk.cfg.rdma_rx_size, -1,
                                     err, sizeof(err));
        if (!l) {
            snprintf(nk.rdma_status, sizeof(nk.rdma_status), "error: %s", err);
            nkLog(LL_WARNING, "RDMA: not listening on port %d: %s. TCP keeps serving.",
                  nk.cfg.rdma_port, err);
            continue;
        }
        nk.rdma_listeners[nk.rdma_count++] = l;
        aeCreateFileEvent(nk.el, rdmaListenerFd(l), AE_READABLE, nkRdmaListenerEvent, l);
        nkLog(LL_NOTICE, "RDMA: listening on %s", rdmaListenerAddr(l));
    }
    if (nk.rdma_count) snprintf(nk.rdma_status, sizeof(nk.rdma_status), "on");
}

/* The RDMA port the master may send replicas to: ours, if we listen. */
int nkRdmaPort(void) {
    return nk.rdma_count ? nk.cfg.rdma_port : 0;
}

/* -------------------------------------------------------------- Main --- */

/* Close the clients that hold too much or stay too long without a
 * password: a proxied full sync whose queued RDB is over the hard limit, or
 * over the soft limit for soft-seconds (the replica does not read it: the
 * sync stops reading the master above 4 MB, so the queue stays there); a
 * client that has not authenticated within auth-timeout seconds. */
static void nkClientsCron(void) {
    listIter li;
    listNode *ln;
    long long now = nkMstime();
    int need_auth = requiredPassword() != NULL;
    listRewind(nk.clients, &li);
    while ((ln = listNext(&li))) {
        nkClient *c = listNodeValue(ln);
        long long pending = (long long)nkClientPending(c);
        const char *why = NULL;
        if (c->state == NK_CLIENT_FULLSYNC) {
            if (nk.cfg.obuf_hard && pending > nk.cfg.obuf_hard) {
                why = "hard";
            } else if (nk.cfg.obuf_soft && pending > nk.cfg.obuf_soft) {
                if (!c->obuf_soft_since) c->obuf_soft_since = now;
                else if (now - c->obuf_soft_since >= nk.cfg.obuf_soft_seconds * 1000LL) why = "soft";
            } else {
                c->obuf_soft_since = 0;
            }
            if (why) {
                stats.obuf_drops++;
                nkLog(LL_WARNING, "Replica %s:%d (proxied full sync) closed for overcoming of "
                      "output buffer limits (%s limit, %lld bytes queued)",
                      c->ip, c->listening_port ? c->listening_port : c->port, why, pending);
                nkClientFree(c);
                continue;
            }
        }
        if (c->state == NK_CLIENT_HANDOVER && c->stream_on_ack &&
            now - c->ack_wait_io > nk.cfg.repl_timeout * 1000LL) {
            /* As a master times out a replica that loads in silence. */
            nkLog(LL_WARNING, "Replica %s:%d: silent for repl-timeout (%d s) after its RDB, without the "
                  "REPLCONF ACK that starts its stream: closing it", c->ip, c->listening_port,
                  nk.cfg.repl_timeout);
            nkClientFree(c);
            continue;
        }
        if (need_auth && !c->authenticated && nk.cfg.auth_timeout &&
            now - c->ctime_ms >= nk.cfg.auth_timeout * 1000LL) {
            stats.auth_timeouts++;
            nkLog(LL_VERBOSE, "Client %s:%d did not authenticate in %d seconds: closing it",
                  c->ip, c->port, nk.cfg.auth_timeout);
            nkClientFree(c);
        }
    }
}

/* Every 100 ms: PSYNCs waiting for the stream, clients' limits, accepting
 * again; every NICKV_HEARTBEAT_MS: the heartbeat to the master; every second:
 * the link, the failed AUTH summary. */
static int nkCron(aeEventLoop *el, long long id, void *data) {
    static int ticks = 0;
    (void)id; (void)data;
    if (nk.shutdown_asap) {
        nkLog(LL_WARNING, "Nic-KV is shutting down");
        /* The master first: it must forget us before a replica we drop
         * reaches it, or it would send that replica back to our port, to
         * the Nic-KV started after us, which cannot serve it yet (its
         * backlog starts where the master is then) and sends it back to
         * the master for NICKV_HOLD_SECONDS. */
        nkLinkShutdown();
        nkReplicasDropAll("Nic-KV is shutting down");
        nkFailoverShutdown();
        nkCoordShutdown();
        if (nk.cfg.pidfile) unlink(nk.cfg.pidfile);
        aeStop(el);
        return AE_NOMORE;
    }
    nkAcceptResumeCron();
    nkClientsCron();
    if (ticks++ % 10 == 0) {
        nkAuthFailuresCron();
        nkLogRepeatCron();
        nkLinkCron();
        nkLoopCron(nk.loop);
        for (int i = 0; i < nk.rdma_count; i++) rdmaListenerCron(nk.rdma_listeners[i]);
        if (nk.rdma_count || nk.cfg.master_rdma_port) rdmaCron();
    }
    if (ticks % (NICKV_HEARTBEAT_MS / 100) == 0) nkLinkHeartbeat();
    nkPsyncWaitersCheck();
    nkLinkResume();
    return 100;
}

static void sigShutdown(int sig) {
    (void)sig;
    nk.shutdown_asap = 1;
}

static void beforeSleep(aeEventLoop *el) {
    (void)el;
    nkReplicasMainEvents();
    nkLinkResume();               /* before the pass: it may re-arm the link */
    nkLoopBeforeSleep(nk.loop);
    nkFanoutFlushHandovers();
    nkProbeAfterEvents();
    if (nk.shutdown_asap) aeSetDontWait(nk.el, 1);
}

/* --help, --version, --selftest-getack: what they print or return, or -1
 * when argv asks for none of them (the daemon runs). */
static int mainEarlyFlags(int argc, char **argv) {
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    if (argc == 2 && !strcmp(argv[1], "--selftest-getack")) return nkLinkSelftestGetack();
    if (argc >= 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-v"))) {
        printf("Nic-KV v=%s skv=%s\n", NICKV_VERSION, SKV_VERSION);
        return 0;
    }
    return -1;
}

/* The config file (argv[1], when it is not an option), then --name value
 * ... as lines of a config file after it. -1 when the file cannot be read
 * (configLoad itself exits on a bad line). */
static int mainLoadConfig(int argc, char **argv) {
    sds options = sdsempty();
    int j = 1;
    if (argc >= 2 && argv[1][0] != '-') {
        FILE *fp = fopen(argv[1], "r");
        char buf[4096];
        sds text = sdsempty();
        size_t n;
        if (!fp) {
            fprintf(stderr, "nic-kv: cannot open the config file %s: %s\n", argv[1], strerror(errno));
            sdsfree(text);
            sdsfree(options);
            return -1;
        }
        while ((n = fread(buf, 1, sizeof(buf), fp)) > 0) text = sdscatlen(text, buf, n);
        fclose(fp);
        nk.cfg.config_file = zstrdup(argv[1]);
        configLoad(text, argv[1]);
        sdsfree(text);
        j = 2;
    }
    for (; j < argc; j++) {
        if (!strncmp(argv[j], "--", 2)) {
            if (sdslen(options)) options = sdscat(options, "\n");
            options = sdscat(options, argv[j] + 2);
        } else {
            options = sdscat(options, " ");
            options = sdscatrepr(options, argv[j], strlen(argv[j]));
        }
    }
    configLoad(options, "the command line");
    sdsfree(options);
    return 0;
}

/* What the options make possible, checked before anything starts:
 * passwords, members, a port, TLS, the log file, open files. -1 (said on
 * stderr or in the log) stops the daemon. */
static int mainCheckConfig(void) {
    const char *err;
    char tlserr[512];
    if (!applyPasswords(&err) || !nkMembersCheck(&err)) {
        fprintf(stderr, "nic-kv: %s\n", err);
        return -1;
    }
    if (!nk.cfg.port && !nk.cfg.tls_port) {
        fprintf(stderr, "nic-kv: port 0 and no tls-port: replicas could not reach Nic-KV\n");
        return -1;
    }
    if (nkTlsInit(tlserr, sizeof(tlserr)) == -1) {
        fprintf(stderr, "nic-kv: %s\n", tlserr);
        return -1;
    }
    if (nk.cfg.tls_replication && nk.cfg.master_rdma_port)
        nkLog(LL_WARNING, "tls-replication yes, but master-rdma-port: the link to the master (its AUTH, "
              "Nic-KV's key, the stream) goes over RDMA, which is not encrypted (NIC-KV.md, \"TLS\")");
    if (nk.cfg.logfile) {
        /* As redis-server: a log that cannot be written stops us here. */
        FILE *fp = fopen(nk.cfg.logfile, "a");
        if (!fp) {
            fprintf(stderr, "nic-kv: Can't open the log file %s: %s\n", nk.cfg.logfile,
                    strerror(errno));
            return -1;
        }
        fclose(fp);
    }
    if (nkAdjustOpenFilesLimit() == -1) return -1;
    return 0;
}

/* daemonize, the pid file, signals; then this process's identity: the
 * public instance id, and the key from the kernel's generator alone
 * (getRandomHexChars falls back to a time and pid seed, shared with the
 * public instance id). */
static int mainProcess(void) {
    if (nk.cfg.daemonize) {
        if (daemon(1, 0) == -1) {
            perror("nic-kv: daemon");
            return -1;
        }
    }
    if (nk.cfg.pidfile) {
        FILE *fp = fopen(nk.cfg.pidfile, "w");
        if (fp) { fprintf(fp, "%d\n", (int)getpid()); fclose(fp); }
    }
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, sigShutdown);
    signal(SIGINT, sigShutdown);

    nk.start_time = time(NULL);
    getRandomHexChars(nk.instance, NICKV_INSTANCE_LEN);
    nk.instance[NICKV_INSTANCE_LEN] = '\0';
    unsigned char raw[NICKV_KEY_LEN / 2];
    if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
        fprintf(stderr, "nic-kv: getrandom: %s: no key can be drawn\n", strerror(errno));
        return -1;
    }
    for (size_t i = 0; i < sizeof(raw); i++) snprintf(nk.key + 2 * i, 3, "%02x", raw[i]);
    memset(raw, 0, sizeof(raw));
    return 0;
}

/* The parts, wired and started: the replicas, the link, the backlog, the
 * fan-out threads, the listeners, RDMA, the failover, the cron. */
static int mainStart(void) {
    nk.clients = listCreate();
    nkReplicaInit();
    nkLinkInit();
    /* The layers know only those below them. What a lower one tells a
     * higher one is wired here: the backlog asks the replicas to drop the
     * owner of a pin, the fan-out threads post their events (a replica
     * gone, an ACK to relay) to the replicas' main-thread side, and the
     * link tells the PSYNCs waiting for the stream, drops or announces
     * the replicas, and asks the coordinator and the members whether it
     * may link to the master. */
    static const nkLinkReplicaOps link_replicas = {
        .count = nkReplicaCount,
        .drop_all = nkReplicasDropAll,
        .announce = nkReplicasAnnounce,
        .rdma_port = nkRdmaPort,
        .slots_free = nkClientSlotsFree,
        .fanout = nkCoordFanout,
        .member = nkMember,
    };
    nkBacklogSetDropper(nkReplicaDrop);
    nkFanoutOnState(nkReplicaSetState);
    nkFanoutOnEvents(nkReplicasMainEvents);
    nkLinkOnStream(nkPsyncWaitersCheck);
    nkLinkOnReplicas(&link_replicas);
    /* The failover and the probes tell SENTINEL's subscribers their events,
     * and the probes watch the replicas streaming from us. */
    static const nkFailoverSinks failover_sinks = {
        .event = nkSentinelEvent,
        .switch_master = nkSentinelSwitchMaster,
        .replicas_init = nkReplicaIterInit,
        .replicas_next = nkReplicaIterNext,
    };
    nkFailoverOnEvents(&failover_sinks);
    nk.el = aeCreateEventLoop(65536);
    nk.loop = nkLoopCreate(nk.el);
    if (nkBacklogInit(nk.cfg.backlog_size) == -1) {
        nkLog(LL_WARNING, "Cannot allocate a %lld byte backlog", nk.cfg.backlog_size);
        return -1;
    }
    if (nkFanoutStart(nk.el, nk.cfg.thread_num) == -1) return -1;
    if (nkListen(nk.cfg.port, 0) == -1 || nkListen(nk.cfg.tls_port, 1) == -1) return -1;
    nkRdmaStart();
    if (nkFailoverInit() == -1) return -1;
    if (nkFailoverStart() == -1) return -1;
    aeCreateTimeEvent(nk.el, 1, nkCron, NULL, NULL);
    aeSetBeforeSleepProc(nk.el, beforeSleep);
    return 0;
}

int main(int argc, char **argv) {
    int early;
    configDefaults();
    if ((early = mainEarlyFlags(argc, argv)) != -1) return early;
    if (mainLoadConfig(argc, argv) == -1 || mainCheckConfig() == -1) return 1;
    if (mainProcess() == -1 || mainStart() == -1) return 1;
    nkLog(LL_NOTICE, "Nic-KV %s (SKV %s) listening on port %d, tls-port %d, master %s:%d%s, backlog %lld "
          "bytes, thread-num %d", NICKV_VERSION, SKV_VERSION, nk.cfg.port, nk.cfg.tls_port,
          nk.cfg.master_host, nk.cfg.master_port, nk.cfg.tls_replication ? " (TLS)" : "",
          nk.cfg.backlog_size, nk.cfg.thread_num);
#ifdef NK_DEBUG
    nkLog(LL_NOTICE, "Debug build: invariants are checked, and a broken one aborts (nkBug)");
#endif
    nkLinkCron();
    aeMain(nk.el);
    nkFanoutStop();
    nkLog(LL_NOTICE, "Nic-KV is now ready to exit, bye bye...");
    return 0;
}
