/* skv_version.h -- the SKV release, shown beside the upstream Redis version.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * `redis-server --version` prints it as `skv=...` and INFO server as
 * `skv_version:...`, so an operator can tell SKV from upstream Redis.
 * Bump it for every SKV release; REDIS_VERSION stays upstream's. */
#ifndef SKV_VERSION_H
#define SKV_VERSION_H

#define SKV_VERSION "0.1.0"

#endif
