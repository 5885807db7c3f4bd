/* rdma_tool.c -- skv-rdma-tool: a TCP-to-RDMA proxy and RDMA test clients.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 *   skv-rdma-tool proxy <listen-port> <rdma-host> <rdma-port>
 *       Accept TCP connections on 127.0.0.1:<listen-port>; for each, open an
 *       RDMA connection to the server and copy bytes both ways. Any TCP
 *       client (upstream's test harness, a client library without RDMA)
 *       then reaches the server over RDMA.
 *   skv-rdma-tool async <host> <port> <count>
 *       hiredis's async API over RDMA, in an ae loop: <count> INCRs and a
 *       large SET/GET, every reply checked. Prints "async ok" on success.
 *   skv-rdma-tool bad <host> <port> <case>
 *       A raw-verbs client that breaks the protocol as <case> says (see
 *       badCases below), then waits for the server to drop it. Prints
 *       "closed by server" when it does (exit 0), or "still open" (exit 2).
 *   skv-rdma-tool hold <host> <port> <seconds> [auth-password]
 *       A well-behaved connection that does nothing for <seconds> (after an
 *       AUTH, when given), then PINGs: prints the reply or why it failed.
 *   skv-rdma-tool conns <host> <port> <count> <seconds> [password]
 *       Opens <count> connections one after another (64 KiB receive buffer
 *       each), sends PING (after an AUTH, when a password is given) on
 *       every one that was accepted and reads the reply, prints a summary
 *       ("accepted A refused R replied P failed F": P got a reply, F none)
 *       and each distinct refusal, failure or reply other than +PONG once
 *       ("reason: ..." lines), then holds the
 *       connections for <seconds> before exiting. For the server's limits:
 *       what it accepts it must serve, what it cannot serve it must refuse.
 *       SKV_TOOL_INFLIGHT=<n> keeps up to n connects in progress at once
 *       (as a busy client pool does) instead of one after another.
 *   skv-rdma-tool churn <host> <port> <count>
 *       <count> times: a raw connect request, then the id destroyed at once
 *       (the peer leaves while the server accepts). Prints "churned N".
 *
 * Everything here is test and operator tooling: the server does not need it.
 */

#include "ae.h"            /* first: its fmacros.h sets the feature macros */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "anet.h"
#include <hiredis.h>
#include <async.h>

#include "hiredis_rdma.h"
#include "rdma_chan.h"
#include "rdma_ae.h"


static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

/* ------------------------------------------------------------- Proxy --- */

#define PROXY_BUF (256*1024)

typedef struct proxyConn {
    int fd;                   /* TCP side */
    rdmaChan *ch;             /* RDMA side */
    rdmaAeChan *ae;           /* its registration in P.ra */
    char *to_rdma;            /* TCP bytes not yet written to RDMA */
    size_t to_rdma_len, to_rdma_off;
    char *to_tcp;             /* RDMA bytes not yet written to TCP */
    size_t to_tcp_len, to_tcp_off;
    int tcp_watch;            /* AE_READABLE registered on fd */
    int tcp_out;              /* AE_WRITABLE registered on fd */
    struct proxyConn *next, *prev;
} proxyConn;

static struct {
    aeEventLoop *el;
    rdmaAe *ra;               /* drives the RDMA sides (rdma_ae.h) */
    const char *host;
    int port;
    proxyConn *conns;
} P;

static void proxyClose(proxyConn *pc) {
    aeDeleteFileEvent(P.el, pc->fd, AE_READABLE | AE_WRITABLE);
    rdmaAeDel(pc->ae);
    close(pc->fd);
    rdmaChanClose(pc->ch);
    if (pc->prev) pc->prev->next = pc->next;
    else P.conns = pc->next;
    if (pc->next) pc->next->prev = pc->prev;
    free(pc->to_rdma);
    free(pc->to_tcp);
    free(pc);
}

static void proxyTcpReadable(aeEventLoop *el, int fd, void *data, int mask);
static void proxyTcpWritable(aeEventLoop *el, int fd, void *data, int mask);

/* Move what can move; returns -1 when the pair must be closed. Reading a
 * side stops while the bytes read from it have not been passed on. */
static int proxyPump(proxyConn *pc) {
    /* TCP -> RDMA */
    while (pc->to_rdma_off < pc->to_rdma_len) {
        ssize_t n = rdmaChanWrite(pc->ch, pc->to_rdma + pc->to_rdma_off, pc->to_rdma_len - pc->to_rdma_off);
        if (n < 0) {
            if (errno == EAGAIN) break;
            return -1;
        }
        pc->to_rdma_off += n;
    }
    if (pc->to_rdma_off == pc->to_rdma_len) pc->to_rdma_off = pc->to_rdma_len = 0;
    if (pc->to_rdma_len == 0 && !pc->tcp_watch) {
        aeCreateFileEvent(P.el, pc->fd, AE_READABLE, proxyTcpReadable, pc);
        pc->tcp_watch = 1;
    } else if (pc->to_rdma_len && pc->tcp_watch) {
        aeDeleteFileEvent(P.el, pc->fd, AE_READABLE);
        pc->tcp_watch = 0;
    }
    /* RDMA -> TCP */
    for (;;) {
        if (pc->to_tcp_off == pc->to_tcp_len) {
            ssize_t n = rdmaChanRead(pc->ch, pc->to_tcp, PROXY_BUF);
            pc->to_tcp_off = pc->to_tcp_len = 0;
            if (n == 0) return -1;
            if (n < 0) {
                if (errno == EAGAIN) break;
                return -1;
            }
            pc->to_tcp_len = n;
        }
        ssize_t w = write(pc->fd, pc->to_tcp + pc->to_tcp_off, pc->to_tcp_len - pc->to_tcp_off);
        if (w < 0) {
            if (errno == EAGAIN) break;
            return -1;
        }
        pc->to_tcp_off += w;
    }
    if (pc->to_tcp_off < pc->to_tcp_len && !pc->tcp_out) {
        aeCreateFileEvent(P.el, pc->fd, AE_WRITABLE, proxyTcpWritable, pc);
        pc->tcp_out = 1;
    } else if (pc->to_tcp_off == pc->to_tcp_len && pc->tcp_out) {
        aeDeleteFileEvent(P.el, pc->fd, AE_WRITABLE);
        pc->tcp_out = 0;
    }
    /* The RDMA side: read while the TCP side took everything, write while
     * TCP bytes wait. */
    rdmaAeSetMask(pc->ae, (pc->to_tcp_off == pc->to_tcp_len ? RDMA_AE_READABLE : 0) |
                          (pc->to_rdma_len ? RDMA_AE_WRITABLE : 0));
    return 0;
}

static void proxyTcpReadable(aeEventLoop *el, int fd, void *data, int mask) {
    (void)el; (void)mask;
    proxyConn *pc = data;
    ssize_t n = read(fd, pc->to_rdma, PROXY_BUF);
    if (n == 0 || (n < 0 && errno != EAGAIN)) { proxyClose(pc); return; }
    if (n > 0) { pc->to_rdma_len = n; pc->to_rdma_off = 0; }
    if (proxyPump(pc) == -1) proxyClose(pc);
}

static void proxyTcpWritable(aeEventLoop *el, int fd, void *data, int mask) {
    (void)el; (void)fd; (void)mask;
    if (proxyPump(data) == -1) proxyClose(data);
}

static void proxyRdmaProc(rdmaAeChan *e, void *data) {
    (void)e;
    if (proxyPump(data) == -1) proxyClose(data);
}

static void proxyAccept(aeEventLoop *el, int lfd, void *data, int mask) {
    (void)el; (void)data; (void)mask;
    char ip[64], err[256];
    int port, fd;
    proxyConn *pc;

    fd = anetTcpAccept(err, lfd, ip, sizeof(ip), &port);
    if (fd == ANET_ERR) return;
    anetNonBlock(NULL, fd);
    anetEnableTcpNoDelay(NULL, fd);
    pc = calloc(1, sizeof(*pc));
    pc->fd = fd;
    pc->to_rdma = malloc(PROXY_BUF);
    pc->to_tcp = malloc(PROXY_BUF);
    pc->ch = rdmaChanConnect(P.host, P.port, NULL, RDMA_RX_SIZE_DEFAULT, -1, 5000, err, sizeof(err));
    if (!pc->ch || rdmaChanWaitConnected(pc->ch, 5000) == -1) {
        fprintf(stderr, "proxy: RDMA connect to %s:%d failed: %s\n", P.host, P.port,
                pc->ch ? rdmaChanError(pc->ch) : err);
        if (pc->ch) rdmaChanClose(pc->ch);
        close(fd);
        free(pc->to_rdma); free(pc->to_tcp); free(pc);
        return;
    }
    pc->ae = rdmaAeAdd(P.ra, pc->ch, proxyRdmaProc, proxyRdmaProc, pc);
    if (!pc->ae) {
        fprintf(stderr, "proxy: cannot watch the RDMA channel: %s\n", strerror(errno));
        rdmaChanClose(pc->ch);
        close(fd);
        free(pc->to_rdma); free(pc->to_tcp); free(pc);
        return;
    }
    rdmaAeSetMask(pc->ae, RDMA_AE_READABLE);
    pc->next = P.conns;
    if (P.conns) P.conns->prev = pc;
    P.conns = pc;
    aeCreateFileEvent(P.el, fd, AE_READABLE, proxyTcpReadable, pc);
    pc->tcp_watch = 1;
}

/* RDMA has no writable readiness: the adapter retries pending writes and
 * buffered reads before sleeping. */
static void proxyBeforeSleep(aeEventLoop *el) {
    (void)el;
    rdmaAeBeforeSleep(P.ra);
}

static int proxyCron(aeEventLoop *el, long long id, void *data) {
    (void)el; (void)id; (void)data;
    rdmaAeCron(P.ra);
    return 1000;
}

static int cmdProxy(int argc, char **argv) {
    char err[ANET_ERR_LEN];
    int lfd;
    if (argc != 5) die("usage: skv-rdma-tool proxy <listen-port> <rdma-host> <rdma-port>");
    P.host = argv[3];
    P.port = atoi(argv[4]);
    if (rdmaInit(NULL, err, sizeof(err)) == -1) die("rdmaInit: %s", err);
    P.el = aeCreateEventLoop(10240);
    P.ra = rdmaAeCreate(P.el);
    if (!P.ra) die("out of memory");
    lfd = anetTcpServer(err, atoi(argv[2]), "127.0.0.1", 511);
    if (lfd == ANET_ERR) die("listen: %s", err);
    anetNonBlock(NULL, lfd);
    aeCreateFileEvent(P.el, lfd, AE_READABLE, proxyAccept, NULL);
    aeCreateTimeEvent(P.el, 1000, proxyCron, NULL, NULL);
    aeSetBeforeSleepProc(P.el, proxyBeforeSleep);
    printf("proxy: 127.0.0.1:%s -> rdma %s:%d\n", argv[2], P.host, P.port);
    fflush(stdout);
    aeMain(P.el);
    return 0;
}

/* ------------------------------------------------------------- Async --- */

static struct {
    aeEventLoop *el;
    long expected, got;
    int failed;
    size_t biglen;
} A;

static void asyncDone(redisAsyncContext *ac) {
    aeStop(A.el);
    (void)ac;
}

static void asyncIncrReply(redisAsyncContext *ac, void *r, void *priv) {
    redisReply *reply = r;
    long want = (long)(intptr_t)priv;
    if (!reply || reply->type != REDIS_REPLY_INTEGER || reply->integer != want) {
        fprintf(stderr, "async: INCR #%ld: bad reply\n", want);
        A.failed = 1;
    }
    if (++A.got == A.expected) asyncDone(ac);
}

static void asyncBigReply(redisAsyncContext *ac, void *r, void *priv) {
    redisReply *reply = r;
    (void)priv;
    if (!reply || reply->type != REDIS_REPLY_STRING || reply->len != A.biglen) {
        fprintf(stderr, "async: GET of the large value: bad reply\n");
        A.failed = 1;
    } else {
        for (size_t i = 0; i < reply->len; i++)
            if (reply->str[i] != (char)('a' + i % 26)) { A.failed = 1; break; }
    }
    if (++A.got == A.expected) asyncDone(ac);
}

static int asyncTimeout(aeEventLoop *el, long long id, void *data) {
    (void)id; (void)data;
    fprintf(stderr, "async: timed out with %ld of %ld replies\n", A.got, A.expected);
    A.failed = 1;
    aeStop(el);
    return AE_NOMORE;
}

static int cmdAsync(int argc, char **argv) {
    long count, i;
    char *big;
    redisAsyncContext *ac;

    if (argc != 5) die("usage: skv-rdma-tool async <host> <port> <count>");
    count = atol(argv[4]);
    redisRdmaEnabled = 1;
    A.el = aeCreateEventLoop(1024);
    redisRdmaAttachAeLoop(A.el);
    ac = redisAsyncConnectRdma(argv[2], atoi(argv[3]));
    if (!ac || ac->err) die("async: connect: %s", ac ? ac->errstr : "out of memory");
    redisRdmaAeAttach(A.el, ac);
    A.biglen = 3 * 1024 * 1024 + 17;   /* larger than one receive buffer */
    big = malloc(A.biglen);
    for (size_t j = 0; j < A.biglen; j++) big[j] = 'a' + j % 26;
    A.expected = count + 1;
    redisAsyncCommand(ac, NULL, NULL, "DEL asynccounter");
    for (i = 1; i <= count; i++)
        redisAsyncCommand(ac, asyncIncrReply, (void *)(intptr_t)i, "INCR asynccounter");
    redisAsyncCommand(ac, NULL, NULL, "SET asyncbig %b", big, A.biglen);
    redisAsyncCommand(ac, asyncBigReply, NULL, "GET asyncbig");
    aeCreateTimeEvent(A.el, 60000, asyncTimeout, NULL, NULL);
    aeMain(A.el);
    free(big);
    if (A.failed) return 1;
    printf("async ok %ld\n", A.got);
    redisAsyncDisconnect(ac);
    return 0;
}

/* --------------------------------------------------------------- Hold --- */

static int cmdHold(int argc, char **argv) {
    redisContext *c;
    redisReply *r;
    if (argc != 5 && argc != 6) die("usage: skv-rdma-tool hold <host> <port> <seconds> [password]");
    c = redisConnectRdma(argv[2], atoi(argv[3]), NULL);
    if (!c || c->err) die("hold: connect: %s", c ? c->errstr : "out of memory");
    printf("connected\n");
    fflush(stdout);
    if (argc == 6) {
        r = redisCommand(c, "AUTH %s", argv[5]);
        if (!r) die("hold: AUTH: %s", c->errstr);
        freeReplyObject(r);
    }
    sleep(atoi(argv[4]));
    r = redisCommand(c, "PING");
    if (!r) {
        printf("failed: %s\n", c->errstr);
        return 1;
    }
    printf("%s\n", r->str ? r->str : "(reply)");
    freeReplyObject(r);
    redisFree(c);
    return 0;
}

/* ----------------------------------------------------------- Bad peer --- */

/* A client speaking raw verbs, so that it can break the protocol. */
typedef struct rawConn {
    struct rdma_event_channel *cmch;
    struct rdma_cm_id *id;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_mr *ctrl_mr, *data_mr, *rx_mr;
    unsigned char *ctrl;          /* 64 recv slots of 32 bytes + send area */
    char *data;                   /* 1 MiB of staging */
    char *rx;                     /* 1 MiB receive buffer */
    uint64_t peer_addr;
    uint32_t peer_len, peer_rkey;
    int peer_known;
    size_t rx_used;
} rawConn;

#define RAW_SLOTS 64
#define RAW_DATA (1024*1024)

static void rawWaitCm(rawConn *rc, enum rdma_cm_event_type want) {
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(rc->cmch, &ev)) die("rdma_get_cm_event: %s", strerror(errno));
    if (ev->event != want) die("bad: expected %s, got %s", rdma_event_str(want), rdma_event_str(ev->event));
    rdma_ack_cm_event(ev);
}

static void rawPostRecv(rawConn *rc, int slot) {
    struct ibv_sge sge = { (uintptr_t)(rc->ctrl + slot * RDMA_CTRL_MSG_SIZE), RDMA_CTRL_MSG_SIZE, rc->ctrl_mr->lkey };
    struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 }, *bad;
    if (ibv_post_recv(rc->id->qp, &wr, &bad)) die("ibv_post_recv: %s", strerror(errno));
}

static void rawConnect(rawConn *rc, const char *host, int port) {
    struct addrinfo *res;
    struct ibv_qp_init_attr qpa;
    struct rdma_conn_param param;
    char portstr[16];

    memset(rc, 0, sizeof(*rc));
    snprintf(portstr, sizeof(portstr), "%d", port);
    if (getaddrinfo(host, portstr, NULL, &res)) die("cannot resolve %s", host);
    if (!(rc->cmch = rdma_create_event_channel())) die("rdma_create_event_channel: %s", strerror(errno));
    if (rdma_create_id(rc->cmch, &rc->id, NULL, RDMA_PS_TCP)) die("rdma_create_id: %s", strerror(errno));
    if (rdma_resolve_addr(rc->id, NULL, res->ai_addr, 5000)) die("rdma_resolve_addr: %s", strerror(errno));
    freeaddrinfo(res);
    rawWaitCm(rc, RDMA_CM_EVENT_ADDR_RESOLVED);
    if (rdma_resolve_route(rc->id, 5000)) die("rdma_resolve_route: %s", strerror(errno));
    rawWaitCm(rc, RDMA_CM_EVENT_ROUTE_RESOLVED);
    rc->pd = ibv_alloc_pd(rc->id->verbs);
    rc->cq = ibv_create_cq(rc->id->verbs, 256, NULL, NULL, 0);
    memset(&qpa, 0, sizeof(qpa));
    qpa.send_cq = qpa.recv_cq = rc->cq;
    qpa.qp_type = IBV_QPT_RC;
    qpa.cap.max_send_wr = 128;
    qpa.cap.max_recv_wr = RAW_SLOTS;
    qpa.cap.max_send_sge = qpa.cap.max_recv_sge = 1;
    if (!rc->pd || !rc->cq || rdma_create_qp(rc->id, rc->pd, &qpa)) die("qp setup: %s", strerror(errno));
    rc->ctrl = calloc(1, RAW_SLOTS * RDMA_CTRL_MSG_SIZE + 4096);
    rc->data = calloc(1, RAW_DATA);
    rc->rx = calloc(1, RAW_DATA);
    rc->ctrl_mr = ibv_reg_mr(rc->pd, rc->ctrl, RAW_SLOTS * RDMA_CTRL_MSG_SIZE + 4096, IBV_ACCESS_LOCAL_WRITE);
    rc->data_mr = ibv_reg_mr(rc->pd, rc->data, RAW_DATA, IBV_ACCESS_LOCAL_WRITE);
    rc->rx_mr = ibv_reg_mr(rc->pd, rc->rx, RAW_DATA, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!rc->ctrl_mr || !rc->data_mr || !rc->rx_mr) die("ibv_reg_mr: %s", strerror(errno));
    for (int i = 0; i < RAW_SLOTS; i++) rawPostRecv(rc, i);
    memset(&param, 0, sizeof(param));
    param.responder_resources = param.initiator_depth = 1;
    /* 7, as RDMA clients ask (SKV's too): Soft-RoCE then retries for ever
     * and the server falls back to its watchdog. SKV_TOOL_RETRY_COUNT=6
     * gives queue pairs that Soft-RoCE times out, as a real NIC does. */
    param.retry_count = getenv("SKV_TOOL_RETRY_COUNT") ? (uint8_t)atoi(getenv("SKV_TOOL_RETRY_COUNT")) : 7;
    param.rnr_retry_count = 7;
    if (rdma_connect(rc->id, &param)) die("rdma_connect: %s", strerror(errno));
    rawWaitCm(rc, RDMA_CM_EVENT_ESTABLISHED);
}

/* Send len bytes (any size, any content) as one IBV_WR_SEND. */
static void rawSend(rawConn *rc, const void *msg, size_t len) {
    unsigned char *area = rc->ctrl + RAW_SLOTS * RDMA_CTRL_MSG_SIZE;
    struct ibv_sge sge = { (uintptr_t)area, (uint32_t)len, rc->ctrl_mr->lkey };
    struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
                              .send_flags = IBV_SEND_SIGNALED }, *bad;
    memcpy(area, msg, len);
    if (ibv_post_send(rc->id->qp, &wr, &bad)) die("ibv_post_send: %s", strerror(errno));
}

/* Any opcode, the ones no server knows included (the bad peers' point). */
static void rawCtrl(rawConn *rc, uint16_t op, uint64_t addr, uint32_t len, uint32_t key, uint64_t features) {
    rdmaCtrlMsg m;
    if (op == RDMA_OP_REGISTER_XFER_MEMORY) rdmaCtrlXfer(&m, addr, len, key);
    else rdmaCtrlFeature(&m, op, 0, features);
    rawSend(rc, &m, sizeof(m));
}

static void rawRegisterOurs(rawConn *rc) {
    rawCtrl(rc, RDMA_OP_REGISTER_XFER_MEMORY, (uintptr_t)rc->rx, RAW_DATA, rc->rx_mr->rkey, 0);
}

/* Poll completions for up to ms. Returns -1 when the connection failed
 * (error completion or DISCONNECTED), 0 otherwise. Learns the peer's
 * buffer from its RegisterXferMemory. */
static int rawPoll(rawConn *rc, int ms) {
    long long end = 0;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    end = ts.tv_sec * 1000LL + ts.tv_nsec / 1000000 + ms;
    fcntl(rc->cmch->fd, F_SETFL, O_NONBLOCK);
    for (;;) {
        struct ibv_wc wc;
        struct rdma_cm_event *ev;
        int n;
        while ((n = ibv_poll_cq(rc->cq, 1, &wc)) > 0) {
            if (wc.status != IBV_WC_SUCCESS) return -1;
            if (wc.opcode == IBV_WC_RECV) {
                rdmaCtrlMsg m;
                memcpy(&m, rc->ctrl + wc.wr_id * RDMA_CTRL_MSG_SIZE, sizeof(m));
                if (rdmaCtrlOpcode(&m) == RDMA_OP_REGISTER_XFER_MEMORY) {
                    rc->peer_addr = rdmaBe64(m.xfer.addr);
                    rc->peer_len = rdmaBe32(m.xfer.length);
                    rc->peer_rkey = rdmaBe32(m.xfer.rkey);
                    rc->peer_known = 1;
                }
                rawPostRecv(rc, (int)wc.wr_id);
            } else if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
                rc->rx_used += ntohl(wc.imm_data);
                rawPostRecv(rc, (int)wc.wr_id);
            }
        }
        if (rdma_get_cm_event(rc->cmch, &ev) == 0) {
            int disc = ev->event == RDMA_CM_EVENT_DISCONNECTED;
            rdma_ack_cm_event(ev);
            if (disc) return -1;
        }
        clock_gettime(CLOCK_MONOTONIC, &ts);
        if (ts.tv_sec * 1000LL + ts.tv_nsec / 1000000 >= end) return 0;
        usleep(1000);
    }
}

/* RDMA WRITE_WITH_IMM of len bytes at offset off of the peer's buffer,
 * claiming imm bytes. */
static void rawWrite(rawConn *rc, size_t off, size_t len, uint32_t imm) {
    struct ibv_sge sge = { (uintptr_t)rc->data, (uint32_t)len, rc->data_mr->lkey };
    struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
                              .send_flags = IBV_SEND_SIGNALED }, *bad;
    wr.imm_data = htonl(imm);
    wr.wr.rdma.remote_addr = rc->peer_addr + off;
    wr.wr.rdma.rkey = rc->peer_rkey;
    if (ibv_post_send(rc->id->qp, &wr, &bad)) die("ibv_post_send: %s", strerror(errno));
}

static void rawHandshake(rawConn *rc) {
    rawRegisterOurs(rc);
    for (int i = 0; i < 50 && !rc->peer_known; i++)
        if (rawPoll(rc, 100) == -1) die("bad: closed during the handshake");
    if (!rc->peer_known) die("bad: the server never sent its buffer");
}

/* Send a command as data; returns bytes written. */
static size_t rawCommand(rawConn *rc, size_t off, const char *cmd) {
    size_t len = strlen(cmd);
    memcpy(rc->data, cmd, len);
    rawWrite(rc, off, len, (uint32_t)len);
    return len;
}

static const char *badCases =
    "short-ctrl long-ctrl bad-opcode hs-bad-opcode feature xfer-zero xfer-huge imm-overflow "
    "imm-past-end rdma-read atomic bad-rkey no-handshake no-read kill-mid go-silent early-burst";

/* An RDMA READ (atomic = 0) or fetch-and-add (atomic = 1) on the peer's
 * receive buffer, which it registered for remote writes only. */
static void rawReadOrAtomic(rawConn *rc, int atomic) {
    struct ibv_sge sge = { (uintptr_t)rc->data, atomic ? 8 : 64, rc->data_mr->lkey };
    struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .send_flags = IBV_SEND_SIGNALED }, *bad;
    if (atomic) {
        wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
        wr.wr.atomic.remote_addr = rc->peer_addr;
        wr.wr.atomic.rkey = rc->peer_rkey;
        wr.wr.atomic.compare_add = 1;
    } else {
        wr.opcode = IBV_WR_RDMA_READ;
        wr.wr.rdma.remote_addr = rc->peer_addr;
        wr.wr.rdma.rkey = rc->peer_rkey;
    }
    if (ibv_post_send(rc->id->qp, &wr, &bad)) die("ibv_post_send: %s", strerror(errno));
}

/* bad's cases that send one malformed thing and then watch the server:
 * 1 when what is one of them (sent), 0 when it is not. */
static int badSendMalformed(rawConn *rc, const char *what) {
    unsigned char m[64];
    memset(m, 0, sizeof(m));
    if (!strcmp(what, "short-ctrl")) {
        rawRegisterOurs(rc);
        rawSend(rc, m, 16);
    } else if (!strcmp(what, "long-ctrl")) {
        rawRegisterOurs(rc);
        rawSend(rc, m, 64);
    } else if (!strcmp(what, "bad-opcode")) {
        rawHandshake(rc);
        rawCtrl(rc, 77, 0, 0, 0, 0);
    } else if (!strcmp(what, "hs-bad-opcode")) {
        /* Before telling the server where to write: mid-handshake. */
        rawCtrl(rc, 77, 0, 0, 0, 0);
    } else if (!strcmp(what, "rdma-read")) {
        rawHandshake(rc);
        rawReadOrAtomic(rc, 0);
    } else if (!strcmp(what, "atomic")) {
        rawHandshake(rc);
        rawReadOrAtomic(rc, 1);
    } else if (!strcmp(what, "bad-rkey")) {
        /* A write with imm_data into the server's buffer, with a key it
         * never gave: its NIC refuses it (a remote access error). */
        rawHandshake(rc);
        rc->peer_rkey ^= 0x5a5a;
        rawWrite(rc, 0, 8, 8);
    } else if (!strcmp(what, "feature")) {
        rawHandshake(rc);
        rawCtrl(rc, RDMA_OP_SET_CLIENT_FEATURE, 0, 0, 0, 0x1);
    } else if (!strcmp(what, "xfer-zero")) {
        rawCtrl(rc, RDMA_OP_REGISTER_XFER_MEMORY, (uintptr_t)rc->rx, 0, rc->rx_mr->rkey, 0);
    } else if (!strcmp(what, "xfer-huge")) {
        rawCtrl(rc, RDMA_OP_REGISTER_XFER_MEMORY, (uintptr_t)rc->rx, 0xFFFFFFFFu, rc->rx_mr->rkey, 0);
    } else if (!strcmp(what, "imm-overflow")) {
        /* 8 bytes written, but imm_data says four times the buffer. */
        rawHandshake(rc);
        rawWrite(rc, 0, 8, rc->peer_len * 4);
    } else if (!strcmp(what, "imm-past-end")) {
        /* Honest sizes, but the sum runs past the end of the buffer. */
        rawHandshake(rc);
        size_t off = rawCommand(rc, 0, "*1\r\n$4\r\nPING\r\n");
        rawWrite(rc, off, 8, rc->peer_len);
    } else {
        return 0;
    }
    return 1;
}

/* bad's cases that stall or die mid-way (wait_ms: how long to watch
 * after): 1 when what is one of them, 0 when it is not. */
static int badSendStall(rawConn *rc, const char *what, int *wait_ms) {
    if (!strcmp(what, "no-handshake")) {
        /* Connected, never says where to write. */
        *wait_ms = (RDMA_HANDSHAKE_TIMEOUT + 5) * 1000;
    } else if (!strcmp(what, "no-read")) {
        /* Ask for large replies and never take them: our buffer is never
         * turned over, so the server's output to us can only pile up. */
        rawHandshake(rc);
        size_t off = 0;
        for (int i = 0; i < 200 && off + 64 < rc->peer_len; i++)
            off += rawCommand(rc, off, "*2\r\n$3\r\nGET\r\n$7\r\nbigkey1\r\n");
        *wait_ms = 15000;
    } else if (!strcmp(what, "kill-mid")) {
        /* Half of a large SET, then the process dies without a word. */
        rawHandshake(rc);
        const char *hdr = "*3\r\n$3\r\nSET\r\n$7\r\nhalfkey\r\n$400000\r\n";
        size_t off = rawCommand(rc, 0, hdr);
        memset(rc->data, 'x', 100000);
        rawWrite(rc, off, 100000, 100000);
        rawPoll(rc, 200);
        printf("killed mid-transfer\n");
        fflush(stdout);
        _exit(0);
    } else {
        return 0;
    }
    return 1;
}

/* early-burst: the server must accept us once, and answer a PING. */
static int badEarlyBurst(rawConn *rc) {
    /* Where to write, and at once a burst of keepalives: legal, and
     * they may reach the server before its own ESTABLISHED event, in
     * one batch of events with it. It must accept us once, and work. */
    rawRegisterOurs(rc);
    for (int i = 0; i < 200; i++) {         /* one every ~0.5 ms: some land mid-batch */
        rawCtrl(rc, RDMA_OP_KEEPALIVE, 0, 0, 0, 0);
        if (rawPoll(rc, 0) == -1) die("bad: closed during the handshake");
        usleep(500);
    }
    for (int i = 0; i < 50 && !rc->peer_known; i++)
        if (rawPoll(rc, 100) == -1) die("bad: closed during the handshake");
    if (!rc->peer_known) die("bad: the server never sent its buffer");
    rawCommand(rc, 0, "*1\r\n$4\r\nPING\r\n");
    for (int i = 0; i < 50 && rc->rx_used < 7; i++)
        if (rawPoll(rc, 100) == -1) die("bad: closed after PING");
    if (rc->rx_used < 7 || memcmp(rc->rx, "+PONG\r\n", 7)) die("bad: no PONG");
    printf("pong\n");
    return 0;
}

/* go-silent: the server's keepalive alone can tell. */
static int badGoSilent(rawConn *rc) {
    /* Like a host that lost power: the queue pair vanishes, no
     * disconnect is ever sent, packets to it are dropped unanswered.
     * Only the server's keepalive can tell. */
    rawHandshake(rc);
    rdma_destroy_qp(rc->id);
    printf("went silent\n");
    fflush(stdout);
    sleep(60);
    return 0;
}

static int cmdBad(int argc, char **argv) {
    rawConn rc;
    const char *what;
    int wait_ms = 5000;

    if (argc != 5) die("usage: skv-rdma-tool bad <host> <port> <case>\ncases: %s", badCases);
    what = argv[4];
    rawConnect(&rc, argv[2], atoi(argv[3]));
    if (badSendMalformed(&rc, what) || badSendStall(&rc, what, &wait_ms)) {
        /* sent: watch below */
    } else if (!strcmp(what, "early-burst")) {
        return badEarlyBurst(&rc);
    } else if (!strcmp(what, "go-silent")) {
        return badGoSilent(&rc);
    } else {
        die("unknown case '%s'; cases: %s", what, badCases);
    }
    printf("sent %s\n", what);
    fflush(stdout);
    for (int waited = 0; waited < wait_ms; waited += 100) {
        if (rawPoll(&rc, 100) == -1) {
            printf("closed by server\n");
            return 0;
        }
    }
    printf("still open\n");
    return 2;
}

/* ------------------------------------------------------ Many clients --- */

#define CONNS_REASONS 8

/* Remember a message the first time it is seen (up to CONNS_REASONS). */
static void connsNote(char reasons[][200], int *n, const char *msg) {
    for (int i = 0; i < *n; i++) if (!strcmp(reasons[i], msg)) return;
    if (*n < CONNS_REASONS) snprintf(reasons[(*n)++], 200, "%s", msg);
}

/* One PING (after an AUTH when pass is set) and its reply, within 5 s:
 * 0 for +PONG, 1 for another reply, -1 for none; why says what it was. */
static int connsPing(rdmaChan *ch, const char *pass, char *why, size_t whylen) {
    char ping[256], reply[256];
    size_t got = 0, len;
    if (pass)
        snprintf(ping, sizeof(ping), "*2\r\n$4\r\nAUTH\r\n$%zu\r\n%s\r\n*1\r\n$4\r\nPING\r\n",
                 strlen(pass), pass);
    else
        snprintf(ping, sizeof(ping), "*1\r\n$4\r\nPING\r\n");
    len = strlen(ping);
    if (rdmaChanWaitWritable(ch, 5000) == -1 || rdmaChanWrite(ch, ping, len) != (ssize_t)len) {
        snprintf(why, whylen, "write: %s", rdmaChanError(ch) ? rdmaChanError(ch) : "no room");
        return -1;
    }
    /* "+PONG\r\n", after "+OK\r\n" for an AUTH: that many lines. */
    for (int lines = 0; lines < (pass ? 2 : 1) && got < sizeof(reply) - 1;) {
        ssize_t n;
        if (rdmaChanWaitReadable(ch, 5000) == -1) {
            snprintf(why, whylen, "no reply: %s", rdmaChanError(ch) ? rdmaChanError(ch) : "timeout");
            return -1;
        }
        n = rdmaChanRead(ch, reply + got, sizeof(reply) - 1 - got);
        if (n <= 0) {
            snprintf(why, whylen, "read: %s", rdmaChanError(ch) ? rdmaChanError(ch) : "EOF");
            return -1;
        }
        for (ssize_t k = 0; k < n; k++) if (reply[got + (size_t)k] == '\n') lines++;
        got += (size_t)n;
    }
    reply[got] = '\0';
    if (strncmp(reply, pass ? "+OK\r\n+PONG" : "+PONG", pass ? 10 : 5)) {
        reply[strcspn(reply, "\r\n")] = '\0';
        snprintf(why, whylen, "reply: %s", reply);
        return 1;
    }
    return 0;
}

static long long toolMillis(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* Open count connections with up to inflight connects in progress at once:
 * a new one starts as soon as one is connected or refused (5 s each). */
static void connsOpenPipelined(const char *host, int port, rdmaChan **chans, int count, int inflight,
                               int *accepted, int *refused, char reasons[][200], int *nreasons) {
    long long *started = calloc((size_t)count, sizeof(*started));
    int next = 0, done = 0, busy = 0;
    char err[256];
    if (!started) die("conns: out of memory");
    while (done < count) {
        while (busy < inflight && next < count) {
            chans[next] = rdmaChanConnect(host, port, NULL, RDMA_RX_SIZE_MIN, -1, 5000, err, sizeof(err));
            if (!chans[next]) {
                (*refused)++;
                done++;
                connsNote(reasons, nreasons, err);
            } else {
                started[next] = toolMillis();
                busy++;
            }
            next++;
        }
        for (int i = 0; i < next; i++) {
            rdmaChanState st;
            if (!chans[i] || !started[i]) continue;
            rdmaChanHandleEvents(chans[i]);
            st = rdmaChanGetState(chans[i]);
            if (st == RDMA_CHAN_CONNECTING && toolMillis() - started[i] < 5000) continue;
            started[i] = 0;
            busy--;
            done++;
            if (st == RDMA_CHAN_CONNECTED) {
                (*accepted)++;
                continue;
            }
            (*refused)++;
            connsNote(reasons, nreasons, rdmaChanError(chans[i]) ? rdmaChanError(chans[i]) : "not connected");
            rdmaChanClose(chans[i]);
            chans[i] = NULL;
        }
        usleep(200);
    }
    free(started);
}

static int cmdConns(int argc, char **argv) {
    char err[256], why[300], reasons[CONNS_REASONS][200];
    int count, accepted = 0, refused = 0, replied = 0, failed = 0, nreasons = 0, inflight = 1;
    rdmaChan **chans;

    const char *pass = argc == 7 ? argv[6] : NULL;
    if (argc != 6 && argc != 7) die("usage: skv-rdma-tool conns <host> <port> <count> <seconds> [password]");
    count = atoi(argv[4]);
    if (count <= 0 || !(chans = calloc((size_t)count, sizeof(*chans)))) die("conns: bad count");
    if (rdmaInit(NULL, err, sizeof(err)) == -1) die("conns: %s", err);
    if (getenv("SKV_TOOL_INFLIGHT")) inflight = atoi(getenv("SKV_TOOL_INFLIGHT"));
    if (inflight > 1) {
        connsOpenPipelined(argv[2], atoi(argv[3]), chans, count, inflight, &accepted, &refused,
                           reasons, &nreasons);
    } else for (int i = 0; i < count; i++) {
        chans[i] = rdmaChanConnect(argv[2], atoi(argv[3]), NULL, RDMA_RX_SIZE_MIN, -1, 5000, err, sizeof(err));
        if (chans[i] && rdmaChanWaitConnected(chans[i], 5000) == 0 &&
            rdmaChanGetState(chans[i]) == RDMA_CHAN_CONNECTED) {
            accepted++;
            continue;
        }
        refused++;
        connsNote(reasons, &nreasons, chans[i] ? (rdmaChanError(chans[i]) ? rdmaChanError(chans[i]) : "not connected") : err);
        if (chans[i]) rdmaChanClose(chans[i]);
        chans[i] = NULL;
    }
    for (int i = 0; i < count; i++) {
        int rv;
        if (!chans[i]) continue;
        rv = connsPing(chans[i], pass, why, sizeof(why));
        if (rv >= 0) replied++;
        else failed++;
        if (rv != 0) connsNote(reasons, &nreasons, why);
    }
    printf("accepted %d refused %d replied %d failed %d\n", accepted, refused, replied, failed);
    for (int i = 0; i < nreasons; i++) printf("reason: %s\n", reasons[i]);
    fflush(stdout);
    sleep((unsigned)atoi(argv[5]));
    for (int i = 0; i < count; i++) if (chans[i]) rdmaChanClose(chans[i]);
    free(chans);
    return 0;
}

/* ------------------------------------------------------ Churn ---------- */

/* Connect requests whose peer is gone by the time the server accepts. */
static int cmdChurn(int argc, char **argv) {
    struct addrinfo *res;
    struct rdma_event_channel *cmch;
    int count, done = 0;
    char portstr[16];

    if (argc != 5) die("usage: skv-rdma-tool churn <host> <port> <count>");
    count = atoi(argv[4]);
    snprintf(portstr, sizeof(portstr), "%d", atoi(argv[3]));
    if (getaddrinfo(argv[2], portstr, NULL, &res)) die("cannot resolve %s", argv[2]);
    if (!(cmch = rdma_create_event_channel())) die("rdma_create_event_channel: %s", strerror(errno));
    for (int i = 0; i < count; i++) {
        struct rdma_cm_id *id;
        struct rdma_cm_event *ev;
        struct ibv_qp_init_attr qpa;
        struct rdma_conn_param param;
        int ok = 1;
        if (rdma_create_id(cmch, &id, NULL, RDMA_PS_TCP)) die("rdma_create_id: %s", strerror(errno));
        if (rdma_resolve_addr(id, NULL, res->ai_addr, 5000)) die("rdma_resolve_addr: %s", strerror(errno));
        if (rdma_get_cm_event(cmch, &ev)) die("rdma_get_cm_event: %s", strerror(errno));
        ok = ev->event == RDMA_CM_EVENT_ADDR_RESOLVED;
        rdma_ack_cm_event(ev);
        if (ok && !rdma_resolve_route(id, 5000) && !rdma_get_cm_event(cmch, &ev)) {
            ok = ev->event == RDMA_CM_EVENT_ROUTE_RESOLVED;
            rdma_ack_cm_event(ev);
        } else ok = 0;
        memset(&qpa, 0, sizeof(qpa));
        qpa.qp_type = IBV_QPT_RC;
        qpa.cap.max_send_wr = qpa.cap.max_recv_wr = 4;
        qpa.cap.max_send_sge = qpa.cap.max_recv_sge = 1;
        if (ok && !rdma_create_qp(id, NULL, &qpa)) {
            memset(&param, 0, sizeof(param));
            param.responder_resources = param.initiator_depth = 1;
            param.retry_count = param.rnr_retry_count = 7;
            if (!rdma_connect(id, &param)) done++;
            rdma_destroy_qp(id);
        }
        /* Gone at once: no reply awaited, no disconnect sent. */
        rdma_destroy_id(id);
    }
    freeaddrinfo(res);
    rdma_destroy_event_channel(cmch);
    printf("churned %d\n", done);
    return 0;
}

/* -------------------------------------------------------------- Main --- */

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    if (argc >= 2 && !strcmp(argv[1], "proxy")) return cmdProxy(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "async")) return cmdAsync(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "bad")) return cmdBad(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "hold")) return cmdHold(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "conns")) return cmdConns(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "churn")) return cmdChurn(argc, argv);
    fprintf(stderr, "usage: skv-rdma-tool proxy|async|bad|hold|conns|churn ... (see src/rdma_tool.c)\n"
                    "bad cases: %s\n", badCases);
    return 1;
}
