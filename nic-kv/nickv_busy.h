/* nickv_busy.h -- the master's watch: a busy master told from a dead one.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 */
#ifndef NICKV_BUSY_H
#define NICKV_BUSY_H

#include "nickv.h"

/* nickv_busy.c: the master's watch thread tells a busy master from a dead
 * one. The lease answers name where it listens (port 0: no thread). */
/* The <ms> of a grant of lease_ms built on a master's clock that we read
 * at read_us: lease_ms, plus 8/10 of the time since (see NIC-KV.md,
 * "Fencing"): the lease still ends within lease_ms and its drift margin
 * of now, as the grantor counts it (hooks.granted(lease_ms)). */
long long nkLeaseGrantMs(long long lease_ms, long long read_us, long long now_us);
void nkWatchTarget(const char *reach, int port, const char *token);
/* Who takes the master's "+WANT <clock> <offset>" pushes (the probe). */
typedef void (*nkWatchWantFn)(long long clock, long long offset);
void nkWatchOnWant(nkWatchWantFn fn);
void nkWatchForget(void);
/* Every probe tick for the master (the leader's): connect, WATCH every
 * probe-interval, with a grant of lease_ms when may_grant: 1 if one went. */
int nkWatchTick(long long now_us, int may_grant, long long lease_ms);
/* Connect to the watch now, not at the next tick (a new leader: the
 * master's pushes for WAIT need it). */
void nkWatchConnectNow(long long now_us);
/* The watch answered within max_age_us: 1, with how long the main thread
 * has been busy by now (0: it waits for events) and in what. */
int nkWatchBusy(long long now_us, long long max_age_us, long long *busy_ms, const char **what);
void nkWatchCountBusy(void);
sds nkWatchInfo(sds s);
void nkWatchResetStats(void);

#endif
