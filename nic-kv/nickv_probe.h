/* nickv_probe.h -- failure detection: probes of the master and replicas,
 * min-slaves.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 */
#ifndef NICKV_PROBE_H
#define NICKV_PROBE_H

#include "nickv.h"

/* nickv_probe.c: failure detection (probes of every node), min-slaves.
 * A lower layer: what it must tell the one above (the failover, which
 * owns where the master is) goes through these hooks, given at start. */
typedef struct nkProbeHooks {
    /* The master's probe node answers as a master at ip:port (its RDMA
     * listener at rdma_port, 0: none), holding our lease if it needs one. */
    void (*master_serves)(const char *ip, int port, int rdma_port);
    /* The master ip:port says it is a replica of to_ip:to_port (no loop):
     * the owner moves the probe there (nkProbeFollowMaster: 1), or not (0). */
    int (*master_follows)(const char *ip, int port, const char *to_ip, int to_port);
    /* May the master's probe grant a lease now? For how long (ms), and
     * one of ms was sent now. */
    int (*granting)(void);
    /* Not granting, but confirming what the master's stream reached for
     * its WAITs ("lease <t> 0"): a leader handing over (nkCoordResigning). */
    int (*confirming)(void);
    long long (*lease_time)(void);
    void (*granted)(long long ms);
    /* A verdict changed or a reply came: decide now, not at the next tick. */
    void (*changed)(void);
    /* The coordinator's word (nickv_coord.c): this Nic-KV leads (its
     * probes grant the lease and tell the master the replicas' health);
     * there is a coordinator; ip:port may be named valid to the master. */
    int (*leader)(void);
    int (*coordinated)(void);
    int (*may_name)(const char *ip, int port);
    /* reach:port is a replica our last promotion repointed, named joining
     * to the master (nkFailoverJoining). */
    int (*joining)(const char *reach, int port);
    /* Sentinel's events about a node (+sdown, +odown, +slave ...), in
     * nkSentinelEvent's words. */
    void (*event)(const char *event, int is_master, const char *ip, int port, const char *master_ip,
                  int master_port, const char *extra);
    /* The replicas streaming from us (nkReplicaIterInit, nkReplicaIterNext). */
    void (*replicas_init)(struct nkReplicaIter *it);
    struct nkReplica *(*replicas_next)(struct nkReplicaIter *it);
} nkProbeHooks;
void nkProbeStart(const char *host, int port, const nkProbeHooks *hooks);

/* A verdict changed in an event handler: tell the master before sleeping. */
void nkProbeAfterEvents(void);
sds nkProbeInfo(sds s);
void nkProbeResetStats(void);
/* The nodes as the probes see them, the master first (at most max). The
 * strings stay valid until the event loop runs again. */
typedef struct nkProbeView {
    const char *addr;
    const char *reach;           /* where Nic-KV connects to it */
    int port;
    int is_master, listed, valid, behind, connected;
    int checking;                /* known by nkProbeCheck only: never listed */
    const char *why;             /* why it is invalid */
    long long since_ms;          /* in its state (valid or not) */
    long long invalid_ms_ago;    /* last invalid (until then), -1: never */
    long long unlisted_ms_ago;   /* no longer listed since, -1: listed (or never) */
    long long named_ms_ago;      /* last named valid to the master, -1: never */
    int refused;                 /* invalid because its port refuses: no process */
    long long answered_ms_ago;   /* -1: never answered */
    long long rtt_us;
} nkProbeView;
int nkProbeNodes(nkProbeView *v, int max);
/* The node at ip:port (a replica's, else the master's): 0 if none. */
int nkProbeFind(const char *ip, int port, nkProbeView *v);
/* Send a command (first, then arguments up to a NULL) on the node's probe
 * connection, authenticating first: fn gets its reply (a status, error,
 * integer or bulk string; no arrays), or "connection lost". -1: no such
 * node, not connected, or too much in flight: try again later. */
typedef void (*nkProbeReplyFn)(long long tag, const char *ip, int port, const char *reply,
                               size_t len, int is_error);
int nkProbeCommand(const char *ip, int port, nkProbeReplyFn fn, long long tag,
                   const char *first, ...) __attribute__((sentinel));
/* Keep probing ip:port while it is listed by no master (a demoted one). */
void nkProbeWatch(const char *ip, int port, int on);
/* Probe ip:port, a member that may be a stray, without it counting as a
 * replica anywhere (nkProbeNodes leaves it out) until the master lists it. */
void nkProbeCheck(const char *ip, int port);
/* The master is now ip:port (our failover, the coordinator's record):
 * probe it, read its INFO, grant at once. */
void nkProbeRetargetMaster(const char *ip, int port);
/* After +switch-master to ip:port: +slave for every replica the probes
 * know (the old master among them) as a replica of the new master, and
 * +sdown for those that do not answer, as Sentinel announces its replicas
 * again when its master moves. */
void nkProbeAnnounceReplicas(const char *ip, int port);
/* The master's probe follows where the master said it replicates from
 * (master_follows); a loop the probe saw stays held. */
void nkProbeFollowMaster(const char *ip, int port);
/* The master's nickv-lease, from its INFO: 1, 0, -1 unknown. */
int nkProbeMasterLease(void);
int nkProbeMasterServes(void);
/* What the state file remembers: the master's nickv-lease (-1: not
 * known), and a replica (ip NULL: none), until the master says itself. */
void nkProbeRemember(int lease, const char *ip, int port);
/* ... and the master's process (run id) and our stream (replid, offset):
 * another process answering at start is vetted against them. */
void nkProbeRememberMaster(const char *runid, const char *replid, long long offset);
const char *nkProbeMasterRunid(void);
/* The most the master's stream is known to hold (its INFO and lease
 * answers, our own stream's end; 0 if nothing was seen since we started),
 * when that last grew, and the fastest it grew lately (bytes/s). */
long long nkProbeStreamBound(long long *at_us, long long *rate);
long long nkProbeAckBound(void);
/* A replica's process as the probes learnt it while it was listed ("" if
 * not known: it requires a password, or never answered). */
const char *nkProbeRunid(const char *ip, int port);
/* The master's cluster mode as its INFO cluster says: 1, 0, -1 unknown. */
int nkProbeMasterCluster(void);
/* The master's RDMA port, as its last INFO rdma said (0: no listener). */
int nkProbeMasterRdmaPort(void);
/* Why the master refused our last lease ("" if it did not). */
const char *nkProbeLeaseError(void);
/* ... because another Nic-KV may hold its lease: never fail it over. */
int nkProbeLeaseForeign(void);
/* ... that refusal was "another Nic-KV (client id N) grants", and an INFO
 * of the master read since says its lease has run out (nickv_lease_left_ms
 * 0): whoever holds its grantor's place no longer grants. */
int nkProbeLeaseHeldByIdle(void);
/* The master's replication id as its INFO last said ("" if never read). */
const char *nkProbeMasterReplid(void);
/* Close the master's probe connection (it may hold the master's grantor
 * place: another leader's turn). */
void nkProbeDropMasterConn(void);
/* Leadership won: a lease (or the query before it) to the master now. */
void nkProbeLeaseNow(void);

#endif
