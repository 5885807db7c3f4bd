/* rdma.h -- the server's RDMA transport: connection type, listener, INFO.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * The hooks upstream's sources call (patch "RDMA connection type hooks").
 * The implementation is src/rdma.c, on top of src/rdma_chan.c.
 */
#ifndef SKV_RDMA_H
#define SKV_RDMA_H

#include <stddef.h>
#include "sds.h"

struct connection;

/* Configuration, filled by the rows of config.c's static_configs[]. */
typedef struct rdmaServerConfig {
    int port;                 /* rdma-port: 0 = no RDMA listener */
    char *bind;               /* rdma-bind: addresses, space separated; "" = all */
    size_t rx_size;           /* rdma-rx-size: receive buffer per connection */
    int completion_vector;    /* rdma-completion-vector: -1 = spread */
    int replication;          /* rdma-replication: replica connects over RDMA */
    unsigned long long max_pinned;  /* rdma-max-pinned-memory: 0 = memlock only */
    int max_unauth;           /* rdma-max-unauthenticated: 0 = no cap */
} rdmaServerConfig;

extern rdmaServerConfig rdmaConf;

/* Start (or restart, after a CONFIG SET) the RDMA listeners. At startup a
 * failure is logged and the server goes on without RDMA; from CONFIG SET it
 * is returned in *err. Returns 1 on success, 0 on failure (config.c's apply
 * convention). rdma-port is a VOLATILE_CONFIG: setting it to the value it
 * has calls this too, which retries a listener that is down and leaves one
 * that is up alone. On failure the listeners are as they were: one that was
 * up still listens, so that config.c's restore of the old value succeeds. */
int rdmaApplyListener(const char **err);
int rdmaApplyPinnedLimit(const char **err);
int rdmaApplyRxSize(const char **err);
int rdmaApplyUnauthLimit(const char **err);

/* Called from initServer(), serverCron() (once a second) and beforeSleep(). */
void rdmaServerInit(void);
void rdmaServerCron(void);
int rdmaProcessPendingData(void);
int rdmaHasPendingData(void);

/* An outgoing RDMA connection (rdma-replication). */
struct connection *connCreateRdma(void);

/* INFO rdma, and CONFIG RESETSTAT. */
sds rdmaInfoString(sds info);
void rdmaServerResetStats(void);

#endif
