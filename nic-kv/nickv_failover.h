/* nickv_failover.h -- the failover: promotion when the master fails.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 */
#ifndef NICKV_FAILOVER_H
#define NICKV_FAILOVER_H

#include "nickv.h"

/* nickv_failover.c: promotion when the master fails, fenced by the lease
 * the master's probe grants (the state machine is drawn at its top). It
 * owns where the master is: it starts the coordinator and the probes,
 * hears from them through their hooks, and moves the probes, the link and
 * SENTINEL's answers. nkFailoverInit is in nickv_state.c, with the state
 * file it reads. */
/* Load the state file (the master it names is followed); 0, or -1 when it
 * cannot be read (the reason is logged). */
int nkFailoverInit(void);
/* Start the coordinator (-1 if it cannot), the probes, and the failover's
 * own timer. */
int nkFailoverStart(void);
/* Where the master is, as clients are told (SENTINEL). */
void nkFailoverMaster(const char **ip, int *port);
/* A planned handover to ip:port (NULL: the best replica), why says who
 * asked ("FAILOVER", "failback"): 0, or -1 with err saying why not. */
int nkFailoverPlanned(const char *ip, int port, const char *why, char *err, size_t errlen);
sds nkFailoverInfo(sds s);
/* Why an invalid master is not replaced, or why the last attempt was
 * called off (in the last NK_BLOCKED_AFTER_ABORT_MS); "" when nothing
 * stops it (INFO sentinel's status). */
const char *nkFailoverBlocked(void);
/* Is reach:port a replica our last promotion repointed, and valid then,
 * less than NICKV_JOINING_MS ago? (health: joining) */
int nkFailoverJoining(const char *reach, int port);
/* What the failover, and the probes through it, tell the layers above
 * (main wires nickv_sentinel.c and nickv_replica.c in, before
 * nkFailoverInit): Sentinel's events and +switch-master, to SENTINEL's
 * subscribers; and the replicas streaming from us, which the probes
 * watch. */
typedef struct nkFailoverSinks {
    void (*event)(const char *event, int is_master, const char *ip, int port, const char *master_ip,
                  int master_port, const char *extra);
    void (*switch_master)(const char *old_ip, int old_port, const char *new_ip, int new_port);
    void (*replicas_init)(struct nkReplicaIter *it);
    struct nkReplica *(*replicas_next)(struct nkReplicaIter *it);
} nkFailoverSinks;
void nkFailoverOnEvents(const nkFailoverSinks *sinks);
void nkFailoverResetStats(void);
/* Nic-KV exits: a fence-command still running is killed, with its group. */
void nkFailoverShutdown(void);

#endif
