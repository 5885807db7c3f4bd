/* nickv_info.h -- the strict INFO reader.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 */
#ifndef NICKV_INFO_H
#define NICKV_INFO_H

#include "nickv.h"

/* nickv_info.c: the INFO replies of probed nodes, read strictly (a number
 * is the whole value, in range; an id is 40 hex digits). What is absent,
 * or malformed, keeps its "absent" value: "" or -1 (priority, offsets,
 * lease, cluster), 0 (ports, flags); bad names the first malformed field. */
typedef struct nkInfo {
    char role[8];                       /* "master", "slave" */
    char runid[NK_RUNID_SIZE + 1];
    char replid[NK_RUNID_SIZE + 1], replid2[NK_RUNID_SIZE + 1];
    long long master_repl_offset, slave_repl_offset;
    char master_host[256];
    int master_port;
    int priority;                       /* replica_priority (or slave_) */
    int rdma_port, rdma_listener, rdma_replication;
    int lease;                          /* nickv_lease: 1 any but off, 0 off */
    int cluster;                        /* cluster_enabled */
    long long lease_left_ms;            /* nickv_lease_left_ms, -1: not said */
    char bad[64];
} nkInfo;
void nkInfoParse(const char *reply, size_t len, nkInfo *in);
int nkReplyIdOffset(const char *s, char *id, long long *offset);
int nkReplyId(const char *s, char *id);
/* A master's "slaveN:ip=,port=,state=[,via=nickv]" line: 1 with them. */
typedef struct nkInfoReplica {
    char ip[256];
    char state[32];
    int port;
    int via_nickv;
} nkInfoReplica;
int nkInfoReplicaLine(const char *line, nkInfoReplica *r);

#endif
