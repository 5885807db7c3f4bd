/* nickv_cluster.h -- cluster mode: the cluster's view, read through the probes.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 */
#ifndef NICKV_CLUSTER_H
#define NICKV_CLUSTER_H

#include "nickv.h"

/* nickv_cluster.c: in cluster mode the cluster's view (CLUSTER NODES,
 * read with the probes) says where the shard's master is. */
/* Cluster mode is mode (1, 0), as from says ("the master", "a replica",
 * "the state file"): the master's word overrides the others. */
void nkClusterMode(int mode, const char *from);
/* The shard runs in cluster mode: the cluster fails over, Nic-KV follows. */
int nkClusterOn(void);
/* Ask the nodes the probes watch for their views (every failover tick). */
void nkClusterTick(void);
/* A view named a successor to the master at master_ip:master_port: 1, with
 * where it is; 0: none. nkClusterFollowed once the probe goes there. */
int nkClusterSuccessor(const char *master_ip, int master_port, const char **ip, int *port);
void nkClusterFollowed(void);
/* The master says it replicates from ip:port: may the probe follow it
 * there (1), or is that no node of the shard (0: held, INFO says why)? */
int nkClusterMayFollow(const char *ip, int port);
/* The state file's cluster lines (appended to s; none outside cluster
 * mode); reading one back (argv[0] starts with "cluster"): 0, or -1 if
 * malformed; then applied (found: the file is for this master and had
 * them) once the whole file is read. */
sds nkClusterStateLines(sds s);
int nkClusterStateRead(int argc, sds *argv);
void nkClusterStateApply(int found);
/* The shard changed since this was last asked: the state file is due. */
int nkClusterDirty(void);
sds nkClusterInfo(sds s);
void nkClusterResetStats(void);

#endif
