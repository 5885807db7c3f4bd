/* nickv_replica.c -- a replica's lifecycle in Nic-KV.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * ========================================================================
 * A replica's state in Nic-KV
 * ========================================================================
 *
 * Until its stream starts, a replica is an nkClient of the main thread,
 * whose state (nkClientState) only nkClientSetState() changes, checking the
 * move against this table (clientMoves[]); then an nkReplica of a fan-out
 * thread (nickv_fanout.c), whose state (nkReplicaState) only
 * nkReplicaSetState() changes (replicaMoves[]). Both tables, every
 * transition and the main thread's side of a replica are in this file.
 *
 *   CONNECTED --AUTH/REPLCONF/admin--> CONNECTED
 *   CONNECTED --PSYNC in backlog--> HANDOVER: +CONTINUE queued
 *             (psyncContinue)
 *   CONNECTED --PSYNC ahead of the backlog (master's replid)--> WAITING
 *             (psyncCommand; nkPsyncWaitersCheck() looks at it every 100 ms
 *             and whenever the stream grows)
 *   WAITING --the stream reaches the offset--> HANDOVER, as above
 *   WAITING --NICKV_PSYNC_WAIT_MS passed--> as "not in backlog" below
 *   WAITING --master link lost--> CLOSING (-NOMASTERLINK)
 *   CONNECTED|WAITING --not in backlog, capa nickv-via--> CLOSING (-NICKV)
 *   CONNECTED|WAITING --not in backlog, plain--> FULLSYNC (psyncRefuse,
 *             nkProxyFullSync): the RDB passes through
 *   FULLSYNC --the RDB's end--> HANDOVER at the RDB's offset
 *   FULLSYNC --master or replica fails, output limit--> CLOSING
 *   CONNECTED --QUIT, protocol error, refused--> CLOSING
 *   HANDOVER --queue sent (after an EOF-marked RDB: and the replica's
 *             first REPLCONF ACK, which says it found the mark)--> the
 *             client is freed, its connection becomes an nkReplica, ONLINE,
 *             of a fan-out thread (nkReplicaStart); "add" goes to the master
 *   HANDOVER --EOF, error, protocol error while waiting for that ACK-->
 *             freed
 *   CLOSING --queue sent--> freed
 *   ONLINE --ACK--> ONLINE (ack relayed, never beyond what was sent)
 *   ONLINE --EOF, error, fell out of the backlog, master history changed-->
 *             GONE (its thread closes it; the main thread sends "del" and
 *             frees it)
 *
 * The protocol is at the top of nickv.c; the master link's states are in
 * nickv_upstream.c.
 *
 * This file owns the replicas' list (nkReplicaIter*, nkReplicaCount), the
 * PSYNCs waiting for the stream, and the sync_* stats. The fan-out threads
 * reach it only through the hooks main() sets (nkFanoutOnState,
 * nkFanoutOnEvents); the link through nkLinkOnReplicas.
 */

#include "nickv.h"
#include "nickv_conn.h"
#include "nickv_backlog.h"
#include "nickv_fanout.h"
#include "nickv_upstream.h"
#include "nickv_client.h"
#include "nickv_replica.h"
#include "nickv_fullsync.h"
#include "nickv_msg.h"

#include <stdio.h>
#include <string.h>

#include "util.h"
#include "zmalloc.h"

static list *replicas;                 /* nkReplica [main] */
static long long next_replica_id;      /* [main] */
static list *waiters;                  /* nkClient WAITING [main] */

static struct {
    long long sync_partial_ok;
    long long sync_partial_err;
    long long sync_full_proxied;
    long long sync_redirected;
    long long sync_waited;             /* PSYNCs that waited for the stream */
} stats;

void nkReplicaInit(void) {
    replicas = listCreate();
    waiters = listCreate();
}

/* ------------------------------------------------------ Client states --- */

static const char *clientStateNames[NK_CLIENT_STATES] = {
    "connected", "waiting", "fullsync", "handover", "closing"
};

/* The moves of the diagram above: allowed[from] has a bit for each state it
 * may go to. HANDOVER and CLOSING go nowhere: the client is freed from
 * them. */
static const unsigned clientMoves[NK_CLIENT_STATES] = {
    [NK_CLIENT_CONNECTED] = 1u << NK_CLIENT_WAITING | 1u << NK_CLIENT_FULLSYNC |
                            1u << NK_CLIENT_HANDOVER | 1u << NK_CLIENT_CLOSING,
    [NK_CLIENT_WAITING]   = 1u << NK_CLIENT_FULLSYNC | 1u << NK_CLIENT_HANDOVER |
                            1u << NK_CLIENT_CLOSING,
    [NK_CLIENT_FULLSYNC]  = 1u << NK_CLIENT_HANDOVER | 1u << NK_CLIENT_CLOSING,
    [NK_CLIENT_HANDOVER]  = 0,
    [NK_CLIENT_CLOSING]   = 0,
};

static void waiterRemove(nkClient *c) {
    listNode *ln = listSearchKey(waiters, c);
    if (ln) listDelNode(waiters, ln);
    else nkBug("client %s:%d: waiting, but not among the waiters", c->ip, c->port);
}

/* Every change of a client's state goes through here. */
void nkClientSetState(nkClient *c, nkClientState to) {
    nkClientState from = c->state;
    if (from == to) return;
    if (!(clientMoves[from] & (1u << to))) {
        nkBug("client %s:%d: no move from %s to %s", c->ip, c->port,
              clientStateNames[from], clientStateNames[to]);
        if (to != NK_CLIENT_CLOSING) return;     /* closing is always safe */
    }
    if (from == NK_CLIENT_WAITING) {
        waiterRemove(c);
        c->psync_wait = 0;
    }
    if (to == NK_CLIENT_WAITING) listAddNodeTail(waiters, c);
    /* A proxied full sync is complete when its RDB is out and the stream
     * goes on from the RDB's offset. */
    if (from == NK_CLIENT_FULLSYNC && to == NK_CLIENT_HANDOVER) stats.sync_full_proxied++;
    c->state = to;
}

void nkClientLeaving(nkClient *c) {
    if (c->state == NK_CLIENT_WAITING) waiterRemove(c);
}

/* ---------------------------------------------------------------- PSYNC --- */

static void psyncContinue(nkClient *c, long long offset) {
    stats.sync_partial_ok++;
    nkLog(LL_NOTICE, "Replica %s:%d: partial resync from offset %lld", c->ip,
          c->listening_port, offset);
    nkClientReply(c, "+CONTINUE %s\r\n", nkLinkReplid());
    c->stream_from = offset;
    c->stream_history = nkLinkHistory();
    nkClientSetState(c, NK_CLIENT_HANDOVER);
}

/* Nic-KV cannot serve this PSYNC: an SKV replica goes back to the master,
 * an upstream one gets its full sync through us. */
static void psyncRefuse(nkClient *c, const char *replid, long long offset, const char *why) {
    long long first, last;
    nkBacklogRange(&first, &last);
    if (replid[0] != '?') stats.sync_partial_err++;
    if (c->capa_nickv) {
        stats.sync_redirected++;
        nkLog(LL_NOTICE, "Replica %s:%d: offset %lld of %s %s (backlog %lld..%lld): "
              "back to the master", c->ip, c->listening_port, offset, replid, why, first, last);
        nkClientReply(c, NICKV_REPLY_BACK " cannot serve offset %lld (backlog %lld..%lld): sync with the master\r\n",
                      offset, first, last);
        nkClientSetState(c, NK_CLIENT_CLOSING);
        return;
    }
    /* An upstream replica: the RDB comes through us. */
    if (nkProxyFullSync(c) == -1) {
        nkClientReply(c, "-NOMASTERLINK cannot start a full sync with the master now\r\n");
        nkClientSetState(c, NK_CLIENT_CLOSING);
    } else {
        nkClientSetState(c, NK_CLIENT_FULLSYNC);
    }
}

/* PSYNC <replid> <offset> from a replica: see "A replica's state" above.
 *
 * The master redirects a replica here at the replica's own offset, which
 * may be a little ahead of our backlog: those bytes are on their way from
 * the master (it redirects only offsets it has produced, and we are its
 * replica). Such a PSYNC, with the master's current replication id, waits
 * up to NICKV_PSYNC_WAIT_MS for the stream to reach it; an offset that is
 * never reached (a lying peer, or a master that moved on) is refused when
 * the time is up. Without this wait, under a steady write load the
 * replica's offset is always ahead of the backlog range we last reported,
 * and hand-overs would never complete. */
void nkPsyncCommand(nkClient *c, int argc, sds *argv) {
    long long first, last, offset;
    if (argc != 3) {
        nkClientReply(c, "-ERR wrong number of arguments for 'psync' command\r\n");
        return;
    }
    if (!nkLinkStreaming()) {
        nkClientReply(c, "-NOMASTERLINK Nic-KV is not connected to its master\r\n");
        return;
    }
    if (!string2ll(argv[2], sdslen(argv[2]), &offset)) {
        nkClientReply(c, "-ERR value is not an integer or out of range\r\n");
        return;
    }
    nkBacklogRange(&first, &last);
    int same_history = nkLinkSameHistory(argv[1], offset);
    if (same_history && offset >= first && offset <= last + 1) {
        psyncContinue(c, offset);
        return;
    }
    if (!strcmp(argv[1], nkLinkReplid()) && last > 0 && offset > last + 1) {
        nkLog(LL_VERBOSE, "Replica %s:%d: offset %lld is ahead of the backlog (%lld..%lld): "
              "waiting for the stream", c->ip, c->listening_port, offset, first, last);
        stats.sync_waited++;
        nkClientSetState(c, NK_CLIENT_WAITING);
        c->psync_wait = offset;
        c->psync_deadline = nkMstime() + NICKV_PSYNC_WAIT_MS;
        snprintf(c->psync_replid, sizeof(c->psync_replid), "%s", nkLinkReplid());
        return;
    }
    psyncRefuse(c, argv[1], offset, "is not in the backlog");
}

void nkPsyncWaitersCheck(void) {
    listIter li;
    listNode *ln;
    long long first, last, now;
    if (listLength(waiters) == 0) return;
    nkBacklogRange(&first, &last);
    now = nkMstime();
    listRewind(waiters, &li);
    while ((ln = listNext(&li))) {
        nkClient *c = listNodeValue(ln);
        long long offset = c->psync_wait;
        if (c->state != NK_CLIENT_WAITING) continue;
        int same_history = !strcmp(c->psync_replid, nkLinkReplid());
        if (same_history && nkLinkStreaming() && offset <= last + 1 && offset >= first) {
            psyncContinue(c, offset);
        } else if (!nkLinkStreaming()) {
            nkClientReply(c, "-NOMASTERLINK Nic-KV lost its master link\r\n");
            nkClientSetState(c, NK_CLIENT_CLOSING);
        } else if (!same_history || now >= c->psync_deadline || offset < first) {
            psyncRefuse(c, c->psync_replid, offset, same_history ?
                        "was not reached by the stream in time" : "belongs to a history the master left");
        } else {
            continue;
        }
        nkClientFlushSoon(c);   /* may free c */
    }
}

/* ------------------------------------------------------------ Hand-over --- */

/* HANDOVER --queue sent-->: the +CONTINUE (or the RDB) is out, the stream
 * starts; the client is freed and its connection streams as a replica. */
void nkClientHandOver(nkClient *c) {
    nkConn *conn = c->conn;
    char ip[64];
    int port = c->listening_port ? c->listening_port : c->port;
    long long from = c->stream_from;
    if (c->state != NK_CLIENT_HANDOVER) {
        nkBug("client %s:%d: handed over in state %s", c->ip, c->port, clientStateNames[c->state]);
        return;
    }
    if (c->stream_history != nkLinkHistory()) {
        /* Its offset is in a history our backlog no longer holds. */
        nkLog(LL_NOTICE, "Replica %s:%d: the master's history changed before its stream started: "
              "closing it", c->ip, port);
        nkClientFree(c);
        return;
    }
    snprintf(ip, sizeof(ip), "%s", c->ip);
    nkConnDetach(conn);
    c->conn = NULL;
    nkClientFree(c);
    nkReplicaStart(conn, ip, port, from);
}

/* ----------------------------------------------------- Replica states --- */

static const char *replicaStateNames[NK_REPLICA_STATES] = { "online", "gone" };

/* ONLINE goes to GONE, once; GONE nowhere: the main thread frees it. */
static const unsigned replicaMoves[NK_REPLICA_STATES] = {
    [NK_REPLICA_ONLINE] = 1u << NK_REPLICA_GONE,
    [NK_REPLICA_GONE]   = 0,
};

/* Every change of a replica's state goes through here: ONLINE -> GONE, by
 * its fan-out thread (nkFanoutOnState), which closed it; the main thread
 * frees it on its next pass (nkReplicasMainEvents). */
void nkReplicaSetState(nkReplica *r, nkReplicaState to) {
    int from = atomic_load(&r->state);
    if (from < 0 || from >= NK_REPLICA_STATES || !(replicaMoves[from] & (1u << to))) {
        nkBug("replica %s:%d: no move from %s to %s", r->ip, r->port,
              from >= 0 && from < NK_REPLICA_STATES ? replicaStateNames[from] : "?",
              replicaStateNames[to]);
        return;
    }
    atomic_store(&r->state, to);
}

/* ------------------------------------------------ Replicas, main thread --- */

/* A message (nickv_msg.c) to the master on our link, freed. */
static void replicaMessage(sds msg) {
    nkLinkMessage("%s", msg);
    sdsfree(msg);
}

/* A replica starts streaming from pos, in the least loaded fan-out thread
 * (nkFanoutAdd). The connection must be detached. */
nkReplica *nkReplicaStart(nkConn *conn, const char *ip, int port, long long pos) {
    nkReplica *r = zcalloc(sizeof(*r));
    r->id = ++next_replica_id;
    snprintf(r->ip, sizeof(r->ip), "%s", ip);
    r->port = port;
    r->conn = conn;
    r->rdma = nkConnIsRdma(conn);
    r->tls = nkConnIsTls(conn);
    r->pin.off = NK_NO_PIN;
    r->pin.owner = r;
    if (r->rdma) {
        r->pin.region = nkBacklogBuf(&r->pin.region_size);
        nkBacklogPinAdd(&r->pin);
    }
    r->pos = pos;
    r->sent_off = pos - 1;
    r->ack_off = pos - 1;
    r->ack_time = nkUnixTime();
    r->inbuf = sdsempty();
    r->ctime = time(NULL);
    r->state = NK_REPLICA_ONLINE;
    listAddNodeTail(replicas, r);
    nkFanoutAdd(r);
    replicaMessage(nickvMsgAdd(r->id, r->ip, r->port));
    nkLog(LL_NOTICE, "Replica %s:%d streams from offset %lld over %s (fan-out thread %d)", ip,
          port, pos, r->rdma ? "RDMA, zero copy" : (r->tls ? "TLS" : "TCP"), r->thread);
    return r;
}

/* Ask a replica's thread to drop it (the backlog's dropper, and
 * nkReplicasDropAll). Returns 0 if it was being dropped already. */
int nkReplicaDrop(void *replica, const char *why, int log) {
    nkReplica *r = replica;
    if (r->kill) return 0;
    if (log) nkLog(LL_WARNING, "Replica %s:%d: %s", r->ip, r->port, why);
    snprintf(r->kill_why, sizeof(r->kill_why), "%s", why);
    r->kill = 1;
    nkFanoutWake();
    return 1;
}

void nkReplicasDropAll(const char *why) {
    listIter li;
    listNode *ln;
    listRewind(replicas, &li);
    while ((ln = listNext(&li))) nkReplicaDrop(listNodeValue(ln), why, 0);
}

/* Relay ACKs, tell the master about replicas that are gone, free them.
 * Runs on the fan-out's wakeups of the main thread and before it sleeps. */
void nkReplicasMainEvents(void) {
    listIter li;
    listNode *ln;
    nkFanoutEventsTaken();
    listRewind(replicas, &li);
    while ((ln = listNext(&li))) {
        nkReplica *r = listNodeValue(ln);
        if (r->ack_dirty) {
            r->ack_dirty = 0;
            replicaMessage(nickvMsgAck(r->id, (long long)r->ack_off));
            nkLinkNoteReported((long long)r->ack_off);   /* the master counts it for WAIT */
        }
        if (r->state == NK_REPLICA_GONE) {
            nkLog(LL_NOTICE, "Replica %s:%d left: %s", r->ip, r->port, r->why);
            replicaMessage(nickvMsgDel(r->id));
            listDelNode(replicas, ln);
            if (r->rdma) nkBacklogPinRemove(&r->pin);
            zfree(r);
        }
    }
}

/* After (re)joining the master: tell it about the replicas we serve. */
void nkReplicasAnnounce(void) {
    listIter li;
    listNode *ln;
    listRewind(replicas, &li);
    while ((ln = listNext(&li))) {
        nkReplica *r = listNodeValue(ln);
        if (r->state != NK_REPLICA_ONLINE || r->kill) continue;
        replicaMessage(nickvMsgAdd(r->id, r->ip, r->port));
        replicaMessage(nickvMsgAck(r->id, (long long)r->ack_off));
    }
}

unsigned long nkReplicaCount(void) { return listLength(replicas); }

void nkReplicaIterInit(nkReplicaIter *it) { listRewind(replicas, &it->li); }

nkReplica *nkReplicaIterNext(nkReplicaIter *it) {
    listNode *ln = listNext(&it->li);
    return ln ? listNodeValue(ln) : NULL;
}

/* The most a replica streaming from us at ip:port (its listening port)
 * acknowledged; -1 when none streams from us there. Every ACK of it the
 * master counted went through us (relayed at once), so this bounds what
 * the master counted of it. */
long long nkReplicaAcked(const char *ip, int port) {
    nkReplicaIter it;
    nkReplica *r;
    long long most = -1;
    nkReplicaIterInit(&it);
    while ((r = nkReplicaIterNext(&it)))
        if (r->port == port && !strcmp(r->ip, ip) && atomic_load(&r->ack_off) > most) most = atomic_load(&r->ack_off);
    return most;
}

/* ----------------------------------------------------------------- INFO --- */

/* INFO's "Replicas" section. */
sds nkReplicasInfo(sds s) {
    nkReplicaIter it;
    nkReplica *r;
    int i = 0;
    s = sdscatprintf(s, "# Replicas\r\nconnected_replicas:%lu\r\n", listLength(replicas));
    nkReplicaIterInit(&it);
    while ((r = nkReplicaIterNext(&it))) {
        s = sdscatprintf(s,
            "replica%d:id=%lld,ip=%s,port=%d,transport=%s,state=%s,offset=%lld,sent=%lld,lag=%lld,"
            "bytes_sent=%llu,sends=%llu,thread=%d\r\n",
            i++, r->id, r->ip, r->port, r->rdma ? "rdma" : (r->tls ? "tls" : "tcp"),
            r->state == NK_REPLICA_ONLINE ? "online" : "gone",
            (long long)r->ack_off, (long long)r->sent_off, nkUnixTime() - (long long)r->ack_time,
            (unsigned long long)r->bytes_sent, (unsigned long long)r->sends, r->thread);
    }
    return sdscat(s, "\r\n");
}

/* The replicas' fields of INFO's "Replication" section, as a Redis master
 * writes them: connected_slaves, then slaveN:ip=,port=,state=,offset=,lag=
 * with the offset the replica acknowledged and the seconds since its last
 * ACK. Only the replicas we stream to (online): one being dropped is no
 * longer one, as Redis lists none it closed. The "Replicas" section says
 * more of each, the dropped ones too. */
sds nkReplicasReplicationInfo(sds s) {
    nkReplicaIter it;
    nkReplica *r;
    int n = 0;
    nkReplicaIterInit(&it);
    while ((r = nkReplicaIterNext(&it)))
        if (r->state == NK_REPLICA_ONLINE && !r->kill) n++;
    s = sdscatprintf(s, "connected_slaves:%d\r\n", n);
    n = 0;
    nkReplicaIterInit(&it);
    while ((r = nkReplicaIterNext(&it))) {
        if (r->state != NK_REPLICA_ONLINE || r->kill) continue;
        s = sdscatprintf(s, "slave%d:ip=%s,port=%d,state=online,offset=%lld,lag=%lld\r\n",
                         n++, r->ip, r->port, (long long)r->ack_off,
                         nkUnixTime() - (long long)r->ack_time);
    }
    return s;
}

/* The sync_* fields of INFO's "Stats" section. */
sds nkReplicaStatsInfo(sds s) {
    return sdscatprintf(s,
        "sync_partial_ok:%lld\r\n"
        "sync_partial_err:%lld\r\n"
        "sync_full_proxied:%lld\r\n"
        "sync_redirected_to_master:%lld\r\n"
        "sync_waited_for_stream:%lld\r\n",
        stats.sync_partial_ok, stats.sync_partial_err, stats.sync_full_proxied,
        stats.sync_redirected, stats.sync_waited);
}

void nkReplicaResetStats(void) {
    memset(&stats, 0, sizeof(stats));
}
