/* nickv_repoint.c -- after a failover, the other nodes are made replicas
 * of the new master.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * After the promotion every other replica, and the old master once it
 * answers, get REPLICAOF <new master> and CONFIG REWRITE (so that a
 * restart keeps the new topology); the old master also CLIENT KILL TYPE
 * NORMAL, so that its clients look for the master again. A node that does
 * not answer stays on that list (INFO failover: repointN) until it does.
 *
 * The list (F.repoint[], nickv_failover_int.h) is filled by the failover
 * (foPromoted, nickv_failover.c) and by the state file at start
 * (nickv_state.c), which records it; repointTick, every tick, works
 * through it. A node repointed is kept out of the candidates for
 * NK_FAILOVER_COOLDOWN_MS if it was the old master (no ping-pong).
 *
 * The list is the leader's own (and its state file's): a node that was
 * down when the failover ran, and comes back after leadership moved to
 * another Nic-KV, is on no leader's list. So the leader also looks, every
 * NK_STRAY_CHECK_MS, for strays (strayTick): members the master has not
 * listed as replicas for NK_STRAY_UNLISTED_MS (probed as no replica of
 * anyone's: nkProbeCheck) that answer, and are provably this shard's and
 * astray (strayVerdict): a master in the master's history or empty (a node
 * restarted without its data), or a replica, in that history, of one of
 * the master's listed replicas (a restarted node whose configuration
 * names an old master). Such a node serves nothing (a master without a
 * lease) or counts for nothing (a replica of a replica): it goes on the
 * list. Not the master at another address (its run id), nor a master of
 * another history never listed here (a node line naming another shard's
 * node would have it wiped: logged, left alone), nor anything while the
 * master's run id or history is unknown, nor with failover no.
 */

#include "nickv_failover_int.h"
#include "nickv_info.h"
#include "nickv_member.h"
#include "nickv_probe.h"
#include "nickv_cluster.h"
#include "nickv_resolve.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ Repoint --- */

void repointAdd(const char *ip, int port, int old_master) {
    for (int i = 0; i < F.nrepoint; i++)
        if (F.repoint[i].node.port == port && !strcmp(F.repoint[i].node.reach, ip)) {
            F.repoint[i].old_master |= old_master;
            return;
        }
    if (F.nrepoint == NK_FO_REPOINT) {
        nkLog(LL_WARNING, "Failover: too many nodes to repoint: %s:%d must be made a replica of "
              "the master by hand", ip, port);
        return;
    }
    foRepoint *r = &F.repoint[F.nrepoint++];
    memset(r, 0, sizeof(*r));
    snprintf(r->node.ip, sizeof(r->node.ip), "%s", ip);
    snprintf(r->node.reach, sizeof(r->node.reach), "%s", ip);
    r->node.port = port;
    r->old_master = old_master;
    r->rdma = -1;
    r->since_ms = foNowMs();
    nkProbeWatch(ip, port, 1);
}

void repointRemove(const char *ip, int port) {
    for (int i = 0; i < F.nrepoint; i++)
        if (F.repoint[i].node.port == port && !strcmp(F.repoint[i].node.reach, ip)) {
            nkProbeWatch(F.repoint[i].node.ip, port, 0);
            F.repoint[i] = F.repoint[--F.nrepoint];
            return;
        }
}

static void repointDone(int i) {
    foRepoint *r = &F.repoint[i];
    nkLog(LL_NOTICE, "Failover: %s:%d is now a replica of %s:%d", r->node.reach, r->node.port,
          F.master.reach, F.master.port);
    if (r->old_master && F.ncooldown < NK_FO_REPOINT) {
        memcpy(F.cooldown[F.ncooldown].ip, r->node.reach, NK_ADDR_LEN);
        F.cooldown[F.ncooldown].port = r->node.port;
        F.cooldown[F.ncooldown].until_ms = foNowMs() + NK_FAILOVER_COOLDOWN_MS;
        F.ncooldown++;
    }
    nkProbeWatch(r->node.ip, r->node.port, 0);
    F.repoint[i] = F.repoint[--F.nrepoint];
    stateSave();
}

/* The reply to a repointed node's REPLICAOF (the tag: its port; the
 * commands after it are fire and forget). */
static void repointReply(long long tag, const char *ip, int port, const char *reply, size_t len,
                         int is_error) {
    for (int i = 0; i < F.nrepoint; i++) {
        foRepoint *r = &F.repoint[i];
        if (r->node.port != port || strcmp(r->node.ip, ip)) continue;
        r->pending = 0;
        /* To an earlier master: repointTick sends it the current one. */
        if (tag != F.epoch) return;
        if (is_error) {
            /* Again a second later; said once per error. */
            char err[sizeof(r->last_err)];
            snprintf(err, sizeof(err), "%.*s", (int)len, reply);
            if (strcmp(err, r->last_err))
                nkLog(LL_WARNING, "Failover: REPLICAOF %s %d on %s:%d: %s (retrying every second)",
                      F.master.reach, F.master.port, ip, port, err);
            memcpy(r->last_err, err, sizeof(r->last_err));
            r->retry_after_us = foNowUs() + 1000000LL;
        } else
            repointDone(i);
        return;
    }
}

void logReply(long long tag, const char *ip, int port, const char *reply, size_t len,
              int is_error) {
    (void)tag;
    /* A node that answers errors is asked again every second. */
    if (is_error) nkLogRepeat(LL_WARNING, NULL, "Failover: a command on %s:%d: %.*s", ip, port, (int)len, reply);
}

/* runid is the master's process (as far as we know it): the master known
 * at another address. */
int isMasterProcess(const char *runid) {
    const char *m = F.master_runid[0] ? F.master_runid : nkProbeMasterRunid();
    return runid[0] && !strcmp(runid, m);
}

/* A node to repoint said (INFO server rdma) which process it is and
 * whether it replicates over RDMA: an RDMA replica's REPLICAOF names the
 * master's RDMA port. A node that is not SKV has no rdma section: TCP. The
 * same process can be known at two addresses (a replica that reaches the
 * master by one and Nic-KV by another: the master lists one, Nic-KV's
 * replicas the other): if it is the master's, the master was promoted
 * under its other address, and it must not be made a replica of itself. */
static void rdmaModeReply(long long tag, const char *ip, int port, const char *reply, size_t len,
                          int is_error) {
    (void)tag;                  /* the node's mode, whichever master it was asked for */
    for (int i = 0; i < F.nrepoint; i++) {
        foRepoint *r = &F.repoint[i];
        if (r->node.port != port || strcmp(r->node.ip, ip)) continue;
        r->pending = 0;
        if (is_error) {
            r->retry_after_us = foNowUs() + 1000000LL;
            return;
        }
        nkInfo in;
        nkInfoParse(reply, len, &in);
        r->rdma = in.rdma_replication;
        r->is_master = isMasterProcess(in.runid);
        /* A cluster node: the cluster says whose replica it is (and
         * refuses REPLICAOF): off the list. */
        r->cluster = in.cluster == 1;
        if (r->cluster) nkClusterMode(1, "a node to repoint");
        return;
    }
}

/* The port an RDMA replica of the master connects to: its RDMA listener's,
 * as the master's INFO said when we promoted it, else as the probes read it
 * since (0: none known). */
static int masterRdmaPort(void) {
    return F.master_rdma_port ? F.master_rdma_port : nkProbeMasterRdmaPort();
}

static void repointError(foRepoint *r, const char *err) {
    if (strcmp(err, r->last_err))
        nkLog(LL_WARNING, "Failover: %s:%d cannot be made a replica of %s:%d yet: %s (retrying every second)",
              r->node.reach, r->node.port, F.master.reach, F.master.port, err);
    snprintf(r->last_err, sizeof(r->last_err), "%s", err);
    r->retry_after_us = foNowUs() + 1000000LL;
    r->rdma = -1;               /* asked again: an operator may change it */
}

/* Nodes to repoint that answer get REPLICAOF the master (its RDMA port
 * for one with rdma-replication yes: INFO rdma first), CONFIG REWRITE,
 * and, for an old master, CLIENT KILL TYPE NORMAL. */
void repointTick(void) {
    char port[16];
    /* A master we just promoted serves nothing before our first grant, a
     * replica's PSYNC neither: a replica sent to it earlier gets
     * -NOMASTERLINK and tries again only a second later, and until then the
     * new master has no replica (WAIT answers 0, min-slaves refuses once
     * the joining window ends). So the replicas go once it took a grant
     * (two round trips after the promotion), or after NK_REPOINT_HOLD_MS
     * whatever happens (nickv-lease no, a grant refused). */
    if (F.promoted_us && !nkProbeMasterServes() && foNowUs() - F.promoted_us < NK_REPOINT_HOLD_MS * 1000LL)
        return;
    /* Nodes are sent to a member only (a master named by the record in
     * etcd, or the state file, that no node line names, nor etcd): they
     * would replicate from it. */
    if (!nkMember(F.master.reach, F.master.port)) return;
    for (int i = 0; i < F.nrepoint; i++) {
        foRepoint *r = &F.repoint[i];
        nkProbeView v;
        if (!nkProbeFind(r->node.ip, r->node.port, &v)) {
            nkProbeWatch(r->node.ip, r->node.port, 1);   /* read from the state file */
            continue;
        }
        if (r->pending || !v.valid || !v.connected) continue;
        /* Commands go to members only (nickv_member.c): one that is not
         * (yet: its Nic-KV registers it again, an operator adds its node
         * line) waits on the list, said once. */
        if (!nkMember(r->node.reach, r->node.port)) {
            repointError(r, "not a member (no node line names it, no Nic-KV registered it): it waits");
            continue;
        }
        if ((r->node.port == F.master.port && !strcmp(r->node.reach, F.master.reach)) || r->is_master) {
            /* It is the master again (promoted since), or the master's
             * process at another address: nothing to do. */
            if (r->is_master)
                nkLog(LL_NOTICE, "Failover: %s:%d is the master %s:%d itself (the same run_id), at "
                      "another address: not repointed", r->node.reach, r->node.port, F.master.reach,
                      F.master.port);
            nkProbeWatch(r->node.ip, r->node.port, 0);
            F.repoint[i--] = F.repoint[--F.nrepoint];
            stateSave();
            continue;
        }
        if (r->cluster) {
            nkLog(LL_NOTICE, "Failover: %s:%d is a cluster node (the cluster places its replicas): not "
                  "repointed", r->node.reach, r->node.port);
            nkProbeWatch(r->node.ip, r->node.port, 0);
            F.repoint[i--] = F.repoint[--F.nrepoint];
            stateSave();
            continue;
        }
        if (foNowUs() < r->retry_after_us) continue;
        if (r->rdma < 0) {
            if (nkProbeCommand(r->node.ip, r->node.port, rdmaModeReply, F.epoch, "INFO", "server", "rdma",
                               "replication", "cluster", NULL) == 0)
                r->pending = 1;
            continue;
        }
        int mport = F.master.port;
        if (r->rdma) {
            mport = masterRdmaPort();
            if (!mport) {
                repointError(r, "it replicates over RDMA (rdma-replication yes) and the master has no "
                             "RDMA listener (rdma-port)");
                continue;
            }
        }
        snprintf(port, sizeof(port), "%d", mport);
        if (nkProbeCommand(r->node.ip, r->node.port, repointReply, F.epoch, "REPLICAOF", F.master.reach, port, NULL) == -1)
            continue;
        r->pending = 1;
        nkProbeCommand(r->node.ip, r->node.port, logReply, 0, "CONFIG", "REWRITE", NULL);
        if (r->old_master)
            nkProbeCommand(r->node.ip, r->node.port, logReply, 0, "CLIENT", "KILL", "TYPE", "NORMAL", NULL);
        nkLogRepeat(LL_NOTICE, NULL, "Failover: making %s:%d a replica of %s:%d%s", r->node.reach,
                    r->node.port, F.master.reach, mport, r->rdma ? " (RDMA)" : "");
    }
}

/* ------------------------------------------------------------- Strays --- */

#define NK_STRAY_CHECK_MS 2000          /* the leader looks for strays this often */
#define NK_STRAY_UNLISTED_MS 5000       /* ... among members unlisted this long */
#define NK_STRAY_MAX 64

static long long stray_next_ms;
static int stray_leading;               /* strayTick's last word: we may act */

/* What a stray's INFO says; NULL: leave it alone. Only what is provably
 * this shard's and no replica of the master: the master's own process at
 * another address is not (its run id); a master is repointed when it is
 * empty, in the master's history, or was listed by this shard's master
 * before (known: it restarted with its data, under a history of its own),
 * else it may hold another shard's data (an operator's wrong node line) and
 * is left alone; a replica is repointed only when it follows one of the
 * master's listed replicas (a chain) in the master's history. */
static const char *strayVerdict(const nkInfo *in, int known, int *master) {
    const char *runid = nkProbeMasterRunid(), *hist = nkProbeMasterReplid();
    nkProbeView mv;
    if (in->bad[0] || in->cluster == 1 || !runid[0] || !hist[0] || !strcmp(in->runid, runid)) return NULL;
    *master = !strcmp(in->role, "master");
    if (*master) {
        if (known || in->master_repl_offset == 0 || !strcmp(in->replid, hist) || !strcmp(in->replid2, hist))
            return "is a master, not a replica of the master";
        return NULL;
    }
    if (strcmp(in->role, "slave") || !nkAddrNumeric(in->master_host) || strcmp(in->replid, hist) ||
        !nkProbeFind(in->master_host, in->master_port, &mv) || !mv.listed || mv.is_master)
        return NULL;
    return "replicates from a replica of the master";
}

static void strayReply(long long tag, const char *ip, int port, const char *reply, size_t len, int is_error) {
    nkInfo in;
    nkProbeView v;
    int master = 0;
    /* Asked for another master, no longer leading, or listed meanwhile. */
    if (!stray_leading || tag != F.epoch || is_error || F.state != FO_WATCHING) return;
    if (!nkProbeFind(ip, port, &v) || v.listed) return;
    nkInfoParse(reply, len, &in);
    const char *why = strayVerdict(&in, !v.checking, &master);
    if (!why) {
        if (!strcmp(in.role, "master") && strcmp(in.runid, nkProbeMasterRunid()))
            nkLogRepeat(LL_WARNING, NULL, "Failover: member %s:%d is a master with another history than the "
                        "master's (%s): not repointed (if it belongs to this shard: REPLICAOF by hand)",
                        ip, port, in.replid);
        return;
    }
    nkLog(LL_WARNING, "Failover: %s:%d %s %s:%d (down when the master moved?): it is made one", ip, port,
          why, F.master.reach, F.master.port);
    repointAdd(ip, port, master);
    stateSave();
}

void strayTick(int leading) {
    nkNodeAddr m[NK_STRAY_MAX];
    long long now = foNowMs();
    stray_leading = leading;
    if (!leading || now < stray_next_ms || nkClusterOn()) return;
    stray_next_ms = now + NK_STRAY_CHECK_MS;
    int n = nkMembers(m, NK_STRAY_MAX);
    for (int i = 0; i < n; i++) {
        nkProbeView v;
        int dup = 0, listed = 0;
        for (int j = 0; j < i && !dup; j++) dup = m[j].port == m[i].port && nkSameAddr(m[j].ip, m[i].ip);
        if (dup || (m[i].port == F.master.port && (nkSameAddr(m[i].ip, F.master.reach) ||
                                                    nkSameAddr(m[i].ip, F.master.ip))))
            continue;
        for (int j = 0; j < F.nrepoint && !listed; j++)
            listed = F.repoint[j].node.port == m[i].port && nkSameAddr(F.repoint[j].node.reach, m[i].ip);
        if (listed) continue;
        if (!nkProbeFind(m[i].ip, m[i].port, &v)) {
            /* Never seen, or forgotten: probed from now on, as no replica. */
            nkProbeCheck(m[i].ip, m[i].port);
            continue;
        }
        if (v.listed || v.is_master || v.unlisted_ms_ago < NK_STRAY_UNLISTED_MS || !v.connected ||
            v.answered_ms_ago < 0 || v.answered_ms_ago > NK_STRAY_CHECK_MS)
            continue;
        nkProbeCommand(m[i].ip, m[i].port, strayReply, F.epoch, "INFO", "server", "replication", "cluster", NULL);
    }
}
