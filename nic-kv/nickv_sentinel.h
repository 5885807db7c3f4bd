/* nickv_sentinel.h -- SENTINEL and pub/sub: clients find the master
 * through Nic-KV.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 */
#ifndef NICKV_SENTINEL_H
#define NICKV_SENTINEL_H

#include "nickv.h"
#include "nickv_client.h"

/* nickv_sentinel.c: SENTINEL, the part of its API clients use to find the
 * master (master-name). */
void nkSentinelCommand(nkClient *c, int argc, sds *argv);
/* INFO's "# Sentinel" section, as redis-sentinel's (its master0 line). */
sds nkSentinelInfo(sds s);
/* SUBSCRIBE, PSUBSCRIBE, UNSUBSCRIBE, PUNSUBSCRIBE; a client's
 * subscriptions, freed with it; +switch-master to the subscribers. */
void nkPubsubCommand(nkClient *c, int argc, sds *argv);
int nkPubsubSubscribed(nkClient *c);
void nkPubsubClientFree(nkClient *c);
void nkSentinelSwitchMaster(const char *old_ip, int old_port, const char *new_ip, int new_port);
/* Sentinel's instance events (+sdown, -sdown, +odown, -odown, +slave,
 * +try-failover, +failover-end) in its format; extra may be NULL. */
void nkSentinelEvent(const char *event, int is_master, const char *ip, int port, const char *master_ip,
                     int master_port, const char *extra);

#endif
