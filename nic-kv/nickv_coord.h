/* nickv_coord.h -- the coordinator: a Nic-KV on every server, one leader,
 * through etcd.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 */
#ifndef NICKV_COORD_H
#define NICKV_COORD_H

#include "nickv.h"

/* nickv_coord.c: a Nic-KV on every server, one leader, through etcd (the
 * roles and the chain of deadlines are at its top). Without a coordinator
 * every answer is the only Nic-KV's: it leads, grants, fans out. */
#define NK_COORD_ADDR 64
/* What the coordinator tells the layers above it (the failover sets them). */
typedef struct nkCoordHooks {
    /* The leader's record moved the master (a standby follows it). */
    void (*follow)(const char *ip, int port, long long epoch);
    /* A lease of ms may have been granted now (a previous leader's). */
    void (*granted)(long long ms);
    /* No lease we granted outlives this (monotonic us); the longest ever
     * granted (ms). */
    long long (*lease_bound_us)(void);
    long long (*lease_max_ms)(void);
    /* The master's nickv-lease as its INFO says (1, 0, -1: unknown). */
    int (*master_lease)(void);
    /* Close the master's probe connection (it may hold the grantor's place). */
    void (*drop_master_conn)(void);
    /* Who fans out may have changed: the link opens or closes. */
    void (*fanout_changed)(void);
    /* etcd answered with news (leadership won or lost, a record written):
     * decide now (nkCoordTick reads them). */
    void (*changed)(void);
} nkCoordHooks;
int nkCoordInit(const nkCoordHooks *hooks);
void nkCoordShutdown(void);
int nkCoordOn(void);
int nkCoordLeader(void);
int nkCoordResigning(void);
int nkCoordMayGrant(long long ms);
int nkCoordLocal(const char *ip, int port);
int nkCoordFanout(const char *ip, int port);
int nkCoordMayName(const char *ip, int port);
int nkCoordNamed(const char *ip, int port);
/* A node a Nic-KV of the deployment registered in etcd (with etcd's
 * authentication): a member (nickv_member.c). */
int nkCoordMember(const char *ip, int port);
int nkCoordMembers(nkNodeAddr *out, int max);
int nkCoordRecordNamed(char ip[][NK_COORD_ADDR], int *ports, int max);
void nkCoordPublish(long long epoch, const char *ip, int port);
int nkCoordPublished(long long epoch);
void nkCoordTick(const char *master_ip, int master_port, int master_valid, int watching, long long epoch,
                 long long lease_bound_us);
sds nkCoordInfo(sds s);
/* May lease-time ms be granted under leader-ttl? err says why not. */
int nkCoordCheckLeaseTime(long long ms, char *err, size_t errlen);

#endif
