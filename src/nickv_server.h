/* nickv_server.h -- the server's side of Nic-KV (replication offload).
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * The hooks upstream's replication code calls (patch "Nic-KV hooks"). The
 * protocol between master, Nic-KV and replicas is written down at the top
 * of nic-kv/nickv.c; the master's and the replica's parts of it live in
 * src/nickv_server.c.
 */
#ifndef SKV_NICKV_SERVER_H
#define SKV_NICKV_SERVER_H

#include "sds.h"

struct client;

/* nickv-offload: a master hands its SKV replicas to an attached Nic-KV,
 * a replica follows such a hand-off. */
extern int nickvOffload;
/* nickv-user: the only user whose clients may act as the Nic-KV daemon. */
extern char *nickvUser;

/* ------------------------------------------------------ Master side --- */

/* REPLCONF nickv "<message>" from a client (the daemon). Replies itself. */
void nickvReplconf(struct client *c, sds message);
/* REPLCONF capa <value> that upstream does not know. */
void nickvCapa(struct client *c, const char *value);
/* Before a PSYNC is served: 1 if the replica was redirected to Nic-KV (a
 * reply was sent and the client will be closed). */
int nickvMaybeRedirect(struct client *c, long long psync_offset);
/* The daemon's own link is a replica connection but not a replica. */
int nickvIsDaemon(struct client *c);
/* Replicas behind Nic-KV, for WAIT, min-replicas-to-write and INFO. */
int nickvCountAcksByOffset(long long offset);
/* With nickv-lease yes, a direct replica's acknowledgement of offset
 * counts for WAIT only once Nic-KV holds the stream that far too. */
int nickvDirectAckCounts(long long offset);
int nickvCountGoodReplicas(void);
long nickvReplicaCount(void);
/* Nic-KV's probes: a replica that does not answer them counts for neither
 * WAIT nor min-replicas-to-write; writes need Nic-KV's min-slaves valid
 * replicas (checkGoodReplicasStatus). */
int nickvReplicaInvalid(struct client *slave);
int nickvEnoughValidReplicas(void);
long nickvDaemonCount(void);
sds nickvInfoReplicas(sds info, int *slaveid);
/* Once a second (from replicationCron): hand-overs. */
void nickvMasterCron(void);
/* Every serverCron: the daemon's heartbeat, keepalive PINGs into an idle
 * stream (master); a silent link through Nic-KV (replica). */
void nickvCron(void);
/* Every write of the replication stream to a replica connection. */
void nickvCountReplicaWrite(void);

/* nickv-lease: a master serves data only while Nic-KV grants it a lease
 * (src/nickv_lease.c). */
extern int nickvLease;
/* processCommand(): 1 if the command was refused for want of a lease. */
int nickvLeaseRefuses(struct client *c, int is_write, int is_denystale);
long long nickvLeaseConfirmedOffset(void);
void nickvLeaseWant(void);
/* 1 while this node may write as a master (always with nickv-lease no). */
int nickvLeaseHeld(void);
int nickvLeaseActive(void);
/* How long the lease held runs on (0: none). */
long long nickvLeaseLeftMs(void);
/* The config rows' apply function (CONFIG SET of nickv-lease and
 * nickv-user) and its start-up check (exits on a bad combination). */
int nickvLeaseConfigApply(const char **err);
void nickvCheckConfig(void);
void nickvLeaseGrant(struct client *c, int argc, sds *argv, int bound);
sds nickvLeaseInfo(sds info);
void nickvLeaseResetStats(void);
/* From the watch thread (src/nickv_watch.c): prolong a lease that runs to
 * t + ms; what is left of it at now. */
void nickvLeaseProlong(long long t, long long ms);
long long nickvLeaseLeftMsAt(long long now);

/* nickv-watch-port: a master's side thread answers Nic-KV's watch with the
 * main thread's state (src/nickv_watch.c). -1: none, 0: a port the kernel
 * picks. */
extern int nickvWatchPort;
/* What the thread does to the lease (src/nickv_lease.c, which starts the
 * thread, gives them): prolong it to t + ms; what is left of it at now. */
typedef struct nickvWatchLeaseOps {
    void (*prolong)(long long t, long long ms);
    long long (*left_ms_at)(long long now);
} nickvWatchLeaseOps;
void nickvWatchStart(const nickvWatchLeaseOps *lease);
/* The main thread leaves its event loop's wait / goes back to it / begins
 * a client's command. */
void nickvWatchAwake(void);
void nickvWatchSleeping(void);
void nickvWatchCommand(struct client *c);
/* Whether the thread may prolong the lease (nickvCron says). */
void nickvWatchAllow(int allow);
/* The lease's grantor is instance, its connection from peer_ip, which
 * alone may reach the watch (bound: a connection bound just now, which
 * draws a new token), its last grant was of grant_ms (0: a query): the
 * token its watch gives ("" when no thread runs). */
const char *nickvWatchGrantor(const char *instance, const char *peer_ip, int bound, long long grant_ms);
int nickvWatchListeningPort(void);
int nickvWatchWant(long long clock, long long offset);

/* ----------------------------------------------------- Replica side --- */

/* The capa a replica advertises: "nickv", or "nickv-hold" for a while
 * after Nic-KV could not serve it. */
const char *nickvReplicaCapa(void);
/* PSYNC replies "+NICKV ..." and "-NICKV ...": 1 if handled. */
int nickvReplicaPsyncReply(const char *reply);
/* Where connectWithMaster() connects: Nic-KV right after a redirect, the
 * master otherwise. */
void nickvReplicaTarget(const char **host, int *port);

/* INFO nickv (master and replica), and CONFIG RESETSTAT. */
sds nickvInfoString(sds info);
void nickvResetStats(void);

#endif
