/* nickv_replica.h -- a replica's lifecycle, the replicas' list, their
 * stats; a client's state.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 */
#ifndef NICKV_REPLICA_H
#define NICKV_REPLICA_H

#include "nickv.h"
#include "nickv_client.h"

/* nickv_replica.c: a replica's lifecycle (see the diagram at its top), the
 * replicas' list, which it owns, and their stats. */
void nkReplicaInit(void);
void nkReplicaSetState(nkReplica *r, nkReplicaState to);
nkReplica *nkReplicaStart(nkConn *conn, const char *ip, int port, long long pos);
void nkReplicasDropAll(const char *why);
int nkReplicaDrop(void *replica, const char *why, int log);
void nkReplicasMainEvents(void);
void nkReplicasAnnounce(void);
unsigned long nkReplicaCount(void);
long long nkReplicaAcked(const char *ip, int port);
void nkReplicaIterInit(nkReplicaIter *it);
nkReplica *nkReplicaIterNext(nkReplicaIter *it);
sds nkReplicasInfo(sds s);
/* connected_slaves and slaveN lines of INFO's "Replication" section. */
sds nkReplicasReplicationInfo(sds s);
sds nkReplicaStatsInfo(sds s);
void nkReplicaResetStats(void);
/* A client's state (nkClientState, nickv_client.h) changes only here,
 * each move checked against the diagram at the top of nickv_replica.c. */
void nkClientSetState(nkClient *c, nkClientState to);
struct nkClient;
void nkPsyncCommand(struct nkClient *c, int argc, sds *argv);
/* Answer the PSYNCs waiting for the stream that can be answered now (the
 * stream reached them, the link went down, or they waited too long). */
void nkPsyncWaitersCheck(void);
/* A client's queue is sent and it is HANDOVER: it is freed, its connection
 * streams as a replica. */
void nkClientHandOver(struct nkClient *c);
/* A client is freed, in whatever state. */
void nkClientLeaving(struct nkClient *c);

#endif
