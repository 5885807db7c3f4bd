/* nickv_probe.c -- failure detection: Nic-KV probes the master and every
 * replica, and tells the master which replicas answer.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * ========================================================================
 * Probes
 * ========================================================================
 *
 * The nodes: the master (master-host:master-port), the replicas streaming
 * from us (their address and REPLCONF listening-port), and the master's
 * direct replicas, as its INFO replication lists them online (read every
 * second on the master's probe connection; those it lists via=nickv are
 * ours already). Each node has a TCP connection of its own, never a
 * replication link, so a busy stream delays no probe.
 *
 * Every probe-interval, a node with nothing outstanding gets a PING (the
 * master a lease grant instead, see nickv_failover.c and src/nickv_lease.c,
 * and an INFO replication rdma nickv cluster once a second: see
 * probeReadView for how the link follows a master that moved). A node is:
 *
 *   valid   --the oldest request it has not answered (or the connect that
 *             has not completed) was sent waiting-time ago,
 *             or its port refuses a connection (the process is gone)-->
 *   invalid --any answer at all: +PONG, -LOADING, -BUSY, -NOAUTH,
 *             -MASTERDOWN...: it runs and reads its socket--> valid
 *
 * (probeInvalid and probeValid make those moves, and only they.) A node
 * starts valid when it appears: the master lists only replicas whose link
 * is up. One that stops being listed (its replication link is gone) is
 * still probed, and forgotten after NK_PROBE_FORGET_MS.
 *
 * What the master learns (REPLCONF nickv "health ...", nickv_proto.h):
 * min-slaves and the replicas that are valid, listed or not (the master
 * counts only those connected to it: one repointed to it by a failover
 * counts as soon as it connects, not at the next read of the master's
 * list, a second later), when that changes,
 * when the link (re)joins, and with every heartbeat; never before the
 * master's replica list was read (and not while it cannot be), so that a
 * starting Nic-KV counts no direct replica out. With min-slaves > 0 the
 * master counts a replica not named valid neither for WAIT nor for
 * min-replicas-to-write, and refuses writes (-NOREPLICAS) while fewer
 * than min-slaves remain: within waiting-time of a replica hanging, at
 * once when its process dies. With min-slaves 0 the verdicts are shown,
 * and change nothing. What cannot be named (an address the message could
 * not carry, more than NICKV_HEALTH_MAX replicas) counts out: the safe
 * side.
 *
 * A replica is probed at a numeric address only (a name would block the
 * loop on DNS), with PING alone (the master's probe alone authenticates,
 * as the link does: no password goes to an address a replica announced);
 * a direct replica the master sees on its own loopback is probed on the
 * master's address. One that never answers (unreachable from here:
 * replica-announce-ip/port, a firewall, TLS-only replication) is invalid
 * too, and the log says so: Nic-KV could neither see it fail nor promote
 * it, so its acknowledgements are not a promise Nic-KV can keep.
 */

#include "nickv.h"
#include "nickv_resp.h"
#include "nickv_info.h"
#include "nickv_conn.h"
#include "nickv_resolve.h"
#include "nickv_backlog.h"
#include "nickv_upstream.h"
#include "nickv_member.h"
#include "nickv_busy.h"
#include "nickv_probe.h"
#include "nickv_msg.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "anet.h"
#include "monotonic.h"
#include "util.h"
#include "zmalloc.h"

#define NK_IP_LEN 256                    /* a host name or address, as the master's */
#define NK_PROBE_QUEUE 16                /* requests in flight per node */
#define NK_PROBE_INFO_US 1000000LL       /* the master's replica list, this often */
#define NK_PROBE_FORGET_MS 60000         /* an unlisted node is kept this long */
#define NK_PROBE_REPLY_MAX (4*1024*1024) /* a longer INFO reply is garbage */

/* What a node was asked: PING, or the master's lease (nickv_failover.c),
 * or its INFO, or a command of the failover's (nkProbeCommand). */
typedef enum { PROBE_AUTH, PROBE_PING, PROBE_LEASE, PROBE_INFO, PROBE_CMD } probeKind;

typedef struct probeNode {
    char ip[NK_IP_LEN];         /* as the master knows it (INFO, health) */
    char reach[NK_IP_LEN];      /* where we connect (nodeReach) */
    int port;
    int is_master;
    int behind;                 /* streams from us (else a direct replica) */
    int listed;                 /* the master, or a replica listed now */
    int watched;                /* kept while unlisted (nkProbeWatch) */
    int checking;               /* added by nkProbeCheck, never listed since:
                                 * hidden from nkProbeNodes, never named,
                                 * announced or an event's subject */
    int remembered;             /* from the state file: listed until the
                                 * master's own list is read */
    int authed;                 /* a replica's connection: AUTH sent */
    int untrusted_said;         /* logged that it is not a member */
    int sdown_said;             /* +sdown sent, -sdown not yet (probeEvent) */
    char runid[NK_RUNID_SIZE + 1];  /* a replica's process, "" if not known */
    int seen;                   /* listed in this pass (nodesRefresh) */
    long long unlisted_ms;      /* ... when it stopped being listed */
    nkConn *conn;
    int connected;
    long long connect_us;       /* when the current connection was started */
    long long ping_us;          /* when the last PING went */
    int warned;                 /* said why it cannot be listed to the master */
    int busy;                   /* the master: silent, but its watch says busy */
    sds in, out;
    struct {
        probeKind kind;
        long long sent_us;
        nkProbeReplyFn fn;      /* PROBE_CMD: gets the reply */
        long long tag;
    } q[NK_PROBE_QUEUE];
    int qhead, qlen;
    long long bulk_left;        /* bytes of a bulk reply still to come, -1: none */
    long long waiting_since_us; /* the oldest request (or connect) not answered, 0: none */
    int valid;
    int ever_answered;
    long long state_ms;         /* when it became valid or invalid */
    long long invalid_ms;       /* when it was last invalid, 0: never */
    long long named_ms;         /* last named valid to the master, 0: never */
    char why[320];              /* why it is invalid */
    char conn_err[256];         /* why the last connect failed, "" if it did not */
    long long rtt_us, max_rtt_us;
    long long answered_us;      /* when it last answered, 0: never */
    long long probes, answers;
} probeNode;

static list *nodes;                      /* probeNode; the master first */
/* The master's direct replicas, as its INFO last listed them: no more than
 * the master can be told of (a longer list counts out, as health does). */
static struct { char ip[NK_IP_LEN]; int port; } direct[NICKV_HEALTH_MAX];
static int ndirect;
static int view_read;                    /* the master's replica list read once */
static char view_err[128];               /* why it could not be read */
static long long next_info_us;
static sds last_health;
static long long health_sent_us;
static long long health_messages;
static long long probe_errors;           /* error replies to AUTH, INFO, commands */
/* The master's clock in its last answer to a lease (nickv_lease.c on the
 * master's side), 0: none yet. The next grant runs from it. */
static long long master_clock;
static long long master_clock_us;       /* ... which we read then */
static char lease_err[128];             /* why the master refused a lease */
static int lease_other;                 /* ... another Nic-KV's connection grants */
static int lease_foreign;               /* ... because another may grant it */
static long long foreign_since_us;      /* ... since then (0: not refused so) */
static long long lease_zero_us;         /* the master's INFO last said its lease ran out */
static long long lease_busy_us;         /* ... or last said it holds one */
static int master_lease = -1;           /* its nickv-lease (INFO nickv), -1: unknown */
static int master_granted;              /* a grant went on this connection */
static int master_serves;               /* ... and the master took one (nkProbeMasterServes) */
static int master_cluster = -1;         /* its INFO cluster_enabled (-1: not read) */
static int master_rdma_port;            /* its RDMA listener's port (INFO rdma), 0: none */
/* The highest offset the master's stream is known to have reached: what
 * the master said (its INFO, its answers to leases) or our own stream's
 * end, in any history; 0: nothing seen yet. With when it last grew, and
 * samples of its growth over the last NK_STREAM_RATE_MS, for the fastest
 * rate it grew at (nkProbeStreamBound). */
#define NK_STREAM_SAMPLES 128
#define NK_STREAM_RATE_MS 10000
static long long master_offset_seen;
static char stream_replid[NK_RUNID_SIZE + 1];   /* ... in this history */
static long long stream_seen_us;
static struct { long long us, offset; } stream_samples[NK_STREAM_SAMPLES];
static int stream_next;
static char master_runid[NK_RUNID_SIZE + 1];     /* the process we grant to */
static long long master_clock_offset;   /* the offset of the answer master_clock is from */
static long long granted_offset;        /* ... of the answer our last grant echoed */
static long long want_grants;           /* grants sent at once for a "+WANT" push */
static long long want_confirms;         /* ... of them confirmations only (handing over) */
static int master_pushes;               /* the master pushed on this connection: our
                                         * grants echo the offset too */
static long long master_infos;          /* the master's INFO read */
static char restarted_runid[NK_RUNID_SIZE + 1];  /* another one answered since */
static int master_restarted;            /* ... and is not vetted yet (probeVet) */
static int master_identified;           /* a lease answer on this connection */
/* The stream as the state file remembers it, for a Nic-KV whose link has
 * not synced yet: a restarted master is vetted against this. */
static char known_replid[NK_RUNID_SIZE + 1];
static long long known_offset;
static int failover_kick;               /* news for the layer above: hooks.changed */
static nkProbeHooks hooks;               /* the layer above (nkProbeStart) */
static int health_dirty;
static int was_streaming;                /* the link, at the last healthSend */

static long long nowMs(void) { return (long long)(getMonotonicUs() / 1000); }

/* An address the master can hold and split (health message words). */
static int addrSendable(const char *a) {
    if (!*a || strlen(a) >= NK_IP_LEN) return 0;
    for (; *a; a++)
        if (!isalnum((unsigned char)*a) && !strchr(".:%_-", *a)) return 0;
    return 1;
}

static int addrLoopback(const char *a) {
    return !strncmp(a, "127.", 4) || !strcmp(a, "::1") || !strcmp(a, "localhost");
}

/* One of Nic-KV's own addresses (loopback, announce-ip, bind). */
static int addrOurs(const char *a) {
    if (addrLoopback(a) || (nk.cfg.announce_ip && !strcmp(a, nk.cfg.announce_ip))) return 1;
    for (int i = 0; i < nk.cfg.bindcount; i++)
        if (!strcmp(a, nk.cfg.bind[i])) return 1;
    return 0;
}


/* ------------------------------------------------------------- Members --- */

/* May n be sent our credentials, our lease (it carries our key) and our
 * commands: is it a member (nickv_member.c)? Said once per node and
 * address when it is not. */
static int probeTrusted(probeNode *n) {
    if (nkMember(n->reach, n->port)) {
        n->untrusted_said = 0;
        return 1;
    }
    if (!n->untrusted_said)
        nkLog(LL_WARNING, "Probe: %s %s:%d is not a member (no node line names %s:%d): it is never sent "
              "Nic-KV's credentials or lease, named valid, promoted or repointed (NIC-KV.md, \"Members\")",
              n->is_master ? "the master" : "replica", n->ip, n->port, n->reach, n->port);
    n->untrusted_said = 1;
    return 0;
}

/* ------------------------------------------------------------ Verdicts --- */

static const char *nodeRole(const probeNode *n) {
    return n->is_master ? "master" : "replica";
}

/* A replica node at the master's own address: the old master watched to
 * be repointed before the probe moved, or the winner still listed as a
 * replica. Sentinel never names an instance as a replica of itself: such
 * a node makes no event (its +slave comes with nkProbeAnnounceReplicas). */
static int probeIsMasterAddr(const probeNode *n) {
    const probeNode *m = listLength(nodes) ? listNodeValue(listFirst(nodes)) : NULL;
    return m && n != m && !n->is_master && n->port == m->port && !strcmp(n->reach, m->reach);
}

/* A Sentinel event about n (hooks.event: nkSentinelEvent); the master's
 * sdown is its odown too: the probes are the one judge. A -sdown only ever
 * follows a +sdown said of the same node, as Sentinel's. */
static void probeEvent(probeNode *n, int down) {
    probeNode *m = listLength(nodes) ? listNodeValue(listFirst(nodes)) : n;
    if (n->checking || probeIsMasterAddr(n) || (!down && !n->sdown_said)) return;
    n->sdown_said = down;
    hooks.event(down ? "+sdown" : "-sdown", n->is_master, n->reach, n->port, m->reach, m->port, NULL);
    if (n->is_master)
        hooks.event(down ? "+odown" : "-odown", 1, n->reach, n->port, m->reach, m->port,
                        down ? "#quorum 1/1" : NULL);
}

void nkProbeAnnounceReplicas(const char *ip, int port) {
    listIter li;
    listNode *ln;
    listRewind(nodes, &li);
    while ((ln = listNext(&li))) {
        probeNode *n = listNodeValue(ln);
        if (n->is_master || n->checking || (n->port == port && !strcmp(n->reach, ip))) continue;
        hooks.event("+slave", 0, n->reach, n->port, ip, port, NULL);
        n->sdown_said = !n->valid;
        if (!n->valid) hooks.event("+sdown", 0, n->reach, n->port, ip, port, NULL);
    }
}

static void probeInvalid(probeNode *n, const char *why) {
    snprintf(n->why, sizeof(n->why), "%s", why);
    if (!n->valid) return;
    n->valid = 0;
    n->state_ms = nowMs();
    n->invalid_ms = n->state_ms;
    health_dirty = 1;
    failover_kick = 1;
    if (!n->ever_answered && !n->is_master)
        nkLog(LL_WARNING, "Probe: replica %s:%d has not answered since it appeared (%s): "
              "is its listening address reachable from Nic-KV? It counts as invalid",
              n->ip, n->port, why);
    else
        nkLog(LL_WARNING, "Probe: %s %s:%d is invalid: %s", nodeRole(n), n->ip, n->port, why);
    probeEvent(n, 1);
}

static void probeValid(probeNode *n) {
    n->ever_answered = 1;
    if (n->valid) return;
    nkLog(LL_NOTICE, "Probe: %s %s:%d answers again, after %lld ms", nodeRole(n), n->ip, n->port,
          nowMs() - n->state_ms);
    n->invalid_ms = nowMs();
    n->valid = 1;
    n->state_ms = nowMs();
    n->why[0] = '\0';
    health_dirty = 1;
    failover_kick = 1;
    probeEvent(n, 0);
}

/* --------------------------------------------------------- Connections --- */

static void probeConnect(probeNode *n);
static void probeSend(probeNode *n, probeKind kind);

static void probeClose(probeNode *n) {
    int qhead = n->qhead, qlen = n->qlen;
    if (n->conn) nkConnClose(n->conn);
    n->conn = NULL;
    n->connected = 0;
    n->authed = 0;
    if (n->is_master) {
        /* Perhaps another process next: a query first, then its run id
         * decides (leaseAnswer). */
        master_granted = 0;
        master_serves = 0;
        master_clock = 0;
        master_identified = 0;
    }
    n->qlen = n->qhead = 0;
    /* Commands that will never be answered now: say so. */
    for (int i = 0; i < qlen; i++) {
        int slot = (qhead + i) % NK_PROBE_QUEUE;
        if (n->q[slot].kind == PROBE_CMD && n->q[slot].fn)
            n->q[slot].fn(n->q[slot].tag, n->ip, n->port, "connection lost", 15, 1);
    }
    n->bulk_left = -1;
    if (n->in) sdsclear(n->in);
    if (n->out) sdsclear(n->out);
}

/* The connection ended or failed. What was not answered stays unanswered
 * (waiting_since goes on); a port that refuses means the process is gone. */
static void probeLost(probeNode *n, const char *why) {
    probeClose(n);
    if (why && strstr(why, "refused")) probeInvalid(n, "connection refused");
    /* The next tick connects again: a killed process's port refuses then,
     * within a probe interval of its death, and a node that accepts and
     * closes at once (maxclients) costs one connect per interval. */
}

static void probeFlush(probeNode *n) {
    while (n->conn && n->connected && sdslen(n->out)) {
        ssize_t w = nkConnWrite(n->conn, n->out, sdslen(n->out));
        if (w < 0 && errno != EAGAIN) {
            probeLost(n, nkConnError(n->conn) ? nkConnError(n->conn) : strerror(errno));
            return;
        }
        if (w <= 0) break;
        sdsrange(n->out, w, -1);
    }
}

static void probeWritable(nkConn *conn, void *data) {
    probeNode *n = data;
    (void)conn;
    probeFlush(n);
    if (n->conn) nkConnSetWriteHandler(n->conn, sdslen(n->out) ? probeWritable : NULL);
}

/* The master's INFO names its history: another one that does not continue
 * ours (a master taken as it is after a restart, a master that is not the
 * one we followed) starts the bound afresh. */
static void streamHistory(const char *replid, const char *replid2) {
    if (!replid[0]) return;
    if (stream_replid[0] && strcmp(replid, stream_replid) && strcmp(replid2, stream_replid)) {
        nkLog(LL_NOTICE, "Probe: the master's stream is another history (%s, was %s): what it holds is "
              "known afresh", replid, stream_replid);
        master_offset_seen = 0;
        granted_offset = 0;
        stream_seen_us = 0;
        memset(stream_samples, 0, sizeof(stream_samples));
    }
    memcpy(stream_replid, replid, sizeof(stream_replid));
}

/* The master's history as its INFO last said ("" if not read yet). */
const char *nkProbeMasterReplid(void) {
    return stream_replid;
}

/* The stream is known to reach offset (now). */
static void streamSeen(long long offset) {
    long long now = getMonotonicUs();
    int last = (stream_next + NK_STREAM_SAMPLES - 1) % NK_STREAM_SAMPLES;
    if (offset <= master_offset_seen) return;
    master_offset_seen = offset;
    stream_seen_us = now;
    /* At most one sample per 10 ms: the ring covers NK_STREAM_RATE_MS at
     * the probes' pace. */
    if (stream_samples[last].us && now - stream_samples[last].us < 10000) {
        stream_samples[last].offset = offset;
        return;
    }
    stream_samples[stream_next].us = now;
    stream_samples[stream_next].offset = offset;
    stream_next = (stream_next + 1) % NK_STREAM_SAMPLES;
}

static void nodeRetarget(probeNode *n, const char *ip, int port);
static void probeVet(probeNode *m, const char *replid, const char *replid2, long long offset);

/* ---------------------------------------------------- Replication loops --- */

/* A master that says it is a replica of another is followed there
 * (probeReadView). If that one says it is a replica of one we just left
 * (A -> B -> A, or a longer cycle: REPLICAOF given both ways by mistake),
 * following would go round for ever, a hop every probe interval. So the
 * nodes left in the last loopWindowMs() are kept, in order; a hop back to
 * one of them closes a loop, and the probe holds on the node where it is
 * (loopFollow). A loop still closed NK_LOOP_CONFIRM_MS later (not a
 * handover caught halfway, whose new master called itself a replica a
 * moment ago) is logged, once, and shown in INFO (replication_loop).
 * While it holds, the probe looks one hop further round every
 * NK_LOOP_RECHECK_MS, without a log line, so that an operator's fix
 * anywhere in the loop (REPLICAOF NO ONE on one of its nodes) is seen:
 * the first node that answers as a master ends the loop (loopEnd), and the
 * link follows it as it follows any master that moved. */

#define NK_LOOP_NODES 16                /* a longer loop is not seen whole */
#define NK_LOOP_CONFIRM_MS 1000         /* closed this long: a loop indeed */
#define NK_LOOP_RECHECK_MS 5000

static struct {
    struct {
        char ip[NK_IP_LEN];
        int port;
        long long left_ms;              /* when the probe left it */
    } node[NK_LOOP_NODES];              /* oldest first */
    int count;
    int held;                           /* a loop closed: the probe holds */
    long long held_ms;                  /* ... since */
    int logged;                         /* ... for NK_LOOP_CONFIRM_MS: logged,
                                         * shown in INFO */
    long long recheck_ms;               /* the next look one hop further */
    char desc[512];                     /* "A -> B -> A" */
} loop;
static long long master_moves;          /* the master's probe moved (INFO) */

/* Hops further apart than this are no loop: a master chain that settles
 * takes a probe interval or two a hop. */
static long long loopWindowMs(void) {
    return 2000 + 4LL * nk.cfg.probe_interval;
}

static int loopFind(const char *ip, int port) {
    for (int i = 0; i < loop.count; i++)
        if (loop.node[i].port == port && !strcmp(loop.node[i].ip, ip)) return i;
    return -1;
}

/* The probe leaves ip:port now. */
static void loopLeft(const char *ip, int port, long long now) {
    int i = loopFind(ip, port);
    if (i >= 0) {
        memmove(&loop.node[i], &loop.node[i + 1], sizeof(loop.node[0]) * (loop.count - i - 1));
        loop.count--;
    }
    if (loop.count == NK_LOOP_NODES) {
        memmove(&loop.node[0], &loop.node[1], sizeof(loop.node[0]) * (NK_LOOP_NODES - 1));
        loop.count--;
    }
    snprintf(loop.node[loop.count].ip, sizeof(loop.node[0].ip), "%s", ip);
    loop.node[loop.count].port = port;
    loop.node[loop.count].left_ms = now;
    loop.count++;
}

/* The master m says it is a replica of ip:port: whether the probe follows
 * it there (1; *quiet: a look further round a held loop, not worth a log
 * line), or holds on m (0). */
static int loopFollow(probeNode *m, const char *ip, int port, int *quiet) {
    long long now = nowMs();
    int k, j = 0;
    if (!loop.held) {
        /* Forget what was left too long ago (a held loop keeps its nodes:
         * it goes round them slowly). */
        for (int i = 0; i < loop.count; i++)
            if (now - loop.node[i].left_ms < loopWindowMs()) loop.node[j++] = loop.node[i];
        loop.count = j;
    }
    k = loopFind(ip, port);
    *quiet = loop.held && k >= 0;
    if (k < 0 || (loop.held && now >= loop.recheck_ms)) {
        if (loop.held) loop.recheck_ms = now + NK_LOOP_RECHECK_MS;
        loopLeft(m->ip, m->port, now);
        return 1;
    }
    if (!loop.held) {
        /* It closed: hold, and say so if it is still closed a while
         * later. */
        sds d = sdsempty();
        for (int i = k; i < loop.count; i++)
            d = sdscatprintf(d, "%s:%d -> ", loop.node[i].ip, loop.node[i].port);
        d = sdscatprintf(d, "%s:%d -> %s:%d", m->ip, m->port, ip, port);
        snprintf(loop.desc, sizeof(loop.desc), "%s", d);
        sdsfree(d);
        loop.held = 1;
        loop.held_ms = now;
        loop.recheck_ms = now + NK_LOOP_RECHECK_MS;
        return 0;
    }
    if (!loop.logged && now - loop.held_ms >= NK_LOOP_CONFIRM_MS) {
        nkLog(LL_WARNING, "Probe: replication loop: %s; holding on %s:%d until an operator fixes it "
              "(REPLICAOF NO ONE on one of them)", loop.desc, m->ip, m->port);
        loop.logged = 1;
    }
    return 0;
}

/* The master m answers as a master (or our failover chose one): no loop. */
static void loopEnd(probeNode *m) {
    if (m && loop.logged)
        nkLog(LL_WARNING, "Probe: the replication loop %s is over: %s:%d answers as a master",
              loop.desc, m->ip, m->port);
    loop.count = 0;
    loop.held = loop.logged = 0;
    loop.desc[0] = '\0';
}

/* The master's INFO replication, rdma, nickv and cluster. Still a master:
 * its direct replicas, online, and the link follows it there if it moved
 * (below), once it holds our lease if it needs one. A replica now (an
 * operator's FAILOVER or REPLICAOF, a cluster failover): we probe its
 * master instead, and once that answers as a master, the link follows
 * (masters that name each other: see "Replication loops" above).
 * Our own failover (nickv_failover.c) moves the probe with
 * nkProbeRetargetMaster, and the link follows the same way. */
static void probeReadView(probeNode *m, const char *info, size_t len, int granted) {
    sds *lines;
    int count;
    nkInfo in;
    nkInfoParse(info, len, &in);
    if (in.bad[0]) {
        /* Half a view is worse than the last whole one. */
        char why[128];
        snprintf(why, sizeof(why), "its INFO field %s does not parse", in.bad);
        if (strcmp(why, view_err)) nkLog(LL_WARNING, "Probe: the master %s:%d: %s", m->ip, m->port, why);
        snprintf(view_err, sizeof(view_err), "%s", why);
        return;
    }
    const char *role = in.role, *mhost = in.master_host, *replid = in.replid, *replid2 = in.replid2;
    int mport = in.master_port, rdma_port = in.rdma_port, rdma_on = in.rdma_listener;
    long long offset = in.master_repl_offset;
    if (in.lease >= 0) master_lease = in.lease;
    if (in.lease_left_ms == 0) lease_zero_us = getMonotonicUs();
    else if (in.lease_left_ms > 0) lease_busy_us = getMonotonicUs();
    if (in.cluster >= 0) master_cluster = in.cluster;
    if (!strcmp(role, "master")) {
        streamHistory(replid, replid2);
        streamSeen(offset);
    }
    lines = sdssplitlen(info, (ssize_t)len, "\r\n", 2, &count);
    if (!strcmp(role, "slave")) {
        sdsfreesplitres(lines, count);
        if (!mhost[0] || mport <= 0 || mport > 65535 || (!strcmp(mhost, m->ip) && mport == m->port))
            return;
        int quiet, from_port = m->port;
        char from[NK_IP_LEN];
        if (!loopFollow(m, mhost, mport, &quiet)) return;
        snprintf(from, sizeof(from), "%s", m->ip);
        /* The owner may hold the probe where it is (it says why). */
        if (hooks.master_follows(m->ip, m->port, mhost, mport) && !quiet)
            nkLog(LL_WARNING, "Probe: the master %s:%d is now a replica of %s:%d: following it",
                  from, from_port, mhost, mport);
        return;
    }
    if (strcmp(role, "master")) {
        sdsfreesplitres(lines, count);
        return;
    }
    loopEnd(m);
    if (master_restarted && master_lease == 0) {
        /* The operator's way out (CONFIG SET nickv-lease no on it): it
         * serves without us, so it is the master as it is. */
        nkLog(LL_WARNING, "Probe: the restarted master %s:%d runs nickv-lease no: taken as it is",
              m->ip, m->port);
        memcpy(master_runid, restarted_runid, sizeof(master_runid));
        master_restarted = 0;
        probeValid(m);
    }
    if (master_restarted) {
        probeVet(m, replid, replid2, offset);
        sdsfreesplitres(lines, count);
        return;
    }
    if (master_lease == 1 && !granted && hooks.leader()) {
        /* It serves no PSYNC before our first grant: the link follows it
         * once an INFO sent after a grant is answered (the next tick's). */
        sdsfreesplitres(lines, count);
        return;
    }
    master_rdma_port = rdma_on && rdma_port > 0 && rdma_port <= 65535 ? rdma_port : 0;
    hooks.master_serves(m->ip, m->port, master_rdma_port);
    ndirect = 0;
    for (int i = 0; i < count; i++) {
        nkInfoReplica rl;
        if (!nkInfoReplicaLine(lines[i], &rl)) continue;
        const char *ip = rl.ip, *state = rl.state;
        int port = rl.port, via = rl.via_nickv;
        /* Those behind a Nic-KV are its own (nodesRefresh) ... unless
         * another Nic-KV fans out (a coordinator): then the master's list
         * is how we know them. */
        if ((via && !hooks.coordinated()) || strcmp(state, "online") || !ip[0] || port <= 0 || port > 65535) continue;
        if ((port == nk.cfg.port || port == nk.cfg.tls_port) && port && addrOurs(ip))
            continue;   /* our own link, to a master that does not offload to us */
        if (ndirect == NICKV_HEALTH_MAX) break;
        snprintf(direct[ndirect].ip, sizeof(direct[ndirect].ip), "%s", ip);
        direct[ndirect].port = port;
        ndirect++;
    }
    sdsfreesplitres(lines, count);
    if (!view_read || view_err[0]) nkLog(LL_NOTICE, "Probe: the master lists %d direct replicas", ndirect);
    view_read = 1;
    view_err[0] = '\0';
}

/* "+LEASE <clock> <run-id> [<offset> [<watch-port> <token>]]": 1, with
 * them (offset -1 when a master older than this Nic-KV leaves it out;
 * watch_port 0 and token "" without a watch thread), or 0. Strict, as INFO
 * is read (nickv_info.c). */
static int leaseParse(const char *payload, size_t len, int is_error, long long *clock, char *runid,
                      long long *offset, int *watch_port, char *token) {
    const char *p = payload + 6, *end = payload + len, *sp;
    *watch_port = 0;
    token[0] = '\0';
    if (is_error || len < 8 || memcmp(payload, "LEASE ", 6)) return 0;
    if (!(sp = memchr(p, ' ', (size_t)(end - p))) || !string2ll(p, (size_t)(sp - p), clock) || *clock <= 0)
        return 0;
    p = sp + 1;
    sp = memchr(p, ' ', (size_t)(end - p));
    if ((sp ? sp : end) - p != NK_RUNID_SIZE) return 0;
    for (int i = 0; i < NK_RUNID_SIZE; i++)
        if (!isxdigit((unsigned char)p[i])) return 0;
    memcpy(runid, p, NK_RUNID_SIZE);
    runid[NK_RUNID_SIZE] = '\0';
    *offset = -1;
    if (!sp) return 1;
    p = sp + 1;
    sp = memchr(p, ' ', (size_t)(end - p));
    if (!string2ll(p, (size_t)((sp ? sp : end) - p), offset) || *offset < 0) return 0;
    if (!sp) return 1;
    /* The watch thread's port and the token it asks for. */
    long long wp;
    p = sp + 1;
    if (!(sp = memchr(p, ' ', (size_t)(end - p))) || !string2ll(p, (size_t)(sp - p), &wp) || wp < 1 ||
        wp > 65535 || end - (sp + 1) != NICKV_INSTANCE_LEN)
        return 0;
    for (const char *q = sp + 1; q < end; q++)
        if (!isxdigit((unsigned char)*q)) return 0;
    *watch_port = (int)wp;
    memcpy(token, sp + 1, NICKV_INSTANCE_LEN);
    token[NICKV_INSTANCE_LEN] = '\0';
    return 1;
}

/* The reason in the master's "-NICKV refused: <reason>" error (an error
 * reply that starts so, exactly: not a text that merely contains the
 * words), or NULL for any other reply. */
static const char *leaseRefusedWhy(const char *err, int is_error) {
    size_t n = strlen(NICKV_REPLY_REFUSED);
    if (!is_error || strncmp(err, NICKV_REPLY_REFUSED, n) || err[n] != ' ') return NULL;
    return err + n + 1;
}

/* A refused lease: does another Nic-KV (or a client posing as one) hold
 * the master's lease, for a time we cannot know? Then we never fail that
 * master over (nkProbeLeaseForeign). Not when the grantor is an earlier
 * connection of ours (its grants are ours: counted), nor when the master
 * says how long the last one's lease runs: that is waited out as our own
 * (src/nickv_server.c, "One Nic-KV"). */
static int leaseForeign(const char *err, int is_error) {
    const char *why = leaseRefusedWhy(err, is_error), *p, *sp;
    long long ms;
    if (!why) return 1;
    if (!strncmp(why, NICKV_REFUSED_EARLIER, strlen(NICKV_REFUSED_EARLIER))) return 0;
    if (strncmp(why, NICKV_REFUSED_RUNS, strlen(NICKV_REFUSED_RUNS))) return 1;
    /* "<ms> ms more", exactly: the number is the whole word, in range. */
    p = why + strlen(NICKV_REFUSED_RUNS);
    if ((sp = strchr(p, ' ')) && !strcmp(sp, NICKV_REFUSED_RUNS_END) && string2ll(p, (size_t)(sp - p), &ms) &&
        ms >= 0 && ms <= NICKV_LEASE_MAX_MS) {
        hooks.granted(ms);
        return 0;
    }
    return 1;
}

/* The master's answer to a lease. Its run id is the process we grant to:
 * the first we hear after start or a move is taken as it is; another one
 * later means the master restarted, perhaps empty (persistence off), and
 * it gets no grant, and stays invalid (so the failover goes on), until its
 * INFO shows that it holds our stream's history, all of it (probeVet). */
static void leaseAnswer(probeNode *n, const char *payload, size_t len, int is_error, long long now, int grant) {
    long long clock, offset;
    char runid[NK_RUNID_SIZE + 1], token[NICKV_INSTANCE_LEN + 1];
    int watch_port;
    if (!leaseParse(payload, len, is_error, &clock, runid, &offset, &watch_port, token)) {
        char err[sizeof(lease_err)];
        snprintf(err, sizeof(err), "%.*s", (int)len, payload);
        if (strcmp(err, lease_err))
            nkLog(LL_WARNING, "Probe: the master refuses the lease we grant: %s", err);
        memcpy(lease_err, err, sizeof(lease_err));
        lease_foreign = leaseForeign(err, is_error);
        const char *why = leaseRefusedWhy(err, is_error);
        lease_other = why && !strncmp(why, NICKV_REFUSED_OTHER, strlen(NICKV_REFUSED_OTHER));
        if (!lease_foreign) foreign_since_us = 0;
        else if (!foreign_since_us) foreign_since_us = now;
        master_clock = 0;
        /* It runs, though it cannot say which process it is. */
        master_identified = 1;
        if (!master_restarted) probeValid(n);
        return;
    }
    master_identified = 1;
    if (!master_runid[0]) memcpy(master_runid, runid, sizeof(master_runid));
    if (strcmp(runid, master_runid)) {
        if (!master_restarted || strcmp(runid, restarted_runid)) {
            nkLog(LL_WARNING, "Probe: the master %s:%d restarted (run id %s, was %s): no lease "
                  "until it shows it holds our whole stream", n->ip, n->port, runid, master_runid);
            master_restarted = 1;
            memcpy(restarted_runid, runid, sizeof(restarted_runid));
            probeInvalid(n, "restarted: a new process, not granted until it holds our stream");
        }
        master_clock = 0;
        /* Its INFO says whether it holds our stream (probeVet). */
        if (n->qlen + 1 < NK_PROBE_QUEUE) probeSend(n, PROBE_INFO);
        return;
    }
    probeValid(n);
    streamSeen(offset);
    if (grant && !master_restarted && !master_serves) {
        master_serves = 1;
        failover_kick = 1;      /* repointing waits for it (nickv_repoint.c) */
    }
    /* The master's watch thread, where it listens (nickv_watch.c). */
    nkWatchTarget(n->reach, watch_port, token);
    if (hooks.leader()) nkWatchConnectNow((long long)getMonotonicUs());
    int first = !master_clock;
    master_clock = clock;
    master_clock_us = getMonotonicUs();
    master_clock_offset = offset;
    /* The first clock of a master: grant at once (a new master serves
     * nothing before), and read its INFO behind the grant. */
    if (first && hooks.granting()) {
        probeSend(n, PROBE_LEASE);
        probeSend(n, PROBE_INFO);
        next_info_us = now + NK_PROBE_INFO_US;
        health_dirty = 1;       /* behind the grant (nkProbeLeaseNow) */
    }
    if (lease_err[0]) nkLog(LL_NOTICE, "Probe: the master takes our lease again");
    lease_err[0] = '\0';
    lease_foreign = 0;
    foreign_since_us = 0;
}

/* A leader handing over confirms without granting, on the connection it
 * granted on (hooks.confirming). */
static int probeConfirming(void) {
    return master_granted && hooks.confirming && hooks.confirming();
}

/* The master's watch thread pushed "+WANT <clock> <offset>": a WAIT on
 * the master waits for us to confirm that its stream reached offset (src/
 * nickv_lease.c, nickvLeaseWant). Taken as a lease answer's clock and
 * offset, and granted at once, echoing clock and offset: the master
 * counts its direct replicas' ACKs up to offset for WAIT a round trip
 * after it asked, not two probe intervals. The ack bound (nkProbeAckBound)
 * rises with the grant, as it does for an answer. Only the leader's, to a
 * master it grants, whose process it knows. The master pushes one at a
 * time (src/nickv_lease.c); a grant per push, whatever a peer sends, is
 * bounded by the probe's queue. */
static void probeWant(long long clock, long long offset) {
    probeNode *m = listLength(nodes) ? listNodeValue(listFirst(nodes)) : NULL;
    if (!m || !m->is_master || !m->conn || !m->connected || !probeTrusted(m) || !master_identified ||
        master_restarted || !master_clock || !(hooks.leader() ? hooks.granting() : probeConfirming()) ||
        m->qlen + 1 >= NK_PROBE_QUEUE)
        return;
    /* The master's clock runs no faster than ours (10 % and 100 ms
     * spare): a clock further ahead than that is no time it sent, and
     * would only have our grant refused. */
    long long since_ms = ((long long)getMonotonicUs() - master_clock_us) / 1000;
    if (clock > master_clock + since_ms * 11 / 10 + 100) return;
    /* A push sent long before we read it (we were stopped, or it waited
     * in a buffer) is not answered: the grant would raise our ack bound
     * (granted_offset) for a master that may be gone meanwhile, and the
     * failover would then wait for writes nobody acknowledged
     * (nickv-failover-edges, "a direct replica ahead of Nic-KV ...").
     * A master still waiting pushes again within 50 ms. */
    if (master_clock + since_ms - clock > hooks.lease_time()) return;
    /* A push of the same millisecond as the answer or push before it, with
     * more: the grant echoes both clock and offset (nickvMsgLeaseAt). An
     * older clock: a lease answer sent after the push was read first; it
     * says at least as much, and the grant echoes it (ignoring the push
     * left the WAIT to the next probe, up to 100 ms). */
    if (clock > master_clock || (clock == master_clock && offset > master_clock_offset)) {
        streamSeen(offset);
        master_clock = clock;
        master_clock_us = getMonotonicUs();
        master_clock_offset = offset;
    }
    master_pushes = 1;
    want_grants++;
    /* Off the probe's pace: the next PING, lease and INFO stay due when
     * they were (a grant per WAIT, at a writer's rate, kept the master's
     * INFO from ever being read again: nickv-failover-faults). */
    long long due = m->ping_us;
    probeSend(m, PROBE_LEASE);
    m->ping_us = due;
}

/* A restarted master's INFO: does it hold our stream, all of it (its
 * replication id, or the one before it, is our stream's, at an offset no
 * lower than our backlog's end)? Then it is the master again. */
static void probeVet(probeNode *m, const char *replid, const char *replid2, long long offset) {
    const char *ours = nkLinkReplid();
    long long last = nkBacklogLastPub();
    if (!ours[0]) {
        /* Our link has not synced (a Nic-KV just started): what the state
         * file remembers of the stream, if anything. */
        ours = known_replid;
        last = known_offset;
    }
    if (ours[0] && ((strcmp(replid, ours) && strcmp(replid2, ours)) || offset < last)) {
        char why[320];
        snprintf(why, sizeof(why), "restarted with %s (offset %lld, ours %lld): not granted",
                 strcmp(replid, ours) && strcmp(replid2, ours) ? "another history" : "less data",
                 offset, last);
        if (strcmp(why, m->why)) nkLog(LL_WARNING, "Probe: the master %s:%d %s", m->ip, m->port, why);
        snprintf(m->why, sizeof(m->why), "%s", why);
        return;
    }
    nkLog(LL_NOTICE, "Probe: the restarted master %s:%d holds our stream (offset %lld): it is "
          "granted again", m->ip, m->port, offset);
    memcpy(master_runid, restarted_runid, sizeof(master_runid));
    master_restarted = 0;
    probeValid(m);
}

/* A whole reply to the oldest request (payload: a bulk's bytes or the
 * line). Any reply means the node runs. */
static void probeAnswered(probeNode *n, const char *payload, size_t len, int is_error) {
    probeKind kind = n->q[n->qhead].kind;
    nkProbeReplyFn fn = n->q[n->qhead].fn;
    long long tag = n->q[n->qhead].tag;
    long long now = getMonotonicUs();
    n->rtt_us = now - n->q[n->qhead].sent_us;
    if (n->rtt_us > n->max_rtt_us) n->max_rtt_us = n->rtt_us;
    n->qhead = (n->qhead + 1) % NK_PROBE_QUEUE;
    n->qlen--;
    n->answers++;
    n->answered_us = now;
    n->waiting_since_us = n->qlen ? n->q[n->qhead].sent_us : 0;
    if (is_error && (kind == PROBE_AUTH || kind == PROBE_INFO || kind == PROBE_CMD)) {
        probe_errors++;
        /* A refusal that a setting fixes, said (once in 10 s per node and
         * kind): not a silent wait. */
        if ((len >= 6 && !memcmp(payload, "NOPERM", 6)) || (len >= 9 && !memcmp(payload, "WRONGPASS", 9))) {
            char key[NK_IP_LEN + 32];
            snprintf(key, sizeof(key), "Probe: refused %s:%d %.6s", n->ip, n->port, payload);
            nkLogRepeat(LL_WARNING, key, "Probe: %s %s:%d refuses Nic-KV's %s: %.*s (NIC-KV.md, \"Security "
                        "model\", says what Nic-KV's user needs)", nodeRole(n), n->ip, n->port,
                        kind == PROBE_AUTH ? "AUTH" : (kind == PROBE_INFO ? "INFO" : "command"),
                        (int)(len > 160 ? 160 : len), payload);
        }
    }
    /* The master is valid by answering once its process is known: the
     * first lease answer on a connection says which (leaseAnswer). */
    if (!n->is_master || (master_identified && !master_restarted)) probeValid(n);
    if (kind == PROBE_CMD) {
        if (fn) fn(tag, n->ip, n->port, payload, len, is_error);
        failover_kick = 1;
    } else if (kind == PROBE_LEASE) {
        leaseAnswer(n, payload, len, is_error, now, (int)tag);
    } else if (kind == PROBE_INFO) {
        if (!is_error) master_infos++;
        if (is_error) {
            char err[sizeof(view_err)];
            snprintf(err, sizeof(err), "%.*s", (int)len, payload);
            if (strcmp(view_err, err))
                nkLog(LL_WARNING, "Probe: cannot read the master's replicas (INFO replication): "
                      "%s; min-slaves is not enforced meanwhile", err);
            memcpy(view_err, err, sizeof(view_err));
            /* No report on a view we cannot read: the master lets the last
             * one lapse. */
            view_read = 0;
            ndirect = 0;
        } else {
            probeReadView(n, payload, len, (int)tag);
        }
    }
}

static void probeReadable(nkConn *conn, void *data) {
    probeNode *n = data;
    char buf[16384];
    ssize_t r = nkConnRead(conn, buf, sizeof(buf));
    if (r == 0 || (r < 0 && errno != EAGAIN)) {
        probeLost(n, r == 0 ? "connection closed" :
                  (nkConnError(conn) ? nkConnError(conn) : strerror(errno)));
        return;
    }
    if (r < 0) return;
    n->in = sdscatlen(n->in, buf, r);
    while (n->conn && sdslen(n->in)) {
        if (n->bulk_left >= 0) {
            long long blen = n->bulk_left;
            if ((long long)sdslen(n->in) < blen + 2) break;
            n->bulk_left = -1;
            if (n->qlen) probeAnswered(n, n->in, blen, 0);
            if (!n->conn) return;       /* closed, or retargeted (probeReadView) */
            sdsrange(n->in, blen + 2, -1);
            continue;
        }
        const char *err;
        sds line = nkNextLine(&n->in, &err);
        if (err) {
            probeLost(n, err);
            return;
        }
        if (!line) break;
        if (line[0] == '$') {
            long long blen;
            if (!string2ll(line + 1, sdslen(line) - 1, &blen) || blen > NK_PROBE_REPLY_MAX) {
                sdsfree(line);
                probeLost(n, "a malformed reply");
                return;
            }
            if (blen >= 0) n->bulk_left = blen;
            else if (n->qlen) probeAnswered(n, "", 0, 1);
        } else if (n->qlen) {
            /* A line with nothing asked is no answer to anything. (A server
             * at maxclients answers our first request with its error, which
             * does show it runs.) */
            probeAnswered(n, line + (sdslen(line) ? 1 : 0), sdslen(line) ? sdslen(line) - 1 : 0,
                          line[0] == '-');
        }
        sdsfree(line);
    }
}

static void probeSendCmd(probeNode *n, probeKind kind, const char *cmd, nkProbeReplyFn fn, long long tag);
static probeNode *nodeFind(const char *ip, int port, int is_master);

/* A replica's INFO server: its run id, kept while it is the one there. */
static void runidReply(long long tag, const char *ip, int port, const char *reply, size_t len,
                       int is_error) {
    probeNode *n = nodeFind(ip, port, 0);
    nkInfo in;
    (void)tag;
    if (!n || is_error) return;
    /* Learnt only while the master is alive and lists it: a process that
     * takes the address once the master is gone is not its replica. */
    probeNode *m = listNodeValue(listFirst(nodes));
    if (!m->valid || !n->listed) return;
    nkInfoParse(reply, len, &in);
    if (!in.runid[0]) return;
    if (n->runid[0] && strcmp(n->runid, in.runid))
        nkLog(LL_NOTICE, "Probe: replica %s:%d is another process now (run id %s, was %s)",
              ip, port, in.runid, n->runid);
    memcpy(n->runid, in.runid, sizeof(n->runid));
}

static void probeConnected(nkConn *conn, void *data) {
    probeNode *n = data;
    if (nkConnError(conn)) {
        snprintf(n->conn_err, sizeof(n->conn_err), "%s", nkConnError(conn));
        if (!strncmp(n->conn_err, "TLS", 3)) {
            /* Nothing was sent to it: said, and shown as its verdict. */
            char key[NK_IP_LEN + 32];
            snprintf(key, sizeof(key), "Probe: TLS %s:%d", n->reach, n->port);
            nkLogRepeat(LL_WARNING, key, "Probe: %s %s:%d: %s: nothing is sent to it", nodeRole(n), n->ip,
                        n->port, n->conn_err);
            if (!n->valid) snprintf(n->why, sizeof(n->why), "cannot connect: %s", n->conn_err);
        }
        probeLost(n, nkConnError(conn));
        return;
    }
    n->connected = 1;
    if (n->is_master) master_pushes = 0;   /* perhaps another process: four words until it pushes */
    nkConnSetWriteHandler(conn, NULL);
    nkConnSetReadHandler(conn, probeReadable);
    /* The master's probe reads its INFO: it authenticates as the link does,
     * if the master is a member (nickv_member.c: never a password, nor a
     * lease with our key, to a node the operator did not name). A
     * replica's answers nothing but PING, for which -NOAUTH is as good an
     * answer as +PONG: no password goes to an address a replica announced. */
    int trusted = n->is_master && probeTrusted(n);
    if (trusted && nk.cfg.masterauth) probeSend(n, PROBE_AUTH);
    probeSend(n, trusted && hooks.leader() ? PROBE_LEASE : PROBE_PING);
    /* Which process a replica is, while it is one the master lists: a
     * failover promotes only that process (nickv_failover.c). Asked
     * without a password (see above): a replica that requires one says
     * -NOAUTH, and its process is not known. */
    if (!n->is_master) {
        sds cmd = nkCatCommand(sdsempty(), "INFO", "server", NULL);
        probeSendCmd(n, PROBE_CMD, cmd, runidReply, 0);
        sdsfree(cmd);
    }
}

static void probeConnect(probeNode *n) {
    char err[256];
    probeClose(n);
    n->connect_us = getMonotonicUs();
    if (!n->waiting_since_us) n->waiting_since_us = n->connect_us;
    errno = 0;
    n->conn_err[0] = '\0';
    if (!n->is_master && !nkAddrNumeric(n->reach)) {
        probeInvalid(n, "not a numeric address: not probed (see replica-announce-ip)");
        return;
    }
    n->conn = nkConnConnect(nk.loop, n->reach, n->port, 0, NULL, 0, err, sizeof(err));
    if (!n->conn) {
        /* Out of descriptors, no route, the master's name not resolved
         * (yet): it stays unanswered. (The name is in the message of a
         * lookup: it says nothing about the port.) */
        int lookup = errno == EAGAIN || errno == ENOENT;
        snprintf(n->conn_err, sizeof(n->conn_err), "%s", err);
        if (!lookup && strstr(err, "refused")) probeInvalid(n, "connection refused");
        return;
    }
    nkConnSetData(n->conn, n);
    nkConnSetWriteHandler(n->conn, probeConnected);
}

/* Queue a request (kind; for PROBE_CMD, the command is in cmd). */
static void probeSendCmd(probeNode *n, probeKind kind, const char *cmd, nkProbeReplyFn fn, long long tag) {
    int slot;
    if (n->qlen == NK_PROBE_QUEUE) return;
    slot = (n->qhead + n->qlen) % NK_PROBE_QUEUE;
    n->q[slot].kind = kind;
    n->q[slot].sent_us = getMonotonicUs();
    n->q[slot].fn = fn;
    n->q[slot].tag = kind == PROBE_INFO ? master_granted : tag;
    if (!n->qlen && !n->waiting_since_us) n->waiting_since_us = n->q[slot].sent_us;
    n->qlen++;
    if (kind == PROBE_AUTH)
        n->out = nk.cfg.masteruser ? nkCatCommand(n->out, "AUTH", nk.cfg.masteruser, nk.cfg.masterauth, NULL)
                                   : nkCatCommand(n->out, "AUTH", nk.cfg.masterauth, NULL);
    else if (kind == PROBE_INFO)
        n->out = nkCatCommand(n->out, "INFO", "replication", "rdma", "nickv", "cluster", NULL);
    else if (kind == PROBE_CMD)
        n->out = sdscat(n->out, cmd);
    else if (kind == PROBE_LEASE) {
        /* A grant from the master's last clock (a query while we have
         * none), for lease-time: nickv_failover.c counts it. */
        int grant = master_clock && !master_restarted && hooks.granting();
        /* Handing over: "lease <t> 0", a confirmation of the offset read
         * with t, no lease (the master extends nothing by it). */
        int confirm = !grant && master_clock && !master_restarted && probeConfirming();
        long long lease_ms = grant ? hooks.lease_time() : 0;
        long long g_ms = grant ? nkLeaseGrantMs(lease_ms, master_clock_us, n->q[slot].sent_us) : 0;
        /* To a master that pushes, the offset read with the clock too
         * (src/nickv_lease.c, leaseConfirmed); an older one takes only the
         * four words. */
        sds msg = (grant || confirm) && master_pushes
                      ? nickvMsgLeaseAt(master_clock, g_ms, nk.instance, nk.key, master_clock_offset)
                      : nickvMsgLease(grant || confirm ? master_clock : 0, g_ms, nk.instance, nk.key);
        n->out = nkCatCommand(n->out, "REPLCONF", NICKV_REPLCONF, msg, NULL);
        sdsfree(msg);
        n->q[slot].tag = grant;
        if (grant) {
            hooks.granted(lease_ms);
            master_granted = 1;
        }
        /* The master learns from the echoed clock that we read this
         * answer's offset (src/nickv_lease.c, leaseConfirmed). */
        if ((grant || confirm) && master_clock_offset > granted_offset) granted_offset = master_clock_offset;
        if (confirm) want_confirms++;
    } else
        n->out = nkCatCommand(n->out, "PING", NULL);
    if (kind == PROBE_PING || kind == PROBE_LEASE) n->ping_us = n->q[slot].sent_us;
    n->probes++;
    probeFlush(n);
    if (n->conn) nkConnSetWriteHandler(n->conn, sdslen(n->out) ? probeWritable : NULL);
}

static void probeSend(probeNode *n, probeKind kind) {
    probeSendCmd(n, kind, NULL, NULL, 0);
}

/* ---------------------------------------------------------------- Nodes --- */

static probeNode *nodeFind(const char *ip, int port, int is_master) {
    listIter li;
    listNode *ln;
    listRewind(nodes, &li);
    while ((ln = listNext(&li))) {
        probeNode *n = listNodeValue(ln);
        if (n->port == port && n->is_master == is_master && !strcmp(n->ip, ip)) return n;
    }
    return NULL;
}

static int add_quietly;                 /* nodeAdd announces no +slave (nkProbeCheck) */

static probeNode *nodeAdd(const char *ip, int port, int is_master) {
    probeNode *n = zcalloc(sizeof(*n));
    snprintf(n->ip, sizeof(n->ip), "%s", ip);
    snprintf(n->reach, sizeof(n->reach), "%s", ip);
    n->port = port;
    n->is_master = is_master;
    n->valid = 1;
    n->state_ms = nowMs();
    n->bulk_left = -1;
    n->in = sdsempty();
    n->out = sdsempty();
    n->listed = is_master;      /* a replica: by nodesRefresh's pass */
    if (is_master) listAddNodeHead(nodes, n); else listAddNodeTail(nodes, n);
    health_dirty = 1;
    if (!is_master && !add_quietly && listLength(nodes) > 1 && !probeIsMasterAddr(n)) {
        probeNode *m = listNodeValue(listFirst(nodes));
        hooks.event("+slave", 0, n->reach, n->port, m->reach, m->port, NULL);
    }
    return n;
}

/* The master node now means another address: a fresh start there. The
 * master's replica list is read again from the new one before the master
 * hears from us again. */
static void nodeRetarget(probeNode *n, const char *ip, int port) {
    master_moves++;
    probeClose(n);
    nkWatchForget();            /* the new master's lease answers name its own */
    snprintf(n->ip, sizeof(n->ip), "%s", ip);
    snprintf(n->reach, sizeof(n->reach), "%s", ip);
    n->port = port;
    n->valid = 1;
    n->ever_answered = 0;
    n->waiting_since_us = 0;
    n->state_ms = nowMs();
    n->why[0] = '\0';
    n->sdown_said = 0;          /* another instance: Sentinel resets it too */
    n->rtt_us = n->max_rtt_us = 0;
    master_clock = 0;           /* another host's clock: a query first */
    granted_offset = 0;         /* ... and what it acknowledged is its own */
    master_lease = -1;
    master_cluster = -1;
    master_rdma_port = 0;
    master_granted = 0;
    master_serves = 0;
    master_runid[0] = '\0';     /* another process: taken as it answers */
    master_restarted = 0;
    ndirect = 0;
    view_read = 0;
    next_info_us = 0;
    health_dirty = 1;
}

static void nodeFree(probeNode *n) {
    probeClose(n);
    sdsfree(n->in);
    sdsfree(n->out);
    zfree(n);
}

static void nodeSeen(const char *ip, int port, int behind) {
    probeNode *n = nodeFind(ip, port, 0);
    int created = !n;
    if (!n) {
        n = nodeAdd(ip, port, 0);
        nkLog(LL_VERBOSE, "Probe: replica %s:%d (%s)", ip, port, behind ? "behind Nic-KV" : "direct");
    }
    n->seen = 1;
    n->behind = behind;
    /* A direct replica the master sees on its loopback runs on the
     * master's host: reach it there, not on our own loopback. */
    if (!behind && addrLoopback(ip) && !addrLoopback(((probeNode *)listNodeValue(listFirst(nodes)))->reach))
        snprintf(n->reach, sizeof(n->reach), "%s", ((probeNode *)listNodeValue(listFirst(nodes)))->reach);
    else
        snprintf(n->reach, sizeof(n->reach), "%s", ip);
    if (created) probeTrusted(n);       /* said once, if it is not a member */
}

/* Who is a replica now: ours, and the master's direct ones. */
static void nodesRefresh(void) {
    listIter li;
    listNode *ln;
    nkReplicaIter it;
    nkReplica *r;
    long long now = nowMs();
    listRewind(nodes, &li);
    while ((ln = listNext(&li))) {
        probeNode *n = listNodeValue(ln);
        /* What the state file remembers stands until the master's own
         * list replaces it (a Nic-KV started while the master is dead
         * still knows the replicas it may promote). */
        if (view_read) n->remembered = 0;
        n->seen = n->remembered;
    }
    hooks.replicas_init(&it);
    while ((r = hooks.replicas_next(&it)))
        if (!atomic_load(&r->kill) && atomic_load(&r->state) == NK_REPLICA_ONLINE && r->port > 0)
            nodeSeen(r->ip, r->port, 1);
    for (int i = 0; i < ndirect; i++) {
        probeNode *n = nodeFind(direct[i].ip, direct[i].port, 0);
        if (!n || !n->seen) nodeSeen(direct[i].ip, direct[i].port, 0);
    }
    listRewind(nodes, &li);
    while ((ln = listNext(&li))) {
        probeNode *n = listNodeValue(ln);
        if (n->is_master) continue;
        if (n->seen && !n->listed) {
            n->listed = 1;
            n->checking = 0;
            n->unlisted_ms = 0;
            health_dirty = 1;
            /* Its process, again: one restarted since its connection
             * was made (and its run id asked) answered while unlisted. */
            if (n->conn && n->connected && n->qlen + 1 < NK_PROBE_QUEUE) {
                sds cmd = nkCatCommand(sdsempty(), "INFO", "server", NULL);
                probeSendCmd(n, PROBE_CMD, cmd, runidReply, 0);
                sdsfree(cmd);
            }
        } else if (!n->seen && n->listed) {
            n->listed = 0;
            n->unlisted_ms = now;
            health_dirty = 1;
        } else if (!n->seen && !n->watched && now - n->unlisted_ms >= NK_PROBE_FORGET_MS) {
            nkLog(LL_VERBOSE, "Probe: forgetting %s:%d, no longer a replica", n->ip, n->port);
            nodeFree(n);
            listDelNode(nodes, ln);
        }
    }
}

/* ------------------------------------------------------ To the master --- */

static void healthSend(void) {
    listIter li;
    listNode *ln;
    int nvalid = 0, njoining = 0;
    sds list, joining, msg;
    long long now = getMonotonicUs();
    int streaming = nkLinkDaemon();
    probeNode *m = listNodeValue(listFirst(nodes));
    /* A link that (re)joined: the master may have forgotten our verdicts.
     * A link that went: they go on the probe connection from now on. */
    if (streaming != was_streaming) health_dirty = 1;
    was_streaming = streaming;
    if (!view_read || !hooks.leader()) return;
    /* Without the link, the master counts our verdicts only while we grant
     * it the lease (src/nickv_server.c, nickvHealthActive): they go with
     * the grants, on the master's probe connection. */
    if (!streaming && (master_lease != 1 || !master_clock || !m->conn || !m->connected)) return;
    list = sdsempty();
    joining = sdsempty();
    listRewind(nodes, &li);
    while ((ln = listNext(&li))) {
        probeNode *n = listNodeValue(ln);
        /* Unlisted ones too: the master counts only those connected to it,
         * and one that connected since its list was read (a replica just
         * repointed here by a failover) then counts at once, not at the
         * next read, a second later. */
        if (n->is_master || !n->valid || n->checking) continue;
        /* The master, as the replica it was before a promotion. */
        if (n->port == m->port && (!strcmp(n->ip, m->ip) || !strcmp(n->reach, m->reach))) continue;
        if (!addrSendable(n->ip) || nvalid == NICKV_HEALTH_MAX) {
            /* Left out, it does not count: the safe side. */
            if (!n->warned)
                nkLog(LL_WARNING, "Probe: replica %s:%d cannot be named to the master (%s): "
                      "it does not count for min-slaves", n->ip, n->port,
                      nvalid == NICKV_HEALTH_MAX ? "too many replicas" : "unusual address");
            n->warned = 1;
            continue;
        }
        /* With a coordinator, once the record in etcd lists it: a leader
         * after us hears it before promoting (nickv_coord.c, 5.). A node
         * that is no member is never named: the master then counts it for
         * neither min-slaves nor WAIT (nickv_member.c). */
        if (!hooks.may_name(n->ip, n->port) || !nkMember(n->reach, n->port)) continue;
        list = sdscatprintf(list, " %s %d", n->ip, n->port);
        n->named_ms = nowMs();
        nvalid++;
        /* Just repointed here by a failover: it counts before its PSYNC
         * is done (nickv_proto.h, NICKV_JOINING_MS). */
        if (hooks.joining(n->reach, n->port)) {
            joining = sdscatprintf(joining, " %s %d", n->ip, n->port);
            njoining++;
        }
    }
    msg = nickvMsgHealth(nk.cfg.min_slaves, nvalid, list, njoining, joining);
    sdsfree(list);
    sdsfree(joining);
    if (!health_dirty && last_health && !strcmp(msg, last_health) &&
        now - health_sent_us < NICKV_HEARTBEAT_MS * 1000LL) {
        sdsfree(msg);
        return;
    }
    if (streaming) nkLinkMessage("%s", msg);
    else if (nkProbeCommand(m->ip, m->port, NULL, 0, "REPLCONF", NICKV_REPLCONF, msg, NULL) == -1) {
        sdsfree(msg);
        return;
    }
    health_messages++;
    health_sent_us = now;
    health_dirty = 0;
    sdsfree(last_health);
    last_health = msg;
}

/* ----------------------------------------------------------------- Tick --- */

static void nodeTick(probeNode *n, long long now) {
    long long wait_us = nk.cfg.waiting_time * 1000LL;
    /* The master's watch: with the leader's grants, as the probe's. */
    if (n->is_master && hooks.leader()) {
        int may_grant = master_identified && !master_restarted && hooks.granting();
        long long lease_ms = may_grant ? hooks.lease_time() : 0;
        if (nkWatchTick(now, may_grant, lease_ms)) hooks.granted(lease_ms);
    }
    if (!n->conn) {
        probeConnect(n);
    } else if (n->connected && n->qlen == 0 && now - n->ping_us >= nk.cfg.probe_interval * 1000LL) {
        /* The master's PING renews its lease (a query only, once a
         * failover began): its answer says which process it is. */
        /* With a coordinator only the leader speaks the lease: a standby
         * PINGs the master like any node (nickv_coord.c). */
        probeSend(n, n->is_master && hooks.leader() && probeTrusted(n) ? PROBE_LEASE : PROBE_PING);
        /* The master's INFO once a second; every time until it is read
         * (a master we just moved to: see probeReadView). */
        if (n->is_master && (now >= next_info_us || (!view_read && !view_err[0]))) {
            probeSend(n, PROBE_INFO);
            next_info_us = now + NK_PROBE_INFO_US;
        }
    }
    if (!n->waiting_since_us || now - n->waiting_since_us < wait_us) {
        n->busy = 0;
        return;
    }
    if (n->valid) {
        char why[320];
        long long busy = 0;
        const char *what = "";
        /* Silent, but its watch thread answered lately that the main
         * thread is busy: alive, for busy-limit at most (nickv_watch.c). */
        long long silent_ms = (now - n->waiting_since_us) / 1000;
        /* Busy for as long as it has been silent, give or take a probe
         * interval: a main thread that keeps turning (a few ms busy at a
         * time) but does not answer is not busy, it is stuck. */
        if (n->is_master && nk.cfg.busy_limit > 0 && nkWatchBusy(now, wait_us, &busy, &what) && busy > 0 &&
            busy + nk.cfg.probe_interval >= silent_ms) {
            if (busy < nk.cfg.busy_limit) {
                if (!n->busy) {
                    nkLog(LL_NOTICE, "Probe: the master %s:%d does not answer for %lld ms, but it is busy "
                          "(%lld ms in %s), not dead: not failed over before busy-limit (%d ms)", n->ip,
                          n->port, (now - n->waiting_since_us) / 1000, busy, what, nk.cfg.busy_limit);
                    nkWatchCountBusy();
                }
                n->busy = 1;
                return;
            }
            snprintf(why, sizeof(why), "busy for %lld ms in %s: more than busy-limit (%d ms)", busy, what,
                     nk.cfg.busy_limit);
        } else {
            snprintf(why, sizeof(why), "no answer for %lld ms%s%s%s", (now - n->waiting_since_us) / 1000,
                     n->conn_err[0] ? " (cannot connect: " : "", n->conn_err, n->conn_err[0] ? ")" : "");
        }
        n->busy = 0;
        probeInvalid(n, why);
    }
    /* A connection silent this long may be dead without a reset (a cut
     * cable, a partition): try a new one. The wait goes on. */
    if (now - n->waiting_since_us >= 4 * wait_us + 1000000LL &&
        now - n->connect_us >= 4 * wait_us + 1000000LL) {
        long long since = n->waiting_since_us;
        probeConnect(n);
        n->waiting_since_us = since;
    }
}

/* Also after a verdict changed: the master hears of it at once. */
void nkProbeAfterEvents(void) {
    if (nodes && (health_dirty || nkLinkDaemon() != was_streaming)) healthSend();
    /* A failover moves on at once when a verdict or a reply came. */
    if (nodes && failover_kick) {
        failover_kick = 0;
        hooks.changed();
    }
}

static int probeTick(aeEventLoop *el, long long id, void *data) {
    listIter li;
    listNode *ln;
    long long now = getMonotonicUs();
    (void)el; (void)id; (void)data;
    if (nk.shutdown_asap) return AE_NOMORE;
    nodesRefresh();
    streamSeen(nkBacklogLastPub());
    listRewind(nodes, &li);
    while ((ln = listNext(&li))) nodeTick(listNodeValue(ln), now);
    healthSend();
    /* A verdict this round changed: hooks.changed before the loop sleeps
     * (nkProbeAfterEvents). The failover ticks on a timer of its own. */
    /* At least every NICKV_CRON_MS, so that CONFIG SET probe-interval and
     * waiting-time take effect at once; each node is PINGed at its own
     * interval (nodeTick). */
    return nk.cfg.probe_interval < NICKV_CRON_MS ? nk.cfg.probe_interval : NICKV_CRON_MS;
}

void nkProbeStart(const char *host, int port, const nkProbeHooks *h) {
    hooks = *h;
    nodes = listCreate();
    nkWatchOnWant(probeWant);
    nodeAdd(host, port, 1);
    next_info_us = getMonotonicUs();
    aeCreateTimeEvent(nk.el, 1, probeTick, NULL, NULL);
}

/* ----------------------------------------------------------------- INFO --- */

sds nkProbeInfo(sds s) {
    listIter li;
    listNode *ln;
    int valid = 0, invalid = 0, i = 0;
    long long now = nowMs();
    listRewind(nodes, &li);
    while ((ln = listNext(&li))) {
        probeNode *n = listNodeValue(ln);
        if (n->is_master || !n->listed) continue;
        if (n->valid) valid++; else invalid++;
    }
    s = sdscatprintf(s,
        "# Failover\r\n"
        "probe_interval:%d\r\n"
        "waiting_time:%d\r\n"
        "min_slaves:%d\r\n"
        "replica_view:%s%s\r\n"
        "valid_replicas:%d\r\n"
        "invalid_replicas:%d\r\n"
        "health_messages:%lld\r\n"
        "probe_errors:%lld\r\n"
        "probe_master_moves:%lld\r\n"
        "replication_loop:%s\r\n",
        nk.cfg.probe_interval, nk.cfg.waiting_time, nk.cfg.min_slaves,
        view_err[0] ? "error: " : (view_read ? "ok" : "pending"), view_err,
        valid, invalid, health_messages, probe_errors, master_moves, loop.logged ? loop.desc : "");
    if (listLength(nodes)) {
        probeNode *m = listNodeValue(listFirst(nodes));
        s = sdscatprintf(s, "master_verdict:%s\r\n", !m->valid ? "invalid" : (m->busy ? "busy" : "answers"));
    }
    s = nkWatchInfo(s);
    s = sdscatprintf(s, "wait_grants:%lld\r\nwait_confirms:%lld\r\nprobe_master_infos:%lld\r\n", want_grants,
                     want_confirms, master_infos);
    listRewind(nodes, &li);
    while ((ln = listNext(&li))) {
        probeNode *n = listNodeValue(ln);
        s = sdscatprintf(s,
            "node%d:addr=%s:%d,role=%s,via=%s,flags=%s,member=%s,since_ms=%lld,rtt_us=%lld,max_rtt_us=%lld,"
            "probes=%lld,answers=%lld,run_id=%s%s%s\r\n",
            i++, n->ip, n->port, nodeRole(n), n->is_master ? "" : (n->behind ? "nickv" : "direct"),
            !n->listed ? "unlisted" : (n->valid ? "ok" : "invalid"),
            nkMember(n->reach, n->port) ? "yes" : "no", now - n->state_ms,
            n->rtt_us, n->max_rtt_us, n->probes, n->answers, n->is_master ? master_runid : n->runid,
            n->valid ? "" : ",why=", n->valid ? "" : n->why);
    }
    return sdscat(s, "\r\n");
}

static void nodeView(const probeNode *n, nkProbeView *v, long long now_us) {
    v->addr = n->ip;
    v->reach = n->reach;
    v->port = n->port;
    v->is_master = n->is_master;
    v->listed = n->listed;
    v->checking = n->checking;
    v->valid = n->valid;
    v->behind = n->behind;
    v->connected = n->connected;
    v->since_ms = nowMs() - n->state_ms;
    v->invalid_ms_ago = n->invalid_ms ? nowMs() - n->invalid_ms : -1;
    v->unlisted_ms_ago = !n->listed && n->unlisted_ms ? nowMs() - n->unlisted_ms : -1;
    v->named_ms_ago = n->named_ms ? nowMs() - n->named_ms : -1;
    v->refused = !n->valid && strstr(n->why, "connection refused") != NULL;
    v->answered_ms_ago = n->answered_us ? (now_us - n->answered_us) / 1000 : -1;
    v->rtt_us = n->rtt_us;
    v->why = n->why;
}

int nkProbeNodes(nkProbeView *v, int max) {
    listIter li;
    listNode *ln;
    int i = 0;
    long long now = getMonotonicUs();
    if (!nodes) return 0;
    listRewind(nodes, &li);
    while ((ln = listNext(&li)) && i < max) {
        probeNode *n = listNodeValue(ln);
        if (!n->checking) nodeView(n, &v[i++], now);
    }
    return i;
}

void nkProbeResetStats(void) {
    listIter li;
    listNode *ln;
    health_messages = 0;
    probe_errors = 0;
    master_moves = 0;
    nkWatchResetStats();
    want_grants = want_confirms = master_infos = 0;
    if (!nodes) return;
    listRewind(nodes, &li);
    while ((ln = listNext(&li))) {
        probeNode *n = listNodeValue(ln);
        n->probes = n->answers = n->max_rtt_us = 0;
    }
}

/* ------------------------------------------------------- For failover --- */

int nkProbeCommand(const char *ip, int port, nkProbeReplyFn fn, long long tag, const char *first, ...) {
    probeNode *n = nodeFind(ip, port, 0);
    va_list ap;
    sds cmd;
    if (!n) {
        probeNode *m = listNodeValue(listFirst(nodes));
        if (m->port == port && !strcmp(m->ip, ip)) n = m;
    }
    if (!n || !n->conn || !n->connected || n->qlen + 2 > NK_PROBE_QUEUE) return -1;
    /* Commands, and the password before them, go to members only. */
    if (!probeTrusted(n)) return -1;
    /* A replica's probe sends no password (see the top): one we command
     * needs it, as the master's probe does. */
    if (!n->is_master && !n->authed && nk.cfg.masterauth) probeSend(n, PROBE_AUTH);
    n->authed = 1;
    va_start(ap, first);
    cmd = nkCatCommandV(sdsempty(), first, ap);
    va_end(ap);
    probeSendCmd(n, PROBE_CMD, cmd, fn, tag);
    sdsfree(cmd);
    return 0;
}

int nkProbeFind(const char *ip, int port, nkProbeView *v) {
    listIter li;
    listNode *ln;
    listRewind(nodes, &li);
    while ((ln = listNext(&li))) {
        probeNode *n = listNodeValue(ln);
        if (n->port != port || strcmp(n->ip, ip)) continue;
        nodeView(n, v, getMonotonicUs());
        return 1;
    }
    return 0;
}

/* A member the failover only looks at (strays, nickv_repoint.c): probed,
 * and asked through nkProbeCommand, but no replica to anyone until the
 * master lists it. Kept (watched) from then on. */
void nkProbeCheck(const char *ip, int port) {
    if (!nodes || nodeFind(ip, port, 0)) return;
    add_quietly = 1;
    probeNode *n = nodeAdd(ip, port, 0);
    add_quietly = 0;
    n->listed = 0;
    n->unlisted_ms = nowMs();
    n->checking = 1;
    n->watched = 1;
}

void nkProbeWatch(const char *ip, int port, int on) {
    probeNode *n;
    if (!nodes) return;         /* before nkProbeStart: the failover retries */
    n = nodeFind(ip, port, 0);
    if (!n && on) {
        n = nodeAdd(ip, port, 0);
        n->listed = 0;
        n->unlisted_ms = nowMs();
        /* Not heard from since it was demoted: it is invalid until it
         * answers (a demoted master is assumed down). */
        n->valid = 0;
        snprintf(n->why, sizeof(n->why), "demoted: not heard from since");
    }
    if (n) n->watched = on;
}

void nkProbeDropMasterConn(void) {
    if (!nodes || !listLength(nodes)) return;
    probeNode *m = listNodeValue(listFirst(nodes));
    if (m->is_master && m->conn) probeConnect(m);
}

/* Leadership won: the lease now, not at the next probe interval (up to
 * 100 ms of a handover's pause). A query when we have no clock of the
 * master's yet: its answer is granted at once (leaseAnswer). */
void nkProbeLeaseNow(void) {
    if (!nodes || !listLength(nodes)) return;
    /* Our verdicts too, once the master takes the grant (it counts only
     * its grantor's): after the grant on the same connection, not at the
     * next probe tick (up to 100 ms of WAIT with none to count). */
    health_dirty = 1;
    probeNode *m = listNodeValue(listFirst(nodes));
    if (!m->is_master || !m->conn || !m->connected || !hooks.leader() || !probeTrusted(m) ||
        m->qlen + 1 >= NK_PROBE_QUEUE)
        return;
    probeSend(m, PROBE_LEASE);
}

void nkProbeFollowMaster(const char *ip, int port) {
    nodeRetarget(listNodeValue(listFirst(nodes)), ip, port);
}

void nkProbeRetargetMaster(const char *ip, int port) {
    probeNode *m = listNodeValue(listFirst(nodes));
    loopEnd(NULL);
    nodeRetarget(m, ip, port);
    probeConnect(m);            /* it needs a lease: now, not at the next tick */
}

int nkProbeMasterLease(void) {
    return master_lease;
}

/* The master answered a grant of ours on this connection: with nickv-lease
 * yes it serves from then on, a replica's handshake (its PING) included. */
int nkProbeMasterServes(void) {
    return master_serves;
}

void nkProbeRememberMaster(const char *runid, const char *replid, long long offset) {
    /* The process we last granted to: another one answering is vetted,
     * even right after our own restart. */
    if (runid && strlen(runid) == NK_RUNID_SIZE && !master_runid[0])
        memcpy(master_runid, runid, sizeof(master_runid));
    if (replid && strlen(replid) == NK_RUNID_SIZE) {
        memcpy(known_replid, replid, sizeof(known_replid));
        known_offset = offset;
    }
}

/* The process the probes last found at ip:port, a replica ("" if none
 * known: it requires a password, or never answered). */
const char *nkProbeRunid(const char *ip, int port) {
    probeNode *n = nodeFind(ip, port, 0);
    return n ? n->runid : "";
}

/* The most the master's stream is known to hold: the end of the stream we
 * received, or more if the master said it went further (a direct replica
 * may be ahead of our link); 0: neither seen since we started. *at_us: when
 * that was last seen to grow; *rate: the fastest it grew lately, in bytes
 * a second (over successive samples of the last NK_STREAM_RATE_MS). */
long long nkProbeStreamBound(long long *at_us, long long *rate) {
    long long last = nkBacklogLastPub(), now = getMonotonicUs(), peak = 0;
    for (int i = 0; i < NK_STREAM_SAMPLES; i++) {
        int j = (i + 1) % NK_STREAM_SAMPLES;
        long long dt = stream_samples[j].us - stream_samples[i].us;
        if (!stream_samples[i].us || dt <= 0 || now - stream_samples[i].us > NK_STREAM_RATE_MS * 1000LL)
            continue;
        long long r = (long long)((double)(stream_samples[j].offset - stream_samples[i].offset) * 1e6 / (double)dt);
        if (r > peak) peak = r;
    }
    if (at_us) *at_us = last > master_offset_seen ? now : stream_seen_us;
    if (rate) *rate = peak;
    return last > master_offset_seen ? last : master_offset_seen;
}

/* How far an SKV master with nickv-lease yes may have acknowledged its
 * stream to WAIT: through a direct replica, as far as we told it we hold
 * (our link's ACKs and backlog reports) or as far as a lease answer said
 * whose clock a grant of ours echoed (src/nickv_server.c,
 * nickvDirectAckCounts); through a replica behind us, as far as the ACKs
 * we relayed (counted as they are). Not our backlog's end: it may end in
 * the middle of a command no replica applied. Bytes a replica holds past
 * this were never acknowledged. 0: nothing known. */
long long nkProbeAckBound(void) {
    long long reported = nkLinkReportedOffset();
    return granted_offset > reported ? granted_offset : reported;
}

const char *nkProbeMasterRunid(void) {
    return master_runid;
}

void nkProbeRemember(int lease, const char *ip, int port) {
    if (lease >= 0 && master_lease < 0) master_lease = lease;
    if (!ip || nodeFind(ip, port, 0)) return;
    probeNode *n = nodeAdd(ip, port, 0);
    n->remembered = 1;
    n->listed = 1;
}

int nkProbeMasterRdmaPort(void) {
    return master_rdma_port;
}

int nkProbeMasterCluster(void) {
    return master_cluster;
}

/* The master refused our last lease because another Nic-KV may hold it
 * (leaseForeign): it is not ours to fail over. */
int nkProbeLeaseForeign(void) {
    return lease_err[0] && lease_foreign;
}

int nkProbeLeaseHeldByIdle(void) {
    return nkProbeLeaseForeign() && lease_other && foreign_since_us &&
           lease_zero_us > foreign_since_us && lease_zero_us > lease_busy_us;
}

const char *nkProbeLeaseError(void) {
    return lease_err;
}
