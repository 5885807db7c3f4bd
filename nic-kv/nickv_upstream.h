/* nickv_upstream.h -- the link to the master.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 */
#ifndef NICKV_UPSTREAM_H
#define NICKV_UPSTREAM_H

#include "nickv.h"

/* nickv_upstream.c: the link to the master, which owns its state. */
void nkLinkInit(void);
/* The master the link follows (master-host/port at start). */
void nkLinkMaster(const char **host, int *port);
/* The master moved there (the probes saw it: nickv_probe.c): the link
 * goes to it at once, continuing the stream if it continues the history
 * (a promoted replica does). rdma_port: its RDMA port, 0 if none (used
 * only if master-rdma-port is set). */
void nkLinkFollow(const char *host, int port, int rdma_port);
/* Streaming from the master (PSYNCs can be served). */
int nkLinkStreaming(void);
int nkLinkDaemon(void);
/* The master's replication id, as our stream carries it. */
const char *nkLinkReplid(void);
long long nkLinkHistory(void);
/* Is (replid, offset) our stream's history: the master's id, or the one
 * before it up to where it changed (as a Redis master's replid2)? */
int nkLinkSameHistory(const char *replid, long long offset);
/* The most of the stream our reports to the master said we hold. */
long long nkLinkReportedOffset(void);
/* nic-kv --selftest-getack: the GETACK scan over every split (0: passed). */
int nkLinkSelftestGetack(void);
void nkLinkNoteReported(long long offset);
/* INFO's "Replication" section (alias "upstream"): the link's fields, no
 * closing blank line; last is the backlog's last offset. */
sds nkLinkInfo(sds s, long long last);
/* Called whenever the stream grew (main wires nkPsyncWaitersCheck in). */
void nkLinkOnStream(void (*fn)(void));
void nkLinkCron(void);
/* Leave the master for good (shutdown): close the link, never reconnect.
 * Called before the replicas are dropped, so that the master forgets us
 * before any of them comes back to it and cannot redirect one to us. */
void nkLinkShutdown(void);
/* Our ACK and backlog report to the master, every NICKV_HEARTBEAT_MS. */
void nkLinkHeartbeat(void);
/* Retry what the backlog could not take (called before sleeping). */
void nkLinkResume(void);
/* What the link needs of the layers above it (main wires nickv_replica.c,
 * nickv.c, nickv_coord.c and nickv_member.c in): how many replicas there
 * are, drop them all, tell the master about them; what the hello and the
 * heartbeat announce: our RDMA port, our free client slots; and whether
 * it may link to the master at host:port: this Nic-KV is the one that
 * fans out from it (nkCoordFanout), and it is a member, which may be sent
 * our credentials (nkMember). */
typedef struct nkLinkReplicaOps {
    unsigned long (*count)(void);
    void (*drop_all)(const char *why);
    void (*announce)(void);
    int (*rdma_port)(void);
    int (*slots_free)(void);
    int (*fanout)(const char *host, int port);
    int (*member)(const char *host, int port);
} nkLinkReplicaOps;
void nkLinkOnReplicas(const nkLinkReplicaOps *ops);
/* The link's stats (INFO "Stats" fields link_pin_*), and CONFIG RESETSTAT. */
sds nkLinkStatsInfo(sds s);
void nkLinkResetStats(void);
/* REPLCONF nickv <message> to an SKV master, the message formatted from fmt
 * and sent as one argument; dropped unless streaming. */
void nkLinkMessage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Open or close the link as nkCoordFanout says. */
void nkLinkFanoutCheck(void);
int nkLinkStreamedLately(void);

#endif
