/* nickv_fullsync.h -- proxied full syncs: a client's RDB through us.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 */
#ifndef NICKV_FULLSYNC_H
#define NICKV_FULLSYNC_H

#include "nickv.h"

/* Start a proxied full sync for c; with no c->conn (client going away),
 * tear it down. Called again by the client's writer to resume reading. */
struct nkClient;
int nkProxyFullSync(struct nkClient *c);

#endif
