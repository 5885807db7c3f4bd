/* nickv_upstream.c -- Nic-KV's link to the master.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * The link (see the protocol at the top of nickv.c):
 *
 *   NONE --cron--> CONNECTING --connected--> HANDSHAKE
 *   HANDSHAKE: the replica handshake of nickv_resp.c (nkHandshake), whose
 *     steps INFO shows as the state: auth (if masterauth), port, capa,
 *     hello (REPLCONF nickv hello: an SKV master answers with its
 *     replication id and offset; another master with an error; -NICKV:
 *     refused, see below), psync: from the end of our backlog if we have
 *     one; else from the master's offset (SKV master), else "? -1"
 *       +CONTINUE --> STREAMING
 *       +FULLRESYNC --> RDB (read and dropped) --> STREAMING
 *   any error, timeout or EOF --> NONE (retried once a second)
 *
 * The link is TCP to master-port, or RDMA to master-rdma-port: the master
 * then sends its stream to us with one RDMA WRITE_WITH_IMM per flush.
 *
 * While the backlog cannot take what came (RDMA replicas' sends still read
 * the part it would overwrite, see nickv_backlog.c), the link stops reading
 * and keeps the rest in link_in: the master's own buffers hold the stream
 * meanwhile. nkLinkResume() retries before every sleep and from the cron.
 *
 * A history change (FULLRESYNC, or a fresh join after our own PSYNC was
 * refused) makes every replica's position meaningless: they are dropped
 * and resync. If the master stays unreachable for NK_MASTER_GRACE seconds,
 * the replicas are dropped as well, so that they fall back to the master
 * (or wait for it) on their own.
 */

#include "nickv.h"
#include "nickv_resp.h"
#include "nickv_info.h"
#include "nickv_conn.h"
#include "nickv_tls.h"
#include "nickv_backlog.h"
#include "nickv_fanout.h"
#include "nickv_upstream.h"
#include "nickv_msg.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "anet.h"
#include "util.h"
#include "zmalloc.h"

#define NK_MASTER_GRACE 5

typedef enum {
    NK_LINK_NONE = 0,         /* not connected; retried once a second */
    NK_LINK_CONNECTING,
    NK_LINK_HANDSHAKE,        /* L.hs says which step */
    NK_LINK_RDB,              /* FULLRESYNC: reading (and dropping) the RDB */
    NK_LINK_STREAMING         /* the stream goes into the backlog */
} nkLinkState;

/* The master's REPLCONF GETACK * (a WAIT) in the stream, as it writes it:
 * answered at once (streamAsksAck, linkAckNow). */
static const char getack_cmd[] = "*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n";
#define GETACK_LEN (sizeof(getack_cmd) - 1)

/* The link's state: this file's alone (others ask through nkLink*()). */
static struct {
    nkLinkState link_state;
    nkConn *link;                       /* NULL when not connected */
    int link_paused;                    /* the backlog cannot take more yet */
    long long link_paused_since;        /* ms, or since the last progress */
    sds link_in;
    time_t link_lastio;
    time_t link_down_since;
    int master_is_skv;                  /* it answered REPLCONF nickv hello */
    int link_refused;                   /* ... with -NICKV: not as its daemon */
    char master_replid[NK_RUNID_SIZE+1];
    char master_replid2[NK_RUNID_SIZE+1];
    long long second_replid_offset;
    long long reported;                 /* nkLinkReportedOffset */
    char hello_replid[NK_RUNID_SIZE+1];
    long long hello_offset;
    unsigned long long link_bytes_in;
    unsigned long long link_reads;
    unsigned long long getack_acks;     /* ACKs sent at once for a GETACK */
    char getack_tail[GETACK_LEN];       /* a GETACK may span two reads */
    size_t getack_tail_len;
    int getack_pending;                 /* one read while the link paused */
    long long link_connects;
    nkHandshake hs;                     /* NK_LINK_HANDSHAKE */
    sds hello;                          /* what our hello says */
    char hs_failure_logged[256];        /* the handshake's last failure said
                                         * this outage ("": none yet) */
} L;

/* The master we follow: master-host and master-port (or master-rdma-port)
 * at start, then wherever the probes saw the master move (nkLinkFollow). */
static struct {
    char host[256];
    int port;                           /* TCP */
    int rdma_port;                      /* > 0: the link goes over RDMA */
    long long moves;
} M;

static sds link_out;
static void (*on_stream)(void);        /* the stream grew: see nkLinkOnStream */
static time_t state_since;
static int try_continue = 1;           /* PSYNC from our own backlog */
static int leaving;                    /* nkLinkShutdown: never reconnect */
static nkRdbReader link_rdb;    /* NK_LINK_RDB: the RDB we drop */
/* The replicas above us: main wires them in (nkLinkOnReplicas). */
static const nkLinkReplicaOps *R;

/* The stats this file counts. */
static struct {
    long long pin_waits;              /* the link waited for the NIC */
    long long pin_drops;              /* ... and dropped a replica */
} stats;

static const char *stateNames[] = {
    "none", "connecting", "handshake", "rdb", "streaming"
};

static const char *nkLinkStateName(void) {
    return L.link_state == NK_LINK_HANDSHAKE ? nkHandshakeStepName(&L.hs) : stateNames[L.link_state];
}

void nkLinkOnStream(void (*fn)(void)) {
    on_stream = fn;
}

void nkLinkOnReplicas(const nkLinkReplicaOps *ops) {
    R = ops;
}

/* May the link go to the master now (see nkLinkReplicaOps)? Not before
 * main wires it in. */
static int linkMayFanout(void) {
    return R && R->fanout(M.host, M.port);
}

static int linkMasterMember(void) {
    return R && R->member(M.host, M.port);
}

static unsigned long replicaCount(void) {
    return R ? R->count() : 0;
}

static int slotsFree(void) {
    return R ? R->slots_free() : 0;
}

sds nkLinkStatsInfo(sds s) {
    return sdscatprintf(s,
        "link_pin_waits:%lld\r\n"
        "link_pin_drops:%lld\r\n", stats.pin_waits, stats.pin_drops);
}

void nkLinkResetStats(void) {
    memset(&stats, 0, sizeof(stats));
}

void nkLinkInit(void) {
    L.link_in = sdsempty();
    snprintf(M.host, sizeof(M.host), "%s", nk.cfg.master_host);
    M.port = nk.cfg.master_port;
    M.rdma_port = nk.cfg.master_rdma_port;
}

void nkLinkMaster(const char **host, int *port) {
    *host = M.host;
    *port = M.port;
}

static void linkConnect(void);
static void linkClose(const char *why);

void nkLinkFollow(const char *host, int port, int rdma_port) {
    /* Over RDMA only when configured so: to the configured port on the
     * configured master, else where the new master's INFO says it listens. */
    int rdma = 0;
    if (nk.cfg.master_rdma_port > 0)
        rdma = (!strcmp(host, nk.cfg.master_host) && port == nk.cfg.master_port) ?
               nk.cfg.master_rdma_port : rdma_port;
    if (!strcmp(host, M.host) && port == M.port && rdma == M.rdma_port) return;
    nkLog(LL_WARNING, "The master moved: following %s:%d%s (was %s:%d)", host,
          rdma ? rdma : port, rdma ? " (RDMA)" : "", M.host, M.rdma_port ? M.rdma_port : M.port);
    if (L.link_state != NK_LINK_NONE) linkClose("the master moved");
    snprintf(M.host, sizeof(M.host), "%s", host);
    M.port = port;
    M.rdma_port = rdma;
    M.moves++;
    if (!leaving) linkConnect();
}

int nkLinkStreaming(void) {
    return L.link_state == NK_LINK_STREAMING;
}

/* ... and the master has us as its daemon: it hears our messages. */
int nkLinkDaemon(void) {
    return L.link_state == NK_LINK_STREAMING && L.master_is_skv;
}

const char *nkLinkReplid(void) {
    return L.master_replid;
}

int nkLinkSameHistory(const char *replid, long long offset) {
    return !strcmp(replid, L.master_replid) ||
           (L.master_replid2[0] && !strcmp(replid, L.master_replid2) &&
            offset <= L.second_replid_offset);
}

/* The link's fields of INFO's "Replication" section (the section is
 * "upstream" too, its name before it spoke Redis's dialect). The fields a
 * Redis replica has are named and meant as its are, so that tools reading
 * a replica read our link: master_link_status, master_last_io_seconds_ago,
 * master_sync_in_progress (reading the master's RDB, which we drop),
 * slave_repl_offset (what we took from the master: the backlog's last
 * offset, as master_repl_offset). The rest are ours. No header-closing
 * blank line: the section goes on with the replicas (genInfo). */
sds nkLinkInfo(sds s, long long last) {
    int up = L.link_state == NK_LINK_STREAMING;
    s = sdscatprintf(s,
            "# Replication\r\n"
            "role:nickv\r\n"
            "master_host:%s\r\n"
            "master_port:%d\r\n"
            "master_link_status:%s\r\n"
            "master_last_io_seconds_ago:%lld\r\n"
            "master_sync_in_progress:%d\r\n"
            "slave_repl_offset:%lld\r\n"
            "master_link_transport:%s\r\n"
            "master_link_paused:%d\r\n"
            "master_link_state:%s\r\n"
            "master_is_skv:%d\r\n"
            "master_link_down_since_seconds:%lld\r\n"
            "master_replid:%s\r\n"
            "master_repl_offset:%lld\r\n"
            "master_link_connects:%lld\r\n"
            "master_bytes_in:%llu\r\n"
            "master_reads:%llu\r\n"
            "master_getack_acks:%llu\r\n"
            "master_moves:%lld\r\n",
            M.host, M.rdma_port ? M.rdma_port : M.port, up ? "up" : "down",
            L.link_lastio ? nkUnixTime() - (long long)L.link_lastio : -1,
            L.link_state == NK_LINK_RDB, last,
            M.rdma_port ? "rdma" : (nkTlsOutgoing() ? "tls" : "tcp"), L.link_paused, nkLinkStateName(), L.master_is_skv,
            up ? 0 : (L.link_down_since ? nkUnixTime() - (long long)L.link_down_since : -1),
            L.master_replid, last, L.link_connects, L.link_bytes_in, L.link_reads, L.getack_acks, M.moves);
    return s;
}

static void setState(nkLinkState s) {
    L.link_state = s;
    state_since = time(NULL);
}

/* --------------------------------------------------------------- Output --- */

static void linkWritable(nkConn *conn, void *data);
static void linkReadable(nkConn *conn, void *data);
static void linkClose(const char *why);

static void linkFlush(void) {
    while (L.link && link_out && sdslen(link_out)) {
        ssize_t n = nkConnWrite(L.link, link_out, sdslen(link_out));
        if (n < 0 && errno != EAGAIN) {
            linkClose(nkConnError(L.link) ? nkConnError(L.link) : strerror(errno));
            return;
        }
        if (n <= 0) break;
        sdsrange(link_out, n, -1);
    }
    if (!L.link) return;
    nkConnSetWriteHandler(L.link, (link_out && sdslen(link_out)) ? linkWritable : NULL);
}

static void linkWritable(nkConn *conn, void *data) {
    (void)conn; (void)data;
    linkFlush();
}

/* Queue a command (its arguments, then NULL) for the master and send what
 * the link takes now. */
static void linkCommand(const char *first, ...) __attribute__((sentinel));
static void linkCommand(const char *first, ...) {
    va_list ap;
    if (!link_out) link_out = sdsempty();
    va_start(ap, first);
    link_out = nkCatCommandV(link_out, first, ap);
    va_end(ap);
    linkFlush();
}

/* REPLCONF nickv <message>: the message, formatted from fmt, is one
 * argument (the master splits it into words). Sent to an SKV master once
 * streaming; otherwise dropped: it describes replicas the master will hear
 * about when we (re)join. */
void nkLinkMessage(const char *fmt, ...) {
    va_list ap;
    sds msg;
    if (L.link_state != NK_LINK_STREAMING || !L.master_is_skv) return;
    va_start(ap, fmt);
    msg = sdscatvprintf(sdsempty(), fmt, ap);
    va_end(ap);
    linkCommand("REPLCONF", NICKV_REPLCONF, msg, NULL);
    sdsfree(msg);
}

/* A message built by nickv_msg.c, sent as nkLinkMessage does, and freed. */
static void linkMessageSds(sds msg) {
    nkLinkMessage("%s", msg);
    sdsfree(msg);
}

/* ------------------------------------------------------------ The link --- */

static void linkClose(const char *why) {
    if (L.link) {
        nkConnClose(L.link);
        L.link = NULL;
    }
    L.link_paused = 0;
    /* Once per outage: a master that stays away is retried every second. */
    if (L.link_state == NK_LINK_STREAMING || !L.link_down_since)
        nkLog(LL_WARNING, "Link with the master %s:%d lost (%s)", M.host,
              M.port, why);
    else
        nkLog(LL_VERBOSE, "Master %s:%d: %s", M.host, M.port, why);
    if (L.link_state == NK_LINK_STREAMING || !L.link_down_since) L.link_down_since = time(NULL);
    sdsclear(L.link_in);
    if (link_out) sdsclear(link_out);
    setState(NK_LINK_NONE);
}

/* Bumped by every new history (nkLinkHistory): a client between its RDB
 * and its stream checks it has not changed under it. */
static long long history_gen;

long long nkLinkHistory(void) {
    return history_gen;
}

/* A new history: the replicas' positions mean nothing any more. */
static void newHistory(const char *replid, long long next_offset) {
    history_gen++;
    if (replicaCount()) R->drop_all("the master's history changed");
    snprintf(L.master_replid, sizeof(L.master_replid), "%s", replid);
    L.master_replid2[0] = '\0';
    L.second_replid_offset = -1;
    L.reported = 0;
    nkBacklogReset(next_offset);
}

/* Send what the handshake queued. */
static void linkSendHandshake(void) {
    if (!link_out) link_out = sdsempty();
    link_out = sdscatsds(link_out, L.hs.out);
    sdsclear(L.hs.out);
    linkFlush();
}

static void sendPsync(void) {
    long long first, last;
    nkBacklogRange(&first, &last);
    if (try_continue && L.master_replid[0] && last > 0) {
        nkHandshakePsync(&L.hs, L.master_replid, last + 1);
    } else if (L.master_is_skv) {
        /* The hello told us where the master is: that id, from there. */
        try_continue = 0;
        nkHandshakePsync(&L.hs, L.hello_replid, L.hello_offset + 1);
    } else {
        try_continue = 0;
        nkHandshakePsync(&L.hs, NULL, 0);
    }
    linkSendHandshake();
}

static void startStreaming(void) {
    long long first, last;
    L.getack_tail_len = 0;
    L.getack_pending = 0;
    setState(NK_LINK_STREAMING);
    L.link_down_since = 0;
    L.hs_failure_logged[0] = '\0';
    try_continue = 1;
    nkBacklogRange(&first, &last);
    nkLog(LL_NOTICE, "Streaming from the master %s:%d (replid %s, offset %lld)%s",
          M.host, M.port, L.master_replid, last,
          L.master_is_skv ? "" : "; not an SKV master: it will not know our replicas");
    linkMessageSds(nickvMsgBacklog(first, last, slotsFree()));
    if (last > L.reported) L.reported = last;
    if (R) R->announce();
}

/* The master's answer to our hello: is it an SKV master that has us as
 * its Nic-KV? Returns 0 when it refused us (the link is closed). */
static int handleHello(const char *line) {
    char id[NK_RUNID_SIZE + 1];
    long long off;
    if (line[0] == '+' && nkReplyIdOffset(line + 1, id, &off)) {
        L.master_is_skv = 1;
        L.link_refused = 0;
        snprintf(L.hello_replid, sizeof(L.hello_replid), "%s", id);
        L.hello_offset = off;
    } else if (!strncmp(line, NICKV_REPLY_BACK, strlen(NICKV_REPLY_BACK))) {
        /* An SKV master that will not have us as its Nic-KV (another
         * daemon serves it, or we are not its nickv-user): retry, saying
         * so once a refusal (verbose while it lasts). */
        nkLog(L.link_refused ? LL_VERBOSE : LL_WARNING, "The master refuses us as its "
              "Nic-KV: %s (retrying every second)", line + 1);
        L.link_refused = 1;
        linkClose("refused as Nic-KV by the master");
        return 0;
    } else {
        if (L.master_is_skv || L.link_connects == 1)
            nkLog(LL_NOTICE, "The master does not know Nic-KV (%s): running without its "
                  "knowledge of our replicas", line);
        L.master_is_skv = 0;
    }
    return 1;
}

/* The master's answer to our PSYNC. */
static void handlePsyncReply(const char *line) {
    if (!strncmp(line, "+CONTINUE", 9)) {
        char id[NK_RUNID_SIZE + 1] = "";
        long long first, last;
        nkBacklogRange(&first, &last);
        if (try_continue && L.master_replid[0]) {
            if (line[9] == ' ' && nkReplyId(line + 10, id) && strcmp(id, L.master_replid)) {
                /* The master changed its id (failover): the old one stays
                 * valid up to here, as in Redis. */
                memcpy(L.master_replid2, L.master_replid, sizeof(L.master_replid2));
                L.second_replid_offset = last + 1;
                memcpy(L.master_replid, id, sizeof(L.master_replid));
                /* As a Redis replica does with its own replicas: they
                 * must learn the new id now, or their offsets run
                 * past where the old one is valid and the master can
                 * only give them a full sync later. They PSYNC again
                 * at once (old id, our replid2 covers it). */
                if (replicaCount())
                    R->drop_all("the master's replication id changed");
            }
        } else {
            newHistory(L.hello_replid, L.hello_offset + 1);
        }
        startStreaming();
    } else if (!strncmp(line, "+FULLRESYNC", 11)) {
        char id[NK_RUNID_SIZE + 1];
        long long off;
        if (line[11] != ' ' || !nkReplyIdOffset(line + 12, id, &off)) {
            linkClose("bad +FULLRESYNC reply");
            return;
        }
        newHistory(id, off + 1);
        nkRdbReaderInit(&link_rdb);
        setState(NK_LINK_RDB);
        nkLog(LL_NOTICE, "Full resync from the master (%s:%lld): dropping its RDB", id, off);
    } else {
        if (try_continue && L.master_replid[0]) {
            /* Our history is not the master's any more: join afresh. */
            try_continue = 0;
            linkClose("our backlog cannot continue the master's stream");
            return;
        }
        nkLog(LL_WARNING, "The master refused PSYNC: %s", line);
        linkClose("PSYNC refused");
    }
}

/* One reply line during the handshake. */
static void handleReply(const char *line) {
    switch (nkHandshakeReply(&L.hs, line)) {
    case NK_HS_SENT:
        linkSendHandshake();
        break;
    case NK_HS_PSYNC_NEXT:
        if (handleHello(line)) sendPsync();
        break;
    case NK_HS_PSYNC_REPLY:
        handlePsyncReply(line);
        break;
    case NK_HS_FAILED:
        /* Said once an outage, as any failure of the link; but an outage
         * that began otherwise (the master restarted, now with another
         * password) must still say once why the link does not come back:
         * linkClose() would only say it verbosely. */
        if (L.link_down_since && strcmp(L.hs.err, L.hs_failure_logged))
            nkLog(LL_WARNING, "Master %s:%d: %s", M.host, M.port, L.hs.err);
        snprintf(L.hs_failure_logged, sizeof(L.hs_failure_logged), "%s", L.hs.err);
        linkClose(L.hs.err);
        break;
    }
}

/* Consume RDB bytes (which we do not keep); returns how many were used. */
static size_t consumeRdb(const char *p, size_t len) {
    const char *err = NULL;
    int done;
    ssize_t used = nkRdbReaderFeed(&link_rdb, p, len, &done, &err);
    if (used < 0) {
        linkClose(err);
        return len;
    }
    if (done) startStreaming();
    return (size_t)used;
}

static void linkAckNow(void);

/* REPLCONF ACK <what the backlog holds>: what we report holding bounds
 * what the master may acknowledge (nkLinkReportedOffset). */
static void linkSendAck(long long *first, long long *last) {
    char off[LONG_STR_SIZE];
    nkBacklogRange(first, last);
    ll2string(off, sizeof(off), *last);
    linkCommand("REPLCONF", "ACK", off, NULL);
    if (*last > L.reported) L.reported = *last;
}

/* Into the backlog, as much as it takes now; tell whoever waits for it.
 * Telling may close the link (a PSYNC waiter handed over reports its
 * replica to the master, and that write may fail): callers check L.link. */
static size_t streamAppend(const char *p, size_t len) {
    size_t n = nkBacklogAppend(p, len);
    if (n) {
        nkFanoutWake();
        if (on_stream) on_stream();
    }
    return n;
}

/* Put stream bytes into the backlog; what it cannot take yet stays in
 * link_in and the link stops reading until nkLinkResume() placed it. */
static void linkAppend(const char *p, size_t len) {
    size_t n = streamAppend(p, len);
    if (n == len || !L.link) return;
    if (p != L.link_in) L.link_in = sdscatlen(L.link_in, p + n, len - n);
    else sdsrange(L.link_in, n, -1);
    if (!L.link_paused) {
        L.link_paused = 1;
        L.link_paused_since = nkMstime();
        stats.pin_waits++;
        nkConnSetReadHandler(L.link, NULL);
        nkLog(LL_VERBOSE, "The backlog is pinned by RDMA sends in flight: pausing the master link");
    }
}

void nkLinkResume(void) {
    size_t len, n;
    if (!L.link_paused || !L.link) return;
    len = sdslen(L.link_in);
    n = streamAppend(L.link_in, len);
    if (!L.link) return;
    if (n) {
        sdsrange(L.link_in, n, -1);
        L.link_paused_since = nkMstime();     /* it moves: no one to blame yet */
    }
    if (n == len) {
        L.link_paused = 0;
        nkConnSetReadHandler(L.link, linkReadable);
        if (L.getack_pending) linkAckNow();
        return;
    }
    if (nkMstime() - L.link_paused_since >= NK_PIN_TIMEOUT_MS) {
        /* Whoever still pins what the next byte overwrites has a NIC that
         * stopped acknowledging: drop it (its channel closes, the pin goes). */
        stats.pin_drops += nkBacklogDropPinners("its RDMA sends did not complete in time, "
                                                  "and the master's stream needs that part of "
                                                  "the backlog: dropping it");
        L.link_paused_since = nkMstime();
    }
}

/* Does the stream read now (after what came before) hold a GETACK? Found
 * across two reads too. A value that holds the same bytes only costs an
 * ACK more; one that slips by waits for the heartbeat. */
static int streamAsksAck(const char *p, size_t len) {
    char joint[2 * GETACK_LEN];
    size_t head = len < GETACK_LEN - 1 ? len : GETACK_LEN - 1, keep;
    _Static_assert(sizeof(L.getack_tail) >= GETACK_LEN - 1, "the tail holds a GETACK but its last byte");
    int found = memmem(p, len, getack_cmd, GETACK_LEN) != NULL;
    if (!found && L.getack_tail_len) {
        memcpy(joint, L.getack_tail, L.getack_tail_len);
        memcpy(joint + L.getack_tail_len, p, head);
        found = memmem(joint, L.getack_tail_len + head, getack_cmd, GETACK_LEN) != NULL;
    }
    /* The last GETACK_LEN - 1 bytes of the stream so far. */
    if (len >= GETACK_LEN - 1) {
        memcpy(L.getack_tail, p + len - (GETACK_LEN - 1), GETACK_LEN - 1);
        L.getack_tail_len = GETACK_LEN - 1;
    } else {
        keep = L.getack_tail_len + len > GETACK_LEN - 1 ? GETACK_LEN - 1 - len : L.getack_tail_len;
        memmove(L.getack_tail, L.getack_tail + L.getack_tail_len - keep, keep);
        memcpy(L.getack_tail + keep, p, len);
        L.getack_tail_len = keep + len;
    }
    return found;
}

/* nic-kv --selftest-getack (tests/unit/nickv-selftest.tcl): a stream
 * with a GETACK among other bytes, cut into two reads at every point, and
 * into reads of every size from 1 to 64 bytes: the GETACK is found exactly
 * once each time. 0 when it is, else 1 with what failed on stderr. */
int nkLinkSelftestGetack(void) {
    char stream[256];
    size_t len, at = 100, fails = 0;
    memset(stream, 'x', sizeof(stream));
    memcpy(stream + at, getack_cmd, GETACK_LEN);
    len = sizeof(stream);
    for (size_t cut = 0; cut <= len; cut++) {
        int found;
        L.getack_tail_len = 0;
        found = streamAsksAck(stream, cut) + streamAsksAck(stream + cut, len - cut);
        if (found != 1) {
            fprintf(stderr, "reads of %zu and %zu bytes: found %d times\n", cut, len - cut, found);
            fails++;
        }
    }
    for (size_t size = 1; size <= 64; size++) {
        int found = 0;
        L.getack_tail_len = 0;
        for (size_t off = 0; off < len; off += size)
            found += streamAsksAck(stream + off, off + size <= len ? size : len - off);
        if (found != 1) {
            fprintf(stderr, "reads of %zu bytes: found %d times\n", size, found);
            fails++;
        }
    }
    L.getack_tail_len = 0;
    return fails ? 1 : 0;
}

/* A WAIT on the master waits for our ACK when it counts a direct replica
 * (after a promotion, before the replicas are handed over to us: src/
 * nickv_server.c, nickvDirectAckCounts): the ACK goes at once, as a
 * replica answers a GETACK, not at the next heartbeat, 200 ms later. It
 * says what the backlog holds, as the heartbeat's does. */
static void linkAckNow(void) {
    long long first, last;
    if (L.link_paused) {
        /* The GETACK is not in the backlog yet: once it is (nkLinkResume). */
        L.getack_pending = 1;
        return;
    }
    L.getack_pending = 0;
    linkSendAck(&first, &last);
    L.getack_acks++;
}

static void linkReadable(nkConn *conn, void *data) {
    (void)data;
    char buf[64 * 1024];
    ssize_t n = nkConnRead(conn, buf, sizeof(buf));
    if (n == 0 || (n < 0 && errno != EAGAIN)) {
        linkClose(n == 0 ? "connection closed by the master" :
                  (nkConnError(conn) ? nkConnError(conn) : strerror(errno)));
        return;
    }
    if (n < 0) return;
    L.link_lastio = time(NULL);
    L.link_bytes_in += n;
    L.link_reads++;
    if (L.link_state == NK_LINK_STREAMING) {
        int asks = streamAsksAck(buf, (size_t)n);
        linkAppend(buf, n);
        if (asks && L.link && L.link_state == NK_LINK_STREAMING) linkAckNow();
        return;
    }
    L.link_in = sdscatlen(L.link_in, buf, n);
    while (sdslen(L.link_in) && L.link) {
        if (L.link_state == NK_LINK_RDB) {
            size_t used = consumeRdb(L.link_in, sdslen(L.link_in));
            sdsrange(L.link_in, used, -1);
            if (L.link_state == NK_LINK_RDB && used == 0) break;
            continue;
        }
        if (L.link_state == NK_LINK_STREAMING) {
            /* The first stream bytes came with the handshake's last reply. */
            int asks = streamAsksAck(L.link_in, sdslen(L.link_in));
            linkAppend(L.link_in, sdslen(L.link_in));
            if (!L.link_paused) sdsclear(L.link_in);
            if (asks && L.link && L.link_state == NK_LINK_STREAMING) linkAckNow();
            break;
        }
        const char *err;
        sds line = nkNextLine(&L.link_in, &err);
        if (err) linkClose(err);
        if (!line) break;
        if (sdslen(line)) handleReply(line);   /* empty lines are keepalives */
        sdsfree(line);
    }
}

static void linkConnected(nkConn *conn, void *data) {
    (void)data;
    if (nkConnError(conn)) {
        linkClose(nkConnError(conn));
        return;
    }
    nkConnSetWriteHandler(conn, NULL);
    nkConnSetReadHandler(conn, linkReadable);
    L.link_lastio = time(NULL);
    /* Our hello is sent as the handshake's own step (not nkLinkMessage(),
     * which waits for the stream). */
    if (!L.hello) L.hello = sdsempty();
    sdsclear(L.hello);
    sds hello = nickvMsgHello(nk.cfg.announce_ip ? nk.cfg.announce_ip : "?", nk.cfg.port,
                              R ? R->rdma_port() : 0, nk.instance, nk.key, nk.cfg.tls_port);
    L.hello = sdscatsds(L.hello, hello);
    sdsfree(hello);
    L.hs.port = nkListeningPort();
    L.hs.capa_eof = 1;
    L.hs.hello = L.hello;
    setState(NK_LINK_HANDSHAKE);
    nkHandshakeStart(&L.hs, nk.cfg.masteruser, nk.cfg.masterauth);
    linkSendHandshake();
}

static void linkConnect(void) {
    static char said[256];      /* the lookup we last said we wait for */
    char err[256];
    int rdma = M.rdma_port > 0;
    int port = rdma ? M.rdma_port : M.port;
    /* With a coordinator only the leader on the master's server links. */
    if (!linkMayFanout()) return;
    /* Our credentials and key go to members only (nickv_member.c). */
    if (!linkMasterMember()) {
        nkLogRepeat(LL_WARNING, NULL, "Not linking to the master %s:%d: it is not a member (no node line "
                    "names it), and the link authenticates with Nic-KV's credentials", M.host, M.port);
        return;
    }
    L.link = nkConnConnect(nk.loop, M.host, port, rdma, NULL,
                            (size_t)nk.cfg.rdma_rx_size, err, sizeof(err));
    if (!L.link && errno == EAGAIN) {
        /* The master's name is being looked up (nickv_resolve.c): not an
         * attempt yet. Said once per lookup. */
        if (strcmp(said, err)) {
            nkLog(LL_WARNING, "Cannot connect to the master %s:%d%s: %s", M.host,
                  port, rdma ? " (RDMA)" : "", err);
            snprintf(said, sizeof(said), "%s", err);
        }
        return;
    }
    said[0] = '\0';
    L.link_connects++;
    if (!L.link) {
        if (L.link_connects <= 1 || L.link_connects % 60 == 0)
            nkLog(LL_WARNING, "Cannot connect to the master %s:%d%s: %s", M.host,
                  port, rdma ? " (RDMA)" : "", err);
        return;
    }
    setState(NK_LINK_CONNECTING);
    nkConnSetWriteHandler(L.link, linkConnected);
}

/* Every NICKV_HEARTBEAT_MS while streaming: our ACK (it keeps the link alive)
 * and what the backlog holds, which is also our heartbeat: an SKV master
 * that hears nothing from us for a second closes our link and serves our
 * replicas itself (src/nickv_server.c). */
void nkLinkHeartbeat(void) {
    long long first, last;
    if (L.link_state != NK_LINK_STREAMING) return;
    linkSendAck(&first, &last);
    linkMessageSds(nickvMsgBacklog(first, last, slotsFree()));
}

/* The most of the stream our ACKs and backlog reports said we hold, and
 * the replicas' ACKs we relayed: an SKV master counts a direct replica's
 * ACK for WAIT only as far as the first (or as far as a lease answer we
 * granted on said: nkProbeAckBound), and a relayed one as it is, so no
 * acknowledged write lies beyond them. 0 in a new history. */
long long nkLinkReportedOffset(void) {
    return L.reported;
}

/* A replica's ACK we relayed: the master counts it for WAIT as it is, so
 * it bounds what may be acknowledged too. */
void nkLinkNoteReported(long long offset) {
    if (offset > L.reported) L.reported = offset;
}

/* Our link streamed from the master within the last few seconds: the end
 * of our stream is a fresh bound on what the master wrote. */
int nkLinkStreamedLately(void) {
    return L.link_state == NK_LINK_STREAMING || (L.link_down_since && time(NULL) - L.link_down_since <= 3);
}

void nkLinkFanoutCheck(void) {
    if (leaving) return;
    if (!linkMayFanout()) {
        if (L.link_state != NK_LINK_NONE) linkClose("not the Nic-KV that fans out now (INFO coordinator)");
    } else if (L.link_state == NK_LINK_NONE) {
        linkConnect();
    }
}

void nkLinkShutdown(void) {
    leaving = 1;
    if (L.link_state != NK_LINK_NONE) linkClose("Nic-KV is shutting down");
}

void nkLinkCron(void) {
    time_t now = time(NULL);
    if (leaving) return;
    if (L.link_state == NK_LINK_NONE) {
        linkConnect();
    } else if (L.link_state == NK_LINK_STREAMING || L.link_state == NK_LINK_RDB) {
        /* Idle time, as a Redis replica counts it: an RDB may take longer
         * than repl-timeout as long as it moves (the master sends newlines
         * while it prepares one). */
        if (now - L.link_lastio > nk.cfg.repl_timeout) linkClose("timeout: no data from the master");
    } else if (now - state_since > nk.cfg.repl_timeout) {
        linkClose("timeout during the handshake");
    }
    if (L.link_state != NK_LINK_STREAMING && L.link_down_since &&
        now - L.link_down_since >= NK_MASTER_GRACE && replicaCount()) {
        nkLog(LL_WARNING, "No master for %d seconds: closing our %lu replicas' links so that "
              "they go to the master themselves", NK_MASTER_GRACE, replicaCount());
        R->drop_all("Nic-KV lost its master");
    }
}

